/* The residual stream's add and its backward. */
#include "cpu/kernels.h"

int gpt_cpu_residual_fwd(gpt_backend *be, void *out, const void *a, const void *b, int64_t n,
			 gpt_err *err)
{
	int rc = gpt_cpu_check_sizes("residual_fwd", err, 1, n);
	if (rc)
		return rc;
	float *o = out;
	const float *x = a, *y = b;
	#pragma omp parallel for num_threads(be->threads) schedule(static) if (n > 16384)
	for (int64_t i = 0; i < n; i++)
		o[i] = x[i] + y[i];
	return 0;
}

int gpt_cpu_residual_bwd(gpt_backend *be, void *da, void *db, const void *dout, int64_t n,
			 gpt_err *err)
{
	int rc = gpt_cpu_check_sizes("residual_bwd", err, 1, n);
	if (rc)
		return rc;
	float *ga = da, *gb = db;
	const float *g = dout;
	#pragma omp parallel for num_threads(be->threads) schedule(static) if (n > 16384)
	for (int64_t i = 0; i < n; i++) {
		if (ga)
			ga[i] += g[i];
		if (gb)
			gb[i] += g[i];
	}
	return 0;
}
