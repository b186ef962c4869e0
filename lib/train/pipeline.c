/* Pipeline parallelism: the schedules (FThenB, 1F1B, interleaved 1F1B) as
 * lists of forward and backward passes per rank, and running one step or
 * one evaluation batch through the stages with send/recv. */
#include "train/trainer-impl.h"

#include <stdlib.h>
#include <string.h>

static void put(gpt_pipe_op *ops, int64_t *n, int fwd, int64_t mb, int64_t chunk)
{
	ops[(*n)++] = (gpt_pipe_op){.mb = (int32_t)mb, .chunk = (int32_t)chunk, .fwd = (int8_t)fwd};
}

/* The k-th forward (or backward) of the interleaved schedule: micro-batches
 * go through the chunks in groups of pp (Megatron-LM's order). */
static void interleaved_at(int64_t k, int64_t pp, int64_t chunks, int fwd, int64_t *mb, int64_t *chunk)
{
	int64_t c = (k / pp) % chunks;
	*chunk = fwd ? c : chunks - 1 - c;
	*mb = (k / (pp * chunks)) * pp + k % pp;
}

int gpt_pipe_schedule(const char *name, int64_t pp, int64_t rank, int64_t chunks, int64_t micro,
		      gpt_pipe_op **out, int64_t *n_out, gpt_err *err)
{
	*out = NULL;
	*n_out = 0;
	int inter = strcmp(name, "interleaved") == 0;
	if (!inter && strcmp(name, "1F1B") != 0 && strcmp(name, "FThenB") != 0)
		return gpt_err_set(err, GPT_EUSAGE,
				   "Distributed.pipeline_schedule: '%s' is not FThenB, 1F1B or interleaved", name);
	if (pp < 1 || rank < 0 || rank >= pp || chunks < 1 || micro < 1 || (!inter && chunks != 1))
		return gpt_err_set(err, GPT_EINTERNAL, "pipeline: rank %lld of %lld, %lld chunks, %lld micro-batches",
				   (long long)rank, (long long)pp, (long long)chunks, (long long)micro);
	if (inter && micro % pp)
		return gpt_err_set(err, GPT_EUSAGE,
				   "Engine.accumulate_steps: the interleaved schedule takes micro-batches in groups of pp_degree %lld; %lld is not a multiple (set accumulate_steps to a multiple, or use 1F1B)",
				   (long long)pp, (long long)micro);
	int64_t total = micro * chunks;
	gpt_pipe_op *ops = gpt_calloc((size_t)(2 * total), sizeof *ops, "pipeline schedule", err);
	if (!ops)
		return err->code;
	int64_t n = 0;
	if (strcmp(name, "FThenB") == 0) {
		for (int64_t j = 0; j < micro; j++)
			put(ops, &n, 1, j, 0);
		for (int64_t j = 0; j < micro; j++)
			put(ops, &n, 0, j, 0);
	} else {
		/* warm-up forwards, then one forward and one backward in turn,
		 * then the remaining backwards */
		int64_t warm = inter ? (pp - rank - 1) * 2 + (chunks - 1) * pp : pp - rank - 1;
		if (inter && micro == pp)
			warm = total;
		if (warm > total)
			warm = total;
		int64_t f = 0, b = 0, mb, c;
		for (; f < warm; f++) {
			interleaved_at(f, pp, chunks, 1, &mb, &c);
			put(ops, &n, 1, mb, c);
		}
		for (; f < total; f++, b++) {
			interleaved_at(f, pp, chunks, 1, &mb, &c);
			put(ops, &n, 1, mb, c);
			interleaved_at(b, pp, chunks, 0, &mb, &c);
			put(ops, &n, 0, mb, c);
		}
		for (; b < total; b++) {
			interleaved_at(b, pp, chunks, 0, &mb, &c);
			put(ops, &n, 0, mb, c);
		}
	}
	*out = ops;
	*n_out = n;
	return 0;
}

