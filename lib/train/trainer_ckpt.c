/* Saving the trainer's state as a checkpoint and resuming from one.
 *
 * Every rank writes what it owns (gpt_ckpt_slices): its optimizer range of
 * the fp32 weights (the master copy, or the parameters when they are fp32)
 * and of the two moments, one copy of each element across the job. The
 * ranks meet three times, always on the main thread between steps: after
 * rank 0 made the staging directory, after every part is written (an
 * all-reduce of error flags: nobody publishes unless all succeeded), and
 * after rank 0 published. An asynchronous save does the writing on a thread
 * that never communicates; the main thread asks at each step end whether
 * every rank's thread is done (one small all-reduce while a save is in
 * flight) and publishes then, or at the next save or the end at the latest.
 */
#include "train/trainer-impl.h"

#include "model/qat.h"

#include <jansson.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

struct tr_async {
	pthread_t tid;
	atomic_int done;
	int rc;
	gpt_err err;
	int rank;
	int64_t step;
	double t0;
	char stage[4096];
	gpt_ckpt_piece *pieces;
	int n;
	char (*names)[96];
	float *staging;
	char *state, *yaml;
};

static char *state_json(trainer *tr)
{
	const gpt_config *cfg = tr->cfg;
	json_t *st = json_pack("{s:I, s:I, s:I, s:f, s:I, s:{s:f, s:I, s:I, s:b}, s:I, s:I, s:{s:I, s:I, s:I, s:I}, "
			       "s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I}, s:s}",
			       "step", (json_int_t)tr->step,
			       "consumed_samples", (json_int_t)tr->consumed_samples,
			       "consumed_tokens", (json_int_t)tr->consumed_tokens,
			       "lr", gpt_lr_at(&tr->lr, tr->lr_steps),
			       "lr_steps", (json_int_t)tr->lr_steps,
			       "loss_scale", "scale", tr->scaler.scale, "good_steps",
			       (json_int_t)tr->scaler.good_steps, "bad_steps", (json_int_t)tr->scaler.bad_steps,
			       "dynamic", tr->scaler.dynamic,
			       "optimizer_steps", (json_int_t)tr->opt.t,
			       "seed", (json_int_t)cfg->global.seed,
			       /* the loader is a pure function of (seed, sample index): the
				* next global sample is all a resumed run needs */
			       "data", "next_sample", (json_int_t)(tr->step * tr->G), "global_batch",
			       (json_int_t)tr->G, "seq_len", (json_int_t)tr->T, "samples_per_epoch",
			       (json_int_t)gpt_loader_epoch_samples(tr->train),
			       "layout", "world_size", (json_int_t)cfg->world_size,
			       "dp", (json_int_t)cfg->distributed.dp_degree,
			       "mp", (json_int_t)cfg->distributed.mp_degree,
			       "pp", (json_int_t)cfg->distributed.pp_degree, "vpp", (json_int_t)tr->chunks,
			       "sharding", (json_int_t)tr->sh,
			       "sharding_stage", (json_int_t)tr->stage,
			       "gptkit_version", GPT_VERSION);
	char *text = st ? json_dumps(st, JSON_INDENT(2)) : NULL;
	json_decref(st);
	return text;
}

char *gpt_tr_config_yaml(const trainer *tr, gpt_err *err)
{
	char *yaml = NULL;
	size_t yl = 0;
	FILE *mf = open_memstream(&yaml, &yl);
	int rc = mf ? gpt_config_write_yaml(tr->cfg, mf, err) : gpt_err_nomem(err, 0, "config text");
	if (mf)
		fclose(mf);
	if (rc) {
		free(yaml);
		return NULL;
	}
	return yaml;
}

/* Every rank brings its rc; all learn whether any failed. Returns rc (a
 * rank that failed keeps its own message), the collective's failure, or
 * -1 where only another rank failed (the caller says where to look). */
static int any_failed(trainer *tr, int rc, gpt_err *err)
{
	if (!tr->comm)
		return rc;
	int32_t bad = rc != 0;
	gpt_err cerr = {0};
	int crc = gpt_comm_all_reduce(gpt_comm_world(tr->comm), &bad, &bad, 1, GPT_DTYPE_I32,
				      GPT_REDUCE_MAX, rc ? &cerr : err);
	return rc ? rc : crc ? crc : bad ? -1 : 0;
}

static int agree(trainer *tr, int rc, int64_t step, const char *what, gpt_err *err)
{
	rc = any_failed(tr, rc, err);
	if (rc == -1)
		return gpt_err_set(err, GPT_EIO, "checkpoint of global step %lld: another rank failed %s; its worker log says why; nothing was published",
				   (long long)step, what);
	return rc;
}

int gpt_tr_check_saves(trainer *tr, gpt_err *err)
{
	const char *od = tr->cfg->engine.save_load.output_dir, *on = tr->cfg->engine.save_load.on_save_error;
	/* on_save_error continue trains on past a failed save, except the last */
	int all = !on || strcmp(on, "continue") != 0;
	int rc = 0;
	for (int64_t s = tr->step + 1; tr->rank == 0 && od && s <= tr->total_steps && !rc; s++)
		if ((all || s == tr->total_steps) && gpt_tr_saves_at(tr, s) && (rc = gpt_ckpt_check_free(od, s, err)))
			gpt_err_prefix(err, "Engine.save_load.output_dir: this run goes on from global step %lld and saves global step %lld, %s",
				       (long long)tr->step, (long long)s,
				       all ? "where a failed save stops it (Engine.save_load.on_save_error: stop)" : "its last");
	if ((rc = any_failed(tr, rc, err)) == -1)
		rc = gpt_err_set(err, GPT_EIO, "%s: rank 0 found a step directory where this run saves; its worker log says which",
				 od);
	return rc;
}

