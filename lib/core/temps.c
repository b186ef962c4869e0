/* Temporaries removed when a signal ends the process: the library holds the
 * name of each temporary file or directory it makes until that is renamed
 * into place or removed; the handler that gpt_cmd_remove_temps_on_signals
 * installs removes what is held with system calls only (no stdio, no
 * malloc, no locks), then dies of the signal. */
#include "core.h"

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SLOTS 64

static struct {
	atomic_int state; /* 0 free, 1 being written, 2 file, 3 directory */
	char path[PATH_MAX];
} held[SLOTS];
static pthread_mutex_t held_mu = PTHREAD_MUTEX_INITIALIZER;

void gpt_temp_hold(const char *path, int is_dir)
{
	if (strlen(path) >= PATH_MAX)
		return;
	pthread_mutex_lock(&held_mu);
	for (int i = 0; i < SLOTS; i++)
		if (atomic_load(&held[i].state) == 0) {
			atomic_store(&held[i].state, 1);
			strcpy(held[i].path, path);
			atomic_store(&held[i].state, is_dir ? 3 : 2);
			break;
		}
	pthread_mutex_unlock(&held_mu); /* all slots taken: left to the caller's own cleanup */
}

void gpt_temp_drop(const char *path)
{
	pthread_mutex_lock(&held_mu);
	for (int i = 0; i < SLOTS; i++)
		if (atomic_load(&held[i].state) >= 2 && strcmp(held[i].path, path) == 0) {
			atomic_store(&held[i].state, 0);
			break;
		}
	pthread_mutex_unlock(&held_mu);
}

/* The files of a directory we made (one level: the library makes no
 * deeper temporaries, though a held directory may hold another held one),
 * then the directory; a listing that changes under the unlinks is read
 * again. 1 when the directory is gone. */
static int remove_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), gone = fd >= 0 && rmdir(dir) == 0;
	for (int pass = 0; fd >= 0 && !gone && pass < 8; pass++) {
		char buf[4096] __attribute__((aligned(8)));
		long n;
		lseek(fd, 0, SEEK_SET);
		while ((n = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0)
			for (long at = 0; at < n;) {
				/* struct linux_dirent64: inode, offset, record length, type, name */
				unsigned short len;
				memcpy(&len, buf + at + 16, sizeof len);
				const char *name = buf + at + 19;
				if (strcmp(name, ".") != 0 && strcmp(name, "..") != 0)
					unlinkat(fd, name, 0);
				at += len;
			}
		gone = rmdir(dir) == 0;
	}
	if (fd >= 0)
		close(fd);
	return gone;
}

static void on_signal(int sig)
{
	/* passes until one removes nothing: a directory held inside another
	 * (gpt-ckpt-merge's new output directory and its staging directory)
	 * goes first, its parent in a later pass */
	for (int removed = 1; removed;) {
		removed = 0;
		for (int i = 0; i < SLOTS; i++) {
			int s = atomic_load(&held[i].state);
			if ((s == 2 && unlink(held[i].path) == 0) || (s == 3 && remove_dir(held[i].path))) {
				atomic_store(&held[i].state, 0);
				removed = 1;
			}
		}
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

void gpt_cmd_remove_temps_on_signals(void)
{
	static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
	for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
		struct sigaction old, sa;
		/* a signal ignored from the start (nohup) stays ignored */
		if (sigaction(sigs[i], NULL, &old) != 0 || old.sa_handler == SIG_IGN)
			continue;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = on_signal;
		sigemptyset(&sa.sa_mask);
		for (size_t j = 0; j < sizeof sigs / sizeof sigs[0]; j++)
			sigaddset(&sa.sa_mask, sigs[j]);
		sigaction(sigs[i], &sa, NULL);
	}
}

void gpt_cmd_file_size_limit_as_error(void)
{
	struct sigaction old, ign;
	if (sigaction(SIGXFSZ, NULL, &old) != 0 || old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO))
		return;
	memset(&ign, 0, sizeof ign);
	ign.sa_handler = SIG_IGN;
	sigemptyset(&ign.sa_mask);
	sigaction(SIGXFSZ, &ign, NULL);
}
