/* Softmax cross-entropy over vocabulary pieces (lib/cpu/softmax_xent.c's
 * contract): a block per row for the statistics, one pass over the logits
 * with an online maximum; the gradient in one more pass, in place allowed.
 * Both passes are memory-bound (GPT-2's head streams 128 MiB of logits a
 * row block through each): 16-byte loads and stores, 8 bf16 or fp16 (4
 * fp32) logits a thread at a time, when the rows start 16-byte aligned
 * (the columns after a row's last whole vector one a thread); element by
 * element otherwise. The statistics take each vector's maximum first, so
 * one rescale at most per vector, and a block of 1024 threads per row
 * (GPT-2's 1280 rows a block of the head: five waves of two blocks an SM,
 * little left idle in the last). The exponentials are __expf (see
 * xent_add). A target outside the vocabulary is left in the context's
 * error flag and reported by the next download or sync. */
#include "cuda/ops.cuh"

#include <math.h>

#define XENT_THREADS 1024

/* Columns of this piece that are real vocabulary, not padding. */
static int64_t real_cols(int64_t Vl, int64_t v0, int64_t V)
{
	int64_t n = V - v0;
	return n < 0 ? 0 : n < Vl ? n : Vl;
}

/* (m, s) := the pair whose sum is s e^m of both, -inf maxima adding 0. */
__device__ static void combine(float &m, float &s, float m2, float s2)
{
	float mm = fmaxf(m, m2);
	if (mm == -INFINITY)
		return;
	s = (m == -INFINITY ? 0.0f : s * expf(m - mm)) + (m2 == -INFINITY ? 0.0f : s2 * expf(m2 - mm));
	m = mm;
}

/* (m, s) := (m, s) with n more logits x: the new maximum first, then
 * one exponential each (__expf: a multiply and the hardware's 2^x, within
 * 2^-21 of expf here); none while every logit so far is -inf. */
__device__ __forceinline__ static void xent_add(float &m, float &s, const float *x, int n)
{
	float mx = x[0];
	for (int k = 1; k < n; k++)
		mx = fmaxf(mx, x[k]);
	if (mx > m) {
		s = m == -INFINITY ? 0.0f : s * __expf(m - mx);
		m = mx;
	}
	if (m == -INFINITY)
		return;
	for (int k = 0; k < n; k++)
		s += __expf(x[k] - m);
}

/* A row's statistics for a block of it: this thread's part of row (nr
 * real columns; with vec, the row 16-byte aligned, its whole vectors
 * first, two a thread at a time, then the columns after them), combined
 * over each warp, then over the warps by thread 0, whose (m, s) is the
 * row's (the others' are partial). sm and ss: a float a warp, shared. */
template <class T>
__device__ static void row_stats(float &m, float &s, const T *row, int64_t nr, int vec, float *sm,
				 float *ss)
{
	const int W = GPT_VEC(T);
	m = -INFINITY, s = 0.0f;
	int64_t nv = vec ? nr / W : 0, bd = blockDim.x;
	const uint4 *row4 = (const uint4 *)row;
	for (int64_t k = threadIdx.x; k < nv; k += 2 * bd) {
		/* both loads in flight before the arithmetic */
		uint4 u0 = row4[k], u1 = u0;
		if (k + bd < nv)
			u1 = row4[k + bd];
		float x[W];
		gpt_unpack<T>(x, u0);
		xent_add(m, s, x, W);
		if (k + bd < nv) {
			gpt_unpack<T>(x, u1);
			xent_add(m, s, x, W);
		}
	}
	for (int64_t j = nv * W + threadIdx.x; j < nr; j += bd) {
		float x = gpt_ld(row + j);
		xent_add(m, s, &x, 1);
	}
	for (int o = 16; o > 0; o >>= 1) {
		float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
		combine(m, s, m2, s2);
	}
	int warp = threadIdx.x / 32, nw = blockDim.x / 32;
	if (threadIdx.x % 32 == 0) {
		sm[warp] = m;
		ss[warp] = s;
	}
	__syncthreads();
	if (threadIdx.x != 0)
		return;
	m = sm[0];
	s = ss[0];
	for (int w = 1; w < nw; w++)
		combine(m, s, sm[w], ss[w]);
}

