/* Fused AdamW over a flat range: fp32 master weights and moments, the
 * parameter in the storage dtype receiving the master's rounded copy (none
 * where the master is the only copy); or
 * for bf16 the master split (gpt_bf16_split): the parameter its high half,
 * lo its low half, joined to fp32 for the update and split again.
 * Four elements a thread where every pointer allows (16-byte loads of the
 * fp32 arrays, 8-byte of the 16-bit ones), the rest one a thread: the same
 * arithmetic an element either way. (One a thread, the bf16 step moved 2.3
 * TB/s at 124M on an H100, 2026-11-27: 1.42 ms of a 68 ms step; in quads
 * 1.094 ms in one call over the whole range, and 1.39 ms in the step's 98,
 * a call a run of the parameter table.) adamw_runs takes up to ADAMW_RUNS
 * runs a launch. */
#include "cuda/ops.cuh"

#include <math.h>
#include <string.h>

typedef struct adamw_coef {
	float b1, b2, a1, a2, c1, c2, lr, wd, eps, gs;
} adamw_coef;

__device__ __forceinline__ float adamw_update(const adamw_coef &k, float gi, float wi, float *m,
					      float *v)
{
	gi *= k.gs;
	float mi = k.b1 * *m + k.a1 * gi;
	float vi = k.b2 * *v + k.a2 * gi * gi;
	*m = mi;
	*v = vi;
	return wi - k.lr * (mi * k.c1 / (sqrtf(vi * k.c2) + k.eps) + k.wd * wi);
}

/* Four elements of type E, loaded and stored whole (8 or 16 bytes). */
template <class E>
struct alignas(4 * sizeof(E)) quad {
	E e[4];
};

/* Where the elements are, and their update one at a time (one) or four
 * at a time (four: quad q, elements 4q to 4q + 3, every array quad-aligned
 * there), the same arithmetic an element either way. Here the parameter in
 * T with its fp32 master (master NULL: T is fp32 and the parameter is the
 * weight; param NULL: the master is the only copy); */
template <class T>
struct plain_at {
	T *param;
	float *master;
	const T *grad;
	float *m, *v;
	__device__ __forceinline__ void one(int64_t i, const adamw_coef &k) const
	{
		float wi = adamw_update(k, gpt_ld(grad + i), master ? master[i] : gpt_ld(param + i), m + i, v + i);
		if (master)
			master[i] = wi;
		if (param)
			gpt_st(param + i, wi);
	}
	__device__ __forceinline__ void four(int64_t q, const adamw_coef &k) const
	{
		quad<T> g = ((const quad<T> *)grad)[q], p;
		quad<float> mi = ((quad<float> *)m)[q], vi = ((quad<float> *)v)[q], w;
		if (master)
			w = ((quad<float> *)master)[q];
		else
			p = ((const quad<T> *)param)[q];
#pragma unroll
		for (int e = 0; e < 4; e++) {
			w.e[e] = adamw_update(k, gpt_ld(&g.e[e]), master ? w.e[e] : gpt_ld(&p.e[e]), &mi.e[e],
					      &vi.e[e]);
			gpt_st(&p.e[e], w.e[e]);
		}
		((quad<float> *)m)[q] = mi;
		((quad<float> *)v)[q] = vi;
		if (master)
			((quad<float> *)master)[q] = w;
		if (param)
			((quad<T> *)param)[q] = p;
	}
};

/* here bf16's split master (gpt_bf16_split): joined and split again by the
 * host's functions. */
struct split_at {
	uint16_t *hi, *lo;
	const __nv_bfloat16 *grad;
	float *m, *v;
	__device__ __forceinline__ void one(int64_t i, const adamw_coef &k) const
	{
		float wi = adamw_update(k, gpt_ld(grad + i), __uint_as_float(gpt_bf16_join_bits(hi[i], lo[i])),
					m + i, v + i);
		unsigned u = __float_as_uint(wi);
		lo[i] = (uint16_t)u;
		hi[i] = gpt_bf16_split_hi(u);
	}
	__device__ __forceinline__ void four(int64_t q, const adamw_coef &k) const
	{
		quad<uint16_t> h = ((quad<uint16_t> *)hi)[q], l = ((quad<uint16_t> *)lo)[q];
		quad<__nv_bfloat16> g = ((const quad<__nv_bfloat16> *)grad)[q];
		quad<float> mi = ((quad<float> *)m)[q], vi = ((quad<float> *)v)[q];
#pragma unroll
		for (int e = 0; e < 4; e++) {
			float wi = adamw_update(k, gpt_ld(&g.e[e]),
						__uint_as_float(gpt_bf16_join_bits(h.e[e], l.e[e])), &mi.e[e],
						&vi.e[e]);
			unsigned u = __float_as_uint(wi);
			l.e[e] = (uint16_t)u;
			h.e[e] = gpt_bf16_split_hi(u);
		}
		((quad<uint16_t> *)hi)[q] = h;
		((quad<uint16_t> *)lo)[q] = l;
		((quad<float> *)m)[q] = mi;
		((quad<float> *)v)[q] = vi;
	}
};

