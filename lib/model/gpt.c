/* The GPT network on one rank: buffers, initialisation, forward, backward
 * (the layout and the tensor boxes are in layout.c, the classifier in
 * head.c). */
#include "model/gpt-impl.h"

#include "backend/philox.h"
#include "model/qat.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>


static int64_t local_layer(const gpt_model *m, int64_t gl);

int gpt_model_unit_of(const gpt_model *m, int64_t i)
{
	if (i < 2)
		return 0;
	if (i >= T_LNF_W(m))
		return m->n_units - 1;
	return 1 + (int)local_layer(m, (i - 2) / P_PER_LAYER);
}

static void *locate(const gpt_model *m, void *whole, void *const *win, int64_t i)
{
	int64_t es = (int64_t)gpt_dtype_size(m->be->dtype);
	int u = gpt_model_unit_of(m, i);
	if (win && win[u])
		return (char *)win[u] + (m->offset[i] - m->unit_begin[u]) * es;
	return (char *)whole + m->offset[i] * es;
}

void *gpt_model_param(const gpt_model *m, int64_t i)
{
	return locate(m, m->params, m->pwin, i);
}

void *gpt_model_grad(const gpt_model *m, int64_t i)
{
	return locate(m, m->grads, m->gwin, i);
}

static int hook(gpt_model *m, int acquire, int unit, int backward, gpt_err *err)
{
	int (*f)(void *, gpt_model *, int, int, gpt_err *) = acquire ? m->hooks.acquire : m->hooks.release;
	return f ? f(m->hooks.ctx, m, unit, backward, err) : 0;
}

int64_t gpt_model_find(const gpt_model *m, const char *name)
{
	for (int64_t i = 0; i < m->n_table; i++)
		if (strcmp(m->table[i].name, name) == 0)
			return i;
	return -1;
}

/* ---- buffers ---- */

static void *act_alloc(gpt_model *m, int64_t elems, size_t esize, const char *what, gpt_err *err)
{
	size_t bytes = (size_t)elems * esize;
	m->act_bytes += (int64_t)bytes;
	return m->be->ops->alloc(m->be, bytes, what, err);
}

#define ALLOC_OR_FAIL(dst, n, es, what)                         \
	do {                                                    \
		if (!((dst) = act_alloc(m, (n), (es), (what), err))) \
			return err->code;                       \
	} while (0)

/* The recompute granularity of global layer g: none for the layers
 * o->no_recompute names (FleetX's and PaddleNLP's no_recompute_layers),
 * o->recompute for the others. */
static gpt_recompute layer_recompute(const gpt_model_opts *o, int64_t g)
{
	for (int64_t i = 0; i < o->n_no_recompute; i++)
		if (o->no_recompute[i] == g)
			return GPT_RECOMPUTE_NONE;
	return o->recompute;
}

/* attn_part: 1 with the residual after attention, 2 without it */
static int alloc_layer(gpt_model *m, gpt_layer_acts *a, int attn_part, int mlp_part, int saved,
		       gpt_err *err)
{
	int64_t B = m->opts.batch, T = m->opts.seq_len, BT = B * T, NR = m->n_rows;
	int64_t C = m->shape.hidden, F = m->shape.ffn / m->layout.tp;
	int64_t NH = m->shape.heads / m->layout.tp, HS = C / m->shape.heads, Cl = NH * HS;
	size_t es = gpt_dtype_size(m->be->dtype);
	if (attn_part) {
		ALLOC_OR_FAIL(a->ln1, NR * C, es, "activations (ln_1)");
		ALLOC_OR_FAIL(a->ln1_mean, NR, 4, "activations (ln_1 mean)");
		ALLOC_OR_FAIL(a->ln1_rstd, NR, 4, "activations (ln_1 rstd)");
		ALLOC_OR_FAIL(a->qkv, BT * 3 * Cl, es, "activations (qkv)");
		ALLOC_OR_FAIL(a->atty, BT * Cl, es, "activations (attention)");
		if (attn_part == 1)
			ALLOC_OR_FAIL(a->res_mid, NR * C, es, "activations (residual)");
	}
	if (saved) {
		int64_t n = m->be->ops->attention_saved_size(m->be, B, T, NH, HS, m->opts.attn_dropout > 0);
		ALLOC_OR_FAIL(a->att_saved, n > 0 ? n : 1, 4, "activations (attention probabilities)");
	}
	if (mlp_part) {
		ALLOC_OR_FAIL(a->ln2, NR * C, es, "activations (ln_2)");
		ALLOC_OR_FAIL(a->ln2_mean, NR, 4, "activations (ln_2 mean)");
		ALLOC_OR_FAIL(a->ln2_rstd, NR, 4, "activations (ln_2 rstd)");
		ALLOC_OR_FAIL(a->fch, BT * F, es, "activations (mlp.fc)");
		ALLOC_OR_FAIL(a->fch_gelu, BT * F, es, "activations (gelu)");
	}
	return 0;
}

