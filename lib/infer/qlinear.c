/* Linear layers for generation with weights held as fp32, bf16, fp16 or
 * int8 (one scale per output row). Generating a token multiplies a few rows
 * of activations by every weight, so the time is the time to read the
 * weights: a fused kernel reads each weight row once, widens it in
 * registers and takes its dot product with every input row (AVX-512 in
 * qkernel_avx512.c, AVX2 + FMA + F16C here, plain C otherwise, chosen by
 * what the CPU has), each thread over one contiguous range of rows. Many
 * rows at once (a prompt) go to sgemm, on 16-bit or int8 weights through
 * fp32 copies of a few megabytes of rows at a time. (Part of lib/infer.) */
#include "infer/qkernel.h"

#include "ckpt/export.h"

#include <cblas.h>
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* Rows of activations above which sgemm is faster than the fused kernel. */
#define FUSED_MAX_ROWS 8
/* Weights widened to fp32 per sgemm call (elements; at least one row). */
#define CHUNK_ELEMS (4 << 20)

int gpt_qweight_init(gpt_qweight *q, const float *w, int64_t N, int64_t K, gpt_dtype dtype,
		     gpt_err *err)
{
	memset(q, 0, sizeof *q);
	q->dtype = dtype;
	q->kernel = gpt_qkernel_best();
	q->N = N;
	q->K = K;
	if (dtype == GPT_DTYPE_F32) {
		q->w = (void *)w; /* the model's own fp32 copy */
		return 0;
	}
	if (dtype != GPT_DTYPE_BF16 && dtype != GPT_DTYPE_F16 && dtype != GPT_DTYPE_I8)
		return gpt_err_set(err, GPT_EUSAGE, "weights: expected fp32, bf16, fp16 or int8, found %s",
				   gpt_dtype_name(dtype));
	q->owned = gpt_weights_alloc((size_t)(N * K) * gpt_dtype_size(dtype), "weights", err);
	if (!q->owned)
		return GPT_EINTERNAL;
	q->w = q->owned;
	if (dtype != GPT_DTYPE_I8)
		return gpt_convert(q->owned, dtype, w, GPT_DTYPE_F32, (size_t)(N * K), err);
	q->scale = gpt_malloc((size_t)N * sizeof(float), "weight scales", err);
	if (!q->scale)
		return GPT_EINTERNAL;
	gpt_quantize_rows(w, N, K, q->owned, q->scale);
	return 0;
}

void gpt_qweight_free(gpt_qweight *q)
{
	free(q->owned);
	free(q->scale);
	memset(q, 0, sizeof *q);
}

/* Weight row n, elements [k0, k1), widened to fp32. */
static void widen(const gpt_qweight *q, int64_t n, int64_t k0, int64_t k1, float *out)
{
	int64_t at = n * q->K;
	gpt_err err;
	switch (q->dtype) {
	case GPT_DTYPE_BF16:
	case GPT_DTYPE_F16:
		/* cannot fail between these dtypes */
		gpt_convert(out, GPT_DTYPE_F32, (const uint16_t *)q->w + at + k0, q->dtype,
			    (size_t)(k1 - k0), &err);
		break;
	case GPT_DTYPE_I8: {
		const int8_t *h = (const int8_t *)q->w + at;
		for (int64_t k = k0; k < k1; k++)
			out[k - k0] = (float)h[k] * q->scale[n];
		break;
	}
	default: memcpy(out, (const float *)q->w + at + k0, (size_t)(k1 - k0) * sizeof(float));
	}
}

/* The plain C kernel: out[i][n] = x[i] . w[n] for m rows (the reference of
 * the vector one, and the path of CPUs without AVX2). */
static void dot_rows_c(const gpt_qweight *q, int64_t n, const float *x, int64_t m, float *dot)
{
	float buf[256];
	for (int64_t i = 0; i < m; i++)
		dot[i] = 0;
	for (int64_t k0 = 0; k0 < q->K; k0 += 256) {
		int64_t k1 = k0 + 256 < q->K ? k0 + 256 : q->K;
		widen(q, n, k0, k1, buf);
		for (int64_t i = 0; i < m; i++) {
			float s = 0;
			for (int64_t k = k0; k < k1; k++)
				s += buf[k - k0] * x[i * q->K + k];
			dot[i] += s;
		}
	}
}

