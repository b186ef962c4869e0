/* Private to lib/cuda: the CUDA backend's context (be->impl), the dtype
 * helpers the kernels share, and the ops each .cu file defines for the table
 * in backend.cu. Kernels compute in fp32 whatever the storage dtype and round
 * to nearest even on store, as the CPU backend does (see backend/ops.h). */
#ifndef GPT_CUDA_OPS_CUH
#define GPT_CUDA_OPS_CUH

#include "cuda/common.cuh"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <pthread.h>
#include <stdint.h>

/* Errors a kernel finds in the data (a target outside the vocabulary) are
 * written to device memory and reported by the next sync or download: the
 * op itself returns before the kernel runs. */
enum { GPT_CUDA_BAD_NONE = 0, GPT_CUDA_BAD_TARGET_FWD, GPT_CUDA_BAD_TARGET_BWD, GPT_CUDA_BAD_KV_ROW };

/* An attention kernel's shape (attention_rows.cuh: which kernel, dropout or
 * not, the alignment path, head size, positions, heads) and the tile rows
 * it ran fastest in; GPT_CUDA_ATTN_PICKS (cuda.h) of them are remembered. */
typedef struct gpt_cuda_attn_pick {
	int kind, drop, vec;
	int64_t HS, T;
	uint32_t bhn;
	int rows;
} gpt_cuda_attn_pick;

/* A matrix product's shape as cuBLASLt sees it (gemm.cu's lt_matmul): all
 * 64-bit, so that keys compare and hash as bytes. dt and epi are cuBLASLt's
 * enums; bias and aux 1 when the epilogue takes those pointers; al_* the
 * alignments of the operands (told the heuristic) and of those pointers. */
typedef struct gpt_cuda_lt_key {
	int64_t dt, ta, tb, epi, bias, aux, ldaux;
	int64_t m, n, k, lda, ldb, ldc, sa, sb, sc, batch;
	int64_t al_a, al_b, al_c, al_bias, al_aux;
} gpt_cuda_lt_key;

/* The descriptors, layouts and algorithm cuBLASLt's heuristic gave for a
 * key (found 1), or that it has none (found 0); used 0 for a free entry.
 * Under gpt_cuda_gemm_tune the heuristic's first ncand candidates, timed
 * once (tuned 1 then, or when there is nothing to time). */
typedef struct gpt_cuda_lt_plan {
	gpt_cuda_lt_key key;
	int used, found;
	cublasLtMatmulDesc_t desc;
	cublasLtMatrixLayout_t la, lb, lc;
	cublasLtMatmulAlgo_t algo;
	int ncand, tuned;
	cublasLtMatmulAlgo_t cand[GPT_CUDA_GEMM_TUNE_MAX];
} gpt_cuda_lt_plan;
enum { GPT_CUDA_LT_PLANS = 256, GPT_CUDA_LT_PROBE = 8 };

