/* The KV-cache decoder: weights in a CPU backend and one forward pass over
 * new tokens of several sequences. (Part of lib/infer.) */
#include "infer/infer.h"
#include "infer/layout.h"

#include "cpu/cpu.h"
#if GPT_HAVE_CUDA
#include "cuda/cuda.h"
#endif

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void *param(const gpt_infer_model *m, int64_t i)
{
	return (char *)m->params + m->offset[i] * (int64_t)gpt_dtype_size(m->be.dtype);
}

/* A NaN or Inf weight would only turn every logit into NaN (and has no
 * int8 value): a damaged model is refused when it loads. */
static int check_finite(const gpt_param_info *p, const float *w, gpt_err *err)
{
	for (int64_t k = 0; k < p->numel; k++)
		if (!isfinite(w[k]))
			return gpt_err_set(err, GPT_EDATA,
					   "weights: tensor '%s' holds %g at element %lld; expected finite "
					   "values (the model is damaged; export it again from a good checkpoint)",
					   p->name, (double)w[k], (long long)k);
	return 0;
}

/* The weight matrices as m->wdtype: from the host parameters, or, for the
 * matrices they do not hold, read one at a time into scratch memory of
 * `biggest` floats. */
static int init_qweights(gpt_infer_model *m, gpt_weight_read_fn read, void *ctx, int64_t biggest,
			 gpt_err *err)
{
	const gpt_model_shape *s = &m->shape;
	int64_t n = 4 * s->layers + 1;
	m->qw = gpt_calloc((size_t)n, sizeof *m->qw, "weights", err);
	float *scratch = biggest ? gpt_malloc((size_t)biggest * sizeof *scratch, "weights", err) : NULL;
	int rc = m->qw && (scratch || !biggest) ? 0 : GPT_EINTERNAL;
	for (int64_t q = 0; !rc && q < 4 * s->layers; q++) {
		int64_t e = gpt_infer_matrix_entry(s->layers, q);
		const gpt_param_info *p = &m->table[e];
		int64_t K = p->shape[p->ndim - 1];
		const float *w = param(m, e);
		if (!gpt_infer_host_holds(m->wdtype, e)) {
			rc = read(ctx, p, scratch, err);
			if (!rc)
				rc = check_finite(p, scratch, err);
			w = scratch;
		}
		if (!rc)
			rc = gpt_qweight_init(&m->qw[q], w, p->numel / K, K, m->wdtype, err);
	}
	free(scratch);
	/* the head: wte's rows of the true vocabulary */
	if (!rc)
		rc = gpt_qweight_init(&m->qw[n - 1], param(m, T_WTE), s->vocab_size, s->hidden, m->wdtype,
				      err);
	return rc;
}

