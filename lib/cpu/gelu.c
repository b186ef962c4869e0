/* GELU, tanh approximation (GPT-2's), forward and backward. */
#include "cpu/kernels.h"

#include <math.h>

#define GELU_K 0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_A 0.044715f

int gpt_cpu_gelu_fwd(gpt_backend *be, void *out, const void *inp, int64_t n, gpt_err *err)
{
	int rc = gpt_cpu_check_sizes("gelu_fwd", err, 1, n);
	if (rc)
		return rc;
	const float *x = inp;
	float *y = out;
	#pragma omp parallel for num_threads(be->threads) schedule(static) if (n > 8192)
	for (int64_t i = 0; i < n; i++) {
		float v = x[i];
		y[i] = 0.5f * v * (1.0f + tanhf(GELU_K * (v + GELU_A * v * v * v)));
	}
	return 0;
}

int gpt_cpu_gelu_bwd(gpt_backend *be, void *dinp, const void *inp, const void *dout,
		     int64_t n, gpt_err *err)
{
	int rc = gpt_cpu_check_sizes("gelu_bwd", err, 1, n);
	if (rc)
		return rc;
	const float *x = inp, *dy = dout;
	float *dx = dinp;
	#pragma omp parallel for num_threads(be->threads) schedule(static) if (n > 8192)
	for (int64_t i = 0; i < n; i++) {
		float v = x[i];
		float u = GELU_K * (v + GELU_A * v * v * v);
		float t = tanhf(u);
		float sech2 = 1.0f - t * t;
		float g = 0.5f * (1.0f + t) + 0.5f * v * sech2 * GELU_K * (1.0f + 3.0f * GELU_A * v * v);
		dx[i] = g * dy[i];
	}
	return 0;
}
