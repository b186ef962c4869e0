/* Causal multi-head attention with dropout on the probabilities. The CPU
 * version materialises each head's (T x T) probabilities (kept in `saved`
 * for the backward); the backward regenerates the dropout mask. */
#include "cpu/kernels.h"

#include <math.h>
#include <omp.h>
#include <string.h>

int64_t gpt_cpu_attention_saved_size(gpt_backend *be, int64_t B, int64_t T, int64_t NH,
				     int64_t HS)
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

/* Per-thread temporaries of `rows` rows of T floats each, in be->scratch. */
static int thread_rows(gpt_backend *be, int64_t rows, int64_t T, gpt_err *err)
{
	return gpt_backend_scratch(be, (size_t)(be->threads * rows * T) * sizeof(float), err);
}

int gpt_cpu_attention_fwd(gpt_backend *be, void *out, float *saved, const void *qkv,
			  int64_t B, int64_t T, int64_t NH, int64_t HS, const gpt_dropout *d,
			  gpt_err *err)
{
	int rc = check("attention_fwd", B, T, NH, HS, d, err);
	if (!rc)
		rc = thread_rows(be, 1, T, err);
	if (rc)
		return rc;
	const float *x = qkv;
	float *o = out;
	int64_t Cl = NH * HS, C3 = 3 * Cl;
	float sc = 1.0f / sqrtf((float)HS);
	int drop = d && d->p > 0.0f;
	uint32_t thr = drop ? gpt_dropout_threshold(d->p) : 0;
	float dscale = drop ? gpt_dropout_scale(d->p) : 1.0f;
	float *tmp_all = be->scratch;
	#pragma omp parallel for num_threads(be->threads) collapse(3) schedule(static)
	for (int64_t b = 0; b < B; b++)
		for (int64_t h = 0; h < NH; h++)
			for (int64_t t = 0; t < T; t++) {
				const float *q = x + (b * T + t) * C3 + h * HS;
				float *p = saved + ((b * NH + h) * T + t) * T;
				float m = -INFINITY;
				for (int64_t j = 0; j <= t; j++) {
					const float *k = x + (b * T + j) * C3 + Cl + h * HS;
					float s = 0.0f;
					for (int64_t i = 0; i < HS; i++)
						s += q[i] * k[i];
					s *= sc;
					p[j] = s;
					m = s > m ? s : m;
				}
				float sum = 0.0f;
				for (int64_t j = 0; j <= t; j++) {
					p[j] = expf(p[j] - m);
					sum += p[j];
				}
				float inv = 1.0f / sum;
				for (int64_t j = 0; j <= t; j++)
					p[j] *= inv;
				for (int64_t j = t + 1; j < T; j++)
					p[j] = 0.0f;
				const float *pd = p;
				if (drop) {
					float *tmp = tmp_all + (int64_t)omp_get_thread_num() * T;
					gpt_cpu_dropout_row(tmp, p, t + 1, d, thr, dscale,
							    d->sample0 + b, t, (d->feature0 + h) * T);
					pd = tmp;
				}
				float *orow = o + (b * T + t) * Cl + h * HS;
				for (int64_t i = 0; i < HS; i++)
					orow[i] = 0.0f;
				for (int64_t j = 0; j <= t; j++) {
					const float *v = x + (b * T + j) * C3 + 2 * Cl + h * HS;
					float w = pd[j];
					for (int64_t i = 0; i < HS; i++)
						orow[i] += w * v[i];
				}
			}
	return 0;
}

int gpt_cpu_attention_bwd(gpt_backend *be, void *dqkv, const void *dout, const void *qkv,
			  const float *saved, int64_t B, int64_t T, int64_t NH, int64_t HS,
			  const gpt_dropout *d, gpt_err *err)
{
	int rc = check("attention_bwd", B, T, NH, HS, d, err);
	if (!rc)
		rc = thread_rows(be, 2, T, err);
	if (rc)
		return rc;
	const float *x = qkv, *dy = dout;
	float *dx = dqkv;
	int64_t Cl = NH * HS, C3 = 3 * Cl;
	float sc = 1.0f / sqrtf((float)HS);
	int drop = d && d->p > 0.0f;
	uint32_t thr = drop ? gpt_dropout_threshold(d->p) : 0;
	float dscale = drop ? gpt_dropout_scale(d->p) : 1.0f;
	float *tmp_all = be->scratch;
	/* One task per (sample, head): it owns that head's slices of dq, dk and
	 * dv for the sample's tokens, so there are no races and sums over query
	 * positions run in a fixed order. */
	#pragma omp parallel for num_threads(be->threads) collapse(2) schedule(static)
	for (int64_t b = 0; b < B; b++)
		for (int64_t h = 0; h < NH; h++) {
			float *pd = tmp_all + (int64_t)omp_get_thread_num() * 2 * T;
			float *dp = pd + T;
			for (int64_t t = 0; t < T; t++)
				for (int64_t part = 0; part < 3; part++)
					memset(dx + (b * T + t) * C3 + part * Cl + h * HS, 0,
					       (size_t)HS * sizeof *dx);
			for (int64_t t = 0; t < T; t++) {
				const float *p = saved + ((b * NH + h) * T + t) * T;
				const float *q = x + (b * T + t) * C3 + h * HS;
				const float *g = dy + (b * T + t) * Cl + h * HS;
				float *dq = dx + (b * T + t) * C3 + h * HS;
				const float *pw = p;
				if (drop) {
					gpt_cpu_dropout_row(pd, p, t + 1, d, thr, dscale,
							    d->sample0 + b, t, (d->feature0 + h) * T);
					pw = pd;
				}
				/* out = sum_j pw_j v_j: gradients for v and for pw */
				for (int64_t j = 0; j <= t; j++) {
					const float *v = x + (b * T + j) * C3 + 2 * Cl + h * HS;
					float *dv = dx + (b * T + j) * C3 + 2 * Cl + h * HS;
					float s = 0.0f;
					for (int64_t i = 0; i < HS; i++) {
						s += g[i] * v[i];
						dv[i] += pw[j] * g[i];
					}
					dp[j] = s;
				}
				/* back through the dropout, then the softmax */
				if (drop)
					gpt_cpu_dropout_row(dp, dp, t + 1, d, thr, dscale,
							    d->sample0 + b, t, (d->feature0 + h) * T);
				float dot = 0.0f;
				for (int64_t j = 0; j <= t; j++)
					dot += p[j] * dp[j];
				for (int64_t j = 0; j <= t; j++) {
					float ds = p[j] * (dp[j] - dot) * sc;
					const float *k = x + (b * T + j) * C3 + Cl + h * HS;
					float *dk = dx + (b * T + j) * C3 + Cl + h * HS;
					for (int64_t i = 0; i < HS; i++) {
						dq[i] += ds * k[i];
						dk[i] += ds * q[i];
					}
				}
			}
		}
	return 0;
}