/* Where the fp32 values of family k (weights, exp_avg, exp_avg_sq) at flat
 * element e of this rank's buffers live (backend memory); split master
 * weights: the high halves (the bf16 parameters, on the model's backend),
 * *lo the low ones (where the optimizer keeps its state). */
static const void *family_src(trainer *tr, int k, int64_t e, const uint16_t **lo)
{
	int64_t b = tr->opt.begin;
	*lo = NULL;
	if (k == 1)
		return tr->opt.exp_avg + (e - b);
	if (k == 2)
		return tr->opt.exp_avg_sq + (e - b);
	if (tr->opt.master_lo) {
		*lo = tr->opt.master_lo + (e - b);
		return (const uint16_t *)tr->opt.params + (e - b);
	}
	if (tr->opt.master)
		return tr->opt.master + (e - b);
	if (tr->pshard)
		return (const float *)tr->pshard + (e - b); /* fp32 stage 3 */
	return (const float *)tr->model.params + e;          /* fp32 */
}

typedef struct piece_list {
	gpt_ckpt_piece *pc;
	char (*names)[96];
	const void **src;     /* backend memory; NULL: the piece's data is on the host */
	gpt_backend **be;     /* the backend of src: the model's, or the offloaded state's */
	const uint16_t **lo;  /* split master weights: src the high halves, lo the low */
	gpt_backend *model_be; /* which holds the high halves; be[i] the low */
	int n;
	gpt_qat_tensor *qat;  /* the host values of quantization-aware training's scales */
	int64_t n_qat;
} piece_list;

static void piece_list_free(piece_list *l)
{
	free(l->pc);
	free(l->names);
	free(l->src);
	free(l->be);
	free(l->lo);
	gpt_qat_tensors_free(l->qat);
	memset(l, 0, sizeof *l);
}

/* The pieces this rank writes, with where each one's data is. */
static int own_pieces(trainer *tr, piece_list *l, gpt_err *err)
{
	gpt_model *m = &tr->model;
	memset(l, 0, sizeof *l);
	gpt_ckpt_rank r = {.tp_rank = m->layout.tp_rank, .pp_rank = m->layout.pp_rank,
			   .dp_rank = tr->comm ? gpt_mesh_coord_of(&tr->mesh, tr->rank).dp : 0,
			   .begin = tr->opt.begin, .end = tr->opt.end, .writers_only = 1};
	gpt_ckpt_slice *sl;
	int64_t ns;
	int rc = gpt_ckpt_slices(m->table, m->n_table, m->offset, m->box, &r, &sl, &ns, err);
	if (rc)
		return rc;
	/* The QAT scales of this stage's layers are the same on every rank of
	 * the stage: the first tp rank of the first data replica writes them. */
	int qat_writer = m->layout.tp_rank == 0 && tr->replica == 0;
	if (qat_writer && (rc = gpt_qat_tensors(m, &l->qat, &l->n_qat, err))) {
		free(sl);
		return rc;
	}
	size_t cap = (size_t)(3 * ns + l->n_qat + 1);
	l->pc = gpt_calloc(cap, sizeof *l->pc, "checkpoint pieces", err);
	l->names = l->pc ? gpt_calloc(cap, sizeof *l->names, "checkpoint pieces", err) : NULL;
	l->src = l->names ? gpt_calloc(cap, sizeof *l->src, "checkpoint pieces", err) : NULL;
	l->be = l->src ? gpt_calloc(cap, sizeof *l->be, "checkpoint pieces", err) : NULL;
	l->lo = l->be ? gpt_calloc(cap, sizeof *l->lo, "checkpoint pieces", err) : NULL;
	l->model_be = m->be;
	if (!l->lo) {
		free(sl);
		piece_list_free(l);
		return GPT_EINTERNAL;
	}
	static const char *const pre[3] = {"", "optim.exp_avg.", "optim.exp_avg_sq."};
	for (int64_t j = 0; j < l->n_qat; j++) {
		int64_t one = 1;
		snprintf(l->names[l->n], sizeof *l->names, "%s", l->qat[j].name);
		l->pc[l->n] = (gpt_ckpt_piece){.tensor = l->names[l->n], .dtype = GPT_DTYPE_F32, .ndim = 1,
					       .shape = {1}, .box = gpt_box_full(1, &one), .data = &l->qat[j].value};
		l->src[l->n++] = NULL;
	}
	for (int k = 0; k < 3; k++)
		for (int64_t j = 0; j < ns; j++) {
			const gpt_param_info *p = &m->table[sl[j].tensor];
			snprintf(l->names[l->n], sizeof *l->names, "%s%s", pre[k], p->name);
			l->pc[l->n] = (gpt_ckpt_piece){.tensor = l->names[l->n], .dtype = GPT_DTYPE_F32,
						       .ndim = p->ndim, .box = sl[j].box};
			memcpy(l->pc[l->n].shape, p->shape, sizeof p->shape);
			l->src[l->n] = family_src(tr, k, sl[j].flat, &l->lo[l->n]);
			/* the moments and master weights are where the optimizer keeps them */
			l->be[l->n] = k > 0 || tr->opt.master || tr->opt.master_lo ? tr->opt.sb : m->be;
			l->n++;
		}
	free(sl);
	return 0;
}

