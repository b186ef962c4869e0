/* The AVX-512 kernels of the linear layers on compact weights (see
 * qkernel.h): 16 weights a step, widened in registers (vcvtph2ps for fp16,
 * a shift for bf16, vpmovsxbd + vcvtdq2ps for int8) and multiplied in fp32
 * with up to four input rows a pass over a weight row. Only this file is
 * compiled for AVX-512, through target attributes; qlinear.c calls it after
 * checking the CPU. (Part of lib/infer.) */
#include "infer/qkernel.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#define INLINE TARGET __attribute__((always_inline)) static inline

/* 16 weights of a row from element k, widened to fp32; the elements of the
 * masked-off lanes are not read. */
INLINE __m512 wload(gpt_dtype dt, const void *row, int64_t k, int full, __mmask16 m)
{
	switch (dt) {
	case GPT_DTYPE_BF16: {
		const uint16_t *p = (const uint16_t *)row + k;
		__m256i h = full ? _mm256_loadu_si256((const __m256i *)p) : _mm256_maskz_loadu_epi16(m, p);
		return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
	}
	case GPT_DTYPE_F16: {
		const uint16_t *p = (const uint16_t *)row + k;
		__m256i h = full ? _mm256_loadu_si256((const __m256i *)p) : _mm256_maskz_loadu_epi16(m, p);
		return _mm512_cvtph_ps(h);
	}
	case GPT_DTYPE_I8: {
		const int8_t *p = (const int8_t *)row + k;
		__m128i b = full ? _mm_loadu_si128((const __m128i *)p) : _mm_maskz_loadu_epi8(m, p);
		return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b));
	}
	default: {
		const float *p = (const float *)row + k;
		return full ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(m, p);
	}
	}
}

INLINE __m512 xload(const float *x, int64_t k, int full, __mmask16 m)
{
	return full ? _mm512_loadu_ps(x + k) : _mm512_maskz_loadu_ps(m, x + k);
}

/* dot[i] = w . x[i] for one weight row and M <= 4 input rows (M a constant
 * where it is inlined). The row is read once, in order: one stream for the
 * hardware prefetcher, which interleaving rows defeats. Four sums per input
 * row, over alternate 16-element steps, hide the latency of the FMA; they
 * are added in a fixed order, so the result is the same for any M. */
INLINE void rowdot(gpt_dtype dt, int M, const char *w, const float *x, int64_t K, float *dot)
{
	__m512 acc[4][4];
	#pragma GCC unroll 4
	for (int i = 0; i < M; i++)
		#pragma GCC unroll 4
		for (int j = 0; j < 4; j++)
			acc[i][j] = _mm512_setzero_ps();
	int64_t k = 0;
	for (; k + 64 <= K; k += 64)
		#pragma GCC unroll 4
		for (int j = 0; j < 4; j++) {
			__m512 wv = wload(dt, w, k + 16 * j, 1, 0);
			#pragma GCC unroll 4
			for (int i = 0; i < M; i++)
				acc[i][j] = _mm512_fmadd_ps(wv, xload(x + i * K, k + 16 * j, 1, 0), acc[i][j]);
		}
	/* the rest, 16 at a time into the sums in turn, the last step masked */
	#pragma GCC unroll 4
	for (int j = 0; j < 4 && k < K; j++, k += 16) {
		int full = K - k >= 16;
		__mmask16 m = full ? (__mmask16)0xffff : (__mmask16)((1u << (K - k)) - 1);
		__m512 wv = wload(dt, w, k, full, m);
		#pragma GCC unroll 4
		for (int i = 0; i < M; i++)
			acc[i][j] = _mm512_fmadd_ps(wv, xload(x + i * K, k, full, m), acc[i][j]);
	}
	#pragma GCC unroll 4
	for (int i = 0; i < M; i++)
		dot[i] = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[i][0], acc[i][1]),
							    _mm512_add_ps(acc[i][2], acc[i][3])));
}

