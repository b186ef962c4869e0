/* Causal attention for generation against a KV cache: the new tokens' keys
 * and values go into the cache, then each (sample, head, new token) attends
 * to cache positions [0, t0 + i] with an online softmax, in chunks of keys
 * spread over blocks when the rows alone would leave the GPU idle (one new
 * token a step), merged by a second kernel. attention_kv_rows runs the same
 * three kernels once for a step of many sequences, each sample b then a
 * sequence of its own cache slot, position and chunk (kv_row), read from
 * device memory: its launches are the same whatever the positions, so a
 * CUDA graph of a generation step replays them (lib/infer/decode.c). */
#include "config/config.h"
#include "cuda/ops.cuh"

#include <math.h>
#include <stdlib.h>

#define KV_WARPS 4          /* a block's warps, each a share of a chunk's keys */
#define KV_MAX_HS GPT_GPU_MAX_HEAD_SIZE
#define KV_BLOCKS 1024      /* blocks to aim for when rows are few */
#define KV_MIN_CHUNK 64     /* the fewest keys a block takes */

/* The keys a block takes for rows of attention at most nmax keys long:
 * rows enough to fill the GPU (a prompt) take their keys in one chunk;
 * fewer (generation: one new token a sequence) split them, in chunks of a
 * multiple of 32 keys, at least KV_MIN_CHUNK, into about KV_BLOCKS blocks
 * in all, merged after. */
__host__ __device__ static int64_t kv_chunk(int64_t rows, int64_t nmax)
{
	if (rows >= KV_BLOCKS)
		return nmax;
	int64_t want = (KV_BLOCKS + rows - 1) / rows, chunk = (nmax + want - 1) / want;
	chunk = (chunk + 31) / 32 * 32;
	return chunk < KV_MIN_CHUNK ? KV_MIN_CHUNK : chunk;
}

/* The most chunks kv_chunk(rows, n) makes of n <= maxT keys: at most
 * ceil(maxT / KV_MIN_CHUNK), and, as each chunk is at least
 * ceil(n / want) keys, at most want. */
static int64_t kv_chunks_max(int64_t rows, int64_t maxT)
{
	if (rows >= KV_BLOCKS)
		return 1;
	int64_t want = (KV_BLOCKS + rows - 1) / rows, c = (maxT + KV_MIN_CHUNK - 1) / KV_MIN_CHUNK;
	return c < want ? c : want;
}

/* Sample b's sequence (its cache slot), the position of its first new
 * token and the keys a block of it takes: for attention_kv b, t0 and the
 * call's chunk; for attention_kv_rows (slot and pos not NULL) slot[b],
 * pos[b] and the chunk attention_kv takes for that sequence alone (NH
 * rows), one new token each. ok 0 for a row outside the caches. */
struct kv_row {
	int64_t seq, t0, chunk;
	int ok;
};

__device__ static kv_row kv_row_of(const int32_t *slot, const int32_t *pos, int64_t b, int64_t t0,
				   int64_t chunk, int64_t NH, int64_t maxT)
{
	if (!pos)
		return {b, t0, chunk, 1};
	int64_t p = pos[b], s = slot[b];
	return {s, p, kv_chunk(NH, p + 1), s >= 0 && p >= 0 && p < maxT};
}

template <class E>
__global__ static void kv_store_kernel(E *kc, E *vc, const E *qkv, const int32_t *slot,
				       const int32_t *pos, int64_t Tn, int64_t t0, int64_t maxT, int64_t NH,
				       int64_t HS, int64_t n, int *bad)
{
	int64_t Cl = NH * HS;
	for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
	     e += (int64_t)gridDim.x * blockDim.x) {
		int64_t d = e % HS, h = (e / HS) % NH, i = (e / Cl) % Tn, b = e / (Cl * Tn);
		const E *row = qkv + (b * Tn + i) * 3 * Cl + h * HS + d;
		kv_row r = kv_row_of(slot, pos, b, t0, 0, NH, maxT);
		if (!r.ok) {
			if (e % Cl == 0)
				gpt_cuda_note_bad(bad, GPT_CUDA_BAD_KV_ROW, b, r.seq, r.t0);
			continue;
		}
		int64_t at = ((r.seq * NH + h) * maxT + r.t0 + i) * HS + d;
		kc[at] = row[Cl];
		vc[at] = row[2 * Cl];
	}
}

