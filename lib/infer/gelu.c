/* GELU (tanh form) for generation: with AVX-512, 16 at a time with
 * tanh u = 1 - 2 / (e^2u + 1) and a vector e^x (within 1 ulp), else the
 * backend's gelu_fwd (libm's tanhf, whose calls were most of a generated
 * token's time outside the matrix products). Training keeps the backend's
 * op: its results feed AdamW, whose tests hold them to libm's bits.
 * (Part of lib/infer.) */
#include "infer/infer.h"

#include "cpu/simd_avx512.h"

#define GELU_K 0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_A 0.044715f

#if defined(__x86_64__)
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

int gpt_infer_gelu(gpt_backend *be, float *y, const float *x, int64_t n, gpt_err *err)
{
	if (!gpt_cpu_avx512())
		return be->ops->gelu_fwd(be, y, x, n, err);
	/* each element alone: the same result however the range is cut */
	enum { PIECE = 4096 };
	#pragma omp parallel for num_threads(be->threads) schedule(static) if (n > 32768)
	for (int64_t i0 = 0; i0 < n; i0 += PIECE)
		gelu_avx512(y + i0, x + i0, n - i0 < PIECE ? n - i0 : PIECE);
	return 0;
}
