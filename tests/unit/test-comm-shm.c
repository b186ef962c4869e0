/* lib/comm: the shm backend. Forks N ranks around a local store and checks
 * every collective (the uneven in-place pair too), for every dtype, bit for
 * bit against a serial computation; groups split from meshes; timeouts and
 * dead peers.
 *
 * Run as `test-comm-shm worker` it is one worker under gpt-launch (or srun,
 * mpirun): it finds its rank in the environment, all-reduces rank + 1 over
 * the world and prints "rank R of W: sum S"; with GPT_TEST_MESH=tp,sh,dp,pp it
 * also builds that mesh's groups and all-reduces in each. `test-comm-shm
 * free-port` prints a TCP port that was free a moment ago. */
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

/* ---- collectives against the serial reference ------------------------------------ */

typedef struct coll_arg {
	int big; /* also sizes that need several slot-sized chunks */
} coll_arg;

/* Pieces of an uneven collective over n ranks, case k of a buffer of about
 * cnt elements a rank: some ranks have none, the others differ in size. */
static void uneven_pieces(int64_t *pc, int n, int k, int64_t cnt)
{
	for (int r = 0; r < n; r++)
		pc[r] = (r + k) % 3 == 1 ? 0 : cnt / 2 + r * 7;
}

static int rank_collectives(rank_ctx *x)
{
	const coll_arg *a = x->arg;
	gpt_err err = {0};
	gpt_comm *c = NULL;
	int fail = 0, n = x->n, me = x->rank;
	if (open_comm(x, &c, &err)) {
		fprintf(stderr, "rank %d: %s\n", me, err.msg);
		return 1;
	}
	gpt_group *w = gpt_comm_world(c);
	int64_t counts[] = {0, 1, 1000, a->big ? 140000 : 0};
	int tag = 0;
	for (int d = 0; d < NDT; d++) {
		gpt_dtype t = dtypes[d];
		size_t es = gpt_dtype_size(t);
		for (int op = 0; op < 2; op++)
			for (int k = 0; k < 4; k++) {
				int64_t cnt = counts[k];
				if (k == 3 && !cnt)
					continue;
				tag++;
				/* all-reduce, out of place and in place */
				void **in = all_inputs(n, t, tag, cnt);
				void *want = malloc((size_t)(cnt + 1) * es), *got = malloc((size_t)(cnt + 1) * es);
				serial_reduce(want, in, n, cnt, t, (gpt_reduce_op)op);
				int rc = gpt_comm_all_reduce(w, in[me], got, cnt, t, (gpt_reduce_op)op, &err);
				CHECK(rc == 0 && memcmp(got, want, (size_t)cnt * es) == 0,
				      "all-reduce %s %s of %lld differs from the serial result (%s)",
				      op ? "max" : "sum", gpt_dtype_name(t), (long long)cnt, rc ? err.msg : "");
				rc = gpt_comm_all_reduce(w, in[me], in[me], cnt, t, (gpt_reduce_op)op, &err);
				CHECK(rc == 0 && memcmp(in[me], want, (size_t)cnt * es) == 0,
				      "in-place all-reduce %s %s of %lld differs", op ? "max" : "sum",
				      gpt_dtype_name(t), (long long)cnt);
				free_inputs(in, n);
				free(want), free(got);

				/* reduce-scatter: rank r gets the reduction of block r */
				int64_t rcnt = k == 3 ? 50000 : cnt / 3 + (k > 0);
				in = all_inputs(n, t, ++tag, rcnt * n);
				want = malloc((size_t)(rcnt * n + 1) * es);
				got = malloc((size_t)(rcnt + 1) * es);
				serial_reduce(want, in, n, rcnt * n, t, (gpt_reduce_op)op);
				rc = gpt_comm_reduce_scatter(w, in[me], got, rcnt, t, (gpt_reduce_op)op, &err);
				CHECK(rc == 0 && memcmp(got, (uint8_t *)want + (size_t)(me * rcnt) * es, (size_t)rcnt * es) == 0,
				      "reduce-scatter %s %s of %lld per rank differs (%s)", op ? "max" : "sum",
				      gpt_dtype_name(t), (long long)rcnt, rc ? err.msg : "");
				/* in place, as ZeRO does it: recv is this rank's block of send */
				rc = gpt_comm_reduce_scatter(w, in[me], (uint8_t *)in[me] + (size_t)(me * rcnt) * es, rcnt, t,
							     (gpt_reduce_op)op, &err);
				CHECK(rc == 0 && memcmp((uint8_t *)in[me] + (size_t)(me * rcnt) * es,
							(uint8_t *)want + (size_t)(me * rcnt) * es, (size_t)rcnt * es) == 0,
				      "in-place reduce-scatter %s %s of %lld per rank differs", op ? "max" : "sum",
				      gpt_dtype_name(t), (long long)rcnt);
				free_inputs(in, n);
				free(want), free(got);

				/* uneven reduce-scatter in place: this rank's piece */
				int64_t pc[n], at = 0, tot = 0;
				uneven_pieces(pc, n, k, cnt);
				for (int r = 0; r < n; r++)
					at += r < me ? pc[r] : 0, tot += pc[r];
				in = all_inputs(n, t, ++tag, tot);
				want = malloc((size_t)(tot + 1) * es);
				serial_reduce(want, in, n, tot, t, (gpt_reduce_op)op);
				rc = gpt_comm_reduce_scatter_v(w, in[me], pc, t, (gpt_reduce_op)op, &err);
				CHECK(rc == 0 && memcmp((uint8_t *)in[me] + (size_t)at * es, (uint8_t *)want + (size_t)at * es,
							(size_t)pc[me] * es) == 0,
				      "uneven reduce-scatter %s %s of %lld (piece %lld) differs (%s)", op ? "max" : "sum",
				      gpt_dtype_name(t), (long long)tot, (long long)pc[me], rc ? err.msg : "");
				free_inputs(in, n);
				free(want);
			}
		/* uneven all-gather in place: every piece from its owner */
		for (int k = 0; k < 4; k++) {
			int64_t pc[n], at = 0, tot = 0;
			uneven_pieces(pc, n, k, counts[k] ? counts[k] : 140000 * a->big);
			for (int r = 0; r < n; r++)
				at += r < me ? pc[r] : 0, tot += pc[r];
			void **in = all_inputs(n, t, ++tag, tot);
			uint8_t *got = malloc((size_t)(tot + 1) * es);
			memset(got, 0xab, (size_t)tot * es);
			memcpy(got + (size_t)at * es, (uint8_t *)in[me] + (size_t)at * es, (size_t)pc[me] * es);
			int rc = gpt_comm_all_gather_v(w, got, pc, t, &err);
			int same = rc == 0;
			int64_t o = 0;
			for (int r = 0; r < n && same; o += pc[r], r++)
				same = memcmp(got + (size_t)o * es, (uint8_t *)in[r] + (size_t)o * es, (size_t)pc[r] * es) == 0;
			CHECK(same, "uneven all-gather %s of %lld differs (%s)", gpt_dtype_name(t), (long long)tot,
			      rc ? err.msg : "");
			free_inputs(in, n);
			free(got);
		}
		/* all-gather, broadcast from every root */
		for (int k = 0; k < 4; k++) {
			int64_t cnt = counts[k];
			if (k == 3 && !cnt)
				continue;
			void **in = all_inputs(n, t, ++tag, cnt);
			uint8_t *got = malloc((size_t)(cnt * n + 1) * es);
			int rc = gpt_comm_all_gather(w, in[me], got, cnt, t, &err);
			int same = rc == 0;
			for (int r = 0; r < n && same; r++)
				same = memcmp(got + (size_t)(r * cnt) * es, in[r], (size_t)cnt * es) == 0;
			CHECK(same, "all-gather %s of %lld differs (%s)", gpt_dtype_name(t), (long long)cnt, rc ? err.msg : "");
			for (int root = 0; root < n; root++) {
				memcpy(got, in[me], (size_t)cnt * es);
				rc = gpt_comm_broadcast(w, got, cnt, t, root, &err);
				CHECK(rc == 0 && memcmp(got, in[root], (size_t)cnt * es) == 0,
				      "broadcast %s of %lld from %d differs", gpt_dtype_name(t), (long long)cnt, root);
			}
			free_inputs(in, n);
			free(got);
		}
	}
	for (int i = 0; i < 20; i++)
		CHECK(gpt_comm_barrier(w, &err) == 0, "barrier %d: %s", i, err.msg);
	gpt_comm_close(c);
	return fail;
}

