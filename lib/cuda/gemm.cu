/* Matrix products through cuBLASLt (fp32, bf16 or fp16 operands, fp32
 * accumulation, never TF32), the bias as an epilogue; cuBLAS's GemmEx when
 * cuBLASLt has no algorithm for the operands' alignment. Column sums for the
 * bias gradient are a deterministic two-pass kernel (colsum.cuh), reading 16
 * bytes a thread where the columns and the pointer allow (the same sums in
 * the same order either way), or, under GPT_CUDA_BGRAD_GEMM, cuBLASLt's
 * BGRADB epilogue of the weight gradient's product (gpt_cuda_bias_grad). */
#include "cuda/colsum.cuh"

static cudaDataType cuda_type(gpt_dtype t)
{
	return t == GPT_DTYPE_BF16 ? CUDA_R_16BF : t == GPT_DTYPE_F16 ? CUDA_R_16F : CUDA_R_32F;
}

/* The largest power of two (<= 256) dividing the address and every stride
 * in bytes: what cuBLASLt may assume of a matrix. */
static uint32_t alignment(const void *p, int64_t ld, int64_t stride, size_t es)
{
	uint64_t v = (uint64_t)(uintptr_t)p | (uint64_t)ld * es | (uint64_t)stride * es | 256;
	return (uint32_t)(v & (~v + 1));
}

static int gemm_check(const char *op, int ta, int tb, int64_t m, int64_t n, int64_t k,
		      int64_t lda, int64_t ldb, int64_t ldc, gpt_err *err)
{
	if (m < 0 || n < 0 || k < 0)
		return gpt_err_set(err, GPT_EINTERNAL, "%s: negative size m=%lld n=%lld k=%lld", op,
				   (long long)m, (long long)n, (long long)k);
	int64_t need_a = ta ? m : k, need_b = tb ? k : n;
	if (lda < need_a || ldb < need_b || ldc < n)
		return gpt_err_set(err, GPT_EINTERNAL,
				   "%s: leading dimensions lda=%lld ldb=%lld ldc=%lld too small for "
				   "m=%lld n=%lld k=%lld (trans %d %d)",
				   op, (long long)lda, (long long)ldb, (long long)ldc, (long long)m,
				   (long long)n, (long long)k, ta, tb);
	return 0;
}

/* C = beta C over a batch of m x n matrices (k == 0, where BLAS would
 * object to the leading dimensions); beta 0 clears NaNs too. */
template <class T>
__global__ static void scale_kernel(T *c, int64_t m, int64_t n, int64_t ldc, int64_t sc,
				    int64_t batch, float beta)
{
	int64_t total = batch * m * n;
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
	     i += (int64_t)gridDim.x * blockDim.x) {
		int64_t bi = i / (m * n), r = (i / n) % m, col = i % n;
		T *p = c + bi * sc + r * ldc + col;
		gpt_st(p, beta == 0.0f ? 0.0f : beta * gpt_ld(p));
	}
}

/* out (M, N) rows = bias. */
template <class T>
__global__ static void bias_fill_kernel(T *out, const T *bias, int64_t M, int64_t N)
{
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < M * N;
	     i += (int64_t)gridDim.x * blockDim.x)
		out[i] = bias[i % N];
}

template <class T>
__global__ static void bias_add_kernel(T *out, const T *bias, int64_t M, int64_t N)
{
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < M * N;
	     i += (int64_t)gridDim.x * blockDim.x)
		gpt_st(out + i, gpt_ld(out + i) + gpt_ld(bias + i % N));
}

/* What cuBLASLt does to the product before it is stored: add a bias (n);
 * add it (when not NULL) and apply the GELU, storing its input in aux;
 * multiply by the GELU's derivative at aux; or (EPI_BGRADB) write into bias
 * (m, the storage dtype) the sums over k of op(A)'s rows (cuBLASLt's B in
 * the column-major twin): with op(A) = dout^T, dout's column sums. aux is
 * (m, n) row-major with row stride ldaux, like C. */
