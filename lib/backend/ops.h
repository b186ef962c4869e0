/* The backend ops table: every computation GPT training and generation need,
 * as a struct of function pointers that each backend (lib/cpu, lib/cuda)
 * fills in. Included by backend/backend.h; read that header's comment first.
 *
 * Conventions (llm.c style)
 *   - Raw pointers and sizes. Activations are (B, T, C) row-major; weights are
 *     [out, in] row-major, so a linear layer is y = x W^T + b.
 *   - Memory: every pointer an op takes is backend memory (host memory for
 *     the CPU backend, device memory for CUDA), obtained from be->ops->alloc
 *     unless said otherwise; upload/download move data from and to the host.
 *   - Dtypes: a `void *` tensor holds elements of the backend's storage dtype
 *     be->dtype (fp32, bf16 or fp16): parameters, gradients, activations,
 *     logits. A `float *` is always fp32: LayerNorm statistics, attention
 *     state, cross-entropy pieces and losses, AdamW master weights and
 *     moments, reductions. Every op computes in fp32 (CUDA: fp32 accumulation)
 *     and rounds to nearest even when it stores a 16-bit value. Tokens and
 *     targets are int32. A model that needs two storage dtypes uses two
 *     backend contexts; convert moves data between dtypes explicitly.
 *   - Gradients: an op's comment says whether it writes its gradient outputs
 *     or adds into them. Weight and bias gradients always accumulate (+=), so
 *     micro-batches sum without extra passes; the caller zeroes them once per
 *     step. Activation gradients are written, except layernorm_bwd (adds into
 *     the residual stream's gradient) and residual_bwd.
 *   - Errors: every op returns 0 or a gpt_status and leaves a message in err
 *     (CPU ops fail only on bad arguments, on a target outside the
 *     vocabulary (GPT_EDATA), or when memory for scratch or for 16-bit
 *     temporaries runs out).
 *     Pointers marked "may be NULL" are optional; others must be valid.
 *   - A NULL slot means the backend does not support that op; check a list
 *     of needed ops once with gpt_backend_require, which names the missing
 *     op and the backend in its error.
 *   - Ops run in issue order on the backend's one stream (CPU: synchronous);
 *     sync waits for all of them.
 *
 * Randomness: dropout masks come from Philox4x32-10 keyed by global
 * coordinates (see backend/philox.h). Ops that drop take a gpt_dropout, which
 * carries the probability, the key (seed, step, layer, site) and the global
 * index of the first local sample and feature; backward ops regenerate the
 * same mask from the same gpt_dropout, so no mask is ever stored. */
#ifndef GPT_BACKEND_OPS_H
#define GPT_BACKEND_OPS_H

#include "backend/backend.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gpt_backend gpt_backend;

/* Where in the model a dropout happens: one Philox stream per (layer, site). */
typedef enum gpt_rng_site {
	GPT_RNG_SITE_EMBED = 0,   /* after token + position embedding (layer 0) */
	GPT_RNG_SITE_ATTN_PROBS,  /* attention probabilities */
	GPT_RNG_SITE_ATTN_RESID,  /* attention output projection, before the residual add */
	GPT_RNG_SITE_MLP_RESID,   /* MLP output projection, before the residual add */
} gpt_rng_site;

typedef struct gpt_rng_key {
	uint32_t seed;
	uint32_t step;   /* optimizer step; the same for every micro-batch of a step */
	uint32_t layer;  /* < 2^24 */
	uint32_t site;   /* a gpt_rng_site, < 2^8 */
} gpt_rng_key;

/* One dropout site as the local op sees it. Element (b, t, f) of a local
 * (B, T, F) tensor draws the bits of global coordinate (sample0 + b, t0 + t,
 * feature0 + f) (t0: a sequence-parallel slice of positions; the attention
 * ops take it as 0). For attention probabilities the "feature" of (head h,
 * key position j) is (head0 + h) * T + j, with feature0 = the global index of
 * the first local head. p = 0 makes the op an identity (no random bits). */
typedef struct gpt_dropout {
	float p;          /* drop probability, in [0, 1) */
	gpt_rng_key key;
	int64_t sample0;  /* global index (in the step's global batch) of local sample 0 */
	int64_t feature0; /* global index of local feature 0 (tensor-parallel slice) */
	int64_t t0;       /* position of local t = 0 (dropout_fwd/bwd only) */
} gpt_dropout;

