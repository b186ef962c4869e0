/* The GPT network's passes on one rank: the forward (embedding, layers,
 * then head.c's classifier) and the backward, chunk by chunk, with
 * recompute, tensor and sequence parallelism and the residual dropout
 * fused into the LayerNorms around it (buffers and initialisation are
 * gpt.c's). */
#include "model/gpt-impl.h"

#include "backend/philox.h"
#include "model/qat.h"

#include <string.h>

/* ---- forward ---- */

static gpt_dropout dropout_at(const gpt_model *m, float p, int64_t layer, gpt_rng_site site,
			      int64_t feature0)
{
	gpt_dropout d = {.p = m->dropout_on ? p : 0.0f,
			 .key = {.seed = m->opts.seed, .step = m->step, .layer = (uint32_t)layer,
				 .site = (uint32_t)site},
			 .sample0 = m->sample0,
			 .feature0 = feature0};
	return d;
}


/* A row-parallel linear (input features split over tp): the partial
 * products are summed over tp (reduced to this rank's rows under sequence
 * parallelism), then the replicated bias is added once. Returns the output
 * in *out: tmp_c, or tmp_s (n_rows) under sequence parallelism. */
static int row_linear_fwd(gpt_model *m, int64_t l, gpt_qat_linear k, void **out, const void *inp,
			  const void *w, const void *bias, int64_t M, int64_t K, int64_t N, gpt_err *err)
{
	const gpt_backend_ops *o = m->be->ops;
	*out = m->tmp_c;
	if (m->layout.tp == 1)
		return gpt_qat_linear_fwd(m, l, k, m->tmp_c, inp, w, bias, M, K, N, err);
	int rc;
	OP(gpt_qat_linear_fwd(m, l, k, m->tmp_c, inp, w, NULL, M, K, N, err));
	if (seqpar(m)) {
		*out = m->tmp_s;
		OP(sp_scatter(m, m->tmp_s, m->tmp_c, err));
		return o->bias_add(m->be, m->tmp_s, bias, m->n_rows, N, err);
	}
	OP(tp_sum(m, m->tmp_c, M * N, err));
	return o->bias_add(m->be, m->tmp_c, bias, M, N, err);
}

/* This rank's token rows as dropout sees them, B sequences of T (d's
 * offsets moved to their first): the whole micro-batch, or under sequence
 * parallelism rows [tp_rank x n, +n), whole sequences or a part of one
 * (gpt_model_init checked that it is one or the other). */
static void rows_of(const gpt_model *m, gpt_dropout *d, int64_t *B, int64_t *T)
{
	int64_t n = m->n_rows;
	*B = m->opts.batch, *T = m->opts.seq_len;
	if (seqpar(m)) {
		int64_t r0 = m->layout.tp_rank * n;
		d->sample0 += r0 / *T;
		d->t0 = r0 % *T;
		*B = n <= *T ? 1 : n / *T;
		*T = n <= *T ? n : *T;
	}
}

/* Dropout over this rank's token rows (rows_of). */
static int drop_rows(gpt_model *m, int bwd, void *out, const void *inp, gpt_dropout d, gpt_err *err)
{
	const gpt_backend_ops *o = m->be->ops;
	int64_t B, T, C = m->shape.hidden;
	rows_of(m, &d, &B, &T);
	return bwd ? o->dropout_bwd(m->be, out, inp, B, T, C, &d, err)
		   : o->dropout_fwd(m->be, out, inp, B, T, C, &d, err);
}

/* A branch's output x (dropped by dr) added into the residual stream a as
 * res, and with w, bias the LayerNorm of res into ln, mean, rstd
 * (residual_layernorm_fwd, the dropout inside it); without w, the
 * dropout and the add alone. x is scratch, dropped in place or not. */
static int branch_add(gpt_model *m, void *res, const void *a, void *x, gpt_dropout dr, void *ln, float *mean,
		      float *rstd, const void *w, const void *bias, gpt_err *err)
{
	const gpt_backend_ops *o = m->be->ops;
	int64_t B, T, C = m->shape.hidden;
	int rc;
	rows_of(m, &dr, &B, &T);
	if (w)
		return o->residual_layernorm_fwd(m->be, res, ln, mean, rstd, a, x, w, bias, m->n_rows, C,
						 m->opts.ln_eps, dr.p > 0 ? &dr : NULL, T, err);
	if (dr.p > 0)
		OP(o->dropout_fwd(m->be, x, x, B, T, C, &dr, err));
	return o->residual_fwd(m->be, res, a, x, m->n_rows * C, err);
}

