/* The tensor-core attention's building blocks (the kernels of
 * attention_tc.cu, the forward, and attention_tc_bwd.cu, the backward, are
 * made of them): the warp's products and their operands (mma.sync,
 * ldmatrix, the repacking of scores as A operands), tile loads by
 * cp.async, where a block works (tiles.h's order), the scores' products
 * and masks, the accumulators' stores, dropout's masks shared by the
 * lanes; and the launches' host-side parts. Included by those two alone. */
#ifndef GPT_CUDA_ATTENTION_TC_CUH
#define GPT_CUDA_ATTENTION_TC_CUH

#include "cuda/attention.cuh"
#include "cuda/attention_rows.cuh"

#include "backend/tiles.h"

#include <math.h>
#include <string.h>
#include <type_traits>
#ifdef GPT_CUDA_EMULATED
#include <mma.h> /* emu::mma_m16n8k16 */
#endif

#define BQ 64             /* query rows per tile */
#define BK 64             /* keys per tile */
#define NTHR 128          /* 4 warps, 16 rows each */
#define NT (BK / 8)       /* 8-wide column tiles of a score tile */
#define KT (BK / 16)      /* 16-wide steps over a score tile's columns */
#define L2E 1.4426950408889634f /* log2(e) */

typedef uint32_t u32;

/* d += A B for a warp: A 16x16 (a[0..3]), B 16x8 (b0, b1), fp32 d[0..3].
 * Lane l, g = l / 4, t = l % 4 holds a[0] = A(g, 2t..2t+1), a[1] =
 * A(g+8, 2t..), a[2] = A(g, 2t+8..), a[3] = A(g+8, 2t+8..); b0 =
 * B(2t..2t+1, g), b1 = B(2t+8.., g); d = D(g, 2t), D(g, 2t+1), D(g+8, 2t),
 * D(g+8, 2t+1). The lower half of a register is the lower index. */
template <class E> __device__ __forceinline__ void mma(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1);
#ifdef GPT_CUDA_EMULATED
template <> __device__ __forceinline__ void mma<__nv_bfloat16>(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1)
{
	u32 b[2] = {b0, b1};
	emu::mma_m16n8k16<__nv_bfloat16>(d, a, b);
}
template <> __device__ __forceinline__ void mma<__half>(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1)
{
	u32 b[2] = {b0, b1};
	emu::mma_m16n8k16<__half>(d, a, b);
}
#else
template <> __device__ __forceinline__ void mma<__nv_bfloat16>(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1)
{
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
		     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
		     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
		     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <> __device__ __forceinline__ void mma<__half>(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1)
{
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
		     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
		     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
		     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
#endif

/* lo and hi rounded to E, lo in the lower half */
template <class E> __device__ __forceinline__ u32 pack2(float lo, float hi);
#ifdef GPT_CUDA_EMULATED
template <class E> __device__ __forceinline__ u32 pack2(float lo, float hi)
{
	E v[2];
	gpt_st(v, lo);
	gpt_st(v + 1, hi);
	u32 r;
	memcpy(&r, v, sizeof r);
	return r;
}
#else
template <> __device__ __forceinline__ u32 pack2<__nv_bfloat16>(float lo, float hi)
{
	__nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
	return *(u32 *)&v;
}
template <> __device__ __forceinline__ u32 pack2<__half>(float lo, float hi)
{
	__half2 v = __floats2half2_rn(lo, hi);
	return *(u32 *)&v;
}
#endif

/* PTX ldmatrix .x4 from shared memory: four 8x8 matrices of 16-bit
 * elements, lane l giving the address of row l % 8 of matrix l / 8 (16
 * bytes, 16-byte aligned); r[i] is lane l's part of matrix i: its row
 * l / 4, columns 2(l % 4) and 2(l % 4) + 1 (trans: rows 2(l % 4) and
 * 2(l % 4) + 1 of column l / 4), the lower index in the lower half. */
template <bool TRANS = false> __device__ __forceinline__ void ldsm4(u32 (&r)[4], const void *p)
{
#ifdef GPT_CUDA_EMULATED
	emu::ldmatrix_x4(r, p, TRANS);
#else
	unsigned a = (unsigned)__cvta_generic_to_shared(p);
	if constexpr (TRANS)
		asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
			     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
			     : "r"(a));
	else
		asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
			     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
			     : "r"(a));
#endif
}

/* The A operand of k step kk from a row-major tile x (the warp's 16 rows,
 * row stride ld): matrices rows 0-7 and 8-15 of columns 16kk..+7, then of
 * 16kk+8..+15. */
template <class E> __device__ __forceinline__ void lda(u32 (&a)[4], const E *x, int ld, int kk)
{
	int l = threadIdx.x % 32;
	ldsm4(a, x + (l % 8 + (l & 8)) * ld + kk * 16 + (l & 16) / 2);
}

/* A operands of a 16 x 8N tile in accumulator layout (s[n]: columns
 * [8n, 8n + 8)), rounded to E: k step kk is column tiles 2kk and 2kk + 1 */
