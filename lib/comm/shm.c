/* The shm backend: collectives between CPU processes on one host through
 * one POSIX shared-memory segment per group.
 *
 * Segment: a header, one control line per rank (its barrier generation and
 * pid), two sets of data slots (one per rank plus a result slot), and one
 * byte ring per ordered pair of ranks for send/recv.
 *
 * A collective proceeds in steps: every rank writes its slot of the current
 * set, all meet at a barrier, then read. Steps alternate between the two
 * sets, and a rank can only start writing a set again after passing the
 * barrier of the step in between, which everyone reaches only after they
 * finished reading it, so no extra barrier is needed. Each reduced element
 * is computed by one rank, folding the ranks in order 0..n-1, and copied by
 * the others: every rank gets the same bits whatever the timing. */
#include "comm/comm-impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define SHM_MAGIC 0x67707473686d3031ull /* "gptshm01" */
#define CTL_STRIDE 128                  /* one cache line pair per rank: no false sharing */

typedef struct shm_ctl {
	_Atomic uint64_t arrive; /* the last barrier generation this rank reached */
	_Atomic int32_t pid;
} shm_ctl;

typedef struct shm_ring {
	_Atomic uint64_t head; /* bytes written, by the sender */
	char pad0[CTL_STRIDE - sizeof(uint64_t)];
	_Atomic uint64_t tail; /* bytes consumed, by the receiver */
	char pad1[CTL_STRIDE - sizeof(uint64_t)];
} shm_ring;

typedef struct shm_head {
	uint64_t magic;
	int32_t size;
	int64_t slot_bytes, ring_bytes;
} shm_head;

typedef struct shm {
	uint8_t *base;
	size_t map_bytes;
	int n;
	int64_t slot_bytes, ring_bytes;
	size_t ctl_off, data_off, ring_off;
	uint64_t gen;  /* barriers passed (the same count on every rank) */
	uint64_t step; /* data steps taken: picks the slot set */
} shm;

static shm_ctl *ctl(shm *s, int r)
{
	return (shm_ctl *)(s->base + s->ctl_off + (size_t)r * CTL_STRIDE);
}

/* Slot r of set `set`; r == n is the result slot. */
static uint8_t *slot(shm *s, int set, int r)
{
	return s->base + s->data_off + ((size_t)set * (size_t)(s->n + 1) + (size_t)r) * (size_t)s->slot_bytes;
}

static shm_ring *ring(shm *s, int src, int dst)
{
	size_t one = sizeof(shm_ring) + (size_t)s->ring_bytes;
	return (shm_ring *)(s->base + s->ring_off + ((size_t)src * (size_t)s->n + (size_t)dst) * one);
}

static uint8_t *ring_buf(shm_ring *r)
{
	return (uint8_t *)(r + 1);
}

/* ---- waiting ------------------------------------------------------------- */

/* Spins briefly, then yields, then sleeps a little: peers usually arrive
 * within microseconds, but this machine may have fewer cores than ranks. */
typedef struct waiter {
	uint64_t deadline_ns, next_check_ns;
	unsigned spins;
} waiter;

static void waiter_init(waiter *w, double timeout_s)
{
	uint64_t now = gpt_now_ns();
	w->deadline_ns = now + (uint64_t)(timeout_s * 1e9);
	w->next_check_ns = now + 100000000u;
	w->spins = 0;
}

/* Returns 0 to go on waiting, 1 when the deadline passed, 2 when it is time
 * to look for dead peers (every 100 ms). */
static int waiter_pause(waiter *w)
{
	w->spins++;
	if (w->spins < 64)
		return 0;
	if (w->spins < 256) {
		sched_yield();
	} else {
		struct timespec ts = {0, w->spins < 2048 ? 20000 : 200000};
		nanosleep(&ts, NULL);
	}
	if ((w->spins & 15) != 0)
		return 0;
	uint64_t now = gpt_now_ns();
	if (now >= w->deadline_ns)
		return 1;
	if (now >= w->next_check_ns) {
		w->next_check_ns = now + 100000000u;
		return 2;
	}
	return 0;
}