/* ---- send/recv --------------------------------------------------------------------- */

static int rank_p2p(rank_ctx *x)
{
	gpt_err err = {0};
	gpt_comm *c = NULL;
	int fail = 0, n = x->n, me = x->rank;
	if (open_comm(x, &c, &err)) {
		fprintf(stderr, "rank %d: %s\n", me, err.msg);
		return 1;
	}
	gpt_group *w = gpt_comm_world(c);
	/* A ring shift larger than the rings: both directions in one batch. */
	int64_t cnt = 200000;
	void **in = all_inputs(n, GPT_DTYPE_F32, 77, cnt);
	float *got = malloc((size_t)cnt * 4);
	CHECK(gpt_comm_send(w, got, 1, GPT_DTYPE_F32, me, &err) == GPT_EUSAGE, "send to oneself accepted");
	int next = (me + 1) % n, prev = (me + n - 1) % n;
	gpt_p2p ops[2] = {{next, 1, in[me], cnt}, {prev, 0, got, cnt}};
	int rc = gpt_comm_p2p(w, ops, 2, GPT_DTYPE_F32, &err);
	CHECK(rc == 0 && memcmp(got, in[prev], (size_t)cnt * 4) == 0, "ring shift differs (%s)", rc ? err.msg : "");
	/* Two messages to one peer keep their order. */
	if (me < 2) {
		int64_t a[3] = {1, 2, 3}, b[2] = {4, 5}, ra[3] = {0}, rb[2] = {0};
		if (me == 0) {
			gpt_p2p two[2] = {{1, 1, a, 3}, {1, 1, b, 2}};
			rc = gpt_comm_p2p(w, two, 2, GPT_DTYPE_I64, &err);
		} else {
			rc = gpt_comm_recv(w, ra, 3, GPT_DTYPE_I64, 0, &err);
			if (!rc)
				rc = gpt_comm_recv(w, rb, 2, GPT_DTYPE_I64, 0, &err);
			CHECK(!rc && ra[0] == 1 && ra[2] == 3 && rb[0] == 4 && rb[1] == 5, "ordered messages arrived wrong");
		}
		CHECK(rc == 0, "ordered messages: %s", err.msg);
	}
	/* A receiver that expects a different count finds out. */
	if (me == 0) {
		int32_t v[10] = {0};
		CHECK(gpt_comm_send(w, v, 10, GPT_DTYPE_I32, 1, &err) == 0, "send of 10: %s", err.msg);
	} else if (me == 1) {
		int32_t v[20];
		rc = gpt_comm_recv(w, v, 20, GPT_DTYPE_I32, 0, &err);
		CHECK(rc == GPT_EDATA && strstr(err.msg, "group world: recv from rank 0 (world 0): it sent 40 bytes"),
		      "count mismatch not reported: %s", err.msg);
		CHECK(gpt_comm_barrier(w, &err) == GPT_EIO && strstr(err.msg, "unusable after an earlier failure"),
		      "a broken group refuses further calls: %s", err.msg);
	}
	free_inputs(in, n);
	free(got);
	gpt_comm_close(c);
	return fail;
}

