/* The CPU backend's ops, one group per file (gemm.c, layernorm.c, ...), as
 * the table in backend.c lists them. Private to lib/cpu; see backend/ops.h
 * for each op's contract. */
#ifndef GPT_CPU_KERNELS_H
#define GPT_CPU_KERNELS_H

#include "backend/backend.h"
#include "backend/philox.h"

/* Memory ops (host memory), shared by the fp32 and 16-bit tables. */
void *gpt_cpu_alloc(gpt_backend *be, size_t bytes, const char *what, gpt_err *err);
void gpt_cpu_free(gpt_backend *be, void *p);
int gpt_cpu_copy(gpt_backend *be, void *dst, const void *src, size_t bytes, gpt_err *err);
int gpt_cpu_zero(gpt_backend *be, void *dst, size_t bytes, gpt_err *err);
int gpt_cpu_sync(gpt_backend *be, gpt_err *err);
int gpt_cpu_convert(gpt_backend *be, void *dst, gpt_dtype dst_t, const void *src,
		    gpt_dtype src_t, int64_t n, gpt_err *err);

/* Fails with GPT_EINTERNAL unless every size is >= 0; `op` names the op. */
int gpt_cpu_check_sizes(const char *op, gpt_err *err, int count, ...);

/* Validates a gemm's sizes and leading dimensions (row-major, cblas). */
int gpt_cpu_gemm_check(const char *op, int trans_a, int trans_b, int64_t m, int64_t n,
		       int64_t k, int64_t lda, int64_t ldb, int64_t ldc, gpt_err *err);
int gpt_cpu_gemm(gpt_backend *be, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
		 float alpha, const void *a, int64_t lda, const void *b, int64_t ldb, float beta,
		 void *c, int64_t ldc, gpt_err *err);
int gpt_cpu_gemm_batched(gpt_backend *be, int trans_a, int trans_b, int64_t m, int64_t n,
			 int64_t k, float alpha, const void *a, int64_t lda, int64_t stride_a,
			 const void *b, int64_t ldb, int64_t stride_b, float beta, void *c,
			 int64_t ldc, int64_t stride_c, int64_t batch, gpt_err *err);
int gpt_cpu_linear_fwd(gpt_backend *be, void *out, const void *inp, const void *w,
		       const void *bias, int64_t M, int64_t K, int64_t N, gpt_err *err);
int gpt_cpu_linear_bwd(gpt_backend *be, void *dinp, void *dw, void *dbias, const void *dout,
		       const void *inp, const void *w, int64_t M, int64_t K, int64_t N,
		       gpt_err *err);
int gpt_cpu_bias_add(gpt_backend *be, void *out, const void *bias, int64_t M, int64_t N,
		     gpt_err *err);

int gpt_cpu_linear_gelu_fwd(gpt_backend *be, void *out, void *pre, const void *inp, const void *w,
			    const void *bias, int64_t M, int64_t K, int64_t N, gpt_err *err);
int gpt_cpu_linear_dgelu_bwd(gpt_backend *be, void *dinp, void *dw, void *dbias, const void *dout,
			     const void *inp, const void *w, const void *pre, int64_t M, int64_t K, int64_t N,
			     gpt_err *err);

int gpt_cpu_layernorm_fwd(gpt_backend *be, void *out, float *mean, float *rstd,
			  const void *inp, const void *w, const void *b, int64_t N, int64_t C,
			  float eps, gpt_err *err);
int gpt_cpu_residual_layernorm_fwd(gpt_backend *be, void *res, void *out, float *mean, float *rstd,
				   const void *a, void *b, const void *w, const void *bias,
				   int64_t N, int64_t C, float eps, const gpt_dropout *d, int64_t T,
				   gpt_err *err);
int gpt_cpu_layernorm_bwd(gpt_backend *be, void *dinp, void *dw, void *db, const void *dout,
			  const void *inp, const void *w, const float *mean, const float *rstd,
			  int64_t N, int64_t C, gpt_err *err);
int gpt_cpu_residual_layernorm_bwd(gpt_backend *be, void *dinp, void *dbranch, void *dw, void *db,
				   const void *dout, const void *inp, const void *w, const float *mean,
				   const float *rstd, int64_t N, int64_t C, const gpt_dropout *d, int64_t T,
				   gpt_err *err);
