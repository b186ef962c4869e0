/* A naive emulation of the cuBLAS and cuBLASLt calls lib/cuda makes, for
 * tests/gpu/emu/run.sh: column-major GEMMs with the layouts, transposes,
 * batches and epilogues (bias; GELU keeping its input; GELU's derivative;
 * the bias gradient of B, in D's type) the descriptors say, as cuBLASLt's
 * documentation describes them; during a stream capture, recorded with
 * the descriptors' values of the call. */
#pragma once
#include "cuda_bf16.h"
#include "cuda_fp16.h"
#include "cuda_runtime.h"
#include <cstdint>

typedef enum { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_NOT_SUPPORTED = 15 } cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 } cublasOperation_t;
typedef enum { CUBLAS_COMPUTE_32F = 68 } cublasComputeType_t;
typedef enum { CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 } cudaDataType;
typedef enum { CUBLAS_GEMM_DEFAULT = -1 } cublasGemmAlgo_t;
typedef enum { CUBLAS_DEFAULT_MATH = 0 } cublasMath_t;
typedef enum { CUBLASLT_EPILOGUE_DEFAULT = 1, CUBLASLT_EPILOGUE_BIAS = 4, CUBLASLT_EPILOGUE_GELU_AUX = 160,
	       CUBLASLT_EPILOGUE_GELU_AUX_BIAS = 164, CUBLASLT_EPILOGUE_DGELU = 192,
	       CUBLASLT_EPILOGUE_BGRADB = 512 } cublasLtEpilogue_t;
typedef enum { CUBLASLT_MATMUL_DESC_TRANSA = 3, CUBLASLT_MATMUL_DESC_TRANSB = 4,
	       CUBLASLT_MATMUL_DESC_EPILOGUE = 7, CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,
	       CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER = 11, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD = 12 } cublasLtMatmulDescAttributes_t;
typedef enum { CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6 } cublasLtMatrixLayoutAttribute_t;
typedef enum { CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,
	       CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
	       CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8 } cublasLtMatmulPreferenceAttributes_t;

extern int emu_lt_found;
struct emu_desc { int ta = 0, tb = 0, epi = 1; const void *bias = nullptr; void *aux = nullptr; int64_t ldaux = 0; };
struct emu_layout { cudaDataType t; uint64_t rows, cols; int64_t ld; int32_t batch = 1; int64_t stride = 0; };
typedef emu_desc *cublasLtMatmulDesc_t;
typedef emu_layout *cublasLtMatrixLayout_t;
typedef int *cublasLtMatmulPreference_t;
typedef void *cublasLtHandle_t;
typedef void *cublasHandle_t;
struct cublasLtMatmulAlgo_t { int x; };
struct cublasLtMatmulHeuristicResult_t { cublasLtMatmulAlgo_t algo; size_t workspaceSize; cublasStatus_t state; };

static inline const char *cublasGetStatusString(cublasStatus_t) { return "emulated cublas error"; }
static inline cublasStatus_t cublasLtCreate(cublasLtHandle_t *h) { *h = (void *)1; return CUBLAS_STATUS_SUCCESS; }
static inline cublasStatus_t cublasLtDestroy(cublasLtHandle_t) { return CUBLAS_STATUS_SUCCESS; }
static inline cublasStatus_t cublasCreate(cublasHandle_t *h) { *h = (void *)1; return CUBLAS_STATUS_SUCCESS; }
static inline cublasStatus_t cublasDestroy(cublasHandle_t) { return CUBLAS_STATUS_SUCCESS; }
static inline cublasStatus_t cublasSetStream(cublasHandle_t, cudaStream_t) { return CUBLAS_STATUS_SUCCESS; }
static inline cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t) { return CUBLAS_STATUS_SUCCESS; }
static inline cublasStatus_t cublasSetWorkspace(cublasHandle_t, void *, size_t) { return CUBLAS_STATUS_SUCCESS; }
static inline cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t, cudaDataType) { *d = new emu_desc; return CUBLAS_STATUS_SUCCESS; }
static inline cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) { delete d; return CUBLAS_STATUS_SUCCESS; }
static inline cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, const void *v, size_t n)
{
	switch (a) {
	case CUBLASLT_MATMUL_DESC_TRANSA: if (n != 4) return CUBLAS_STATUS_NOT_SUPPORTED; memcpy(&d->ta, v, 4); break;
	case CUBLASLT_MATMUL_DESC_TRANSB: if (n != 4) return CUBLAS_STATUS_NOT_SUPPORTED; memcpy(&d->tb, v, 4); break;
	case CUBLASLT_MATMUL_DESC_EPILOGUE: if (n != 4) return CUBLAS_STATUS_NOT_SUPPORTED; memcpy(&d->epi, v, 4); break;
	case CUBLASLT_MATMUL_DESC_BIAS_POINTER: if (n != sizeof(void *)) return CUBLAS_STATUS_NOT_SUPPORTED; memcpy(&d->bias, v, n); break;
	case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: if (n != sizeof(void *)) return CUBLAS_STATUS_NOT_SUPPORTED; memcpy(&d->aux, v, n); break;
	case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: if (n != 8) return CUBLAS_STATUS_NOT_SUPPORTED; memcpy(&d->ldaux, v, 8); break;
	}
	return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType t, uint64_t r, uint64_t c, int64_t ld)
{
	if (ld < (int64_t)r) return CUBLAS_STATUS_NOT_SUPPORTED;
	*l = new emu_layout{t, r, c, ld};
	return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) { delete l; return CUBLAS_STATUS_SUCCESS; }
