/* Causal multi-head attention, forward and backward, in the flash-attention
 * manner: no T x T matrix in memory; the forward keeps only each row's
 * log-sum-exp (fp32), the backward recomputes the probabilities from it and
 * regenerates the dropout mask from its Philox coordinates.
 *
 * This file is the general path: fp32 arithmetic on the CUDA cores (a warp
 * per query or key row, 32-key tiles in shared memory), correct and
 * memory-lean rather than fast, for head sizes up to 128. bf16 and fp16
 * storage with a head size that is a multiple of 16 go to the tensor-core
 * kernels of attention_tc.cu instead (same semantics; they also save the
 * output's low half, gpt_attention_flash_saved); fp32 storage and other
 * head sizes stay here.
 *
 * Backward without the forward's output (this path does not read it): a
 * first pass per query row finds D_i = sum_j p_ij dp_ij (dp: the gradient
 * of the dropped probabilities), a second pass accumulates dq, and a kernel
 * per key row accumulates dk and dv; each output element has one writer, so
 * the results are the same bits on every run. */
#include "config/config.h"
#include "cuda/attention.cuh"

#include <math.h>
#include <string.h>

#define WARPS 8     /* rows per block */
#define TILE 32     /* keys (or queries) per shared-memory tile */
#define MAX_HS GPT_GPU_MAX_HEAD_SIZE /* the config refuses more on gpu */
#define DPL (MAX_HS / 32) /* head dimensions per lane */

/* Rows [j0, j0 + TILE) of a (T, HS) slice at base with row stride `stride`
 * (a head's q, k or v in qkv, or its dout) into a (TILE, HS + 1) fp32
 * tile, the padding column keeping lanes on distinct banks; zeros past T. */
template <class E>
__device__ static void load_tile(float *tile, const E *base, int64_t stride, int64_t j0,
				 const attn_args &a)
{
	int ld = (int)a.HS + 1;
	for (int e = threadIdx.x; e < TILE * a.HS; e += blockDim.x) {
		int jj = e / (int)a.HS, dd = e % (int)a.HS;
		int64_t j = j0 + jj;
		tile[jj * ld + dd] = j < a.T ? gpt_ld(base + j * stride + dd) : 0.0f;
	}
}

/* The key and value tiles at j0 of a head (base: its q in qkv), between
 * block barriers: the last tile's readers are done, the new tile is in. */
template <class E>
__device__ static void load_kv(float *ks, float *vs, const E *base, int64_t j0,
			       const attn_args &a)
{
	int64_t Cl = a.NH * a.HS;
	__syncthreads();
	load_tile(ks, base + Cl, 3 * Cl, j0, a);
	load_tile(vs, base + 2 * Cl, 3 * Cl, j0, a);
	__syncthreads();
}

__device__ __forceinline__ float dot_sh(const float *x, const float *y, int64_t n)
{
	float s = 0.0f;
	for (int64_t d = 0; d < n; d++)
		s += x[d] * y[d];
	return s;
}

/* grid (B*NH, ceil(T/WARPS)); warp w: query row i. */
template <class E>
__global__ static void attn_fwd_kernel(E *out, float *lse, const E *qkv, attn_args a)
{
	extern __shared__ float sh[];
	int ld = (int)a.HS + 1, HS = (int)a.HS;
	float *ks = sh, *vs = ks + TILE * ld, *qs = vs + TILE * ld;
	int64_t bh = blockIdx.x, b = bh / a.NH, h = bh % a.NH;
	int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	int64_t i0 = (a.y0 + blockIdx.y) * WARPS, i = i0 + warp;
	int64_t Cl = a.NH * a.HS, C3 = 3 * Cl;
	const E *base = qkv + b * a.T * C3 + h * a.HS;
	float *q = qs + warp * HS;
	if (i < a.T)
		for (int dd = lane; dd < HS; dd += 32)
			q[dd] = gpt_ld(base + i * C3 + dd);
	float m = -INFINITY, l = 0.0f, acc[DPL] = {0.0f, 0.0f, 0.0f, 0.0f};
	int64_t imax = i0 + WARPS - 1 < a.T - 1 ? i0 + WARPS - 1 : a.T - 1;
	for (int64_t j0 = 0; j0 <= imax; j0 += TILE) {
		load_kv(ks, vs, base, j0, a);
		if (i >= a.T || j0 > i)
			continue;
		int64_t j = j0 + lane;
		float s = j <= i ? dot_sh(q, ks + lane * ld, HS) * a.sc : -INFINITY;
		float mn = fmaxf(m, gpt_warp_max(s));
		float p = j <= i ? expf(s - mn) : 0.0f;
		float corr = expf(m - mn);
		l = l * corr + gpt_warp_sum(p);
		for (int r = 0; r < DPL; r++)
			acc[r] *= corr;
		float pd = j <= i ? p * keep(a, b, h, i, j) : 0.0f;
		int nj = i - j0 + 1 < TILE ? (int)(i - j0 + 1) : TILE;
		for (int jj = 0; jj < nj; jj++) {
			float pj = __shfl_sync(0xffffffffu, pd, jj);
			for (int r = 0; r < DPL; r++) {
				int dd = lane + 32 * r;
				if (dd < HS)
					acc[r] += pj * vs[jj * ld + dd];
			}
		}
		m = mn;
	}
	if (i >= a.T)
		return;
	float inv = 1.0f / l;
	E *o = out + (b * a.T + i) * Cl + h * a.HS;
	for (int r = 0; r < DPL; r++) {
		int dd = lane + 32 * r;
		if (dd < HS)
			gpt_st(o + dd, acc[r] * inv);
	}
	if (lane == 0)
		lse[bh * a.T + i] = m + logf(l);
}