/* A LayerNorm's backward. Under sequence parallelism each rank sees only
 * its rows, so the weight and bias gradients of this micro-batch are summed
 * over tp before they join the accumulated ones. next: the residual dropout
 * site the stream's gradient dinp goes through next in this backward, or
 * NULL; with p > 0 its branch's gradient is made in the same pass
 * (residual_layernorm_bwd) into d_c or d_c2, whichever dout is not, for
 * drop_taken. Not under sequence parallelism, whose dropout writes d_s,
 * where ln_1's dout is, nor with a backend without the op. */
static int ln_bwd(gpt_model *m, void *dinp, int64_t iw, int64_t ib, const void *dout, const void *inp,
		  const float *mean, const float *rstd, const gpt_dropout *next, gpt_err *err)
{
	const gpt_backend_ops *o = m->be->ops;
	int64_t C = m->shape.hidden;
	m->bwd_drop.on = 0;
	if (!seqpar(m) && next && next->p > 0 && o->residual_layernorm_bwd) {
		gpt_dropout d = *next;
		int64_t B, T;
		void *to = dout == m->d_c ? m->d_c2 : m->d_c;
		rows_of(m, &d, &B, &T);
		int rc = o->residual_layernorm_bwd(m->be, dinp, to, gpt_model_grad(m, iw), gpt_model_grad(m, ib), dout,
						   inp, gpt_model_param(m, iw), mean, rstd, m->n_rows, C, &d, T, err);
		if (!rc) {
			m->bwd_drop.on = 1;
			m->bwd_drop.layer = d.key.layer, m->bwd_drop.site = d.key.site;
			m->bwd_drop.at = to;
		}
		return rc;
	}
	if (!seqpar(m))
		return o->layernorm_bwd(m->be, dinp, gpt_model_grad(m, iw), gpt_model_grad(m, ib), dout, inp,
					gpt_model_param(m, iw), mean, rstd, m->n_rows, C, err);
	size_t es = gpt_dtype_size(m->be->dtype);
	void *gw = m->ln_tmp, *gb = (char *)m->ln_tmp + C * (int64_t)es;
	int rc;
	OP(o->zero(m->be, m->ln_tmp, 2 * (size_t)C * es, err));
	OP(o->layernorm_bwd(m->be, dinp, gw, gb, dout, inp, gpt_model_param(m, iw), mean, rstd, m->n_rows,
			    C, err));
	OP(gpt_comm_all_reduce(m->tp_group, m->ln_tmp, m->ln_tmp, 2 * C, m->be->dtype, GPT_REDUCE_SUM, err));
	OP(o->residual_fwd(m->be, gpt_model_grad(m, iw), gpt_model_grad(m, iw), gw, C, err));
	return o->residual_fwd(m->be, gpt_model_grad(m, ib), gpt_model_grad(m, ib), gb, C, err);
}

/* 1 when the LayerNorm's backward made the gradient of d's branch
 * (ln_bwd's next), which is then at m->bwd_drop.at: taken once. */
static int drop_taken(gpt_model *m, const gpt_dropout *d)
{
	int on = m->bwd_drop.on && m->bwd_drop.layer == d->key.layer && m->bwd_drop.site == d->key.site;
	m->bwd_drop.on = 0;
	return on;
}

static void *res_in(const gpt_model *m, int64_t l) { return m->res[l + m->lchunk[l]]; }
static void *res_out(const gpt_model *m, int64_t l) { return m->res[l + m->lchunk[l] + 1]; }

/* The attention half of local layer l: ln_1 (unless ln1_done: the layer
 * before made it, mlp_half_fwd), qkv, attention, projection, dropout,
 * residual. Reads its input stream; writes the layer's attention
 * activations and res_mid, and with ln2 also ln_2 of res_mid, fused with
 * the residual add (mlp_inner_fwd then starts after it). */
