/* Documents from files, directories, stdin and archives (libarchive), in
 * input order: plain text (a document per file), lines, JSON lines. */
#include "data/data.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_NESTING 8
#define BLOCK (256 * 1024)
#define BINARY_SNIFF 8000 /* git's window for "has a NUL byte, so binary" */
/* Integers as reals: a record's other fields are never read, and an
 * integer past int64 there (a uint64 hash, say), which Python's json and so
 * Megatron-LM's preprocess_data.py take, must not make it invalid JSON. */
#define JSON_FLAGS (JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL)

typedef struct file_id {
	dev_t dev;
	ino_t ino;
	int set;
} file_id;

typedef struct in_ctx {
	const gpt_input_opts *o;
	gpt_input_fn fn;
	void *ctx;
	gpt_input_stats *st;
	gpt_err *err;
	struct archive *top; /* the archive reading the current input file */
	file_id not_input[2];  /* the run's output pair */
	int64_t bytes_base;  /* bytes of the input files already finished */
	gpt_buf doc;
	char *block;
} in_ctx;

static const char *const compress_ext[] = {".gz", ".xz", ".zst", ".bz2", ".lzma", ".lz4", ".zstd", NULL};
static const char *const archive_ext[] = {".tar", ".zip", ".tgz", ".tbz2", ".txz", ".tzst", NULL};

static int ends_with(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);
	return a >= b && strcasecmp(s + a - b, suf) == 0;
}

static const char *ext_in(const char *name, const char *const *list)
{
	for (int i = 0; list[i]; i++)
		if (ends_with(name, list[i]))
			return list[i];
	return NULL;
}

static struct archive *archive_new_reader(void)
{
	struct archive *a = archive_read_new();
	if (!a)
		return NULL;
	/* Named filters rather than all: uuencode and the like would take
	 * ordinary text that happens to look like them. */
	archive_read_support_filter_gzip(a);
	archive_read_support_filter_bzip2(a);
	archive_read_support_filter_xz(a);
	archive_read_support_filter_lzma(a);
	archive_read_support_filter_zstd(a);
	archive_read_support_filter_lz4(a);
	archive_read_support_format_tar(a);
	archive_read_support_format_zip(a);
	archive_read_support_format_empty(a);
	archive_read_support_format_raw(a);
	return a;
}

static void update_bytes(in_ctx *c)
{
	if (c->top)
		c->st->bytes = c->bytes_base + archive_filter_bytes(c->top, -1);
}

/* Hands out one part of a document (end: GPT_INPUT_*), counted. */
static int part(in_ctx *c, const char *where, const uint8_t *p, size_t n, int end)
{
	update_bytes(c);
	c->st->docs += end == GPT_INPUT_END;
	c->st->text_bytes += (int64_t)n;
	return c->fn(c->ctx, where, p, n, end, c->err);
}

/* A whole document in one part. */
static int emit(in_ctx *c, const char *where, const uint8_t *p, size_t n)
{
	if (n == 0) {
		c->st->empty++;
		return 0;
	}
	return part(c, where, p, n, GPT_INPUT_END);
}

static gpt_input_format format_of(const in_ctx *c, const char *name)
{
	if (c->o->format != GPT_IN_AUTO)
		return c->o->format;
	if (strcmp(name, "-") == 0)
		return c->o->stdin_json ? GPT_IN_JSONL : GPT_IN_TEXT;
	if (ends_with(name, ".jsonl") || ends_with(name, ".ndjson") || ends_with(name, ".json"))
		return GPT_IN_JSONL;
	return GPT_IN_TEXT;
}

static int bad_record(in_ctx *c, const char *where, int64_t line, const char *fmt, const char *detail)
{
	if (c->o->skip_bad) {
		if (c->st->bad_records++ == 0)
			snprintf(c->st->first_bad, sizeof c->st->first_bad, "%s:%lld", where, (long long)line);
		return 0;
	}
	gpt_err_set(c->err, GPT_EDATA, "%s:%lld: ", where, (long long)line);
	char msg[GPT_ERR_MSG_MAX];
	snprintf(msg, sizeof msg, fmt, detail);
	size_t used = strlen(c->err->msg);
	snprintf(c->err->msg + used, sizeof c->err->msg - used, "%s; fix the record or pass --skip-bad", msg);
	return GPT_EDATA;
}

