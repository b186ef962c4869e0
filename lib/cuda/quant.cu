/* Fake quantization for quantization-aware training (PaddleSlim's abs_max,
 * channel_wise_abs_max, moving_average_abs_max) and PACT's learned clip, the
 * CUDA versions of lib/cpu/quant.c. fake_quant and the moving average do the
 * CPU's fp32 arithmetic operation for operation (no contraction into FMAs),
 * so their results are the CPU's bit for bit; maxima are exact in any
 * order; PACT's alpha gradient is summed in fixed blocks, then in order, so
 * it is the same on every run. */
#include "cuda/ops.cuh"

#define QB 256      /* blocks of the whole-tensor reductions */
#define QT 256      /* threads per block */

/* The largest of the block's v in sh[0] (every thread calls it). */
__device__ static float block_max(float *sh, float v)
{
	sh[threadIdx.x] = v;
	__syncthreads();
	for (int w = QT / 2; w > 0; w >>= 1) {
		if ((int)threadIdx.x < w)
			sh[threadIdx.x] = fmaxf(sh[threadIdx.x], sh[threadIdx.x + w]);
		__syncthreads();
	}
	return sh[0];
}

template <class T>
__global__ static void absmax_rows_kernel(float *scale, const T *x, int64_t rows, int64_t cols,
					  int accumulate)
{
	__shared__ float sh[QT];
	for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
		float m = 0.0f;
		for (int64_t c = threadIdx.x; c < cols; c += QT)
			m = fmaxf(m, fabsf(gpt_ld(x + r * cols + c)));
		m = block_max(sh, m);
		if (threadIdx.x == 0)
			scale[r] = accumulate ? fmaxf(scale[r], m) : m;
		__syncthreads();
	}
}

template <class T>
__global__ static void absmax_part_kernel(float *part, const T *x, int64_t n)
{
	__shared__ float sh[QT];
	int64_t len = (n + QB - 1) / QB;
	int64_t i0 = blockIdx.x * len, i1 = i0 + len < n ? i0 + len : n;
	float m = 0.0f;
	for (int64_t i = i0 + threadIdx.x; i < i1; i += QT)
		m = fmaxf(m, fabsf(gpt_ld(x + i)));
	m = block_max(sh, m);
	if (threadIdx.x == 0)
		part[blockIdx.x] = m;
}

__global__ static void absmax_done_kernel(float *scale, const float *part, int accumulate)
{
	float m = 0.0f;
	for (int i = 0; i < QB; i++)
		m = fmaxf(m, part[i]);
	*scale = accumulate ? fmaxf(*scale, m) : m;
}

static int check(const char *op, int64_t rows, int64_t cols, int bits, gpt_err *err)
{
	int rc = gpt_cuda_check_sizes(op, err, 2, rows, cols);
	if (!rc && (bits < 2 || bits > 16))
		rc = gpt_err_set(err, GPT_EINTERNAL, "%s: %d bits; expected 2 to 16", op, bits);
	return rc;
}

int gpt_cuda_quant_absmax(gpt_backend *be, float *scale, const void *x, int64_t rows,
			  int64_t cols, int per_row, int accumulate, gpt_err *err)
{
	int rc = check("quant_absmax", rows, cols, 8, err);
	if (rc)
		return rc;
	cudaStream_t s = gpt_cuda_stream(be);
	if (per_row) {
		if (rows == 0)
			return 0;
		unsigned blocks = (unsigned)(rows < 65535 ? rows : 65535);
		GPT_CUDA_DISPATCH(be->dtype, T,
			absmax_rows_kernel<T><<<blocks, QT, 0, s>>>(scale, (const T *)x, rows, cols, accumulate));
		return gpt_cuda_launched("quant_absmax", err);
	}
	if ((rc = gpt_backend_scratch(be, QB * sizeof(float), err)))
		return rc;
	float *part = (float *)be->scratch;
	GPT_CUDA_DISPATCH(be->dtype, T,
		absmax_part_kernel<T><<<QB, QT, 0, s>>>(part, (const T *)x, rows * cols));
	absmax_done_kernel<<<1, 1, 0, s>>>(scale, part, accumulate);
	return gpt_cuda_launched("quant_absmax", err);
}

template <class T>
__global__ static void fake_quant_kernel(T *out, const T *x, const float *scale, int64_t n,
					 int64_t cols, int per_row, float Q)
{
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x) {
		float s = scale[per_row ? i / cols : 0];
		float inv = s > 0 ? __fdiv_rn(Q, s) : 0.0f, step = s > 0 ? __fdiv_rn(s, Q) : 0.0f;
		float v = gpt_ld(x + i);
		v = v > s ? s : v < -s ? -s : v;
		/* as the CPU: a scale whose inverse step overflows divides */
		float k = roundf(inv == INFINITY ? __fmul_rn(__fdiv_rn(v, s), Q) : __fmul_rn(v, inv));
		k = k > Q ? Q : k < -Q ? -Q : k;
		gpt_st(out + i, __fmul_rn(k, step));
	}
}