/* Piece i's fp32 values into buf (host memory); split master weights
 * joined from their two halves a block at a time. */
static int piece_fetch(const piece_list *l, int i, float *buf, gpt_err *err)
{
	size_t n = (size_t)gpt_box_numel(&l->pc[i].box);
	if (!l->src[i]) {
		memcpy(buf, l->pc[i].data, n * 4);
		return 0;
	}
	gpt_backend *be = l->be[i];
	if (!l->lo[i])
		return be->ops->download(be, buf, l->src[i], n * 4, err);
	enum { BLOCK = 1 << 20 };
	size_t blk = n < BLOCK ? n : BLOCK;
	uint16_t *h = gpt_malloc(4 * blk + 1, "checkpoint staging", err);
	int rc = h ? 0 : GPT_EINTERNAL;
	for (size_t at = 0; at < n && !rc; at += blk) {
		size_t k = n - at < blk ? n - at : blk;
		rc = l->model_be->ops->download(l->model_be, h, (const uint16_t *)l->src[i] + at, k * 2, err);
		if (!rc)
			rc = be->ops->download(be, h + blk, l->lo[i] + at, k * 2, err);
		if (!rc)
			gpt_bf16_join(buf + at, h, h + blk, k);
	}
	free(h);
	return rc;
}

typedef struct fill_ctx {
	const piece_list *l;
} fill_ctx;

static int fill_from_backend(void *ctx, int i, void *buf, gpt_err *err)
{
	fill_ctx *c = ctx;
	return piece_fetch(c->l, i, buf, err);
}

/* After every part is written: agree, publish on rank 0, agree again. */
static int publish(trainer *tr, int64_t step, int rc, const char *state, const char *yaml, double t0,
		   gpt_err *err)
{
	const char *dir = tr->cfg->engine.save_load.output_dir;
	rc = agree(tr, rc, step, "to write its part", err);
	int64_t bytes = 0;
	char path[4096];
	snprintf(path, sizeof path, "%s/step_%08lld", dir, (long long)step);
	gpt_heartbeat_beat(tr->hb, tr->step);
	if (tr->rank == 0) {
		if (!rc)
			rc = gpt_ckpt_publish(dir, step, (int)tr->cfg->world_size, state, yaml,
					      tr->cfg->engine.save_load.keep_last, path, sizeof path, &bytes, err);
		if (rc)
			gpt_ckpt_discard(dir, step);
	}
	rc = agree(tr, rc, step, "to publish it (rank 0)", err);
	gpt_heartbeat_beat(tr->hb, tr->step);
	if (rc)
		return rc;
	snprintf(tr->last_ckpt, sizeof tr->last_ckpt, "%s", path);
	if (tr->rank == 0) {
		char line[4200];
		gpt_ckpt_line_format(line, sizeof line, step, path, bytes, gpt_now_s() - t0);
		gpt_log_printf(&tr->log, GPT_LOG_INFO, "%s", line);
	}
	return 0;
}

static void *async_main(void *arg)
{
	struct tr_async *a = arg;
	a->rc = gpt_ckpt_write_part(a->stage, a->rank, a->pieces, a->n, NULL, NULL, &a->err);
	atomic_store(&a->done, 1);
	return NULL;
}

static void async_free(struct tr_async *a)
{
	free(a->pieces);
	free(a->names);
	free(a->staging);
	free(a->state);
	free(a->yaml);
	free(a);
}

/* Waits for the thread of the save in flight and, when rc is 0, publishes
 * it; without a save in flight returns rc. */
int gpt_tr_ckpt_finish(trainer *tr, int rc, int last, gpt_err *err)
{
	struct tr_async *a = tr->async;
	if (!a)
		return rc;
	tr->async = NULL;
	pthread_join(a->tid, NULL);
	if (!rc) {
		gpt_err perr = a->err;
		int prc = publish(tr, a->step, a->rc, a->state, a->yaml, a->t0, &perr);
		if (prc) {
			if (tr->saved_step == a->step)
				tr->saved_step = -1; /* a stop signal saves it again */
			gpt_err_prefix(&perr, "background checkpoint");
			rc = gpt_tr_save_failed(tr, a->step, perr.msg, perr.code,
						last || a->step >= tr->total_steps, err);
		}
	}
	async_free(a);
	return rc;
}

int gpt_tr_ckpt_poll(trainer *tr, gpt_err *err)
{
	if (!tr->async)
		return 0;
	int32_t busy = !atomic_load(&tr->async->done);
	if (tr->comm) {
		int rc = gpt_comm_all_reduce(gpt_comm_world(tr->comm), &busy, &busy, 1, GPT_DTYPE_I32,
					     GPT_REDUCE_MAX, err);
		if (rc)
			return rc;
	}
	return busy ? 0 : gpt_tr_ckpt_finish(tr, 0, 0, err);
}

/* Copies what this rank writes to host memory and starts the thread; takes
 * the pieces' arrays, state and yaml either way. */
