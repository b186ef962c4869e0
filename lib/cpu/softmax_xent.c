/* Softmax cross-entropy over vocabulary pieces: per-row statistics a caller
 * can reduce over a tensor-parallel group, the loss, and the logit gradient.
 * Padding columns (global index >= V) never enter the softmax. */
#include "cpu/kernels.h"

#include <math.h>

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
	#pragma omp parallel for num_threads(be->threads) schedule(static) if (N * Vl > 16384)
	for (int64_t r = 0; r < N; r++) {
		const float *row = lg + r * ld;
		float m = -INFINITY;
		for (int64_t j = 0; j < nr; j++)
			m = row[j] > m ? row[j] : m;
		double s = 0.0; /* tens of thousands of terms: sum in double */
		for (int64_t j = 0; j < nr; j++)
			s += expf(row[j] - m);
		int64_t t = (int64_t)targets[r] - v0;
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
		for (int64_t j = 0; j < nr; j++) {
			float p = expf(row[j] - m) * inv;
			drow[j] = (p - (j == t ? 1.0f : 0.0f)) * dloss;
		}
		for (int64_t j = nr; j < Vl; j++)
			drow[j] = 0.0f;
	}
	return 0;
}
