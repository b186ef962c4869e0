/* The decoder's host memory by weight dtype: 16-bit and int8 weight
 * matrices are held in their own dtype only, not beside an fp32 copy (which
 * made --dtype int8 take more memory than fp32). Each load runs in a child
 * process and reports how much its resident set grew, so that what one
 * load frees cannot serve the next. */
#include "infer/infer.h"
#include "tap.h"

#include <math.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* 6.3M parameters in the layers' weight matrices, 25 MB as fp32 */
static const gpt_model_shape shape = {
	.vocab_size = 257, .padded_vocab = 384, .max_pos = 16, .hidden = 512, .layers = 2,
	.heads = 8, .ffn = 2048,
};

static int fill(void *ctx, const gpt_param_info *p, float *dst, gpt_err *err)
{
	(void)ctx, (void)err;
	for (int64_t k = 0; k < p->numel; k++)
		dst[k] = 0.02f * sinf((float)(k % 997) + (float)p->numel);
	return 0;
}

static long rss_bytes(void)
{
	long size = 0, rss = -1;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f) {
		if (fscanf(f, "%ld %ld", &size, &rss) != 2)
			rss = -1;
		fclose(f);
	}
	return rss < 0 ? -1 : rss * sysconf(_SC_PAGESIZE);
}

/* The growth of the resident set by loading the model with weights as
 * dtype, in bytes; -1 when the load fails. */
static long load_growth(gpt_dtype dtype)
{
	int fd[2];
	if (pipe(fd) != 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		close(fd[0]);
		gpt_err err = {0};
		gpt_infer_model m;
		long before = rss_bytes();
		long grew = gpt_infer_model_init(&m, &shape, dtype, 1, fill, NULL, &err) || before < 0
				    ? -1
				    : rss_bytes() - before;
		_exit(write(fd[1], &grew, sizeof grew) == (ssize_t)sizeof grew ? 0 : 1);
	}
	close(fd[1]);
	long grew = -1;
	if (pid < 0 || read(fd[0], &grew, sizeof grew) != (ssize_t)sizeof grew)
		grew = -1;
	close(fd[0]);
	if (pid > 0)
		waitpid(pid, NULL, 0);
	return grew;
}

int main(void)
{
	int64_t C = shape.hidden, F = shape.ffn;
	long matrices = (long)(shape.layers * (4 * C * C + 2 * C * F)) * 4; /* as fp32 */
	long f32 = load_growth(GPT_DTYPE_F32), bf16 = load_growth(GPT_DTYPE_BF16),
	     i8 = load_growth(GPT_DTYPE_I8);
	printf("# resident set growth: fp32 %ld, bf16 %ld, int8 %ld bytes; matrices %ld bytes as fp32\n",
	       f32, bf16, i8, matrices);
	ok(f32 > matrices, "fp32 weights: the matrices are resident (%ld bytes)", f32);
	/* each would save 1/2 and 3/4 of the matrices' fp32 bytes; asked: half that */
	ok(bf16 >= 0 && f32 - bf16 > matrices / 4,
	   "bf16 weights take at least a quarter of the matrices' fp32 bytes less (%ld less)",
	   f32 - bf16);
	ok(i8 >= 0 && f32 - i8 > matrices * 3 / 8,
	   "int8 weights take at least 3/8 of the matrices' fp32 bytes less (%ld less)", f32 - i8);
	return done_testing();
}
