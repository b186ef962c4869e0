/* lib/comm: the asynchronous collectives (gpt_comm_all_reduce_start,
 * gpt_comm_reduce_scatter_start, gpt_comm_reduce_scatter_v_start,
 * gpt_comm_wait) over shm. Forks N ranks
 * around a local store: several requests in flight on two groups at once,
 * waited for in reverse order, mixed with synchronous calls on the same
 * groups, equal the serial result bit for bit; a buffer reduced in uneven
 * buckets equals one synchronous all-reduce of the whole; bad arguments,
 * and a peer that dies or never arrives with requests in flight. */
#include "comm/comm.h"
#include "comm-check.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- several requests in flight --------------------------------------------------- */

#define NREQ 6

enum { ALL_REDUCE, SCATTER, SCATTER_V };

/* One request of the batch: what it reduces and what it must give. */
typedef struct job {
	int kind;
	gpt_group *g;
	int gn, gr;    /* the group's size and this rank's place in it */
	int64_t count; /* the result's elements */
	int64_t pc[8]; /* SCATTER_V: the members' pieces */
	int64_t at;    /* where the result starts in the reduction of all of it */
	void **in;  /* every member's input (in[gr] is this rank's) */
	void *got, *want;
	gpt_comm_req *req;
} job;

static int rank_inflight(rank_ctx *x)
{
	gpt_err err = {0};
	gpt_comm *c = NULL;
	int fail = 0, n = x->n, me = x->rank;
	if (open_comm(x, &c, &err)) {
		fprintf(stderr, "rank %d: %s\n", me, err.msg);
		return 1;
	}
	gpt_group *w = gpt_comm_world(c), *half = NULL;
	/* a second group: the even and the odd ranks */
	if (gpt_group_split(w, me % 2, me, "half", &half, &err)) {
		fprintf(stderr, "rank %d: %s\n", me, err.msg);
		return 1;
	}
	/* sizes: empty, one, odd, and several shm slots' worth */
	int64_t counts[NREQ] = {0, 1, 1001, 300000, 77, 140001};
	int tag = 0;
	for (int d = 0; d < NDT; d++) {
		gpt_dtype t = dtypes[d];
		size_t es = gpt_dtype_size(t);
		for (int op = 0; op < 2; op++) {
			job jobs[NREQ];
			for (int k = 0; k < NREQ; k++) {
				job *j = &jobs[k];
				j->kind = k == 2 ? SCATTER : k == 5 ? SCATTER_V : ALL_REDUCE;
				j->g = k % 2 && j->kind != SCATTER_V ? half : w;
				j->gn = j->g->size;
				j->gr = j->g->rank;
				j->count = j->kind == SCATTER ? counts[k] / 4 + 1 : counts[k];
				j->at = j->kind == SCATTER ? j->gr * j->count : 0;
				int64_t total = j->kind == SCATTER ? j->count * j->gn : j->count;
				if (j->kind == SCATTER_V) { /* uneven pieces (over 2 ranks, one empty) */
					total = 0;
					for (int r = 0; r < j->gn; r++) {
						j->pc[r] = r == 1 && j->gn > 2 ? 0 : counts[k] / (r + 1);
						j->at += r < j->gr ? j->pc[r] : 0;
						total += j->pc[r];
					}
					j->count = j->pc[j->gr];
				}
				/* the members of a group draw from one tag; the two halves differ */
				j->in = all_inputs(j->gn, t, ++tag * 2 + (j->g == half ? me % 2 : 0), total);
				j->want = malloc((size_t)(total + 1) * es);
				serial_reduce(j->want, j->in, j->gn, total, t, (gpt_reduce_op)op);
				/* in place for the even requests, as the trainer's buckets are */
				int inplace = (k % 2 == 0 && j->kind == ALL_REDUCE) || j->kind == SCATTER_V;
				j->got = inplace ? j->in[j->gr] : malloc((size_t)(total + 1) * es);
				int rc = j->kind == SCATTER
					? gpt_comm_reduce_scatter_start(j->g, j->in[j->gr], j->got, j->count, t,
									(gpt_reduce_op)op, &j->req, &err)
					: j->kind == SCATTER_V
					? gpt_comm_reduce_scatter_v_start(j->g, j->got, j->pc, t, (gpt_reduce_op)op, &j->req, &err)
					: gpt_comm_all_reduce_start(j->g, j->in[j->gr], j->got, j->count, t,
								    (gpt_reduce_op)op, &j->req, &err);
				CHECK(rc == 0 && j->req, "start %d: %s", k, err.msg);
				if (k == 3) {
					/* a synchronous call on a group with requests in flight
					 * comes after them, on every rank */
					int64_t one = 1, sum = 0;
					rc = gpt_comm_all_reduce(w, &one, &sum, 1, GPT_DTYPE_I64, GPT_REDUCE_SUM, &err);
					CHECK(rc == 0 && sum == n, "a synchronous all-reduce among requests: %s", err.msg);
				}
			}
			/* out of order: last first */
			for (int k = NREQ - 1; k >= 0; k--) {
				job *j = &jobs[k];
				int rc = gpt_comm_wait(j->req, &err);
				size_t off = (size_t)j->at * es, gin = j->kind == SCATTER_V ? off : 0;
				CHECK(rc == 0 && memcmp((char *)j->got + gin, (char *)j->want + off, (size_t)j->count * es) == 0,
				      "%s %s %s of %lld (request %d, group %s) differs from the serial result (%s)",
				      j->kind == SCATTER	? "reduce-scatter"
				      : j->kind == SCATTER_V ? "uneven reduce-scatter"
							     : "all-reduce",
				      op ? "max" : "sum", gpt_dtype_name(t),
				      (long long)j->count, k, j->g->name, rc ? err.msg : "");
				if (j->got != j->in[j->gr])
					free(j->got);
				free(j->want);
				free_inputs(j->in, j->gn);
			}
		}
	}
	CHECK(gpt_comm_wait(NULL, &err) == 0, "waiting for no request");
	gpt_group_free(half);
	gpt_comm_close(c);
	return fail;
}

