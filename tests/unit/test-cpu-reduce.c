/* Sum of squares (accumulating across calls, the same bits for any thread
 * count) and the finiteness check. */
#include "cpu-check.h"

int main(void)
{
	gpt_backend be = chk_backend();
	int64_t n = 300001;
	float *x = chk_floats(n, 3.0);
	double want = 0;
	for (int64_t i = 0; i < n; i++)
		want += (double)x[i] * x[i];
	float acc = 0.0f;
	CHK(be.ops->sum_squares(&be, &acc, x, 1000, &chk_err));
	CHK(be.ops->sum_squares(&be, &acc, x + 1000, n - 1000, &chk_err));
	is_near(acc, want, want * 1e-6, "sum_squares over two ranges adds up");
	float a1 = 0.0f, a2 = 0.0f;
	gpt_backend one;
	CHK(gpt_backend_cpu_init(&one, GPT_DTYPE_F32, 1, &chk_err));
	CHK(be.ops->sum_squares(&be, &a1, x, n, &chk_err));
	CHK(one.ops->sum_squares(&one, &a2, x, n, &chk_err));
	ok(a1 == a2, "sum_squares: %d threads and 1 thread give identical bits", be.threads);
	float z = 5.0f;
	CHK(be.ops->sum_squares(&be, &z, x, 0, &chk_err));
	ok(z == 5.0f, "sum_squares of nothing leaves the accumulator");

	float flag = 0.0f;
	CHK(be.ops->check_finite(&be, &flag, x, n, &chk_err));
	ok(flag == 0.0f, "check_finite: finite data leaves the flag at 0");
	float specials[3] = {INFINITY, -INFINITY, NAN};
	for (int s = 0; s < 3; s++) {
		float keep = x[n - 7];
		x[n - 7] = specials[s];
		flag = 0.0f;
		CHK(be.ops->check_finite(&be, &flag, x, n, &chk_err));
		ok(flag == 1.0f, "check_finite flags %g", (double)specials[s]);
		x[n - 7] = keep;
	}
	flag = 1.0f;
	CHK(be.ops->check_finite(&be, &flag, x, n, &chk_err));
	ok(flag == 1.0f, "check_finite never clears a raised flag");
	gpt_backend_cpu_free(&one);
	free(x);
	gpt_backend_cpu_free(&be);
	return done_testing();
}
