/* bf16/fp16 storage for the CPU backend. Each op converts its 16-bit
 * operands to fp32 temporaries, runs the fp32 kernel, and rounds what it
 * stores back to nearest even. Outputs that accumulate (+=) are read,
 * updated in fp32 and rounded once, as a GPU kernel with fp32 arithmetic
 * would. Only the rows and columns an op owns are stored, never the gaps of
 * a strided matrix. This favours obviously-right over fast: it exists so the
 * mixed-precision path (master weights, loss scaling, overflow skips) runs
 * and is tested without a GPU. The exception is the matrix products with
 * bf16 storage on a CPU with AVX512_BF16: they read the bf16 operands
 * directly (gemm_bf16.c), at twice the fp32 rate; the products of bf16
 * values are exact in fp32 either way, only the order of the fp32 sums
 * differs from sgemm's. */
#include "cpu/kernels.h"

#include <stdlib.h>

typedef struct lp {
	gpt_backend *be;
	gpt_err *err;
	int rc;
	int n;
} lp;

/* The temporaries live on in the context (be->impl, which the CPU backend
 * has no other use for), one buffer per position in an op's order of
 * requests, grown when too small: after the first training step no op
 * allocates, and large temporaries do not fault their pages in again on
 * every call. */
enum { LP_SLOTS = 12 };
typedef struct lp_pool {
	float *buf[LP_SLOTS];
	size_t cap[LP_SLOTS];
} lp_pool;

static float *lp_alloc(lp *t, int64_t n)
{
	if (t->rc)
		return NULL;
	if (n < 0 || t->n == LP_SLOTS) {
		t->rc = gpt_err_set(t->err, GPT_EINTERNAL, "cpu %s: bad temporary of %lld elements",
				    gpt_dtype_name(t->be->dtype), (long long)n);
		return NULL;
	}
	lp_pool *pool = t->be->impl;
	if (!pool) {
		pool = gpt_calloc(1, sizeof *pool, "16-bit temporaries", t->err);
		if (!pool) {
			t->rc = t->err ? t->err->code : GPT_EINTERNAL;
			return NULL;
		}
		t->be->impl = pool;
	}
	size_t bytes = (size_t)(n ? n : 1) * sizeof(float);
	int i = t->n;
	if (pool->cap[i] < bytes) {
		free(pool->buf[i]);
		pool->cap[i] = 0;
		pool->buf[i] = gpt_aligned_alloc(bytes, "an fp32 copy of a 16-bit operand", t->err);
		if (!pool->buf[i]) {
			t->rc = t->err ? t->err->code : GPT_EINTERNAL;
			return NULL;
		}
		pool->cap[i] = bytes;
	}
	t->n++;
	return pool->buf[i];
}

void gpt_cpu_lowp_free(gpt_backend *be)
{
	lp_pool *pool = be->impl;
	if (!pool)
		return;
	for (int i = 0; i < LP_SLOTS; i++)
		free(pool->buf[i]);
	free(pool);
	be->impl = NULL;
}

/* An fp32 copy of n 16-bit elements at src; NULL for a NULL src. */
static float *lp_in(lp *t, const void *src, int64_t n)
{
	if (!src)
		return NULL;
	float *p = lp_alloc(t, n);
	if (p)
		gpt_convert(p, GPT_DTYPE_F32, src, t->be->dtype, (size_t)n, NULL);
	return p;
}

/* An uninitialised fp32 buffer for a write-only output; NULL for NULL dst. */
static float *lp_out(lp *t, const void *dst, int64_t n)
{
	return dst ? lp_alloc(t, n) : NULL;
}

/* Rounds rows x cols of src (row stride ld) into dst (same layout). */
static void lp_store_rows(lp *t, void *dst, const float *src, int64_t rows, int64_t cols,
			  int64_t ld)
{
	if (!dst || t->rc)
		return;
	size_t es = gpt_dtype_size(t->be->dtype);
	if (ld == cols) {
		gpt_convert(dst, t->be->dtype, src, GPT_DTYPE_F32, (size_t)(rows * cols), NULL);
		return;
	}
	for (int64_t i = 0; i < rows; i++)
		gpt_convert((char *)dst + (size_t)(i * ld) * es, t->be->dtype, src + i * ld,
			    GPT_DTYPE_F32, (size_t)cols, NULL);
}