int gpt_infer_model_init(gpt_infer_model *m, const gpt_model_shape *s, gpt_dtype dtype,
			 int threads, gpt_weight_read_fn read, void *ctx, gpt_err *err)
{
	memset(m, 0, sizeof *m);
	int rc = gpt_backend_cpu_init(&m->be, GPT_DTYPE_F32, threads, err);
	if (rc)
		return rc;
	static const char *const need[] = {"alloc", "free", "upload", "download", "copy",
					   "linear_fwd", "layernorm_fwd", "gelu_fwd",
					   "attention_kv", "attention_kv_rows", "embedding_fwd",
					   "embedding_rows_fwd", "residual_layernorm_fwd", NULL};
	rc = gpt_backend_require(&m->be, need, err);
	m->shape = *s;
	m->ln_eps = 1e-5f;
	if (!rc)
		rc = gpt_param_table(s, &m->table, &m->n_table, err);
	if (rc) {
		gpt_infer_model_free(m);
		return rc;
	}
	int64_t total = 0, biggest = 0; /* biggest: of the matrices left out */
	m->wdtype = dtype;
	m->offset = gpt_calloc((size_t)m->n_table, sizeof *m->offset, "parameter offsets", err);
	if (!m->offset) {
		gpt_infer_model_free(m);
		return GPT_EINTERNAL;
	}
	for (int64_t i = 0; i < m->n_table; i++) {
		m->offset[i] = total;
		if (!gpt_infer_host_holds(dtype, i)) {
			if (m->table[i].numel > biggest)
				biggest = m->table[i].numel;
			continue;
		}
		/* 16 elements keep every tensor 64-byte aligned in any dtype */
		total += (m->table[i].numel + 15) / 16 * 16;
	}
	/* CPU backend memory is host memory: parameters are read in place (and
	 * fp32 weight matrices streamed from there) */
	m->params = gpt_weights_alloc((size_t)total * sizeof(float), "model weights", err);
	rc = m->params ? 0 : GPT_EINTERNAL;
	for (int64_t i = 0; !rc && i < m->n_table; i++)
		if (gpt_infer_host_holds(dtype, i) && !(rc = read(ctx, &m->table[i], param(m, i), err)))
			rc = check_finite(&m->table[i], param(m, i), err);
	if (!rc)
		rc = init_qweights(m, read, ctx, biggest, err);
	if (rc)
		gpt_infer_model_free(m);
	return rc;
}

/* A CUDA graph of a generation step of n sequences, one new token each,
 * and what its launches name besides the weights: the work buffers (their
 * generation), the backend's scratch and the caches (their shape) it was
 * made for. warm: a step ran op by op with these, so the next one is
 * recorded (the first step at a shape makes what ops make on first use:
 * cuBLASLt's plans, scratch; the CUDA runtime refuses allocations while
 * recording). */
struct gpt_infer_graph {
	int64_t gen, maxT;
	const void *scratch, *k, *v;
	int warm;
	void *exec;
};

static void free_graphs(gpt_infer_model *m)
{
#if GPT_HAVE_CUDA
	for (int64_t i = 0; i < m->n_graphs; i++)
		gpt_cuda_graph_free(m->graphs[i].exec);
#endif
	free(m->graphs);
	m->graphs = NULL;
	m->n_graphs = 0;
}

static void free_work(gpt_infer_model *m)
{
	void **p[] = {&m->x, &m->ln, &m->qkv, &m->att, &m->tmp, &m->fch, (void **)&m->dtokens, &m->dlogits};
	for (size_t i = 0; i < sizeof p / sizeof *p; i++) {
		if (*p[i])
			m->be.ops->free(&m->be, *p[i]);
		*p[i] = NULL;
	}
	free(m->tokens);
#if GPT_HAVE_CUDA
	gpt_cuda_host_free(m->hlogits);
#endif
	m->tokens = NULL;
	m->hlogits = NULL;
	m->cap_rows = 0;
}

void gpt_infer_model_free(gpt_infer_model *m)
{
	/* on the device qw[] only points into m->dq */
	for (int64_t i = 0; !m->cuda && m->qw && i < 4 * m->shape.layers + 1; i++)
		gpt_qweight_free(&m->qw[i]);
	free(m->qw);
	free(m->act_scale);
	free_graphs(m);
	if (m->be.ops)
		free_work(m);
#if GPT_HAVE_CUDA
	if (m->cuda) {
		void *dev[] = {m->params, m->dq, m->dact};
		for (size_t i = 0; i < sizeof dev / sizeof *dev; i++)
			if (dev[i])
				m->be.ops->free(&m->be, dev[i]);
		gpt_backend_cuda_free(&m->be);
	} else
#endif
	{
		free(m->params); /* host memory of gpt_weights_alloc */
		if (m->be.ops)
			gpt_backend_cpu_free(&m->be);
	}
	free(m->table);
	free(m->offset);
	memset(m, 0, sizeof *m);
}

