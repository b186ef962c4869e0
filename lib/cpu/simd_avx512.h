/* AVX-512 helpers for the CPU ops that have an AVX-512 path (attention_kv)
 * and for lib/infer's kernels: the CPU check and lane masks (e^x is
 * vexp.h's, shared with GELU and cross-entropy).
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

/* The mask of the first n < 16 lanes (all 16 when n >= 16). */
static inline __mmask16 gpt_mask16(int64_t n)
{
	return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1);
}
#else
static inline int gpt_cpu_avx512(void) { return 0; }
#endif

#endif