int64_t gpt_pipe_slots(const gpt_pipe_op *ops, int64_t n, int64_t chunks)
{
	int64_t live = 0, most = 0, micro = 0;
	for (int64_t i = 0; i < n; i++)
		if (ops[i].mb + 1 > micro)
			micro = ops[i].mb + 1;
	int *fw = calloc((size_t)(micro ? micro : 1), sizeof *fw), *bw = calloc((size_t)(micro ? micro : 1), sizeof *bw);
	if (!fw || !bw) {
		free(fw);
		free(bw);
		return micro; /* the most there can be */
	}
	for (int64_t i = 0; i < n; i++) {
		int32_t j = ops[i].mb;
		if (ops[i].fwd) {
			if (fw[j]++ == 0)
				live++;
		} else if (++bw[j] == chunks) {
			live--;
		}
		if (live > most)
			most = live;
	}
	free(fw);
	free(bw);
	return most;
}

/* ---- running a schedule ---- */

/* The virtual stage of this rank's chunk c. */
static int64_t vstage(const trainer *tr, int64_t c) { return c * tr->pp + tr->pp_rank; }

/* A send waits for the next receive so that the two go in one batch:
 * neighbours that send to each other at the same time then cannot block
 * each other (Megatron-LM's send_forward_recv_backward). */
typedef struct pending {
	int have;
	gpt_p2p op;
} pending;

static int p2p(trainer *tr, pending *pd, gpt_p2p *recv, gpt_err *err)
{
	gpt_p2p ops[2];
	int n = 0;
	if (pd->have)
		ops[n++] = pd->op;
	if (recv)
		ops[n++] = *recv;
	pd->have = 0;
	return n ? gpt_comm_p2p(tr->groups.g[GPT_MESH_PP], ops, n, tr->model.be->dtype, err) : 0;
}

/* The pipeline rank (group rank in the pp group) holding virtual stage v. */
static int64_t peer_of(const trainer *tr, int64_t v)
{
	return v % tr->pp;
}

/* Whether pass op of this rank starts with a receive. */
static int receives(const trainer *tr, const gpt_pipe_op *op)
{
	int64_t v = vstage(tr, op->chunk);
	return op->fwd ? v > 0 : v < tr->pp * tr->chunks - 1;
}

/* Runs one list of passes. rows holds the replica's micro-batches
 * (accum x MB rows of T + 1 tokens). training 0: forwards only (ops holds
 * only forwards). Loss sums and token counts of the last stage add up in
 * *sum and *ntok. A pass's send waits for the next pass's receive, to go in
 * one batch with it, or goes at once when the next pass receives nothing
 * (before anything can overwrite what it sends). */
