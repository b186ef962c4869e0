/* Causal attention on the tensor cores for bf16 and fp16 storage: the same
 * op, semantics and saved statistics as attention.cu (which dispatches here
 * when gpt_cuda_attention_tensor_cores), with the products on WMMA tiles.
 *
 * Products: nvcuda::wmma 16x16x16 tiles, bf16/fp16 operands, fp32
 * accumulators, used only in layout-agnostic ways (load, store, mma, fill
 * and uniform scaling), so the code makes no assumption about which lane
 * holds which element. Everything row-wise (the causal mask, maxima,
 * exponentials, dropout, row sums) runs on ordinary threads over a score
 * tile stored to shared memory; the probabilities (or their gradients) are
 * rounded to the storage dtype there and loaded back as an A operand, as
 * in FlashAttention. Softmax statistics, the output and the gradients
 * accumulate in fp32; 1/sqrt(HS) scales the scores in fp32.
 *
 * Blocks of 4 warps own 64 query rows (or 64 keys), 16 per warp, and walk
 * 64-wide tiles of the other side up to the diagonal; a warp's rows are
 * processed by its own lanes (two per row), so a tile costs two block
 * barriers (for the shared K/V or Q/dO tile) and otherwise warp barriers.
 * The head dimension is padded with zeros to W = 32, 64 or 128 (NF = W/16
 * accumulator tiles per warp); products skip the padding.
 *   forward   grid (B*NH, T/64), the longest query tiles first: S = Q K^T,
 *             online softmax (the output tiles, kept in registers, are
 *             rescaled through shared memory when a row's maximum moves),
 *             O += P V; writes O / l and lse = m + log l per row.
 *   dq        grid (B*NH, T/64): per query tile, a first walk over the keys
 *             finds D_i = sum_j p_ij dp_ij (dp: the dropped probabilities'
 *             gradient; the op has no O, so D is not rowsum(dO * O)), a
 *             second recomputes S and dP = dO V^T and accumulates
 *             dQ += dS K, dS = P * (dP - D); writes dq and D.
 *   dkv       grid (B*NH, T/64): per key tile, over the query tiles at or
 *             after it: S^T = K Q^T, dP^T = V dO^T, dV += (P*mask)^T dO,
 *             dK += dS^T Q.
 * Every output element has one writer and no atomics are used, so the
 * results are the same bits on every run. Dropout factors come from keep()
 * (attention.cuh), the CPU's Philox coordinates. Nothing T x T is stored.
 *
 * Shared memory per block (16-bit storage) at W = 64: forward 53 KiB, dq
 * 79 KiB, dkv 88.5 KiB; at W = 128: 93, 111 and 120.5 KiB (above 48 KiB,
 * asked for with cudaFuncSetAttribute). On an H100 at HS = 64 (ptxas for
 * sm_90: about 168 registers a thread in each kernel) that is 3 forward
 * blocks per SM (12 warps, register-bound) and 2 backward blocks (8 warps,
 * shared-memory-bound). Limits: head sizes that are multiples of 16 up to
 * 128 (others, and fp32 storage, use attention.cu). Tiles are copied 16
 * bytes at a time when qkv and dout are 16-byte aligned, element by element
 * otherwise. */
#include "cuda/attention.cuh"

#include <math.h>
#include <mma.h>

using namespace nvcuda;

#define BQ 64             /* query rows per tile */
#define BK 64             /* keys per tile */
#define NTHR 128          /* 4 warps, 16 rows each */
#define LP (BK + 8)       /* row stride (elements) of a 16-bit probability tile */
#define LS (BK + 4)       /* row stride of an fp32 score tile */

typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc_t;
template <class E> using a_row = wmma::fragment<wmma::matrix_a, 16, 16, 16, E, wmma::row_major>;
template <class E> using b_row = wmma::fragment<wmma::matrix_b, 16, 16, 16, E, wmma::row_major>;
template <class E> using b_col = wmma::fragment<wmma::matrix_b, 16, 16, 16, E, wmma::col_major>;