typedef enum { EPI_BIAS, EPI_GELU_AUX_BIAS, EPI_DGELU, EPI_BGRADB } epi_kind;
typedef struct lt_epi {
	epi_kind kind;
	const void *bias;
	const void *aux;
	int64_t ldaux;
} lt_epi;

static void lt_plan_clear(gpt_cuda_lt_plan *p)
{
	if (p->la)
		cublasLtMatrixLayoutDestroy(p->la);
	if (p->lb)
		cublasLtMatrixLayoutDestroy(p->lb);
	if (p->lc)
		cublasLtMatrixLayoutDestroy(p->lc);
	if (p->desc)
		cublasLtMatmulDescDestroy(p->desc);
	memset(p, 0, sizeof *p);
}

void gpt_cuda_lt_plans_free(gpt_cuda_ctx *cx)
{
	for (int i = 0; cx->lt_plans && i < GPT_CUDA_LT_PLANS; i++)
		lt_plan_clear(&cx->lt_plans[i]);
	free(cx->lt_plans);
	cx->lt_plans = NULL;
}

/* Makes p's descriptors, layouts and algorithm for its key and the
 * epilogue's pointers bias and aux: p->found 1 when cuBLASLt has an
 * algorithm for them, 0 when it has none or refuses the operands (their
 * alignment, say), with nothing kept. */
static void lt_plan_make(gpt_cuda_ctx *cx, gpt_cuda_lt_plan *p, const void *bias, const void *aux)
{
	const gpt_cuda_lt_key *k = &p->key;
	cudaDataType dt = (cudaDataType)k->dt;
	cublasOperation_t opa = k->tb ? CUBLAS_OP_T : CUBLAS_OP_N, opb = k->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
	cublasLtEpilogue_t epi = (cublasLtEpilogue_t)k->epi;
	cublasLtMatmulPreference_t pref = NULL;
	cublasLtMatmulHeuristicResult_t heur[GPT_CUDA_GEMM_TUNE_MAX];
	int found = 0, want = cx->gemm_tune > 1 ? cx->gemm_tune : 1;
	int32_t bc = (int32_t)k->batch;
	int64_t m = k->m, n = k->n, kk = k->k;
	uint64_t ws = cx->workspace_size;
	uint32_t al_a = (uint32_t)k->al_a, al_b = (uint32_t)k->al_b, al_c = (uint32_t)k->al_c;
	int ok = cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) == 0 &&
		 cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa) == 0 &&
		 cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb) == 0 &&
		 cublasLtMatrixLayoutCreate(&p->la, dt, k->tb ? kk : n, k->tb ? n : kk, k->ldb) == 0 &&
		 cublasLtMatrixLayoutCreate(&p->lb, dt, k->ta ? m : kk, k->ta ? kk : m, k->lda) == 0 &&
		 cublasLtMatrixLayoutCreate(&p->lc, dt, n, m, k->ldc) == 0;
	if (ok && epi != CUBLASLT_EPILOGUE_DEFAULT)
		ok = cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi) == 0;
	/* the first call's pointers (later calls set theirs, of the same
	 * alignment: the key's) */
	if (ok && k->bias)
		ok = cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
						    sizeof bias) == 0;
	int64_t ldaux = k->ldaux;
	if (ok && k->aux)
		ok = cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux,
						    sizeof aux) == 0 &&
		     cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ldaux,
						    sizeof ldaux) == 0;
	if (ok && k->batch > 1)
		ok = cublasLtMatrixLayoutSetAttribute(p->la, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc) == 0 &&
		     cublasLtMatrixLayoutSetAttribute(p->lb, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc) == 0 &&
		     cublasLtMatrixLayoutSetAttribute(p->lc, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc) == 0 &&
		     cublasLtMatrixLayoutSetAttribute(p->la, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &k->sb, sizeof k->sb) == 0 &&
		     cublasLtMatrixLayoutSetAttribute(p->lb, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &k->sa, sizeof k->sa) == 0 &&
		     cublasLtMatrixLayoutSetAttribute(p->lc, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &k->sc, sizeof k->sc) == 0;
	if (ok)
		ok = cublasLtMatmulPreferenceCreate(&pref) == 0 &&
		     cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws) == 0 &&
		     cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a) == 0 &&
		     cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b) == 0 &&
		     cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof al_c) == 0 &&
		     cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof al_c) == 0;
	if (ok && cublasLtMatmulAlgoGetHeuristic(cx->lt, p->desc, p->la, p->lb, p->lc, p->lc, pref, want, heur,
						 &found) != 0)
		found = 0;
	if (pref)
		cublasLtMatmulPreferenceDestroy(pref);
	gpt_cuda_lt_key key = p->key;
	if (!ok || found <= 0) {
		lt_plan_clear(p);
		p->key = key;
		p->found = 0;
	} else {
		p->algo = heur[0].algo;
		p->found = 1;
		/* the candidates gpt_cuda_gemm_tune times: those it says work */
		for (int i = 0; i < found && i < want; i++)
			if (heur[i].state == CUBLAS_STATUS_SUCCESS)
				p->cand[p->ncand++] = heur[i].algo;
		p->tuned = p->ncand < 2;
	}
	p->used = 1;
}

