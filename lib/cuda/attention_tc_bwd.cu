/* The tensor-core attention's backward: the dq and dkv kernels and their
 * launches. attention_tc.cu describes the design (and holds the forward);
 * the two halves are separate files so that they compile in parallel. */
#include "cuda/attention.cuh"
#include "cuda/attention_rows.cuh"
#include "cuda/attention_tc.cuh"

#include <math.h>
#include <type_traits>

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
 * forward's MW. With dropout and MW = 1, held to 4 blocks an SM (128
 * registers, none spilled at W = 64 since the twenty-eighth session's
 * changes; unbounded, ptxas took 132 before them: 3 blocks), as the
 * forward. */
template <class E, int W, bool DROP, int MW>
__global__ static void __launch_bounds__(NTHR, DROP && MW == 1 && W <= 64 ? 4 : 0)
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
	/* one barrier a tile, as the forward's */
	for (int j0 = 0, cur = 0; j0 <= jend; j0 += BK, cur ^= 1) {
		tile_ready(false);
		if (j0 + BK <= jend)
			load_kv<E, W>(ks[cur ^ 1], vs[cur ^ 1], base, j0 + BK, a, vec);
		/* (with MW > 1 the block's last key tile may come after all of
		 * a warp's rows) */
		if (r0 < a.T && j0 <= r0 + RW - 1) {
			const bool clear = r0 + RW - 1 < a.T && kf == W / 16; /* the rows below T, the head unpadded */
			int np = pairs_to(r0 + RW - 1, j0), edge = j0 + BK - 1 > r0 || !clear;
			/* the forward's dropout bits, a half a lane, on their way
			 * during the products */
			[[maybe_unused]] uint32_t mv[MW];
			if constexpr (DROP)
#pragma unroll
				for (int mi = 0; mi < MW; mi++)
					mv[mi] = mask_fetch_rows(a, bh, r0 + 16 * mi, j0);
			/* the tile as its kind says (tile_kind, the forward's) */
			auto work = [&](auto kind) {
				constexpr int F = decltype(kind)::value;
				/* the tile's two halves of 32 keys one after the other:
				 * half the score registers live */
#pragma unroll 1
				for (int hf = 0; hf < 2; hf++) {
					int q1 = F == TILE_FULL ? 2 : np - 2 * hf < 2 ? np - 2 * hf : 2, jh = j0 + hf * 32;
					if (q1 <= 0)
						continue;
					const E *kh = ks[cur] + hf * 32 * LE, *vh = vs[cur] + hf * 32 * LE;
					float s[MW][NT / 2][4], dp[MW][NT / 2][4];
					scores_m<E, W, NT / 2, MW, F != TILE_EDGE>(s, qw, kh, LE, 0, q1, kf);
					scores_m<E, W, NT / 2, MW, F != TILE_EDGE>(dp, gw, vh, LE, 0, q1, kf);
					u32 da[MW][KT / 2][4];
#pragma unroll
					for (int mi = 0; mi < MW; mi++) {
#pragma unroll
						for (int n = 0; n < NT / 2; n++)
#pragma unroll
							for (int q = 0; q < 4; q++)
								s[mi][n][q] = s[mi][n][q] * scl - L[mi][q >> 1];
						if constexpr (F == TILE_EDGE)
							mask_scores(s[mi], q1, ri[mi], jh, t, edge, a);
						else if constexpr (F == TILE_DIAG)
							mask_causal(s[mi], ri[mi], jh, t);
#pragma unroll
						for (int n = 0; n < NT / 2; n++) {
							float k[4] = {1.0f, 1.0f, 1.0f, 1.0f};
							if constexpr (DROP)
								mask_rows_at(k, mv[mi], 4 * hf + n);
#pragma unroll
							for (int q = 0; q < 4; q++) {
								float g = DROP ? dp[mi][n][q] * k[q] * a.dscale : dp[mi][n][q];
								s[mi][n][q] = ex2(s[mi][n][q]) * (g - D[mi][q >> 1]);
							}
						}
						repack<E>(da[mi], s[mi]);
					}
					accumulate_m<E, W, KT / 2, MW, F == TILE_FULL>(dq, da, 0, q1, kh, LE, a.HS);
				}
			};
			by_tile_kind(edge, clear, work);
		}
	}
	/* in 128-row tiles through the warp's own rows of Q, done with
	 * (write_acc_staged); in 64 directly, whose registers have no room
	 * for it (ptxas 13.0, bf16, W = 64: 28 bytes spilled with dropout) */
	const float f[2] = {a.sc, a.sc};
