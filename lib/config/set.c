/* Storing one key's value: typed parsing of scalars and lists against the key
 * table, origins for messages, -o overrides and PaddleNLP flags. */
#include "config/config.h"

#include <ctype.h>
#include <float.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static void *field(gpt_config *cfg, const gpt_config_key *k)
{
	return (char *)cfg + k->offset;
}

void gpt_config_where(const gpt_config *cfg, int k, char *out, size_t size)
{
	const gpt_config_origin *o = &cfg->origin[k];
	switch (o->src) {
	case GPT_SRC_FILE:
		snprintf(out, size, "%s:%d:%d", o->where, o->line, o->col);
		break;
	case GPT_SRC_OVERRIDE:
	case GPT_SRC_FLAG:
		snprintf(out, size, "%s", o->where);
		break;
	default: /* defaulted or derived: the file as a whole is the best place */
		snprintf(out, size, "%s", cfg->file ? cfg->file : "configuration");
		break;
	}
}

int gpt_config_where_code(const gpt_config *cfg, int k)
{
	gpt_config_src s = cfg->origin[k].src;
	return s == GPT_SRC_OVERRIDE || s == GPT_SRC_FLAG ? GPT_EUSAGE : GPT_EDATA;
}

int gpt_config_refuse(const gpt_config *cfg, const char *key, gpt_err *err, const char *fmt, ...)
{
	char where[512], msg[GPT_ERR_MSG_MAX];
	int k = gpt_config_key_find(key);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (k < 0) /* not a key: a programming error, still a message */
		return gpt_err_set(err, GPT_EDATA, "%s: %s", key, msg);
	gpt_config_where(cfg, k, where, sizeof where);
	return gpt_err_set(err, gpt_config_where_code(cfg, k), "%s: %s: %s", where, key, msg);
}

int gpt_config_given(const gpt_config *cfg, int k)
{
	gpt_config_src s = cfg->origin[k].src;
	return s == GPT_SRC_FILE || s == GPT_SRC_OVERRIDE || s == GPT_SRC_FLAG;
}