/* AdamW hyper-parameters for one update call (torch.optim.AdamW semantics):
 *   g = grad * grad_scale
 *   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
 *   w = w - lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)
 *         - lr * weight_decay * w
 * Weight decay is per call: call once per decayed and once per non-decayed
 * range (0 here). grad_scale folds in 1/loss_scale and the clipping factor. */
typedef struct gpt_adamw {
	/* double so that 1 - beta2 and the bias corrections are exact before
	 * the kernel turns them into fp32 coefficients */
	double lr, beta1, beta2, eps, weight_decay;
	double grad_scale;
	int64_t t;        /* 1-based step count, for bias correction */
} gpt_adamw;

/* Elements [begin, end) of adamw_runs' range, with weight decay or not. */
typedef struct gpt_adamw_run {
	int64_t begin, end;
	int decay;
} gpt_adamw_run;

typedef struct gpt_backend_ops {
	/* ---- memory ------------------------------------------------------ */
	/* Backend memory of `bytes` (64-byte aligned, uninitialised); `what`
	 * names it in the out-of-memory error. */
	void *(*alloc)(gpt_backend *be, size_t bytes, const char *what, gpt_err *err);
	void (*free)(gpt_backend *be, void *p);
	/* Host -> backend, backend -> host, backend -> backend; byte counts.
	 * host_src may be reused when upload returns, though a device backend
	 * may not have copied it yet: the ops issued after it see the data,
	 * and sync waits for it. download returns with the data. */
	int (*upload)(gpt_backend *be, void *dst, const void *host_src, size_t bytes, gpt_err *err);
	int (*download)(gpt_backend *be, void *host_dst, const void *src, size_t bytes, gpt_err *err);
	int (*copy)(gpt_backend *be, void *dst, const void *src, size_t bytes, gpt_err *err);
	int (*zero)(gpt_backend *be, void *dst, size_t bytes, gpt_err *err);
	/* Waits until every op issued so far has finished. */
	int (*sync)(gpt_backend *be, gpt_err *err);
	/* n elements between fp32/bf16/fp16 in backend memory, round to nearest
	 * even (gpt_convert); same dtype copies. dst and src must not overlap. */
	int (*convert)(gpt_backend *be, void *dst, gpt_dtype dst_t, const void *src,
		       gpt_dtype src_t, int64_t n, gpt_err *err);

	/* ---- matrix products --------------------------------------------- */
	/* C = alpha op(A) op(B) + beta C, row-major (cblas_sgemm's meaning):
	 * op(A) is m x k, op(B) is k x n, C is m x n; lda/ldb/ldc are row
	 * strides of the stored matrices. beta = 0 ignores C's old contents
	 * (NaN included). */
	int (*gemm)(gpt_backend *be, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
		    float alpha, const void *a, int64_t lda, const void *b, int64_t ldb,
		    float beta, void *c, int64_t ldc, gpt_err *err);
	/* batch independent gemms; matrix i starts at a + i*stride_a elements
	 * (likewise b, c). */
	int (*gemm_batched)(gpt_backend *be, int trans_a, int trans_b, int64_t m, int64_t n,
			    int64_t k, float alpha, const void *a, int64_t lda, int64_t stride_a,
			    const void *b, int64_t ldb, int64_t stride_b, float beta, void *c,
			    int64_t ldc, int64_t stride_c, int64_t batch, gpt_err *err);
	/* out (M, N) = inp (M, K) w^T + bias; w is (N, K), bias (N) may be NULL.
	 * Writes out. */
	int (*linear_fwd)(gpt_backend *be, void *out, const void *inp, const void *w,
			  const void *bias, int64_t M, int64_t K, int64_t N, gpt_err *err);
	/* Given dout (M, N): writes dinp (M, K) = dout w; adds dout^T inp into
	 * dw (N, K) and the column sums of dout into dbias (N). Any of dinp, dw,
	 * dbias may be NULL (not wanted). */
	int (*linear_bwd)(gpt_backend *be, void *dinp, void *dw, void *dbias, const void *dout,
			  const void *inp, const void *w, int64_t M, int64_t K, int64_t N,
			  gpt_err *err);
	/* out (M, N) += bias (N) on every row: a row-parallel layer's bias,
	 * added after the all-reduce. Its gradient is linear_bwd with only dbias. */
	int (*bias_add)(gpt_backend *be, void *out, const void *bias, int64_t M, int64_t N,
			gpt_err *err);

	/* ---- normalisation and activations -------------------------------- */
	/* LayerNorm over the last dim of inp (N, C): out = (x - mean) * rstd * w
	 * + b, rstd = 1/sqrt(var + eps) with the biased variance. mean and rstd
	 * (N) are written for the backward; either may be NULL (inference). */
	int (*layernorm_fwd)(gpt_backend *be, void *out, float *mean, float *rstd,
			     const void *inp, const void *w, const void *b, int64_t N, int64_t C,
			     float eps, gpt_err *err);
	/* Adds into dinp (N, C), dw (C), db (C). dw/db may be NULL. */
	int (*layernorm_bwd)(gpt_backend *be, void *dinp, void *dw, void *db, const void *dout,
			     const void *inp, const void *w, const float *mean, const float *rstd,
			     int64_t N, int64_t C, gpt_err *err);
	/* GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))),
	 * over n elements; out may alias inp. */
	int (*gelu_fwd)(gpt_backend *be, void *out, const void *inp, int64_t n, gpt_err *err);
	/* Writes dinp = gelu'(inp) dout; dinp may alias dout (in place). */
	int (*gelu_bwd)(gpt_backend *be, void *dinp, const void *inp, const void *dout,
			int64_t n, gpt_err *err);

	/* ---- attention ---------------------------------------------------- */
	/* Causal multi-head self-attention over NH local heads of size HS
	 * (Cl = NH * HS). qkv is (B, T, 3, Cl): for each token q, k, v in turn,
	 * head h at [h*HS, (h+1)*HS) within each, the output of a linear with the
	 * [3, C, C] qkv weight. out (B, T, Cl) is written, heads concatenated.
	 * Scores are scaled by 1/sqrt(HS); dropout (d may be NULL: none) acts on
	 * the probabilities, with feature0 = the global index of local head 0.
	 * saved (attention_saved_size floats) keeps what the backward needs;
	 * forward writes it. */
	int (*attention_fwd)(gpt_backend *be, void *out, float *saved, const void *qkv,
			     int64_t B, int64_t T, int64_t NH, int64_t HS, const gpt_dropout *d,
			     gpt_err *err);
	/* Writes dqkv (B, T, 3, Cl) from dout (B, T, Cl), the forward's out,
	 * qkv and saved, and the same d as the forward. */
	int (*attention_bwd)(gpt_backend *be, void *dqkv, const void *dout, const void *out,
			     const void *qkv, const float *saved, int64_t B, int64_t T, int64_t NH,
			     int64_t HS, const gpt_dropout *d, gpt_err *err);
	/* Number of floats attention_fwd saves for these sizes, dropout 1
	 * where it will run with dropout (CPU: the probabilities, B*NH*T*T;
	 * CUDA: gpt_attention_flash_saved). Cannot fail. */
	int64_t (*attention_saved_size)(gpt_backend *be, int64_t B, int64_t T, int64_t NH,
					int64_t HS, int dropout);
	/* Generation with a KV cache. qkv (B, Tn, 3, Cl) holds the projections
	 * of Tn new tokens at positions [t0, t0 + Tn). Their k and v are first
	 * stored into kcache and vcache, each (B, NH, maxT, HS) in the storage
	 * dtype, at those positions; then new token i attends to cache
	 * positions [0, t0 + i]. out (B, Tn, Cl) is written. No dropout. A
	 * prompt is one call with t0 = 0; each next token one call with Tn = 1. */
	int (*attention_kv)(gpt_backend *be, void *out, void *kcache, void *vcache,
			    const void *qkv, int64_t B, int64_t Tn, int64_t t0, int64_t maxT,
			    int64_t NH, int64_t HS, gpt_err *err);
	/* A generation step of n sequences, one new token each, in one call
	 * (attention_kv would take one a sequence). kcache and vcache hold a
	 * layer's caches of every sequence, (slots, NH, maxT, HS): sequence s
	 * at s * NH * maxT * HS elements from their start. Row i of qkv
	 * (n, 3, Cl) is the new token of the sequence slot[i], at its position
	 * pos[i] (the number of positions its cache holds); its k and v are
	 * stored there, then it attends to that sequence's positions
	 * [0, pos[i]]. out (n, Cl) is written. slot and pos are backend memory,
	 * like embedding_rows_fwd's tokens and positions, so that a device
	 * runs the step without the host (a CUDA graph replays it for the next
	 * positions); the slots distinct. A slot below 0 or a position outside
	 * [0, maxT) is an error: at once on the CPU, at the next download on a
	 * device, the row skipped. Row i's output and cache are attention_kv's
	 * with B = 1, Tn = 1, t0 = pos[i] on sequence slot[i]'s caches, bit
	 * for bit. */
	int (*attention_kv_rows)(gpt_backend *be, void *out, void *kcache, void *vcache,
				 const void *qkv, int64_t n, const int32_t *slot, const int32_t *pos,
				 int64_t maxT, int64_t NH, int64_t HS, gpt_err *err);

	/* ---- vocabulary-parallel softmax cross-entropy ---------------------- */
	/* logits is (N, Vl) with row stride ld, holding global vocabulary
	 * columns [v0, v0 + Vl) of a padded vocabulary; columns at global index
	 * >= V (the true vocabulary size) are padding: left out of the softmax,
	 * zero gradient. targets (N) are global ids in [0, V), or < 0 for a row
	 * that is ignored (no loss, zero gradient).
	 *
	 * One vocabulary piece (tp = 1: the whole vocabulary):
	 *   xent_fwd      max[r] = max of the row's real columns (-inf if none),
	 *                 sumexp[r] = sum exp(logit - max[r]) over them,
	 *                 tlogit[r] = the target's logit if this piece holds it, else 0.
	 * Several pieces (tp > 1), per row:
	 *   all-reduce max over the pieces into gmax; xent_rescale(sumexp, max,
	 *   gmax) so sumexp is relative to gmax; all-reduce sum sumexp and tlogit.
	 * Then, everywhere:
	 *   xent_loss     loss[r] = log(sumexp[r]) + max[r] - tlogit[r] (0 if ignored)
	 *   xent_bwd      dlogits = (softmax - onehot(target)) * dloss; may run in
	 *                 place (dlogits == logits), as llm.c does, to save memory. */
	int (*xent_fwd)(gpt_backend *be, float *max, float *sumexp, float *tlogit,
			const void *logits, const int32_t *targets, int64_t N, int64_t Vl,
			int64_t ld, int64_t v0, int64_t V, gpt_err *err);
	int (*xent_rescale)(gpt_backend *be, float *sumexp, const float *max_local,
			    const float *max_global, int64_t N, gpt_err *err);
	int (*xent_loss)(gpt_backend *be, float *loss, const float *max, const float *sumexp,
			 const float *tlogit, const int32_t *targets, int64_t N, gpt_err *err);
	/* max and sumexp are the reduced (global) ones; dloss scales every
	 * non-ignored row (e.g. loss_scale / number of target tokens). Writes
	 * dlogits (N, Vl) with row stride ld, padding columns included (0). */
	int (*xent_bwd)(gpt_backend *be, void *dlogits, const void *logits,
			const int32_t *targets, const float *max, const float *sumexp, float dloss,
			int64_t N, int64_t Vl, int64_t ld, int64_t v0, int64_t V, gpt_err *err);

	/* ---- embedding, residual, dropout --------------------------------- */
	/* out (B, T, C) = wte[tok - v0] + wpe[t0 + t], where wte holds the
	 * vocabulary rows [v0, v0 + Vl) (a tensor-parallel slice; a token outside
	 * it contributes 0, so summing over the tp group gives the full lookup)
	 * and wpe (maxT, C) may be NULL (give it on one tp rank only). t0 is the
	 * position of the first token (0 in training, the cache length when
	 * generating). Writes out. */
	int (*embedding_fwd)(gpt_backend *be, void *out, const int32_t *tokens, const void *wte,
			     const void *wpe, int64_t B, int64_t T, int64_t C, int64_t v0,
			     int64_t Vl, int64_t t0, gpt_err *err);
	/* embedding_fwd of N rows, each at a position of its own: out (N, C) =
	 * wte[tokens[r] - v0] + wpe[pos[r]] (one new token of each of N
	 * sequences of different lengths). pos, like tokens, is backend
	 * memory. Row r is embedding_fwd's with B = T = 1, t0 = pos[r], bit for
	 * bit. */
	int (*embedding_rows_fwd)(gpt_backend *be, void *out, const int32_t *tokens,
				  const int32_t *pos, const void *wte, const void *wpe, int64_t N,
				  int64_t C, int64_t v0, int64_t Vl, gpt_err *err);
	/* Adds dout into the rows of dwte (Vl, C) and dwpe (maxT, C) the forward
	 * read; either may be NULL. Deterministic: the sums are taken in token
	 * order whatever the thread count. tokens may also be host memory: a
	 * device backend orders the rows by them there, where reading them back
	 * from the device would make the host wait for it. */
	int (*embedding_bwd)(gpt_backend *be, void *dwte, void *dwpe, const void *dout,
			     const int32_t *tokens, int64_t B, int64_t T, int64_t C, int64_t v0,
			     int64_t Vl, int64_t t0, gpt_err *err);
	/* out = a + b over n elements; out may alias a or b. */
	int (*residual_fwd)(gpt_backend *be, void *out, const void *a, const void *b, int64_t n,
			    gpt_err *err);
	/* da += dout and db += dout; either may be NULL. */
	int (*residual_bwd)(gpt_backend *be, void *da, void *db, const void *dout, int64_t n,
			    gpt_err *err);
	/* out (B, T, F) = inp * mask / (1 - p), the mask from d's coordinates;
	 * out may alias inp. */
	int (*dropout_fwd)(gpt_backend *be, void *out, const void *inp, int64_t B, int64_t T,
			   int64_t F, const gpt_dropout *d, gpt_err *err);
	/* Writes dinp = dout * mask / (1 - p) with the forward's mask; in place allowed. */
	int (*dropout_bwd)(gpt_backend *be, void *dinp, const void *dout, int64_t B, int64_t T,
			   int64_t F, const gpt_dropout *d, gpt_err *err);

	/* ---- optimizer and reductions ------------------------------------- */
	/* One AdamW step over n elements (see gpt_adamw). The fp32 weights are
	 * param itself when be->dtype is fp32 (master and lo NULL); for 16-bit
	 * parameters exactly one of: master, updated, param receiving its
	 * rounded copy (param NULL: the master is the only copy, kept for
	 * fp16 at ZeRO stage 3, whose windows are cast from it); or, for bf16
	 * only, lo, the master's low halves, param its high halves
	 * (gpt_bf16_split), both updated.
	 * Element-wise, so any flat range (a sharding piece) can be updated alone. */
	int (*adamw)(gpt_backend *be, void *param, float *master, uint16_t *lo, const void *grad,
		     float *m, float *v, int64_t n, const gpt_adamw *h, gpt_err *err);
	/* *acc += sum of x^2 over n elements (x in the storage dtype), summed in
	 * double on the CPU; acc is one float in backend memory, so partial
	 * sums over ranges and ranks add up before the square root. */
	int (*sum_squares)(gpt_backend *be, float *acc, const void *x, int64_t n, gpt_err *err);
	/* *flag = 1 if any of the n elements is Inf or NaN, else *flag is left
	 * as it was (zero it first; all-reduce max over ranks). */
	int (*check_finite)(gpt_backend *be, float *flag, const void *x, int64_t n,
			    gpt_err *err);

	/* ---- fake quantization (quantization-aware training) ------------- */
	/* PaddleSlim's symmetric fake quantization. x is rows x cols in the
	 * storage dtype; a scale is per tensor (per_row = 0: one float) or per
	 * row (per_row = 1: rows floats, the output channels of an [out, in]
	 * weight). Scales and moving-average state are fp32 in backend memory.
	 *
	 * quant_absmax writes scale = max |x| over the tensor or over each row
	 * (abs_max, channel_wise_abs_max); with accumulate = 1 it writes
	 * max(scale, that) instead (the largest over several calls).
	 *
	 * fake_quant writes out = q * (s / Q) with Q = 2^(bits-1) - 1 and
	 * q = round(clamp(x, -s, s) * (Q / s)), rounding half away from zero
	 * (Paddle's round_type 1, std::round), so q lies in [-Q, Q]; a scale
	 * <= 0 gives 0. bits in [2, 16]; out may alias x. Its gradient is
	 * PaddleSlim's straight-through estimator, the identity: a backward
	 * passes dout on unchanged, so there is no op for it.
	 *
	 * quant_moving_avg is moving_average_abs_max's update for n independent
	 * scales: st = rate state + 1, ac = rate accum + cur, scale = ac / st;
	 * commit = 1 also stores st and ac into state and accum, commit = 0
	 * leaves them (the scale an update with cur would give). A cur < 0 (no
	 * data seen) leaves that scale, state and accum as they are. */
	int (*quant_absmax)(gpt_backend *be, float *scale, const void *x, int64_t rows,
			    int64_t cols, int per_row, int accumulate, gpt_err *err);
	int (*fake_quant)(gpt_backend *be, void *out, const void *x, const float *scale,
			  int64_t rows, int64_t cols, int per_row, int bits, gpt_err *err);
	int (*quant_moving_avg)(gpt_backend *be, float *state, float *accum, float *scale,
				const float *cur, int64_t n, float rate, int commit, gpt_err *err);
	/* PACT (PaddleSlim's weight/activation_preprocess_type: PACT), a
	 * learned clip before the quantizer: out = x - relu(x - a) + relu(-a - x)
	 * with a = *alpha (fp32, backend memory). pact_fwd writes out =
	 * clamp(x, -a, a); out may alias x. pact_bwd, given dy (the gradient
	 * of out) and the same x, adds sum(dy where x > a) - sum(dy where x <
	 * -a) into *dalpha and writes dx = dy where -a <= x <= a, else 0
	 * (relu'(0) = 0, as Paddle's); with accumulate = 1 it adds that into dx
	 * instead. dx may alias dy when accumulate = 0. The sum into *dalpha is
	 * the same for any thread count (fixed blocks, then in order). */
	int (*pact_fwd)(gpt_backend *be, void *out, const void *x, const float *alpha, int64_t n,
			gpt_err *err);
	int (*pact_bwd)(gpt_backend *be, void *dx, float *dalpha, const void *dy, const void *x,
			const float *alpha, int64_t n, int accumulate, gpt_err *err);

	/* ---- fusions ------------------------------------------------------ */
	/* The residual add and the LayerNorm of its result in one pass: res (N,
	 * C) = a + b rounded to the storage dtype, as residual_fwd, then
	 * layernorm_fwd of res into out, mean and rstd: the bits of those two
	 * calls, which are the CPU's definition of it. res may alias a or b.
	 * With d (p > 0), b is dropped first, as dropout_fwd over (N / T, T, C)
	 * would drop it (T divides N), and res = a + that: the bits of the
	 * three calls; b's contents are then unspecified (the CPU drops it in
	 * place, CUDA only reads it). d may be NULL.
	 * (Without dropout the backward needs no fusion: layernorm_bwd adds into
	 * dinp, where the residual's gradient already is.) */
	int (*residual_layernorm_fwd)(gpt_backend *be, void *res, void *out, float *mean, float *rstd,
				      const void *a, void *b, const void *w, const void *bias,
				      int64_t N, int64_t C, float eps, const gpt_dropout *d, int64_t T,
				      gpt_err *err);
	/* Its backward with dropout: layernorm_bwd's arguments, dinp (N, C)
	 * holding the gradient of res from beyond and gaining the LayerNorm's,
	 * which makes it a's; then the branch's, dbranch (N, C) = dropout_bwd
	 * of that dinp over (N / T, T, C) with d (p > 0, T divides N): the
	 * bits of the two calls, which are the CPU's definition of it. dbranch
	 * must not overlap dinp, dout or inp. */
	int (*residual_layernorm_bwd)(gpt_backend *be, void *dinp, void *dbranch, void *dw, void *db,
				      const void *dout, const void *inp, const void *w, const float *mean,
				      const float *rstd, int64_t N, int64_t C, const gpt_dropout *d, int64_t T,
				      gpt_err *err);
	/* The MLP's fc linear and its GELU in one GEMM (Model.fused_linear):
	 * pre (M, N) = inp w^T + bias, kept for the backward, and out = gelu
	 * of it. The CPU's definition is linear_fwd then gelu_fwd; a backend
	 * that computes the GELU from the unrounded pre (CUDA's GELU_AUX_BIAS
	 * epilogue) may differ in the last bit of a 16-bit out. */
	int (*linear_gelu_fwd)(gpt_backend *be, void *out, void *pre, const void *inp, const void *w,
			       const void *bias, int64_t M, int64_t K, int64_t N, gpt_err *err);
	/* linear_bwd whose dinp goes on back through a GELU: dinp (M, K) =
	 * gelu'(pre) (dout w), pre (M, K) the GELU's input; dw and dbias as
	 * linear_bwd. The CPU's definition is linear_bwd then gelu_bwd in
	 * place; CUDA's DGELU epilogue rounds dinp once instead of twice. */
	int (*linear_dgelu_bwd)(gpt_backend *be, void *dinp, void *dw, void *dbias, const void *dout,
				const void *inp, const void *w, const void *pre, int64_t M, int64_t K,
				int64_t N, gpt_err *err);
	/* xent_fwd, xent_loss and xent_bwd in one call, for one piece holding
	 * the whole vocabulary (tp = 1: v0 = 0, Vl columns of which V are
	 * real): max, sumexp, tlogit, loss and dlogits (in place allowed) as
	 * the three write them, the same values. The CPU's definition is the
	 * three in turn (gpt_xent_fused_parts); CUDA's reads each row once
	 * from memory for both passes, where the three read it twice. */
	int (*xent_fused)(gpt_backend *be, float *loss, float *max, float *sumexp, float *tlogit,
			  void *dlogits, const void *logits, const int32_t *targets, float dloss,
			  int64_t N, int64_t Vl, int64_t ld, int64_t V, gpt_err *err);
	/* gelu_bwd whose result is the output gradient of a linear with a
	 * bias (the MLP's fc): dinp (M, N) = gelu'(inp) dout as gelu_bwd
	 * writes it (dinp may alias dout), then dbias (N) += its column sums
	 * as linear_bwd's dbias takes them (dbias may be NULL). The CPU's
	 * definition is those two calls (gpt_gelu_bwd_bias_parts); CUDA's
	 * writes and sums dinp's rows in one pass, the same bits. */
	int (*gelu_bwd_bias)(gpt_backend *be, void *dinp, void *dbias, const void *inp, const void *dout,
			     int64_t M, int64_t N, gpt_err *err);
	/* adamw over runs of one flat range (the model's parameter table:
	 * weights with decay, biases and LayerNorms without): the pointers as
	 * adamw's, at element 0 of the range; runs (host memory) increasing and
	 * apart, elements between them left as they are. Each run is updated as
	 * one adamw call would, with h's weight decay where its decay is set and
	 * none elsewhere: the same bits. The CPU's definition is those calls
	 * (gpt_adamw_runs_each); CUDA's takes many runs a launch. */
	int (*adamw_runs)(gpt_backend *be, void *param, float *master, uint16_t *lo, const void *grad,
			  float *m, float *v, const gpt_adamw_run *runs, int64_t nruns, const gpt_adamw *h,
			  gpt_err *err);
} gpt_backend_ops;

