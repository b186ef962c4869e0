/* GELU, tanh approximation (GPT-2's), forward and backward.
 *
 * 0.5 (1 + tanh u) is the logistic function of 2u, so GELU is
 * v / (1 + exp(-2u)) and its derivative s + 2 v s (1 - s) K (1 + 3 A v^2)
 * with s that logistic: one exponential per element and no tanhf (libm's
 * tanhf was 7% of a 124M training step). The exponential is vexp.h's,
 * written once for AVX-512, once for AVX2 and once in scalar C with the
 * same operations in the same order, and so is the rest: every path gives
 * the same bits for the same element: results never depend on where an
 * element falls in a vector, on the thread count or on the CPU. */
#include "cpu/kernels.h"
#include "cpu/vexp.h"

#include <omp.h>

#define GELU_K 0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_A 0.044715f

/* ---- scalar (the reference the vector paths match bit for bit) ---- */

/* s = 1 / (1 + exp(-2u)), u = K v (1 + A v^2) */
static float logistic_s(float v)
{
	float u = (GELU_K * v) * fmaf(GELU_A, v * v, 1.0f);
	return 1.0f / (1.0f + gpt_exp_s(-2.0f * u));
}

static void gelu_fwd_s(float *y, const float *x, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		y[i] = x[i] * logistic_s(x[i]);
}

static void gelu_bwd_s(float *dx, const float *x, const float *dy, int64_t n)
{
	for (int64_t i = 0; i < n; i++) {
		float v = x[i], s = logistic_s(v);
		float d = (2.0f * GELU_K * v) * s;
		d = d * (1.0f - s);
		d = d * fmaf(3.0f * GELU_A, v * v, 1.0f);
		dx[i] = (d + s) * dy[i];
	}
}

#ifdef GPT_VEXP_X86

/* ---- AVX-512 ---- */

#define T512 __attribute__((target("avx512f")))

T512 static __m512 logistic_512(__m512 v)
{
	__m512 u = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(GELU_K), v),
				 _mm512_fmadd_ps(_mm512_set1_ps(GELU_A), _mm512_mul_ps(v, v),
						 _mm512_set1_ps(1.0f)));
	__m512 e = gpt_exp_512(_mm512_mul_ps(_mm512_set1_ps(-2.0f), u));
	return _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

T512 static void gelu_512(int bwd, float *out, const float *x, const float *dy, int64_t n)
{
	for (int64_t i = 0; i < n; i += 16) {
		__mmask16 k = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
		__m512 v = _mm512_maskz_loadu_ps(k, x + i);
		__m512 s = logistic_512(v);
		__m512 r;
		if (!bwd) {
			r = _mm512_mul_ps(v, s);
		} else {
			__m512 d = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(2.0f * GELU_K), v), s);
			d = _mm512_mul_ps(d, _mm512_sub_ps(_mm512_set1_ps(1.0f), s));
			d = _mm512_mul_ps(d, _mm512_fmadd_ps(_mm512_set1_ps(3.0f * GELU_A), _mm512_mul_ps(v, v),
							     _mm512_set1_ps(1.0f)));
			r = _mm512_mul_ps(_mm512_add_ps(d, s), _mm512_maskz_loadu_ps(k, dy + i));
		}
		_mm512_mask_storeu_ps(out + i, k, r);
	}
}

/* ---- AVX2 ---- */

#define T256 __attribute__((target("avx2,fma")))

T256 static __m256 logistic_256(__m256 v)
{
	__m256 u = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(GELU_K), v),
				 _mm256_fmadd_ps(_mm256_set1_ps(GELU_A), _mm256_mul_ps(v, v),
						 _mm256_set1_ps(1.0f)));
	__m256 e = gpt_exp_256(_mm256_mul_ps(_mm256_set1_ps(-2.0f), u));
	return _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