/* ---- mesh groups -------------------------------------------------------------------- */

/* All-reduces world rank + 1 in every group of the mesh and checks the sum
 * and the membership against gpt_mesh_group. Shared with worker mode. */
static int check_mesh_groups(gpt_group *w, const gpt_mesh *m, int verbose, gpt_err *err)
{
	gpt_mesh_groups mg;
	int rc = gpt_mesh_groups_init(&mg, w, m, err);
	if (rc)
		return rc;
	int ranks[64];
	for (int a = 0; a < GPT_MESH_AXES && !rc; a++) {
		int n = 0;
		gpt_mesh_group(m, (gpt_mesh_axis)a, w->rank, ranks, &n);
		gpt_group *g = mg.g[a];
		if ((g == NULL) != (n == 0)) {
			rc = gpt_err_set(err, GPT_EINTERNAL, "%s group: membership differs from the mesh", gpt_mesh_axis_name(a));
			break;
		}
		if (!g)
			continue;
		int64_t want = 0;
		for (int i = 0; i < n; i++) {
			want += ranks[i] + 1;
			if (g->ranks[i] != ranks[i] || (ranks[i] == w->rank && g->rank != i))
				rc = gpt_err_set(err, GPT_EINTERNAL, "group %s: member %d is world %d, the mesh says %d",
						 g->name, i, g->ranks[i], ranks[i]);
		}
		int64_t v = w->rank + 1, sum = 0;
		if (!rc)
			rc = gpt_comm_all_reduce(g, &v, &sum, 1, GPT_DTYPE_I64, GPT_REDUCE_SUM, err);
		if (!rc && sum != want)
			rc = gpt_err_set(err, GPT_EINTERNAL, "group %s: sum %lld, want %lld", g->name, (long long)sum,
					 (long long)want);
		if (!rc && verbose) {
			printf("rank %d: %s group %s of %d: sum %lld\n", w->rank, gpt_mesh_axis_name(a), g->name,
			       g->size, (long long)sum);
			fflush(stdout);
		}
	}
	gpt_mesh_groups_free(&mg);
	return rc;
}