/* gpt_cuda_gemm_tune's timing of plan p's candidates on a call's operands
 * and beta, their results going to a scratch copy of the output (bytes
 * long), C read where it is: each candidate run once, then twice between
 * events; p keeps the fastest, another than the first only when at least
 * 3% faster, so that noise leaves the heuristic's pick. The epilogues'
 * other outputs (BGRADB's bias, GELU's aux) are written as the call will
 * write them again. A candidate cuBLASLt refuses is passed over; without
 * memory for the scratch, or with a failed event, the first stays. */
static void lt_tune(gpt_cuda_ctx *cx, gpt_cuda_lt_plan *p, const float *alpha, const void *a, const void *b,
		    const float *beta, const void *c, size_t bytes)
{
	float ms[GPT_CUDA_GEMM_TUNE_MAX];
	cudaEvent_t ev[2] = {};
	gpt_err e;
	void *d = gpt_cuda_malloc(bytes, "GEMM timing", &e);
	int ok = d && cudaEventCreateWithFlags(&ev[0], cudaEventDefault) == cudaSuccess &&
		 cudaEventCreateWithFlags(&ev[1], cudaEventDefault) == cudaSuccess;
	for (int i = 0; ok && i < p->ncand; i++) {
		ms[i] = INFINITY;
		int runs = 0;
		for (int r = 0; r < 3; r++) {
			if (r == 1 && cudaEventRecord(ev[0], cx->stream) != cudaSuccess)
				ok = 0;
			runs += ok && cublasLtMatmul(cx->lt, p->desc, alpha, b, p->la, a, p->lb, beta, c, p->lc, d, p->lc,
						     &p->cand[i], cx->workspace, cx->workspace_size,
						     cx->stream) == CUBLAS_STATUS_SUCCESS;
		}
		ok = ok && cudaEventRecord(ev[1], cx->stream) == cudaSuccess && cudaEventSynchronize(ev[1]) == cudaSuccess;
		if (ok && runs == 3 && cudaEventElapsedTime(&ms[i], ev[0], ev[1]) != cudaSuccess)
			ms[i] = INFINITY;
	}
	int best = 0;
	for (int i = 1; ok && i < p->ncand; i++)
		if (ms[i] < 0.97f * ms[best])
			best = i;
	for (int i = 0; i < 2; i++)
		if (ev[i])
			cudaEventDestroy(ev[i]);
	gpt_cuda_free(d);
	cudaGetLastError(); /* what failed here leaves the first; the call finds its own errors */
	p->algo = p->cand[best];
	p->tuned = 1;
	cx->gemm_timed += ok;
	cx->gemm_moved += best != 0;
}

