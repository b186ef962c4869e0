/* LayerNorm forward and backward over the last dimension: a warp per row;
 * the weight and bias gradients as deterministic two-pass column sums.
 *
 * Every kernel here is memory-bound (GPT-2's rows of 768 hold 1.5 KiB in
 * bf16; a step runs 25 of each over 32768 of them). The row kernels come
 * in two forms:
 *  - vector (ln_fwd_vec, ln_bwd_vec): when C is a multiple of GPT_VEC(T)
 *    (8 bf16 or fp16, 4 fp32), every pointer is 16-byte aligned and a row
 *    fits in NV <= 8 vectors a lane (C up to 2048 in 16-bit, 1024 in
 *    fp32): each lane loads its vectors of the row into registers, every
 *    load of the row issued before the first arithmetic, and the row is
 *    read from memory once (the backward: x, dy and dinp, all before any
 *    store, then dinp written). One round trip to memory a row.
 *  - scalar (ln_fwd, ln_bwd): any C or alignment, element by element,
 *    the row read again from the caches for each pass. The backward's
 *    second pass loads LN_CHUNK elements a lane before it stores any:
 *    storing into dinp, which the compiler must assume may alias the
 *    inputs, kept it from issuing the next element's loads before the
 *    last one's store, one round trip to memory (the read of dinp) an
 *    element, ten times the time the bandwidth allows.
 * The dw/db column sums: in the vector backward's registers where a row is
 * at most LN_WGRAD_NV vectors a lane (ln_bwd_wgrad: x and dy read once),
 * else a pass of their own after it, reading 16 bytes a thread too where
 * C and the pointers allow (ln_wgrad_part_vec); then the parts added in
 * order (ln_wgrad_add). */
#include "cuda/dropout.cuh"
#include "cuda/ops.cuh"

/* residual_layernorm_fwd's dropout of add (on: p > 0): element (row, c)
 * draws at sample sample0 + row / seq, position t0 + row % seq, feature
 * feature0 + c, as dropout_fwd over (N / seq, seq, C) does. */
struct ln_drop {
	gpt_dropout d;
	uint32_t thr;
	float scale;
	int64_t seq;
	int on;
};

/* v rounded to T's precision, as a store and a load would leave it */
template <class T>
__device__ __forceinline__ float ln_round(float v)
{
	T t;
	gpt_st(&t, v);
	return gpt_ld(&t);
}

/* g[0 .. V) of row `row` from column c0 dropped as dropout_fwd drops them
 * and rounded as it stores them */
template <class T, int V>
__device__ __forceinline__ void ln_drop_vec(float (&g)[V], const ln_drop &q, int64_t row, int64_t c0)
{
	gpt_drop_run<V>(g, q.d, q.thr, q.scale, (uint64_t)(q.d.sample0 + row / q.seq),
			(uint64_t)(q.d.t0 + row % q.seq), (uint64_t)(q.d.feature0 + c0));
#pragma unroll
	for (int e = 0; e < V; e++)
		g[e] = ln_round<T>(g[e]);
}

/* With add, the residual add first: res = inp + add, rounded and stored,
 * and the LayerNorm of what was stored; each lane reads back only what it
 * wrote, so the sums run as without it. */
template <class T>
__global__ static void ln_fwd_kernel(T *out, float *mean, float *rstd, const T *inp, const T *w,
				     const T *b, int64_t N, int64_t C, float eps, T *res, const T *add,
				     ln_drop q)
{
	int64_t row = blockIdx.x * (int64_t)(blockDim.x / 32) + threadIdx.x / 32;
	int lane = threadIdx.x % 32;
	if (row >= N)
		return;
	const T *x = inp + row * C;
	if (add) {
		T *y = res + row * C;
		const T *a2 = add + row * C;
		for (int64_t j = lane; j < C; j += 32) {
			float g[1] = {gpt_ld(a2 + j)};
			if (q.on)
				ln_drop_vec<T, 1>(g, q, row, j);
			gpt_st(y + j, gpt_ld(x + j) + g[0]);
		}
		x = y;
	}
	float s = 0.0f;
	for (int64_t j = lane; j < C; j += 32)
		s += gpt_ld(x + j);
	float m = gpt_warp_sum(s) / (float)C;
	float v = 0.0f;
	for (int64_t j = lane; j < C; j += 32) {
		float dx = gpt_ld(x + j) - m;
		v += dx * dx;
	}
	v = gpt_warp_sum(v) / (float)C;
	float r = 1.0f / sqrtf(v + eps);
	T *o = out + row * C;
	for (int64_t j = lane; j < C; j += 32)
		gpt_st(o + j, (gpt_ld(x + j) - m) * r * gpt_ld(w + j) + gpt_ld(b + j));
	if (lane == 0) {
		if (mean)
			mean[row] = m;
		if (rstd)
			rstd[row] = r;
	}
}

