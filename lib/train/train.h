/* lib/train: training: optimizer, sharding stages and offload, learning-rate
 * schedule, loss scaling, pipeline schedules, the loop and evaluation.
 *
 * So far this holds the memory plan behind `gpt-train --dry-run`: from a
 * resolved configuration and the parameter table (lib/model), what one rank
 * of the configured layout holds for parameters, gradients and optimizer
 * state (with the sharding stage and offload applied) and for activations
 * (with and without recompute, tensor and pipeline parallelism taken into
 * account), computed for every pipeline stage; the busiest stage is the
 * figure a user must fit in device memory.
 *
 * And the schedule pieces: the learning-rate schedule and the dynamic loss
 * scaler.
 */
#ifndef GPT_TRAIN_H
#define GPT_TRAIN_H

#include "config/config.h"
#include "model/model.h"
#include "model/gpt.h"

#include <signal.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gpt_train_stage_mem {
	int64_t layers;          /* transformer layers on this stage (all virtual chunks) */
	int64_t params;          /* parameter elements a rank of this stage holds (after tp) */
	double in_flight;        /* micro-batches whose activations are alive at once */
	double param_bytes;      /* device, after sharding stage 3 */
	double grad_bytes;       /* device, after sharding stage 2 */
	double optim_device;     /* fp32 master (O2) + m + v on the device */
	double optim_host;       /* the same in host memory with offload */
	double act_none;         /* activations without recompute */
	double act_full;         /* with full recompute of every layer */
	double act_config;       /* with the configured recompute */
	double work;             /* the GPU backend's own memory (gpt_cuda_work_bytes); 0 on a CPU */
	double device_total;     /* params + grads + optimizer on device + act_config + work */
	double overlap_host;     /* pinned host memory staging overlapped gradient buckets
				    (GPU ranks sharing a device over shm; 0 otherwise) */
} gpt_train_stage_mem;

typedef struct gpt_train_memory {
	int64_t param_count;     /* whole model, each element once */
	int param_bytes_each;    /* 2 (O2) or 4 */
	int grad_bytes_each;
	int optim_bytes_each;    /* 12 (fp32 master + m + v) or 8 (m + v) */
	int act_bytes_each;      /* 2 (mixed precision) or 4 */
	double layer_none;       /* one layer, one micro-batch, no recompute */
	double layer_full;       /* the same, kept under full recompute (its input) */
	double layer_config;     /* the same under the configured granularity */
	int64_t pp;              /* stages */
	int busiest;             /* stage with the largest device_total */
	gpt_train_stage_mem *stage; /* pp entries (malloc'd) */
} gpt_train_memory;

/* Computes the plan for a resolved configuration. Free with
 * gpt_train_memory_free. */
int gpt_train_memory_plan(const gpt_config *cfg, gpt_train_memory *m, gpt_err *err);
/* The storage dtype a resolved config trains in: fp32, or with mixed
 * precision Engine.mix_precision.dtype's (bfloat16, else float16). */
gpt_dtype gpt_train_storage_dtype(const gpt_config *cfg);
/* 1 when the config trains fp16 parameters at Distributed.sharding
 * sharding_stage 3 with the optimizer state on the device: the fp32 master
 * weights are then the only copy of the parameters (2 bytes an element
 * less), and each unit's fp16 weights are cast from them into a window when
 * it runs, at any sharding degree, 1 included. */
int gpt_train_params_from_master(const gpt_config *cfg);
void gpt_train_memory_free(gpt_train_memory *m);

/* A memory figure as --dry-run writes it ("0 B", "12.7 MiB", "2.72 GiB"),
 * for the run's own memory line to be read against it; returns out. */
const char *gpt_train_format_mem(double bytes, char *out, size_t size);

/* The --dry-run report: model, layout, batch, precision, parameter count and
 * the busiest rank's memory (plus one line per stage when pp > 1). */
int gpt_train_memory_write(const gpt_config *cfg, const gpt_train_memory *m, FILE *fp,
			   gpt_err *err);

/* AdamW over the model's flat buffers: the optimizer state (fp32 exp_avg,
 * exp_avg_sq and, for 16-bit parameters, the fp32 master weights) sits at the
 * same offsets as the parameters. Weight decay applies to the parameters the
 * table marks (not to biases and LayerNorm weights). The master weights of
 * fp16 parameters are an fp32 copy; those of bf16 parameters are split
 * (gpt_bf16_split): the parameters are their high halves, master_lo holds
 * the low ones, 2 bytes an element where a copy takes 4, and the same fp32
 * values bit for bit. */
