/* Lines out of a log: plain read(2) in big chunks for plain files and pipes,
 * libarchive's raw format for compressed ones; a capped line buffer so that a
 * giant line streams past instead of filling memory. */
#include "logs.h"

#include <archive.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Bytes asked for per read; the buffer starts at this size and grows only
 * while a line longer than it is being assembled (up to max_line + CHUNK),
 * so following many logs at once stays cheap. */
#define CHUNK (512u << 10)

struct gpt_logs_reader {
	char *name;
	int fd, own_fd;
	int follow;         /* follow a regular file past its end */
	int stream;         /* follow mode on a pipe or terminal: no waiting in read */
	struct archive *ar; /* compressed input, else NULL */
	char *prefix;       /* bytes read while sniffing, handed to libarchive first */
	size_t prefix_len, prefix_pos;
	char cbuf[64 * 1024]; /* libarchive's read-callback buffer */
	char *buf;
	size_t cap, start, end, scan;
	size_t max_line;
	int discarding;     /* inside a too-long line: drop bytes until its newline */
	int eof;
	int64_t too_long, bytes;
	int64_t pos;        /* offset in a followed file */
	char head[64];      /* a followed file's first bytes, to see it rewritten */
	size_t head_len;
};

static la_ssize_t ar_read(struct archive *a, void *data, const void **out)
{
	gpt_logs_reader *r = data;
	if (r->prefix_pos < r->prefix_len) {
		*out = r->prefix + r->prefix_pos;
		la_ssize_t n = (la_ssize_t)(r->prefix_len - r->prefix_pos);
		r->prefix_pos = r->prefix_len;
		return n;
	}
	for (;;) {
		ssize_t n = read(r->fd, r->cbuf, sizeof r->cbuf);
		if (n >= 0) {
			*out = r->cbuf;
			return n;
		}
		if (errno != EINTR) {
			archive_set_error(a, errno, "read failed");
			return -1;
		}
	}
}

static int is_compressed(const unsigned char *b, size_t n)
{
	return (n >= 2 && b[0] == 0x1f && b[1] == 0x8b) ||                       /* gzip */
	       (n >= 6 && memcmp(b, "\xfd" "7zXZ\0", 6) == 0) ||                 /* xz */
	       (n >= 4 && memcmp(b, "\x28\xb5\x2f\xfd", 4) == 0) ||              /* zstd */
	       (n >= 3 && memcmp(b, "BZh", 3) == 0 && n >= 4 && b[3] >= '1' && b[3] <= '9');
}

static int read_fd(gpt_logs_reader *r, char *dst, size_t n, size_t *got, gpt_err *err)
{
	for (;;) {
		ssize_t k = read(r->fd, dst, n);
		if (k >= 0) {
			*got = (size_t)k;
			return 0;
		}
		if (errno != EINTR)
			return gpt_err_errno(err, GPT_EIO, errno, "%s: reading failed", r->name);
	}
}

/* Sniffs the first bytes; compressed input is handed to libarchive. */
static int sniff(gpt_logs_reader *r, gpt_err *err)
{
	size_t got = 0;
	while (r->end < 6) {
		if (read_fd(r, r->buf + r->end, r->cap - 1 - r->end, &got, err))
			return err->code;
		if (got == 0)
			break;
		r->end += got;
	}
	if (!is_compressed((unsigned char *)r->buf, r->end)) {
		r->bytes = r->pos = (int64_t)r->end;
		r->head_len = r->end < sizeof r->head ? r->end : sizeof r->head;
		memcpy(r->head, r->buf, r->head_len);
		return 0;
	}
	r->prefix = gpt_malloc(r->end, "log sniff buffer", err);
	if (!r->prefix)
		return err->code;
	memcpy(r->prefix, r->buf, r->end);
	r->prefix_len = r->end;
	r->end = 0;
	r->follow = 0; /* a compressed file is finished; read it to its end */
	r->ar = archive_read_new();
	if (!r->ar)
		return gpt_err_nomem(err, 0, "libarchive reader");
	archive_read_support_filter_all(r->ar);
	archive_read_support_format_raw(r->ar);
	struct archive_entry *ent;
	if (archive_read_open(r->ar, r, NULL, ar_read, NULL) != ARCHIVE_OK ||
	    archive_read_next_header(r->ar, &ent) != ARCHIVE_OK)
		return gpt_err_set(err, GPT_EDATA, "%s: cannot read the compressed log: %s", r->name,
				   archive_error_string(r->ar) ? archive_error_string(r->ar) : "unknown error");
	return 0;
}

int gpt_logs_reader_open(gpt_logs_reader **out, const char *path, size_t max_line, int follow,
			 gpt_err *err)
{
	*out = NULL;
	gpt_logs_reader *r = gpt_calloc(1, sizeof *r, "log reader", err);
	if (!r)
		return err->code;
	r->fd = -1;
	r->max_line = max_line ? max_line : GPT_LOGS_MAX_LINE_DEFAULT;
	r->cap = CHUNK + 2;
	r->name = gpt_strdup(strcmp(path, "-") == 0 ? "(stdin)" : path, err);
	r->buf = gpt_malloc(r->cap, "log line buffer", err);
	if (!r->name || !r->buf)
		goto fail;
	if (strcmp(path, "-") == 0) {
		r->fd = 0;
	} else {
		r->fd = open(path, O_RDONLY | O_CLOEXEC);
		if (r->fd < 0) {
			gpt_err_errno_read(err, errno, "%s: cannot open the log", path);
			goto fail;
		}
		r->own_fd = 1;
	}
	struct stat st;
	if (fstat(r->fd, &st) == 0) {
		if (S_ISDIR(st.st_mode)) {
			gpt_err_set(err, GPT_EUSAGE, "%s: is a directory with no workerlog.* files", path);
			goto fail;
		}
		r->follow = follow && S_ISREG(st.st_mode);
		r->stream = follow && !S_ISREG(st.st_mode);
	}
	if (sniff(r, err))
		goto fail;
	*out = r;
	return 0;
fail:
	gpt_logs_reader_close(r);
	return err->code ? err->code : GPT_EINTERNAL;
}

