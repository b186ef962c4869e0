/* Matrix products through CBLAS (OpenBLAS): plain, batched, and the linear
 * layer (weights [out, in], bias) built on them. */
#include "cpu/kernels.h"

#include <cblas.h>
#include <limits.h>

int gpt_cpu_gemm_check(const char *op, int trans_a, int trans_b, int64_t m, int64_t n,
		      int64_t k, int64_t lda, int64_t ldb, int64_t ldc, gpt_err *err)
{
	if (m < 0 || n < 0 || k < 0)
		return gpt_err_set(err, GPT_EINTERNAL, "%s: negative size m=%lld n=%lld k=%lld",
				   op, (long long)m, (long long)n, (long long)k);
	int64_t need_a = trans_a ? m : k, need_b = trans_b ? k : n;
	if (lda < need_a || ldb < need_b || ldc < n)
		return gpt_err_set(err, GPT_EINTERNAL,
				   "%s: leading dimensions lda=%lld ldb=%lld ldc=%lld too small "
				   "for m=%lld n=%lld k=%lld (trans %d %d)",
				   op, (long long)lda, (long long)ldb, (long long)ldc, (long long)m,
				   (long long)n, (long long)k, trans_a, trans_b);
	if (m > INT_MAX || n > INT_MAX || k > INT_MAX || lda > INT_MAX || ldb > INT_MAX ||
	    ldc > INT_MAX)
		return gpt_err_set(err, GPT_EINTERNAL,
				   "%s: a size or leading dimension exceeds the 32-bit BLAS "
				   "interface (m=%lld n=%lld k=%lld); split the product",
				   op, (long long)m, (long long)n, (long long)k);
	return 0;
}

/* C = beta C, for k == 0 where BLAS would reject lda. */
static void scale_c(float *c, int64_t m, int64_t n, int64_t ldc, float beta)
{
	for (int64_t i = 0; i < m; i++)
		for (int64_t j = 0; j < n; j++)
			c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
}

static void sgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
		  const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
		  int64_t ldc)
{
	if (m == 0 || n == 0)
		return;
	if (k == 0) {
		scale_c(c, m, n, ldc, beta);
		return;
	}
	cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
		    trans_b ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k, alpha, a,
		    (int)lda, b, (int)ldb, beta, c, (int)ldc);
}

int gpt_cpu_gemm(gpt_backend *be, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
		 float alpha, const void *a, int64_t lda, const void *b, int64_t ldb, float beta,
		 void *c, int64_t ldc, gpt_err *err)
{
	int rc = gpt_cpu_gemm_check("gemm", trans_a, trans_b, m, n, k, lda, ldb, ldc, err);
	if (rc)
		return rc;
	sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
	return 0;
}

int gpt_cpu_gemm_batched(gpt_backend *be, int trans_a, int trans_b, int64_t m, int64_t n,
			 int64_t k, float alpha, const void *a, int64_t lda, int64_t stride_a,
			 const void *b, int64_t ldb, int64_t stride_b, float beta, void *c,
			 int64_t ldc, int64_t stride_c, int64_t batch, gpt_err *err)
{
	int rc = gpt_cpu_gemm_check("gemm_batched", trans_a, trans_b, m, n, k, lda, ldb, ldc, err);
	if (rc)
		return rc;
	if (batch < 0 || stride_a < 0 || stride_b < 0 || stride_c < 0)
		return gpt_err_set(err, GPT_EINTERNAL,
				   "gemm_batched: negative batch or stride (batch %lld)",
				   (long long)batch);
	/* One BLAS call after another: each is threaded inside OpenBLAS, and
	 * calling BLAS from our own parallel region would oversubscribe. */
	for (int64_t i = 0; i < batch; i++)
		sgemm(trans_a, trans_b, m, n, k, alpha, (const float *)a + i * stride_a, lda,
		      (const float *)b + i * stride_b, ldb, beta, (float *)c + i * stride_c, ldc);
	return 0;
}