/* Rows [r0, r0 + 64) of a (T, HS) slice at base with row stride `stride`
 * into a (64, W) tile of row stride W + 8 (16 bytes of padding, which
 * spreads the rows over the banks), zeros past T and past HS. */
template <class E, int W>
__device__ static void load_tile(E *tile, const E *base, int64_t stride, int64_t r0,
				 const attn_args &a, int vec)
{
	const int ld = W + 8;
	if (vec) {
		for (int e = threadIdx.x; e < 64 * (W / 8); e += NTHR) {
			int rr = e / (W / 8), d = e % (W / 8) * 8;
			int64_t r = r0 + rr;
			uint4 v = {0u, 0u, 0u, 0u};
			if (r < a.T && d < a.HS)
				v = *(const uint4 *)(base + r * stride + d);
			*(uint4 *)(tile + rr * ld + d) = v;
		}
		return;
	}
	for (int e = threadIdx.x; e < 64 * W; e += NTHR) {
		int rr = e / W, d = e % W;
		int64_t r = r0 + rr;
		if (r < a.T && d < a.HS)
			tile[rr * ld + d] = base[r * stride + d];
		else
			gpt_st(tile + rr * ld + d, 0.0f);
	}
}

/* The key and value tiles at j0 of a head (base: its q in qkv), between
 * block barriers: the last tile's readers are done, the new tile is in. */
template <class E, int W>
__device__ static void load_kv(E *ks, E *vs, const E *base, int64_t j0, const attn_args &a,
			       int vec)
{
	int64_t Cl = a.NH * a.HS;
	__syncthreads();
	load_tile<E, W>(ks, base + Cl, 3 * Cl, j0, a, vec);
	load_tile<E, W>(vs, base + 2 * Cl, 3 * Cl, j0, a, vec);
	__syncthreads();
}

/* acc = A B for a warp: A the 16 rows at a (row stride lda), B^T the 16
 * rows at b (row stride ldb), over kf 16-wide steps, then scaled. */
template <class E>
__device__ __forceinline__ void mm_abt(acc_t &acc, const E *a, int lda, const E *b, int ldb,
				       int kf, float scale)
{
	wmma::fill_fragment(acc, 0.0f);
	for (int k = 0; k < kf; k++) {
		a_row<E> fa;
		b_col<E> fb;
		wmma::load_matrix_sync(fa, a + k * 16, lda);
		wmma::load_matrix_sync(fb, b + k * 16, ldb);
		wmma::mma_sync(acc, fa, fb, acc);
	}
	for (int e = 0; e < acc.num_elements; e++)
		acc.x[e] *= scale;
}

/* The backward's two products for a warp, over the 16-wide column blocks
 * [c0, c1): s = sc x y^T (scores) and dp = g z^T (their dropped
 * probabilities' gradients), stored at row stride LS; x and g are the
 * warp's 16 rows, y and z the other side's tiles, all at row stride le. */
template <class E>
__device__ static void score_grads(float *s, float *dp, const E *x, const E *y, const E *g,
				   const E *z, int le, int c0, int c1, int kf, float sc)
{
	for (int c = c0; c < c1; c++) {
		acc_t st, dt;
		mm_abt(st, x, le, y + c * 16 * le, le, kf, sc);
		wmma::store_matrix_sync(s + c * 16, st, LS, wmma::mem_row_major);
		mm_abt(dt, g, le, z + c * 16 * le, le, kf, 1.0f);
		wmma::store_matrix_sync(dp + c * 16, dt, LS, wmma::mem_row_major);
	}
}

/* acc[d] += A M[:, 16d, 16d + 16) for a warp and each of the kf head
 * tiles: A the 16 rows at a (row stride lda), columns [16 k0, 16 k1), a
 * probability tile or its gradient; M rows [16 k0, 16 k1) at m (row stride
 * ldm), a value, key, query or output gradient tile. */
