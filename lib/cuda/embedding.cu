/* Token + position embedding (vocabulary-parallel) and its deterministic
 * backward: the rows are ordered by token id on the host (a counting sort of
 * the tokens: those the caller has in host memory, else the downloaded
 * ones), then a warp per id and 32 channels adds the id's rows' gradients
 * in token order, so the sums are the CPU backend's, in the same order.
 * The ids go to the device most rows first: a frequent token's walk (a
 * comma's, a few percent of real text's tokens) starts with the kernel
 * and overlaps the rest, where in id order it ended the kernel alone (a
 * block per id and 256 channels, one row at a time: 0.83 ms of a 124M
 * step on an H100, 2026-11-27, for some 0.1 GB read). With the tokens in
 * host memory the host does not wait for the device (the order goes up
 * through gpt_cuda_upload's staging), as llm.c's encoder_backward buckets
 * its inputs_cpu. */
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

/* Warp w of the grid (a warp per item, grid-stride): item w is id uid[u]'s
 * channels [32 s, +32), u = w / S, s = w % S; the id's rows are
 * rows[beg[u] .. beg[u] + cnt[u]), in token order. A lane owns a channel
 * (those past C read channel 0 and store nothing). The warp reads 32 row
 * numbers at a time, a lane each (the next 32 while these rows are read),
 * shuffled to every lane, and a whole chunk's 32 rows of gradients before
 * their sum, which is in order: the bench corpus's space (its tokens are
 * bytes, a sixth of them spaces) is some 180 chunks for a warp at 124M, B
 * = 32, each about one memory latency. */
template <class T>
__global__ static void wte_grad_kernel(T *dwte, const T *dout, const int32_t *uid,
				       const int32_t *beg, const int32_t *cnt, const int32_t *rows,
				       int64_t U, int64_t S, int64_t C)
{
	const int WPB = 8; /* warps a block */
	const unsigned all = 0xffffffffu;
	int lane = threadIdx.x % 32;
	for (int64_t w = blockIdx.x * (int64_t)WPB + threadIdx.x / 32; w < U * S;
	     w += (int64_t)gridDim.x * WPB) {
		int64_t u = w / S, c = (w % S) * 32 + lane;
		bool on = c < C;
		const int32_t *rw = rows + beg[u];
		int32_t n = cnt[u];
		T *dst = dwte + (int64_t)uid[u] * C + c;
		const T *src = dout + (on ? c : 0);
		float acc = on ? gpt_ld(dst) : 0.0f;
		int32_t r = lane < n ? rw[lane] : 0;
		for (int32_t kb = 0; kb < n; kb += 32) {
			int32_t m = n - kb < 32 ? n - kb : 32;
			int32_t next = kb + 32 + lane < n ? rw[kb + 32 + lane] : 0;
			if (m == 32) {
				float v[32];
#pragma unroll
				for (int j = 0; j < 32; j++)
					v[j] = gpt_ld(src + (int64_t)__shfl_sync(all, r, j) * C);
#pragma unroll
				for (int j = 0; j < 32; j++)
					acc += v[j];
			} else {
#pragma unroll 8
				for (int32_t j = 0; j < m; j++)
					acc += gpt_ld(src + (int64_t)__shfl_sync(all, r, j) * C);
			}
			r = next;
		}
		if (on)
			gpt_st(dst, acc);
	}
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
 * position: rows, and for each of the U ids with rows, most rows first
 * (ties by id), uid, beg (its first in rows) and cnt; returns U, or -1.
 * tokens is device or host memory. The host buffer: uid, beg, cnt, rows
 * (3U + BT <= 4BT), then the downloaded tokens. */
static int64_t order_rows(gpt_backend *be, const int32_t *tokens, int64_t BT, int64_t v0,
			  int64_t Vl, gpt_err *err)
{
	gpt_cuda_ctx *c = gpt_cuda_ctx_of(be);
	if (idx_reserve(c, 5 * BT, err))
		return -1;
	const int32_t *tok = tokens;
	int32_t *h = c->host_idx;
	if (gpt_cuda_ptr_is_device(tokens)) {
		tok = c->host_idx + 4 * BT;
		if (gpt_cuda_check(cudaMemcpyAsync(c->host_idx + 4 * BT, tokens, (size_t)BT * 4,
						   cudaMemcpyDeviceToHost, c->stream),
				   "embedding_bwd: reading the tokens", err) ||
		    gpt_cuda_check(cudaStreamSynchronize(c->stream), "embedding_bwd", err))
			return -1;
	}
	/* cnt[id + 1]: id's rows; by[k]: ids with k rows, then where they go */
	int32_t *cnt = (int32_t *)calloc((size_t)Vl + 1, sizeof *cnt);
	int32_t *by = (int32_t *)calloc((size_t)BT + 2, sizeof *by);
	if (!cnt || !by) {
		free(cnt);
		free(by);
		gpt_err_set(err, GPT_EINTERNAL, "embedding_bwd: out of host memory");
		return -1;
	}
	int64_t n = 0;
	for (int64_t r = 0; r < BT; r++) {
		int64_t id = (int64_t)tok[r] - v0;
		if (id >= 0 && id < Vl) {
			cnt[id + 1]++;
			n++;
		}
	}
	int64_t U = 0;
	for (int64_t id = 0; id < Vl; id++)
		if (cnt[id + 1] > 0) {
			U++;
			by[cnt[id + 1]]++;
		}
	/* the ids with k rows go from slot by[k], k from BT down */
	int64_t at = 0;
	for (int64_t k = BT; k >= 1; k--) {
		int32_t nk = by[k];
		by[k] = (int32_t)at;
		at += nk;
	}
	int32_t *uid = h, *beg = h + U, *num = h + 2 * U, *rows = h + 3 * U;
	/* cnt[id] becomes the first slot of id's rows */
	for (int64_t id = 0; id < Vl; id++) {
		int32_t k = cnt[id + 1];
		if (k > 0) {
			int32_t u = by[k]++;
			uid[u] = (int32_t)id;
			beg[u] = cnt[id];
			num[u] = k;
		}
		cnt[id + 1] += cnt[id];
	}
	for (int64_t r = 0; r < BT; r++) {
		int64_t id = (int64_t)tok[r] - v0;
		if (id >= 0 && id < Vl)
			rows[cnt[id]++] = (int32_t)r;
	}
	free(cnt);
	free(by);
	if (gpt_cuda_upload(be, c->dev_idx, h, (size_t)(3 * U + n) * 4, err)) {
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
			int64_t S = (C + 31) / 32;
			GPT_CUDA_DISPATCH(be->dtype, E,
				wte_grad_kernel<E><<<gpt_cuda_blocks(U * S, 8), 256, 0, s>>>(
					(E *)dwte, (const E *)dout, d, d + U, d + 2 * U, d + 3 * U, U, S, C));
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
