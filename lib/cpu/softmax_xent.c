/* Softmax cross-entropy over vocabulary pieces: per-row statistics a caller
 * can reduce over a tensor-parallel group, the loss, and the logit gradient.
 * Padding columns (global index >= V) never enter the softmax. */
#include "cpu/kernels.h"

#include <math.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define XENT_X86 1
#endif

#ifdef XENT_X86
/* The rows of the two ops below on AVX-512, sixteen columns at a time, the
 * last ones masked. The cross-entropy reads 50,304 logits a row twice and
 * exponentiates each twice: with libm's expf this was 12% of a step of the
 * small benchmark model. The exponential is computed in double and rounded
 * once to float, so it is libm's correctly rounded expf but in rare
 * near-halfway cases: the reference tests (tests/ref) compare weights after
 * AdamW steps, which amplify the last bit of a gradient whose true value is
 * zero, so a less exact exp would move them. The sum of exponentials is
 * in double, as the scalar code, in sixteen lanes. */
#define T512 __attribute__((target("avx512f")))

/* exp of eight floats (as doubles) rounded to float; a NaN stays a NaN */
T512 static inline __m256 exp8(__m512d x)
{
	/* max/min return their second operand for a NaN */
	x = _mm512_min_pd(_mm512_set1_pd(1000.0), _mm512_max_pd(_mm512_set1_pd(-1000.0), x));
	__m512d n = _mm512_roundscale_pd(_mm512_mul_pd(x, _mm512_set1_pd(1.4426950408889634)),
					 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m512d r = _mm512_fmadd_pd(n, _mm512_set1_pd(-6.93147180369123816490e-01), x);
	r = _mm512_fmadd_pd(n, _mm512_set1_pd(-1.90821492927058770002e-10), r);
	/* Taylor to r^11 over |r| <= ln 2 / 2: relative error below 1e-14 */
	static const double c[] = {1.0 / 39916800, 1.0 / 3628800, 1.0 / 362880, 1.0 / 40320,
				   1.0 / 5040, 1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1.0, 1.0};
	__m512d p = _mm512_set1_pd(c[0]);
	for (int i = 1; i < 12; i++)
		p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(c[i]));
	return _mm512_cvtpd_ps(_mm512_scalef_pd(p, n));
}

T512 static inline __mmask16 tail(int64_t left)
{
	return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
}

T512 static void xent_row_512(float *max, float *sumexp, const float *row, int64_t nr)
{
	__m512 mv = _mm512_set1_ps(-INFINITY);
	for (int64_t j = 0; j < nr; j += 16)
		mv = _mm512_max_ps(_mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), tail(nr - j), row + j), mv);
	float m = _mm512_reduce_max_ps(mv);
	__m512 mb = _mm512_set1_ps(m);
	__m512d s0 = _mm512_setzero_pd(), s1 = s0;
	for (int64_t j = 0; j < nr; j += 16) {
		__mmask16 k = tail(nr - j);
		__m512 d = _mm512_sub_ps(_mm512_maskz_loadu_ps(k, row + j), mb);
		__m256 e0 = exp8(_mm512_cvtps_pd(_mm512_castps512_ps256(d)));
		__m256 e1 = exp8(_mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(d), 1))));
		s0 = _mm512_mask_add_pd(s0, (__mmask8)k, s0, _mm512_cvtps_pd(e0));
		s1 = _mm512_mask_add_pd(s1, (__mmask8)(k >> 8), s1, _mm512_cvtps_pd(e1));
	}
	*max = m;
	*sumexp = (float)_mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
}

T512 static void xent_grad_512(float *drow, const float *row, int64_t nr, float m, float inv, float dloss)
{
	__m512 mb = _mm512_set1_ps(m), ib = _mm512_set1_ps(inv), db = _mm512_set1_ps(dloss);
	for (int64_t j = 0; j < nr; j += 16) {
		__mmask16 k = tail(nr - j);
		__m512 d = _mm512_sub_ps(_mm512_maskz_loadu_ps(k, row + j), mb);
		__m256 e0 = exp8(_mm512_cvtps_pd(_mm512_castps512_ps256(d)));
		__m256 e1 = exp8(_mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(d), 1))));
		__m512 e = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(e0)),
							       _mm256_castps_pd(e1), 1));
		_mm512_mask_storeu_ps(drow + j, k, _mm512_mul_ps(_mm512_mul_ps(e, ib), db));
	}
}
#endif

static int use_512(void)
{
#ifdef XENT_X86
	return __builtin_cpu_supports("avx512f");
#else
	return 0;
#endif
}

static int check(const char *op, const int32_t *targets, int64_t N, int64_t Vl, int64_t ld,
		 int64_t v0, int64_t V, gpt_err *err)
{
	int rc = gpt_cpu_check_sizes(op, err, 5, N, Vl, ld, v0, V);
	if (rc)
		return rc;
	if (ld < Vl)
		return gpt_err_set(err, GPT_EINTERNAL, "%s: row stride %lld is below the %lld columns",
				   op, (long long)ld, (long long)Vl);
	for (int64_t r = 0; r < N; r++)
		if (targets[r] >= V)
			return gpt_err_set(err, GPT_EDATA,
					   "%s: target %d in row %lld is outside the vocabulary of %lld",
					   op, (int)targets[r], (long long)r, (long long)V);
	return 0;
}