template <class E, int NF>
__device__ __forceinline__ void mm_ab_add(acc_t (&acc)[NF], const E *a, int lda, const E *m,
					  int ldm, int k0, int k1, int kf)
{
	for (int kk = k0; kk < k1; kk++) {
		a_row<E> fa;
		wmma::load_matrix_sync(fa, a + kk * 16, lda);
		for (int d = 0; d < NF; d++)
			if (d < kf) {
				b_row<E> fm;
				wmma::load_matrix_sync(fm, m + kk * 16 * ldm + d * 16, ldm);
				wmma::mma_sync(acc[d], fa, fm, acc[d]);
			}
	}
}

/* Writes a warp's 16 rows of fp32 results at buf (row stride ld) to dst
 * (row stride stride) for the rows below T, scaled per row by rs (or 1). */
template <class E>
__device__ static void write_rows(E *dst, int64_t stride, const float *buf, int ld,
				  int64_t row0, const float *rs, const attn_args &a)
{
	int HS = (int)a.HS;
	for (int e = threadIdx.x % 32; e < 16 * HS; e += 32) {
		int rr = e / HS, d = e % HS;
		if (row0 + rr < a.T)
			gpt_st(dst + rr * stride + d, buf[rr * ld + d] * (rs ? rs[rr] : 1.0f));
	}
}

/* Where a query-tile kernel (forward, dq) works: head bh = b * NH + h; the
 * tile's first row i0, the longest tiles first; warp `warp` of the block
 * owns 16 of its rows, two lanes a row (r, and hf for the half of the
 * columns), so this lane's row is i and the warp's last wlast; jend is the
 * last key any row of the tile sees; kf the 16-wide steps of the head; Cl
 * and C3 the row strides of the output and of qkv. */
struct q_place {
	int64_t bh, b, h, i0, i, wlast, jend, Cl, C3;
	int warp, r, hf, kf;
};

__device__ static q_place q_place_of(const attn_args &a)
{
	q_place p;
	p.bh = blockIdx.x;
	p.b = p.bh / a.NH;
	p.h = p.bh % a.NH;
	p.i0 = (int64_t)(gridDim.y - 1 - blockIdx.y) * BQ;
	p.warp = threadIdx.x / 32;
	p.r = (threadIdx.x % 32) >> 1;
	p.hf = threadIdx.x & 1;
	p.kf = (int)(a.HS / 16);
	p.Cl = a.NH * a.HS;
	p.C3 = 3 * p.Cl;
	p.i = p.i0 + p.warp * 16 + p.r;
	p.wlast = p.i0 + p.warp * 16 + 15;
	p.jend = p.i0 + BQ - 1 < a.T - 1 ? p.i0 + BQ - 1 : a.T - 1;
	return p;
}