static inline cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t a, const void *v, size_t n)
{
	if (a == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT) { if (n != 4) return CUBLAS_STATUS_NOT_SUPPORTED; memcpy(&l->batch, v, 4); }
	else { if (n != 8) return CUBLAS_STATUS_NOT_SUPPORTED; memcpy(&l->stride, v, 8); }
	return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p) { *p = new int; return CUBLAS_STATUS_SUCCESS; }
static inline cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) { delete p; return CUBLAS_STATUS_SUCCESS; }
static inline cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t, cublasLtMatmulPreferenceAttributes_t a, const void *, size_t n)
{
	return (a == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES ? n == 8 : n == 4) ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_SUPPORTED;
}
/* EMU_LT_FOUND algorithms (default 1; 0: none for any shape), all the
 * same arithmetic, as many as asked for at most; the third, when asked
 * for, one cuBLASLt would name but refuse (its state), which a caller
 * passes over */
static inline cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatmulPreference_t, int want, cublasLtMatmulHeuristicResult_t *r, int *found)
{
	*found = emu_lt_found < want ? emu_lt_found : want;
	for (int i = 0; i < *found; i++)
		r[i] = {{i}, 0, i == 2 ? CUBLAS_STATUS_NOT_SUPPORTED : CUBLAS_STATUS_SUCCESS};
	return CUBLAS_STATUS_SUCCESS;
}
static inline float emu_ld(const void *p, cudaDataType t, int64_t i)
{
	if (t == CUDA_R_16BF) return gpt_bf16_to_f32(((const uint16_t *)p)[i]);
	if (t == CUDA_R_16F) return gpt_f16_to_f32(((const uint16_t *)p)[i]);
	return ((const float *)p)[i];
}
static inline void emu_st(void *p, cudaDataType t, int64_t i, float v)
{
	if (t == CUDA_R_16BF) ((uint16_t *)p)[i] = gpt_f32_to_bf16(v);
	else if (t == CUDA_R_16F) ((uint16_t *)p)[i] = gpt_f32_to_f16(v);
	else ((float *)p)[i] = v;
}
/* The tanh form of GELU and its derivative, in fp32. */
static inline float emu_gelu(float x, int deriv)
{
	const float s = 0.7978845608f, c = 0.044715f;
	float t = tanhf(s * (x + c * x * x * x));
	return deriv ? 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * s * (1.0f + 3.0f * c * x * x) : 0.5f * x * (1.0f + t);
}
/* column-major D = alpha op(A) op(B) + beta C (+ bias per row), m x n; with
 * epi GELU_AUX(_BIAS) that goes to aux (rounded) and D = gelu of it; with
 * DGELU, D = that times gelu' of aux; with BGRADB, bias (n, D's type)
 * gets the column sums of op(B) (k x n), in order. */