/* The plan for key: the table's entry, made on first use. The table is
 * open-addressed by a hash of the key; past GPT_CUDA_LT_PROBE entries of
 * other keys the first of them is replaced. NULL only without host memory
 * for the table. */
static gpt_cuda_lt_plan *lt_plan(gpt_cuda_ctx *cx, const gpt_cuda_lt_key *key, const void *bias,
				 const void *aux)
{
	if (!cx->lt_plans && !(cx->lt_plans = (gpt_cuda_lt_plan *)calloc(GPT_CUDA_LT_PLANS, sizeof *cx->lt_plans)))
		return NULL;
	const int64_t *w = (const int64_t *)key;
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < sizeof *key / sizeof *w; i++)
		h = (h ^ (uint64_t)w[i]) * 1099511628211ull;
	h ^= h >> 29;
	gpt_cuda_lt_plan *p = NULL;
	for (int i = 0; i < GPT_CUDA_LT_PROBE && !p; i++) {
		gpt_cuda_lt_plan *q = &cx->lt_plans[(h + (uint64_t)i) % GPT_CUDA_LT_PLANS];
		if (!q->used || !memcmp(&q->key, key, sizeof *key))
			p = q;
	}
	if (p && p->used)
		return p;
	if (!p) {
		p = &cx->lt_plans[h % GPT_CUDA_LT_PLANS];
		lt_plan_clear(p);
	}
	p->key = *key;
	lt_plan_make(cx, p, bias, aux);
	return p;
}

/* One cuBLASLt call for the row-major product as its column-major twin,
 * C^T = op(B)^T op(A)^T, with epilogue e when not NULL. Returns 0 when it
 * ran, 1 when cuBLASLt has no algorithm for these operands (their
 * alignment, say) or refuses them, or an error. The descriptors and the
 * algorithm are the context's plan for the shape (lt_plan): asking
 * cuBLASLt's heuristic costs tens of microseconds of the host's time a
 * call, most of a generation step's at one token. */
