/* gpt-ckpt-merge: inspect, verify, consolidate, reshard and convert checkpoints. */
#include "ckpt/ckpt.h"
#include "core/core.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

enum {
	OPT_INFO = 256,
	OPT_VERIFY,
	OPT_CONSOLIDATE,
	OPT_WEIGHTS_ONLY,
	OPT_DTYPE,
	OPT_TO_HF,
	OPT_FROM_HF,
	OPT_TO_LAYOUT,
	OPT_MICRO,
	OPT_HELP = 'h',
	OPT_VERSION = 'V',
};

static const gpt_opt options[] = {
	{"info", 0, NULL, OPT_INFO, "print the step, the state and every tensor with dtype and shape"},
	{"verify", 0, NULL, OPT_VERIFY,
	 "check every file's size and checksum and that the pieces tile every tensor"},
	{"consolidate", 0, NULL, OPT_CONSOLIDATE, "write everything into one safetensors file OUT"},
	{"weights-only", 0, NULL, OPT_WEIGHTS_ONLY, "with --consolidate: leave the optimizer state out"},
	{"dtype", 0, "DTYPE", OPT_DTYPE, "with --consolidate and --to-hf: weights as fp32 (default), bf16 or fp16"},
	{"to-hf", 0, NULL, OPT_TO_HF, "write a Hugging Face GPT-2 directory OUT (as gpt-export --format hf)"},
	{"from-hf", 0, NULL, OPT_FROM_HF,
	 "convert the Hugging Face GPT-2 directory IN into a checkpoint in the output directory OUT"},
	{"to-layout", 0, "SPEC", OPT_TO_LAYOUT,
	 "write a copy into the output directory OUT cut for the layout SPEC, e.g. mp=2,pp=4,vpp=2,dp=1,sharding=2,stage=2"},
	{"micro-batch-size", 0, "N", OPT_MICRO,
	 "with --to-layout: the copy's config trains micro-batches of N samples (default: the checkpoint's)"},
	{"help", 'h', NULL, OPT_HELP, "show this help and exit"},
	{"version", 'V', NULL, OPT_VERSION, "show the version and exit"},
	{NULL, 0, NULL, 0, NULL},
};

static void usage(FILE *fp)
{
	fprintf(fp, "usage: gpt-ckpt-merge --info|--verify IN\n"
		    "       gpt-ckpt-merge --consolidate [--weights-only] [--dtype fp32|bf16|fp16] IN OUT\n"
		    "       gpt-ckpt-merge --to-hf [--dtype fp32|bf16|fp16] IN OUT\n"
		    "       gpt-ckpt-merge --to-layout SPEC [--micro-batch-size N] IN OUT\n"
		    "       gpt-ckpt-merge --from-hf HF_DIR OUT\n\n"
		    "IN is a checkpoint (a step directory, or an output directory with `latest`); every\n"
		    "file's size and checksum are verified whenever it is opened. --to-layout and\n"
		    "--from-hf write OUT/step_NNNNNNNN/ and OUT/latest, as a training run would,\n"
		    "making OUT when missing; when they fail, they leave nothing they made. They\n"
		    "refuse an OUT that gpt-train (or another gpt-ckpt-merge) is writing into.\n\nOptions:\n");
	gpt_opts_help(options, fp);
}

