/* GELU, tanh approximation (GPT-2's), forward and backward. */
#include "cpu/kernels.h"
#include "cpu/simd_avx512.h"

#include <math.h>

#define GELU_K 0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_A 0.044715f

#if defined(__x86_64__)
/* y[0..n) = GELU(x), 16 at a time, tanh u = 1 - 2 / (e^2u + 1) (libm's
 * tanhf is most of a generated token's time outside the matrix products). */
GPT_AVX512 static void gelu_avx512(float *y, const float *x, int64_t n)
{
	const __m512 k = _mm512_set1_ps(GELU_K), a = _mm512_set1_ps(GELU_A),
		     one = _mm512_set1_ps(1.0f), two = _mm512_set1_ps(2.0f),
		     half = _mm512_set1_ps(0.5f);
	for (int64_t i = 0; i < n; i += 16) {
		__mmask16 m = gpt_mask16(n - i);
		__m512 v = _mm512_maskz_loadu_ps(m, x + i);
		__m512 u = _mm512_mul_ps(k, _mm512_fmadd_ps(_mm512_mul_ps(a, v), _mm512_mul_ps(v, v), v));
		__m512 e = gpt_exp512(_mm512_add_ps(u, u));
		__m512 t = _mm512_sub_ps(one, _mm512_div_ps(two, _mm512_add_ps(e, one)));
		_mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(_mm512_mul_ps(half, v), _mm512_add_ps(one, t)));
	}
}
#else
#define gelu_avx512(y, x, n) ((void)0)
#endif

int gpt_cpu_gelu_fwd(gpt_backend *be, void *out, const void *inp, int64_t n, gpt_err *err)
{
	int rc = gpt_cpu_check_sizes("gelu_fwd", err, 1, n);
	if (rc)
		return rc;
	const float *x = inp;
	float *y = out;
	if (gpt_cpu_avx512()) {
		/* each element alone: the same result however the range is cut */
		enum { PIECE = 4096 };
		#pragma omp parallel for num_threads(be->threads) schedule(static) if (n > 32768)
		for (int64_t i0 = 0; i0 < n; i0 += PIECE)
			gelu_avx512(y + i0, x + i0, n - i0 < PIECE ? n - i0 : PIECE);
		return 0;
	}
	#pragma omp parallel for num_threads(be->threads) schedule(static) if (n > 8192)
	for (int64_t i = 0; i < n; i++) {
		float v = x[i];
		y[i] = 0.5f * v * (1.0f + tanhf(GELU_K * (v + GELU_A * v * v * v)));
	}
	return 0;
}

int gpt_cpu_gelu_bwd(gpt_backend *be, void *dinp, const void *inp, const void *dout,
		     int64_t n, gpt_err *err)
{
	int rc = gpt_cpu_check_sizes("gelu_bwd", err, 1, n);
	if (rc)
		return rc;
	const float *x = inp, *dy = dout;
	float *dx = dinp;
	#pragma omp parallel for num_threads(be->threads) schedule(static) if (n > 8192)
	for (int64_t i = 0; i < n; i++) {
		float v = x[i];
		float u = GELU_K * (v + GELU_A * v * v * v);
		float t = tanhf(u);
		float sech2 = 1.0f - t * t;
		float g = 0.5f * (1.0f + t) + 0.5f * v * sech2 * GELU_K * (1.0f + 3.0f * GELU_A * v * v);
		dx[i] = g * dy[i];
	}
	return 0;
}