/* The vector form of ln_fwd_kernel: lane l holds vectors l, l + 32, ...
 * (NV of them, those past the row's C / GPT_VEC(T) unused). The sums run
 * in another order than the scalar kernel's: the results may differ in the
 * last bits from it, never from run to run. */
template <class T, int NV>
__global__ static void __launch_bounds__(256)
ln_fwd_vec_kernel(T *out, float *mean, float *rstd, const T *inp, const T *w, const T *b,
		  int64_t N, int64_t C, float eps, T *res, const T *add, ln_drop q)
{
	const int W = GPT_VEC(T);
	int64_t row = blockIdx.x * (int64_t)(blockDim.x / 32) + threadIdx.x / 32;
	int lane = threadIdx.x % 32, nv = (int)(C / W);
	if (row >= N)
		return;
	const uint4 *x4 = (const uint4 *)(inp + row * C);
	uint4 xr[NV];
	if (add) {
		const uint4 *a4 = (const uint4 *)(add + row * C);
		uint4 ar[NV];
#pragma unroll
		for (int i = 0; i < NV; i++)
			if (lane + 32 * i < nv) {
				xr[i] = x4[lane + 32 * i];
				ar[i] = a4[lane + 32 * i];
			}
		uint4 *y4 = (uint4 *)(res + row * C);
#pragma unroll
		for (int i = 0; i < NV; i++)
			if (lane + 32 * i < nv) {
				float f[W], g[W];
				gpt_unpack<T>(f, xr[i]);
				gpt_unpack<T>(g, ar[i]);
				if (q.on)
					ln_drop_vec<T, W>(g, q, row, (int64_t)(lane + 32 * i) * W);
#pragma unroll
				for (int e = 0; e < W; e++)
					f[e] += g[e];
				xr[i] = gpt_pack<T>(f);
				y4[lane + 32 * i] = xr[i];
			}
	} else {
#pragma unroll
		for (int i = 0; i < NV; i++)
			if (lane + 32 * i < nv)
				xr[i] = x4[lane + 32 * i];
	}
	float s = 0.0f;
#pragma unroll
	for (int i = 0; i < NV; i++)
		if (lane + 32 * i < nv) {
			float f[W];
			gpt_unpack<T>(f, xr[i]);
#pragma unroll
			for (int e = 0; e < W; e++)
				s += f[e];
		}
	float m = gpt_warp_sum(s) / (float)C;
	float v = 0.0f;
#pragma unroll
	for (int i = 0; i < NV; i++)
		if (lane + 32 * i < nv) {
			float f[W];
			gpt_unpack<T>(f, xr[i]);
#pragma unroll
			for (int e = 0; e < W; e++)
				v += (f[e] - m) * (f[e] - m);
		}
	v = gpt_warp_sum(v) / (float)C;
	float r = 1.0f / sqrtf(v + eps);
	uint4 *o4 = (uint4 *)(out + row * C);
#pragma unroll
	for (int i = 0; i < NV; i++)
		if (lane + 32 * i < nv) {
			int k = lane + 32 * i;
			float f[W], wf[W], bf[W];
			gpt_unpack<T>(f, xr[i]);
			gpt_ld_vec(wf, w + k * W);
			gpt_ld_vec(bf, b + k * W);
#pragma unroll
			for (int e = 0; e < W; e++)
				f[e] = (f[e] - m) * r * wf[e] + bf[e];
			o4[k] = gpt_pack<T>(f);
		}
	if (lane == 0) {
		if (mean)
			mean[row] = m;
		if (rstd)
			rstd[row] = r;
	}
}

#define LN_CHUNK 4

/* With DROP, also dbr = dinp as stored, dropped as dropout_bwd drops it
 * (residual_layernorm_bwd). */