static int grow_work(gpt_infer_model *m, int64_t rows, gpt_err *err)
{
	if (rows <= m->cap_rows)
		return 0;
	free_work(m);
	const gpt_model_shape *s = &m->shape;
	size_t es = gpt_dtype_size(m->be.dtype), R = (size_t)rows;
	struct { void **p; size_t n; } w[] = {
		{&m->x, R * (size_t)s->hidden}, {&m->ln, R * (size_t)s->hidden},
		{&m->qkv, R * 3 * (size_t)s->hidden}, {&m->att, R * (size_t)s->hidden},
		{&m->tmp, R * (size_t)s->hidden}, {&m->fch, R * (size_t)s->ffn},
	};
	for (size_t i = 0; i < sizeof w / sizeof *w; i++) {
		*w[i].p = m->be.ops->alloc(&m->be, w[i].n * es, "generation activations", err);
		if (!*w[i].p) {
			free_work(m);
			return GPT_EINTERNAL;
		}
	}
	/* tokens: a call's tokens, then a step's positions and slots */
	m->tokens = gpt_malloc(3 * R * sizeof(int32_t), "tokens", err);
	m->work_gen++;
	int ok = m->tokens != NULL;
	if (ok && m->cuda) {
		size_t lb = R * (size_t)s->vocab_size * es;
		m->dtokens = m->be.ops->alloc(&m->be, 3 * R * sizeof(int32_t), "tokens", err);
		m->dlogits = m->dtokens ? m->be.ops->alloc(&m->be, lb, "logits", err) : NULL;
#if GPT_HAVE_CUDA
		/* pinned: a step's logits come down at the link's rate */
		m->hlogits = m->dlogits && es != 4 ? gpt_cuda_host_alloc(lb, "logits", err) : NULL;
#endif
		ok = m->dlogits && (es == 4 || m->hlogits);
	}
	if (!ok) {
		free_work(m);
		return GPT_EINTERNAL;
	}
	m->cap_rows = rows;
	return 0;
}

int gpt_kv_init(gpt_kv *kv, gpt_infer_model *m, int64_t slots, int64_t maxT, gpt_err *err)
{
	memset(kv, 0, sizeof *kv);
	if (slots < 1 || maxT < 1 || maxT > m->shape.max_pos)
		return gpt_err_set(err, GPT_EUSAGE,
				   "kv cache: expected 1 or more slots of 1 to %lld positions, found %lld x %lld",
				   (long long)m->shape.max_pos, (long long)slots, (long long)maxT);
	kv->slots = slots;
	kv->maxT = maxT;
	kv->layers = m->shape.layers;
	kv->per_slot = m->shape.hidden * maxT;
	size_t bytes = (size_t)(kv->layers * slots * kv->per_slot) * gpt_dtype_size(m->be.dtype);
	kv->k = m->be.ops->alloc(&m->be, bytes, "kv cache (keys)", err);
	kv->v = kv->k ? m->be.ops->alloc(&m->be, bytes, "kv cache (values)", err) : NULL;
	kv->len = gpt_calloc((size_t)slots, sizeof *kv->len, "kv cache lengths", err);
	if (!kv->k || !kv->v || !kv->len) {
		gpt_kv_free(kv, m);
		return GPT_EINTERNAL;
	}
	return 0;
}

void gpt_kv_free(gpt_kv *kv, gpt_infer_model *m)
{
	if (kv->k)
		m->be.ops->free(&m->be, kv->k);
	if (kv->v)
		m->be.ops->free(&m->be, kv->v);
	free(kv->len);
	memset(kv, 0, sizeof *kv);
}

/* Elements from the start of the cache to (layer, slot). */
static int64_t kv_at(const gpt_kv *kv, int64_t layer, int64_t slot)
{
	return (layer * kv->slots + slot) * kv->per_slot;
}

