/* Shared by the tests/unit/test-cpu-*.c programs: a CPU backend, seeded
 * random fills, and comparisons that print the worst element. */
#ifndef GPT_TEST_CPU_CHECK_H
#define GPT_TEST_CPU_CHECK_H

#include "cpu/cpu.h"
#include "tap.h"

#include <stdint.h>
#include <stdlib.h>

/* Not every test uses every helper (tap.h's included). */
#define CHK_MAYBE __attribute__((unused))
CHK_MAYBE static int (*const chk_skip_all)(const char *) CHK_MAYBE = skip_all;

CHK_MAYBE static uint64_t chk_state = 0x9E3779B97F4A7C15ull;

/* Uniform in [-1, 1), splitmix64. */
CHK_MAYBE static double chk_rand(void)
{
	uint64_t z = (chk_state += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	z ^= z >> 31;
	return (double)(z >> 11) * 0x1.0p-52 - 1.0;
}

CHK_MAYBE static float *chk_floats(int64_t n, double scale)
{
	float *p = malloc((size_t)(n ? n : 1) * sizeof *p);
	for (int64_t i = 0; i < n; i++)
		p[i] = (float)(scale * chk_rand());
	return p;
}

CHK_MAYBE static double *chk_doubles_of(const float *x, int64_t n)
{
	double *p = malloc((size_t)(n ? n : 1) * sizeof *p);
	for (int64_t i = 0; i < n; i++)
		p[i] = x[i];
	return p;
}

/* max |got - want| / (atol + rtol |want|) <= 1, printing the worst element. */
CHK_MAYBE static int chk_close(const char *what, const float *got, const double *want, int64_t n,
		     double atol, double rtol)
{
	double worst = 0.0;
	int64_t wi = 0;
	for (int64_t i = 0; i < n; i++) {
		double diff = fabs((double)got[i] - want[i]);
		double e = diff == 0.0 ? 0.0 : diff / (atol + rtol * fabs(want[i]));
		if (!(e <= worst)) {
			worst = e;
			wi = i;
		}
	}
	int good = worst <= 1.0;
	ok(good, "%s (%lld elements, atol %g rtol %g)", what, (long long)n, atol, rtol);
	if (!good)
		diag("worst element %lld: got %.9g want %.9g", (long long)wi, (double)got[wi],
		     want[wi]);
	return good;
}

CHK_MAYBE static int chk_close_f(const char *what, const float *got, const float *want, int64_t n,
		       double atol, double rtol)
{
	double *w = chk_doubles_of(want, n);
	int r = chk_close(what, got, w, n, atol, rtol);
	free(w);
	return r;
}

CHK_MAYBE static gpt_backend chk_backend(void)
{
	gpt_backend be;
	gpt_err err = {0};
	if (gpt_backend_cpu_init(&be, GPT_DTYPE_F32, 0, &err)) {
		printf("Bail out! cpu backend: %s\n", err.msg);
		exit(1);
	}
	return be;
}

CHK_MAYBE static gpt_err chk_err;

/* Runs an op that must succeed (using &chk_err); bails out otherwise. */
#define CHK(expr)                                                                         \
	do {                                                                              \
		if ((expr) != 0) {                                                        \
			printf("Bail out! %s: %s\n", #expr, chk_err.msg);                 \
			exit(1);                                                          \
		}                                                                         \
	} while (0)

#endif