int gpt_cpu_linear_fwd(gpt_backend *be, void *out, const void *inp, const void *w,
		       const void *bias, int64_t M, int64_t K, int64_t N, gpt_err *err)
{
	int rc = gpt_cpu_gemm_check("linear_fwd", 0, 1, M, N, K, K, K, N, err);
	if (rc)
		return rc;
	float *o = out;
	const float *bs = bias;
	if (bs) {
		#pragma omp parallel for num_threads(be->threads) schedule(static) if (M * N > 4096)
		for (int64_t i = 0; i < M; i++)
			for (int64_t j = 0; j < N; j++)
				o[i * N + j] = bs[j];
	}
	sgemm(0, 1, M, N, K, 1.0f, inp, K, w, K, bs ? 1.0f : 0.0f, o, N);
	return 0;
}

/* dbias (N) += column sums of dout (M, N); each thread owns a block of
 * columns and sums rows in order, so the result is the same for any thread
 * count. */
static void bias_grad(gpt_backend *be, float *dbias, const float *dout, int64_t M, int64_t N)
{
	enum { BLOCK = 128 };
	int64_t nblocks = (N + BLOCK - 1) / BLOCK;
	#pragma omp parallel for num_threads(be->threads) schedule(static) if (M * N > 4096)
	for (int64_t blk = 0; blk < nblocks; blk++) {
		int64_t j0 = blk * BLOCK, j1 = j0 + BLOCK < N ? j0 + BLOCK : N;
		double acc[BLOCK] = {0};
		for (int64_t i = 0; i < M; i++)
			for (int64_t j = j0; j < j1; j++)
				acc[j - j0] += dout[i * N + j];
		for (int64_t j = j0; j < j1; j++)
			dbias[j] += (float)acc[j - j0];
	}
}

int gpt_cpu_linear_bwd(gpt_backend *be, void *dinp, void *dw, void *dbias, const void *dout,
		       const void *inp, const void *w, int64_t M, int64_t K, int64_t N,
		       gpt_err *err)
{
	int rc = gpt_cpu_gemm_check("linear_bwd", 0, 1, M, N, K, K, K, N, err);
	if (rc)
		return rc;
	if (dinp)
		sgemm(0, 0, M, K, N, 1.0f, dout, N, w, K, 0.0f, dinp, K);
	if (dw)
		sgemm(1, 0, N, K, M, 1.0f, dout, N, inp, K, 1.0f, dw, K);
	if (dbias)
		bias_grad(be, dbias, dout, M, N);
	return 0;
}

int gpt_cpu_bias_add(gpt_backend *be, void *out, const void *bias, int64_t M, int64_t N,
		     gpt_err *err)
{
	int rc = gpt_cpu_check_sizes("bias_add", err, 2, M, N);
	if (rc)
		return rc;
	float *o = out;
	const float *bs = bias;
	#pragma omp parallel for num_threads(be->threads) schedule(static) if (M * N > 4096)
	for (int64_t i = 0; i < M; i++)
		for (int64_t j = 0; j < N; j++)
			o[i * N + j] += bs[j];
	return 0;
}

/* The references of the GELU fusions: this backend's two ops each, through
 * be->ops so that the 16-bit backend rounds as its own ops do. */
int gpt_cpu_linear_gelu_fwd(gpt_backend *be, void *out, void *pre, const void *inp, const void *w,
			    const void *bias, int64_t M, int64_t K, int64_t N, gpt_err *err)
{
	int rc = be->ops->linear_fwd(be, pre, inp, w, bias, M, K, N, err);
	return rc ? rc : be->ops->gelu_fwd(be, out, pre, M * N, err);
}

int gpt_cpu_linear_dgelu_bwd(gpt_backend *be, void *dinp, void *dw, void *dbias, const void *dout,
			     const void *inp, const void *w, const void *pre, int64_t M, int64_t K, int64_t N,
			     gpt_err *err)
{
	int rc = be->ops->linear_bwd(be, dinp, dw, dbias, dout, inp, w, M, K, N, err);
	return rc || !dinp ? rc : be->ops->gelu_bwd(be, dinp, pre, dinp, M * K, err);
}
