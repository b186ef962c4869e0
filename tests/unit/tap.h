/* A tiny TAP producer for the C unit tests: ok(), is_int(), is_str(),
 * is_near(), then done_testing() which prints the plan and returns the exit
 * status. Header-only so each test is one .c file. */
#ifndef GPT_TAP_H
#define GPT_TAP_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int tap_n, tap_failed;

static int tap_ok(int cond, const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int tap_ok(int cond, const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	printf("%s %d - ", cond ? "ok" : "not ok", ++tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	if (!cond) {
		tap_failed++;
		printf("#   failed at %s:%d\n", file, line);
	}
	fflush(stdout);
	return cond;
}

#define ok(cond, ...) tap_ok(!!(cond), __FILE__, __LINE__, __VA_ARGS__)
#define is_int(got, want, ...)                                                              \
	do {                                                                                \
		long long g_ = (long long)(got), w_ = (long long)(want);                    \
		if (!tap_ok(g_ == w_, __FILE__, __LINE__, __VA_ARGS__))                     \
			printf("#   got %lld, want %lld\n", g_, w_);                            \
	} while (0)
#define is_str(got, want, ...)                                                              \
	do {                                                                                \
		const char *g_ = (got), *w_ = (want);                                       \
		if (!tap_ok(g_ && w_ && strcmp(g_, w_) == 0, __FILE__, __LINE__, __VA_ARGS__)) \
			printf("#   got  '%s'\n#   want '%s'\n", g_ ? g_ : "(null)",           \
			       w_ ? w_ : "(null)");                                          \
	} while (0)
#define is_near(got, want, tol, ...)                                                        \
	do {                                                                                \
		double g_ = (got), w_ = (want);                                             \
		if (!tap_ok(fabs(g_ - w_) <= (tol), __FILE__, __LINE__, __VA_ARGS__))        \
			printf("#   got %.9g, want %.9g (tolerance %g)\n", g_, w_, (double)(tol)); \
	} while (0)
#define diag(...) (printf("# "), printf(__VA_ARGS__), printf("\n"))

static inline int done_testing(void)
{
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}

/* Skip the whole file (no tests run). */
static inline int skip_all(const char *why)
{
	printf("1..0 # SKIP %s\n", why);
	return 0;
}

#endif