static int peer_dead(shm *s, int r)
{
	pid_t pid = atomic_load_explicit(&ctl(s, r)->pid, memory_order_relaxed);
	return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH;
}

/* The error for a wait that failed on the ranks with flag set. */
static int wait_failed(gpt_group *g, const char *op, const int *flag, int dead, gpt_err *err)
{
	char who[512] = "";
	gpt_comm_list_ranks(g, flag, who, sizeof who);
	g->broken = 1;
	if (dead)
		return gpt_err_set(err, GPT_EIO, "group %s: %s: rank %s exited without arriving",
				   g->name, op, who);
	return gpt_err_set(err, GPT_EIO, "group %s: %s timed out after %g s waiting for ranks %s",
			   g->name, op, g->timeout_s, who);
}

/* The barrier under every step: publish my generation, wait for everyone's. */
static int shm_sync(gpt_group *g, const char *op, gpt_err *err)
{
	shm *s = g->impl;
	uint64_t gen = ++s->gen;
	atomic_store_explicit(&ctl(s, g->rank)->arrive, gen, memory_order_release);
	waiter w;
	waiter_init(&w, g->timeout_s);
	for (int i = 0; i < s->n; i++) {
		while (atomic_load_explicit(&ctl(s, i)->arrive, memory_order_acquire) < gen) {
			int p = waiter_pause(&w);
			if (!p)
				continue;
			int flag[s->n], dead = 0;
			for (int j = 0; j < s->n; j++) {
				flag[j] = atomic_load_explicit(&ctl(s, j)->arrive, memory_order_acquire) < gen;
				if (p == 2)
					flag[j] = flag[j] && peer_dead(s, j);
				dead |= flag[j];
			}
			if (p == 1 || dead)
				return wait_failed(g, op, flag, p == 2, err);
		}
	}
	return 0;
}

/* ---- collectives ---------------------------------------------------------- */

static int shm_all_reduce(gpt_group *g, const void *send, void *recv, int64_t count, gpt_dtype t,
			  gpt_reduce_op op, gpt_err *err)
{
	shm *s = g->impl;
	size_t es = gpt_dtype_size(t);
	int64_t chunk = s->slot_bytes / (int64_t)es;
	const void *srcs[s->n];
	for (int64_t off = 0; off < count; off += chunk) {
		int64_t c = count - off < chunk ? count - off : chunk;
		int set = (int)(s->step++ & 1);
		memcpy(slot(s, set, g->rank), (const uint8_t *)send + (size_t)off * es, (size_t)c * es);
		int rc = shm_sync(g, "all-reduce", err);
		if (rc)
			return rc;
		int64_t lo = c * g->rank / s->n, hi = c * (g->rank + 1) / s->n;
		for (int i = 0; i < s->n; i++)
			srcs[i] = slot(s, set, i);
		gpt_comm_reduce(slot(s, set, s->n) + (size_t)lo * es, srcs, s->n, lo, hi - lo, t, op);
		if ((rc = shm_sync(g, "all-reduce", err)))
			return rc;
		memcpy((uint8_t *)recv + (size_t)off * es, slot(s, set, s->n), (size_t)c * es);
	}
	return 0;
}

static int shm_reduce_scatter(gpt_group *g, const void *send, void *recv, int64_t count,
			      gpt_dtype t, gpt_reduce_op op, gpt_err *err)
{
	shm *s = g->impl;
	size_t es = gpt_dtype_size(t);
	int64_t chunk = s->slot_bytes / ((int64_t)es * s->n);
	const void *srcs[s->n];
	for (int64_t off = 0; off < count; off += chunk) {
		int64_t c = count - off < chunk ? count - off : chunk;
		int set = (int)(s->step++ & 1);
		uint8_t *mine = slot(s, set, g->rank);
		for (int b = 0; b < s->n; b++)
			memcpy(mine + (size_t)(b * c) * es, (const uint8_t *)send + (size_t)(b * count + off) * es,
			       (size_t)c * es);
		int rc = shm_sync(g, "reduce-scatter", err);
		if (rc)
			return rc;
		for (int i = 0; i < s->n; i++)
			srcs[i] = slot(s, set, i);
		gpt_comm_reduce((uint8_t *)recv + (size_t)off * es, srcs, s->n, (int64_t)g->rank * c, c, t, op);
	}
	return 0;
}

