/* Private to lib/cuda's attention: which tile rows the tensor-core kernels
 * run in (gpt_cuda_attention_rows, cuda.h). Under GPT_CUDA_ATTN_AUTO each
 * kernel's first call at a shape times its forms on the device (64- and
 * 128-row tiles; the forward's scores a key tile ahead too) and the shape
 * keeps the fastest, remembered in the backend's context (ops.cuh:
 * gpt_cuda_attn_pick); they give the same bits, so the choice is speed
 * only. */
#ifndef GPT_CUDA_ATTENTION_ROWS_CUH
#define GPT_CUDA_ATTENTION_ROWS_CUH

#include "cuda/ops.cuh"

/* the kernels, as gpt_cuda_attention_rows_used orders them */
enum { GPT_ATTN_K_FWD, GPT_ATTN_K_DQ, GPT_ATTN_K_DKV };

/* the most forms a kernel has (the forward's 64, 64a, 64m and 128) */
enum { GPT_ATTN_FORMS_MAX = 4 };

/* The pick remembered for k's kernel and shape (its rows unread), or NULL. */
const gpt_cuda_attn_pick *gpt_cuda_attn_find(const gpt_cuda_ctx *cx, const gpt_cuda_attn_pick *k);

/* Runs go(f) for each of the n forms f (64 first; n at most
 * GPT_ATTN_FORMS_MAX) once, then twice more each between events on stream
 * s, and sets *rows to the fastest: another than the best so far only
 * when at least 3% faster, so that noise leaves the first. The outputs
 * are those of the last run, the same bits as any other. */
template <class F>
static int gpt_attn_time_rows(cudaStream_t s, F go, const int *forms, int n, int *rows, gpt_err *err)
{
	if (n < 1 || n > GPT_ATTN_FORMS_MAX)
		return gpt_err_set(err, GPT_EINTERNAL, "attention: %d forms to time, past %d", n, GPT_ATTN_FORMS_MAX);
	cudaEvent_t ev[2] = {};
	int rc = gpt_cuda_check(cudaEventCreateWithFlags(&ev[0], cudaEventDefault), "attention: creating an event", err);
	if (!rc)
		rc = gpt_cuda_check(cudaEventCreateWithFlags(&ev[1], cudaEventDefault), "attention: creating an event",
				    err);
	float ms[GPT_ATTN_FORMS_MAX] = {0};
	for (int rep = 0; !rc && rep < 3; rep++)
		for (int i = 0; !rc && i < n; i++) {
			if (rep)
				rc = gpt_cuda_check(cudaEventRecord(ev[0], s), "attention: timing its tiles", err);
			if (!rc)
				rc = go(forms[i]);
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
	int best = 0;
	for (int i = 1; i < n; i++)
		if (ms[i] < 0.97f * ms[best])
			best = i;
	if (!rc)
		*rows = forms[best];
	return rc;
}

/* Kernel kind at shape k (its rows unread), launched by go(form) in one of
 * its n forms (64 first): the one the backend's setting forces, for every
 * kernel or for this kind (64 where the kernel has not that form), or
 * under GPT_CUDA_ATTN_AUTO the one timed fastest for this shape, timing
 * them on its first call (past GPT_CUDA_ATTN_PICKS shapes, 64 untimed). */
template <class F>
static int gpt_attn_run_rows(gpt_cuda_ctx *cx, gpt_cuda_attn_pick k, const int *forms, int n, F go,
			     gpt_err *err)
{
	int rows = cx->attn_kind_rows[k.kind] ? cx->attn_kind_rows[k.kind] : cx->attn_rows;
	if (rows == GPT_CUDA_ATTN_AUTO && n > 1) {
		const gpt_cuda_attn_pick *p = gpt_cuda_attn_find(cx, &k);
		if (!p && cx->attn_npick < GPT_CUDA_ATTN_PICKS) {
			int rc = gpt_attn_time_rows(cx->stream, go, forms, n, &k.rows, err);
			if (rc)
				return rc;
			cx->attn_pick[cx->attn_npick++] = k;
			cx->attn_last[k.kind] = k.rows;
			return 0;
		}
		rows = p ? p->rows : 64;
	}
	int have = 0;
	for (int i = 0; i < n; i++)
		have |= forms[i] == rows;
	rows = have ? rows : 64;
	cx->attn_last[k.kind] = rows;
	return go(rows);
}

#endif
