/* The residual add and its backward, and dropout with the counter-based
 * masks of backend/philox.h (the same bits as the CPU backend's). */
#include "cuda/dropout.cuh"
#include "cuda/ops.cuh"

int gpt_cuda_dropout_check(const char *op, const gpt_dropout *d, gpt_err *err)
{
	if (!d)
		return 0;
	if (!(d->p >= 0.0f && d->p < 1.0f))
		return gpt_err_set(err, GPT_EINTERNAL, "%s: dropout probability %g is outside [0, 1)",
				   op, (double)d->p);
	if (d->sample0 < 0 || d->feature0 < 0 || d->t0 < 0)
		return gpt_err_set(err, GPT_EINTERNAL,
				   "%s: negative dropout offset (sample0 %lld, feature0 %lld, t0 %lld)",
				   op, (long long)d->sample0, (long long)d->feature0, (long long)d->t0);
	if (d->key.layer >= (1u << 24) || d->key.site >= 256u)
		return gpt_err_set(err, GPT_EINTERNAL,
				   "%s: dropout layer %u or site %u out of range (< 2^24, < 256)", op,
				   d->key.layer, d->key.site);
	return 0;
}

/* Elements [i0, n), one a thread, grid-stride (the tail after the vectors,
 * or all of them when a pointer is not 16-byte aligned). */
template <class T>
__global__ static void residual_fwd_kernel(T *out, const T *a, const T *b, int64_t i0, int64_t n)
{
	for (int64_t i = i0 + blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x)
		gpt_st(out + i, gpt_ld(a + i) + gpt_ld(b + i));
}

template <class T>
__global__ static void residual_bwd_kernel(T *da, T *db, const T *dout, int64_t i0, int64_t n)
{
	for (int64_t i = i0 + blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x) {
		float g = gpt_ld(dout + i);
		if (da)
			gpt_st(da + i, gpt_ld(da + i) + g);
		if (db)
			gpt_st(db + i, gpt_ld(db + i) + g);
	}
}

/* Vectors [0, nv) of GPT_VEC(T) elements, one a thread, grid-stride: the
 * same sums, 16 bytes a load (the 2-byte form ran at 2 TB/s on an H100,
 * 0.90 ms of a 124M step, 2026-11-27). */
template <class T>
__global__ static void residual_fwd_vec_kernel(T *out, const T *a, const T *b, int64_t nv)
{
	const int V = GPT_VEC(T);
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < nv;
	     i += (int64_t)gridDim.x * blockDim.x) {
		float x[V], y[V];
		gpt_ld_vec(x, a + i * V);
		gpt_ld_vec(y, b + i * V);
#pragma unroll
		for (int k = 0; k < V; k++)
			x[k] += y[k];
		gpt_st_vec(out + i * V, x);
	}
}

template <class T>
__global__ static void residual_bwd_vec_kernel(T *da, T *db, const T *dout, int64_t nv)
{
	const int V = GPT_VEC(T);
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < nv;
	     i += (int64_t)gridDim.x * blockDim.x) {
		float g[V];
		gpt_ld_vec(g, dout + i * V);
		T *const to[2] = {da, db};
#pragma unroll
		for (int q = 0; q < 2; q++)
			if (to[q]) {
				float x[V];
				gpt_ld_vec(x, to[q] + i * V);
#pragma unroll
				for (int k = 0; k < V; k++)
					x[k] += g[k];
				gpt_st_vec(to[q] + i * V, x);
			}
	}
}

int gpt_cuda_residual_fwd(gpt_backend *be, void *out, const void *a, const void *b, int64_t n,
			  gpt_err *err)
{
	int rc = gpt_cuda_check_sizes("residual_fwd", err, 1, n);
	if (rc || n == 0)
		return rc;
	cudaStream_t s = gpt_cuda_stream(be);
	int64_t nv, i0;
	GPT_CUDA_DISPATCH(be->dtype, T,
		gpt_cuda_vec_split(n, GPT_VEC(T), gpt_cuda_aligned(out, a, b), &nv, &i0);
		if (nv > 0)
			residual_fwd_vec_kernel<T><<<gpt_cuda_blocks(nv, 256), 256, 0, s>>>((T *)out, (const T *)a, (const T *)b, nv);
		if (i0 < n)
			residual_fwd_kernel<T><<<gpt_cuda_blocks(n - i0, 256), 256, 0, s>>>((T *)out, (const T *)a, (const T *)b, i0, n));
	return gpt_cuda_launched("residual_fwd", err);
}

int gpt_cuda_residual_bwd(gpt_backend *be, void *da, void *db, const void *dout, int64_t n,
			  gpt_err *err)
{
	int rc = gpt_cuda_check_sizes("residual_bwd", err, 1, n);
	if (rc || n == 0 || (!da && !db))
		return rc;
	cudaStream_t s = gpt_cuda_stream(be);
	int64_t nv, i0;
	GPT_CUDA_DISPATCH(be->dtype, T,
		gpt_cuda_vec_split(n, GPT_VEC(T), gpt_cuda_aligned(da, db, dout), &nv, &i0);
		if (nv > 0)
			residual_bwd_vec_kernel<T><<<gpt_cuda_blocks(nv, 256), 256, 0, s>>>((T *)da, (T *)db, (const T *)dout, nv);
		if (i0 < n)
			residual_bwd_kernel<T><<<gpt_cuda_blocks(n - i0, 256), 256, 0, s>>>((T *)da, (T *)db, (const T *)dout, i0, n));
	return gpt_cuda_launched("residual_bwd", err);
}

