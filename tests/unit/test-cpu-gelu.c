/* GELU (tanh form): forward against a double reference, backward against
 * central finite differences, in place. */
#include "cpu-check.h"

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
	free(x), free(y), free(g), free(z), free(want);
	gpt_backend_cpu_free(&be);
	return done_testing();
}
