/* Fuzzes gpt-logparse: every line through the parser (all dialects: gptkit
 * and FleetX, PaddleNLP, Megatron-LM, llm.c), the recognised records into a
 * series and its summary, and the whole input as a log file through
 * gpt_logs_run in each output format, with the summary and with a plot.
 *
 * Checked: the numbers a record quotes (txt, len) and its checkpoint path
 * lie inside the line; a series keeps what it is given; the run reads
 * every line. */
#include "fuzz.h"
#include "logs/logs.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static gpt_logs_parser *parser;
static char log_path[PATH_MAX], svg_path[PATH_MAX];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_init(*argc > 0 ? (*argv)[0] : NULL);
	gpt_err err = {0};
	parser = gpt_logs_parser_new(&err);
	FUZZ_CHECK(parser != NULL, "%s", err.msg);
	fuzz_path(log_path, sizeof log_path, "workerlog.3");
	fuzz_path(svg_path, sizeof svg_path, "plot.svg");
	return 0;
}

static void check_num(const gpt_logs_num *n, const char *line, size_t len, const char *what)
{
	if (!n->txt)
		return;
	FUZZ_CHECK(n->txt >= line && n->len >= 0 && n->txt + n->len <= line + len,
		   "%s: its text lies outside the line", what);
}

static void parse_lines(const uint8_t *data, size_t size, gpt_logs_series *s)
{
	gpt_err err = {0};
	const uint8_t *p = data, *end = data + size;
	while (p < end) {
		const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
		/* an exact-size copy: a read past the line is an ASan report */
		char *line = fuzz_strndup(p, len);
		gpt_logs_rec rec;
		int r = gpt_logs_parse_line(parser, line, len, &rec);
		FUZZ_CHECK(r == 0 || r == 1, "parse_line returned %d", r);
		if (r == 1) {
			FUZZ_CHECK(rec.kind >= GPT_LOGS_STEP && rec.kind <= GPT_LOGS_OVERFLOW, "kind %d", rec.kind);
			FUZZ_CHECK(gpt_logs_dialect_name(rec.dialect) != NULL, "dialect %d", rec.dialect);
			check_num(&rec.loss, line, len, "loss");
			check_num(&rec.lr, line, len, "lr");
			check_num(&rec.step_time, line, len, "step_time");
			check_num(&rec.tok_card, line, len, "tok_card");
			check_num(&rec.tok_total, line, len, "tok_total");
			check_num(&rec.ppl, line, len, "ppl");
			check_num(&rec.cost, line, len, "cost");
			FUZZ_CHECK(!rec.path || (rec.path >= line && rec.path_len >= 0 &&
						 rec.path + rec.path_len <= line + len),
				   "the checkpoint path lies outside the line");
			int64_t before = s->n;
			FUZZ_CHECK(gpt_logs_series_add(s, &rec, &err) == 0, "series_add: %s", err.msg);
			/* kept last; a step that goes back first drops those from it on */
			FUZZ_CHECK(rec.kind != GPT_LOGS_STEP ||
					   (s->n >= 1 && s->n <= before + 1 && s->step[s->n - 1] == rec.step),
				   "a step was not kept");
		} else {
			FUZZ_CHECK(rec.kind == GPT_LOGS_NONE || rec.kind == GPT_LOGS_BROKEN,
				   "an unknown line has kind %d", rec.kind);
		}
		free(line);
		p = nl ? nl + 1 : end;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	gpt_err err = {0};
	gpt_logs_series s;
	gpt_logs_series_init(&s);
	parse_lines(data, size, &s);
	gpt_logs_summary sum;
	int64_t skip = size ? (int64_t)data[0] % 4 - 1 : -1;
	int rc = gpt_logs_summarize(&s, skip, 1.24e8, 312, &sum, &err);
	FUZZ_CHECK(rc == 0 || err.msg[0], "summarize: %d without a message", rc);
	FUZZ_CHECK(rc || sum.steps == s.n, "summary of %lld steps, the series has %lld", (long long)sum.steps,
		   (long long)s.n);
	if (size && data[0] & 4) {
		const gpt_logs_series *const ss[1] = {&s};
		const char *const names[1] = {"fuzz"};
		rc = gpt_logs_plot_svg(svg_path, ss, names, 1, &err);
		FUZZ_CHECK(rc == 0 || err.msg[0], "plot: %d without a message", rc);
	}
	gpt_logs_series_free(&s);

	/* the whole program over the input as a log file */
	fuzz_write("workerlog.3", data, size);
	FILE *null = fopen("/dev/null", "w");
	FUZZ_CHECK(null != NULL, "/dev/null");
	const char *inputs[1] = {log_path};
	gpt_logs_opts o = {0};
	o.format = size ? (gpt_logs_format)(data[size - 1] % 3) : GPT_LOGS_TSV;
	o.summary = size > 1 && data[1] & 1;
	o.skip_steps = -1;
	o.params = 1.24e8;
	o.peak_tflops = 312;
	o.max_line = 4096;
	o.inputs = inputs;
	o.ninputs = 1;
	o.out = null;
	gpt_logs_counts c;
	rc = gpt_logs_run(&o, &c, &err);
	FUZZ_CHECK(rc == 0 || err.msg[0], "logs_run: %d without a message", rc);
	FUZZ_CHECK(c.records + c.unknown + c.unparsed <= c.lines, "%lld records, %lld unknown, %lld unparsed of %lld lines",
		   (long long)c.records, (long long)c.unknown, (long long)c.unparsed, (long long)c.lines);
	fclose(null);
	return 0;
}
