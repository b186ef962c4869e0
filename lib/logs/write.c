/* Rows and summaries as TSV, CSV or JSON Lines. Numbers copied from the log
 * keep their text, nan and inf included; derived ones are printed with %.12g
 * (enough for any figure a log holds, without binary noise such as
 * 34373.4000000001); unknown ones are empty (TSV, CSV) or null (JSON). JSON
 * has no nan or inf, so those are null there too. */
#include "logs.h"
#include "text/text.h"
#include "write.h"

#include <math.h>
#include <string.h>

int gpt_logs_format_parse(const char *s, gpt_logs_format *out, gpt_err *err)
{
	if (strcmp(s, "tsv") == 0)
		*out = GPT_LOGS_TSV;
	else if (strcmp(s, "csv") == 0)
		*out = GPT_LOGS_CSV;
	else if (strcmp(s, "json") == 0)
		*out = GPT_LOGS_JSON;
	else
		return gpt_err_set(err, GPT_EUSAGE, "--format: expected tsv, csv or json, not '%s'", s);
	return 0;
}

static void put_str(gpt_buf *b, gpt_logs_format f, const char *s, gpt_err *err)
{
	if (f == GPT_LOGS_TSV) {
		/* A tab or newline in a file name would split the row. */
		for (; *s; s++)
			gpt_buf_append(b, (*s == '\t' || *s == '\n') ? " " : s, 1, err);
	} else if (f == GPT_LOGS_CSV) {
		if (!strpbrk(s, ",\"\n\r")) {
			gpt_buf_puts(b, s, err);
			return;
		}
		gpt_buf_puts(b, "\"", err);
		for (; *s; s++)
			gpt_buf_append(b, *s == '"' ? "\"\"" : s, *s == '"' ? 2 : 1, err);
		gpt_buf_puts(b, "\"", err);
	} else {
		/* JSON text is UTF-8: a file name in another encoding gets
		 * U+FFFD for its bad bytes, as Python's errors="replace" */
		gpt_buf u = GPT_BUF_INIT;
		if (gpt_utf8_lossy(s, strlen(s), &u, err) || gpt_buf_append(&u, "", 1, err)) {
			gpt_buf_free(&u);
			return;
		}
		gpt_buf_puts(b, "\"", err);
		for (s = u.data; *s; s++) {
			unsigned char c = (unsigned char)*s;
			if (c == '"' || c == '\\')
				gpt_buf_printf(b, err, "\\%c", c);
			else if (c < 0x20)
				gpt_buf_printf(b, err, "\\u%04x", c);
			else
				gpt_buf_append(b, s, 1, err);
		}
		gpt_buf_puts(b, "\"", err);
		gpt_buf_free(&u);
	}
}

/* True when t[0..n) is a number as JSON spells them. */
static int json_number(const char *t, int n)
{
	int i = 0, digits = 0;
	if (i < n && t[i] == '-')
		i++;
	while (i < n && t[i] >= '0' && t[i] <= '9')
		i++, digits++;
	if (!digits || (digits > 1 && t[i - digits] == '0'))
		return 0;
	if (i < n && t[i] == '.') {
		int frac = 0;
		for (i++; i < n && t[i] >= '0' && t[i] <= '9'; i++)
			frac++;
		if (!frac)
			return 0;
	}
	if (i < n && (t[i] == 'e' || t[i] == 'E')) {
		i++;
		if (i < n && (t[i] == '+' || t[i] == '-'))
			i++;
		int ed = 0;
		for (; i < n && t[i] >= '0' && t[i] <= '9'; i++)
			ed++;
		if (!ed)
			return 0;
	}
	return i == n;
}

static void put_double(gpt_buf *b, gpt_logs_format f, double v, gpt_err *err)
{
	if (isnan(v) || (f == GPT_LOGS_JSON && !isfinite(v))) {
		if (f == GPT_LOGS_JSON)
			gpt_buf_puts(b, "null", err);
		return;
	}
	gpt_buf_printf(b, err, "%.12g", v);
}