static int same_str(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

/* Whether key k holds the same value in a and b. */
static int same_value(const gpt_config *a, const gpt_config *b, const gpt_config_key *k)
{
	const void *x = (const char *)a + k->offset, *y = (const char *)b + k->offset;
	switch (k->type) {
	case GPT_CT_INT: return *(const int64_t *)x == *(const int64_t *)y;
	case GPT_CT_FLOAT: return *(const double *)x == *(const double *)y;
	case GPT_CT_BOOL: return *(const int *)x == *(const int *)y;
	case GPT_CT_STRLIST: {
		const gpt_strlist *p = x, *q = y;
		int same = p->n == q->n;
		for (int i = 0; same && i < p->n; i++)
			same = same_str(p->v[i], q->v[i]);
		return same;
	}
	case GPT_CT_INTLIST: {
		const gpt_intlist *p = x, *q = y;
		return p->n == q->n && (!p->n || memcmp(p->v, q->v, (size_t)p->n * sizeof *p->v) == 0);
	}
	default: return same_str(*(char *const *)x, *(char *const *)y);
	}
}

int gpt_config_ignored_keys(const gpt_config *cfg, int *out, int max, gpt_err *err)
{
	gpt_config def;
	int n, found = 0;
	const gpt_config_key *keys = gpt_config_keys(&n);
	int rc = gpt_config_init(&def, err);
	for (int k = 0; !rc && k < n && found < max; k++)
		if ((keys[k].flags & (GPT_CK_COMPAT | GPT_CK_CHECKED)) == GPT_CK_COMPAT && gpt_config_given(cfg, k) &&
		    !same_value(cfg, &def, &keys[k]))
			out[found++] = k;
	gpt_config_free(&def);
	return rc ? -1 : found;
}

static int origin_code(const gpt_config_origin *o)
{
	return o->src == GPT_SRC_OVERRIDE || o->src == GPT_SRC_FLAG ? GPT_EUSAGE : GPT_EDATA;
}

static void origin_text(const gpt_config_origin *o, char *out, size_t size)
{
	if (o->src == GPT_SRC_FILE)
		snprintf(out, size, "%s:%d:%d", o->where, o->line, o->col);
	else
		snprintf(out, size, "%s", o->where ? o->where : "configuration");
}

/* Shows a found value safely: printable, bounded. */
static void show(const char *s, char *out, size_t size)
{
	size_t j = 0;
	out[j++] = '\'';
	for (; *s && j + 5 < size; s++) {
		unsigned char c = (unsigned char)*s;
		if (c >= 32 && c < 127) {
			out[j++] = (char)c;
		} else {
			j += (size_t)snprintf(out + j, size - j, "\\x%02x", c);
		}
	}
	if (*s && j + 4 < size) {
		memcpy(out + j, "...", 3);
		j += 3;
	}
	out[j++] = '\'';
	out[j] = '\0';
}

static int bad_value(const gpt_config_key *k, const gpt_config_origin *o, const char *expected,
		     const char *found, gpt_err *err)
{
	char where[512], f[160];
	origin_text(o, where, sizeof where);
	show(found, f, sizeof f);
	return gpt_err_set(err, origin_code(o), "%s: %s: expected %s, found %s", where, k->name,
			   expected, f);
}

static const char *enum_alias(const gpt_config_key *k, const char *text)
{
	static const char *const tbl[] = {
		"Engine.mix_precision.dtype", "fp16", "float16",
		"Engine.mix_precision.dtype", "half", "float16",
		"Engine.mix_precision.dtype", "bf16", "bfloat16",
		"Optimizer.name", "FusedAdamW", "AdamW", /* FleetX: the same update, fused */
		NULL, NULL, NULL,
	};
	for (int i = 0; tbl[i]; i += 3)
		if (strcmp(tbl[i], k->name) == 0 && strcasecmp(tbl[i + 1], text) == 0)
			return tbl[i + 2];
	return text;
}

/* Finds text among "a|b|c" (case-insensitive); copies the canonical
 * spelling into out. */
static int enum_match(const char *choices, const char *text, char *out, size_t size)
{
	size_t n = strlen(text);
	for (const char *p = choices; *p;) {
		const char *e = strchr(p, '|');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		if (len == n && strncasecmp(p, text, n) == 0 && len < size) {
			memcpy(out, p, len);
			out[len] = '\0';
			return 0;
		}
		p += len + (e ? 1 : 0);
	}
	return -1;
}

static int range_ok(const gpt_config_key *k, double v)
{
	return !(k->min < k->max) || (v >= k->min && v <= k->max);
}

/* What a key takes; a large maximum is left out, unless v (the value
 * given, when it parsed) is above it. */
static void range_text(const gpt_config_key *k, const char *what, const double *v, char *out,
		       size_t size)
{
	if (!(k->min < k->max))
		snprintf(out, size, "%s", what);
	else if (k->max >= 1e18 && !(v && *v > k->max)) /* no limit but the type's */
		snprintf(out, size, "%s >= %g", what, k->min);
	else if (k->type == GPT_CT_INT)
		snprintf(out, size, "%s in [%.0f, %.0f]", what, k->min, k->max);
	else
		snprintf(out, size, "%s in [%g, %g]", what, k->min, k->max);
}

static int store_default(gpt_config *cfg, int k, gpt_err *err);

/* The file is UTF-8 (libyaml checks); -o text must be too, or the printed
 * configuration would not read back. */
static int utf8_ok(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	while (*p) {
		int n = *p < 0x80 ? 0 : (*p & 0xe0) == 0xc0 ? 1 : (*p & 0xf0) == 0xe0 ? 2
			: (*p & 0xf8) == 0xf0 ? 3 : -1;
		if (n < 0 || (n == 1 && *p < 0xc2))
			return 0;
		p++;
		for (int i = 0; i < n; i++, p++)
			if ((*p & 0xc0) != 0x80)
				return 0;
	}
	return 1;
}

int gpt_config_set_scalar(gpt_config *cfg, int k, const char *text, int is_null,
			  const gpt_config_origin *o, gpt_err *err)
{
	int n;
	const gpt_config_key *key = &gpt_config_keys(&n)[k];
	void *f = field(cfg, key);
	char expected[256];
	if (is_null) {
		int rc = store_default(cfg, k, err);
		if (rc)
			return rc;
		cfg->origin[k] = *o;
		cfg->origin[k].src = GPT_SRC_DEFAULT;
		return 0;
	}
	switch (key->type) {
	case GPT_CT_INT: {
		int64_t v;
		int prc = gpt_parse_yaml_int(text, &v), parsed = prc == 0;
		double dv = parsed ? (double)v : 0;
		range_text(key, "an integer", parsed ? &dv : NULL, expected, sizeof expected);
		if (prc == GPT_PARSE_RANGE)
			strcat(expected, " (this one is beyond 64 bits)");
		else if (!parsed && strncmp(text + (text[0] == '-' || text[0] == '+'), "0o", 2) == 0)
			strcat(expected, " (0o17 is no integer to PyYAML, which FleetX reads configurations with: write 017 or 15)");
		if (!parsed || !range_ok(key, dv))
			return bad_value(key, o, expected, text, err);
		*(int64_t *)f = v;
		break;
	}
	case GPT_CT_FLOAT: {
		double v;
		int prc = gpt_parse_f64(text, &v), parsed = prc == 0;
		if (prc == GPT_PARSE_RANGE) {
			char where[512], shown[160];
			origin_text(o, where, sizeof where);
			show(text, shown, sizeof shown);
			return gpt_err_set(err, origin_code(o),
					   "%s: %s: expected a number a double holds (0, or a magnitude from %g to %g), found %s, which %s",
					   where, key->name, DBL_TRUE_MIN, DBL_MAX, shown,
					   v == 0 ? "underflows to 0" : "overflows to infinity");
		}
		range_text(key, "a number", parsed ? &v : NULL, expected, sizeof expected);
		if (!parsed || !range_ok(key, v))
			return bad_value(key, o, expected, text, err);
		*(double *)f = v;
		break;
	}
	case GPT_CT_BOOL: {
		int v;
		if (gpt_parse_bool(text, &v))
			return bad_value(key, o, "True or False", text, err);
		*(int *)f = v;
		break;
	}
	case GPT_CT_STR: {
		if (!utf8_ok(text))
			return bad_value(key, o, "UTF-8 text", text, err);
		char *s = gpt_arena_strdup(&cfg->arena, text, err);
		if (!s)
			return err->code;
		*(char **)f = s;
		break;
	}
	case GPT_CT_ENUM: {
		char canon[64];
		if (enum_match(key->choices, enum_alias(key, text), canon, sizeof canon)) {
			snprintf(expected, sizeof expected, "one of %s", key->choices);
			for (char *p = expected; *p; p++)
				if (*p == '|')
					*p = ',';
			return bad_value(key, o, expected, text, err);
		}
		char *s = gpt_arena_strdup(&cfg->arena, canon, err);
		if (!s)
			return err->code;
		*(char **)f = s;
		break;
	}
	default: {
		/* A list given as one scalar: "a,b" or "[a, b]" (from -o). */
		char *copy = gpt_arena_strdup(&cfg->arena, text, err);
		if (!copy)
			return err->code;
		size_t len = strlen(copy);
		if (len >= 2 && copy[0] == '[' && copy[len - 1] == ']') {
			copy[len - 1] = '\0';
			copy++;
		}
		const char *items[64];
		int ni = 0;
		char *save = NULL;
		for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
			while (isspace((unsigned char)*t))
				t++;
			char *e = t + strlen(t);
			while (e > t && isspace((unsigned char)e[-1]))
				*--e = '\0';
			if ((*t == '\'' || *t == '"') && e - t >= 2 && e[-1] == *t) {
				e[-1] = '\0';
				t++;
			}
			if (ni == 64)
				return bad_value(key, o, "at most 64 items", text, err);
			items[ni++] = t;
		}
		return gpt_config_set_list(cfg, k, items, ni, o, err);
	}
	}
	cfg->origin[k] = *o;
	return 0;
}

