/* gpt-export: a training checkpoint as an inference bundle, a GGUF file for
 * llama.cpp, or a Hugging Face GPT-2 directory. */
#include "ckpt/ckpt.h"
#include "config/config.h"
#include "core/core.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
	OPT_CONFIG = 'c',
	OPT_DTYPE = 256,
	OPT_FORMAT,
	OPT_OUT = 'o',
	OPT_VOCAB,
	OPT_HELP = 'h',
	OPT_VERSION = 'V',
};

static const gpt_opt options[] = {
	{"config", 'c', "FILE", OPT_CONFIG,
	 "a FleetX configuration (tools/export.py -c): its Engine.save_load.ckpt_dir is the checkpoint, "
	 "its output_dir (default ./output) the directory to write into"},
	{"dtype", 0, "DTYPE", OPT_DTYPE,
	 "weights as fp32 (default), bf16, fp16 or int8 (bundle: per-row scales, the learned ones of a QAT checkpoint; gguf: q8_0)"},
	{"format", 0, "FORMAT", OPT_FORMAT, "bundle (default), gguf or hf"},
	{"output", 'o', "OUT", OPT_OUT,
	 "output name (default model.tar.zst, model.gguf or model-hf; a bundle ends in .tar.zst, "
	 ".tzst, .tar.gz, .tgz or .tar); -o Engine.save_load.ckpt_dir=DIR and "
	 "-o Engine.save_load.output_dir=DIR (FleetX's) name the checkpoint and the directory to write into"},
	{"vocab", 0, "DIR", OPT_VOCAB,
	 "GPT-2 vocabulary (encoder.json + vocab.bpe) to ship (default: ../share/gpt2 or ../share/gptkit/gpt2 beside the program)"},
	{"help", 'h', NULL, OPT_HELP, "show this help and exit"},
	{"version", 'V', NULL, OPT_VERSION, "show the version and exit"},
	{NULL, 0, NULL, 0, NULL},
};

/* -o Section.key=VALUE, a configuration key (FleetX's -o), not a file name */
static int is_key_assignment(const char *arg)
{
	const char *eq = strchr(arg, '=');
	char name[128];
	if (!eq || (size_t)(eq - arg) >= sizeof name)
		return 0;
	memcpy(name, arg, (size_t)(eq - arg));
	name[eq - arg] = 0;
	return gpt_config_key_find(name) >= 0;
}

static void usage(FILE *fp)
{
	fprintf(fp, "usage: gpt-export [--dtype fp32|bf16|fp16|int8] [--format bundle|gguf|hf] [-o OUT] "
		    "CHECKPOINT\n"
		    "       gpt-export [-c CONFIG] -o Engine.save_load.ckpt_dir=CHECKPOINT "
		    "[-o Engine.save_load.output_dir=DIR] [OPTION]...\n\n"
		    "Write the weights of a checkpoint (a step directory, or an output directory with\n"
		    "`latest`) for inference: a bundle that gpt-infer reads in place, a GGUF file for\n"
		    "llama.cpp, or a Hugging Face GPT-2 directory.\n\nOptions:\n");
	gpt_opts_help(options, fp);
}

int main(int argc, char **argv)
{
	const char *prog = "gpt-export";
	gpt_err err = {0};
	gpt_opts o;
	gpt_export_opts eo = {GPT_EXPORT_BUNDLE, GPT_DTYPE_F32, NULL, NULL, argv[0], NULL};
	const char *config = NULL;
	const char **keys = calloc((size_t)argc, sizeof *keys); /* the -o KEY=VALUE, FleetX's */
	int n_keys = 0, id;
	if (!keys) {
		gpt_err_set(&err, GPT_EINTERNAL, "out of memory");
		return gpt_cmd_fail(prog, &err);
	}
	gpt_cmd_remove_temps_on_signals(); /* an interrupted run leaves no temporaries */
	gpt_cmd_file_size_limit_as_error(); /* past ulimit -f: EFBIG, the file named, no temporary left */
	gpt_opts_init(&o, options, argc, argv);
	while ((id = gpt_opts_next(&o, &err)) > 0) {
		switch (id) {
		case OPT_DTYPE:
			if (gpt_dtype_parse(o.arg, &eo.dtype) ||
			    (eo.dtype != GPT_DTYPE_F32 && eo.dtype != GPT_DTYPE_BF16 &&
			     eo.dtype != GPT_DTYPE_F16 && eo.dtype != GPT_DTYPE_I8))
				id = gpt_err_set(&err, GPT_EUSAGE,
						 "--dtype %s: expected fp32, bf16, fp16 or int8", o.arg) ? -1 : -1;
			break;
		case OPT_FORMAT:
			if (gpt_export_format_parse(o.arg, &eo.format))
				id = gpt_err_set(&err, GPT_EUSAGE, "--format %s: expected bundle, gguf or hf",
						 o.arg) ? -1 : -1;
			break;
		case OPT_CONFIG: config = o.arg; break;
		case OPT_OUT:
			if (is_key_assignment(o.arg))
				keys[n_keys++] = o.arg;
			else
				eo.out = o.arg;
			break;
		case OPT_VOCAB: eo.vocab = o.arg; break;
		case OPT_HELP: free(keys); usage(stdout); return gpt_cmd_stdout_done(prog);
		case OPT_VERSION: free(keys); gpt_cmd_version(prog, stdout); return gpt_cmd_stdout_done(prog);
		}
		if (id < 0)
			break;
	}
	/* what the command line names wins over what the -c file does; the
	 * same thing named twice on it is an error */
	char ckpt[PATH_MAX] = "", dir[PATH_MAX] = "", out[PATH_MAX];
	int by_o = 0;
	if (id == 0 && (config || n_keys) &&
	    gpt_export_fleetx_names(config, keys, n_keys, ckpt, dir, &by_o, &err))
		id = -1;
	if (id == 0 && (by_o & GPT_EXPORT_CKPT_BY_O) && o.index != argc)
		id = gpt_err_set(&err, GPT_EUSAGE,
				 "%s names the checkpoint, as -o Engine.save_load.ckpt_dir=%s does; give one of them",
				 argv[o.index], ckpt) ? -1 : -1;
	else if (id == 0 && o.index == argc - 1)
		snprintf(ckpt, sizeof ckpt, "%s", argv[o.index]);
	else if (id == 0 && (o.index != argc || !*ckpt))
		id = gpt_err_set(&err, GPT_EUSAGE, "expected one CHECKPOINT (or -o Engine.save_load.ckpt_dir=DIR), "
				 "found %d operands; see gpt-export --help", argc - o.index) ? -1 : -1;
	if (id == 0 && (by_o & GPT_EXPORT_DIR_BY_O) && eo.out)
		id = gpt_err_set(&err, GPT_EUSAGE,
				 "-o %s names the output, and -o Engine.save_load.output_dir=%s the directory for it; "
				 "give one of them", eo.out, dir) ? -1 : -1;
	free(keys);
	if (id < 0)
		return gpt_cmd_fail(prog, &err);
	eo.out_dir = *dir && !eo.out ? dir : NULL;
	if (gpt_export(ckpt, &eo, out, sizeof out, &err))
		return gpt_cmd_fail(prog, &err);
	fprintf(stderr, "%s: wrote %s\n", prog, out);
	return 0;
}