static inline void emu_gemm(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const void *A, cudaDataType t, int64_t lda, int64_t sa,
			    const void *B, int64_t ldb, int64_t sb, float beta, void *C, int64_t ldc, int64_t sc, int64_t batch, const void *bias,
			    int epi = CUBLASLT_EPILOGUE_DEFAULT, void *aux = nullptr, int64_t ldaux = 0)
{
	emu::dev_scope open;
	if (epi == CUBLASLT_EPILOGUE_BGRADB)
		for (int64_t j = 0; j < n; j++) {
			float s = 0;
			for (int64_t p = 0; p < k; p++)
				s += tb ? emu_ld(B, t, j + p * ldb) : emu_ld(B, t, p + j * ldb);
			emu_st((void *)bias, t, j, s);
		}
	for (int64_t bi = 0; bi < batch; bi++)
		for (int64_t i = 0; i < m; i++)
			for (int64_t j = 0; j < n; j++) {
				float s = 0;
				for (int64_t p = 0; p < k; p++) {
					float a = ta ? emu_ld(A, t, bi * sa + p + i * lda) : emu_ld(A, t, bi * sa + i + p * lda);
					float b = tb ? emu_ld(B, t, bi * sb + j + p * ldb) : emu_ld(B, t, bi * sb + p + j * ldb);
					s += a * b;
				}
				int64_t at = bi * sc + i + j * ldc;
				float v = alpha * s + (beta == 0 ? 0 : beta * emu_ld(C, t, at));
				if (bias && epi != CUBLASLT_EPILOGUE_BGRADB)
					v += emu_ld(bias, t, i);
				if (epi == CUBLASLT_EPILOGUE_GELU_AUX || epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS) {
					emu_st(aux, t, i + j * ldaux, v);
					v = emu_gelu(v, 0);
				} else if (epi == CUBLASLT_EPILOGUE_DGELU) {
					v *= emu_gelu(emu_ld(aux, t, i + j * ldaux), 1);
				}
				emu_st(C, t, at, v);
			}
}
static inline cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t d, const void *alpha, const void *A, cublasLtMatrixLayout_t la,
					    const void *B, cublasLtMatrixLayout_t lb, const void *beta, const void *C, cublasLtMatrixLayout_t lc,
					    void *D, cublasLtMatrixLayout_t ld, const cublasLtMatmulAlgo_t *, void *, size_t, cudaStream_t)
{
	if (C != D || lc != ld) return CUBLAS_STATUS_NOT_SUPPORTED;
	uint64_t m = lc->rows, n = lc->cols, k = d->ta ? la->rows : la->cols;
	if ((d->ta ? la->cols : la->rows) != m || (d->tb ? lb->cols : lb->rows) != k || (d->tb ? lb->rows : lb->cols) != n)
		return CUBLAS_STATUS_NOT_SUPPORTED;
	if (la->batch != lc->batch || lb->batch != lc->batch) return CUBLAS_STATUS_NOT_SUPPORTED;
	int aux = d->epi == CUBLASLT_EPILOGUE_GELU_AUX || d->epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || d->epi == CUBLASLT_EPILOGUE_DGELU;
	if (aux && (!d->aux || d->ldaux < (int64_t)m || d->ldaux % 8 || (uintptr_t)d->aux % 16 || lc->batch != 1))
		return CUBLAS_STATUS_NOT_SUPPORTED;
	int with_bias = d->epi == CUBLASLT_EPILOGUE_BIAS || d->epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
	if (d->epi == CUBLASLT_EPILOGUE_BGRADB && (!d->bias || (uintptr_t)d->bias % 16 || lc->batch != 1))
		return CUBLAS_STATUS_NOT_SUPPORTED;
	/* the descriptors' values as they are now: a capture keeps them */
	emu_desc dd = *d;
	emu_layout a = *la, b = *lb, c = *lc;
	float al = *(const float *)alpha, be = *(const float *)beta;
	emu::run_or_record([=] {
		emu_gemm(dd.ta, dd.tb, m, n, k, al, A, a.t, a.ld, a.stride, B, b.ld, b.stride, be, D, c.ld, c.stride,
			 c.batch, with_bias || dd.epi == CUBLASLT_EPILOGUE_BGRADB ? dd.bias : nullptr, dd.epi, dd.aux,
			 dd.ldaux);
	});
	return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasGemmStridedBatchedEx_64(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n, int64_t k,
							   const void *alpha, const void *A, cudaDataType t, int64_t lda, long long sa, const void *B,
							   cudaDataType, int64_t ldb, long long sb, const void *beta, void *C, cudaDataType, int64_t ldc,
							   long long sc, int64_t batch, cublasComputeType_t, cublasGemmAlgo_t)
{
	float al = *(const float *)alpha, be = *(const float *)beta;
	emu::run_or_record([=] { emu_gemm(ta, tb, m, n, k, al, A, t, lda, sa, B, ldb, sb, be, C, ldc, sc, batch, nullptr); });
	return CUBLAS_STATUS_SUCCESS;
}