typedef struct gpt_optimizer {
	gpt_model *model;
	int64_t begin, end; /* the range of the flat buffers this rank updates (a shard) */
	void *params, *grads; /* where element `begin` of the parameters and gradients is
			       * (params NULL: GPT_OPTIM_MASTER_ONLY) */
	float *master;      /* fp16 parameters; these three hold end - begin */
	uint16_t *master_lo; /* bf16 parameters: the master's low halves (end - begin) */
	float *exp_avg;
	float *exp_avg_sq;
	float *acc;         /* one float of backend memory for reductions */
	double beta1, beta2, eps, weight_decay;
	int64_t t;          /* updates made */
	/* Where the master, exp_avg and exp_avg_sq live: the model's backend, or
	 * with offload a CPU backend in host memory, with host
	 * images of the range's parameters and gradients (pinned on CUDA). */
	gpt_backend *sb;
	gpt_backend *host;
	void *hparams, *hgrads;
	int pinned;
	/* the range's runs of parameters with weight decay and without, in
	 * the table's order (host memory; adamw_runs) */
	gpt_adamw_run *runs;
	int64_t nruns;
	/* Offloaded, the step goes in chunks (optim.c): the runs cut into
	 * pieces, the chunks' copy ranges and pieces; hfresh 1 while hparams
	 * holds the device's parameters of the range (those AdamW wrote). */
	gpt_adamw_run *pieces;
	struct gpt_offload_chunk *chunks;
	int64_t nchunks, chunk_elems;
	int hfresh;
} gpt_optimizer;

/* The state for elements [begin, end) of the flat buffers: the whole model
 * (0, m->n_alloc) or one rank's shard under ZeRO sharding. params and grads
 * point at element `begin` of where the parameters and gradients of the
 * range live; NULL takes the model's whole buffers. The master weights (16-bit
 * parameters) start as the parameters found there.
 * offload (ZeRO-Offload, Distributed.sharding.sharding_offload on a GPU):
 * the state (fp32 master weights, exp_avg, exp_avg_sq) lives in host memory,
 * made there (never on the device), and every step runs AdamW on a CPU
 * backend: the range's gradients come down, the updated parameters go back
 * up, in chunks of about GPT_OFFLOAD_CHUNK elements (default 16 Mi) whose
 * copies overlap the host's AdamW on the others. The device keeps only the
 * parameters and gradients. Ignored for a model on the CPU backend, whose
 * memory is host memory already.
 * GPT_OPTIM_MASTER_ONLY (fp16 parameters, not offloaded): there are no
 * parameters for the range; the master weights start at zero for the caller
 * to fill (gpt_model_init_master_range, a checkpoint), are the only copy,
 * and the 16-bit parameters are cast from them where they are used (ZeRO
 * stage 3's windows, lib/train/zero.c). */
enum { GPT_OPTIM_OFFLOAD = 1, GPT_OPTIM_MASTER_ONLY = 2 };
int gpt_optimizer_init(gpt_optimizer *op, gpt_model *m, int64_t begin, int64_t end, void *params,
		       void *grads, double beta1, double beta2, double eps, double weight_decay,
		       unsigned flags, gpt_err *err);
void gpt_optimizer_free(gpt_optimizer *op);
/* The sum of squares of the gradients in [begin, end) (a shard's part of
 * the global norm: the caller adds the parts of the shards and scales);
 * Inf or NaN when any of them is. */
int gpt_optimizer_grad_sumsq(gpt_optimizer *op, double *sumsq, gpt_err *err);
/* One update of [begin, end) with learning rate lr; gradients are multiplied
 * by grad_scale (1/loss_scale times the clipping factor) first. */
int gpt_optimizer_step(gpt_optimizer *op, double lr, double grad_scale, gpt_err *err);
/* Says that something other than the optimizer wrote the parameters of
 * its range (a checkpoint loaded): offloaded, it takes them down again at
 * its next step rather than trust its host image of them. */
void gpt_optimizer_params_written(gpt_optimizer *op);

/* Pipeline schedules: the forward and backward passes one pipeline rank
 * makes in a step, in order. FThenB (GPipe: every forward, then every
 * backward), 1F1B (pp - rank - 1 warm-up forwards, then one forward and one
 * backward in turn) and interleaved (1F1B over `chunks` virtual stages per
 * rank, Megatron-LM's order; micro must be a multiple of pp). */
typedef struct gpt_pipe_op {
	int32_t mb;    /* micro-batch */
	int32_t chunk; /* this rank's model chunk (virtual stage chunk x pp + rank) */
	int8_t fwd;    /* 1 forward, 0 backward */
} gpt_pipe_op;

int gpt_pipe_schedule(const char *name, int64_t pp, int64_t rank, int64_t chunks, int64_t micro,
		      gpt_pipe_op **ops, int64_t *n, gpt_err *err);
/* The most micro-batches whose activations a rank keeps at once under ops:
 * from a micro-batch's first forward to the backward of its last chunk. */
int64_t gpt_pipe_slots(const gpt_pipe_op *ops, int64_t n, int64_t chunks);

/* Trains as the resolved configuration says, in this process: log lines
 * go to `log` (FleetX's format), checkpoints to Engine.save_load.output_dir.
 * Resumes from Engine.save_load.ckpt_dir when set (it must load), else from
 * output_dir/latest when that exists. When *stop (may be NULL) becomes
 * non-zero on any rank (a signal handler of the command sets it), every
 * rank finishes the step, a checkpoint is saved and 0 is returned. */