static int lt_matmul(gpt_backend *be, const char *op, int ta, int tb, int64_t m, int64_t n,
		     int64_t k, float alpha, const void *a, int64_t lda, int64_t sa, const void *b,
		     int64_t ldb, int64_t sb, float beta, void *c, int64_t ldc, int64_t sc,
		     int64_t batch, const lt_epi *e, gpt_err *err)
{
	/* the epilogue reads the bias in 16-byte vectors (llm.c's experience) */
	if (e && e->bias && (uintptr_t)e->bias % 16 != 0)
		return 1;
	/* the GELU's input: 16-byte aligned, its row stride a multiple of 8
	 * elements (cuBLASLt's rules for the aux matrix) */
	int aux = e && (e->kind == EPI_GELU_AUX_BIAS || e->kind == EPI_DGELU);
	if (aux && ((uintptr_t)e->aux % 16 != 0 || e->ldaux % 8 != 0 || e->ldaux < n || batch != 1))
		return 1;
	if (batch > INT32_MAX)
		return 1;
	gpt_cuda_ctx *cx = gpt_cuda_ctx_of(be);
	size_t es = gpt_dtype_size(be->dtype);
	gpt_cuda_lt_key key;
	memset(&key, 0, sizeof key);
	key.dt = cuda_type(be->dtype);
	key.ta = ta, key.tb = tb;
	key.epi = !e			   ? CUBLASLT_EPILOGUE_DEFAULT
		  : e->kind == EPI_BIAS	   ? CUBLASLT_EPILOGUE_BIAS
		  : e->kind == EPI_DGELU   ? CUBLASLT_EPILOGUE_DGELU
		  : e->kind == EPI_BGRADB  ? CUBLASLT_EPILOGUE_BGRADB
		  : e->bias		   ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
					   : CUBLASLT_EPILOGUE_GELU_AUX;
	key.bias = e && e->bias && e->kind != EPI_DGELU;
	key.aux = aux;
	key.ldaux = aux ? e->ldaux : 0;
	key.m = m, key.n = n, key.k = k;
	key.lda = lda, key.ldb = ldb, key.ldc = ldc;
	key.sa = batch > 1 ? sa : 0, key.sb = batch > 1 ? sb : 0, key.sc = batch > 1 ? sc : 0;
	key.batch = batch;
	key.al_a = alignment(b, ldb, sb, es), key.al_b = alignment(a, lda, sa, es);
	key.al_c = alignment(c, ldc, sc, es);
	key.al_bias = key.bias ? alignment(e->bias, 0, 0, 1) : 0;
	key.al_aux = aux ? alignment(e->aux, 0, 0, 1) : 0;
	gpt_cuda_lt_plan *p = lt_plan(cx, &key, key.bias ? e->bias : NULL, aux ? e->aux : NULL);
	if (!p)
		return gpt_err_set(err, GPT_EINTERNAL, "%s: out of host memory for cuBLASLt's plans", op);
	if (!p->found)
		return 1;
	int ok = 1;
	if (key.bias)
		ok = cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &e->bias,
						    sizeof e->bias) == 0;
	if (ok && aux)
		ok = cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &e->aux,
						    sizeof e->aux) == 0;
	/* gpt_cuda_gemm_tune: the first call at a shape times its candidates
	 * (not while a CUDA graph records the stream's work) */
	cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
	if (ok && !p->tuned && cudaStreamIsCapturing(cx->stream, &cap) == cudaSuccess &&
	    cap == cudaStreamCaptureStatusNone)
		lt_tune(cx, p, &alpha, a, b, &beta, c, (size_t)((batch - 1) * (batch > 1 ? sc : 0) + (m - 1) * ldc + n) * es);
	/* a refusal (an operand it cannot take) happens before anything is
	 * written: the caller falls back */
	if (!ok || cublasLtMatmul(cx->lt, p->desc, &alpha, b, p->la, a, p->lb, &beta, c, p->lc, c, p->lc,
				  &p->algo, cx->workspace, cx->workspace_size, cx->stream) != CUBLAS_STATUS_SUCCESS)
		return 1;
	return gpt_cuda_launched(op, err);
}

/* C = alpha op(A) op(B) + beta C (row-major) over a batch; bias (n, may be
 * NULL) is added to every row of C before C is rounded. */
