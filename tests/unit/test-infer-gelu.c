/* Generation's GELU against a double reference and against the backend's
 * gelu_fwd, in place, on a length that leaves a partial vector. */
#include "cpu-check.h"
#include "infer/infer.h"

static double ref_gelu(double x)
{
	return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

int main(void)
{
	gpt_backend be = chk_backend();
	enum { n = 40011 };
	float *x = chk_floats(n, 6.0), *y = malloc(n * sizeof *y), *z = malloc(n * sizeof *z);
	x[0] = 0.0f, x[1] = -12.0f, x[2] = 12.0f, x[3] = -100.0f, x[4] = 100.0f, x[5] = 1e-30f;
	double *want = malloc(n * sizeof *want);
	for (int i = 0; i < n; i++)
		want[i] = ref_gelu(x[i]);
	CHK(gpt_infer_gelu(&be, y, x, n, &chk_err));
	chk_close("gpt_infer_gelu", y, want, n, 1e-6, 1e-5);
	CHK(be.ops->gelu_fwd(&be, z, x, n, &chk_err));
	double worst = 0;
	for (int i = 0; i < n; i++)
		worst = fmax(worst, fabs((double)y[i] - z[i]));
	ok(worst < 1e-5, "within %.2g of the backend's gelu_fwd", worst);
	memcpy(z, x, n * sizeof *z);
	CHK(gpt_infer_gelu(&be, z, z, 7, &chk_err));
	ok(memcmp(z, y, 7 * sizeof *z) == 0 && z[7] == x[7],
	   "in place, 7 values: the same bits, the rest untouched");
	free(x), free(y), free(z), free(want);
	gpt_backend_cpu_free(&be);
	return done_testing();
}