int gpt_config_set_list(gpt_config *cfg, int k, const char *const *items, int n,
			const gpt_config_origin *o, gpt_err *err)
{
	int nk;
	const gpt_config_key *key = &gpt_config_keys(&nk)[k];
	void *f = field(cfg, key);
	if (key->type == GPT_CT_SPLIT) {
		gpt_buf b = GPT_BUF_INIT;
		double sum = 0;
		if (n < 1 || n > 3) {
			char found[32];
			snprintf(found, sizeof found, "%d numbers", n);
			return bad_value(key, o, "1 to 3 shares like '949,50,1'", found, err);
		}
		for (int i = 0; i < n; i++) {
			double v;
			if (gpt_parse_f64(items[i], &v) || v < 0) {
				gpt_buf_free(&b);
				return bad_value(key, o, "non-negative shares like '949,50,1'", items[i],
						 err);
			}
			sum += v;
			if (gpt_buf_printf(&b, err, "%s%s", i ? "," : "", items[i])) {
				gpt_buf_free(&b);
				return err->code;
			}
		}
		if (sum <= 0) {
			int rc = bad_value(key, o, "shares with a positive sum", b.data, err);
			gpt_buf_free(&b);
			return rc;
		}
		char *s = gpt_arena_strdup(&cfg->arena, b.data, err);
		gpt_buf_free(&b);
		if (!s)
			return err->code;
		*(char **)f = s;
	} else if (key->type == GPT_CT_STRLIST) {
		gpt_strlist *l = f;
		char **v = n ? gpt_arena_alloc(&cfg->arena, sizeof(char *) * (size_t)n, 8, err) : NULL;
		if (n && !v)
			return err->code;
		for (int i = 0; i < n; i++) {
			if (!items[i][0] || !utf8_ok(items[i]))
				return bad_value(key, o, "a list of UTF-8 names", items[i], err);
			if (!(v[i] = gpt_arena_strdup(&cfg->arena, items[i], err)))
				return err->code;
		}
		l->n = n;
		l->v = v;
	} else if (key->type == GPT_CT_INTLIST) {
		gpt_intlist *l = f;
		int64_t *v = n ? gpt_arena_alloc(&cfg->arena, sizeof(int64_t) * (size_t)n, 8, err) : NULL;
		if (n && !v)
			return err->code;
		for (int i = 0; i < n; i++)
			if (gpt_parse_yaml_int(items[i], &v[i]) || v[i] < 0)
				return bad_value(key, o, "a list of non-negative integers", items[i], err);
		l->n = n;
		l->v = v;
	} else {
		char expected[64];
		static const char *const tn[] = {"an integer", "a number", "True or False",
						 "a string", "a name"};
		snprintf(expected, sizeof expected, "%s", tn[key->type]);
		return bad_value(key, o, expected, "a sequence", err);
	}
	cfg->origin[k] = *o;
	return 0;
}