template <class T, bool DROP>
__global__ static void ln_bwd_kernel(T *dinp, const T *dout, const T *inp, const T *w,
				     const float *mean, const float *rstd, int64_t N, int64_t C, T *dbr,
				     ln_drop q)
{
	int64_t row = blockIdx.x * (int64_t)(blockDim.x / 32) + threadIdx.x / 32;
	int lane = threadIdx.x % 32;
	if (row >= N)
		return;
	const T *x = inp + row * C, *dy = dout + row * C;
	T *dx = dinp + row * C;
	float m = mean[row], s = rstd[row];
	float gm = 0.0f, gnm = 0.0f;
	for (int64_t j = lane; j < C; j += 32) {
		float g = gpt_ld(w + j) * gpt_ld(dy + j);
		gm += g;
		gnm += g * (gpt_ld(x + j) - m) * s;
	}
	gm = gpt_warp_sum(gm) / (float)C;
	gnm = gpt_warp_sum(gnm) / (float)C;
	for (int64_t j0 = lane; j0 < C; j0 += 32 * LN_CHUNK) {
		float xv[LN_CHUNK], wv[LN_CHUNK], dyv[LN_CHUNK], dxv[LN_CHUNK];
#pragma unroll
		for (int u = 0; u < LN_CHUNK; u++) {
			int64_t j = j0 + 32 * u;
			if (j < C) {
				xv[u] = gpt_ld(x + j);
				wv[u] = gpt_ld(w + j);
				dyv[u] = gpt_ld(dy + j);
				dxv[u] = gpt_ld(dx + j);
			}
		}
#pragma unroll
		for (int u = 0; u < LN_CHUNK; u++) {
			int64_t j = j0 + 32 * u;
			if (j < C) {
				float norm = (xv[u] - m) * s;
				float g = (wv[u] * dyv[u] - gm - norm * gnm) * s;
				gpt_st(dx + j, dxv[u] + g);
				if (DROP) {
					float t[1] = {ln_round<T>(dxv[u] + g)};
					ln_drop_vec<T, 1>(t, q, row, j);
					gpt_st(dbr + row * C + j, t[0]);
				}
			}
		}
	}
}

/* One row of the vector backward for a warp (lanes and vectors as
 * ln_fwd_vec's): x, dy and dinp of the row in registers, w read twice
 * (from the cache). With ACC, this lane's share of the row's weight
 * gradients added into sw (the normalized input times dy) and sb (dy),
 * a column a float, as ln_wgrad_part_vec computes each term. With DROP,
 * dbr = the dinp written, dropped by q (residual_layernorm_bwd): a Philox
 * block a 16-byte vector, as dropout_bwd's vector kernel draws them. */
