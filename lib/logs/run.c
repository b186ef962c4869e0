/* gpt-logparse as a library call: inputs to rows, summaries and a plot. */
#include "logs.h"
#include "write.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

typedef struct source {
	char *path;
	int64_t rank;
	int input;           /* which input it came from (o->inputs; 0 for stdin) */
	gpt_logs_reader *r;
	int done;
	int64_t last_step;   /* for records that do not carry their step */
	int64_t pending;     /* llm.c val losses kept, last in the series, that
			      * wait for the step line after them */
	int64_t steps_done;  /* after the last step line; -1 before one */
	int64_t fx_epoch;    /* PaddleFleetX's [train] lines: the epoch of the last */
	int64_t fx_base;     /* and the step before that epoch's first batch */
	gpt_logs_series series;
	gpt_buf prefix;      /* the source and rank fields of its rows */
} source;

typedef struct run_ctx {
	const gpt_logs_opts *o;
	gpt_logs_counts *counts;
	gpt_logs_parser *parser;
	source *src;
	int nsrc, cap;
	gpt_buf out;
	int *dirs;           /* follow: the inputs that are directories, looked at again */
	int ndirs;
} run_ctx;

int64_t gpt_logs_rank_from_path(const char *path)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	if (strncmp(base, "workerlog.", 10) != 0)
		return 0;
	const char *d = base + 10;
	int64_t v = 0;
	int n = 0;
	for (; *d >= '0' && *d <= '9' && n < 18; d++, n++)
		v = v * 10 + (*d - '0');
	if (n == 0 || (*d && *d != '.'))
		return 0;
	return v;
}

/* Adds the log path of input `input` at index at of the list. */
static int add_source_at(run_ctx *c, int at, int input, const char *path, gpt_err *err)
{
	if (c->nsrc == c->cap) {
		int cap = c->cap ? 2 * c->cap : 8;
		source *s = gpt_realloc(c->src, (size_t)cap * sizeof *s, "log list", err);
		if (!s)
			return err->code;
		c->src = s;
		c->cap = cap;
	}
	char *copy = gpt_strdup(path, err);
	if (!copy)
		return err->code;
	memmove(&c->src[at + 1], &c->src[at], (size_t)(c->nsrc - at) * sizeof *c->src);
	source *s = &c->src[at];
	memset(s, 0, sizeof *s);
	s->path = copy;
	c->nsrc++;
	s->input = input;
	s->rank = gpt_logs_rank_from_path(path);
	s->last_step = -1;
	s->steps_done = -1;
	s->fx_epoch = -1;
	gpt_logs_series_init(&s->series);
	gpt_logs_write_prefix(&s->prefix, c->o->format, path, s->rank, err);
	return err->code;
}

static int add_source(run_ctx *c, int input, const char *path, gpt_err *err)
{
	return add_source_at(c, c->nsrc, input, path, err);
}

typedef struct dent {
	char *name;
	int64_t rank;
} dent;

static int cmp_dent(const void *a, const void *b)
{
	const dent *x = a, *y = b;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* The workerlog.* names in dir, in rank order (*list NULL when none). */
static int list_dir(const char *dir, dent **list, size_t *n, gpt_err *err)
{
	*list = NULL;
	*n = 0;
	DIR *d = opendir(dir);
	if (!d)
		return gpt_err_errno_read(err, errno, "%s: cannot list the directory", dir);
	size_t cap = 0;
	struct dirent *e;
	int rc = 0;
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, "workerlog.", 10) != 0)
			continue;
		if (*n == cap) {
			cap = cap ? 2 * cap : 16;
			dent *l = gpt_realloc(*list, cap * sizeof *l, "directory listing", err);
			if (!l) {
				rc = err->code;
				break;
			}
			*list = l;
		}
		if (!((*list)[*n].name = gpt_strdup(e->d_name, err))) {
			rc = err->code;
			break;
		}
		(*list)[*n].rank = gpt_logs_rank_from_path(e->d_name);
		(*n)++;
	}
	closedir(d);
	if (!rc && *n)
		qsort(*list, *n, sizeof **list, cmp_dent);
	return rc;
}

/* Where a log of input `input` with this rank and name goes in the list:
 * after the logs of earlier inputs and the lower ranks of its own, so that
 * a log found later stands where it would have stood from the start. */
static int place(const run_ctx *c, int input, const dent *d)
{
	int at = 0;
	while (at < c->nsrc && c->src[at].input < input)
		at++;
	while (at < c->nsrc && c->src[at].input == input) {
		const char *base = strrchr(c->src[at].path, '/');
		dent have = {(char *)(base ? base + 1 : c->src[at].path), c->src[at].rank};
		if (cmp_dent(&have, d) > 0)
			break;
		at++;
	}
	return at;
}

