/* gpt-train: the trainer: resolve the configuration, then train, print it
 * (--print-config) or plan the per-rank memory of the layout (--dry-run). */
#include "backend/backend.h"
#include "config/config.h"
#include "core/core.h"
#include "train/train.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

enum {
	OPT_CONFIG = 'c',
	OPT_OVERRIDE = 'o',
	OPT_HELP = 'h',
	OPT_VERSION = 'V',
	OPT_PRINT = 256,
	OPT_DRY_RUN,
	OPT_WORLD,
	OPT_LIST_KEYS,
	OPT_TP,
	OPT_PP,
	OPT_SHARDING,
	OPT_SHARDING_DEGREE,
	OPT_VPP,
};

static const gpt_opt options[] = {
	{"config", 'c', "FILE", OPT_CONFIG, "the YAML configuration (FleetX layout, see gpt-config(5))"},
	{"override", 'o', "KEY=VALUE", OPT_OVERRIDE,
	 "set one key, e.g. -o Model.hidden_size=1024 (repeatable)"},
	{"print-config", 0, NULL, OPT_PRINT, "print the resolved configuration as YAML and exit (without -c: the defaults)"},
	{"dry-run", 0, NULL, OPT_DRY_RUN,
	 "print the parameter count and per-rank memory of the layout and exit"},
	{"world-size", 0, "N", OPT_WORLD,
	 "number of ranks (default: GPT_WORLD_SIZE, WORLD_SIZE, PADDLE_TRAINERS_NUM, "
	 "SLURM_NTASKS, OMPI_COMM_WORLD_SIZE, else the product of the degrees)"},
	{"tensor_parallel_degree", 0, "N", OPT_TP, "PaddleNLP spelling of Distributed.mp_degree"},
	{"pipeline_parallel_degree", 0, "N", OPT_PP, "PaddleNLP spelling of Distributed.pp_degree"},
	{"sharding", 0, "STAGE", OPT_SHARDING,
	 "PaddleNLP sharding: \"stage1\", \"stage2\", \"stage3\", optionally \"... offload\""},
	{"sharding_parallel_degree", 0, "N", OPT_SHARDING_DEGREE,
	 "PaddleNLP spelling of Distributed.sharding.sharding_degree"},
	{"virtual_pp_degree", 0, "N", OPT_VPP, "PaddleNLP spelling of Distributed.virtual_pp_degree"},
	{"list-keys", 0, NULL, OPT_LIST_KEYS,
	 "list every configuration key with its type, default and meaning"},
	{"help", 'h', NULL, OPT_HELP, "show this help and exit"},
	{"version", 'V', NULL, OPT_VERSION, "show the version and the compute backends and exit"},
	{NULL, 0, NULL, 0, NULL},
};

static void usage(FILE *fp)
{
	fprintf(fp, "usage: gpt-train -c FILE [-o KEY=VALUE]... [--print-config | --dry-run] "
		    "[--world-size N]\n\n"
		    "Train a GPT model as the configuration says: log lines on stdout (FleetX's\n"
		    "format), checkpoints in Engine.save_load.output_dir, resuming from\n"
		    "output_dir/latest, else from Engine.save_load.ckpt_dir. One process trains alone;\n"
		    "under gpt-launch the ranks train together (data, tensor and pipeline parallel,\n"
		    "ZeRO sharding). --print-config shows the resolved configuration and --dry-run\n"
		    "the parameter count and per-rank memory, without training. gpt-train --version\n"
		    "names the backends of this build.\n\nOptions:\n");
	gpt_opts_help(options, fp);
}

typedef struct setting {
	int id;
	const char *arg;
} setting;

static int apply(gpt_config *cfg, const setting *s, gpt_err *err)
{
	switch (s->id) {
	case OPT_OVERRIDE: return gpt_config_override(cfg, s->arg, err);
	case OPT_TP: return gpt_config_paddlenlp(cfg, "tensor_parallel_degree", s->arg, err);
	case OPT_PP: return gpt_config_paddlenlp(cfg, "pipeline_parallel_degree", s->arg, err);
	case OPT_SHARDING: return gpt_config_paddlenlp(cfg, "sharding", s->arg, err);
	case OPT_SHARDING_DEGREE:
		return gpt_config_paddlenlp(cfg, "sharding_parallel_degree", s->arg, err);
	default: return gpt_config_paddlenlp(cfg, "virtual_pp_degree", s->arg, err);
	}
}

/* A key accepted for compatibility only, given a value other than FleetX's
 * default, changes nothing here: said on standard error, with why. */
static int warn_ignored(const gpt_config *cfg, gpt_err *err)
{
	int n, ks[64];
	const gpt_config_key *keys = gpt_config_keys(&n);
	int found = gpt_config_ignored_keys(cfg, ks, (int)(sizeof ks / sizeof *ks), err);
	for (int i = 0; i < found; i++) {
		char where[512];
		gpt_config_where(cfg, ks[i], where, sizeof where);
		fprintf(stderr, "gpt-train: warning: %s: %s: accepted for compatibility, no effect in gptkit: %s\n",
			where, keys[ks[i]].name, keys[ks[i]].help);
	}
	return found < 0 ? err->code : 0;
}