static int rank_mesh(rank_ctx *x)
{
	const int *deg = x->arg;
	gpt_err err = {0};
	gpt_comm *c = NULL;
	int fail = 0;
	gpt_mesh m;
	if (gpt_mesh_init(&m, deg[0], deg[1], deg[2], deg[3], x->n, &err) || open_comm(x, &c, &err)) {
		fprintf(stderr, "rank %d: %s\n", x->rank, err.msg);
		return 1;
	}
	CHECK(check_mesh_groups(gpt_comm_world(c), &m, 0, &err) == 0, "%s", err.msg);
	gpt_comm_close(c);
	return fail;
}

/* ---- failures ------------------------------------------------------------------------ */

enum { LATE_JOIN, SKIP_COLLECTIVE, DIE_BEFORE };

static int rank_failure(rank_ctx *x)
{
	int mode = *(int *)x->arg, fail = 0, victim = x->n - 1;
	gpt_err err = {0};
	gpt_comm *c = NULL;
	if (mode == LATE_JOIN && x->rank == victim) {
		sleep(2); /* never joins within the others' timeout */
		return 0;
	}
	int rc = open_comm(x, &c, &err);
	if (mode == LATE_JOIN) {
		CHECK(rc == GPT_EIO && strstr(err.msg, "group world: shm setup timed out after 0.5 s waiting for ranks 2 (world 2)"),
		      "a rank that never arrives is not named: %s", err.msg);
		gpt_comm_close(c);
		return fail;
	}
	if (rc) {
		fprintf(stderr, "rank %d: %s\n", x->rank, err.msg);
		return 1;
	}
	if (x->rank == victim) {
		if (mode == SKIP_COLLECTIVE)
			sleep(2);
		gpt_comm_close(c);
		return 0;
	}
	float v = 1, s = 0;
	double t0 = gpt_now_s();
	rc = gpt_comm_all_reduce(gpt_comm_world(c), &v, &s, 1, GPT_DTYPE_F32, GPT_REDUCE_SUM, &err);
	double dt = gpt_now_s() - t0;
	if (mode == SKIP_COLLECTIVE)
		CHECK(rc == GPT_EIO && strstr(err.msg, "group world: all-reduce timed out after 0.5 s waiting for ranks 2 (world 2)"),
		      "a rank that skips a collective is not named: %s", err.msg);
	else
		CHECK(rc == GPT_EIO && strstr(err.msg, "group world: all-reduce: rank 2 (world 2) exited without arriving") &&
			      dt < 5,
		      "a dead rank is not found quickly (%.1f s): %s", dt, err.msg);
	gpt_comm_close(c);
	return fail;
}

/* ---- worker mode (for gpt-launch) ---------------------------------------------------------- */