int gpt_cuda_fake_quant(gpt_backend *be, void *out, const void *x, const float *scale,
			int64_t rows, int64_t cols, int per_row, int bits, gpt_err *err)
{
	int rc = check("fake_quant", rows, cols, bits, err);
	int64_t n = rows * cols;
	if (rc || n == 0)
		return rc;
	float Q = (float)((1L << (bits - 1)) - 1);
	GPT_CUDA_DISPATCH(be->dtype, T,
		fake_quant_kernel<T><<<gpt_cuda_blocks(n, 256), 256, 0, gpt_cuda_stream(be)>>>(
			(T *)out, (const T *)x, scale, n, cols, per_row, Q));
	return gpt_cuda_launched("fake_quant", err);
}

__global__ static void moving_avg_kernel(float *state, float *accum, float *scale, const float *cur,
					 int64_t n, float rate, int commit)
{
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x) {
		if (cur[i] < 0)
			continue;
		float st = __fadd_rn(__fmul_rn(rate, state[i]), 1.0f);
		float ac = __fadd_rn(__fmul_rn(rate, accum[i]), cur[i]);
		scale[i] = __fdiv_rn(ac, st);
		if (commit) {
			state[i] = st;
			accum[i] = ac;
		}
	}
}

int gpt_cuda_quant_moving_avg(gpt_backend *be, float *state, float *accum, float *scale,
			      const float *cur, int64_t n, float rate, int commit, gpt_err *err)
{
	if (!(rate >= 0.0f && rate <= 1.0f) || n < 0)
		return gpt_err_set(err, GPT_EINTERNAL, "quant_moving_avg: rate %g outside [0, 1] or %lld scales",
				   rate, (long long)n);
	if (n == 0)
		return 0;
	moving_avg_kernel<<<gpt_cuda_blocks(n, 256), 256, 0, gpt_cuda_stream(be)>>>(
		state, accum, scale, cur, n, rate, commit);
	return gpt_cuda_launched("quant_moving_avg", err);
}

/* ---- PACT ---- */

template <class T>
__global__ static void pact_fwd_kernel(T *out, const T *x, const float *alpha, int64_t n)
{
	float a = *alpha;
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x) {
		float v = gpt_ld(x + i);
		gpt_st(out + i, v > a ? a : v < -a ? -a : v);
	}
}

int gpt_cuda_pact_fwd(gpt_backend *be, void *out, const void *x, const float *alpha, int64_t n,
		      gpt_err *err)
{
	int rc = gpt_cuda_check_sizes("pact_fwd", err, 1, n);
	if (rc || n == 0)
		return rc;
	GPT_CUDA_DISPATCH(be->dtype, T,
		pact_fwd_kernel<T><<<gpt_cuda_blocks(n, 256), 256, 0, gpt_cuda_stream(be)>>>(
			(T *)out, (const T *)x, alpha, n));
	return gpt_cuda_launched("pact_fwd", err);
}

/* Block b takes a fixed range; its signed sum of the clipped dy goes to
 * part[b] (double), summed in order by pact_done_kernel. */
template <class T>
__global__ static void pact_bwd_kernel(T *dx, double *part, const T *dy, const T *x,
				       const float *alpha, int64_t n, int accumulate)
{
	__shared__ double sh[QT];
	float a = *alpha;
	int64_t len = (n + QB - 1) / QB;
	int64_t i0 = blockIdx.x * len, i1 = i0 + len < n ? i0 + len : n;
	double s = 0.0;
	for (int64_t i = i0 + threadIdx.x; i < i1; i += QT) {
		float v = gpt_ld(x + i), g = gpt_ld(dy + i), keep = g;
		if (v > a) {
			s += g;
			keep = 0.0f;
		} else if (v < -a) {
			s -= g;
			keep = 0.0f;
		}
		gpt_st(dx + i, accumulate ? __fadd_rn(gpt_ld(dx + i), keep) : keep);
	}
	sh[threadIdx.x] = s;
	__syncthreads();
	for (int w = QT / 2; w > 0; w >>= 1) {
		if ((int)threadIdx.x < w)
			sh[threadIdx.x] += sh[threadIdx.x + w];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		part[blockIdx.x] = sh[0];
}

__global__ static void pact_done_kernel(float *dalpha, const double *part)
{
	double s = 0.0;
	for (int i = 0; i < QB; i++)
		s += part[i];
	*dalpha = __fadd_rn(*dalpha, (float)s);
}

int gpt_cuda_pact_bwd(gpt_backend *be, void *dx, float *dalpha, const void *dy, const void *x,
		      const float *alpha, int64_t n, int accumulate, gpt_err *err)
{
	int rc = gpt_cuda_check_sizes("pact_bwd", err, 1, n);
	if (rc || n == 0)
		return rc;
	if ((rc = gpt_backend_scratch(be, QB * sizeof(double), err)))
		return rc;
	cudaStream_t s = gpt_cuda_stream(be);
	double *part = (double *)be->scratch;
	GPT_CUDA_DISPATCH(be->dtype, T,
		pact_bwd_kernel<T><<<QB, QT, 0, s>>>((T *)dx, part, (const T *)dy, (const T *)x, alpha, n,
						     accumulate));
	pact_done_kernel<<<1, 1, 0, s>>>(dalpha, part);
	return gpt_cuda_launched("pact_bwd", err);
}