static const char *json_kind(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT: return "an object";
	case JSON_ARRAY: return "an array";
	case JSON_STRING: return "a string";
	case JSON_INTEGER:
	case JSON_REAL: return "a number";
	case JSON_TRUE:
	case JSON_FALSE: return "a boolean";
	default: return "null";
	}
}

/* A list of strings under the key, as Megatron-LM's preprocess_data.py
 * takes one: a single document whose strings are tokenized one by one (no
 * token spans two of them) and put end to end; empty strings add nothing. */
static int emit_list(in_ctx *c, const char *where, int64_t line, const char *key, const json_t *list)
{
	size_t n = json_array_size(list), last = n;
	for (size_t i = 0; i < n; i++) {
		const json_t *s = json_array_get(list, i);
		if (!json_is_string(s)) {
			char detail[200];
			snprintf(detail, sizeof detail, "'%s'[%zu] is %s", key, i, json_kind(s));
			return bad_record(c, where, line, "%s; a list under the key must hold only strings", detail);
		}
		if (json_string_length(s))
			last = i;
	}
	if (last == n) {
		c->st->empty++;
		return 0;
	}
	for (size_t i = 0; i <= last; i++) {
		const json_t *s = json_array_get(list, i);
		size_t len = json_string_length(s);
		int rc = len ? part(c, where, (const uint8_t *)json_string_value(s), len,
				    i == last ? GPT_INPUT_END : GPT_INPUT_PIECE)
			     : 0;
		if (rc)
			return rc;
	}
	return 0;
}

static int json_record(in_ctx *c, const char *where, int64_t line, const char *p, size_t n)
{
	size_t k = 0;
	while (k < n && (p[k] == ' ' || p[k] == '\t' || p[k] == '\r'))
		k++;
	if (k == n)
		return 0; /* blank lines separate nothing */
	/* a .json file that is one JSON array (an export, Alpaca style): not
	 * a bad record that --skip-bad could skip, a file in another format */
	if (line == 1 && p[k] == '[')
		return gpt_err_set(c->err, GPT_EDATA,
				   "%s:1: a JSON array, where JSON lines (one object per line) are expected; convert the "
				   "file first, e.g. jq -c '.[]' FILE >FILE.jsonl",
				   where);
	json_error_t je;
	json_t *root = json_loadb(p, n, JSON_FLAGS, &je);
	if (!root) {
		char detail[300];
		snprintf(detail, sizeof detail, "%s (column %d)", je.text, je.column);
		return bad_record(c, where, line, "invalid JSON: %s", detail);
	}
	int rc = 0;
	if (!json_is_object(root)) {
		rc = bad_record(c, where, line, "expected a JSON object, found %s", json_kind(root));
		json_decref(root);
		return rc;
	}
	const json_t *val = NULL;
	const char *key = c->o->n_keys ? c->o->keys[0] : "text";
	for (int i = 0; i < (c->o->n_keys ? c->o->n_keys : 1) && !val; i++) {
		key = c->o->n_keys ? c->o->keys[i] : "text";
		val = json_object_get(root, key);
	}
	if (!val) {
		char keys[256] = "";
		for (int i = 0; i < c->o->n_keys; i++)
			snprintf(keys + strlen(keys), sizeof keys - strlen(keys), "%s'%s'", i ? ", " : "", c->o->keys[i]);
		rc = bad_record(c, where, line, "the record has no key %s; choose the key with --json-key",
				c->o->n_keys ? keys : "'text'");
	} else if (json_is_array(val)) {
		rc = emit_list(c, where, line, key, val);
	} else if (!json_is_string(val)) {
		char detail[200];
		snprintf(detail, sizeof detail, "'%s' is %s", key, json_kind(val));
		rc = bad_record(c, where, line, "%s, expected a string or a list of strings", detail);
	} else {
		rc = emit(c, where, (const uint8_t *)json_string_value(val), json_string_length(val));
	}
	json_decref(root);
	return rc;
}

/* The length of a UTF-8 byte-order mark (Notepad's, PowerShell's) at the
 * start of p[0..n): 3, else 0. It marks the encoding, it is not text (RFC
 * 8259 lets a JSON parser ignore it too), so it is left out of the first
 * document or record of a file. */
