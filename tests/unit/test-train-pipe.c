/* lib/train: the pipeline schedules. Every rank's list holds one forward
 * and one backward of each (micro-batch, chunk); run together, the lists
 * never wait on each other forever; the slots a rank needs are what each
 * schedule promises. */
#include "train/train.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>

#define MAXR 8

/* Runs the lists of every rank in turns: a pass goes when what it needs is
 * done (a forward: the previous virtual stage's forward of the micro-batch;
 * a backward: its own forward and the next virtual stage's backward).
 * Returns 1 when every pass ran. */
static int simulate(gpt_pipe_op **ops, const int64_t *n, int64_t pp, int64_t chunks, int64_t micro)
{
	int64_t V = pp * chunks, pos[MAXR] = {0};
	char *f = calloc((size_t)(micro * V), 1), *b = calloc((size_t)(micro * V), 1);
	int progress = 1;
	while (progress) {
		progress = 0;
		for (int64_t r = 0; r < pp; r++) {
			if (pos[r] == n[r])
				continue;
			gpt_pipe_op o = ops[r][pos[r]];
			int64_t v = o.chunk * pp + r, k = o.mb * V + v;
			int ready = o.fwd ? (v == 0 || f[k - 1]) : (f[k] && (v == V - 1 || b[k + 1]));
			if (!ready)
				continue;
			(o.fwd ? f : b)[k] = 1;
			pos[r]++;
			progress = 1;
		}
	}
	int all = 1;
	for (int64_t r = 0; r < pp; r++)
		all &= pos[r] == n[r];
	free(f);
	free(b);
	return all;
}

static void check(const char *name, int64_t pp, int64_t chunks, int64_t micro)
{
	gpt_pipe_op *ops[MAXR];
	int64_t n[MAXR];
	gpt_err err = {0};
	int fine = 1, once = 1;
	for (int64_t r = 0; r < pp; r++) {
		fine &= gpt_pipe_schedule(name, pp, r, chunks, micro, &ops[r], &n[r], &err) == 0;
		fine &= n[r] == 2 * micro * chunks;
		int cnt[2][64][4] = {{{0}}};
		for (int64_t i = 0; i < n[r]; i++)
			cnt[ops[r][i].fwd][ops[r][i].mb][ops[r][i].chunk]++;
		for (int64_t j = 0; j < micro; j++)
			for (int64_t c = 0; c < chunks; c++)
				once &= cnt[0][j][c] == 1 && cnt[1][j][c] == 1;
	}
	ok(fine && once, "%s pp %lld x %lld chunks, %lld micro-batches: each pass once on every rank", name,
	   (long long)pp, (long long)chunks, (long long)micro);
	ok(simulate(ops, n, pp, chunks, micro), "%s pp %lld x %lld chunks, %lld micro-batches: runs to the end",
	   name, (long long)pp, (long long)chunks, (long long)micro);
	if (strcmp(name, "1F1B") == 0)
		for (int64_t r = 0; r < pp; r++)
			is_int(gpt_pipe_slots(ops[r], n[r], 1), pp - r < micro ? pp - r : micro,
			       "1F1B rank %lld of %lld: min(pp - rank, m) micro-batches in flight", (long long)r,
			       (long long)pp);
	if (strcmp(name, "FThenB") == 0)
		is_int(gpt_pipe_slots(ops[0], n[0], 1), micro, "FThenB keeps every micro-batch");
	if (strcmp(name, "interleaved") == 0)
		ok(gpt_pipe_slots(ops[0], n[0], chunks) <= micro, "interleaved rank 0 keeps %lld of %lld",
		   (long long)gpt_pipe_slots(ops[0], n[0], chunks), (long long)micro);
	for (int64_t r = 0; r < pp; r++)
		free(ops[r]);
}

int main(void)
{
	check("FThenB", 2, 1, 4);
	check("FThenB", 4, 1, 3);
	check("1F1B", 2, 1, 8);
	check("1F1B", 4, 1, 8);
	check("1F1B", 4, 1, 2);
	check("1F1B", 8, 1, 16);
	check("interleaved", 2, 2, 8);
	check("interleaved", 4, 2, 8);
	check("interleaved", 2, 4, 4);
	check("interleaved", 4, 2, 4);

	gpt_pipe_op *ops;
	int64_t n;
	gpt_err err = {0};
	ok(gpt_pipe_schedule("interleaved", 4, 0, 2, 6, &ops, &n, &err) == GPT_EUSAGE &&
	   strstr(err.msg, "accumulate_steps"), "interleaved with micro-batches not in groups of pp: %s", err.msg);
	ok(gpt_pipe_schedule("zigzag", 2, 0, 1, 4, &ops, &n, &err) == GPT_EUSAGE &&
	   strstr(err.msg, "pipeline_schedule"), "an unknown schedule: %s", err.msg);
	return done_testing();
}
