/* gpt-infer: generate text from a checkpoint, an export bundle or a Hugging
 * Face GPT-2 directory, or measure perplexity. */
#include "core/core.h"
#include "infer/infer.h"

#include <stdlib.h>
#include <string.h>

enum {
	OPT_MODEL = 'm',
	OPT_CONFIG = 'c',
	OPT_OVERRIDE = 'o',
	OPT_HELP = 'h',
	OPT_VERSION = 'V',
	OPT_JSONL = 256,
	OPT_STOP,
	OPT_PPL,
	OPT_DEVICE,
	OPT_TRUNCATE,
	OPT_THREADS,
	OPT_BATCH,
	OPT_STATS,
	OPT_DTYPE,
};

static const gpt_opt options[] = {
	{"model", 'm', "MODEL", OPT_MODEL,
	 "a bundle (.tar.zst/.tar.gz), a bundle directory, a checkpoint or a Hugging Face GPT-2 directory"},
	{"config", 'c', "FILE", OPT_CONFIG, "a YAML configuration whose Generation section applies"},
	{"override", 'o', "KEY=VALUE", OPT_OVERRIDE,
	 "set one Generation key, e.g. -o Generation.top_k=1 (repeatable); -o Inference.model_dir=DIR "
	 "or -o Engine.save_load.ckpt_dir=DIR (FleetX's) names the model instead of -m"},
	{"jsonl", 0, NULL, OPT_JSONL, "write one JSON object a result instead of plain text"},
	{"stop", 0, "STRING", OPT_STOP, "end a generation where STRING appears (left out of the output)"},
	{"ppl", 0, "FILE|PREFIX", OPT_PPL,
	 "print the perplexity of a text file or an indexed dataset instead of generating"},
	{"truncate", 0, NULL, OPT_TRUNCATE,
	 "keep the end of a prompt that leaves no room for max_dec_len tokens"},
	{"device", 0, "DEV", OPT_DEVICE, "cpu (default) or cuda (each generation step a CUDA graph; GPT_CUDA_GRAPHS=0: not)"},
	{"threads", 't', "N", OPT_THREADS, "CPU threads (default: OMP_NUM_THREADS or all cores)"},
	{"batch", 'b', "N", OPT_BATCH, "sequences decoded together (default 8)"},
	{"dtype", 0, "DTYPE", OPT_DTYPE,
	 "weight matrices in memory: fp32, bf16, fp16 or int8 (default: as the model stores them)"},
	{"stats", 0, NULL, OPT_STATS, "print prompt and generation tokens/s, the prompt passes after the first apart (and on cuda the steps run as CUDA graphs), to standard error"},
	{"help", 'h', NULL, OPT_HELP, "show this help and exit"},
	{"version", 'V', NULL, OPT_VERSION, "show the version and exit"},
	{NULL, 0, NULL, 0, NULL},
};

static void usage(FILE *fp)
{
	fprintf(fp, "usage: gpt-infer -m MODEL [-c CONFIG] [-o Generation.KEY=VALUE]... [PROMPT...]\n"
		    "       gpt-infer -m MODEL --ppl FILE|PREFIX\n\n"
		    "Generate text with a KV cache: the prompts given as arguments, else one a line\n"
		    "from standard input; each result is printed as prompt + generation. Sampling,\n"
		    "greedy and beam search as the Generation section says (see gpt-config(5)).\n\n"
		    "Options:\n");
	gpt_opts_help(options, fp);
}

static int count(const char *opt, const char *s, int64_t max, int64_t *out, gpt_err *err)
{
	if (gpt_parse_i64(s, out) || *out < 1 || *out > max)
		return gpt_err_set(err, GPT_EUSAGE, "--%s: expected a number from 1 to %lld, found '%s'",
				   opt, (long long)max, s);
	return 0;
}

int main(int argc, char **argv)
{
	const char *prog = "gpt-infer";
	gpt_err err = {0};
	gpt_opts o;
	gpt_infer_args a = {0};
	char **ov = calloc((size_t)argc + 1, sizeof *ov);
	int id;
	int64_t v;
	if (!ov)
		return gpt_cmd_fail(prog, &(gpt_err){GPT_EINTERNAL, "out of memory"});
	a.exe = argv[0];
	a.err_out = stderr;
	a.overrides = ov;
	gpt_cmd_file_size_limit_as_error(); /* past ulimit -f: EFBIG, the file named, no temporary left */
	gpt_opts_init(&o, options, argc, argv);
	while ((id = gpt_opts_next(&o, &err)) > 0) {
		switch (id) {
		case OPT_MODEL: a.model = o.arg; break;
		case OPT_CONFIG: a.config = o.arg; break;
		case OPT_OVERRIDE: ov[a.n_overrides++] = (char *)o.arg; break;
		case OPT_JSONL: a.jsonl = 1; break;
		case OPT_STOP: a.stop = o.arg; break;
		case OPT_PPL: a.ppl = o.arg; break;
		case OPT_TRUNCATE: a.truncate = 1; break;
		case OPT_DEVICE: a.device = o.arg; break;
		case OPT_THREADS:
			if (count("threads", o.arg, 1024, &v, &err))
				id = -1;
			a.threads = (int)v;
			break;
		case OPT_BATCH:
			if (count("batch", o.arg, 1 << 16, &v, &err))
				id = -1;
			a.batch = v;
			break;
		case OPT_STATS: a.stats = 1; break;
		case OPT_DTYPE:
			a.dtype_set = 1;
			if (gpt_dtype_parse(o.arg, &a.dtype) ||
			    (a.dtype != GPT_DTYPE_F32 && a.dtype != GPT_DTYPE_BF16 &&
			     a.dtype != GPT_DTYPE_F16 && a.dtype != GPT_DTYPE_I8)) {
				gpt_err_set(&err, GPT_EUSAGE, "--dtype %s: expected fp32, bf16, fp16 or int8", o.arg);
				id = -1;
			}
			break;
		case OPT_HELP: usage(stdout); free(ov); return gpt_cmd_stdout_done(prog);
		case OPT_VERSION: gpt_cmd_version(prog, stdout); free(ov); return gpt_cmd_stdout_done(prog);
		}
		if (id < 0)
			break;
	}
	if (id == 0 && a.ppl && o.index < argc)
		gpt_err_set(&err, GPT_EUSAGE, "--ppl takes no prompts"), id = -1;
	/* options of generation that --ppl would not use */
	const char *gen_only = a.stop ? "--stop" : a.truncate ? "--truncate" : a.batch ? "--batch" : NULL;
	if (id == 0 && a.ppl && gen_only)
		gpt_err_set(&err, GPT_EUSAGE, "%s applies to generation, not to --ppl; leave it out",
			    gen_only), id = -1;
	if (id < 0) {
		free(ov);
		return gpt_cmd_fail(prog, &err);
	}
	if (o.index < argc) {
		a.prompts = argv + o.index;
		a.n_prompts = argc - o.index;
	}
	int rc = gpt_infer_run(&a, stdin, stdout, &err);
	free(ov);
	return rc ? gpt_cmd_fail(prog, &err) : 0;
}
