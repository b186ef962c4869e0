/* lib/config: the training configuration, from FleetX-style YAML to a typed,
 * validated struct.
 *
 * One key table (gpt_config_keys) drives everything: reading the YAML file
 * (libyaml, with file:line:column on every message), `-o Section.key=value`
 * overrides, PaddleNLP-style parallel flags, defaults, printing the resolved
 * configuration back as YAML, the "did you mean" suggestion for an unknown
 * key, and the key list in gpt-config(5).
 *
 * Use:
 *     gpt_config cfg;
 *     gpt_config_init(&cfg, &err);                    defaults
 *     gpt_config_read_file(&cfg, path, &err);         the YAML file (and its _base_)
 *     gpt_config_override(&cfg, "Model.hidden_size=1024", &err);   each -o
 *     gpt_config_paddlenlp(&cfg, "tensor_parallel_degree", "8", &err);
 *     gpt_config_resolve(&cfg, world_size, &err);     derive and validate
 *     ...
 *     gpt_config_free(&cfg);
 * or gpt_config_load() for the common file + overrides + resolve sequence.
 * Settings apply in call order (a later one wins); resolve runs once, last.
 * Every string and list of the struct lives in its arena until
 * gpt_config_free.
 *
 * Errors: a problem in the file is GPT_EDATA (65), a missing file
 * GPT_ENOINPUT (66), a bad override, flag or world size GPT_EUSAGE (64).
 * A value that fails validation is reported at the place it came from (file
 * position, "-o ..." or "--flag ..."), with the code of that place.
 */
#ifndef GPT_CONFIG_H
#define GPT_CONFIG_H

#include "core/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Vocabulary rows are padded to a multiple of this, whatever the layout. */
#define GPT_VOCAB_PAD 128
/* Model chunks per pipeline stage, at most (the model's GPT_MAX_CHUNKS). */
#define GPT_MAX_VIRTUAL_PP 16
/* The largest head size (hidden_size / num_attention_heads) that the CUDA
 * attention kernels take; Global.device gpu refuses a larger one up front. */
#define GPT_GPU_MAX_HEAD_SIZE 128

typedef struct gpt_strlist {
	int n;
	char **v;
} gpt_strlist;

typedef struct gpt_intlist {
	int n;
	int64_t *v;
} gpt_intlist;

typedef struct gpt_config_dataset {
	char *name;        /* FleetX dataset class; GPTDataset */
	char *input_dir;   /* directory or prefix of the indexed dataset */
	char *split;       /* "949,50,1": train/valid/test document shares */
	int64_t max_seq_len;
} gpt_config_dataset;

typedef struct gpt_config_data {
	gpt_config_dataset dataset;
	char *sampler_name;
	int shuffle;         /* compatibility only: samples are always shuffled */
	int drop_last;
	int64_t num_workers; /* compatibility only */
	int return_list;     /* compatibility only */
	char *collate_fn;    /* compatibility only */
} gpt_config_data;

