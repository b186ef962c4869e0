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
 * (scores_m's FULL), and a tile across the diagonal a third, every
 * pair's products and a compare a score (tile_kind in attention_tc.cuh):
 * the same arithmetic, so the same bits.
 * Dropout is a template argument: without it no element's code carries
 * the Philox rounds (nor their registers).
 *
 * Blocks of 4 warps own 64 query rows (or 64 keys), 16 per warp, and walk
 * 64-wide tiles of the other side up to the diagonal, each tile loaded once
 * into shared memory for the block by cp.async, the next tile landing
 * while this one is worked on (two buffers, one barrier a tile; rows
 * padded by 16 bytes, so the 8 rows of an ldmatrix phase hit distinct
 * banks). The head dimension is padded with zeros to W = 32, 64 or 128;
 * products skip the padding. The forward and dq can instead take 128
 * query rows a block, 32 a warp, and dkv 128 keys
 * (gpt_cuda_attention_rows; head sizes up to 64), each fragment of the
 * other side then serving two products; and the forward has a third
 * form, 64 rows with each warp's scores a key tile ahead (its next tile's
 * products in the same stretch of code as this tile's softmax, for the
 * scheduler to overlap: tc_fwd_ahead_kernel), and with dropout a fourth,
 * 64 rows after its own kernel has drawn the mask (tc_mask_kernel, "64m":
 * the Philox rounds out of the forward's tight registers). The same
 * results in every form, at another speed; by default each kernel times
 * its forms at its first call at a shape and keeps the fastest
 * (attention_rows.cuh).
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
 * (attention.cuh), the CPU's Philox coordinates, drawn by the forward
 * (or, in the form 64m, by tc_mask_kernel before it), which stores them in
 * saved as a bit a probability (the causal triangle, T^2/16 bytes a head:
 * 24 MiB a layer at 124M, B = 32); dq and dkv (and the forward in 64m)
 * read the bits back (mask_word in attention_tc.cuh), a 32-bit half a lane
 * a tile, rather than run Philox's rounds again. Nothing else T x T is
 * stored.
 *
 * The backward kernels work a tile in two halves of 32 columns, so that
 * half the score registers (S and dP, 32 floats each at full width) are
 * live at a time; the products' order per output element is unchanged.
 * Registers (ptxas 13.0, sm_90, bf16, W = 64): forward 126, dq 126, dkv
 * 168 without dropout (4, 4 and 3 blocks an SM as the registers go),
 * 128 (12 bytes spilled), 128 (held to 4 blocks) and 168
 * (12 spilled) with it (4, 4, 3; with Philox in the backward they were
 * 128, 168 and 246: 4, 3, 2), the forward in 64m 128 (44 bytes spilled,
 * 4 blocks; unbounded, ptxas takes 168 and still spills); in 128-row
 * tiles, forward 254, dq 235 and dkv 255 (4 spilled; 2 blocks), 240,
 * 241 and 255 (8 spilled) with dropout (2; the forward with dropout has
 * only the general form there, the others would spill 260 bytes); the
 * forward a tile ahead, 167 (held to 3 blocks: unbounded it took 244, 2
 * blocks) and 228 with dropout (2 blocks), at W = 128 250 (2 blocks, as
 * the plain forward's 168 there, which its shared memory holds to 2).
 * (The outputs through shared memory, write_acc_staged, took the spills
 * of the form a tile ahead from 40 bytes to none, of its W = 128 form
 * with dropout from 32, of dkv in 128-key tiles from 16 to 4 (with
 * dropout 4 to 8); dq and dkv in 64-row tiles store directly, as the
 * staged stores spilled 12 to 28 bytes there.)
 * The backward's pairs of tile buffers are a pointer and a step (buf2),
 * not arrays indexed by a variable, which would sit in local memory.
 *
 * Shared memory per block (16-bit storage): 5 (forward) or 6 (dq, dkv)
 * tiles of 64 x (W + 8) elements (6, 8 and 8 in 128-row tiles): 45 and
 * 54 KiB at W = 64, 85 and 102 KiB at W = 128 (above 48 KiB asked for
 * with cudaFuncSetAttribute); the form 64m 1 KiB more, its two tiles'
 * masks. Limits:
 * head sizes that are multiples of 16 up to 128 (others, and fp32 storage,
 * use attention.cu). Tiles are copied by cp.async 16 bytes at a time when
 * qkv and dout are 16-byte aligned, element by element otherwise.
 * tests/gpu/emu carries mma.sync, ldmatrix (mma.h) and cp.async
 * (cuda_runtime.h: copies land at the wait) for the CPU emulation.
 * This file holds the forward; attention_tc_bwd.cu dq and dkv (two
 * files, which compile in parallel), attention_tc.cuh what they share. */
#include "cuda/attention.cuh"
#include "cuda/attention_rows.cuh"
#include "cuda/attention_tc.cuh"

#include <math.h>
#include <type_traits>

/* The forward's softmax step over the key tile at j0 for a warp's MW
 * blocks of 16 rows (ri: this lane's rows in each), from their scores s
 * (np of the tile's pairs wanted; masked here as the tile's kind F says,
 * tile_kind in attention_tc.cuh): the running maxima m (log2 units) and
 * sums l, the output rows o rescaled where their maximum moved, and the
 * probabilities (with DROP, dropped and their bits stored for the
 * backward; with READ too, dropped as mbits says: the lane's 32 bits of
 * the tile, mask_gather) into pa, rounded, as the A operands of
 * O += P V. s is left as the probabilities. */
template <class E, int W, bool DROP, int MW, int F, bool READ = false>
__device__ __forceinline__ void fwd_softmax(u32 (&pa)[MW][KT][4], float (&s)[MW][NT][4],
					    float (&o)[MW][W / 8][4], float (&m)[MW][2], float (&l)[MW][2],
					    int np, const int (&ri)[MW][2], int j0, int t, int edge, float scl,
					    const attn_args &a, int64_t b, int64_t h, int64_t bh, bool al,
					    uint32_t mbits)
{
#pragma unroll
	for (int mi = 0; mi < MW; mi++) {
		[[maybe_unused]] uint32_t mk = 0; /* the lane's half of the tile's mask (mask_pick) */
		if constexpr (F == TILE_EDGE)
			mask_scores(s[mi], np, ri[mi], j0, t, edge, a);
		else if constexpr (F == TILE_DIAG)
			mask_causal(s[mi], ri[mi], j0, t);
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
		}
		/* the output rows rescaled where some row of the warp's moved:
		 * a factor of exactly 1 (no row's maximum moved: 7% of the
		 * tiles on gpu-ops' random inputs, H100, 2026-11-27) leaves
		 * them as they are (with MW > 1, always: the branches between
		 * the blocks cost registers) */
		if (MW > 1 || __ballot_sync(0xffffffffu, corr[0] != 1.0f || corr[1] != 1.0f))
#pragma unroll
			for (int hr = 0; hr < 2; hr++)
#pragma unroll
				for (int d = 0; d < W / 8; d++) {
					o[mi][d][2 * hr] *= corr[hr];
					o[mi][d][2 * hr + 1] *= corr[hr];
				}
		/* p = 2^(s scl - mu), one FFMA and one MUFU an element. The
		 * sums' rescale is a product of its own (__fmul_rn), never
		 * fused with the first p added: nvcc fuses a product and a sum
		 * that meet in one basic block, which dropout's draws (their
		 * branches) split in some forms and not in others, and the
		 * forms must give the same bits (a 1-ulp difference, on an
		 * H100, 2026-11-27) */
		l[mi][0] = __fmul_rn(l[mi][0], corr[0]);
		l[mi][1] = __fmul_rn(l[mi][1], corr[1]);
		[[maybe_unused]] uint32_t kb = 0; /* two column tiles' kept bits (kept_pair) */
#pragma unroll
		for (int n = 0; n < NT; n++) {
			float k[4] = {1.0f, 1.0f, 1.0f, 1.0f};
			if constexpr (READ) { /* drawn before (tc_mask_kernel) */
#pragma unroll
				for (int q = 0; q < 4; q++)
					k[q] = (float)(mbits >> (4 * n + q) & 1u);
			} else if constexpr (DROP) {
				if (n % 2 == 0)
					kb = kept_pair(a, b, h, ri[mi], j0 + n * 8, al);
#pragma unroll
				for (int q = 0; q < 4; q++)
					k[q] = (float)(kb >> (4 * (n % 2) + q) & 1u);
				mask_pick(mk, k, n); /* for the backward */
			}
#pragma unroll
			for (int q = 0; q < 4; q++) {
				float p = ex2(fmaf(s[mi][n][q], scl, -mu[q >> 1]));
				l[mi][q >> 1] += p;
				s[mi][n][q] = p * k[q];
			}
		}
		if constexpr (DROP && !READ)
			mask_put(a, bh, ri[mi][0] - (int)(threadIdx.x % 32 >> 2), j0, mk);
	}
#pragma unroll
	for (int mi = 0; mi < MW; mi++)
		repack<E>(pa[mi], s[mi]);
}

/* The forward's end for a warp's MW blocks of 16 rows: each row's output
 * O / l (times dropout's 1 / (1 - p)) into out and what its rounding left
 * into olo (row stride Cl, the head's first column), and its log-sum-exp
 * m + log l (natural units) into lse (the head's), by lane t = 0 of the
 * row's quad; rows at or past T are not written. The outputs go through
 * qw, the warp's own rows of Q in shared memory (MW blocks of 16, row
 * stride LE), done with (write_acc_staged). */
template <class E, int W, int MW>
__device__ __forceinline__ void fwd_finish(E *out, float *lse, E *olo, int64_t Cl, const float (&o)[MW][W / 8][4],
					   const float (&m)[MW][2], const float (&l)[MW][2], const int (&ri)[MW][2],
					   int t, const attn_args &a, E *qw, int LE)
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
		write_acc_staged<E, W>(out, olo, Cl, o[mi], ri[mi][0] - (int)(threadIdx.x % 32 >> 2), f, t, a,
				       qw + 16 * mi * LE, LE);
	}
}