int gpt_kv_copy(gpt_kv *kv, gpt_infer_model *m, int64_t dst, int64_t src, gpt_err *err)
{
	if (dst == src)
		return 0;
	const gpt_model_shape *s = &m->shape;
	int64_t HS = s->hidden / s->heads, n = kv->len[src];
	size_t es = gpt_dtype_size(m->be.dtype);
	for (int64_t l = 0; l < kv->layers; l++)
		for (int64_t h = 0; h < s->heads; h++) {
			int64_t od = kv_at(kv, l, dst) + h * kv->maxT * HS;
			int64_t os = kv_at(kv, l, src) + h * kv->maxT * HS;
			size_t bytes = (size_t)(n * HS) * es;
			int rc = m->be.ops->copy(&m->be, (char *)kv->k + od * (int64_t)es,
						 (char *)kv->k + os * (int64_t)es, bytes, err);
			if (!rc)
				rc = m->be.ops->copy(&m->be, (char *)kv->v + od * (int64_t)es,
						     (char *)kv->v + os * (int64_t)es, bytes, err);
			if (rc)
				return rc;
		}
	kv->len[dst] = n;
	return 0;
}

#define OP(call)                    \
	do {                        \
		int rc_ = (call);   \
		if (rc_)            \
			return rc_; \
	} while (0)

/* fq of the n inputs x of linear j of layer l, in place, when the model
 * carries its activation scale (quantization-aware training), after PACT's
 * clip when it has one. On the device the backend's pact_fwd and
 * fake_quant do the CPU's arithmetic operation for operation (bit for bit
 * in fp32 storage), with the scales in m->dact. */
static int act_quant(gpt_infer_model *m, int64_t l, int j, void *x, int64_t n, gpt_err *err)
{
	if (!m->act_scale || !(m->act_scale[4 * l + j] > 0))
		return 0;
	int64_t at = 4 * l + j, clip = 4 * m->shape.layers + at;
	float a = m->act_scale[clip];
	if (m->cuda) {
		gpt_backend *be = &m->be;
		if (a > 0)
			OP(be->ops->pact_fwd(be, x, x, m->dact + clip, n, err));
		return be->ops->fake_quant(be, x, x, m->dact + at, 1, n, 0, m->act_bits, err);
	}
	float *v = x;
	for (int64_t i = 0; a > 0 && i < n; i++)
		v[i] = v[i] > a ? a : v[i] < -a ? -a : v[i];
	gpt_quant_rows(x, 1, n, &m->act_scale[at], 0, m->act_bits, x, NULL);
	return 0;
}

/* out (R, N) = x (R, K) w^T + bias for weight matrix q (4 l + j, or the
 * head 4 L): the compact host weights on the CPU; on the device the int8
 * codes and steps of qw[q], or else the parameter itself. */
static int lin(gpt_infer_model *m, int64_t q, int64_t bias, const void *x, void *out, int64_t R,
	       gpt_err *err)
{
	const void *b = bias >= 0 ? param(m, bias) : NULL;
	const gpt_qweight *w = &m->qw[q];
	if (!m->cuda)
		return gpt_qlinear(w, x, b, out, R, m->be.threads, err);
#if GPT_HAVE_CUDA
	if (w->dtype == GPT_DTYPE_I8)
		return gpt_cuda_linear_i8(&m->be, out, x, w->w, w->scale, b, R, w->K, w->N, err);
#endif
	return m->be.ops->linear_fwd(&m->be, out, x, param(m, gpt_infer_matrix_entry(m->shape.layers, q)),
				     b, R, w->K, w->N, err);
}

/* Layer l on the R rows of m->x, whose ln1 output m->ln already holds (the
 * fused residual add of layer l - 1, or gpt_infer_forward's first
 * LayerNorm); each residual add is one call with the LayerNorm after it
 * (residual_layernorm_fwd, the bits of residual_fwd then layernorm_fwd):
 * the attention's with ln2, the MLP's with the next layer's ln1, or after
 * the last layer the final LayerNorm (its table entry follows the layers':
 * T_LAYER(layers, 0)). pos: NULL, or for a step of one new token a
 * sequence, each one's position, then its slot (attention_kv_rows;
 * backend memory) */
