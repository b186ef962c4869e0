/* Causal multi-head attention with dropout on the probabilities. The CPU
 * version materialises each head's (T x T) probabilities (kept in `saved`
 * for the backward); the backward regenerates the dropout mask. Per head,
 * the four products go to BLAS (threaded inside, called from no parallel
 * region) and the row-wise softmax and dropout run as OpenMP loops between
 * them. The full T x T score square is computed and the upper triangle
 * zeroed, which BLAS does faster than a triangle by hand. */
#include "cpu/kernels.h"

#include <cblas.h>
#include <math.h>

int64_t gpt_cpu_attention_saved_size(gpt_backend *be, int64_t B, int64_t T, int64_t NH,
				     int64_t HS, int dropout)
{
	return B * NH * T * T;
}

static int check(const char *op, int64_t B, int64_t T, int64_t NH, int64_t HS,
		 const gpt_dropout *d, gpt_err *err)
{
	int rc = gpt_cpu_check_sizes(op, err, 4, B, T, NH, HS);
	if (!rc)
		rc = gpt_cpu_dropout_check(op, d, err);
	if (!rc && HS == 0)
		rc = gpt_err_set(err, GPT_EINTERNAL, "%s: head size is 0", op);
	return rc;
}

/* C = alpha op(A) op(B) (+ beta C), row-major, sizes known to fit int. */
static void mm(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
	       int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc)
{
	cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
		    (int)m, (int)n, (int)k, alpha, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
}

static int check_blas(const char *op, int64_t T, int64_t NH, int64_t HS, gpt_err *err)
{
	if (T > INT32_MAX || 3 * NH * HS > INT32_MAX)
		return gpt_err_set(err, GPT_EINTERNAL,
				   "%s: sequence %lld or width %lld exceeds the 32-bit BLAS interface",
				   op, (long long)T, (long long)(3 * NH * HS));
	return 0;
}

int gpt_cpu_attention_fwd(gpt_backend *be, void *out, float *saved, const void *qkv,
			  int64_t B, int64_t T, int64_t NH, int64_t HS, const gpt_dropout *d,
			  gpt_err *err)
{
	int rc = check("attention_fwd", B, T, NH, HS, d, err);
	if (!rc)
		rc = check_blas("attention_fwd", T, NH, HS, err);
	int drop = d && d->p > 0.0f;
	if (!rc && drop)
		rc = gpt_backend_scratch(be, (size_t)(T * T) * sizeof(float), err);
	if (rc || T == 0)
		return rc;
	const float *x = qkv;
	float *o = out;
	int64_t Cl = NH * HS, C3 = 3 * Cl;
	float sc = 1.0f / sqrtf((float)HS);
	uint32_t thr = drop ? gpt_dropout_threshold(d->p) : 0;
	float dscale = drop ? gpt_dropout_scale(d->p) : 1.0f;
	float *pd_all = be->scratch;
	for (int64_t b = 0; b < B; b++)
		for (int64_t h = 0; h < NH; h++) {
			const float *q = x + b * T * C3 + h * HS, *k = q + Cl, *v = q + 2 * Cl;
			float *p = saved + (b * NH + h) * T * T;
			mm(0, 1, T, T, HS, sc, q, C3, k, C3, 0.0f, p, T);
			#pragma omp parallel for num_threads(be->threads) schedule(static) if (T * T > 16384)
			for (int64_t t = 0; t < T; t++) {
				float *row = p + t * T;
				float m = -INFINITY, sum = 0.0f;
				for (int64_t j = 0; j <= t; j++)
					m = row[j] > m ? row[j] : m;
				for (int64_t j = 0; j <= t; j++) {
					row[j] = expf(row[j] - m);
					sum += row[j];
				}
				float inv = 1.0f / sum;
				for (int64_t j = 0; j <= t; j++)
					row[j] *= inv;
				for (int64_t j = t + 1; j < T; j++)
					row[j] = 0.0f;
				if (drop) {
					float *pd = pd_all + t * T;
					gpt_cpu_dropout_row(pd, row, t + 1, d, thr, dscale,
							    d->sample0 + b, t, (d->feature0 + h) * T);
					for (int64_t j = t + 1; j < T; j++)
						pd[j] = 0.0f;
				}
			}
			mm(0, 0, T, HS, T, 1.0f, drop ? pd_all : p, T, v, C3, 0.0f,
			   o + b * T * Cl + h * HS, Cl);
		}
	return 0;
}