static int shm_all_gather(gpt_group *g, const void *send, void *recv, int64_t count, gpt_dtype t,
			  gpt_err *err)
{
	shm *s = g->impl;
	size_t es = gpt_dtype_size(t);
	int64_t chunk = s->slot_bytes / (int64_t)es;
	for (int64_t off = 0; off < count; off += chunk) {
		int64_t c = count - off < chunk ? count - off : chunk;
		int set = (int)(s->step++ & 1);
		memcpy(slot(s, set, g->rank), (const uint8_t *)send + (size_t)off * es, (size_t)c * es);
		int rc = shm_sync(g, "all-gather", err);
		if (rc)
			return rc;
		for (int b = 0; b < s->n; b++)
			memcpy((uint8_t *)recv + (size_t)(b * count + off) * es, slot(s, set, b), (size_t)c * es);
	}
	return 0;
}

/* The pieces of an uneven collective: rank r's is [at[r], at[r+1]). */
static void piece_offsets(const int64_t *counts, int n, int64_t *at)
{
	at[0] = 0;
	for (int r = 0; r < n; r++)
		at[r + 1] = at[r] + counts[r];
}

/* The part [*lo, *hi) of rank r's piece in the chunk [off, off + c); 0 when
 * there is none. */
static int piece_part(const int64_t *at, int r, int64_t off, int64_t c, int64_t *lo, int64_t *hi)
{
	*lo = at[r] > off ? at[r] : off;
	*hi = at[r + 1] < off + c ? at[r + 1] : off + c;
	return *hi > *lo;
}

/* Each step every rank puts a chunk of the whole buffer in its slot, and
 * reduces the part of its own piece the chunk holds: one rank computes each
 * element, folding 0..n-1, as shm_all_reduce does. */
static int shm_reduce_scatter_v(gpt_group *g, void *buf, const int64_t *counts, gpt_dtype t,
				gpt_reduce_op op, gpt_err *err)
{
	shm *s = g->impl;
	size_t es = gpt_dtype_size(t);
	int64_t at[s->n + 1], chunk = s->slot_bytes / (int64_t)es, lo, hi;
	piece_offsets(counts, s->n, at);
	const void *srcs[s->n];
	for (int64_t off = 0; off < at[s->n]; off += chunk) {
		int64_t c = at[s->n] - off < chunk ? at[s->n] - off : chunk;
		int set = (int)(s->step++ & 1);
		memcpy(slot(s, set, g->rank), (const uint8_t *)buf + (size_t)off * es, (size_t)c * es);
		int rc = shm_sync(g, "reduce-scatter", err);
		if (rc)
			return rc;
		for (int i = 0; i < s->n; i++)
			srcs[i] = slot(s, set, i);
		if (piece_part(at, g->rank, off, c, &lo, &hi))
			gpt_comm_reduce((uint8_t *)buf + (size_t)lo * es, srcs, s->n, lo - off, hi - lo, t, op);
	}
	return 0;
}

/* Each step every rank puts the part of its piece a chunk of the buffer
 * holds in its slot, at its place in the chunk, and copies the others'. */
static int shm_all_gather_v(gpt_group *g, void *buf, const int64_t *counts, gpt_dtype t, gpt_err *err)
{
	shm *s = g->impl;
	size_t es = gpt_dtype_size(t);
	int64_t at[s->n + 1], chunk = s->slot_bytes / (int64_t)es, lo, hi;
	piece_offsets(counts, s->n, at);
	uint8_t *mem = buf;
	for (int64_t off = 0; off < at[s->n]; off += chunk) {
		int64_t c = at[s->n] - off < chunk ? at[s->n] - off : chunk;
		int set = (int)(s->step++ & 1);
		if (piece_part(at, g->rank, off, c, &lo, &hi))
			memcpy(slot(s, set, g->rank) + (size_t)(lo - off) * es, mem + (size_t)lo * es, (size_t)(hi - lo) * es);
		int rc = shm_sync(g, "all-gather", err);
		if (rc)
			return rc;
		for (int b = 0; b < s->n; b++)
			if (b != g->rank && piece_part(at, b, off, c, &lo, &hi))
				memcpy(mem + (size_t)lo * es, slot(s, set, b) + (size_t)(lo - off) * es,
				       (size_t)(hi - lo) * es);
	}
	return 0;
}

