/* AVX-512 helpers for the CPU ops that have an AVX-512 path (attention_kv)
 * and for lib/infer's GELU: the CPU check and e^x, 16 lanes at a time.
 * Functions here carry their own target attribute, so the files that
 * include this one need no -mavx512 flag and call them only after
 * gpt_cpu_avx512() says the CPU has the instructions. */
#ifndef GPT_CPU_SIMD_AVX512_H
#define GPT_CPU_SIMD_AVX512_H

#if defined(__x86_64__)
#include <immintrin.h>

#define GPT_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#define GPT_AVX512_INLINE GPT_AVX512 __attribute__((always_inline)) static inline

static inline int gpt_cpu_avx512(void)
{
	return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
	       __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}

/* e^x within 1 ulp of the true value for x in [-87, 88] (clamped outside):
 * x = n ln2 + r with |r| <= ln2 / 2, e^r by its Taylor series to r^7, then
 * scaled by 2^n. */
GPT_AVX512_INLINE __m512 gpt_exp512(__m512 x)
{
	x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.0f)), _mm512_set1_ps(88.0f));
	__m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
					_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
	r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
	__m512 p = _mm512_set1_ps(1.0f / 5040);
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
	return _mm512_scalef_ps(p, n);
}

/* The mask of the first n < 16 lanes (all 16 when n >= 16). */
static inline __mmask16 gpt_mask16(int64_t n)
{
	return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1);
}
#else
static inline int gpt_cpu_avx512(void) { return 0; }
#endif

#endif
