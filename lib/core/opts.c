/* One option table for getopt_long and for --help. */
#include "core.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#define MAX_OPTS 128

void gpt_opts_init(gpt_opts *o, const gpt_opt *table, int argc, char **argv)
{
	memset(o, 0, sizeof *o);
	o->table = table;
	o->argc = argc;
	o->argv = argv;
	o->index = 1;
	optind = 0; /* 0 makes glibc reinitialise, so a second parse starts clean */
}

/* The long option whose name is NAME (its first N bytes) with '-' and '_'
 * taken as the same character (the exact spelling first), or NULL:
 * PaddleNLP and torchrun spell with '_' what GNU tools spell with '-'. */
static const gpt_opt *long_like(const gpt_opt *table, const char *name, size_t n)
{
	const gpt_opt *like = NULL;
	for (const gpt_opt *t = table; t->id; t++) {
		if (!t->lng || strlen(t->lng) != n)
			continue;
		if (strncmp(t->lng, name, n) == 0)
			return t; /* the spelling given, where the table has it */
		size_t i = 0;
		for (; i < n; i++) {
			char a = name[i] == '_' ? '-' : name[i], b = t->lng[i] == '_' ? '-' : t->lng[i];
			if (a != b)
				break;
		}
		if (i == n && !like)
			like = t;
	}
	return like;
}

/* A long option written with one dash (-sharding, as PaddleNLP's docs have
 * it in places, or -config): getopt would take it for short options and say
 * "unknown option -s", or read -c with the argument "onfig". The next
 * element getopt looks at is checked before it does, and refused by name. */
static int one_dash_long(const gpt_opts *o, gpt_err *err)
{
	int i = optind ? optind : 1;
	if (!o->stop_at_first_operand)
		while (i < o->argc && (o->argv[i][0] != '-' || o->argv[i][1] == '\0'))
			i++; /* operands that getopt permutes past */
	if (i >= o->argc)
		return 0;
	const char *a = o->argv[i];
	if (a[0] != '-' || a[1] == '-' || a[1] == '\0' || a[2] == '\0')
		return 0;
	size_t n = strcspn(a + 1, "=");
	const gpt_opt *t = long_like(o->table, a + 1, n);
	if (!t)
		return 0;
	return gpt_err_set(err, GPT_EUSAGE, "unknown option %.*s: a long option takes two dashes; did you mean --%s?",
			   (int)(n + 1), a, t->lng),
	       -1;
}

int gpt_opts_next(gpt_opts *o, gpt_err *err)
{
	if (one_dash_long(o, err))
		return -1;
	struct option longs[MAX_OPTS + 1];
	char shorts[2 * MAX_OPTS + 4];
	int nl = 0, ns = 0;
	if (o->stop_at_first_operand)
		shorts[ns++] = '+';
	shorts[ns++] = ':'; /* report a missing argument as ':' */
	for (const gpt_opt *t = o->table; t->id && nl < MAX_OPTS; t++) {
		if (t->lng)
			longs[nl++] = (struct option){t->lng, t->arg ? required_argument : no_argument,
						      NULL, t->id};
		if (t->shrt) {
			shorts[ns++] = (char)t->shrt;
			if (t->arg)
				shorts[ns++] = ':';
		}
	}
	longs[nl] = (struct option){NULL, 0, NULL, 0};
	shorts[ns] = '\0';
	opterr = 0;
	int longidx = -1;
	int before = optind;
	int c = getopt_long(o->argc, o->argv, shorts, longs, &longidx);
	o->index = optind;
	o->arg = optarg;
	if (c == -1)
		return 0;
	if (c == '?' || c == ':') {
		const char *bad = o->argv[optind - 1];
		/* inside a cluster such as "-b4" getopt has not moved past it: the
		 * word before it is not the one refused */
		int in_cluster = optind == before && optind < o->argc;
		if (optopt && (in_cluster || !(bad && bad[0] == '-' && bad[1] == '-')))
			return gpt_err_set(err, GPT_EUSAGE, c == ':' ? "option -%c needs an argument"
								      : "unknown option -%c; see --help",
					   optopt),
			       -1;
		const gpt_opt *t = NULL;
		if (c == '?' && bad && bad[0] == '-' && bad[1] == '-')
			t = long_like(o->table, bad + 2, strcspn(bad + 2, "="));
		size_t n = bad ? strcspn(bad, "=") : 0;
		if (t && strlen(t->lng) == n - 2 && strncmp(bad + 2, t->lng, n - 2) == 0)
			return gpt_err_set(err, GPT_EUSAGE, "option --%s takes no argument; found '%s'", t->lng,
					   bad),
			       -1; /* "--dry-run=x": the name as spelt, a value it does not take */
		if (t)
			return gpt_err_set(err, GPT_EUSAGE, "unknown option %.*s; did you mean --%s?", (int)n, bad,
					   t->lng),
			       -1;
		return gpt_err_set(err, GPT_EUSAGE, c == ':' ? "option %s needs an argument"
							      : "unknown option %s; see --help",
				   bad ? bad : "?"),
		       -1;
	}
	if (longidx < 0) /* a short option: getopt returned the letter */
		for (const gpt_opt *t = o->table; t->id; t++)
			if (t->shrt == c)
				return t->id;
	return c;
}

void gpt_opts_help(const gpt_opt *table, FILE *fp)
{
	for (const gpt_opt *t = table; t->id; t++) {
		char left[96];
		if (!t->help) /* another spelling of an option listed */
			continue;
		int n = 0;
		if (t->shrt && t->lng)
			n = snprintf(left, sizeof left, "-%c, --%s", t->shrt, t->lng);
		else if (t->shrt)
			n = snprintf(left, sizeof left, "-%c", t->shrt);
		else
			n = snprintf(left, sizeof left, "    --%s", t->lng);
		if (t->arg && n > 0 && (size_t)n < sizeof left)
			snprintf(left + n, sizeof left - (size_t)n, " %s", t->arg);
		if (strlen(left) > 28) /* too wide: the description starts the next line */
			fprintf(fp, "  %s\n  %-28s %s\n", left, "", t->help);
		else
			fprintf(fp, "  %-28s %s\n", left, t->help);
	}
}

void gpt_opts_foreign_hint(const char *arg, const char *const *tbl, gpt_err *err)
{
	if (!arg || arg[0] != '-' || strncmp(err->msg, "unknown option -", 16) != 0)
		return;
	int lng = arg[1] == '-';
	/* a short option only as the word getopt refused: "-b", not "-b4" */
	if (!lng && (strlen(arg) != 2 || err->msg[16] != arg[1] || err->msg[17] != ';'))
		return;
	const char *name = arg + 1 + lng;
	size_t n = lng ? strcspn(name, "=") : 1;
	for (int i = 0; tbl[i]; i += 3) {
		const char *t = tbl[i];
		if ((t[0] == '-') == lng) /* "-b": llm.c's short flag; "fp16": --fp16 */
			continue;
		t += !lng;
		if (strlen(t) == n && strncmp(name, t, n) == 0) {
			gpt_err_set(err, GPT_EUSAGE, "unknown option %s%s (%s); %s", lng ? "--" : "-", t, tbl[i + 1],
				    tbl[i + 2]);
			return;
		}
	}
}
