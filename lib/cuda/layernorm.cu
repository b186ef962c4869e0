/* LayerNorm forward and backward over the last dimension: a warp per row;
 * the weight and bias gradients as deterministic two-pass column sums. */
#include "cuda/ops.cuh"

/* With add, the residual add first: res = inp + add, rounded and stored,
 * and the LayerNorm of what was stored; each lane reads back only what it
 * wrote, so the sums run as without it. */
template <class T>
__global__ static void ln_fwd_kernel(T *out, float *mean, float *rstd, const T *inp, const T *w,
				     const T *b, int64_t N, int64_t C, float eps, T *res, const T *add)
{
	int64_t row = blockIdx.x * (int64_t)(blockDim.x / 32) + threadIdx.x / 32;
	int lane = threadIdx.x % 32;
	if (row >= N)
		return;
	const T *x = inp + row * C;
	if (add) {
		T *y = res + row * C;
		const T *a2 = add + row * C;
		for (int64_t j = lane; j < C; j += 32)
			gpt_st(y + j, gpt_ld(x + j) + gpt_ld(a2 + j));
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

template <class T>
__global__ static void ln_bwd_kernel(T *dinp, const T *dout, const T *inp, const T *w,
				     const float *mean, const float *rstd, int64_t N, int64_t C)
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
	for (int64_t j = lane; j < C; j += 32) {
		float norm = (gpt_ld(x + j) - m) * s;
		float g = (gpt_ld(w + j) * gpt_ld(dy + j) - gm - norm * gnm) * s;
		gpt_st(dx + j, gpt_ld(dx + j) + g);
	}
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

/* Pass 2: the parts in order, added into dw and db (either may be NULL). */
template <class T>
__global__ static void ln_wgrad_add_kernel(T *dw, T *db, const float *pw, const float *pb,
					   int64_t parts, int64_t C)
{
	for (int64_t col = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; col < C;
	     col += (int64_t)gridDim.x * blockDim.x) {
		float sw = 0.0f, sb = 0.0f;
		for (int64_t p = 0; p < parts; p++) {
			sw += pw[p * C + col];
			sb += pb[p * C + col];
		}
		if (dw)
			gpt_st(dw + col, gpt_ld(dw + col) + sw);
		if (db)
			gpt_st(db + col, gpt_ld(db + col) + sb);
	}
}

int gpt_cuda_layernorm_fwd(gpt_backend *be, void *out, float *mean, float *rstd,
			   const void *inp, const void *w, const void *b, int64_t N, int64_t C,
			   float eps, gpt_err *err)
{
	int rc = gpt_cuda_check_sizes("layernorm_fwd", err, 2, N, C);
	if (rc)
		return rc;
	if (C == 0)
		return gpt_err_set(err, GPT_EINTERNAL, "layernorm_fwd: zero channels");
	if (N == 0)
		return 0;
	unsigned blocks = (unsigned)((N + 7) / 8);
	GPT_CUDA_DISPATCH(be->dtype, T,
		ln_fwd_kernel<T><<<blocks, 256, 0, gpt_cuda_stream(be)>>>(
			(T *)out, mean, rstd, (const T *)inp, (const T *)w, (const T *)b, N, C, eps, (T *)NULL, (const T *)NULL));
	return gpt_cuda_launched("layernorm_fwd", err);
}

int gpt_cuda_residual_layernorm_fwd(gpt_backend *be, void *res, void *out, float *mean, float *rstd,
				    const void *a, const void *b, const void *w, const void *bias,
				    int64_t N, int64_t C, float eps, gpt_err *err)
{
	int rc = gpt_cuda_check_sizes("residual_layernorm_fwd", err, 2, N, C);
	if (rc)
		return rc;
	if (C == 0)
		return gpt_err_set(err, GPT_EINTERNAL, "residual_layernorm_fwd: zero channels");
	if (N == 0)
		return 0;
	unsigned blocks = (unsigned)((N + 7) / 8);
	GPT_CUDA_DISPATCH(be->dtype, T,
		ln_fwd_kernel<T><<<blocks, 256, 0, gpt_cuda_stream(be)>>>((T *)out, mean, rstd, (const T *)a, (const T *)w, (const T *)bias, N, C, eps, (T *)res, (const T *)b));
	return gpt_cuda_launched("residual_layernorm_fwd", err);
}

int gpt_cuda_layernorm_bwd(gpt_backend *be, void *dinp, void *dw, void *db, const void *dout,
			   const void *inp, const void *w, const float *mean, const float *rstd,
			   int64_t N, int64_t C, gpt_err *err)
{
	int rc = gpt_cuda_check_sizes("layernorm_bwd", err, 2, N, C);
	if (rc || N == 0 || C == 0)
		return rc;
	cudaStream_t s = gpt_cuda_stream(be);
	unsigned blocks = (unsigned)((N + 7) / 8);
	GPT_CUDA_DISPATCH(be->dtype, T,
		ln_bwd_kernel<T><<<blocks, 256, 0, s>>>((T *)dinp, (const T *)dout, (const T *)inp,
							(const T *)w, mean, rstd, N, C));
	if ((rc = gpt_cuda_launched("layernorm_bwd", err)) || (!dw && !db))
		return rc;
	int64_t parts = (N + 255) / 256;
	if (parts > 256)
		parts = 256;
	int64_t rows = (N + parts - 1) / parts;
	parts = (N + rows - 1) / rows;
	if ((rc = gpt_backend_scratch(be, (size_t)(2 * parts * C) * sizeof(float), err)))
		return rc;
	float *pw = (float *)be->scratch, *pb = pw + parts * C;
	dim3 grid((unsigned)((C + 31) / 32), (unsigned)parts), block(32, 8);
	GPT_CUDA_DISPATCH(be->dtype, T,
		ln_wgrad_part_kernel<T><<<grid, block, 0, s>>>(pw, pb, (const T *)dout, (const T *)inp,
							       mean, rstd, N, C, rows);
		ln_wgrad_add_kernel<T><<<gpt_cuda_blocks(C, 256), 256, 0, s>>>((T *)dw, (T *)db, pw,
									       pb, parts, C));
	return gpt_cuda_launched("layernorm_bwd", err);
}