static int run_ops(trainer *tr, const gpt_pipe_op *ops, int64_t n, const int32_t *rows, int training,
		   uint32_t step, int64_t sample_base, float dloss, double *sum, int64_t *ntok, gpt_err *err)
{
	gpt_model *m = &tr->model;
	gpt_backend *be = m->be;
	int64_t BTC = gpt_model_stream_numel(m), V = tr->pp * tr->chunks;
	size_t bytes = (size_t)BTC * gpt_dtype_size(be->dtype);
	int64_t *slot_of = gpt_calloc((size_t)tr->accum, sizeof *slot_of, "pipeline slots", err);
	int *done = gpt_calloc((size_t)tr->accum, sizeof *done, "pipeline slots", err);
	int *busy = gpt_calloc((size_t)m->n_slots, sizeof *busy, "pipeline slots", err);
	int rc = slot_of && done && busy ? 0 : GPT_EINTERNAL;
	pending pd = {0};
	for (int64_t j = 0; j < tr->accum; j++)
		slot_of[j] = -1;
	for (int64_t i = 0; i < n && !rc; i++) {
		int64_t mb = ops[i].mb, c = ops[i].chunk, v = vstage(tr, c);
		if (slot_of[mb] < 0) {
			int64_t k = 0;
			while (k < m->n_slots && busy[k])
				k++;
			if (k == m->n_slots) {
				rc = gpt_err_set(err, GPT_EINTERNAL, "pipeline: more than %lld micro-batches in flight",
						 (long long)m->n_slots);
				break;
			}
			busy[k] = 1;
			slot_of[mb] = k;
		}
		gpt_model_use_slot(m, slot_of[mb]);
		gpt_p2p r = ops[i].fwd
			? (gpt_p2p){.peer = (int)peer_of(tr, v - 1), .buf = gpt_model_chunk_input(m, c), .count = BTC}
			: (gpt_p2p){.peer = (int)peer_of(tr, v + 1), .buf = tr->pp_grad_in, .count = BTC};
		int recv = receives(tr, &ops[i]);
		rc = p2p(tr, &pd, recv ? &r : NULL, err);
		if (ops[i].fwd) {
			const int32_t *rw = rows + mb * tr->MB * (tr->T + 1);
			for (int64_t b = 0; b < tr->MB; b++)
				for (int64_t t = 0; t < tr->T; t++) {
					tr->inp[b * tr->T + t] = rw[b * (tr->T + 1) + t];
					tr->tgt[b * tr->T + t] = rw[b * (tr->T + 1) + t + 1];
				}
			double s = 0;
			int64_t k = 0;
			/* training: the losses wait on the device (gpt_model_take_losses) */
			if (!rc)
				rc = gpt_model_forward_chunk(m, c, tr->inp, tr->tgt, training, step,
							     sample_base + mb * tr->MB, training ? &dloss : NULL,
							     training ? NULL : &s, &k, err);
			*sum += s;
			*ntok += k;
			if (!rc && v < V - 1)
				pd = (pending){1, {.peer = (int)peer_of(tr, v + 1), .is_send = 1,
						   .buf = gpt_model_chunk_output(m, c), .count = BTC}};
		} else {
			if (!rc && recv)
				rc = be->ops->copy(be, gpt_model_dgrad(m), tr->pp_grad_in, bytes, err);
			if (!rc)
				rc = gpt_model_backward_chunk(m, c, err);
			if (!rc && v > 0)
				pd = (pending){1, {.peer = (int)peer_of(tr, v - 1), .is_send = 1,
						   .buf = gpt_model_dgrad(m), .count = BTC}};
		}
		if (!rc && pd.have && (i + 1 == n || !receives(tr, &ops[i + 1])))
			rc = p2p(tr, &pd, NULL, err);
		/* a slot is free again after its micro-batch's last pass here:
		 * the backward of every chunk, or in a forward-only run the
		 * forward of every chunk */
		if (!rc && (!training || !ops[i].fwd) && ++done[mb] == tr->chunks) {
			busy[slot_of[mb]] = 0;
			slot_of[mb] = -1;
			done[mb] = 0;
		}
	}
	free(slot_of);
	free(done);
	free(busy);
	return rc;
}

int gpt_tr_pipeline_step(trainer *tr, const int32_t *rows, uint32_t step, float dloss, int64_t *ntok,
			 gpt_err *err)
{
	double sum = 0;
	*ntok = 0;
	return run_ops(tr, tr->sched, tr->n_sched, rows, 1, step, tr->replica * tr->LB, dloss, &sum, ntok, err);
}

int gpt_tr_pipeline_eval(trainer *tr, const int32_t *rows, uint32_t step, double *sum, int64_t *ntok,
			 gpt_err *err)
{
	gpt_pipe_op *ops = gpt_calloc((size_t)(tr->accum * tr->chunks), sizeof *ops, "pipeline schedule", err);
	if (!ops)
		return err->code;
	int64_t n = 0;
	/* forwards only, micro-batch after micro-batch through the chunks in
	 * the order of the virtual stages */
	for (int64_t j = 0; j < tr->accum; j++)
		for (int64_t c = 0; c < tr->chunks; c++)
			put(ops, &n, 1, j, c);
	*sum = 0;
	*ntok = 0;
	int rc = run_ops(tr, ops, n, rows, 0, step, 0, 0, sum, ntok, err);
	free(ops);
	return rc ? rc : gpt_tr_sum_over_stages(tr, sum, ntok, err);
}

/* The loss lives on the last stage: every stage gets it. */
int gpt_tr_sum_over_stages(trainer *tr, double *sum, int64_t *n, gpt_err *err)
{
	if (tr->pp == 1)
		return 0;
	float v[2] = {(float)*sum, (float)*n};
	int rc = gpt_comm_all_reduce(tr->groups.g[GPT_MESH_PP], v, v, 2, GPT_DTYPE_F32, GPT_REDUCE_SUM, err);
	*sum = v[0];
	*n = (int64_t)v[1];
	return rc;
}