static size_t bom_len(const char *p, size_t n)
{
	return n >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
}

static int one_line(in_ctx *c, gpt_input_format fmt, const char *where, int64_t line, const char *p, size_t n)
{
	if (line == 1) {
		size_t b = bom_len(p, n);
		p += b;
		n -= b;
	}
	if (fmt == GPT_IN_JSONL)
		return json_record(c, where, line, p, n);
	if (n && p[n - 1] == '\r')
		n--;
	return emit(c, where, (const uint8_t *)p, n);
}

static int read_failed(in_ctx *c, struct archive *a, const char *where)
{
	const char *msg = archive_error_string(a);
	char why[128];
	/* libarchive's gzip reader fails with no message when the stream ends
	 * inside its 8-byte trailer: a file cut short by 1 to 8 bytes. */
	if (!msg || !*msg) {
		const char *filter = archive_filter_count(a) > 1 ? archive_filter_name(a, 0) : NULL;
		if (filter)
			snprintf(why, sizeof why, "the %s stream ends early", filter);
		else
			snprintf(why, sizeof why, "libarchive gives no reason");
		msg = why;
	}
	c->st->corrupt = 1;
	return gpt_err_set(c->err, GPT_EDATA, "%s: cannot read: %s; the file is corrupt or truncated", where, msg);
}

/* 1 when the file whose first bytes are p[0..n) is to be left out: it
 * has a NUL byte in its first BINARY_SNIFF bytes (counted either way; as
 * byte-level BPE encodes anything, such a file is only left out when
 * asked) and skip_binary is set. */
static int skip_as_binary(in_ctx *c, const char *where, const char *p, size_t n)
{
	if (!memchr(p, 0, n < BINARY_SNIFF ? n : BINARY_SNIFF))
		return 0;
	if (c->st->binary++ == 0)
		snprintf(c->st->first_binary, sizeof c->st->first_binary, "%s", where);
	return c->o->skip_binary;
}

/* Lines and JSON lines stream through a carry buffer: a huge file never
 * has to fit in memory, only its longest line. */
static int read_lines(in_ctx *c, struct archive *a, gpt_input_format fmt, const char *where)
{
	gpt_buf *carry = &c->doc;
	gpt_buf_reset(carry);
	int64_t line = 0;
	/* The first block holds the bytes that say whether the file looks binary. */
	la_ssize_t first = 0;
	for (la_ssize_t got = 1; got > 0 && first < BINARY_SNIFF; first += got) {
		got = archive_read_data(a, c->block + first, BLOCK - (size_t)first);
		if (got < 0)
			return read_failed(c, a, where);
	}
	if (skip_as_binary(c, where, c->block, (size_t)first))
		return 0;
	for (;;) {
		la_ssize_t got = first ? first : archive_read_data(a, c->block, BLOCK);
		first = 0;
		if (got < 0)
			return read_failed(c, a, where);
		if (got == 0)
			break;
		const char *p = c->block, *end = c->block + got;
		while (p < end) {
			const char *nl = memchr(p, '\n', (size_t)(end - p));
			if (!nl) {
				if (gpt_buf_append(carry, p, (size_t)(end - p), c->err))
					return GPT_EINTERNAL;
				break;
			}
			line++;
			int rc;
			if (carry->len) {
				if (gpt_buf_append(carry, p, (size_t)(nl - p), c->err))
					return GPT_EINTERNAL;
				rc = one_line(c, fmt, where, line, carry->data, carry->len);
				gpt_buf_reset(carry);
			} else {
				rc = one_line(c, fmt, where, line, p, (size_t)(nl - p));
			}
			if (rc)
				return rc;
			p = nl + 1;
		}
	}
	if (carry->len)
		return one_line(c, fmt, where, line + 1, carry->data, carry->len);
	return 0;
}

/* Counts a file read as text because of its name (--format auto) whose
 * first line p[0..n) is a JSON object: JSON lines piped to stdin or
 * misnamed, which the user most likely wanted read a document per record. */
static void note_json_like(in_ctx *c, const char *where, const char *p, size_t n)
{
	if (c->o->format != GPT_IN_AUTO || !n || p[0] != '{')
		return;
	json_t *root = json_loadb(p, n, JSON_FLAGS, NULL);
	if (json_is_object(root) && c->st->json_like++ == 0)
		snprintf(c->st->first_json_like, sizeof c->st->first_json_like, "%s", where);
	json_decref(root);
}

