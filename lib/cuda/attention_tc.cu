/* Causal attention on the tensor cores for bf16 and fp16 storage: the same
 * op, semantics and saved statistics as attention.cu (which dispatches here
 * when gpt_cuda_attention_tensor_cores), in the manner of FlashAttention-2.
 *
 * Products: PTX mma.sync m16n8k16 (bf16/fp16 operands, fp32 accumulators;
 * sm_80 and later), operands from shared memory by ldmatrix (.trans for
 * an operand needed transposed: V in O += P V, K in dQ += dS K, Q and dO in
 * dK and dV), registers with a fixed layout over the lanes (mma() below).
 * A warp owns 16 rows; its score tile (16 x 64) lives in the accumulator
 * registers, where the causal mask (on the tiles that cross the diagonal or
 * T only), the online softmax, dropout and the row statistics (two quad
 * shuffles) are applied in place; the probabilities (or their gradients)
 * are rounded to the storage dtype and repacked, register to register, as
 * the A operand of the next product, as in FlashAttention. Softmax
 * statistics, the output and the gradients accumulate in fp32; scores are
 * scaled by 1/sqrt(HS) log2(e) in fp32 (fused into the FFMA that takes
 * off the row's maximum) and exponentiated by ex2.approx.ftz. A tile clear
 * of the diagonal and of T, at an unpadded head size (most of them), runs
 * a second form of the tile's code, with no branch and no mask
 * (scores_m's FULL): the same arithmetic, so the same bits.
 * Dropout is a template argument: without it no element's code carries
 * the Philox rounds (nor their registers).
 *
 * Blocks of 4 warps own 64 query rows (or 64 keys), 16 per warp, and walk
 * 64-wide tiles of the other side up to the diagonal, each tile loaded once
 * into shared memory for the block by cp.async, the next tile landing
 * while this one is worked on (two buffers, two barriers a tile; rows
 * padded by 16 bytes, so the 8 rows of an ldmatrix phase hit distinct
 * banks). The head dimension is padded with zeros to W = 32, 64 or 128;
 * products skip the padding. The forward and dq can instead take 128
 * query rows a block, 32 a warp, and dkv (without dropout) 128 keys
 * (gpt_cuda_attention_rows; head sizes up to 64), each fragment of the
 * other side then serving two products: the same results, at another
 * speed; by default each kernel times both at its first call at a shape
 * and keeps the faster (attention_rows.cuh).
 * A block per head and tile, in the order of backend/tiles.h: groups of
 * heads, for the L2 cache, each group's longest tiles first.
 *   forward   per query tile: S = Q K^T,
 *             online softmax (the output rows rescaled in registers when
 *             their maximum moves), O += P V; writes O / l rounded to the
 *             storage dtype, what the rounding left (O - round(O), the
 *             "low half", into saved after the statistics) and
 *             lse = m + log l per row.
 *   dq        per query tile, D_i = dO_i . O_i in fp32
 *             from the output and its low half (= sum_j p_ij dp_ij, dp the
 *             dropped probabilities' gradient, to fp32's precision), then
 *             one walk over the keys recomputes S and dP = dO V^T and
 *             accumulates dQ += dS K, dS = P * (dP - D); writes dq and D.
 *             (FlashAttention takes D from the stored output alone; O
 *             rounded to bf16 makes D's error 2^-9 of it, which dq, a sum
 *             whose terms cancel, shows at up to 1.5 times the error of an
 *             exact D. The low half costs 2 bytes an output element; the
 *             exact D otherwise costs a second walk over the keys.)
 *   dkv       per key tile, over the query tiles at or
 *             after it: S^T = K Q^T, dP^T = V dO^T, dV += (P*mask)^T dO,
 *             dK += dS^T Q.
 * Every output element has one writer and no atomics are used, so the
 * results are the same bits on every run. Dropout factors come from kept()
 * (attention.cuh), the CPU's Philox coordinates. Nothing T x T is stored.
 *
 * The backward kernels work a tile in two halves of 32 columns, so that
 * half the score registers (S and dP, 32 floats each at full width) are
 * live at a time; the products' order per output element is unchanged.
 * Registers (ptxas 13.0, sm_90a, bf16, W = 64): forward 128, dq 128, dkv
 * 168 (16 bytes spilled) without dropout (4, 4 and 3 blocks an SM as the
 * registers go), 128, 168 (4 spilled) and 246 with it (4, 3, 2); in
 * 128-row tiles, forward 248, dq 244 and dkv 255 (12 spilled; 2 blocks),
 * 252 and 255 (12 spilled) with dropout (2; dkv with dropout would spill
 * 204 bytes, so it keeps 64 keys; the forward with dropout has only the
 * general form there, the second would spill 260 bytes).
 * The backward's pairs of tile buffers are a pointer and a step (buf2),
 * not arrays indexed by a variable, which would sit in local memory.
 *
 * Shared memory per block (16-bit storage): 5 (forward) or 6 (dq, dkv)
 * tiles of 64 x (W + 8) elements (6, 8 and 8 in 128-row tiles): 45 and
 * 54 KiB at W = 64, 85 and 102 KiB at W = 128 (above 48 KiB asked for
 * with cudaFuncSetAttribute). Limits:
 * head sizes that are multiples of 16 up to 128 (others, and fp32 storage,
 * use attention.cu). Tiles are copied by cp.async 16 bytes at a time when
 * qkv and dout are 16-byte aligned, element by element otherwise.
 * tests/gpu/emu carries mma.sync, ldmatrix (mma.h) and cp.async
 * (cuda_runtime.h: copies land at the wait) for the CPU emulation. */
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