/* The forward, MW blocks of 16 rows a warp (a tile of 64 MW rows): with
 * MW = 2, FlashAttention-2's choice at head size 64, each key and value
 * fragment read from shared memory serves two products, and a warp has
 * twice the independent products in flight, for twice the registers.
 * (With dropout and MW = 1, ptxas is held to 4 blocks an SM, 128
 * registers, which it fits spilling 12 bytes at W = 64, 44 with READ;
 * elsewhere, 0: no bound, which leaves it 128 registers without dropout
 * at W = 64: 4 blocks as well.) READ (with DROP): the mask was drawn
 * before, by tc_mask_kernel, and lands in shared memory with each tile's
 * keys and values (mask_copy; mask_gather): the form "64m". */
template <class E, int W, bool DROP, int MW, bool READ = false>
__global__ static void __launch_bounds__(NTHR, DROP && MW == 1 && W <= 64 ? 4 : 0)
	tc_fwd_kernel(E *out, float *lse, E *olo, const E *qkv, attn_args a, int vec)
{
	extern __shared__ float sh[];
	const int LE = W + 8, BQF = BQ * MW, RW = 16 * MW;
	E *qs = (E *)sh;
	const buf2<E *> ks = {qs + BQF * LE, BK * LE}, vs = {qs + (BQF + 2 * BK) * LE, BK * LE};
	/* READ: the tiles' dropout masks after them, two buffers as theirs */
	static_assert(!READ || (DROP && MW == 1), "the mask is read in 64-row tiles with dropout");
	const buf2<uint32_t *> ms = {(uint32_t *)(qs + (BQF + 4 * BK) * LE), NTHR};
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
	if constexpr (READ)
		mask_copy(ms[0], a, bh, i0, 0);
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
	/* One barrier a tile: past it, tile j has landed for every thread
	 * and every warp is done with tile j - 1, whose buffers then take
	 * tile j + 1 while this one is worked on. (A second barrier after
	 * each tile, before its buffers were refilled, held warps to the
	 * slowest twice a tile.) */
	for (int j0 = 0, cur = 0; j0 <= jend; j0 += BK, cur ^= 1) {
		tile_ready(false);
		if (j0 + BK <= jend) {
			if constexpr (READ)
				mask_copy(ms[cur ^ 1], a, bh, i0, j0 + BK);
			load_kv<E, W>(ks[cur ^ 1], vs[cur ^ 1], base, j0 + BK, a, vec);
		}
		/* (with MW > 1 the block's last key tile may come after all of
		 * a warp's rows) */
		if (r0 < a.T && j0 <= r0 + RW - 1) {
			const bool clear = r0 + RW - 1 < a.T && kf == W / 16; /* the rows below T, the head unpadded */
			const int edge = j0 + BK - 1 > r0 || !clear;
			[[maybe_unused]] uint32_t mbits = 0;
			if constexpr (READ)
				mbits = mask_gather(ms[cur]);
			/* the tile as its kind says (tile_kind) */
			auto work = [&](auto kind) {
				constexpr int F = decltype(kind)::value;
				int np = F == TILE_FULL ? KT : pairs_to(r0 + RW - 1, j0);
				float s[MW][NT][4];
				scores_m<E, W, NT, MW, F != TILE_EDGE>(s, qw, ks[cur], LE, 0, np, kf);
				u32 pa[MW][KT][4];
				fwd_softmax<E, W, DROP, MW, F, READ>(pa, s, o, m, l, np, ri, j0, t, edge, scl, a, b, h, bh,
								     al, mbits);
				accumulate_m<E, W, KT, MW, F == TILE_FULL>(o, pa, 0, np, vs[cur], LE, a.HS);
			};
			/* (with dropout in 128-row tiles the full form would
			 * spill 260 bytes: the general code only there) */
			if constexpr (DROP && MW > 1)
				work(std::integral_constant<int, TILE_EDGE>());
			else
				by_tile_kind(edge, clear, work);
		}
	}
	fwd_finish<E, W, MW>(out + b * a.T * Cl + h * a.HS, lse + bh * a.T, olo + b * a.T * Cl + h * a.HS, Cl, o,
			     m, l, ri, t, a, (E *)qw, LE);
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
 * dropout (168 registers; unbounded, ptxas takes 244, 2 blocks);
 * elsewhere unbounded (header). On the H100 (2026-11-27) it ran 2 to 4%
 * slower than the plain form at head size 64 (fewer blocks an SM for an
 * overlap the profile did not show: tensor pipe 17.6% busy against
 * 18.4%) and 3% faster at 128; with dropout 35% slower. */
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
	/* every warp done with K_0 before the first tile's copies bring K_2
	 * into its buffer (without this barrier a warp that reached them
	 * first overwrote K_0 under a slower warp's S_0: on an H100 at head
	 * size 128, 2026-11-27; EMU_CPASYNC=early shows it) */
	__syncthreads();
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
				fwd_softmax<E, W, DROP, 1, F ? TILE_FULL : TILE_EDGE>(pa, s, o, m, l, np, ri, j0, t, edge, scl, a, b, h, bh,
											     al, 0u);
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
			     m, l, ri, t, a, (E *)qw, LE);
}

