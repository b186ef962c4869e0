/* GELU (tanh form): forward against a double reference, backward against
 * central finite differences, in place. */
#include "cpu-check.h"
#include "cpu/kernels.h"

static double ref_gelu(double x)
{
	return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

int main(void)
{
	gpt_backend be = chk_backend();
	enum { n = 20011 };
	float *x = chk_floats(n, 6.0), *y = malloc(n * sizeof *y), *g = chk_floats(n, 1.0);
	x[0] = 0.0f, x[1] = -12.0f, x[2] = 12.0f;
	double *want = malloc(n * sizeof *want);
	for (int i = 0; i < n; i++)
		want[i] = ref_gelu(x[i]);
	CHK(be.ops->gelu_fwd(&be, y, x, n, &chk_err));
	chk_close("gelu_fwd", y, want, n, 1e-6, 1e-5);
	for (int i = 0; i < n; i++) {
		const double h = 1e-6;
		want[i] = (ref_gelu(x[i] + h) - ref_gelu(x[i] - h)) / (2 * h) * g[i];
	}
	CHK(be.ops->gelu_bwd(&be, g, x, g, n, &chk_err)); /* in place on dout */
	chk_close("gelu_bwd in place (finite differences)", g, want, n, 1e-5, 1e-4);
	float *z = malloc(n * sizeof *z);
	memcpy(z, x, n * sizeof *z);
	CHK(be.ops->gelu_fwd(&be, z, z, n, &chk_err));
	ok(memcmp(z, y, n * sizeof *z) == 0, "gelu_fwd in place gives the same bits");
	/* the vector paths against the portable one, bit for bit, from every
	 * offset in a vector and through the threaded split */
	float *ref = malloc(n * sizeof *ref), *dy = chk_floats(n, 1.0);
	int same = 1;
	for (int bwd = 0; bwd < 2; bwd++) {
		gpt_cpu_gelu_on(0, bwd, ref, x, dy, n);
		for (int path = 1; path <= 2; path++) {
			if (gpt_cpu_gelu_on(path, bwd, z, x, dy, n) == 0)
				same &= memcmp(z, ref, n * sizeof *z) == 0;
			else
				diag("this CPU lacks vector path %d", path);
		}
		for (int off = 0; off < 17; off++) {
			int64_t len = n - off - (off % 5);
			if (bwd)
				CHK(be.ops->gelu_bwd(&be, z, x + off, dy + off, len, &chk_err));
			else
				CHK(be.ops->gelu_fwd(&be, z, x + off, len, &chk_err));
			same &= memcmp(z, ref + off, (size_t)len * sizeof *z) == 0;
		}
	}
	ok(same, "the vector paths give the portable path's bits wherever an element falls");
	float edge[4] = {-200.0f, 200.0f, NAN, -0.0f}, eo[4];
	CHK(be.ops->gelu_fwd(&be, eo, edge, 4, &chk_err));
	ok(fabsf(eo[0]) < 1e-30f && eo[1] == 200.0f && isnan(eo[2]) && eo[3] == 0.0f,
	   "gelu of -200, 200, NaN, -0: %g %g %g %g", eo[0], eo[1], eo[2], eo[3]);
	free(ref), free(dy);
	free(x), free(y), free(g), free(z), free(want);
	gpt_backend_cpu_free(&be);
	return done_testing();
}