static int layer_fwd(gpt_infer_model *m, gpt_kv *kv, int64_t l, int64_t n, const int64_t *slot,
		     const int64_t *n_tok, const int32_t *pos, int64_t R, gpt_err *err)
{
	gpt_backend *be = &m->be;
	const gpt_backend_ops *o = be->ops;
	const gpt_model_shape *s = &m->shape;
	int64_t C = s->hidden, F = s->ffn, NH = s->heads, HS = C / NH;
	size_t es = gpt_dtype_size(be->dtype);
	OP(act_quant(m, l, 0, m->ln, R * C, err));
	OP(lin(m, 4 * l, T_LAYER(l, P_QKV_B), m->ln, m->qkv, R, err));
	int64_t row = 0, at = kv_at(kv, l, 0);
	if (pos)
		OP(o->attention_kv_rows(be, m->att, (char *)kv->k + at * (int64_t)es,
					(char *)kv->v + at * (int64_t)es, m->qkv, n, pos + n, pos, kv->maxT, NH,
					HS, err));
	for (int64_t i = 0; !pos && i < n; i++) {
		at = kv_at(kv, l, slot[i]);
		OP(o->attention_kv(be, (char *)m->att + row * C * (int64_t)es,
				   (char *)kv->k + at * (int64_t)es, (char *)kv->v + at * (int64_t)es,
				   (char *)m->qkv + row * 3 * C * (int64_t)es, 1, n_tok[i],
				   kv->len[slot[i]], kv->maxT, NH, HS, err));
		row += n_tok[i];
	}
	OP(act_quant(m, l, 1, m->att, R * C, err));
	OP(lin(m, 4 * l + 1, T_LAYER(l, P_PROJ_B), m->att, m->tmp, R, err));
	OP(o->residual_layernorm_fwd(be, m->x, m->ln, NULL, NULL, m->x, m->tmp,
				     param(m, T_LAYER(l, P_LN2_W)), param(m, T_LAYER(l, P_LN2_B)), R,
				     C, m->ln_eps, NULL, 0, err));
	OP(act_quant(m, l, 2, m->ln, R * C, err));
	OP(lin(m, 4 * l + 2, T_LAYER(l, P_FC_B), m->ln, m->fch, R, err));
	OP(o->gelu_fwd(be, m->fch, m->fch, R * F, err));
	OP(act_quant(m, l, 3, m->fch, R * F, err));
	OP(lin(m, 4 * l + 3, T_LAYER(l, P_MPROJ_B), m->fch, m->tmp, R, err));
	return o->residual_layernorm_fwd(be, m->x, m->ln, NULL, NULL, m->x, m->tmp,
					 param(m, T_LAYER(l + 1, P_LN1_W)),
					 param(m, T_LAYER(l + 1, P_LN1_B)), R, C, m->ln_eps, NULL, 0, err);
}

/* The forward of R rows from the embedding to the head's logits of the
 * rows wanted (all, or each sequence's last) into out (backend memory):
 * tok the tokens (backend memory), for a step (pos not NULL) followed by
 * each sequence's position and slot, where pos points. Reads the caches'
 * lengths, leaves them to the caller. */