#pragma unroll
	for (int mi = 0; mi < MW; mi++)
		if constexpr (MW > 1)
			write_acc_staged<E, W>(dqkv + b * a.T * C3 + h * a.HS, (E *)nullptr, C3, dq[mi], r0 + 16 * mi, f,
					       t, a, (E *)qw + 16 * mi * LE, LE);
		else
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
	/* one barrier a tile, as the forward's */
	for (int i0 = j0, cur = 0; i0 < T; i0 += BQ, cur ^= 1) {
		tile_ready(false);
		if (i0 + BQ < T)
			load_q<E, W>(qs[cur ^ 1], gs[cur ^ 1], Ls[cur ^ 1], Ds[cur ^ 1], base, gbase, lh, dh,
				     i0 + BQ, a, vec);
		if (jw0 < T) {
			/* the 16-query column pairs at or after this warp's first key, below T */
			int p0 = jw0 > i0 ? (jw0 - i0) / 16 : 0, p1 = pairs_to(T - 1, i0);
			const bool clear = i0 + BQ <= T && kf == W / 16; /* the queries below T, the head unpadded */
			int edge = i0 < jw0 + RW - 1 || !clear;
			/* the forward's dropout bits, as dq's */
			[[maybe_unused]] uint32_t mv[MW];
			if constexpr (DROP)
#pragma unroll
				for (int mi = 0; mi < MW; mi++)
					mv[mi] = mask_fetch_keys(a, bh, jw0 + 16 * mi, i0);
			/* the tile as its kind says (tile_kind, the forward's: a
			 * tile across the diagonal computes every pair's products
			 * and drops a probability with a compare) */
			auto work = [&](auto kind) {
				constexpr int F = decltype(kind)::value;
				/* the tile's two halves of 32 queries one after the
				 * other: half the score registers live (3 blocks an SM
				 * where they fit) */
#pragma unroll 1
				for (int hf = 0; hf < 2; hf++) {
					int q0 = F == TILE_FULL ? 0 : p0 > 2 * hf ? p0 - 2 * hf : 0;
					int q1 = F == TILE_FULL ? 2 : p1 - 2 * hf < 2 ? p1 - 2 * hf : 2;
					if (q0 >= q1)
						continue;
					const E *qh = qs[cur] + hf * 32 * LE, *gh = gs[cur] + hf * 32 * LE;
					const float *lc = Ls[cur] + hf * 32, *dc = Ds[cur] + hf * 32;
					float s[MW][NT / 2][4], dp[MW][NT / 2][4];
					scores_m<E, W, NT / 2, MW, F != TILE_EDGE>(s, kw, qh, LE, q0, q1, kf);
					scores_m<E, W, NT / 2, MW, F != TILE_EDGE>(dp, vw, gh, LE, q0, q1, kf);
#pragma unroll
					for (int mi = 0; mi < MW; mi++)
#pragma unroll
						for (int n = 0; n < NT / 2; n++) {
							float k[4] = {1.0f, 1.0f, 1.0f, 1.0f};
							if constexpr (DROP)
								mask_keys_at(k, mv[mi], 4 * hf + n);
#pragma unroll
							for (int q = 0; q < 4; q++) {
								int c = n * 8 + 2 * t + (q & 1), i = i0 + hf * 32 + c;
								int j = rj[mi][q >> 1];
								float p = ex2(s[mi][n][q] * scl - lc[c] * L2E);
								if (F == TILE_EDGE && edge &&
								    (n < 2 * q0 || n >= 2 * q1 || i < j || i >= T))
									p = 0.0f;
								else if (F == TILE_DIAG && i < j)
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
					accumulate_m<E, W, KT / 2, MW, F == TILE_FULL>(dv, pa, q0, q1, gh, LE, a.HS);
#pragma unroll
					for (int mi = 0; mi < MW; mi++)
						repack<E>(pa[mi], dp[mi]);
					accumulate_m<E, W, KT / 2, MW, F == TILE_FULL>(dk, pa, q0, q1, qh, LE, a.HS);
				}
			};
			by_tile_kind(edge, clear, work);
		}
	}
	/* in 128-key tiles through the warp's own keys' rows of K and V, done
	 * with (write_acc_staged); in 64 directly, as dq */
	E *o = dqkv + b * a.T * C3 + h * a.HS;
	const float fk[2] = {a.sc, a.sc}, fv[2] = {a.dscale, a.dscale}; /* dropout's 1/(1-p) */
#pragma unroll
	for (int mi = 0; mi < MW; mi++) {
		if constexpr (MW > 1) {
			/* (kw and vw here instead spilled 32 and 16 bytes, ptxas 13.0) */
			int k16 = jw0 + 16 * mi, at = (k16 - j0) * LE;
			write_acc_staged<E, W>(o + Cl, (E *)nullptr, C3, dk[mi], k16, fk, t, a, ks + at, LE);
			write_acc_staged<E, W>(o + 2 * Cl, (E *)nullptr, C3, dv[mi], k16, fv, t, a, vs + at, LE);
		} else {
			write_acc<E, W>(o + Cl, (E *)nullptr, C3, dk[mi], rj[mi], fk, t, a);
			write_acc<E, W>(o + 2 * Cl, (E *)nullptr, C3, dv[mi], rj[mi], fv, t, a);
		}
	}
}

static size_t dq_shm(int W, size_t es, int mw)
{
	return (size_t)(2 * BQ * mw + 4 * BK) * (W + 8) * es + BQ * mw * sizeof(float);
}

static size_t dkv_shm(int W, size_t es, int mw)
{
	return (size_t)(2 * BK * mw + 4 * BQ) * (W + 8) * es + (size_t)(4 * BQ) * sizeof(float);
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
static int bwd_e(gpt_cuda_ctx *cx, const tc_io &io, int64_t B, const attn_args &a, gpt_err *err)
{
	if (a.HS <= 32)
		return bwd_w<E, 32>(cx, io, B, a, err);
	if (a.HS <= 64)
		return bwd_w<E, 64>(cx, io, B, a, err);
	return bwd_w<E, 128>(cx, io, B, a, err);
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