/* A document per file, streamed in blocks once the first block has shown
 * it is not binary, so that a big file is tokenized while it is read. */
static int read_text(in_ctx *c, struct archive *a, const char *where)
{
	gpt_buf *doc = &c->doc;
	gpt_buf_reset(doc);
	int sniffed = 0, started = 0;
	for (;;) {
		if (gpt_buf_reserve(doc, BLOCK, c->err))
			return GPT_EINTERNAL;
		la_ssize_t got = archive_read_data(a, doc->data + doc->len, BLOCK);
		if (got < 0)
			return read_failed(c, a, where);
		doc->len += (size_t)got;
		if (!sniffed && (got == 0 || doc->len >= BINARY_SNIFF)) {
			sniffed = 1;
			if (skip_as_binary(c, where, doc->data, doc->len))
				return 0;
			size_t b = bom_len(doc->data, doc->len);
			memmove(doc->data, doc->data + b, doc->len - b);
			doc->len -= b;
			const char *nl = memchr(doc->data, '\n', doc->len);
			if (nl || got == 0)
				note_json_like(c, where, doc->data, nl ? (size_t)(nl - doc->data) : doc->len);
		}
		if (got == 0)
			break;
		if (sniffed && doc->len >= BLOCK) {
			int rc = part(c, where, (const uint8_t *)doc->data, doc->len, GPT_INPUT_MORE);
			if (rc)
				return rc;
			started = 1;
			gpt_buf_reset(doc);
		}
	}
	if (!started)
		return emit(c, where, (const uint8_t *)doc->data, doc->len);
	return part(c, where, (const uint8_t *)doc->data, doc->len, GPT_INPUT_END);
}

typedef struct nested {
	struct archive *parent;
	char *buf;
} nested;

static la_ssize_t nested_read(struct archive *a, void *ud, const void **buf)
{
	nested *n = ud;
	la_ssize_t got = archive_read_data(n->parent, n->buf, BLOCK);
	if (got < 0)
		archive_set_error(a, archive_errno(n->parent), "%s", archive_error_string(n->parent));
	*buf = n->buf;
	return got;
}

static int read_archive(in_ctx *c, struct archive *a, const char *where, const char *name, int depth);

static int read_nested(in_ctx *c, struct archive *parent, const char *where, const char *name, int depth)
{
	struct archive *a = archive_new_reader();
	nested n = {parent, malloc(BLOCK)};
	if (!a || !n.buf) {
		if (a)
			archive_read_free(a);
		free(n.buf);
		return gpt_err_nomem(c->err, BLOCK, "archive reader");
	}
	int rc = 0;
	if (archive_read_open(a, &n, NULL, nested_read, NULL) != ARCHIVE_OK)
		rc = read_failed(c, a, where);
	else
		rc = read_archive(c, a, where, name, depth);
	archive_read_free(a);
	free(n.buf);
	return rc;
}

/* The name a raw (non-archive) stream goes by: its file name without the
 * compression suffix, so that x.jsonl.gz reads as JSON lines. */
static void strip_compress(const char *name, char *out, size_t size)
{
	snprintf(out, size, "%s", name);
	const char *ext = ext_in(out, compress_ext);
	if (ext)
		out[strlen(out) - strlen(ext)] = 0;
}