int gpt_train_run(const gpt_config *cfg, FILE *log, const volatile sig_atomic_t *stop,
		  gpt_err *err);

/* Optimizer.lr.name: each a linear warmup from 0 to max_lr over `warmup`
 * steps (a fraction of a step allowed: FleetX's warmup_rate x decay_steps),
 * then
 *   COSINE (FleetX's CosineAnnealingWithWarmupDecay): a half cosine from
 *     max_lr down to min_lr at decay_steps, then min_lr;
 *   LINEAR (LinearDecayWithWarmup): a straight line from max_lr down to
 *     min_lr at decay_steps, then min_lr (PaddleNLP's when min_lr is 0);
 *   CONSTANT: max_lr. */
typedef enum { GPT_LR_COSINE = 0, GPT_LR_LINEAR, GPT_LR_CONSTANT } gpt_lr_kind;
typedef struct gpt_lr_schedule {
	gpt_lr_kind kind;
	double max_lr;
	double min_lr;
	double warmup;        /* warm-up steps, unrounded (gpt_config_warmup) */
	int64_t decay_steps;
} gpt_lr_schedule;

/* Checks the numbers (0 <= min_lr <= max_lr, 0 <= warmup <= decay_steps,
 * decay_steps > 0); the message names the offending field. */
int gpt_lr_check(const gpt_lr_schedule *s, gpt_err *err);
/* The learning rate for the update made at `step` (1 for the first update). */
double gpt_lr_at(const gpt_lr_schedule *s, int64_t step);
/* Optimizer.lr.name's schedule; -1 for a name that is none. */
int gpt_lr_kind_parse(const char *name);

/* Dynamic loss scaling as in Paddle's AMP (and torch.cuda.amp.GradScaler):
 * on an overflow the step is skipped and, after decr_every_n_nan_or_inf
 * overflowing steps in a row, the scale is multiplied by decr_ratio; after
 * incr_every_n_steps good steps in a row it is multiplied by incr_ratio.
 * With dynamic off the scale never changes (steps with an overflow are still
 * skipped). */
typedef struct gpt_loss_scaler {
	double scale;
	int dynamic;
	double incr_ratio;            /* > 1 */
	double decr_ratio;            /* in (0, 1) */
	int64_t incr_every_n_steps;   /* growth interval */
	int64_t decr_every_n_nan_or_inf;
	double min_scale;             /* never below this (1.0) */
	/* state */
	int64_t good_steps;
	int64_t bad_steps;
} gpt_loss_scaler;

/* Paddle's defaults: scale 32768, x2 after 1000 good steps, x0.5 after 2 bad. */
void gpt_loss_scaler_init(gpt_loss_scaler *ls, double scale, int dynamic);
int gpt_loss_scaler_check(const gpt_loss_scaler *ls, gpt_err *err);
/* Records one step's verdict; returns 1 when the update must be skipped
 * (found_inf), 0 otherwise. The new scale is in ls->scale. */
int gpt_loss_scaler_update(gpt_loss_scaler *ls, int found_inf);

/* Loss-spike detection (Engine.skip_spikes): the losses and global gradient
 * norms of the last `cap` steps whose update was made, oldest first. A new
 * step is an outlier when its value lies more than a threshold of standard
 * deviations above the window's mean. Only a full window judges, so the
 * first `cap` values (and, after a resume or a rollback, the next `cap`)
 * pass unchecked. The arithmetic runs over the values in the order they
 * came, so every rank that pushed the same values decides the same. */
typedef struct gpt_spike_window {
	int64_t cap;           /* values kept */
	int64_t n;             /* values held, at most cap */
	int64_t next;          /* slot the next value goes to */
	double *loss, *gnorm;  /* cap each, a ring */
} gpt_spike_window;

enum { GPT_SPIKE_LOSS = 0, GPT_SPIKE_GNORM = 1 };

/* cap >= 2. Free with gpt_spike_window_free. */
int gpt_spike_window_init(gpt_spike_window *w, int64_t cap, gpt_err *err);
void gpt_spike_window_free(gpt_spike_window *w);
/* Forgets every value (after a rollback). */
void gpt_spike_window_clear(gpt_spike_window *w);
void gpt_spike_window_push(gpt_spike_window *w, double loss, double gnorm);
/* (x - mean) / (population) standard deviation of series `which` (a
 * GPT_SPIKE_* value); 0 when the window is not full, or when it has no
 * spread (a standard deviation below 1e-9 of the mean's magnitude), where a
 * z-score means nothing. */
double gpt_spike_window_zscore(const gpt_spike_window *w, int which, double x);
/* 1 when the window is full and loss or gnorm is a spike: its z-score is
 * above its threshold (a threshold of 0 checks nothing); *zl and *zg (may be
 * NULL) get the two z-scores. */
int gpt_spike_window_check(const gpt_spike_window *w, double loss, double gnorm,
			   double loss_threshold, double gnorm_threshold, double *zl, double *zg);

#ifdef __cplusplus
}
#endif

#endif
