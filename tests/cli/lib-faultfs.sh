# Sourced by tests after test-lib.sh: build_faultfs compiles faultfs.so, an
# LD_PRELOAD shim that makes file operations fail the way a full or broken
# disk does, without root. It wraps the calls a program makes itself
# (write, pwrite, fwrite, fsync, fdatasync, rename, mkdir, open with
# O_CREAT); glibc's own internal calls (stdio flushing) are not seen.
# Environment:
#   FAULT_MATCH  fnmatch(3) pattern over the path (for a descriptor, its
#                /proc/self/fd target); nothing fails while unset
#   FAULT_OPS    comma list of write,fsync,rename,mkdir,open (default: all)
#   FAULT_ERRNO  ENOSPC (default), EIO, EROFS or EDQUOT
#   FAULT_AFTER  bytes the matching files may still take before writes fail
#                (default 0: the first write fails)
#   FAULT_SKIP   matching calls of the other kinds that succeed first
#   FAULT_TIMES  faults made before calls succeed again (default: no end)
#   FAULT_SIGNAL a signal number: the first fault raises it instead (TERM
#                to interrupt the program there, STOP to pause it), and
#                every call goes through
# Under ASan the shim comes before the sanitizer's runtime, which ASan
# accepts with the verify_asan_link_order=0 that test-lib.sh sets.