template <class E, int N>
__device__ __forceinline__ void repack(u32 (&pa)[N / 2][4], const float (&s)[N][4])
{
#pragma unroll
	for (int kk = 0; kk < N / 2; kk++) {
		pa[kk][0] = pack2<E>(s[2 * kk][0], s[2 * kk][1]);
		pa[kk][1] = pack2<E>(s[2 * kk][2], s[2 * kk][3]);
		pa[kk][2] = pack2<E>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
		pa[kk][3] = pack2<E>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
	}
}

/* 2^x on the special-function unit, results below 2^-126 flushed to 0
 * (ex2.approx.ftz, as FlashAttention): exp2f wraps the same instruction in
 * three more that keep denormal results, which no probability here needs */
__device__ __forceinline__ float ex2(float x)
{
#ifdef GPT_CUDA_EMULATED
	return exp2f(x);
#else
	float y;
	asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
	return y;
#endif
}

/* the maximum (or sum) over the 4 lanes of a row's quad */
__device__ __forceinline__ float quad_max(float v)
{
	v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
	return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

__device__ __forceinline__ float quad_sum(float v)
{
	v += __shfl_xor_sync(0xffffffffu, v, 1);
	return v + __shfl_xor_sync(0xffffffffu, v, 2);
}


/* Rows [r0, r0 + ROWS) of a (T, HS) slice at base with row stride `stride`
 * into a (ROWS, W) tile of row stride W + 8 (16 bytes of padding, which
 * spreads the rows over the banks), zeros past T and past HS: with vec
 * (base and stride 16-byte aligned) by cp.async, landing by the next
 * cp_wait that covers it, else element by element, there at once. A
 * thread copies the same 16 bytes of every RS-th row (RS = NTHR / (W /
 * 8)), its source and destination worked out once a call, rows compared
 * as ints: the loop over the tile's elements, 64-bit index arithmetic a
 * copy, took about 300 instructions a forward tile, a sixth of its warp
 * samples (bench/gpu/attnsrc.sh, H100, 2026-11-27); this, about 150. */
template <class E, int W, int ROWS = 64>
__device__ static void load_tile(E *tile, const E *base, int64_t stride, int r0, const attn_args &a,
				 int vec)
{
	const int ld = W + 8;
	if (vec) {
		constexpr int CH = W / 8, RS = NTHR / CH; /* 16-byte pieces a row; rows a pass */
		static_assert(NTHR % CH == 0 && ROWS % RS == 0, "whole passes over the tile");
		const int rr = (int)threadIdx.x / CH, d = (int)threadIdx.x % CH * 8, T = (int)a.T;
		const bool in = d < (int)a.HS;
		const E *src = base + (int64_t)(r0 + rr) * stride + d;
		const int64_t step = RS * stride;
		E *dst = tile + rr * ld + d;
#pragma unroll
		for (int k = 0; k < ROWS / RS; k++) {
			bool ok = in && r0 + rr + k * RS < T;
			cp_async<16>(dst + k * RS * ld, ok ? src + k * step : base, ok);
		}
		return;
	}
	for (int e = threadIdx.x; e < ROWS * W; e += NTHR) {
		int rr = e / W, d = e % W, r = r0 + rr;
		if (r < a.T && d < a.HS)
			tile[rr * ld + d] = base[r * stride + d];
		else
			gpt_st(tile + rr * ld + d, 0.0f);
	}
}

/* Two buffers, step elements apart: b[c] is buffer c by arithmetic, so a
 * pair stays in registers (an array of two pointers indexed by a variable
 * would live in a thread's local memory). */
template <class P> struct buf2 {
	P p;
	int step;
	__device__ __forceinline__ P operator[](int c) const { return p + c * step; }
};

/* The key and value tiles at j0 of a head (base: its q in qkv) into ks
 * and vs, as one cp.async group. */
template <class E, int W>
__device__ static void load_kv(E *ks, E *vs, const E *base, int j0, const attn_args &a, int vec)
{
	int64_t Cl = a.NH * a.HS;
	load_tile<E, W>(ks, base + Cl, 3 * Cl, j0, a, vec);
	load_tile<E, W>(vs, base + 2 * Cl, 3 * Cl, j0, a, vec);
	cp_commit();
}

/* Before work on a tile loaded earlier: waits for it (with a later tile's
 * group, when more is set, still in flight) and for every thread's part. */
__device__ __forceinline__ void tile_ready(bool more)
{
	if (more)
		cp_wait<1>();
	else
		cp_wait<0>();
	__syncthreads();
}

/* Where a query-tile kernel (forward, dq) works, in tiles of mw * 64 rows
 * (mw * 16 a warp): head bh = b * NH + h; the tile's first row i0, the
 * longest tiles first; the warp's first row r0 and this lane's two rows
 * ri[0], ri[1] of the warp's first 16 (g and g + 8);
 * jend the last key any row of the tile sees; kf the 16-wide steps of the
 * head; Cl and C3 the row strides of the output and of qkv. Row and key
 * indices fit an int (T is below 2^31: attention.cu). */
struct q_place {
	int64_t bh, b, h, Cl, C3;
	int i0, r0, ri[2], jend, t, kf;
};

/* This block's head and tile rank (0 the head's longest): tiles.h. */
struct tile_place {
	int64_t bh;
	int rank;
};

__device__ __forceinline__ tile_place tile_of(const attn_args &a, int rows = BQ)
{
	uint32_t bh, rank;
	gpt_attention_tile(blockIdx.x, (uint32_t)((a.T + rows - 1) / rows), a.bhn, a.hg, &bh, &rank);
	return {(int64_t)bh, (int)rank};
}

__device__ static q_place q_place_of(const attn_args &a, int mw = 1)
{
	q_place p;
	int lane = threadIdx.x % 32, rows = BQ * mw;
	tile_place tp = tile_of(a, rows);
	p.bh = tp.bh;
	p.b = p.bh / a.NH;
	p.h = p.bh % a.NH;
	p.i0 = ((int)((a.T + rows - 1) / rows) - 1 - tp.rank) * rows;
	p.r0 = p.i0 + threadIdx.x / 32 * 16 * mw;
	p.ri[0] = p.r0 + (lane >> 2);
	p.ri[1] = p.ri[0] + 8;
	p.t = lane & 3;
	p.kf = (int)(a.HS / 16);
	p.Cl = a.NH * a.HS;
	p.C3 = 3 * p.Cl;
	p.jend = p.i0 + rows - 1 < (int)a.T - 1 ? p.i0 + rows - 1 : (int)a.T - 1;
	return p;
}

/* The 8-wide column tiles of the key tile at j0 that reach rows up to
 * last, as a count of 16-wide pairs */
__device__ __forceinline__ int pairs_to(int last, int j0)
{
	int n = (last - j0) / 16 + 1;
	return n < KT ? n : KT;
}

/* s[mi][n] = X Y^T for the warp's MW blocks of 16 rows, x the first
 * (row stride ld, the others 16 rows apart each), and the column tiles of
 * pairs [p0, p1) of the rows of y (8N of them: a 64-wide tile or half of
 * one), over kf 16-wide steps of the head (the other tiles are left at 0).
 * Each fragment of y read from shared memory serves the MW blocks. FULL:
 * the caller knows that every pair is wanted and kf is W / 16, so the
 * code has no branch (a tile clear of the diagonal and of T, the head
 * unpadded), and the compiler can schedule its loads and products freely. */
template <class E, int W, int N, int MW, bool FULL = false>
__device__ __forceinline__ void scores_m(float (&s)[MW][N][4], const E *x, const E *y, int ld, int p0,
					 int p1, int kf)
{
	int l = threadIdx.x % 32;
#pragma unroll
	for (int mi = 0; mi < MW; mi++)
#pragma unroll
		for (int n = 0; n < N; n++)
			s[mi][n][0] = s[mi][n][1] = s[mi][n][2] = s[mi][n][3] = 0.0f;
#pragma unroll
	for (int kk = 0; kk < W / 16; kk++)
		if (FULL || kk < kf) {
			u32 xa[MW][4];
#pragma unroll
			for (int mi = 0; mi < MW; mi++)
				lda(xa[mi], x + mi * 16 * ld, ld, kk);
#pragma unroll
			for (int np = 0; np < N / 2; np++)
				if (FULL || (np >= p0 && np < p1)) {
					u32 bb[4];
					ldsm4(bb, y + (np * 16 + l % 8 + (l & 16) / 2) * ld + kk * 16 + (l & 8));
#pragma unroll
					for (int mi = 0; mi < MW; mi++) {
						mma<E>(s[mi][2 * np], xa[mi], bb[0], bb[1]);
						mma<E>(s[mi][2 * np + 1], xa[mi], bb[2], bb[3]);
					}
				}
		}
}

/* acc[mi][d] += P M for the warp's MW blocks of 16 rows: P in registers
 * (k steps [k0, k1) of 16 keys or queries), M the rows of m (row stride
 * ld) they index; the head's column tiles below HS. Each fragment of m
 * read from shared memory serves the MW blocks. FULL: all K steps, and HS
 * is W (scores_m). */
template <class E, int W, int K, int MW, bool FULL = false>
__device__ __forceinline__ void accumulate_m(float (&acc)[MW][W / 8][4], const u32 (&pa)[MW][K][4], int k0,
					     int k1, const E *m, int ld, int64_t HS)
{
	int l = threadIdx.x % 32;
#pragma unroll
	for (int kk = 0; kk < K; kk++)
		if (FULL || (kk >= k0 && kk < k1))
#pragma unroll
			for (int dp = 0; dp < W / 16; dp++)
				if (FULL || dp * 16 < HS) {
					u32 bb[4];
					ldsm4<true>(bb, m + (kk * 16 + l % 8 + (l & 8)) * ld + dp * 16 + (l & 16) / 2);
#pragma unroll
					for (int mi = 0; mi < MW; mi++) {
						mma<E>(acc[mi][2 * dp], pa[mi][kk], bb[0], bb[1]);
						mma<E>(acc[mi][2 * dp + 1], pa[mi][kk], bb[2], bb[3]);
					}
				}
}

/* The two values of a 32-bit pair of E (pack2's), lo the lower half */
template <class E> __device__ __forceinline__ void unpack2(float &lo, float &hi, u32 r)
{
	E v[2];
	memcpy(v, &r, sizeof r);
	lo = gpt_ld(v);
	hi = gpt_ld(v + 1);
}

/* Writes the warp's accumulated rows (two a lane: rows[0], rows[1]) to dst
 * (row rr at dst + rr * stride, the lane's columns 8d + 2t, 8d + 2t + 1)
 * for rows below T, each times its factor f; with lo, what rounding to E
 * left of each value (v - E(v), rounded to E) at the same place in lo.
 * A lane's two columns are one 32-bit store where dst, lo and stride
 * allow (always, for the tensors of this op): the 2-byte stores, each
 * with its own conversion and 64-bit address, were a seventh of the
 * forward's warp samples (bench/gpu/attnsrc.sh, H100, 2026-11-27). */
template <class E, int W>
__device__ __forceinline__ void write_acc(E *dst, E *lo, int64_t stride, const float (&acc)[W / 8][4],
					  const int (&rows)[2], const float (&f)[2], int t,
					  const attn_args &a)
{
	const bool pairs = ((uintptr_t)dst & 3u) == 0 && ((uintptr_t)lo & 3u) == 0 && stride % 2 == 0;
	const int T = (int)a.T, HS = (int)a.HS;
#pragma unroll
	for (int hr = 0; hr < 2; hr++)
		if (rows[hr] < T) {
			const int64_t at = rows[hr] * stride + 2 * t;
#pragma unroll
			for (int d = 0; d < W / 8; d++)
				if (d * 8 < HS) {
					/* (never fused with the low half's difference) */
					float v[2] = {__fmul_rn(acc[d][2 * hr], f[hr]),
						      __fmul_rn(acc[d][2 * hr + 1], f[hr])};
					if (pairs) {
						u32 e = pack2<E>(v[0], v[1]);
						*(u32 *)(dst + at + d * 8) = e;
						if (lo) {
							float r0, r1;
							unpack2<E>(r0, r1, e);
							*(u32 *)(lo + at + d * 8) = pack2<E>(v[0] - r0, v[1] - r1);
						}
						continue;
					}
#pragma unroll
					for (int c = 0; c < 2; c++) {
						E e;
						gpt_st(&e, v[c]);
						dst[at + d * 8 + c] = e;
						if (lo)
							gpt_st(lo + at + d * 8 + c, v[c] - gpt_ld(&e));
					}
				}
		}
}

/* write_acc through shared memory: the warp's 16 rows from r16 (rows
 * r16 + g and r16 + g + 8 a lane, g = lane / 4) go first into st, this
 * warp's own 16 rows of shared memory (row stride ls elements, 16-byte
 * aligned rows of W elements or more), a lane's two columns a 32-bit
 * store as write_acc's; then each lane copies 16 bytes at a time to dst,
 * a row's W elements from W / 8 lanes: a warp's store writes whole rows of
 * the head, where write_acc's wrote 16 bytes of each of 8 rows. Then the
 * same for lo, its values computed again (the same bits). The values and
 * rows written are write_acc's. Where dst, lo or the row stride is not
 * 16-byte aligned, the copies are an element a lane at a time (one path
 * through shared memory either way: a second, write_acc's, cost the
 * forward with dropout 36 more bytes of spills). The caller's reads of st
 * are done (the __syncwarp here orders them before the writes). */
template <class E, int W>
__device__ __forceinline__ void write_acc_staged(E *dst, E *lo, int64_t stride, const float (&acc)[W / 8][4],
						 int r16, const float (&f)[2], int t, const attn_args &a, E *st,
						 int ls)
{
	const int T = (int)a.T, HS = (int)a.HS, lane = threadIdx.x % 32, g = lane >> 2, VR = W / 8;
	const bool vec = (((uintptr_t)dst | (uintptr_t)lo) & 15u) == 0 && (stride * (int64_t)sizeof(E)) % 16 == 0;
#pragma unroll
	for (int half = 0; half < 2; half++) {
		E *to = half ? lo : dst;
		if (!to)
			break;
		__syncwarp();
#pragma unroll
		for (int hr = 0; hr < 2; hr++)
#pragma unroll
			for (int d = 0; d < W / 8; d++) {
				/* (never fused with the low half's difference) */
				float v0 = __fmul_rn(acc[d][2 * hr], f[hr]), v1 = __fmul_rn(acc[d][2 * hr + 1], f[hr]);
				u32 e = pack2<E>(v0, v1);
				if (half) {
					float r0, r1;
					unpack2<E>(r0, r1, e);
					e = pack2<E>(v0 - r0, v1 - r1);
				}
				*(u32 *)(st + (g + 8 * hr) * ls + 8 * d + 2 * t) = e;
			}
		__syncwarp();
		if (vec) {
#pragma unroll
			for (int c = lane; c < 16 * VR; c += 32) {
				int rr = c / VR, cc = c % VR, row = r16 + rr;
				if (row < T && cc * 8 < HS)
					*(uint4 *)(to + row * stride + cc * 8) = *(const uint4 *)(st + rr * ls + cc * 8);
			}
		} else {
#pragma unroll 1
			for (int c = lane; c < 16 * W; c += 32) {
				int rr = c / W, cc = c % W, row = r16 + rr;
				if (row < T && cc < HS)
					to[row * stride + cc] = st[rr * ls + cc];
			}
		}
	}
}

/* Dropout's Philox blocks, shared by the lanes of a warp. A block holds
 * the draws of eight keys (features) at one query (position); the eight
 * keys (feature0 + h) * T + 8m .. + 7 share one where 8 divides
 * (feature0 + h) * T (aligned(): T a multiple of 8 does it), and the lanes
 * that need a block's draws then compute it once between them and pass
 * the kept bits by shuffles. The draws, hence the masks, are the same bits
 * as kept()'s. All 32 lanes of the warp call these together. */
__device__ __forceinline__ bool aligned(const attn_args &a, int64_t h)
{
	return (a.d.feature0 + h) * a.T % 8 == 0;
}

__device__ __forceinline__ void block_of(uint32_t (&r)[4], const attn_args &a, int64_t b, int64_t h,
					 int64_t i, int64_t j)
{
	gpt_rng_block(r, a.d.key.seed, a.d.key.step, a.d.key.layer, a.d.key.site,
		      (uint64_t)(a.d.sample0 + b), (uint64_t)i, (uint64_t)((a.d.feature0 + h) * a.T + j));
}

/* The kept bits of block r's eight elements, element e at bit e. */
__device__ __forceinline__ uint32_t kept_byte(const uint32_t (&r)[4], uint32_t thr)
{
	uint32_t v = 0;
#pragma unroll
	for (int e = 0; e < 8; e++)
		v |= (uint32_t)(gpt_rng_pick(r, (unsigned)e) >= thr) << e;
	return v;
}

/* kept() of keys j .. j + 7 at query i, key j + c at bit c, at any
 * alignment: the one block they lie in where aligned, else the two they
 * straddle. */
__device__ __forceinline__ uint32_t kept_row8(const attn_args &a, int64_t b, int64_t h, int64_t i, int64_t j)
{
	const int e0 = (int)((uint64_t)((a.d.feature0 + h) * a.T + j) & 7u);
	uint32_t r[4];
	block_of(r, a, b, h, i, j);
	uint32_t v = kept_byte(r, a.thr) >> e0;
	if (e0) {
		block_of(r, a, b, h, i, j + 8 - e0);
		v |= kept_byte(r, a.thr) << (8 - e0) & 0xffu;
	}
	return v;
}

/* kept() of a lane's elements of two column tiles in a query-tile kernel,
 * as bits: bit q as the accumulator's d[q] of the tile at key j (= the
 * tile's 8n, n even; rows ri[0], ri[1], keys j + 2t and + 1), bit 4 + q
 * the same of the tile at j + 8 (with dropout only). The four lanes of
 * a quad (t = 0..3: its rows, every key of the two tiles) need four
 * blocks, rows ri[0] and ri[1] at keys j and j + 8: where aligned, lane
 * t computes the one of row ri[t & 1] at j + 8 (t >> 1), and two
 * shuffles give every lane of the quad the four blocks' 32 kept bits;
 * else each lane the four rows of eight keys it has elements of
 * (kept_row8: one or two blocks each). */
__device__ __forceinline__ uint32_t kept_pair(const attn_args &a, int64_t b, int64_t h, const int (&ri)[2],
					      int j, bool al)
{
	const int t = threadIdx.x & 3;
	if (al) {
		uint32_t r[4];
		block_of(r, a, b, h, t & 1 ? ri[1] : ri[0], j + 8 * (t >> 1));
		uint32_t v = kept_byte(r, a.thr) << 8 * t; /* block t's key c at bit 8t + c */
		v |= __shfl_xor_sync(0xffffffffu, v, 1);
		v |= __shfl_xor_sync(0xffffffffu, v, 2);
		uint32_t x = v >> 2 * t; /* this lane's keys of block s at bits 8s, 8s + 1 */
		return (x & 0x3u) | (x >> 6 & 0xcu) | (x >> 12 & 0x30u) | (x >> 18 & 0xc0u);
	}
	uint32_t bits = 0;
#pragma unroll
	for (int c = 0; c < 2; c++)
#pragma unroll
		for (int hr = 0; hr < 2; hr++)
			bits |= (kept_row8(a, b, h, ri[hr], j + 8 * c) >> 2 * t & 3u) << (4 * c + 2 * hr);
	return bits;
}

/* ---- the forward's dropout mask, which the backward reads ----
 * A bit a probability (1: kept), in 64-bit words of 8 x 8 blocks (queries
 * 8qb .. 8qb + 7, keys 8kb .. 8kb + 7) of a head's causal triangle,
 * kb <= qb < nb = ceil(T / 8): block (qb, kb) is word qb (qb + 1) / 2 + kb
 * of the head's a.mwords (gpt_attention_mask_words), after the saved
 * statistics and low half. Element (query r, key c) of a block is bit
 * 8r + c. A lane of the query-tile kernels (4g + t) holds elements
 * (g, 2t + e) of a block, e = 0, 1: bits 8g + 2t + e, in the word's 32-bit
 * half g >> 2; a lane of dkv holds (2t + e, g): bits 16t + 8e + g, in half
 * t >> 1. So each kernel needs one 32-bit half a block; a warp's tile
 * is 32 halves, one a lane (tile_half below). The forward's warp makes
 * each half from two ballots (bit 4g + t of each), spread to the even and
 * odd bits. The forward draws the bits from Philox
 * (kept_pair), the backward reads them: the same masks, for a load where
 * dq's and dkv's every element carried Philox's rounds again. */

/* Block (qb, kb)'s word of head bh; NULL outside the triangle (a tile's
 * blocks above the diagonal or past T, whose elements are masked). */
__device__ __forceinline__ uint64_t *mask_word(const attn_args &a, int64_t bh, int qb, int kb)
{
	if (kb > qb || qb >= (int)((a.T + 7) / 8))
		return nullptr;
	return a.mask + bh * a.mwords + (int64_t)qb * (qb + 1) / 2 + kb;
}

/* x's bits 0..15, bit i to bit 2i */
__device__ __forceinline__ uint32_t spread_bits(uint32_t x)
{
	x &= 0xffffu;
	x = (x | x << 8) & 0x00ff00ffu;
	x = (x | x << 4) & 0x0f0f0f0fu;
	x = (x | x << 2) & 0x33333333u;
	return (x | x << 1) & 0x55555555u;
}

/* A tile's mask, a 32-bit half a lane. A warp's 16 rows by a tile's 64
 * columns span 2 x 8 blocks: lane L stands for half L & 1 of the block in
 * row block (L >> 1) & 1 and column tile L >> 2 (tile_half). The forward
 * (mask_pick, mask_put) and the backward (mask_fetch_*, mask_*_at) then
 * store or load one half a lane a tile, from an address computed once,
 * and the lanes pass the halves among them by ballots and shuffles: where
 * each of 4 lanes stored (and every lane loaded) a half a column tile,
 * each with its block's 64-bit address arithmetic. */
__device__ __forceinline__ uint32_t *tile_half(const attn_args &a, int64_t bh, int qb, int kb)
{
	uint64_t *p = mask_word(a, bh, qb, kb);
	return p ? (uint32_t *)p + (threadIdx.x & 1) : nullptr;
}

/* The forward: kept_pair's k of column tile n (compile-time) as two
 * ballots each of the row blocks; when n is the lane's column tile, it
 * keeps in mk the 16 bits of each of its block's two that its half holds
 * (rows 4 half .. 4 half + 3 of the block are lanes 16 half .. 16 half +
 * 15), the keys' even ones below the odd: one register, not two. All 32
 * lanes call it together. */
__device__ __forceinline__ void mask_pick(uint32_t &mk, const float (&k)[4], int n)
{
	uint32_t w[4];
#pragma unroll
	for (int q = 0; q < 4; q++)
		w[q] = __ballot_sync(0xffffffffu, k[q] != 0.0f);
	int lane = threadIdx.x % 32;
	if (lane >> 2 == n) {
		uint32_t e = lane & 2 ? w[2] : w[0], o = lane & 2 ? w[3] : w[1];
		mk = lane & 1 ? (e >> 16) | (o & 0xffff0000u) : (e & 0xffffu) | (o << 16);
	}
}

/* ... and its half stored, at the end of the tile (rw: the warp's first
 * row of the 16, j0 the tile's first key): bit 4g + t of the even and odd
 * keys' ballots to bits 8(g - 4 half) + 2t and + 1. */
__device__ __forceinline__ void mask_put(const attn_args &a, int64_t bh, int rw, int j0, uint32_t mk)
{
	int lane = threadIdx.x % 32;
	uint32_t *p = tile_half(a, bh, (rw >> 3) + ((lane >> 1) & 1), (j0 >> 3) + (lane >> 2));
	if (p)
		*p = spread_bits(mk) | spread_bits(mk >> 16) << 1;
}

/* The backward's loads: the lane's half of the tile's mask, 0 outside
 * the triangle. Query-tile kernels (dq): rows from rw (the warp's 16),
 * keys from j0; dkv: its keys from kw (the warp's 16, the rows), queries
 * from i0 (the columns). Issued at the tile's start, to land during its
 * products. */
__device__ __forceinline__ uint32_t mask_fetch_rows(const attn_args &a, int64_t bh, int rw, int j0)
{
	int lane = threadIdx.x % 32;
	const uint32_t *p = tile_half(a, bh, (rw >> 3) + ((lane >> 1) & 1), (j0 >> 3) + (lane >> 2));
	return p ? *p : 0u;
}

__device__ __forceinline__ uint32_t mask_fetch_keys(const attn_args &a, int64_t bh, int kw, int i0)
{
	int lane = threadIdx.x % 32;
	const uint32_t *p = tile_half(a, bh, (i0 >> 3) + (lane >> 2), (kw >> 3) + ((lane >> 1) & 1));
	return p ? *p : 0u;
}

/* A query-tile lane's k of column tile n (rows ri[0], ri[1], keys 8n + 2t
 * and + 1) from the tile's halves v (mask_fetch_rows): half g >> 2 of the
 * two row blocks' blocks, from lanes 4n + g / 4 and 4n + 2 + g / 4. */
__device__ __forceinline__ void mask_rows_at(float (&k)[4], uint32_t v, int n)
{
	int lane = threadIdx.x % 32, s = 8 * ((lane >> 2) & 3) + 2 * (lane & 3), hv = lane >> 4;
	uint32_t w0 = __shfl_sync(0xffffffffu, v, 4 * n + hv), w1 = __shfl_sync(0xffffffffu, v, 4 * n + 2 + hv);
	k[0] = (float)((w0 >> s) & 1u);
	k[1] = (float)((w0 >> (s + 1)) & 1u);
	k[2] = (float)((w1 >> s) & 1u);
	k[3] = (float)((w1 >> (s + 1)) & 1u);
}

/* The forward's form "64m" reads the mask from shared memory, where it
 * lands with the tile's keys and values: mask_copy puts the halves of a
 * 64-row tile's 4 warps into ms (NTHR words), a cp.async of 4 bytes a
 * thread in the tile's group. Thread 32w + L copies half (L >> 1) & 1 of
 * the block in row block L & 1 and column tile L >> 2 of warp w's rows
 * (i0 + 16w on), zeros outside the triangle; so a lane's two halves of a
 * column tile lie side by side, read without a shuffle (mask_gather). */
__device__ __forceinline__ void mask_copy(uint32_t *ms, const attn_args &a, int64_t bh, int i0, int j0)
{
	int w = threadIdx.x / 32, L = threadIdx.x % 32;
	const uint64_t *p = mask_word(a, bh, ((i0 + 16 * w) >> 3) + (L & 1), (j0 >> 3) + (L >> 2));
	const uint32_t *src = p ? (const uint32_t *)p + ((L >> 1) & 1) : (const uint32_t *)a.mask;
	cp_async<4>(ms + threadIdx.x, src, p != nullptr);
}

/* The lane's 32 bits of the tile (k[q] of column tile n at bit 4n + q),
 * gathered from mask_copy's words before the tile's products, so that
 * one register holds them through the tile */
__device__ __forceinline__ uint32_t mask_gather(const uint32_t *ms)
{
	int lane = threadIdx.x % 32, s = 8 * ((lane >> 2) & 3) + 2 * (lane & 3);
	const uint32_t *m = ms + threadIdx.x / 32 * 32 + 2 * (lane >> 4);
	uint32_t bits = 0;
#pragma unroll
	for (int n = 0; n < NT; n++) {
		uint2 v = *(const uint2 *)(m + 4 * n);
		bits |= ((v.x >> s) & 3u) << 4 * n | ((v.y >> s) & 3u) << (4 * n + 2);
	}
	return bits;
}

/* A dkv lane's k of column tile n (queries 8n + 2t and + 1 at keys rj[0],
 * rj[1]) from mask_fetch_keys' halves: half t >> 1 of the two key blocks'
 * blocks, bits (query 2t + e, key g) = 16t + 8e + g. */
__device__ __forceinline__ void mask_keys_at(float (&k)[4], uint32_t v, int n)
{
	int lane = threadIdx.x % 32, s = 16 * (lane & 1) + (lane >> 2), hv = (lane & 3) >> 1;
	uint32_t w0 = __shfl_sync(0xffffffffu, v, 4 * n + hv), w1 = __shfl_sync(0xffffffffu, v, 4 * n + 2 + hv);
	k[0] = (float)((w0 >> s) & 1u);
	k[1] = (float)((w0 >> (s + 8)) & 1u);
	k[2] = (float)((w1 >> s) & 1u);
	k[3] = (float)((w1 >> (s + 8)) & 1u);
}

/* The query-tile kernels' scores for the key tile at j0, in log2 units
 * (times sc log2 e): s = Q K^T or dP = dO V^T over the key pairs reaching
 * the warp's rows (np of them); masked (-inf) where a key comes after the
 * row or the row is past T, which only tiles that cross the diagonal or T
 * (edge) need looked at. */
template <int N>
__device__ __forceinline__ void mask_scores(float (&s)[N][4], int np, const int (&ri)[2], int j0,
					    int t, int edge, const attn_args &a)
{
	if (!edge)
		return;
#pragma unroll
	for (int n = 0; n < N; n++)
#pragma unroll
		for (int q = 0; q < 4; q++) {
			int i = ri[q >> 1], j = j0 + n * 8 + 2 * t + (q & 1);
			if (n >= 2 * np || j > i || i >= a.T)
				s[n][q] = -INFINITY;
		}
}

/* How a kernel works a tile of the other side: TILE_FULL, clear of the
 * diagonal and of T, the head unpadded (no mask, no branch: scores_m's
 * FULL); TILE_DIAG, across the diagonal but otherwise clear: every pair's
 * scores, then a compare a score (mask_causal in the query-tile kernels,
 * dkv's own); TILE_EDGE, the rest (a tile past T, a padded head): scores
 * of the pairs wanted, mask_scores. The same results in each: a masked
 * score is -inf (a probability 0) wherever it comes from. The diagonal
 * tile in the general code took as long as two full tiles, a warp's rows
 * leaving the others of its block waiting at the barrier
 * (bench/gpu/attnsrc.sh, H100, 2026-11-27). */
enum { TILE_EDGE = 0, TILE_FULL = 1, TILE_DIAG = 2 };

/* work(kind) for a tile: TILE_FULL where it is not an edge, TILE_DIAG
 * where it is but clear (of T, the head unpadded), else TILE_EDGE; the
 * kind a compile-time constant, each its own code */
template <class Work> __device__ __forceinline__ void by_tile_kind(bool edge, bool clear, Work &&work)
{
	if (!edge)
		work(std::integral_constant<int, TILE_FULL>());
	else if (clear)
		work(std::integral_constant<int, TILE_DIAG>());
	else
		work(std::integral_constant<int, TILE_EDGE>());
}

/* TILE_DIAG's mask: -inf where the key j0 + 8n + 2t + c comes after the
 * lane's row ri[hr] */
template <int N> __device__ __forceinline__ void mask_causal(float (&s)[N][4], const int (&ri)[2], int j0, int t)
{
#pragma unroll
	for (int hr = 0; hr < 2; hr++) {
		const int lim = ri[hr] - j0 - 2 * t; /* column 8n + c is past the row where above lim */
#pragma unroll
		for (int n = 0; n < N; n++)
#pragma unroll
			for (int c = 0; c < 2; c++)
				if (8 * n + c > lim)
					s[n][2 * hr + c] = -INFINITY;
	}
}

/* ---- the launches' host-side parts, shared by the forward
 * (attention_tc.cu) and the backward (attention_tc_bwd.cu) ---- */

/* a's heads for B sequences and their groups (tiles.h), for elements of
 * es bytes; an error when the grid's blocks do not fit its one dimension */
static int grid_groups(attn_args *a, int64_t B, size_t es, const char *op, gpt_err *err)
{
	int64_t bhn = B * a->NH, nt = (a->T + BQ - 1) / BQ;
	if (bhn * nt > INT32_MAX)
		return gpt_err_set(err, GPT_EUSAGE,
				   "%s: %lld heads of %lld positions are %lld tiles of %d, above a grid's %d; "
				   "use fewer sequences a micro-batch",
				   op, (long long)bhn, (long long)a->T, (long long)(bhn * nt), BQ, INT32_MAX);
	a->bhn = (uint32_t)bhn;
	a->hg = gpt_attention_head_group(a->bhn, a->T, a->HS, es);
	return 0;
}

/* blocks for tiles of `rows` rows (or keys) */
static unsigned grid_size(const attn_args &a, int rows = BQ)
{
	return a.bhn * (unsigned)((a.T + rows - 1) / rows);
}

/* Where a call's tensors are: the saved floats hold the log-sum-exps,
 * then (from a multiple of 4 floats, gpt_attention_flash_saved) the
 * output's low half, laid out as out. */
struct tc_io {
	void *out, *dqkv;
	const void *qkv, *dout, *cout; /* cout: out for the backward */
	float *lse, *Dv;
	void *olo;
	int vec, vecd; /* qkv and dout 16-byte aligned; dout, out and olo */
};

/* What tells kernel kind's shapes apart for its pick of tile rows. */
static gpt_cuda_attn_pick pick_key(int kind, const tc_io &io, const attn_args &a)
{
	return gpt_cuda_attn_pick{kind, a.drop, io.vec | io.vecd << 1, a.HS, a.T, a.bhn, 64};
}

static int aligned16(const void *p)
{
	return ((uintptr_t)p & 15u) == 0;
}

/* The saved floats' parts for B sequences of a's shape in storage dtype
 * dt (gpt_attention_flash_saved): the statistics, the low half and, with
 * dropout, its mask (into a), which starts where the state without
 * dropout ends. */
static void saved_parts(tc_io *io, attn_args *a, float *saved, int64_t B, gpt_dtype dt)
{
	io->lse = saved;
	io->olo = saved + (B * a->NH * a->T + 3) / 4 * 4;
	a->mask = a->drop ? (uint64_t *)(saved + gpt_attention_flash_saved(dt, B, a->T, a->NH, a->HS, 0))
			  : nullptr;
	a->mwords = gpt_attention_mask_words(a->T);
}

#endif
