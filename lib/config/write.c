/* Printing the resolved configuration as FleetX-style YAML that reads back to
 * the same configuration: every key, in table order, nested by section. */
#include "config/config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void put_str(FILE *fp, const char *s)
{
	fputc('"', fp);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(fp, "\\%c", *p);
		else if (*p == '\n')
			fputs("\\n", fp);
		else if (*p == '\t')
			fputs("\\t", fp);
		else if (*p < 32 || *p == 127)
			fprintf(fp, "\\x%02x", *p);
		else
			fputc(*p, fp);
	}
	fputc('"', fp);
}

/* The shortest text that reads back to exactly v, with a '.' so that
 * Python's YAML loader (FleetX) also sees a float. */
static void put_float(FILE *fp, double v)
{
	char buf[64];
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(buf, sizeof buf, "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	char out[80];
	char *e = strchr(buf, 'e');
	if (!strchr(buf, '.')) {
		if (e)
			snprintf(out, sizeof out, "%.*s.0%s", (int)(e - buf), buf, e);
		else
			snprintf(out, sizeof out, "%s.0", buf);
	} else {
		snprintf(out, sizeof out, "%s", buf);
	}
	fputs(out, fp);
}

static void put_value(FILE *fp, const gpt_config *cfg, const gpt_config_key *k)
{
	const void *f = (const char *)cfg + k->offset;
	switch (k->type) {
	case GPT_CT_INT:
		fprintf(fp, "%lld", (long long)*(const int64_t *)f);
		break;
	case GPT_CT_FLOAT:
		put_float(fp, *(const double *)f);
		break;
	case GPT_CT_BOOL:
		fputs(*(const int *)f ? "True" : "False", fp);
		break;
	case GPT_CT_STR:
	case GPT_CT_ENUM: {
		const char *s = *(char *const *)f;
		if (!s)
			fputs("null", fp);
		else if (k->type == GPT_CT_ENUM)
			fputs(s, fp);
		else
			put_str(fp, s);
		break;
	}
	case GPT_CT_SPLIT: {
		const char *s = *(char *const *)f;
		if (s)
			fprintf(fp, "'%s'", s);
		else
			fputs("null", fp);
		break;
	}
	case GPT_CT_STRLIST: {
		const gpt_strlist *l = f;
		fputc('[', fp);
		for (int i = 0; i < l->n; i++) {
			if (i)
				fputs(", ", fp);
			put_str(fp, l->v[i]);
		}
		fputc(']', fp);
		break;
	}
	case GPT_CT_INTLIST: {
		const gpt_intlist *l = f;
		fputc('[', fp);
		for (int i = 0; i < l->n; i++)
			fprintf(fp, "%s%lld", i ? ", " : "", (long long)l->v[i]);
		fputc(']', fp);
		break;
	}
	}
}

/* Whether key k is a derived Optimizer.lr.warmup_steps that holds the
 * rounded value of a warm-up of a fraction of a step. */
static int rounded_warmup(const gpt_config *cfg, int k)
{
	return k == gpt_config_key_find("Optimizer.lr.warmup_steps") && !gpt_config_given(cfg, k) &&
	       gpt_config_warmup(cfg) != (double)cfg->optimizer.lr.warmup_steps;
}

/* Number of leading dotted components a and b share. */
static int common(const char *a, const char *b)
{
	int n = 0;
	for (;;) {
		const char *da = strchr(a, '.'), *db = strchr(b, '.');
		if (!da || !db || da - a != db - b || strncmp(a, b, (size_t)(da - a)) != 0)
			return n;
		n++;
		a = da + 1;
		b = db + 1;
	}
}

int gpt_config_write_yaml(const gpt_config *cfg, FILE *fp, gpt_err *err)
{
	errno = 0; /* what a failed write sets, named in the error */
	int n;
	const gpt_config_key *keys = gpt_config_keys(&n);
	if (!cfg->resolved)
		return gpt_err_set(err, GPT_EINTERNAL,
				   "configuration: printed before gpt_config_resolve ran");
	fprintf(fp, "# gptkit %s resolved configuration; every key, derived values included.\n"
		    "# world size %lld = dp_degree %lld x mp_degree %lld x pp_degree %lld x "
		    "sharding_degree %lld\n",
		GPT_VERSION, (long long)cfg->world_size, (long long)cfg->distributed.dp_degree,
		(long long)cfg->distributed.mp_degree, (long long)cfg->distributed.pp_degree,
		(long long)cfg->distributed.sharding.sharding_degree);
	const char *prev = "";
	for (int i = 0; i < n; i++) {
		const char *name = keys[i].name;
		int shared = common(prev, name);
		/* Open the sections this key is in that the previous key was not. */
		const char *p = name;
		int depth = 0;
		for (const char *dot; (dot = strchr(p, '.')); p = dot + 1, depth++) {
			if (depth < shared)
				continue;
			if (depth == 0 && i)
				fputc('\n', fp);
			fprintf(fp, "%*s%.*s:\n", 2 * depth, "", (int)(dot - p), p);
		}
		fprintf(fp, "%*s%s: ", 2 * depth, "", p);
		if (rounded_warmup(cfg, i)) {
			/* the derived value rounded would read back as a given
			 * warm-up of whole steps, another schedule */
			fprintf(fp, "null  # warmup_rate x decay_steps = %.6g steps, used unrounded",
				gpt_config_warmup(cfg));
		} else {
			put_value(fp, cfg, &keys[i]);
		}
		if (strcmp(name, "Model.vocab_size") == 0 &&
		    cfg->padded_vocab_size != cfg->model.vocab_size)
			fprintf(fp, "  # padded to %lld", (long long)cfg->padded_vocab_size);
		fputc('\n', fp);
		prev = name;
	}
	if (fflush(fp) || ferror(fp))
		return gpt_err_errno(err, GPT_EIO, errno ? errno : EIO, "writing the configuration");
	return 0;
}