template <class T, int NV, bool ACC, bool DROP>
__device__ __forceinline__ void ln_bwd_row(T *dinp, const T *dout, const T *inp, const T *w, const float *mean,
					   const float *rstd, int64_t row, int64_t C, int lane,
					   float (&sw)[NV][GPT_VEC(T)], float (&sb)[NV][GPT_VEC(T)], T *dbr,
					   const ln_drop &q)
{
	const int W = GPT_VEC(T);
	int nv = (int)(C / W);
	const uint4 *x4 = (const uint4 *)(inp + row * C), *dy4 = (const uint4 *)(dout + row * C);
	uint4 *dx4 = (uint4 *)(dinp + row * C);
	uint4 xr[NV], dyr[NV], dxr[NV];
#pragma unroll
	for (int i = 0; i < NV; i++)
		if (lane + 32 * i < nv) {
			xr[i] = x4[lane + 32 * i];
			dyr[i] = dy4[lane + 32 * i];
			dxr[i] = dx4[lane + 32 * i];
		}
	float m = mean[row], s = rstd[row];
	float gm = 0.0f, gnm = 0.0f;
#pragma unroll
	for (int i = 0; i < NV; i++)
		if (lane + 32 * i < nv) {
			float xf[W], dyf[W], wf[W];
			gpt_unpack<T>(xf, xr[i]);
			gpt_unpack<T>(dyf, dyr[i]);
			gpt_ld_vec(wf, w + (lane + 32 * i) * W);
#pragma unroll
			for (int e = 0; e < W; e++) {
				float g = wf[e] * dyf[e];
				gm += g;
				gnm += g * (xf[e] - m) * s;
				if (ACC) {
					sw[i][e] += (xf[e] - m) * s * dyf[e];
					sb[i][e] += dyf[e];
				}
			}
		}
	gm = gpt_warp_sum(gm) / (float)C;
	gnm = gpt_warp_sum(gnm) / (float)C;
#pragma unroll
	for (int i = 0; i < NV; i++)
		if (lane + 32 * i < nv) {
			float xf[W], dyf[W], wf[W], dxf[W];
			gpt_unpack<T>(xf, xr[i]);
			gpt_unpack<T>(dyf, dyr[i]);
			gpt_unpack<T>(dxf, dxr[i]);
			gpt_ld_vec(wf, w + (lane + 32 * i) * W);
#pragma unroll
			for (int e = 0; e < W; e++) {
				float norm = (xf[e] - m) * s;
				dxf[e] += (wf[e] * dyf[e] - gm - norm * gnm) * s;
			}
			dxr[i] = gpt_pack<T>(dxf);
			dx4[lane + 32 * i] = dxr[i];
		}
	/* the branch's gradient after x and dy are dead, one Philox block a
	 * vector (ln_bwd takes feature0 a multiple of W): the draws' registers
	 * then come on top of little more than the weight gradients' sums */
	if (DROP) {
		/* the row's sample and position in 32 bits (ln_bwd: N < 2^31) */
		uint32_t r32 = (uint32_t)row, sq = (uint32_t)q.seq;
		uint64_t smp = (uint64_t)q.d.sample0 + r32 / sq, pos = (uint64_t)q.d.t0 + r32 % sq;
		uint4 *br4 = (uint4 *)(dbr + row * C);
#pragma unroll
		for (int i = 0; i < NV; i++)
			if (lane + 32 * i < nv) {
				uint64_t f0 = (uint64_t)q.d.feature0 + (uint64_t)(lane + 32 * i) * W;
				uint32_t r[4];
				gpt_rng_block(r, q.d.key.seed, q.d.key.step, q.d.key.layer, q.d.key.site, smp, pos, f0);
				float g[W];
				gpt_unpack<T>(g, dxr[i]);
#pragma unroll
				for (int e = 0; e < W; e++)
					g[e] = gpt_rng_pick(r, (unsigned)(f0 & 7u) + e) >= q.thr ? g[e] * q.scale : 0.0f;
				br4[lane + 32 * i] = gpt_pack<T>(g);
			}
	}
}

/* The vector form of ln_bwd_kernel: a warp a row. */
template <class T, int NV, bool DROP>
__global__ static void __launch_bounds__(256)
ln_bwd_vec_kernel(T *dinp, const T *dout, const T *inp, const T *w, const float *mean,
		  const float *rstd, int64_t N, int64_t C, T *dbr, ln_drop q)
{
	int64_t row = blockIdx.x * (int64_t)(blockDim.x / 32) + threadIdx.x / 32;
	if (row >= N)
		return;
	float none[NV][GPT_VEC(T)];
	ln_bwd_row<T, NV, false, DROP>(dinp, dout, inp, w, mean, rstd, row, C, threadIdx.x % 32, none, none, dbr,
				       q);
}

/* The block's 8 warps' column sums acc (a lane's columns as ln_bwd_row's),
 * added in the warps' order into part (C), through red. */
template <class T, int NV>
__device__ __forceinline__ void ln_wgrad_warps(float *part, const float (&acc)[NV][GPT_VEC(T)],
					       float (*red)[NV * GPT_VEC(T) * 32], int64_t C)
{
	const int W = GPT_VEC(T);
	int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
	for (int i = 0; i < NV; i++)
#pragma unroll
		for (int e = 0; e < W; e++)
			red[warp][(lane + 32 * i) * W + e] = acc[i][e];
	__syncthreads();
	for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
		float t = 0.0f;
		for (int k = 0; k < 8; k++)
			t += red[k][c];
		part[c] = t;
	}
	__syncthreads();
}

/* The most vectors a lane of ln_bwd_wgrad_kernel (C up to 768 in 16-bit,
 * 512 in fp32): its 2 blocks an SM hold the sums in registers unspilled
 * (ptxas 13.0, sm_90: 128 registers at 3 in bf16; 4 spilled 56 bytes). */
#define LN_WGRAD_NV(T) (sizeof(T) == 2 ? 3 : 4)

/* ln_bwd_vec with the weight gradients' pass 1 in it, for rows of up to
 * LN_WGRAD_NV vectors a lane: block b's 8 warps take rows
 * [b rows, (b + 1) rows) in turn (warp i rows i, i + 8, ...), each lane
 * summing its columns' terms over its rows in registers; then the 8 warps'
 * sums, in order, into pw[b] and pb[b] (ln_wgrad_add adds the parts). x and
 * dy are read once, where the separate pass read them again (0.043 ms of
 * the 0.127 a call took at 124M, B = 32, on an H100, 2026-11-27). */
