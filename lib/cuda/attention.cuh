/* Private to lib/cuda's attention: the arguments both attention kernels
 * (attention.cu on the CUDA cores, attention_tc.cu on the tensor cores)
 * take, the dropout factor they share with the CPU backend, and the
 * tensor-core entry points attention.cu dispatches to. */
#ifndef GPT_CUDA_ATTENTION_CUH
#define GPT_CUDA_ATTENTION_CUH

#include "cuda/ops.cuh"

#include "backend/philox.h"

typedef struct attn_args {
	int64_t T, NH, HS;
	float sc;          /* 1/sqrt(HS) */
	int drop;
	uint32_t thr;
	float dscale;
	gpt_dropout d;
	uint32_t bhn, hg; /* tensor cores: B * NH heads, in groups of hg (tile_of) */
	/* tensor cores with dropout: the forward's mask, mwords 64-bit words a
	 * head (gpt_attention_mask_words; attention_tc.cuh, mask_word) */
	uint64_t *mask;
	int64_t mwords;
	int64_t y0;       /* cuda cores: the launch's first row block (blockIdx.y 0) */
} attn_args;

/* 1 when dropout keeps probability (b, h, i, j), else 0, from the same
 * Philox coordinates as the CPU's gpt_cpu_dropout_row. */
__device__ __forceinline__ float kept(const attn_args &a, int64_t b, int64_t h, int64_t i,
				      int64_t j)
{
	if (!a.drop)
		return 1.0f;
	uint32_t bits = gpt_rng_draw(a.d.key.seed, a.d.key.step, a.d.key.layer, a.d.key.site,
				     (uint64_t)(a.d.sample0 + b), (uint64_t)i,
				     (uint64_t)((a.d.feature0 + h) * a.T + j));
	return bits >= a.thr ? 1.0f : 0.0f;
}

/* The factor dropout gives probability (b, h, i, j): 0 or 1/(1-p). */
__device__ __forceinline__ float keep(const attn_args &a, int64_t b, int64_t h, int64_t i,
				      int64_t j)
{
	return a.drop ? kept(a, b, h, i, j) * a.dscale : 1.0f;
}

/* The tensor-core forward and backward (attention_tc.cu), for arguments
 * attention.cu has checked; saved as gpt_attention_flash_saved lays it
 * out; the backward's Dv: B*NH*T floats of scratch. */
int gpt_cuda_attention_tc_fwd(gpt_backend *be, void *out, float *saved, const void *qkv,
			      int64_t B, const attn_args *a, gpt_err *err);
int gpt_cuda_attention_tc_bwd(gpt_backend *be, void *dqkv, float *Dv, const void *dout,
			      const void *out, const void *qkv, const float *saved, int64_t B,
			      const attn_args *a, gpt_err *err);

#endif