typedef struct gpt_config {
	struct {
		char *device; /* cpu | gpu */
		int64_t seed;
		int64_t global_batch_size;
		int64_t local_batch_size;
		int64_t micro_batch_size;
	} global;
	struct {
		int64_t max_steps;
		int64_t num_train_epochs;
		int64_t accumulate_steps;
		int64_t logging_freq;
		char *nan_policy; /* stop | skip | rollback */
		int64_t nan_max_rollbacks;
		struct {
			int enable;
			int64_t window;
			double loss_zscore;
			double grad_norm_zscore;
			int64_t warmup;
		} skip_spikes;
		int64_t eval_freq;
		int64_t eval_iters;
		int64_t test_iters;
		struct {
			int enable;
			int use_pure_fp16;
			char *level; /* O0 | O1 | O2 */
			char *dtype; /* float16 | bfloat16 */
			double scale_loss;
			gpt_strlist custom_black_list;
			gpt_strlist custom_white_list;
		} mix_precision;
		struct {
			int64_t save_steps;
			int64_t save_epoch;
			char *output_dir;
			char *ckpt_dir;
			char *on_save_error; /* stop | continue */
			int save_on_signal;
			int64_t keep_last;
			int async_save;
		} save_load;
		/* testing aids: faults made on purpose (gpt-config(5), TESTING AIDS) */
		struct {
			gpt_intlist nan_steps;
			int64_t nan_rank;
			gpt_intlist spike_steps;
			double spike_factor;
		} fault_inject;
	} engine;
	struct {
		char *module;
		char *name;
		int64_t vocab_size;
		int64_t hidden_size;
		int64_t num_layers;
		int64_t num_attention_heads;
		int64_t ffn_hidden_size;
		double hidden_dropout_prob;
		double attention_probs_dropout_prob;
		int64_t max_position_embeddings;
		int64_t type_vocab_size; /* compatibility only */
		double initializer_range;
		int use_recompute;
		char *recompute_granularity; /* full | only_attn | core_attn */
		gpt_intlist no_recompute_layers;
		int fused_linear;
		int fuse_attn_qkv;
		int sequence_parallel;
		int64_t classifier_rows; /* 0: automatic */
	} model;
	struct {
		gpt_config_data train;
		gpt_config_data eval;
	} data;
	struct {
		char *name; /* AdamW */
		double weight_decay;
		double beta1, beta2, epsilon;
		struct {
			char *name; /* CosineAnnealingWithWarmupDecay | LinearDecayWithWarmup | Constant */
			int64_t decay_steps;
			double warmup_rate;
			int64_t warmup_steps;
			double max_lr;
			double min_lr;
		} lr;
		struct {
			char *name; /* ClipGradByGlobalNorm */
			double clip_norm;
		} grad_clip;
		int tensor_fusion;
	} optimizer;
	struct {
		int64_t dp_degree;
		int64_t mp_degree;
		int64_t pp_degree;
		int64_t virtual_pp_degree;
		gpt_intlist pp_layers;
		char *pipeline_schedule; /* FThenB | 1F1B | interleaved */
		int overlap_grad_reduce;
		double comm_buffer_size; /* MB */
		struct {
			int64_t sharding_degree;
			int64_t sharding_stage;
			int sharding_offload;
			int reduce_overlap;
			int broadcast_overlap;
		} sharding;
	} distributed;
	struct {
		int64_t top_k;
		double top_p;
		double temperature;
		int64_t min_dec_len;
		int64_t max_dec_len;
		int64_t num_return_sequences;
		char *decode_strategy; /* sampling | greedy_search | beam_search */
		int64_t num_beams;
		double length_penalty;
		double repetition_penalty;
		int early_stopping;
		int64_t seed;
	} generation;
	struct {
		char *model_dir;
		int64_t mp_degree;
	} inference;
	struct { /* FleetX's tools/eval.py settings: compatibility only */
		char *eval_path;
		int cloze_eval;
		int64_t overlapping_eval;
		char *ckpt_dir;
		int64_t batch_size;
		int64_t max_seq_len;
		int64_t logging_freq;
	} eval;
	struct {
		int enable;
		char *weight_quantize_type;
		char *activation_quantize_type;
		int64_t weight_bits;
		int64_t activation_bits;
		double moving_rate;
		gpt_strlist quantizable_layer_type;
		char *weight_preprocess_type;
		char *activation_preprocess_type;
		double pact_init_value;
		double pact_lr_multiplier;
		int onnx_format;
	} quantization;

	/* ---- derived by gpt_config_resolve ---- */
	int64_t world_size;
	const char *world_size_from; /* "--world-size", "GPT_WORLD_SIZE", ..., "layout" */
	int64_t padded_vocab_size;   /* vocab_size rounded up to GPT_VOCAB_PAD */
	int64_t head_size;           /* hidden_size / num_attention_heads */
	int mixed;                   /* 1: 16-bit compute (mix_precision enabled) */
	int resolved;

	/* ---- bookkeeping: where each key's value came from ---- */
	struct gpt_config_origin *origin; /* one per key, indexed like gpt_config_keys() */
	int sharding_takes_rest;          /* --sharding stageN without a degree */
	int base_depth;
	const char *base_chain[9];        /* real paths of the files being read, for cycles */
	const char *file;                 /* the file named on the command line */
	gpt_arena arena;                  /* strings and lists */
} gpt_config;

/* ---- the key table ---- */

