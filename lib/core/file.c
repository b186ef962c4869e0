/* File helpers and atomic writes (temporary name, fsync, rename, fsync dir). */
#include "core.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <signal.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int gpt_file_read_all(const char *path, size_t max_bytes, char **out, size_t *len, gpt_err *err)
{
	*out = NULL;
	if (len)
		*len = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return gpt_err_errno_read(err, errno, "%s", path);
	struct stat st;
	if (fstat(fd, &st) != 0) {
		int e = errno;
		close(fd);
		return gpt_err_errno(err, GPT_EIO, e, "%s", path);
	}
	if (S_ISDIR(st.st_mode)) {
		close(fd);
		return gpt_err_set(err, GPT_ENOINPUT, "%s: is a directory, expected a file", path);
	}
	gpt_buf b = GPT_BUF_INIT;
	int rc = gpt_buf_reserve(&b, S_ISREG(st.st_mode) ? (size_t)st.st_size : 4096, err);
	while (!rc) {
		if (b.cap - b.len < 2 && (rc = gpt_buf_reserve(&b, b.cap, err)))
			break;
		ssize_t n = read(fd, b.data + b.len, b.cap - b.len - 1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			rc = gpt_err_errno(err, GPT_EIO, errno, "%s: read", path);
			break;
		}
		if (n == 0)
			break;
		b.len += (size_t)n;
		if (max_bytes && b.len > max_bytes) {
			rc = gpt_err_set(err, GPT_EDATA, "%s: larger than the limit of %zu bytes", path,
					 max_bytes);
			break;
		}
	}
	close(fd);
	if (rc) {
		gpt_buf_free(&b);
		return rc;
	}
	if (!b.data && gpt_buf_reserve(&b, 0, err))
		return err ? err->code : GPT_EINTERNAL;
	b.data[b.len] = '\0';
	*out = b.data;
	if (len)
		*len = b.len;
	return 0;
}