static void lp_store(lp *t, void *dst, const float *src, int64_t n)
{
	lp_store_rows(t, dst, src, 1, n, n);
}

/* Returns the first failure (alloc or op); the temporaries stay pooled. */
static int lp_done(lp *t, int rc)
{
	return t->rc ? t->rc : rc;
}

#define LP_BEGIN(be, err) lp t_ = {(be), (err), 0, 0}, *t = &t_

/* Elements a stored (rows x cols, row stride ld) matrix spans. */
static int64_t span(int64_t rows, int64_t cols, int64_t ld)
{
	return rows > 0 && cols > 0 ? (rows - 1) * ld + cols : 0;
}

/* bf16 on a CPU with AVX512_BF16: the products go to gemm_bf16.c straight
 * from the stored operands, with fp32 results in be->scratch (grown once,
 * so a training step allocates nothing), rounded once on store. */
static int sb_fast(const gpt_backend *be)
{
	return be->dtype == GPT_DTYPE_BF16 && gpt_cpu_sbgemm_ok();
}

/* be->scratch as the packing work and fp32 regions of the given sizes. */
static int sb_scratch(gpt_backend *be, float **r, const int64_t *n, int count, gpt_err *err)
{
	size_t off = (gpt_cpu_sbgemm_work_bytes() + 63) & ~(size_t)63, at[4];
	for (int i = 0; i < count; i++) {
		at[i] = off;
		off += ((size_t)n[i] * 4 + 63) & ~(size_t)63;
	}
	int rc = gpt_backend_scratch(be, off, err);
	for (int i = 0; i < count && !rc; i++)
		r[i] = (float *)((char *)be->scratch + at[i]);
	return rc;
}

static int lp_gemm_batched(gpt_backend *be, int ta, int tb, int64_t m, int64_t n, int64_t k,
			   float alpha, const void *a, int64_t lda, int64_t sa, const void *b,
			   int64_t ldb, int64_t sb, float beta, void *c, int64_t ldc, int64_t sc,
			   int64_t batch, gpt_err *err)
{
	int rc = gpt_cpu_gemm_check("gemm", ta, tb, m, n, k, lda, ldb, ldc, err);
	if (rc)
		return rc;
	if (batch < 0 || sa < 0 || sb < 0 || sc < 0)
		return gpt_err_set(err, GPT_EINTERNAL, "gemm_batched: negative batch or stride");
	if (batch == 0 || m == 0 || n == 0)
		return 0;
	LP_BEGIN(be, err);
	int64_t na = (batch - 1) * sa + span(ta ? k : m, ta ? m : k, lda);
	int64_t nb = (batch - 1) * sb + span(tb ? n : k, tb ? k : n, ldb);
	int64_t nc = (batch - 1) * sc + span(m, n, ldc);
	if (sb_fast(be)) {
		float *c32 = beta == 0.0f ? lp_out(t, c, nc) : lp_in(t, c, nc);
		if (!t->rc)
			rc = gpt_backend_scratch(be, gpt_cpu_sbgemm_work_bytes(), err);
		for (int64_t i = 0; i < batch && !t->rc && !rc; i++)
			gpt_cpu_sbgemm(be->threads, be->scratch, ta, tb, m, n, k, alpha,
				       (const uint16_t *)a + i * sa, lda, (const uint16_t *)b + i * sb, ldb, beta,
				       c32 + i * sc, ldc);
		for (int64_t i = 0; i < batch && !rc; i++)
			lp_store_rows(t, (char *)c + (size_t)(i * sc) * 2, c32 + i * sc, m, n, ldc);
		return lp_done(t, rc);
	}
	float *a32 = lp_in(t, a, na), *b32 = lp_in(t, b, nb);
	float *c32 = beta == 0.0f ? lp_out(t, c, nc) : lp_in(t, c, nc);
	if (!t->rc)
		rc = gpt_cpu_gemm_batched(be, ta, tb, m, n, k, alpha, a32, lda, sa, b32, ldb, sb, beta,
					  c32, ldc, sc, batch, err);
	for (int64_t i = 0; i < batch && !rc; i++)
		lp_store_rows(t, (char *)c + (size_t)(i * sc) * gpt_dtype_size(be->dtype),
			      c32 + i * sc, m, n, ldc);
	return lp_done(t, rc);
}

