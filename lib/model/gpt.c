/* The GPT network on one rank: buffers, initialisation, forward, backward. */
#include "model/gpt.h"

#include "backend/philox.h"
#include "model/qat.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Table entries per layer, in gpt_param_table's order. */
enum {
	P_LN1_W, P_LN1_B, P_QKV_W, P_QKV_B, P_PROJ_W, P_PROJ_B,
	P_LN2_W, P_LN2_B, P_FC_W, P_FC_B, P_MPROJ_W, P_MPROJ_B, P_PER_LAYER
};
#define T_WTE 0
#define T_WPE 1
#define T_LAYER(l, k) (2 + (int64_t)(l) * P_PER_LAYER + (k))
#define T_LNF_W(m) (2 + (m)->shape.layers * P_PER_LAYER)
#define T_LNF_B(m) (T_LNF_W(m) + 1)

void gpt_layout_single(gpt_layout *lo, const gpt_model_shape *s)
{
	*lo = (gpt_layout){.tp = 1, .tp_rank = 0, .pp = 1, .pp_rank = 0,
			   .layer_begin = 0, .layer_end = s->layers};
}

int gpt_param_box(const gpt_param_info *p, const gpt_layout *lo, gpt_box *box)
{
	memset(box, 0, sizeof *box);
	int first = lo->pp_rank == 0, last = lo->pp_rank == lo->pp - 1;
	int held;
	switch (p->place) {
	case GPT_PARAM_EMBED:
		held = first || (last && strcmp(p->name, "wte") == 0);
		break;
	case GPT_PARAM_LAYER:
		held = p->layer >= lo->layer_begin && p->layer < lo->layer_end;
		break;
	default:
		held = last;
		break;
	}
	if (!held)
		return 0;
	box->ndim = p->ndim;
	for (int d = 0; d < p->ndim; d++)
		box->len[d] = p->shape[d];
	if (p->tp_dim >= 0 && lo->tp > 1) {
		box->len[p->tp_dim] = p->shape[p->tp_dim] / lo->tp;
		box->off[p->tp_dim] = box->len[p->tp_dim] * lo->tp_rank;
	}
	return 1;
}

int gpt_recompute_parse(const char *s, gpt_recompute *out)
{
	static const struct { const char *name; gpt_recompute r; } names[] = {
		{"full", GPT_RECOMPUTE_FULL},
		{"only_attn", GPT_RECOMPUTE_ONLY_ATTN},
		{"core_attn", GPT_RECOMPUTE_CORE_ATTN},
	};
	for (size_t i = 0; i < sizeof names / sizeof *names; i++)
		if (strcasecmp(s, names[i].name) == 0) {
			*out = names[i].r;
			return 0;
		}
	return -1;
}