/* Dropout's mask for the form "64m", drawn before the forward, which then
 * reads it (mask_copy, mask_gather): the bits the other forms draw inside
 * the forward (kept(): Philox at each probability's coordinates, past the
 * diagonal and T too), into the same words. A thread a 32-bit half (rows
 * 4 half .. 4 half + 3 of an 8 x 8 block, bit 8r + c), a block of
 * threads per head and row block qb for the qb + 1 blocks of its row;
 * one Philox call a row of a block where aligned(), else two
 * (kept_row8). The rounds run at a small kernel's occupancy, not in the
 * forward's tight registers. */
__global__ static void __launch_bounds__(NTHR) tc_mask_kernel(attn_args a, int nb)
{
	const int64_t bh = blockIdx.x / nb, b = bh / a.NH, h = bh % a.NH;
	const int qb = (int)(blockIdx.x % nb);
	uint32_t *row = (uint32_t *)(a.mask + bh * a.mwords + (int64_t)qb * (qb + 1) / 2);
	for (int w = threadIdx.x; w < 2 * (qb + 1); w += blockDim.x) {
		const int j = 8 * (w >> 1), i0 = 8 * qb + 4 * (w & 1);
		uint32_t bits = 0;
#pragma unroll
		for (int r = 0; r < 4; r++)
			bits |= kept_row8(a, b, h, i0 + r, j) << 8 * r;
		row[w] = bits;
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

/* the forward in 64-row tiles after its dropout mask is drawn
 * (tc_mask_kernel): the form "64m" */
template <class E, int W>
static int fwd_masked_nf(cudaStream_t s, const tc_io &io, int64_t B, const attn_args &a, gpt_err *err)
{
	int nb = (int)((a.T + 7) / 8);
	tc_mask_kernel<<<(unsigned)(a.bhn * (int64_t)nb), NTHR, 0, s>>>(a, nb);
	int rc = gpt_cuda_launched("attention_fwd: dropout mask", err);
	size_t shm = fwd_shm(W, sizeof(E), 1) + 2 * NTHR * sizeof(uint32_t);
	auto kern = tc_fwd_kernel<E, W, true, 1, true>;
	if (!rc)
		rc = allow_shm(kern, shm, "attention_fwd: shared memory", err);
	if (rc)
		return rc;
	kern<<<grid_size(a, BQ), NTHR, shm, s>>>((E *)io.out, io.lse, (E *)io.olo, (const E *)io.qkv, a, io.vec);
	return gpt_cuda_launched("attention_fwd", err);
}

/* The padded width W that holds the head: 32, 64 (in 64- or 128-row
 * tiles, or 64 with the scores ahead) or 128 (64 rows, plain or ahead:
 * 32 rows a warp would spill); with dropout, 64 rows after the mask is
 * drawn too (where its grid, a block per head and 8 rows, fits). */
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
		if (rows == GPT_CUDA_ATTN_MASKED)
			return fwd_masked_nf<E, W>(s, io, B, a, err);
		return fwd_nf<E, W, 1>(s, io, B, a, err);
	};
	static const int forms[] = {64, GPT_CUDA_ATTN_AHEAD, 128};
	static const int dforms[] = {64, GPT_CUDA_ATTN_AHEAD, GPT_CUDA_ATTN_MASKED, 128};
	int masked = a.drop && a.bhn * ((a.T + 7) / 8) <= INT32_MAX;
	return gpt_attn_run_rows(cx, pick_key(GPT_ATTN_K_FWD, io, a), masked ? dforms : forms,
				 (W > 64 ? 2 : 3) + masked, go, err);
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