static void put_num(gpt_buf *b, gpt_logs_format f, const gpt_logs_num *x, gpt_err *err)
{
	/* A logged nan is not an absent number: it keeps its text. */
	if (x->txt && (f != GPT_LOGS_JSON || json_number(x->txt, x->len)))
		gpt_buf_append(b, x->txt, (size_t)x->len, err);
	else
		put_double(b, f, x->v, err);
}

static void put_int(gpt_buf *b, gpt_logs_format f, int64_t v, gpt_err *err)
{
	if (v < 0) {
		if (f == GPT_LOGS_JSON)
			gpt_buf_puts(b, "null", err);
		return;
	}
	char d[24];
	int i = sizeof d;
	do
		d[--i] = (char)('0' + v % 10);
	while ((v /= 10) > 0);
	gpt_buf_append(b, d + i, sizeof d - (size_t)i, err);
}

static const char *sep(gpt_logs_format f)
{
	return f == GPT_LOGS_TSV ? "\t" : ",";
}

/* The columns of a row and of a summary, in order. */
static const char *const row_cols[] = {"source", "rank", "step", "loss", "lr", "step_time",
				       "tokens_per_s", "tokens_per_s_total", NULL};
static const char *const sum_cols[] = {
	"source", "rank", "format", "steps", "skipped",
	"tokens_per_s_p10", "tokens_per_s_median", "tokens_per_s_p90",
	"tokens_per_s_total_p10", "tokens_per_s_total_median", "tokens_per_s_total_p90",
	"step_time_p10", "step_time_median", "step_time_p90",
	"loss_first", "loss_last", "loss_min", "loss_min_step",
	"evals", "eval_loss_last", "eval_losses", "checkpoints", "overflows", "mfu",
	"loss_nonfinite", "unparsed", "restarts", NULL};

static void header(gpt_buf *b, gpt_logs_format f, const char *const *cols, gpt_err *err)
{
	if (f == GPT_LOGS_JSON)
		return;
	for (int i = 0; cols[i]; i++) {
		if (i)
			gpt_buf_puts(b, sep(f), err);
		gpt_buf_puts(b, cols[i], err);
	}
	gpt_buf_puts(b, "\n", err);
}

void gpt_logs_write_row_header(gpt_buf *b, gpt_logs_format f, gpt_err *err)
{
	header(b, f, row_cols, err);
}

void gpt_logs_write_summary_header(gpt_buf *b, gpt_logs_format f, gpt_err *err)
{
	header(b, f, sum_cols, err);
}

/* Starts a row: the JSON "{" and every field up to the value of column i. */
static void field(gpt_buf *b, gpt_logs_format f, const char *const *cols, int i, gpt_err *err)
{
	if (f == GPT_LOGS_JSON)
		gpt_buf_printf(b, err, "%s\"%s\":", i ? "," : "{", cols[i]);
	else if (i)
		gpt_buf_puts(b, sep(f), err);
}

static void end_row(gpt_buf *b, gpt_logs_format f, gpt_err *err)
{
	gpt_buf_puts(b, f == GPT_LOGS_JSON ? "}\n" : "\n", err);
}

void gpt_logs_write_prefix(gpt_buf *b, gpt_logs_format f, const char *source, int64_t rank,
			   gpt_err *err)
{
	field(b, f, row_cols, 0, err);
	put_str(b, f, source, err);
	field(b, f, row_cols, 1, err);
	put_int(b, f, rank, err);
}

void gpt_logs_write_row(gpt_buf *b, gpt_logs_format f, const char *prefix, size_t prefix_len,
			const gpt_logs_rec *r, gpt_err *err)
{
	gpt_buf_append(b, prefix, prefix_len, err);
	field(b, f, row_cols, 2, err);
	put_int(b, f, r->step, err);
	field(b, f, row_cols, 3, err);
	put_num(b, f, &r->loss, err);
	field(b, f, row_cols, 4, err);
	put_num(b, f, &r->lr, err);
	field(b, f, row_cols, 5, err);
	put_num(b, f, &r->step_time, err);
	field(b, f, row_cols, 6, err);
	put_num(b, f, &r->tok_card, err);
	field(b, f, row_cols, 7, err);
	put_num(b, f, &r->tok_total, err);
	end_row(b, f, err);
}