static int attn_half_fwd(gpt_model *m, int64_t l, int ln2, int ln1_done, gpt_err *err)
{
	gpt_backend *be = m->be;
	const gpt_backend_ops *o = be->ops;
	gpt_layer_acts *a = &m->acts[l];
	int64_t gl = m->glayer[l];
	int64_t B = m->opts.batch, T = m->opts.seq_len, BT = B * T, C = m->shape.hidden;
	int64_t NH = m->shape.heads / m->layout.tp, HS = C / m->shape.heads, Cl = NH * HS;
	int rc;
	void *x;
	if (!ln1_done)
		OP(o->layernorm_fwd(be, a->ln1, a->ln1_mean, a->ln1_rstd, res_in(m, l),
				    gpt_model_param(m, T_LAYER(gl, P_LN1_W)), gpt_model_param(m, T_LAYER(gl, P_LN1_B)),
				    m->n_rows, C, m->opts.ln_eps, err));
	if (seqpar(m))
		OP(sp_gather(m, m->gath, a->ln1, err));
	OP(gpt_qat_linear_fwd(m, l, GPT_QAT_QKV, a->qkv, seqpar(m) ? m->gath : a->ln1,
			      gpt_model_param(m, T_LAYER(gl, P_QKV_W)), gpt_model_param(m, T_LAYER(gl, P_QKV_B)),
			      BT, C, 3 * Cl, err));
	gpt_dropout dp = dropout_at(m, m->opts.attn_dropout, gl, GPT_RNG_SITE_ATTN_PROBS,
				    m->layout.tp_rank * NH);
	OP(o->attention_fwd(be, a->atty, a->att_saved, a->qkv, B, T, NH, HS, &dp, err));
	OP(row_linear_fwd(m, l, GPT_QAT_PROJ, &x, a->atty, gpt_model_param(m, T_LAYER(gl, P_PROJ_W)),
			  gpt_model_param(m, T_LAYER(gl, P_PROJ_B)), BT, Cl, C, err));
	gpt_dropout dr = dropout_at(m, m->opts.hidden_dropout, gl, GPT_RNG_SITE_ATTN_RESID, 0);
	return branch_add(m, a->res_mid, res_in(m, l), x, dr, a->ln2, a->ln2_mean, a->ln2_rstd,
			  ln2 ? gpt_model_param(m, T_LAYER(gl, P_LN2_W)) : NULL,
			  gpt_model_param(m, T_LAYER(gl, P_LN2_B)), err);
}

/* Model.fused_linear: fc's GELU inside its GEMM, and in the backward the
 * GELU's derivative inside the GEMM of the projection's input gradient;
 * QAT's linears (which quantize their inputs) stay apart. */
static int fused_gelu(const gpt_model *m)
{
	return m->opts.fused_gelu && !m->qat;
}

/* The inside of the MLP half of layer l: ln_2 (unless ln2_done: the
 * attention half made it), fc and GELU (what a recompute must restore). */
static int mlp_inner_fwd(gpt_model *m, int64_t l, int ln2_done, gpt_err *err)
{
	gpt_backend *be = m->be;
	const gpt_backend_ops *o = be->ops;
	gpt_layer_acts *a = &m->acts[l];
	int64_t gl = m->glayer[l];
	int64_t BT = m->opts.batch * m->opts.seq_len, C = m->shape.hidden;
	int64_t F = m->shape.ffn / m->layout.tp;
	int rc;
	if (!ln2_done)
		OP(o->layernorm_fwd(be, a->ln2, a->ln2_mean, a->ln2_rstd, a->res_mid,
				    gpt_model_param(m, T_LAYER(gl, P_LN2_W)),
				    gpt_model_param(m, T_LAYER(gl, P_LN2_B)), m->n_rows, C, m->opts.ln_eps, err));
	if (seqpar(m))
		OP(sp_gather(m, m->gath, a->ln2, err));
	if (fused_gelu(m))
		return o->linear_gelu_fwd(be, a->fch_gelu, a->fch, seqpar(m) ? m->gath : a->ln2,
					  gpt_model_param(m, T_LAYER(gl, P_FC_W)), gpt_model_param(m, T_LAYER(gl, P_FC_B)),
					  BT, C, F, err);
	OP(gpt_qat_linear_fwd(m, l, GPT_QAT_FC, a->fch, seqpar(m) ? m->gath : a->ln2,
			      gpt_model_param(m, T_LAYER(gl, P_FC_W)), gpt_model_param(m, T_LAYER(gl, P_FC_B)),
			      BT, C, F, err));
	return o->gelu_fwd(be, a->fch_gelu, a->fch, BT * F, err);
}

