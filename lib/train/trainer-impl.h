/* Internal to lib/train: the trainer's state, shared by trainer.c (set-up
 * and the loop), prefetch.c (reading the next batch on a thread), zero.c
 * (data parallel and ZeRO sharding) and trainer_ckpt.c (saving and
 * resuming). Not a public header. */
#ifndef GPT_TRAIN_TRAINER_IMPL_H
#define GPT_TRAIN_TRAINER_IMPL_H

#include "train/train.h"

#include "ckpt/ckpt.h"
#include "comm/comm.h"
#include "cpu/cpu.h"
#include "data/sample.h"
#include "model/qat.h"

#include <pthread.h>

/* A batch being prefetched on a thread while the previous step computes. */
typedef struct prefetch {
	pthread_t tid;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	const gpt_loader *loader;
	int64_t want_first, want_count; /* samples requested; want_count 0: none */
	int64_t have_first;             /* samples in buf, -1: none */
	int32_t *buf[2];
	int filling;                    /* buffer the thread writes next */
	int ready;                      /* 1: buf[filling ^ 1] holds have_first */
	int quit, started;
	int rc;
	gpt_err err;
	int64_t seq1;                   /* seq_len + 1 */
} prefetch;

/* overlap.c: the gradient reduction of the last micro-batch in buckets
 * during its backward (dp and sharding stage 1). */
typedef struct tr_overlap {
	int on;
	int armed;           /* inside a training step: the release hook counts */
	gpt_group *g;        /* the buckets' group: data, or sharding */
	int64_t bucket;      /* elements per bucket, at least */
	int64_t lo;          /* [0, lo): a tied embedding, reduced after the buckets */
	int64_t *seen;       /* per unit: backward passes in this step */
	int frontier;        /* units >= frontier are final */
	int64_t issued;      /* [issued, n_alloc) is in buckets already */
	gpt_comm_req **req;  /* the buckets in flight */
	int nreq, cap;
	int logged;          /* the bucket count of a step was logged */
} tr_overlap;

typedef struct trainer {
	const gpt_config *cfg;
	gpt_log log;
	gpt_backend be;
	gpt_model model;
	gpt_optimizer opt;
	gpt_loader *train, *valid, *test;
	gpt_lr_schedule lr;
	gpt_loss_scaler scaler;
	int mixed;
	gpt_dtype dtype;     /* storage dtype of parameters and activations */
	double last_scale;   /* the loss scale before the last update */
	/* The learning-rate schedule's position: the global steps less the
	 * float16 overflows, on which FleetX's later engine, PaddleNLP's
	 * Trainer and Megatron-LM hold their schedule back; step_lr is the
	 * rate of the last step's update (or of the one it skipped). */
	int64_t lr_steps;
	double step_lr;
	int64_t G, MB, accum, T, total_steps, step;
	/* samples and tokens trained on, over every run that led here (the
	 * steps of each at its own global batch and sequence length), as
	 * Megatron-LM's consumed_train_samples; a skipped update counts too */
	int64_t consumed_samples, consumed_tokens;
	int32_t *inp, *tgt;  /* one micro-batch, host */
	prefetch pf;
	char last_ckpt[4096];
	const volatile sig_atomic_t *stop; /* set by a signal handler of the command */
	gpt_heartbeat *hb;   /* progress for gpt-launch's hang detection; NULL without */
	int out_lock;        /* rank 0: output_dir opened and flock'ed for this run, or -1 */
	size_t out_made;     /* rank 0: the bytes of output_dir naming the first directory this run made, 0: none */
	/* data parallel and ZeRO sharding (single process: comm NULL, 1 and 1) */
	gpt_comm *comm;
	int device;                /* the CUDA device of Global.device gpu */
	gpt_mesh mesh;
	gpt_mesh_groups groups;
	int rank;
	int64_t replica, replicas; /* this rank's data replica, dp x sharding */
	int64_t LB;                /* samples per replica per step */
	int64_t sh, sh_rank;       /* sharding degree and this rank's place in it */
	int64_t shard;             /* elements per shard of the flat buffers */
	int64_t stage;             /* ZeRO stage when sh > 1, else 0 */
	/* fp16 at sharding_stage 3, any degree (gpt_train_params_from_master):
	 * no fp16 parameters kept, the windows are cast from the fp32 master */
	int pmaster;
	/* tensor and pipeline parallelism (1 and 1 without) */
	int64_t tp, tp_rank, pp, pp_rank, chunks;
	gpt_pipe_op *sched;        /* this rank's passes of one step (pp > 1) */
	int64_t n_sched, slots;
	void *pp_grad_in;          /* a received activation gradient (B, T, C) */
	int wte_held_back;         /* pp > 1 at stage >= 2: wte/wpe gradients kept for the step end */
	/* stages 2 and 3: the shard of the gradients (and at 3 of the parameters,
	 * but for pmaster) and windows for one unit at a time: 0 embedding, 1 a
	 * layer, 2 final (with pmaster at one rank only the parameter windows) */
	void *gshard, *pshard;
	void *gw[3], *pw[3];
	int pw_valid[3];           /* embedding/final parameter windows are current */
	/* stages 2 and 3 with Distributed.overlap_grad_reduce (zero.c): a second
	 * layer window, and per window (embedding, layer, layer 2, final) its
	 * reduction in flight, the unit and when it started */
	int zov;
	void *gw_layer2;
	struct {
		gpt_comm_req *req;
		int unit;
		int64_t seq;
	} zpend[4];
	int zflip;
	int64_t zseq;
	tr_overlap ov;             /* Distributed.overlap_grad_reduce */
	struct tr_async *async;    /* a checkpoint being written in the background, or NULL */
	/* faults.c: loss spikes, non-finite steps, failed saves */
	gpt_spike_window spikes;   /* cap 0: Engine.skip_spikes off */
	int64_t rollbacks;         /* made by this run (Engine.nan_max_rollbacks) */
	int64_t saved_step;        /* of the last checkpoint this run saved, 0: none */
} trainer;