static int lp_gemm(gpt_backend *be, int ta, int tb, int64_t m, int64_t n, int64_t k,
		   float alpha, const void *a, int64_t lda, const void *b, int64_t ldb, float beta,
		   void *c, int64_t ldc, gpt_err *err)
{
	return lp_gemm_batched(be, ta, tb, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0,
			       1, err);
}

static int sb_linear_fwd(gpt_backend *be, void *out, const void *inp, const void *w,
			 const void *bias, int64_t M, int64_t K, int64_t N, gpt_err *err)
{
	float *o;
	int64_t sz = M * N;
	int rc = sb_scratch(be, &o, &sz, 1, err);
	if (rc)
		return rc;
	if (bias)
		for (int64_t i = 0; i < M; i++)
			gpt_convert(o + i * N, GPT_DTYPE_F32, bias, be->dtype, (size_t)N, NULL);
	gpt_cpu_sbgemm(be->threads, be->scratch, 0, 1, M, N, K, 1.0f, inp, K, w, K, bias ? 1.0f : 0.0f,
		       o, N);
	return gpt_convert(out, be->dtype, o, GPT_DTYPE_F32, (size_t)(M * N), err);
}

static int sb_linear_bwd(gpt_backend *be, void *dinp, void *dw, void *dbias, const void *dout,
			 const void *inp, const void *w, int64_t M, int64_t K, int64_t N, gpt_err *err)
{
	float *r[3];
	int64_t sz[3] = {dinp ? M * K : 0, dw ? N * K : 0, dbias ? M * N : 0};
	int rc = sb_scratch(be, r, sz, 3, err);
	if (rc)
		return rc;
	if (dinp) {
		gpt_cpu_sbgemm(be->threads, be->scratch, 0, 0, M, K, N, 1.0f, dout, N, w, K, 0.0f, r[0], K);
		gpt_convert(dinp, be->dtype, r[0], GPT_DTYPE_F32, (size_t)(M * K), NULL);
	}
	if (dw) {
		gpt_convert(r[1], GPT_DTYPE_F32, dw, be->dtype, (size_t)(N * K), NULL);
		gpt_cpu_sbgemm(be->threads, be->scratch, 1, 0, N, K, M, 1.0f, dout, N, inp, K, 1.0f, r[1], K);
		gpt_convert(dw, be->dtype, r[1], GPT_DTYPE_F32, (size_t)(N * K), NULL);
	}
	if (dbias) {
		LP_BEGIN(be, err);
		float *db32 = lp_in(t, dbias, N);
		gpt_convert(r[2], GPT_DTYPE_F32, dout, be->dtype, (size_t)(M * N), NULL);
		if (!t->rc)
			rc = gpt_cpu_linear_bwd(be, NULL, NULL, db32, r[2], NULL, NULL, M, K, N, err);
		if (!rc)
			lp_store(t, dbias, db32, N);
		rc = lp_done(t, rc);
	}
	return rc;
}