static int holds_first(const gpt_model *m) { return m->layout.pp_rank == 0; }
static int holds_last(const gpt_model *m) { return m->layout.pp_rank == m->layout.pp - 1; }

/* One slot: the residual streams, what the recompute granularity keeps per
 * layer (the recomputed part lives once in `shared`, for every slot: a
 * backward recomputes it before use), the head's activations on the last
 * stage and the tokens on the first. */
static int alloc_slot(gpt_model *m, gpt_slot *sl, const gpt_layer_acts *shared, gpt_err *err)
{
	int64_t L = m->n_layers, NS = L + m->layout.chunks;
	int64_t BT = m->opts.batch * m->opts.seq_len, NR = m->n_rows, C = m->shape.hidden;
	size_t es = gpt_dtype_size(m->be->dtype);
	sl->res = gpt_calloc((size_t)NS, sizeof *sl->res, "residual pointers", err);
	sl->acts = gpt_calloc((size_t)(L ? L : 1), sizeof *sl->acts, "activation pointers", err);
	if (!sl->res || !sl->acts)
		return GPT_EINTERNAL;
	for (int64_t l = 0; l < NS; l++)
		ALLOC_OR_FAIL(sl->res[l], NR * C, es, "activations (residual stream)");
	int rc = 0;
	for (int64_t l = 0; l < L && !rc; l++) {
		gpt_layer_acts *a = &sl->acts[l];
		switch (m->lrecompute[l]) {
		case GPT_RECOMPUTE_NONE:
			rc = alloc_layer(m, a, 1, 1, 1, err);
			break;
		case GPT_RECOMPUTE_FULL:
			*a = *shared;
			break;
		case GPT_RECOMPUTE_ONLY_ATTN:
			rc = alloc_layer(m, a, 0, 1, 0, err);
			a->ln1 = shared->ln1;
			a->ln1_mean = shared->ln1_mean;
			a->ln1_rstd = shared->ln1_rstd;
			a->qkv = shared->qkv;
			a->atty = shared->atty;
			a->att_saved = shared->att_saved;
			/* the residual after attention is the MLP's input: keep it */
			if (!rc)
				ALLOC_OR_FAIL(a->res_mid, NR * C, es, "activations (residual)");
			break;
		case GPT_RECOMPUTE_CORE_ATTN:
			rc = alloc_layer(m, a, 1, 1, 0, err);
			a->att_saved = shared->att_saved;
			break;
		}
	}
	if (rc)
		return rc;
	if (holds_first(m)) {
		ALLOC_OR_FAIL(sl->tokens, BT, 4, "tokens");
		sl->host_tokens = gpt_calloc((size_t)BT, 4, "tokens", err);
		if (!sl->host_tokens)
			return err->code;
	}
	if (holds_last(m)) {
		ALLOC_OR_FAIL(sl->lnf_mean, NR, 4, "activations (ln_f mean)");
		ALLOC_OR_FAIL(sl->lnf_rstd, NR, 4, "activations (ln_f rstd)");
		ALLOC_OR_FAIL(sl->dlnf, NR * C, es, "activations (ln_f output gradient)");
	}
	return 0;
}