static int save_async(trainer *tr, piece_list *l, char *state, char *yaml, double t0, gpt_err *err)
{
	struct tr_async *a = gpt_calloc(1, sizeof *a, "background checkpoint", err);
	int64_t total = 0;
	for (int i = 0; i < l->n; i++)
		total += gpt_box_numel(&l->pc[i].box);
	float *stg = a ? gpt_malloc((size_t)(total ? total : 1) * 4, "checkpoint host copy", err) : NULL;
	int rc = stg ? 0 : GPT_EINTERNAL;
	int64_t at = 0;
	for (int i = 0; i < l->n && !rc; i++) {
		size_t n = (size_t)gpt_box_numel(&l->pc[i].box);
		/* a copy even where backend memory is host memory: training changes
		 * it; by the backend that holds it (offloaded state: the host's) */
		rc = piece_fetch(l, i, stg + at, err);
		l->pc[i].data = stg + at;
		at += (int64_t)n;
	}
	if (a) {
		*a = (struct tr_async){.rank = tr->rank, .step = tr->step, .t0 = t0, .pieces = l->pc,
				       .n = l->n, .names = l->names, .staging = stg, .state = state,
				       .yaml = yaml};
		atomic_init(&a->done, 0);
		gpt_ckpt_stage_dir(tr->cfg->engine.save_load.output_dir, tr->step, a->stage, sizeof a->stage);
		l->pc = NULL;
		l->names = NULL;
	} else {
		free(state);
		free(yaml);
	}
	piece_list_free(l);
	if (!rc && pthread_create(&a->tid, NULL, async_main, a) != 0)
		rc = gpt_err_set(err, GPT_EINTERNAL, "checkpoint of global step %lld: cannot start the writing thread",
				 (long long)tr->step);
	if (rc) {
		if (a)
			async_free(a);
		return rc;
	}
	tr->async = a;
	return 0;
}

int gpt_tr_save_checkpoint(trainer *tr, gpt_err *err)
{
	int rc = 0;
	double t0 = gpt_now_s();
	const char *dir = tr->cfg->engine.save_load.output_dir;
	char stage[4096];
	gpt_ckpt_stage_dir(dir, tr->step, stage, sizeof stage);
	if (tr->rank == 0)
		rc = gpt_ckpt_prepare(dir, tr->step, err);
	rc = agree(tr, rc, tr->step, "to prepare the directory (rank 0)", err);
	piece_list l = {0};
	if (!rc)
		rc = own_pieces(tr, &l, err);
	char *state = NULL, *yaml = NULL;
	if (!rc && tr->rank == 0) {
		state = state_json(tr);
		yaml = state ? gpt_tr_config_yaml(tr, err) : NULL;
		if (!yaml)
			rc = state ? err->code : gpt_err_nomem(err, 0, "state.json");
	}
	/* From here every rank takes the same path, whatever failed where, so
	 * the collectives pair up. */
	if (tr->cfg->engine.save_load.async_save) {
		if (!rc) {
			rc = save_async(tr, &l, state, yaml, t0, err);
		} else {
			piece_list_free(&l);
			free(state);
			free(yaml);
		}
		rc = agree(tr, rc, tr->step, "to copy its state to host memory", err);
		if (rc) {
			gpt_tr_ckpt_finish(tr, rc, 0, err); /* joins a started thread, publishes nothing */
			if (tr->rank == 0)
				gpt_ckpt_discard(dir, tr->step);
		} else if (tr->rank == 0) {
			gpt_log_printf(&tr->log, GPT_LOG_INFO,
				       "checkpoint of global step %lld: state copied to host memory in %.3f s, writing in the background",
				       (long long)tr->step, gpt_now_s() - t0);
		}
		return rc;
	}
	if (!rc) {
		fill_ctx fc = {&l};
		rc = gpt_ckpt_write_part(stage, tr->rank, l.pc, l.n, fill_from_backend, &fc, err);
	}
	piece_list_free(&l);
	rc = publish(tr, tr->step, rc, state, yaml, t0, err);
	free(state);
	free(yaml);
	return rc;
}

#define COUNT_LIMIT (INT64_C(1) << 53)

/* A count of state.json in range: steps, samples, tokens. */
static int count_ok(int64_t v)
{
	return v >= 0 && v < COUNT_LIMIT;
}

static int json_int(json_t *o, const char *k, int64_t *out)
{
	json_t *v = json_object_get(o, k);
	if (!json_is_integer(v))
		return -1;
	*out = json_integer_value(v);
	return 0;
}

/* Reads the slices of [begin, end) of family `pre` into dst (fp32, element
 * begin at dst[0]). */
static int read_range(trainer *tr, gpt_ckpt *ck, const char *pre, float *dst, gpt_err *err)
{
	gpt_model *m = &tr->model;
	gpt_ckpt_rank r = {.begin = tr->opt.begin, .end = tr->opt.end};
	gpt_ckpt_slice *sl;
	int64_t ns;
	int rc = gpt_ckpt_slices(m->table, m->n_table, m->offset, m->box, &r, &sl, &ns, err);
	for (int64_t j = 0; j < ns && !rc; j++) {
		const gpt_param_info *p = &m->table[sl[j].tensor];
		char name[96];
		snprintf(name, sizeof name, "%s%s", pre, p->name);
		rc = gpt_ckpt_read_box(ck, name, GPT_DTYPE_F32, p->ndim, p->shape, &sl[j].box,
				       dst + (sl[j].flat - tr->opt.begin), err);
	}
	free(sl);
	return rc;
}

