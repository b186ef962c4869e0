/* The residual dropout's backward inside the LayerNorm's backward before it
 * (residual_layernorm_bwd, lib/model/pass.c's ln_bwd): every residual
 * dropout site of a step takes its gradient from there (2 L + 1 calls: ln_2
 * and ln_1 of each layer, ln_f; no dropout_bwd of their own), and the
 * gradients are the bits of the same step by a backend without the op,
 * which drops them one op after the other. The CPU backend's op is its two
 * calls, so a difference would be the model's: a branch gradient read
 * from a buffer another op had written meanwhile. In fp32 and bf16, with
 * and without recompute, with tied wte, attention dropout and a
 * classifier in blocks. */
#include "cpu-check.h"
#include "model/gpt.h"

#include <string.h>

static const gpt_backend_ops *base; /* the CPU backend's ops */
static int n_fused, n_drop_bwd;

static int count_fused(gpt_backend *be, void *dinp, void *dbranch, void *dw, void *db, const void *dout,
		       const void *inp, const void *w, const float *mean, const float *rstd, int64_t N, int64_t C,
		       const gpt_dropout *d, int64_t T, gpt_err *err)
{
	int apart = n_drop_bwd; /* the CPU's op calls dropout_bwd: not the model's */
	n_fused++;
	int rc = base->residual_layernorm_bwd(be, dinp, dbranch, dw, db, dout, inp, w, mean, rstd, N, C, d, T,
					      err);
	n_drop_bwd = apart;
	return rc;
}

static int count_drop_bwd(gpt_backend *be, void *dinp, const void *dout, int64_t B, int64_t T, int64_t F,
			  const gpt_dropout *d, gpt_err *err)
{
	n_drop_bwd++;
	return base->dropout_bwd(be, dinp, dout, B, T, F, d, err);
}

/* One step's gradients (n_alloc elements of the storage dtype, malloc'd)
 * on be with ops: with or without the fusion. */
static void *step_grads(gpt_backend be, const gpt_backend_ops *ops, const gpt_model_shape *s,
			const gpt_model_opts *mo, size_t *bytes)
{
	gpt_layout lo;
	gpt_layout_single(&lo, s);
	gpt_model m;
	be.ops = ops;
	CHK(gpt_model_init(&m, &be, s, &lo, mo, &chk_err));
	CHK(gpt_model_init_weights(&m, 42, 0.5, &chk_err));
	int64_t BT = mo->batch * mo->seq_len;
	int32_t tok[64], tgt[64];
	for (int64_t i = 0; i < BT; i++) {
		tok[i] = (int32_t)((i * 37 + 11) % s->vocab_size);
		tgt[i] = (int32_t)((i * 53 + 5) % s->vocab_size);
	}
	float dloss = 1.0f / (float)BT;
	double loss;
	int64_t n;
	CHK(gpt_model_zero_grad(&m, &chk_err));
	CHK(gpt_model_forward(&m, tok, tgt, 1, 3, 8, &dloss, &loss, &n, &chk_err));
	CHK(gpt_model_backward(&m, &chk_err));
	*bytes = (size_t)m.n_alloc * gpt_dtype_size(be.dtype);
	void *g = malloc(*bytes);
	CHK(be.ops->download(&be, g, m.grads, *bytes, &chk_err));
	gpt_model_free(&m);
	return g;
}

static void check(gpt_dtype dt, gpt_recompute rc, float p)
{
	gpt_backend be;
	CHK(gpt_backend_cpu_init(&be, dt, 1, &chk_err));
	base = be.ops;
	gpt_backend_ops fused = *base, apart = *base;
	fused.residual_layernorm_bwd = count_fused;
	fused.dropout_bwd = apart.dropout_bwd = count_drop_bwd;
	apart.residual_layernorm_bwd = NULL;
	gpt_model_shape s = {.vocab_size = 61, .padded_vocab = 64, .max_pos = 16, .hidden = 16,
			     .layers = 3, .heads = 2, .ffn = 64};
	gpt_model_opts mo = {.batch = 2, .seq_len = 16, .recompute = rc, .hidden_dropout = p,
			     .attn_dropout = 0.1f, .seed = 7, .head_rows = 8};
	const char *what = rc == GPT_RECOMPUTE_FULL	 ? "full recompute"
			   : rc == GPT_RECOMPUTE_ONLY_ATTN ? "only_attn recompute"
							   : "no recompute";
	size_t nb, na;
	n_fused = n_drop_bwd = 0;
	void *gf = step_grads(be, &fused, &s, &mo, &nb);
	int want = p > 0 ? 2 * (int)s.layers + 1 : 0;
	ok(n_fused == want && n_drop_bwd == 0,
	   "%s, %s, p %g: %d residual dropouts in the LayerNorms' backward (%d wanted), %d dropout_bwd (0)",
	   gpt_dtype_name(dt), what, p, n_fused, want, n_drop_bwd);
	n_fused = n_drop_bwd = 0;
	void *ga = step_grads(be, &apart, &s, &mo, &na);
	ok(n_drop_bwd == want, "%s, %s, p %g: without the op, %d dropout_bwd (%d)", gpt_dtype_name(dt), what, p,
	   n_drop_bwd, want);
	ok(nb == na && memcmp(gf, ga, nb) == 0, "%s, %s, p %g: the gradients are the bits of the unfused step",
	   gpt_dtype_name(dt), what, p);
	free(gf), free(ga);
	gpt_backend_cpu_free(&be);
}

int main(void)
{
	gpt_dtype dts[] = {GPT_DTYPE_F32, GPT_DTYPE_BF16};
	for (int i = 0; i < 2; i++) {
		check(dts[i], GPT_RECOMPUTE_NONE, 0.2f);
		check(dts[i], GPT_RECOMPUTE_FULL, 0.2f);
	}
	check(GPT_DTYPE_F32, GPT_RECOMPUTE_NONE, 0.0f);
	check(GPT_DTYPE_F32, GPT_RECOMPUTE_ONLY_ATTN, 0.5f);
	return done_testing();
}
