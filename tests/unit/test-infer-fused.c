/* The decoder's forward, whose residual adds run fused with the LayerNorm
 * after them (residual_layernorm_fwd: the attention's with ln2, the MLP's
 * with the next layer's ln1 or the final LayerNorm), against the same
 * forward with every op a call of its own: the same bits, for every row of
 * two prompts, for the last rows of each and the generation steps after
 * them, with fp32, bf16 and int8 weights. */
#include "infer-ref.h"
#include "infer/layout.h"
#include "tap.h"

static const gpt_model_shape shape = {
	.vocab_size = 257, .padded_vocab = 384, .max_pos = 48, .hidden = 32, .layers = 3, .heads = 4,
	.ffn = 128,
};

/* The reference weights, each tensor moved by its own noise: LayerNorms
 * start as ones and zeros and biases as zeros, which would hide one taken
 * for another. */
static int noisy_read(void *ctx, const gpt_param_info *p, float *dst, gpt_err *err)
{
	int rc = ref_read(ctx, p, dst, err);
	uint32_t h = 2166136261u;
	for (const char *c = p->name; *c; c++)
		h = (h ^ (uint8_t)*c) * 16777619u;
	for (int64_t k = 0; !rc && k < p->numel; k++) {
		h = h * 1664525u + 1013904223u;
		dst[k] += 0.2f * ((float)(h >> 8) / 16777216.0f - 0.5f);
	}
	return rc;
}

#define P(m, i) ((const float *)(m)->params + (m)->offset[i])

/* Layer l of the unfused forward on the R rows of x: n_tok[i] tokens after
 * the kv->len[i] in slot i of kv, for slots 0..n-1. */
static int layer_ref(gpt_infer_model *m, gpt_kv *kv, int64_t l, int64_t n, const int64_t *n_tok,
		     int64_t R, float **b, gpt_err *err)
{
	gpt_backend *be = &m->be;
	const gpt_backend_ops *o = be->ops;
	int64_t C = m->shape.hidden, NH = m->shape.heads, HS = C / NH;
	float *x = b[0], *ln = b[1], *qkv = b[2], *att = b[3], *tmp = b[4], *fch = b[5];
	int rc = o->layernorm_fwd(be, ln, NULL, NULL, x, P(m, T_LAYER(l, P_LN1_W)),
				  P(m, T_LAYER(l, P_LN1_B)), R, C, m->ln_eps, err);
	rc = rc ? rc : gpt_qlinear(&m->qw[4 * l], ln, P(m, T_LAYER(l, P_QKV_B)), qkv, R, 1, err);
	for (int64_t i = 0, row = 0; !rc && i < n; row += n_tok[i++]) {
		int64_t at = (l * kv->slots + i) * kv->per_slot;
		rc = o->attention_kv(be, att + row * C, (float *)kv->k + at, (float *)kv->v + at,
				     qkv + row * 3 * C, 1, n_tok[i], kv->len[i], kv->maxT, NH, HS, err);
	}
	rc = rc ? rc : gpt_qlinear(&m->qw[4 * l + 1], att, P(m, T_LAYER(l, P_PROJ_B)), tmp, R, 1, err);
	rc = rc ? rc : o->residual_fwd(be, x, x, tmp, R * C, err);
	rc = rc ? rc : o->layernorm_fwd(be, ln, NULL, NULL, x, P(m, T_LAYER(l, P_LN2_W)),
					P(m, T_LAYER(l, P_LN2_B)), R, C, m->ln_eps, err);
	rc = rc ? rc : gpt_qlinear(&m->qw[4 * l + 2], ln, P(m, T_LAYER(l, P_FC_B)), fch, R, 1, err);
	rc = rc ? rc : o->gelu_fwd(be, fch, fch, R * m->shape.ffn, err);
	rc = rc ? rc : gpt_qlinear(&m->qw[4 * l + 3], fch, P(m, T_LAYER(l, P_MPROJ_B)), tmp, R, 1, err);
	return rc ? rc : o->residual_fwd(be, x, x, tmp, R * C, err);
}

/* The unfused forward of n_tok[i] tokens after what slot i of kv holds,
 * for slots 0..n-1: the logits (rows, vocab) of all their rows, or with
 * all = 0 of the last row of each (the final LayerNorm and the head of
 * those rows alone), as gpt_infer_forward. */