static int lp_linear_fwd(gpt_backend *be, void *out, const void *inp, const void *w,
			 const void *bias, int64_t M, int64_t K, int64_t N, gpt_err *err)
{
	int rc = gpt_cpu_gemm_check("linear_fwd", 0, 1, M, N, K, K, K, N, err);
	if (rc)
		return rc;
	if (sb_fast(be))
		return sb_linear_fwd(be, out, inp, w, bias, M, K, N, err);
	LP_BEGIN(be, err);
	float *x = lp_in(t, inp, M * K), *w32 = lp_in(t, w, N * K), *b32 = lp_in(t, bias, N);
	float *o = lp_out(t, out, M * N);
	if (!t->rc)
		rc = gpt_cpu_linear_fwd(be, o, x, w32, b32, M, K, N, err);
	if (!rc)
		lp_store(t, out, o, M * N);
	return lp_done(t, rc);
}

static int lp_linear_bwd(gpt_backend *be, void *dinp, void *dw, void *dbias, const void *dout,
			 const void *inp, const void *w, int64_t M, int64_t K, int64_t N,
			 gpt_err *err)
{
	int rc = gpt_cpu_gemm_check("linear_bwd", 0, 1, M, N, K, K, K, N, err);
	if (rc)
		return rc;
	if (sb_fast(be))
		return sb_linear_bwd(be, dinp, dw, dbias, dout, inp, w, M, K, N, err);
	LP_BEGIN(be, err);
	float *g = lp_in(t, dout, M * N);
	float *x = dw ? lp_in(t, inp, M * K) : NULL, *w32 = dinp ? lp_in(t, w, N * K) : NULL;
	float *dx = lp_out(t, dinp, M * K), *dw32 = lp_in(t, dw, N * K);
	float *db32 = lp_in(t, dbias, N);
	if (!t->rc)
		rc = gpt_cpu_linear_bwd(be, dx, dw32, db32, g, x, w32, M, K, N, err);
	if (!rc) {
		lp_store(t, dinp, dx, M * K);
		lp_store(t, dw, dw32, N * K);
		lp_store(t, dbias, db32, N);
	}
	return lp_done(t, rc);
}

static int lp_bias_add(gpt_backend *be, void *out, const void *bias, int64_t M, int64_t N,
		       gpt_err *err)
{
	int rc = gpt_cpu_check_sizes("bias_add", err, 2, M, N);
	if (rc)
		return rc;
	LP_BEGIN(be, err);
	float *o = lp_in(t, out, M * N), *b32 = lp_in(t, bias, N);
	if (!t->rc)
		rc = gpt_cpu_bias_add(be, o, b32, M, N, err);
	if (!rc)
		lp_store(t, out, o, M * N);
	return lp_done(t, rc);
}

static int lp_layernorm_fwd(gpt_backend *be, void *out, float *mean, float *rstd,
			    const void *inp, const void *w, const void *b, int64_t N, int64_t C,
			    float eps, gpt_err *err)
{
	int rc = gpt_cpu_check_sizes("layernorm_fwd", err, 2, N, C);
	if (rc)
		return rc;
	LP_BEGIN(be, err);
	float *x = lp_in(t, inp, N * C), *w32 = lp_in(t, w, C), *b32 = lp_in(t, b, C);
	float *o = lp_out(t, out, N * C);
	if (!t->rc)
		rc = gpt_cpu_layernorm_fwd(be, o, mean, rstd, x, w32, b32, N, C, eps, err);
	if (!rc)
		lp_store(t, out, o, N * C);
	return lp_done(t, rc);
}

static int lp_layernorm_bwd(gpt_backend *be, void *dinp, void *dw, void *db, const void *dout,
			    const void *inp, const void *w, const float *mean, const float *rstd,
			    int64_t N, int64_t C, gpt_err *err)
{
	int rc = gpt_cpu_check_sizes("layernorm_bwd", err, 2, N, C);
	if (rc)
		return rc;
	LP_BEGIN(be, err);
	float *g = lp_in(t, dout, N * C), *x = lp_in(t, inp, N * C), *w32 = lp_in(t, w, C);
	float *dx = lp_in(t, dinp, N * C), *dw32 = lp_in(t, dw, C), *db32 = lp_in(t, db, C);
	if (!t->rc)
		rc = gpt_cpu_layernorm_bwd(be, dx, dw32, db32, g, x, w32, mean, rstd, N, C, err);
	if (!rc) {
		lp_store(t, dinp, dx, N * C);
		lp_store(t, dw, dw32, C);
		lp_store(t, db, db32, C);
	}
	return lp_done(t, rc);
}