static int alloc_acts(gpt_model *m, gpt_layer_acts *shared, gpt_err *err)
{
	int rc = 0;
	memset(shared, 0, sizeof *shared);
	int any = 0; /* a local layer recomputes: it needs the shared buffers */
	for (int64_t l = 0; l < m->n_layers; l++)
		any |= m->lrecompute[l] != GPT_RECOMPUTE_NONE;
	switch (any ? m->opts.recompute : GPT_RECOMPUTE_NONE) {
	case GPT_RECOMPUTE_NONE: break;
	case GPT_RECOMPUTE_FULL: rc = alloc_layer(m, shared, 1, 1, 1, err); break;
	case GPT_RECOMPUTE_ONLY_ATTN: rc = alloc_layer(m, shared, 2, 0, 1, err); break;
	case GPT_RECOMPUTE_CORE_ATTN: rc = alloc_layer(m, shared, 0, 0, 1, err); break;
	}
	m->n_slots = m->opts.slots > 1 ? m->opts.slots : 1;
	m->slots = rc ? NULL : gpt_calloc((size_t)m->n_slots, sizeof *m->slots, "activation slots", err);
	if (!rc && !m->slots)
		rc = GPT_EINTERNAL;
	for (int64_t k = 0; k < m->n_slots && !rc; k++)
		rc = alloc_slot(m, &m->slots[k], shared, err);
	if (!rc) {
		m->cur_slot = 0;
		gpt_model_use_slot(m, 0);
	}
	return rc;
}

void gpt_model_use_slot(gpt_model *m, int64_t k)
{
	gpt_slot *o = &m->slots[m->cur_slot], *n = &m->slots[k];
	o->dropout_on = m->dropout_on;
	o->head_grad = m->head_grad;
	o->step = m->step;
	o->sample0 = m->sample0;
	m->cur_slot = k;
	m->res = n->res;
	m->acts = n->acts;
	m->lnf_mean = n->lnf_mean;
	m->lnf_rstd = n->lnf_rstd;
	m->dlnf = n->dlnf;
	m->tokens = n->tokens;
	m->host_tokens = n->host_tokens;
	m->dropout_on = n->dropout_on;
	m->head_grad = n->head_grad;
	m->step = n->step;
	m->sample0 = n->sample0;
}

static int alloc_work(gpt_model *m, gpt_err *err)
{
	int64_t B = m->opts.batch, T = m->opts.seq_len, BT = B * T;
	int64_t C = m->shape.hidden, F = m->shape.ffn / m->layout.tp;
	int64_t Vl = m->shape.padded_vocab / m->layout.tp;
	size_t es = gpt_dtype_size(m->be->dtype);
	m->loss_slots = m->opts.loss_slots > 1 ? m->opts.loss_slots : 1;
	if (holds_last(m)) {
		int64_t R = m->head_rows = gpt_model_head_rows(&m->opts, BT, Vl);
		ALLOC_OR_FAIL(m->lnf, m->n_rows * C, es, "work buffer (ln_f)");
		ALLOC_OR_FAIL(m->xent_max, 4 * R, 4, "cross-entropy");
		m->xent_sumexp = m->xent_max + R;
		m->xent_tlogit = m->xent_max + 2 * R;
		m->xent_gmax = m->xent_max + 3 * R;
		ALLOC_OR_FAIL(m->losses, m->loss_slots * BT, 4, "cross-entropy");
		ALLOC_OR_FAIL(m->targets, BT, 4, "targets");
		if (m->opts.no_full_grads) {
			ALLOC_OR_FAIL(m->head_dw, Vl * C, es, "work buffer (the head's wte gradient)");
			int rc = m->be->ops->zero(m->be, m->head_dw, (size_t)(Vl * C) * es, err);
			if (rc)
				return rc;
		}
	}
	ALLOC_OR_FAIL(m->tmp_c, BT * C, es, "work buffer");
	ALLOC_OR_FAIL(m->d_c, BT * C, es, "work buffer");
	ALLOC_OR_FAIL(m->d_c2, BT * C, es, "work buffer");
	ALLOC_OR_FAIL(m->d_res, BT * C, es, "work buffer");
	/* the classifier's logits and the MLP's gradient are never live at
	 * once (the head runs between its stage's layers' forward and their
	 * backward, each call whole, and d_f lives inside one layer's
	 * backward): one buffer, the larger */
	int64_t nl = holds_last(m) ? m->head_rows * Vl : 0;
	ALLOC_OR_FAIL(m->d_f, nl > BT * F ? nl : BT * F, es, "work buffer (the MLP's gradient, the logits)");
	m->logits = holds_last(m) ? m->d_f : NULL;
	ALLOC_OR_FAIL(m->d_qkv, BT * 3 * C, es, "work buffer");
	if (m->n_rows != BT) {
		ALLOC_OR_FAIL(m->gath, BT * C, es, "work buffer");
		ALLOC_OR_FAIL(m->tmp_s, m->n_rows * C, es, "work buffer");
		ALLOC_OR_FAIL(m->d_s, m->n_rows * C, es, "work buffer");
		ALLOC_OR_FAIL(m->ln_tmp, 2 * C, es, "work buffer");
	}
	m->host_losses = gpt_malloc((size_t)(m->loss_slots * BT) * 4, "losses", err);
	return m->host_losses ? 0 : GPT_EINTERNAL;
}

