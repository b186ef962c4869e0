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
	int64_t G, MB, accum, T, total_steps, step;
	int32_t *inp, *tgt;  /* one micro-batch, host */
	prefetch pf;
	char last_ckpt[4096];
	const volatile sig_atomic_t *stop; /* set by a signal handler of the command */
	gpt_heartbeat *hb;   /* progress for gpt-launch's hang detection; NULL without */
	/* data parallel and ZeRO sharding (single process: comm NULL, 1 and 1) */
	gpt_comm *comm;
	gpt_mesh mesh;
	gpt_mesh_groups groups;
	int rank;
	int64_t replica, replicas; /* this rank's data replica, dp x sharding */
	int64_t LB;                /* samples per replica per step */
	int64_t sh, sh_rank;       /* sharding degree and this rank's place in it */
	int64_t shard;             /* elements per shard of the flat buffers */
	int64_t stage;             /* ZeRO stage when sh > 1, else 0 */
	/* stages 2 and 3: the shard of the gradients (and at 3 of the parameters)
	 * and windows for one unit at a time: 0 embedding, 1 a layer, 2 final */
	void *gshard, *pshard;
	void *gw[3], *pw[3];
	int pw_valid[3];           /* embedding/final parameter windows are current */
} trainer;

/* prefetch.c */
int gpt_tr_prefetch_start(prefetch *p, const gpt_loader *l, int64_t per_batch, int64_t seq1,
			  gpt_err *err);
void gpt_tr_prefetch_request(prefetch *p, int64_t first, int64_t count);
int32_t *gpt_tr_prefetch_wait(prefetch *p, int64_t first, gpt_err *err);
void gpt_tr_prefetch_stop(prefetch *p);

/* zero.c */
int gpt_tr_setup_zero(trainer *tr, gpt_err *err);
void gpt_tr_free_zero(trainer *tr);
int gpt_tr_setup_parallel(trainer *tr, gpt_err *err);
int gpt_tr_sum_over_replicas(trainer *tr, double *sum, int64_t *n, gpt_err *err);
int gpt_tr_reduce_grads(trainer *tr, gpt_err *err);
int gpt_tr_gather_f32(trainer *tr, const float *part, float **out, gpt_err *err);

/* trainer_ckpt.c */
int gpt_tr_save_checkpoint(trainer *tr, gpt_err *err);
int gpt_tr_load_checkpoint(trainer *tr, const char *path, gpt_err *err);

#endif
