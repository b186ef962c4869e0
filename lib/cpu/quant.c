/* Fake quantization for quantization-aware training (PaddleSlim's abs_max,
 * channel_wise_abs_max and moving_average_abs_max): scales, quantize-
 * dequantize and the moving-average scale update, for fp32 and 16-bit
 * storage alike (16-bit operands go through fp32 copies). */
#include "cpu/kernels.h"

#include "cpu/cpu.h"

#include <math.h>
#include <stdlib.h>

float gpt_quant_qmax(int bits)
{
	return (float)((1L << (bits - 1)) - 1);
}

void gpt_quant_rows(const float *x, int64_t rows, int64_t cols, const float *scale, int per_row,
		    int bits, float *out, int8_t *q)
{
	float Q = gpt_quant_qmax(bits);
	#pragma omp parallel for schedule(static) if (rows * cols > 65536)
	for (int64_t r = 0; r < rows; r++) {
		float s = scale[per_row ? r : 0];
		float inv = s > 0 ? Q / s : 0.0f, step = s > 0 ? s / Q : 0.0f;
		/* a scale below Q / FLT_MAX (3.7e-37 at 8 bits) has an inverse
		 * step that overflows, and 0 * inf is NaN: such rows divide */
		int divide = inv == INFINITY; /* inv >= 0 */
		for (int64_t c = 0; c < cols; c++) {
			float v = x[r * cols + c];
			v = v > s ? s : v < -s ? -s : v;
			float k = roundf(divide ? v / s * Q : v * inv); /* half away from zero */
			k = k > Q ? Q : k < -Q ? -Q : k;
			if (out)
				out[r * cols + c] = k * step;
			if (q)
				q[r * cols + c] = (int8_t)k;
		}
	}
}

/* An fp32 view of n storage-dtype elements: x itself, or a converted copy
 * in *tmp (free it). NULL when the copy cannot be made. */
static const float *as_f32(gpt_backend *be, const void *x, int64_t n, float **tmp, gpt_err *err)
{
	*tmp = NULL;
	if (be->dtype == GPT_DTYPE_F32)
		return x;
	*tmp = gpt_malloc((size_t)(n ? n : 1) * sizeof(float), "an fp32 copy for fake quantization", err);
	if (*tmp)
		gpt_convert(*tmp, GPT_DTYPE_F32, x, be->dtype, (size_t)n, NULL);
	return *tmp;
}

static int check(const char *op, int64_t rows, int64_t cols, int bits, gpt_err *err)
{
	if (rows < 0 || cols < 0)
		return gpt_err_set(err, GPT_EINTERNAL, "%s: negative size %lld x %lld", op,
				   (long long)rows, (long long)cols);
	if (bits < 2 || bits > 16)
		return gpt_err_set(err, GPT_EINTERNAL, "%s: %d bits; expected 2 to 16", op, bits);
	return 0;
}

int gpt_cpu_quant_absmax(gpt_backend *be, float *scale, const void *x, int64_t rows, int64_t cols,
			 int per_row, int accumulate, gpt_err *err)
{
	int rc = check("quant_absmax", rows, cols, 8, err);
	if (rc)
		return rc;
	float *tmp;
	const float *v = as_f32(be, x, rows * cols, &tmp, err);
	if (!v)
		return GPT_EINTERNAL;
	if (per_row) {
		#pragma omp parallel for num_threads(be->threads) schedule(static) if (rows * cols > 65536)
		for (int64_t r = 0; r < rows; r++) {
			float m = 0.0f;
			for (int64_t c = 0; c < cols; c++)
				m = fmaxf(m, fabsf(v[r * cols + c]));
			scale[r] = accumulate ? fmaxf(scale[r], m) : m;
		}
	} else {
		/* max is exact in any order: no determinism concern */
		float m = 0.0f;
		int64_t n = rows * cols;
		#pragma omp parallel for num_threads(be->threads) reduction(max : m) if (n > 65536)
		for (int64_t i = 0; i < n; i++)
			m = fmaxf(m, fabsf(v[i]));
		scale[0] = accumulate ? fmaxf(scale[0], m) : m;
	}
	free(tmp);
	return 0;
}

int gpt_cpu_fake_quant(gpt_backend *be, void *out, const void *x, const float *scale, int64_t rows,
		       int64_t cols, int per_row, int bits, gpt_err *err)
{
	int rc = check("fake_quant", rows, cols, bits, err);
	if (rc)
		return rc;
	if (be->dtype == GPT_DTYPE_F32) {
		gpt_quant_rows(x, rows, cols, scale, per_row, bits, out, NULL);
		return 0;
	}
	float *tmp;
	const float *v = as_f32(be, x, rows * cols, &tmp, err);
	if (!v)
		return GPT_EINTERNAL;
	gpt_quant_rows(v, rows, cols, scale, per_row, bits, tmp, NULL);
	gpt_convert(out, be->dtype, tmp, GPT_DTYPE_F32, (size_t)(rows * cols), NULL);
	free(tmp);
	return 0;
}

