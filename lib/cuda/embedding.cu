/* Token + position embedding (vocabulary-parallel) and its deterministic
 * backward: the rows are ordered by token id on the host (a counting sort of
 * the tokens: those the caller has in host memory, else the downloaded
 * ones), then each id's block adds its rows' gradients in token order, so
 * the sums are the CPU backend's, in the same order. With the tokens in host
 * memory the host does not wait for the device (the order goes up through
 * gpt_cuda_upload's staging), as llm.c's encoder_backward buckets its
 * inputs_cpu. */
#include "cuda/ops.cuh"

#include <stdlib.h>
#include <string.h>

/* Row r at position t0 + r % T_, or pos[r] (embedding_rows_fwd). */
template <class T>
__global__ static void embedding_fwd_kernel(T *out, const int32_t *tokens, const int32_t *pos,
					    const T *wte, const T *wpe, int64_t T_, int64_t C,
					    int64_t v0, int64_t Vl, int64_t t0, int64_t n)
{
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x) {
		int64_t r = i / C, c = i % C;
		int64_t id = (int64_t)tokens[r] - v0;
		float v = wte && id >= 0 && id < Vl ? gpt_ld(wte + id * C + c) : 0.0f;
		if (wpe)
			v += gpt_ld(wpe + (pos ? (int64_t)pos[r] : t0 + r % T_) * C + c);
		gpt_st(out + i, v);
	}
}

int gpt_cuda_embedding_fwd(gpt_backend *be, void *out, const int32_t *tokens, const void *wte,
			   const void *wpe, int64_t B, int64_t T, int64_t C, int64_t v0,
			   int64_t Vl, int64_t t0, gpt_err *err)
{
	int rc = gpt_cuda_check_sizes("embedding_fwd", err, 6, B, T, C, v0, Vl, t0);
	int64_t n = B * T * C;
	if (rc || n == 0)
		return rc;
	GPT_CUDA_DISPATCH(be->dtype, E,
		embedding_fwd_kernel<E><<<gpt_cuda_blocks(n, 256), 256, 0, gpt_cuda_stream(be)>>>(
			(E *)out, tokens, nullptr, (const E *)wte, (const E *)wpe, T, C, v0, Vl, t0, n));
	return gpt_cuda_launched("embedding_fwd", err);
}

int gpt_cuda_embedding_rows_fwd(gpt_backend *be, void *out, const int32_t *tokens, const int32_t *pos,
				const void *wte, const void *wpe, int64_t N, int64_t C, int64_t v0,
				int64_t Vl, gpt_err *err)
{
	int rc = gpt_cuda_check_sizes("embedding_rows_fwd", err, 4, N, C, v0, Vl);
	int64_t n = N * C;
	if (rc || n == 0)
		return rc;
	GPT_CUDA_DISPATCH(be->dtype, E,
		embedding_fwd_kernel<E><<<gpt_cuda_blocks(n, 256), 256, 0, gpt_cuda_stream(be)>>>(
			(E *)out, tokens, pos, (const E *)wte, (const E *)wpe, 1, C, v0, Vl, 0, n));
	return gpt_cuda_launched("embedding_rows_fwd", err);
}

/* Block (u, y): id uid[u]'s channels [y*256, +256); its rows are
 * rows[start[u] .. start[u+1]), in token order. */
template <class T>
__global__ static void wte_grad_kernel(T *dwte, const T *dout, const int32_t *uid,
				       const int32_t *start, const int32_t *rows, int64_t C)
{
	int64_t c = blockIdx.y * (int64_t)blockDim.x + threadIdx.x;
	if (c >= C)
		return;
	int64_t u = blockIdx.x;
	T *dst = dwte + (int64_t)uid[u] * C + c;
	float acc = gpt_ld(dst);
	for (int32_t k = start[u]; k < start[u + 1]; k++)
		acc += gpt_ld(dout + (int64_t)rows[k] * C + c);
	gpt_st(dst, acc);
}

/* Position t's channel c: the B samples in order. */
template <class T>
__global__ static void wpe_grad_kernel(T *dwpe, const T *dout, int64_t B, int64_t T_, int64_t C,
				       int64_t t0)
{
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < T_ * C;
	     i += (int64_t)gridDim.x * blockDim.x) {
		T *dst = dwpe + t0 * C + i;
		float acc = gpt_ld(dst);
		for (int64_t b = 0; b < B; b++)
			acc += gpt_ld(dout + b * T_ * C + i);
		gpt_st(dst, acc);
	}
}