static int matmul(gpt_backend *be, const char *op, int ta, int tb, int64_t m, int64_t n,
		  int64_t k, float alpha, const void *a, int64_t lda, int64_t sa, const void *b,
		  int64_t ldb, int64_t sb, float beta, void *c, int64_t ldc, int64_t sc,
		  int64_t batch, const void *bias, gpt_err *err)
{
	gpt_cuda_ctx *cx = gpt_cuda_ctx_of(be);
	cudaDataType dt = cuda_type(be->dtype);
	if (batch == 0 || m == 0 || n == 0)
		return 0;
	int rc;
	lt_epi eb = {EPI_BIAS, bias, NULL, 0};
	if (k > 0) {
		rc = lt_matmul(be, op, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc,
			       batch, bias ? &eb : NULL, err);
		if (rc != 1)
			return rc;
	}
	if (bias) {
		/* C = bias, then C = AB + C: still one rounding */
		GPT_CUDA_DISPATCH(be->dtype, T,
			bias_fill_kernel<T><<<gpt_cuda_blocks(m * n, 256), 256, 0, cx->stream>>>(
				(T *)c, (const T *)bias, m, n));
		if ((rc = gpt_cuda_launched(op, err)))
			return rc;
		beta = 1.0f;
	}
	if (k == 0) {
		GPT_CUDA_DISPATCH(be->dtype, T,
			scale_kernel<T><<<gpt_cuda_blocks(batch * m * n, 256), 256, 0, cx->stream>>>(
				(T *)c, m, n, ldc, sc, batch, beta));
		return gpt_cuda_launched(op, err);
	}
	if (bias && (rc = lt_matmul(be, op, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c,
				    ldc, sc, batch, NULL, err)) != 1)
		return rc;
	/* no cuBLASLt algorithm for these operands: cuBLAS takes any alignment */
	cublasOperation_t opa = tb ? CUBLAS_OP_T : CUBLAS_OP_N, opb = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
	cublasStatus_t st = cublasGemmStridedBatchedEx_64(
		cx->blas, opa, opb, n, m, k, &alpha, b, dt, ldb, sb, a, dt, lda, sa, &beta, c, dt, ldc,
		sc, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
	if (st != CUBLAS_STATUS_SUCCESS)
		return gpt_err_set(err, GPT_EINTERNAL, "%s: cuBLAS failed (%s) for m=%lld n=%lld k=%lld",
				   op, cublasGetStatusString(st), (long long)m, (long long)n,
				   (long long)k);
	return gpt_cuda_launched(op, err);
}

int gpt_cuda_gemm(gpt_backend *be, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
		  float alpha, const void *a, int64_t lda, const void *b, int64_t ldb, float beta,
		  void *c, int64_t ldc, gpt_err *err)
{
	int rc = gemm_check("gemm", trans_a, trans_b, m, n, k, lda, ldb, ldc, err);
	return rc ? rc : matmul(be, "gemm", trans_a, trans_b, m, n, k, alpha, a, lda, 0, b, ldb, 0,
				beta, c, ldc, 0, 1, NULL, err);
}

int gpt_cuda_gemm_batched(gpt_backend *be, int trans_a, int trans_b, int64_t m, int64_t n,
			  int64_t k, float alpha, const void *a, int64_t lda, int64_t stride_a,
			  const void *b, int64_t ldb, int64_t stride_b, float beta, void *c,
			  int64_t ldc, int64_t stride_c, int64_t batch, gpt_err *err)
{
	int rc = gemm_check("gemm_batched", trans_a, trans_b, m, n, k, lda, ldb, ldc, err);
	if (rc)
		return rc;
	if (batch < 0 || stride_a < 0 || stride_b < 0 || stride_c < 0)
		return gpt_err_set(err, GPT_EINTERNAL,
				   "gemm_batched: negative batch or stride (batch %lld)", (long long)batch);
	return matmul(be, "gemm_batched", trans_a, trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb,
		      stride_b, beta, c, ldc, stride_c, batch, NULL, err);
}

int gpt_cuda_linear_fwd(gpt_backend *be, void *out, const void *inp, const void *w,
			const void *bias, int64_t M, int64_t K, int64_t N, gpt_err *err)
{
	int rc = gemm_check("linear_fwd", 0, 1, M, N, K, K, K, N, err);
	return rc ? rc : matmul(be, "linear_fwd", 0, 1, M, N, K, 1.0f, inp, K, 0, w, K, 0, 0.0f, out,
				N, 0, 1, bias, err);
}

int gpt_cuda_colsum_add(gpt_backend *be, void *dst, const void *src, int64_t M, int64_t N, gpt_err *err)
{
	if (M == 0 || N == 0)
		return 0;
	GPT_CUDA_DISPATCH(be->dtype, T,
		if (N % GPT_VEC(T) == 0 && gpt_cuda_aligned(src))
			return colsum_vec_add(be, (T *)dst, colsum_rows<T>{(const T *)src, N}, M, N, "bias gradient", err);
		int64_t parts, rows;
		float *part = colsum_parts(be, M, N, &parts, &rows, err);
		if (!part)
			return err ? err->code : GPT_EINTERNAL;
		dim3 block(32, 8), grid((unsigned)((N + 31) / 32), (unsigned)parts);
		cudaStream_t s = gpt_cuda_stream(be);
		colsum_part_kernel<T><<<grid, block, 0, s>>>(part, (const T *)src, M, N, rows);
		colsum_add_kernel<T><<<(unsigned)((N + 31) / 32), block, 0, s>>>((T *)dst, part, parts, N));
	return gpt_cuda_launched("bias gradient", err);
}

/* dw += dout^T inp with dbias += dout's column sums from the same product's
 * BGRADB epilogue (gpt_cuda_bias_grad): 0 when it ran, 1 when cuBLASLt has
 * no algorithm for it (nothing written), or an error. The epilogue writes
 * the sums, rounded, into the scratch; they are then added. */
static int dw_bgrad(gpt_backend *be, void *dw, void *dbias, const void *dout, const void *inp, int64_t M,
		    int64_t K, int64_t N, gpt_err *err)
{
	size_t es = gpt_dtype_size(be->dtype);
	int rc = gpt_backend_scratch(be, (size_t)N * es, err);
	if (rc)
		return rc;
	lt_epi e = {EPI_BGRADB, be->scratch, NULL, 0};
	rc = lt_matmul(be, "linear_bwd dw", 1, 0, N, K, M, 1.0f, dout, N, 0, inp, K, 0, 1.0f, dw, K, 0, 1, &e, err);
	if (rc)
		return rc;
	GPT_CUDA_DISPATCH(be->dtype, T,
		bias_add_kernel<T><<<gpt_cuda_blocks(N, 256), 256, 0, gpt_cuda_stream(be)>>>(
			(T *)dbias, (const T *)be->scratch, 1, N));
	gpt_cuda_ctx_of(be)->bgrad_gemms++;
	return gpt_cuda_launched("bias gradient", err);
}

int gpt_cuda_linear_bwd(gpt_backend *be, void *dinp, void *dw, void *dbias, const void *dout,
			const void *inp, const void *w, int64_t M, int64_t K, int64_t N,
			gpt_err *err)
{
	int rc = gemm_check("linear_bwd", 0, 1, M, N, K, K, K, N, err);
	if (!rc && dinp)
		rc = matmul(be, "linear_bwd dinp", 0, 0, M, K, N, 1.0f, dout, N, 0, w, K, 0, 0.0f,
			    dinp, K, 0, 1, NULL, err);
	if (!rc && dw && dbias && M > 0 && K > 0 && N > 0 &&
	    gpt_cuda_ctx_of(be)->bgrad == GPT_CUDA_BGRAD_GEMM) {
		rc = dw_bgrad(be, dw, dbias, dout, inp, M, K, N, err);
		if (rc != 1)
			return rc; /* done, or an error */
		rc = 0;            /* no such algorithm: the product, then the sums */
	}
	if (!rc && dw)
		rc = matmul(be, "linear_bwd dw", 1, 0, N, K, M, 1.0f, dout, N, 0, inp, K, 0, 1.0f, dw,
			    K, 0, 1, NULL, err);
	if (!rc && dbias)
		rc = gpt_cuda_colsum_add(be, dbias, dout, M, N, err);
	return rc;
}

int gpt_cuda_bias_grad(gpt_backend *be, int how)
{
	gpt_cuda_ctx *cx = gpt_cuda_ctx_of(be);
	int was = cx->bgrad;
	if (how != GPT_CUDA_BGRAD_SUMS && how != GPT_CUDA_BGRAD_GEMM)
		return how == 0 ? was : -1;
	cx->bgrad = how;
	return was;
}

int gpt_cuda_gemm_tune(gpt_backend *be, int n)
{
	gpt_cuda_ctx *cx = gpt_cuda_ctx_of(be);
	if (n > 0)
		cx->gemm_tune = n < GPT_CUDA_GEMM_TUNE_MAX ? n : GPT_CUDA_GEMM_TUNE_MAX;
	return cx->gemm_tune;
}

int64_t gpt_cuda_gemm_tuned(gpt_backend *be, int64_t *moved)
{
	gpt_cuda_ctx *cx = gpt_cuda_ctx_of(be);
	if (moved)
		*moved = cx->gemm_moved;
	return cx->gemm_timed;
}

int64_t gpt_cuda_bias_grad_gemms(gpt_backend *be)
{
	return gpt_cuda_ctx_of(be)->bgrad_gemms;
}

/* The GELU fusions (Model.fused_linear): one GEMM with cuBLASLt's
 * GELU_AUX_BIAS / DGELU epilogue where it takes the operands, else the two
 * ops. cuBLASLt's GELU is the tanh form of gelu_fwd, computed in fp32 from
 * the unrounded product: a 16-bit out or dinp may differ from the two ops'
 * in the last bit (tests/gpu/test-cuda-ops holds them to the same bounds as
 * every op). */
int gpt_cuda_linear_gelu_fwd(gpt_backend *be, void *out, void *pre, const void *inp, const void *w,
			     const void *bias, int64_t M, int64_t K, int64_t N, gpt_err *err)
{
	int rc = gemm_check("linear_gelu_fwd", 0, 1, M, N, K, K, K, N, err);
	if (rc || M == 0 || N == 0)
		return rc;
	lt_epi e = {EPI_GELU_AUX_BIAS, bias, pre, N};
	if (K > 0 &&
	    (rc = lt_matmul(be, "linear_gelu_fwd", 0, 1, M, N, K, 1.0f, inp, K, 0, w, K, 0, 0.0f, out, N, 0, 1, &e,
			    err)) != 1)
		return rc;
	rc = gpt_cuda_linear_fwd(be, pre, inp, w, bias, M, K, N, err);
	return rc ? rc : gpt_cuda_gelu_fwd(be, out, pre, M * N, err);
}

int gpt_cuda_linear_dgelu_bwd(gpt_backend *be, void *dinp, void *dw, void *dbias, const void *dout,
			      const void *inp, const void *w, const void *pre, int64_t M, int64_t K, int64_t N,
			      gpt_err *err)
{
	int rc = gemm_check("linear_dgelu_bwd", 0, 1, M, N, K, K, K, N, err);
	if (rc)
		return rc;
	int fused = 0;
	lt_epi e = {EPI_DGELU, NULL, pre, K};
	if (dinp && M > 0 && K > 0 && N > 0) {
		rc = lt_matmul(be, "linear_dgelu_bwd dinp", 0, 0, M, K, N, 1.0f, dout, N, 0, w, K, 0, 0.0f, dinp, K, 0,
			       1, &e, err);
		if (rc != 0 && rc != 1)
			return rc; /* an error, not a refusal */
		fused = rc == 0;
	}
	rc = gpt_cuda_linear_bwd(be, fused ? NULL : dinp, dw, dbias, dout, inp, w, M, K, N, err);
	if (!rc && dinp && !fused)
		rc = gpt_cuda_gelu_bwd(be, dinp, pre, dinp, M * K, err);
	return rc;
}

int gpt_cuda_bias_add(gpt_backend *be, void *out, const void *bias, int64_t M, int64_t N,
		      gpt_err *err)
{
	int rc = gpt_cuda_check_sizes("bias_add", err, 2, M, N);
	if (rc || M * N == 0)
		return rc;
	GPT_CUDA_DISPATCH(be->dtype, T,
		bias_add_kernel<T><<<gpt_cuda_blocks(M * N, 256), 256, 0, gpt_cuda_stream(be)>>>(
			(T *)out, (const T *)bias, M, N));
	return gpt_cuda_launched("bias_add", err);
}