static int lp_gelu_fwd(gpt_backend *be, void *out, const void *inp, int64_t n, gpt_err *err)
{
	int rc = gpt_cpu_check_sizes("gelu_fwd", err, 1, n);
	if (rc)
		return rc;
	LP_BEGIN(be, err);
	float *x = lp_in(t, inp, n);
	if (!t->rc)
		rc = gpt_cpu_gelu_fwd(be, x, x, n, err);
	if (!rc)
		lp_store(t, out, x, n);
	return lp_done(t, rc);
}

static int lp_gelu_bwd(gpt_backend *be, void *dinp, const void *inp, const void *dout,
		       int64_t n, gpt_err *err)
{
	int rc = gpt_cpu_check_sizes("gelu_bwd", err, 1, n);
	if (rc)
		return rc;
	LP_BEGIN(be, err);
	float *x = lp_in(t, inp, n), *g = lp_in(t, dout, n);
	if (!t->rc)
		rc = gpt_cpu_gelu_bwd(be, g, x, g, n, err);
	if (!rc)
		lp_store(t, dinp, g, n);
	return lp_done(t, rc);
}

static int lp_attention_fwd(gpt_backend *be, void *out, float *saved, const void *qkv,
			    int64_t B, int64_t T, int64_t NH, int64_t HS, const gpt_dropout *d,
			    gpt_err *err)
{
	int rc = gpt_cpu_check_sizes("attention_fwd", err, 4, B, T, NH, HS);
	if (rc)
		return rc;
	LP_BEGIN(be, err);
	float *x = lp_in(t, qkv, B * T * 3 * NH * HS), *o = lp_out(t, out, B * T * NH * HS);
	if (!t->rc)
		rc = gpt_cpu_attention_fwd(be, o, saved, x, B, T, NH, HS, d, err);
	if (!rc)
		lp_store(t, out, o, B * T * NH * HS);
	return lp_done(t, rc);
}

static int lp_attention_bwd(gpt_backend *be, void *dqkv, const void *dout, const void *out,
			    const void *qkv, const float *saved, int64_t B, int64_t T, int64_t NH,
			    int64_t HS, const gpt_dropout *d, gpt_err *err)
{
	int rc = gpt_cpu_check_sizes("attention_bwd", err, 4, B, T, NH, HS);
	if (rc)
		return rc;
	LP_BEGIN(be, err);
	int64_t n3 = B * T * 3 * NH * HS;
	float *x = lp_in(t, qkv, n3), *g = lp_in(t, dout, B * T * NH * HS);
	float *dx = lp_out(t, dqkv, n3);
	if (!t->rc)
		rc = gpt_cpu_attention_bwd(be, dx, g, NULL, x, saved, B, T, NH, HS, d, err);
	if (!rc)
		lp_store(t, dqkv, dx, n3);
	return lp_done(t, rc);
}

static int lp_attention_kv(gpt_backend *be, void *out, void *kcache, void *vcache,
			   const void *qkv, int64_t B, int64_t Tn, int64_t t0, int64_t maxT,
			   int64_t NH, int64_t HS, gpt_err *err)
{
	int rc = gpt_cpu_check_sizes("attention_kv", err, 6, B, Tn, t0, maxT, NH, HS);
	if (rc)
		return rc;
	LP_BEGIN(be, err);
	int64_t nc = B * NH * maxT * HS;
	float *x = lp_in(t, qkv, B * Tn * 3 * NH * HS), *o = lp_out(t, out, B * Tn * NH * HS);
	float *kc = lp_in(t, kcache, nc), *vc = lp_in(t, vcache, nc);
	if (!t->rc)
		rc = gpt_cpu_attention_kv(be, o, kc, vc, x, B, Tn, t0, maxT, NH, HS, err);
	if (!rc) {
		lp_store(t, out, o, B * Tn * NH * HS);
		lp_store(t, kcache, kc, nc);
		lp_store(t, vcache, vc, nc);
	}
	return lp_done(t, rc);
}

