/* Strict scalar parsers and the edit distance behind "did you mean". */
#include "core.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
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
