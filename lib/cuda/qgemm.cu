/* Weight-only int8 linear layers for generation (gpt_cuda_linear_i8):
 * out = x (dequantized w)^T + bias with w int8 codes and one fp32 step per
 * output row, as lib/infer/qlinear.c holds them on the CPU.
 *
 * The arithmetic follows lib/infer/qlinear.c's two paths, so that results
 * differ from the CPU's only by the order of the sums: up to 8 rows (its
 * fused kernel) each output is (sum over k of code * x) * step + bias;
 * more rows (its sgemm on weights widened to fp32) each is sum over k of
 * x * (code * step), + bias. The sums are in fp32 with fused multiply-adds
 * in k order per thread, so a run gives the same bits every time.
 *
 * Two kernels. Decoding (M <= 8 rows) reads every weight once and is bound
 * by memory bandwidth: a warp per QV_ROWS output rows, each lane loading 16
 * codes of each row per 16-byte load and the matching activations of all M
 * rows (from L1/L2: they are small and every warp reads them), partial sums
 * reduced by warp shuffles. Prompts (M > 8), and any shape the vector loads
 * cannot take (K not a multiple of 16, unaligned pointers), go to a plain
 * shared-memory tiled kernel: 64 x 64 outputs per block of 256 threads, 4 x
 * 4 per thread, activations and codes staged through shared memory as fp32
 * over slices of 16 of K.
 *
 * Neither is tuned on a GPU yet. The plan: decoding leaves a small matrix
 * (N = 768: 96 blocks) under one block per SM, so split K over a block's
 * warps there and keep more 16-byte loads in flight per lane; prompts in
 * bf16/fp16 storage can run on tensor cores (WMMA on 16-bit tiles: the
 * codes are exact in bf16 and fp16) with the step applied to each sum,
 * which the CPU's sgemm arithmetic cannot follow, so fp32 storage would
 * keep this kernel. */
#include "cuda/ops.cuh"

#define QV_WARPS 4 /* warps per block of the decoding kernel */
#define QV_ROWS 2  /* output rows per warp */
#define QV_MAX_M 8 /* input rows the decoding kernel takes */

#define QT_BM 64 /* tiled kernel: rows of x per block */
#define QT_BN 64 /* output columns (weight rows) per block */
#define QT_BK 16 /* slice of K per step */

/* Sixteen bytes, read in one load. */
struct alignas(16) q16 {
	unsigned u[4];
};

__device__ __forceinline__ q16 ld16(const void *p)
{
#ifdef __CUDA_ARCH__
	uint4 v = __ldg((const uint4 *)p);
	q16 r = {{v.x, v.y, v.z, v.w}};
	return r;
#else
	return *(const q16 *)p;
#endif
}

/* The 16 elements of T at p (16-byte aligned) as fp32. */
template <class T>
__device__ __forceinline__ void ld_x16(const T *p, float *f)
{
	q16 raw[sizeof(T)];
	for (int i = 0; i < (int)sizeof(T); i++)
		raw[i] = ld16((const char *)p + 16 * i);
	const T *e = reinterpret_cast<const T *>(raw);
	for (int i = 0; i < 16; i++)
		f[i] = gpt_ld(e + i);
}

/* Code j (0..3) of a 32-bit word of four int8 codes, as fp32. */
__device__ __forceinline__ float code(unsigned w, int j)
{
	return (float)(signed char)(unsigned char)(w >> (8 * j));
}

/* Decoding: grid ceil(N / (QV_WARPS QV_ROWS)), QV_WARPS warps. Warp g takes
 * output rows [g QV_ROWS, g QV_ROWS + QV_ROWS); lane l the codes l*16 +
 * 512 i of each. MR >= M is the compiled row count. K % 16 == 0 and every
 * pointer 16-byte aligned. */
