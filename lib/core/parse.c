/* Strict scalar parsers and the edit distance behind "did you mean". */
#include "core.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int gpt_parse_i64(const char *s, int64_t *out)
{
	if (!s || !*s || isspace((unsigned char)*s))
		return -1;
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || *end)
		return -1;
	*out = v;
	return 0;
}

/* v = v * base + d within magnitude limit lim; -1 past it. */
static int mul_add(uint64_t *v, unsigned base, unsigned d, uint64_t lim)
{
	if (*v > (lim - d) / base)
		return -1;
	*v = *v * base + d;
	return 0;
}

static int digit_of(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : 99;
}

int gpt_parse_yaml_int(const char *s, int64_t *out)
{
	if (!s)
		return -1;
	const char *p = s;
	int neg = *p == '-';
	p += *p == '-' || *p == '+';
	uint64_t lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX, v = 0;
	unsigned base = 10;
	if (p[0] == '0' && (p[1] == 'b' || p[1] == 'x')) {
		base = p[1] == 'b' ? 2 : 16;
		p += 2;
	} else if (p[0] == '0' && p[1]) {
		base = 8; /* 017 is 15, as PyYAML reads it */
	} else if (!(p[0] >= '0' && p[0] <= '9')) {
		return -1;
	}
	int digits = 0, range = 0;
	for (; *p && *p != ':'; p++) {
		if (*p == '_')
			continue;
		unsigned d = (unsigned)digit_of(*p);
		if (d >= base)
			return -1;
		range |= mul_add(&v, base, d, lim);
		digits++;
	}
	if (!digits)
		return -1;
	/* base 60, 1:30 for 90: after a decimal that starts with 1-9, groups
	 * of one digit or two below 60 */
	if (*p == ':' && (base != 10 || s[neg || *s == '+'] == '0'))
		return -1;
	while (*p == ':') {
		const char *g = ++p;
		while (*p >= '0' && *p <= '9')
			p++;
		if (p - g < 1 || p - g > 2 || (p - g == 2 && g[0] > '5'))
			return -1;
		range |= mul_add(&v, 60, (unsigned)atoi(g), lim);
	}
	if (*p)
		return -1;
	if (range)
		return GPT_PARSE_RANGE;
	*out = neg ? (int64_t)(0 - v) : (int64_t)v;
	return 0;
}

int gpt_parse_f64(const char *s, double *out)
{
	if (!s || !*s || isspace((unsigned char)*s))
		return -1;
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (*end)
		return -1;
	/* 1e400 overflows to infinity, 1e-400 underflows to 0: neither is the
	 * number written (a denormal, though inexact, is kept) */
	if (errno == ERANGE && (v == HUGE_VAL || v == -HUGE_VAL || v == 0)) {
		*out = v;
		return GPT_PARSE_RANGE;
	}
	/* "nan"/"inf" spellings are accepted by strtod but never mean a setting. */
	if (!isfinite(v))
		return -1;
	*out = v;
	return 0;
}

int gpt_parse_bool(const char *s, int *out)
{
	static const char *yes[] = {"true", "yes", "on", "1"};
	static const char *no[] = {"false", "no", "off", "0"};
	if (!s)
		return -1;
	for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*out = 1;
			return 0;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*out = 0;
			return 0;
		}
	}
	return -1;
}

int gpt_edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	if (la > 256 || lb > 256)
		return (int)(la > lb ? la : lb);
	int row[257];
	for (size_t j = 0; j <= lb; j++)
		row[j] = (int)j;
	for (size_t i = 1; i <= la; i++) {
		int diag = row[0];
		row[0] = (int)i;
		for (size_t j = 1; j <= lb; j++) {
			int up = row[j];
			int cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
			int v = diag + cost;
			if (up + 1 < v)
				v = up + 1;
			if (row[j - 1] + 1 < v)
				v = row[j - 1] + 1;
			row[j] = v;
			diag = up;
		}
	}
	return row[lb];
}