/* prefetch.c */
int gpt_tr_prefetch_start(prefetch *p, const gpt_loader *l, int64_t per_batch, int64_t seq1,
			  gpt_err *err);
void gpt_tr_prefetch_request(prefetch *p, int64_t first, int64_t count);
int32_t *gpt_tr_prefetch_wait(prefetch *p, int64_t first, gpt_err *err);
void gpt_tr_prefetch_stop(prefetch *p);

/* zero.c */
int gpt_tr_setup_zero(trainer *tr, gpt_err *err);
/* The elements of the widest layer unit: the size of a layer window. */
int64_t gpt_tr_zero_layer_span(const gpt_model *m);
void gpt_tr_free_zero(trainer *tr);
int gpt_tr_setup_parallel(trainer *tr, gpt_err *err);
int gpt_tr_sum_over_replicas(trainer *tr, double *sum, int64_t *n, gpt_err *err);
int gpt_tr_reduce_grads(trainer *tr, gpt_err *err);
/* Stages 2 and 3: overlap each unit's reduction with the backward of the
 * units before it (gpt_tr_overlap_setup decides); after setup_zero. */
int gpt_tr_zero_overlap_on(trainer *tr, gpt_err *err);
/* Waits for the reductions still in flight, oldest first, and adds them into
 * the shard; with rc set (the step failed) only waits. Returns rc or the
 * first failure. Before gpt_tr_reduce_grads, and before the windows go. */
int gpt_tr_zero_drain(trainer *tr, int rc, gpt_err *err);
/* Sums the tied wte gradient at grads (the flat buffer's start, or a window
 * holding it) over the first and last pipeline stage; nothing elsewhere. */
int gpt_tr_tied_reduce(trainer *tr, void *grads, gpt_err *err);

/* overlap.c */
/* Decides from the configuration whether this run overlaps (a log line
 * says how the gradients are reduced) and installs the model's release
 * hook when it does; after setup_model. */
int gpt_tr_overlap_setup(trainer *tr, gpt_err *err);
void gpt_tr_overlap_free(trainer *tr);
/* At the start of a training step. */
void gpt_tr_overlap_begin(trainer *tr);
/* After the backward passes of a step, in place of gpt_tr_reduce_grads:
 * starts what is left, waits for every bucket and finishes the reduction.
 * With rc set (the step failed) it only waits, and returns rc. */
int gpt_tr_overlap_end(trainer *tr, int rc, gpt_err *err);