int64_t gpt_model_activation_bytes(const gpt_model_shape *s, const gpt_layout *lo,
				   const gpt_model_opts *o, size_t elem_size, int64_t saved_floats)
{
	int64_t es = (int64_t)elem_size, BT = o->batch * o->seq_len, C = s->hidden;
	int64_t F = s->ffn / lo->tp, Cl = (s->heads / lo->tp) * (C / s->heads);
	int64_t Vl = s->padded_vocab / lo->tp, L = gpt_layout_layers(lo);
	int64_t slots = o->slots > 1 ? o->slots : 1;
	int first = lo->pp_rank == 0, last = lo->pp_rank == lo->pp - 1;
	int64_t saved = (saved_floats > 0 ? saved_floats : 1) * 4;
	int64_t NR = o->sequence_parallel && lo->tp > 1 ? BT / lo->tp : BT;
	/* mirrors alloc_layer: the attention part, the MLP part, the saved state */
	int64_t attn = (NR * (C + C) + BT * (3 * Cl + Cl)) * es + 2 * NR * 4;
	int64_t mlp = (NR * C + BT * 2 * F) * es + 2 * NR * 4;
	int64_t per_layer = 0, shared = 0;
	for (int64_t c = 0; c < lo->chunks; c++)
		for (int64_t g = lo->layer_begin[c]; g < lo->layer_end[c]; g++)
			switch (layer_recompute(o, g)) {
			case GPT_RECOMPUTE_NONE: per_layer += attn + mlp + saved; break;
			case GPT_RECOMPUTE_FULL: shared = attn + mlp + saved; break;
			case GPT_RECOMPUTE_ONLY_ATTN:
				shared = attn - NR * C * es + saved;
				per_layer += mlp + NR * C * es;
				break;
			case GPT_RECOMPUTE_CORE_ATTN: shared = saved; per_layer += attn + mlp; break;
			}
	/* mirrors alloc_slot */
	int64_t res = (L + lo->chunks) * NR * C * es;
	int64_t head = last ? 2 * NR * 4 + NR * C * es : 0;
	int64_t slot = res + per_layer + head + (first ? BT * 4 : 0);
	/* mirrors alloc_work */
	int64_t R = gpt_model_head_rows(o, BT, Vl);
	int64_t nl = last ? R * Vl : 0;
	int64_t work = BT * (4 * C + 3 * C) * es + (nl > BT * F ? nl : BT * F) * es;
	if (last)
		work += NR * C * es + 4 * R * 4 + ((o->loss_slots > 1 ? o->loss_slots : 1) + 1) * BT * 4 +
			(o->no_full_grads ? Vl * C * es : 0);
	if (NR != BT)
		work += (BT * C + 2 * NR * C + 2 * C) * es;
	return slots * slot + shared + work;
}