static int forward_ref(gpt_infer_model *m, gpt_kv *kv, int64_t n, const int32_t *const *tok,
		       const int64_t *n_tok, int all, float *logits, gpt_err *err)
{
	const gpt_model_shape *s = &m->shape;
	int64_t C = s->hidden, R = 0;
	for (int64_t i = 0; i < n; i++)
		R += n_tok[i];
	int64_t width[6] = {C, C, 3 * C, C, C, s->ffn};
	float *b[6];
	for (int k = 0; k < 6; k++)
		b[k] = calloc((size_t)(R * width[k]), sizeof(float));
	int rc = 0;
	for (int64_t i = 0, row = 0; !rc && i < n; row += n_tok[i++])
		rc = m->be.ops->embedding_fwd(&m->be, b[0] + row * C, tok[i], P(m, T_WTE), P(m, T_WPE), 1,
					      n_tok[i], C, 0, s->padded_vocab, kv->len[i], err);
	for (int64_t l = 0; !rc && l < s->layers; l++)
		rc = layer_ref(m, kv, l, n, n_tok, R, b, err);
	for (int64_t i = 0; i < n; i++)
		kv->len[i] += n_tok[i];
	int64_t lnf = 2 + s->layers * P_PER_LAYER, rows = all ? R : n;
	for (int64_t i = 0, row = 0; !all && i < n; i++) {
		row += n_tok[i];
		memmove(b[0] + i * C, b[0] + (row - 1) * C, (size_t)C * sizeof(float));
	}
	if (!rc)
		rc = m->be.ops->layernorm_fwd(&m->be, b[1], NULL, NULL, b[0], P(m, lnf), P(m, lnf + 1),
					      rows, C, m->ln_eps, err);
	if (!rc)
		rc = gpt_qlinear(&m->qw[4 * s->layers], b[1], NULL, logits, rows, 1, err);
	for (int k = 0; k < 6; k++)
		free(b[k]);
	return rc;
}

/* The fused and the unfused forward of the same calls, each into a cache of
 * its own: for all = 1 two prompts; else two prompts, a step of a token
 * each (one call for both: attention_kv_rows) and a step of the first
 * alone. 1 when every call's logits have the same bits. */
static int same_bits(gpt_infer_model *m, const int32_t *const *tok, int all, gpt_err *err)
{
	static const int32_t next[2] = {65, 200};
	const int32_t *const step[2] = {&next[0], &next[1]};
	int64_t n_tok[2] = {7, 20}, one[2] = {1, 1}, slot[2] = {0, 1}, V = shape.vocab_size;
	static float want[27 * 257], got[27 * 257];
	gpt_kv kf = {0}, ku = {0};
	int rc = gpt_kv_init(&kf, m, 2, 48, err), same = 1;
	if (!rc)
		rc = gpt_kv_init(&ku, m, 2, 48, err);
	for (int c = 0; !rc && c < (all ? 1 : 3); c++) {
		int64_t n = c < 2 ? 2 : 1, R = all ? 27 : n;
		const int32_t *const *t = c ? step : tok;
		const int64_t *k = c ? one : n_tok;
		memset(want, 0, sizeof want);
		memset(got, 0, sizeof got);
		rc = forward_ref(m, &ku, n, t, k, all, want, err);
		if (!rc)
			rc = gpt_infer_forward(m, &kf, n, slot, t, k, all, got, err);
		same = same && !rc && !memcmp(got, want, (size_t)(R * V) * sizeof(float));
	}
	if (rc)
		diag("%s", err->msg);
	gpt_kv_free(&kf, m);
	gpt_kv_free(&ku, m);
	return !rc && same;
}

int main(void)
{
	gpt_err err = {0};
	ref_model r;
	int rc = ref_init(&r, &shape, 5, 0.4, &err);
	ok(rc == 0, "reference model%s", rc ? err.msg : "");
	int32_t seq[2][20];
	for (int i = 0; i < 20; i++) {
		seq[0][i] = (i * 37 + 11) % 256;
		seq[1][i] = (i * 91 + 3) % 257;
	}
	const int32_t *tok[2] = {seq[0], seq[1]};
	const gpt_dtype dt[3] = {GPT_DTYPE_F32, GPT_DTYPE_BF16, GPT_DTYPE_I8};
	for (int d = 0; d < 3; d++) {
		const char *name = gpt_dtype_name(dt[d]);
		gpt_infer_model m;
		rc = gpt_infer_model_init(&m, &shape, dt[d], 1, noisy_read, &r, &err);
		int loaded = !rc;
		ok(loaded, "%s: the decoder loads the weights%s", name, rc ? err.msg : "");
		for (int all = 1; all >= 0 && loaded; all--)
			ok(same_bits(&m, tok, all, &err),
			   "%s: the fused forward's logits are the unfused forward's bits, %s", name,
			   all ? "every row of two prompts" : "the last rows of two prompts, then two steps");
		if (loaded)
			gpt_infer_model_free(&m);
	}
	ref_free(&r);
	return done_testing();
}
