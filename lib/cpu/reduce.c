/* Reductions the optimizer needs: sum of squares (global gradient norm) and
 * the finiteness check (loss-scale overflow). */
#include "cpu/kernels.h"

#include <math.h>

/* The sum of squares of n elements of dtype dt at x, added into *acc: a
 * fixed number of chunks whatever the thread count, added in order, so the
 * result is the same bits on every run and thread count (an OpenMP
 * reduction clause combines partial sums in no fixed order). 16-bit
 * elements are widened a piece at a time on the stack, in the same order:
 * the bits fp32 copies would give, without a copy of them all. */
int gpt_cpu_sum_squares_of(gpt_backend *be, float *acc, const void *x, gpt_dtype dt, int64_t n,
			   gpt_err *err)
{
	int rc = gpt_cpu_check_sizes("sum_squares", err, 1, n);
	if (rc)
		return rc;
	enum { CHUNKS = 256, PIECE = 2048 };
	size_t es = gpt_dtype_size(dt);
	double part[CHUNKS];
	int64_t len = (n + CHUNKS - 1) / CHUNKS;
	#pragma omp parallel for num_threads(be->threads) schedule(static) if (n > 65536)
	for (int c = 0; c < CHUNKS; c++) {
		int64_t i0 = c * len, i1 = i0 + len < n ? i0 + len : n;
		double s = 0.0;
		float piece[PIECE];
		for (int64_t a = i0; a < i1; a += PIECE) {
			int64_t k = i1 - a < PIECE ? i1 - a : PIECE;
			const float *v = (const float *)x + a;
			if (dt != GPT_DTYPE_F32) {
				gpt_convert(piece, GPT_DTYPE_F32, (const char *)x + (size_t)a * es, dt, (size_t)k, NULL);
				v = piece;
			}
			for (int64_t i = 0; i < k; i++)
				s += (double)v[i] * v[i];
		}
		part[c] = s;
	}
	double s = 0.0;
	for (int c = 0; c < CHUNKS; c++)
		s += part[c];
	*acc = (float)((double)*acc + s);
	return 0;
}

int gpt_cpu_sum_squares(gpt_backend *be, float *acc, const void *x, int64_t n, gpt_err *err)
{
	return gpt_cpu_sum_squares_of(be, acc, x, GPT_DTYPE_F32, n, err);
}

/* Sets *flag to 1 when one of n elements of dtype dt at x is Inf or NaN;
 * 16-bit elements by their exponent bits, in place. */
int gpt_cpu_check_finite_of(gpt_backend *be, float *flag, const void *x, gpt_dtype dt, int64_t n,
			    gpt_err *err)
{
	int rc = gpt_cpu_check_sizes("check_finite", err, 1, n);
	if (rc)
		return rc;
	int bad = 0;
	if (dt == GPT_DTYPE_F32) {
		const float *v = x;
		#pragma omp parallel for num_threads(be->threads) schedule(static) reduction(| : bad) \
			if (n > 65536)
		for (int64_t i = 0; i < n; i++)
			bad |= !isfinite(v[i]);
	} else {
		/* all exponent bits set: Inf or NaN */
		const uint16_t *v = x, e = dt == GPT_DTYPE_BF16 ? 0x7f80 : 0x7c00;
		#pragma omp parallel for num_threads(be->threads) schedule(static) reduction(| : bad) \
			if (n > 65536)
		for (int64_t i = 0; i < n; i++)
			bad |= (v[i] & e) == e;
	}
	if (bad)
		*flag = 1.0f;
	return 0;
}

int gpt_cpu_check_finite(gpt_backend *be, float *flag, const void *x, int64_t n, gpt_err *err)
{
	return gpt_cpu_check_finite_of(be, flag, x, GPT_DTYPE_F32, n, err);
}
