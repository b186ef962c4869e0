/* gpt-preprocess: tokenize text into a Megatron indexed dataset; --info and
 * --decode look at one. */
#include "core/core.h"
#include "data/data.h"
#include "text/text.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *prog = "gpt-preprocess";

enum {
	O_TOK = 256, O_VOCAB, O_KEY, O_FORMAT, O_SKIP_BAD, O_EOD, O_NO_EOD, O_JOBS, O_OUT,
	O_INFO, O_DECODE, O_DOC, O_HELP, O_VERSION, O_SKIP_BIN,
};

static const gpt_opt options[] = {
	{"output", 'o', "PREFIX", O_OUT, "write PREFIX.bin and PREFIX.idx"},
	{"tokenizer", 't', "NAME", O_TOK, "gpt2 (default) or bytes"},
	{"vocab", 0, "DIR", O_VOCAB, "GPT-2 vocabulary directory (encoder.json + vocab.bpe)"},
	{"json-key", 0, "KEY", O_KEY, "JSON key holding the text (repeat: the first present wins; default text)"},
	{"format", 0, "FMT", O_FORMAT, "auto (default, by file name), text, lines or jsonl"},
	{"skip-bad", 0, NULL, O_SKIP_BAD, "skip bad JSON records (counted) instead of failing"},
	{"skip-binary", 0, NULL, O_SKIP_BIN, "skip files with a NUL byte in their first 8000 bytes"},
	{"append-eod", 0, NULL, O_EOD, "end each document with <|endoftext|> (default)"},
	{"no-append-eod", 0, NULL, O_NO_EOD, "do not end documents with <|endoftext|>"},
	{"jobs", 'j', "N", O_JOBS, "tokenize on N threads (default 1; output is the same for any N)"},
	{"info", 0, "PREFIX", O_INFO, "print documents, tokens, dtype and size of a dataset"},
	{"decode", 0, "PREFIX", O_DECODE, "print the documents of a dataset as text"},
	{"doc", 0, "N", O_DOC, "with --decode: only document N, without its end-of-text"},
	{"help", 'h', NULL, O_HELP, "show this help"},
	{"version", 'V', NULL, O_VERSION, "show the version"},
	{NULL, 0, NULL, 0, NULL},
};

static void usage(FILE *fp)
{
	fprintf(fp, "usage: %s [options] -o PREFIX INPUT...\n"
		    "       %s --info PREFIX\n"
		    "       %s --decode PREFIX [--doc N] [-t bytes]\n\n"
		    "Tokenize text, JSON lines and archives of them (tar, zip, gz, xz, zst, bz2; '-' is stdin)\n"
		    "into a Megatron-LM indexed dataset.\n\nOptions:\n",
		prog, prog, prog);
	gpt_opts_help(options, fp);
}

static int open_tokenizer(const char *name, const char *vocab, gpt_tokenizer **tok, gpt_err *err)
{
	if (strcmp(name, "bytes") == 0)
		return gpt_tokenizer_open_bytes(tok, err);
	if (strcmp(name, "gpt2") != 0)
		return gpt_err_set(err, GPT_EUSAGE, "-t %s: unknown tokenizer; expected gpt2 or bytes", name);
	char dir[PATH_MAX];
	int rc = vocab ? 0 : gpt_vocab_find(NULL, NULL, dir, sizeof dir, err);
	if (!rc)
		rc = gpt_tokenizer_open_bpe(tok, vocab ? vocab : dir, err);
	if (rc == GPT_ENOINPUT) { /* no vocabulary files: this program can do without */
		size_t n = strlen(err->msg);
		snprintf(err->msg + n, sizeof err->msg - n, ", or use -t bytes (needs no vocabulary)");
	}
	return rc;
}

static int parse_format(const char *s, gpt_input_format *f, gpt_err *err)
{
	static const char *const names[] = {"auto", "text", "lines", "jsonl"};
	for (int i = 0; i < 4; i++)
		if (strcmp(s, names[i]) == 0) {
			*f = (gpt_input_format)i;
			return 0;
		}
	return gpt_err_set(err, GPT_EUSAGE, "--format %s: expected auto, text, lines or jsonl", s);
}

