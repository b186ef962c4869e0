/* lib/comm's shm backend carrying CUDA device buffers (gpt_comm_set_memory):
 * three forked ranks share device 0, as ranks of a job share one GPU; every
 * collective (the uneven in-place pair too) on device buffers, on a mix of
 * device and host buffers, and on
 * buffers that alias (a sharding rank's part inside the whole), must give
 * the very bits the same collective gives on host buffers; a batch of
 * send/recv mixes device and host buffers; asynchronous requests on device
 * buffers, several in flight, give the same bits. Under the emulator
 * (GPT_CUDA_EMU) also one rank whose backend takes device memory, as nccl's
 * does on a stream of its own: host inputs staged into device memory must
 * have landed when it starts. Skips where there is no GPU. */
#include "comm/comm.h"
#include "cuda/cuda.h"
#include "../unit/ranks.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define RANKS 3
#define CNT 300007 /* more than one shm slot of fp32 */

/* CUDA must not be initialised before fork: count devices in a child. */
static int count_devices(void)
{
	pid_t p = fork();
	if (p == 0)
		_exit(gpt_cuda_device_count() > 100 ? 100 : gpt_cuda_device_count());
	int st = 0;
	waitpid(p, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 0;
}

static float value(int r, int64_t i)
{
	return (float)(((int)((i * 7919 + r * 104729) % 2001) - 1000) * 0.0137);
}

typedef struct rank_ctx {
	int rank, n;
	gpt_backend be;
	gpt_group *w;
	gpt_err err;
	int fail;
} rank_ctx;

#define FAIL(x, ...)                                                                                    \
	(fprintf(stderr, "rank %d: ", (x)->rank), fprintf(stderr, __VA_ARGS__), fprintf(stderr, "\n"), \
	 (x)->fail = 1)

static void *dev(rank_ctx *x, const void *host, size_t bytes)
{
	void *d = x->be.ops->alloc(&x->be, bytes, "test buffer", &x->err);
	if (d && host && x->be.ops->upload(&x->be, d, host, bytes, &x->err))
		return NULL;
	return d;
}

static int same(rank_ctx *x, const char *what, const void *want_host, const void *got_dev, size_t bytes)
{
	void *h = malloc(bytes);
	int ok = h && x->be.ops->download(&x->be, h, got_dev, bytes, &x->err) == 0 &&
		 memcmp(h, want_host, bytes) == 0;
	if (!ok)
		FAIL(x, "%s: the device result differs from the host one%s%s", what, x->err.msg[0] ? ": " : "",
		     x->err.msg);
	free(h);
	return ok;
}

static void check(rank_ctx *x, int rc, const char *what)
{
	if (rc)
		FAIL(x, "%s: %s", what, x->err.msg);
}

static void run_checks(rank_ctx *x)
{
	gpt_group *w = x->w;
	int r = x->rank, n = x->n;
	size_t bytes = (size_t)CNT * n * 4;
	float *h = malloc(bytes), *ref = malloc(bytes), *got = malloc(bytes);
	uint16_t *hb = malloc(bytes);
	gpt_comm_req *req0 = NULL;
	for (int64_t i = 0; i < (int64_t)CNT * n; i++)
		h[i] = value(r, i);
	gpt_convert(hb, GPT_DTYPE_BF16, h, GPT_DTYPE_F32, (size_t)CNT * n, NULL);

	/* all-reduce, fp32, device to device and in place */
	void *d = dev(x, h, bytes), *d2 = dev(x, NULL, bytes);
	check(x, !d || !d2, "device buffers");
	if (x->fail)
		goto out;
	check(x, gpt_comm_all_reduce(w, h, ref, CNT, GPT_DTYPE_F32, GPT_REDUCE_SUM, &x->err), "host all-reduce");
	check(x, gpt_comm_all_reduce(w, d, d2, CNT, GPT_DTYPE_F32, GPT_REDUCE_SUM, &x->err), "device all-reduce");
	same(x, "all-reduce sum fp32", ref, d2, (size_t)CNT * 4);
	check(x, gpt_comm_all_reduce(w, d, d, CNT, GPT_DTYPE_F32, GPT_REDUCE_SUM, &x->err), "in-place all-reduce");
	same(x, "in-place all-reduce sum fp32", ref, d, (size_t)CNT * 4);

	/* all-reduce, bf16 in place, and max; device in, host out */
	x->be.ops->upload(&x->be, d, hb, (size_t)CNT * 2, &x->err);
	uint16_t *refb = (uint16_t *)ref;
	memcpy(refb, hb, (size_t)CNT * 2);
	check(x, gpt_comm_all_reduce(w, refb, refb, CNT, GPT_DTYPE_BF16, GPT_REDUCE_SUM, &x->err), "host bf16");
	check(x, gpt_comm_all_reduce(w, d, d, CNT, GPT_DTYPE_BF16, GPT_REDUCE_SUM, &x->err), "device bf16");
	same(x, "all-reduce sum bf16", refb, d, (size_t)CNT * 2);
	x->be.ops->upload(&x->be, d, h, (size_t)CNT * 4, &x->err);
	check(x, gpt_comm_all_reduce(w, h, ref, CNT, GPT_DTYPE_F32, GPT_REDUCE_MAX, &x->err), "host max");
	check(x, gpt_comm_all_reduce(w, d, got, CNT, GPT_DTYPE_F32, GPT_REDUCE_MAX, &x->err), "device-to-host max");
	if (memcmp(got, ref, (size_t)CNT * 4))
		FAIL(x, "all-reduce max, device in and host out, differs");

	/* reduce-scatter with the result inside the input, as sharding does */
	x->be.ops->upload(&x->be, d, h, bytes, &x->err);
	check(x, gpt_comm_reduce_scatter(w, h, ref, CNT, GPT_DTYPE_F32, GPT_REDUCE_SUM, &x->err), "host reduce-scatter");
	void *mine = (char *)d + (size_t)r * CNT * 4;
	check(x, gpt_comm_reduce_scatter(w, d, mine, CNT, GPT_DTYPE_F32, GPT_REDUCE_SUM, &x->err), "device reduce-scatter");
	same(x, "reduce-scatter into its own input", ref, mine, (size_t)CNT * 4);

	/* the uneven pair in place, as sharding stages 2 and 3 use it: pieces
	 * of a device buffer, rank 0's empty; only this rank's piece of the
	 * reduce-scatter is a result */
	int64_t pc[RANKS], at = 0, tot = 0; /* not a VLA: the goto above jumps past it */
	for (int q = 0; q < n; q++) {
		pc[q] = q == 0 && n > 1 ? 0 : CNT / (q + 1);
		at += q < r ? pc[q] : 0;
		tot += pc[q];
	}
	x->be.ops->upload(&x->be, d, h, (size_t)tot * 4, &x->err);
	memcpy(ref, h, (size_t)tot * 4);
	check(x, gpt_comm_reduce_scatter_v(w, ref, pc, GPT_DTYPE_F32, GPT_REDUCE_SUM, &x->err), "host uneven reduce-scatter");
	check(x, gpt_comm_reduce_scatter_v(w, d, pc, GPT_DTYPE_F32, GPT_REDUCE_SUM, &x->err), "device uneven reduce-scatter");
	same(x, "uneven reduce-scatter", ref + at, (char *)d + (size_t)at * 4, (size_t)pc[r] * 4);
	x->be.ops->upload(&x->be, d, h, (size_t)tot * 4, &x->err);
	check(x, gpt_comm_reduce_scatter_v_start(w, d, pc, GPT_DTYPE_F32, GPT_REDUCE_SUM, &req0, &x->err),
	      "starting an uneven reduce-scatter");
	check(x, gpt_comm_wait(req0, &x->err), "waiting for the uneven reduce-scatter");
	same(x, "asynchronous uneven reduce-scatter", ref + at, (char *)d + (size_t)at * 4, (size_t)pc[r] * 4);
	x->be.ops->upload(&x->be, d, h, (size_t)tot * 4, &x->err);
	memcpy(ref, h, (size_t)tot * 4);
	check(x, gpt_comm_all_gather_v(w, ref, pc, GPT_DTYPE_F32, &x->err), "host uneven all-gather");
	check(x, gpt_comm_all_gather_v(w, d, pc, GPT_DTYPE_F32, &x->err), "device uneven all-gather");
	same(x, "uneven all-gather", ref, d, (size_t)tot * 4);

	/* all-gather from a part of the output (device), and device to host */
	x->be.ops->upload(&x->be, mine, h, (size_t)CNT * 4, &x->err);
	check(x, gpt_comm_all_gather(w, h, ref, CNT, GPT_DTYPE_F32, &x->err), "host all-gather");
	check(x, gpt_comm_all_gather(w, mine, d, CNT, GPT_DTYPE_F32, &x->err), "aliased device all-gather");
	same(x, "all-gather into the buffer holding the part", ref, d, bytes);
	check(x, gpt_comm_all_gather(w, (char *)d + (size_t)r * CNT * 4, got, CNT, GPT_DTYPE_F32, &x->err),
	      "device-to-host all-gather");
	if (memcmp(got, ref, bytes))
		FAIL(x, "all-gather, device in and host out, differs");

	/* broadcast from the last rank */
	x->be.ops->upload(&x->be, d, h, (size_t)CNT * 4, &x->err);
	memcpy(ref, h, (size_t)CNT * 4);
	check(x, gpt_comm_broadcast(w, ref, CNT, GPT_DTYPE_F32, n - 1, &x->err), "host broadcast");
	check(x, gpt_comm_broadcast(w, d, CNT, GPT_DTYPE_F32, n - 1, &x->err), "device broadcast");
	same(x, "broadcast", ref, d, (size_t)CNT * 4);

	/* a ring of send/recv: device to the next rank, host from the
	 * previous one into device memory, in one batch */
	int next = (r + 1) % n, prev = (r + n - 1) % n;
	x->be.ops->upload(&x->be, d, h, (size_t)CNT * 4, &x->err);
	gpt_p2p ops[4] = {
		{next, 1, d, CNT},
		{prev, 0, d2, CNT},
		{prev, 1, h + CNT, 1000},
		{next, 0, got, 1000},
	};
	check(x, gpt_comm_p2p(w, ops, 4, GPT_DTYPE_F32, &x->err), "send/recv ring");
	for (int64_t i = 0; i < CNT; i++)
		ref[i] = value(prev, i);
	same(x, "recv from the previous rank", ref, d2, (size_t)CNT * 4);
	for (int64_t i = 0; i < 1000 && !x->fail; i++)
		if (got[i] != value(next, CNT + i))
			FAIL(x, "host recv [%lld] = %g, want %g", (long long)i, got[i], value(next, CNT + i));

	/* asynchronous requests (gpt_comm_all_reduce_start): buckets of one
	 * device buffer in flight at once, each staged in a pinned block of its
	 * own, waited for last first, equal one host all-reduce of the whole */
	x->be.ops->upload(&x->be, d, h, (size_t)CNT * 4, &x->err);
	check(x, gpt_comm_all_reduce(w, h, ref, CNT, GPT_DTYPE_F32, GPT_REDUCE_SUM, &x->err), "host all-reduce");
	int64_t cut[] = {CNT, CNT - 1000, CNT / 2, 7, 0};
	gpt_comm_req *req[4] = {NULL};
	for (int b = 0; b < 4; b++) {
		char *p = (char *)d + (size_t)cut[b + 1] * 4;
		check(x, gpt_comm_all_reduce_start(w, p, p, cut[b] - cut[b + 1], GPT_DTYPE_F32, GPT_REDUCE_SUM, &req[b],
						   &x->err),
		      "starting a bucket");
	}
	for (int b = 3; b >= 0; b--)
		check(x, gpt_comm_wait(req[b], &x->err), "waiting for a bucket");
	same(x, "asynchronous all-reduce of a device buffer in four buckets", ref, d, (size_t)CNT * 4);
	/* a reduce-scatter into its own input beside a host request */
	x->be.ops->upload(&x->be, d, h, bytes, &x->err);
	check(x, gpt_comm_reduce_scatter(w, h, ref, CNT, GPT_DTYPE_F32, GPT_REDUCE_SUM, &x->err), "host reduce-scatter");
	int32_t one = 1, many = 0;
	check(x, gpt_comm_reduce_scatter_start(w, d, mine, CNT, GPT_DTYPE_F32, GPT_REDUCE_SUM, &req[0], &x->err),
	      "starting a reduce-scatter");
	check(x, gpt_comm_all_reduce_start(w, &one, &many, 1, GPT_DTYPE_I32, GPT_REDUCE_SUM, &req[1], &x->err),
	      "starting a host all-reduce");
	check(x, gpt_comm_wait(req[1], &x->err), "waiting for the host all-reduce");
	check(x, gpt_comm_wait(req[0], &x->err), "waiting for the reduce-scatter");
	same(x, "asynchronous reduce-scatter into its own input", ref, mine, (size_t)CNT * 4);
	if (many != n)
		FAIL(x, "a host request beside a device one gave %d, want %d", many, n);

	/* host values still travel as they are (flags, loss sums) */
	int32_t flag = r == 1;
	check(x, gpt_comm_all_reduce(w, &flag, &flag, 1, GPT_DTYPE_I32, GPT_REDUCE_MAX, &x->err), "flag");
	if (flag != 1)
		FAIL(x, "flag all-reduce gave %d", flag);
	check(x, gpt_comm_barrier(w, &x->err), "barrier");
out:
	if (d)
		x->be.ops->free(&x->be, d);
	if (d2)
		x->be.ops->free(&x->be, d2);
	free(h), free(ref), free(got), free(hb);
}

/* A rank's CUDA context on device 0 and its shm comm over the shared
 * store, buffers in that device's memory allowed; NULL after saying why. */
static gpt_comm *rank_open(rank_ctx *x, int port, gpt_store **st)
{
	gpt_comm *c = NULL;
	gpt_comm_options o = {.backend = "shm", .timeout_s = 600};
	if (gpt_backend_cuda_init(&x->be, GPT_DTYPE_F32, 0, &x->err) ||
	    gpt_store_connect("127.0.0.1", port, 10, 600, st, &x->err) ||
	    gpt_comm_open_store(&c, *st, x->rank, x->n, &o, &x->err)) {
		fprintf(stderr, "rank %d: %s\n", x->rank, x->err.msg);
		return NULL;
	}
	gpt_comm_set_memory(c, &x->be);
	x->w = gpt_comm_world(c);
	return c;
}

static void rank_close(rank_ctx *x, gpt_comm *c, gpt_store *st)
{
	gpt_comm_close(c);
	gpt_store_close(st);
	gpt_backend_cuda_free(&x->be);
}

/* One rank: its own CUDA context on device 0, over the shared store. */
static int rank_main(int r, int n, int port, void *arg)
{
	(void)arg;
	alarm(1200); /* the emulated runtime is slow; a hang must not hang the suite */
	rank_ctx x = {.rank = r, .n = n};
	gpt_store *st = NULL;
	gpt_comm *c = rank_open(&x, port, &st);
	if (!c)
		return 1;
	run_checks(&x);
	rank_close(&x, c, st);
	return x.fail;
}

#ifdef GPT_CUDA_EMU
#include "comm/comm-impl.h"

/* Under the emulator: a device-memory backend (nccl's part, for one rank)
 * gets its buffers on a stream of its own, which waits for nothing queued
 * on the compute stream: when it starts, no device work may be queued that
 * the host has not waited for, such as the copy of a host input into device
 * staging (gpt_cuda_upload returns once that is queued). */
int gpt_emu_device_pending(void); /* tests/gpu/emu/emu.cpp */
static gpt_backend *own_mem;

static int own_stream_start(const char *op, gpt_err *err)
{
	if (gpt_emu_device_pending())
		return gpt_err_set(err, GPT_EINTERNAL,
				   "%s: handed to the device backend while work (a copy in) is still queued on the "
				   "compute stream, which its own stream does not wait for", op);
	return 0;
}

static int own_all_reduce(gpt_group *g, const void *send, void *recv, int64_t count, gpt_dtype t,
			  gpt_reduce_op op, gpt_err *err)
{
	int rc = own_stream_start("all-reduce", err);
	return rc ? rc : own_mem->ops->copy(own_mem, recv, send, (size_t)count * gpt_dtype_size(t), err);
}

static int own_broadcast(gpt_group *g, void *buf, int64_t count, gpt_dtype t, int root, gpt_err *err)
{
	return own_stream_start("broadcast", err);
}

static int own_p2p(gpt_group *g, const gpt_p2p *ops, int n, gpt_dtype t, gpt_err *err)
{
	return own_stream_start("send/recv", err);
}

/* One rank whose world group takes device memory: host values (a flag, a
 * loss sum) staged into it, then a device buffer just written. */
static int device_backend_main(int r, int n, int port, void *arg)
{
	(void)arg;
	alarm(600);
	rank_ctx x = {.rank = r, .n = n};
	gpt_store *st = NULL;
	gpt_comm *c = rank_open(&x, port, &st);
	if (!c)
		return 1;
	gpt_group *w = x.w;
	const gpt_comm_backend *shm = c->be;
	gpt_comm_backend own = *shm;
	own.device_memory = 1;
	own.all_reduce = own_all_reduce;
	own.broadcast = own_broadcast;
	own.p2p = own_p2p;
	own_mem = &x.be;
	c->be = w->be = &own;
	int32_t flag = 41, got = 0;
	check(&x, gpt_comm_all_reduce(w, &flag, &got, 1, GPT_DTYPE_I32, GPT_REDUCE_MAX, &x.err),
	      "a host flag's all-reduce");
	if (!x.fail && got != 41)
		FAIL(&x, "a host flag's all-reduce gave %d, want 41", got);
	int64_t sum = 25;
	check(&x, gpt_comm_broadcast(w, &sum, 1, GPT_DTYPE_I64, 0, &x.err), "a host sum's broadcast");
	float h[3] = {1, 2, 3};
	gpt_p2p send = {.peer = 0, .is_send = 1, .buf = h, .count = 3};
	check(&x, gpt_comm_stage_p2p(w, &send, 1, GPT_DTYPE_F32, &x.err), "a host buffer's send");
	float *d = dev(&x, h, sizeof h);
	check(&x, d ? gpt_comm_all_reduce(w, d, d, 3, GPT_DTYPE_F32, GPT_REDUCE_SUM, &x.err) : 1,
	      "a device buffer's all-reduce");
	if (d)
		x.be.ops->free(&x.be, d);
	/* with no CUDA backend attached nothing can stage a host buffer: the
	 * device backend must not be handed it (gpt-train's first collective
	 * once ran before its backend was attached) */
	gpt_comm_set_memory(c, NULL); /* frees the device staging */
	int32_t lone = 7;
	gpt_err e2 = {0};
	int rc2 = gpt_comm_all_reduce(w, &lone, &lone, 1, GPT_DTYPE_I32, GPT_REDUCE_MAX, &e2);
	if (rc2 != GPT_EUSAGE || !strstr(e2.msg, "host memory") || !strstr(e2.msg, "gpt_comm_set_memory"))
		FAIL(&x, "a host flag's all-reduce with no backend attached: rc %d, '%s'; want a usage error "
			 "naming the host buffer and gpt_comm_set_memory", rc2, e2.msg);
	gpt_comm_req *req = NULL;
	rc2 = gpt_comm_all_reduce_start(w, &lone, &lone, 1, GPT_DTYPE_I32, GPT_REDUCE_MAX, &req, &e2);
	if (rc2 != GPT_EUSAGE || req)
		FAIL(&x, "a host flag's asynchronous all-reduce with no backend attached: rc %d, '%s'", rc2, e2.msg);
	gpt_comm_wait(req, &e2);
	gpt_comm_set_memory(c, &x.be);
	gpt_comm_stage_free(c); /* device staging, as its backend made it */
	c->be = w->be = shm;
	rank_close(&x, c, st);
	return x.fail;
}
#endif

int main(void)
{
	if (count_devices() == 0)
		return skip_all("no CUDA device (the shm backend's staging of device buffers needs one)");
	is_int(test_run_ranks(RANKS, 1300, rank_main, NULL), 0,
	       "%d ranks on device 0 over shm: device, mixed and aliased buffers, synchronous and "
	       "asynchronous, give the host bits", RANKS);
#ifdef GPT_CUDA_EMU
	is_int(test_run_ranks(1, 600, device_backend_main, NULL), 0,
	       "a device-memory backend (nccl's part) starts after its staged host inputs have landed");
#endif
	return done_testing();
}
