/* Data parallel and ZeRO sharding (stages 1, 2, 3) for the trainer: the
 * rank's place in the mesh, summing gradients over the replicas, and the
 * unit-by-unit parameter and gradient windows of stages 2 and 3. */
#include "train/trainer-impl.h"

#if GPT_HAVE_CUDA
#include "cuda/cuda.h"
#endif

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* The pieces of [a, b) that the sharding ranks' shards hold, by sharding
 * rank: the counts of the uneven collectives over a window of [a, b). */
static void window_pieces(const trainer *tr, int64_t a, int64_t b, int64_t *counts)
{
	for (int64_t r = 0; r < tr->sh; r++) {
		int64_t x0 = a > r * tr->shard ? a : r * tr->shard;
		int64_t x1 = b < (r + 1) * tr->shard ? b : (r + 1) * tr->shard;
		counts[r] = x1 > x0 ? x1 - x0 : 0;
	}
}

/* Whether the parameters live in windows a unit at a time: stage 3, or
 * fp16 parameters kept only as the master weights at one rank. */
static int param_windows(const trainer *tr)
{
	return tr->stage >= 3 || tr->pmaster;
}

/* Stage 3: the whole of unit u's parameters in window w: each rank puts in
 * its shard's part (with pmaster cast from its master weights), and an
 * all-gather over the sharding group brings the other ranks' parts. */
static int gather_unit(trainer *tr, int u, void *w, gpt_err *err)
{
	gpt_model *m = &tr->model;
	gpt_backend *be = m->be;
	int64_t es = (int64_t)gpt_dtype_size(be->dtype), a = m->unit_begin[u], b = m->unit_end[u], x0, x1;
	int64_t counts[tr->sh];
	int rc = 0;
	if (shard_overlap(tr, a, b, &x0, &x1))
		rc = tr->pmaster ? be->ops->convert(be, (char *)w + (x0 - a) * es, be->dtype,
						    tr->opt.master + (x0 - tr->opt.begin), GPT_DTYPE_F32, x1 - x0, err)
				 : be->ops->copy(be, (char *)w + (x0 - a) * es,
						 (char *)tr->pshard + (x0 - tr->opt.begin) * es, (size_t)((x1 - x0) * es), err);
	if (rc || tr->sh == 1)
		return rc;
	window_pieces(tr, a, b, counts);
	return gpt_comm_all_gather_v(tr->groups.g[GPT_MESH_SHARDING], w, counts, be->dtype, err);
}

/* Adds this rank's part of unit u's gradient window w, summed over the
 * replicas, into its gradient shard. */
static int shard_add(trainer *tr, int u, const void *w, gpt_err *err)
{
	gpt_model *m = &tr->model;
	gpt_backend *be = m->be;
	int64_t es = (int64_t)gpt_dtype_size(be->dtype), a = m->unit_begin[u], b = m->unit_end[u], x0, x1;
	if (!shard_overlap(tr, a, b, &x0, &x1))
		return 0;
	void *acc = (char *)tr->gshard + (x0 - tr->opt.begin) * es;
	return be->ops->residual_fwd(be, acc, acc, (const char *)w + (x0 - a) * es, x1 - x0, err);
}

/* Sums this rank's part of unit u's gradient window w over the sharding
 * group (a reduce-scatter: each rank gets the sum of only its part) and adds
 * it into its gradient shard. The sum over dp comes at the step's end, once,
 * on the shard (gpt_tr_reduce_grads). */
static int reduce_window(trainer *tr, int u, void *w, gpt_err *err)
{
	gpt_model *m = &tr->model;
	int64_t counts[tr->sh];
	window_pieces(tr, m->unit_begin[u], m->unit_end[u], counts);
	int rc = gpt_comm_reduce_scatter_v(tr->groups.g[GPT_MESH_SHARDING], w, counts, m->be->dtype,
					   GPT_REDUCE_SUM, err);
	return rc ? rc : shard_add(tr, u, w, err);
}

/* ---- the windows' reductions overlapped (Distributed.overlap_grad_reduce) ----
 * When a unit's backward ends its window's reduce-scatter starts, and the window
 * is finished (waited for, this rank's part added into the shard) when it is
 * needed again or at the step's end. Layers take the two layer windows in
 * turn, so a layer's reduction runs during the backward of the layer before
 * it. Each shard element belongs to one unit, whose windows finish in the
 * order they started, so the shard gets the bits of the unit-by-unit path. */