/* Elements [i0, n), one a thread, grid-stride. */
template <class A>
__global__ static void adamw_kernel(A a, int64_t i0, int64_t n, adamw_coef k)
{
	for (int64_t i = i0 + blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x)
		a.one(i, k);
}

/* Quads [0, nq), one a thread, grid-stride. */
template <class A>
__global__ static void adamw_quad_kernel(A a, int64_t nq, adamw_coef k)
{
	for (int64_t q = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; q < nq; q += (int64_t)gridDim.x * blockDim.x)
		a.four(q, k);
}

/* Up to ADAMW_RUNS runs of one range in one launch: run r takes blocks
 * [first[r], first[r + 1]), its whole quads a thread each (grid-stride
 * over its blocks), the at most 3 elements before the first and after the
 * last one a thread; decayed (bit r of decay) with kd's coefficients, else
 * kn's. */
#define ADAMW_RUNS 48
struct adamw_runs_arg {
	int64_t begin[ADAMW_RUNS], end[ADAMW_RUNS];
	unsigned first[ADAMW_RUNS + 1];
	unsigned long long decay;
	int n;
};

template <class A>
__global__ static void adamw_runs_kernel(A a, adamw_runs_arg r, adamw_coef kd, adamw_coef kn)
{
	/* the block's run: the last whose first block is at or before it (the
	 * same for every thread of the block) */
	int lo = 0, hi = r.n - 1;
	while (lo < hi) {
		int mid = (lo + hi + 1) / 2;
		if (r.first[mid] <= blockIdx.x)
			lo = mid;
		else
			hi = mid - 1;
	}
	adamw_coef k = r.decay >> lo & 1 ? kd : kn;
	int64_t b = r.begin[lo], e = r.end[lo], q0 = (b + 3) / 4, q1 = e / 4;
	int64_t t = (int64_t)(blockIdx.x - r.first[lo]) * blockDim.x + threadIdx.x;
	int64_t nt = (int64_t)(r.first[lo + 1] - r.first[lo]) * blockDim.x;
	if (q0 >= q1) { /* no whole quad */
		for (int64_t i = b + t; i < e; i += nt)
			a.one(i, k);
		return;
	}
	for (int64_t q = q0 + t; q < q1; q += nt)
		a.four(q, k);
	if (t < 4 * q0 - b)
		a.one(b + t, k);
	if (t < e - 4 * q1)
		a.one(4 * q1 + t, k);
}

/* 1 when p (NULL counts) is aligned to a quad of elements of es bytes. */
static int quad_aligned(const void *p, size_t es)
{
	return (uintptr_t)p % (4 * es) == 0;
}

/* What adamw and adamw_runs check of their arguments. */
static int adamw_check(gpt_backend *be, const void *param, const float *master, const uint16_t *lo,
		       const gpt_adamw *h, const char *op, gpt_err *err)
{
	if (h->t < 1)
		return gpt_err_set(err, GPT_EINTERNAL, "%s: step %lld is not 1-based", op, (long long)h->t);
	if ((lo && (master || be->dtype != GPT_DTYPE_BF16)) ||
	    (be->dtype != GPT_DTYPE_F32 && !master && !lo) || (!param && !master))
		return gpt_err_set(err, GPT_EINTERNAL,
				   "%s: %s parameters need fp32 master weights, whole or (bf16 only) split", op,
				   gpt_dtype_name(be->dtype));
	return 0;
}

/* The coefficients exactly as the CPU backend rounds them, with weight
 * decay wd. */
static adamw_coef adamw_coefs(const gpt_adamw *h, double wd)
{
	adamw_coef k;
	k.b1 = (float)h->beta1;
	k.b2 = (float)h->beta2;
	k.a1 = (float)(1.0 - h->beta1);
	k.a2 = (float)(1.0 - h->beta2);
	k.c1 = (float)(1.0 / (1.0 - pow(h->beta1, (double)h->t)));
	k.c2 = (float)(1.0 / (1.0 - pow(h->beta2, (double)h->t)));
	k.lr = (float)h->lr;
	k.wd = (float)wd;
	k.eps = (float)h->eps;
	k.gs = (float)h->grad_scale;
	return k;
}

/* 1 when every array is quad-aligned at element 0. */
static int quads_at_0(const void *param, const float *master, const uint16_t *lo, const void *grad,
		      const float *m, const float *v, size_t es)
{
	return quad_aligned(param, es) && quad_aligned(grad, es) && quad_aligned(lo, 2) && quad_aligned(master, 4) &&
	       quad_aligned(m, 4) && quad_aligned(v, 4);
}