/* Block r: row r. */
template <class T>
__global__ static void __launch_bounds__(XENT_THREADS)
xent_fwd_kernel(float *max, float *sumexp, float *tlogit, const T *logits,
		const int32_t *targets, int64_t Vl, int64_t ld, int64_t v0, int64_t V, int64_t nr,
		int vec, int *bad)
{
	__shared__ float sm[XENT_THREADS / 32], ss[XENT_THREADS / 32];
	int64_t r = blockIdx.x;
	const T *row = logits + r * ld;
	float m, s;
	row_stats<T>(m, s, row, nr, vec, sm, ss);
	if (threadIdx.x != 0)
		return;
	int32_t tg = targets[r];
	int64_t t = (int64_t)tg - v0;
	if (tg >= V)
		gpt_cuda_note_bad(bad, GPT_CUDA_BAD_TARGET_FWD, r, tg, V);
	max[r] = m;
	sumexp[r] = s;
	tlogit[r] = tg >= 0 && t >= 0 && t < nr ? gpt_ld(row + t) : 0.0f;
}

/* 1 when every row of a (rows of ld elements of es bytes at p) starts
 * 16-byte aligned. */
static int rows_aligned(const void *p, int64_t ld, size_t es)
{
	return gpt_cuda_aligned(p) && (ld * (int64_t)es) % 16 == 0;
}

int gpt_cuda_xent_fwd(gpt_backend *be, float *max, float *sumexp, float *tlogit,
		      const void *logits, const int32_t *targets, int64_t N, int64_t Vl,
		      int64_t ld, int64_t v0, int64_t V, gpt_err *err)
{
	int rc = gpt_cuda_check_sizes("xent_fwd", err, 5, N, Vl, ld, v0, V);
	if (rc)
		return rc;
	if (ld < Vl)
		return gpt_err_set(err, GPT_EINTERNAL, "xent_fwd: row stride %lld is below the %lld columns",
				   (long long)ld, (long long)Vl);
	if (N == 0)
		return 0;
	int *bad = gpt_cuda_ctx_of(be)->bad;
	GPT_CUDA_DISPATCH(be->dtype, T,
		xent_fwd_kernel<T><<<(unsigned)N, XENT_THREADS, 0, gpt_cuda_stream(be)>>>(max, sumexp, tlogit, (const T *)logits, targets, Vl, ld, v0, V, real_cols(Vl, v0, V), rows_aligned(logits, ld, sizeof(T)), bad));
	return gpt_cuda_launched("xent_fwd", err);
}

__global__ static void xent_rescale_kernel(float *sumexp, const float *ml, const float *mg,
					   int64_t N)
{
	for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < N;
	     r += (int64_t)gridDim.x * blockDim.x)
		sumexp[r] = ml[r] == -INFINITY ? 0.0f : sumexp[r] * expf(ml[r] - mg[r]);
}

int gpt_cuda_xent_rescale(gpt_backend *be, float *sumexp, const float *max_local,
			  const float *max_global, int64_t N, gpt_err *err)
{
	int rc = gpt_cuda_check_sizes("xent_rescale", err, 1, N);
	if (rc || N == 0)
		return rc;
	xent_rescale_kernel<<<gpt_cuda_blocks(N, 256), 256, 0, gpt_cuda_stream(be)>>>(
		sumexp, max_local, max_global, N);
	return gpt_cuda_launched("xent_rescale", err);
}

__global__ static void xent_loss_kernel(float *loss, const float *max, const float *sumexp,
					const float *tlogit, const int32_t *targets, int64_t N)
{
	for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < N;
	     r += (int64_t)gridDim.x * blockDim.x)
		loss[r] = targets[r] < 0 ? 0.0f : logf(sumexp[r]) + max[r] - tlogit[r];
}