int gpt_write_all(int fd, const void *p, size_t n, const char *what, gpt_err *err)
{
	const char *c = p;
	while (n) {
		ssize_t w = write(fd, c, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return gpt_err_errno(err, GPT_EIO, errno, "%s: write", what);
		}
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

int gpt_fsync_dir(const char *dir, gpt_err *err)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return gpt_err_errno(err, GPT_EIO, errno, "%s: open directory", dir);
	int rc = 0;
	/* Some file systems refuse fsync on directories; that is not a failure. */
	if (fsync(fd) != 0 && errno != EINVAL && errno != EROFS)
		rc = gpt_err_errno(err, GPT_EIO, errno, "%s: fsync directory", dir);
	close(fd);
	return rc;
}

int gpt_mkdir_p(const char *path, gpt_err *err)
{
	char *p = gpt_strdup(path, err);
	if (!p)
		return GPT_EINTERNAL;
	int rc = 0;
	for (char *s = p + 1;; s++) {
		if (*s != '/' && *s != '\0')
			continue;
		char c = *s;
		*s = '\0';
		if (mkdir(p, 0777) != 0 && errno != EEXIST) {
			rc = gpt_err_errno(err, GPT_EIO, errno, "%s: create directory", p);
			break;
		}
		*s = c;
		if (!c)
			break;
	}
	free(p);
	if (!rc) {
		struct stat st;
		if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
			rc = gpt_err_set(err, GPT_EIO, "%s: exists and is not a directory", path);
	}
	return rc;
}

/* A name ends at i in path (n bytes): before a slash or at the end, not
 * at a repeated or trailing slash. */
static int name_end(const char *path, size_t n, size_t i)
{
	return i > 0 && (i == n || path[i] == '/') && path[i - 1] != '/';
}

size_t gpt_path_first_missing(const char *path)
{
	size_t n = strlen(path);
	char p[PATH_MAX];
	if (n >= sizeof p)
		return 0;
	for (size_t i = 1; i <= n; i++) {
		if (!name_end(path, n, i))
			continue;
		memcpy(p, path, i);
		p[i] = '\0';
		if (!gpt_path_exists(p))
			return i;
	}
	return 0;
}

void gpt_path_each_dir(const char *path, size_t from, int down, void (*f)(const char *))
{
	if (!from) /* none: path may be NULL then */
		return;
	size_t n = strlen(path);
	char p[PATH_MAX];
	if (n >= sizeof p)
		return;
	for (size_t j = from; from && j <= n; j++) {
		size_t i = down ? n - (j - from) : j;
		if (!name_end(path, n, i))
			continue;
		memcpy(p, path, i);
		p[i] = '\0';
		f(p);
	}
}

static void rmdir_quiet(const char *dir)
{
	rmdir(dir);
}

void gpt_rmdir_made(const char *path, size_t from)
{
	gpt_path_each_dir(path, from, 1, rmdir_quiet);
}

int gpt_path_exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

int gpt_path_within(const char *path, const char *dir)
{
	char d[PATH_MAX], p[PATH_MAX], head[PATH_MAX], rest[PATH_MAX] = "";
	if (!realpath(dir, d) || snprintf(head, sizeof head, "%s", path) >= (int)sizeof head)
		return 0;
	/* the longest part of path that exists, resolved; the rest as written */
	while (!realpath(head, p)) {
		char *slash = strrchr(head, '/');
		while (slash && slash > head && slash[1] == '\0') { /* trailing slashes */
			*slash = '\0';
			slash = strrchr(head, '/');
		}
		const char *last = slash ? slash + 1 : head;
		char r[PATH_MAX];
		if (snprintf(r, sizeof r, "%s%s%s", last, *rest ? "/" : "", rest) >= (int)sizeof r)
			return 0;
		memcpy(rest, r, sizeof r);
		if (!slash)
			snprintf(head, sizeof head, ".");
		else if (slash == head)
			head[1] = '\0';
		else
			*slash = '\0';
	}
	/* the rest: "." and ".." taken lexically */
	size_t n = strlen(p);
	for (char *tok = strtok(rest, "/"); tok; tok = strtok(NULL, "/")) {
		if (strcmp(tok, ".") == 0)
			continue;
		if (strcmp(tok, "..") == 0) {
			while (n > 1 && p[n - 1] != '/')
				n--;
			n = n > 1 ? n - 1 : 1;
			p[n] = '\0';
			continue;
		}
		if (n + strlen(tok) + 2 > sizeof p)
			return 0;
		n += (size_t)snprintf(p + n, sizeof p - n, "%s%s", n > 1 ? "/" : "", tok);
	}
	size_t dl = strlen(d);
	return strncmp(p, d, dl) == 0 && (p[dl] == '\0' || p[dl] == '/' || dl == 1);
}

/* The directory part of path, malloc'd. */
static char *dir_of(const char *path, gpt_err *err)
{
	char *copy = gpt_strdup(path, err);
	if (!copy)
		return NULL;
	char *d = gpt_strdup(dirname(copy), err);
	free(copy);
	return d;
}

int gpt_out_replaceable(const char *path, gpt_err *err)
{
	struct stat st, lst;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		return gpt_err_set(err, GPT_EUSAGE, "%s: is a directory; name a file to write, or remove the directory",
				   path);
	/* The output is renamed over the name: what the name is goes, and
	 * nothing is written into it (a device, a pipe, a link's target). */
	if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode)) {
		char to[4096];
		ssize_t n = readlink(path, to, sizeof to - 1);
		to[n > 0 ? n : 0] = 0;
		return gpt_err_set(err, GPT_EUSAGE,
				   "%s: is a symbolic link (to %s); the output would be renamed over the link, "
				   "replacing it, not written into what it names: name a regular file (or what "
				   "the link names, when that is one)", path, to);
	}
	if (lstat(path, &lst) == 0 && !S_ISREG(lst.st_mode))
		return gpt_err_set(err, GPT_EUSAGE,
				   "%s: is a %s, not a regular file; the output would be renamed over it, "
				   "replacing it, not written into it: name a regular file", path,
				   S_ISCHR(lst.st_mode) ? "character device" : S_ISBLK(lst.st_mode) ? "block device" :
				   S_ISFIFO(lst.st_mode) ? "FIFO" : S_ISSOCK(lst.st_mode) ? "socket" : "special file");
	return 0;
}

/* Creates, O_EXCL, a hidden name beside path: "DIR/.BASE.TAG.PID.N", with a
 * counter so that two writers of the same name never share one. Returns
 * the descriptor (the name in *name); -1 with errno set when the file
 * system refused, -2 with err set when memory ran out (*name freed). */