build_faultfs () {
	cat >faultfs.c <<-'EOF'
	#define _GNU_SOURCE
	#include <dlfcn.h>
	#include <errno.h>
	#include <fcntl.h>
	#include <fnmatch.h>
	#include <signal.h>
	#include <stdarg.h>
	#include <stdio.h>
	#include <stdlib.h>
	#include <string.h>
	#include <sys/stat.h>
	#include <sys/types.h>
	#include <unistd.h>

	static long long written, calls, faults;

	static int op_on(const char *op)
	{
		const char *ops = getenv("FAULT_OPS");
		if (!ops || !*ops)
			return 1;
		size_t n = strlen(op);
		for (const char *p = ops; *p;) {
			if (strncmp(p, op, n) == 0 && (p[n] == ',' || p[n] == '\0'))
				return 1;
			p = strchr(p, ',');
			if (!p)
				break;
			p++;
		}
		return 0;
	}

	static int path_on(const char *op, const char *path)
	{
		const char *pat = getenv("FAULT_MATCH");
		return pat && path && op_on(op) && fnmatch(pat, path, 0) == 0;
	}

	static int fd_on(const char *op, int fd)
	{
		char link[64], target[4096];
		snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
		ssize_t n = readlink(link, target, sizeof target - 1);
		if (n < 0)
			return 0;
		target[n] = '\0';
		return path_on(op, target);
	}

	static int fault_errno(void)
	{
		const char *e = getenv("FAULT_ERRNO");
		if (e && strcmp(e, "EIO") == 0)
			return EIO;
		if (e && strcmp(e, "EROFS") == 0)
			return EROFS;
		if (e && strcmp(e, "EDQUOT") == 0)
			return EDQUOT;
		return ENOSPC;
	}

	static long long env_ll(const char *name, long long def)
	{
		const char *v = getenv(name);
		return v && *v ? atoll(v) : def;
	}

	/* Whether the faults are over (FAULT_TIMES made). */
	static int spent(void)
	{
		long long times = env_ll("FAULT_TIMES", -1);
		return times >= 0 && faults >= times;
	}

	/* With FAULT_SIGNAL: raises it, the first time, and says so. */
	static int signalled(void)
	{
		static int raised;
		int sig = (int)env_ll("FAULT_SIGNAL", 0);
		if (sig && !raised) {
			raised = 1;
			raise(sig);
		}
		return sig != 0;
	}

	/* A call that may fail (not a write): 1, with errno set, when it must. */
	static int fail_now(void)
	{
		if (spent() || calls++ < env_ll("FAULT_SKIP", 0) || signalled())
			return 0;
		faults++;
		errno = fault_errno();
		return 1;
	}

	/* How much of a write of n bytes still goes through; 0 sets errno. */
	static size_t room(size_t n)
	{
		if (spent())
			return n;
		long long left = env_ll("FAULT_AFTER", 0) - written;
		if (left > 0)
			return (size_t)left < n ? (size_t)left : n;
		if (signalled())
			return n;
		faults++;
		errno = fault_errno();
		return 0;
	}

	#define REAL(ret, name, ...) \
		static ret (*real_##name)(__VA_ARGS__); \
		if (!real_##name) \
			real_##name = (ret(*)(__VA_ARGS__))dlsym(RTLD_NEXT, #name)

	ssize_t write(int fd, const void *b, size_t n)
	{
		REAL(ssize_t, write, int, const void *, size_t);
		if (n && fd_on("write", fd)) {
			size_t k = room(n);
			if (!k)
				return -1;
			ssize_t r = real_write(fd, b, k);
			if (r > 0)
				written += r;
			return r;
		}
		return real_write(fd, b, n);
	}

	ssize_t pwrite(int fd, const void *b, size_t n, off_t off)
	{
		REAL(ssize_t, pwrite, int, const void *, size_t, off_t);
		if (n && fd_on("write", fd)) {
			size_t k = room(n);
			if (!k)
				return -1;
			ssize_t r = real_pwrite(fd, b, k, off);
			if (r > 0)
				written += r;
			return r;
		}
		return real_pwrite(fd, b, n, off);
	}

	ssize_t pwrite64(int fd, const void *b, size_t n, off_t off)
	{
		return pwrite(fd, b, n, off);
	}

	size_t fwrite(const void *p, size_t size, size_t n, FILE *fp)
	{
		REAL(size_t, fwrite, const void *, size_t, size_t, FILE *);
		if (size && n && fd_on("write", fileno(fp))) {
			size_t k = room(size * n) / size;
			if (!k)
				return 0;
			size_t r = real_fwrite(p, size, k, fp);
			written += (long long)(r * size);
			if (r < n)
				errno = fault_errno();
			return r;
		}
		return real_fwrite(p, size, n, fp);
	}

	int fsync(int fd)
	{
		REAL(int, fsync, int);
		if (fd_on("fsync", fd) && fail_now())
			return -1;
		return real_fsync(fd);
	}

	int fdatasync(int fd)
	{
		REAL(int, fdatasync, int);
		if (fd_on("fsync", fd) && fail_now())
			return -1;
		return real_fdatasync(fd);
	}

	int rename(const char *from, const char *to)
	{
		REAL(int, rename, const char *, const char *);
		if ((path_on("rename", from) || path_on("rename", to)) && fail_now())
			return -1;
		return real_rename(from, to);
	}

	int mkdir(const char *path, mode_t mode)
	{
		REAL(int, mkdir, const char *, mode_t);
		if (path_on("mkdir", path) && fail_now())
			return -1;
		return real_mkdir(path, mode);
	}

	static int open_common(const char *path, int flags, mode_t mode, const char *which)
	{
		REAL(int, open, const char *, int, ...);
		REAL(int, open64, const char *, int, ...);
		if ((flags & O_CREAT) && path_on("open", path) && fail_now())
			return -1;
		return strcmp(which, "open") == 0 ? real_open(path, flags, mode) : real_open64(path, flags, mode);
	}

	int open(const char *path, int flags, ...)
	{
		mode_t mode = 0;
		if (flags & O_CREAT) {
			va_list ap;
			va_start(ap, flags);
			mode = (mode_t)va_arg(ap, int);
			va_end(ap);
		}
		return open_common(path, flags, mode, "open");
	}

	int open64(const char *path, int flags, ...)
	{
		mode_t mode = 0;
		if (flags & O_CREAT) {
			va_list ap;
			va_start(ap, flags);
			mode = (mode_t)va_arg(ap, int);
			va_end(ap);
		}
		return open_common(path, flags, mode, "open64");
	}
	EOF
	cc -shared -fPIC -O1 -o faultfs.so faultfs.c -ldl
}

# with_faults VAR=VALUE... -- CMD...: run CMD with the shim preloaded
with_faults () (
	while [ "$1" != "--" ]; do
		export "$1"
		shift
	done
	shift
	LD_PRELOAD="$PWD/faultfs.so${LD_PRELOAD:+:$LD_PRELOAD}" "$@"
)