/* ---- buckets equal the whole ------------------------------------------------------------ */

static int rank_buckets(rank_ctx *x)
{
	gpt_err err = {0};
	gpt_comm *c = NULL;
	int fail = 0, n = x->n, me = x->rank;
	if (open_comm(x, &c, &err))
		return 1;
	gpt_group *w = gpt_comm_world(c);
	const gpt_dtype ts[] = {GPT_DTYPE_F32, GPT_DTYPE_BF16};
	for (int d = 0; d < 2; d++) {
		gpt_dtype t = ts[d];
		size_t es = gpt_dtype_size(t);
		int64_t total = 400003;
		void **in = all_inputs(n, t, 50 + d, total);
		void *whole = malloc((size_t)total * es);
		memcpy(whole, in[me], (size_t)total * es);
		int rc = gpt_comm_all_reduce(w, whole, whole, total, t, GPT_REDUCE_SUM, &err);
		CHECK(rc == 0, "the whole: %s", err.msg);
		/* from the end towards the start, as the backward finishes them */
		int64_t cut[] = {400003, 399000, 262145, 131072, 131071, 5, 0};
		gpt_comm_req *req[6];
		for (int b = 0; b < 6; b++) {
			char *p = (char *)in[me] + (size_t)cut[b + 1] * es;
			rc = gpt_comm_all_reduce_start(w, p, p, cut[b] - cut[b + 1], t, GPT_REDUCE_SUM, &req[b], &err);
			CHECK(rc == 0, "bucket %d: %s", b, err.msg);
		}
		for (int b = 0; b < 6; b++)
			CHECK(gpt_comm_wait(req[b], &err) == 0, "bucket %d: %s", b, err.msg);
		CHECK(memcmp(in[me], whole, (size_t)total * es) == 0,
		      "%s: six uneven buckets differ from one all-reduce of the whole", gpt_dtype_name(t));
		free(whole);
		free_inputs(in, n);
	}
	gpt_comm_close(c);
	return fail;
}

/* ---- errors ---------------------------------------------------------------------------------- */

static int rank_args(rank_ctx *x)
{
	gpt_err err = {0};
	gpt_comm *c = NULL;
	int fail = 0;
	if (open_comm(x, &c, &err))
		return 1;
	gpt_group *w = gpt_comm_world(c);
	float v[4] = {0};
	gpt_comm_req *r = (gpt_comm_req *)v;
	int rc = gpt_comm_all_reduce_start(w, v, v, -1, GPT_DTYPE_F32, GPT_REDUCE_SUM, &r, &err);
	CHECK(rc == GPT_EUSAGE && !r && strstr(err.msg, "group world: all-reduce of -1 elements"),
	      "a negative count: %d %s", rc, err.msg);
	rc = gpt_comm_reduce_scatter_start(w, v, v, 1, GPT_DTYPE_I8, GPT_REDUCE_SUM, &r, &err);
	CHECK(rc == GPT_EUSAGE && !r && strstr(err.msg, "reduce-scatter: dtype"), "an unsupported dtype: %d %s", rc,
	      err.msg);
	int64_t pc[2] = {1, -1};
	rc = gpt_comm_reduce_scatter_v_start(w, v, pc, GPT_DTYPE_F32, GPT_REDUCE_SUM, &r, &err);
	CHECK(rc == GPT_EUSAGE && !r && strstr(err.msg, "group world: reduce-scatter: rank 1's piece has -1 elements"),
	      "a negative piece: %d %s", rc, err.msg);
	/* the group is still whole after a refused start */
	v[0] = 1;
	rc = gpt_comm_all_reduce_start(w, v, v, 1, GPT_DTYPE_F32, GPT_REDUCE_SUM, &r, &err);
	CHECK(rc == 0 && gpt_comm_wait(r, &err) == 0 && v[0] == (float)x->n, "a request after refused ones: %s",
	      err.msg);
	gpt_comm_close(c);
	return fail;
}