typedef enum gpt_config_type {
	GPT_CT_INT = 0,
	GPT_CT_FLOAT,
	GPT_CT_BOOL,
	GPT_CT_STR,
	GPT_CT_ENUM,    /* a string from `choices` */
	GPT_CT_STRLIST, /* YAML sequence of strings, or "a,b" in -o */
	GPT_CT_INTLIST,
	GPT_CT_SPLIT,   /* '949,50,1' or [949, 50, 1] */
} gpt_config_type;

enum {
	GPT_CK_COMPAT = 1,  /* accepted for compatibility with FleetX, no effect in gptkit */
	GPT_CK_DERIVED = 2, /* derived from other keys when not given */
	GPT_CK_CHECKED = 4, /* with COMPAT: resolving refuses the values gptkit cannot honour; the
			     * rest ask for what it does anyway (no warning) */
};

typedef struct gpt_config_key {
	const char *name;    /* "Distributed.sharding.sharding_stage" */
	gpt_config_type type;
	size_t offset;       /* into gpt_config */
	const char *def;     /* default as YAML scalar text; NULL: null (unset or derived) */
	const char *choices; /* ENUM: "full|only_attn|core_attn" */
	double min, max;     /* INT/FLOAT range (inclusive) when min < max */
	int flags;           /* GPT_CK_* */
	const char *help;    /* one line for --list-keys and gpt-config(5) */
} gpt_config_key;

/* The table, in the order the resolved YAML is printed. */
const gpt_config_key *gpt_config_keys(int *n);
/* Index of a key by its full dotted name (aliases included), or -1. */
int gpt_config_key_find(const char *name);
/* The nearest key or section name to an unknown `name`, for "did you mean". */
const char *gpt_config_key_nearest(const char *name);
/* For a key FleetX's or PaddleNLP's generation reads and gptkit does not
 * ("Generation.eos_token_id"): why, and what to do instead; else NULL. */
const char *gpt_config_unread_note(const char *name);
/* 1 when name is a section ("Distributed.sharding") rather than a key. */
int gpt_config_is_section(const char *name);
/* Accepted spellings from older FleetX/PaddleNLP configs, NULL-terminated
 * pairs {alias, key}. */
const char *const *gpt_config_aliases(void);

/* ---- loading ---- */

/* Sets every key to its default. Fails (GPT_EINTERNAL) only when memory runs
 * out; gpt_config_free is safe after a failed init. */
int gpt_config_init(gpt_config *cfg, gpt_err *err);
void gpt_config_free(gpt_config *cfg);

/* Reads a YAML file on top of what cfg holds. A top-level `_base_: FILE`
 * (FleetX's inheritance, relative to this file) is read first. */
int gpt_config_read_file(gpt_config *cfg, const char *path, gpt_err *err);
/* Reads YAML text (for tests); `name` is used in messages. */
int gpt_config_read_text(gpt_config *cfg, const char *text, size_t len, const char *name,
			 gpt_err *err);
/* One "-o Section.key=value" override (the text after -o). */
int gpt_config_override(gpt_config *cfg, const char *assignment, gpt_err *err);
/* A PaddleNLP trainer flag without the dashes: tensor_parallel_degree,
 * pipeline_parallel_degree, sharding_parallel_degree, virtual_pp_degree, or
 * sharding ("stage1", "stage2 offload", ...). */
int gpt_config_paddlenlp(gpt_config *cfg, const char *flag, const char *value, gpt_err *err);

/* The world size from GPT_WORLD_SIZE, WORLD_SIZE, PADDLE_TRAINERS_NUM,
 * SLURM_NTASKS or OMPI_COMM_WORLD_SIZE (the first one set); *out = 0 when
 * none is set. *from names the variable. */
int gpt_config_world_size_env(int64_t *out, const char **from, gpt_err *err);

/* Derives what was left out and validates everything. world_size > 0: that
 * many ranks (from --world-size); 0: from the environment, else the product
 * of the degrees. A degree left out is world / (product of the others):
 * dp_degree normally, sharding_degree after `--sharding stageN` without a
 * degree. */
int gpt_config_resolve(gpt_config *cfg, int64_t world_size, gpt_err *err);

/* init + read_file + each override + resolve(world size from the environment). */
int gpt_config_load(gpt_config *cfg, const char *path, char *const *overrides, int n_overrides,
		    gpt_err *err);

