/* Heartbeats: how a worker proves to gpt-launch that it makes progress.
 *
 * The slot is an anonymous shared file (memfd) that the launcher creates per
 * worker and passes by descriptor number, so nothing lands on a disk and
 * nothing is left behind when every process is gone. A beat is one atomic
 * add on the mapped page: free next to a training step, and it needs neither
 * a system call nor the network, which a stuck collective may be holding. */
#include "comm/comm.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define HB_MAGIC "GPTHB01"

typedef struct hb_page {
	char magic[8];           /* HB_MAGIC, written by the launcher */
	_Atomic uint64_t beats;  /* 0 until a worker opens the slot */
	_Atomic int64_t step;    /* the step of the last beat */
	_Atomic int32_t pid;     /* the process that opened the slot last */
} hb_page;

struct gpt_heartbeat {
	hb_page *page;
};

/* ---- worker side -------------------------------------------------------- */

int gpt_heartbeat_open(gpt_heartbeat **out, char *const *envp, gpt_err *err)
{
	*out = NULL;
	size_t nl = strlen(GPT_HEARTBEAT_ENV);
	const char *v = NULL;
	for (char *const *e = envp; e && *e && !v; e++)
		if (strncmp(*e, GPT_HEARTBEAT_ENV, nl) == 0 && (*e)[nl] == '=')
			v = *e + nl + 1;
	if (!v || !*v)
		return 0;
	int64_t fd;
	struct stat sb;
	if (gpt_parse_i64(v, &fd) || fd < 0 || fd > 1 << 20)
		return gpt_err_set(err, GPT_EUSAGE,
				   "environment variable %s='%s': expected a file descriptor number (gpt-launch sets it)",
				   GPT_HEARTBEAT_ENV, v);
	/* The descriptor stays open: a wrapper script may start more than
	 * one gptkit program in turn, and each must find it. */
	if (fstat((int)fd, &sb) || !S_ISREG(sb.st_mode) || sb.st_size < (off_t)sizeof(hb_page))
		return gpt_err_set(err, GPT_EUSAGE,
				   "environment variable %s=%s: descriptor %lld is not gpt-launch's heartbeat file (did a wrapper close it?); run gpt-launch with --heartbeat-timeout 0 to turn hang detection off",
				   GPT_HEARTBEAT_ENV, v, (long long)fd);
	void *map = mmap(NULL, sizeof(hb_page), PROT_READ | PROT_WRITE, MAP_SHARED, (int)fd, 0);
	if (map == MAP_FAILED)
		return gpt_err_errno(err, GPT_EUSAGE, errno, "environment variable %s=%s: cannot map the heartbeat file",
				     GPT_HEARTBEAT_ENV, v);
	hb_page *p = map;
	if (memcmp(p->magic, HB_MAGIC, sizeof p->magic) != 0) {
		munmap(map, sizeof(hb_page));
		return gpt_err_set(err, GPT_EUSAGE,
				   "environment variable %s=%s: descriptor %lld is not gpt-launch's heartbeat file (did a wrapper reuse it?); run gpt-launch with --heartbeat-timeout 0 to turn hang detection off",
				   GPT_HEARTBEAT_ENV, v, (long long)fd);
	}
	gpt_heartbeat *hb = gpt_calloc(1, sizeof *hb, "heartbeat", err);
	if (!hb) {
		munmap(map, sizeof(hb_page));
		return err->code;
	}
	hb->page = p;
	atomic_store_explicit(&p->pid, (int32_t)getpid(), memory_order_relaxed);
	/* Opening counts as the first beat: from now on the launcher watches. */
	gpt_heartbeat_beat(hb, 0);
	*out = hb;
	return 0;
}

void gpt_heartbeat_beat(gpt_heartbeat *hb, int64_t step)
{
	if (!hb)
		return;
	atomic_store_explicit(&hb->page->step, step, memory_order_relaxed);
	atomic_fetch_add_explicit(&hb->page->beats, 1, memory_order_release);
}

void gpt_heartbeat_close(gpt_heartbeat *hb)
{
	if (!hb)
		return;
	munmap(hb->page, sizeof(hb_page));
	free(hb);
}

/* ---- launcher side ------------------------------------------------------ */

int gpt_heartbeat_slot_create(gpt_heartbeat_slot *s, gpt_err *err)
{
	s->fd = -1;
	s->map = NULL;
	int fd = memfd_create("gptkit-heartbeat", MFD_CLOEXEC);
	if (fd < 0)
		return gpt_err_errno(err, GPT_EINTERNAL, errno,
				     "heartbeat: cannot create a shared file; run with --heartbeat-timeout 0 to do without hang detection");
	void *map = MAP_FAILED;
	if (ftruncate(fd, (off_t)sizeof(hb_page)) == 0)
		map = mmap(NULL, sizeof(hb_page), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		int e = errno;
		close(fd);
		return gpt_err_errno(err, GPT_EINTERNAL, e, "heartbeat: cannot map the shared file");
	}
	memcpy(((hb_page *)map)->magic, HB_MAGIC, sizeof HB_MAGIC);
	s->fd = fd;
	s->map = map;
	return 0;
}

void gpt_heartbeat_slot_read(const gpt_heartbeat_slot *s, uint64_t *beats, int64_t *step, int *pid)
{
	hb_page *p = s->map;
	*beats = p ? atomic_load_explicit(&p->beats, memory_order_acquire) : 0;
	if (step)
		*step = p ? atomic_load_explicit(&p->step, memory_order_relaxed) : 0;
	if (pid)
		*pid = p ? atomic_load_explicit(&p->pid, memory_order_relaxed) : 0;
}

void gpt_heartbeat_slot_free(gpt_heartbeat_slot *s)
{
	if (s->map)
		munmap(s->map, sizeof(hb_page));
	if (s->fd >= 0)
		close(s->fd);
	s->map = NULL;
	s->fd = -1;
}

int gpt_heartbeat_timeout(double *out, gpt_err *err)
{
	*out = GPT_HEARTBEAT_DEFAULT_TIMEOUT_S;
	const char *v = getenv("GPT_HEARTBEAT_TIMEOUT");
	if (!v || !*v)
		return 0;
	double t;
	if (gpt_parse_f64(v, &t) || !(t >= 0) || t > 1e7)
		return gpt_err_set(err, GPT_EUSAGE,
				   "environment variable GPT_HEARTBEAT_TIMEOUT='%s': expected seconds >= 0 (0 turns hang detection off)",
				   v);
	*out = t;
	return 0;
}