static int show(const char *info, const char *decode, int64_t doc, gpt_tokenizer *tok, gpt_err *err)
{
	gpt_dataset *ds;
	int rc = gpt_dataset_open(&ds, info ? info : decode, err);
	if (rc)
		return rc;
	if (info) {
		gpt_buf out = GPT_BUF_INIT;
		rc = gpt_dataset_describe(ds, info, &out, err);
		/* `--info x >info.txt` on a full disk: said, not exit 0 with nothing written */
		if (!rc && (fputs(out.data, stdout) == EOF || fflush(stdout) != 0))
			rc = gpt_err_errno(err, GPT_EIO, errno, "dataset summary: write");
		gpt_buf_free(&out);
	} else {
		rc = gpt_dataset_decode(ds, tok, doc, stdout, err);
		if (rc == GPT_EDATA) /* the tokens do not fit the tokenizer: which dataset */
			gpt_err_prefix(err, "%s", decode);
	}
	gpt_dataset_close(ds);
	return rc;
}

static void report(const gpt_preprocess_stats *st, const char *prefix, int skip_binary)
{
	const gpt_input_stats *in = &st->input;
	if (in->binary)
		fprintf(stderr, "%s: warning: %s %lld file%s that look%s binary (first: %s)%s\n", prog,
			skip_binary ? "skipped" : "tokenized", (long long)in->binary, in->binary == 1 ? "" : "s",
			in->binary == 1 ? "s" : "", in->first_binary, skip_binary ? "" : "; --skip-binary leaves them out");
	if (in->json_like)
		fprintf(stderr, "%s: warning: read %lld file%s whose first line is a JSON object as text, one document "
			"each (first: %s); --format jsonl (or --json-key KEY) reads a document per record\n", prog, (long long)in->json_like,
			in->json_like == 1 ? "" : "s", in->first_json_like);
	if (in->links)
		fprintf(stderr, "%s: warning: skipped %lld archive member%s that %s symbolic or hard link%s (first: %s): "
			"links inside an archive are not followed, those in a directory are; extract the archive and give "
			"the directory to read what they name\n", prog, (long long)in->links, in->links == 1 ? "" : "s",
			in->links == 1 ? "is a" : "are", in->links == 1 ? "" : "s", in->first_link);
	if (in->bad_records)
		fprintf(stderr, "%s: warning: skipped %lld bad JSON record%s (first: %s)\n", prog,
			(long long)in->bad_records, in->bad_records == 1 ? "" : "s", in->first_bad);
	if (isatty(STDERR_FILENO)) {
		char rate[32];
		gpt_format_bytes(st->seconds > 0 ? (double)in->text_bytes / st->seconds : 0, rate, sizeof rate);
		fprintf(stderr, "%s: %s: %lld documents, %lld tokens in %.1fs (%s/s)\n", prog, prefix,
			(long long)st->docs, (long long)st->tokens, st->seconds, rate);
	}
}