/* Reads more bytes after r->end; sets *got (0 at end of data for now). */
/* A followed log rewritten under us (a restarted run, copytruncate
 * rotation): shorter than what was read, or, when it was already written
 * again past that, other first bytes. */
static int rewritten(gpt_logs_reader *r)
{
	struct stat st;
	if (fstat(r->fd, &st) == 0 && st.st_size < r->pos)
		return 1;
	char now[sizeof r->head];
	return r->head_len &&
	       (pread(r->fd, now, r->head_len, 0) != (ssize_t)r->head_len || memcmp(now, r->head, r->head_len) != 0);
}

/* Whether a read would not wait: data, the writer gone, or an error to see. */
static int ready(gpt_logs_reader *r)
{
	struct pollfd pfd = {.fd = r->fd, .events = POLLIN};
	int k = poll(&pfd, 1, 0);
	return k != 0 && !(k < 0 && errno == EINTR);
}

static int fill(gpt_logs_reader *r, size_t *got, gpt_err *err)
{
	if (r->start > 0) {
		memmove(r->buf, r->buf + r->start, r->end - r->start);
		r->end -= r->start;
		r->scan -= r->start;
		r->start = 0;
	}
	size_t room = r->cap - 1 - r->end;
	size_t most = r->max_line + CHUNK + 2;
	if (room < CHUNK / 2 && r->cap < most) {
		size_t cap = 2 * r->cap < most ? 2 * r->cap : most;
		char *b = gpt_realloc(r->buf, cap, "log line buffer", err);
		if (!b)
			return err->code;
		r->buf = b;
		r->cap = cap;
		room = r->cap - 1 - r->end;
	}
	if (!r->ar)
		return read_fd(r, r->buf + r->end, room, got, err);
	la_ssize_t n = archive_read_data(r->ar, r->buf + r->end, room);
	if (n < 0)
		return gpt_err_set(err, GPT_EDATA, "%s: cannot decompress the log: %s", r->name,
				   archive_error_string(r->ar) ? archive_error_string(r->ar) : "unknown error");
	*got = (size_t)n;
	return 0;
}

gpt_logs_read_status gpt_logs_reader_next(gpt_logs_reader *r, const char **line, size_t *len,
					  gpt_err *err)
{
	for (;;) {
		char *nl = r->scan < r->end ? memchr(r->buf + r->scan, '\n', r->end - r->scan) : NULL;
		if (nl) {
			size_t s = r->start, n = (size_t)(nl - r->buf) - s;
			r->start = r->scan = (size_t)(nl - r->buf) + 1;
			if (r->discarding || n > r->max_line) {
				if (!r->discarding)
					r->too_long++;
				r->discarding = 0;
				continue;
			}
			if (n > 0 && r->buf[s + n - 1] == '\r')
				n--;
			r->buf[s + n] = '\0';
			*line = r->buf + s;
			*len = n;
			return GPT_LOGS_LINE;
		}
		r->scan = r->end;
		if (!r->discarding && r->end - r->start > r->max_line) {
			r->too_long++;
			r->discarding = 1;
		}
		if (r->discarding)
			r->start = r->scan = r->end;
		if (r->eof) {
			if (r->end > r->start) { /* a last line without its newline */
				size_t s = r->start, n = r->end - s;
				r->start = r->scan = r->end;
				if (n > 0 && r->buf[s + n - 1] == '\r')
					n--;
				r->buf[s + n] = '\0';
				*line = r->buf + s;
				*len = n;
				return GPT_LOGS_LINE;
			}
			return GPT_LOGS_END;
		}
		/* a rewritten log is read again from its beginning */
		if (r->follow && rewritten(r) && lseek(r->fd, 0, SEEK_SET) == 0) {
			r->pos = 0;
			r->start = r->end = r->scan = 0;
			r->discarding = 0;
			r->head_len = 0;
			continue;
		}
		/* a pipe with nothing to read yet is no end: the rows so far go
		 * out, and the other logs are read, while its writer works */
		if (r->stream && !r->ar && !ready(r))
			return GPT_LOGS_AGAIN;
		size_t got = 0;
		if (fill(r, &got, err))
			return GPT_LOGS_ERROR;
		r->bytes += (int64_t)got;
		r->pos += (int64_t)got;
		r->end += got;
		if (r->follow && got && r->head_len < sizeof r->head) {
			ssize_t k = pread(r->fd, r->head, sizeof r->head, 0);
			r->head_len = k > 0 ? (size_t)k : 0;
		}
		if (got == 0) {
			if (!r->follow) {
				r->eof = 1;
				continue;
			}
			return GPT_LOGS_AGAIN;
		}
	}
}

int64_t gpt_logs_reader_too_long(const gpt_logs_reader *r)
{
	return r->too_long;
}

int64_t gpt_logs_reader_bytes(const gpt_logs_reader *r)
{
	return r->bytes;
}

void gpt_logs_reader_close(gpt_logs_reader *r)
{
	if (!r)
		return;
	if (r->ar)
		archive_read_free(r->ar);
	if (r->own_fd && r->fd >= 0)
		close(r->fd);
	free(r->prefix);
	free(r->buf);
	free(r->name);
	free(r);
}