/* grid (B*NH, ceil(T/WARPS)); warp w: query row i. Pass 1 finds D_i, pass 2
 * accumulates dq_i = sc sum_j p_ij (dp_ij - D_i) k_j. */
template <class E>
__global__ static void attn_bwd_dq_kernel(E *dqkv, float *Dv, const E *dout, const E *qkv,
					  const float *lse, attn_args a)
{
	extern __shared__ float sh[];
	int ld = (int)a.HS + 1, HS = (int)a.HS;
	float *ks = sh, *vs = ks + TILE * ld, *qs = vs + TILE * ld, *gs = qs + WARPS * HS;
	int64_t bh = blockIdx.x, b = bh / a.NH, h = bh % a.NH;
	int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	int64_t i0 = (a.y0 + blockIdx.y) * WARPS, i = i0 + warp;
	int64_t Cl = a.NH * a.HS, C3 = 3 * Cl;
	const E *base = qkv + b * a.T * C3 + h * a.HS;
	float *q = qs + warp * HS, *g = gs + warp * HS;
	float L = 0.0f;
	if (i < a.T) {
		for (int dd = lane; dd < HS; dd += 32) {
			q[dd] = gpt_ld(base + i * C3 + dd);
			g[dd] = gpt_ld(dout + (b * a.T + i) * Cl + h * a.HS + dd);
		}
		L = lse[bh * a.T + i];
	}
	int64_t imax = i0 + WARPS - 1 < a.T - 1 ? i0 + WARPS - 1 : a.T - 1;
	float D = 0.0f, acc[DPL] = {0.0f, 0.0f, 0.0f, 0.0f};
	for (int pass = 0; pass < 2; pass++) {
		float dpart = 0.0f;
		for (int64_t j0 = 0; j0 <= imax; j0 += TILE) {
			load_kv(ks, vs, base, j0, a);
			if (i >= a.T || j0 > i)
				continue;
			int64_t j = j0 + lane;
			float p = 0.0f, dp = 0.0f;
			if (j <= i) {
				p = expf(dot_sh(q, ks + lane * ld, HS) * a.sc - L);
				dp = dot_sh(g, vs + lane * ld, HS) * keep(a, b, h, i, j);
			}
			if (pass == 0) {
				dpart += p * dp;
				continue;
			}
			float ds = p * (dp - D);
			int nj = i - j0 + 1 < TILE ? (int)(i - j0 + 1) : TILE;
			for (int jj = 0; jj < nj; jj++) {
				float dsj = __shfl_sync(0xffffffffu, ds, jj);
				for (int r = 0; r < DPL; r++) {
					int dd = lane + 32 * r;
					if (dd < HS)
						acc[r] += dsj * ks[jj * ld + dd];
				}
			}
		}
		if (pass == 0)
			D = gpt_warp_sum(dpart);
	}
	if (i >= a.T)
		return;
	E *dq = dqkv + (b * a.T + i) * C3 + h * a.HS;
	for (int r = 0; r < DPL; r++) {
		int dd = lane + 32 * r;
		if (dd < HS)
			gpt_st(dq + dd, acc[r] * a.sc);
	}
	if (lane == 0)
		Dv[bh * a.T + i] = D;
}