int main(int argc, char **argv)
{
	const char *prog = "gpt-ckpt-merge";
	gpt_err err = {0};
	gpt_opts o;
	int id, verb = 0, weights_only = 0, dtype_given = 0;
	int64_t micro = 0;
	gpt_dtype dtype = GPT_DTYPE_F32;
	gpt_ckpt_layout layout;
	gpt_cmd_remove_temps_on_signals(); /* an interrupted run leaves no temporaries */
	gpt_cmd_file_size_limit_as_error(); /* past ulimit -f: EFBIG, the file named, no temporary left */
	gpt_opts_init(&o, options, argc, argv);
	while ((id = gpt_opts_next(&o, &err)) > 0) {
		switch (id) {
		case OPT_WEIGHTS_ONLY: weights_only = 1; break;
		case OPT_MICRO:
			if (gpt_parse_i64(o.arg, &micro) || micro < 1)
				id = gpt_err_set(&err, GPT_EUSAGE, "--micro-batch-size %s: expected a number of samples >= 1", o.arg) ? -1 : -1;
			break;
		case OPT_DTYPE:
			dtype_given = 1;
			if (gpt_dtype_parse(o.arg, &dtype) || (dtype != GPT_DTYPE_F32 && dtype != GPT_DTYPE_BF16 &&
							     dtype != GPT_DTYPE_F16))
				id = gpt_err_set(&err, GPT_EUSAGE, "--dtype %s: expected fp32, bf16 or fp16", o.arg) ? -1 : -1;
			break;
		case OPT_TO_LAYOUT:
			if (gpt_ckpt_layout_parse(o.arg, &layout, &err))
				id = -1;
			else if (verb && verb != id)
				id = gpt_err_set(&err, GPT_EUSAGE, "give one of --info, --verify, --consolidate, --to-hf, --from-hf, --to-layout") ? -1 : -1;
			else
				verb = id;
			break;
		case OPT_HELP: usage(stdout); return gpt_cmd_stdout_done(prog);
		case OPT_VERSION: gpt_cmd_version(prog, stdout); return gpt_cmd_stdout_done(prog);
		default:
			if (verb && verb != id)
				id = gpt_err_set(&err, GPT_EUSAGE, "give one of --info, --verify, --consolidate, --to-hf, --from-hf, --to-layout") ? -1 : -1;
			else
				verb = id;
		}
		if (id < 0)
			break;
	}
	int want = verb == OPT_INFO || verb == OPT_VERIFY ? 1 : 2;
	/* options of one verb are refused with another, not ignored */
	if (id == 0 && dtype_given && verb && verb != OPT_CONSOLIDATE && verb != OPT_TO_HF)
		id = gpt_err_set(&err, GPT_EUSAGE, "--dtype applies to --consolidate and --to-hf only; leave it out") ? -1 : -1;
	if (id == 0 && weights_only && verb && verb != OPT_CONSOLIDATE)
		id = gpt_err_set(&err, GPT_EUSAGE, "--weights-only applies to --consolidate only; leave it out") ? -1 : -1;
	if (id == 0 && micro && verb && verb != OPT_TO_LAYOUT)
		id = gpt_err_set(&err, GPT_EUSAGE, "--micro-batch-size applies to --to-layout only; leave it out") ? -1 : -1;
	if (id == 0 && !verb)
		id = gpt_err_set(&err, GPT_EUSAGE, "give one of --info, --verify, --consolidate, --to-hf, --from-hf, --to-layout; see --help") ? -1 : -1;
	else if (id == 0 && argc - o.index != want)
		id = gpt_err_set(&err, GPT_EUSAGE, "expected %s, found %d operands; see --help",
				 want == 1 ? "IN" : "IN and OUT", argc - o.index) ? -1 : -1;
	if (id < 0)
		return gpt_cmd_fail(prog, &err);
	const char *in = argv[o.index], *out = want == 2 ? argv[o.index + 1] : NULL;
	if (verb == OPT_TO_HF) {
		gpt_export_opts eo = {GPT_EXPORT_HF, dtype, out, NULL, argv[0], NULL};
		char path[PATH_MAX];
		if (gpt_export(in, &eo, path, sizeof path, &err))
			return gpt_cmd_fail(prog, &err);
		fprintf(stderr, "%s: wrote %s\n", prog, path);
		return 0;
	}
	char path[PATH_MAX];
	int64_t bytes = 0;
	if (verb == OPT_FROM_HF) {
		if (gpt_ckpt_from_hf(in, out, stderr, path, sizeof path, &bytes, &err))
			return gpt_cmd_fail(prog, &err);
		fprintf(stderr, "%s: wrote %s (%lld bytes)\n", prog, path, (long long)bytes);
		return 0;
	}
	gpt_ckpt *ck;
	if (gpt_ckpt_open(&ck, in, &err))
		return gpt_cmd_fail(prog, &err);
	int rc = 0;
	if (verb == OPT_INFO) {
		gpt_buf b = GPT_BUF_INIT;
		rc = gpt_ckpt_describe(ck, &b, &err);
		if (!rc && fputs(b.data, stdout) == EOF)
			rc = gpt_err_errno(&err, GPT_EIO, errno, "standard output");
		gpt_buf_free(&b);
	} else if (verb == OPT_VERIFY) {
		if (printf("%s: ok (step %lld, %d tensors)\n", gpt_ckpt_path(ck), (long long)gpt_ckpt_step(ck),
			   gpt_ckpt_tensor_count(ck)) < 0)
			rc = gpt_err_errno(&err, GPT_EIO, errno, "standard output");
	} else if (verb == OPT_TO_LAYOUT) {
		layout.micro = micro;
		rc = gpt_ckpt_reshard(ck, &layout, out, stderr, path, sizeof path, &bytes, &err);
		if (!rc)
			fprintf(stderr, "%s: wrote %s (%lld bytes)\n", prog, path, (long long)bytes);
	} else {
		rc = gpt_ckpt_consolidate(ck, out, dtype, weights_only, &bytes, &err);
		if (!rc)
			fprintf(stderr, "%s: wrote %s (%lld bytes)\n", prog, out, (long long)bytes);
	}
	gpt_ckpt_close(ck);
	if (rc)
		return gpt_cmd_fail(prog, &err);
	/* what --info and --verify printed must have gone out */
	return verb == OPT_INFO || verb == OPT_VERIFY ? gpt_cmd_stdout_done(prog) : 0;
}