/* Element (b, t, f) keeps its value (times scale) when the draw of global
 * coordinate (sample0 + b, t0 + t, feature0 + f) reaches the threshold.
 * One Philox call gives the draws of eight global features 8k .. 8k + 7
 * (philox.h): a thread takes such a group of a row (G of them a row, the
 * first and last cut to [feature0, feature0 + F)), so the rounds run once
 * per eight elements, not once per element. */
template <class T>
__global__ static void dropout_kernel(T *out, const T *inp, int64_t T_, int64_t F, int64_t G,
				      int64_t groups, gpt_dropout d, uint32_t thr, float scale)
{
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < groups;
	     i += (int64_t)gridDim.x * blockDim.x) {
		int64_t r = i / G, g0 = (d.feature0 >> 3) + i % G;
		uint32_t bits[4];
		gpt_rng_block(bits, d.key.seed, d.key.step, d.key.layer, d.key.site,
			      (uint64_t)(d.sample0 + r / T_), (uint64_t)(d.t0 + r % T_), (uint64_t)(8 * g0));
#pragma unroll
		for (int e = 0; e < 8; e++) {
			int64_t f = 8 * g0 + e - d.feature0;
			if (f >= 0 && f < F)
				gpt_st(out + r * F + f, gpt_rng_pick(bits, (unsigned)e) >= thr ? gpt_ld(inp + r * F + f) * scale : 0.0f);
		}
	}
}

/* The same a group of eight at a time in 16-byte vectors (one of 16-bit
 * elements, two of fp32) where feature0 and F are whole groups and the
 * pointers 16-byte aligned: a row's groups side by side, the row and its
 * sample and position found by 32-bit divisions (the host sends larger
 * tensors to dropout_kernel, whose 64-bit divisions and 2-byte loads cost
 * about twice the time of the memory traffic at GPT-2's shapes). */
template <class T>
__global__ static void dropout_vec_kernel(T *out, const T *inp, uint32_t T_, uint32_t FG, uint32_t ng,
					  gpt_dropout d, uint32_t thr, float scale)
{
	constexpr int V = GPT_VEC(T);
	static_assert(8 % V == 0, "a group of eight is whole vectors");
	for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < ng; i += gridDim.x * blockDim.x) {
		uint32_t r = i / FG, v = i - r * FG;
		float f[8];
#pragma unroll
		for (int k = 0; k < 8 / V; k++)
			gpt_ld_vec(f + k * V, inp + (int64_t)i * 8 + k * V);
		gpt_drop_run<8>(f, d, thr, scale, (uint64_t)d.sample0 + r / T_, (uint64_t)d.t0 + r % T_,
				(uint64_t)d.feature0 + 8 * (uint64_t)v);
#pragma unroll
		for (int k = 0; k < 8 / V; k++)
			gpt_st_vec(out + (int64_t)i * 8 + k * V, f + k * V);
	}
}

static int dropout(gpt_backend *be, const char *op, void *out, const void *inp, int64_t B,
		   int64_t T, int64_t F, const gpt_dropout *d, gpt_err *err)
{
	int rc = gpt_cuda_check_sizes(op, err, 3, B, T, F);
	if (!rc)
		rc = gpt_cuda_dropout_check(op, d, err);
	if (rc)
		return rc;
	if (!d)
		return gpt_err_set(err, GPT_EINTERNAL, "%s: no dropout site given", op);
	int64_t n = B * T * F;
	if (n == 0)
		return 0;
	if (d->p == 0.0f) {
		if (out == inp)
			return 0;
		return gpt_cuda_check(cudaMemcpyAsync(out, inp, (size_t)n * gpt_dtype_size(be->dtype),
						      cudaMemcpyDeviceToDevice, gpt_cuda_stream(be)),
				      op, err);
	}
	uint32_t thr = gpt_dropout_threshold(d->p);
	float scale = gpt_dropout_scale(d->p);
	/* the groups of eight global features a row touches */
	int64_t G = ((d->feature0 + F - 1) >> 3) - (d->feature0 >> 3) + 1, groups = B * T * G;
	int64_t ng = n / 8;
	if (d->feature0 % 8 == 0 && F % 8 == 0 && ng < INT32_MAX && T < INT32_MAX && gpt_cuda_aligned(out, inp)) {
		GPT_CUDA_DISPATCH(be->dtype, E,
			dropout_vec_kernel<E><<<gpt_cuda_blocks(ng, 256), 256, 0, gpt_cuda_stream(be)>>>(
				(E *)out, (const E *)inp, (uint32_t)T, (uint32_t)(F / 8), (uint32_t)ng, *d, thr, scale));
		return gpt_cuda_launched(op, err);
	}
	GPT_CUDA_DISPATCH(be->dtype, E,
		dropout_kernel<E><<<gpt_cuda_blocks(groups, 256), 256, 0, gpt_cuda_stream(be)>>>(
			(E *)out, (const E *)inp, T, F, G, groups, *d, thr, scale));
	return gpt_cuda_launched(op, err);
}

int gpt_cuda_dropout_fwd(gpt_backend *be, void *out, const void *inp, int64_t B, int64_t T,
			 int64_t F, const gpt_dropout *d, gpt_err *err)
{
	return dropout(be, "dropout_fwd", out, inp, B, T, F, d, err);
}

int gpt_cuda_dropout_bwd(gpt_backend *be, void *dinp, const void *dout, int64_t B, int64_t T,
			 int64_t F, const gpt_dropout *d, gpt_err *err)
{
	return dropout(be, "dropout_bwd", dinp, dout, B, T, F, d, err);
}
