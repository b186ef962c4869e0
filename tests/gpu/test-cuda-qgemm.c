/* The int8 weight-only linear layer of CUDA generation (gpt_cuda_linear_i8)
 * against lib/infer's CPU one (gpt_qlinear on the same int8 codes and
 * steps), for fp32, bf16 and fp16 storage: decoding shapes (1 to 8 rows,
 * the streaming kernel), prompt shapes (the tiled kernel), K not a multiple
 * of 16 and unaligned inputs (the tiled kernel at any row count), with and
 * without a bias. Inputs are rounded to the storage dtype first; each output
 * must satisfy |gpu - cpu| <= tol (|cpu| + rms(cpu)), tol 1e-5 in fp32 and
 * 1e-2 in 16-bit storage. Then the fake quantization of a QAT bundle's
 * linear inputs as gpt-infer does it on the device (pact_fwd, fake_quant)
 * equals the CPU's (clamp, gpt_quant_rows) bit for bit in fp32. GPT-2 small
 * shapes on a GPU, tiny ones under the emulator (-DGPT_CUDA_EMU). Skips
 * where there is no GPU. */
#include "backend/backend.h"
#include "cpu/cpu.h"
#include "cuda/cuda.h"
#include "infer/infer.h"
#define GPU_CHECK_SEED 0x9E3779B97F4A7C15ull
#include "gpu-check.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void *up(gpt_backend *be, const void *h, size_t bytes)
{
	gpt_err err = {0};
	void *d = be->ops->alloc(be, bytes ? bytes : 1, "test tensor", &err);
	if (!d || be->ops->upload(be, d, h, bytes, &err)) {
		printf("Bail out! %s\n", err.msg);
		exit(1);
	}
	return d;
}

/* Random fp32 values scale * U[-1, 1), rounded to t. */
static float *rand_in(gpt_dtype t, int64_t n, double scale)
{
	float *x = xmalloc((size_t)n * sizeof *x);
	for (int64_t i = 0; i < n; i++)
		x[i] = (float)(scale * urand());
	void *tmp = xmalloc((size_t)n * gpt_dtype_size(t));
	gpt_convert(tmp, t, x, GPT_DTYPE_F32, (size_t)n, NULL);
	gpt_convert(x, GPT_DTYPE_F32, tmp, t, (size_t)n, NULL);
	free(tmp);
	return x;
}

/* x (M rows; `shift` elements into its device buffer) times an int8 weight
 * N x K, on the GPU and on the CPU. */
static void check(gpt_backend *gpu, int64_t M, int64_t K, int64_t N, int with_bias, int64_t shift,
		  const char *what)
{
	gpt_dtype t = gpu->dtype;
	size_t es = gpt_dtype_size(t);
	gpt_err err = {0};
	float *w = rand_in(GPT_DTYPE_F32, N * K, 0.05);
	float *x = rand_in(t, M * K, 1.0);
	float *b = with_bias ? rand_in(t, N, 0.5) : NULL;
	gpt_qweight q;
	if (gpt_qweight_init(&q, w, N, K, GPT_DTYPE_I8, &err)) {
		printf("Bail out! %s\n", err.msg);
		exit(1);
	}
	float *want = xmalloc((size_t)(M * N) * sizeof *want);
	int rc = gpt_qlinear(&q, x, b, want, M, 1, &err);
	/* device copies in the storage dtype */
	void *hx = xmalloc((size_t)(M * K + shift) * es), *hb = xmalloc((size_t)N * es + 1);
	memset(hx, 0, (size_t)shift * es);
	gpt_convert((char *)hx + shift * (int64_t)es, t, x, GPT_DTYPE_F32, (size_t)(M * K), NULL);
	if (b)
		gpt_convert(hb, t, b, GPT_DTYPE_F32, (size_t)N, NULL);
	void *dx = up(gpu, hx, (size_t)(M * K + shift) * es);
	void *db = b ? up(gpu, hb, (size_t)N * es) : NULL;
	void *dw = up(gpu, q.w, (size_t)(N * K));
	void *ds = up(gpu, q.scale, (size_t)N * sizeof(float));
	void *dout = gpu->ops->alloc(gpu, (size_t)(M * N) * es, "test output", &err);
	void *hout = xmalloc((size_t)(M * N) * es);
	float *got = xmalloc((size_t)(M * N) * sizeof *got);
	rc = rc || !dout;
	rc = rc || gpt_cuda_linear_i8(gpu, dout, (char *)dx + shift * (int64_t)es, dw, ds, db, M, K,
				      N, &err);
	rc = rc || gpu->ops->download(gpu, hout, dout, (size_t)(M * N) * es, &err);
	rc = rc || gpt_convert(got, GPT_DTYPE_F32, hout, t, (size_t)(M * N), &err);
	double tol = t == GPT_DTYPE_F32 ? 1e-5 : 1e-2, ss = 0, worst = 0;
	for (int64_t i = 0; i < M * N; i++)
		ss += (double)want[i] * want[i];
	double rms = sqrt(ss / (double)(M * N));
	int64_t bad = 0;
	for (int64_t i = 0; !rc && i < M * N; i++) {
		double d = fabs((double)got[i] - want[i]), lim = tol * (fabs(want[i]) + rms);
		if (!(d <= lim))
			bad++;
		if (d / (fabs(want[i]) + rms) > worst)
			worst = d / (fabs(want[i]) + rms);
	}
	ok(!rc && bad == 0, "%s %s: M %lld K %lld N %lld%s: %lld outside %g (worst %.3g)%s%s",
	   gpt_dtype_name(t), what, (long long)M, (long long)K, (long long)N,
	   with_bias ? " + bias" : "", (long long)bad, tol, worst, rc ? ": " : "", rc ? err.msg : "");
	void *dev[] = {dx, db, dw, ds, dout};
	for (size_t i = 0; i < sizeof dev / sizeof *dev; i++)
		if (dev[i])
			gpu->ops->free(gpu, dev[i]);
	gpt_qweight_free(&q);
	free(w);
	free(x);
	free(b);
	free(want);
	free(hx);
	free(hb);
	free(hout);
	free(got);
}