template <class T, int NV, bool DROP>
__global__ static void __launch_bounds__(256, 2)
ln_bwd_wgrad_kernel(T *dinp, float *pw, float *pb, const T *dout, const T *inp, const T *w,
		    const float *mean, const float *rstd, int64_t N, int64_t C, int64_t rows, T *dbr,
		    ln_drop q)
{
	const int W = GPT_VEC(T), CM = NV * W * 32; /* the most columns */
	__shared__ float red[8][CM];
	int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	float sw[NV][W], sb[NV][W];
#pragma unroll
	for (int i = 0; i < NV; i++)
#pragma unroll
		for (int e = 0; e < W; e++)
			sw[i][e] = sb[i][e] = 0.0f;
	int64_t r0 = blockIdx.x * rows, r1 = r0 + rows < N ? r0 + rows : N;
	for (int64_t row = r0 + warp; row < r1; row += 8)
		ln_bwd_row<T, NV, true, DROP>(dinp, dout, inp, w, mean, rstd, row, C, lane, sw, sb, dbr, q);
	ln_wgrad_warps<T, NV>(pw + blockIdx.x * C, sw, red, C);
	ln_wgrad_warps<T, NV>(pb + blockIdx.x * C, sb, red, C);
}

/* Pass 1 of dw/db: block (x, y) sums rows [y*rows, +rows) of 32 columns. */
template <class T>
__global__ static void ln_wgrad_part_kernel(float *pw, float *pb, const T *dout, const T *inp,
					    const float *mean, const float *rstd, int64_t N,
					    int64_t C, int64_t rows)
{
	__shared__ float aw[8][33], ab[8][33];
	int64_t col = blockIdx.x * 32 + threadIdx.x;
	int64_t r0 = blockIdx.y * rows, r1 = r0 + rows < N ? r0 + rows : N;
	float sw = 0.0f, sb = 0.0f;
	if (col < C)
		for (int64_t r = r0 + threadIdx.y; r < r1; r += 8) {
			float dy = gpt_ld(dout + r * C + col);
			sw += (gpt_ld(inp + r * C + col) - mean[r]) * rstd[r] * dy;
			sb += dy;
		}
	aw[threadIdx.y][threadIdx.x] = sw;
	ab[threadIdx.y][threadIdx.x] = sb;
	__syncthreads();
	if (threadIdx.y == 0 && col < C) {
		float tw = 0.0f, tb = 0.0f;
		for (int i = 0; i < 8; i++) {
			tw += aw[i][threadIdx.x];
			tb += ab[i][threadIdx.x];
		}
		pw[blockIdx.y * C + col] = tw;
		pb[blockIdx.y * C + col] = tb;
	}
}

/* The vector form of ln_wgrad_part_kernel: thread x of block (x, y) sums
 * the GPT_VEC(T) columns from (x + 32 blockIdx.x) GPT_VEC(T) in the same
 * order, each column's part the same bits as there. */
template <class T>
__global__ static void ln_wgrad_part_vec_kernel(float *pw, float *pb, const T *dout, const T *inp,
						const float *mean, const float *rstd, int64_t N,
						int64_t C, int64_t rows)
{
	const int W = GPT_VEC(T);
	__shared__ float aw[8][W][33], ab[8][W][33];
	int64_t c0 = (blockIdx.x * 32 + threadIdx.x) * (int64_t)W;
	int64_t r0 = blockIdx.y * rows, r1 = r0 + rows < N ? r0 + rows : N;
	float sw[W], sb[W];
#pragma unroll
	for (int e = 0; e < W; e++)
		sw[e] = sb[e] = 0.0f;
	if (c0 < C)
#pragma unroll 2
		for (int64_t r = r0 + threadIdx.y; r < r1; r += 8) {
			float dy[W], x[W];
			gpt_ld_vec(dy, dout + r * C + c0);
			gpt_ld_vec(x, inp + r * C + c0);
			float m = mean[r], rs = rstd[r];
#pragma unroll
			for (int e = 0; e < W; e++) {
				sw[e] += (x[e] - m) * rs * dy[e];
				sb[e] += dy[e];
			}
		}
#pragma unroll
	for (int e = 0; e < W; e++) {
		aw[threadIdx.y][e][threadIdx.x] = sw[e];
		ab[threadIdx.y][e][threadIdx.x] = sb[e];
	}
	__syncthreads();
	if (threadIdx.y == 0 && c0 < C)
		for (int e = 0; e < W; e++) {
			float tw = 0.0f, tb = 0.0f;
			for (int i = 0; i < 8; i++) {
				tw += aw[i][e][threadIdx.x];
				tb += ab[i][e][threadIdx.x];
			}
			pw[blockIdx.y * C + c0 + e] = tw;
			pb[blockIdx.y * C + c0 + e] = tb;
		}
}