static int read_archive(in_ctx *c, struct archive *a, const char *where, const char *name, int depth)
{
	int entries = 0;
	for (;;) {
		struct archive_entry *ent;
		int r = archive_read_next_header(a, &ent);
		if (r == ARCHIVE_EOF)
			break;
		if (r < ARCHIVE_WARN)
			return read_failed(c, a, where);
		entries++;
		int raw = archive_format(a) == ARCHIVE_FORMAT_RAW;
		const char *cext = ext_in(name, compress_ext);
		if (cext && archive_filter_count(a) <= 1)
			return gpt_err_set(c->err, GPT_EDATA, "%s: not a %s stream, though its name says so; the file is corrupt or misnamed",
					   where, cext + 1);
		char inner[4096], sub[8192];
		if (raw) {
			strip_compress(name, inner, sizeof inner);
			const char *aext = ext_in(inner, archive_ext);
			if (aext || ends_with(name, ".tgz"))
				return gpt_err_set(c->err, GPT_EDATA, "%s: not a %s archive, though its name says so; the file is corrupt or misnamed",
						   where, aext ? aext + 1 : "tar");
			snprintf(sub, sizeof sub, "%s", where);
		} else {
			const char *path = archive_entry_pathname(ent);
			snprintf(inner, sizeof inner, "%s", path ? path : "?");
			snprintf(sub, sizeof sub, "%s:%s", where, inner);
			/* A link names another member, which a stream has passed or not
			 * reached, or a file outside the archive, which is not ours to
			 * read: skipped, and counted in a warning, as a directory's
			 * links are followed (a hard link of a tar carries no data of
			 * its own: its file is the member it names). */
			const char *sym = archive_entry_symlink(ent), *hard = archive_entry_hardlink(ent);
			if (sym || (hard && archive_entry_size(ent) == 0)) {
				if (!c->st->links++)
					snprintf(c->st->first_link, sizeof c->st->first_link, "%s -> %s", sub, sym ? sym : hard);
				continue;
			}
			if (archive_entry_filetype(ent) != AE_IFREG)
				continue;
			if (archive_entry_is_encrypted(ent))
				return gpt_err_set(c->err, GPT_EDATA, "%s: encrypted; decrypt the archive first (no passphrase is asked for)",
						   sub);
		}
		c->st->files++;
		int rc;
		if (!raw && (ext_in(inner, compress_ext) || ext_in(inner, archive_ext))) {
			if (depth >= MAX_NESTING)
				return gpt_err_set(c->err, GPT_EDATA, "%s: archives nested more than %d deep", sub, MAX_NESTING);
			rc = read_nested(c, a, sub, inner, depth + 1);
		} else {
			gpt_input_format fmt = format_of(c, inner);
			rc = fmt == GPT_IN_TEXT ? read_text(c, a, sub) : read_lines(c, a, fmt, sub);
		}
		if (rc)
			return rc;
	}
	if (entries == 0 && archive_format(a) == ARCHIVE_FORMAT_EMPTY)
		c->st->empty++;
	return 0;
}

static int read_fd(in_ctx *c, int fd, const char *where)
{
	struct archive *a = archive_new_reader();
	if (!a)
		return gpt_err_nomem(c->err, 0, "archive reader");
	int rc;
	if (archive_read_open_fd(a, fd, BLOCK) != ARCHIVE_OK) {
		rc = read_failed(c, a, where);
	} else {
		c->top = a;
		rc = read_archive(c, a, where, where, 0);
		update_bytes(c);
		c->bytes_base = c->st->bytes;
		c->top = NULL;
	}
	archive_read_free(a);
	return rc;
}

static int skip_name(const char *name)
{
	return name[0] == '.'; /* hidden files, and our own temporaries */
}

/* The output of this run: a rerun into a directory it reads would take
 * its previous output in as input. */
static int is_not_input(const file_id *not_input, const struct stat *st)
{
	for (int i = 0; i < 2; i++)
		if (not_input[i].set && not_input[i].dev == st->st_dev && not_input[i].ino == st->st_ino)
			return 1;
	return 0;
}

/* The directories being read, innermost first: a directory reached again
 * below itself (through a symlink to . or to a parent) is a loop, which
 * would be read for ever (two such links double the work at every level). */
typedef struct dir_chain {
	dev_t dev;
	ino_t ino;
	const char *path;
	const struct dir_chain *up;
} dir_chain;

static const dir_chain *dir_seen(const dir_chain *up, const struct stat *st)
{
	for (; up; up = up->up)
		if (up->dev == st->st_dev && up->ino == st->st_ino)
			return up;
	return NULL;
}

static int read_path(in_ctx *c, const char *path, int depth, const dir_chain *up);

