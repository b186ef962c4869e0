/* The head of the GPT on the last pipeline stage: ln_f and the fused
 * classifier, which never holds a micro-batch's logits (gpt_model_forward). */
#include "model/gpt-impl.h"

/* About 64 Mi logits at a time (128 MiB in bf16: GPT-2's whole B=32 x
 * T=1024 x 50304 would be 3 GiB), in multiples of 64 rows. */
int64_t gpt_model_head_rows(const gpt_model_opts *o, int64_t BT, int64_t Vl)
{
	int64_t r = o->head_rows;
	if (r <= 0) {
		r = ((int64_t)1 << 26) / (Vl > 0 ? Vl : 1);
		r = r >= 64 ? r - r % 64 : r > 0 ? r : 1;
	}
	return r < BT ? r : BT;
}

/* The cross-entropy's statistics of n rows of logits (this rank's
 * vocabulary piece), made global over tp: the maximum, the sum of
 * exponentials relative to it, the target's logit. */
static int xent_stats(gpt_model *m, const int32_t *targets, int64_t n, int64_t Vl, gpt_err *err)
{
	const gpt_backend_ops *o = m->be->ops;
	int64_t v0 = m->layout.tp_rank * Vl;
	int rc;
	OP(o->xent_fwd(m->be, m->xent_max, m->xent_sumexp, m->xent_tlogit, m->logits, targets, n, Vl, Vl,
		       v0, m->shape.vocab_size, err));
	if (m->layout.tp == 1)
		return 0;
	OP(gpt_comm_all_reduce(m->tp_group, m->xent_max, m->xent_gmax, n, GPT_DTYPE_F32, GPT_REDUCE_MAX, err));
	OP(o->xent_rescale(m->be, m->xent_sumexp, m->xent_max, m->xent_gmax, n, err));
	OP(o->copy(m->be, m->xent_max, m->xent_gmax, (size_t)n * 4, err));
	/* the sums of exponentials and the target logits: one call (adjacent
	 * when n is a whole block; two for a shorter last block) */
	if (n == m->head_rows)
		return gpt_comm_all_reduce(m->tp_group, m->xent_sumexp, m->xent_sumexp, 2 * n, GPT_DTYPE_F32,
					   GPT_REDUCE_SUM, err);
	OP(gpt_comm_all_reduce(m->tp_group, m->xent_sumexp, m->xent_sumexp, n, GPT_DTYPE_F32, GPT_REDUCE_SUM, err));
	return gpt_comm_all_reduce(m->tp_group, m->xent_tlogit, m->xent_tlogit, n, GPT_DTYPE_F32,
				   GPT_REDUCE_SUM, err);
}

/* A micro-batch's losses summed in token order; an ignored target's loss
 * is 0 (xent_loss), which leaves the sum as it is. */
static double sum_of(const float *losses, int64_t n)
{
	double s = 0;
	for (int64_t i = 0; i < n; i++)
		s += losses[i];
	return s;
}

/* The head, after the last chunk's layers: ln_f, then the fused classifier
 * (see gpt_model_forward) over blocks of head_rows rows of the whole (B*T, C)
 * hidden state x: a block's logits x wte^T, their statistics, the block's
 * losses and, with dloss, the logits' gradient in place, from which the
 * block's rows of the gradient of x and its share of wte's gradient. That
 * gradient of x, summed over tp (or reduced to this rank's rows), is the
 * slot's dlnf, where the backward starts. */