/* attention_kv_rows and embedding_rows_fwd a row at a time, by be's
 * attention_kv and embedding_fwd (the CPU backends' ops) */
int gpt_attention_kv_rows_each(gpt_backend *be, void *out, void *kcache, void *vcache,
			       const void *qkv, int64_t n, const int32_t *slot, const int32_t *pos,
			       int64_t maxT, int64_t NH, int64_t HS, gpt_err *err);
int gpt_embedding_rows_each(gpt_backend *be, void *out, const int32_t *tokens, const int32_t *pos,
			    const void *wte, const void *wpe, int64_t N, int64_t C, int64_t v0,
			    int64_t Vl, gpt_err *err);
/* adamw_runs a run at a time, by be's adamw (the CPU backends' op) */
int gpt_adamw_runs_each(gpt_backend *be, void *param, float *master, uint16_t *lo, const void *grad, float *m,
			float *v, const gpt_adamw_run *runs, int64_t nruns, const gpt_adamw *h, gpt_err *err);
/* gelu_bwd_bias by be's gelu_bwd and linear_bwd (the CPU backends' op) */
int gpt_gelu_bwd_bias_parts(gpt_backend *be, void *dinp, void *dbias, const void *inp, const void *dout,
			    int64_t M, int64_t N, gpt_err *err);