/* Pass 2: the parts' sums (gpt_parts_sum), added into dw and db (either
 * may be NULL), block (32, 8) a 32 columns. */
template <class T>
__global__ static void ln_wgrad_add_kernel(T *dw, T *db, const float *pw, const float *pb,
					   int64_t parts, int64_t C)
{
	__shared__ float sh[8][33];
	int64_t col = blockIdx.x * 32 + threadIdx.x;
	T *const to[2] = {dw, db};
	const float *const from[2] = {pw, pb};
	for (int q = 0; q < 2; q++)
		if (to[q]) { /* the same for the whole block */
			float s = gpt_parts_sum(from[q], parts, C, col, sh);
			if (threadIdx.y == 0 && col < C)
				gpt_st(to[q] + col, gpt_ld(to[q] + col) + s);
		}
}

/* Vectors a lane holds for a row of C (a multiple of w) in the vector
 * kernels, rounded up to an instantiated NV; 0 when more than 8. */
static int ln_nv(int64_t C, int w)
{
	int64_t per = (C / w + 31) / 32;
	return per <= 4 ? (int)(per < 1 ? 1 : per) : per <= 6 ? 6 : per <= 8 ? 8 : 0;
}

/* Runs the statements with NV the constant nv (ln_nv's values). */
#define LN_NV_DISPATCH(nv, NV, ...)                                          \
	switch (nv) {                                                        \
	case 1: { const int NV = 1; __VA_ARGS__; break; }                    \
	case 2: { const int NV = 2; __VA_ARGS__; break; }                    \
	case 3: { const int NV = 3; __VA_ARGS__; break; }                    \
	case 4: { const int NV = 4; __VA_ARGS__; break; }                    \
	case 6: { const int NV = 6; __VA_ARGS__; break; }                    \
	default: { const int NV = 8; __VA_ARGS__; break; }                   \
	}

/* The vector kernels' NV for this row and these pointers; 0: the scalar. */
static int ln_vec(int64_t C, size_t es, const void *a, const void *b, const void *c,
		  const void *d, const void *e = NULL)
{
	int w = (int)(16 / es);
	if (C % w || !gpt_cuda_aligned(a, b, c, d) || !gpt_cuda_aligned(e))
		return 0;
	return ln_nv(C, w);
}

static int ln_fwd(gpt_backend *be, const char *op, void *out, float *mean, float *rstd,
		  const void *inp, const void *w, const void *b, int64_t N, int64_t C, float eps,
		  void *res, const void *add, const gpt_dropout *d, int64_t seq, gpt_err *err)
{
	int rc = gpt_cuda_check_sizes(op, err, 2, N, C);
	if (!rc)
		rc = gpt_cuda_dropout_check(op, d, err);
	if (rc)
		return rc;
	if (C == 0)
		return gpt_err_set(err, GPT_EINTERNAL, "%s: zero channels", op);
	ln_drop q = {};
	if (d && d->p > 0.0f) {
		if (seq <= 0 || N % seq)
			return gpt_err_set(err, GPT_EINTERNAL, "%s: %lld rows are not whole sequences of %lld for dropout",
					   op, (long long)N, (long long)seq);
		q = {*d, gpt_dropout_threshold(d->p), gpt_dropout_scale(d->p), seq, 1};
	}
	if (N == 0)
		return 0;
	cudaStream_t s = gpt_cuda_stream(be);
	unsigned blocks = (unsigned)((N + 7) / 8);
	GPT_CUDA_DISPATCH(be->dtype, T,
		int nv = ln_vec(C, sizeof(T), out, inp, w, b, res) * gpt_cuda_aligned(add);
		if (nv) {
			LN_NV_DISPATCH(nv, NV, ln_fwd_vec_kernel<T, NV><<<blocks, 256, 0, s>>>((T *)out, mean, rstd, (const T *)inp, (const T *)w, (const T *)b, N, C, eps, (T *)res, (const T *)add, q));
		} else {
			ln_fwd_kernel<T><<<blocks, 256, 0, s>>>((T *)out, mean, rstd, (const T *)inp, (const T *)w, (const T *)b, N, C, eps, (T *)res, (const T *)add, q);
		});
	return gpt_cuda_launched(op, err);
}