static int check_setup(const gpt_model_shape *s, const gpt_layout *lo, const gpt_model_opts *o,
		       gpt_err *err)
{
	if (lo->tp < 1 || s->heads % lo->tp || s->ffn % lo->tp || s->padded_vocab % lo->tp)
		return gpt_err_set(err, GPT_EUSAGE,
				   "Distributed.mp_degree: %lld does not divide Model.num_attention_heads %lld, the ffn size %lld and the padded vocabulary %lld; choose a degree that divides all three",
				   (long long)lo->tp, (long long)s->heads, (long long)s->ffn,
				   (long long)s->padded_vocab);
	if (lo->pp < 1 || lo->pp_rank < 0 || lo->pp_rank >= lo->pp || lo->chunks < 1 ||
	    lo->chunks > GPT_MAX_CHUNKS)
		return gpt_err_set(err, GPT_EINTERNAL, "model: stage %lld of %lld with %lld chunks",
				   (long long)lo->pp_rank, (long long)lo->pp, (long long)lo->chunks);
	for (int64_t c = 0; c < lo->chunks; c++)
		if (lo->layer_begin[c] < 0 || lo->layer_end[c] > s->layers ||
		    lo->layer_begin[c] > lo->layer_end[c] || (c && lo->layer_begin[c] < lo->layer_end[c - 1]))
			return gpt_err_set(err, GPT_EINTERNAL, "model: chunk %lld holds layers [%lld, %lld) of %lld",
					   (long long)c, (long long)lo->layer_begin[c],
					   (long long)lo->layer_end[c], (long long)s->layers);
	if (o->batch < 1 || o->seq_len < 1)
		return gpt_err_set(err, GPT_EUSAGE, "model: micro-batch %lld x sequence %lld: both must be positive",
				   (long long)o->batch, (long long)o->seq_len);
	if (o->sequence_parallel && lo->tp > 1) {
		int64_t BT = o->batch * o->seq_len, n = BT / lo->tp;
		if (BT % lo->tp || (o->seq_len % n && n % o->seq_len))
			return gpt_err_set(err, GPT_EUSAGE,
					   "Model.sequence_parallel: the %lld x %lld tokens of a micro-batch do not split into %lld equal parts of whole sequences or equal parts of one; choose sizes that do, or set it to False",
					   (long long)o->batch, (long long)o->seq_len, (long long)lo->tp);
	}
	if (o->seq_len > s->max_pos)
		return gpt_err_set(err, GPT_EUSAGE,
				   "Data.Train.dataset.max_seq_len: %lld is longer than Model.max_position_embeddings %lld",
				   (long long)o->seq_len, (long long)s->max_pos);
	if (!(o->hidden_dropout >= 0 && o->hidden_dropout < 1) ||
	    !(o->attn_dropout >= 0 && o->attn_dropout < 1))
		return gpt_err_set(err, GPT_EUSAGE, "model: dropout probabilities must lie in [0, 1), found %g and %g",
				   o->hidden_dropout, o->attn_dropout);
	return 0;
}

/* The local index of global layer gl, or -1. */
static int64_t local_layer(const gpt_model *m, int64_t gl)
{
	const gpt_layout *lo = &m->layout;
	for (int64_t c = 0; c < lo->chunks; c++)
		if (gl >= lo->layer_begin[c] && gl < lo->layer_end[c])
			return m->lc_begin[c] + gl - lo->layer_begin[c];
	return -1;
}