template <class E, int NF>
__global__ static void __launch_bounds__(NTHR)
	tc_fwd_kernel(E *out, float *lse, const E *qkv, attn_args a, int vec)
{
	extern __shared__ float sh[];
	const int W = NF * 16, LE = W + 8, LO = (W > BK ? W : BK) + 4;
	E *qs = (E *)sh, *ks = qs + BQ * LE, *vs = ks + BK * LE, *ps = vs + BK * LE;
	float *ss = (float *)(ps + BQ * LP), *linv = ss + BQ * LO;
	const auto [bh, b, h, i0, i, wlast, jend, Cl, C3, warp, r, hf, kf] = q_place_of(a);
	const E *base = qkv + b * a.T * C3 + h * a.HS;
	const E *qw = qs + warp * 16 * LE;
	float *sw = ss + warp * 16 * LO;
	E *pw = ps + warp * 16 * LP;
	load_tile<E, W>(qs, base, C3, i0, a, vec);
	acc_t o[NF];
	for (int d = 0; d < NF; d++)
		wmma::fill_fragment(o[d], 0.0f);
	float m = -INFINITY, l = 0.0f;
	for (int64_t j0 = 0; j0 <= jend; j0 += BK) {
		load_kv<E, W>(ks, vs, base, j0, a, vec);
		/* the 16-key column blocks that reach this warp's rows */
		int nc = (int)((wlast - j0) / 16 + 1);
		nc = nc < BK / 16 ? nc : BK / 16;
		for (int c = 0; c < nc; c++) {
			acc_t s;
			mm_abt(s, qw, LE, ks + c * 16 * LE, LE, kf, a.sc);
			wmma::store_matrix_sync(sw + c * 16, s, LO, wmma::mem_row_major);
		}
		__syncwarp();
		float mx = -INFINITY;
		for (int c = hf; c < nc * 16; c += 2)
			if (j0 + c <= i)
				mx = fmaxf(mx, sw[r * LO + c]);
		mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
		float mn = fmaxf(m, mx), sum = 0.0f;
		float corr = i < a.T ? expf(m - mn) : 1.0f;
		for (int c = hf; c < nc * 16; c += 2) {
			int64_t j = j0 + c;
			float p = 0.0f, pd = 0.0f;
			if (j <= i && i < a.T) {
				p = expf(sw[r * LO + c] - mn);
				pd = p * keep(a, b, h, i, j);
			}
			sum += p;
			gpt_st(pw + r * LP + c, pd);
		}
		sum += __shfl_xor_sync(0xffffffffu, sum, 1);
		l = l * corr + sum;
		if (i < a.T)
			m = mn;
		int rescale = j0 > 0 && gpt_warp_max(corr != 1.0f ? 1.0f : 0.0f) > 0.0f;
		__syncwarp();
		if (rescale) { /* the accumulated rows times corr, through shared memory */
			for (int d = 0; d < NF; d++)
				if (d < kf)
					wmma::store_matrix_sync(sw + d * 16, o[d], LO, wmma::mem_row_major);
			__syncwarp();
			for (int c = hf; c < kf * 16; c += 2)
				sw[r * LO + c] *= corr;
			__syncwarp();
			for (int d = 0; d < NF; d++)
				if (d < kf)
					wmma::load_matrix_sync(o[d], sw + d * 16, LO, wmma::mem_row_major);
		}
		mm_ab_add(o, pw, LP, vs, LE, 0, nc, kf);
	}
	__syncwarp();
	for (int d = 0; d < NF; d++)
		if (d < kf)
			wmma::store_matrix_sync(sw + d * 16, o[d], LO, wmma::mem_row_major);
	if (hf == 0) {
		linv[warp * 16 + r] = i < a.T ? 1.0f / l : 0.0f;
		if (i < a.T)
			lse[bh * a.T + i] = m + logf(l);
	}
	__syncwarp();
	write_rows(out + (b * a.T + i0 + warp * 16) * Cl + h * a.HS, Cl, sw, LO, i0 + warp * 16,
		   linv + warp * 16, a);
}