int gpt_cuda_layernorm_fwd(gpt_backend *be, void *out, float *mean, float *rstd,
			   const void *inp, const void *w, const void *b, int64_t N, int64_t C,
			   float eps, gpt_err *err)
{
	return ln_fwd(be, "layernorm_fwd", out, mean, rstd, inp, w, b, N, C, eps, NULL, NULL, NULL, 0, err);
}

int gpt_cuda_residual_layernorm_fwd(gpt_backend *be, void *res, void *out, float *mean, float *rstd,
				    const void *a, void *b, const void *w, const void *bias,
				    int64_t N, int64_t C, float eps, const gpt_dropout *d, int64_t T,
				    gpt_err *err)
{
	return ln_fwd(be, "residual_layernorm_fwd", out, mean, rstd, a, w, bias, N, C, eps, res, b, d,
		      T, err);
}

/* The backward's launches for one dtype, dbr and q passed on with DROP
 * (residual_layernorm_bwd). */
template <class T, bool DROP>
static int ln_bwd_run(gpt_backend *be, T *dinp, T *dw, T *db, const T *dout, const T *inp, const T *w,
		      const float *mean, const float *rstd, int64_t N, int64_t C, T *dbr, const ln_drop &q,
		      gpt_err *err)
{
	cudaStream_t s = gpt_cuda_stream(be);
	unsigned blocks = (unsigned)((N + 7) / 8);
	dim3 block(32, 8);
	int rc, nv = ln_vec(C, sizeof(T), dinp, dout, inp, w, dbr);
	if (nv && nv <= LN_WGRAD_NV(T) && (dw || db)) {
		/* the weight gradients' pass 1 in the row kernel: at most
		 * GPT_CUDA_COLSUM_PARTS blocks of 8 rows or more */
		int64_t rows = (N + GPT_CUDA_COLSUM_PARTS - 1) / GPT_CUDA_COLSUM_PARTS;
		rows = rows < 8 ? 8 : rows;
		int64_t parts = (N + rows - 1) / rows;
		if ((rc = gpt_backend_scratch(be, (size_t)(2 * parts * C) * sizeof(float), err)))
			return rc;
		float *pw = (float *)be->scratch, *pb = pw + parts * C;
		const int NVW = LN_WGRAD_NV(T);
		switch (nv) {
		case 1: ln_bwd_wgrad_kernel<T, 1, DROP><<<(unsigned)parts, 256, 0, s>>>(dinp, pw, pb, dout, inp, w, mean, rstd, N, C, rows, dbr, q); break;
		case 2: ln_bwd_wgrad_kernel<T, 2, DROP><<<(unsigned)parts, 256, 0, s>>>(dinp, pw, pb, dout, inp, w, mean, rstd, N, C, rows, dbr, q); break;
		case 3: ln_bwd_wgrad_kernel<T, 3, DROP><<<(unsigned)parts, 256, 0, s>>>(dinp, pw, pb, dout, inp, w, mean, rstd, N, C, rows, dbr, q); break;
		default: ln_bwd_wgrad_kernel<T, NVW, DROP><<<(unsigned)parts, 256, 0, s>>>(dinp, pw, pb, dout, inp, w, mean, rstd, N, C, rows, dbr, q); break;
		}
		ln_wgrad_add_kernel<T><<<(unsigned)((C + 31) / 32), block, 0, s>>>(dw, db, pw, pb, parts, C);
		return 0;
	}
	if (nv) {
		LN_NV_DISPATCH(nv, NV, ln_bwd_vec_kernel<T, NV, DROP><<<blocks, 256, 0, s>>>(dinp, dout, inp, w, mean, rstd, N, C, dbr, q));
	} else {
		ln_bwd_kernel<T, DROP><<<blocks, 256, 0, s>>>(dinp, dout, inp, w, mean, rstd, N, C, dbr, q);
	}
	if (!dw && !db)
		return 0;
	int64_t parts = (N + 255) / 256;
	if (parts > GPT_CUDA_COLSUM_PARTS)
		parts = GPT_CUDA_COLSUM_PARTS;
	int64_t rows = (N + parts - 1) / parts;
	parts = (N + rows - 1) / rows;
	if ((rc = gpt_backend_scratch(be, (size_t)(2 * parts * C) * sizeof(float), err)))
		return rc;
	float *pw = (float *)be->scratch, *pb = pw + parts * C;
	const int64_t V = GPT_VEC(T);
	if (C % V == 0 && gpt_cuda_aligned(dout, inp)) {
		dim3 grid((unsigned)((C / V + 31) / 32), (unsigned)parts);
		ln_wgrad_part_vec_kernel<T><<<grid, block, 0, s>>>(pw, pb, dout, inp, mean, rstd, N, C, rows);
	} else {
		dim3 grid((unsigned)((C + 31) / 32), (unsigned)parts);
		ln_wgrad_part_kernel<T><<<grid, block, 0, s>>>(pw, pb, dout, inp, mean, rstd, N, C, rows);
	}
	ln_wgrad_add_kernel<T><<<(unsigned)((C + 31) / 32), block, 0, s>>>(dw, db, pw, pb, parts, C);
	return 0;
}

