/* dtype casts on the device: fp32 <-> bf16 <-> fp16, round to nearest even;
 * 16 bytes a load and store where both pointers allow (the stage-3 windows
 * cast from the master weights every pass, trainer.c). */
#include "cuda/ops.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

__device__ static float load_as_f32(const void *p, gpt_dtype t, size_t i)
{
	switch (t) {
	case GPT_DTYPE_BF16: return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
	case GPT_DTYPE_F16: return __half2float(((const __half *)p)[i]);
	default: return ((const float *)p)[i];
	}
}

__device__ static void store_from_f32(void *p, gpt_dtype t, size_t i, float v)
{
	switch (t) {
	case GPT_DTYPE_BF16: ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v); break;
	case GPT_DTYPE_F16: ((__half *)p)[i] = __float2half_rn(v); break;
	default: ((float *)p)[i] = v; break;
	}
}

__global__ static void convert_kernel(void *dst, gpt_dtype dt, const void *src, gpt_dtype st,
				      size_t n)
{
	size_t stride = (size_t)gridDim.x * blockDim.x;
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
		store_from_f32(dst, dt, i, load_as_f32(src, st, i));
}

/* The same with 16-byte loads and stores: thread i converts the 8
 * elements from 8 i (two vectors of fp32, one of 16 bits), then the n % 8
 * past the last group one each (dst and src 16-byte aligned). The same
 * bits as convert_kernel's. */
template <class D, class S>
__global__ static void convert_vec_kernel(D *dst, const S *src, size_t n)
{
	size_t groups = n / 8, stride = (size_t)gridDim.x * blockDim.x;
	size_t id = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	for (size_t g = id; g < groups; g += stride) {
		float x[8];
#pragma unroll
		for (int h = 0; h < 8; h += GPT_VEC(S))
			gpt_ld_vec(x + h, src + 8 * g + h);
#pragma unroll
		for (int h = 0; h < 8; h += GPT_VEC(D))
			gpt_st_vec(dst + 8 * g + h, x + h);
	}
	if (id < n % 8)
		gpt_st(dst + 8 * groups + id, gpt_ld(src + 8 * groups + id));
}

static bool float_like(gpt_dtype t)
{
	return t == GPT_DTYPE_F32 || t == GPT_DTYPE_BF16 || t == GPT_DTYPE_F16;
}

int gpt_cuda_convert_on(cudaStream_t s, void *dst, gpt_dtype dst_t, const void *src,
			gpt_dtype src_t, size_t n, gpt_err *err)
{
	if (!float_like(dst_t) || !float_like(src_t))
		return gpt_err_set(err, GPT_EINTERNAL, "cuda: cannot convert %s to %s",
				   gpt_dtype_name(src_t), gpt_dtype_name(dst_t));
	if (n == 0)
		return 0;
	if (dst_t == src_t)
		return gpt_cuda_check(cudaMemcpyAsync(dst, src, n * gpt_dtype_size(src_t),
						      cudaMemcpyDeviceToDevice, s), "convert (copy)", err);
	if (gpt_cuda_aligned(dst, src)) {
		unsigned blocks = gpt_cuda_blocks((int64_t)(n / 8 > 0 ? n / 8 : 1), 256);
		GPT_CUDA_DISPATCH(dst_t, D,
			GPT_CUDA_DISPATCH(src_t, S,
				convert_vec_kernel<D, S><<<blocks, 256, 0, s>>>((D *)dst, (const S *)src, n)));
		return gpt_cuda_check(cudaGetLastError(), "convert kernel launch", err);
	}
	size_t blocks = (n + 255) / 256;
	if (blocks > 65535)
		blocks = 65535;
	convert_kernel<<<(unsigned)blocks, 256, 0, s>>>(dst, dst_t, src, src_t, n);
	return gpt_cuda_check(cudaGetLastError(), "convert kernel launch", err);
}

extern "C" int gpt_cuda_convert(void *dst, gpt_dtype dst_t, const void *src, gpt_dtype src_t,
				size_t n, gpt_err *err)
{
	return gpt_cuda_convert_on(0, dst, dst_t, src, src_t, n, err);
}
