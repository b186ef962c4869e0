/* Linear layers on compact weights: every dtype, each fused kernel the CPU
 * runs (plain C, AVX2, AVX-512; 1 to 8 rows, K with and without tails) and
 * the sgemm path, against a double-precision product of the widened
 * weights; the AVX-512 kernel's rows do not depend on the batch or the
 * thread count. */
#include "infer/infer.h"
#include "tap.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static float frand(uint32_t *s)
{
	*s = *s * 1664525u + 1013904223u;
	return (float)((*s >> 8) / 16777216.0 - 0.5);
}

/* widened weight, as the dtype stores it */
static double wval(const gpt_qweight *q, int64_t n, int64_t k)
{
	int64_t i = n * q->K + k;
	switch (q->dtype) {
	case GPT_DTYPE_BF16: return gpt_bf16_to_f32(((const uint16_t *)q->w)[i]);
	case GPT_DTYPE_F16: return gpt_f16_to_f32(((const uint16_t *)q->w)[i]);
	case GPT_DTYPE_I8: return ((const int8_t *)q->w)[i] * (double)q->scale[n];
	default: return ((const float *)q->w)[i];
	}
}

int main(void)
{
	const gpt_dtype dts[] = {GPT_DTYPE_F32, GPT_DTYPE_BF16, GPT_DTYPE_F16, GPT_DTYPE_I8};
	const gpt_qkernel kerns[] = {GPT_QKERNEL_C, GPT_QKERNEL_AVX2, GPT_QKERNEL_AVX512};
	const char *kname[] = {"c", "avx2", "avx512"};
	const int64_t Ks[] = {64, 36, 200}, Ms[] = {1, 2, 3, 4, 5, 8, 20};
	enum { NM = sizeof Ms / sizeof *Ms, MMAX = 20 };
	uint32_t seed = 1;
	for (int ki = 0; ki < 3; ki++) {
		int64_t N = 70, K = Ks[ki];
		float *w = malloc((size_t)(N * K) * 4), *x = malloc((size_t)(MMAX * K) * 4),
		      *b = malloc((size_t)N * 4), *out = malloc((size_t)(MMAX * N) * 4),
		      *one = malloc((size_t)N * 4);
		for (int64_t i = 0; i < N * K; i++)
			w[i] = frand(&seed);
		for (int64_t i = 0; i < MMAX * K; i++)
			x[i] = frand(&seed);
		for (int64_t i = 0; i < N; i++)
			b[i] = frand(&seed);
		for (int di = 0; di < 4; di++) {
			gpt_qweight q;
			gpt_err err = {0};
			ok(gpt_qweight_init(&q, w, N, K, dts[di], &err) == 0, "K %lld, %s weights",
			   (long long)K, gpt_dtype_name(dts[di]));
			ok(q.kernel == gpt_qkernel_best(), "the best kernel by default");
			double qerr = 0;
			for (int64_t i = 0; i < N * K; i++)
				qerr = fmax(qerr, fabs(wval(&q, i / K, i % K) - w[i]));
			double bound = dts[di] == GPT_DTYPE_F32 ? 0 : dts[di] == GPT_DTYPE_I8 ? 0.5 / 127 * 0.5 + 1e-7
				     : dts[di] == GPT_DTYPE_BF16 ? 0.5 / 256 : 0.5 / 2048;
			ok(qerr <= bound, "%s rounding error %.3g within %.3g", gpt_dtype_name(dts[di]), qerr, bound);
			for (int kk = 0; kk < 3; kk++) {
				if (!gpt_qkernel_supported(kerns[kk])) {
					diag("no %s on this CPU", kname[kk]);
					continue;
				}
				q.kernel = kerns[kk];
				double worst = 0;
				for (int mi = 0; mi < NM; mi++) {
					int64_t M = Ms[mi];
					gpt_qlinear(&q, x, mi == 1 ? NULL : b, out, M, 2, &err);
					for (int64_t i = 0; i < M; i++)
						for (int64_t n = 0; n < N; n++) {
							double s = mi == 1 ? 0 : b[n];
							for (int64_t k = 0; k < K; k++)
								s += wval(&q, n, k) * x[i * K + k];
							worst = fmax(worst, fabs(s - out[i * N + n]));
						}
				}
				ok(worst < 2e-5, "%s, %s, 1 to 20 rows: max |error| %.2g", kname[kk],
				   gpt_dtype_name(dts[di]), worst);
			}
			if (gpt_qkernel_supported(GPT_QKERNEL_AVX512)) {
				q.kernel = GPT_QKERNEL_AVX512;
				gpt_qlinear(&q, x, b, out, 8, 2, &err);
				int same = 1;
				for (int64_t i = 0; i < 8; i++) {
					gpt_qlinear(&q, x + i * K, b, one, 1, 1 + (int)(i % 2), &err);
					same = same && memcmp(one, out + i * N, (size_t)N * 4) == 0;
				}
				ok(same, "avx512, %s: each of 8 rows alone, 1 or 2 threads, gives the same bits",
				   gpt_dtype_name(dts[di]));
			}
			gpt_qweight_free(&q);
		}
		free(w);
		free(x);
		free(b);
		free(out);
		free(one);
	}
	gpt_qweight q;
	gpt_err err = {0};
	/* rows whose step max|w| / 127 is subnormal, so that 1 / step
	 * overflows (a zero weight once became 0 * inf = NaN, then a NaN cast
	 * to int8: the fuzzer's crash); a zero row; a normal row */
	float tiny[4 * 5] = {1e-39f, 0, -3e-40f, 5e-41f, 0,
			     2e-45f, -1e-45f, 0, 0, 1e-45f,
			     0, 0, 0, 0, 0,
			     0.5f, -0.25f, 0, 1, 0.125f};
	ok(gpt_qweight_init(&q, tiny, 4, 5, GPT_DTYPE_I8, &err) == 0, "int8: subnormal rows quantize");
	int codes_ok = 1;
	double terr = 0;
	for (int64_t i = 0; i < 20; i++) {
		int8_t c = ((const int8_t *)q.w)[i];
		codes_ok = codes_ok && c != -128 && (tiny[i] != 0 || c == 0);
		if (i < 15)
			terr = fmax(terr, fabs(wval(&q, i / 5, i % 5) - tiny[i]));
	}
	ok(codes_ok, "int8: codes in [-127, 127], zero weights zero codes");
	is_int(((const int8_t *)q.w)[0], 127, "int8: a subnormal row's largest weight is code 127");
	ok(terr <= 1e-39 / 127, "int8: subnormal rows dequantize within a step (max |error| %.3g)", terr);
	is_int(((const int8_t *)q.w)[18], 127, "int8: a normal row is as before");
	gpt_qweight_free(&q);
	float w1[4] = {0};
	is_int(gpt_qweight_init(&q, w1, 1, 4, GPT_DTYPE_I32, &err), GPT_EUSAGE, "int32 weights are refused");
	return done_testing();
}