template <class E, int NF>
__global__ static void __launch_bounds__(NTHR)
	tc_dq_kernel(E *dqkv, float *Dv, const E *dout, const E *qkv, const float *lse,
		     attn_args a, int vec)
{
	extern __shared__ float sh[];
	const int W = NF * 16, LE = W + 8, LO = W + 4;
	E *qs = (E *)sh, *gs = qs + BQ * LE, *ks = gs + BQ * LE, *vs = ks + BK * LE;
	E *dss = vs + BK * LE;
	float *ss = (float *)(dss + BQ * LP), *dps = ss + BQ * LS;
	const auto [bh, b, h, i0, i, wlast, jend, Cl, C3, warp, r, hf, kf] = q_place_of(a);
	const E *base = qkv + b * a.T * C3 + h * a.HS;
	const E *qw = qs + warp * 16 * LE, *gw = gs + warp * 16 * LE;
	float *sw = ss + warp * 16 * LS, *dpw = dps + warp * 16 * LS;
	E *dsw = dss + warp * 16 * LP;
	load_tile<E, W>(qs, base, C3, i0, a, vec);
	load_tile<E, W>(gs, dout + b * a.T * Cl + h * a.HS, Cl, i0, a, vec);
	float L = i < a.T ? lse[bh * a.T + i] : 0.0f, D = 0.0f;
	acc_t dq[NF];
	for (int d = 0; d < NF; d++)
		wmma::fill_fragment(dq[d], 0.0f);
	for (int pass = 0; pass < 2; pass++) {
		float dpart = 0.0f;
		for (int64_t j0 = 0; j0 <= jend; j0 += BK) {
			load_kv<E, W>(ks, vs, base, j0, a, vec);
			int nc = (int)((wlast - j0) / 16 + 1);
			nc = nc < BK / 16 ? nc : BK / 16;
			score_grads(sw, dpw, qw, ks, gw, vs, LE, 0, nc, kf, a.sc);
			__syncwarp();
			for (int c = hf; c < nc * 16; c += 2) {
				int64_t j = j0 + c;
				float ds = 0.0f;
				if (j <= i && i < a.T) {
					float p = expf(sw[r * LS + c] - L);
					float dp = dpw[r * LS + c] * keep(a, b, h, i, j);
					if (pass == 0)
						dpart += p * dp;
					else
						ds = p * (dp - D);
				}
				if (pass)
					gpt_st(dsw + r * LP + c, ds);
			}
			if (pass == 0)
				continue;
			__syncwarp();
			mm_ab_add(dq, dsw, LP, ks, LE, 0, nc, kf);
		}
		if (pass == 0)
			D = dpart + __shfl_xor_sync(0xffffffffu, dpart, 1);
	}
	/* the fp32 score tiles, now free, hold the results (another row stride) */
	__syncthreads();
	float *ow = ss + warp * 16 * LO;
	for (int d = 0; d < NF; d++)
		if (d < kf) {
			for (int e = 0; e < dq[d].num_elements; e++)
				dq[d].x[e] *= a.sc;
			wmma::store_matrix_sync(ow + d * 16, dq[d], LO, wmma::mem_row_major);
		}
	if (hf == 0 && i < a.T)
		Dv[bh * a.T + i] = D;
	__syncwarp();
	write_rows(dqkv + (b * a.T + i0 + warp * 16) * C3 + h * a.HS, C3, ow, LO, i0 + warp * 16,
		   (const float *)0, a);
}