/* A directory stands for its workerlog.* files, in rank order. Following,
 * it is looked at again (rescan), and may have none yet: workers that
 * start later write theirs there. A rescan adds the logs it has not seen. */
static int add_dir(run_ctx *c, int input, int rescan, gpt_err *err)
{
	const char *dir = c->o->inputs[input];
	dent *list;
	size_t n;
	int rc = list_dir(dir, &list, &n, err);
	if (rc == GPT_ENOINPUT && rescan) { /* removed for now: the logs open are followed on */
		gpt_err_clear(err);
		rc = 0;
	}
	if (!rc && n == 0 && !c->o->follow)
		rc = gpt_err_set(err, GPT_ENOINPUT,
				 "%s: no workerlog.* files in the directory; name the log files instead", dir);
	gpt_buf path = GPT_BUF_INIT;
	size_t dl = strlen(dir);
	for (size_t i = 0; i < n && !rc; i++) {
		gpt_buf_reset(&path);
		if (gpt_buf_printf(&path, err, "%s%s%s", dir, dl && dir[dl - 1] == '/' ? "" : "/",
				   list[i].name))
			rc = err->code;
		int known = 0;
		for (int k = 0; rescan && !rc && k < c->nsrc && !known; k++)
			known = c->src[k].input == input && strcmp(c->src[k].path, path.data) == 0;
		if (rc || known)
			continue;
		/* one that is gone again before it is opened is no log (yet) */
		gpt_logs_reader *r = NULL;
		if (rescan && gpt_logs_reader_open(&r, path.data, c->o->max_line, 1, err)) {
			rc = err->code == GPT_ENOINPUT ? 0 : err->code;
			if (!rc)
				gpt_err_clear(err);
			continue;
		}
		int at = rescan ? place(c, input, &list[i]) : c->nsrc;
		if (add_source_at(c, at, input, path.data, err)) {
			gpt_logs_reader_close(r);
			rc = err->code;
		} else if (rescan) {
			c->src[at].r = r;
			c->counts->logs++;
		}
	}
	for (size_t i = 0; i < n; i++)
		free(list[i].name);
	free(list);
	gpt_buf_free(&path);
	return rc;
}

static int expand_inputs(run_ctx *c, gpt_err *err)
{
	const gpt_logs_opts *o = c->o;
	if (o->ninputs == 0)
		return add_source(c, 0, "-", err);
	int stdin_seen = 0;
	for (int i = 0; i < o->ninputs; i++) {
		const char *p = o->inputs[i];
		struct stat st;
		if (strcmp(p, "-") == 0) {
			if (stdin_seen++)
				return gpt_err_set(err, GPT_EUSAGE, "'-' (stdin) is named twice; it can be read once");
			if (add_source(c, i, p, err))
				return err->code;
		} else if (stat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
			if (add_dir(c, i, 0, err))
				return err->code;
			if (o->follow) {
				int *d = gpt_realloc(c->dirs, (size_t)(c->ndirs + 1) * sizeof *d, "log list", err);
				if (!d)
					return err->code;
				c->dirs = d;
				c->dirs[c->ndirs++] = i;
			}
		} else if (add_source(c, i, p, err)) {
			return err->code;
		}
	}
	return 0;
}

/* What the rows go to, for errors: gpt-logparse's standard output. */
static const char *out_name(const gpt_logs_opts *o)
{
	return o->out == stdout ? "standard output" : "the output";
}

static int flush_out(run_ctx *c, gpt_err *err)
{
	if (c->out.len && fwrite(c->out.data, 1, c->out.len, c->o->out) != c->out.len)
		return gpt_err_errno(err, GPT_EIO, errno, "%s", out_name(c->o));
	gpt_buf_reset(&c->out);
	return 0;
}

/* The steps done before a step line: "step N/M" (llm.c's stdout, and
 * every other dialect) counts from 1, llm.c's older "step N: train loss"
 * from 0. */
static int64_t steps_before(const gpt_logs_rec *r)
{
	return r->dialect == GPT_LOGS_LLMC && r->total_steps < 0 ? r->step : r->step - 1;
}

/* llm.c's val losses waiting for their step get `step`. */
static void settle(source *s, int64_t step)
{
	for (int64_t i = s->series.n_eval - s->pending; i < s->series.n_eval; i++)
		s->series.eval_step[i] = step;
	s->pending = 0;
}