int gpt_model_head_fwd(gpt_model *m, int64_t chunk, const int32_t *targets, const float *dloss,
		       double *loss_sum, int64_t *n_tokens, gpt_err *err)
{
	gpt_backend *be = m->be;
	const gpt_backend_ops *o = be->ops;
	int64_t BT = m->opts.batch * m->opts.seq_len, C = m->shape.hidden;
	int64_t V = m->shape.vocab_size, Vl = m->shape.padded_vocab / m->layout.tp;
	int64_t v0 = m->layout.tp_rank * Vl;
	size_t es = gpt_dtype_size(be->dtype);
	int rc;
	m->head_grad = 0;
	OP(o->layernorm_fwd(be, m->lnf, m->lnf_mean, m->lnf_rstd, gpt_model_chunk_output(m, chunk),
			    gpt_model_param(m, T_LNF_W(m)), gpt_model_param(m, T_LNF_B(m)), m->n_rows, C,
			    m->opts.ln_eps, err));
	if (seqpar(m))
		OP(sp_gather(m, m->gath, m->lnf, err));
	if (!targets)
		return 0;
	for (int64_t i = 0; i < BT; i++)
		if (targets[i] >= V)
			return gpt_err_set(err, GPT_EDATA,
					   "target token id %d at position %lld is outside the model's vocabulary of %lld; the data was made with a larger vocabulary than Model.vocab_size",
					   targets[i], (long long)i, (long long)V);
	if (m->loss_next >= m->loss_slots)
		return gpt_err_set(err, GPT_EINTERNAL,
				   "model: the losses of %lld micro-batches wait for gpt_model_take_losses, as many as opts.loss_slots",
				   (long long)m->loss_next);
	/* this micro-batch's losses: the next free slot (see gpt_model_forward) */
	float *losses = m->losses + m->loss_next * BT;
	OP(o->upload(be, m->targets, targets, (size_t)BT * 4, err));
	const char *x = seqpar(m) ? m->gath : m->lnf;
	const void *w = gpt_model_param(m, T_WTE);
	/* the gradient of x: every row, summed over tp afterwards */
	char *dx = seqpar(m) ? m->d_c : m->dlnf;
	void *dw = m->head_dw ? m->head_dw : gpt_model_grad(m, T_WTE);
	for (int64_t r0 = 0; r0 < BT; r0 += m->head_rows) {
		int64_t n = BT - r0 < m->head_rows ? BT - r0 : m->head_rows;
		OP(o->linear_fwd(be, m->logits, x + r0 * C * (int64_t)es, w, NULL, n, C, Vl, err));
		if (dloss && m->layout.tp == 1) {
			/* the whole vocabulary here: loss and gradient in one op */
			OP(o->xent_fused(be, losses + r0, m->xent_max, m->xent_sumexp, m->xent_tlogit, m->logits,
					 m->logits, m->targets + r0, *dloss, n, Vl, Vl, V, err));
			OP(o->linear_bwd(be, dx + r0 * C * (int64_t)es, dw, NULL, m->logits, x + r0 * C * (int64_t)es,
					 w, n, C, Vl, err));
			continue;
		}
		OP(xent_stats(m, m->targets + r0, n, Vl, err));
		OP(o->xent_loss(be, losses + r0, m->xent_max, m->xent_sumexp, m->xent_tlogit, m->targets + r0, n,
				err));
		if (!dloss)
			continue;
		OP(o->xent_bwd(be, m->logits, m->logits, m->targets + r0, m->xent_max, m->xent_sumexp, *dloss, n,
			       Vl, Vl, v0, V, err));
		OP(o->linear_bwd(be, dx + r0 * C * (int64_t)es, dw, NULL, m->logits, x + r0 * C * (int64_t)es, w, n,
				 C, Vl, err));
	}
	if (dloss) {
		OP(seqpar(m) ? sp_scatter(m, m->dlnf, m->d_c, err) : tp_sum(m, m->dlnf, BT * C, err));
		m->head_grad = 1;
	}
	int64_t cnt = 0;
	for (int64_t i = 0; i < BT; i++)
		cnt += targets[i] >= 0;
	if (n_tokens)
		*n_tokens = cnt;
	if (!loss_sum) {
		m->loss_next++;
		return 0;
	}
	OP(o->download(be, m->host_losses, losses, (size_t)BT * 4, err));
	*loss_sum = sum_of(m->host_losses, BT);
	return 0;
}

int gpt_model_take_losses(gpt_model *m, double *loss_sum, gpt_err *err)
{
	int64_t BT = m->opts.batch * m->opts.seq_len, n = m->loss_next;
	*loss_sum = 0;
	if (n == 0)
		return 0;
	m->loss_next = 0;
	int rc = m->be->ops->download(m->be, m->host_losses, m->losses, (size_t)(n * BT) * 4, err);
	if (rc)
		return rc;
	for (int64_t j = 0; j < n; j++)
		*loss_sum += sum_of(m->host_losses + j * BT, BT);
	return 0;
}

const void *gpt_model_final_hidden(const gpt_model *m)
{
	return seqpar(m) ? m->gath : m->lnf;
}
