/* dtype casts on the device: fp32 <-> bf16 <-> fp16, round to nearest even. */
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