/* One record: fill in what the log left implicit, print, keep. */
static int take(run_ctx *c, source *s, gpt_logs_rec *r, gpt_err *err)
{
	const gpt_logs_opts *o = c->o;
	/* llm.c evaluates at the top of its loop, before the step that the
	 * next step line shows (and once more after the last), so a val loss
	 * is the steps done before that line: 0 before the first of a fresh
	 * run, the step resumed from in a resumed one. Other trainers log an
	 * eval after the step it follows; one before any step line has no
	 * step that the log gives (FleetX's "[eval] epoch: E, batch: B"
	 * counts eval batches in B). */
	int wait = 0;
	if (r->step < 0 && r->kind == GPT_LOGS_EVAL) {
		wait = r->dialect == GPT_LOGS_LLMC;
		r->step = wait ? -1 : s->last_step;
	}
	if (r->kind == GPT_LOGS_STEP && r->step >= 0 && s->pending)
		settle(s, steps_before(r));
	if (r->kind == GPT_LOGS_STEP && r->step < 0 && r->batch >= 0) {
		/* PaddleFleetX counts the batches of each epoch from 0. A later
		 * epoch goes on from the last step logged; an earlier one is a
		 * run started again. */
		if (r->epoch != s->fx_epoch)
			s->fx_base = s->fx_epoch >= 0 && r->epoch > s->fx_epoch && s->last_step > 0
					     ? s->last_step : 0;
		s->fx_epoch = r->epoch;
		r->step = s->fx_base + r->batch + 1;
	}
	if (r->kind == GPT_LOGS_STEP) {
		/* PaddleNLP gives the time of the whole logging interval. */
		if (r->interval_s > 0 && !r->step_time.txt) {
			double steps = round(r->interval_s * r->step_rate);
			if (!(steps >= 1) && r->step > s->last_step)
				steps = (double)(r->step - (s->last_step > 0 ? s->last_step : 0));
			if (steps >= 1)
				r->step_time = (gpt_logs_num){r->interval_s / steps, NULL, 0};
		}
		if (r->step >= 0) {
			s->last_step = r->step;
			s->steps_done = steps_before(r) + 1;
		}
		if (!o->summary) {
			gpt_logs_write_row(&c->out, o->format, s->prefix.data, s->prefix.len, r, err);
			if (err->code)
				return err->code;
			if (c->out.len >= (1u << 16) && flush_out(c, err))
				return err->code;
		}
	}
	if (!(o->summary || o->plot))
		return 0;
	if (gpt_logs_series_add(&s->series, r, err))
		return err->code;
	s->pending += wait;
	return 0;
}

/* Reads what s has now: to its end, or in follow mode until no complete
 * line is left. *got counts the lines. */
static int drain(run_ctx *c, source *s, int64_t *got, gpt_err *err)
{
	const char *line;
	size_t len;
	gpt_logs_rec rec;
	for (;;) {
		gpt_logs_read_status st = gpt_logs_reader_next(s->r, &line, &len, err);
		if (st == GPT_LOGS_ERROR)
			return err->code;
		if (st == GPT_LOGS_AGAIN)
			return 0;
		if (st == GPT_LOGS_END) {
			s->done = 1;
			return 0;
		}
		(*got)++;
		c->counts->lines++;
		int known = gpt_logs_parse_line(c->parser, line, len, &rec);
		if (known || rec.kind == GPT_LOGS_BROKEN) {
			if (known)
				c->counts->records++;
			else
				c->counts->unparsed++;
			if (take(c, s, &rec, err))
				return err->code;
			continue;
		}
		size_t i = 0;
		while (i < len && (line[i] == ' ' || line[i] == '\t'))
			i++;
		if (i < len)
			c->counts->unknown++;
	}
}

static void account(run_ctx *c, source *s)
{
	c->counts->too_long += gpt_logs_reader_too_long(s->r);
	c->counts->bytes += gpt_logs_reader_bytes(s->r);
	gpt_logs_reader_close(s->r);
	s->r = NULL;
}

static int read_all(run_ctx *c, gpt_err *err)
{
	const gpt_logs_opts *o = c->o;
	for (int i = 0; i < c->nsrc; i++) {
		source *s = &c->src[i];
		if (gpt_logs_reader_open(&s->r, s->path, o->max_line, 0, err))
			return err->code;
		c->counts->logs++;
		int64_t got = 0;
		int rc = drain(c, s, &got, err);
		settle(s, s->steps_done); /* a val loss after the last step line */
		account(c, s);
		if (rc || flush_out(c, err))
			return err->code;
	}
	return 0;
}