enum { ZW_EMB, ZW_LAYER, ZW_LAYER2, ZW_FINAL, ZW_N };

static void *zwin(const trainer *tr, int j)
{
	return j == ZW_EMB ? tr->gw[0] : j == ZW_LAYER ? tr->gw[1] : j == ZW_LAYER2 ? tr->gw_layer2 : tr->gw[2];
}

static int zwin_index(const trainer *tr, const void *w)
{
	for (int j = 0; j < ZW_N; j++)
		if (zwin(tr, j) == w)
			return j;
	return -1;
}

static int zero_finish(trainer *tr, int j, gpt_err *err)
{
	gpt_comm_req *r = tr->zpend[j].req;
	if (!r)
		return 0;
	tr->zpend[j].req = NULL;
	int u = tr->zpend[j].unit, rc = gpt_comm_wait(r, err);
	if (rc)
		return gpt_err_prefix(err, "gradient window of unit %d", u);
	return shard_add(tr, u, zwin(tr, j), err);
}

int gpt_tr_zero_drain(trainer *tr, int rc, gpt_err *err)
{
	for (;;) {
		int j = -1;
		for (int i = 0; i < ZW_N; i++)
			if (tr->zpend[i].req && (j < 0 || tr->zpend[i].seq < tr->zpend[j].seq))
				j = i;
		if (j < 0)
			return rc;
		if (!rc) {
			rc = zero_finish(tr, j, err);
		} else {
			gpt_err e2 = {0};
			gpt_comm_wait(tr->zpend[j].req, &e2);
			tr->zpend[j].req = NULL;
		}
	}
}

int64_t gpt_tr_zero_layer_span(const gpt_model *m)
{
	int64_t span = 0;
	for (int u = 1; u < m->n_units - 1; u++)
		if (m->unit_end[u] - m->unit_begin[u] > span)
			span = m->unit_end[u] - m->unit_begin[u];
	return span;
}

int gpt_tr_zero_overlap_on(trainer *tr, gpt_err *err)
{
	gpt_model *m = &tr->model;
	int64_t span = gpt_tr_zero_layer_span(m);
	tr->gw_layer2 = m->be->ops->alloc(m->be, (size_t)(span ? span : 1) * gpt_dtype_size(m->be->dtype),
					  "gradient window", err);
	if (!tr->gw_layer2)
		return err->code;
	tr->zov = 1;
	return 0;
}

static int zero_acquire(void *ctx, gpt_model *m, int u, int backward, gpt_err *err)
{
	trainer *tr = ctx;
	gpt_backend *be = m->be;
	int k = win_slot(m, u), rc = 0;
	if (param_windows(tr) && (k == 1 || !tr->pw_valid[k])) {
		rc = gather_unit(tr, u, tr->pw[k], err);
		tr->pw_valid[k] = k != 1;
		m->pwin[u] = tr->pw[k];
	}
	if (!rc && backward && tr->stage >= 2) {
		int j = k == 0 ? ZW_EMB : k == 2 ? ZW_FINAL : tr->zov && (tr->zflip ^= 1) ? ZW_LAYER2 : ZW_LAYER;
		rc = zero_finish(tr, j, err); /* its last reduction, if still in flight */
		m->gwin[u] = zwin(tr, j);
		/* a held-back embedding window collects the whole step (zeroed
		 * when the step starts) */
		if (!rc && !(u == 0 && tr->wte_held_back))
			rc = be->ops->zero(be, m->gwin[u],
					   (size_t)(m->unit_end[u] - m->unit_begin[u]) * gpt_dtype_size(be->dtype), err);
	}
	return rc;
}

/* After the backward of unit u its gradients of this micro-batch are whole:
 * sum this rank's part over the sharding group and add it into its shard. */
static int zero_release(void *ctx, gpt_model *m, int u, int backward, gpt_err *err)
{
	trainer *tr = ctx;
	int k = win_slot(m, u);
	if (param_windows(tr) && k == 1)
		m->pwin[u] = NULL;
	if (!backward || tr->stage < 2)
		return 0;
	void *w = m->gwin[u];
	m->gwin[u] = NULL;
	if (u == 0 && tr->wte_held_back)
		return 0; /* reduced at the end of the step: gpt_tr_reduce_grads */
	if (!tr->zov)
		return reduce_window(tr, u, w, err);
	int j = zwin_index(tr, w);
	tr->zpend[j].unit = u;
	tr->zpend[j].seq = ++tr->zseq;
	int64_t counts[tr->sh];
	window_pieces(tr, m->unit_begin[u], m->unit_end[u], counts);
	int rc = gpt_comm_reduce_scatter_v_start(tr->groups.g[GPT_MESH_SHARDING], w, counts, m->be->dtype,
						 GPT_REDUCE_SUM, &tr->zpend[j].req, err);
	return rc ? gpt_err_prefix(err, "gradient window of unit %d", u) : 0;
}