static int worker(void)
{
	const char *prog = "test-comm-shm worker";
	gpt_err err = {0};
	gpt_dist_env env;
	if (gpt_dist_env_detect(&env, &err))
		return gpt_cmd_fail(prog, &err);
	gpt_comm *c = NULL;
	gpt_comm_options o = {.backend = "shm"};
	if (gpt_comm_open(&c, &env, &o, &err))
		return gpt_cmd_fail(prog, &err);
	gpt_group *w = gpt_comm_world(c);
	int64_t v = env.rank + 1, sum = 0;
	if (gpt_comm_all_reduce(w, &v, &sum, 1, GPT_DTYPE_I64, GPT_REDUCE_SUM, &err))
		return gpt_cmd_fail(prog, &err);
	printf("rank %d of %d (%s, local rank %d, restart %d): sum %lld\n", env.rank, env.world_size,
	       gpt_dist_source_name(env.source), env.local_rank, env.restart_count, (long long)sum);
	fflush(stdout);
	int rc = sum == (int64_t)env.world_size * (env.world_size + 1) / 2 ? 0 : 1;
	const char *mesh = getenv("GPT_TEST_MESH");
	int d[4];
	if (!rc && mesh) {
		gpt_mesh m;
		if (sscanf(mesh, "%d,%d,%d,%d", &d[0], &d[1], &d[2], &d[3]) != 4 ||
		    gpt_mesh_init(&m, d[0], d[1], d[2], d[3], env.world_size, &err) ||
		    check_mesh_groups(w, &m, 1, &err)) {
			if (!err.code)
				gpt_err_set(&err, GPT_EUSAGE, "GPT_TEST_MESH='%s': expected tp,sharding,dp,pp", mesh);
			rc = gpt_cmd_fail(prog, &err);
		}
	}
	if (!rc && gpt_comm_barrier(w, &err))
		rc = gpt_cmd_fail(prog, &err);
	gpt_comm_close(c);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "worker") == 0)
		return worker();
	if (argc > 1 && strcmp(argv[1], "free-port") == 0) {
		/* For the shell tests: a port that was free a moment ago. */
		gpt_err err = {0};
		gpt_store_server *s = NULL;
		if (gpt_store_server_start("127.0.0.1", 0, &s, &err))
			return gpt_cmd_fail("test-comm-shm", &err);
		printf("%d\n", gpt_store_server_port(s));
		gpt_store_server_stop(s);
		return 0;
	}
	int sizes[] = {1, 2, 3, 4, 8};
	for (int i = 0; i < 5; i++) {
		int n = sizes[i];
		coll_arg a = {n <= 3};
		is_int(run_ranks(n, 60, rank_collectives, &a), 0,
		       "%d rank%s: all-reduce, reduce-scatter (even, uneven in place; sum, max), all-gather (even, uneven), broadcast, barrier "
		       "for fp32/bf16/fp16/int32/int64 equal the serial result bit for bit%s",
		       n, n == 1 ? "" : "s", a.big ? ", several chunks too" : "");
	}
	is_int(run_ranks(2, 60, rank_p2p, NULL), 0, "2 ranks: send/recv, batched exchange, order, count mismatch");
	is_int(run_ranks(5, 60, rank_p2p, NULL), 0, "5 ranks: a ring shift larger than the rings");
	int layouts[][4] = {{2, 1, 2, 2}, {1, 4, 2, 1}, {2, 2, 1, 2}, {1, 1, 1, 8}, {8, 1, 1, 1}, {1, 2, 2, 2}};
	for (int i = 0; i < 6; i++)
		is_int(run_ranks(8, 60, rank_mesh, layouts[i]), 0,
		       "mesh tp%d x sharding%d x dp%d x pp%d: every group has the mesh's members and sums right",
		       layouts[i][0], layouts[i][1], layouts[i][2], layouts[i][3]);
	int mode = LATE_JOIN;
	is_int(run_ranks(3, 0.5, rank_failure, &mode), 0, "a rank that never arrives: a timeout naming it");
	mode = SKIP_COLLECTIVE;
	is_int(run_ranks(3, 0.5, rank_failure, &mode), 0, "a rank that skips a collective: a timeout naming it");
	mode = DIE_BEFORE;
	is_int(run_ranks(3, 30, rank_failure, &mode), 0, "a rank that exits: found within seconds, named");
	return done_testing();
}