static int ln_bwd(gpt_backend *be, const char *op, void *dinp, void *dw, void *db, const void *dout,
		  const void *inp, const void *w, const float *mean, const float *rstd, int64_t N, int64_t C,
		  void *dbr, const gpt_dropout *d, int64_t seq, gpt_err *err)
{
	int rc = gpt_cuda_check_sizes(op, err, 2, N, C);
	if (!rc && dbr)
		rc = gpt_cuda_dropout_check(op, d, err);
	if (rc)
		return rc;
	ln_drop q = {};
	if (dbr) {
		if (!d || !(d->p > 0.0f) || seq <= 0 || N % seq)
			return gpt_err_set(err, GPT_EINTERNAL,
					   "%s: wants a dropout site (p > 0) and %lld rows of whole sequences, found p %g and sequences of %lld",
					   op, (long long)N, d ? d->p : 0.0, (long long)seq);
		if (N > INT32_MAX)
			return gpt_err_set(err, GPT_EINTERNAL, "%s: %lld rows; at most 2^31 - 1 with dropout", op,
					   (long long)N);
		/* the vector kernels draw a block a vector from a feature a
		 * multiple of the vector's (the model's residual sites start
		 * at 0); elsewhere the two ops, whose bits these are */
		if (d->feature0 % (int64_t)(16 / gpt_dtype_size(be->dtype))) {
			rc = gpt_cuda_layernorm_bwd(be, dinp, dw, db, dout, inp, w, mean, rstd, N, C, err);
			return rc ? rc : gpt_cuda_dropout_bwd(be, dbr, dinp, N / seq, seq, C, d, err);
		}
		q = {*d, gpt_dropout_threshold(d->p), gpt_dropout_scale(d->p), seq, 1};
	}
	if (N == 0 || C == 0)
		return 0;
	GPT_CUDA_DISPATCH(be->dtype, T,
		rc = q.on ? ln_bwd_run<T, true>(be, (T *)dinp, (T *)dw, (T *)db, (const T *)dout, (const T *)inp, (const T *)w, mean, rstd, N, C, (T *)dbr, q, err)
			  : ln_bwd_run<T, false>(be, (T *)dinp, (T *)dw, (T *)db, (const T *)dout, (const T *)inp, (const T *)w, mean, rstd, N, C, NULL, q, err));
	return rc ? rc : gpt_cuda_launched(op, err);
}

int gpt_cuda_layernorm_bwd(gpt_backend *be, void *dinp, void *dw, void *db, const void *dout,
			   const void *inp, const void *w, const float *mean, const float *rstd,
			   int64_t N, int64_t C, gpt_err *err)
{
	return ln_bwd(be, "layernorm_bwd", dinp, dw, db, dout, inp, w, mean, rstd, N, C, NULL, NULL, 0, err);
}

int gpt_cuda_residual_layernorm_bwd(gpt_backend *be, void *dinp, void *dbranch, void *dw, void *db,
				    const void *dout, const void *inp, const void *w, const float *mean,
				    const float *rstd, int64_t N, int64_t C, const gpt_dropout *d, int64_t T,
				    gpt_err *err)
{
	if (!dbranch)
		return gpt_err_set(err, GPT_EINTERNAL, "residual_layernorm_bwd: no branch gradient to write");
	return ln_bwd(be, "residual_layernorm_bwd", dinp, dw, db, dout, inp, w, mean, rstd, N, C, dbranch, d, T,
		      err);
}
