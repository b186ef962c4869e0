/* lib/comm's nccl backend on real GPUs: one forked rank per visible device
 * around a local store; every collective on device buffers checked against
 * a host computation (integers and max exactly, float sums within a
 * tolerance, since NCCL sums in its own order); groups split from a mesh;
 * a rank that skips a collective makes the others fail with a timeout
 * instead of hanging. Skips where there is no GPU. */
#include "comm/comm.h"
#include "cuda/cuda.h"
#include "../unit/ranks.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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

typedef int (*rank_fn)(gpt_comm *c, int rank, int n, void *arg);

typedef struct run_arg {
	rank_fn fn;
	void *arg;
	double timeout;
} run_arg;

/* One rank on device `rank`, over the shared store. */
static int rank_main(int r, int n, int port, void *arg)
{
	const run_arg *ra = arg;
	alarm(300); /* a hang in NCCL itself must not hang the suite */
	gpt_err err = {0};
	gpt_store *st = NULL;
	gpt_comm *c = NULL;
	gpt_comm_options o = {.backend = "nccl", .timeout_s = ra->timeout, .device = r};
	if (gpt_store_connect("127.0.0.1", port, 10, ra->timeout, &st, &err) ||
	    gpt_comm_open_store(&c, st, r, n, &o, &err)) {
		fprintf(stderr, "rank %d: %s\n", r, err.msg);
		return 1;
	}
	int rc = ra->fn(c, r, n, ra->arg);
	gpt_comm_close(c);
	gpt_store_close(st);
	return rc;
}

static int run_ranks(int n, const run_arg *ra)
{
	return test_run_ranks(n, 400, rank_main, (void *)ra);
}

static float value(int r, int64_t i)
{
	return (float)(((int)((i * 7919 + r * 104729) % 2001) - 1000) * 0.01);
}

#define FAIL(...) (fprintf(stderr, "rank %d: ", rank), fprintf(stderr, __VA_ARGS__), fprintf(stderr, "\n"), fail = 1)