/* The MLP half of layer l after attn_half_fwd made ln_2: fc, GELU,
 * projection, dropout, residual; with ln1_next, the dropout and the
 * residual add fused with the next local layer's ln_1 of its result
 * (residual_layernorm_fwd: the bits of the three), which that layer's
 * attn_half_fwd then skips. */
static int mlp_half_fwd(gpt_model *m, int64_t l, int ln1_next, gpt_err *err)
{
	gpt_layer_acts *a = &m->acts[l];
	int64_t gl = m->glayer[l];
	int64_t BT = m->opts.batch * m->opts.seq_len, C = m->shape.hidden;
	int64_t F = m->shape.ffn / m->layout.tp;
	int rc;
	void *x;
	OP(mlp_inner_fwd(m, l, 1, err));
	OP(row_linear_fwd(m, l, GPT_QAT_MPROJ, &x, a->fch_gelu, gpt_model_param(m, T_LAYER(gl, P_MPROJ_W)),
			  gpt_model_param(m, T_LAYER(gl, P_MPROJ_B)), BT, F, C, err));
	gpt_dropout dr = dropout_at(m, m->opts.hidden_dropout, gl, GPT_RNG_SITE_MLP_RESID, 0);
	if (ln1_next) {
		gpt_layer_acts *b = &m->acts[l + 1];
		int64_t gn = m->glayer[l + 1];
		return branch_add(m, res_out(m, l), a->res_mid, x, dr, b->ln1, b->ln1_mean, b->ln1_rstd,
				  gpt_model_param(m, T_LAYER(gn, P_LN1_W)), gpt_model_param(m, T_LAYER(gn, P_LN1_B)),
				  err);
	}
	return branch_add(m, res_out(m, l), a->res_mid, x, dr, NULL, NULL, NULL, NULL, NULL, err);
}

int gpt_model_chunk_is_first(const gpt_model *m, int64_t chunk)
{
	return chunk == 0 && m->layout.pp_rank == 0;
}

int gpt_model_chunk_is_last(const gpt_model *m, int64_t chunk)
{
	return chunk == m->layout.chunks - 1 && m->layout.pp_rank == m->layout.pp - 1;
}

void *gpt_model_chunk_input(const gpt_model *m, int64_t chunk)
{
	return m->res[m->lc_begin[chunk] + chunk];
}

void *gpt_model_chunk_output(const gpt_model *m, int64_t chunk)
{
	return m->res[m->lc_end[chunk] + chunk];
}

void *gpt_model_dgrad(const gpt_model *m)
{
	return m->d_res;
}

int64_t gpt_model_stream_numel(const gpt_model *m)
{
	return m->n_rows * m->shape.hidden;
}

int64_t gpt_model_stream_numel_for(const gpt_model_shape *s, const gpt_layout *lo,
				   const gpt_model_opts *o)
{
	int64_t rows = o->batch * o->seq_len;
	return (o->sequence_parallel && lo->tp > 1 ? rows / lo->tp : rows) * s->hidden;
}