template <class T, int MR>
__global__ static void qgemv_kernel(T *out, const T *x, const signed char *w, const float *step,
				    const T *bias, int M, int64_t K, int64_t N)
{
	int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	int64_t n0 = ((int64_t)blockIdx.x * QV_WARPS + warp) * QV_ROWS;
	if (n0 >= N)
		return; /* the whole warp */
	const signed char *row[QV_ROWS];
	for (int r = 0; r < QV_ROWS; r++)
		row[r] = w + (n0 + r < N ? n0 + r : N - 1) * K;
	float acc[QV_ROWS][MR];
	for (int r = 0; r < QV_ROWS; r++)
		for (int m = 0; m < MR; m++)
			acc[r][m] = 0.0f;
	for (int64_t k = (int64_t)lane * 16; k < K; k += 32 * 16) {
		q16 wv[QV_ROWS];
		for (int r = 0; r < QV_ROWS; r++)
			wv[r] = ld16(row[r] + k);
		for (int m = 0; m < MR; m++) {
			if (m >= M)
				break;
			float xf[16];
			ld_x16(x + m * K + k, xf);
			for (int r = 0; r < QV_ROWS; r++) {
				float a = acc[r][m];
				for (int j = 0; j < 16; j++)
					a = fmaf(code(wv[r].u[j / 4], j % 4), xf[j], a);
				acc[r][m] = a;
			}
		}
	}
	for (int r = 0; r < QV_ROWS; r++)
		for (int m = 0; m < MR; m++) {
			if (m >= M)
				break;
			float s = gpt_warp_sum(acc[r][m]);
			int64_t n = n0 + r;
			if (lane == 0 && n < N) {
				float v = __fmul_rn(s, step[n]);
				if (bias)
					v = __fadd_rn(v, gpt_ld(bias + n));
				gpt_st(out + m * N + n, v);
			}
		}
}

/* Any shape: grid (ceil(N / QT_BN), ceil(M / QT_BM)) from row block y0
 * (the launches slice grid.y: GPT_CUDA_GRID_Y), 256 threads. With
 * widen (more than QV_MAX_M rows) the codes are dequantized into the tile
 * (code * step, then the sum of x * that, as the CPU's sgemm path widens
 * its weights); else the step multiplies each sum (the decoding kernel's
 * arithmetic). Thread
 * (ty, tx) = (t / 16, t % 16) computes rows ty + 16 i and columns tx + 16 j
 * (i, j < 4) of the block's tile: consecutive threads read consecutive
 * shared columns, and a warp's two ty broadcast. */
template <class T>
__global__ static void qgemm_tiled_kernel(T *out, const T *x, const signed char *w,
					  const float *step, const T *bias, int64_t M, int64_t K,
					  int64_t N, int widen, int64_t y0)
{
	__shared__ float xs[QT_BK][QT_BM + 1];
	__shared__ float ws[QT_BK][QT_BN + 1];
	int t = threadIdx.x, ty = t / 16, tx = t % 16;
	int64_t m0 = (y0 + blockIdx.y) * QT_BM, n0 = (int64_t)blockIdx.x * QT_BN;
	float acc[4][4];
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 4; j++)
			acc[i][j] = 0.0f;
	for (int64_t k0 = 0; k0 < K; k0 += QT_BK) {
		/* 64 x 16 of each operand, 4 elements a thread, along K first */
		for (int p = 0; p < 4; p++) {
			int e = t + 256 * p, r = e / QT_BK, c = e % QT_BK;
			int64_t k = k0 + c, mi = m0 + r, ni = n0 + r;
			xs[c][r] = mi < M && k < K ? gpt_ld(x + mi * K + k) : 0.0f;
			float q = ni < N && k < K ? (float)w[ni * K + k] : 0.0f;
			ws[c][r] = widen && ni < N ? __fmul_rn(q, step[ni]) : q;
		}
		__syncthreads();
		for (int c = 0; c < QT_BK; c++) {
			float a[4], b[4];
			for (int i = 0; i < 4; i++)
				a[i] = xs[c][ty + 16 * i];
			for (int j = 0; j < 4; j++)
				b[j] = ws[c][tx + 16 * j];
			for (int i = 0; i < 4; i++)
				for (int j = 0; j < 4; j++)
					acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
		}
		__syncthreads();
	}
	for (int j = 0; j < 4; j++) {
		int64_t n = n0 + tx + 16 * j;
		if (n >= N)
			continue;
		float s = step[n], b = bias ? gpt_ld(bias + n) : 0.0f;
		for (int i = 0; i < 4; i++) {
			int64_t m = m0 + ty + 16 * i;
			if (m < M) {
				float v = widen ? acc[i][j] : __fmul_rn(acc[i][j], s);
				gpt_st(out + m * N + n, bias ? __fadd_rn(v, b) : v);
			}
		}
	}
}

