/* Reductions the optimizer needs: sum of squares (global gradient norm) and
 * the finiteness check (loss-scale overflow). */
#include "cpu/kernels.h"

#include <math.h>

int gpt_cpu_sum_squares(gpt_backend *be, float *acc, const void *x, int64_t n, gpt_err *err)
{
	int rc = gpt_cpu_check_sizes("sum_squares", err, 1, n);
	if (rc)
		return rc;
	const float *v = x;
	/* A fixed number of chunks whatever the thread count, added in order:
	 * the result is the same bits on every run and thread count (an OpenMP
	 * reduction clause combines partial sums in no fixed order). */
	enum { CHUNKS = 256 };
	double part[CHUNKS];
	int64_t len = (n + CHUNKS - 1) / CHUNKS;
	#pragma omp parallel for num_threads(be->threads) schedule(static) if (n > 65536)
	for (int c = 0; c < CHUNKS; c++) {
		int64_t i0 = c * len, i1 = i0 + len < n ? i0 + len : n;
		double s = 0.0;
		for (int64_t i = i0; i < i1; i++)
			s += (double)v[i] * v[i];
		part[c] = s;
	}
	double s = 0.0;
	for (int c = 0; c < CHUNKS; c++)
		s += part[c];
	*acc = (float)((double)*acc + s);
	return 0;
}

int gpt_cpu_check_finite(gpt_backend *be, float *flag, const void *x, int64_t n,
			 gpt_err *err)
{
	int rc = gpt_cpu_check_sizes("check_finite", err, 1, n);
	if (rc)
		return rc;
	const float *v = x;
	int bad = 0;
	#pragma omp parallel for num_threads(be->threads) schedule(static) reduction(| : bad) \
		if (n > 65536)
	for (int64_t i = 0; i < n; i++)
		bad |= !isfinite(v[i]);
	if (bad)
		*flag = 1.0f;
	return 0;
}