static int store_default(gpt_config *cfg, int k, gpt_err *err)
{
	int n;
	const gpt_config_key *key = &gpt_config_keys(&n)[k];
	void *f = field(cfg, key);
	if (!key->def) {
		switch (key->type) {
		case GPT_CT_INT: *(int64_t *)f = 0; break;
		case GPT_CT_FLOAT: *(double *)f = 0; break;
		case GPT_CT_BOOL: *(int *)f = 0; break;
		case GPT_CT_STRLIST: memset(f, 0, sizeof(gpt_strlist)); break;
		case GPT_CT_INTLIST: memset(f, 0, sizeof(gpt_intlist)); break;
		default: *(char **)f = NULL; break;
		}
		return 0;
	}
	gpt_config_origin o = {GPT_SRC_DEFAULT, "default", 0, 0};
	int rc = gpt_config_set_scalar(cfg, k, key->def, 0, &o, err);
	if (rc)
		return gpt_err_prefix(err, "internal: default of %s", key->name);
	return 0;
}

int gpt_config_init(gpt_config *cfg, gpt_err *err)
{
	int n;
	memset(cfg, 0, sizeof *cfg);
	gpt_config_keys(&n);
	gpt_arena_init(&cfg->arena, 16384);
	cfg->origin = gpt_calloc((size_t)n, sizeof *cfg->origin, "configuration origins", err);
	if (!cfg->origin)
		return err->code;
	for (int k = 0; k < n; k++) {
		int rc = store_default(cfg, k, err);
		if (rc)
			return rc;
		cfg->origin[k] = (gpt_config_origin){GPT_SRC_DEFAULT, NULL, 0, 0};
	}
	return 0;
}

void gpt_config_free(gpt_config *cfg)
{
	if (!cfg)
		return;
	free(cfg->origin);
	gpt_arena_free(&cfg->arena);
	memset(cfg, 0, sizeof *cfg);
}