/* grid (B*NH, ceil(T/WARPS)); warp w: key row j, over the queries i >= j:
 * dv_j = sum_i pd_ij dout_i, dk_j = sc sum_i p_ij (dp_ij - D_i) q_i. */
template <class E>
__global__ static void attn_bwd_dkv_kernel(E *dqkv, const E *dout, const E *qkv,
					   const float *lse, const float *Dv, attn_args a)
{
	extern __shared__ float sh[];
	int ld = (int)a.HS + 1, HS = (int)a.HS;
	float *qs = sh, *gs = qs + TILE * ld, *kr = gs + TILE * ld, *vr = kr + WARPS * HS;
	float *Ls = vr + WARPS * HS, *Ds = Ls + TILE;
	int64_t bh = blockIdx.x, b = bh / a.NH, h = bh % a.NH;
	int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	int64_t j0b = (a.y0 + blockIdx.y) * WARPS, j = j0b + warp;
	int64_t Cl = a.NH * a.HS, C3 = 3 * Cl;
	const E *base = qkv + b * a.T * C3 + h * a.HS;
	const E *gbase = dout + b * a.T * Cl + h * a.HS;
	float *k = kr + warp * HS, *v = vr + warp * HS;
	if (j < a.T)
		for (int dd = lane; dd < HS; dd += 32) {
			k[dd] = gpt_ld(base + j * C3 + Cl + dd);
			v[dd] = gpt_ld(base + j * C3 + 2 * Cl + dd);
		}
	float dk[DPL] = {0.0f, 0.0f, 0.0f, 0.0f}, dv[DPL] = {0.0f, 0.0f, 0.0f, 0.0f};
	for (int64_t i0 = j0b / TILE * TILE; i0 < a.T; i0 += TILE) {
		__syncthreads();
		load_tile(qs, base, C3, i0, a);
		load_tile(gs, gbase, Cl, i0, a);
		if (threadIdx.x < TILE) {
			int64_t i = i0 + threadIdx.x;
			Ls[threadIdx.x] = i < a.T ? lse[bh * a.T + i] : 0.0f;
			Ds[threadIdx.x] = i < a.T ? Dv[bh * a.T + i] : 0.0f;
		}
		__syncthreads();
		if (j >= a.T || i0 + TILE - 1 < j)
			continue;
		int64_t i = i0 + lane;
		float pd = 0.0f, ds = 0.0f;
		if (i >= j && i < a.T) {
			float p = expf(dot_sh(qs + lane * ld, k, HS) * a.sc - Ls[lane]);
			float f = keep(a, b, h, i, j);
			pd = p * f;
			ds = p * (dot_sh(gs + lane * ld, v, HS) * f - Ds[lane]);
		}
		int lo = j > i0 ? (int)(j - i0) : 0;
		int hi = a.T - i0 < TILE ? (int)(a.T - i0) : TILE;
		for (int ii = lo; ii < hi; ii++) {
			float pdi = __shfl_sync(0xffffffffu, pd, ii);
			float dsi = __shfl_sync(0xffffffffu, ds, ii);
			for (int r = 0; r < DPL; r++) {
				int dd = lane + 32 * r;
				if (dd < HS) {
					dv[r] += pdi * gs[ii * ld + dd];
					dk[r] += dsi * qs[ii * ld + dd];
				}
			}
		}
	}
	if (j >= a.T)
		return;
	E *o = dqkv + (b * a.T + j) * C3 + h * a.HS;
	for (int r = 0; r < DPL; r++) {
		int dd = lane + 32 * r;
		if (dd < HS) {
			gpt_st(o + Cl + dd, dk[r] * a.sc);
			gpt_st(o + 2 * Cl + dd, dv[r]);
		}
	}
}

int64_t gpt_cuda_attention_saved_size(gpt_backend *be, int64_t B, int64_t T, int64_t NH,
				      int64_t HS, int dropout)
{
	return gpt_attention_flash_saved(be->dtype, B, T, NH, HS, dropout);
}