int gpt_model_forward_chunk(gpt_model *m, int64_t chunk, const int32_t *tokens,
			    const int32_t *targets, int training, uint32_t step, int64_t sample0,
			    const float *dloss, double *loss_sum, int64_t *n_tokens, gpt_err *err)
{
	gpt_backend *be = m->be;
	const gpt_backend_ops *o = be->ops;
	int64_t B = m->opts.batch, T = m->opts.seq_len, BT = B * T, C = m->shape.hidden;
	int64_t V = m->shape.vocab_size, Vl = m->shape.padded_vocab / m->layout.tp;
	int64_t v0 = m->layout.tp_rank * Vl;
	int first = gpt_model_chunk_is_first(m, chunk), last = gpt_model_chunk_is_last(m, chunk);
	int rc, lastu = m->n_units - 1;
	m->dropout_on = training;
	m->step = step;
	m->sample0 = sample0;
	if (loss_sum)
		*loss_sum = 0;
	if (n_tokens)
		*n_tokens = 0;
	if (first) {
		for (int64_t i = 0; i < BT; i++)
			if (tokens[i] < 0 || tokens[i] >= V)
				return gpt_err_set(err, GPT_EDATA,
						   "token id %d at position %lld is outside the model's vocabulary of %lld; the data was made with a larger vocabulary than Model.vocab_size",
						   tokens[i], (long long)i, (long long)V);
		void *x = gpt_model_chunk_input(m, chunk);
		OP(o->upload(be, m->tokens, tokens, (size_t)BT * 4, err));
		memcpy(m->host_tokens, tokens, (size_t)BT * 4);
		OP(hook(m, 1, 0, 0, err));
		/* vocabulary parallel: each tp rank looks up the rows it holds
		 * (others give 0) and one adds the positions; the sum over tp is
		 * the whole embedding */
		void *e = seqpar(m) ? m->tmp_c : x;
		OP(o->embedding_fwd(be, e, m->tokens, gpt_model_param(m, T_WTE),
				    m->layout.tp_rank == 0 ? gpt_model_param(m, T_WPE) : NULL, B, T, C, v0,
				    Vl, 0, err));
		OP(seqpar(m) ? sp_scatter(m, x, e, err) : tp_sum(m, x, BT * C, err));
		gpt_dropout de = dropout_at(m, m->opts.hidden_dropout, 0, GPT_RNG_SITE_EMBED, 0);
		if (de.p > 0)
			OP(drop_rows(m, 0, x, x, de, err));
		if (!last)
			OP(hook(m, 0, 0, 0, err));
	}
	/* a layer's residual add makes the next one's ln_1 too, where that
	 * layer is in this chunk and its parameters are there (no hook
	 * gathers them: ZeRO stage 3's windows come when the layer runs) */
	int ln1_done = 0;
	for (int64_t l = m->lc_begin[chunk]; l < m->lc_end[chunk]; l++) {
		int fuse = l + 1 < m->lc_end[chunk] && !m->hooks.acquire;
		OP(hook(m, 1, 1 + (int)l, 0, err));
		OP(attn_half_fwd(m, l, 1, ln1_done, err));
		OP(mlp_half_fwd(m, l, fuse, err));
		OP(hook(m, 0, 1 + (int)l, 0, err));
		ln1_done = fuse;
	}
	if (!last)
		return 0;
	if (!first)
		OP(hook(m, 1, 0, 0, err));
	OP(hook(m, 1, lastu, 0, err));
	OP(gpt_model_head_fwd(m, chunk, targets, dloss, loss_sum, n_tokens, err));
	OP(hook(m, 0, lastu, 0, err));
	return hook(m, 0, 0, 0, err);
}

int gpt_model_forward(gpt_model *m, const int32_t *tokens, const int32_t *targets, int training,
		      uint32_t step, int64_t sample0, const float *dloss, double *loss_sum,
		      int64_t *n_tokens, gpt_err *err)
{
	if (m->layout.pp != 1 || m->layout.chunks != 1)
		return gpt_err_set(err, GPT_EINTERNAL,
				   "model: a pipeline stage runs chunk by chunk (gpt_model_forward_chunk)");
	return gpt_model_forward_chunk(m, 0, tokens, targets, training, step, sample0, dloss,
				       loss_sum, n_tokens, err);
}

/* ---- backward ---- */