/* Split attention ("flash decoding"): each query row (b, h, new token i)
 * attends to its n = t0 + i + 1 cached keys in chunks of `chunk` keys, a
 * block of KV_WARPS warps per (row, chunk) on grid (B*NH, rows from y0,
 * chunk); warp w takes the chunk's keys w, w + KV_WARPS, ..., its lanes
 * the head's features (lane + 32 r), so that each key and value row is
 * read by one warp in whole (coalesced), the dot product summed across the
 * warp. Online softmax per warp in fp32, then the block's warps merged.
 * One chunk (part NULL): the row's output. Several: the chunk's maximum
 * m, sum l and unnormalised output acc (HS floats) into part, row-major
 * (row, chunk) records of HS + 2 floats, for kv_merge_kernel. */
template <class E>
__global__ static void __launch_bounds__(KV_WARPS * 32)
kv_attend_kernel(E *out, float *part, const E *kc, const E *vc, const E *qkv, const int32_t *slot,
		 const int32_t *pos, int64_t Tn, int64_t t0, int64_t maxT, int64_t NH, int64_t HS, float sc,
		 int64_t chunk, int64_t y0)
{
	__shared__ float qs[KV_MAX_HS];
	__shared__ float wm[KV_WARPS], wl[KV_WARPS], wacc[KV_WARPS][KV_MAX_HS];
	int64_t bh = blockIdx.x, b = bh / NH, h = bh % NH, i = y0 + blockIdx.y;
	int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	kv_row r = kv_row_of(slot, pos, b, t0, chunk, NH, maxT);
	int64_t n = r.t0 + i + 1, c0 = (int64_t)blockIdx.z * r.chunk;
	if (c0 >= n || !r.ok) /* a chunk past this row's keys: the merge does not read it */
		return;
	int64_t c1 = c0 + r.chunk < n ? c0 + r.chunk : n, Cl = NH * HS;
	const E *q = qkv + (b * Tn + i) * 3 * Cl + h * HS;
	for (int64_t d = threadIdx.x; d < HS; d += blockDim.x)
		qs[d] = gpt_ld(q + d) * sc;
	__syncthreads();
	int64_t at = (r.seq * NH + h) * maxT * HS;
	const E *kh = kc + at, *vh = vc + at;
	float m = -INFINITY, l = 0.0f, acc[KV_MAX_HS / 32] = {0.0f, 0.0f, 0.0f, 0.0f};
	for (int64_t j = c0 + warp; j < c1; j += KV_WARPS) {
		float dot = 0.0f;
#pragma unroll
		for (int r = 0; r < KV_MAX_HS / 32; r++) {
			int64_t d = lane + 32 * r;
			if (d < HS)
				dot += qs[d] * gpt_ld(kh + j * HS + d);
		}
		float s = gpt_warp_sum(dot);
		float mn = fmaxf(m, s), corr = expf(m - mn), p = expf(s - mn);
		l = l * corr + p;
#pragma unroll
		for (int r = 0; r < KV_MAX_HS / 32; r++) {
			int64_t d = lane + 32 * r;
			acc[r] = acc[r] * corr + (d < HS ? p * gpt_ld(vh + j * HS + d) : 0.0f);
		}
		m = mn;
	}
	/* the warps' parts merged: a warp without keys has l 0, m -inf */
	if (lane == 0)
		wm[warp] = m, wl[warp] = l;
#pragma unroll
	for (int r = 0; r < KV_MAX_HS / 32; r++)
		if (lane + 32 * r < HS)
			wacc[warp][lane + 32 * r] = acc[r];
	__syncthreads();
	float M = -INFINITY, L = 0.0f;
	for (int w = 0; w < KV_WARPS; w++)
		M = fmaxf(M, wm[w]);
	float f[KV_WARPS];
	for (int w = 0; w < KV_WARPS; w++) {
		f[w] = wl[w] > 0.0f ? expf(wm[w] - M) : 0.0f;
		L += wl[w] * f[w];
	}
	float *rec = part ? part + ((bh * Tn + i) * gridDim.z + blockIdx.z) * (HS + 2) : nullptr;
	for (int64_t d = threadIdx.x; d < HS; d += blockDim.x) {
		float a = 0.0f;
		for (int w = 0; w < KV_WARPS; w++)
			a += wacc[w][d] * f[w];
		if (rec)
			rec[2 + d] = a;
		else
			gpt_st(out + (b * Tn + i) * Cl + h * HS + d, a / L);
	}
	if (rec && threadIdx.x == 0)
		rec[0] = M, rec[1] = L;
}