typedef struct gpt_cuda_ctx {
	int device;
	cudaStream_t stream;
	cublasLtHandle_t lt;
	cublasHandle_t blas;
	void *workspace;          /* cuBLASLt workspace */
	size_t workspace_size;
	gpt_cuda_lt_plan *lt_plans; /* GPT_CUDA_LT_PLANS of them, made on first use (gemm.cu) */
	int *bad;                 /* device: {kind, row, target, V} of the last bad datum */
	int32_t *host_idx;        /* host and device buffers of embedding_bwd's row order */
	int32_t *dev_idx;
	int64_t idx_cap;          /* elements of each */
	int attn_rows;            /* gpt_cuda_attention_rows: 64, 128 or GPT_CUDA_ATTN_AUTO */
	int attn_kind_rows[3];    /* GPT_CUDA_ATTN_ROWS=F,Q,K: the forward's, dq's, dkv's (0: attn_rows) */
	int bgrad;                /* gpt_cuda_bias_grad: GPT_CUDA_BGRAD_SUMS or _GEMM */
	int64_t bgrad_gemms;      /* bias gradients the epilogue gave */
	int gemm_tune;            /* gpt_cuda_gemm_tune: candidates timed a shape */
	int64_t gemm_timed, gemm_moved; /* shapes timed, and those that took another */
	/* under GPT_CUDA_ATTN_AUTO, the rows each kernel and shape was timed
	 * fastest in (attention_tc.cu's pick_rows), and the last call's */
	gpt_cuda_attn_pick attn_pick[GPT_CUDA_ATTN_PICKS];
	int attn_npick;
	int attn_last[3];
	/* gpt_cuda_upload's pinned staging memory: two halves used in turn, each
	 * with the event of the copies from it (recorded when the other takes over) */
	pthread_mutex_t stage_mu;
	char *stage;
	size_t stage_at;          /* the next free byte */
	int stage_half;           /* the half in use */
	int stage_events;         /* 1 once stage_done was created */
	cudaEvent_t stage_done[2];
	/* gpt_cuda_mark's events, made on first use (marks_made of them), and
	 * gpt_cuda_copy_async's stream for copies to the device with the event
	 * gpt_cuda_copies_join records there (side_made 1 once made) */
	int marks_made;
	cudaEvent_t marks[GPT_CUDA_MARKS];
	int side_made;
	cudaStream_t side;
	cudaEvent_t side_done;
} gpt_cuda_ctx;

static inline gpt_cuda_ctx *gpt_cuda_ctx_of(gpt_backend *be)
{
	return (gpt_cuda_ctx *)be->impl;
}

static inline cudaStream_t gpt_cuda_stream(gpt_backend *be)
{
	return ((gpt_cuda_ctx *)be->impl)->stream;
}

/* Copies bytes from host memory to device memory on the backend's stream;
 * src may be reused on return. Up to GPT_CUDA_STAGED bytes the host does
 * not wait for the device: src is copied into pinned staging memory, and the
 * copy from there is queued on the stream. A larger copy waits for it. */
enum { GPT_CUDA_STAGED = 2 << 20 };
int gpt_cuda_upload(gpt_backend *be, void *dst, const void *src, size_t bytes, gpt_err *err);

/* Destroys the context's cuBLASLt plans (gemm.cu). */
void gpt_cuda_lt_plans_free(gpt_cuda_ctx *cx);

/* The result of the kernel launches just issued. */
static inline int gpt_cuda_launched(const char *op, gpt_err *err)
{
	return gpt_cuda_check(cudaGetLastError(), op, err);
}

/* The most blocks a grid has along y (and z) on every GPU. Kernels whose
 * grid.y counts rows of a sequence (a block per WARPS positions: T up to
 * Model.max_position_embeddings, 1048576) pass more than this; they launch
 * the grid in slices of at most GPT_CUDA_GRID_Y rows of blocks, each told
 * its first (gpt_cuda_grid_y). The emulation (tests/gpu/emu) makes the
 * slice smaller so its small shapes take several. */
#ifndef GPT_CUDA_GRID_Y
#define GPT_CUDA_GRID_Y 65535
#endif
#define gpt_cuda_grid_y(y0, ny) ((unsigned)((ny) - (y0) < GPT_CUDA_GRID_Y ? (ny) - (y0) : GPT_CUDA_GRID_Y))

/* Blocks for a grid-stride loop over n items. */
static inline unsigned gpt_cuda_blocks(int64_t n, int threads)
{
	int64_t b = (n + threads - 1) / threads;
	return (unsigned)(b < 1 ? 1 : b > 65535 ? 65535 : b);
}

/* Lets kernel k use shm bytes of dynamic shared memory (above 48 KiB needs asking). */
template <class K> static int allow_shm(K *k, size_t shm, const char *op, gpt_err *err)
{
	return gpt_cuda_check(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize,
						   (int)shm),
			      op, err);
}

/* Records a bad datum for check_bad (backend.cu) to report: its kind, the
 * row it is in and two numbers the message gives (xent: the target and
 * the vocabulary; attention_kv_rows: the slot and the position). Threads
 * that find several may mix their records; each is one of them. */