static int lp_xent_fwd(gpt_backend *be, float *max, float *sumexp, float *tlogit,
		       const void *logits, const int32_t *targets, int64_t N, int64_t Vl,
		       int64_t ld, int64_t v0, int64_t V, gpt_err *err)
{
	int rc = gpt_cpu_check_sizes("xent_fwd", err, 3, N, Vl, ld);
	if (rc)
		return rc;
	LP_BEGIN(be, err);
	float *l = lp_in(t, logits, span(N, Vl, ld));
	if (!t->rc)
		rc = gpt_cpu_xent_fwd(be, max, sumexp, tlogit, l, targets, N, Vl, ld, v0, V, err);
	return lp_done(t, rc);
}

static int lp_xent_bwd(gpt_backend *be, void *dlogits, const void *logits,
		       const int32_t *targets, const float *max, const float *sumexp, float dloss,
		       int64_t N, int64_t Vl, int64_t ld, int64_t v0, int64_t V, gpt_err *err)
{
	int rc = gpt_cpu_check_sizes("xent_bwd", err, 3, N, Vl, ld);
	if (rc)
		return rc;
	LP_BEGIN(be, err);
	float *l = lp_in(t, logits, span(N, Vl, ld));
	if (!t->rc)
		rc = gpt_cpu_xent_bwd(be, l, l, targets, max, sumexp, dloss, N, Vl, ld, v0, V, err);
	if (!rc)
		lp_store_rows(t, dlogits, l, N, Vl, ld);
	return lp_done(t, rc);
}

/* The embedding ops touch only positions [t0, t0 + T) of wpe (whose row
 * count the op is not told), so only those rows are converted. */
static int lp_embedding_fwd(gpt_backend *be, void *out, const int32_t *tokens, const void *wte,
			    const void *wpe, int64_t B, int64_t T, int64_t C, int64_t v0,
			    int64_t Vl, int64_t t0, gpt_err *err)
{
	int rc = gpt_cpu_check_sizes("embedding_fwd", err, 6, B, T, C, v0, Vl, t0);
	if (rc)
		return rc;
	LP_BEGIN(be, err);
	size_t es = gpt_dtype_size(be->dtype);
	float *te = lp_in(t, wte, Vl * C);
	float *pe = lp_in(t, wpe ? (const char *)wpe + (size_t)(t0 * C) * es : NULL, T * C);
	float *o = lp_out(t, out, B * T * C);
	if (!t->rc)
		rc = gpt_cpu_embedding_fwd(be, o, tokens, te, pe, B, T, C, v0, Vl, 0, err);
	if (!rc)
		lp_store(t, out, o, B * T * C);
	return lp_done(t, rc);
}

static int lp_embedding_bwd(gpt_backend *be, void *dwte, void *dwpe, const void *dout,
			    const int32_t *tokens, int64_t B, int64_t T, int64_t C, int64_t v0,
			    int64_t Vl, int64_t t0, gpt_err *err)
{
	int rc = gpt_cpu_check_sizes("embedding_bwd", err, 6, B, T, C, v0, Vl, t0);
	if (rc)
		return rc;
	LP_BEGIN(be, err);
	size_t es = gpt_dtype_size(be->dtype);
	void *pe16 = dwpe ? (char *)dwpe + (size_t)(t0 * C) * es : NULL;
	float *g = lp_in(t, dout, B * T * C), *te = lp_in(t, dwte, Vl * C);
	float *pe = lp_in(t, pe16, T * C);
	if (!t->rc)
		rc = gpt_cpu_embedding_bwd(be, te, pe, g, tokens, B, T, C, v0, Vl, 0, err);
	if (!rc) {
		lp_store(t, dwte, te, Vl * C);
		lp_store(t, pe16, pe, T * C);
	}
	return lp_done(t, rc);
}

