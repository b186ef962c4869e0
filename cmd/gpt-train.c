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
	{"print-config", 0, NULL, OPT_PRINT, "print the resolved configuration as YAML and exit"},
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

/* Options of PaddleNLP's Trainer, Megatron-LM's pretrain_gpt.py and llm.c's
 * train_gpt2 ("-X": a short flag), which gpt-train does not take: whose
 * they are and what to give instead. */
static void foreign_flag_hint(const char *arg, gpt_err *err)
{
	static const char fixed[] = "gpt-train has no such setting: the scale stops at 1, halves after 2 "
				    "overflows in a row and doubles after 1000 good steps, as in Paddle's AMP";
	static const char pn[] = "PaddleNLP's and Megatron-LM's", mg[] = "Megatron-LM's", lc[] = "llm.c's";
	static const char seq[] = "give -o Data.Train.dataset.max_seq_len=N -o Data.Eval.dataset.max_seq_len=N";
	static const char load[] = "give -o Engine.save_load.output_dir=DIR, from whose latest checkpoint a run "
				   "resumes by itself; -o Engine.save_load.ckpt_dir=DIR starts a new run from a checkpoint";
	static const char *const tbl[] = {
		"fp16", pn,
		"give -o Engine.mix_precision.enable=True -o Engine.mix_precision.dtype=float16",
		"bf16", pn,
		"give -o Engine.mix_precision.enable=True -o Engine.mix_precision.dtype=bfloat16",
		"fp16_opt_level", "PaddleNLP's",
		"give -o Engine.mix_precision.level=O2 (16-bit parameters, fp32 master weights; O1 is not offered)",
		"scale_loss", "PaddleNLP's", "give -o Engine.mix_precision.scale_loss=N",
		"amp_master_grad", "PaddleNLP's",
		"gpt-train has no such setting: gradients are held in the 16-bit dtype and unscaled into the fp32 master weights",
		"initial-loss-scale", mg, "give -o Engine.mix_precision.scale_loss=N",
		"loss-scale", mg,
		"give -o Engine.mix_precision.scale_loss=N (the initial dynamic scale; a fixed one is not offered)",
		"min-loss-scale", mg, fixed,
		"loss-scale-window", mg, fixed,
		"hysteresis", mg, fixed,
		"num-layers", mg, "give -o Model.num_layers=N",
		"hidden-size", mg, "give -o Model.hidden_size=N",
		"ffn-hidden-size", mg, "give -o Model.ffn_hidden_size=N",
		"num-attention-heads", mg, "give -o Model.num_attention_heads=N",
		"max-position-embeddings", mg, "give -o Model.max_position_embeddings=N",
		"seq-length", mg, seq,
		"micro-batch-size", mg, "give -o Global.micro_batch_size=N",
		"global-batch-size", mg, "give -o Global.global_batch_size=N",
		"train-iters", mg, "give -o Engine.max_steps=N",
		"lr", mg, "give -o Optimizer.lr.max_lr=LR",
		"min-lr", mg, "give -o Optimizer.lr.min_lr=LR",
		"lr-decay-style", mg,
		"give -o Optimizer.lr.name=CosineAnnealingWithWarmupDecay (cosine), LinearDecayWithWarmup (linear) or Constant",
		"lr-decay-iters", mg, "give -o Optimizer.lr.decay_steps=N",
		"lr-warmup-iters", mg, "give -o Optimizer.lr.warmup_steps=N",
		"lr-warmup-fraction", mg, "give -o Optimizer.lr.warmup_rate=F (a fraction of decay_steps)",
		"weight-decay", mg, "give -o Optimizer.weight_decay=F",
		"clip-grad", mg, "give -o Optimizer.grad_clip.clip_norm=F",
		"adam-beta1", mg, "give -o Optimizer.beta1=F",
		"adam-beta2", mg, "give -o Optimizer.beta2=F",
		"adam-eps", mg, "give -o Optimizer.epsilon=F",
		"hidden-dropout", mg, "give -o Model.hidden_dropout_prob=P",
		"attention-dropout", mg, "give -o Model.attention_probs_dropout_prob=P",
		"init-method-std", mg, "give -o Model.initializer_range=F",
		"seed", mg, "give -o Global.seed=N",
		"tensor-model-parallel-size", mg, "give --tensor_parallel_degree N (Distributed.mp_degree)",
		"pipeline-model-parallel-size", mg, "give --pipeline_parallel_degree N (Distributed.pp_degree)",
		"num-layers-per-virtual-pipeline-stage", mg,
		"give --virtual_pp_degree V, the model chunks per stage: num_layers / (pp_degree x this)",
		"sequence-parallel", mg, "give -o Model.sequence_parallel=True",
		"use-distributed-optimizer", mg,
		"give --sharding stage1 with --sharding_parallel_degree N (the optimizer state split over N data replicas)",
		"recompute-activations", mg,
		"give -o Model.use_recompute=True -o Model.recompute_granularity=core_attn (softmax(QK^T)V only)",
		"recompute-granularity", mg,
		"give -o Model.use_recompute=True -o Model.recompute_granularity=full (whole layers) or core_attn",
		"data-path", mg,
		"give -o Data.Train.dataset.input_dir=PATH -o Data.Eval.dataset.input_dir=PATH (a prefix, a directory "
		"or a blend 'W1 PREFIX1 W2 PREFIX2')",
		"split", mg, "give -o Data.Train.dataset.split=949,50,1 -o Data.Eval.dataset.split=949,50,1",
		"save", mg, "give -o Engine.save_load.output_dir=DIR",
		"load", mg, load,
		"pretrained-checkpoint", mg,
		"give -o Engine.save_load.ckpt_dir=DIR, the checkpoint a run starts from while output_dir holds none",
		"save-interval", mg, "give -o Engine.save_load.save_steps=N",
		"eval-interval", mg, "give -o Engine.eval_freq=N",
		"eval-iters", mg, "give -o Engine.eval_iters=N",
		"log-interval", mg, "give -o Engine.logging_freq=N",
		"vocab-file", mg, "gpt-train reads token ids: the tokenizer is gpt-preprocess's -t and --vocab; leave it out",
		"merge-file", mg, "gpt-train reads token ids: the tokenizer is gpt-preprocess's -t and --vocab; leave it out",
		"-i", lc,
		"give -o Data.Train.dataset.input_dir=PATH (an llm.c .bin shard, a directory of shards or a blend; "
		"-o Data.Train.dataset.split=1,0,0 trains on all of it)",
		"-j", lc, "give -o Data.Eval.dataset.input_dir=PATH (-o Data.Eval.dataset.split=0,1,0 evaluates on all of it)",
		"-e", lc,
		"gpt-train does not read llm.c's model files; it starts from random weights, or from a gptkit checkpoint "
		"given as -o Engine.save_load.ckpt_dir=DIR (gpt-ckpt-merge --from-hf makes one of Hugging Face GPT-2)",
		"-b", lc, "give -o Global.micro_batch_size=N",
		"-t", lc, seq,
		"-d", lc, "give -o Global.global_batch_size=N in sequences (llm.c's tokens / max_seq_len)",
		"-l", lc, "give -o Optimizer.lr.max_lr=LR",
		"-q", lc, "give -o Optimizer.lr.min_lr=LR (max_lr x llm.c's fraction)",
		"-u", lc, "give -o Optimizer.lr.warmup_steps=N",
		"-k", lc, "give -o Optimizer.lr.name=CosineAnnealingWithWarmupDecay, LinearDecayWithWarmup or Constant",
		"-x", lc, "give -o Engine.max_steps=N",
		"-v", lc, "give -o Engine.eval_freq=N",
		"-m", lc, "give -o Engine.eval_iters=N",
		"-n", lc, "give -o Engine.save_load.save_steps=N",
		"-y", lc, load,
		"-z", lc, "give --sharding stage1 (or stage2, stage3) with --sharding_parallel_degree N",
		"-r", lc, "give -o Model.use_recompute=True",
		NULL, NULL, NULL,
	};
	gpt_opts_foreign_hint(arg, tbl, err);
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
			foreign_flag_hint(argv[o.index - 1], &err);
		free(set);
		return gpt_cmd_fail(prog, &err);
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