int gpt_cpu_gelu_fwd(gpt_backend *be, void *out, const void *inp, int64_t n, gpt_err *err);
int gpt_cpu_gelu_bwd(gpt_backend *be, void *dinp, const void *inp, const void *dout,
		     int64_t n, gpt_err *err);
/* One path of both on one thread, for tests (bwd 0: out = gelu(x); 1: out =
 * gelu'(x) dy): path 0 portable C, 1 AVX2, 2 AVX-512; -1 when this CPU
 * lacks the path. All paths give the same bits. */
int gpt_cpu_gelu_on(int path, int bwd, float *out, const float *x, const float *dy, int64_t n);

int gpt_cpu_attention_fwd(gpt_backend *be, void *out, float *saved, const void *qkv,
			  int64_t B, int64_t T, int64_t NH, int64_t HS, const gpt_dropout *d,
			  gpt_err *err);
int gpt_cpu_attention_bwd(gpt_backend *be, void *dqkv, const void *dout, const void *out,
			  const void *qkv, const float *saved, int64_t B, int64_t T, int64_t NH,
			  int64_t HS, const gpt_dropout *d, gpt_err *err);
int64_t gpt_cpu_attention_saved_size(gpt_backend *be, int64_t B, int64_t T, int64_t NH,
				     int64_t HS, int dropout);
int gpt_cpu_attention_kv(gpt_backend *be, void *out, void *kcache, void *vcache,
			 const void *qkv, int64_t B, int64_t Tn, int64_t t0, int64_t maxT,
			 int64_t NH, int64_t HS, gpt_err *err);

int gpt_cpu_xent_fwd(gpt_backend *be, float *max, float *sumexp, float *tlogit,
		     const void *logits, const int32_t *targets, int64_t N, int64_t Vl,
		     int64_t ld, int64_t v0, int64_t V, gpt_err *err);
int gpt_cpu_xent_rescale(gpt_backend *be, float *sumexp, const float *max_local,
			 const float *max_global, int64_t N, gpt_err *err);
int gpt_cpu_xent_loss(gpt_backend *be, float *loss, const float *max, const float *sumexp,
		      const float *tlogit, const int32_t *targets, int64_t N, gpt_err *err);
int gpt_cpu_xent_bwd(gpt_backend *be, void *dlogits, const void *logits,
		     const int32_t *targets, const float *max, const float *sumexp, float dloss,
		     int64_t N, int64_t Vl, int64_t ld, int64_t v0, int64_t V, gpt_err *err);

int gpt_cpu_embedding_fwd(gpt_backend *be, void *out, const int32_t *tokens, const void *wte,
			  const void *wpe, int64_t B, int64_t T, int64_t C, int64_t v0,
			  int64_t Vl, int64_t t0, gpt_err *err);
int gpt_cpu_embedding_bwd(gpt_backend *be, void *dwte, void *dwpe, const void *dout,
			  const int32_t *tokens, int64_t B, int64_t T, int64_t C, int64_t v0,
			  int64_t Vl, int64_t t0, gpt_err *err);
int gpt_cpu_residual_fwd(gpt_backend *be, void *out, const void *a, const void *b, int64_t n,
			 gpt_err *err);
int gpt_cpu_residual_bwd(gpt_backend *be, void *da, void *db, const void *dout, int64_t n,
			 gpt_err *err);
int gpt_cpu_dropout_fwd(gpt_backend *be, void *out, const void *inp, int64_t B, int64_t T,
			int64_t F, const gpt_dropout *d, gpt_err *err);
int gpt_cpu_dropout_bwd(gpt_backend *be, void *dinp, const void *dout, int64_t B, int64_t T,
			int64_t F, const gpt_dropout *d, gpt_err *err);
/* Checks d (NULL allowed): p in [0, 1), offsets >= 0. */
int gpt_cpu_dropout_check(const char *op, const gpt_dropout *d, gpt_err *err);

/* out[f] = in[f] * mask * scale for the F features at (sample, position)
 * whose global indices start at feature; out may alias in (dropout.c:
 * sixteen Philox calls at once with AVX-512, eight with AVX2). */