static int read_dir(in_ctx *c, const char *path, int depth, const dir_chain *here)
{
	struct dirent **list;
	int n = scandir(path, &list, NULL, alphasort);
	if (n < 0)
		return gpt_err_errno_read(c->err, errno, "%s: read directory", path);
	int rc = 0;
	for (int i = 0; i < n; i++) {
		if (!rc && !skip_name(list[i]->d_name)) {
			gpt_buf sub = GPT_BUF_INIT;
			size_t pl = strlen(path);
			rc = gpt_buf_printf(&sub, c->err, "%s%s%s", path, pl && path[pl - 1] == '/' ? "" : "/",
					    list[i]->d_name);
			if (!rc)
				rc = read_path(c, sub.data, depth + 1, here);
			gpt_buf_free(&sub);
		}
		free(list[i]);
	}
	free(list);
	return rc;
}

static int read_path(in_ctx *c, const char *path, int depth, const dir_chain *up)
{
	if (strcmp(path, "-") == 0 && depth == 0)
		return read_fd(c, 0, "-");
	struct stat st;
	if (stat(path, &st) != 0)
		return gpt_err_errno_read(c->err, errno, "%s", path);
	if (S_ISDIR(st.st_mode)) {
		const dir_chain *again = dir_seen(up, &st);
		if (again)
			return gpt_err_set(c->err, GPT_EDATA,
					   "%s: a directory loop: this is %s again (a symbolic link to it or to a parent); "
					   "remove the link or name the directories to read",
					   path, again->path);
		if (depth > 64)
			return gpt_err_set(c->err, GPT_EDATA, "%s: directories nested more than 64 deep", path);
		dir_chain here = {st.st_dev, st.st_ino, path, up};
		return read_dir(c, path, depth, &here);
	}
	if (!S_ISREG(st.st_mode)) {
		if (depth > 0)
			return 0; /* sockets, fifos and devices inside a tree are not documents */
	} else if (is_not_input(c->not_input, &st)) {
		if (depth > 0)
			return 0;
		return gpt_err_set(c->err, GPT_EUSAGE, "%s: this is the output of this run, not an input; leave it out or write the output elsewhere",
				   path);
	}
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return gpt_err_errno_read(c->err, errno, "%s: open", path);
	int rc = read_fd(c, fd, path);
	close(fd);
	return rc;
}

static int64_t size_of(const file_id *not_input, const char *path, int depth, const dir_chain *up, int *unknown)
{
	if (strcmp(path, "-") == 0) {
		*unknown = 1;
		return 0;
	}
	struct stat st;
	if (stat(path, &st) != 0)
		return 0;
	if (S_ISREG(st.st_mode))
		return is_not_input(not_input, &st) ? 0 : st.st_size;
	if (!S_ISDIR(st.st_mode) || depth > 64 || dir_seen(up, &st)) {
		*unknown = 1;
		return 0;
	}
	dir_chain here = {st.st_dev, st.st_ino, path, up};
	int64_t total = 0;
	DIR *d = opendir(path);
	if (!d)
		return 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (skip_name(e->d_name))
			continue;
		size_t len = strlen(path) + strlen(e->d_name) + 2;
		char *sub = malloc(len);
		if (!sub)
			break;
		snprintf(sub, len, "%s/%s", path, e->d_name);
		total += size_of(not_input, sub, depth + 1, &here, unknown);
		free(sub);
	}
	closedir(d);
	return total;
}

int gpt_input_read(const char *const *paths, int n_paths, const gpt_input_opts *o, gpt_input_fn fn, void *ctx,
		   gpt_input_stats *st, gpt_err *err)
{
	memset(st, 0, sizeof *st);
	in_ctx c = {o, fn, ctx, st, err, NULL, {{0}}, 0, GPT_BUF_INIT, malloc(BLOCK)};
	for (int i = 0; i < 2; i++) {
		struct stat fs;
		if (o->not_input[i] && stat(o->not_input[i], &fs) == 0)
			c.not_input[i] = (file_id){fs.st_dev, fs.st_ino, 1};
	}
	int unknown = 0;
	int64_t total = 0;
	for (int i = 0; i < n_paths; i++)
		total += size_of(c.not_input, paths[i], 0, NULL, &unknown);
	st->total_bytes = unknown ? 0 : total;
	if (!c.block)
		return gpt_err_nomem(err, BLOCK, "input buffer");
	int rc = 0;
	for (int i = 0; !rc && i < n_paths; i++)
		rc = read_path(&c, paths[i], 0, NULL);
	gpt_buf_free(&c.doc);
	free(c.block);
	return rc;
}