int gpt_model_unit_of(const gpt_model *m, int64_t i)
{
	if (i < 2)
		return 0;
	if (i >= T_LNF_W(m))
		return m->n_units - 1;
	return 1 + (int)((i - 2) / P_PER_LAYER);
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

/* attn_part: 1 with the residual after attention, 2 without it */
static int alloc_layer(gpt_model *m, gpt_layer_acts *a, int attn_part, int mlp_part, int saved,
		       gpt_err *err)
{
	int64_t B = m->opts.batch, T = m->opts.seq_len, BT = B * T;
	int64_t C = m->shape.hidden, F = m->shape.ffn / m->layout.tp;
	int64_t NH = m->shape.heads / m->layout.tp, HS = C / m->shape.heads, Cl = NH * HS;
	size_t es = gpt_dtype_size(m->be->dtype);
	if (attn_part) {
		ALLOC_OR_FAIL(a->ln1, BT * C, es, "activations (ln_1)");
		ALLOC_OR_FAIL(a->ln1_mean, BT, 4, "activations (ln_1 mean)");
		ALLOC_OR_FAIL(a->ln1_rstd, BT, 4, "activations (ln_1 rstd)");
		ALLOC_OR_FAIL(a->qkv, BT * 3 * Cl, es, "activations (qkv)");
		ALLOC_OR_FAIL(a->atty, BT * Cl, es, "activations (attention)");
		if (attn_part == 1)
			ALLOC_OR_FAIL(a->res_mid, BT * C, es, "activations (residual)");
	}
	if (saved) {
		int64_t n = m->be->ops->attention_saved_size(m->be, B, T, NH, HS);
		ALLOC_OR_FAIL(a->att_saved, n > 0 ? n : 1, 4, "activations (attention probabilities)");
	}
	if (mlp_part) {
		ALLOC_OR_FAIL(a->ln2, BT * C, es, "activations (ln_2)");
		ALLOC_OR_FAIL(a->ln2_mean, BT, 4, "activations (ln_2 mean)");
		ALLOC_OR_FAIL(a->ln2_rstd, BT, 4, "activations (ln_2 rstd)");
		ALLOC_OR_FAIL(a->fch, BT * F, es, "activations (mlp.fc)");
		ALLOC_OR_FAIL(a->fch_gelu, BT * F, es, "activations (gelu)");
	}
	return 0;
}

/* Which parts of a layer are stored per layer and which are recomputed into
 * one shared set: the recompute granularities of FleetX. */
static int alloc_acts(gpt_model *m, gpt_err *err)
{
	int64_t L = m->n_layers;
	int64_t BT = m->opts.batch * m->opts.seq_len, C = m->shape.hidden;
	size_t es = gpt_dtype_size(m->be->dtype);
	m->res = gpt_calloc((size_t)L + 1, sizeof *m->res, "residual pointers", err);
	m->acts = gpt_calloc((size_t)(L ? L : 1), sizeof *m->acts, "activation pointers", err);
	if (!m->res || !m->acts)
		return GPT_EINTERNAL;
	for (int64_t l = 0; l <= L; l++)
		ALLOC_OR_FAIL(m->res[l], BT * C, es, "activations (residual stream)");
	gpt_layer_acts shared;
	memset(&shared, 0, sizeof shared);
	int rc = 0;
	switch (m->opts.recompute) {
	case GPT_RECOMPUTE_NONE:
		for (int64_t l = 0; l < L && !rc; l++)
			rc = alloc_layer(m, &m->acts[l], 1, 1, 1, err);
		break;
	case GPT_RECOMPUTE_FULL:
		rc = alloc_layer(m, &shared, 1, 1, 1, err);
		for (int64_t l = 0; l < L; l++)
			m->acts[l] = shared;
		break;
	case GPT_RECOMPUTE_ONLY_ATTN:
		rc = alloc_layer(m, &shared, 2, 0, 1, err);
		for (int64_t l = 0; l < L && !rc; l++) {
			gpt_layer_acts *a = &m->acts[l];
			rc = alloc_layer(m, a, 0, 1, 0, err);
			a->ln1 = shared.ln1;
			a->ln1_mean = shared.ln1_mean;
			a->ln1_rstd = shared.ln1_rstd;
			a->qkv = shared.qkv;
			a->atty = shared.atty;
			a->att_saved = shared.att_saved;
			/* the residual after attention is the MLP's input: keep it */
			if (!rc)
				ALLOC_OR_FAIL(a->res_mid, BT * C, es, "activations (residual)");
		}
		break;
	case GPT_RECOMPUTE_CORE_ATTN:
		rc = alloc_layer(m, &shared, 0, 0, 1, err);
		for (int64_t l = 0; l < L && !rc; l++) {
			rc = alloc_layer(m, &m->acts[l], 1, 1, 0, err);
			m->acts[l].att_saved = shared.att_saved;
		}
		break;
	}
	return rc;
}

static int alloc_head_and_work(gpt_model *m, gpt_err *err)
{
	int64_t B = m->opts.batch, T = m->opts.seq_len, BT = B * T;
	int64_t C = m->shape.hidden, F = m->shape.ffn / m->layout.tp;
	int64_t Vl = m->shape.padded_vocab / m->layout.tp;
	size_t es = gpt_dtype_size(m->be->dtype);
	ALLOC_OR_FAIL(m->lnf, BT * C, es, "activations (ln_f)");
	ALLOC_OR_FAIL(m->lnf_mean, BT, 4, "activations (ln_f mean)");
	ALLOC_OR_FAIL(m->lnf_rstd, BT, 4, "activations (ln_f rstd)");
	ALLOC_OR_FAIL(m->logits, BT * Vl, es, "activations (logits)");
	ALLOC_OR_FAIL(m->xent_max, BT, 4, "cross-entropy");
	ALLOC_OR_FAIL(m->xent_sumexp, BT, 4, "cross-entropy");
	ALLOC_OR_FAIL(m->xent_tlogit, BT, 4, "cross-entropy");
	ALLOC_OR_FAIL(m->losses, BT, 4, "cross-entropy");
	ALLOC_OR_FAIL(m->tmp_c, BT * C, es, "work buffer");
	ALLOC_OR_FAIL(m->d_c, BT * C, es, "work buffer");
	ALLOC_OR_FAIL(m->d_c2, BT * C, es, "work buffer");
	ALLOC_OR_FAIL(m->d_res, BT * C, es, "work buffer");
	ALLOC_OR_FAIL(m->d_f, BT * F, es, "work buffer");
	ALLOC_OR_FAIL(m->d_qkv, BT * 3 * C, es, "work buffer");
	ALLOC_OR_FAIL(m->tokens, BT, 4, "tokens");
	ALLOC_OR_FAIL(m->targets, BT, 4, "targets");
	m->host_losses = gpt_malloc((size_t)BT * 4, "losses", err);
	return m->host_losses ? 0 : GPT_EINTERNAL;
}

int64_t gpt_model_activation_bytes(const gpt_model_shape *s, const gpt_layout *lo,
				   const gpt_model_opts *o, size_t elem_size, int64_t saved_floats)
{
	int64_t es = (int64_t)elem_size, BT = o->batch * o->seq_len, C = s->hidden;
	int64_t F = s->ffn / lo->tp, Cl = (s->heads / lo->tp) * (C / s->heads);
	int64_t Vl = s->padded_vocab / lo->tp, L = lo->layer_end - lo->layer_begin;
	int64_t saved = (saved_floats > 0 ? saved_floats : 1) * 4;
	/* mirrors alloc_layer: the attention part, the MLP part, the saved state */
	int64_t attn = BT * (C + 3 * Cl + Cl + C) * es + 2 * BT * 4;
	int64_t mlp = BT * (C + 2 * F) * es + 2 * BT * 4;
	int64_t per_layer = 0, shared = 0;
	switch (o->recompute) {
	case GPT_RECOMPUTE_NONE: per_layer = attn + mlp + saved; break;
	case GPT_RECOMPUTE_FULL: shared = attn + mlp + saved; break;
	case GPT_RECOMPUTE_ONLY_ATTN: shared = attn - BT * C * es + saved; per_layer = mlp + BT * C * es; break;
	case GPT_RECOMPUTE_CORE_ATTN: shared = saved; per_layer = attn + mlp; break;
	}
	int64_t res = (L + 1) * BT * C * es;
	/* mirrors alloc_head_and_work */
	int64_t head = BT * C * es + 2 * BT * 4 + BT * Vl * es + 4 * BT * 4;
	int64_t work = BT * (4 * C + F + 3 * C) * es + 2 * BT * 4;
	return res + L * per_layer + shared + head + work;
}

static int check_setup(const gpt_model_shape *s, const gpt_layout *lo, const gpt_model_opts *o,
		       gpt_err *err)
{
	if (lo->tp != 1 || lo->pp != 1)
		return gpt_err_set(err, GPT_EUSAGE,
				   "model: tensor parallel %lld x pipeline parallel %lld: this build's trainer runs tp = pp = 1 only",
				   (long long)lo->tp, (long long)lo->pp);
	if (o->batch < 1 || o->seq_len < 1)
		return gpt_err_set(err, GPT_EUSAGE, "model: micro-batch %lld x sequence %lld: both must be positive",
				   (long long)o->batch, (long long)o->seq_len);
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

int gpt_model_init(gpt_model *m, gpt_backend *be, const gpt_model_shape *s, const gpt_layout *lo,
		   const gpt_model_opts *opts, gpt_err *err)
{
	memset(m, 0, sizeof *m);
	m->be = be;
	m->shape = *s;
	m->layout = *lo;
	m->opts = *opts;
	if (m->opts.ln_eps <= 0)
		m->opts.ln_eps = 1e-5f;
	int rc = check_setup(s, lo, opts, err);
	static const char *const needed[] = {
		"alloc", "free", "upload", "download", "zero", "linear_fwd", "linear_bwd",
		"layernorm_fwd", "layernorm_bwd", "gelu_fwd", "gelu_bwd", "attention_fwd",
		"attention_bwd", "attention_saved_size", "xent_fwd", "xent_loss", "xent_bwd",
		"embedding_fwd", "embedding_bwd", "residual_fwd", "dropout_fwd", "dropout_bwd", NULL};
	if (!rc)
		rc = gpt_backend_require(be, needed, err);
	if (!rc)
		rc = gpt_param_table(s, &m->table, &m->n_table, err);
	if (rc)
		return rc;
	m->offset = gpt_calloc((size_t)m->n_table, sizeof *m->offset, "parameter offsets", err);
	m->box = gpt_calloc((size_t)m->n_table, sizeof *m->box, "parameter boxes", err);
	if (!m->offset || !m->box) {
		gpt_model_free(m);
		return GPT_EINTERNAL;
	}
	for (int64_t i = 0; i < m->n_table; i++) {
		if (gpt_param_box(&m->table[i], lo, &m->box[i])) {
			m->offset[i] = m->n_flat;
			m->n_flat += gpt_box_numel(&m->box[i]);
		} else {
			m->offset[i] = -1;
		}
	}
	m->n_layers = lo->layer_end - lo->layer_begin;
	int64_t mult = opts->flat_multiple > 1 ? opts->flat_multiple : 1;
	m->n_alloc = (m->n_flat + mult - 1) / mult * mult;
	/* units: embedding, the layers, the final LayerNorm (tp = pp = 1 here,
	 * so every unit is held and contiguous in table order) */
	m->n_units = (int)m->n_layers + 2;
	m->unit_begin = gpt_calloc((size_t)m->n_units, sizeof(int64_t), "units", err);
	m->unit_end = gpt_calloc((size_t)m->n_units, sizeof(int64_t), "units", err);
	m->pwin = gpt_calloc((size_t)m->n_units, sizeof(void *), "units", err);
	m->gwin = gpt_calloc((size_t)m->n_units, sizeof(void *), "units", err);
	rc = m->unit_begin && m->unit_end && m->pwin && m->gwin ? 0 : GPT_EINTERNAL;
	for (int u = 0; !rc && u < m->n_units; u++) {
		int64_t first = u == 0 ? T_WTE : u == m->n_units - 1 ? T_LNF_W(m) : T_LAYER(u - 1, 0);
		int64_t last = u == 0 ? T_WPE : u == m->n_units - 1 ? T_LNF_B(m) : T_LAYER(u - 1, P_PER_LAYER - 1);
		m->unit_begin[u] = m->offset[first];
		m->unit_end[u] = m->offset[last] + gpt_box_numel(&m->box[last]);
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
	if (!rc)
		rc = alloc_acts(m, err);
	if (!rc)
		rc = alloc_head_and_work(m, err);
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

void gpt_model_free(gpt_model *m)
{
	gpt_backend *be = m->be;
	if (!be) {
		free(m->table);
		return;
	}
	/* Shared activation buffers appear in several layers: free each once. */
	if (m->acts) {
		void **seen = NULL;
		size_t n_seen = 0;
		for (int64_t l = 0; l < m->n_layers; l++) {
			gpt_layer_acts a = m->acts[l];
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
		free(seen);
	}
	if (m->res)
		for (int64_t l = 0; l <= m->n_layers; l++)
			if (m->res[l])
				be->ops->free(be, m->res[l]);
	void *p[] = {m->params, m->grads, m->lnf, m->lnf_mean, m->lnf_rstd, m->logits, m->xent_max,
		     m->xent_sumexp, m->xent_tlogit, m->losses, m->tmp_c, m->d_c, m->d_c2, m->d_res,
		     m->d_f, m->d_qkv, m->tokens, m->targets};
	for (size_t i = 0; i < sizeof p / sizeof *p; i++)
		if (p[i])
			be->ops->free(be, p[i]);
	free(m->res);
	free(m->acts);
	free(m->host_losses);
	free(m->table);
	free(m->offset);
	free(m->box);
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

int gpt_model_init_weights_range(gpt_model *m, uint64_t seed, double std, void *dst,
				 int64_t begin, int64_t end, gpt_err *err)
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
		void *to = (char *)dst + (m->offset[i] + k0 - begin) * (int64_t)es;
		if (m->be->dtype == GPT_DTYPE_F32) {
			rc = m->be->ops->upload(m->be, to, h, (size_t)n * 4, err);
		} else {
			void *conv = gpt_malloc((size_t)n * es, "initial weights", err);
			rc = conv ? gpt_convert(conv, m->be->dtype, h, GPT_DTYPE_F32, (size_t)n, err)
				  : GPT_EINTERNAL;
			if (!rc)
				rc = m->be->ops->upload(m->be, to, conv, (size_t)n * es, err);
			free(conv);
		}
	}
	free(host);
	return rc;
}

int gpt_model_init_weights(gpt_model *m, uint64_t seed, double std, gpt_err *err)
{
	if (!m->params)
		return gpt_err_set(err, GPT_EINTERNAL, "model: no whole parameter buffer; initialise the shards");
	return gpt_model_init_weights_range(m, seed, std, m->params, 0, m->n_flat, err);
}

int gpt_model_zero_grad(gpt_model *m, gpt_err *err)
{
	if (!m->grads) /* windows are zeroed when acquired */
		return 0;
	return m->be->ops->zero(m->be, m->grads, (size_t)m->n_alloc * gpt_dtype_size(m->be->dtype), err);
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

#define OP(call)                          \
	do {                              \
		if ((rc = (call)))        \
			return rc;        \
	} while (0)

/* The attention half of layer l: ln_1, qkv, attention, projection, dropout,
 * residual. Reads res[l]; writes the layer's attention activations and res_mid. */
static int attn_half_fwd(gpt_model *m, int64_t l, gpt_err *err)
{
	gpt_backend *be = m->be;
	const gpt_backend_ops *o = be->ops;
	gpt_layer_acts *a = &m->acts[l];
	int64_t gl = m->layout.layer_begin + l;
	int64_t B = m->opts.batch, T = m->opts.seq_len, BT = B * T, C = m->shape.hidden;
	int64_t NH = m->shape.heads / m->layout.tp, HS = C / m->shape.heads, Cl = NH * HS;
	int rc;
	OP(o->layernorm_fwd(be, a->ln1, a->ln1_mean, a->ln1_rstd, m->res[l],
			    gpt_model_param(m, T_LAYER(gl, P_LN1_W)), gpt_model_param(m, T_LAYER(gl, P_LN1_B)),
			    BT, C, m->opts.ln_eps, err));
	OP(gpt_qat_linear_fwd(m, l, GPT_QAT_QKV, a->qkv, a->ln1, gpt_model_param(m, T_LAYER(gl, P_QKV_W)),
			 gpt_model_param(m, T_LAYER(gl, P_QKV_B)), BT, C, 3 * Cl, err));
	gpt_dropout dp = dropout_at(m, m->opts.attn_dropout, gl, GPT_RNG_SITE_ATTN_PROBS,
				    m->layout.tp_rank * NH);
	OP(o->attention_fwd(be, a->atty, a->att_saved, a->qkv, B, T, NH, HS, &dp, err));
	OP(gpt_qat_linear_fwd(m, l, GPT_QAT_PROJ, m->tmp_c, a->atty, gpt_model_param(m, T_LAYER(gl, P_PROJ_W)),
			 gpt_model_param(m, T_LAYER(gl, P_PROJ_B)), BT, Cl, C, err));
	gpt_dropout dr = dropout_at(m, m->opts.hidden_dropout, gl, GPT_RNG_SITE_ATTN_RESID, 0);
	if (dr.p > 0)
		OP(o->dropout_fwd(be, m->tmp_c, m->tmp_c, B, T, C, &dr, err));
	OP(o->residual_fwd(be, a->res_mid, m->res[l], m->tmp_c, BT * C, err));
	return 0;
}

/* The inside of the MLP half of layer l: ln_2, fc and GELU (what a
 * recompute must restore). */
static int mlp_inner_fwd(gpt_model *m, int64_t l, gpt_err *err)
{
	gpt_backend *be = m->be;
	const gpt_backend_ops *o = be->ops;
	gpt_layer_acts *a = &m->acts[l];
	int64_t gl = m->layout.layer_begin + l;
	int64_t BT = m->opts.batch * m->opts.seq_len, C = m->shape.hidden;
	int64_t F = m->shape.ffn / m->layout.tp;
	int rc;
	OP(o->layernorm_fwd(be, a->ln2, a->ln2_mean, a->ln2_rstd, a->res_mid,
			    gpt_model_param(m, T_LAYER(gl, P_LN2_W)), gpt_model_param(m, T_LAYER(gl, P_LN2_B)),
			    BT, C, m->opts.ln_eps, err));
	OP(gpt_qat_linear_fwd(m, l, GPT_QAT_FC, a->fch, a->ln2, gpt_model_param(m, T_LAYER(gl, P_FC_W)),
			 gpt_model_param(m, T_LAYER(gl, P_FC_B)), BT, C, F, err));
	return o->gelu_fwd(be, a->fch_gelu, a->fch, BT * F, err);
}

/* The MLP half of layer l: ln_2, fc, GELU, projection, dropout, residual. */
static int mlp_half_fwd(gpt_model *m, int64_t l, gpt_err *err)
{
	gpt_backend *be = m->be;
	const gpt_backend_ops *o = be->ops;
	gpt_layer_acts *a = &m->acts[l];
	int64_t gl = m->layout.layer_begin + l;
	int64_t B = m->opts.batch, T = m->opts.seq_len, BT = B * T, C = m->shape.hidden;
	int64_t F = m->shape.ffn / m->layout.tp;
	int rc;
	OP(mlp_inner_fwd(m, l, err));
	OP(gpt_qat_linear_fwd(m, l, GPT_QAT_MPROJ, m->tmp_c, a->fch_gelu, gpt_model_param(m, T_LAYER(gl, P_MPROJ_W)),
			 gpt_model_param(m, T_LAYER(gl, P_MPROJ_B)), BT, F, C, err));
	gpt_dropout dr = dropout_at(m, m->opts.hidden_dropout, gl, GPT_RNG_SITE_MLP_RESID, 0);
	if (dr.p > 0)
		OP(o->dropout_fwd(be, m->tmp_c, m->tmp_c, B, T, C, &dr, err));
	OP(o->residual_fwd(be, m->res[l + 1], a->res_mid, m->tmp_c, BT * C, err));
	return 0;
}

int gpt_model_forward(gpt_model *m, const int32_t *tokens, const int32_t *targets, int training,
		      uint32_t step, int64_t sample0, double *loss_sum, int64_t *n_tokens,
		      gpt_err *err)
{
	gpt_backend *be = m->be;
	const gpt_backend_ops *o = be->ops;
	int64_t B = m->opts.batch, T = m->opts.seq_len, BT = B * T, C = m->shape.hidden;
	int64_t V = m->shape.vocab_size, Vl = m->shape.padded_vocab / m->layout.tp;
	int rc;
	m->dropout_on = training;
	m->step = step;
	m->sample0 = sample0;
	for (int64_t i = 0; i < BT; i++)
		if (tokens[i] < 0 || tokens[i] >= V)
			return gpt_err_set(err, GPT_EDATA,
					   "token id %d at position %lld is outside the model's vocabulary of %lld; the data was made with a larger vocabulary than Model.vocab_size",
					   tokens[i], (long long)i, (long long)V);
	OP(o->upload(be, m->tokens, tokens, (size_t)BT * 4, err));
	int last = m->n_units - 1;
	OP(hook(m, 1, 0, 0, err));
	OP(o->embedding_fwd(be, m->res[0], m->tokens, gpt_model_param(m, T_WTE),
			    gpt_model_param(m, T_WPE), B, T, C, 0, Vl, 0, err));
	gpt_dropout de = dropout_at(m, m->opts.hidden_dropout, 0, GPT_RNG_SITE_EMBED, 0);
	if (de.p > 0)
		OP(o->dropout_fwd(be, m->res[0], m->res[0], B, T, C, &de, err));
	for (int64_t l = 0; l < m->n_layers; l++) {
		OP(hook(m, 1, 1 + (int)l, 0, err));
		OP(attn_half_fwd(m, l, err));
		OP(mlp_half_fwd(m, l, err));
		OP(hook(m, 0, 1 + (int)l, 0, err));
	}
	OP(hook(m, 1, last, 0, err));
	OP(o->layernorm_fwd(be, m->lnf, m->lnf_mean, m->lnf_rstd, m->res[m->n_layers],
			    gpt_model_param(m, T_LNF_W(m)), gpt_model_param(m, T_LNF_B(m)), BT, C,
			    m->opts.ln_eps, err));
	OP(o->linear_fwd(be, m->logits, m->lnf, gpt_model_param(m, T_WTE), NULL, BT, C, Vl, err));
	OP(hook(m, 0, last, 0, err));
	OP(hook(m, 0, 0, 0, err));
	if (loss_sum)
		*loss_sum = 0;
	if (n_tokens)
		*n_tokens = 0;
	if (!targets)
		return 0;
	OP(o->upload(be, m->targets, targets, (size_t)BT * 4, err));
	OP(o->xent_fwd(be, m->xent_max, m->xent_sumexp, m->xent_tlogit, m->logits, m->targets, BT,
		       Vl, Vl, 0, V, err));
	OP(o->xent_loss(be, m->losses, m->xent_max, m->xent_sumexp, m->xent_tlogit, m->targets, BT, err));
	OP(o->download(be, m->host_losses, m->losses, (size_t)BT * 4, err));
	double sum = 0;
	int64_t n = 0;
	for (int64_t i = 0; i < BT; i++)
		if (targets[i] >= 0) {
			sum += m->host_losses[i];
			n++;
		}
	if (loss_sum)
		*loss_sum = sum;
	if (n_tokens)
		*n_tokens = n;
	return 0;
}

/* ---- backward ---- */

/* Restores what the recompute granularity did not keep for layer l. */
static int recompute_layer(gpt_model *m, int64_t l, gpt_err *err)
{
	int rc;
	switch (m->opts.recompute) {
	case GPT_RECOMPUTE_NONE:
		return 0;
	case GPT_RECOMPUTE_FULL:
		/* res[l + 1] is already there: the MLP half up to its GELU is enough */
		OP(attn_half_fwd(m, l, err));
		return mlp_inner_fwd(m, l, err);
	case GPT_RECOMPUTE_ONLY_ATTN:
		return attn_half_fwd(m, l, err);
	case GPT_RECOMPUTE_CORE_ATTN: {
		gpt_layer_acts *a = &m->acts[l];
		int64_t gl = m->layout.layer_begin + l, C = m->shape.hidden;
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

/* d_res holds the gradient of res[l + 1]; leaves the gradient of res[l]. */
static int layer_bwd(gpt_model *m, int64_t l, gpt_err *err)
{
	gpt_backend *be = m->be;
	const gpt_backend_ops *o = be->ops;
	gpt_layer_acts *a = &m->acts[l];
	int64_t gl = m->layout.layer_begin + l;
	int64_t B = m->opts.batch, T = m->opts.seq_len, BT = B * T, C = m->shape.hidden;
	int64_t F = m->shape.ffn / m->layout.tp;
	int64_t NH = m->shape.heads / m->layout.tp, HS = C / m->shape.heads, Cl = NH * HS;
	int rc;
	OP(recompute_layer(m, l, err));
	/* MLP half: res[l+1] = res_mid + drop(proj(gelu(fc(ln_2(res_mid))))) */
	const void *dproj = m->d_res;
	gpt_dropout dr = dropout_at(m, m->opts.hidden_dropout, gl, GPT_RNG_SITE_MLP_RESID, 0);
	if (dr.p > 0) {
		OP(o->dropout_bwd(be, m->d_c, m->d_res, B, T, C, &dr, err));
		dproj = m->d_c;
	}
	OP(gpt_qat_linear_bwd(m, l, GPT_QAT_MPROJ, m->d_f, gpt_model_grad(m, T_LAYER(gl, P_MPROJ_W)),
			 gpt_model_grad(m, T_LAYER(gl, P_MPROJ_B)), dproj, a->fch_gelu,
			 gpt_model_param(m, T_LAYER(gl, P_MPROJ_W)), BT, F, C, err));
	OP(o->gelu_bwd(be, m->d_f, a->fch, m->d_f, BT * F, err));
	OP(gpt_qat_linear_bwd(m, l, GPT_QAT_FC, m->d_c2, gpt_model_grad(m, T_LAYER(gl, P_FC_W)),
			 gpt_model_grad(m, T_LAYER(gl, P_FC_B)), m->d_f, a->ln2,
			 gpt_model_param(m, T_LAYER(gl, P_FC_W)), BT, C, F, err));
	/* the residual passes d_res through; ln_2's gradient adds to it */
	OP(o->layernorm_bwd(be, m->d_res, gpt_model_grad(m, T_LAYER(gl, P_LN2_W)),
			    gpt_model_grad(m, T_LAYER(gl, P_LN2_B)), m->d_c2, a->res_mid,
			    gpt_model_param(m, T_LAYER(gl, P_LN2_W)), a->ln2_mean, a->ln2_rstd, BT, C, err));
	/* attention half: res_mid = res[l] + drop(proj(attention(qkv(ln_1(res[l]))))) */
	dproj = m->d_res;
	dr = dropout_at(m, m->opts.hidden_dropout, gl, GPT_RNG_SITE_ATTN_RESID, 0);
	if (dr.p > 0) {
		OP(o->dropout_bwd(be, m->d_c, m->d_res, B, T, C, &dr, err));
		dproj = m->d_c;
	}
	OP(gpt_qat_linear_bwd(m, l, GPT_QAT_PROJ, m->d_c2, gpt_model_grad(m, T_LAYER(gl, P_PROJ_W)),
			 gpt_model_grad(m, T_LAYER(gl, P_PROJ_B)), dproj, a->atty,
			 gpt_model_param(m, T_LAYER(gl, P_PROJ_W)), BT, Cl, C, err));
	gpt_dropout dp = dropout_at(m, m->opts.attn_dropout, gl, GPT_RNG_SITE_ATTN_PROBS,
				    m->layout.tp_rank * NH);
	OP(o->attention_bwd(be, m->d_qkv, m->d_c2, a->qkv, a->att_saved, B, T, NH, HS, &dp, err));
	OP(gpt_qat_linear_bwd(m, l, GPT_QAT_QKV, m->d_c, gpt_model_grad(m, T_LAYER(gl, P_QKV_W)),
			 gpt_model_grad(m, T_LAYER(gl, P_QKV_B)), m->d_qkv, a->ln1,
			 gpt_model_param(m, T_LAYER(gl, P_QKV_W)), BT, C, 3 * Cl, err));
	OP(o->layernorm_bwd(be, m->d_res, gpt_model_grad(m, T_LAYER(gl, P_LN1_W)),
			    gpt_model_grad(m, T_LAYER(gl, P_LN1_B)), m->d_c, m->res[l],
			    gpt_model_param(m, T_LAYER(gl, P_LN1_W)), a->ln1_mean, a->ln1_rstd, BT, C, err));
	return 0;
}

int gpt_model_backward(gpt_model *m, float dloss, gpt_err *err)
{
	gpt_backend *be = m->be;
	const gpt_backend_ops *o = be->ops;
	int64_t B = m->opts.batch, T = m->opts.seq_len, BT = B * T, C = m->shape.hidden;
	int64_t V = m->shape.vocab_size, Vl = m->shape.padded_vocab / m->layout.tp;
	size_t es = gpt_dtype_size(be->dtype);
	int rc, last = m->n_units - 1;
	/* the head uses wte (unit 0), whose gradient is complete only after
	 * the embedding's backward at the end */
	OP(hook(m, 1, 0, 1, err));
	OP(hook(m, 1, last, 1, err));
	/* logits -> their gradient, in place (llm.c) */
	OP(o->xent_bwd(be, m->logits, m->logits, m->targets, m->xent_max, m->xent_sumexp, dloss, BT,
		       Vl, Vl, 0, V, err));
	OP(o->linear_bwd(be, m->d_c, gpt_model_grad(m, T_WTE), NULL, m->logits, m->lnf,
			 gpt_model_param(m, T_WTE), BT, C, Vl, err));
	OP(o->zero(be, m->d_res, (size_t)(BT * C) * es, err));
	OP(o->layernorm_bwd(be, m->d_res, gpt_model_grad(m, T_LNF_W(m)), gpt_model_grad(m, T_LNF_B(m)),
			    m->d_c, m->res[m->n_layers], gpt_model_param(m, T_LNF_W(m)), m->lnf_mean,
			    m->lnf_rstd, BT, C, err));
	OP(hook(m, 0, last, 1, err));
	for (int64_t l = m->n_layers - 1; l >= 0; l--) {
		OP(hook(m, 1, 1 + (int)l, 1, err));
		OP(layer_bwd(m, l, err));
		OP(hook(m, 0, 1 + (int)l, 1, err));
	}
	const void *demb = m->d_res;
	gpt_dropout de = dropout_at(m, m->opts.hidden_dropout, 0, GPT_RNG_SITE_EMBED, 0);
	if (de.p > 0) {
		OP(o->dropout_bwd(be, m->d_c, m->d_res, B, T, C, &de, err));
		demb = m->d_c;
	}
	OP(o->embedding_bwd(be, gpt_model_grad(m, T_WTE), gpt_model_grad(m, T_WPE), demb, m->tokens,
			    B, T, C, 0, Vl, 0, err));
	OP(hook(m, 0, 0, 1, err));
	return 0;
}