/* pipeline.c */
/* One step's forwards and backwards on this stage; the last stage's losses
 * wait on the device (gpt_model_take_losses), *ntok counts its tokens. */
int gpt_tr_pipeline_step(trainer *tr, const int32_t *rows, uint32_t step, float dloss, int64_t *ntok,
			 gpt_err *err);
int gpt_tr_pipeline_eval(trainer *tr, const int32_t *rows, uint32_t step, double *sum, int64_t *ntok,
			 gpt_err *err);
int gpt_tr_sum_over_stages(trainer *tr, double *sum, int64_t *n, gpt_err *err);
/* faults.c: what the loop does when a step or a save goes wrong. */
/* GPT_TR_OVERFLOW: float16 gradients overflowed at a loss scale that can
 * still back off; the scaler skips the update. */
enum { GPT_TR_UPDATED = 0, GPT_TR_NONFINITE = 1, GPT_TR_SPIKE = 2, GPT_TR_OVERFLOW = 3 };
int gpt_tr_faults_setup(trainer *tr, gpt_err *err);
void gpt_tr_faults_free(trainer *tr);
/* The factor Engine.fault_inject puts on the loss and gradients of global
 * step `step` on this rank: 1, spike_factor or NaN. */
double gpt_tr_fault_factor(const trainer *tr, int64_t step);
/* The verdict on the step about to update (global step tr->step + 1) from
 * its global loss and gradient norm, agreed on by every rank: a GPT_TR_*
 * value. A spike is logged here; an updated step joins the spike window. */
int gpt_tr_judge_step(trainer *tr, double loss, double norm, int *verdict, gpt_err *err);
/* After a step (tr->step counts it) that skipped its update for a
 * non-finite loss or gradient: log, stop, or roll back per
 * Engine.nan_policy. 0: training goes on (at tr->step, which a rollback
 * leaves where it was). */
int gpt_tr_nonfinite(trainer *tr, double loss, gpt_err *err);
/* Saves a checkpoint of tr->step. A failure that every rank agrees on is
 * logged with the last complete checkpoint; it ends the run (non-zero)
 * under Engine.save_load.on_save_error: stop or when `last` (the run ends
 * with this save), else training goes on and 0 is returned. */
int gpt_tr_save(trainer *tr, int last, gpt_err *err);
/* trainer.c: 1 when the run saves after global step `step` (save_steps,
 * the last step, save_epoch), not counting a stop signal's save. */
int gpt_tr_saves_at(const trainer *tr, int64_t step);
/* trainer_ckpt.c: before training, on every rank: a step directory in
 * output_dir where one of the run's saves goes and that the save would
 * refuse (a later checkpoint of a run resumed from an earlier one), found
 * now rather than when training reaches it; rank 0 names it. */
int gpt_tr_check_saves(trainer *tr, gpt_err *err);
/* The save of global step `step` failed on every rank's word (why, code:
 * this rank's account): the [checkpoint] error line, then what
 * Engine.save_load.on_save_error says, as gpt_tr_save. */
int gpt_tr_save_failed(trainer *tr, int64_t step, const char *why, int code, int last, gpt_err *err);

/* trainer_ckpt.c */
/* Starts (async_save) or makes a checkpoint of tr->step; a save still in
 * flight must be finished first (gpt_tr_save does). */
int gpt_tr_save_checkpoint(trainer *tr, gpt_err *err);
/* The resolved configuration as config.yaml holds it, malloc'd; NULL on failure. */
char *gpt_tr_config_yaml(const trainer *tr, gpt_err *err);
int gpt_tr_load_checkpoint(trainer *tr, const char *path, gpt_err *err);
/* Once per step end, on every rank: publishes a background save that every
 * rank has finished writing (one all-reduce while a save is in flight). */
int gpt_tr_ckpt_poll(trainer *tr, gpt_err *err);
/* Waits for a background save and publishes it when rc is 0; with rc set
 * only joins and drops it. A save that fails goes to gpt_tr_save_failed
 * (`last`: the run ends after it). Returns rc, or what the failure ends in. */
int gpt_tr_ckpt_finish(trainer *tr, int rc, int last, gpt_err *err);

/* trainer_qat.c */
int gpt_tr_setup_qat(trainer *tr, gpt_err *err);

#endif