int gpt_model_init(gpt_model *m, gpt_backend *be, const gpt_model_shape *s, const gpt_layout *lo,
		   const gpt_model_opts *opts, gpt_err *err)
{
	memset(m, 0, sizeof *m);
	m->be = be;
	m->shape = *s;
	m->layout = *lo;
	m->opts = *opts;
	m->opts.no_recompute = NULL; /* the caller's: lrecompute holds what it says */
	m->opts.n_no_recompute = 0;
	if (m->opts.ln_eps <= 0)
		m->opts.ln_eps = 1e-5f;
	int rc = check_setup(s, lo, opts, err);
	static const char *const needed[] = {
		"alloc", "free", "upload", "download", "zero", "linear_fwd", "linear_bwd", "bias_add",
		"layernorm_fwd", "layernorm_bwd", "gelu_fwd", "gelu_bwd", "attention_fwd",
		"attention_bwd", "attention_saved_size", "xent_fwd", "xent_rescale", "xent_loss",
		"xent_bwd", "embedding_fwd", "embedding_bwd", "residual_fwd", "dropout_fwd",
		"dropout_bwd", "copy", "residual_layernorm_fwd", "xent_fused", "gelu_bwd_bias", NULL};
	static const char *const fused[] = {"linear_gelu_fwd", "linear_dgelu_bwd", NULL};
	if (!rc)
		rc = gpt_backend_require(be, needed, err);
	if (!rc && m->opts.fused_gelu)
		rc = gpt_backend_require(be, fused, err);
	if (!rc)
		rc = gpt_param_table(s, &m->table, &m->n_table, err);
	if (rc)
		return rc;
	m->offset = gpt_calloc((size_t)m->n_table, sizeof *m->offset, "parameter offsets", err);
	m->box = gpt_calloc((size_t)m->n_table, sizeof *m->box, "parameter boxes", err);
	m->owner = gpt_calloc((size_t)m->n_table, 1, "parameter owners", err);
	m->n_layers = gpt_layout_layers(lo);
	m->n_rows = opts->batch * opts->seq_len;
	if (opts->sequence_parallel && lo->tp > 1)
		m->n_rows /= lo->tp;
	m->glayer = gpt_calloc((size_t)(m->n_layers + 1), sizeof *m->glayer, "layers", err);
	m->lchunk = gpt_calloc((size_t)(m->n_layers + 1), sizeof *m->lchunk, "layers", err);
	m->lrecompute = gpt_calloc((size_t)(m->n_layers + 1), sizeof *m->lrecompute, "layers", err);
	if (!m->offset || !m->box || !m->owner || !m->glayer || !m->lchunk || !m->lrecompute) {
		gpt_model_free(m);
		return GPT_EINTERNAL;
	}
	for (int64_t c = 0, l = 0; c < lo->chunks; c++) {
		m->lc_begin[c] = l;
		for (int64_t g = lo->layer_begin[c]; g < lo->layer_end[c]; g++, l++) {
			m->glayer[l] = g;
			m->lchunk[l] = c;
			m->lrecompute[l] = layer_recompute(opts, g);
		}
		m->lc_end[c] = l;
	}
	for (int64_t i = 0; i < m->n_table; i++) {
		if (gpt_param_box(&m->table[i], lo, &m->box[i])) {
			m->offset[i] = m->n_flat;
			m->n_flat += gpt_box_numel(&m->box[i]);
			int replicated = m->table[i].tp_dim < 0 && lo->tp > 1;
			int tied_copy = i == T_WTE && !holds_first(m);
			m->owner[i] = !(replicated && lo->tp_rank != 0) && !tied_copy;
		} else {
			m->offset[i] = -1;
		}
	}
	int64_t mult = opts->flat_multiple > 1 ? opts->flat_multiple : 1;
	m->n_alloc = (m->n_flat + mult - 1) / mult * mult;
	/* units: the embedding, each local layer, the final LayerNorm; each is a
	 * contiguous range of the flat buffers (table order), empty when this
	 * stage holds none of it */
	m->n_units = (int)m->n_layers + 2;
	m->unit_begin = gpt_calloc((size_t)m->n_units, sizeof(int64_t), "units", err);
	m->unit_end = gpt_calloc((size_t)m->n_units, sizeof(int64_t), "units", err);
	m->pwin = gpt_calloc((size_t)m->n_units, sizeof(void *), "units", err);
	m->gwin = gpt_calloc((size_t)m->n_units, sizeof(void *), "units", err);
	rc = m->unit_begin && m->unit_end && m->pwin && m->gwin ? 0 : GPT_EINTERNAL;
	for (int u = 0; !rc && u < m->n_units; u++) {
		int64_t first = u == 0 ? T_WTE : u == m->n_units - 1 ? T_LNF_W(m) : T_LAYER(m->glayer[u - 1], 0);
		int64_t last = u == 0 ? T_WPE : u == m->n_units - 1 ? T_LNF_B(m)
				: T_LAYER(m->glayer[u - 1], P_PER_LAYER - 1);
		m->unit_begin[u] = m->unit_end[u] = -1;
		for (int64_t i = first; i <= last; i++) {
			if (m->offset[i] < 0)
				continue;
			if (m->unit_begin[u] < 0)
				m->unit_begin[u] = m->offset[i];
			m->unit_end[u] = m->offset[i] + gpt_box_numel(&m->box[i]);
		}
		if (m->unit_begin[u] < 0)
			m->unit_begin[u] = m->unit_end[u] = 0;
	}
	size_t bytes = (size_t)m->n_alloc * gpt_dtype_size(be->dtype);
	if (!rc && !opts->no_full_params) {
		m->params = be->ops->alloc(be, bytes, "parameters", err);
		rc = m->params ? be->ops->zero(be, m->params, bytes, err) : err->code;
	}
	if (!rc && !opts->no_full_grads) {
		m->grads = be->ops->alloc(be, bytes, "gradients", err);
		rc = m->grads ? be->ops->zero(be, m->grads, bytes, err) : err->code;
	}
	gpt_layer_acts shared;
	if (!rc)
		rc = alloc_acts(m, &shared, err);
	if (!rc)
		rc = alloc_work(m, err);
	if (rc)
		gpt_model_free(m);
	return rc;
}

static void free_layer(gpt_backend *be, gpt_layer_acts *a)
{
	void *p[] = {a->ln1, a->qkv, a->atty, a->res_mid, a->ln2, a->fch, a->fch_gelu,
		     a->ln1_mean, a->ln1_rstd, a->ln2_mean, a->ln2_rstd, a->att_saved};
	for (size_t i = 0; i < sizeof p / sizeof *p; i++)
		if (p[i])
			be->ops->free(be, p[i]);
}

/* Frees each buffer of the layers' activations once: shared buffers
 * appear in several layers and slots. */