/* Restores what the recompute granularity did not keep for layer l. */
static int recompute_layer(gpt_model *m, int64_t l, gpt_err *err)
{
	int rc;
	switch (m->lrecompute[l]) {
	case GPT_RECOMPUTE_NONE:
		return 0;
	case GPT_RECOMPUTE_FULL:
		/* the layer's output stream is already there: the MLP half up to
		 * its GELU is enough */
		OP(attn_half_fwd(m, l, 1, 0, err));
		return mlp_inner_fwd(m, l, 1, err);
	case GPT_RECOMPUTE_ONLY_ATTN:
		/* the MLP half's activations are kept */
		return attn_half_fwd(m, l, 0, 0, err);
	case GPT_RECOMPUTE_CORE_ATTN: {
		gpt_layer_acts *a = &m->acts[l];
		int64_t gl = m->glayer[l], C = m->shape.hidden;
		int64_t NH = m->shape.heads / m->layout.tp, HS = C / m->shape.heads;
		gpt_dropout dp = dropout_at(m, m->opts.attn_dropout, gl, GPT_RNG_SITE_ATTN_PROBS,
					    m->layout.tp_rank * NH);
		/* rewrites atty with the same values, and the probabilities */
		return m->be->ops->attention_fwd(m->be, a->atty, a->att_saved, a->qkv, m->opts.batch,
						 m->opts.seq_len, NH, HS, &dp, err);
	}
	}
	return 0;
}

/* The gradient of a row-parallel layer's output from that of this rank's
 * rows after its dropout: the whole (B*T, C) under sequence parallelism
 * (gathered into d_c), else where it is. */
static int row_out_grad(gpt_model *m, int64_t gl, gpt_rng_site site, const void **dproj, gpt_err *err)
{
	int rc;
	*dproj = m->d_res;
	gpt_dropout dr = dropout_at(m, m->opts.hidden_dropout, gl, site, 0);
	if (dr.p > 0 && drop_taken(m, &dr)) {
		*dproj = m->bwd_drop.at;
	} else if (dr.p > 0) {
		void *to = seqpar(m) ? m->d_s : m->d_c;
		OP(drop_rows(m, 1, to, m->d_res, dr, err));
		*dproj = to;
	}
	if (seqpar(m)) {
		OP(sp_gather(m, m->d_c, *dproj, err));
		*dproj = m->d_c;
	}
	return 0;
}

/* The input gradient of a column-parallel layer is a partial sum over tp:
 * summed (or reduced to this rank's rows into d_s); returns where it is. */
static int col_in_grad(gpt_model *m, void *full, void **out, gpt_err *err)
{
	*out = full;
	if (seqpar(m)) {
		*out = m->d_s;
		return sp_scatter(m, m->d_s, full, err);
	}
	return tp_sum(m, full, m->n_rows * m->shape.hidden, err);
}

/* The residual dropout that the gradient of local layer l's input stream
 * goes through next in this backward (l = the chunk's lc_end: ln_f's
 * input): the MLP branch's of the layer before in the chunk, else the
 * embedding's in the first chunk; p = 0 where another backward takes the
 * gradient (the chunk before, on this stage or another). */
static gpt_dropout drop_below(const gpt_model *m, int64_t chunk, int64_t l)
{
	if (l > m->lc_begin[chunk])
		return dropout_at(m, m->opts.hidden_dropout, m->glayer[l - 1], GPT_RNG_SITE_MLP_RESID, 0);
	if (gpt_model_chunk_is_first(m, chunk))
		return dropout_at(m, m->opts.hidden_dropout, 0, GPT_RNG_SITE_EMBED, 0);
	return (gpt_dropout){.p = 0.0f};
}

