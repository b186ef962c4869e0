/* GELU, tanh form (GPT-2's), forward and backward, as lib/cpu/gelu.c
 * computes it: 0.5 (1 + tanh u) is the logistic function s of 2u, so GELU
 * is v s and its derivative s + 2 K v s (1 - s) (1 + 3 A v^2), 1 - s taken
 * as e s (e = exp(-2u)), which does not cancel. One __expf (a multiply and
 * the hardware's 2^x, relative error about 2^-21 at these arguments) and
 * one __fdividef an element, a few instructions where tanhf and an IEEE
 * division took several times that; the kernels are then memory-bound:
 * 16-byte loads and stores, GPT_VEC(T) elements a thread a step, when
 * every pointer is 16-byte aligned (the last n % GPT_VEC(T) elements one a
 * thread); element by element, as before, when one is not. */
#include "cuda/colsum.cuh"

#define GELU_K 0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_A 0.044715f

/* -2u, u = K v (1 + A v^2), as the CPU computes it */
__device__ __forceinline__ static float gelu_m2u(float v)
{
	return -2.0f * ((GELU_K * v) * fmaf(GELU_A, v * v, 1.0f));
}

__device__ __forceinline__ static float gelu_f(float v)
{
	return v * __fdividef(1.0f, 1.0f + __expf(gelu_m2u(v)));
}

/* exp(-2u) is taken at most e^80 (v below about -11), where s is e^-80
 * in place of smaller still, so that s (1 - s) = s * (e s) never meets
 * inf * 0 (and 1 + e stays below 2^126, where __fdividef gives 0). */
__device__ __forceinline__ static float gelu_d(float v, float dy)
{
	float e = __expf(fminf(gelu_m2u(v), 80.0f)), s = __fdividef(1.0f, 1.0f + e);
	float d = (2.0f * GELU_K * v) * s;
	d = d * (e * s); /* 1 - s, without cancelling */
	d = d * fmaf(3.0f * GELU_A, v * v, 1.0f);
	return (d + s) * dy;
}

/* Elements [i0, n), one a thread, grid-stride. */
template <class T>
__global__ static void gelu_fwd_kernel(T *out, const T *inp, int64_t i0, int64_t n)
{
	for (int64_t i = i0 + blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x)
		gpt_st(out + i, gelu_f(gpt_ld(inp + i)));
}

template <class T>
__global__ static void gelu_bwd_kernel(T *dinp, const T *inp, const T *dout, int64_t i0, int64_t n)
{
	for (int64_t i = i0 + blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x)
		gpt_st(dinp + i, gelu_d(gpt_ld(inp + i), gpt_ld(dout + i)));
}

/* Vectors [0, nv) of GPT_VEC(T) elements, one a thread, grid-stride. */
template <class T>
__global__ static void gelu_fwd_vec_kernel(T *out, const T *inp, int64_t nv)
{
	const int V = GPT_VEC(T);
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < nv;
	     i += (int64_t)gridDim.x * blockDim.x) {
		float f[V];
		gpt_ld_vec(f, inp + i * V);
#pragma unroll
		for (int k = 0; k < V; k++)
			f[k] = gelu_f(f[k]);
		gpt_st_vec(out + i * V, f);
	}
}

template <class T>
__global__ static void gelu_bwd_vec_kernel(T *dinp, const T *inp, const T *dout, int64_t nv)
{
	const int V = GPT_VEC(T);
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < nv;
	     i += (int64_t)gridDim.x * blockDim.x) {
		float x[V], g[V];
		gpt_ld_vec(x, inp + i * V);
		gpt_ld_vec(g, dout + i * V);
#pragma unroll
		for (int k = 0; k < V; k++)
			g[k] = gelu_d(x[k], g[k]);
		gpt_st_vec(dinp + i * V, g);
	}
}

