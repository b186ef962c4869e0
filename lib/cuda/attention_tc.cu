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
 * query rows a block, 32 a warp, and dkv 128 keys
 * (gpt_cuda_attention_rows; head sizes up to 64), each fragment of the
 * other side then serving two products; and the forward has a third
 * form, 64 rows with each warp's scores a key tile ahead (its next tile's
 * products in the same stretch of code as this tile's softmax, for the
 * scheduler to overlap: tc_fwd_ahead_kernel). The same results in every
 * form, at another speed; by default each kernel times its forms at its
 * first call at a shape and keeps the fastest (attention_rows.cuh).
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
 * (attention.cuh), the CPU's Philox coordinates, drawn by the forward,
 * which stores them in saved as a bit a probability (the causal triangle,
 * T^2/16 bytes a head: 24 MiB a layer at 124M, B = 32); dq and dkv read
 * the bits back (mask_word in attention_tc.cuh) rather than run Philox's
 * rounds again. Nothing else T x T is stored.
 *
 * The backward kernels work a tile in two halves of 32 columns, so that
 * half the score registers (S and dP, 32 floats each at full width) are
 * live at a time; the products' order per output element is unchanged.
 * Registers (ptxas 13.0, sm_90a, bf16, W = 64): forward 128, dq 128, dkv
 * 168 (16 bytes spilled) without dropout (4, 4 and 3 blocks an SM as the
 * registers go), 125, 127 and 168 with it (4, 4, 3; with Philox in the
 * backward they were 128, 168 and 246: 4, 3, 2); in 128-row tiles,
 * forward 248, dq 244 and dkv 255 (12 spilled; 2 blocks), 246, 255 and
 * 255 (8 spilled) with dropout (2; the forward with dropout has only the
 * general form there, the second would spill 260 bytes); the forward a
 * tile ahead, 168 (8 spilled; held to 3 blocks: unbounded it took 244, 2
 * blocks) and 239 with dropout (2 blocks), at W = 128 255 (2 blocks, as
 * the plain forward's 168 there, which its shared memory holds to 2).
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
#include "cuda/attention_tc.cuh"

#include <math.h>
#include <type_traits>

/* The forward's softmax step over the key tile at j0 for a warp's MW
 * blocks of 16 rows (ri: this lane's rows in each), from their scores s
 * (np of the tile's pairs wanted; masked here unless F, where none is
 * masked): the running maxima m (log2 units) and sums l, the output rows
 * o rescaled where their maximum moved, and the probabilities (with DROP,
 * dropped and their bits stored for the backward) into pa, rounded, as
 * the A operands of O += P V. s is left as the probabilities. */
template <class E, int W, bool DROP, int MW, bool F>
__device__ __forceinline__ void fwd_softmax(u32 (&pa)[MW][KT][4], float (&s)[MW][NT][4],
					    float (&o)[MW][W / 8][4], float (&m)[MW][2], float (&l)[MW][2],
					    int np, const int (&ri)[MW][2], int j0, int t, int edge, float scl,
					    const attn_args &a, int64_t b, int64_t h, int64_t bh, bool al)
{
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
			if constexpr (DROP) /* for the backward */
				mask_store(a, bh, ri[mi], j0 + n * 8 + 2 * t, k);
#pragma unroll
			for (int q = 0; q < 4; q++) {
				float p = ex2(fmaf(s[mi][n][q], scl, -mu[q >> 1]));
				l[mi][q >> 1] += p;
				s[mi][n][q] = p * k[q];
			}
		}
	}
#pragma unroll
	for (int mi = 0; mi < MW; mi++)
		repack<E>(pa[mi], s[mi]);
}

/* The forward's end for a warp's MW blocks of 16 rows: each row's output
 * O / l (times dropout's 1 / (1 - p)) into out and what its rounding left
 * into olo (row stride Cl, the head's first column), and its log-sum-exp
 * m + log l (natural units) into lse (the head's), by lane t = 0 of the
 * row's quad; rows at or past T are not written. */