/* xent_fused by be's xent_fwd, xent_loss and xent_bwd (the CPU backends' op) */
int gpt_xent_fused_parts(gpt_backend *be, float *loss, float *max, float *sumexp, float *tlogit,
			 void *dlogits, const void *logits, const int32_t *targets, float dloss,
			 int64_t N, int64_t Vl, int64_t ld, int64_t V, gpt_err *err);

/* A backend context: passed to every op; nothing in the library is global.
 * One thread issues ops on a context at a time (the scratch is shared by its
 * ops); threads that run ops concurrently each use their own context. */
struct gpt_backend {
	const char *name;            /* "cpu", "cuda" */
	const gpt_backend_ops *ops;  /* the backend's static table */
	gpt_dtype dtype;             /* storage dtype of every `void *` tensor */
	int threads;                 /* CPU threads the ops use */
	void *scratch;               /* grown on demand by ops that need temporaries */
	size_t scratch_size;
	void *impl;                  /* backend-private state (CUDA: stream, handles) */
};

/* Fails (GPT_EINTERNAL) naming the first of the ops listed in `names` (a
 * NULL-terminated array of slot names, e.g. "attention_fwd") that be does
 * not provide, or that is no slot at all. */
int gpt_backend_require(const gpt_backend *be, const char *const *names, gpt_err *err);