static void dialects(gpt_buf *b, gpt_logs_format f, int mask, gpt_err *err)
{
	gpt_buf names = GPT_BUF_INIT;
	for (int d = GPT_LOGS_GPTKIT; d <= GPT_LOGS_MINDFORMERS; d++)
		if (mask & (1 << d))
			gpt_buf_printf(&names, err, "%s%s", names.len ? "+" : "",
				       gpt_logs_dialect_name((gpt_logs_dialect)d));
	if (names.len || f == GPT_LOGS_JSON)
		put_str(b, f, names.len ? names.data : "", err);
	gpt_buf_free(&names);
}

void gpt_logs_write_summary(gpt_buf *b, gpt_logs_format f, const char *source, int64_t rank,
			    const gpt_logs_series *s, const gpt_logs_summary *m, gpt_err *err)
{
	int c = 0;
	field(b, f, sum_cols, c++, err);
	put_str(b, f, source, err);
	field(b, f, sum_cols, c++, err);
	put_int(b, f, rank, err);
	field(b, f, sum_cols, c++, err);
	dialects(b, f, s->dialects, err);
	field(b, f, sum_cols, c++, err);
	put_int(b, f, m->steps, err);
	field(b, f, sum_cols, c++, err);
	put_int(b, f, m->skipped, err);
	const double *q[3] = {m->tok_card, m->tok_total, m->step_time};
	for (int k = 0; k < 3; k++)
		for (int j = 0; j < 3; j++) {
			field(b, f, sum_cols, c++, err);
			put_double(b, f, q[k][j], err);
		}
	field(b, f, sum_cols, c++, err);
	put_double(b, f, m->loss_first, err);
	field(b, f, sum_cols, c++, err);
	put_double(b, f, m->loss_last, err);
	field(b, f, sum_cols, c++, err);
	put_double(b, f, m->loss_min, err);
	field(b, f, sum_cols, c++, err);
	put_int(b, f, m->loss_min_step, err);
	field(b, f, sum_cols, c++, err);
	put_int(b, f, s->n_eval, err);
	field(b, f, sum_cols, c++, err);
	put_double(b, f, s->n_eval ? s->eval_loss[s->n_eval - 1] : NAN, err);
	field(b, f, sum_cols, c++, err);
	/* Every eval as STEP:LOSS, space-separated; a JSON array of pairs. */
	gpt_buf list = GPT_BUF_INIT;
	for (int64_t i = 0; i < s->n_eval; i++) {
		if (f == GPT_LOGS_JSON) {
			gpt_buf_puts(&list, i ? ",[" : "[", err);
			put_int(&list, f, s->eval_step[i], err);
			gpt_buf_puts(&list, ",", err);
			put_double(&list, f, s->eval_loss[i], err);
			gpt_buf_puts(&list, "]", err);
		} else {
			if (i)
				gpt_buf_puts(&list, " ", err);
			if (s->eval_step[i] >= 0)
				gpt_buf_printf(&list, err, "%lld", (long long)s->eval_step[i]);
			gpt_buf_printf(&list, err, ":%.15g", s->eval_loss[i]);
		}
	}
	if (f == GPT_LOGS_JSON)
		gpt_buf_printf(b, err, "[%s]", list.data ? list.data : "");
	else if (list.len)
		put_str(b, f, list.data, err);
	gpt_buf_free(&list);
	field(b, f, sum_cols, c++, err);
	put_int(b, f, s->n_ckpt, err);
	field(b, f, sum_cols, c++, err);
	put_int(b, f, s->n_overflow, err);
	field(b, f, sum_cols, c++, err);
	put_double(b, f, m->mfu, err);
	field(b, f, sum_cols, c++, err);
	put_int(b, f, m->loss_nonfinite, err);
	field(b, f, sum_cols, c++, err);
	put_int(b, f, s->n_unparsed, err);
	field(b, f, sum_cols, c++, err);
	put_int(b, f, s->restarts, err);
	end_row(b, f, err);
}