int gpt_cuda_gelu_fwd(gpt_backend *be, void *out, const void *inp, int64_t n, gpt_err *err)
{
	int rc = gpt_cuda_check_sizes("gelu_fwd", err, 1, n);
	if (rc || n == 0)
		return rc;
	cudaStream_t s = gpt_cuda_stream(be);
	int64_t nv, i0;
	GPT_CUDA_DISPATCH(be->dtype, T,
		gpt_cuda_vec_split(n, GPT_VEC(T), gpt_cuda_aligned(out, inp), &nv, &i0);
		if (nv > 0)
			gelu_fwd_vec_kernel<T><<<gpt_cuda_blocks(nv, 256), 256, 0, s>>>((T *)out, (const T *)inp, nv);
		if (i0 < n)
			gelu_fwd_kernel<T><<<gpt_cuda_blocks(n - i0, 256), 256, 0, s>>>((T *)out, (const T *)inp, i0, n));
	return gpt_cuda_launched("gelu_fwd", err);
}

int gpt_cuda_gelu_bwd(gpt_backend *be, void *dinp, const void *inp, const void *dout,
		      int64_t n, gpt_err *err)
{
	int rc = gpt_cuda_check_sizes("gelu_bwd", err, 1, n);
	if (rc || n == 0)
		return rc;
	cudaStream_t s = gpt_cuda_stream(be);
	int64_t nv, i0;
	GPT_CUDA_DISPATCH(be->dtype, T,
		gpt_cuda_vec_split(n, GPT_VEC(T), gpt_cuda_aligned(dinp, inp, dout), &nv, &i0);
		if (nv > 0)
			gelu_bwd_vec_kernel<T><<<gpt_cuda_blocks(nv, 256), 256, 0, s>>>((T *)dinp, (const T *)inp, (const T *)dout, nv);
		if (i0 < n)
			gelu_bwd_kernel<T><<<gpt_cuda_blocks(n - i0, 256), 256, 0, s>>>((T *)dinp, (const T *)inp, (const T *)dout, i0, n));
	return gpt_cuda_launched("gelu_bwd", err);
}

/* gelu_bwd_bias's rows for the column sums: row r's GPT_VEC(T) elements of
 * dinp from column c0 computed and stored, as gelu_bwd_vec_kernel does, and
 * given back as stored (rounded), the values a column sum of dinp reads. */
template <class T>
struct gelu_bwd_rows {
	T *dinp;
	const T *inp, *dout;
	int64_t N;
	__device__ __forceinline__ void operator()(float *g, int64_t r, int64_t c0) const
	{
		const int V = GPT_VEC(T);
		float x[V];
		int64_t i = r * N + c0;
		gpt_ld_vec(x, inp + i);
		gpt_ld_vec(g, dout + i);
#pragma unroll
		for (int k = 0; k < V; k++)
			g[k] = gelu_d(x[k], g[k]);
		uint4 u = gpt_pack<T>(g);
		*(uint4 *)(dinp + i) = u;
		gpt_unpack<T>(g, u);
	}
};

/* gelu_bwd, and dbias += the column sums of its result, in the column
 * sums' pass 1 (colsum.cuh) where N and the pointers allow vectors: dinp's
 * rows written and summed in one read of inp and dout, where gelu_bwd and
 * linear_bwd's bias gradient read dinp again (fc's 3072 columns of a
 * layer's 6912 summed: about 0.95 of the column sums' 2.14 ms in a 124M
 * step of 68 on an H100, 2026-11-27). The same bits either way. */
int gpt_cuda_gelu_bwd_bias(gpt_backend *be, void *dinp, void *dbias, const void *inp, const void *dout,
			   int64_t M, int64_t N, gpt_err *err)
{
	int rc = gpt_cuda_check_sizes("gelu_bwd_bias", err, 2, M, N);
	if (rc || M == 0 || N == 0)
		return rc;
	GPT_CUDA_DISPATCH(be->dtype, T,
		if (dbias && N % GPT_VEC(T) == 0 && gpt_cuda_aligned(dinp, inp, dout))
			return colsum_vec_add(be, (T *)dbias, gelu_bwd_rows<T>{(T *)dinp, (const T *)inp, (const T *)dout, N}, M, N, "gelu_bwd_bias", err));
	rc = gpt_cuda_gelu_bwd(be, dinp, inp, dout, M * N, err);
	return rc || !dbias ? rc : gpt_cuda_colsum_add(be, dbias, dinp, M, N, err);
}