template <class E, int NF>
__global__ static void __launch_bounds__(NTHR)
	tc_dkv_kernel(E *dqkv, const E *dout, const E *qkv, const float *lse, const float *Dv,
		      attn_args a, int vec)
{
	extern __shared__ float sh[];
	const int W = NF * 16, LE = W + 8, LO = W + 4;
	E *ks = (E *)sh, *vs = ks + BK * LE, *qs = vs + BK * LE, *gs = qs + BQ * LE;
	E *pts = gs + BQ * LE, *dts = pts + BK * LP;
	float *sts = (float *)(dts + BK * LP), *dpts = sts + BK * LS;
	float *Ls = dpts + BK * LS, *Ds = Ls + BQ;
	int64_t bh = blockIdx.x, b = bh / a.NH, h = bh % a.NH;
	int64_t j0 = (int64_t)blockIdx.y * BK;
	int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	int r = lane >> 1, hf = lane & 1, kf = (int)(a.HS / 16);
	int64_t Cl = a.NH * a.HS, C3 = 3 * Cl, jw0 = j0 + warp * 16, j = jw0 + r;
	const E *base = qkv + b * a.T * C3 + h * a.HS, *gbase = dout + b * a.T * Cl + h * a.HS;
	const E *kw = ks + warp * 16 * LE, *vw = vs + warp * 16 * LE;
	float *stw = sts + warp * 16 * LS, *dptw = dpts + warp * 16 * LS;
	E *ptw = pts + warp * 16 * LP, *dtw = dts + warp * 16 * LP;
	load_tile<E, W>(ks, base + Cl, C3, j0, a, vec);
	load_tile<E, W>(vs, base + 2 * Cl, C3, j0, a, vec);
	acc_t dk[NF], dv[NF];
	for (int d = 0; d < NF; d++) {
		wmma::fill_fragment(dk[d], 0.0f);
		wmma::fill_fragment(dv[d], 0.0f);
	}
	for (int64_t i0 = j0; i0 < a.T; i0 += BQ) {
		__syncthreads();
		load_tile<E, W>(qs, base, C3, i0, a, vec);
		load_tile<E, W>(gs, gbase, Cl, i0, a, vec);
		if (threadIdx.x < BQ) {
			int64_t iq = i0 + threadIdx.x;
			Ls[threadIdx.x] = iq < a.T ? lse[bh * a.T + iq] : 0.0f;
			Ds[threadIdx.x] = iq < a.T ? Dv[bh * a.T + iq] : 0.0f;
		}
		__syncthreads();
		/* the 16-query column blocks at or after this warp's keys, below T */
		int c0 = jw0 > i0 ? (int)((jw0 - i0) / 16) : 0;
		int c1 = (int)((a.T - i0 + 15) / 16);
		c1 = c1 < BQ / 16 ? c1 : BQ / 16;
		if (jw0 >= a.T || c0 >= c1)
			continue;
		score_grads(stw, dptw, kw, qs, vw, gs, LE, c0, c1, kf, a.sc);
		__syncwarp();
		for (int c = c0 * 16 + hf; c < c1 * 16; c += 2) {
			int64_t i = i0 + c;
			float pd = 0.0f, ds = 0.0f;
			if (i >= j && i < a.T) {
				float p = expf(stw[r * LS + c] - Ls[c]), f = keep(a, b, h, i, j);
				pd = p * f;
				ds = p * (dptw[r * LS + c] * f - Ds[c]);
			}
			gpt_st(ptw + r * LP + c, pd);
			gpt_st(dtw + r * LP + c, ds);
		}
		__syncwarp();
		mm_ab_add(dv, ptw, LP, gs, LE, c0, c1, kf);
		mm_ab_add(dk, dtw, LP, qs, LE, c0, c1, kf);
	}
	__syncthreads();
	float *ow = sts + warp * 16 * LO;
	E *o = dqkv + (b * a.T + jw0) * C3 + h * a.HS;
	for (int d = 0; d < NF; d++)
		if (d < kf) {
			for (int e = 0; e < dk[d].num_elements; e++)
				dk[d].x[e] *= a.sc;
			wmma::store_matrix_sync(ow + d * 16, dk[d], LO, wmma::mem_row_major);
		}
	__syncwarp();
	write_rows(o + Cl, C3, ow, LO, jw0, (const float *)0, a);
	__syncwarp();
	for (int d = 0; d < NF; d++)
		if (d < kf)
			wmma::store_matrix_sync(ow + d * 16, dv[d], LO, wmma::mem_row_major);
	__syncwarp();
	write_rows(o + 2 * Cl, C3, ow, LO, jw0, (const float *)0, a);
}

int gpt_cuda_attention_tensor_cores(gpt_dtype dt, int64_t HS)
{
	return (dt == GPT_DTYPE_BF16 || dt == GPT_DTYPE_F16) && HS > 0 && HS % 16 == 0 &&
	       HS <= 128;
}

static size_t fwd_shm(int W, size_t es)
{
	int LE = W + 8, LO = (W > BK ? W : BK) + 4;
	return (size_t)(BQ * LE + 2 * BK * LE + BQ * LP) * es + (size_t)(BQ * LO + BQ) * 4;
}

static size_t dq_shm(int W, size_t es)
{
	return (size_t)(2 * BQ * (W + 8) + 2 * BK * (W + 8) + BQ * LP) * es +
	       (size_t)(2 * BQ * LS) * 4;
}

static size_t dkv_shm(int W, size_t es)
{
	return (size_t)(2 * BK * (W + 8) + 2 * BQ * (W + 8) + 2 * BK * LP) * es +
	       (size_t)(2 * BK * LS + 2 * BQ) * 4;
}

/* Lets kernel k use shm bytes of dynamic shared memory (above 48 KiB needs asking). */
template <class K> static int allow_shm(K *k, size_t shm, const char *op, gpt_err *err)
{
	return gpt_cuda_check(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize,
						   (int)shm),
			      op, err);
}