static int hidden_create(const char *path, const char *tag, gpt_buf *name, gpt_err *err)
{
	char *copy = gpt_strdup(path, err), *dir = copy ? dir_of(path, err) : NULL;
	int fd = -2, e = 0;
	for (unsigned n = 0; dir && n < 1000; n++) {
		gpt_buf_reset(name);
		if (gpt_buf_printf(name, err, "%s/.%s.%s.%ld.%u", dir, basename(copy), tag, (long)getpid(), n)) {
			fd = -2;
			break;
		}
		fd = open(name->data, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
		e = errno;
		if (fd >= 0 || e != EEXIST)
			break;
	}
	free(copy);
	free(dir);
	if (fd < 0) {
		gpt_buf_free(name);
		errno = e;
	}
	return fd;
}

int gpt_afile_open(gpt_afile *af, const char *path, gpt_err *err)
{
	memset(af, 0, sizeof *af);
	if (gpt_out_replaceable(path, err))
		return err ? err->code : GPT_EUSAGE;
	gpt_buf tmp = GPT_BUF_INIT;
	int fd = hidden_create(path, "tmp", &tmp, err);
	if (fd < 0)
		/* the name the caller gave: the temporary beside it is ours */
		return fd == -2 ? GPT_EINTERNAL : gpt_err_errno(err, GPT_EIO, errno, "%s: create", path);
	int rc = 0;
	af->fp = fdopen(fd, "wb");
	af->path = gpt_strdup(path, err);
	af->tmp_path = tmp.data;
	gpt_temp_hold(af->tmp_path, 0);
	if (!af->fp || !af->path) {
		if (!af->fp)
			close(fd);
		rc = gpt_err_set(err, GPT_EINTERNAL, "%s: cannot set up the output stream", path);
		gpt_afile_abort(af);
	}
	return rc;
}

static void afile_release(gpt_afile *af)
{
	if (af->tmp_path)
		gpt_temp_drop(af->tmp_path);
	free(af->path);
	free(af->tmp_path);
	memset(af, 0, sizeof *af);
}

int gpt_afile_sync(gpt_afile *af, gpt_err *err)
{
	if (!af->fp)
		return 0;
	int rc = 0;
	if (fflush(af->fp) != 0 || ferror(af->fp))
		rc = gpt_err_errno(err, GPT_EIO, errno, "%s: write", af->path);
	else if (fsync(fileno(af->fp)) != 0)
		rc = gpt_err_errno(err, GPT_EIO, errno, "%s: fsync", af->path);
	if (fclose(af->fp) != 0 && !rc)
		rc = gpt_err_errno(err, GPT_EIO, errno, "%s: close", af->path);
	af->fp = NULL;
	if (rc)
		gpt_afile_abort(af);
	return rc;
}

/* After the rename of what (one file, or "A and B" in one directory):
 * the directory of path fsynced. On failure the files are in place, and
 * the error says so and names them, not just the directory. */
static int sync_dir_after_rename(const char *path, const char *what, gpt_err *err)
{
	char *dir = dir_of(path, err);
	if (!dir)
		return GPT_EINTERNAL;
	int rc = 0, fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), e = errno;
	/* Some file systems refuse fsync on directories; that is not a failure. */
	if (fd >= 0 && fsync(fd) != 0 && errno != EINVAL && errno != EROFS)
		e = errno, fd = (close(fd), -1);
	if (fd < 0)
		rc = gpt_err_set(err, GPT_EIO,
				 "%s: written in full, but syncing the directory %s failed: %s; the rename may "
				 "not survive a crash: check the disk, then write it again",
				 what, dir, strerror(e));
	else
		close(fd);
	free(dir);
	return rc;
}

int gpt_afile_commit(gpt_afile *af, gpt_err *err)
{
	int rc = gpt_afile_sync(af, err);
	if (rc)
		return rc;
	if (rename(af->tmp_path, af->path) != 0)
		rc = gpt_err_errno(err, GPT_EIO, errno, "%s: rename into place", af->path);
	if (rc) {
		unlink(af->tmp_path);
		afile_release(af);
		return rc;
	}
	rc = sync_dir_after_rename(af->path, af->path, err);
	afile_release(af);
	return rc;
}

/* Renames path to a new hidden name beside it (".BASE.old.PID.N"), in
 * *bak; a path that does not exist leaves *bak NULL. */