/* Rows [r0, r0 + ROWS) of a (T, HS) slice at base with row stride `stride`
 * into a (ROWS, W) tile of row stride W + 8 (16 bytes of padding, which
 * spreads the rows over the banks), zeros past T and past HS: with vec
 * (base and stride 16-byte aligned) by cp.async, landing by the next
 * cp_wait that covers it, else element by element, there at once. */
template <class E, int W, int ROWS = 64>
__device__ static void load_tile(E *tile, const E *base, int64_t stride, int r0, const attn_args &a,
				 int vec)
{
	const int ld = W + 8;
	if (vec) {
		for (int e = threadIdx.x; e < ROWS * (W / 8); e += NTHR) {
			int rr = e / (W / 8), d = e % (W / 8) * 8, r = r0 + rr;
			bool ok = r < a.T && d < a.HS;
			cp_async<16>(tile + rr * ld + d, ok ? base + r * stride + d : base, ok);
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

/* Writes the warp's accumulated rows (two a lane: rows[0], rows[1]) to dst
 * (row rr at dst + rr * stride, the lane's columns 8d + 2t, 8d + 2t + 1)
 * for rows below T, each times its factor f; with lo, what rounding to E
 * left of each value (v - E(v), rounded to E) at the same place in lo. */
template <class E, int W>
__device__ __forceinline__ void write_acc(E *dst, E *lo, int64_t stride, const float (&acc)[W / 8][4],
					  const int (&rows)[2], const float (&f)[2], int t,
					  const attn_args &a)
{
#pragma unroll
	for (int hr = 0; hr < 2; hr++)
		if (rows[hr] < a.T)
#pragma unroll
			for (int d = 0; d < W / 8; d++)
				if (d * 8 < a.HS)
#pragma unroll
					for (int c = 0; c < 2; c++) {
						int64_t at = rows[hr] * stride + d * 8 + 2 * t + c;
						float v = acc[d][2 * hr + c] * f[hr];
						E e;
						gpt_st(&e, v);
						dst[at] = e;
						if (lo)
							gpt_st(lo + at, v - gpt_ld(&e));
					}
}

/* Dropout's Philox blocks, shared by the lanes of a warp. A block holds
 * the bits of four keys (features) at one query (position); the four
 * keys (feature0 + h) * T + 4m .. + 3 share one where 4 divides
 * (feature0 + h) * T (aligned(): T a multiple of 4 does it), and the lanes
 * that need a block's words then compute it once between them and pass
 * the words by shuffles. The words, hence the masks, are the same bits
 * as kept()'s. All 32 lanes of the warp call these together. */
__device__ __forceinline__ bool aligned(const attn_args &a, int64_t h)
{
	return (a.d.feature0 + h) * a.T % 4 == 0;
}

__device__ __forceinline__ void block_of(uint32_t (&r)[4], const attn_args &a, int64_t b, int64_t h,
					 int64_t i, int64_t j)
{
	gpt_rng_block(r, a.d.key.seed, a.d.key.step, a.d.key.layer, a.d.key.site,
		      (uint64_t)(a.d.sample0 + b), (uint64_t)i, (uint64_t)((a.d.feature0 + h) * a.T + j));
}

__device__ __forceinline__ uint32_t word(const uint32_t (&r)[4], int w)
{
	return w == 0 ? r[0] : w == 1 ? r[1] : w == 2 ? r[2] : r[3];
}

/* kept() of probabilities (b, h, i, j) and (b, h, i, j + 1), in k[0] and
 * k[1]: their features are adjacent, so one block holds both unless the
 * first is the last of its block. */
__device__ __forceinline__ void kept2(float (&k)[2], const attn_args &a, int64_t b, int64_t h,
				      int64_t i, int64_t j)
{
	int e = (int)((uint64_t)((a.d.feature0 + h) * a.T + j) & 3u);
	uint32_t r[4], lo, hi;
	block_of(r, a, b, h, i, j);
	lo = word(r, e);
	if (e < 3) {
		hi = word(r, e + 1);
	} else {
		block_of(r, a, b, h, i, j + 1);
		hi = r[0];
	}
	k[0] = lo >= a.thr ? 1.0f : 0.0f;
	k[1] = hi >= a.thr ? 1.0f : 0.0f;
}

/* kept() of a lane's four elements of a column tile in a query-tile
 * kernel, k[q] as the accumulator's d[q]: rows ri[0], ri[1], keys j and
 * j + 1 (j = the tile's 8n + 2t); all 1 without dropout. Lanes t and t ^ 1
 * need the same two blocks (rows ri[0] and ri[1], the keys of their group
 * of four): where aligned, the even lane computes row ri[0]'s, the odd
 * ri[1]'s, and each passes the other the two words it needs; else kept2
 * (a block a row). */
template <bool DROP>
__device__ __forceinline__ void kept_lane(float (&k)[4], const attn_args &a, int64_t b, int64_t h,
					  const int (&ri)[2], int j, bool al)
{
	k[0] = k[1] = k[2] = k[3] = 1.0f;
	if (!DROP)
		return;
	if (al) {
		int odd = threadIdx.x & 1; /* t & 1: keys j % 4 = 2 and 3 of the group */
		uint32_t r[4], m[4];
		block_of(r, a, b, h, odd ? ri[1] : ri[0], j & ~3);
		uint32_t y0 = __shfl_xor_sync(0xffffffffu, odd ? r[0] : r[2], 1);
		uint32_t y1 = __shfl_xor_sync(0xffffffffu, odd ? r[1] : r[3], 1);
		m[0] = odd ? y0 : r[0], m[1] = odd ? y1 : r[1];
		m[2] = odd ? r[2] : y0, m[3] = odd ? r[3] : y1;
#pragma unroll
		for (int q = 0; q < 4; q++)
			k[q] = m[q] >= a.thr ? 1.0f : 0.0f;
		return;
	}
	float k0[2], k1[2];
	kept2(k0, a, b, h, ri[0], j);
	kept2(k1, a, b, h, ri[1], j);
	k[0] = k0[0], k[1] = k0[1], k[2] = k1[0], k[3] = k1[1];
}

/* kept() of a lane's four elements of a column tile in dkv, k[q] as the
 * accumulator's d[q]: keys (rows) rj[0], rj[1], queries (positions) i and
 * i + 1. The four lanes u = 0..3 of a key group (g = 4m + u, one t) need
 * the same four blocks, (query i + (q & 1), the group of rj[q >> 1]) for
 * q = 0..3, and each word u of every one: where aligned, lane u computes
 * block u and four shuffles pass the words round (in round s lane u reads
 * block (u + s) & 3 from its lane, which sends its own word u); else a
 * block an element (kept). */
template <bool DROP>
__device__ __forceinline__ void kept_keys(float (&k)[4], const attn_args &a, int64_t b, int64_t h,
					  const int (&rj)[2], int i, bool al)
{
	k[0] = k[1] = k[2] = k[3] = 1.0f;
	if (!DROP)
		return;
	if (al) {
		int lane = threadIdx.x % 32, u = (lane >> 2) & 3;
		uint32_t r[4], w[4];
		block_of(r, a, b, h, i + (u & 1), ((u >> 1) ? rj[1] : rj[0]) & ~3);
#pragma unroll
		for (int s = 0; s < 4; s++) {
			int from = (u + s) & 3; /* the block this lane takes in this round */
			uint32_t v = __shfl_sync(0xffffffffu, word(r, (u - s) & 3), lane + 4 * (from - u));
#pragma unroll
			for (int q = 0; q < 4; q++)
				if (q == from)
					w[q] = v;
		}
#pragma unroll
		for (int q = 0; q < 4; q++)
			k[q] = w[q] >= a.thr ? 1.0f : 0.0f;
		return;
	}
#pragma unroll
	for (int q = 0; q < 4; q++)
		k[q] = kept(a, b, h, i + (q & 1), rj[q >> 1]);
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

/* The forward, MW blocks of 16 rows a warp (a tile of 64 MW rows): with
 * MW = 2, FlashAttention-2's choice at head size 64, each key and value
 * fragment read from shared memory serves two products, and a warp has
 * twice the independent products in flight, for twice the registers.
 * (With dropout and MW = 1, ptxas is held to 4 blocks an SM, 128
 * registers, which it fits without spilling up to W = 64; elsewhere, 0:
 * no bound, which leaves it 128 registers without dropout at W = 64:
 * 4 blocks as well.) */
template <class E, int W, bool DROP, int MW>
__global__ static void __launch_bounds__(NTHR, DROP && MW == 1 && W <= 64 ? 4 : 0)
	tc_fwd_kernel(E *out, float *lse, E *olo, const E *qkv, attn_args a, int vec)
{
	extern __shared__ float sh[];
	const int LE = W + 8, BQF = BQ * MW, RW = 16 * MW;
	E *qs = (E *)sh, *ks[2] = {qs + BQF * LE, qs + (BQF + BK) * LE};
	E *vs[2] = {qs + (BQF + 2 * BK) * LE, qs + (BQF + 3 * BK) * LE};
	/* (plain variables, not a structured binding: the tile's lambda
	 * captures them, which C++17 does not allow of a binding) */
	const q_place P = q_place_of(a, MW);
	const int64_t bh = P.bh, b = P.b, h = P.h, Cl = P.Cl, C3 = P.C3;
	const int i0 = P.i0, r0 = P.r0, jend = P.jend, t = P.t, kf = P.kf, rl[2] = {P.ri[0], P.ri[1]};
	int ri[MW][2]; /* this lane's rows in each block of 16 */
#pragma unroll
	for (int mi = 0; mi < MW; mi++)
		ri[mi][0] = rl[0] + 16 * mi, ri[mi][1] = rl[1] + 16 * mi;
	const bool al = aligned(a, h);
	const E *base = qkv + b * a.T * C3 + h * a.HS;
	const E *qw = qs + (r0 - i0) * LE;
	const float scl = a.sc * L2E;
	load_tile<E, W, BQF>(qs, base, C3, i0, a, vec);
	load_kv<E, W>(ks[0], vs[0], base, 0, a, vec);
	/* o: the unnormalised output rows; m: their running maxima (log2
	 * units), l: this lane's part of their sums */
	float o[MW][W / 8][4], m[MW][2], l[MW][2];
#pragma unroll
	for (int mi = 0; mi < MW; mi++) {
		m[mi][0] = m[mi][1] = -INFINITY;
		l[mi][0] = l[mi][1] = 0.0f;
#pragma unroll
		for (int d = 0; d < W / 8; d++)
			o[mi][d][0] = o[mi][d][1] = o[mi][d][2] = o[mi][d][3] = 0.0f;
	}
	for (int j0 = 0, cur = 0; j0 <= jend; j0 += BK, cur ^= 1) {
		/* the next tile on its way while this one is worked on */
		bool more = j0 + BK <= jend;
		if (more)
			load_kv<E, W>(ks[cur ^ 1], vs[cur ^ 1], base, j0 + BK, a, vec);
		tile_ready(more);
		/* (with MW > 1 the block's last key tile may come after all of
		 * a warp's rows) */
		if (r0 < a.T && j0 <= r0 + RW - 1) {
			const int edge = j0 + BK - 1 > r0 || r0 + RW - 1 >= a.T;
			/* the tile, as general code or (full: clear of the diagonal
			 * and of T, the head unpadded) without a branch */
			auto work = [&](auto full) {
				constexpr bool F = decltype(full)::value;
				int np = F ? KT : pairs_to(r0 + RW - 1, j0);
				float s[MW][NT][4];
				scores_m<E, W, NT, MW, F>(s, qw, ks[cur], LE, 0, np, kf);
#pragma unroll
				for (int mi = 0; mi < MW; mi++) {
					if (!F)
						mask_scores(s[mi], np, ri[mi], j0, t, edge, a);
					/* the rows' maxima of the unscaled scores (a tree):
					 * scaling by scl > 0, rounded, keeps their order, so
					 * the scaled maximum is the maximum scaled */
					float mx[NT][2];
#pragma unroll
					for (int n = 0; n < NT; n++) {
						mx[n][0] = fmaxf(s[mi][n][0], s[mi][n][1]);
						mx[n][1] = fmaxf(s[mi][n][2], s[mi][n][3]);
					}
#pragma unroll
					for (int w = 1; w < NT; w *= 2)
#pragma unroll
						for (int n = 0; n + w < NT; n += 2 * w) {
							mx[n][0] = fmaxf(mx[n][0], mx[n + w][0]);
							mx[n][1] = fmaxf(mx[n][1], mx[n + w][1]);
						}
					float mu[2], corr[2];
#pragma unroll
					for (int hr = 0; hr < 2; hr++) {
						float mn = fmaxf(m[mi][hr], quad_max(mx[0][hr]) * scl);
						mu[hr] = mn == -INFINITY ? 0.0f : mn; /* a row with no key yet */
						corr[hr] = ex2(m[mi][hr] - mu[hr]);
						m[mi][hr] = mn;
#pragma unroll
						for (int d = 0; d < W / 8; d++) {
							o[mi][d][2 * hr] *= corr[hr];
							o[mi][d][2 * hr + 1] *= corr[hr];
						}
					}
					/* p = 2^(s scl - mu), one FFMA and one MUFU an element */
					l[mi][0] *= corr[0];
					l[mi][1] *= corr[1];
#pragma unroll
					for (int n = 0; n < NT; n++) {
						float k[4];
						kept_lane<DROP>(k, a, b, h, ri[mi], j0 + n * 8 + 2 * t, al);
#pragma unroll
						for (int q = 0; q < 4; q++) {
							float p = ex2(fmaf(s[mi][n][q], scl, -mu[q >> 1]));
							l[mi][q >> 1] += p;
							s[mi][n][q] = p * k[q];
						}
					}
				}
				u32 pa[MW][KT][4];
#pragma unroll
				for (int mi = 0; mi < MW; mi++)
					repack<E>(pa[mi], s[mi]);
				accumulate_m<E, W, KT, MW, F>(o, pa, 0, np, vs[cur], LE, a.HS);
			};
			/* (with dropout in 128-row tiles the second form would
			 * spill 260 bytes: one form only there) */
			if constexpr (DROP && MW > 1)
				work(std::false_type());
			else if (edge || kf != W / 16)
				work(std::false_type());
			else
				work(std::true_type());
		}
		__syncthreads(); /* the tile's readers are done before it is refilled */
	}
	int64_t at = b * a.T * Cl + h * a.HS;
#pragma unroll
	for (int mi = 0; mi < MW; mi++) {
		float f[2];
#pragma unroll
		for (int hr = 0; hr < 2; hr++) {
			float lt = quad_sum(l[mi][hr]);
			f[hr] = lt > 0.0f ? a.dscale / lt : 0.0f; /* dropout's 1/(1-p) here */
			if (t == 0 && ri[mi][hr] < a.T)
				lse[bh * a.T + ri[mi][hr]] = m[mi][hr] * (1.0f / L2E) + logf(lt);
		}
		write_acc<E, W>(out + at, olo + at, Cl, o[mi], ri[mi], f, t, a);
	}
}

/* row_dots' row rr of the tile (two threads, the lower and upper half of
 * the head) */
template <class E>
__device__ __forceinline__ void row_dot(float *Ds, float *Dv, const E *gb, const E *ob, const E *lb,
					int i0, int rr, int64_t Cl, const attn_args &a, int vec)
{
	int half = threadIdx.x % 2, i = i0 + rr, n = (int)a.HS / 2;
	float sum = 0.0f;
	if (i < a.T) {
		int64_t at = i * Cl + half * n;
		const E *g = gb + at, *o = ob + at, *l = lb + at;
		if (vec)
			for (int d = 0; d < n; d += 8) {
				float gf[8], of[8], lf[8];
				gpt_ld_vec(gf, g + d);
				gpt_ld_vec(of, o + d);
				gpt_ld_vec(lf, l + d);
#pragma unroll
				for (int e = 0; e < 8; e++)
					sum += gf[e] * (of[e] + lf[e]);
			}
		else
			for (int d = 0; d < n; d++)
				sum += gpt_ld(g + d) * (gpt_ld(o + d) + gpt_ld(l + d));
	}
	sum += __shfl_xor_sync(0xffffffffu, sum, 1);
	if (half == 0) {
		Ds[rr] = i < a.T ? sum : 0.0f;
		if (i < a.T)
			Dv[i] = sum;
	}
}

/* D_i = dO_i . O_i in fp32 for the rows [i0, i0 + 64 MW) of a head (gb,
 * ob and lb: its dout, out and the output's low half, all of row stride
 * Cl), O as out + lo to fp32's precision: two threads a row, each half the
 * head (HS / 2 a multiple of 8; with vec, 16-byte loads), 64 rows at a
 * time. Into Ds (0 past T) and Dv[i] for the dkv kernel. */
template <class E, int MW>
__device__ static void row_dots(float *Ds, float *Dv, const E *gb, const E *ob, const E *lb, int i0,
				int64_t Cl, const attn_args &a, int vec)
{
	static_assert(NTHR == 2 * BQ, "two threads a row");
#pragma unroll 1
	for (int rg = 0; rg < MW; rg++)
		row_dot<E>(Ds, Dv, gb, ob, lb, i0, rg * BQ + (int)threadIdx.x / 2, Cl, a, vec);
}

/* dq, MW blocks of 16 query rows a warp (a tile of 64 MW rows), as the
 * forward's MW. */
template <class E, int W, bool DROP, int MW>
__global__ static void __launch_bounds__(NTHR)
	tc_dq_kernel(E *dqkv, float *Dv, const E *dout, const E *out, const E *olo, const E *qkv,
		     const float *lse, attn_args a, int vec, int vecd)
{
	extern __shared__ float sh[];
	const int LE = W + 8, BQF = BQ * MW, RW = 16 * MW;
	E *qs = (E *)sh, *gs = qs + BQF * LE;
	const buf2<E *> ks = {gs + BQF * LE, BK * LE}, vs = {gs + (BQF + 2 * BK) * LE, BK * LE};
	float *Ds = (float *)(gs + (BQF + 4 * BK) * LE);
	/* (plain variables, not a structured binding: the tile's lambda
	 * captures them, which C++17 does not allow of a binding) */
	const q_place P = q_place_of(a, MW);
	const int64_t bh = P.bh, b = P.b, h = P.h, Cl = P.Cl, C3 = P.C3;
	const int i0 = P.i0, r0 = P.r0, jend = P.jend, t = P.t, kf = P.kf, rl[2] = {P.ri[0], P.ri[1]};
	int ri[MW][2]; /* this lane's rows in each block of 16 */
#pragma unroll
	for (int mi = 0; mi < MW; mi++)
		ri[mi][0] = rl[0] + 16 * mi, ri[mi][1] = rl[1] + 16 * mi;
	const bool al = aligned(a, h);
	const E *base = qkv + b * a.T * C3 + h * a.HS;
	const E *qw = qs + (r0 - i0) * LE, *gw = gs + (r0 - i0) * LE;
	const float scl = a.sc * L2E;
	int64_t ot = b * a.T * Cl + h * a.HS;
	load_tile<E, W, BQF>(qs, base, C3, i0, a, vec);
	load_tile<E, W, BQF>(gs, dout + ot, Cl, i0, a, vec);
	load_kv<E, W>(ks[0], vs[0], base, 0, a, vec);
	row_dots<E, MW>(Ds, Dv + bh * a.T, dout + ot, out + ot, olo + ot, i0, Cl, a, vecd);
	__syncthreads(); /* Ds */
	/* L: the rows' log-sum-exp in log2 units */
	float L[MW][2], D[MW][2], dq[MW][W / 8][4];
#pragma unroll
	for (int mi = 0; mi < MW; mi++) {
#pragma unroll
		for (int hr = 0; hr < 2; hr++) {
			L[mi][hr] = ri[mi][hr] < a.T ? lse[bh * a.T + ri[mi][hr]] * L2E : 0.0f;
			D[mi][hr] = Ds[ri[mi][hr] - i0];
		}
#pragma unroll
		for (int d = 0; d < W / 8; d++)
			dq[mi][d][0] = dq[mi][d][1] = dq[mi][d][2] = dq[mi][d][3] = 0.0f;
	}
	for (int j0 = 0, cur = 0; j0 <= jend; j0 += BK, cur ^= 1) {
		bool more = j0 + BK <= jend;
		if (more)
			load_kv<E, W>(ks[cur ^ 1], vs[cur ^ 1], base, j0 + BK, a, vec);
		tile_ready(more);
		/* (with MW > 1 the block's last key tile may come after all of
		 * a warp's rows) */
		if (r0 < a.T && j0 <= r0 + RW - 1) {
			int np = pairs_to(r0 + RW - 1, j0), edge = j0 + BK - 1 > r0 || r0 + RW - 1 >= a.T;
			/* the tile, as general code or (full: clear of the diagonal
			 * and of T, the head unpadded) without a branch (forward) */
			auto work = [&](auto full) {
				constexpr bool F = decltype(full)::value;
				/* the tile's two halves of 32 keys one after the other:
				 * half the score registers live */
#pragma unroll 1
				for (int hf = 0; hf < 2; hf++) {
					int q1 = F ? 2 : np - 2 * hf < 2 ? np - 2 * hf : 2, jh = j0 + hf * 32;
					if (q1 <= 0)
						continue;
					const E *kh = ks[cur] + hf * 32 * LE, *vh = vs[cur] + hf * 32 * LE;
					float s[MW][NT / 2][4], dp[MW][NT / 2][4];
					scores_m<E, W, NT / 2, MW, F>(s, qw, kh, LE, 0, q1, kf);
					scores_m<E, W, NT / 2, MW, F>(dp, gw, vh, LE, 0, q1, kf);
					u32 da[MW][KT / 2][4];
#pragma unroll
					for (int mi = 0; mi < MW; mi++) {
#pragma unroll
						for (int n = 0; n < NT / 2; n++)
#pragma unroll
							for (int q = 0; q < 4; q++)
								s[mi][n][q] = s[mi][n][q] * scl - L[mi][q >> 1];
						if (!F)
							mask_scores(s[mi], q1, ri[mi], jh, t, edge, a);
#pragma unroll
						for (int n = 0; n < NT / 2; n++) {
							float k[4];
							kept_lane<DROP>(k, a, b, h, ri[mi], jh + n * 8 + 2 * t, al);
#pragma unroll
							for (int q = 0; q < 4; q++) {
								float g = DROP ? dp[mi][n][q] * k[q] * a.dscale : dp[mi][n][q];
								s[mi][n][q] = ex2(s[mi][n][q]) * (g - D[mi][q >> 1]);
							}
						}
						repack<E>(da[mi], s[mi]);
					}
					accumulate_m<E, W, KT / 2, MW, F>(dq, da, 0, q1, kh, LE, a.HS);
				}
			};
			if (edge || kf != W / 16)
				work(std::false_type());
			else
				work(std::true_type());
		}
		__syncthreads(); /* the tile's readers are done before it is refilled */
	}
	const float f[2] = {a.sc, a.sc};
#pragma unroll
	for (int mi = 0; mi < MW; mi++)
		write_acc<E, W>(dqkv + b * a.T * C3 + h * a.HS, (E *)nullptr, C3, dq[mi], ri[mi], f, t, a);
}

/* The query tile at i0 of a head for the dkv kernel: q and dO rows and
 * their statistics (lse in natural units, D), as one cp.async group;
 * zeros past T. */
template <class E, int W>
__device__ static void load_q(E *qs, E *gs, float *Ls, float *Ds, const E *base, const E *gbase,
			      const float *lse, const float *Dv, int i0, const attn_args &a, int vec)
{
	int64_t Cl = a.NH * a.HS;
	load_tile<E, W>(qs, base, 3 * Cl, i0, a, vec);
	load_tile<E, W>(gs, gbase, Cl, i0, a, vec);
	if (threadIdx.x < BQ) {
		int iq = i0 + threadIdx.x;
		cp_async<4>(Ls + threadIdx.x, iq < a.T ? lse + iq : lse, iq < a.T);
		cp_async<4>(Ds + threadIdx.x, iq < a.T ? Dv + iq : Dv, iq < a.T);
	}
	cp_commit();
}

/* dk and dv, MW blocks of 16 keys a warp (a tile of 64 MW keys), as the
 * forward's MW. */
template <class E, int W, bool DROP, int MW>
__global__ static void __launch_bounds__(NTHR)
	tc_dkv_kernel(E *dqkv, const E *dout, const E *qkv, const float *lse, const float *Dv,
		      attn_args a, int vec)
{
	extern __shared__ float sh[];
	const int LE = W + 8, BKF = BK * MW, RW = 16 * MW;
	E *ks = (E *)sh, *vs = ks + BKF * LE;
	const buf2<E *> qs = {vs + BKF * LE, BQ * LE}, gs = {vs + (BKF + 2 * BQ) * LE, BQ * LE};
	float *st = (float *)(vs + (BKF + 4 * BQ) * LE); /* the query tiles' statistics */
	const buf2<float *> Ls = {st, BQ}, Ds = {st + 2 * BQ, BQ};
	const tile_place tp = tile_of(a, BKF);
	int64_t bh = tp.bh, b = bh / a.NH, h = bh % a.NH;
	int j0 = tp.rank * BKF, T = (int)a.T;
	const bool al = aligned(a, h);
	int lane = threadIdx.x % 32, t = lane & 3, kf = (int)(a.HS / 16);
	int64_t Cl = a.NH * a.HS, C3 = 3 * Cl;
	int jw0 = j0 + threadIdx.x / 32 * RW;
	int rj[MW][2]; /* this lane's keys in each block of 16 */
#pragma unroll
	for (int mi = 0; mi < MW; mi++)
		rj[mi][0] = jw0 + 16 * mi + (lane >> 2), rj[mi][1] = rj[mi][0] + 8;
	const E *base = qkv + b * a.T * C3 + h * a.HS, *gbase = dout + b * a.T * Cl + h * a.HS;
	const float *lh = lse + bh * a.T, *dh = Dv + bh * a.T;
	const E *kw = ks + (jw0 - j0) * LE, *vw = vs + (jw0 - j0) * LE;
	const float scl = a.sc * L2E;
	load_tile<E, W, BKF>(ks, base + Cl, C3, j0, a, vec);
	load_tile<E, W, BKF>(vs, base + 2 * Cl, C3, j0, a, vec);
	load_q<E, W>(qs[0], gs[0], Ls[0], Ds[0], base, gbase, lh, dh, j0, a, vec);
	float dk[MW][W / 8][4], dv[MW][W / 8][4];
#pragma unroll
	for (int mi = 0; mi < MW; mi++)
#pragma unroll
		for (int d = 0; d < W / 8; d++)
#pragma unroll
			for (int q = 0; q < 4; q++)
				dk[mi][d][q] = dv[mi][d][q] = 0.0f;
	for (int i0 = j0, cur = 0; i0 < T; i0 += BQ, cur ^= 1) {
		bool more = i0 + BQ < T;
		if (more)
			load_q<E, W>(qs[cur ^ 1], gs[cur ^ 1], Ls[cur ^ 1], Ds[cur ^ 1], base, gbase, lh, dh,
				     i0 + BQ, a, vec);
		tile_ready(more);
		if (jw0 < T) {
			/* the 16-query column pairs at or after this warp's first key, below T */
			int p0 = jw0 > i0 ? (jw0 - i0) / 16 : 0, p1 = pairs_to(T - 1, i0);
			int edge = i0 < jw0 + RW - 1 || i0 + BQ > T;
			/* the tile, as general code or (full: clear of the diagonal
			 * and of T, the head unpadded) without a branch (forward) */
			auto work = [&](auto full) {
				constexpr bool F = decltype(full)::value;
				/* the tile's two halves of 32 queries one after the
				 * other: half the score registers live (3 blocks an SM
				 * where they fit) */
#pragma unroll 1
				for (int hf = 0; hf < 2; hf++) {
					int q0 = F ? 0 : p0 > 2 * hf ? p0 - 2 * hf : 0;
					int q1 = F ? 2 : p1 - 2 * hf < 2 ? p1 - 2 * hf : 2;
					if (q0 >= q1)
						continue;
					const E *qh = qs[cur] + hf * 32 * LE, *gh = gs[cur] + hf * 32 * LE;
					const float *lc = Ls[cur] + hf * 32, *dc = Ds[cur] + hf * 32;
					float s[MW][NT / 2][4], dp[MW][NT / 2][4];
					scores_m<E, W, NT / 2, MW, F>(s, kw, qh, LE, q0, q1, kf);
					scores_m<E, W, NT / 2, MW, F>(dp, vw, gh, LE, q0, q1, kf);
#pragma unroll
					for (int mi = 0; mi < MW; mi++)
#pragma unroll
						for (int n = 0; n < NT / 2; n++) {
							float k[4];
							kept_keys<DROP>(k, a, b, h, rj[mi], i0 + hf * 32 + n * 8 + 2 * t, al);
#pragma unroll
							for (int q = 0; q < 4; q++) {
								int c = n * 8 + 2 * t + (q & 1), i = i0 + hf * 32 + c;
								int j = rj[mi][q >> 1];
								float p = ex2(s[mi][n][q] * scl - lc[c] * L2E);
								if (!F && edge && (n < 2 * q0 || n >= 2 * q1 || i < j || i >= T))
									p = 0.0f;
								/* (without dropout, dscale is 1) */
								float g = DROP ? dp[mi][n][q] * k[q] * a.dscale : dp[mi][n][q];
								s[mi][n][q] = p * k[q];
								dp[mi][n][q] = p * (g - dc[c]);
							}
						}
					u32 pa[MW][KT / 2][4];
#pragma unroll
					for (int mi = 0; mi < MW; mi++)
						repack<E>(pa[mi], s[mi]);
					accumulate_m<E, W, KT / 2, MW, F>(dv, pa, q0, q1, gh, LE, a.HS);
#pragma unroll
					for (int mi = 0; mi < MW; mi++)
						repack<E>(pa[mi], dp[mi]);
					accumulate_m<E, W, KT / 2, MW, F>(dk, pa, q0, q1, qh, LE, a.HS);
				}
			};
			if (edge || kf != W / 16)
				work(std::false_type());
			else
				work(std::true_type());
		}
		__syncthreads(); /* the tile's readers are done before it is refilled */
	}
	E *o = dqkv + b * a.T * C3 + h * a.HS;
	const float fk[2] = {a.sc, a.sc}, fv[2] = {a.dscale, a.dscale}; /* dropout's 1/(1-p) */
#pragma unroll
	for (int mi = 0; mi < MW; mi++) {
		write_acc<E, W>(o + Cl, (E *)nullptr, C3, dk[mi], rj[mi], fk, t, a);
		write_acc<E, W>(o + 2 * Cl, (E *)nullptr, C3, dv[mi], rj[mi], fv, t, a);
	}
}

int gpt_cuda_attention_tensor_cores(gpt_dtype dt, int64_t HS)
{
	return gpt_attention_tensor_cores(dt, HS);
}

/* the query tile of mw * 64 rows, the streamed tiles twice (the one
 * worked on, the next one landing) */
static size_t fwd_shm(int W, size_t es, int mw)
{
	return (size_t)(BQ * mw + 4 * BK) * (W + 8) * es;
}

static size_t dq_shm(int W, size_t es, int mw)
{
	return (size_t)(2 * BQ * mw + 4 * BK) * (W + 8) * es + BQ * mw * sizeof(float);
}

static size_t dkv_shm(int W, size_t es, int mw)
{
	return (size_t)(2 * BK * mw + 4 * BQ) * (W + 8) * es + (size_t)(4 * BQ) * sizeof(float);
}

/* Lets kernel k use shm bytes of dynamic shared memory (above 48 KiB needs asking). */
template <class K> static int allow_shm(K *k, size_t shm, const char *op, gpt_err *err)
{
	return gpt_cuda_check(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize,
						   (int)shm),
			      op, err);
}

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

template <class E, int W, int MW>
static int fwd_nf(cudaStream_t s, const tc_io &io, int64_t B, const attn_args &a, gpt_err *err)
{
	size_t shm = fwd_shm(W, sizeof(E), MW);
	/* dropout's Philox, in every element's code, only where it is asked for */
	auto kern = a.drop ? tc_fwd_kernel<E, W, true, MW> : tc_fwd_kernel<E, W, false, MW>;
	int rc = allow_shm(kern, shm, "attention_fwd: shared memory", err);
	if (rc)
		return rc;
	kern<<<grid_size(a, BQ * MW), NTHR, shm, s>>>((E *)io.out, io.lse, (E *)io.olo, (const E *)io.qkv, a, io.vec);
	return gpt_cuda_launched("attention_fwd", err);
}

template <class E, int W, int MW>
static int dq_nf(cudaStream_t s, const tc_io &io, int64_t B, const attn_args &a, gpt_err *err)
{
	size_t shm = dq_shm(W, sizeof(E), MW);
	auto kern = a.drop ? tc_dq_kernel<E, W, true, MW> : tc_dq_kernel<E, W, false, MW>;
	int rc = allow_shm(kern, shm, "attention_bwd: shared memory", err);
	if (rc)
		return rc;
	kern<<<grid_size(a, BQ * MW), NTHR, shm, s>>>((E *)io.dqkv, io.Dv, (const E *)io.dout, (const E *)io.cout,
						     (const E *)io.olo, (const E *)io.qkv, io.lse, a, io.vec, io.vecd);
	return gpt_cuda_launched("attention_bwd (dq)", err);
}

/* dkv with dropout keeps 64-key tiles: in 128 it spills (204 bytes at W = 64) */
template <class E, int W, int MW>
static int dkv_nf(cudaStream_t s, const tc_io &io, int64_t B, const attn_args &a, gpt_err *err)
{
	const int mkv = a.drop ? 1 : MW;
	size_t shm = dkv_shm(W, sizeof(E), mkv);
	auto kern = a.drop ? tc_dkv_kernel<E, W, true, 1> : tc_dkv_kernel<E, W, false, MW>;
	int rc = allow_shm(kern, shm, "attention_bwd: shared memory", err);
	if (rc)
		return rc;
	kern<<<grid_size(a, BK * mkv), NTHR, shm, s>>>((E *)io.dqkv, (const E *)io.dout, (const E *)io.qkv, io.lse,
						     io.Dv, a, io.vec);
	return gpt_cuda_launched("attention_bwd (dkv)", err);
}

/* What tells kernel kind's shapes apart for its pick of tile rows. */
static gpt_cuda_attn_pick pick_key(int kind, const tc_io &io, const attn_args &a)
{
	return gpt_cuda_attn_pick{kind, a.drop, io.vec | io.vecd << 1, a.HS, a.T, a.bhn, 64};
}

/* The padded width W that holds the head: 32, 64 (either in 64- or
 * 128-row tiles) or 128 (64 only: 32 rows a warp would spill). */
template <class E, int W>
static int fwd_w(gpt_cuda_ctx *cx, const tc_io &io, int64_t B, const attn_args &a, gpt_err *err)
{
	cudaStream_t s = cx->stream;
	auto go = [&](int rows) {
		if constexpr (W <= 64)
			if (rows == 128)
				return fwd_nf<E, W, 2>(s, io, B, a, err);
		return fwd_nf<E, W, 1>(s, io, B, a, err);
	};
	return gpt_attn_run_rows(cx, pick_key(GPT_ATTN_K_FWD, io, a), W > 64, go, err);
}

template <class E, int W>
static int bwd_w(gpt_cuda_ctx *cx, const tc_io &io, int64_t B, const attn_args &a, gpt_err *err)
{
	cudaStream_t s = cx->stream;
	auto dq = [&](int rows) {
		if constexpr (W <= 64)
			if (rows == 128)
				return dq_nf<E, W, 2>(s, io, B, a, err);
		return dq_nf<E, W, 1>(s, io, B, a, err);
	};
	auto dkv = [&](int rows) {
		if constexpr (W <= 64)
			if (rows == 128)
				return dkv_nf<E, W, 2>(s, io, B, a, err);
		return dkv_nf<E, W, 1>(s, io, B, a, err);
	};
	/* dkv reads the D that dq writes */
	int rc = gpt_attn_run_rows(cx, pick_key(GPT_ATTN_K_DQ, io, a), W > 64, dq, err);
	return rc ? rc : gpt_attn_run_rows(cx, pick_key(GPT_ATTN_K_DKV, io, a), W > 64 || a.drop, dkv, err);
}

template <class E>
static int fwd_e(gpt_cuda_ctx *cx, const tc_io &io, int64_t B, const attn_args &a, gpt_err *err)
{
	if (a.HS <= 32)
		return fwd_w<E, 32>(cx, io, B, a, err);
	if (a.HS <= 64)
		return fwd_w<E, 64>(cx, io, B, a, err);
	return fwd_w<E, 128>(cx, io, B, a, err);
}

template <class E>
static int bwd_e(gpt_cuda_ctx *cx, const tc_io &io, int64_t B, const attn_args &a, gpt_err *err)
{
	if (a.HS <= 32)
		return bwd_w<E, 32>(cx, io, B, a, err);
	if (a.HS <= 64)
		return bwd_w<E, 64>(cx, io, B, a, err);
	return bwd_w<E, 128>(cx, io, B, a, err);
}

static int aligned16(const void *p)
{
	return ((uintptr_t)p & 15u) == 0;
}

/* The saved floats' parts for B sequences of a's shape. */
static void saved_parts(tc_io *io, float *saved, int64_t B, const attn_args &a)
{
	io->lse = saved;
	io->olo = saved + (B * a.NH * a.T + 3) / 4 * 4;
}

int gpt_cuda_attention_tc_fwd(gpt_backend *be, void *out, float *saved, const void *qkv,
			      int64_t B, const attn_args *a, gpt_err *err)
{
	gpt_cuda_ctx *cx = gpt_cuda_ctx_of(be);
	tc_io io = {};
	io.out = out;
	io.qkv = qkv;
	saved_parts(&io, saved, B, *a);
	io.vec = aligned16(qkv);
	attn_args g = *a;
	int rc = grid_groups(&g, B, 2, "attention_fwd", err);
	if (rc)
		return rc;
	if (be->dtype == GPT_DTYPE_BF16)
		return fwd_e<__nv_bfloat16>(cx, io, B, g, err);
	return fwd_e<__half>(cx, io, B, g, err);
}

int gpt_cuda_attention_tc_bwd(gpt_backend *be, void *dqkv, float *Dv, const void *dout,
			      const void *out, const void *qkv, const float *saved, int64_t B,
			      const attn_args *a, gpt_err *err)
{
	gpt_cuda_ctx *cx = gpt_cuda_ctx_of(be);
	tc_io io = {};
	io.dqkv = dqkv;
	io.Dv = Dv;
	io.dout = dout;
	io.cout = out;
	io.qkv = qkv;
	saved_parts(&io, (float *)saved, B, *a);
	io.vec = aligned16(qkv) && aligned16(dout);
	io.vecd = aligned16(dout) && aligned16(out) && aligned16(io.olo);
	attn_args g = *a;
	int rc = grid_groups(&g, B, 2, "attention_bwd", err);
	if (rc)
		return rc;
	if (be->dtype == GPT_DTYPE_BF16)
		return bwd_e<__nv_bfloat16>(cx, io, B, g, err);
	return bwd_e<__half>(cx, io, B, g, err);
}
