/* Private to lib/cuda: dropout's draws for a run of a row's features, as
 * dropout_fwd (elementwise.cu) and the residual add's fused dropout
 * (layernorm.cu) take them. */
#ifndef GPT_CUDA_DROPOUT_CUH
#define GPT_CUDA_DROPOUT_CUH

#include "cuda/ops.cuh"

#include "backend/philox.h"

/* g[e], feature f0 + e at (sample s, position pos) of site d, kept times
 * scale or made 0 by its draw against thr: one Philox block for eight
 * features, another where the run crosses into the next block. */
template <int V>
__device__ __forceinline__ void gpt_drop_run(float (&g)[V], const gpt_dropout &d, uint32_t thr, float scale,
					     uint64_t s, uint64_t pos, uint64_t f0)
{
	uint32_t r[4];
	gpt_rng_block(r, d.key.seed, d.key.step, d.key.layer, d.key.site, s, pos, f0);
#pragma unroll
	for (int e = 0; e < V; e++) {
		const uint64_t f = f0 + e;
		if (e > 0 && (f & 7u) == 0)
			gpt_rng_block(r, d.key.seed, d.key.step, d.key.layer, d.key.site, s, pos, f);
		g[e] = gpt_rng_pick(r, (unsigned)(f & 7u)) >= thr ? g[e] * scale : 0.0f;
	}
}

#endif