static void free_acts(gpt_model *m)
{
	gpt_backend *be = m->be;
	void **seen = NULL;
	size_t n_seen = 0;
	for (int64_t k = 0; k < m->n_slots; k++) {
		gpt_slot *sl = &m->slots[k];
		for (int64_t l = 0; sl->acts && l < m->n_layers; l++) {
			gpt_layer_acts a = sl->acts[l];
			void **f[] = {&a.ln1, &a.qkv, &a.atty, &a.res_mid, &a.ln2, &a.fch, &a.fch_gelu,
				      (void **)&a.ln1_mean, (void **)&a.ln1_rstd, (void **)&a.ln2_mean,
				      (void **)&a.ln2_rstd, (void **)&a.att_saved};
			for (size_t i = 0; i < sizeof f / sizeof *f; i++) {
				if (!*f[i])
					continue;
				int dup = 0;
				for (size_t j = 0; j < n_seen && !dup; j++)
					dup = seen[j] == *f[i];
				if (dup) {
					*f[i] = NULL;
					continue;
				}
				void **grown = realloc(seen, (n_seen + 1) * sizeof *seen);
				if (grown) {
					seen = grown;
					seen[n_seen++] = *f[i];
				}
			}
			free_layer(be, &a);
		}
		if (sl->res)
			for (int64_t l = 0; l < m->n_layers + m->layout.chunks; l++)
				if (sl->res[l])
					be->ops->free(be, sl->res[l]);
		void *p[] = {sl->lnf_mean, sl->lnf_rstd, sl->dlnf, sl->tokens};
		for (size_t i = 0; i < sizeof p / sizeof *p; i++)
			if (p[i])
				be->ops->free(be, p[i]);
		free(sl->res);
		free(sl->acts);
		free(sl->host_tokens);
	}
	free(seen);
	free(m->slots);
}

void gpt_model_free(gpt_model *m)
{
	gpt_backend *be = m->be;
	if (!be) {
		free(m->table);
		return;
	}
	if (m->slots)
		free_acts(m);
	/* m->logits is m->d_f (alloc_work) */
	void *p[] = {m->params, m->grads, m->lnf, m->xent_max, m->losses, m->targets,
		     m->head_dw, m->tmp_c, m->d_c, m->d_c2, m->d_res, m->d_f, m->d_qkv, m->gath,
		     m->tmp_s, m->d_s, m->ln_tmp};
	for (size_t i = 0; i < sizeof p / sizeof *p; i++)
		if (p[i])
			be->ops->free(be, p[i]);
	free(m->host_losses);
	free(m->table);
	free(m->offset);
	free(m->box);
	free(m->owner);
	free(m->glayer);
	free(m->lchunk);
	free(m->lrecompute);
	free(m->unit_begin);
	free(m->unit_end);
	free(m->pwin);
	free(m->gwin);
	gpt_qat_free(m);
	memset(m, 0, sizeof *m);
}

/* ---- initialisation ---- */

