/* Linear layers on compact weights: every dtype, the fused kernel (1 to 8
 * rows, with and without AVX2's tail-free K) and the sgemm path, against a
 * double-precision product of the widened weights. */
#include "infer/infer.h"
#include "tap.h"

#include <math.h>
#include <stdlib.h>

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
	const int64_t Ks[] = {64, 36}, Ms[] = {1, 3, 8, 20};
	uint32_t seed = 1;
	for (int ki = 0; ki < 2; ki++) {
		int64_t N = 70, K = Ks[ki];
		float *w = malloc((size_t)(N * K) * 4), *x = malloc((size_t)(20 * K) * 4),
		      *b = malloc((size_t)N * 4), *out = malloc((size_t)(20 * N) * 4);
		for (int64_t i = 0; i < N * K; i++)
			w[i] = frand(&seed);
		for (int64_t i = 0; i < 20 * K; i++)
			x[i] = frand(&seed);
		for (int64_t i = 0; i < N; i++)
			b[i] = frand(&seed);
		for (int di = 0; di < 4; di++) {
			gpt_qweight q;
			gpt_err err = {0};
			ok(gpt_qweight_init(&q, w, N, K, dts[di], &err) == 0, "K %lld, %s weights",
			   (long long)K, gpt_dtype_name(dts[di]));
			double qerr = 0;
			for (int64_t i = 0; i < N * K; i++)
				qerr = fmax(qerr, fabs(wval(&q, i / K, i % K) - w[i]));
			double bound = dts[di] == GPT_DTYPE_F32 ? 0 : dts[di] == GPT_DTYPE_I8 ? 0.5 / 127 * 0.5 + 1e-7
				     : dts[di] == GPT_DTYPE_BF16 ? 0.5 / 256 : 0.5 / 2048;
			ok(qerr <= bound, "%s rounding error %.3g within %.3g", gpt_dtype_name(dts[di]), qerr, bound);
			for (int mi = 0; mi < 4; mi++) {
				int64_t M = Ms[mi];
				gpt_qlinear(&q, x, mi == 1 ? NULL : b, out, M, 2, &err);
				double worst = 0;
				for (int64_t i = 0; i < M; i++)
					for (int64_t n = 0; n < N; n++) {
						double s = mi == 1 ? 0 : b[n];
						for (int64_t k = 0; k < K; k++)
							s += wval(&q, n, k) * x[i * K + k];
						worst = fmax(worst, fabs(s - out[i * N + n]));
					}
				ok(worst < 2e-5, "%s, %lld rows: max |error| %.2g", gpt_dtype_name(dts[di]),
				   (long long)M, worst);
			}
			gpt_qweight_free(&q);
		}
		free(w);
		free(x);
		free(b);
		free(out);
	}
	gpt_qweight q;
	gpt_err err = {0};
	float w1[4] = {0};
	is_int(gpt_qweight_init(&q, w1, 1, 4, GPT_DTYPE_I32, &err), GPT_EUSAGE, "int32 weights are refused");
	return done_testing();
}