/* Whether the checkpoint holds quantization-aware training's scales. */
static int has_qat(const gpt_ckpt *ck)
{
	for (int i = 0; i < gpt_ckpt_tensor_count(ck); i++) {
		const char *name;
		gpt_dtype dt;
		int nd;
		const int64_t *sh;
		if (gpt_ckpt_tensor_info(ck, i, &name, &dt, &nd, &sh) == 0 && strncmp(name, "qat.", 4) == 0)
			return 1;
	}
	return 0;
}

/* The scales of quantization-aware training; a checkpoint without them (a
 * model trained without QAT) starts QAT from fresh scales. */
static int load_qat(trainer *tr, gpt_ckpt *ck, gpt_err *err)
{
	gpt_qat_tensor *qt;
	int64_t nq;
	int rc = gpt_qat_tensors(&tr->model, &qt, &nq, err);
	if (rc || nq == 0)
		return rc;
	if (!has_qat(ck)) {
		gpt_log_printf(&tr->log, GPT_LOG_INFO,
			       "%s holds no quantization scales: quantization-aware training starts from its weights with fresh scales",
			       gpt_ckpt_path(ck));
		gpt_qat_tensors_free(qt);
		return 0;
	}
	/* QAT without PACT wrote no alphas: PACT then starts from its initial
	 * alphas (the values qt holds already) */
	int pact_saved = 0, pact_wanted = 0;
	for (int64_t i = 0; i < nq; i++)
		if (gpt_qat_tensor_is_pact(qt[i].name)) {
			pact_wanted = 1;
			pact_saved |= gpt_ckpt_has_tensor(ck, qt[i].name);
		}
	if (pact_wanted && !pact_saved)
		gpt_log_printf(&tr->log, GPT_LOG_INFO,
			       "%s holds no PACT clips: they start from Quantization.pact_init_value",
			       gpt_ckpt_path(ck));
	int64_t one = 1;
	gpt_box box = gpt_box_full(1, &one);
	for (int64_t i = 0; !rc && i < nq; i++)
		if (pact_saved || !gpt_qat_tensor_is_pact(qt[i].name))
			rc = gpt_ckpt_read_box(ck, qt[i].name, GPT_DTYPE_F32, 1, &one, &box, &qt[i].value, err);
	if (!rc)
		rc = gpt_qat_set(&tr->model, qt, nq, err);
	gpt_qat_tensors_free(qt);
	return rc;
}

/* The model the checkpoint's config.yaml describes is the configured one.
 * The tensor shapes alone miss a different head count (qkv is [3, C, C]
 * either way), a vocabulary with the same padding, and fewer layers (the
 * saved h.N.* left unread). */
static int check_model(trainer *tr, const gpt_ckpt *ck, gpt_err *err)
{
	gpt_model_shape now, saved;
	gpt_model_shape_from_config(tr->cfg, &now);
	int rc = gpt_ckpt_model_shape(ck, &saved, err);
	if (rc)
		return rc;
	const struct {
		const char *key;
		int64_t saved, now;
	} f[] = {
		{"num_layers", saved.layers, now.layers},
		{"hidden_size", saved.hidden, now.hidden},
		{"num_attention_heads", saved.heads, now.heads},
		{"ffn_hidden_size", saved.ffn, now.ffn},
		{"vocab_size", saved.vocab_size, now.vocab_size},
		{"max_position_embeddings", saved.max_pos, now.max_pos},
	};
	for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
		if (f[i].saved != f[i].now)
			return gpt_err_set(err, GPT_EDATA,
					   "%s: its model has Model.%s %lld (its config.yaml), the configured one %lld; resume with the model it was saved with, or start afresh in another output_dir (without Engine.save_load.ckpt_dir)",
					   gpt_ckpt_path(ck), f[i].key, (long long)f[i].saved, (long long)f[i].now);
	return 0;
}

/* The samples and tokens trained on before the checkpoint, running totals
 * over every run that led to it, into tr, as Megatron-LM carries
 * consumed_train_samples over a resume; gb and sl: the global batch and
 * sequence length of the run that saved it. A state.json without them
 * (written by hand or by another tool) counts every step at gb x sl, as
 * does one of a gptkit that wrote step x global batch (the same total
 * unless the global batch changed at a resume, which it could not tell). */
static int load_consumed(trainer *tr, const gpt_ckpt *ck, json_t *st, int64_t step, int64_t gb, int64_t sl,
			 gpt_err *err)
{
	static const char *const key[2] = {"consumed_samples", "consumed_tokens"};
	int64_t v[2] = {step * gb, -1};
	for (int i = 0; i < 2; i++) {
		if (!json_object_get(st, key[i]))
			continue;
		if (json_int(st, key[i], &v[i]) || !count_ok(v[i]))
			return gpt_err_set(err, GPT_EDATA, "%s/state.json: %s: expected an integer in [0, 2^53) (the %s trained on before the checkpoint); remove the key to count global step %lld x global batch %lld",
					   gpt_ckpt_path(ck), key[i], i ? "tokens" : "samples", (long long)step,
					   (long long)gb);
	}
	if (v[1] < 0 && (double)v[0] * (double)sl >= (double)COUNT_LIMIT)
		return gpt_err_set(err, GPT_EDATA, "%s/state.json: consumed_tokens: not given, and consumed_samples %lld x %lld tokens is beyond 2^53; give it, or remove consumed_samples too",
				   gpt_ckpt_path(ck), (long long)v[0], (long long)sl);
	tr->consumed_samples = v[0];
	tr->consumed_tokens = v[1] >= 0 ? v[1] : v[0] * sl;
	return 0;
}