/* d_res holds the gradient of layer l's output; leaves that of its input. */
static int layer_bwd(gpt_model *m, int64_t l, gpt_err *err)
{
	gpt_backend *be = m->be;
	const gpt_backend_ops *o = be->ops;
	gpt_layer_acts *a = &m->acts[l];
	int64_t gl = m->glayer[l];
	int64_t B = m->opts.batch, T = m->opts.seq_len, BT = B * T, C = m->shape.hidden;
	int64_t F = m->shape.ffn / m->layout.tp;
	int64_t NH = m->shape.heads / m->layout.tp, HS = C / m->shape.heads, Cl = NH * HS;
	int rc;
	const void *dproj;
	void *dln;
	OP(recompute_layer(m, l, err));
	/* MLP half: out = res_mid + drop(proj(gelu(fc(ln_2(res_mid))))) */
	OP(row_out_grad(m, gl, GPT_RNG_SITE_MLP_RESID, &dproj, err));
	if (fused_gelu(m)) {
		OP(o->linear_dgelu_bwd(be, m->d_f, gpt_model_grad(m, T_LAYER(gl, P_MPROJ_W)),
				       gpt_model_grad(m, T_LAYER(gl, P_MPROJ_B)), dproj, a->fch_gelu,
				       gpt_model_param(m, T_LAYER(gl, P_MPROJ_W)), a->fch, BT, F, C, err));
	} else {
		OP(gpt_qat_linear_bwd(m, l, GPT_QAT_MPROJ, m->d_f, gpt_model_grad(m, T_LAYER(gl, P_MPROJ_W)),
				      gpt_model_grad(m, T_LAYER(gl, P_MPROJ_B)), dproj, a->fch_gelu,
				      gpt_model_param(m, T_LAYER(gl, P_MPROJ_W)), BT, F, C, err));
		/* with fc's bias gradient, in the pass that writes its input,
		 * unless fc's weight gradient's GEMM gives it */
		OP(m->opts.fc_bias_in_gemm
			   ? o->gelu_bwd(be, m->d_f, a->fch, m->d_f, BT * F, err)
			   : o->gelu_bwd_bias(be, m->d_f, gpt_model_grad(m, T_LAYER(gl, P_FC_B)), a->fch, m->d_f, BT,
					      F, err));
	}
	if (seqpar(m)) /* fc's input again, for its weight gradient */
		OP(sp_gather(m, m->gath, a->ln2, err));
	int fc_db = fused_gelu(m) || m->opts.fc_bias_in_gemm; /* fc's bias gradient is linear_bwd's */
	OP(gpt_qat_linear_bwd(m, l, GPT_QAT_FC, m->d_c2, gpt_model_grad(m, T_LAYER(gl, P_FC_W)),
			 fc_db ? gpt_model_grad(m, T_LAYER(gl, P_FC_B)) : NULL, m->d_f,
			 seqpar(m) ? m->gath : a->ln2, gpt_model_param(m, T_LAYER(gl, P_FC_W)), BT, C, F, err));
	OP(col_in_grad(m, m->d_c2, &dln, err));
	/* the residual passes d_res through; ln_2's gradient adds to it */
	gpt_dropout next = dropout_at(m, m->opts.hidden_dropout, gl, GPT_RNG_SITE_ATTN_RESID, 0);
	OP(ln_bwd(m, m->d_res, T_LAYER(gl, P_LN2_W), T_LAYER(gl, P_LN2_B), dln, a->res_mid, a->ln2_mean,
		  a->ln2_rstd, &next, err));
	/* attention half: res_mid = in + drop(proj(attention(qkv(ln_1(in))))) */
	OP(row_out_grad(m, gl, GPT_RNG_SITE_ATTN_RESID, &dproj, err));
	OP(gpt_qat_linear_bwd(m, l, GPT_QAT_PROJ, m->d_c2, gpt_model_grad(m, T_LAYER(gl, P_PROJ_W)),
			 gpt_model_grad(m, T_LAYER(gl, P_PROJ_B)), dproj, a->atty,
			 gpt_model_param(m, T_LAYER(gl, P_PROJ_W)), BT, Cl, C, err));
	gpt_dropout dp = dropout_at(m, m->opts.attn_dropout, gl, GPT_RNG_SITE_ATTN_PROBS,
				    m->layout.tp_rank * NH);
	OP(o->attention_bwd(be, m->d_qkv, m->d_c2, a->atty, a->qkv, a->att_saved, B, T, NH, HS, &dp,
			    err));
	if (seqpar(m))
		OP(sp_gather(m, m->gath, a->ln1, err));
	OP(gpt_qat_linear_bwd(m, l, GPT_QAT_QKV, m->d_c, gpt_model_grad(m, T_LAYER(gl, P_QKV_W)),
			 gpt_model_grad(m, T_LAYER(gl, P_QKV_B)), m->d_qkv, seqpar(m) ? m->gath : a->ln1,
			 gpt_model_param(m, T_LAYER(gl, P_QKV_W)), BT, C, 3 * Cl, err));
	OP(col_in_grad(m, m->d_c, &dln, err));
	next = drop_below(m, m->lchunk[l], l);
	OP(ln_bwd(m, m->d_res, T_LAYER(gl, P_LN1_W), T_LAYER(gl, P_LN1_B), dln, res_in(m, l), a->ln1_mean,
		  a->ln1_rstd, &next, err));
	return 0;
}