static int check(const char *op, int64_t B, int64_t T, int64_t NH, int64_t HS,
		 const gpt_dropout *d, attn_args *a, gpt_err *err)
{
	int rc = gpt_cuda_check_sizes(op, err, 4, B, T, NH, HS);
	if (!rc)
		rc = gpt_cuda_dropout_check(op, d, err);
	if (rc)
		return rc;
	if (HS == 0)
		return gpt_err_set(err, GPT_EINTERNAL, "%s: head size is 0", op);
	if (HS > MAX_HS)
		return gpt_err_set(err, GPT_EUSAGE,
				   "%s: head size %lld is above the cuda kernel's %d; use more heads",
				   op, (long long)HS, MAX_HS);
	if (B * NH > INT32_MAX)
		return gpt_err_set(err, GPT_EINTERNAL, "%s: %lld sequences of heads do not fit one grid",
				   op, (long long)(B * NH));
	a->T = T;
	a->y0 = 0;
	a->NH = NH;
	a->HS = HS;
	a->sc = 1.0f / sqrtf((float)HS);
	a->drop = d && d->p > 0.0f;
	a->thr = a->drop ? gpt_dropout_threshold(d->p) : 0;
	a->dscale = a->drop ? gpt_dropout_scale(d->p) : 1.0f;
	if (d)
		a->d = *d;
	else
		memset(&a->d, 0, sizeof a->d);
	return 0;
}

int gpt_cuda_attention_fwd(gpt_backend *be, void *out, float *saved, const void *qkv,
			   int64_t B, int64_t T, int64_t NH, int64_t HS, const gpt_dropout *d,
			   gpt_err *err)
{
	attn_args a;
	int rc = check("attention_fwd", B, T, NH, HS, d, &a, err);
	if (rc || B * NH * T == 0)
		return rc;
	if (gpt_cuda_attention_tensor_cores(be->dtype, HS))
		return gpt_cuda_attention_tc_fwd(be, out, saved, qkv, B, &a, err);
	/* grid.y: a block per WARPS rows, in slices (a million positions
	 * are 131072 blocks) */
	int64_t ny = (T + WARPS - 1) / WARPS;
	size_t shm = (size_t)(2 * TILE * (HS + 1) + WARPS * HS) * sizeof(float);
	for (a.y0 = 0; a.y0 < ny; a.y0 += GPT_CUDA_GRID_Y) {
		dim3 grid((unsigned)(B * NH), gpt_cuda_grid_y(a.y0, ny));
		GPT_CUDA_DISPATCH(be->dtype, E,
			attn_fwd_kernel<E><<<grid, WARPS * 32, shm, gpt_cuda_stream(be)>>>((E *)out, saved, (const E *)qkv, a));
	}
	return gpt_cuda_launched("attention_fwd", err);
}

int gpt_cuda_attention_bwd(gpt_backend *be, void *dqkv, const void *dout, const void *out,
			   const void *qkv, const float *saved, int64_t B, int64_t T, int64_t NH,
			   int64_t HS, const gpt_dropout *d, gpt_err *err)
{
	attn_args a;
	int rc = check("attention_bwd", B, T, NH, HS, d, &a, err);
	if (rc || B * NH * T == 0)
		return rc;
	if ((rc = gpt_backend_scratch(be, (size_t)(B * NH * T) * sizeof(float), err)))
		return rc;
	float *Dv = (float *)be->scratch;
	if (gpt_cuda_attention_tensor_cores(be->dtype, HS))
		return gpt_cuda_attention_tc_bwd(be, dqkv, Dv, dout, out, qkv, saved, B, &a, err);
	cudaStream_t s = gpt_cuda_stream(be);
	int64_t ny = (T + WARPS - 1) / WARPS;
	size_t shm = (size_t)(2 * TILE * (HS + 1) + 2 * WARPS * HS + 2 * TILE) * sizeof(float);
	/* every row's D before any key row reads the later rows' (one stream) */
	for (a.y0 = 0; a.y0 < ny; a.y0 += GPT_CUDA_GRID_Y) {
		dim3 grid((unsigned)(B * NH), gpt_cuda_grid_y(a.y0, ny));
		GPT_CUDA_DISPATCH(be->dtype, E,
			attn_bwd_dq_kernel<E><<<grid, WARPS * 32, shm, s>>>((E *)dqkv, Dv, (const E *)dout, (const E *)qkv, saved, a));
	}
	for (a.y0 = 0; a.y0 < ny; a.y0 += GPT_CUDA_GRID_Y) {
		dim3 grid((unsigned)(B * NH), gpt_cuda_grid_y(a.y0, ny));
		GPT_CUDA_DISPATCH(be->dtype, E,
			attn_bwd_dkv_kernel<E><<<grid, WARPS * 32, shm, s>>>((E *)dqkv, (const E *)dout, (const E *)qkv, saved, Dv, a));
	}
	return gpt_cuda_launched("attention_bwd", err);
}
