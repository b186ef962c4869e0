/* The gradient reduction of a step overlapped with its last backward
 * (Distributed.overlap_grad_reduce; Megatron's overlap_grad_reduce, DDP's
 * buckets), for data parallelism and sharding stage 1.
 *
 * The backward finishes the units of the flat gradient buffer (model/gpt.h)
 * from the end towards the start: the final LayerNorm, the layers last to
 * first, the embedding. A unit is final once its backward ran for every
 * micro-batch of the step (the model's release hook counts them, so the
 * pipeline schedules, whatever their order, need nothing of their own). The
 * final units at the end of the buffer form a suffix; when the part of it
 * not yet reduced reaches Distributed.comm_buffer_size, that part becomes a
 * bucket: a run of whole units, started as an asynchronous all-reduce
 * (lib/comm) while the backward goes on below it. The rest, down to the
 * first element, is the last bucket, started when the embedding is final.
 *
 * Every element gets the sum the synchronous path (zero.c) computes, in the
 * same order, so the results are the same bits (over shm; NCCL's order may
 * depend on the sizes it is given):
 *  - dp: the all-reduce over the data group, in buckets;
 *  - sharding stage 1: an all-reduce over the sharding group in buckets (its
 *    sum of this rank's shard is the reduce-scatter's), then with dp > 1 the
 *    all-reduce of the shard over dp at the end, as before;
 *  - the tied wte of a pipeline's first and last stage is summed over the two
 *    stages first, so the embedding unit of such a stage stays out of the
 *    buckets and is reduced at the end after that sum, as before.
 * Stages 2 and 3 reduce unit by unit inside the backward; zero.c overlaps
 * those reductions (gpt_tr_zero_overlap_on). */
#include "train/trainer-impl.h"

#include <stdlib.h>
#include <string.h>

static int64_t es_of(const trainer *tr)
{
	return (int64_t)gpt_dtype_size(tr->model.be->dtype);
}

/* Starts the reduction of [a, b) of the gradients. */
static int start_bucket(trainer *tr, int64_t a, int64_t b, gpt_err *err)
{
	tr_overlap *ov = &tr->ov;
	if (b <= a)
		return 0;
	if (ov->nreq == ov->cap) {
		int cap = ov->cap ? 2 * ov->cap : 16;
		gpt_comm_req **r = realloc(ov->req, (size_t)cap * sizeof *r);
		if (!r)
			return gpt_err_set(err, GPT_EINTERNAL, "out of memory for gradient buckets");
		ov->req = r;
		ov->cap = cap;
	}
	void *p = (char *)tr->model.grads + a * es_of(tr);
	int rc = gpt_comm_all_reduce_start(ov->g, p, p, b - a, tr->model.be->dtype, GPT_REDUCE_SUM,
					   &ov->req[ov->nreq], err);
	if (rc)
		return gpt_err_prefix(err, "gradient bucket [%lld, %lld)", (long long)a, (long long)b);
	ov->nreq++;
	return 0;
}

static int unit_final(const trainer *tr, int u)
{
	const gpt_model *m = &tr->model;
	return m->unit_end[u] == m->unit_begin[u] || tr->ov.seen[u] >= tr->accum;
}

/* Moves the frontier over the units that became final and starts what
 * makes a bucket (all that is left once every unit is final). */
static int advance(trainer *tr, gpt_err *err)
{
	tr_overlap *ov = &tr->ov;
	gpt_model *m = &tr->model;
	while (ov->frontier > 0 && unit_final(tr, ov->frontier - 1))
		ov->frontier--;
	/* the first element of the final suffix (empty units count as 0) */
	int64_t begin = m->n_flat;
	for (int u = ov->frontier; u < m->n_units; u++)
		if (m->unit_end[u] > m->unit_begin[u]) {
			begin = m->unit_begin[u];
			break;
		}
	if (ov->frontier == 0)
		begin = 0;
	if (begin < ov->lo)
		begin = ov->lo;
	if (ov->issued - begin >= ov->bucket || (ov->frontier == 0 && ov->issued > begin)) {
		int rc = start_bucket(tr, begin, ov->issued, err);
		if (rc)
			return rc;
		ov->issued = begin;
	}
	return 0;
}

static int overlap_release(void *ctx, gpt_model *m, int unit, int backward, gpt_err *err)
{
	(void)m;
	trainer *tr = ctx;
	if (!backward || !tr->ov.armed)
		return 0;
	tr->ov.seen[unit]++;
	return advance(tr, err);
}