static int forward_rows(gpt_infer_model *m, gpt_kv *kv, int64_t n, const int64_t *slot,
			const int64_t *n_tok, const int32_t *tok, const int32_t *pos, int64_t R, int all,
			void *out, gpt_err *err)
{
	const gpt_model_shape *s = &m->shape;
	int64_t C = s->hidden, Vp = s->padded_vocab;
	gpt_backend *be = &m->be;
	const gpt_backend_ops *o = be->ops;
	size_t es = gpt_dtype_size(be->dtype);
	if (pos)
		OP(o->embedding_rows_fwd(be, m->x, tok, pos, param(m, T_WTE), param(m, T_WPE), n, C, 0, Vp,
					 err));
	int64_t row = 0;
	for (int64_t i = 0; !pos && i < n; i++) {
		OP(o->embedding_fwd(be, (char *)m->x + row * C * (int64_t)es, tok + row, param(m, T_WTE),
				    param(m, T_WPE), 1, n_tok[i], C, 0, Vp, kv->len[slot[i]], err));
		row += n_tok[i];
	}
	OP(o->layernorm_fwd(be, m->ln, NULL, NULL, m->x, param(m, T_LAYER(0, P_LN1_W)),
			    param(m, T_LAYER(0, P_LN1_B)), R, C, m->ln_eps, err));
	for (int64_t l = 0; l < s->layers; l++)
		OP(layer_fwd(m, kv, l, n, slot, n_tok, pos, R, err));
	/* the last layer left the final LayerNorm of every row in m->ln (a
	 * LayerNorm is row by row: the same bits as of the rows alone); the
	 * head only for the rows wanted */
	int64_t rows = R;
	if (!all) {
		row = 0;
		for (int64_t i = 0; i < n; i++) {
			row += n_tok[i];
			if (row - 1 != i)
				OP(o->copy(be, (char *)m->ln + i * C * (int64_t)es,
					   (char *)m->ln + (row - 1) * C * (int64_t)es, (size_t)C * es, err));
		}
		rows = n;
	}
	return lin(m, 4 * s->layers, -1, m->ln, out, rows, err);
}

#if GPT_HAVE_CUDA
/* A generation step of n sequences on the device as a CUDA graph: the
 * step's graph replayed when one was made for these buffers; else the
 * step op by op, or recorded when the last one at this shape ran op by op
 * (recording does not run it: the graph then runs). A step that cannot be
 * recorded turns graphs off for the model (graph_why) and runs op by op:
 * the result is the same bits either way, the same kernels on the same
 * memory. */
static int step_graph(gpt_infer_model *m, gpt_kv *kv, int64_t n, const int64_t *slot,
		      const int64_t *n_tok, const int32_t *tok, int all, gpt_err *err)
{
	gpt_backend *be = &m->be;
	const int32_t *pos = tok + n;
	if (m->graph_off)
		return forward_rows(m, kv, n, slot, n_tok, tok, pos, n, all, m->dlogits, err);
	if (n > m->n_graphs) {
		struct gpt_infer_graph *g = realloc(m->graphs, (size_t)n * sizeof *g);
		if (!g)
			return gpt_err_set(err, GPT_EINTERNAL, "generation: out of memory for CUDA graphs");
		memset(g + m->n_graphs, 0, (size_t)(n - m->n_graphs) * sizeof *g);
		m->graphs = g;
		m->n_graphs = n;
	}
	struct gpt_infer_graph *g = &m->graphs[n - 1];
	if (g->gen != m->work_gen || g->scratch != be->scratch || g->k != kv->k || g->v != kv->v ||
	    g->maxT != kv->maxT) {
		gpt_cuda_graph_free(g->exec);
		*g = (struct gpt_infer_graph){m->work_gen, kv->maxT, be->scratch, kv->k, kv->v, 0, NULL};
	}
	if (!g->exec && g->warm) {
		gpt_err why = {0};
		void *x = NULL;
		int rc = gpt_cuda_graph_begin(be, &why);
		if (!rc) {
			rc = forward_rows(m, kv, n, slot, n_tok, tok, pos, n, all, m->dlogits, &why);
			gpt_err end = {0};
			int rc2 = gpt_cuda_graph_end(be, &x, &end);
			if (!rc && rc2)
				why = end, rc = rc2;
		}
		if (rc) {
			gpt_cuda_graph_free(x);
			m->graph_off = 1;
			snprintf(m->graph_why, sizeof m->graph_why, "a step of %lld sequences could not be recorded: %s",
				 (long long)n, why.msg);
		} else {
			g->exec = x;
		}
	}
	if (g->exec) {
		OP(gpt_cuda_graph_run(be, g->exec, err));
		m->graph_steps++;
		return 0;
	}
	OP(forward_rows(m, kv, n, slot, n_tok, tok, pos, n, all, m->dlogits, err));
	/* what this step made on first use is the recording's */
	g->scratch = be->scratch;
	g->warm = 1;
	return 0;
}
#endif

