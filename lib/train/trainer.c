/* The training loop of one process: data, micro-batches, AdamW, schedule,
 * clipping, evaluation, log lines, checkpoints and resume. */
#include "train/train.h"

#include "ckpt/ckpt.h"
#include "comm/comm.h"
#include "cpu/cpu.h"
#include "data/sample.h"

#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

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

/* ---- prefetch ---- */

static void *prefetch_main(void *arg)
{
	prefetch *p = arg;
	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (!p->quit && p->want_count == 0)
			pthread_cond_wait(&p->cv, &p->mu);
		if (p->quit)
			break;
		int64_t first = p->want_first, count = p->want_count;
		int32_t *dst = p->buf[p->filling];
		p->want_count = 0;
		pthread_mutex_unlock(&p->mu);
		int rc = 0;
		gpt_err err = {0};
		for (int64_t i = 0; i < count && !rc; i++)
			rc = gpt_loader_sample(p->loader, first + i, dst + i * p->seq1, &err);
		pthread_mutex_lock(&p->mu);
		p->rc = rc;
		p->err = err;
		p->have_first = first;
		p->filling ^= 1;
		p->ready = 1;
		pthread_cond_broadcast(&p->cv);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

static int prefetch_start(prefetch *p, const gpt_loader *l, int64_t per_batch, int64_t seq1,
			  gpt_err *err)
{
	memset(p, 0, sizeof *p);
	p->loader = l;
	p->seq1 = seq1;
	p->have_first = -1;
	for (int i = 0; i < 2; i++)
		if (!(p->buf[i] = gpt_malloc((size_t)(per_batch * seq1) * 4, "batch buffer", err)))
			return GPT_EINTERNAL;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	int e = pthread_create(&p->tid, NULL, prefetch_main, p);
	if (e)
		return gpt_err_errno(err, GPT_EINTERNAL, e, "cannot start the data prefetch thread");
	p->started = 1;
	return 0;
}

static void prefetch_request(prefetch *p, int64_t first, int64_t count)
{
	pthread_mutex_lock(&p->mu);
	p->want_first = first;
	p->want_count = count;
	p->ready = 0;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

/* Waits for the requested batch; returns its buffer. */
static int32_t *prefetch_wait(prefetch *p, int64_t first, gpt_err *err)
{
	pthread_mutex_lock(&p->mu);
	while (!p->ready)
		pthread_cond_wait(&p->cv, &p->mu);
	int32_t *b = p->buf[p->filling ^ 1];
	int rc = p->rc;
	if (rc && err)
		*err = p->err;
	if (!rc && p->have_first != first) {
		gpt_err_set(err, GPT_EINTERNAL, "prefetch: got samples from %lld, wanted %lld",
			    (long long)p->have_first, (long long)first);
		rc = GPT_EINTERNAL;
	}
	pthread_mutex_unlock(&p->mu);
	return rc ? NULL : b;
}

static void prefetch_stop(prefetch *p)
{
	if (p->started) {
		pthread_mutex_lock(&p->mu);
		p->quit = 1;
		pthread_cond_broadcast(&p->cv);
		pthread_mutex_unlock(&p->mu);
		pthread_join(p->tid, NULL);
		pthread_mutex_destroy(&p->mu);
		pthread_cond_destroy(&p->cv);
	}
	free(p->buf[0]);
	free(p->buf[1]);
	memset(p, 0, sizeof *p);
}

/* ---- set-up ---- */

static int check_supported(const gpt_config *cfg, gpt_err *err)
{
	const char *dev = cfg->global.device ? cfg->global.device : "cpu";
	if (strcmp(dev, "cpu") != 0)
		return gpt_err_set(err, GPT_EUSAGE,
				   "Global.device: '%s': this build trains on the CPU only (the CUDA training backend is not built yet); use -o Global.device=cpu",
				   dev);
	if (cfg->distributed.mp_degree != 1 || cfg->distributed.pp_degree != 1)
		return gpt_err_set(err, GPT_EUSAGE,
				   "Distributed: mp_degree %lld x pp_degree %lld: tensor and pipeline parallelism are not in this build; train with dp_degree and sharding only",
				   (long long)cfg->distributed.mp_degree, (long long)cfg->distributed.pp_degree);

	/* Settings this trainer has no way to honour are refused, not ignored. */
	if (cfg->mixed && cfg->engine.mix_precision.level &&
	    strcmp(cfg->engine.mix_precision.level, "O1") == 0)
		return gpt_err_set(err, GPT_EUSAGE,
				   "Engine.mix_precision.level: O1 (fp32 parameters, 16-bit compute) is not supported; the CPU backend trains O2 (16-bit parameters, fp32 master weights): use -o Engine.mix_precision.level=O2");
	if (cfg->model.no_recompute_layers.n > 0)
		return gpt_err_set(err, GPT_EUSAGE,
				   "Model.no_recompute_layers: recompute applies to every layer in this build; leave the list empty");
	if (cfg->model.sequence_parallel)
		return gpt_err_set(err, GPT_EUSAGE,
				   "Model.sequence_parallel: needs tensor parallelism, which this build does not have; set it to False");
	if (cfg->model.fused_linear)
		return gpt_err_set(err, GPT_EUSAGE,
				   "Model.fused_linear: a CUDA GEMM epilogue; the CPU backend has none; set it to False");
	if (!cfg->data.train.drop_last || !cfg->data.eval.drop_last)
		return gpt_err_set(err, GPT_EUSAGE,
				   "Data.*.sampler.drop_last: False is not supported; every step takes a full global batch");
	if (cfg->distributed.sharding.reduce_overlap || cfg->distributed.sharding.broadcast_overlap)
		return gpt_err_set(err, GPT_EUSAGE,
				   "Distributed.sharding.reduce_overlap/broadcast_overlap: the shm backend's collectives block, so nothing can overlap on the CPU; set them to False");
	if (!cfg->data.train.dataset.input_dir || !*cfg->data.train.dataset.input_dir)
		return gpt_err_set(err, GPT_EUSAGE,
				   "Data.Train.dataset.input_dir: not set; name a dataset made by gpt-preprocess");
	return 0;
}

/* ---- ZeRO stages 2 and 3: one unit's parameters and gradients at a time ---- */

static int win_slot(const gpt_model *m, int unit)
{
	return unit == 0 ? 0 : unit == m->n_units - 1 ? 2 : 1;
}

/* The part of [a, b) this rank's shard holds, as [x0, x1). */
static int shard_overlap(const trainer *tr, int64_t a, int64_t b, int64_t *x0, int64_t *x1)
{
	*x0 = a > tr->opt.begin ? a : tr->opt.begin;
	*x1 = b < tr->opt.end ? b : tr->opt.end;
	return *x1 > *x0;
}

/* Stage 3: the whole of unit u's parameters in window w: each rank puts in
 * its shard's part, zeros elsewhere, and a sum over the sharding group fills
 * the rest (adding zeros is exact in every dtype). */
static int gather_unit(trainer *tr, int u, void *w, gpt_err *err)
{
	gpt_model *m = &tr->model;
	gpt_backend *be = m->be;
	int64_t es = (int64_t)gpt_dtype_size(be->dtype), a = m->unit_begin[u], b = m->unit_end[u], x0, x1;
	int rc = be->ops->zero(be, w, (size_t)((b - a) * es), err);
	if (!rc && shard_overlap(tr, a, b, &x0, &x1))
		rc = be->ops->copy(be, (char *)w + (x0 - a) * es, (char *)tr->pshard + (x0 - tr->opt.begin) * es,
				   (size_t)((x1 - x0) * es), err);
	if (!rc)
		rc = gpt_comm_all_reduce(tr->groups.g[GPT_MESH_SHARDING], w, w, b - a, be->dtype,
					 GPT_REDUCE_SUM, err);
	return rc;
}

static int zero_acquire(void *ctx, gpt_model *m, int u, int backward, gpt_err *err)
{
	trainer *tr = ctx;
	gpt_backend *be = m->be;
	int k = win_slot(m, u), rc = 0;
	if (tr->stage >= 3 && (k == 1 || !tr->pw_valid[k])) {
		rc = gather_unit(tr, u, tr->pw[k], err);
		tr->pw_valid[k] = k != 1;
		m->pwin[u] = tr->pw[k];
	}
	if (!rc && backward) {
		m->gwin[u] = tr->gw[k];
		rc = be->ops->zero(be, tr->gw[k],
				   (size_t)(m->unit_end[u] - m->unit_begin[u]) * gpt_dtype_size(be->dtype), err);
	}
	return rc;
}

/* After the backward of unit u its gradients of this micro-batch are whole:
 * sum them over the replicas and add this rank's part into its shard. */
static int zero_release(void *ctx, gpt_model *m, int u, int backward, gpt_err *err)
{
	trainer *tr = ctx;
	gpt_backend *be = m->be;
	int k = win_slot(m, u), rc = 0;
	if (tr->stage >= 3 && k == 1)
		m->pwin[u] = NULL;
	if (!backward)
		return 0;
	int64_t es = (int64_t)gpt_dtype_size(be->dtype), a = m->unit_begin[u], b = m->unit_end[u], x0, x1;
	rc = gpt_comm_all_reduce(tr->groups.g[GPT_MESH_DATA], tr->gw[k], tr->gw[k], b - a, be->dtype,
				 GPT_REDUCE_SUM, err);
	if (!rc && shard_overlap(tr, a, b, &x0, &x1)) {
		void *acc = (char *)tr->gshard + (x0 - tr->opt.begin) * es;
		rc = be->ops->residual_fwd(be, acc, acc, (char *)tr->gw[k] + (x0 - a) * es, x1 - x0, err);
	}
	m->gwin[u] = NULL;
	return rc;
}

/* The shard buffers and windows of stages 2 and 3, and the hooks. */
static int setup_zero(trainer *tr, gpt_err *err)
{
	gpt_model *m = &tr->model;
	gpt_backend *be = m->be;
	size_t es = gpt_dtype_size(be->dtype);
	int64_t span[3] = {m->unit_end[0] - m->unit_begin[0], 0,
			   m->unit_end[m->n_units - 1] - m->unit_begin[m->n_units - 1]};
	for (int u = 1; u < m->n_units - 1; u++)
		if (m->unit_end[u] - m->unit_begin[u] > span[1])
			span[1] = m->unit_end[u] - m->unit_begin[u];
	int rc = 0;
	for (int k = 0; k < 3 && !rc; k++) {
		tr->gw[k] = be->ops->alloc(be, (size_t)(span[k] ? span[k] : 1) * es, "gradient window", err);
		if (tr->gw[k] && tr->stage >= 3)
			tr->pw[k] = be->ops->alloc(be, (size_t)(span[k] ? span[k] : 1) * es, "parameter window", err);
		rc = tr->gw[k] && (tr->stage < 3 || tr->pw[k]) ? 0 : err->code;
	}
	if (!rc) {
		tr->gshard = be->ops->alloc(be, (size_t)tr->shard * es, "gradient shard", err);
		rc = tr->gshard ? be->ops->zero(be, tr->gshard, (size_t)tr->shard * es, err) : err->code;
	}
	if (!rc && tr->stage >= 3) {
		tr->pshard = be->ops->alloc(be, (size_t)tr->shard * es, "parameter shard", err);
		rc = tr->pshard ? be->ops->zero(be, tr->pshard, (size_t)tr->shard * es, err) : err->code;
	}
	m->hooks = (gpt_model_hooks){.ctx = tr, .acquire = zero_acquire, .release = zero_release};
	return rc;
}

static void free_zero(trainer *tr)
{
	gpt_backend *be = tr->model.be;
	if (!be)
		return;
	void *p[] = {tr->gshard, tr->pshard, tr->gw[0], tr->gw[1], tr->gw[2], tr->pw[0], tr->pw[1], tr->pw[2]};
	for (size_t i = 0; i < sizeof p / sizeof *p; i++)
		if (p[i])
			be->ops->free(be, p[i]);
}

static int setup_model(trainer *tr, gpt_err *err)
{
	const gpt_config *cfg = tr->cfg;
	gpt_model_shape s;
	gpt_model_shape_from_config(cfg, &s);
	gpt_layout lo;
	gpt_layout_single(&lo, &s);
	gpt_model_opts mo = {
		.batch = tr->MB,
		.seq_len = tr->T,
		.hidden_dropout = (float)cfg->model.hidden_dropout_prob,
		.attn_dropout = (float)cfg->model.attention_probs_dropout_prob,
		.seed = (uint32_t)cfg->global.seed,
		.flat_multiple = tr->sh,
		.no_full_grads = tr->stage >= 2,
		.no_full_params = tr->stage >= 3,
	};
	if (cfg->model.use_recompute) {
		const char *g = cfg->model.recompute_granularity ? cfg->model.recompute_granularity : "full";
		if (gpt_recompute_parse(g, &mo.recompute))
			return gpt_err_set(err, GPT_EUSAGE, "Model.recompute_granularity: '%s' is not full, only_attn or core_attn", g);
	}
	int rc = gpt_backend_cpu_init(&tr->be, tr->dtype, 0, err);
	if (!rc)
		rc = gpt_model_init(&tr->model, &tr->be, &s, &lo, &mo, err);
	/* Under sharding each rank keeps the optimizer state of one shard. */
	tr->shard = tr->model.n_alloc / tr->sh;
	tr->opt.begin = tr->sh_rank * tr->shard; /* for setup_zero, before the optimizer */
	tr->opt.end = tr->opt.begin + tr->shard;
	if (!rc && tr->stage >= 2)
		rc = setup_zero(tr, err);
	if (!rc) {
		int64_t end = tr->opt.end < tr->model.n_flat ? tr->opt.end : tr->model.n_flat;
		rc = tr->stage >= 3
			? gpt_model_init_weights_range(&tr->model, (uint64_t)cfg->global.seed,
						       cfg->model.initializer_range, tr->pshard,
						       tr->opt.begin, end > tr->opt.begin ? end : tr->opt.begin, err)
			: gpt_model_init_weights(&tr->model, (uint64_t)cfg->global.seed,
						 cfg->model.initializer_range, err);
	}
	if (!rc)
		rc = gpt_optimizer_init(&tr->opt, &tr->model, tr->sh_rank * tr->shard,
					(tr->sh_rank + 1) * tr->shard, tr->pshard, tr->gshard, cfg->optimizer.beta1,
					cfg->optimizer.beta2, cfg->optimizer.epsilon,
					cfg->optimizer.weight_decay, err);
	return rc;
}

static int setup_schedule(trainer *tr, gpt_err *err)
{
	const gpt_config *cfg = tr->cfg;
	tr->lr = (gpt_lr_schedule){
		.max_lr = cfg->optimizer.lr.max_lr,
		.min_lr = cfg->optimizer.lr.min_lr,
		.warmup_rate = cfg->optimizer.lr.warmup_rate,
		.decay_steps = cfg->optimizer.lr.decay_steps > 0 ? cfg->optimizer.lr.decay_steps : tr->total_steps,
	};
	/* An explicit warmup_steps wins over the rate. */
	if (cfg->optimizer.lr.warmup_steps > 0 && tr->lr.decay_steps > 0)
		tr->lr.warmup_rate = (double)cfg->optimizer.lr.warmup_steps / (double)tr->lr.decay_steps;
	const char *name = cfg->optimizer.lr.name ? cfg->optimizer.lr.name : "CosineAnnealingWithWarmupDecay";
	if (strcmp(name, "CosineAnnealingWithWarmupDecay") != 0)
		return gpt_err_set(err, GPT_EUSAGE,
				   "Optimizer.lr.name: '%s' is not supported; use CosineAnnealingWithWarmupDecay", name);
	int rc = gpt_lr_check(&tr->lr, err);
	/* fp16 needs a (dynamic) loss scale; fp32 and bf16 have fp32's range. */
	int fp16 = tr->dtype == GPT_DTYPE_F16;
	gpt_loss_scaler_init(&tr->scaler, fp16 ? cfg->engine.mix_precision.scale_loss : 1.0, fp16);
	return rc;
}

static int open_split(const gpt_config_data *d, int which, int64_t seq_len, int64_t samples,
		      uint64_t seed, gpt_loader **out, gpt_err *err)
{
	const char *split = d->dataset.split ? d->dataset.split : "949,50,1";
	const char *what = which == 0 ? "Data.Train" : "Data.Eval";
	if (!d->dataset.input_dir || !*d->dataset.input_dir)
		return gpt_err_set(err, GPT_EUSAGE, "%s.dataset.input_dir: not set; name a dataset made by gpt-preprocess",
				   what);
	int rc = gpt_loader_open(out, d->dataset.input_dir, split, which, (int)seq_len, samples, seed,
				 d->shuffle, err);
	return rc ? gpt_err_prefix(err, "%s.dataset.input_dir", what) : 0;
}

static int setup_data(trainer *tr, gpt_err *err)
{
	const gpt_config *cfg = tr->cfg;
	uint64_t seed = (uint64_t)cfg->global.seed;
	int64_t steps = cfg->engine.max_steps;
	int rc = open_split(&cfg->data.train, 0, tr->T, steps * tr->G, seed, &tr->train, err);
	if (rc)
		return rc;
	int64_t per_epoch = gpt_loader_epoch_samples(tr->train);
	if (per_epoch < tr->G)
		return gpt_err_set(err, GPT_EDATA,
				   "%s: the training split holds %lld samples of %lld tokens, fewer than one global batch of %lld; use more data or a smaller Global.global_batch_size",
				   cfg->data.train.dataset.input_dir, (long long)per_epoch,
				   (long long)tr->T + 1, (long long)tr->G);
	/* FleetX sizes its dataset by max_steps, so its default of one epoch
	 * never ends a run early; an epoch count given explicitly does. */
	int k = gpt_config_key_find("Engine.num_train_epochs");
	if (k >= 0 && gpt_config_given(cfg, k)) {
		int64_t by_epochs = cfg->engine.num_train_epochs * (per_epoch / tr->G);
		if (by_epochs < steps)
			steps = by_epochs;
	}
	tr->total_steps = steps;
	if (cfg->engine.eval_freq > 0 && cfg->engine.eval_iters > 0) {
		rc = open_split(&cfg->data.eval, 1, tr->T, cfg->engine.eval_iters * tr->G, seed + 1,
				&tr->valid, err);
		if (rc)
			return rc;
	}
	/* The test split is evaluated after training; a split without test
	 * documents (a small corpus, or a third weight of 0) skips that. */
	if (cfg->engine.test_iters > 0) {
		gpt_err terr = {0};
		if (open_split(&cfg->data.eval, 2, tr->T, cfg->engine.test_iters * tr->G, seed + 2,
			       &tr->test, &terr))
			gpt_log_printf(&tr->log, GPT_LOG_WARNING, "no test evaluation after training: %s",
				       terr.msg);
	}
	tr->inp = gpt_malloc((size_t)(tr->MB * tr->T) * 4, "inputs", err);
	tr->tgt = gpt_malloc((size_t)(tr->MB * tr->T) * 4, "targets", err);
	if (!tr->inp || !tr->tgt)
		return GPT_EINTERNAL;
	return prefetch_start(&tr->pf, tr->train, tr->LB, tr->T + 1, err);
}

/* Splits sample rows (T + 1 tokens) into inputs and next-token targets. */
static void split_rows(trainer *tr, const int32_t *rows)
{
	for (int64_t b = 0; b < tr->MB; b++)
		for (int64_t t = 0; t < tr->T; t++) {
			tr->inp[b * tr->T + t] = rows[b * (tr->T + 1) + t];
			tr->tgt[b * tr->T + t] = rows[b * (tr->T + 1) + t + 1];
		}
}

/* ---- checkpoints ---- */

static int download_flat(gpt_backend *be, const void *src, size_t bytes, void **out, gpt_err *err)
{
	*out = gpt_malloc(bytes, "checkpoint staging", err);
	if (!*out)
		return GPT_EINTERNAL;
	return be->ops->download(be, *out, src, bytes, err);
}

static char *state_json(trainer *tr)
{
	json_t *st = json_pack("{s:I, s:I, s:f, s:{s:f, s:I, s:I}, s:I, s:I, s:{s:I, s:I, s:I, s:I, s:I}, s:s}",
			       "step", (json_int_t)tr->step,
			       "consumed_samples", (json_int_t)(tr->step * tr->G),
			       "lr", gpt_lr_at(&tr->lr, tr->step),
			       "loss_scale", "scale", tr->scaler.scale, "good_steps",
			       (json_int_t)tr->scaler.good_steps, "bad_steps", (json_int_t)tr->scaler.bad_steps,
			       "optimizer_steps", (json_int_t)tr->opt.t,
			       "seed", (json_int_t)tr->cfg->global.seed,
			       "layout", "world_size", (json_int_t)tr->cfg->world_size,
			       "dp", (json_int_t)tr->cfg->distributed.dp_degree, "mp", (json_int_t)1,
			       "pp", (json_int_t)1, "sharding", (json_int_t)tr->sh,
			       "gptkit_version", GPT_VERSION);
	char *text = st ? json_dumps(st, JSON_INDENT(2)) : NULL;
	json_decref(st);
	return text;
}

/* The whole flat fp32 optimizer buffer whose [begin, end) this rank holds:
 * gathered over the shard group under sharding, else just downloaded. */
static int gather_f32(trainer *tr, const float *part, float **out, gpt_err *err)
{
	gpt_backend *be = tr->model.be;
	size_t n = (size_t)tr->model.n_alloc;
	*out = gpt_malloc(n * 4, "checkpoint staging", err);
	if (!*out)
		return GPT_EINTERNAL;
	if (tr->sh == 1)
		return be->ops->download(be, *out, part, n * 4, err);
	/* CPU backend memory is host memory, which the shm backend works on */
	return gpt_comm_all_gather(tr->groups.g[GPT_MESH_SHARDING], part, *out, tr->shard, GPT_DTYPE_F32, err);
}

static int save_checkpoint(trainer *tr, gpt_err *err)
{
	gpt_model *m = &tr->model;
	gpt_backend *be = m->be;
	double t0 = gpt_now_s();
	void *w = NULL;
	float *ea = NULL, *eas = NULL;
	size_t es = gpt_dtype_size(be->dtype);
	/* The weights are saved in fp32: the master copy when there is one, so a
	 * resumed run continues from exactly the same state. Sharded optimizer
	 * state is gathered from the shard group (every rank takes part); rank 0
	 * writes. */
	int rc = tr->opt.master ? gather_f32(tr, tr->opt.master, (float **)&w, err)
		 : tr->pshard	? gather_f32(tr, tr->pshard, (float **)&w, err) /* fp32: no master */
				: download_flat(be, m->params, (size_t)m->n_flat * es, &w, err);
	if (tr->opt.master)
		es = 4;
	if (!rc)
		rc = gather_f32(tr, tr->opt.exp_avg, &ea, err);
	if (!rc)
		rc = gather_f32(tr, tr->opt.exp_avg_sq, &eas, err);
	if (!rc && tr->rank != 0) {
		free(w);
		free(ea);
		free(eas);
		return 0;
	}
	int64_t held = 0;
	for (int64_t i = 0; i < m->n_table; i++)
		held += m->offset[i] >= 0;
	gpt_ckpt_piece *pc = rc ? NULL : gpt_calloc((size_t)(3 * held), sizeof *pc, "checkpoint pieces", err);
	char (*names)[64] = pc ? gpt_calloc((size_t)(3 * held), 64, "names", err) : NULL;
	if (!rc && !names)
		rc = GPT_EINTERNAL;
	int n = 0;
	for (int64_t i = 0; !rc && i < m->n_table; i++) {
		if (m->offset[i] < 0)
			continue;
		const gpt_param_info *p = &m->table[i];
		void *src[3] = {(char *)w + m->offset[i] * (int64_t)es, (float *)ea + m->offset[i],
				(float *)eas + m->offset[i]};
		const char *pre[3] = {"", "optim.exp_avg.", "optim.exp_avg_sq."};
		for (int k = 0; k < 3; k++) {
			snprintf(names[n], 64, "%s%s", pre[k], p->name);
			pc[n] = (gpt_ckpt_piece){.tensor = names[n], .dtype = k || tr->opt.master ? GPT_DTYPE_F32 : be->dtype,
						 .ndim = p->ndim, .box = m->box[i], .data = src[k]};
			memcpy(pc[n].shape, p->shape, sizeof p->shape);
			n++;
		}
	}
	char *state = rc ? NULL : state_json(tr);
	char *yaml = NULL;
	size_t yl = 0;
	if (!rc && state) {
		FILE *mf = open_memstream(&yaml, &yl);
		rc = mf ? gpt_config_write_yaml(tr->cfg, mf, err) : gpt_err_nomem(err, 0, "config text");
		if (mf)
			fclose(mf);
	} else if (!rc) {
		rc = gpt_err_nomem(err, 0, "state.json");
	}
	int64_t bytes = 0;
	if (!rc)
		rc = gpt_ckpt_save(tr->cfg->engine.save_load.output_dir, tr->step, pc, n, state,
				   yaml ? yaml : "", tr->last_ckpt, sizeof tr->last_ckpt, &bytes, err);
	if (!rc) {
		char line[4200];
		gpt_ckpt_line_format(line, sizeof line, tr->step, tr->last_ckpt, bytes, gpt_now_s() - t0);
		gpt_log_printf(&tr->log, GPT_LOG_INFO, "%s", line);
	}
	free(yaml);
	free(state);
	free(names);
	free(pc);
	free(w);
	free(ea);
	free(eas);
	return rc;
}

static int json_int(json_t *o, const char *k, int64_t *out)
{
	json_t *v = json_object_get(o, k);
	if (!json_is_integer(v))
		return -1;
	*out = json_integer_value(v);
	return 0;
}

/* Resumes from a checkpoint directory (or a directory holding `latest`). */
static int load_checkpoint(trainer *tr, const char *path, gpt_err *err)
{
	gpt_ckpt *ck;
	int rc = gpt_ckpt_open(&ck, path, err);
	if (rc)
		return gpt_err_prefix(err, "cannot resume");
	gpt_model *m = &tr->model;
	gpt_backend *be = m->be;
	/* Whole flat fp32 images of the weights and moments; each rank then
	 * keeps the range its optimizer holds (a shard under sharding). */
	size_t n_all = (size_t)m->n_alloc;
	float *full[3] = {gpt_calloc(n_all, 4, "checkpoint staging", err),
			  gpt_calloc(n_all, 4, "checkpoint staging", err),
			  gpt_calloc(n_all, 4, "checkpoint staging", err)};
	if (!full[0] || !full[1] || !full[2])
		rc = GPT_EINTERNAL;
	for (int64_t i = 0; !rc && i < m->n_table; i++) {
		if (m->offset[i] < 0)
			continue;
		const gpt_param_info *p = &m->table[i];
		char name[96];
		const char *pre[3] = {"", "optim.exp_avg.", "optim.exp_avg_sq."};
		for (int k = 0; k < 3 && !rc; k++) {
			snprintf(name, sizeof name, "%s%s", pre[k], p->name);
			rc = gpt_ckpt_read_box(ck, name, GPT_DTYPE_F32, p->ndim, p->shape, &m->box[i],
					       full[k] + m->offset[i], err);
		}
	}
	int64_t b0 = tr->opt.begin, cnt = tr->opt.end - tr->opt.begin;
	if (!rc)
		rc = be->ops->upload(be, tr->opt.exp_avg, full[1] + b0, (size_t)cnt * 4, err);
	if (!rc)
		rc = be->ops->upload(be, tr->opt.exp_avg_sq, full[2] + b0, (size_t)cnt * 4, err);
	if (!rc && tr->opt.master)
		rc = be->ops->upload(be, tr->opt.master, full[0] + b0, (size_t)cnt * 4, err);
	/* the parameters: fp32, or the master weights rounded; whole, or the
	 * shard at stage 3 */
	if (!rc && be->dtype != GPT_DTYPE_F32)
		rc = gpt_convert(full[1], be->dtype, full[0], GPT_DTYPE_F32, n_all, err);
	size_t pes = gpt_dtype_size(be->dtype);
	const char *img = (const char *)(be->dtype == GPT_DTYPE_F32 ? full[0] : full[1]);
	if (!rc)
		rc = tr->pshard ? be->ops->upload(be, tr->pshard, img + b0 * (int64_t)pes, (size_t)cnt * pes, err)
				: be->ops->upload(be, m->params, img, n_all * pes, err);
	for (int k = 0; k < 3; k++)
		free(full[k]);

	json_error_t je;
	json_t *st = rc ? NULL : json_loads(gpt_ckpt_state_json(ck), 0, &je);
	int64_t step = 0, t = 0, good = 0, bad = 0;
	json_t *ls = json_object_get(st, "loss_scale");
	if (!rc && (!st || json_int(st, "step", &step) || json_int(st, "optimizer_steps", &t) ||
		    json_int(ls, "good_steps", &good) || json_int(ls, "bad_steps", &bad) ||
		    !json_is_number(json_object_get(ls, "scale"))))
		rc = gpt_err_set(err, GPT_EDATA, "%s/state.json: expected step, optimizer_steps and loss_scale",
				 gpt_ckpt_path(ck));
	if (!rc) {
		tr->step = step;
		tr->opt.t = t;
		tr->scaler.scale = json_number_value(json_object_get(ls, "scale"));
		tr->scaler.good_steps = good;
		tr->scaler.bad_steps = bad;
		snprintf(tr->last_ckpt, sizeof tr->last_ckpt, "%s", gpt_ckpt_path(ck));
		gpt_log_printf(&tr->log, GPT_LOG_INFO, "resumed from %s at global step %lld",
			       gpt_ckpt_path(ck), (long long)step);
	}
	json_decref(st);
	gpt_ckpt_close(ck);
	return rc;
}

/* ---- steps ---- */

/* Adds a loss sum and a token count over the data replicas. */
static int sum_over_replicas(trainer *tr, double *sum, int64_t *n, gpt_err *err)
{
	if (tr->replicas == 1)
		return 0;
	float v[2] = {(float)*sum, (float)*n};
	int rc = gpt_comm_all_reduce(tr->groups.g[GPT_MESH_DATA], v, v, 2, GPT_DTYPE_F32,
				     GPT_REDUCE_SUM, err);
	*sum = v[0];
	*n = (int64_t)v[1];
	return rc;
}

/* Each replica evaluates its share of every batch of `l`; the sums are
 * added. The line is the [eval] line, or the same with [test]. */
static int evaluate(trainer *tr, const gpt_loader *l, int64_t iters, int test, gpt_err *err)
{
	double t0 = gpt_now_s(), sum = 0;
	int64_t ntok = 0, first = tr->replica * tr->LB;
	int32_t *rows = gpt_malloc((size_t)(tr->MB * (tr->T + 1)) * 4, "eval batch", err);
	int rc = rows ? 0 : GPT_EINTERNAL;
	for (int64_t it = 0; it < iters && !rc; it++)
		for (int64_t j = 0; j < tr->accum && !rc; j++) {
			for (int64_t b = 0; b < tr->MB && !rc; b++)
				rc = gpt_loader_sample(l, (it * tr->G + first + j * tr->MB + b) % gpt_loader_size(l),
						       rows + b * (tr->T + 1), err);
			split_rows(tr, rows);
			double s = 0;
			int64_t n = 0;
			if (!rc)
				rc = gpt_model_forward(&tr->model, tr->inp, tr->tgt, 0, (uint32_t)tr->step, 0, &s, &n, err);
			sum += s;
			ntok += n;
		}
	free(rows);
	if (!rc)
		rc = sum_over_replicas(tr, &sum, &ntok, err);
	if (rc)
		return gpt_err_prefix(err, "%s at global step %lld", test ? "test" : "evaluation",
				      (long long)tr->step);
	gpt_eval_line e = {.step = tr->step, .epoch = 0, .batch = tr->step,
			   .loss = ntok ? sum / (double)ntok : 0,
			   .avg_eval_cost = iters ? (gpt_now_s() - t0) / (double)iters : 0};
	char line[512];
	gpt_eval_line_format(line, sizeof line, &e);
	if (test)
		memcpy(line, "[test]", 6); /* same width as "[eval]" */
	gpt_log_printf(&tr->log, GPT_LOG_INFO, "%s", line);
	return 0;
}

/* Sums the gradients over the replicas: all-reduce without sharding; with
 * it, reduce-scatter over the shard group (each rank keeps the sum of its
 * shard) then all-reduce of the shard over dp. */
static int reduce_grads(trainer *tr, gpt_err *err)
{
	gpt_model *m = &tr->model;
	gpt_dtype t = m->be->dtype;
	if (tr->stage >= 2)
		return 0; /* done unit by unit during the backward (zero_release) */
	if (tr->sh == 1)
		return tr->replicas == 1 ? 0
					 : gpt_comm_all_reduce(tr->groups.g[GPT_MESH_DATA], m->grads, m->grads,
							       m->n_alloc, t, GPT_REDUCE_SUM, err);
	void *mine = (char *)m->grads + tr->opt.begin * (int64_t)gpt_dtype_size(t);
	int rc = gpt_comm_reduce_scatter(tr->groups.g[GPT_MESH_SHARDING], m->grads, mine, tr->shard, t,
					 GPT_REDUCE_SUM, err);
	if (!rc && tr->mesh.dp > 1)
		rc = gpt_comm_all_reduce(tr->groups.g[GPT_MESH_DP], mine, mine, tr->shard, t,
					 GPT_REDUCE_SUM, err);
	return rc;
}

/* One optimizer step over this replica's part of the global batch in
 * `rows`; *loss gets the mean over the whole global batch. */
static int train_step(trainer *tr, const int32_t *rows, double *loss, int *skipped, gpt_err *err)
{
	gpt_model *m = &tr->model;
	int rc = gpt_model_zero_grad(m, err);
	if (!rc && tr->gshard)
		rc = m->be->ops->zero(m->be, tr->gshard, (size_t)tr->shard * gpt_dtype_size(m->be->dtype), err);
	double sum = 0;
	int64_t ntok = 0;
	/* every token of the global batch weighs the same, whichever rank has it */
	float dloss = (float)(tr->scaler.scale / (double)(tr->G * tr->T));
	uint32_t step = (uint32_t)(tr->step + 1);
	for (int64_t j = 0; j < tr->accum && !rc; j++) {
		split_rows(tr, rows + j * tr->MB * (tr->T + 1));
		double s = 0;
		int64_t n = 0;
		/* sample0: the global index of this micro-batch's first sample,
		 * which keys dropout the same in every layout */
		rc = gpt_model_forward(m, tr->inp, tr->tgt, 1, step, tr->replica * tr->LB + j * tr->MB,
				       &s, &n, err);
		if (!rc)
			rc = gpt_model_backward(m, dloss, err);
		sum += s;
		ntok += n;
	}
	if (!rc)
		rc = sum_over_replicas(tr, &sum, &ntok, err);
	if (!rc)
		rc = reduce_grads(tr, err);
	double sumsq = 0;
	if (!rc)
		rc = gpt_optimizer_grad_sumsq(&tr->opt, &sumsq, err);
	/* the shards are disjoint, so their parts add to the global norm */
	if (!rc && tr->sh > 1) {
		float v = (float)sumsq;
		rc = gpt_comm_all_reduce(tr->groups.g[GPT_MESH_SHARDING], &v, &v, 1, GPT_DTYPE_F32,
					 GPT_REDUCE_SUM, err);
		sumsq = v;
	}
	if (rc)
		return rc;
	*loss = ntok ? sum / (double)ntok : 0;
	double norm = sqrt(sumsq) / tr->scaler.scale;
	int inf = !isfinite(sumsq);
	tr->last_scale = tr->scaler.scale;
	*skipped = gpt_loss_scaler_update(&tr->scaler, inf || !isfinite(*loss));
	if (*skipped)
		return 0;
	double clip = tr->cfg->optimizer.grad_clip.clip_norm, scale = 1.0 / tr->scaler.scale;
	if (clip > 0 && norm > clip)
		scale *= clip / (norm + 1e-6);
	rc = gpt_optimizer_step(&tr->opt, gpt_lr_at(&tr->lr, tr->step + 1), scale, err);
	/* each rank updated its shard: gather the whole parameters again (at
	 * stage 3 they stay sharded; the windows are gathered when used) */
	tr->pw_valid[0] = tr->pw_valid[2] = 0;
	if (!rc && tr->sh > 1 && tr->stage < 3)
		rc = gpt_comm_all_gather(tr->groups.g[GPT_MESH_SHARDING],
					 (char *)m->params + tr->opt.begin * (int64_t)gpt_dtype_size(m->be->dtype),
					 m->params, tr->shard, m->be->dtype, err);
	return rc;
}

static int run(trainer *tr, gpt_err *err)
{
	const gpt_config *cfg = tr->cfg;
	/* An epoch is the steps one pass over the training split makes, whole
	 * global batches only (drop_last); the samples left over start the next. */
	int64_t spe = gpt_loader_epoch_samples(tr->train) / tr->G;
	double t_int = gpt_now_s(), reader = 0;
	int64_t steps_in_int = 0;
	int rc = 0;
	if (tr->step < tr->total_steps)
		prefetch_request(&tr->pf, tr->step * tr->G + tr->replica * tr->LB, tr->LB);
	while (tr->step < tr->total_steps && !rc) {
		double w0 = gpt_now_s();
		int32_t *rows = prefetch_wait(&tr->pf, tr->step * tr->G + tr->replica * tr->LB, err);
		reader += gpt_now_s() - w0;
		if (!rows)
			return gpt_err_prefix(err, "reading the batch of global step %lld", (long long)tr->step + 1);
		if (tr->step + 1 < tr->total_steps)
			prefetch_request(&tr->pf, (tr->step + 1) * tr->G + tr->replica * tr->LB, tr->LB);
		double loss;
		int skipped = 0;
		rc = train_step(tr, rows, &loss, &skipped, err);
		if (rc)
			return gpt_err_prefix(err, "global step %lld", (long long)tr->step + 1);
		tr->step++;
		steps_in_int++;
		int skip_nan = skipped && !tr->scaler.dynamic && cfg->engine.nan_policy &&
			       strcmp(cfg->engine.nan_policy, "skip") == 0;
		if (skip_nan)
			gpt_log_printf(&tr->log, GPT_LOG_WARNING,
				       "global step %lld: the loss or the gradients are not finite (loss %g); skipped the update (Engine.nan_policy: skip)",
				       (long long)tr->step, loss);
		if (skipped && !tr->scaler.dynamic && !skip_nan)
			return gpt_err_set(err, GPT_EDATA,
					   "global step %lld: the loss or the gradients are not finite (loss %g); stopping before the update%s%s",
					   (long long)tr->step, loss, tr->last_ckpt[0] ? "; the last good checkpoint is " : "",
					   tr->last_ckpt);
		if (skipped && tr->scaler.dynamic) {
			char line[256];
			gpt_amp_skip_line_format(line, sizeof line, tr->step, tr->last_scale, tr->scaler.scale);
			gpt_log_printf(&tr->log, GPT_LOG_WARNING, "%s", line);
		}
		if (tr->step % cfg->engine.logging_freq == 0 || tr->step == tr->total_steps) {
			double el = gpt_now_s() - t_int;
			double cost = el / (double)steps_in_int;
			gpt_step_line sl = {.step = tr->step,
					    .epoch = (tr->step - 1) / spe,
					    .batch = (tr->step - 1) % spe,
					    .loss = loss,
					    .avg_reader_cost = reader / (double)steps_in_int,
					    .avg_batch_cost = cost,
					    .ips_total = (double)(tr->G * tr->T) / cost,
					    .ips = (double)(tr->G * tr->T) / cost / (double)cfg->world_size,
					    .lr = gpt_lr_at(&tr->lr, tr->step)};
			char line[512];
			gpt_step_line_format(line, sizeof line, &sl);
			gpt_log_printf(&tr->log, GPT_LOG_INFO, "%s", line);
			t_int = gpt_now_s();
			reader = 0;
			steps_in_int = 0;
		}
		if (tr->valid && cfg->engine.eval_freq > 0 && tr->step % cfg->engine.eval_freq == 0)
			rc = evaluate(tr, tr->valid, cfg->engine.eval_iters, 0, err);
		/* every save_steps steps, at the end, and every save_epoch epochs */
		int64_t epochs_done = tr->step / spe;
		int epoch_end = tr->step % spe == 0;
		int64_t se = cfg->engine.save_load.save_epoch;
		int by_steps = cfg->engine.save_load.save_steps > 0 &&
			       (tr->step % cfg->engine.save_load.save_steps == 0 || tr->step == tr->total_steps);
		int by_epoch = se > 0 && epoch_end && epochs_done % se == 0;
		if (!rc && (by_steps || by_epoch))
			rc = save_checkpoint(tr, err);
		/* A stop signal on any rank: every rank ends after this step. */
		int32_t stop = tr->stop && *tr->stop;
		if (!rc && tr->comm)
			rc = gpt_comm_all_reduce(gpt_comm_world(tr->comm), &stop, &stop, 1, GPT_DTYPE_I32,
						 GPT_REDUCE_MAX, err);
		if (!rc && stop) {
			gpt_log_printf(&tr->log, GPT_LOG_WARNING,
				       "stop requested (SIGTERM or SIGUSR1): saving global step %lld and stopping",
				       (long long)tr->step);
			if (!by_steps && !by_epoch)
				rc = save_checkpoint(tr, err);
			return rc;
		}
	}
	if (!rc && tr->test && tr->step == tr->total_steps)
		rc = evaluate(tr, tr->test, cfg->engine.test_iters, 1, err);
	return rc;
}

/* Data parallel and sharding: the rank's place in the mesh, the comm and
 * its groups. One process needs none of it. */
static int setup_parallel(trainer *tr, gpt_err *err)
{
	const gpt_config *cfg = tr->cfg;
	tr->sh = cfg->distributed.sharding.sharding_degree;
	tr->replicas = cfg->distributed.dp_degree * tr->sh;
	tr->LB = tr->G / tr->replicas;
	if (cfg->world_size == 1)
		return 0;
	gpt_dist_env env;
	int rc = gpt_dist_env_detect(&env, err);
	if (rc)
		return rc;
	if (env.world_size != cfg->world_size)
		return gpt_err_set(err, GPT_EUSAGE,
				   "the layout needs %lld ranks (dp %lld x sharding %lld) but this process is one of %d (%s); start it with gpt-launch --nproc-per-node %lld",
				   (long long)cfg->world_size, (long long)cfg->distributed.dp_degree,
				   (long long)tr->sh, env.world_size, gpt_dist_source_name(env.source),
				   (long long)cfg->world_size);
	gpt_comm_options o = {.backend = "shm"};
	rc = gpt_comm_open(&tr->comm, &env, &o, err);
	if (!rc)
		rc = gpt_mesh_init(&tr->mesh, 1, (int)tr->sh, (int)cfg->distributed.dp_degree, 1,
				   (int)cfg->world_size, err);
	if (!rc)
		rc = gpt_mesh_groups_init(&tr->groups, gpt_comm_world(tr->comm), &tr->mesh, err);
	if (rc)
		return rc;
	tr->rank = env.rank;
	tr->stage = tr->sh > 1 ? cfg->distributed.sharding.sharding_stage : 0;
	tr->replica = gpt_mesh_replica(&tr->mesh, env.rank);
	tr->sh_rank = gpt_mesh_coord_of(&tr->mesh, env.rank).sh;
	return 0;
}

static void trainer_free(trainer *tr)
{
	prefetch_stop(&tr->pf);
	gpt_optimizer_free(&tr->opt);
	free_zero(tr);
	gpt_model_free(&tr->model);
	if (tr->be.ops)
		gpt_backend_cpu_free(&tr->be);
	gpt_loader_close(tr->train);
	gpt_loader_close(tr->valid);
	gpt_loader_close(tr->test);
	free(tr->inp);
	free(tr->tgt);
	if (tr->comm) {
		gpt_mesh_groups_free(&tr->groups);
		gpt_comm_close(tr->comm);
	}
}

int gpt_train_run(const gpt_config *cfg, FILE *log, const volatile sig_atomic_t *stop,
		  gpt_err *err)
{
	trainer tr;
	memset(&tr, 0, sizeof tr);
	tr.cfg = cfg;
	tr.stop = stop;
	gpt_log_init(&tr.log, log, GPT_LOG_INFO);
	tr.G = cfg->global.global_batch_size;
	tr.MB = cfg->global.micro_batch_size;
	tr.accum = cfg->engine.accumulate_steps;
	tr.T = cfg->data.train.dataset.max_seq_len;
	tr.mixed = cfg->mixed;
	tr.dtype = !tr.mixed ? GPT_DTYPE_F32
		 : cfg->engine.mix_precision.dtype && strcmp(cfg->engine.mix_precision.dtype, "bfloat16") == 0
			 ? GPT_DTYPE_BF16 : GPT_DTYPE_F16;
	int rc = check_supported(cfg, err);
	if (!rc)
		rc = setup_parallel(&tr, err);
	if (!rc && tr.MB * tr.accum * tr.replicas != tr.G)
		rc = gpt_err_set(err, GPT_EINTERNAL, "batch: micro %lld x accumulate %lld x replicas %lld != global %lld",
				 (long long)tr.MB, (long long)tr.accum, (long long)tr.replicas, (long long)tr.G);
	if (!rc)
		rc = setup_data(&tr, err);
	if (!rc)
		rc = setup_schedule(&tr, err);
	if (!rc)
		rc = setup_model(&tr, err);
	/* Resume: an explicit ckpt_dir must load; otherwise output_dir/latest
	 * (a restarted job) does when it exists. */
	const char *ck = cfg->engine.save_load.ckpt_dir;
	if (!rc && ck && *ck) {
		rc = load_checkpoint(&tr, ck, err);
	} else if (!rc && cfg->engine.save_load.output_dir) {
		char latest[4096];
		snprintf(latest, sizeof latest, "%s/latest", cfg->engine.save_load.output_dir);
		if (gpt_path_exists(latest))
			rc = load_checkpoint(&tr, cfg->engine.save_load.output_dir, err);
	}
	if (!rc) {
		/* What this run allocated, to hold against gpt-train --dry-run. */
		double es = (double)gpt_dtype_size(tr.dtype), n = (double)tr.model.n_alloc;
		double wb = 0; /* stages 2 and 3: the three windows */
		if (tr.stage >= 2) {
			int64_t l = 0;
			for (int u = 1; u < tr.model.n_units - 1; u++)
				if (tr.model.unit_end[u] - tr.model.unit_begin[u] > l)
					l = tr.model.unit_end[u] - tr.model.unit_begin[u];
			int last = tr.model.n_units - 1;
			wb = (double)(tr.model.unit_end[0] - tr.model.unit_begin[0] + l +
				      tr.model.unit_end[last] - tr.model.unit_begin[last]) * es;
		}
		double shard = (double)tr.shard * es;
		double pb = tr.stage >= 3 ? shard + wb : n * es, gb = tr.stage >= 2 ? shard + wb : n * es;
		double opt = (double)(tr.opt.end - tr.opt.begin) * (tr.opt.master ? 12.0 : 8.0);
		double act = (double)tr.model.act_bytes;
		char a[32], b[32], c[32], d[32], e[32];
		gpt_format_bytes(pb, a, sizeof a);
		gpt_format_bytes(gb, b, sizeof b);
		gpt_format_bytes(opt, c, sizeof c);
		gpt_format_bytes(act, d, sizeof d);
		gpt_format_bytes(pb + gb + opt + act, e, sizeof e);
		gpt_log_printf(&tr.log, GPT_LOG_INFO,
			       "memory: parameters %s, gradients %s, optimizer state %s, activations %s, total %s (%.0f bytes)",
			       a, b, c, d, e, pb + gb + opt + act);
		gpt_log_printf(&tr.log, GPT_LOG_INFO,
			       "training %lld parameters for %lld steps: global batch %lld x %lld tokens, micro-batch %lld, %lld accumulation steps, rank %d of %lld (data replica %lld of %lld, sharding stage %lld over %lld)",
			       (long long)gpt_param_count(&tr.model.shape), (long long)tr.total_steps,
			       (long long)tr.G, (long long)tr.T, (long long)tr.MB, (long long)tr.accum,
			       tr.rank, (long long)cfg->world_size, (long long)tr.replica,
			       (long long)tr.replicas, tr.sh > 1 ? (long long)cfg->distributed.sharding.sharding_stage : 0LL,
			       (long long)tr.sh);
		rc = run(&tr, err);
	}
	trainer_free(&tr);
	return rc;
}