/* After a checkpoint at path (a step directory, or one whose `latest`
 * names one) was found damaged or incomplete: the checkpoint to resume
 * from instead, when its directory holds an earlier one, added to err;
 * with the damaged one in output_dir, where a save of its step would
 * find it in the way, moving it first. */
static void say_earlier(const trainer *tr, const char *path, gpt_err *err)
{
	char earlier[4096], bad[4096];
	if (!gpt_ckpt_earlier(path, bad, earlier, sizeof earlier))
		return;
	size_t n = strlen(err->msg);
	const char *od = tr->cfg->engine.save_load.output_dir;
	if (*bad && gpt_path_exists(bad) && od && gpt_path_within(bad, od))
		snprintf(err->msg + n, sizeof err->msg - n,
			 "; to resume from the newest checkpoint before it, move %s out of the way (a save of its step does not replace it) and give -o Engine.save_load.ckpt_dir=%s",
			 bad, earlier);
	else
		snprintf(err->msg + n, sizeof err->msg - n,
			 "; to resume from the newest checkpoint%s, give -o Engine.save_load.ckpt_dir=%s",
			 *bad ? " before it" : "", earlier);
}

/* Resumes from a checkpoint directory (or a directory holding `latest`),
 * whatever layout wrote it: each rank reads the boxes it holds. A
 * checkpoint without optimizer state (gpt-ckpt-merge --from-hf,
 * --weights-only copies) starts the moments at zero. */