void gpt_cpu_dropout_row(float *out, const float *in, int64_t F, const gpt_dropout *d,
			 uint32_t threshold, float scale, int64_t sample, int64_t position,
			 int64_t feature);
/* The same on one path, for tests: 0 portable C, 1 AVX2, 2 AVX-512; -1
 * when this CPU lacks the path. All paths give the same bits. */
int gpt_cpu_dropout_row_on(int path, float *out, const float *in, int64_t F, const gpt_dropout *d,
			   uint32_t threshold, float scale, int64_t sample, int64_t position, int64_t feature);

int gpt_cpu_adamw(gpt_backend *be, void *param, float *master, uint16_t *lo, const void *grad,
		  float *m, float *v, int64_t n, const gpt_adamw *h, gpt_err *err);
/* AdamW on bf16 parameters hi whose fp32 master weights are split
 * (gpt_bf16_split: lo the low halves), from fp32 gradients: each element
 * joined, updated as gpt_cpu_adamw updates an fp32 weight, and split. */
int gpt_cpu_adamw_split(gpt_backend *be, uint16_t *hi, uint16_t *lo, const float *grad, float *m,
			float *v, int64_t n, const gpt_adamw *h, gpt_err *err);
int gpt_cpu_sum_squares(gpt_backend *be, float *acc, const void *x, int64_t n, gpt_err *err);
int gpt_cpu_check_finite(gpt_backend *be, float *flag, const void *x, int64_t n,
			 gpt_err *err);
/* The same over elements of dtype dt (fp32, bf16 or fp16), 16-bit ones
 * without an fp32 copy of them all; the sum has the fp32 path's bits. */
int gpt_cpu_sum_squares_of(gpt_backend *be, float *acc, const void *x, gpt_dtype dt, int64_t n,
			   gpt_err *err);
int gpt_cpu_check_finite_of(gpt_backend *be, float *flag, const void *x, gpt_dtype dt, int64_t n,
			    gpt_err *err);

/* quant.c: the same functions serve fp32 and 16-bit storage. */
int gpt_cpu_quant_absmax(gpt_backend *be, float *scale, const void *x, int64_t rows, int64_t cols,
			 int per_row, int accumulate, gpt_err *err);
int gpt_cpu_fake_quant(gpt_backend *be, void *out, const void *x, const float *scale, int64_t rows,
		       int64_t cols, int per_row, int bits, gpt_err *err);
int gpt_cpu_quant_moving_avg(gpt_backend *be, float *state, float *accum, float *scale,
			     const float *cur, int64_t n, float rate, int commit, gpt_err *err);
int gpt_cpu_pact_fwd(gpt_backend *be, void *out, const void *x, const float *alpha, int64_t n,
		     gpt_err *err);
int gpt_cpu_pact_bwd(gpt_backend *be, void *dx, float *dalpha, const void *dy, const void *x,
		     const float *alpha, int64_t n, int accumulate, gpt_err *err);

/* gemm_bf16.c: C (fp32, row-major) = alpha op(A) op(B) + beta C for bf16
 * A and B, on AVX512_BF16 (gpt_cpu_sbgemm_ok says whether this CPU has
 * it; nothing else may call gpt_cpu_sbgemm). work holds
 * gpt_cpu_sbgemm_work_bytes() bytes, 64-byte aligned. */
int gpt_cpu_sbgemm_ok(void);
size_t gpt_cpu_sbgemm_work_bytes(void);
void gpt_cpu_sbgemm(int threads, void *work, int ta, int tb, int64_t m, int64_t n, int64_t k,
		    float alpha, const uint16_t *a, int64_t lda, const uint16_t *b, int64_t ldb,
		    float beta, float *c, int64_t ldc);

/* The same ops for bf16/fp16 storage (lowp.c): operands converted to fp32,
 * the kernels above, results rounded to nearest even on store. */
extern const gpt_backend_ops gpt_cpu_lowp_ops;
/* Frees the temporaries lowp.c keeps in be->impl. */
void gpt_cpu_lowp_free(gpt_backend *be);

#endif