template <class E, int NF>
static int fwd_nf(cudaStream_t s, void *out, float *lse, const void *qkv, int64_t B,
		  const attn_args &a, int vec, gpt_err *err)
{
	size_t shm = fwd_shm(NF * 16, sizeof(E));
	auto kern = tc_fwd_kernel<E, NF>;
	int rc = allow_shm(kern, shm, "attention_fwd: shared memory", err);
	if (rc)
		return rc;
	dim3 grid((unsigned)(B * a.NH), (unsigned)((a.T + BQ - 1) / BQ));
	kern<<<grid, NTHR, shm, s>>>((E *)out, lse, (const E *)qkv, a, vec);
	return gpt_cuda_launched("attention_fwd", err);
}

template <class E, int NF>
static int bwd_nf(cudaStream_t s, void *dqkv, float *Dv, const void *dout, const void *qkv,
		  const float *lse, int64_t B, const attn_args &a, int vec, gpt_err *err)
{
	size_t shq = dq_shm(NF * 16, sizeof(E)), shk = dkv_shm(NF * 16, sizeof(E));
	auto kq = tc_dq_kernel<E, NF>;
	auto kkv = tc_dkv_kernel<E, NF>;
	int rc = allow_shm(kq, shq, "attention_bwd: shared memory", err);
	if (!rc)
		rc = allow_shm(kkv, shk, "attention_bwd: shared memory", err);
	if (rc)
		return rc;
	dim3 grid((unsigned)(B * a.NH), (unsigned)((a.T + BQ - 1) / BQ));
	kq<<<grid, NTHR, shq, s>>>((E *)dqkv, Dv, (const E *)dout, (const E *)qkv, lse, a, vec);
	kkv<<<grid, NTHR, shk, s>>>((E *)dqkv, (const E *)dout, (const E *)qkv, lse, Dv, a, vec);
	return gpt_cuda_launched("attention_bwd", err);
}

/* The smallest padded width W = 16 NF that holds the head. */
template <class E>
static int fwd_e(cudaStream_t s, void *out, float *lse, const void *qkv, int64_t B,
		 const attn_args &a, int vec, gpt_err *err)
{
	if (a.HS <= 32)
		return fwd_nf<E, 2>(s, out, lse, qkv, B, a, vec, err);
	if (a.HS <= 64)
		return fwd_nf<E, 4>(s, out, lse, qkv, B, a, vec, err);
	return fwd_nf<E, 8>(s, out, lse, qkv, B, a, vec, err);
}

template <class E>
static int bwd_e(cudaStream_t s, void *dqkv, float *Dv, const void *dout, const void *qkv,
		 const float *lse, int64_t B, const attn_args &a, int vec, gpt_err *err)
{
	if (a.HS <= 32)
		return bwd_nf<E, 2>(s, dqkv, Dv, dout, qkv, lse, B, a, vec, err);
	if (a.HS <= 64)
		return bwd_nf<E, 4>(s, dqkv, Dv, dout, qkv, lse, B, a, vec, err);
	return bwd_nf<E, 8>(s, dqkv, Dv, dout, qkv, lse, B, a, vec, err);
}

static int aligned16(const void *p)
{
	return ((uintptr_t)p & 15u) == 0;
}

int gpt_cuda_attention_tc_fwd(gpt_backend *be, void *out, float *lse, const void *qkv,
			      int64_t B, const attn_args *a, gpt_err *err)
{
	cudaStream_t s = gpt_cuda_stream(be);
	int vec = aligned16(qkv);
	if (be->dtype == GPT_DTYPE_BF16)
		return fwd_e<__nv_bfloat16>(s, out, lse, qkv, B, *a, vec, err);
	return fwd_e<__half>(s, out, lse, qkv, B, *a, vec, err);
}

int gpt_cuda_attention_tc_bwd(gpt_backend *be, void *dqkv, float *Dv, const void *dout,
			      const void *qkv, const float *lse, int64_t B, const attn_args *a,
			      gpt_err *err)
{
	cudaStream_t s = gpt_cuda_stream(be);
	int vec = aligned16(qkv) && aligned16(dout);
	if (be->dtype == GPT_DTYPE_BF16)
		return bwd_e<__nv_bfloat16>(s, dqkv, Dv, dout, qkv, lse, B, *a, vec, err);
	return bwd_e<__half>(s, dqkv, Dv, dout, qkv, lse, B, *a, vec, err);
}