template <class T>
static void launch_gemv(cudaStream_t s, T *out, const T *x, const signed char *w,
			const float *step, const T *bias, int64_t M, int64_t K, int64_t N)
{
	int64_t rows = QV_WARPS * QV_ROWS;
	unsigned blocks = (unsigned)((N + rows - 1) / rows);
	/* through a pointer: one kernel name per launch line (tests/gpu/emu) */
	void (*k)(T *, const T *, const signed char *, const float *, const T *, int, int64_t,
		  int64_t) = M <= 1   ? qgemv_kernel<T, 1>
			     : M <= 2 ? qgemv_kernel<T, 2>
			     : M <= 4 ? qgemv_kernel<T, 4>
				      : qgemv_kernel<T, 8>;
	k<<<blocks, QV_WARPS * 32, 0, s>>>(out, x, w, step, bias, (int)M, K, N);
}

static int aligned16(const void *p)
{
	return (uintptr_t)p % 16 == 0;
}

int gpt_cuda_linear_i8(gpt_backend *be, void *out, const void *x, const int8_t *w,
		       const float *step, const void *bias, int64_t M, int64_t K, int64_t N,
		       gpt_err *err)
{
	int rc = gpt_cuda_check_sizes("linear_i8", err, 3, M, K, N);
	if (rc || M == 0 || N == 0)
		return rc;
	if (be->dtype != GPT_DTYPE_F32 && be->dtype != GPT_DTYPE_BF16 && be->dtype != GPT_DTYPE_F16)
		return gpt_err_set(err, GPT_EINTERNAL, "linear_i8: storage dtype %s; expected fp32, bf16 or fp16",
				   gpt_dtype_name(be->dtype));
	if ((N + QT_BN - 1) / QT_BN > 0x7fffffff)
		return gpt_err_set(err, GPT_EINTERNAL, "linear_i8: %lld x %lld outputs are more than one launch covers",
				   (long long)M, (long long)N);
	cudaStream_t s = gpt_cuda_stream(be);
	const signed char *wc = (const signed char *)w;
	int vec = K % 16 == 0 && aligned16(x) && aligned16(w);
	if (M <= QV_MAX_M && vec) {
		GPT_CUDA_DISPATCH(be->dtype, T,
			launch_gemv<T>(s, (T *)out, (const T *)x, wc, step, (const T *)bias, M, K, N));
	} else {
		/* a prefill of more than 65535 x QT_BM (4194240) tokens: slices of grid.y */
		int64_t ny = (M + QT_BM - 1) / QT_BM;
		for (int64_t y0 = 0; y0 < ny; y0 += GPT_CUDA_GRID_Y) {
			dim3 grid((unsigned)((N + QT_BN - 1) / QT_BN), gpt_cuda_grid_y(y0, ny));
			GPT_CUDA_DISPATCH(be->dtype, T,
				qgemm_tiled_kernel<T><<<grid, 256, 0, s>>>((T *)out, (const T *)x, wc, step, (const T *)bias, M, K, N, M > QV_MAX_M, y0));
		}
	}
	return gpt_cuda_launched("linear_i8", err);
}