#if defined(__x86_64__)
#define VEC_TARGET __attribute__((target("avx2,fma,f16c")))

VEC_TARGET static inline __m256 load8(const gpt_qweight *q, const void *row, int64_t k)
{
	switch (q->dtype) {
	case GPT_DTYPE_BF16: {
		__m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)row + k));
		return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
	}
	case GPT_DTYPE_F16:
		return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)row + k)));
	case GPT_DTYPE_I8:
		return _mm256_cvtepi32_ps(
			_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)((const int8_t *)row + k))));
	default: return _mm256_loadu_ps((const float *)row + k);
	}
}

VEC_TARGET static inline float hsum(__m256 v)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
	return _mm_cvtss_f32(s);
}

/* Eight input rows in one pass over a weight row. */
VEC_TARGET static void dot8_avx2(const gpt_qweight *q, const void *row, const float *x, float s,
				 float *dot)
{
	int64_t K = q->K;
	__m256 a[8];
	for (int i = 0; i < 8; i++)
		a[i] = _mm256_setzero_ps();
	for (int64_t k = 0; k < K; k += 8) {
		__m256 wv = load8(q, row, k);
		for (int i = 0; i < 8; i++)
			a[i] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + i * K + k), a[i]);
	}
	for (int i = 0; i < 8; i++)
		dot[i] = hsum(a[i]) * s;
}

/* Up to 4 input rows per pass over a weight row (8 in one pass when there
 * are 8); K a multiple of 8. */
VEC_TARGET static void dot_rows_avx2(const gpt_qweight *q, int64_t n, const float *x, int64_t m,
				     float *dot)
{
	int64_t K = q->K;
	const void *row = (const char *)q->w + (size_t)(n * K) * gpt_dtype_size(q->dtype);
	if (m == 8) {
		dot8_avx2(q, row, x, q->dtype == GPT_DTYPE_I8 ? q->scale[n] : 1.0f, dot);
		return;
	}
	for (int64_t i0 = 0; i0 < m; i0 += 4) {
		int64_t mm = m - i0 < 4 ? m - i0 : 4;
		const float *x0 = x + i0 * K;
		__m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
		if (mm == 1) {
			__m256 b0 = a0;
			int64_t k = 0;
			for (; k + 16 <= K; k += 16) {
				a0 = _mm256_fmadd_ps(load8(q, row, k), _mm256_loadu_ps(x0 + k), a0);
				b0 = _mm256_fmadd_ps(load8(q, row, k + 8), _mm256_loadu_ps(x0 + k + 8), b0);
			}
			for (; k < K; k += 8)
				a0 = _mm256_fmadd_ps(load8(q, row, k), _mm256_loadu_ps(x0 + k), a0);
			a0 = _mm256_add_ps(a0, b0);
		} else {
			for (int64_t k = 0; k < K; k += 8) {
				__m256 wv = load8(q, row, k);
				a0 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x0 + k), a0);
				a1 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x0 + K + k), a1);
				if (mm > 2)
					a2 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x0 + 2 * K + k), a2);
				if (mm > 3)
					a3 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x0 + 3 * K + k), a3);
			}
		}
		float s = q->dtype == GPT_DTYPE_I8 ? q->scale[n] : 1.0f;
		__m256 acc[4] = {a0, a1, a2, a3};
		for (int64_t i = 0; i < mm; i++)
			dot[i0 + i] = hsum(acc[i]) * s;
	}
}

static int have_avx2(void)
{
#if defined(__clang__) && __clang_major__ < 15
	/* clang 14 (the fuzz build) knows no "f16c" feature name; every AVX2 +
	 * FMA processor has F16C */
	return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
	return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
	       __builtin_cpu_supports("f16c");
#endif
}

static int have_avx512(void)
{
	return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
	       __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}
#else
static int have_avx2(void) { return 0; }
static int have_avx512(void) { return 0; }
#define dot_rows_avx2 dot_rows_c
#define gpt_qrows_avx512(q, x, bias, out, M, n0, n1) ((void)0)
#define gpt_qwiden_avx512(q, n0, n1, out) ((void)0)
#endif