template <class E, int W, int MW>
__device__ __forceinline__ void fwd_finish(E *out, float *lse, E *olo, int64_t Cl, const float (&o)[MW][W / 8][4],
					   const float (&m)[MW][2], const float (&l)[MW][2], const int (&ri)[MW][2],
					   int t, const attn_args &a)
{
#pragma unroll
	for (int mi = 0; mi < MW; mi++) {
		float f[2];
#pragma unroll
		for (int hr = 0; hr < 2; hr++) {
			float lt = quad_sum(l[mi][hr]);
			f[hr] = lt > 0.0f ? a.dscale / lt : 0.0f; /* dropout's 1/(1-p) here */
			if (t == 0 && ri[mi][hr] < a.T)
				lse[ri[mi][hr]] = m[mi][hr] * (1.0f / L2E) + logf(lt);
		}
		write_acc<E, W>(out, olo, Cl, o[mi], ri[mi], f, t, a);
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
				u32 pa[MW][KT][4];
				fwd_softmax<E, W, DROP, MW, F>(pa, s, o, m, l, np, ri, j0, t, edge, scl, a, b, h, bh, al);
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
	fwd_finish<E, W, MW>(out + b * a.T * Cl + h * a.HS, lse + bh * a.T, olo + b * a.T * Cl + h * a.HS, Cl, o,
			     m, l, ri, t, a);
}

/* The forward in 64-row tiles with the scores one key tile ahead: a warp
 * computes S_{j+1} = Q K_{j+1}^T before the softmax of S_j and O += P_j V_j,
 * so that in a tile clear of the diagonal (the FULL form of each) the
 * next tile's products and this tile's softmax are one stretch of code
 * with no dependence between them, which the scheduler interleaves: the
 * tensor cores work during the exponentials, as FlashAttention-3 overlaps
 * them across warpgroups. The same products and steps per element as
 * tc_fwd_kernel<E, W, DROP, 1>, so the same bits (a tile's scores ahead
 * of the diagonal are all computed and masked when their turn comes).
 * The key tiles run one ahead of the values in shared memory (the same
 * four buffers): a tile's wait brings V_j and K_{j+1}, and V_{j+1} and
 * K_{j+2} land during it. Held to 3 blocks an SM at W = 64 without
 * dropout (168 registers, 8 bytes spilled; unbounded, ptxas takes 244,
 * 2 blocks); elsewhere unbounded (header). */
template <class E, int W, bool DROP>
__global__ static void __launch_bounds__(NTHR, !DROP && W == 64 ? 3 : 0)
	tc_fwd_ahead_kernel(E *out, float *lse, E *olo, const E *qkv, attn_args a, int vec)
{
	extern __shared__ float sh[];
	const int LE = W + 8;
	E *qs = (E *)sh;
	const buf2<E *> ks = {qs + BQ * LE, BK * LE}, vs = {qs + (BQ + 2 * BK) * LE, BK * LE};
	/* (plain variables, not a structured binding: the tile's lambda
	 * captures them, which C++17 does not allow of a binding) */
	const q_place P = q_place_of(a, 1);
	const int64_t bh = P.bh, b = P.b, h = P.h, Cl = P.Cl, C3 = P.C3;
	const int i0 = P.i0, r0 = P.r0, jend = P.jend, t = P.t, kf = P.kf;
	const int ri[1][2] = {{P.ri[0], P.ri[1]}};
	const bool al = aligned(a, h);
	const E *base = qkv + b * a.T * C3 + h * a.HS, *kb = base + Cl, *vb = base + 2 * Cl;
	const E *qw = qs + (r0 - i0) * LE;
	const float scl = a.sc * L2E;
	/* the warp's rows see keys up to rl; it works the tiles up to it */
	const int rl = r0 + 15;
	load_tile<E, W>(qs, base, C3, i0, a, vec);
	load_tile<E, W>(ks[0], kb, C3, 0, a, vec);
	cp_commit();
	load_tile<E, W>(vs[0], vb, C3, 0, a, vec);
	if (BK <= jend)
		load_tile<E, W>(ks[1], kb, C3, BK, a, vec);
	cp_commit();
	cp_wait<1>();
	__syncthreads(); /* Q and K_0 */
	float o[1][W / 8][4], m[1][2], l[1][2], s[1][NT][4];
	m[0][0] = m[0][1] = -INFINITY;
	l[0][0] = l[0][1] = 0.0f;
#pragma unroll
	for (int d = 0; d < W / 8; d++)
		o[0][d][0] = o[0][d][1] = o[0][d][2] = o[0][d][3] = 0.0f;
	if (r0 < a.T)
		scores_m<E, W, NT, 1>(s, qw, ks[0], LE, 0, pairs_to(rl, 0), kf);
	for (int j0 = 0, cur = 0; j0 <= jend; j0 += BK, cur ^= 1) {
		bool more = j0 + BK <= jend;
		if (more) {
			/* into the buffers of V_{j-1} and K_j, done with */
			load_tile<E, W>(vs[cur ^ 1], vb, C3, j0 + BK, a, vec);
			if (j0 + 2 * BK <= jend)
				load_tile<E, W>(ks[cur], kb, C3, j0 + 2 * BK, a, vec);
			cp_commit();
		}
		tile_ready(more); /* V_j and K_{j+1} */
		if (r0 < a.T && j0 <= rl) {
			const int edge = j0 + BK - 1 > r0 || rl >= a.T;
			const bool next = more && j0 + BK <= rl; /* the warp's rows reach the next tile */
			auto work = [&](auto full) {
				constexpr bool F = decltype(full)::value;
				/* FULL: the next tile's scores first, all of them (those
				 * past the diagonal are masked in their turn); else after
				 * this tile, as tc_fwd_kernel's (fewer registers live) */
				[[maybe_unused]] float sn[1][NT][4];
				if constexpr (F)
					scores_m<E, W, NT, 1, true>(sn, qw, ks[cur ^ 1], LE, 0, KT, kf);
				int np = F ? KT : pairs_to(rl, j0);
				u32 pa[1][KT][4];
				fwd_softmax<E, W, DROP, 1, F>(pa, s, o, m, l, np, ri, j0, t, edge, scl, a, b, h, bh, al);
				accumulate_m<E, W, KT, 1, F>(o, pa, 0, np, vs[cur], LE, a.HS);
				if constexpr (F) {
#pragma unroll
					for (int n = 0; n < NT; n++)
#pragma unroll
						for (int q = 0; q < 4; q++)
							s[0][n][q] = sn[0][n][q];
				} else if (next) {
					scores_m<E, W, NT, 1>(s, qw, ks[cur ^ 1], LE, 0, pairs_to(rl, j0 + BK), kf);
				}
			};
			/* FULL: this tile clear of the diagonal and of T, the head
			 * unpadded, and a next tile, whose scores are then all
			 * computed (those past the diagonal are masked in its turn) */
			if (edge || kf != W / 16 || !next)
				work(std::false_type());
			else
				work(std::true_type());
		}
		__syncthreads(); /* the tile's readers are done before it is refilled */
	}
	fwd_finish<E, W, 1>(out + b * a.T * Cl + h * a.HS, lse + bh * a.T, olo + b * a.T * Cl + h * a.HS, Cl, o,
			     m, l, ri, t, a);
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
					/* the forward's dropout bits, on their way during the products */
					[[maybe_unused]] uint32_t mw[MW][NT / 2][2];
					if constexpr (DROP)
						mask_prefetch<false>(mw, a, bh, ri, jh);
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
							float k[4] = {1.0f, 1.0f, 1.0f, 1.0f};
							if constexpr (DROP)
								mask_lane(k, mw[mi][n]);
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
					/* the forward's dropout bits, on their way during the products */
					[[maybe_unused]] uint32_t mw[MW][NT / 2][2];
					if constexpr (DROP)
						mask_prefetch<true>(mw, a, bh, rj, i0 + hf * 32);
					float s[MW][NT / 2][4], dp[MW][NT / 2][4];
					scores_m<E, W, NT / 2, MW, F>(s, kw, qh, LE, q0, q1, kf);
					scores_m<E, W, NT / 2, MW, F>(dp, vw, gh, LE, q0, q1, kf);
#pragma unroll
					for (int mi = 0; mi < MW; mi++)
#pragma unroll
						for (int n = 0; n < NT / 2; n++) {
							float k[4] = {1.0f, 1.0f, 1.0f, 1.0f};
							if constexpr (DROP)
								mask_keys(k, mw[mi][n]);
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

/* the forward in 64-row tiles, its scores a key tile ahead: the same
 * shared memory as fwd_nf's 64 rows */
template <class E, int W>
static int fwd_ahead_nf(cudaStream_t s, const tc_io &io, int64_t B, const attn_args &a, gpt_err *err)
{
	size_t shm = fwd_shm(W, sizeof(E), 1);
	auto kern = a.drop ? tc_fwd_ahead_kernel<E, W, true> : tc_fwd_ahead_kernel<E, W, false>;
	int rc = allow_shm(kern, shm, "attention_fwd: shared memory", err);
	if (rc)
		return rc;
	kern<<<grid_size(a, BQ), NTHR, shm, s>>>((E *)io.out, io.lse, (E *)io.olo, (const E *)io.qkv, a, io.vec);
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

/* dkv in 128-key tiles spills 8 bytes with dropout, 12 without (W = 64):
 * the timing of GPT_CUDA_ATTN_AUTO decides */
template <class E, int W, int MW>
static int dkv_nf(cudaStream_t s, const tc_io &io, int64_t B, const attn_args &a, gpt_err *err)
{
	const int mkv = MW;
	size_t shm = dkv_shm(W, sizeof(E), mkv);
	auto kern = a.drop ? tc_dkv_kernel<E, W, true, MW> : tc_dkv_kernel<E, W, false, MW>;
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

/* The padded width W that holds the head: 32, 64 (in 64- or 128-row
 * tiles, or 64 with the scores ahead) or 128 (64 rows, plain or ahead:
 * 32 rows a warp would spill). */
template <class E, int W>
static int fwd_w(gpt_cuda_ctx *cx, const tc_io &io, int64_t B, const attn_args &a, gpt_err *err)
{
	cudaStream_t s = cx->stream;
	auto go = [&](int rows) {
		if constexpr (W <= 64)
			if (rows == 128)
				return fwd_nf<E, W, 2>(s, io, B, a, err);
		if (rows == GPT_CUDA_ATTN_AHEAD)
			return fwd_ahead_nf<E, W>(s, io, B, a, err);
		return fwd_nf<E, W, 1>(s, io, B, a, err);
	};
	static const int forms[] = {64, GPT_CUDA_ATTN_AHEAD, 128};
	return gpt_attn_run_rows(cx, pick_key(GPT_ATTN_K_FWD, io, a), forms, W > 64 ? 2 : 3, go, err);
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
	static const int forms[] = {64, 128};
	int n = W > 64 ? 1 : 2;
	int rc = gpt_attn_run_rows(cx, pick_key(GPT_ATTN_K_DQ, io, a), forms, n, dq, err);
	return rc ? rc : gpt_attn_run_rows(cx, pick_key(GPT_ATTN_K_DKV, io, a), forms, n, dkv, err);
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

int gpt_cuda_attention_tc_fwd(gpt_backend *be, void *out, float *saved, const void *qkv,
			      int64_t B, const attn_args *a, gpt_err *err)
{
	gpt_cuda_ctx *cx = gpt_cuda_ctx_of(be);
	tc_io io = {};
	io.out = out;
	io.qkv = qkv;
	attn_args g = *a;
	saved_parts(&io, &g, saved, B, be->dtype);
	io.vec = aligned16(qkv);
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
	attn_args g = *a;
	saved_parts(&io, &g, (float *)saved, B, be->dtype);
	io.vec = aligned16(qkv) && aligned16(dout);
	io.vecd = aligned16(dout) && aligned16(out) && aligned16(io.olo);
	int rc = grid_groups(&g, B, 2, "attention_bwd", err);
	if (rc)
		return rc;
	if (be->dtype == GPT_DTYPE_BF16)
		return bwd_e<__nv_bfloat16>(cx, io, B, g, err);
	return bwd_e<__half>(cx, io, B, g, err);
}