__device__ __forceinline__ void gpt_cuda_note_bad(int *bad, int kind, int64_t row, int64_t a, int64_t b)
{
	bad[1] = (int)row;
	bad[2] = (int)a;
	bad[3] = (int)b;
	bad[0] = kind;
}

/* ---- storage dtype helpers (device) ---- */
__device__ __forceinline__ float gpt_ld(const float *p) { return *p; }
__device__ __forceinline__ float gpt_ld(const __nv_bfloat16 *p) { return __bfloat162float(*p); }
__device__ __forceinline__ float gpt_ld(const __half *p) { return __half2float(*p); }
__device__ __forceinline__ void gpt_st(float *p, float v) { *p = v; }
__device__ __forceinline__ void gpt_st(__nv_bfloat16 *p, float v) { *p = __float2bfloat16_rn(v); }
__device__ __forceinline__ void gpt_st(__half *p, float v) { *p = __float2half_rn(v); }

/* ---- 16-byte vectors (device): the memory-bound kernels move a uint4 per
 * load and store (8 bf16 or fp16, 4 fp32), unpacked to fp32 in registers;
 * a load or store of 2 bytes a lane uses an eighth of each memory
 * transaction's width and takes eight times the instructions. The pointer
 * must be 16-byte aligned: the host chooses between the vector kernel and
 * a scalar one with gpt_cuda_aligned. */
#define GPT_VEC(T) ((int)(16 / sizeof(T)))

/* 1 when every pointer given is 16-byte aligned (NULL counts as aligned). */
static inline int gpt_cuda_aligned(const void *a, const void *b = NULL, const void *c = NULL,
				   const void *d = NULL)
{
	return ((uintptr_t)a | (uintptr_t)b | (uintptr_t)c | (uintptr_t)d) % 16 == 0;
}

/* An element-wise op over n elements: whole vectors of V when the pointers
 * allow (nv of them, one a thread), the rest from i0 one element a thread. */
static inline void gpt_cuda_vec_split(int64_t n, int V, int aligned, int64_t *nv, int64_t *i0)
{
	*nv = aligned ? n / V : 0;
	*i0 = *nv * V;
}

template <class T>
__device__ __forceinline__ void gpt_unpack(float *f, uint4 u)
{
	T e[GPT_VEC(T)];
	memcpy(e, &u, sizeof u);
#pragma unroll
	for (int i = 0; i < GPT_VEC(T); i++)
		f[i] = gpt_ld(e + i);
}

template <class T>
__device__ __forceinline__ uint4 gpt_pack(const float *f)
{
	T e[GPT_VEC(T)];
#pragma unroll
	for (int i = 0; i < GPT_VEC(T); i++)
		gpt_st(e + i, f[i]);
	uint4 u;
	memcpy(&u, e, sizeof u);
	return u;
}

/* The GPT_VEC(T) elements at p (16-byte aligned) as fp32, and back. */
template <class T>
__device__ __forceinline__ void gpt_ld_vec(float *f, const T *p)
{
	gpt_unpack<T>(f, *(const uint4 *)p);
}

template <class T>
__device__ __forceinline__ void gpt_st_vec(T *p, const float *f)
{
	*(uint4 *)p = gpt_pack<T>(f);
}

/* PTX cp.async: 16 bytes (or 4) from global src to shared dst without
 * the registers, zeros in place of them where !ok (src is then not read);
 * cp_commit closes a group of them, cp_wait<n> waits until at most the
 * newest n groups are in flight (sm_80 and later). */
template <int N> __device__ __forceinline__ void cp_async(void *dst, const void *src, bool ok)
{
	static_assert(N == 4 || N == 16, "cp.async copies 4 or 16 bytes here");
#ifdef GPT_CUDA_EMULATED
	emu::cp_async(dst, src, ok ? N : 0, N);
#else
	unsigned d = (unsigned)__cvta_generic_to_shared(dst);
	if constexpr (N == 16) /* past L1 */
		asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(d), "l"(src), "r"(ok ? 16 : 0)
			     : "memory");
	else
		asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(d), "l"(src), "r"(ok ? 4 : 0)
			     : "memory");