int gpt_cuda_xent_loss(gpt_backend *be, float *loss, const float *max, const float *sumexp,
		       const float *tlogit, const int32_t *targets, int64_t N, gpt_err *err)
{
	int rc = gpt_cuda_check_sizes("xent_loss", err, 1, N);
	if (rc || N == 0)
		return rc;
	xent_loss_kernel<<<gpt_cuda_blocks(N, 256), 256, 0, gpt_cuda_stream(be)>>>(
		loss, max, sumexp, tlogit, targets, N);
	return gpt_cuda_launched("xent_loss", err);
}

/* The gradient of one logit x of column j. */
__device__ __forceinline__ static float xent_g(float x, int64_t j, int64_t t, int64_t nr,
					       int32_t tg, float m, float inv, float dloss)
{
	if (tg < 0 || j >= nr)
		return 0.0f;
	return (__expf(x - m) * inv - (j == t ? 1.0f : 0.0f)) * dloss;
}

/* Block (r, y): columns of row r, grid-stride over y; with vec (both rows
 * 16-byte aligned) the row's whole vectors, then the columns after them. */
template <class T>
__global__ static void xent_bwd_kernel(T *dlogits, const T *logits, const int32_t *targets,
				       const float *max, const float *sumexp, float dloss,
				       int64_t Vl, int64_t ld, int64_t v0, int64_t V, int64_t nr,
				       int vec, int *bad)
{
	const int W = GPT_VEC(T);
	int64_t r = blockIdx.x;
	int32_t tg = targets[r];
	if (tg >= V && blockIdx.y == 0 && threadIdx.x == 0)
		gpt_cuda_note_bad(bad, GPT_CUDA_BAD_TARGET_BWD, r, tg, V);
	const T *row = logits + r * ld;
	T *drow = dlogits + r * ld;
	float m = max[r], inv = 1.0f / sumexp[r];
	int64_t t = (int64_t)tg - v0, nv = vec ? Vl / W : 0;
	int64_t i0 = blockIdx.y * (int64_t)blockDim.x + threadIdx.x, step = (int64_t)gridDim.y * blockDim.x;
	for (int64_t k = i0; k < nv; k += step) {
		float x[W];
		gpt_ld_vec(x, row + k * W);
#pragma unroll
		for (int e = 0; e < W; e++)
			x[e] = xent_g(x[e], k * W + e, t, nr, tg, m, inv, dloss);
		gpt_st_vec(drow + k * W, x);
	}
	for (int64_t j = nv * W + i0; j < Vl; j += step)
		gpt_st(drow + j, xent_g(gpt_ld(row + j), j, t, nr, tg, m, inv, dloss));
}

int gpt_cuda_xent_bwd(gpt_backend *be, void *dlogits, const void *logits,
		      const int32_t *targets, const float *max, const float *sumexp, float dloss,
		      int64_t N, int64_t Vl, int64_t ld, int64_t v0, int64_t V, gpt_err *err)
{
	int rc = gpt_cuda_check_sizes("xent_bwd", err, 5, N, Vl, ld, v0, V);
	if (rc)
		return rc;
	if (ld < Vl)
		return gpt_err_set(err, GPT_EINTERNAL, "xent_bwd: row stride %lld is below the %lld columns",
				   (long long)ld, (long long)Vl);
	if (N == 0 || Vl == 0)
		return 0;
	int *bad = gpt_cuda_ctx_of(be)->bad;
	GPT_CUDA_DISPATCH(be->dtype, T,
		int vec = rows_aligned(logits, ld, sizeof(T)) && rows_aligned(dlogits, ld, sizeof(T));
		/* a thread a vector (or a column), at most 64 blocks a row */
		int64_t yb = ((vec ? Vl / GPT_VEC(T) + Vl % GPT_VEC(T) : Vl) + 255) / 256;
		dim3 grid((unsigned)N, (unsigned)(yb > 64 ? 64 : yb));
		xent_bwd_kernel<T><<<grid, 256, 0, gpt_cuda_stream(be)>>>((T *)dlogits, (const T *)logits, targets, max, sumexp, dloss, Vl, ld, v0, V, real_cols(Vl, v0, V), vec, bad));
	return gpt_cuda_launched("xent_bwd", err);
}