static int shm_broadcast(gpt_group *g, void *buf, int64_t count, gpt_dtype t, int root, gpt_err *err)
{
	shm *s = g->impl;
	size_t es = gpt_dtype_size(t);
	int64_t chunk = s->slot_bytes / (int64_t)es;
	for (int64_t off = 0; off < count; off += chunk) {
		int64_t c = count - off < chunk ? count - off : chunk;
		int set = (int)(s->step++ & 1);
		if (g->rank == root)
			memcpy(slot(s, set, root), (uint8_t *)buf + (size_t)off * es, (size_t)c * es);
		int rc = shm_sync(g, "broadcast", err);
		if (rc)
			return rc;
		if (g->rank != root)
			memcpy((uint8_t *)buf + (size_t)off * es, slot(s, set, root), (size_t)c * es);
	}
	return 0;
}

static int shm_barrier(gpt_group *g, gpt_err *err)
{
	return shm_sync(g, "barrier", err);
}

/* ---- send / recv ------------------------------------------------------------- */

/* Each message on a ring is an 8-byte length and the payload, so that a
 * receiver expecting a different count finds out instead of desynchronising. */
typedef struct p2p_state {
	uint64_t want;  /* header + payload bytes */
	uint64_t done;
	uint8_t hdr[8];
} p2p_state;

/* Moves what fits; returns 1 when it moved bytes, -1 on a length mismatch. */
static int p2p_progress(gpt_group *g, const gpt_p2p *op, p2p_state *st, size_t es)
{
	shm *s = g->impl;
	shm_ring *r = op->is_send ? ring(s, g->rank, op->peer) : ring(s, op->peer, g->rank);
	uint64_t cap = (uint64_t)s->ring_bytes;
	uint64_t head, tail, avail;
	if (op->is_send) {
		head = atomic_load_explicit(&r->head, memory_order_relaxed);
		tail = atomic_load_explicit(&r->tail, memory_order_acquire);
		avail = cap - (head - tail);
	} else {
		tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
		head = atomic_load_explicit(&r->head, memory_order_acquire);
		avail = head - tail;
	}
	uint64_t n = st->want - st->done < avail ? st->want - st->done : avail;
	if (!n)
		return 0;
	uint64_t pos = op->is_send ? head : tail;
	for (uint64_t k = 0; k < n;) {
		uint64_t at = (pos + k) % cap, run = cap - at < n - k ? cap - at : n - k;
		uint64_t m = st->done + k; /* message offset */
		if (m < 8) {
			run = run < 8 - m ? run : 8 - m;
			if (op->is_send)
				memcpy(ring_buf(r) + at, st->hdr + m, run);
			else
				memcpy(st->hdr + m, ring_buf(r) + at, run);
		} else {
			uint8_t *p = (uint8_t *)op->buf + (m - 8);
			run = run < st->want - m ? run : st->want - m;
			if (op->is_send)
				memcpy(ring_buf(r) + at, p, run);
			else
				memcpy(p, ring_buf(r) + at, run);
		}
		k += run;
	}
	uint64_t before = st->done;
	st->done += n;
	if (op->is_send) {
		atomic_store_explicit(&r->head, head + n, memory_order_release);
	} else {
		atomic_store_explicit(&r->tail, tail + n, memory_order_release);
		if (before < 8 && st->done >= 8) {
			uint64_t got = 0;
			memcpy(&got, st->hdr, 8);
			if (got != (uint64_t)op->count * es)
				return -1;
		}
	}
	return 1;
}

