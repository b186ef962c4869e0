/* AdamW: one step worked by hand, three steps against a double reference
 * (torch.optim.AdamW's update with decoupled weight decay and bias
 * correction), fp32 master weights, and range updates. */
#include "cpu-check.h"

static void ref_step(double *w, double *m, double *v, const float *g, int n, double lr,
		     double b1, double b2, double eps, double wd, double gs, int t)
{
	for (int i = 0; i < n; i++) {
		double gi = g[i] * gs;
		m[i] = b1 * m[i] + (1 - b1) * gi;
		v[i] = b2 * v[i] + (1 - b2) * gi * gi;
		double mh = m[i] / (1 - pow(b1, t)), vh = v[i] / (1 - pow(b2, t));
		w[i] -= lr * (mh / (sqrt(vh) + eps) + wd * w[i]);
	}
}

int main(void)
{
	gpt_backend be = chk_backend();

	/* By hand: w = 0.5, g = 0.2 scaled by 0.5 to 0.1, t = 1:
	 * m = 0.01, v = 1e-5; corrected 0.1 and 0.01 (sqrt 0.1);
	 * w -= 0.01 * (0.1 / (0.1 + 1e-8) + 0.1 * 0.5) = 0.010499999;
	 * w = 0.489500001 */
	{
		float w = 0.5f, g = 0.2f, m = 0.0f, v = 0.0f;
		gpt_adamw h = {0.01, 0.9, 0.999, 1e-8, 0.1, 0.5, 1};
		CHK(be.ops->adamw(&be, &w, NULL, NULL, &g, &m, &v, 1, &h, &chk_err));
		is_near(m, 0.01, 1e-9, "hand step: m = 0.01 (fp32: within 1e-9)");
		is_near(v, 1e-5, 1e-12, "hand step: v = 1e-5 (fp32: within 1e-12)");
		is_near(w, 0.489500001, 3e-8, "hand step: w = 0.489500001");
	}

	enum { n = 1000 };
	float *w = chk_floats(n, 1.0), *master = malloc(n * sizeof *master);
	float *p = malloc(n * sizeof *p), *m = calloc(n, sizeof *m), *v = calloc(n, sizeof *v);
	memcpy(master, w, n * sizeof *w);
	double *wd = chk_doubles_of(w, n), *md = calloc(n, sizeof *md), *vd = calloc(n, sizeof *vd);
	for (int t = 1; t <= 3; t++) {
		float *g = chk_floats(n, 0.01);
		/* the first 600 elements decay, the rest do not: two calls */
		gpt_adamw hd = {1e-3, 0.9, 0.95, 1e-8, 0.1, 0.25, t};
		gpt_adamw hn = hd;
		hn.weight_decay = 0.0;
		CHK(be.ops->adamw(&be, p, master, NULL, g, m, v, 600, &hd, &chk_err));
		CHK(be.ops->adamw(&be, p + 600, master + 600, NULL, g + 600, m + 600, v + 600, n - 600,
				  &hn, &chk_err));
		ref_step(wd, md, vd, g, 600, 1e-3, 0.9, 0.95, 1e-8, 0.1, 0.25, t);
		ref_step(wd + 600, md + 600, vd + 600, g + 600, n - 600, 1e-3, 0.9, 0.95, 1e-8,
			 0.0, 0.25, t);
		free(g);
	}
	chk_close("three steps, decayed and non-decayed ranges: master", master, wd, n, 1e-7, 1e-6);
	chk_close("three steps: first moment", m, md, n, 1e-10, 1e-5);
	chk_close("three steps: second moment", v, vd, n, 1e-14, 1e-5);
	ok(memcmp(p, master, n * sizeof *p) == 0, "the parameter copy equals the fp32 master");

	/* one call over the whole range (vectors, threads) against one call an
	 * element (the scalar tail): the same bits wherever the range is cut */
	{
		enum { nb = 40011 };
		float *w1 = chk_floats(nb, 1.0), *g = chk_floats(nb, 0.01);
		float *w2 = malloc(nb * sizeof *w2), *m1 = chk_floats(nb, 0.01), *v1 = chk_floats(nb, 1e-4);
		float *m2 = malloc(nb * sizeof *m2), *v2 = malloc(nb * sizeof *v2);
		for (int i = 0; i < nb; i++)
			v1[i] = fabsf(v1[i]);
		memcpy(w2, w1, nb * sizeof *w1), memcpy(m2, m1, nb * sizeof *m1), memcpy(v2, v1, nb * sizeof *v1);
		gpt_adamw h = {1e-3, 0.9, 0.95, 1e-8, 0.1, 0.5, 7};
		CHK(be.ops->adamw(&be, w1, NULL, NULL, g, m1, v1, nb, &h, &chk_err));
		for (int i = 0; i < nb; i++)
			CHK(be.ops->adamw(&be, w2 + i, NULL, NULL, g + i, m2 + i, v2 + i, 1, &h, &chk_err));
		ok(memcmp(w1, w2, nb * 4) == 0 && memcmp(m1, m2, nb * 4) == 0 && memcmp(v1, v2, nb * 4) == 0,
		   "a whole range and element by element give the same bits");
		free(w1), free(g), free(w2), free(m1), free(v1), free(m2), free(v2);
	}

	gpt_adamw h0 = {1e-3, 0.9, 0.95, 1e-8, 0.1, 1.0, 0};
	gpt_err err = {0};
	ok(be.ops->adamw(&be, p, master, NULL, p, m, v, n, &h0, &err) == GPT_EINTERNAL &&
	   strstr(err.msg, "1-based"), "step 0 is refused: %s", err.msg);
	free(w), free(master), free(p), free(m), free(v), free(wd), free(md), free(vd);
	gpt_backend_cpu_free(&be);
	return done_testing();
}