/* xent_fwd, xent_loss and xent_bwd of row r in block r (tp = 1): the
 * statistics as xent_fwd's (vec: the logits' rows 16-byte aligned), then
 * the gradient as xent_bwd's (vecg: dlogits' too), the row read
 * again while it is in L2 (1024 threads a row, two blocks an SM: a few
 * hundred rows of 100 KiB in flight), not from memory. The same values as
 * the three kernels. (The row kept in shared memory instead, cp.async'd
 * for both passes, measured the same on an H100: 0.141 ms a call at 124M,
 * 2026-11-27, bench/RESULTS.md; the second read is not what bounds it.) */
template <class T>
__global__ static void __launch_bounds__(XENT_THREADS)
xent_fused_kernel(float *loss, float *max, float *sumexp, float *tlogit, T *dlogits, const T *logits,
		  const int32_t *targets, float dloss, int64_t Vl, int64_t ld, int64_t V, int64_t nr,
		  int vec, int vecg, int *bad)
{
	__shared__ float sm[XENT_THREADS / 32], ss[XENT_THREADS / 32];
	const int W = GPT_VEC(T);
	int64_t r = blockIdx.x;
	const T *row = logits + r * ld;
	T *drow = dlogits + r * ld;
	int32_t tg = targets[r];
	float m, s;
	row_stats<T>(m, s, row, nr, vec, sm, ss);
	if (threadIdx.x == 0) {
		if (tg >= V)
			gpt_cuda_note_bad(bad, GPT_CUDA_BAD_TARGET_FWD, r, tg, V);
		float tl = tg >= 0 && tg < nr ? gpt_ld(row + tg) : 0.0f;
		max[r] = m;
		sumexp[r] = s;
		tlogit[r] = tl;
		loss[r] = tg < 0 ? 0.0f : logf(s) + m - tl;
		sm[0] = m, ss[0] = s; /* for every thread (the target's logit is read first) */
	}
	__syncthreads();
	m = sm[0];
	float inv = 1.0f / ss[0];
	int64_t nv = vecg ? Vl / W : 0;
	for (int64_t k = threadIdx.x; k < nv; k += blockDim.x) {
		float x[W];
		gpt_ld_vec(x, row + k * W);
#pragma unroll
		for (int e = 0; e < W; e++)
			x[e] = xent_g(x[e], k * W + e, tg, nr, tg, m, inv, dloss);
		gpt_st_vec(drow + k * W, x);
	}
	for (int64_t j = nv * W + threadIdx.x; j < Vl; j += blockDim.x)
		gpt_st(drow + j, xent_g(gpt_ld(row + j), j, tg, nr, tg, m, inv, dloss));
}

int gpt_cuda_xent_fused(gpt_backend *be, float *loss, float *max, float *sumexp, float *tlogit,
			void *dlogits, const void *logits, const int32_t *targets, float dloss, int64_t N,
			int64_t Vl, int64_t ld, int64_t V, gpt_err *err)
{
	int rc = gpt_cuda_check_sizes("xent_fused", err, 4, N, Vl, ld, V);
	if (rc)
		return rc;
	if (ld < Vl)
		return gpt_err_set(err, GPT_EINTERNAL, "xent_fused: row stride %lld is below the %lld columns",
				   (long long)ld, (long long)Vl);
	if (N == 0)
		return 0;
	int *bad = gpt_cuda_ctx_of(be)->bad;
	GPT_CUDA_DISPATCH(be->dtype, T,
		/* the statistics in xent_fwd's order: its vectors where the logits allow */
		int vec = rows_aligned(logits, ld, sizeof(T)), vecg = vec && rows_aligned(dlogits, ld, sizeof(T));
		xent_fused_kernel<T><<<(unsigned)N, XENT_THREADS, 0, gpt_cuda_stream(be)>>>(loss, max, sumexp, tlogit, (T *)dlogits, (const T *)logits, targets, dloss, Vl, ld, V, real_cols(Vl, 0, V), vec, vecg, bad));
	return gpt_cuda_launched("xent_fused", err);
}
