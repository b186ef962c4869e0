/* LayerNorm: forward against a double-precision reference; backward
 * (dinp, dw, db, which accumulate) against central finite differences of
 * that reference. */
#include "cpu-check.h"

enum { N = 6, C = 13 };

static void ref_ln(double *out, const double *x, const double *w, const double *b, double eps)
{
	for (int i = 0; i < N; i++) {
		double m = 0, v = 0;
		for (int j = 0; j < C; j++)
			m += x[i * C + j];
		m /= C;
		for (int j = 0; j < C; j++)
			v += (x[i * C + j] - m) * (x[i * C + j] - m);
		v /= C;
		for (int j = 0; j < C; j++)
			out[i * C + j] = (x[i * C + j] - m) / sqrt(v + eps) * w[j] + b[j];
	}
}

static double loss(const double *x, const double *w, const double *b, const float *g)
{
	double out[N * C], s = 0;
	ref_ln(out, x, w, b, 1e-5);
	for (int i = 0; i < N * C; i++)
		s += out[i] * g[i];
	return s;
}

/* d loss / d p[i] for every i, by central differences. */
static void fd(double *grad, double *p, int n, const double *x, const double *w,
	       const double *b, const float *g)
{
	const double h = 1e-6;
	for (int i = 0; i < n; i++) {
		double keep = p[i];
		p[i] = keep + h;
		double up = loss(x, w, b, g);
		p[i] = keep - h;
		double dn = loss(x, w, b, g);
		p[i] = keep;
		grad[i] = (up - dn) / (2 * h);
	}
}

int main(void)
{
	gpt_backend be = chk_backend();
	float *x = chk_floats(N * C, 2.0), *w = chk_floats(C, 1.0), *b = chk_floats(C, 1.0);
	for (int i = 0; i < N * C; i++)
		x[i] += 0.5f; /* a non-zero mean */
	float out[N * C], mean[N], rstd[N];
	double *xd = chk_doubles_of(x, N * C), *wd = chk_doubles_of(w, C);
	double *bd = chk_doubles_of(b, C), want[N * C];
	ref_ln(want, xd, wd, bd, 1e-5);
	CHK(be.ops->layernorm_fwd(&be, out, mean, rstd, x, w, b, N, C, 1e-5f, &chk_err));
	chk_close("layernorm_fwd", out, want, N * C, 1e-5, 1e-5);
	{
		double wm[N], wr[N];
		for (int i = 0; i < N; i++) {
			double m = 0, v = 0;
			for (int j = 0; j < C; j++)
				m += xd[i * C + j];
			m /= C;
			for (int j = 0; j < C; j++)
				v += (xd[i * C + j] - m) * (xd[i * C + j] - m);
			wm[i] = m;
			wr[i] = 1 / sqrt(v / C + 1e-5);
		}
		chk_close("layernorm_fwd mean", mean, wm, N, 1e-6, 1e-6);
		chk_close("layernorm_fwd rstd", rstd, wr, N, 1e-6, 1e-5);
	}
	float out2[N * C];
	CHK(be.ops->layernorm_fwd(&be, out2, NULL, NULL, x, w, b, N, C, 1e-5f, &chk_err));
	ok(memcmp(out, out2, sizeof out) == 0, "layernorm_fwd without mean/rstd: same output");

	float *g = chk_floats(N * C, 1.0);
	/* the gradients start non-zero: the op must add into them */
	float *dx = chk_floats(N * C, 1.0), *dw = chk_floats(C, 1.0), *db = chk_floats(C, 1.0);
	double *wdx = chk_doubles_of(dx, N * C), *wdw = chk_doubles_of(dw, C);
	double *wdb = chk_doubles_of(db, C);
	double gx[N * C], gw[C], gb[C];
	fd(gx, xd, N * C, xd, wd, bd, g);
	fd(gw, wd, C, xd, wd, bd, g);
	fd(gb, bd, C, xd, wd, bd, g);
	for (int i = 0; i < N * C; i++)
		wdx[i] += gx[i];
	for (int i = 0; i < C; i++)
		wdw[i] += gw[i], wdb[i] += gb[i];
	CHK(be.ops->layernorm_bwd(&be, dx, dw, db, g, x, w, mean, rstd, N, C, &chk_err));
	chk_close("layernorm_bwd dinp += (finite differences)", dx, wdx, N * C, 1e-4, 1e-4);
	chk_close("layernorm_bwd dw += (finite differences)", dw, wdw, C, 1e-4, 1e-4);
	chk_close("layernorm_bwd db += (finite differences)", db, wdb, C, 1e-4, 1e-4);

	/* bigger: the parallel paths agree with a one-thread run bit for bit */
	{
		int64_t n2 = 257, c2 = 300;
		float *x2 = chk_floats(n2 * c2, 1.0), *w2 = chk_floats(c2, 1.0);
		float *b2 = chk_floats(c2, 1.0), *g2 = chk_floats(n2 * c2, 1.0);
		float *o2 = malloc((size_t)(n2 * c2) * 4), *m2 = malloc((size_t)n2 * 4);
		float *r2 = malloc((size_t)n2 * 4);
		float *dx2 = calloc((size_t)(n2 * c2), 4), *dw2 = calloc((size_t)c2, 4);
		float *dx3 = calloc((size_t)(n2 * c2), 4), *dw3 = calloc((size_t)c2, 4);
		CHK(be.ops->layernorm_fwd(&be, o2, m2, r2, x2, w2, b2, n2, c2, 1e-5f, &chk_err));
		CHK(be.ops->layernorm_bwd(&be, dx2, dw2, NULL, g2, x2, w2, m2, r2, n2, c2,
					  &chk_err));
		gpt_backend one;
		CHK(gpt_backend_cpu_init(&one, GPT_DTYPE_F32, 1, &chk_err));
		CHK(one.ops->layernorm_bwd(&one, dx3, dw3, NULL, g2, x2, w2, m2, r2, n2, c2,
					   &chk_err));
		ok(memcmp(dx2, dx3, (size_t)(n2 * c2) * 4) == 0 && memcmp(dw2, dw3, (size_t)c2 * 4) == 0,
		   "layernorm_bwd: %d threads and 1 thread give identical bits", be.threads);
		gpt_backend_cpu_free(&one);
		free(x2), free(w2), free(b2), free(g2), free(o2), free(m2), free(r2);
		free(dx2), free(dw2), free(dx3), free(dw3);
	}
	free(x), free(w), free(b), free(g), free(dx), free(dw), free(db);
	free(xd), free(wd), free(bd), free(wdx), free(wdw), free(wdb);
	gpt_backend_cpu_free(&be);
	return done_testing();
}