/* A standard normal for (seed, tensor, element), from two Philox draws. */
static double init_normal(uint64_t seed, uint32_t tensor, uint64_t elem)
{
	uint32_t ctr[4] = {(uint32_t)elem, (uint32_t)(elem >> 32), tensor, 0x696e6974u /* "init" */};
	uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
	uint32_t r[4];
	gpt_philox4x32_10(r, ctr, key);
	double u1 = ((double)r[0] + 1.0) / 4294967297.0; /* (0, 1) */
	double u2 = (double)r[1] / 4294967296.0;
	return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

/* The global row-major index of local element k of box b in a tensor of shape s. */
static uint64_t global_index(const gpt_box *b, const int64_t *shape, int64_t k)
{
	int64_t idx[GPT_MAX_DIMS];
	for (int d = b->ndim - 1; d >= 0; d--) {
		idx[d] = k % b->len[d] + b->off[d];
		k /= b->len[d];
	}
	uint64_t g = 0;
	for (int d = 0; d < b->ndim; d++)
		g = g * (uint64_t)shape[d] + (uint64_t)idx[d];
	return g;
}

/* The initial weights of [begin, end) into dst: in the storage dtype, or
 * with master as fp32 values rounded through it. */
static int init_range(gpt_model *m, uint64_t seed, double std, void *dst, int master, int64_t begin,
		      int64_t end, gpt_err *err)
{
	float *host = NULL;
	int rc = 0;
	double proj_std = std / sqrt(2.0 * (double)m->shape.layers);
	size_t es = gpt_dtype_size(m->be->dtype);
	for (int64_t i = 0; i < m->n_table && !rc; i++) {
		if (m->offset[i] < 0)
			continue;
		const gpt_param_info *p = &m->table[i];
		/* the part of this tensor inside [begin, end), as local indices */
		int64_t k0 = begin > m->offset[i] ? begin - m->offset[i] : 0;
		int64_t k1 = gpt_box_numel(&m->box[i]);
		if (m->offset[i] + k1 > end)
			k1 = end - m->offset[i];
		if (k1 <= k0)
			continue;
		int64_t n = k1 - k0;
		float *h = realloc(host, (size_t)n * sizeof *h);
		if (!h) {
			rc = gpt_err_nomem(err, (size_t)n * sizeof *h, "initial weights");
			break;
		}
		host = h;
		size_t len = strlen(p->name);
		int is_bias = len > 5 && strcmp(p->name + len - 5, ".bias") == 0;
		int is_ln = strstr(p->name, "ln_") != NULL;
		int is_proj = strstr(p->name, "attn.proj.weight") || strstr(p->name, "mlp.proj.weight");
		double sd = is_proj ? proj_std : std;
		#pragma omp parallel for schedule(static) if (n > 65536)
		for (int64_t k = k0; k < k1; k++) {
			uint64_t g = global_index(&m->box[i], p->shape, k);
			float v;
			if (is_bias)
				v = 0.0f;
			else if (is_ln)
				v = 1.0f;
			else if (i == T_WTE && g / (uint64_t)m->shape.hidden >= (uint64_t)m->shape.vocab_size)
				v = 0.0f; /* padding rows */
			else
				v = (float)(sd * init_normal(seed, (uint32_t)i, g));
			h[k - k0] = v;
		}
		size_t ds = master ? 4 : es;
		void *to = (char *)dst + (m->offset[i] + k0 - begin) * (int64_t)ds;
		if (m->be->dtype == GPT_DTYPE_F32) {
			rc = m->be->ops->upload(m->be, to, h, (size_t)n * 4, err);
		} else {
			void *conv = gpt_malloc((size_t)n * es, "initial weights", err);
			rc = conv ? gpt_convert(conv, m->be->dtype, h, GPT_DTYPE_F32, (size_t)n, err)
				  : GPT_EINTERNAL;
			if (!rc && master)
				rc = gpt_convert(h, GPT_DTYPE_F32, conv, m->be->dtype, (size_t)n, err);
			if (!rc)
				rc = m->be->ops->upload(m->be, to, master ? (void *)h : conv, (size_t)n * ds, err);
			free(conv);
		}
	}
	free(host);
	return rc;
}

int gpt_model_init_weights_range(gpt_model *m, uint64_t seed, double std, void *dst,
				 int64_t begin, int64_t end, gpt_err *err)
{
	return init_range(m, seed, std, dst, 0, begin, end, err);
}

int gpt_model_init_master_range(gpt_model *m, uint64_t seed, double std, float *master,
				int64_t begin, int64_t end, gpt_err *err)
{
	return init_range(m, seed, std, master, 1, begin, end, err);
}

int gpt_model_init_weights(gpt_model *m, uint64_t seed, double std, gpt_err *err)
{
	if (!m->params)
		return gpt_err_set(err, GPT_EINTERNAL, "model: no whole parameter buffer; initialise the shards");
	return gpt_model_init_weights_range(m, seed, std, m->params, 0, m->n_flat, err);
}

int gpt_model_zero_grad(gpt_model *m, gpt_err *err)
{
	size_t es = gpt_dtype_size(m->be->dtype);
	/* what a forward left for a backward that never came goes too, and
	 * losses a failed step left waiting (gpt_model_take_losses) */
	m->loss_next = 0;
	if (m->head_dw) {
		int rc = m->be->ops->zero(m->be, m->head_dw,
					  (size_t)(m->shape.padded_vocab / m->layout.tp * m->shape.hidden) * es, err);
		if (rc)
			return rc;
	}
	for (int64_t k = 0; k < m->n_slots; k++)
		m->slots[k].head_grad = 0;
	m->head_grad = 0;
	if (!m->grads) /* windows are zeroed when acquired */
		return 0;
	return m->be->ops->zero(m->be, m->grads, (size_t)m->n_alloc * es, err);
}

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