/* Makes the context's index buffers hold n int32 each. */
static int idx_reserve(gpt_cuda_ctx *c, int64_t n, gpt_err *err)
{
	if (n <= c->idx_cap)
		return 0;
	free(c->host_idx);
	gpt_cuda_free(c->dev_idx);
	c->idx_cap = 0;
	c->dev_idx = NULL;
	c->host_idx = (int32_t *)malloc((size_t)n * sizeof(int32_t));
	if (!c->host_idx)
		return gpt_err_set(err, GPT_EINTERNAL, "embedding_bwd: out of host memory for %lld indices",
				   (long long)n);
	c->dev_idx = (int32_t *)gpt_cuda_malloc((size_t)n * sizeof(int32_t), "embedding indices", err);
	if (!c->dev_idx)
		return err ? err->code : GPT_EINTERNAL;
	c->idx_cap = n;
	return 0;
}

/* Orders the rows whose token falls in [v0, v0 + Vl) by id, then by
 * position: uid (U ids), start (U + 1), rows; returns U, or -1. tokens is
 * device or host memory. */
static int64_t order_rows(gpt_backend *be, const int32_t *tokens, int64_t BT, int64_t v0,
			  int64_t Vl, gpt_err *err)
{
	gpt_cuda_ctx *c = gpt_cuda_ctx_of(be);
	if (idx_reserve(c, 4 * BT + 1, err))
		return -1;
	const int32_t *tok = tokens;
	int32_t *h = c->host_idx;
	if (gpt_cuda_ptr_is_device(tokens)) {
		tok = c->host_idx + 3 * BT + 1;
		if (gpt_cuda_check(cudaMemcpyAsync(c->host_idx + 3 * BT + 1, tokens, (size_t)BT * 4,
						   cudaMemcpyDeviceToHost, c->stream),
				   "embedding_bwd: reading the tokens", err) ||
		    gpt_cuda_check(cudaStreamSynchronize(c->stream), "embedding_bwd", err))
			return -1;
	}
	int32_t *cnt = (int32_t *)calloc((size_t)Vl + 1, sizeof *cnt);
	if (!cnt) {
		gpt_err_set(err, GPT_EINTERNAL, "embedding_bwd: out of host memory");
		return -1;
	}
	for (int64_t r = 0; r < BT; r++) {
		int64_t id = (int64_t)tok[r] - v0;
		if (id >= 0 && id < Vl)
			cnt[id + 1]++;
	}
	int64_t U = 0;
	for (int64_t id = 0; id < Vl; id++)
		U += cnt[id + 1] > 0;
	int32_t *uid = h, *start = h + U, *rows = h + 2 * U + 1;
	/* cnt[id] becomes the first slot of id's rows */
	int64_t u = 0;
	for (int64_t id = 0; id < Vl; id++) {
		if (cnt[id + 1] > 0) {
			uid[u] = (int32_t)id;
			start[u] = cnt[id];
			u++;
		}
		cnt[id + 1] += cnt[id];
	}
	start[U] = cnt[Vl];
	for (int64_t r = 0; r < BT; r++) {
		int64_t id = (int64_t)tok[r] - v0;
		if (id >= 0 && id < Vl)
			rows[cnt[id]++] = (int32_t)r;
	}
	int64_t total = 2 * U + 1 + start[U];
	free(cnt);
	if (gpt_cuda_upload(be, c->dev_idx, h, (size_t)total * 4, err)) {
		gpt_err_prefix(err, "embedding_bwd: uploading the order");
		return -1;
	}
	return U;
}

int gpt_cuda_embedding_bwd(gpt_backend *be, void *dwte, void *dwpe, const void *dout,
			   const int32_t *tokens, int64_t B, int64_t T, int64_t C, int64_t v0,
			   int64_t Vl, int64_t t0, gpt_err *err)
{
	int rc = gpt_cuda_check_sizes("embedding_bwd", err, 6, B, T, C, v0, Vl, t0);
	int64_t BT = B * T;
	if (rc || BT == 0 || C == 0)
		return rc;
	if (BT > INT32_MAX / 4)
		return gpt_err_set(err, GPT_EINTERNAL, "embedding_bwd: %lld tokens are too many for one call",
				   (long long)BT);
	cudaStream_t s = gpt_cuda_stream(be);
	if (dwte && Vl > 0) {
		int64_t U = order_rows(be, tokens, BT, v0, Vl, err);
		if (U < 0)
			return err ? err->code : GPT_EINTERNAL;
		const int32_t *d = gpt_cuda_ctx_of(be)->dev_idx;
		if (U > 0) {
			dim3 grid((unsigned)U, (unsigned)((C + 255) / 256));
			GPT_CUDA_DISPATCH(be->dtype, E,
				wte_grad_kernel<E><<<grid, 256, 0, s>>>((E *)dwte, (const E *)dout, d,
									d + U, d + 2 * U + 1, C));
			if ((rc = gpt_cuda_launched("embedding_bwd", err)))
				return rc;
		}
	}
	if (dwpe) {
		GPT_CUDA_DISPATCH(be->dtype, E,
			wpe_grad_kernel<E><<<gpt_cuda_blocks(T * C, 256), 256, 0, s>>>(
				(E *)dwpe, (const E *)dout, B, T, C, t0));
		rc = gpt_cuda_launched("embedding_bwd", err);
	}
	return rc;
}