/* The shard buffers and windows of stages 2 and 3 (with pmaster at one
 * rank only the parameter windows), and the hooks. */
int gpt_tr_setup_zero(trainer *tr, gpt_err *err)
{
	gpt_model *m = &tr->model;
	gpt_backend *be = m->be;
	size_t es = gpt_dtype_size(be->dtype);
	int64_t span[3] = {m->unit_end[0] - m->unit_begin[0], gpt_tr_zero_layer_span(m),
			   m->unit_end[m->n_units - 1] - m->unit_begin[m->n_units - 1]};
	int rc = 0;
	for (int k = 0; k < 3 && !rc; k++) {
		size_t bytes = (size_t)(span[k] ? span[k] : 1) * es;
		if (tr->stage >= 2 && !(tr->gw[k] = be->ops->alloc(be, bytes, "gradient window", err)))
			rc = err->code;
		if (!rc && param_windows(tr) && !(tr->pw[k] = be->ops->alloc(be, bytes, "parameter window", err)))
			rc = err->code;
	}
	if (!rc && tr->stage >= 2) {
		tr->gshard = be->ops->alloc(be, (size_t)tr->shard * es, "gradient shard", err);
		rc = tr->gshard ? be->ops->zero(be, tr->gshard, (size_t)tr->shard * es, err) : err->code;
	}
	if (!rc && tr->stage >= 3 && !tr->pmaster) {
		tr->pshard = be->ops->alloc(be, (size_t)tr->shard * es, "parameter shard", err);
		rc = tr->pshard ? be->ops->zero(be, tr->pshard, (size_t)tr->shard * es, err) : err->code;
	}
	m->hooks = (gpt_model_hooks){.ctx = tr, .acquire = zero_acquire, .release = zero_release};
	return rc;
}

void gpt_tr_free_zero(trainer *tr)
{
	gpt_backend *be = tr->model.be;
	if (!be)
		return;
	gpt_err e = {0};
	gpt_tr_zero_drain(tr, GPT_EIO, &e); /* nothing may still write into a window */
	void *p[] = {tr->gshard, tr->pshard, tr->gw[0], tr->gw[1], tr->gw[2], tr->gw_layer2,
		     tr->pw[0],  tr->pw[1],  tr->pw[2]};
	for (size_t i = 0; i < sizeof p / sizeof *p; i++)
		if (p[i])
			be->ops->free(be, p[i]);
}

/* The rank's place in the mesh (dp, sharding, tp, pp), the comm and its
 * groups, and the pipeline schedule. One process needs no comm. */