static int follow_all(run_ctx *c, gpt_err *err)
{
	const gpt_logs_opts *o = c->o;
	for (int i = 0; i < c->nsrc; i++) {
		if (gpt_logs_reader_open(&c->src[i].r, c->src[i].path, o->max_line, 1, err))
			return err->code;
		c->counts->logs++;
	}
	double poll = o->poll_s > 0 ? o->poll_s : 0.2, scanned = gpt_now_s();
	for (;;) {
		int64_t got = 0;
		int open = 0;
		/* workers that start later, or a relaunch with more of them,
		 * add logs to a followed directory */
		if (c->ndirs && gpt_now_s() - scanned >= poll) {
			for (int k = 0; k < c->ndirs; k++)
				if (add_dir(c, c->dirs[k], 1, err))
					return err->code;
			scanned = gpt_now_s();
		}
		for (int i = 0; i < c->nsrc; i++) {
			source *s = &c->src[i];
			if (s->done)
				continue;
			if (drain(c, s, &got, err))
				return err->code;
			if (s->done)
				account(c, s);
			else
				open++;
		}
		if (flush_out(c, err))
			return err->code;
		if (fflush(o->out) != 0)
			return gpt_err_errno(err, GPT_EIO, errno, "%s", out_name(o));
		if (!open && !c->ndirs)
			return 0;
		if (!got) {
			struct timespec ts = {(time_t)poll, (long)((poll - (double)(time_t)poll) * 1e9)};
			nanosleep(&ts, NULL);
		}
	}
}

static int summaries(run_ctx *c, gpt_err *err)
{
	const gpt_logs_opts *o = c->o;
	gpt_logs_write_summary_header(&c->out, o->format, err);
	for (int i = 0; i < c->nsrc && !err->code; i++) {
		source *s = &c->src[i];
		gpt_logs_summary m;
		if (gpt_logs_summarize(&s->series, o->skip_steps, o->params, o->peak_tflops, &m, err))
			return err->code;
		gpt_logs_write_summary(&c->out, o->format, s->path, s->rank, &s->series, &m, err);
	}
	return err->code ? err->code : flush_out(c, err);
}

static int plot(run_ctx *c, gpt_err *err)
{
	const gpt_logs_series **ser = gpt_calloc((size_t)c->nsrc, sizeof *ser, "plot list", err);
	const char **names = gpt_calloc((size_t)c->nsrc, sizeof *names, "plot list", err);
	int rc = err->code;
	if (!rc) {
		for (int i = 0; i < c->nsrc; i++) {
			ser[i] = &c->src[i].series;
			names[i] = strcmp(c->src[i].path, "-") == 0 ? "(stdin)" : c->src[i].path;
		}
		rc = gpt_logs_plot_svg(c->o->plot, ser, names, c->nsrc, err);
	}
	free(ser);
	free(names);
	return rc;
}

int gpt_logs_run(const gpt_logs_opts *o, gpt_logs_counts *counts, gpt_err *err)
{
	gpt_logs_counts local;
	run_ctx c = {.o = o, .counts = counts ? counts : &local};
	memset(c.counts, 0, sizeof *c.counts);
	if (o->follow && (o->summary || o->plot))
		return gpt_err_set(err, GPT_EUSAGE, "--follow prints rows as they come; it cannot be "
						    "combined with --summary or --plot");
	if (!o->summary && (o->skip_steps >= 0 || o->params > 0 || o->peak_tflops > 0))
		return gpt_err_set(err, GPT_EUSAGE, "--skip-steps, --params, --model and --peak-tflops shape "
						    "the --summary figures; give --summary, or leave them out");
	/* mfu needs both; one alone would shape nothing */
	if ((o->params > 0) != (o->peak_tflops > 0))
		return gpt_err_set(err, GPT_EUSAGE, "%s gives the mfu column only together with %s; give both, "
						    "or leave it out",
				   o->params > 0 ? "--params (or --model)" : "--peak-tflops",
				   o->params > 0 ? "--peak-tflops" : "--params (or --model)");
	/* a --plot name the SVG cannot be renamed over, before any log is read */
	if (o->plot && gpt_out_replaceable(o->plot, err))
		return err->code;
	int rc = expand_inputs(&c, err);
	if (!rc && !(c.parser = gpt_logs_parser_new(err)))
		rc = err->code;
	if (!rc && !o->summary) {
		gpt_logs_write_row_header(&c.out, o->format, err);
		rc = err->code;
	}
	if (!rc)
		rc = o->follow ? follow_all(&c, err) : read_all(&c, err);
	if (!rc && o->summary)
		rc = summaries(&c, err);
	if (!rc && o->plot)
		rc = plot(&c, err);
	if (!rc && fflush(o->out) != 0)
		rc = gpt_err_errno(err, GPT_EIO, errno, "%s", out_name(o));
	for (int i = 0; i < c.nsrc; i++) {
		if (c.src[i].r)
			account(&c, &c.src[i]);
		free(c.src[i].path);
		gpt_logs_series_free(&c.src[i].series);
		gpt_buf_free(&c.src[i].prefix);
	}
	free(c.src);
	free(c.dirs);
	gpt_buf_free(&c.out);
	gpt_logs_parser_free(c.parser);
	return rc;
}
