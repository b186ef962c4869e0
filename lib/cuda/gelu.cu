/* GELU, tanh form (GPT-2's), forward and backward, as lib/cpu/gelu.c. */
#include "cuda/ops.cuh"

#define GELU_K 0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_A 0.044715f

template <class T>
__global__ static void gelu_fwd_kernel(T *out, const T *inp, int64_t n)
{
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x) {
		float v = gpt_ld(inp + i);
		gpt_st(out + i, 0.5f * v * (1.0f + tanhf(GELU_K * (v + GELU_A * v * v * v))));
	}
}

template <class T>
__global__ static void gelu_bwd_kernel(T *dinp, const T *inp, const T *dout, int64_t n)
{
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x) {
		float v = gpt_ld(inp + i);
		float t = tanhf(GELU_K * (v + GELU_A * v * v * v));
		float sech2 = 1.0f - t * t;
		float g = 0.5f * (1.0f + t) + 0.5f * v * sech2 * GELU_K * (1.0f + 3.0f * GELU_A * v * v);
		gpt_st(dinp + i, g * gpt_ld(dout + i));
	}
}

int gpt_cuda_gelu_fwd(gpt_backend *be, void *out, const void *inp, int64_t n, gpt_err *err)
{
	int rc = gpt_cuda_check_sizes("gelu_fwd", err, 1, n);
	if (rc || n == 0)
		return rc;
	GPT_CUDA_DISPATCH(be->dtype, T,
		gelu_fwd_kernel<T><<<gpt_cuda_blocks(n, 256), 256, 0, gpt_cuda_stream(be)>>>(
			(T *)out, (const T *)inp, n));
	return gpt_cuda_launched("gelu_fwd", err);
}

int gpt_cuda_gelu_bwd(gpt_backend *be, void *dinp, const void *inp, const void *dout,
		      int64_t n, gpt_err *err)
{
	int rc = gpt_cuda_check_sizes("gelu_bwd", err, 1, n);
	if (rc || n == 0)
		return rc;
	GPT_CUDA_DISPATCH(be->dtype, T,
		gelu_bwd_kernel<T><<<gpt_cuda_blocks(n, 256), 256, 0, gpt_cuda_stream(be)>>>(
			(T *)dinp, (const T *)inp, (const T *)dout, n));
	return gpt_cuda_launched("gelu_bwd", err);
}