int gpt_infer_forward(gpt_infer_model *m, gpt_kv *kv, int64_t n, const int64_t *slot,
		      const int32_t *const *tokens, const int64_t *n_tok, int all, float *logits,
		      gpt_err *err)
{
	const gpt_model_shape *s = &m->shape;
	int64_t R = 0, V = s->vocab_size;
	for (int64_t i = 0; i < n; i++) {
		if (slot[i] < 0 || slot[i] >= kv->slots || n_tok[i] < 1)
			return gpt_err_set(err, GPT_EUSAGE, "generation: chunk %lld: bad slot %lld or %lld tokens",
					   (long long)i, (long long)slot[i], (long long)n_tok[i]);
		if (kv->len[slot[i]] + n_tok[i] > kv->maxT)
			return gpt_err_set(err, GPT_EUSAGE,
					   "generation: a sequence of %lld tokens passes the context of %lld "
					   "positions; shorten the prompt or max_dec_len",
					   (long long)(kv->len[slot[i]] + n_tok[i]), (long long)kv->maxT);
		for (int64_t t = 0; t < n_tok[i]; t++)
			if (tokens[i][t] < 0 || tokens[i][t] >= V)
				return gpt_err_set(err, GPT_EUSAGE,
						   "generation: token id %d is outside the vocabulary of %lld",
						   (int)tokens[i][t], (long long)V);
		R += n_tok[i];
	}
	if (n < 1)
		return 0;
	OP(grow_work(m, R, err));
	gpt_backend *be = &m->be;
	const gpt_backend_ops *o = be->ops;
	/* a generation step of several sequences, one new token each: the
	 * embedding and each layer's attention one call for all of them, each
	 * row at its own position and slot (the tokens' buffer holds them after
	 * the tokens); a prompt a call per sequence */
	int step = R == n;
	int64_t row = 0;
	for (int64_t i = 0; i < n; i++) {
		memcpy(m->tokens + row, tokens[i], (size_t)n_tok[i] * sizeof(int32_t));
		row += n_tok[i];
		if (step) {
			m->tokens[R + i] = (int32_t)kv->len[slot[i]];
			m->tokens[R + n + i] = (int32_t)slot[i];
		}
	}
	/* tokens are host memory on the CPU backend */
	int32_t *tok = m->tokens;
	if (m->cuda) {
		size_t nt = (size_t)(step ? 3 * R : R);
		OP(o->upload(be, m->dtokens, m->tokens, nt * sizeof(int32_t), err));
		tok = m->dtokens;
	}
	/* the head over the true vocabulary only, straight into the caller's
	 * rows (on the device: through the logits buffers, as fp32) */
	int rc;
#if GPT_HAVE_CUDA
	if (m->cuda && step)
		rc = step_graph(m, kv, n, slot, n_tok, tok, all, err);
	else
#endif
		rc = forward_rows(m, kv, n, slot, n_tok, tok, step ? tok + R : NULL, R, all,
				  m->cuda ? m->dlogits : (void *)logits, err);
	if (rc)
		return rc;
	for (int64_t i = 0; i < n; i++)
		kv->len[slot[i]] += n_tok[i];
	if (!m->cuda)
		return 0;
	int64_t rows = all ? R : n;
	size_t es = gpt_dtype_size(be->dtype), lb = (size_t)(rows * V) * es;
	if (es == 4)
		return o->download(be, logits, m->dlogits, lb, err);
	OP(o->download(be, m->hlogits, m->dlogits, lb, err));
	return gpt_convert(logits, GPT_DTYPE_F32, m->hlogits, be->dtype, (size_t)(rows * V), err);
}
