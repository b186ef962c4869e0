/* exp for fp32 vectors, shared by the CPU kernels that exponentiate a lot
 * (GELU, cross-entropy): Cephes-style range reduction and a degree-5
 * polynomial (about 1 ulp over [EXP_LO, EXP_HI]; inputs are clamped to that
 * range, a NaN to EXP_LO). The scalar and vector forms do the same
 * operations in the same order, so they give the same bits. Private to
 * lib/cpu. */
#ifndef GPT_CPU_VEXP_H
#define GPT_CPU_VEXP_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define GPT_VEXP_X86 1
#endif

#define EXP_LO -87.0f /* exp stays a normal float over [EXP_LO, EXP_HI] */
#define EXP_HI 88.0f
#define LOG2E 1.44269504088896341f
#define LN2_HI 0.693359375f
#define LN2_LO -2.12194440e-4f
#define P0 1.9875691500e-4f
#define P1 1.3981999507e-3f
#define P2 8.3334519073e-3f
#define P3 4.1665795894e-2f
#define P4 1.6666665459e-1f
#define P5 5.0000001201e-1f

static inline float gpt_exp_s(float x)
{
	x = fminf(fmaxf(x, EXP_LO), EXP_HI);
	float n = rintf(x * LOG2E);
	float r = fmaf(n, -LN2_HI, x);
	r = fmaf(n, -LN2_LO, r);
	float p = fmaf(P0, r, P1);
	p = fmaf(p, r, P2);
	p = fmaf(p, r, P3);
	p = fmaf(p, r, P4);
	p = fmaf(p, r, P5);
	float y = fmaf(p, r * r, r) + 1.0f;
	uint32_t bits = (uint32_t)((int32_t)n + 127) << 23;
	float scale;
	memcpy(&scale, &bits, 4);
	return y * scale;
}

#ifdef GPT_VEXP_X86
__attribute__((target("avx512f"))) static inline __m512 gpt_exp_512(__m512 x)
{
	x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(EXP_LO)), _mm512_set1_ps(EXP_HI));
	__m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(LOG2E)),
					_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-LN2_HI), x);
	r = _mm512_fmadd_ps(n, _mm512_set1_ps(-LN2_LO), r);
	__m512 p = _mm512_fmadd_ps(_mm512_set1_ps(P0), r, _mm512_set1_ps(P1));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(P2));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(P3));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(P4));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(P5));
	__m512 e = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
	__m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
	return _mm512_mul_ps(e, _mm512_castsi512_ps(bits));
}

/* max/min return the second operand for a NaN, as fmaxf/fminf return the
 * number: the order of operands matters */
__attribute__((target("avx2,fma"))) static inline __m256 gpt_exp_256(__m256 x)
{
	x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(EXP_LO)), _mm256_set1_ps(EXP_HI));
	__m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(LOG2E)),
				   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-LN2_HI), x);
	r = _mm256_fmadd_ps(n, _mm256_set1_ps(-LN2_LO), r);
	__m256 p = _mm256_fmadd_ps(_mm256_set1_ps(P0), r, _mm256_set1_ps(P1));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(P2));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(P3));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(P4));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(P5));
	__m256 e = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
	__m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
	return _mm256_mul_ps(e, _mm256_castsi256_ps(bits));
}
#endif

#endif
