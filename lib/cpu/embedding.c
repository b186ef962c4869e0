/* Token + position embedding (vocabulary-parallel) and its deterministic
 * backward. */
#include "cpu/kernels.h"

#include <string.h>

int gpt_cpu_embedding_fwd(gpt_backend *be, void *out, const int32_t *tokens, const void *wte,
			  const void *wpe, int64_t B, int64_t T, int64_t C, int64_t v0,
			  int64_t Vl, int64_t t0, gpt_err *err)
{
	int rc = gpt_cpu_check_sizes("embedding_fwd", err, 6, B, T, C, v0, Vl, t0);
	if (rc)
		return rc;
	float *o = out;
	const float *te = wte, *pe = wpe;
	#pragma omp parallel for num_threads(be->threads) schedule(static) if (B * T * C > 4096)
	for (int64_t r = 0; r < B * T; r++) {
		float *orow = o + r * C;
		int64_t id = (int64_t)tokens[r] - v0;
		if (te && id >= 0 && id < Vl)
			memcpy(orow, te + id * C, (size_t)C * sizeof *orow);
		else
			memset(orow, 0, (size_t)C * sizeof *orow);
		if (pe) {
			const float *prow = pe + (t0 + r % T) * C;
			for (int64_t j = 0; j < C; j++)
				orow[j] += prow[j];
		}
	}
	return 0;
}

int gpt_cpu_embedding_bwd(gpt_backend *be, void *dwte, void *dwpe, const void *dout,
			  const int32_t *tokens, int64_t B, int64_t T, int64_t C, int64_t v0,
			  int64_t Vl, int64_t t0, gpt_err *err)
{
	int rc = gpt_cpu_check_sizes("embedding_bwd", err, 6, B, T, C, v0, Vl, t0);
	if (rc)
		return rc;
	float *gte = dwte, *gpe = dwpe;
	const float *g = dout;
	/* Each thread owns a block of channels and walks every token in order,
	 * so repeated tokens add up in the same order for any thread count. */
	enum { BLOCK = 64 };
	int64_t nblocks = (C + BLOCK - 1) / BLOCK;
	#pragma omp parallel for num_threads(be->threads) schedule(static) if (B * T * C > 4096)
	for (int64_t blk = 0; blk < nblocks; blk++) {
		int64_t j0 = blk * BLOCK, j1 = j0 + BLOCK < C ? j0 + BLOCK : C;
		for (int64_t r = 0; r < B * T; r++) {
			const float *grow = g + r * C;
			int64_t id = (int64_t)tokens[r] - v0;
			if (gte && id >= 0 && id < Vl)
				for (int64_t j = j0; j < j1; j++)
					gte[id * C + j] += grow[j];
			if (gpe) {
				float *prow = gpe + (t0 + r % T) * C;
				for (int64_t j = j0; j < j1; j++)
					prow[j] += grow[j];
			}
		}
	}
	return 0;
}