int gpt_cpu_quant_moving_avg(gpt_backend *be, float *state, float *accum, float *scale,
			     const float *cur, int64_t n, float rate, int commit, gpt_err *err)
{
	(void)be;
	if (!(rate >= 0.0f && rate <= 1.0f) || n < 0)
		return gpt_err_set(err, GPT_EINTERNAL, "quant_moving_avg: rate %g outside [0, 1] or %lld scales",
				   rate, (long long)n);
	for (int64_t i = 0; i < n; i++) {
		if (cur[i] < 0)
			continue;
		float st = rate * state[i] + 1.0f, ac = rate * accum[i] + cur[i];
		scale[i] = ac / st;
		if (commit) {
			state[i] = st;
			accum[i] = ac;
		}
	}
	return 0;
}

/* ---- PACT ---- */

/* Elements per block: each block converts through fp32 buffers on the stack
 * and leaves one partial sum, so *dalpha adds the same numbers in the same
 * order whatever the thread count. */
#define PACT_BLOCK 2048

static void load_f32(gpt_dtype t, float *dst, const void *src, int64_t off, int64_t n)
{
	gpt_convert(dst, GPT_DTYPE_F32, (const char *)src + off * (int64_t)gpt_dtype_size(t), t,
		    (size_t)n, NULL);
}

static void store(gpt_dtype t, void *dst, int64_t off, const float *src, int64_t n)
{
	gpt_convert((char *)dst + off * (int64_t)gpt_dtype_size(t), t, src, GPT_DTYPE_F32, (size_t)n,
		    NULL);
}

int gpt_cpu_pact_fwd(gpt_backend *be, void *out, const void *x, const float *alpha, int64_t n,
		     gpt_err *err)
{
	int rc = gpt_cpu_check_sizes("pact_fwd", err, 1, n);
	if (rc)
		return rc;
	float a = *alpha;
	gpt_dtype t = be->dtype;
	int64_t nb = (n + PACT_BLOCK - 1) / PACT_BLOCK;
	#pragma omp parallel for num_threads(be->threads) schedule(static) if (nb > 8)
	for (int64_t b = 0; b < nb; b++) {
		float v[PACT_BLOCK];
		int64_t i0 = b * PACT_BLOCK, len = n - i0 < PACT_BLOCK ? n - i0 : PACT_BLOCK;
		load_f32(t, v, x, i0, len);
		for (int64_t i = 0; i < len; i++)
			v[i] = v[i] > a ? a : v[i] < -a ? -a : v[i];
		store(t, out, i0, v, len);
	}
	return 0;
}

int gpt_cpu_pact_bwd(gpt_backend *be, void *dx, float *dalpha, const void *dy, const void *x,
		     const float *alpha, int64_t n, int accumulate, gpt_err *err)
{
	int rc = gpt_cpu_check_sizes("pact_bwd", err, 1, n);
	if (rc)
		return rc;
	float a = *alpha;
	gpt_dtype t = be->dtype;
	int64_t nb = (n + PACT_BLOCK - 1) / PACT_BLOCK;
	double *part = gpt_malloc((size_t)(nb ? nb : 1) * sizeof *part, "PACT partial sums", err);
	if (!part)
		return GPT_EINTERNAL;
	#pragma omp parallel for num_threads(be->threads) schedule(static) if (nb > 8)
	for (int64_t b = 0; b < nb; b++) {
		float vx[PACT_BLOCK], vg[PACT_BLOCK], vd[PACT_BLOCK];
		int64_t i0 = b * PACT_BLOCK, len = n - i0 < PACT_BLOCK ? n - i0 : PACT_BLOCK;
		load_f32(t, vx, x, i0, len);
		load_f32(t, vg, dy, i0, len);
		if (accumulate)
			load_f32(t, vd, dx, i0, len);
		double s = 0;
		for (int64_t i = 0; i < len; i++) {
			float g = vg[i], keep = g;
			if (vx[i] > a) {
				s += g;
				keep = 0.0f;
			} else if (vx[i] < -a) {
				s -= g;
				keep = 0.0f;
			}
			vd[i] = accumulate ? vd[i] + keep : keep;
		}
		part[b] = s;
		store(t, dx, i0, vd, len);
	}
	double s = 0;
	for (int64_t b = 0; b < nb; b++)
		s += part[b];
	free(part);
	*dalpha += (float)s;
	return 0;
}