/* A QAT linear's input on the device as lib/infer/decode.c quantizes it
 * (pact_fwd when it has a clip, then fake_quant with its scale) against
 * the CPU's clamp and gpt_quant_rows, bit for bit (fp32 storage). */
static void check_act_quant(gpt_backend *gpu, int64_t n, float clip, float scale, int bits)
{
	gpt_err err = {0};
	float *x = rand_in(GPT_DTYPE_F32, n, 4.0), *got = xmalloc((size_t)n * sizeof *got);
	float par[2] = {clip, scale};
	void *dx = up(gpu, x, (size_t)n * sizeof(float));
	float *dp = up(gpu, par, sizeof par);
	int rc = 0;
	if (clip > 0)
		rc = gpu->ops->pact_fwd(gpu, dx, dx, dp, n, &err);
	rc = rc || gpu->ops->fake_quant(gpu, dx, dx, dp + 1, 1, n, 0, bits, &err);
	rc = rc || gpu->ops->download(gpu, got, dx, (size_t)n * sizeof(float), &err);
	for (int64_t i = 0; clip > 0 && i < n; i++)
		x[i] = x[i] > clip ? clip : x[i] < -clip ? -clip : x[i];
	gpt_quant_rows(x, 1, n, &scale, 0, bits, x, NULL);
	int64_t bad = 0;
	for (int64_t i = 0; !rc && i < n; i++)
		bad += memcmp(&x[i], &got[i], sizeof(float)) != 0;
	ok(!rc && bad == 0, "fp32 QAT input: clip %g, scale %g, %d bits, %lld values: %lld differ%s%s",
	   clip, scale, bits, (long long)n, (long long)bad, rc ? ": " : "", rc ? err.msg : "");
	gpu->ops->free(gpu, dx);
	gpu->ops->free(gpu, dp);
	free(x);
	free(got);
}

int main(void)
{
	if (gpt_cuda_device_count() == 0)
		return skip_all("no CUDA device");
	static const gpt_dtype types[] = {GPT_DTYPE_F32, GPT_DTYPE_BF16, GPT_DTYPE_F16};
	for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
		gpt_backend gpu;
		gpt_err err = {0};
		memset(&gpu, 0, sizeof gpu);
		if (gpt_backend_cuda_init(&gpu, types[ti], 0, &err)) {
			printf("Bail out! %s\n", err.msg);
			return 1;
		}
#ifdef GPT_CUDA_EMU
		/* every CUDA thread a std::thread: a few blocks at most */
		check(&gpu, 1, 32, 24, 1, 0, "decode");
		check(&gpu, 3, 48, 17, 1, 0, "decode");
		check(&gpu, 8, 32, 9, 0, 0, "decode");
		check(&gpu, 2, 528, 12, 1, 0, "decode");
		check(&gpu, 5, 32, 16, 1, 1, "decode, unaligned input");
		check(&gpu, 2, 20, 9, 1, 0, "decode, K % 16 != 0");
		check(&gpu, 70, 20, 66, 1, 0, "prompt");
		/* 3 blocks of rows: two launches (the emulation's GPT_CUDA_GRID_Y) */
		check(&gpu, 140, 20, 66, 1, 0, "prompt, grid.y in slices");
#else
		check(&gpu, 1, 768, 2304, 1, 0, "decode");
		check(&gpu, 1, 3072, 768, 1, 0, "decode");
		check(&gpu, 2, 768, 3072, 1, 0, "decode");
		check(&gpu, 4, 768, 768, 1, 0, "decode");
		check(&gpu, 8, 3072, 768, 1, 0, "decode");
		check(&gpu, 8, 768, 50257, 0, 0, "decode, head");
		check(&gpu, 3, 768, 777, 1, 1, "decode, unaligned input");
		check(&gpu, 5, 100, 333, 1, 0, "decode, K % 16 != 0");
		check(&gpu, 9, 768, 2304, 1, 0, "prompt");
		check(&gpu, 128, 768, 3072, 1, 0, "prompt");
		check(&gpu, 300, 3072, 768, 1, 0, "prompt");
		check(&gpu, 200, 768, 50257, 0, 0, "prompt, head");
		check(&gpu, 77, 100, 333, 1, 0, "prompt, K % 16 != 0");
#endif
		if (types[ti] == GPT_DTYPE_F32) {
			int64_t n = 1000;
#ifndef GPT_CUDA_EMU
			n = 1 << 20;
#endif
			check_act_quant(&gpu, n, 0.0f, 2.5f, 8);
			check_act_quant(&gpu, n, 1.75f, 2.5f, 8);
			check_act_quant(&gpu, n, 3.0f, 1.3f, 4);
		}
		gpt_backend_cuda_free(&gpu);
	}
	return done_testing();
}