/* The chunks of each row merged into its output: a warp per row (grid
 * (B*NH, rows from y0)), its lanes the features. */
template <class E>
__global__ static void kv_merge_kernel(E *out, const float *part, const int32_t *slot,
				       const int32_t *pos, int64_t Tn, int64_t t0, int64_t maxT, int64_t NH,
				       int64_t HS, int64_t chunk, int64_t nch, int64_t y0)
{
	int64_t bh = blockIdx.x, b = bh / NH, h = bh % NH, i = y0 + blockIdx.y;
	kv_row r = kv_row_of(slot, pos, b, t0, chunk, NH, maxT);
	if (!r.ok)
		return;
	int64_t n = r.t0 + i + 1, used = (n + r.chunk - 1) / r.chunk;
	const float *rec = part + (bh * Tn + i) * nch * (HS + 2);
	float M = -INFINITY, L = 0.0f;
	for (int64_t c = 0; c < used; c++)
		M = fmaxf(M, rec[c * (HS + 2)]);
	for (int64_t c = 0; c < used; c++)
		L += rec[c * (HS + 2) + 1] * expf(rec[c * (HS + 2)] - M);
	for (int64_t d = threadIdx.x; d < HS; d += blockDim.x) {
		float a = 0.0f;
		for (int64_t c = 0; c < used; c++)
			a += rec[c * (HS + 2) + 2 + d] * expf(rec[c * (HS + 2)] - M);
		gpt_st(out + (b * Tn + i) * NH * HS + h * HS + d, a / L);
	}
}

/* Sizes both ops take; HS the cuda kernel's. */
static int kv_check(const char *op, int64_t HS, gpt_err *err)
{
	if (HS == 0)
		return gpt_err_set(err, GPT_EINTERNAL, "%s: head size is 0", op);
	if (HS > KV_MAX_HS)
		return gpt_err_set(err, GPT_EUSAGE, "%s: head size %lld is above the cuda kernel's %d", op,
				   (long long)HS, KV_MAX_HS);
	return 0;
}

/* The three kernels over B samples of Tn new tokens in chunks of `chunk`
 * keys, nch of them for the longest row; slot and pos: attention_kv_rows'
 * (device memory), else NULL. part: nch > 1's records. */
static int kv_launch(gpt_backend *be, void *out, void *kcache, void *vcache, const void *qkv,
		     const int32_t *slot, const int32_t *pos, int64_t B, int64_t Tn, int64_t t0,
		     int64_t maxT, int64_t NH, int64_t HS, int64_t chunk, int64_t nch, float *part,
		     const char *op, gpt_err *err)
{
	cudaStream_t s = gpt_cuda_stream(be);
	float sc = 1.0f / sqrtf((float)HS);
	int64_t n = B * Tn * NH * HS;
	GPT_CUDA_DISPATCH(be->dtype, E,
		kv_store_kernel<E><<<gpt_cuda_blocks(n, 256), 256, 0, s>>>(
			(E *)kcache, (E *)vcache, (const E *)qkv, slot, pos, Tn, t0, maxT, NH, HS, n, gpt_cuda_ctx_of(be)->bad));
	/* a prompt of a million tokens is a million rows: grid.y in slices */
	for (int64_t y0 = 0; y0 < Tn; y0 += GPT_CUDA_GRID_Y) {
		dim3 grid((unsigned)(B * NH), gpt_cuda_grid_y(y0, Tn), (unsigned)nch);
		GPT_CUDA_DISPATCH(be->dtype, E,
			kv_attend_kernel<E><<<grid, KV_WARPS * 32, 0, s>>>((E *)out, part, (const E *)kcache, (const E *)vcache, (const E *)qkv, slot, pos, Tn, t0, maxT, NH, HS, sc, chunk, y0));
		if (part)
			GPT_CUDA_DISPATCH(be->dtype, E,
				kv_merge_kernel<E><<<dim3((unsigned)(B * NH), gpt_cuda_grid_y(y0, Tn)), 32, 0, s>>>((E *)out, part, slot, pos, Tn, t0, maxT, NH, HS, chunk, nch, y0));
	}
	return gpt_cuda_launched(op, err);
}

