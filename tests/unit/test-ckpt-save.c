/* lib/ckpt: saving in parts. Two writers' parts publish as one checkpoint
 * that reads back; a missing part, overlapping pieces or a gap refuse to
 * publish and leave no final directory and `latest` as it was; keep_last
 * removes only older complete checkpoints. */
#include "ckpt/ckpt.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[] = "/tmp/gptkit-ckpt-save-XXXXXX";

static int exists(const char *fmt, const char *a)
{
	char p[512];
	snprintf(p, sizeof p, fmt, dir, a);
	return gpt_path_exists(p);
}

/* Rows [r0, r1) of a [4, 3] tensor "w" and, when whole, a [2] tensor "b". */
static int part(int64_t step, int rank, int64_t r0, int64_t r1, int with_b, gpt_err *err)
{
	static const float w[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, b[2] = {-1, -2};
	gpt_ckpt_piece pc[2] = {
		{.tensor = "w", .dtype = GPT_DTYPE_F32, .ndim = 2, .shape = {4, 3},
		 .box = {.ndim = 2, .off = {r0, 0}, .len = {r1 - r0, 3}}, .data = w + r0 * 3},
		{.tensor = "b", .dtype = GPT_DTYPE_F32, .ndim = 1, .shape = {2},
		 .box = {.ndim = 1, .off = {0}, .len = {2}}, .data = b},
	};
	char stage[4096];
	gpt_ckpt_stage_dir(dir, step, stage, sizeof stage);
	return gpt_ckpt_write_part(stage, rank, pc, with_b ? 2 : 1, NULL, NULL, err);
}

static int publish(int64_t step, int n, int64_t keep, gpt_err *err)
{
	return gpt_ckpt_publish(dir, step, n, "{\"step\": 1, \"optimizer_steps\": 1}", "Model: {}\n", keep,
				NULL, 0, NULL, err);
}

int main(void)
{
	if (!mkdtemp(dir))
		return skip_all("no temporary directory");
	gpt_err err = {0};

	ok(gpt_ckpt_prepare(dir, 1, &err) == 0, "prepare %s", err.msg);
	ok(part(1, 0, 0, 3, 1, &err) == 0 && part(1, 1, 3, 4, 0, &err) == 0, "two parts written");
	ok(publish(1, 2, 0, &err) == 0, "published %s", err.msg);
	gpt_ckpt *ck = NULL;
	ok(gpt_ckpt_open(&ck, dir, &err) == 0, "it opens through latest %s", err.msg);
	float got[12] = {0};
	gpt_box all = {.ndim = 2, .len = {4, 3}};
	int64_t shape[2] = {4, 3};
	ok(ck && gpt_ckpt_read_box(ck, "w", GPT_DTYPE_F32, 2, shape, &all, got, &err) == 0 && got[11] == 11 &&
	   got[9] == 9 && got[0] == 0, "a tensor read across the two ranks' files");
	gpt_ckpt_close(ck);
	ok(!exists("%s/step_00000001/rank-00000.json%s", ""), "the part files are folded into index.json");

	/* rank 1 never finished */
	ok(gpt_ckpt_prepare(dir, 2, &err) == 0 && part(2, 0, 0, 3, 1, &err) == 0, "step 2: one part of two");
	ok(publish(2, 2, 0, &err) == GPT_EIO && strstr(err.msg, "rank-00001.json: missing: rank 1 did not finish"),
	   "a missing part is refused: %s", err.msg);
	ok(!exists("%s/step_00000002%s", "") && !exists("%s/.step_00000002.tmp%s", ""),
	   "no final directory, the staging one removed");
	char *latest = NULL;
	char p[512];
	snprintf(p, sizeof p, "%s/latest", dir);
	ok(gpt_file_read_all(p, 0, &latest, NULL, &err) == 0 && strcmp(latest, "step_00000001\n") == 0,
	   "latest still names step 1");
	free(latest);

	/* overlapping rows, and a gap */
	ok(gpt_ckpt_prepare(dir, 3, &err) == 0 && part(3, 0, 0, 3, 1, &err) == 0 && part(3, 1, 2, 4, 0, &err) == 0,
	   "step 3: parts that overlap");
	ok(publish(3, 2, 0, &err) == GPT_EDATA && strstr(err.msg, "tensor 'w': pieces 0 and 1 overlap"),
	   "overlap refused: %s", err.msg);
	ok(gpt_ckpt_prepare(dir, 3, &err) == 0 && part(3, 0, 0, 2, 1, &err) == 0 && part(3, 1, 3, 4, 0, &err) == 0,
	   "step 3 again: parts with a gap");
	ok(publish(3, 2, 0, &err) == GPT_EDATA && strstr(err.msg, "the pieces cover 9 of 12 elements"),
	   "gap refused: %s", err.msg);
	ok(!exists("%s/step_00000003%s", ""), "nothing published");

	/* keep_last */
	for (int64_t s = 4; s <= 6; s++) {
		int rc = gpt_ckpt_prepare(dir, s, &err) || part(s, 0, 0, 4, 1, &err) || publish(s, 1, 2, &err);
		ok(rc == 0, "step %lld published with keep_last 2", (long long)s);
	}
	ok(!exists("%s/step_00000001%s", "") && !exists("%s/step_00000004%s", "") &&
	   exists("%s/step_00000005%s", "") && exists("%s/step_00000006%s", ""),
	   "only the two newest are left");
	ok(gpt_ckpt_prepare(dir, 6, &err) == GPT_EIO && strstr(err.msg, "already exists; not overwriting"),
	   "a complete step is never prepared again");

	char cmd[600];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		diag("could not remove %s", dir);
	return done_testing();
}