/* Rows [n0, n1) of out for M <= 8 inputs (a constant where it is
 * inlined); a second group of four inputs reads the weight row again, from
 * L1. */
INLINE void rows(gpt_dtype dt, int M, const gpt_qweight *q, const float *x, const float *bias,
		 float *out, int64_t n0, int64_t n1)
{
	int64_t N = q->N, K = q->K;
	size_t rb = (size_t)K * (dt == GPT_DTYPE_F32 ? 4 : dt == GPT_DTYPE_I8 ? 1 : 2);
	for (int64_t n = n0; n < n1; n++) {
		const char *row = (const char *)q->w + (size_t)n * rb;
		float dot[8];
		rowdot(dt, M < 4 ? M : 4, row, x, K, dot);
		if (M > 4)
			rowdot(dt, M - 4, row, x + 4 * K, K, dot + 4);
		float s = dt == GPT_DTYPE_I8 ? q->scale[n] : 1.0f;
		float b = bias ? bias[n] : 0.0f;
		#pragma GCC unroll 8
		for (int i = 0; i < M; i++)
			out[i * N + n] = dot[i] * s + b;
	}
}

typedef void (*rows_fn)(const gpt_qweight *q, const float *x, const float *bias, float *out,
			int64_t n0, int64_t n1);

#define ROWS_FN(T, DT, M)                                                                       \
	TARGET static void rows_##T##_##M(const gpt_qweight *q, const float *x, const float *bias, \
					  float *out, int64_t n0, int64_t n1)                   \
	{                                                                                      \
		rows(DT, M, q, x, bias, out, n0, n1);                                          \
	}
#define ROWS_FNS(T, DT)                                                                         \
	ROWS_FN(T, DT, 1) ROWS_FN(T, DT, 2) ROWS_FN(T, DT, 3) ROWS_FN(T, DT, 4) ROWS_FN(T, DT, 5) \
	ROWS_FN(T, DT, 6) ROWS_FN(T, DT, 7) ROWS_FN(T, DT, 8)                                    \
	static const rows_fn rows_##T[8] = {rows_##T##_1, rows_##T##_2, rows_##T##_3,            \
					    rows_##T##_4, rows_##T##_5, rows_##T##_6,            \
					    rows_##T##_7, rows_##T##_8};

ROWS_FNS(f32, GPT_DTYPE_F32)
ROWS_FNS(bf16, GPT_DTYPE_BF16)
ROWS_FNS(f16, GPT_DTYPE_F16)
ROWS_FNS(i8, GPT_DTYPE_I8)

void gpt_qrows_avx512(const gpt_qweight *q, const float *x, const float *bias, float *out,
		      int64_t M, int64_t n0, int64_t n1)
{
	const rows_fn *fn = rows_f32;
	switch (q->dtype) {
	case GPT_DTYPE_BF16: fn = rows_bf16; break;
	case GPT_DTYPE_F16: fn = rows_f16; break;
	case GPT_DTYPE_I8: fn = rows_i8; break;
	default: break;
	}
	fn[M - 1](q, x, bias, out, n0, n1);
}

TARGET void gpt_qwiden_avx512(const gpt_qweight *q, int64_t n0, int64_t n1, float *out)
{
	int64_t K = q->K;
	size_t rb = (size_t)K * gpt_dtype_size(q->dtype);
	for (int64_t n = n0; n < n1; n++) {
		const char *row = (const char *)q->w + (size_t)n * rb;
		float *o = out + (n - n0) * K;
		__m512 s = _mm512_set1_ps(q->dtype == GPT_DTYPE_I8 ? q->scale[n] : 1.0f);
		int64_t k = 0;
		for (; k + 16 <= K; k += 16)
			_mm512_storeu_ps(o + k, _mm512_mul_ps(wload(q->dtype, row, k, 1, 0), s));
		if (k < K) {
			__mmask16 m = (__mmask16)((1u << (K - k)) - 1);
			_mm512_mask_storeu_ps(o + k, m, _mm512_mul_ps(wload(q->dtype, row, k, 0, m), s));
		}
	}
}
#endif
