/* gpt-logparse: training logs (gptkit, FleetX, PaddleNLP, Megatron-LM,
 * llm.c, MindFormers) to step rows, per-log summaries and an SVG plot. */
#include "core/core.h"
#include "config/config.h"
#include "logs/logs.h"
#include "model/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum {
	OPT_FORMAT = 1,
	OPT_SUMMARY,
	OPT_SKIP,
	OPT_PLOT,
	OPT_PARAMS,
	OPT_MODEL,
	OPT_PEAK,
	OPT_FOLLOW,
	OPT_HELP,
	OPT_VERSION,
};

static const gpt_opt options[] = {
	{"format", 0, "FMT", OPT_FORMAT, "output as tsv (default), csv or json (JSON Lines)"},
	{"summary", 's', NULL, OPT_SUMMARY, "one summary row per log instead of one row per step"},
	{"skip-steps", 0, "N", OPT_SKIP, "warm-up steps left out of --summary speeds (default 10%, rounded up)"},
	{"plot", 0, "FILE.svg", OPT_PLOT, "draw loss and tokens/s against step into an SVG file"},
	{"params", 0, "N", OPT_PARAMS, "model parameters for MFU (e.g. 1.3e9, 345M, 1.3B)"},
	{"model", 0, "CONFIG", OPT_MODEL, "take the parameter count for MFU from a gpt-train configuration"},
	{"peak-tflops", 0, "X", OPT_PEAK, "peak TFLOPS of one card for MFU (e.g. 989 for H100 bf16)"},
	{"follow", 'f', NULL, OPT_FOLLOW, "keep reading growing logs and print rows as they come"},
	{"help", 'h', NULL, OPT_HELP, "show this help and exit"},
	{"version", 'V', NULL, OPT_VERSION, "show the version and exit"},
	{NULL, 0, NULL, 0, NULL},
};

static void usage(FILE *fp)
{
	fprintf(fp, "usage: gpt-logparse [options] [LOG...]\n"
		    "Parse training logs (files, log directories with workerlog.*, .gz files, or stdin)\n"
		    "into one row per step, or with --summary one row per log.\n\n");
	gpt_opts_help(options, fp);
}

/* A count with an optional K/M/B(G)/T suffix. */
static int parse_count(const char *s, double *out)
{
	char *end;
	double v = strtod(s, &end);
	double mul = 1;
	if (end == s)
		return -1;
	switch (*end) {
	case 'k': case 'K': mul = 1e3; end++; break;
	case 'm': case 'M': mul = 1e6; end++; break;
	case 'b': case 'B': case 'g': case 'G': mul = 1e9; end++; break;
	case 't': case 'T': mul = 1e12; end++; break;
	}
	if (*end || !isfinite(v) || v <= 0)
		return -1;
	*out = v * mul;
	return 0;
}

/* The parameter count of the model a gpt-train configuration describes. */
static int model_params(const char *path, double *out, gpt_err *err)
{
	gpt_config cfg;
	int rc = gpt_config_load(&cfg, path, NULL, 0, err);
	if (!rc) {
		gpt_model_shape s;
		gpt_model_shape_from_config(&cfg, &s);
		*out = (double)gpt_param_count(&s);
	}
	gpt_config_free(&cfg);
	return rc ? gpt_err_prefix(err, "--model") : 0;
}

int main(int argc, char **argv)
{
	const char *prog = "gpt-logparse";
	gpt_err err = {0};
	gpt_logs_opts o = {.skip_steps = -1, .out = stdout};
	gpt_opts op;
	gpt_cmd_file_size_limit_as_error(); /* past ulimit -f: EFBIG, the file named, no temporary left */
	gpt_opts_init(&op, options, argc, argv);
	int id;
	int count_from = 0; /* OPT_PARAMS or OPT_MODEL, whichever came */
	while ((id = gpt_opts_next(&op, &err)) > 0) {
		const char *a = op.arg;
		if (id == OPT_PARAMS || id == OPT_MODEL) {
			if (count_from && count_from != id) {
				gpt_err_set(&err, GPT_EUSAGE,
					    "--params and --model both give the parameter count; give one of them");
				return gpt_cmd_fail(prog, &err);
			}
			count_from = id;
		}
		switch (id) {
		case OPT_FORMAT:
			if (gpt_logs_format_parse(a, &o.format, &err))
				return gpt_cmd_fail(prog, &err);
			break;
		case OPT_SUMMARY: o.summary = 1; break;
		case OPT_SKIP:
			if (gpt_parse_i64(a, &o.skip_steps) || o.skip_steps < 0) {
				gpt_err_set(&err, GPT_EUSAGE, "--skip-steps: expected a count >= 0, not '%s'", a);
				return gpt_cmd_fail(prog, &err);
			}
			break;
		case OPT_PLOT: o.plot = a; break;
		case OPT_PARAMS:
			if (parse_count(a, &o.params)) {
				gpt_err_set(&err, GPT_EUSAGE,
					    "--params: expected a positive parameter count such as 1.3e9 or 345M, not '%s'", a);
				return gpt_cmd_fail(prog, &err);
			}
			break;
		case OPT_MODEL:
			if (model_params(a, &o.params, &err))
				return gpt_cmd_fail(prog, &err);
			break;
		case OPT_PEAK:
			if (gpt_parse_f64(a, &o.peak_tflops) || !(o.peak_tflops > 0) || !isfinite(o.peak_tflops)) {
				gpt_err_set(&err, GPT_EUSAGE, "--peak-tflops: expected a positive number, not '%s'", a);
				return gpt_cmd_fail(prog, &err);
			}
			break;
		case OPT_FOLLOW: o.follow = 1; break;
		case OPT_HELP: usage(stdout); return gpt_cmd_stdout_done(prog);
		case OPT_VERSION: gpt_cmd_version(prog, stdout); return gpt_cmd_stdout_done(prog);
		}
	}
	if (id < 0)
		return gpt_cmd_fail(prog, &err);
	o.inputs = (const char *const *)argv + op.index;
	o.ninputs = argc - op.index;

	gpt_logs_counts c;
	int rc = gpt_logs_run(&o, &c, &err);
	/* Lines too long to read are lines of the log as well: every count
	 * below takes them in. */
	int64_t skipped = c.unknown + c.too_long, lines = c.lines + c.too_long;
	const char *other = "no step, eval or checkpoint record (other output or an unknown format)";
	if (c.unknown && c.too_long)
		fprintf(stderr, "%s: %lld lines skipped: %lld with %s, %lld longer than 1 MiB\n", prog, (long long)skipped,
			(long long)c.unknown, other, (long long)c.too_long);
	else if (skipped)
		fprintf(stderr, "%s: %lld line%s skipped: %s\n", prog, (long long)skipped, skipped == 1 ? "" : "s",
			c.unknown ? other : "longer than 1 MiB");
	if (c.unparsed)
		fprintf(stderr, "%s: %lld line%s skipped: a record that other output ran into (several "
				"processes writing one log?)\n", prog,
			(long long)c.unparsed, c.unparsed == 1 ? "" : "s");
	if (!rc && c.records == 0)
		fprintf(stderr, "%s: warning: no training log line found in %lld line%s of %lld log%s\n",
			prog, (long long)lines, lines == 1 ? "" : "s", (long long)c.logs, c.logs == 1 ? "" : "s");
	if (rc)
		return gpt_cmd_fail(prog, &err);
	return 0;
}