static int shm_p2p(gpt_group *g, const gpt_p2p *ops, int n, gpt_dtype t, gpt_err *err)
{
	shm *s = g->impl;
	size_t es = gpt_dtype_size(t);
	p2p_state *st = gpt_calloc((size_t)(n ? n : 1), sizeof *st, "send/recv state", err);
	if (!st)
		return err->code;
	for (int i = 0; i < n; i++) {
		uint64_t bytes = (uint64_t)ops[i].count * es;
		st[i].want = 8 + bytes;
		memcpy(st[i].hdr, &bytes, 8);
	}
	waiter w;
	waiter_init(&w, g->timeout_s);
	int rc = 0;
	for (;;) {
		int left = 0, moved = 0;
		for (int i = 0; i < n; i++) {
			if (st[i].done == st[i].want)
				continue;
			left++;
			/* Transfers to one peer in one direction keep their order. */
			int blocked = 0;
			for (int j = 0; j < i && !blocked; j++)
				blocked = ops[j].peer == ops[i].peer && ops[j].is_send == ops[i].is_send &&
					  st[j].done < st[j].want;
			if (blocked)
				continue;
			int p = p2p_progress(g, &ops[i], &st[i], es);
			if (p < 0) {
				uint64_t got;
				memcpy(&got, st[i].hdr, 8);
				g->broken = 1;
				rc = gpt_err_set(err, GPT_EDATA,
						 "group %s: recv from rank %d (world %d): it sent %llu bytes, this rank expects %lld elements of %s",
						 g->name, ops[i].peer, g->ranks[ops[i].peer], (unsigned long long)got,
						 (long long)ops[i].count, gpt_dtype_name(t));
				goto out;
			}
			moved |= p;
		}
		if (!left)
			break;
		if (moved) {
			w.spins = 0;
			continue;
		}
		int p = waiter_pause(&w);
		if (!p)
			continue;
		int flag[s->n], any = 0;
		memset(flag, 0, sizeof flag);
		for (int i = 0; i < n; i++)
			if (st[i].done < st[i].want && (p == 1 || peer_dead(s, ops[i].peer)))
				flag[ops[i].peer] = any = 1;
		if (any) {
			char what[64];
			snprintf(what, sizeof what, "send/recv (%d transfer%s)", n, n == 1 ? "" : "s");
			rc = wait_failed(g, what, flag, p == 2, err);
			goto out;
		}
	}
out:
	free(st);
	return rc;
}

/* ---- group setup ------------------------------------------------------------- */

static void shm_group_free(gpt_group *g)
{
	shm *s = g->impl;
	if (!s)
		return;
	munmap(s->base, s->map_bytes);
	free(s);
	g->impl = NULL;
}

static void shm_layout(shm *s, int n)
{
	s->n = n;
	s->slot_bytes = n <= 16 ? (512 << 10) : (128 << 10);
	/* Rings: 4 MiB in all, between 4 KiB and 256 KiB each. */
	int64_t rb = (int64_t)(4 << 20) / ((int64_t)n * n);
	rb = rb < 4096 ? 4096 : rb > (256 << 10) ? (256 << 10) : rb;
	s->ring_bytes = rb & ~(int64_t)63;
	s->ctl_off = CTL_STRIDE;
	s->data_off = s->ctl_off + (size_t)n * CTL_STRIDE;
	s->ring_off = s->data_off + 2 * (size_t)(n + 1) * (size_t)s->slot_bytes;
	s->map_bytes = s->ring_off + (size_t)n * (size_t)n * (sizeof(shm_ring) + (size_t)s->ring_bytes);
}

