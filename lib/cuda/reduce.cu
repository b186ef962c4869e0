/* Reductions the optimizer needs: the sum of squares (global gradient norm),
 * deterministic (fixed blocks, partial sums in double added in order), and
 * the finiteness check (loss-scale overflow). */
#include "cuda/ops.cuh"

#define SQ_BLOCKS 256
#define SQ_THREADS 256

template <class T>
__global__ static void sumsq_part_kernel(double *part, const T *x, int64_t n)
{
	__shared__ double sh[SQ_THREADS];
	int64_t len = (n + SQ_BLOCKS - 1) / SQ_BLOCKS;
	int64_t i0 = blockIdx.x * len, i1 = i0 + len < n ? i0 + len : n;
	double s = 0.0;
	for (int64_t i = i0 + threadIdx.x; i < i1; i += SQ_THREADS) {
		double v = gpt_ld(x + i);
		s += v * v;
	}
	sh[threadIdx.x] = s;
	__syncthreads();
	for (int w = SQ_THREADS / 2; w > 0; w >>= 1) {
		if ((int)threadIdx.x < w)
			sh[threadIdx.x] += sh[threadIdx.x + w];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		part[blockIdx.x] = sh[0];
}

__global__ static void sumsq_add_kernel(float *acc, const double *part)
{
	double s = 0.0;
	for (int i = 0; i < SQ_BLOCKS; i++)
		s += part[i];
	*acc = (float)((double)*acc + s);
}

int gpt_cuda_sum_squares(gpt_backend *be, float *acc, const void *x, int64_t n, gpt_err *err)
{
	int rc = gpt_cuda_check_sizes("sum_squares", err, 1, n);
	if (rc || n == 0)
		return rc;
	if ((rc = gpt_backend_scratch(be, SQ_BLOCKS * sizeof(double), err)))
		return rc;
	cudaStream_t s = gpt_cuda_stream(be);
	double *part = (double *)be->scratch;
	GPT_CUDA_DISPATCH(be->dtype, T,
		sumsq_part_kernel<T><<<SQ_BLOCKS, SQ_THREADS, 0, s>>>(part, (const T *)x, n));
	sumsq_add_kernel<<<1, 1, 0, s>>>(acc, part);
	return gpt_cuda_launched("sum_squares", err);
}

template <class T>
__global__ static void finite_kernel(float *flag, const T *x, int64_t n)
{
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x)
		if (!isfinite(gpt_ld(x + i)))
			*flag = 1.0f; /* every writer writes the same value */
}

int gpt_cuda_check_finite(gpt_backend *be, float *flag, const void *x, int64_t n,
			  gpt_err *err)
{
	int rc = gpt_cuda_check_sizes("check_finite", err, 1, n);
	if (rc || n == 0)
		return rc;
	GPT_CUDA_DISPATCH(be->dtype, T,
		finite_kernel<T><<<gpt_cuda_blocks(n, 256), 256, 0, gpt_cuda_stream(be)>>>(
			flag, (const T *)x, n));
	return gpt_cuda_launched("check_finite", err);
}