int gpt_cuda_attention_kv(gpt_backend *be, void *out, void *kcache, void *vcache,
			  const void *qkv, int64_t B, int64_t Tn, int64_t t0, int64_t maxT,
			  int64_t NH, int64_t HS, gpt_err *err)
{
	int rc = gpt_cuda_check_sizes("attention_kv", err, 6, B, Tn, t0, maxT, NH, HS);
	if (rc)
		return rc;
	if (t0 + Tn > maxT)
		return gpt_err_set(err, GPT_EUSAGE,
				   "attention_kv: positions up to %lld do not fit the cache of %lld; "
				   "shorten the prompt or the generation",
				   (long long)(t0 + Tn), (long long)maxT);
	if ((rc = kv_check("attention_kv", HS, err)))
		return rc;
	if (B * Tn * NH * HS == 0)
		return 0;
	if (B * NH > INT32_MAX)
		return gpt_err_set(err, GPT_EINTERNAL, "attention_kv: %lld sequences of heads do not fit one grid",
				   (long long)(B * NH));
	int64_t rows = B * NH * Tn, nmax = t0 + Tn, chunk = kv_chunk(rows, nmax);
	int64_t nch = (nmax + chunk - 1) / chunk;
	float *part = NULL;
	if (nch > 1) {
		if ((rc = gpt_backend_scratch(be, (size_t)(rows * nch * (HS + 2)) * sizeof(float), err)))
			return rc;
		part = (float *)be->scratch;
	}
	return kv_launch(be, out, kcache, vcache, qkv, NULL, NULL, B, Tn, t0, maxT, NH, HS, chunk, nch, part,
			 "attention_kv", err);
}

/* Each row's chunk is the one attention_kv would take for its sequence
 * alone (B = Tn = 1: NH rows), so that its blocks, and its result, are
 * that call's; the grid has the most chunks any position in the cache
 * makes, a row's blocks past its keys return. The launches depend on n
 * and maxT alone: a CUDA graph can replay them with other positions. The
 * chunks' records are the scratch's. */
int gpt_cuda_attention_kv_rows(gpt_backend *be, void *out, void *kcache, void *vcache,
			       const void *qkv, int64_t n, const int32_t *slot, const int32_t *pos,
			       int64_t maxT, int64_t NH, int64_t HS, gpt_err *err)
{
	int rc = gpt_cuda_check_sizes("attention_kv_rows", err, 4, n, maxT, NH, HS);
	if (rc || (rc = kv_check("attention_kv_rows", HS, err)))
		return rc;
	if (n * NH == 0)
		return 0;
	if (n * NH > INT32_MAX)
		return gpt_err_set(err, GPT_EINTERNAL, "attention_kv_rows: %lld sequences of heads do not fit one grid",
				   (long long)(n * NH));
	int64_t nch = kv_chunks_max(NH, maxT);
	float *part = NULL;
	if (nch > 1) {
		if ((rc = gpt_backend_scratch(be, (size_t)(n * NH * nch * (HS + 2)) * sizeof(float), err)))
			return rc;
		part = (float *)be->scratch;
	}
	return kv_launch(be, out, kcache, vcache, qkv, slot, pos, n, 1, 0, maxT, NH, HS, 0, nch, part,
			 "attention_kv_rows", err);
}