int gpt_tr_load_checkpoint(trainer *tr, const char *path, gpt_err *err)
{
	double t0 = gpt_now_s();
	gpt_ckpt *ck = NULL;
	/* rank 0 checks every checksum, then the others open it trusting them */
	int rc = tr->rank == 0 ? gpt_ckpt_open(&ck, path, err) : 0;
	if (rc == GPT_EDATA)
		say_earlier(tr, path, err);
	rc = any_failed(tr, rc, err);
	if (rc == -1)
		rc = gpt_err_set(err, GPT_EDATA, "%s: rank 0 found the checkpoint damaged or incomplete; its worker log says why",
				 path);
	if (!rc && tr->rank != 0)
		rc = gpt_ckpt_open_opts(&ck, path, 0, err);
	if (!rc && (rc = check_model(tr, ck, err)))
		gpt_ckpt_close(ck);
	if (rc)
		return gpt_err_prefix(err, "cannot resume");
	gpt_model *m = &tr->model;
	gpt_backend *be = m->be;
	int64_t b0 = tr->opt.begin, cnt = tr->opt.end - tr->opt.begin;
	/* Weights: the whole held image when the rank keeps whole parameters,
	 * else (stage 3) its shard; the moments: the optimizer's range. */
	size_t n_w = m->params ? (size_t)m->n_alloc : (size_t)cnt;
	float *w = gpt_calloc(n_w ? n_w : 1, 4, "checkpoint staging", err);
	float *mom = w ? gpt_calloc((size_t)(cnt ? cnt : 1), 4, "checkpoint staging", err) : NULL;
	void *lowp = NULL;
	if (!mom)
		rc = GPT_EINTERNAL;
	if (!rc && !m->params) {
		rc = read_range(tr, ck, "", w, err);
	} else {
		for (int64_t i = 0; !rc && i < m->n_table; i++) {
			if (m->offset[i] < 0)
				continue;
			const gpt_param_info *p = &m->table[i];
			rc = gpt_ckpt_read_box(ck, p->name, GPT_DTYPE_F32, p->ndim, p->shape, &m->box[i],
					       w + m->offset[i], err);
			gpt_heartbeat_beat(tr->hb, tr->step);
		}
	}
	const float *wr = m->params ? w + b0 : w; /* the optimizer's range of the weights */
	gpt_backend *sb = tr->opt.sb; /* the model's backend, or the host's with offload */
	if (!rc && tr->opt.master)
		rc = sb->ops->upload(sb, tr->opt.master, wr, (size_t)cnt * 4, err);
	int has_optim = gpt_ckpt_has_tensor(ck, "optim.exp_avg.wte");
	static const char *const pre[2] = {"optim.exp_avg.", "optim.exp_avg_sq."};
	for (int k = 0; k < 2 && !rc; k++) {
		if (has_optim)
			rc = read_range(tr, ck, pre[k], mom, err);
		if (!rc)
			rc = sb->ops->upload(sb, k ? tr->opt.exp_avg_sq : tr->opt.exp_avg, mom, (size_t)cnt * 4, err);
	}
	/* the parameters: fp32, or the master weights rounded; split master
	 * weights: their high halves, rounded so on every rank, whichever
	 * range its optimizer holds, and the low halves of the range; none
	 * where the master weights are the only copy (pmaster) */
	size_t pes = gpt_dtype_size(be->dtype);
	const void *img = w;
	if (!rc && be->dtype != GPT_DTYPE_F32 && !tr->pmaster) {
		lowp = gpt_malloc(n_w * pes + 1, "checkpoint staging", err);
		rc = lowp ? 0 : GPT_EINTERNAL;
		img = lowp;
	}
	if (!rc && tr->opt.master_lo) {
		uint16_t *lo = gpt_malloc((size_t)cnt * 2 + 1, "checkpoint staging", err);
		rc = lo ? 0 : GPT_EINTERNAL;
		if (lo) {
			gpt_bf16_split(lowp, NULL, w, n_w);
			gpt_bf16_split((uint16_t *)lowp + (wr - w), lo, wr, (size_t)cnt);
			rc = sb->ops->upload(sb, tr->opt.master_lo, lo, (size_t)cnt * 2, err);
		}
		free(lo);
	} else if (!rc && lowp) {
		rc = gpt_convert(lowp, be->dtype, w, GPT_DTYPE_F32, n_w, err);
	}
	if (!rc && !tr->pmaster)
		rc = tr->pshard ? be->ops->upload(be, tr->pshard, img, (size_t)cnt * pes, err)
				: be->ops->upload(be, m->params, img, (size_t)m->n_alloc * pes, err);
	gpt_optimizer_params_written(&tr->opt); /* an offloaded one's host image is stale */
	free(w);
	free(mom);
	free(lowp);
	if (!rc && m->qat)
		rc = load_qat(tr, ck, err);
	else if (!rc && tr->rank == 0 && has_qat(ck))
		gpt_log_printf(&tr->log, GPT_LOG_INFO,
			       "%s holds quantization scales; Quantization.enable is off, so they are left out",
			       gpt_ckpt_path(ck));
	/* no rank goes on to train where another could not load */
	if ((rc = any_failed(tr, rc, err)) == -1)
		rc = gpt_err_set(err, GPT_EDATA, "%s: another rank could not load its part; its worker log says why",
				 gpt_ckpt_path(ck));

	json_error_t je;
	json_t *st = rc ? NULL : json_loads(gpt_ckpt_state_json(ck), 0, &je);
	if (!rc && !json_is_object(st))
		rc = st ? gpt_err_set(err, GPT_EDATA, "%s/state.json: expected a JSON object", gpt_ckpt_path(ck))
			: gpt_err_set(err, GPT_EDATA, "%s/state.json:%d:%d: %s", gpt_ckpt_path(ck), je.line,
				      je.column, je.text);
	int64_t step = 0, t = 0, good = 0, bad = 0;
	json_t *ls = json_object_get(st, "loss_scale");
	double scale = ls ? json_number_value(json_object_get(ls, "scale")) : 1;
	/* counts below 2^53, as the configuration bounds a run's tokens, so
	 * that nothing computed from them overflows */
	if (!rc && (json_int(st, "step", &step) || json_int(st, "optimizer_steps", &t) || !count_ok(step) ||
		    !count_ok(t) ||
		    (ls && (json_int(ls, "good_steps", &good) || json_int(ls, "bad_steps", &bad) || !count_ok(good) ||
			    !count_ok(bad) || !json_is_number(json_object_get(ls, "scale")) ||
			    !(scale > 0 && scale < INFINITY)))))
		rc = gpt_err_set(err, GPT_EDATA, "%s/state.json: expected step and optimizer_steps in [0, 2^53) and (when present) loss_scale with a positive finite scale, good_steps and bad_steps in [0, 2^53)",
				 gpt_ckpt_path(ck));
	/* the schedule's position; a state.json without it (an older gptkit,
	 * another tool) counts every step */
	int64_t lr_steps = step;
	if (!rc && json_object_get(st, "lr_steps") &&
	    (json_int(st, "lr_steps", &lr_steps) || lr_steps < 0 || lr_steps > step))
		rc = gpt_err_set(err, GPT_EDATA, "%s/state.json: lr_steps: expected an integer in [0, step %lld] (the steps the learning-rate schedule has taken); remove the key to count every step",
				 gpt_ckpt_path(ck), (long long)step);
	/* the data the saving run read: global batch, sequence length and
	 * where its loader stopped */
	json_t *data = json_object_get(st, "data");
	int64_t gb = tr->G, sl = tr->T, next = 0; /* read where have_data */
	int have_data = json_is_object(data) && !json_int(data, "global_batch", &gb) &&
			!json_int(data, "seq_len", &sl) && !json_int(data, "next_sample", &next);
	if (!rc && (gb < 1 || sl < 1 || (double)step * (double)gb * (double)sl >= (double)COUNT_LIMIT))
		rc = gpt_err_set(err, GPT_EDATA, "%s/state.json: data: expected global_batch and seq_len >= 1 whose tokens over step %lld stay below 2^53, found %lld x %lld; remove data to count this run's",
				 gpt_ckpt_path(ck), (long long)step, (long long)gb, (long long)sl);
	if (!rc)
		rc = load_consumed(tr, ck, st, step, gb, sl, err);
	if (!rc) {
		tr->step = step;
		tr->lr_steps = lr_steps;
		tr->opt.t = t;
		/* The loss scale carries over between float16 runs only: a run of
		 * fp32 or bf16 saved a fixed scale of 1, which would leave float16
		 * gradients unscaled for thousands of steps, and float16's scale
		 * means nothing to the others (as Megatron-LM loads its grad scaler
		 * only into a run that has one). An imported model has none. */
		json_t *dyn = json_object_get(ls, "dynamic");
		int kind_saved = json_is_boolean(dyn) ? json_is_true(dyn) : tr->scaler.dynamic;
		if (ls && kind_saved == tr->scaler.dynamic) {
			tr->scaler.scale = scale;
			tr->scaler.good_steps = good;
			tr->scaler.bad_steps = bad;
		} else if (ls && tr->scaler.dynamic) {
			gpt_log_printf(&tr->log, GPT_LOG_INFO,
				       "%s was saved without float16 (a fixed loss scale of %g): float16 training starts from Engine.mix_precision.scale_loss %g",
				       gpt_ckpt_path(ck), scale, tr->scaler.scale);
		} else if (ls) {
			gpt_log_printf(&tr->log, GPT_LOG_INFO,
				       "%s was saved in float16 (a dynamic loss scale of %g): this run trains without float16, with a loss scale of %g",
				       gpt_ckpt_path(ck), scale, tr->scaler.scale);
		}
		/* The data goes on at global step x global batch, as PaddleNLP's
		 * Trainer resumes; with another global batch or sequence length
		 * that is not where the checkpoint's run stopped (Megatron-LM goes
		 * on at the samples it consumed), which the log says. */
		if (have_data && (gb != tr->G || sl != tr->T) && tr->rank == 0)
			gpt_log_printf(&tr->log, GPT_LOG_WARNING,
				       "%s was saved by a run of global batch %lld x %lld tokens, which stopped at sample %lld; this run's is %lld x %lld, so its data goes on at sample %.0f (global step %lld x its global batch), not where that run stopped; keep Global.global_batch_size and max_seq_len to go on with the same data",
				       gpt_ckpt_path(ck), (long long)gb, (long long)sl, (long long)next, (long long)tr->G,
				       (long long)tr->T, (double)step * (double)tr->G, (long long)step);
		/* Another corpus or split (at the same sequence length) has another
		 * number of samples an epoch, and other samples at every index. */
		int64_t spe = gpt_loader_epoch_samples(tr->train), saved_spe = spe;
		if (json_is_object(data) && !json_int(data, "samples_per_epoch", &saved_spe) && sl == tr->T &&
		    saved_spe != spe && tr->rank == 0)
			gpt_log_printf(&tr->log, GPT_LOG_WARNING,
				       "%s was saved by a run whose training split held %lld samples an epoch; this run's holds %lld (%s, split '%s'), so from global step %lld on its samples are not those that run would have read; keep Data.Train.dataset.input_dir, its files and split to go on with the same data",
				       gpt_ckpt_path(ck), (long long)saved_spe, (long long)spe,
				       tr->cfg->data.train.dataset.input_dir,
				       tr->cfg->data.train.dataset.split ? tr->cfg->data.train.dataset.split : "949,50,1",
				       (long long)step + 1);
		/* The data order (the loader is a function of the seed and the
		 * sample index) and the dropout masks follow Global.seed: another
		 * seed goes on with other samples, some of them ones the run of
		 * the checkpoint has already trained on. */
		int64_t seed = tr->cfg->global.seed;
		if (!json_int(st, "seed", &seed) && seed != tr->cfg->global.seed && tr->rank == 0)
			gpt_log_printf(&tr->log, GPT_LOG_WARNING,
				       "%s was saved by a run of Global.seed %lld; this run's is %lld, so from global step %lld on its data order and dropout are not that run's (the samples it takes may repeat ones already trained on); keep Global.seed %lld to go on as that run would have",
				       gpt_ckpt_path(ck), (long long)seed, (long long)tr->cfg->global.seed,
				       (long long)step + 1, (long long)seed);
		/* The schedule is a function of its steps (lr_steps: float16
		 * overflows hold it back) and Optimizer.lr: other
		 * settings there make the rate jump at the resume (Megatron-LM
		 * refuses that unless told to override the checkpoint's). */
		json_t *lr = json_object_get(st, "lr");
		double was = json_number_value(lr), now = gpt_lr_at(&tr->lr, tr->lr_steps);
		if (json_is_number(lr) && step > 0 && fabs(was - now) > 1e-9 * fmax(fabs(was), fabs(now)) &&
		    tr->rank == 0)
			gpt_log_printf(&tr->log, GPT_LOG_WARNING,
				       "%s was saved at a learning rate of %g (global step %lld); this run's Optimizer.lr settings give %g there, so the rate jumps from global step %lld on; keep Optimizer.lr (name, max_lr, min_lr, decay_steps, the warm-up) as that run had them to go on with its schedule",
				       gpt_ckpt_path(ck), was, (long long)step, now, (long long)step + 1);
		snprintf(tr->last_ckpt, sizeof tr->last_ckpt, "%s", gpt_ckpt_path(ck));
		char sz[32];
		gpt_format_bytes((double)(n_w + 2 * (size_t)cnt) * 4, sz, sizeof sz);
		gpt_log_printf(&tr->log, GPT_LOG_INFO, "resumed from %s at global step %lld%s; read %s in %.3f s",
			       gpt_ckpt_path(ck), (long long)step,
			       has_optim ? "" : " (no optimizer state in it: the moments start at zero)", sz,
			       gpt_now_s() - t0);
	}
	json_decref(st);
	gpt_ckpt_close(ck);
	return rc ? gpt_err_prefix(err, "cannot resume") : 0;
}