static int shm_group_init(gpt_comm *comm, gpt_group *parent, int color, int key, gpt_group *g,
			  gpt_err *err)
{
	if (!g)
		return 0; /* not a member of any new group */
	shm *s = gpt_calloc(1, sizeof *s, "shm group", err);
	if (!s)
		return err->code;
	shm_layout(s, g->size);
	char name[96] = "-";
	int fd = -1, rc = 0;
	if (g->rank == 0) {
		char fullkey[256];
		gpt_comm_group_key(g, fullkey, sizeof fullkey, "shm");
		/* gpt_comm_shm_remove finds the segments of a dead pid by this name. */
		snprintf(name, sizeof name, "/gptkit-%d-%016llx", (int)getpid(),
			 (unsigned long long)gpt_xxh3_64(fullkey, strlen(fullkey)));
		fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		/* The name holds our pid: one that exists was left by a crashed
		 * process that had the same pid before us. */
		if (fd < 0 && errno == EEXIST && shm_unlink(name) == 0)
			fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0 || ftruncate(fd, (off_t)s->map_bytes)) {
			rc = gpt_err_errno(err, GPT_EIO, errno,
					   "group %s: cannot create the shared memory segment %s of %zu bytes (is /dev/shm full?)",
					   g->name, name, s->map_bytes);
			if (fd >= 0)
				close(fd), shm_unlink(name);
			free(s);
			return rc;
		}
	}
	char **vals = NULL;
	rc = gpt_comm_exchange(g, "shm", "shm setup", name, &vals, err);
	if (!rc && g->rank != 0) {
		snprintf(name, sizeof name, "%s", vals[0]);
		fd = shm_open(name, O_RDWR | O_CLOEXEC, 0600);
		if (fd < 0)
			rc = gpt_err_errno(err, GPT_EIO, errno,
					   "group %s: cannot open the shared memory segment %s of rank 0 (world %d); "
					   "the shm backend needs every rank of a group on one host",
					   g->name, name, g->ranks[0]);
	}
	for (int i = 0; vals && i < g->size; i++)
		free(vals[i]);
	free(vals);
	if (!rc) {
		s->base = mmap(NULL, s->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (s->base == MAP_FAILED) {
			s->base = NULL;
			rc = gpt_err_errno(err, GPT_EIO, errno, "group %s: cannot map %s", g->name, name);
		}
	}
	if (fd >= 0)
		close(fd);
	if (!rc) {
		shm_head *h = (shm_head *)s->base;
		if (g->rank == 0)
			*h = (shm_head){SHM_MAGIC, g->size, s->slot_bytes, s->ring_bytes};
		atomic_store(&ctl(s, g->rank)->pid, (int32_t)getpid());
		g->impl = s;
		/* Everyone has mapped the segment (and seen the header) after this;
		 * then the name can go, so that no crash leaves it in /dev/shm. */
		char **v2 = NULL;
		rc = gpt_comm_exchange(g, "shm-mapped", "shm setup", "1", &v2, err);
		for (int i = 0; v2 && i < g->size; i++)
			free(v2[i]);
		free(v2);
		if (!rc && (h->magic != SHM_MAGIC || h->size != g->size))
			rc = gpt_err_set(err, GPT_EINTERNAL, "group %s: segment %s has a bad header", g->name, name);
	}
	if (g->rank == 0 && name[0] == '/')
		shm_unlink(name);
	if (rc) {
		if (s->base)
			munmap(s->base, s->map_bytes);
		free(s);
		g->impl = NULL;
	}
	return rc;
}

void gpt_comm_shm_remove(int pid)
{
	char prefix[32];
	int pl = snprintf(prefix, sizeof prefix, "gptkit-%d-", pid);
	DIR *d = opendir("/dev/shm");
	if (!d)
		return;
	for (struct dirent *e; (e = readdir(d));) {
		if (strncmp(e->d_name, prefix, (size_t)pl) != 0)
			continue;
		char name[300];
		snprintf(name, sizeof name, "/%s", e->d_name);
		shm_unlink(name);
	}
	closedir(d);
}

const gpt_comm_backend gpt_comm_backend_shm = {
	.name = "shm",
	.group_init = shm_group_init,
	.group_free = shm_group_free,
	.all_reduce = shm_all_reduce,
	.reduce_scatter = shm_reduce_scatter,
	.all_gather = shm_all_gather,
	.reduce_scatter_v = shm_reduce_scatter_v,
	.all_gather_v = shm_all_gather_v,
	.broadcast = shm_broadcast,
	.p2p = shm_p2p,
	.barrier = shm_barrier,
};