/* Columns of this piece that are real vocabulary, not padding. */
static int64_t real_cols(int64_t Vl, int64_t v0, int64_t V)
{
	int64_t n = V - v0;
	return n < 0 ? 0 : n < Vl ? n : Vl;
}

int gpt_cpu_xent_fwd(gpt_backend *be, float *max, float *sumexp, float *tlogit,
		     const void *logits, const int32_t *targets, int64_t N, int64_t Vl,
		     int64_t ld, int64_t v0, int64_t V, gpt_err *err)
{
	int rc = check("xent_fwd", targets, N, Vl, ld, v0, V, err);
	if (rc)
		return rc;
	const float *lg = logits;
	int64_t nr = real_cols(Vl, v0, V);
	int v512 = use_512();
	(void)v512;
	#pragma omp parallel for num_threads(be->threads) schedule(static) if (N * Vl > 16384)
	for (int64_t r = 0; r < N; r++) {
		const float *row = lg + r * ld;
		int64_t t = (int64_t)targets[r] - v0;
#ifdef XENT_X86
		if (v512) {
			xent_row_512(max + r, sumexp + r, row, nr);
			tlogit[r] = targets[r] >= 0 && t >= 0 && t < nr ? row[t] : 0.0f;
			continue;
		}
#endif
		float m = -INFINITY;
		for (int64_t j = 0; j < nr; j++)
			m = row[j] > m ? row[j] : m;
		double s = 0.0; /* tens of thousands of terms: sum in double */
		for (int64_t j = 0; j < nr; j++)
			s += expf(row[j] - m);
		max[r] = m;
		sumexp[r] = (float)s;
		tlogit[r] = targets[r] >= 0 && t >= 0 && t < nr ? row[t] : 0.0f;
	}
	return 0;
}

int gpt_cpu_xent_rescale(gpt_backend *be, float *sumexp, const float *max_local,
			 const float *max_global, int64_t N, gpt_err *err)
{
	int rc = gpt_cpu_check_sizes("xent_rescale", err, 1, N);
	if (rc)
		return rc;
	for (int64_t r = 0; r < N; r++)
		sumexp[r] = max_local[r] == -INFINITY ? 0.0f
			: sumexp[r] * expf(max_local[r] - max_global[r]);
	return 0;
}

int gpt_cpu_xent_loss(gpt_backend *be, float *loss, const float *max, const float *sumexp,
		      const float *tlogit, const int32_t *targets, int64_t N, gpt_err *err)
{
	int rc = gpt_cpu_check_sizes("xent_loss", err, 1, N);
	if (rc)
		return rc;
	for (int64_t r = 0; r < N; r++)
		loss[r] = targets[r] < 0 ? 0.0f : logf(sumexp[r]) + max[r] - tlogit[r];
	return 0;
}

int gpt_cpu_xent_bwd(gpt_backend *be, void *dlogits, const void *logits,
		     const int32_t *targets, const float *max, const float *sumexp, float dloss,
		     int64_t N, int64_t Vl, int64_t ld, int64_t v0, int64_t V, gpt_err *err)
{
	int rc = check("xent_bwd", targets, N, Vl, ld, v0, V, err);
	if (rc)
		return rc;
	const float *lg = logits;
	float *dl = dlogits;
	int64_t nr = real_cols(Vl, v0, V);
	int v512 = use_512();
	(void)v512;
	#pragma omp parallel for num_threads(be->threads) schedule(static) if (N * Vl > 16384)
	for (int64_t r = 0; r < N; r++) {
		const float *row = lg + r * ld;
		float *drow = dl + r * ld;
		if (targets[r] < 0) {
			for (int64_t j = 0; j < Vl; j++)
				drow[j] = 0.0f;
			continue;
		}
		float m = max[r], inv = 1.0f / sumexp[r];
		int64_t t = (int64_t)targets[r] - v0;
#ifdef XENT_X86
		if (v512) {
			/* p dloss everywhere, then (p - 1) dloss at the target: p - 0
			 * is p, so the same values as the loop below; the target's
			 * logit is read first, drow may be row */
			float lt = t >= 0 && t < nr ? row[t] : 0.0f;
			xent_grad_512(drow, row, nr, m, inv, dloss);
			if (t >= 0 && t < nr)
				drow[t] = (expf(lt - m) * inv - 1.0f) * dloss;
		} else
#endif
		for (int64_t j = 0; j < nr; j++) {
			float p = expf(row[j] - m) * inv;
			drow[j] = (p - (j == t ? 1.0f : 0.0f)) * dloss;
		}
		for (int64_t j = nr; j < Vl; j++)
			drow[j] = 0.0f;
	}
	return 0;
}