enum { PEER_DIES, PEER_SKIPS };

static int rank_peer_fails(rank_ctx *x)
{
	int mode = *(int *)x->arg, fail = 0, victim = x->n - 1;
	gpt_err err = {0};
	gpt_comm *c = NULL;
	if (open_comm(x, &c, &err))
		return 1;
	gpt_group *w = gpt_comm_world(c);
	float a[64] = {0}, b[64] = {0};
	gpt_comm_req *r1 = NULL, *r2 = NULL;
	int rc = gpt_comm_all_reduce_start(w, a, a, 64, GPT_DTYPE_F32, GPT_REDUCE_SUM, &r1, &err);
	CHECK(rc == 0 && gpt_comm_wait(r1, &err) == 0, "the first request: %s", err.msg);
	if (x->rank == victim) {
		if (mode == PEER_SKIPS)
			sleep(2);
		gpt_comm_close(c);
		return fail;
	}
	double t0 = gpt_now_s();
	rc = gpt_comm_all_reduce_start(w, a, a, 64, GPT_DTYPE_F32, GPT_REDUCE_SUM, &r1, &err);
	CHECK(rc == 0, "start: %s", err.msg);
	rc = gpt_comm_all_reduce_start(w, b, b, 64, GPT_DTYPE_F32, GPT_REDUCE_SUM, &r2, &err);
	CHECK(rc == 0, "a second start: %s", err.msg);
	rc = gpt_comm_wait(r1, &err);
	double dt = gpt_now_s() - t0;
	if (mode == PEER_DIES)
		CHECK(rc == GPT_EIO && strstr(err.msg, "group world: all-reduce: rank 2 (world 2) exited without arriving") &&
			      dt < 5,
		      "a dead peer is not found quickly (%.1f s): %s", dt, err.msg);
	else
		CHECK(rc == GPT_EIO && strstr(err.msg, "group world: all-reduce timed out after 0.5 s waiting for ranks 2 (world 2)"),
		      "a peer that skips is not named: %s", err.msg);
	/* the request queued behind it is not run, and says why */
	rc = gpt_comm_wait(r2, &err);
	CHECK(rc == GPT_EIO && strstr(err.msg, "not run: group world: all-reduce"), "the request behind: %s", err.msg);
	rc = gpt_comm_all_reduce_start(w, a, a, 64, GPT_DTYPE_F32, GPT_REDUCE_SUM, &r1, &err);
	CHECK(rc == GPT_EIO && !r1 && strstr(err.msg, "unusable after an earlier failure"), "a start after: %s", err.msg);
	rc = gpt_comm_barrier(w, &err);
	CHECK(rc == GPT_EIO && strstr(err.msg, "group world: barrier: unusable"), "a barrier after: %s", err.msg);
	gpt_comm_close(c);
	return fail;
}

int main(void)
{
	int sizes[] = {2, 3, 4};
	for (int i = 0; i < 3; i++)
		is_int(run_ranks(sizes[i], 60, rank_inflight, NULL), 0,
		       "%d ranks: six all-reduce and (even, uneven) reduce-scatter requests in flight on two groups (sum, max; "
		       "fp32/bf16/fp16/int32/int64), a synchronous call among them, waited for last first: "
		       "the serial result bit for bit", sizes[i]);
	is_int(run_ranks(3, 60, rank_buckets, NULL), 0,
	       "3 ranks: a buffer reduced in six uneven buckets equals one all-reduce of the whole (fp32, bf16)");
	is_int(run_ranks(2, 60, rank_args, NULL), 0, "bad counts and dtypes are refused and leave the group usable");
	int mode = PEER_DIES;
	is_int(run_ranks(3, 30, rank_peer_fails, &mode), 0,
	       "a peer that exits with requests in flight: the wait names it within seconds, the next request is not run, the group is unusable");
	mode = PEER_SKIPS;
	is_int(run_ranks(3, 0.5, rank_peer_fails, &mode), 0, "a peer that never starts the request: a timeout naming it");
	return done_testing();
}