static int rank_collectives(gpt_comm *c, int rank, int n, void *arg)
{
	gpt_err err = {0};
	gpt_group *w = gpt_comm_world(c);
	int fail = 0;
	const int64_t cnt = 100003;
	size_t bytes = (size_t)cnt * n * 4;
	float *h = malloc(bytes), *got = malloc(bytes);
	int32_t *hi = malloc(bytes), *goti = malloc(bytes);
	void *d = gpt_cuda_malloc(bytes, "send", &err), *d2 = gpt_cuda_malloc(bytes, "recv", &err);
	if (!d || !d2)
		return fprintf(stderr, "rank %d: %s\n", rank, err.msg), 1;
	for (int64_t i = 0; i < cnt * n; i++) {
		h[i] = value(rank, i);
		hi[i] = (int32_t)(i * 31 + rank);
	}
	/* all-reduce sum, fp32: within rounding of the serial sum */
	gpt_cuda_memcpy(d, h, (size_t)cnt * 4, 0, &err);
	if (gpt_comm_all_reduce(w, d, d2, cnt, GPT_DTYPE_F32, GPT_REDUCE_SUM, &err))
		FAIL("all-reduce: %s", err.msg);
	gpt_cuda_memcpy(got, d2, (size_t)cnt * 4, 1, &err);
	for (int64_t i = 0; i < cnt && !fail; i++) {
		double s = 0;
		for (int r = 0; r < n; r++)
			s += value(r, i);
		if (fabs(got[i] - s) > 1e-4 * (1 + fabs(s)))
			FAIL("all-reduce sum [%lld] = %g, want %g", (long long)i, got[i], s);
	}
	/* all-reduce max, int32: exact */
	gpt_cuda_memcpy(d, hi, (size_t)cnt * 4, 0, &err);
	if (gpt_comm_all_reduce(w, d, d2, cnt, GPT_DTYPE_I32, GPT_REDUCE_MAX, &err))
		FAIL("all-reduce max: %s", err.msg);
	gpt_cuda_memcpy(goti, d2, (size_t)cnt * 4, 1, &err);
	for (int64_t i = 0; i < cnt && !fail; i++)
		if (goti[i] != (int32_t)(i * 31 + n - 1))
			FAIL("all-reduce max [%lld] = %d", (long long)i, goti[i]);
	/* reduce-scatter sum, int32: block `rank` of the sum */
	gpt_cuda_memcpy(d, hi, bytes, 0, &err);
	if (gpt_comm_reduce_scatter(w, d, d2, cnt, GPT_DTYPE_I32, GPT_REDUCE_SUM, &err))
		FAIL("reduce-scatter: %s", err.msg);
	gpt_cuda_memcpy(goti, d2, (size_t)cnt * 4, 1, &err);
	for (int64_t i = 0; i < cnt && !fail; i++) {
		int64_t j = rank * cnt + i, s = 0;
		for (int r = 0; r < n; r++)
			s += j * 31 + r;
		if (goti[i] != (int32_t)s)
			FAIL("reduce-scatter [%lld] = %d, want %lld", (long long)i, goti[i], (long long)s);
	}
	/* the uneven pair in place, int32 (exact): pieces of one buffer, rank
	 * 0's empty; then the same reduce-scatter started asynchronously */
	int64_t pc[n], at = 0, tot = 0;
	for (int q = 0; q < n; q++) {
		pc[q] = q == 0 && n > 1 ? 0 : cnt / (q + 1);
		at += q < rank ? pc[q] : 0;
		tot += pc[q];
	}
	for (int pass = 0; pass < 2; pass++) {
		gpt_cuda_memcpy(d, hi, (size_t)tot * 4, 0, &err);
		gpt_comm_req *req = NULL;
		if (pass ? gpt_comm_reduce_scatter_v_start(w, d, pc, GPT_DTYPE_I32, GPT_REDUCE_SUM, &req, &err) ||
				   gpt_comm_wait(req, &err)
			 : gpt_comm_reduce_scatter_v(w, d, pc, GPT_DTYPE_I32, GPT_REDUCE_SUM, &err))
			FAIL("uneven reduce-scatter%s: %s", pass ? " (asynchronous)" : "", err.msg);
		gpt_cuda_memcpy(goti, (char *)d + (size_t)at * 4, (size_t)pc[rank] * 4, 1, &err);
		for (int64_t i = 0; i < pc[rank] && !fail; i++) {
			int64_t j = at + i, s = 0;
			for (int r = 0; r < n; r++)
				s += j * 31 + r;
			if (goti[i] != (int32_t)s)
				FAIL("uneven reduce-scatter [%lld] = %d, want %lld", (long long)j, goti[i], (long long)s);
		}
	}
	for (int64_t i = 0; i < tot; i++)
		goti[i] = -1;
	gpt_cuda_memcpy(d, goti, (size_t)tot * 4, 0, &err);
	gpt_cuda_memcpy((char *)d + (size_t)at * 4, hi + at, (size_t)pc[rank] * 4, 0, &err);
	if (gpt_comm_all_gather_v(w, d, pc, GPT_DTYPE_I32, &err))
		FAIL("uneven all-gather: %s", err.msg);
	gpt_cuda_memcpy(goti, d, (size_t)tot * 4, 1, &err);
	int64_t o = 0;
	for (int q = 0; q < n && !fail; o += pc[q], q++)
		for (int64_t i = o; i < o + pc[q] && !fail; i++)
			if (goti[i] != (int32_t)(i * 31 + q))
				FAIL("uneven all-gather piece %d [%lld] = %d", q, (long long)i, goti[i]);
	/* all-gather and broadcast, fp32: exact */
	gpt_cuda_memcpy(d, h, (size_t)cnt * 4, 0, &err);
	if (gpt_comm_all_gather(w, d, d2, cnt, GPT_DTYPE_F32, &err))
		FAIL("all-gather: %s", err.msg);
	gpt_cuda_memcpy(got, d2, bytes, 1, &err);
	for (int r = 0; r < n && !fail; r++)
		for (int64_t i = 0; i < cnt && !fail; i++)
			if (got[r * cnt + i] != value(r, i))
				FAIL("all-gather block %d [%lld]", r, (long long)i);
	if (gpt_comm_broadcast(w, d, cnt, GPT_DTYPE_F32, n - 1, &err))
		FAIL("broadcast: %s", err.msg);
	gpt_cuda_memcpy(got, d, (size_t)cnt * 4, 1, &err);
	for (int64_t i = 0; i < cnt && !fail; i++)
		if (got[i] != value(n - 1, i))
			FAIL("broadcast [%lld]", (long long)i);
	/* a ring shift in one batch */
	if (n > 1) {
		gpt_cuda_memcpy(d, h, (size_t)cnt * 4, 0, &err);
		gpt_p2p ops[2] = {{(rank + 1) % n, 1, d, cnt}, {(rank + n - 1) % n, 0, d2, cnt}};
		if (gpt_comm_p2p(w, ops, 2, GPT_DTYPE_F32, &err))
			FAIL("send/recv: %s", err.msg);
		gpt_cuda_memcpy(got, d2, (size_t)cnt * 4, 1, &err);
		for (int64_t i = 0; i < cnt && !fail; i++)
			if (got[i] != value((rank + n - 1) % n, i))
				FAIL("ring shift [%lld]", (long long)i);
	}
	if (gpt_comm_barrier(w, &err))
		FAIL("barrier: %s", err.msg);
	/* groups split from a mesh: tp over all ranks, then pp pairs when even */
	gpt_mesh m;
	gpt_mesh_groups mg;
	int tp = n % 2 == 0 ? n / 2 : n, pp = n / tp;
	if (gpt_mesh_init(&m, tp, 1, 1, pp, n, &err) || gpt_mesh_groups_init(&mg, w, &m, &err)) {
		FAIL("mesh groups: %s", err.msg);
	} else {
		gpt_group *g = mg.g[GPT_MESH_TP];
		int32_t one = rank + 1, sum = 0;
		gpt_cuda_memcpy(d, &one, 4, 0, &err);
		if (gpt_comm_all_reduce(g, d, d2, 1, GPT_DTYPE_I32, GPT_REDUCE_SUM, &err))
			FAIL("tp all-reduce: %s", err.msg);
		gpt_cuda_memcpy(&sum, d2, 4, 1, &err);
		int32_t want = 0;
		for (int i = 0; i < g->size; i++)
			want += g->ranks[i] + 1;
		if (sum != want)
			FAIL("tp group %s: sum %d, want %d", g->name, sum, want);
		gpt_mesh_groups_free(&mg);
	}
	gpt_cuda_free(d);
	gpt_cuda_free(d2);
	free(h), free(got), free(hi), free(goti);
	(void)arg;
	return fail;
}