template <class A>
static void adamw_launch(cudaStream_t s, const A &a, int quads, int64_t n, const adamw_coef &k)
{
	int64_t nq = quads ? n / 4 : 0, i0 = nq * 4;
	if (nq > 0)
		adamw_quad_kernel<A><<<gpt_cuda_blocks(nq, 256), 256, 0, s>>>(a, nq, k);
	if (i0 < n)
		adamw_kernel<A><<<gpt_cuda_blocks(n - i0, 256), 256, 0, s>>>(a, i0, n, k);
}

int gpt_cuda_adamw(gpt_backend *be, void *param, float *master, uint16_t *lo, const void *grad,
		   float *m, float *v, int64_t n, const gpt_adamw *h, gpt_err *err)
{
	int rc = gpt_cuda_check_sizes("adamw", err, 1, n);
	if (!rc)
		rc = adamw_check(be, param, master, lo, h, "adamw", err);
	if (rc || n == 0)
		return rc;
	adamw_coef k = adamw_coefs(h, h->weight_decay);
	cudaStream_t s = gpt_cuda_stream(be);
	int quads = quads_at_0(param, master, lo, grad, m, v, gpt_dtype_size(be->dtype));
	if (lo)
		adamw_launch(s, split_at{(uint16_t *)param, lo, (const __nv_bfloat16 *)grad, m, v}, quads, n, k);
	else
		GPT_CUDA_DISPATCH(be->dtype, T,
			adamw_launch(s, plain_at<T>{(T *)param, master, (const T *)grad, m, v}, quads, n, k));
	return gpt_cuda_launched("adamw", err);
}

template <class A>
static void runs_launch(cudaStream_t s, unsigned blocks, const A &a, const adamw_runs_arg &r, const adamw_coef &kd,
			const adamw_coef &kn)
{
	adamw_runs_kernel<A><<<blocks, 256, 0, s>>>(a, r, kd, kn);
}

/* ADAMW_RUNS runs a launch, a block a 256 quads of a run (at most 65535
 * a run, grid-stride beyond), where every array is quad-aligned at
 * element 0; else a call a run. */
int gpt_cuda_adamw_runs(gpt_backend *be, void *param, float *master, uint16_t *lo, const void *grad, float *m,
			float *v, const gpt_adamw_run *runs, int64_t nruns, const gpt_adamw *h, gpt_err *err)
{
	int rc = adamw_check(be, param, master, lo, h, "adamw_runs", err);
	if (rc)
		return rc;
	for (int64_t i = 0; i < nruns; i++)
		if (runs[i].begin < 0 || runs[i].end < runs[i].begin || (i > 0 && runs[i].begin < runs[i - 1].end))
			return gpt_err_set(err, GPT_EINTERNAL, "adamw_runs: run %lld [%lld, %lld) is not after the one before",
					   (long long)i, (long long)runs[i].begin, (long long)runs[i].end);
	size_t es = gpt_dtype_size(be->dtype);
	if (!quads_at_0(param, master, lo, grad, m, v, es))
		return gpt_adamw_runs_each(be, param, master, lo, grad, m, v, runs, nruns, h, err);
	adamw_coef kd = adamw_coefs(h, h->weight_decay), kn = adamw_coefs(h, 0.0);
	cudaStream_t s = gpt_cuda_stream(be);
	for (int64_t i = 0; i < nruns;) {
		adamw_runs_arg r;
		memset(&r, 0, sizeof r);
		unsigned blocks = 0;
		for (; i < nruns && r.n < ADAMW_RUNS; i++) {
			if (runs[i].end == runs[i].begin)
				continue;
			int64_t b = runs[i].begin, e = runs[i].end, nq = e / 4 - (b + 3) / 4;
			r.begin[r.n] = b;
			r.end[r.n] = e;
			r.first[r.n] = blocks;
			r.decay |= (unsigned long long)(runs[i].decay != 0) << r.n;
			blocks += gpt_cuda_blocks(nq > 0 ? nq : e - b, 256);
			r.n++;
		}
		if (r.n == 0)
			continue;
		r.first[r.n] = blocks;
		if (lo)
			runs_launch(s, blocks, split_at{(uint16_t *)param, lo, (const __nv_bfloat16 *)grad, m, v}, r, kd, kn);
		else
			GPT_CUDA_DISPATCH(be->dtype, T,
				runs_launch(s, blocks, plain_at<T>{(T *)param, master, (const T *)grad, m, v}, r, kd, kn));
		if ((rc = gpt_cuda_launched("adamw_runs", err)))
			return rc;
	}
	return 0;
}
