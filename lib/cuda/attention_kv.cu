/* Causal attention for generation against a KV cache: the new tokens' keys
 * and values go into the cache, then a warp per (sample, head, new token)
 * attends to cache positions [0, t0 + i] with an online softmax. */
#include "config/config.h"
#include "cuda/ops.cuh"

#include <math.h>

#define KV_WARPS 8
#define KV_MAX_HS GPT_GPU_MAX_HEAD_SIZE

template <class E>
__global__ static void kv_store_kernel(E *kc, E *vc, const E *qkv, int64_t Tn, int64_t t0,
				       int64_t maxT, int64_t NH, int64_t HS, int64_t n)
{
	int64_t Cl = NH * HS;
	for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
	     e += (int64_t)gridDim.x * blockDim.x) {
		int64_t d = e % HS, h = (e / HS) % NH, i = (e / Cl) % Tn, b = e / (Cl * Tn);
		const E *row = qkv + (b * Tn + i) * 3 * Cl + h * HS + d;
		int64_t at = ((b * NH + h) * maxT + t0 + i) * HS + d;
		kc[at] = row[Cl];
		vc[at] = row[2 * Cl];
	}
}

/* grid (B*NH, ceil(Tn/KV_WARPS)) from row block y0; warp w: new token i. */
template <class E>
__global__ static void kv_attend_kernel(E *out, const E *kc, const E *vc, const E *qkv,
					int64_t Tn, int64_t t0, int64_t maxT, int64_t NH,
					int64_t HS, float sc, int64_t y0)
{
	__shared__ float qs[KV_WARPS][KV_MAX_HS];
	int64_t bh = blockIdx.x, b = bh / NH, h = bh % NH;
	int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	int64_t i = (y0 + blockIdx.y) * KV_WARPS + warp;
	if (i >= Tn)
		return;
	int64_t Cl = NH * HS;
	const E *q = qkv + (b * Tn + i) * 3 * Cl + h * HS;
	for (int64_t d = lane; d < HS; d += 32)
		qs[warp][d] = gpt_ld(q + d);
	__syncwarp();
	const E *kh = kc + bh * maxT * HS, *vh = vc + bh * maxT * HS;
	int64_t n = t0 + i + 1;
	float m = -INFINITY, l = 0.0f, acc[KV_MAX_HS / 32] = {0.0f, 0.0f, 0.0f, 0.0f};
	for (int64_t j0 = 0; j0 < n; j0 += 32) {
		int64_t j = j0 + lane;
		float s = -INFINITY;
		if (j < n) {
			float dot = 0.0f;
			for (int64_t d = 0; d < HS; d++)
				dot += qs[warp][d] * gpt_ld(kh + j * HS + d);
			s = dot * sc;
		}
		float mn = fmaxf(m, gpt_warp_max(s));
		float p = j < n ? expf(s - mn) : 0.0f;
		float corr = expf(m - mn);
		l = l * corr + gpt_warp_sum(p);
		int nj = n - j0 < 32 ? (int)(n - j0) : 32;
		for (int r = 0; r < KV_MAX_HS / 32; r++)
			acc[r] *= corr;
		for (int jj = 0; jj < nj; jj++) {
			float pj = __shfl_sync(0xffffffffu, p, jj);
			for (int r = 0; r < KV_MAX_HS / 32; r++) {
				int64_t d = lane + 32 * r;
				if (d < HS)
					acc[r] += pj * gpt_ld(vh + (j0 + jj) * HS + d);
			}
		}
		m = mn;
	}
	E *o = out + (b * Tn + i) * Cl + h * HS;
	for (int r = 0; r < KV_MAX_HS / 32; r++) {
		int64_t d = lane + 32 * r;
		if (d < HS)
			gpt_st(o + d, acc[r] / l);
	}
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
	if (HS == 0)
		return gpt_err_set(err, GPT_EINTERNAL, "attention_kv: head size is 0");
	if (HS > KV_MAX_HS)
		return gpt_err_set(err, GPT_EUSAGE,
				   "attention_kv: head size %lld is above the cuda kernel's %d",
				   (long long)HS, KV_MAX_HS);
	int64_t n = B * Tn * NH * HS;
	if (n == 0)
		return 0;
	if (B * NH > INT32_MAX)
		return gpt_err_set(err, GPT_EINTERNAL, "attention_kv: %lld sequences of heads do not fit one grid",
				   (long long)(B * NH));
	cudaStream_t s = gpt_cuda_stream(be);
	float sc = 1.0f / sqrtf((float)HS);
	/* a prompt of a million tokens is 131072 row blocks: grid.y in slices */
	int64_t ny = (Tn + KV_WARPS - 1) / KV_WARPS;
	GPT_CUDA_DISPATCH(be->dtype, E,
		kv_store_kernel<E><<<gpt_cuda_blocks(n, 256), 256, 0, s>>>(
			(E *)kcache, (E *)vcache, (const E *)qkv, Tn, t0, maxT, NH, HS, n));
	for (int64_t y0 = 0; y0 < ny; y0 += GPT_CUDA_GRID_Y) {
		dim3 grid((unsigned)(B * NH), gpt_cuda_grid_y(y0, ny));
		GPT_CUDA_DISPATCH(be->dtype, E,
			kv_attend_kernel<E><<<grid, KV_WARPS * 32, 0, s>>>((E *)out, (const E *)kcache, (const E *)vcache, (const E *)qkv, Tn, t0, maxT, NH, HS, sc, y0));
	}
	return gpt_cuda_launched("attention_kv", err);
}
