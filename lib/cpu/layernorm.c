/* LayerNorm forward and backward over the last dimension. */
#include "cpu/kernels.h"

#include <math.h>

int gpt_cpu_layernorm_fwd(gpt_backend *be, void *out, float *mean, float *rstd,
			  const void *inp, const void *w, const void *b, int64_t N, int64_t C,
			  float eps, gpt_err *err)
{
	int rc = gpt_cpu_check_sizes("layernorm_fwd", err, 2, N, C);
	if (rc)
		return rc;
	if (C == 0)
		return gpt_err_set(err, GPT_EINTERNAL, "layernorm_fwd: zero channels");
	const float *x = inp, *wt = w, *bs = b;
	float *o = out;
	#pragma omp parallel for num_threads(be->threads) schedule(static) if (N * C > 4096)
	for (int64_t i = 0; i < N; i++) {
		const float *xi = x + i * C;
		float *oi = o + i * C;
		float m = 0.0f, v = 0.0f;
		for (int64_t j = 0; j < C; j++)
			m += xi[j];
		m /= (float)C;
		for (int64_t j = 0; j < C; j++) {
			float dx = xi[j] - m;
			v += dx * dx;
		}
		v /= (float)C;
		float s = 1.0f / sqrtf(v + eps);
		for (int64_t j = 0; j < C; j++)
			oi[j] = (xi[j] - m) * s * wt[j] + bs[j];
		if (mean)
			mean[i] = m;
		if (rstd)
			rstd[i] = s;
	}
	return 0;
}

/* The references of the fusions: the ops of this backend (fp32 or 16-bit),
 * b dropped in place first when d is given; in the backward, the branch's
 * gradient dropped from the stream's after the LayerNorm's is added. */
int gpt_cpu_residual_layernorm_fwd(gpt_backend *be, void *res, void *out, float *mean, float *rstd,
				   const void *a, void *b, const void *w, const void *bias,
				   int64_t N, int64_t C, float eps, const gpt_dropout *d, int64_t T,
				   gpt_err *err)
{
	int rc = gpt_cpu_check_sizes("residual_layernorm_fwd", err, 2, N, C);
	if (!rc && d && d->p > 0.0f) {
		if (T <= 0 || N % T)
			return gpt_err_set(err, GPT_EINTERNAL,
					   "residual_layernorm_fwd: %lld rows are not whole sequences of %lld for dropout",
					   (long long)N, (long long)T);
		rc = be->ops->dropout_fwd(be, b, b, N / T, T, C, d, err);
	}
	if (!rc)
		rc = be->ops->residual_fwd(be, res, a, b, N * C, err);
	return rc ? rc : be->ops->layernorm_fwd(be, out, mean, rstd, res, w, bias, N, C, eps, err);
}

int gpt_cpu_layernorm_bwd(gpt_backend *be, void *dinp, void *dw, void *db, const void *dout,
			  const void *inp, const void *w, const float *mean, const float *rstd,
			  int64_t N, int64_t C, gpt_err *err)
{
	int rc = gpt_cpu_check_sizes("layernorm_bwd", err, 2, N, C);
	if (rc)
		return rc;
	const float *x = inp, *dy = dout, *wt = w;
	float *dx = dinp, *dwt = dw, *dbs = db;
	#pragma omp parallel for num_threads(be->threads) schedule(static) if (N * C > 4096)
	for (int64_t i = 0; i < N; i++) {
		const float *xi = x + i * C, *dyi = dy + i * C;
		float *dxi = dx + i * C;
		float m = mean[i], s = rstd[i];
		float g_mean = 0.0f, gn_mean = 0.0f;
		for (int64_t j = 0; j < C; j++) {
			float g = wt[j] * dyi[j];
			g_mean += g;
			gn_mean += g * (xi[j] - m) * s;
		}
		g_mean /= (float)C;
		gn_mean /= (float)C;
		for (int64_t j = 0; j < C; j++) {
			float norm = (xi[j] - m) * s;
			dxi[j] += (wt[j] * dyi[j] - g_mean - norm * gn_mean) * s;
		}
	}
	if (!dwt && !dbs)
		return 0;
	/* Weight and bias gradients: column blocks, rows summed in order, so
	 * the result does not depend on the thread count. */
	enum { BLOCK = 64 };
	int64_t nblocks = (C + BLOCK - 1) / BLOCK;
	#pragma omp parallel for num_threads(be->threads) schedule(static) if (N * C > 4096)
	for (int64_t blk = 0; blk < nblocks; blk++) {
		int64_t j0 = blk * BLOCK, j1 = j0 + BLOCK < C ? j0 + BLOCK : C;
		double aw[BLOCK] = {0}, ab[BLOCK] = {0}; /* sums over every row */
		for (int64_t i = 0; i < N; i++) {
			const float *xi = x + i * C, *dyi = dy + i * C;
			float m = mean[i], s = rstd[i];
			for (int64_t j = j0; j < j1; j++) {
				aw[j - j0] += (xi[j] - m) * s * dyi[j];
				ab[j - j0] += dyi[j];
			}
		}
		for (int64_t j = j0; j < j1; j++) {
			if (dwt)
				dwt[j] += (float)aw[j - j0];
			if (dbs)
				dbs[j] += (float)ab[j - j0];
		}
	}
	return 0;
}

int gpt_cpu_residual_layernorm_bwd(gpt_backend *be, void *dinp, void *dbranch, void *dw, void *db,
				   const void *dout, const void *inp, const void *w, const float *mean,
				   const float *rstd, int64_t N, int64_t C, const gpt_dropout *d, int64_t T,
				   gpt_err *err)
{
	int rc = gpt_cpu_check_sizes("residual_layernorm_bwd", err, 2, N, C);
	if (rc)
		return rc;
	if (!dbranch)
		return gpt_err_set(err, GPT_EINTERNAL, "residual_layernorm_bwd: no branch gradient to write");
	if (!d || !(d->p > 0.0f) || T <= 0 || N % T)
		return gpt_err_set(err, GPT_EINTERNAL,
				   "residual_layernorm_bwd: wants a dropout site (p > 0) and %lld rows of whole sequences, found p %g and sequences of %lld",
				   (long long)N, d ? d->p : 0.0, (long long)T);
	rc = be->ops->layernorm_bwd(be, dinp, dw, db, dout, inp, w, mean, rstd, N, C, err);
	return rc ? rc : be->ops->dropout_bwd(be, dbranch, dinp, N / T, T, C, d, err);
}