T256 static __m256 gelu_8(int bwd, __m256 v, __m256 g)
{
	__m256 s = logistic_256(v);
	if (!bwd)
		return _mm256_mul_ps(v, s);
	__m256 d = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(2.0f * GELU_K), v), s);
	d = _mm256_mul_ps(d, _mm256_sub_ps(_mm256_set1_ps(1.0f), s));
	d = _mm256_mul_ps(d, _mm256_fmadd_ps(_mm256_set1_ps(3.0f * GELU_A), _mm256_mul_ps(v, v),
					     _mm256_set1_ps(1.0f)));
	return _mm256_mul_ps(_mm256_add_ps(d, s), g);
}

T256 static void gelu_256(int bwd, float *out, const float *x, const float *dy, int64_t n)
{
	int64_t i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(out + i, gelu_8(bwd, _mm256_loadu_ps(x + i),
						 bwd ? _mm256_loadu_ps(dy + i) : _mm256_setzero_ps()));
	if (i < n) { /* the tail through the same vector code */
		float xv[8] = {0}, gv[8] = {0}, ov[8];
		memcpy(xv, x + i, (size_t)(n - i) * 4);
		if (bwd)
			memcpy(gv, dy + i, (size_t)(n - i) * 4);
		_mm256_storeu_ps(ov, gelu_8(bwd, _mm256_loadu_ps(xv), _mm256_loadu_ps(gv)));
		memcpy(out + i, ov, (size_t)(n - i) * 4);
	}
}

#endif

/* One contiguous range, on the widest path this CPU runs. */
static void gelu_range(int bwd, float *out, const float *x, const float *dy, int64_t n)
{
#ifdef GPT_VEXP_X86
	if (__builtin_cpu_supports("avx512f")) {
		gelu_512(bwd, out, x, dy, n);
		return;
	}
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
		gelu_256(bwd, out, x, dy, n);
		return;
	}
#endif
	if (bwd)
		gelu_bwd_s(out, x, dy, n);
	else
		gelu_fwd_s(out, x, n);
}

/* Splits n over the threads in blocks of 64 elements. */
static void gelu_run(gpt_backend *be, int bwd, float *out, const float *x, const float *dy, int64_t n)
{
	int64_t blocks = (n + 63) / 64;
	#pragma omp parallel num_threads(be->threads) if (n > 8192)
	{
		int nt = omp_get_num_threads(), t = omp_get_thread_num();
		int64_t b0 = blocks * t / nt, b1 = blocks * (t + 1) / nt;
		int64_t i0 = b0 * 64, i1 = b1 * 64 < n ? b1 * 64 : n;
		if (i1 > i0)
			gelu_range(bwd, out + i0, x + i0, bwd ? dy + i0 : NULL, i1 - i0);
	}
}

int gpt_cpu_gelu_fwd(gpt_backend *be, void *out, const void *inp, int64_t n, gpt_err *err)
{
	int rc = gpt_cpu_check_sizes("gelu_fwd", err, 1, n);
	if (rc)
		return rc;
	gelu_run(be, 0, out, inp, NULL, n);
	return 0;
}

int gpt_cpu_gelu_bwd(gpt_backend *be, void *dinp, const void *inp, const void *dout,
		     int64_t n, gpt_err *err)
{
	int rc = gpt_cpu_check_sizes("gelu_bwd", err, 1, n);
	if (rc)
		return rc;
	gelu_run(be, 1, dinp, inp, dout, n);
	return 0;
}

int gpt_cpu_gelu_on(int path, int bwd, float *out, const float *x, const float *dy, int64_t n)
{
#ifdef GPT_VEXP_X86
	if (path == 2 && __builtin_cpu_supports("avx512f")) {
		gelu_512(bwd, out, x, dy, n);
		return 0;
	}
	if (path == 1 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
		gelu_256(bwd, out, x, dy, n);
		return 0;
	}
#endif
	if (path != 0)
		return -1;
	if (bwd)
		gelu_bwd_s(out, x, dy, n);
	else
		gelu_fwd_s(out, x, n);
	return 0;
}
