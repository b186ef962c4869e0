/* The GPT network on one rank: its parameters' places, activation and
 * work buffers, initialisation (the layout and the tensor boxes are in
 * layout.c, the forward and backward passes in pass.c, the classifier in
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
