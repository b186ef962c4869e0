/* Private to lib/cuda's attention: which tile rows the tensor-core kernels
 * run in (gpt_cuda_attention_rows, cuda.h). Under GPT_CUDA_ATTN_AUTO each
 * kernel's first call at a shape times its 64- and 128-row forms on the
 * device and the shape keeps the faster, remembered in the backend's
 * context (ops.cuh: gpt_cuda_attn_pick); the two give the same bits, so
 * the choice is speed only. */
#ifndef GPT_CUDA_ATTENTION_ROWS_CUH
#define GPT_CUDA_ATTENTION_ROWS_CUH

#include "cuda/ops.cuh"

/* the kernels, as gpt_cuda_attention_rows_used orders them */
enum { GPT_ATTN_K_FWD, GPT_ATTN_K_DQ, GPT_ATTN_K_DKV };

/* The pick remembered for k's kernel and shape (its rows unread), or NULL. */
const gpt_cuda_attn_pick *gpt_cuda_attn_find(const gpt_cuda_ctx *cx, const gpt_cuda_attn_pick *k);

/* Runs go(64) and go(128) once each, then twice more each between events
 * on stream s, and sets *rows to the faster: 128 only when at least 3%
 * faster, so that noise leaves the shorter tiles. The outputs are those
 * of the last run, the same bits as any other. */
template <class F> static int gpt_attn_time_rows(cudaStream_t s, F go, int *rows, gpt_err *err)
{
	cudaEvent_t ev[2] = {};
	int rc = gpt_cuda_check(cudaEventCreateWithFlags(&ev[0], cudaEventDefault), "attention: creating an event", err);
	if (!rc)
		rc = gpt_cuda_check(cudaEventCreateWithFlags(&ev[1], cudaEventDefault), "attention: creating an event",
				    err);
	float ms[2] = {0, 0};
	for (int rep = 0; !rc && rep < 3; rep++)
		for (int i = 0; !rc && i < 2; i++) {
			if (rep)
				rc = gpt_cuda_check(cudaEventRecord(ev[0], s), "attention: timing its tiles", err);
			if (!rc)
				rc = go(i ? 128 : 64);
			if (rc || !rep)
				continue;
			float t = 0;
			rc = gpt_cuda_check(cudaEventRecord(ev[1], s), "attention: timing its tiles", err);
			if (!rc)
				rc = gpt_cuda_check(cudaEventSynchronize(ev[1]), "attention: timing its tiles", err);
			if (!rc)
				rc = gpt_cuda_check(cudaEventElapsedTime(&t, ev[0], ev[1]), "attention: timing its tiles",
						    err);
			ms[i] += t;
		}
	for (int i = 0; i < 2; i++)
		if (ev[i])
			cudaEventDestroy(ev[i]);
	if (!rc)
		*rows = ms[1] < 0.97f * ms[0] ? 128 : 64;
	return rc;
}

/* Kernel kind at shape k (its rows unread), launched by go(rows) in the
 * tile rows of the backend's setting: those it forces, or under
 * GPT_CUDA_ATTN_AUTO the rows timed fastest for this shape, timing them
 * on its first call (past GPT_CUDA_ATTN_PICKS shapes, 64 untimed).
 * only64: the kernel has no 128-row form here. */
template <class F>
static int gpt_attn_run_rows(gpt_cuda_ctx *cx, gpt_cuda_attn_pick k, int only64, F go, gpt_err *err)
{
	int rows = only64 ? 64 : cx->attn_rows;
	if (rows == GPT_CUDA_ATTN_AUTO) {
		const gpt_cuda_attn_pick *p = gpt_cuda_attn_find(cx, &k);
		if (!p && cx->attn_npick < GPT_CUDA_ATTN_PICKS) {
			int rc = gpt_attn_time_rows(cx->stream, go, &k.rows, err);
			if (rc)
				return rc;
			cx->attn_pick[cx->attn_npick++] = k;
			cx->attn_last[k.kind] = k.rows;
			return 0;
		}
		rows = p ? p->rows : 64;
	}
	cx->attn_last[k.kind] = rows;
	return go(rows);
}

#endif