/* SIGTERM or SIGUSR1 asks the trainer to finish the step, save and stop
 * (Engine.save_load.save_on_signal); a second SIGTERM ends the process at
 * once, as the default action would have. */
static volatile sig_atomic_t stop_requested;

static void on_stop_signal(int sig)
{
	if (stop_requested && sig == SIGTERM) {
		signal(sig, SIG_DFL);
		raise(sig);
	}
	stop_requested = 1;
}

static void catch_stop_signals(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_stop_signal;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
}

int main(int argc, char **argv)
{
	const char *prog = "gpt-train", *path = NULL;
	gpt_err err = {0};
	gpt_opts o;
	int print = 0, dry = 0, list = 0, id, rc = 0;
	int64_t world = 0;
	setting *set = calloc((size_t)argc + 1, sizeof *set);
	int nset = 0;
	if (!set)
		return gpt_cmd_fail(prog, &(gpt_err){GPT_EINTERNAL, "out of memory"});
	gpt_cmd_file_size_limit_as_error(); /* past ulimit -f: EFBIG, the file named, no temporary left */
	gpt_opts_init(&o, options, argc, argv);
	while ((id = gpt_opts_next(&o, &err)) > 0) {
		switch (id) {
		case OPT_CONFIG: path = o.arg; break;
		case OPT_PRINT: print = 1; break;
		case OPT_DRY_RUN: dry = 1; break;
		case OPT_LIST_KEYS: list = 1; break;
		case OPT_WORLD:
			if (gpt_parse_i64(o.arg, &world) || world < 1 || world > (1 << 24)) {
				gpt_err_set(&err, GPT_EUSAGE,
					    "--world-size: expected a number of ranks >= 1, found '%s'", o.arg);
				id = -1;
			}
			break;
		case OPT_HELP: usage(stdout); free(set); return gpt_cmd_stdout_done(prog);
		case OPT_VERSION: {
			char line[512];
			gpt_cmd_version(prog, stdout);
			gpt_backend_describe(line, sizeof line);
			printf("%s\n", line);
			free(set);
			return gpt_cmd_stdout_done(prog);
		}
		default: set[nset++] = (setting){id, o.arg}; break;
		}
		if (id < 0)
			break;
	}
	if (id < 0 || o.index < argc) {
		if (id >= 0)
			gpt_err_set(&err, GPT_EUSAGE, "unexpected argument '%s'; see --help", argv[o.index]);
		else if (o.index > 0)
			gpt_config_flag_hint(argv[o.index - 1], &err);
		free(set);
		if (id >= 0)
			return gpt_cmd_fail(prog, &err);
		return gpt_cmd_fail_options(prog, &err, argv + o.index, argc - o.index, gpt_config_flag_hint);
	}
	if (list) {
		gpt_config_list_keys(stdout);
		free(set);
		return gpt_cmd_stdout_done(prog);
	}
	if (!path && !print && !dry) {
		free(set);
		return gpt_cmd_fail(prog, &(gpt_err){GPT_EUSAGE,
					    "no configuration given; use -c FILE (see --help)"});
	}
	gpt_config cfg;
	rc = gpt_config_init(&cfg, &err);
	if (!rc && path)
		rc = gpt_config_read_file(&cfg, path, &err);
	for (int i = 0; !rc && i < nset; i++)
		rc = apply(&cfg, &set[i], &err);
	if (!rc)
		rc = gpt_config_resolve(&cfg, world, &err);
	if (!rc)
		rc = warn_ignored(&cfg, &err);
	if (!rc && print)
		rc = gpt_config_write_yaml(&cfg, stdout, &err);
	if (!rc && dry) {
		gpt_train_memory m;
		rc = gpt_train_memory_plan(&cfg, &m, &err);
		if (!rc) {
			if (print)
				fputc('\n', stdout);
			rc = gpt_train_memory_write(&cfg, &m, stdout, &err);
			gpt_train_memory_free(&m);
		}
	}
	if (rc == GPT_EIO && (print || dry)) /* the stream the report went to */
		gpt_err_prefix(&err, "standard output");
	if (!rc && !print && !dry) {
		if (cfg.engine.save_load.save_on_signal)
			catch_stop_signals();
		/* A log pipe whose reader is gone (a gpt-launch killed with
		 * SIGKILL, a closed tee) costs log lines, not the run and its
		 * checkpoint on the way out. */
		signal(SIGPIPE, SIG_IGN);
		rc = gpt_train_run(&cfg, stdout, &stop_requested, &err);
	}
	gpt_config_free(&cfg);
	free(set);
	return rc ? gpt_cmd_fail(prog, &err) : 0;
}