/* Writes the resolved configuration as YAML that reads back to the same
 * configuration (every key, derived values included). */
int gpt_config_write_yaml(const gpt_config *cfg, FILE *fp, gpt_err *err);

/* After gpt-train's option parsing refused arg with "unknown option -...":
 * when it is an option of PaddleNLP's Trainer, Megatron-LM's pretrain_gpt.py
 * or llm.c's train_gpt2 ("-X": llm.c's short flags), err says whose it is
 * and what to give instead (gpt_opts_foreign_hint); otherwise err is kept. */
void gpt_config_flag_hint(const char *arg, gpt_err *err);

/* Writes the key table: name, type, default, one line of help. */
void gpt_config_list_keys(FILE *fp);

/* ---- internals shared by the files of this module ---- */

typedef enum gpt_config_src {
	GPT_SRC_DEFAULT = 0,
	GPT_SRC_FILE,
	GPT_SRC_OVERRIDE,
	GPT_SRC_FLAG,
	GPT_SRC_DERIVED,
} gpt_config_src;

typedef struct gpt_config_origin {
	gpt_config_src src;
	const char *where; /* file name, "-o ...", "--flag ..." (in the arena) */
	int line, col;     /* 1-based, for GPT_SRC_FILE */
} gpt_config_origin;

/* Parses scalar text for key k and stores it, recording origin o (copied).
 * is_null: a YAML null, meaning "not given" (the default is restored). */
int gpt_config_set_scalar(gpt_config *cfg, int k, const char *text, int is_null,
			  const gpt_config_origin *o, gpt_err *err);
/* The value a null given under `name` (as written) stands for, or NULL
 * where a null means "not given": FleetX builds no clipping from a
 * grad_clip of null (ppfleetx build_grad_clip), so Optimizer.grad_clip: null
 * is a clip_norm of 0. */
const char *gpt_config_null_means(const char *name);
/* Stores a list (STRLIST/INTLIST/SPLIT) from n item texts. */
int gpt_config_set_list(gpt_config *cfg, int k, const char *const *items, int n,
			const gpt_config_origin *o, gpt_err *err);
/* "file:line:col" / "-o K=V" / "--flag V" / "default" for key k, and the
 * exit code a message there gets. */
void gpt_config_where(const gpt_config *cfg, int k, char *out, size_t size);
int gpt_config_where_code(const gpt_config *cfg, int k);
/* Refuses the value of `key` (a full name) for a reason found after
 * resolving (a setting the trainer cannot honour): "WHERE: KEY: message",
 * with the exit code of where the value came from (64 for -o and flags, 65
 * for the file), as the configuration's own errors get. */
/* Quantization.quantizable_layer_type: each name Linear,
 * ColumnParallelLinear, RowParallelLinear or a linear of the block
 * (attn.qkv, attn.proj, mlp.fc, mlp.proj), refused as gpt_config_refuse
 * refuses otherwise. Resolving checks it when Quantization.enable; QAT's
 * set-up too, for a checkpoint's configuration, which is not resolved. */
int gpt_config_check_qat_layers(const gpt_config *cfg, gpt_err *err);
int gpt_config_refuse(const gpt_config *cfg, const char *key, gpt_err *err, const char *fmt, ...)
	GPT_PRINTF(4, 5);
/* Whether key k was given (file, override or flag) rather than defaulted. */
int gpt_config_given(const gpt_config *cfg, int k);
/* The keys accepted for compatibility only (GPT_CK_COMPAT), which gptkit
 * reads and does not use, that were given a value other than their default
 * (FleetX's): their indices, in table order, at most max of them into out.
 * Returns how many, or -1 (err set) when memory runs out. gpt-train warns
 * of each, so that a value that would change a FleetX run is not taken in
 * silence. */
int gpt_config_ignored_keys(const gpt_config *cfg, int *out, int max, gpt_err *err);
/* The learning-rate warm-up in steps: Optimizer.lr.warmup_steps when given,
 * else warmup_rate x decay_steps unrounded (FleetX's, 6.6 steps for 0.33 x
 * 20); the derived warmup_steps only shows it rounded. */
double gpt_config_warmup(const gpt_config *cfg);

#ifdef __cplusplus
}
#endif

#endif