int gpt_tr_setup_parallel(trainer *tr, gpt_err *err)
{
	const gpt_config *cfg = tr->cfg;
	tr->sh = cfg->distributed.sharding.sharding_degree;
	tr->replicas = cfg->distributed.dp_degree * tr->sh;
	tr->LB = tr->G / tr->replicas;
	tr->tp = cfg->distributed.mp_degree;
	tr->pp = cfg->distributed.pp_degree;
	tr->chunks = tr->pp > 1 ? cfg->distributed.virtual_pp_degree : 1;
	tr->pmaster = gpt_train_params_from_master(cfg);
	int rc = 0;
	if (cfg->world_size == 1) {
		/* A launcher's rank without its world size (RANK=3 alone) would
		 * otherwise train alone, as would each of its peers. */
		gpt_dist_env env;
		if ((rc = gpt_dist_env_parse_ranks(&env, environ, err)))
			return rc;
	} else {
		gpt_dist_env env;
		rc = gpt_dist_env_detect(&env, err);
		if (rc)
			return rc;
		if (env.world_size != cfg->world_size)
			return gpt_err_set(err, GPT_EUSAGE,
					   "the layout needs %lld ranks (dp %lld x mp %lld x pp %lld x sharding %lld) but this process is one of %d (%s); start it with gpt-launch --nproc-per-node %lld",
					   (long long)cfg->world_size, (long long)cfg->distributed.dp_degree,
					   (long long)tr->tp, (long long)tr->pp, (long long)tr->sh, env.world_size,
					   gpt_dist_source_name(env.source), (long long)cfg->world_size);
		/* GPU ranks: nccl with a device each, shm staging through pinned
		 * host memory where they share one (GPT_COMM_BACKEND decides) */
		int gpu = cfg->global.device && strcmp(cfg->global.device, "gpu") == 0;
		gpt_comm_options o = {.backend = "shm"};
#if GPT_HAVE_CUDA
		int ndev = gpu ? gpt_cuda_device_count() : 0;
#else
		int ndev = 0;
#endif
		rc = gpt_comm_gpu_plan(getenv(GPT_COMM_BACKEND_ENV), &env, gpu, ndev, &o.backend, &o.device, err);
		if (rc)
			return rc;
		tr->device = o.device > 0 ? o.device : 0;
		rc = gpt_comm_open(&tr->comm, &env, &o, err);
		if (!rc)
			rc = gpt_mesh_init(&tr->mesh, (int)tr->tp, (int)tr->sh, (int)cfg->distributed.dp_degree,
					   (int)tr->pp, (int)cfg->world_size, err);
		if (!rc)
			rc = gpt_mesh_groups_init(&tr->groups, gpt_comm_world(tr->comm), &tr->mesh, err);
		if (rc)
			return rc;
		gpt_mesh_coord co = gpt_mesh_coord_of(&tr->mesh, env.rank);
		tr->rank = env.rank;
		tr->stage = tr->sh > 1 ? cfg->distributed.sharding.sharding_stage : 0;
		tr->replica = gpt_mesh_replica(&tr->mesh, env.rank);
		tr->sh_rank = co.sh;
		tr->tp_rank = co.tp;
		tr->pp_rank = co.pp;
	}
	if (tr->pp > 1) {
		const char *name = cfg->distributed.pipeline_schedule ? cfg->distributed.pipeline_schedule : "1F1B";
		rc = gpt_pipe_schedule(name, tr->pp, tr->pp_rank, tr->chunks, tr->accum, &tr->sched,
				       &tr->n_sched, err);
		tr->slots = rc ? 0 : gpt_pipe_slots(tr->sched, tr->n_sched, tr->chunks);
		tr->wte_held_back = tr->stage >= 2;
	}
	return rc;
}

/* Adds a loss sum and a token count over the data replicas. */
int gpt_tr_sum_over_replicas(trainer *tr, double *sum, int64_t *n, gpt_err *err)
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

/* Sums the gradients over the replicas: all-reduce without sharding; with
 * it, reduce-scatter over the shard group (each rank keeps the sum of its
 * shard) then all-reduce of the shard over dp. */
/* The tied wte of the first and the last pipeline stage: each stage's
 * gradient of it (the lookup's and the head's) is summed over the two, so
 * both copies take the same update. */
int gpt_tr_tied_reduce(trainer *tr, void *grads, gpt_err *err)
{
	gpt_model *m = &tr->model;
	gpt_group *g = tr->groups.g[GPT_MESH_EMBED];
	if (tr->pp == 1 || !g || m->offset[0] < 0)
		return 0;
	return gpt_comm_all_reduce(g, grads, grads, gpt_box_numel(&m->box[0]), m->be->dtype,
				   GPT_REDUCE_SUM, err);
}

int gpt_tr_reduce_grads(trainer *tr, gpt_err *err)
{
	gpt_model *m = &tr->model;
	gpt_dtype t = m->be->dtype;
	if (tr->stage >= 2) {
		/* over the sharding group: done unit by unit during the
		 * backward (zero_release), but for a held-back embedding window */
		int rc = 0;
		if (tr->wte_held_back && m->unit_end[0] > m->unit_begin[0]) {
			rc = gpt_tr_tied_reduce(tr, (char *)tr->gw[0] + (m->offset[0] - m->unit_begin[0]) *
							     (int64_t)gpt_dtype_size(t), err);
			if (!rc)
				rc = reduce_window(tr, 0, tr->gw[0], err);
		}
		/* over dp: the shard, once for the step's micro-batches */
		if (!rc && tr->mesh.dp > 1)
			rc = gpt_comm_all_reduce(tr->groups.g[GPT_MESH_DP], tr->gshard, tr->gshard, tr->shard, t,
						 GPT_REDUCE_SUM, err);
		return rc;
	}
	int rc0 = m->offset[0] >= 0 ? gpt_tr_tied_reduce(tr, (char *)m->grads + m->offset[0] * (int64_t)gpt_dtype_size(t), err) : 0;
	if (rc0)
		return rc0;
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