int main(int argc, char **argv)
{
	gpt_err err = {0};
	gpt_opts o;
	gpt_preprocess_opts po = {.append_eod = 1, .threads = 1, .progress = stderr};
	const char *tok_name = "gpt2", *vocab = NULL, *info = NULL, *decode = NULL;
	int64_t doc = -1, jobs = 1;
	int id, have_doc = 0, input_opts = 0, tok_opts = 0;
	gpt_cmd_remove_temps_on_signals(); /* an interrupted run leaves no temporaries */
	gpt_cmd_file_size_limit_as_error(); /* past ulimit -f: EFBIG, the file named, no temporary left */
	gpt_opts_init(&o, options, argc, argv);
	while ((id = gpt_opts_next(&o, &err)) > 0) {
		input_opts |= id == O_KEY || id == O_FORMAT || id == O_SKIP_BAD || id == O_SKIP_BIN || id == O_EOD ||
			      id == O_NO_EOD || id == O_JOBS;
		tok_opts |= id == O_TOK || id == O_VOCAB;
		switch (id) {
		case O_OUT: po.prefix = o.arg; break;
		case O_TOK: tok_name = o.arg; break;
		case O_VOCAB: vocab = o.arg; break;
		case O_KEY:
			if (!*o.arg) { /* no record has it: every one would be bad */
				gpt_err_set(&err, GPT_EUSAGE, "--json-key: expected a key name, found an empty one");
				return gpt_cmd_fail(prog, &err);
			}
			if (po.input.n_keys == GPT_INPUT_MAX_KEYS) {
				gpt_err_set(&err, GPT_EUSAGE, "--json-key: at most %d keys", GPT_INPUT_MAX_KEYS);
				return gpt_cmd_fail(prog, &err);
			}
			po.input.keys[po.input.n_keys++] = o.arg;
			po.input.stdin_json = 1;
			break;
		case O_FORMAT:
			if (parse_format(o.arg, &po.input.format, &err))
				return gpt_cmd_fail(prog, &err);
			break;
		case O_SKIP_BAD: po.input.skip_bad = 1; break;
		case O_SKIP_BIN: po.input.skip_binary = 1; break;
		case O_EOD: po.append_eod = 1; break;
		case O_NO_EOD: po.append_eod = 0; break;
		case O_JOBS:
			if (gpt_parse_i64(o.arg, &jobs) || jobs < 1 || jobs > 1024) {
				gpt_err_set(&err, GPT_EUSAGE, "-j %s: expected a thread count from 1 to 1024", o.arg);
				return gpt_cmd_fail(prog, &err);
			}
			break;
		case O_INFO: info = o.arg; break;
		case O_DECODE: decode = o.arg; break;
		case O_DOC:
			if (gpt_parse_i64(o.arg, &doc) || doc < 0) {
				gpt_err_set(&err, GPT_EUSAGE, "--doc %s: expected a document number, 0 or more", o.arg);
				return gpt_cmd_fail(prog, &err);
			}
			have_doc = 1;
			break;
		case O_HELP: usage(stdout); return gpt_cmd_stdout_done(prog);
		case O_VERSION: gpt_cmd_version(prog, stdout); return gpt_cmd_stdout_done(prog);
		}
	}
	if (id < 0) {
		if (o.index > 0)
			gpt_preprocess_flag_hint(argv[o.index - 1], &err);
		return gpt_cmd_fail_options(prog, &err, argv + o.index, argc - o.index, gpt_preprocess_flag_hint);
	}
	int n_in = argc - o.index;
	if (info && decode)
		gpt_err_set(&err, GPT_EUSAGE, "--info and --decode: give one of them");
	else if ((info || decode) && (n_in || po.prefix))
		gpt_err_set(&err, GPT_EUSAGE, "--%s PREFIX takes no inputs and no -o", info ? "info" : "decode");
	else if ((info || decode) && input_opts)
		gpt_err_set(&err, GPT_EUSAGE, "--%s reads a dataset: --json-key, --format, --skip-bad, --skip-binary, "
			    "--append-eod, --no-append-eod and -j apply to tokenizing input; leave them out",
			    info ? "info" : "decode");
	else if (info && tok_opts)
		gpt_err_set(&err, GPT_EUSAGE, "--info reads no tokens: -t and --vocab apply to tokenizing and --decode; leave them out");
	else if (vocab && strcmp(tok_name, "bytes") == 0)
		gpt_err_set(&err, GPT_EUSAGE, "--vocab: -t bytes needs no vocabulary; leave one of them out");
	else if ((po.input.n_keys || po.input.skip_bad) &&
		 (po.input.format == GPT_IN_TEXT || po.input.format == GPT_IN_LINES))
		gpt_err_set(&err, GPT_EUSAGE, "%s: --format %s reads no JSON; leave it out or use --format jsonl or auto",
			    po.input.n_keys ? "--json-key" : "--skip-bad", po.input.format == GPT_IN_TEXT ? "text" : "lines");
	else if (have_doc && !decode)
		gpt_err_set(&err, GPT_EUSAGE, "--doc: only with --decode");
	else if (!info && !decode && !po.prefix)
		gpt_err_set(&err, GPT_EUSAGE, "no output: give -o PREFIX (see --help)");
	else if (!info && !decode && n_in == 0)
		gpt_err_set(&err, GPT_EUSAGE, "no input: give files, directories or '-' for stdin (see --help)");
	int stdins = 0; /* a second read of stdin finds it at its end: nothing */
	for (int i = o.index; !err.code && i < argc; i++)
		if (strcmp(argv[i], "-") == 0 && ++stdins == 2)
			gpt_err_set(&err, GPT_EUSAGE, "input '-' (standard input) given more than once: it can be read once; "
				    "give it once (./- names a file called '-')");
	if (err.code)
		return gpt_cmd_fail(prog, &err);

	gpt_tokenizer *tok = NULL;
	if (!info && open_tokenizer(tok_name, vocab, &tok, &err))
		return gpt_cmd_fail(prog, &err);
	int rc;
	if (info || decode) {
		rc = show(info, decode, doc, tok, &err);
	} else {
		gpt_preprocess_stats st;
		po.tok = tok;
		po.threads = (int)jobs;
		rc = gpt_preprocess(&po, (const char *const *)argv + o.index, n_in, &st, &err);
		if (!rc)
			report(&st, po.prefix, po.input.skip_binary);
	}
	gpt_tokenizer_free(tok);
	return rc ? gpt_cmd_fail(prog, &err) : 0;
}