static int rank_skip(gpt_comm *c, int rank, int n, void *arg)
{
	gpt_err err = {0};
	int fail = 0;
	void *d = gpt_cuda_malloc(4096, "buf", &err);
	if (rank == n - 1) {
		sleep(4);
		return 0;
	}
	gpt_comm_world(c)->timeout_s = 1;
	int rc = gpt_comm_all_reduce(gpt_comm_world(c), d, d, 1024, GPT_DTYPE_F32, GPT_REDUCE_SUM, &err);
	if (rc != GPT_EIO || !strstr(err.msg, "nccl group world: all-reduce did not complete within 1 s"))
		FAIL("a skipped collective did not time out: %s", err.msg);
	(void)arg;
	return fail;
}

int main(void)
{
	int n = count_devices();
	if (n == 0)
		return skip_all("no CUDA device");
	run_arg all = {rank_collectives, NULL, 120};
	is_int(run_ranks(n, &all), 0, "%d GPU rank%s: all-reduce, reduce-scatter, all-gather, broadcast, send/recv, barrier, mesh groups",
	       n, n == 1 ? "" : "s");
	if (n > 1) {
		run_arg skip = {rank_skip, NULL, 60};
		is_int(run_ranks(n, &skip), 0, "a rank that skips a collective: the others time out and say so");
	}
	return done_testing();
}