static int lp_residual_fwd(gpt_backend *be, void *out, const void *a, const void *b, int64_t n,
			   gpt_err *err)
{
	int rc = gpt_cpu_check_sizes("residual_fwd", err, 1, n);
	if (rc)
		return rc;
	LP_BEGIN(be, err);
	float *x = lp_in(t, a, n), *y = lp_in(t, b, n);
	if (!t->rc)
		rc = gpt_cpu_residual_fwd(be, x, x, y, n, err);
	if (!rc)
		lp_store(t, out, x, n);
	return lp_done(t, rc);
}

static int lp_residual_bwd(gpt_backend *be, void *da, void *db, const void *dout, int64_t n,
			   gpt_err *err)
{
	int rc = gpt_cpu_check_sizes("residual_bwd", err, 1, n);
	if (rc)
		return rc;
	LP_BEGIN(be, err);
	float *x = lp_in(t, da, n), *y = lp_in(t, db, n), *g = lp_in(t, dout, n);
	if (!t->rc)
		rc = gpt_cpu_residual_bwd(be, x, y, g, n, err);
	if (!rc) {
		lp_store(t, da, x, n);
		lp_store(t, db, y, n);
	}
	return lp_done(t, rc);
}

static int lp_dropout(gpt_backend *be, int bwd, void *out, const void *inp, int64_t B,
		      int64_t T, int64_t F, const gpt_dropout *d, gpt_err *err)
{
	int rc = gpt_cpu_check_sizes(bwd ? "dropout_bwd" : "dropout_fwd", err, 3, B, T, F);
	if (rc)
		return rc;
	LP_BEGIN(be, err);
	float *x = lp_in(t, inp, B * T * F);
	if (!t->rc)
		rc = (bwd ? gpt_cpu_dropout_bwd : gpt_cpu_dropout_fwd)(be, x, x, B, T, F, d, err);
	if (!rc)
		lp_store(t, out, x, B * T * F);
	return lp_done(t, rc);
}

static int lp_dropout_fwd(gpt_backend *be, void *out, const void *inp, int64_t B, int64_t T,
			  int64_t F, const gpt_dropout *d, gpt_err *err)
{
	return lp_dropout(be, 0, out, inp, B, T, F, d, err);
}

static int lp_dropout_bwd(gpt_backend *be, void *dinp, const void *dout, int64_t B, int64_t T,
			  int64_t F, const gpt_dropout *d, gpt_err *err)
{
	return lp_dropout(be, 1, dinp, dout, B, T, F, d, err);
}

/* The optimizer's ops go through the gradients without an fp32 copy of
 * them all (4 bytes a parameter that no memory plan counts): AdamW a block
 * at a time, a multiple of 256 elements, so that each block splits over the
 * threads at the same 256-element boundaries as the whole and every element
 * takes the same path; the reductions widen in place (reduce.c). */
enum { LP_OPT_BLOCK = 1 << 20 };

static int lp_adamw(gpt_backend *be, void *param, float *master, uint16_t *lo, const void *grad,
		    float *m, float *v, int64_t n, const gpt_adamw *h, gpt_err *err)
{
	int rc = gpt_cpu_check_sizes("adamw", err, 1, n);
	if (rc)
		return rc;
	if (!master == !lo || (lo && be->dtype != GPT_DTYPE_BF16) || (lo && !param))
		return gpt_err_set(err, GPT_EINTERNAL,
				   "adamw: %s parameters need fp32 master weights, whole or (bf16 only) split",
				   gpt_dtype_name(be->dtype));
	LP_BEGIN(be, err);
	size_t es = gpt_dtype_size(be->dtype);
	float *g = lp_alloc(t, n < LP_OPT_BLOCK ? n : LP_OPT_BLOCK);
	for (int64_t i = 0; i < n && !t->rc && !rc; i += LP_OPT_BLOCK) {
		int64_t k = n - i < LP_OPT_BLOCK ? n - i : LP_OPT_BLOCK;
		gpt_convert(g, GPT_DTYPE_F32, (const char *)grad + (size_t)i * es, be->dtype, (size_t)k, NULL);
		if (lo) {
			rc = gpt_cpu_adamw_split(be, (uint16_t *)param + i, lo + i, g, m + i, v + i, k, h, err);
			continue;
		}
		rc = gpt_cpu_adamw(be, master + i, NULL, NULL, g, m + i, v + i, k, h, err);
		if (!rc && param) /* NULL: the master weights are the only copy */
			lp_store(t, (char *)param + (size_t)i * es, master + i, k);
	}
	return lp_done(t, rc);
}

