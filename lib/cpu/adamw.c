/* AdamW over a flat range, with optional fp32 master weights (fp32 storage;
 * 16-bit parameters go through lowp.c, which updates the master here). */
#include "cpu/kernels.h"

#include <math.h>

int gpt_cpu_adamw(gpt_backend *be, void *param, float *master, const void *grad, float *m,
		  float *v, int64_t n, const gpt_adamw *h, gpt_err *err)
{
	int rc = gpt_cpu_check_sizes("adamw", err, 1, n);
	if (rc)
		return rc;
	if (h->t < 1)
		return gpt_err_set(err, GPT_EINTERNAL, "adamw: step %lld is not 1-based",
				   (long long)h->t);
	float *p = param;
	float *w = master ? master : p;
	const float *g = grad;
	float b1 = (float)h->beta1, b2 = (float)h->beta2;
	float a1 = (float)(1.0 - h->beta1), a2 = (float)(1.0 - h->beta2);
	float c1 = (float)(1.0 / (1.0 - pow(h->beta1, (double)h->t)));
	float c2 = (float)(1.0 / (1.0 - pow(h->beta2, (double)h->t)));
	float lr = (float)h->lr, wd = (float)h->weight_decay, eps = (float)h->eps;
	float gs = (float)h->grad_scale;
	#pragma omp parallel for num_threads(be->threads) schedule(static) if (n > 16384)
	for (int64_t i = 0; i < n; i++) {
		float gi = g[i] * gs;
		float mi = b1 * m[i] + a1 * gi;
		float vi = b2 * v[i] + a2 * gi * gi;
		m[i] = mi;
		v[i] = vi;
		float wi = w[i];
		wi -= lr * (mi * c1 / (sqrtf(vi * c2) + eps) + wd * wi);
		w[i] = wi;
		if (master)
			p[i] = wi;
	}
	return 0;
}