static int is_null_text(const char *s)
{
	return !*s || strcmp(s, "~") == 0 || strcasecmp(s, "null") == 0 || strcmp(s, "None") == 0;
}

int gpt_config_override(gpt_config *cfg, const char *assignment, gpt_err *err)
{
	char *where = NULL;
	const char *eq = strchr(assignment, '=');
	gpt_buf w = GPT_BUF_INIT;
	if (gpt_buf_printf(&w, err, "-o %s", assignment))
		return err->code;
	where = gpt_arena_strdup(&cfg->arena, w.data, err);
	gpt_buf_free(&w);
	if (!where)
		return err->code;
	for (char *p = where; *p; p++) /* messages stay printable, one line */
		if ((unsigned char)*p < 32 || (unsigned char)*p >= 127)
			*p = '?';
	/* No key has blanks in it: blanks around one come from
	 * "-o Model.hidden_size=1024" passed as one word (a quoted argument,
	 * an item of an argument list in a job file), where getopt takes
	 * " Model.hidden_size=1024" as the value of -o. */
	const char *k0 = assignment, *k1 = eq ? eq : assignment;
	while (k0 < k1 && (*k0 == ' ' || *k0 == '\t'))
		k0++;
	while (k1 > k0 && (k1[-1] == ' ' || k1[-1] == '\t'))
		k1--;
	if (!eq || k1 == k0)
		return gpt_err_set(err, GPT_EUSAGE,
				   "%s: expected Section.key=value, e.g. -o Model.hidden_size=1024", where);
	char *name = gpt_arena_strndup(&cfg->arena, k0, (size_t)(k1 - k0), err);
	if (!name)
		return err->code;
	int k = gpt_config_key_find(name);
	if (k < 0) {
		const char *near = gpt_config_key_nearest(name);
		if (gpt_config_is_section(name))
			return gpt_err_set(err, GPT_EUSAGE,
					   "%s: %s is a section, not a key; name a key inside it", where,
					   name);
		const char *note = gpt_config_unread_note(name);
		if (note)
			return gpt_err_set(err, GPT_EUSAGE, "%s: unknown key %s: %s", where, name, note);
		return gpt_err_set(err, GPT_EUSAGE, "%s: unknown key %s; did you mean %s?", where, name,
				   near ? near : "?");
	}
	gpt_config_origin o = {GPT_SRC_OVERRIDE, where, 0, 0};
	const char *val = eq + 1;
	/* A value in quotes is the text inside them, as the same value in the
	 * YAML file and FleetX's -o (which evaluates it as Python) read it:
	 * -o Data.Train.dataset.split='949,50,1' ('null' in quotes is text). */
	size_t vn = strlen(val);
	if (vn >= 2 && (val[0] == '\'' || val[0] == '"') && val[vn - 1] == val[0] &&
	    !memchr(val + 1, val[0], vn - 2)) {
		char *in = gpt_arena_strndup(&cfg->arena, val + 1, vn - 2, err);
		if (!in)
			return err->code;
		return gpt_config_set_scalar(cfg, k, in, 0, &o, err);
	}
	const char *means = is_null_text(val) ? gpt_config_null_means(name) : NULL;
	return gpt_config_set_scalar(cfg, k, means ? means : val, is_null_text(val) && !means, &o, err);
}