#endif
}

__device__ __forceinline__ void cp_commit(void)
{
#ifdef GPT_CUDA_EMULATED
	emu::cp_async_commit();
#else
	asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

template <int N> __device__ __forceinline__ void cp_wait(void)
{
#ifdef GPT_CUDA_EMULATED
	emu::cp_async_wait(N);
#else
	asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}

__device__ __forceinline__ float gpt_warp_sum(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

__device__ __forceinline__ float gpt_warp_max(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

/* Pass 2 of the column sums made in two passes (gemm.cu's bias gradients,
 * layernorm.cu's weight gradients): the sum over p of part[p * N + col],
 * in a block of (32, 8) threads whose x is the column's place. Thread (x,
 * y) adds parts y, y + 8, ... in order, then thread (x, 0) the 8 sums in
 * order; it gets the sum (the others 0). Every thread of the block calls
 * it (barriers), col < N or not; sh is the block's [8][33] floats, free
 * again when it returns. The same bits on every run. (A thread a column
 * adding all the parts in turn, 128 at 124M, took 12 us a call on an
 * H100, 2026-11-27: 0.6 ms of a step.) */
__device__ __forceinline__ float gpt_parts_sum(const float *part, int64_t parts, int64_t N, int64_t col,
					       float (*sh)[33])
{
	float s = 0.0f;
	if (col < N)
#pragma unroll 8
		for (int64_t p = threadIdx.y; p < parts; p += 8)
			s += part[p * N + col];
	sh[threadIdx.y][threadIdx.x] = s;
	__syncthreads();
	float t = 0.0f;
	if (threadIdx.y == 0)
		for (int i = 0; i < 8; i++)
			t += sh[i][threadIdx.x];
	__syncthreads();
	return t;
}

/* Runs `body` with T the element type of `dtype` (fp32, bf16 or fp16). */
#define GPT_CUDA_DISPATCH(dtype, T, ...)                       \
	switch (dtype) {                                       \
	case GPT_DTYPE_BF16: {                                 \
		typedef __nv_bfloat16 T;                       \
		__VA_ARGS__;                                   \
		break;                                         \
	}                                                      \
	case GPT_DTYPE_F16: {                                  \
		typedef __half T;                              \
		__VA_ARGS__;                                   \
		break;                                         \
	}                                                      \
	default: {                                             \
		typedef float T;                               \
		__VA_ARGS__;                                   \
		break;                                         \
	}                                                      \
	}

/* Fails with GPT_EINTERNAL unless every size is >= 0 (backend.cu). */
int gpt_cuda_check_sizes(const char *op, gpt_err *err, int count, ...);
/* Checks a dropout site (NULL allowed) as the CPU does (elementwise.cu). */
int gpt_cuda_dropout_check(const char *op, const gpt_dropout *d, gpt_err *err);
/* The convert op on the backend's stream (cast.cu). */
int gpt_cuda_convert_on(cudaStream_t s, void *dst, gpt_dtype dst_t, const void *src,
			gpt_dtype src_t, size_t n, gpt_err *err);

/* ---- the ops (backend/ops.h), one family per file ---- */
int gpt_cuda_gemm(gpt_backend *be, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
		  float alpha, const void *a, int64_t lda, const void *b, int64_t ldb, float beta,
		  void *c, int64_t ldc, gpt_err *err);
int gpt_cuda_gemm_batched(gpt_backend *be, int trans_a, int trans_b, int64_t m, int64_t n,
			  int64_t k, float alpha, const void *a, int64_t lda, int64_t stride_a,
			  const void *b, int64_t ldb, int64_t stride_b, float beta, void *c,
			  int64_t ldc, int64_t stride_c, int64_t batch, gpt_err *err);
int gpt_cuda_linear_fwd(gpt_backend *be, void *out, const void *inp, const void *w,
			const void *bias, int64_t M, int64_t K, int64_t N, gpt_err *err);
int gpt_cuda_linear_bwd(gpt_backend *be, void *dinp, void *dw, void *dbias, const void *dout,
			const void *inp, const void *w, int64_t M, int64_t K, int64_t N,
			gpt_err *err);
int gpt_cuda_bias_add(gpt_backend *be, void *out, const void *bias, int64_t M, int64_t N,
		      gpt_err *err);

int gpt_cuda_linear_gelu_fwd(gpt_backend *be, void *out, void *pre, const void *inp, const void *w,
			     const void *bias, int64_t M, int64_t K, int64_t N, gpt_err *err);
int gpt_cuda_linear_dgelu_bwd(gpt_backend *be, void *dinp, void *dw, void *dbias, const void *dout,
			      const void *inp, const void *w, const void *pre, int64_t M, int64_t K, int64_t N,
			      gpt_err *err);
int gpt_cuda_residual_layernorm_fwd(gpt_backend *be, void *res, void *out, float *mean, float *rstd,
				    const void *a, void *b, const void *w, const void *bias,
				    int64_t N, int64_t C, float eps, const gpt_dropout *d, int64_t T,
				    gpt_err *err);
int gpt_cuda_layernorm_fwd(gpt_backend *be, void *out, float *mean, float *rstd,
			   const void *inp, const void *w, const void *b, int64_t N, int64_t C,
			   float eps, gpt_err *err);
int gpt_cuda_layernorm_bwd(gpt_backend *be, void *dinp, void *dw, void *db, const void *dout,
			   const void *inp, const void *w, const float *mean, const float *rstd,
			   int64_t N, int64_t C, gpt_err *err);
int gpt_cuda_residual_layernorm_bwd(gpt_backend *be, void *dinp, void *dbranch, void *dw, void *db,
				    const void *dout, const void *inp, const void *w, const float *mean,
				    const float *rstd, int64_t N, int64_t C, const gpt_dropout *d, int64_t T,
				    gpt_err *err);
int gpt_cuda_gelu_fwd(gpt_backend *be, void *out, const void *inp, int64_t n, gpt_err *err);
int gpt_cuda_gelu_bwd(gpt_backend *be, void *dinp, const void *inp, const void *dout,
		      int64_t n, gpt_err *err);
int gpt_cuda_gelu_bwd_bias(gpt_backend *be, void *dinp, void *dbias, const void *inp, const void *dout,
			   int64_t M, int64_t N, gpt_err *err);

int gpt_cuda_attention_fwd(gpt_backend *be, void *out, float *saved, const void *qkv,
			   int64_t B, int64_t T, int64_t NH, int64_t HS, const gpt_dropout *d,
			   gpt_err *err);
int gpt_cuda_attention_bwd(gpt_backend *be, void *dqkv, const void *dout, const void *out,
			   const void *qkv, const float *saved, int64_t B, int64_t T, int64_t NH,
			   int64_t HS, const gpt_dropout *d, gpt_err *err);
int64_t gpt_cuda_attention_saved_size(gpt_backend *be, int64_t B, int64_t T, int64_t NH,
				      int64_t HS, int dropout);
int gpt_cuda_attention_kv(gpt_backend *be, void *out, void *kcache, void *vcache,
			  const void *qkv, int64_t B, int64_t Tn, int64_t t0, int64_t maxT,
			  int64_t NH, int64_t HS, gpt_err *err);
int gpt_cuda_attention_kv_rows(gpt_backend *be, void *out, void *kcache, void *vcache,
			       const void *qkv, int64_t n, const int32_t *slot, const int32_t *pos,
			       int64_t maxT, int64_t NH, int64_t HS, gpt_err *err);

int gpt_cuda_xent_fwd(gpt_backend *be, float *max, float *sumexp, float *tlogit,
		      const void *logits, const int32_t *targets, int64_t N, int64_t Vl,
		      int64_t ld, int64_t v0, int64_t V, gpt_err *err);
int gpt_cuda_xent_rescale(gpt_backend *be, float *sumexp, const float *max_local,
			  const float *max_global, int64_t N, gpt_err *err);
int gpt_cuda_xent_loss(gpt_backend *be, float *loss, const float *max, const float *sumexp,
		       const float *tlogit, const int32_t *targets, int64_t N, gpt_err *err);
int gpt_cuda_xent_bwd(gpt_backend *be, void *dlogits, const void *logits,
		      const int32_t *targets, const float *max, const float *sumexp, float dloss,
		      int64_t N, int64_t Vl, int64_t ld, int64_t v0, int64_t V, gpt_err *err);
int gpt_cuda_xent_fused(gpt_backend *be, float *loss, float *max, float *sumexp, float *tlogit,
			void *dlogits, const void *logits, const int32_t *targets, float dloss, int64_t N,
			int64_t Vl, int64_t ld, int64_t V, gpt_err *err);

int gpt_cuda_embedding_fwd(gpt_backend *be, void *out, const int32_t *tokens, const void *wte,
			   const void *wpe, int64_t B, int64_t T, int64_t C, int64_t v0,
			   int64_t Vl, int64_t t0, gpt_err *err);
int gpt_cuda_embedding_rows_fwd(gpt_backend *be, void *out, const int32_t *tokens, const int32_t *pos,
				const void *wte, const void *wpe, int64_t N, int64_t C, int64_t v0,
				int64_t Vl, gpt_err *err);
int gpt_cuda_embedding_bwd(gpt_backend *be, void *dwte, void *dwpe, const void *dout,
			   const int32_t *tokens, int64_t B, int64_t T, int64_t C, int64_t v0,
			   int64_t Vl, int64_t t0, gpt_err *err);
int gpt_cuda_residual_fwd(gpt_backend *be, void *out, const void *a, const void *b, int64_t n,
			  gpt_err *err);
int gpt_cuda_residual_bwd(gpt_backend *be, void *da, void *db, const void *dout, int64_t n,
			  gpt_err *err);
int gpt_cuda_dropout_fwd(gpt_backend *be, void *out, const void *inp, int64_t B, int64_t T,
			 int64_t F, const gpt_dropout *d, gpt_err *err);
int gpt_cuda_dropout_bwd(gpt_backend *be, void *dinp, const void *dout, int64_t B, int64_t T,
			 int64_t F, const gpt_dropout *d, gpt_err *err);

int gpt_cuda_adamw_runs(gpt_backend *be, void *param, float *master, uint16_t *lo, const void *grad, float *m,
			float *v, const gpt_adamw_run *runs, int64_t nruns, const gpt_adamw *h, gpt_err *err);
int gpt_cuda_adamw(gpt_backend *be, void *param, float *master, uint16_t *lo, const void *grad,
		   float *m, float *v, int64_t n, const gpt_adamw *h, gpt_err *err);
int gpt_cuda_sum_squares(gpt_backend *be, float *acc, const void *x, int64_t n, gpt_err *err);
int gpt_cuda_check_finite(gpt_backend *be, float *flag, const void *x, int64_t n,
			  gpt_err *err);

/* quant.cu: quantization-aware training */
int gpt_cuda_quant_absmax(gpt_backend *be, float *scale, const void *x, int64_t rows,
			  int64_t cols, int per_row, int accumulate, gpt_err *err);
int gpt_cuda_fake_quant(gpt_backend *be, void *out, const void *x, const float *scale,
			int64_t rows, int64_t cols, int per_row, int bits, gpt_err *err);
int gpt_cuda_quant_moving_avg(gpt_backend *be, float *state, float *accum, float *scale,
			      const float *cur, int64_t n, float rate, int commit, gpt_err *err);
int gpt_cuda_pact_fwd(gpt_backend *be, void *out, const void *x, const float *alpha, int64_t n,
		      gpt_err *err);
int gpt_cuda_pact_bwd(gpt_backend *be, void *dx, float *dalpha, const void *dy, const void *x,
		      const float *alpha, int64_t n, int accumulate, gpt_err *err);

#endif