int gpt_model_backward_chunk(gpt_model *m, int64_t chunk, gpt_err *err)
{
	gpt_backend *be = m->be;
	const gpt_backend_ops *o = be->ops;
	int64_t B = m->opts.batch, T = m->opts.seq_len, C = m->shape.hidden;
	int64_t Vl = m->shape.padded_vocab / m->layout.tp, v0 = m->layout.tp_rank * Vl;
	size_t es = gpt_dtype_size(be->dtype);
	int first = gpt_model_chunk_is_first(m, chunk), last = gpt_model_chunk_is_last(m, chunk);
	int rc, lastu = m->n_units - 1;
	m->bwd_drop.on = 0; /* what a backward left that failed before taking it */
	if (last) {
		if (!m->head_grad)
			return gpt_err_set(err, GPT_EINTERNAL,
					   "model: a backward after a forward without dloss (the classifier makes the head's gradient in the forward)");
		m->head_grad = 0;
		/* the head uses wte (unit 0): on a single stage its gradient is
		 * complete only after the embedding's backward at the end */
		OP(hook(m, 1, 0, 1, err));
		OP(hook(m, 1, lastu, 1, err));
		/* the forward's classifier left the gradient of ln_f's output and
		 * took the head's share of wte's; with no whole gradient buffer it
		 * waited in head_dw for the window (several forwards' worth when a
		 * pipeline runs ahead: each backward takes what is there) */
		if (m->head_dw) {
			void *g = gpt_model_grad(m, T_WTE);
			OP(o->residual_fwd(be, g, g, m->head_dw, Vl * C, err));
			OP(o->zero(be, m->head_dw, (size_t)(Vl * C) * es, err));
		}
		OP(o->zero(be, m->d_res, (size_t)(m->n_rows * C) * es, err));
		gpt_dropout next = drop_below(m, chunk, m->lc_end[chunk]);
		OP(ln_bwd(m, m->d_res, T_LNF_W(m), T_LNF_B(m), m->dlnf, gpt_model_chunk_output(m, chunk),
			  m->lnf_mean, m->lnf_rstd, &next, err));
		OP(hook(m, 0, lastu, 1, err));
		if (!first)
			OP(hook(m, 0, 0, 1, err));
	}
	for (int64_t l = m->lc_end[chunk] - 1; l >= m->lc_begin[chunk]; l--) {
		OP(hook(m, 1, 1 + (int)l, 1, err));
		OP(layer_bwd(m, l, err));
		OP(hook(m, 0, 1 + (int)l, 1, err));
	}
	if (!first)
		return 0;
	if (!last)
		OP(hook(m, 1, 0, 1, err));
	const void *demb = m->d_res;
	gpt_dropout de = dropout_at(m, m->opts.hidden_dropout, 0, GPT_RNG_SITE_EMBED, 0);
	if (de.p > 0 && drop_taken(m, &de)) {
		demb = m->bwd_drop.at;
	} else if (de.p > 0) {
		void *to = seqpar(m) ? m->d_s : m->d_c;
		OP(drop_rows(m, 1, to, m->d_res, de, err));
		demb = to;
	}
	if (seqpar(m)) {
		OP(sp_gather(m, m->d_c, demb, err));
		demb = m->d_c;
	}
	/* wpe is replicated over tp: every rank adds the same gradient; the
	 * tokens in host memory spare a device backend reading them back */
	OP(o->embedding_bwd(be, gpt_model_grad(m, T_WTE), gpt_model_grad(m, T_WPE), demb,
			    m->host_tokens, B, T, C, v0, Vl, 0, err));
	OP(hook(m, 0, 0, 1, err));
	return 0;
}

int gpt_model_backward(gpt_model *m, gpt_err *err)
{
	if (m->layout.pp != 1 || m->layout.chunks != 1)
		return gpt_err_set(err, GPT_EINTERNAL,
				   "model: a pipeline stage runs chunk by chunk (gpt_model_backward_chunk)");
	return gpt_model_backward_chunk(m, 0, err);
}