static int move_aside(const char *path, char **bak, gpt_err *err)
{
	*bak = NULL;
	gpt_buf name = GPT_BUF_INIT;
	int fd = hidden_create(path, "old", &name, err);
	if (fd == -2)
		return GPT_EINTERNAL;
	if (fd < 0)
		return gpt_err_errno(err, GPT_EIO, errno, "%s: create a name to move the old file aside to", path);
	close(fd);
	if (rename(path, name.data) == 0) {
		*bak = name.data;
		return 0;
	}
	int e = errno;
	unlink(name.data);
	gpt_buf_free(&name);
	return e == ENOENT ? 0 : gpt_err_errno(err, GPT_EIO, e, "%s: move the old file aside", path);
}

/* path as it was before the commit: its old file back from bak, or, when
 * it had none, gone. 0, or -1 with errno set. */
static int put_back(const char *path, const char *bak)
{
	if (bak)
		return rename(bak, path);
	return unlink(path) == 0 || errno == ENOENT ? 0 : -1;
}

int gpt_afile_commit_pair(gpt_afile *a, gpt_afile *b, gpt_err *err)
{
	int rc = gpt_afile_sync(a, err);
	if (!rc)
		rc = gpt_afile_sync(b, err);
	if (rc) {
		gpt_afile_abort(a);
		gpt_afile_abort(b);
		return rc;
	}
	/* The renames are not interrupted by the signals that end a run:
	 * one arriving meanwhile takes effect after them, on a whole pair. */
	sigset_t block, old;
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGHUP);
	sigaddset(&block, SIGQUIT);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	/* b aside first and in place last: a reader sees the old pair, a
	 * alone or nothing, then the new pair, never a new a with an old b. */
	char *bak_a = NULL, *bak_b = NULL;
	int b_aside = 0, a_aside = 0;
	if (!(rc = move_aside(b->path, &bak_b, err)))
		b_aside = 1;
	if (!rc && !(rc = move_aside(a->path, &bak_a, err)))
		a_aside = 1;
	if (!rc && rename(a->tmp_path, a->path) != 0)
		rc = gpt_err_errno(err, GPT_EIO, errno, "%s: rename into place", a->path);
	if (!rc && rename(b->tmp_path, b->path) != 0)
		rc = gpt_err_errno(err, GPT_EIO, errno, "%s: rename into place", b->path);
	if (rc) {
		/* a back before b: should a stay new, b stays away */
		int e = a_aside && put_back(a->path, bak_a) != 0 ? errno : 0;
		if (!e)
			free(bak_a), bak_a = NULL;
		if (!e && b_aside && put_back(b->path, bak_b) != 0)
			e = errno;
		else if (!e)
			free(bak_b), bak_b = NULL;
		if (e && err) {
			size_t n = strlen(err->msg);
			n += (size_t)snprintf(err->msg + n, sizeof err->msg - n,
					      "; putting the old files back failed too (%s): rename", strerror(e));
			if (bak_a && n < sizeof err->msg)
				n += (size_t)snprintf(err->msg + n, sizeof err->msg - n, " %s to %s%s", bak_a, a->path,
						      bak_b ? " and" : "");
			if (bak_b && n < sizeof err->msg)
				snprintf(err->msg + n, sizeof err->msg - n, " %s to %s", bak_b, b->path);
		}
		gpt_afile_abort(a);
		gpt_afile_abort(b);
	} else {
		gpt_buf both = GPT_BUF_INIT;
		rc = gpt_buf_printf(&both, err, "%s and %s", a->path, b->path);
		if (!rc)
			rc = sync_dir_after_rename(a->path, both.data, err);
		gpt_buf_free(&both);
		if (bak_a)
			unlink(bak_a);
		if (bak_b)
			unlink(bak_b);
		afile_release(a);
		afile_release(b);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	free(bak_a);
	free(bak_b);
	return rc;
}

void gpt_afile_abort(gpt_afile *af)
{
	if (af->fp)
		fclose(af->fp);
	if (af->tmp_path)
		unlink(af->tmp_path);
	afile_release(af);
}

int gpt_file_write_atomic(const char *path, const void *p, size_t n, gpt_err *err)
{
	gpt_afile af;
	int rc = gpt_afile_open(&af, path, err);
	if (rc)
		return rc;
	if (n && fwrite(p, 1, n, af.fp) != n) {
		rc = gpt_err_errno(err, GPT_EIO, errno, "%s: write", af.path);
		gpt_afile_abort(&af);
		return rc;
	}
	return gpt_afile_commit(&af, err);
}