int gpt_config_paddlenlp(gpt_config *cfg, const char *flag, const char *value, gpt_err *err)
{
	static const char *const map[] = {
		"tensor_parallel_degree", "Distributed.mp_degree",
		"pipeline_parallel_degree", "Distributed.pp_degree",
		"sharding_parallel_degree", "Distributed.sharding.sharding_degree",
		"virtual_pp_degree", "Distributed.virtual_pp_degree",
		NULL, NULL,
	};
	gpt_buf w = GPT_BUF_INIT;
	if (gpt_buf_printf(&w, err, "--%s %s", flag, value))
		return err->code;
	char *where = gpt_arena_strdup(&cfg->arena, w.data, err);
	gpt_buf_free(&w);
	if (!where)
		return err->code;
	gpt_config_origin o = {GPT_SRC_FLAG, where, 0, 0};
	for (int i = 0; map[i]; i += 2) {
		if (strcmp(map[i], flag) != 0)
			continue;
		/* decimal, as PaddleNLP's argparse (type=int) reads it: "010" is
		 * ten there, where a YAML 1.1 value 010 is octal eight */
		int64_t v;
		if (gpt_parse_i64(value, &v))
			return gpt_err_set(err, GPT_EUSAGE, "%s: expected a decimal integer, found '%.40s'",
					   where, value);
		/* PaddleNLP's -1 means "derive it", as leaving the flag out does. */
		if (v == -1 && strcmp(flag, "virtual_pp_degree"))
			return gpt_config_set_scalar(cfg, gpt_config_key_find(map[i + 1]), NULL, 1, &o,
						     err);
		char dec[24];
		snprintf(dec, sizeof dec, "%lld", (long long)v);
		return gpt_config_set_scalar(cfg, gpt_config_key_find(map[i + 1]), dec, 0, &o, err);
	}
	if (strcmp(flag, "sharding") != 0)
		return gpt_err_set(err, GPT_EUSAGE, "%s: unknown PaddleNLP flag", where);
	/* "stage2" or "stage2 offload": one stage, as PaddleNLP's Trainer
	 * refuses more ("--sharding recived too many arguments") */
	int64_t stage = 0;
	int offload = 0;
	char buf[128];
	snprintf(buf, sizeof buf, "%s", value);
	char *save = NULL;
	for (char *t = strtok_r(buf, " ,", &save); t; t = strtok_r(NULL, " ,", &save)) {
		int st = strncasecmp(t, "stage", 5) == 0 && t[5] >= '1' && t[5] <= '3' && !t[6] ? t[5] - '0' : 0;
		if (strcasecmp(t, "offload") == 0)
			offload = 1;
		else if (st && stage)
			return gpt_err_set(err, GPT_EUSAGE,
					   "%s: expected one stage, found stage%d and %s; give the one to "
					   "train with (stage1, stage2 or stage3), optionally followed by offload",
					   where, (int)stage, t);
		else if (st)
			stage = st;
		else
			return gpt_err_set(err, GPT_EUSAGE,
					   "%s: expected stage1, stage2 or stage3, optionally followed "
					   "by offload, found '%s'", where, t);
	}
	if (!stage)
		return gpt_err_set(err, GPT_EUSAGE,
				   "%s: expected stage1, stage2 or stage3, optionally followed by "
				   "offload", where);
	char st[8];
	snprintf(st, sizeof st, "%d", (int)stage);
	int rc = gpt_config_set_scalar(cfg, gpt_config_key_find("Distributed.sharding.sharding_stage"),
				       st, 0, &o, err);
	if (!rc && offload)
		rc = gpt_config_set_scalar(
			cfg, gpt_config_key_find("Distributed.sharding.sharding_offload"), "True", 0,
			&o, err);
	cfg->sharding_takes_rest = 1;
	return rc;
}

int gpt_config_world_size_env(int64_t *out, const char **from, gpt_err *err)
{
	/* in the order lib/comm/env.c takes the launchers in */
	static const char *const vars[] = {"GPT_WORLD_SIZE", "WORLD_SIZE", "PADDLE_TRAINERS_NUM",
					   "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", NULL};
	*out = 0;
	*from = NULL;
	for (int i = 0; vars[i]; i++) {
		const char *v = getenv(vars[i]);
		if (!v || !*v)
			continue;
		int64_t n;
		if (gpt_parse_i64(v, &n) || n < 1 || n > (1 << 24))
			return gpt_err_set(err, GPT_EUSAGE,
					   "environment variable %s: expected a world size >= 1, found "
					   "'%.40s'; unset it or fix it", vars[i], v);
		*out = n;
		*from = vars[i];
		return 0;
	}
	return 0;
}

int gpt_config_load(gpt_config *cfg, const char *path, char *const *overrides, int n_overrides,
		    gpt_err *err)
{
	int rc = gpt_config_init(cfg, err);
	if (!rc && path)
		rc = gpt_config_read_file(cfg, path, err);
	for (int i = 0; !rc && i < n_overrides; i++)
		rc = gpt_config_override(cfg, overrides[i], err);
	if (!rc)
		rc = gpt_config_resolve(cfg, 0, err);
	return rc;
}