static int lp_sum_squares(gpt_backend *be, float *acc, const void *x, int64_t n, gpt_err *err)
{
	return gpt_cpu_sum_squares_of(be, acc, x, be->dtype, n, err);
}

static int lp_check_finite(gpt_backend *be, float *flag, const void *x, int64_t n,
			   gpt_err *err)
{
	return gpt_cpu_check_finite_of(be, flag, x, be->dtype, n, err);
}

const gpt_backend_ops gpt_cpu_lowp_ops = {
	.alloc = gpt_cpu_alloc,
	.free = gpt_cpu_free,
	.upload = gpt_cpu_copy,
	.download = gpt_cpu_copy,
	.copy = gpt_cpu_copy,
	.zero = gpt_cpu_zero,
	.sync = gpt_cpu_sync,
	.convert = gpt_cpu_convert,
	.gemm = lp_gemm,
	.gemm_batched = lp_gemm_batched,
	.linear_fwd = lp_linear_fwd,
	.linear_bwd = lp_linear_bwd,
	.bias_add = lp_bias_add,
	.layernorm_fwd = lp_layernorm_fwd,
	.layernorm_bwd = lp_layernorm_bwd,
	.gelu_fwd = lp_gelu_fwd,
	.gelu_bwd = lp_gelu_bwd,
	.attention_fwd = lp_attention_fwd,
	.attention_bwd = lp_attention_bwd,
	.attention_saved_size = gpt_cpu_attention_saved_size,
	.attention_kv = lp_attention_kv,
	.attention_kv_rows = gpt_attention_kv_rows_each,
	.xent_fwd = lp_xent_fwd,
	.xent_rescale = gpt_cpu_xent_rescale,
	.xent_loss = gpt_cpu_xent_loss,
	.xent_bwd = lp_xent_bwd,
	.embedding_fwd = lp_embedding_fwd,
	.embedding_rows_fwd = gpt_embedding_rows_each,
	.embedding_bwd = lp_embedding_bwd,
	.residual_fwd = lp_residual_fwd,
	.residual_bwd = lp_residual_bwd,
	.dropout_fwd = lp_dropout_fwd,
	.dropout_bwd = lp_dropout_bwd,
	.adamw = lp_adamw,
	.adamw_runs = gpt_adamw_runs_each,
	.sum_squares = lp_sum_squares,
	.check_finite = lp_check_finite,
	.quant_absmax = gpt_cpu_quant_absmax,
	.fake_quant = gpt_cpu_fake_quant,
	.quant_moving_avg = gpt_cpu_quant_moving_avg,
	.pact_fwd = gpt_cpu_pact_fwd,
	.pact_bwd = gpt_cpu_pact_bwd,
	.residual_layernorm_fwd = gpt_cpu_residual_layernorm_fwd,
	.residual_layernorm_bwd = gpt_cpu_residual_layernorm_bwd,
	.linear_gelu_fwd = gpt_cpu_linear_gelu_fwd,
	.linear_dgelu_bwd = gpt_cpu_linear_dgelu_bwd,
	.xent_fused = gpt_xent_fused_parts,
	.gelu_bwd_bias = gpt_gelu_bwd_bias_parts,
};