int gpt_tr_overlap_setup(trainer *tr, gpt_err *err)
{
	const gpt_config *cfg = tr->cfg;
	tr_overlap *ov = &tr->ov;
	gpt_model *m = &tr->model;
	double mb = cfg->distributed.comm_buffer_size;
	if (tr->replicas == 1) /* nothing to reduce */
		return 0;
	if (!cfg->distributed.overlap_grad_reduce) {
		gpt_log_printf(&tr->log, GPT_LOG_INFO, "gradient reduction: %s (Distributed.overlap_grad_reduce False)",
			       tr->stage >= 2 ? "unit by unit inside the backward" : "after the backward");
		return 0;
	}
	if (tr->stage >= 2) {
		int rc = gpt_tr_zero_overlap_on(tr, err);
		if (!rc)
			gpt_log_printf(&tr->log, GPT_LOG_INFO,
				       "gradient reduction: unit by unit, each unit's reduce-scatter overlapped with the backward of the units before it (sharding stage %lld, two layer gradient windows; Distributed.overlap_grad_reduce)",
				       (long long)tr->stage);
		return rc;
	}
	ov->seen = gpt_calloc((size_t)m->n_units, sizeof *ov->seen, "gradient buckets", err);
	if (!ov->seen)
		return err->code;
	ov->on = 1;
	ov->g = tr->sh > 1 ? tr->groups.g[GPT_MESH_SHARDING] : tr->groups.g[GPT_MESH_DATA];
	ov->bucket = (int64_t)(mb * 1048576.0 / (double)es_of(tr));
	if (ov->bucket < 1)
		ov->bucket = 1;
	/* a tied wte is summed over the first and last stage before the rest */
	int tied = tr->pp > 1 && tr->groups.g[GPT_MESH_EMBED] && m->offset[0] >= 0;
	ov->lo = tied ? m->unit_end[0] : 0;
	m->hooks = (gpt_model_hooks){.ctx = tr, .release = overlap_release};
	gpt_log_printf(&tr->log, GPT_LOG_INFO,
		       "gradient reduction: overlapped with the backward of each step's last micro-batch, in buckets of at least %g MB (%lld elements) over the %s group (Distributed.overlap_grad_reduce, comm_buffer_size)",
		       mb, (long long)ov->bucket, ov->g->name);
	return 0;
}

void gpt_tr_overlap_free(trainer *tr)
{
	free(tr->ov.seen);
	free(tr->ov.req);
}

void gpt_tr_overlap_begin(trainer *tr)
{
	tr_overlap *ov = &tr->ov;
	if (!ov->on)
		return;
	memset(ov->seen, 0, (size_t)tr->model.n_units * sizeof *ov->seen);
	ov->frontier = tr->model.n_units;
	ov->issued = tr->model.n_alloc;
	ov->nreq = 0;
	ov->armed = 1;
}

/* Waits for every bucket (all of them, so that none is left writing into
 * the gradients, even after a failure), then does what follows them. */
int gpt_tr_overlap_end(trainer *tr, int rc, gpt_err *err)
{
	tr_overlap *ov = &tr->ov;
	gpt_model *m = &tr->model;
	gpt_dtype t = m->be->dtype;
	ov->armed = 0;
	/* the backward is over: whatever is left is final */
	if (!rc && ov->issued > ov->lo) {
		rc = start_bucket(tr, ov->lo, ov->issued, err);
		ov->issued = ov->lo;
	}
	for (int i = 0; i < ov->nreq; i++) {
		gpt_err e2 = {0};
		int r2 = gpt_comm_wait(ov->req[i], rc ? &e2 : err);
		if (!rc && r2)
			rc = gpt_err_prefix(err, "gradient bucket %d of %d", i + 1, ov->nreq);
	}
	if (!rc && !ov->logged) {
		ov->logged = 1;
		gpt_log_printf(&tr->log, GPT_LOG_INFO, "gradient reduction: %d bucket%s per step", ov->nreq,
			       ov->nreq == 1 ? "" : "s");
	}
	ov->nreq = 0;
	if (rc)
		return rc;
	if (ov->lo > 0) {
		rc = gpt_tr_tied_reduce(tr, m->grads, err);
		if (!rc)
			rc = gpt_comm_all_reduce(ov->g, m->grads, m->grads, ov->lo, t, GPT_REDUCE_SUM, err);
	}
	if (!rc && tr->sh > 1 && tr->mesh.dp > 1) {
		void *mine = (char *)m->grads + tr->opt.begin * es_of(tr);
		rc = gpt_comm_all_reduce(tr->groups.g[GPT_MESH_DP], mine, mine, tr->shard, t, GPT_REDUCE_SUM, err);
	}
	return rc;
}