int gpt_cpu_attention_bwd(gpt_backend *be, void *dqkv, const void *dout, const void *out,
			  const void *qkv, const float *saved, int64_t B, int64_t T, int64_t NH,
			  int64_t HS, const gpt_dropout *d, gpt_err *err)
{
	int rc = check("attention_bwd", B, T, NH, HS, d, err);
	if (!rc)
		rc = check_blas("attention_bwd", T, NH, HS, err);
	if (!rc)
		rc = gpt_backend_scratch(be, (size_t)(2 * T * T) * sizeof(float), err);
	if (rc || T == 0)
		return rc;
	const float *x = qkv, *dy = dout;
	float *dx = dqkv;
	int64_t Cl = NH * HS, C3 = 3 * Cl;
	float sc = 1.0f / sqrtf((float)HS);
	int drop = d && d->p > 0.0f;
	uint32_t thr = drop ? gpt_dropout_threshold(d->p) : 0;
	float dscale = drop ? gpt_dropout_scale(d->p) : 1.0f;
	float *dp = be->scratch, *pd = dp + T * T;
	for (int64_t b = 0; b < B; b++)
		for (int64_t h = 0; h < NH; h++) {
			const float *q = x + b * T * C3 + h * HS, *k = q + Cl, *v = q + 2 * Cl;
			const float *g = dy + b * T * Cl + h * HS;
			float *dq = dx + b * T * C3 + h * HS, *dk = dq + Cl, *dv = dq + 2 * Cl;
			const float *p = saved + (b * NH + h) * T * T;
			if (drop) {
				#pragma omp parallel for num_threads(be->threads) schedule(static) \
					if (T * T > 16384)
				for (int64_t t = 0; t < T; t++) {
					gpt_cpu_dropout_row(pd + t * T, p + t * T, t + 1, d, thr, dscale,
							    d->sample0 + b, t, (d->feature0 + h) * T);
					for (int64_t j = t + 1; j < T; j++)
						pd[t * T + j] = 0.0f;
				}
			}
			/* out = pd v: dv = pd^T dout, d(pd) = dout v^T */
			mm(1, 0, T, HS, T, 1.0f, drop ? pd : p, T, g, Cl, 0.0f, dv, C3);
			mm(0, 1, T, T, HS, 1.0f, g, Cl, v, C3, 0.0f, dp, T);
			/* back through the dropout and the softmax, row by row */
			#pragma omp parallel for num_threads(be->threads) schedule(static) if (T * T > 16384)
			for (int64_t t = 0; t < T; t++) {
				float *row = dp + t * T;
				const float *prow = p + t * T;
				if (drop)
					gpt_cpu_dropout_row(row, row, t + 1, d, thr, dscale,
							    d->sample0 + b, t, (d->feature0 + h) * T);
				float dot = 0.0f;
				for (int64_t j = 0; j <= t; j++)
					dot += prow[j] * row[j];
				for (int64_t j = 0; j <= t; j++)
					row[j] = prow[j] * (row[j] - dot) * sc;
				for (int64_t j = t + 1; j < T; j++)
					row[j] = 0.0f;
			}
			/* scores = sc q k^T: dq = ds k, dk = ds^T q (sc folded into ds) */
			mm(0, 0, T, HS, T, 1.0f, dp, T, k, C3, 0.0f, dq, C3);
			mm(1, 0, T, HS, T, 1.0f, dp, T, q, C3, 0.0f, dk, C3);
		}
	return 0;
}