gpt_qkernel gpt_qkernel_best(void)
{
	return have_avx512() ? GPT_QKERNEL_AVX512 : have_avx2() ? GPT_QKERNEL_AVX2 : GPT_QKERNEL_C;
}

int gpt_qkernel_supported(gpt_qkernel k)
{
	return k == GPT_QKERNEL_C || (k == GPT_QKERNEL_AVX2 && have_avx2()) ||
	       (k == GPT_QKERNEL_AVX512 && have_avx512());
}

/* Thread t's rows of N among nt threads: contiguous, whole passes of 4. */
static void my_rows(int64_t N, int t, int nt, int64_t *n0, int64_t *n1)
{
	int64_t per = ((N + nt - 1) / nt + 3) / 4 * 4;
	*n0 = t * per < N ? t * per : N;
	*n1 = *n0 + per < N ? *n0 + per : N;
}

/* out (M, N) = x (M, K) w^T + bias, M <= FUSED_MAX_ROWS. */
static void fused(const gpt_qweight *q, const float *x, const float *bias, float *out, int64_t M,
		  int threads)
{
	int64_t N = q->N;
	gpt_qkernel kern = q->kernel;
	if (kern == GPT_QKERNEL_AVX2 && q->K % 8)
		kern = GPT_QKERNEL_C;
	#pragma omp parallel num_threads(threads)
	{
		int64_t n0, n1;
		my_rows(N, omp_get_thread_num(), omp_get_num_threads(), &n0, &n1);
		if (kern == GPT_QKERNEL_AVX512) {
			gpt_qrows_avx512(q, x, bias, out, M, n0, n1);
		} else {
			for (int64_t n = n0; n < n1; n++) {
				float dot[FUSED_MAX_ROWS];
				if (kern == GPT_QKERNEL_AVX2)
					dot_rows_avx2(q, n, x, M, dot);
				else
					dot_rows_c(q, n, x, M, dot);
				for (int64_t i = 0; i < M; i++)
					out[i * N + n] = dot[i] + (bias ? bias[n] : 0.0f);
			}
		}
	}
}

int gpt_qlinear(const gpt_qweight *q, const float *x, const float *bias, float *out, int64_t M,
		int threads, gpt_err *err)
{
	int64_t N = q->N, K = q->K;
	if (threads < 1)
		threads = 1;
	if (M <= FUSED_MAX_ROWS) {
		fused(q, x, bias, out, M, threads);
		return 0;
	}
	for (int64_t i = 0; bias && i < M; i++)
		memcpy(out + i * N, bias, (size_t)N * sizeof(float));
	if (q->dtype == GPT_DTYPE_F32) {
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)N, (int)K, 1.0f, x,
			    (int)K, q->w, (int)K, bias ? 1.0f : 0.0f, out, (int)N);
		return 0;
	}
	int64_t chunk = K > 0 && CHUNK_ELEMS / K > 0 ? CHUNK_ELEMS / K : 1;
	if (chunk > N)
		chunk = N;
	float *tmp = gpt_aligned_alloc((size_t)(chunk * K) * sizeof(float), "weight rows", err);
	if (!tmp)
		return GPT_EINTERNAL;
	for (int64_t c0 = 0; c0 < N; c0 += chunk) {
		int64_t nn = N - c0 < chunk ? N - c0 : chunk;
		#pragma omp parallel num_threads(threads)
		{
			int64_t n0, n1;
			my_rows(nn, omp_get_thread_num(), omp_get_num_threads(), &n0, &n1);
			if (q->kernel == GPT_QKERNEL_AVX512)
				gpt_qwiden_avx512(q, c0 + n0, c0 + n1, tmp + n0 * K);
			else
				for (int64_t r = n0; r < n1; r++)
					widen(q, c0 + r, 0, K, tmp + r * K);
		}
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)nn, (int)K, 1.0f, x,
			    (int)K, tmp, (int)K, bias ? 1.0f : 0.0f, out + c0, (int)N);
	}
	free(tmp);
	return 0;
}