/* The flash-style attention's saved floats (CUDA's attention_saved_size),
 * here so that gpt-train --dry-run plans a GPU run on any machine: the
 * B*NH*T fp32 log-sum-exps, rounded up to a multiple of 4, and where the
 * tensor-core kernels run (gpt_attention_tensor_cores) the output's low
 * half, O - round(O), B*T*NH*HS elements of the storage dtype, from which
 * the backward's row sums D = dO . O come to fp32 precision, rounded up to
 * a multiple of 4 floats; with dropout there, then the forward's dropout
 * mask for the backward, a bit a probability: B*NH heads of
 * gpt_attention_mask_words(T) 64-bit words. */
int64_t gpt_attention_flash_saved(gpt_dtype storage, int64_t B, int64_t T, int64_t NH, int64_t HS,
				  int dropout);
/* The 64-bit words of one head's dropout mask in the flash-style saved
 * state: a word an 8 x 8 block (queries 8qb.., keys 8kb..) of the causal
 * triangle, kb <= qb, nb = ceil(T / 8) blocks a side: nb (nb + 1) / 2. */
int64_t gpt_attention_mask_words(int64_t T);
/* 1 when CUDA attention with storage dtype dt and head size HS runs on the
 * tensor cores (bf16 or fp16, HS a multiple of 16 up to 128). */
int gpt_attention_tensor_cores(gpt_dtype dt, int64_t HS);

/* The CUDA backend's memory besides the model's buffers, here so that
 * gpt-train --dry-run plans a GPU run on any machine: cuBLASLt's workspace,
 * allocated once a backend, and be->scratch, which grows to the largest of
 * the ops' temporaries: a column sum's fp32 partial sums (bias gradients,
 * at most GPT_CUDA_COLSUM_PARTS rows of the widest bias, N), LayerNorm's
 * weight and bias gradient partials (twice that, of the hidden size C) and
 * the attention backward's row sums D (B*NH*T floats, NH the heads of a
 * tp rank). An upper bound. */
#define GPT_CUDA_BLAS_WORKSPACE ((size_t)32 << 20)
#define GPT_CUDA_COLSUM_PARTS 256
int64_t gpt_cuda_work_bytes(int64_t C, int64_t N, int64_t B, int64_t T, int64_t NH);

/* Makes be->scratch (backend memory, from be->ops->alloc; for the ops'
 * temporaries) at least `bytes` long. The old contents are lost. */
int gpt_backend_scratch(gpt_backend *be, size_t bytes, gpt_err *err);

#ifdef __cplusplus
}
#endif

#endif
