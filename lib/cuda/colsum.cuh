/* Column sums in two passes, the same bits on every run (no atomics):
 * pass 1, a block (32, 8) sums parts of 256 rows or more of 32 columns (or
 * 32 vectors of them) into part[p][col], rows in order within each thread
 * and the 8 threads' sums in a fixed order; pass 2 (gpt_parts_sum) adds
 * the parts into dst. For gemm.cu's bias gradients and gelu.cu's GELU
 * backward, which makes fc's bias gradient in the pass that writes its
 * input's (gelu_bwd_bias), each row then read once. */
#ifndef GPT_CUDA_COLSUM_CUH
#define GPT_CUDA_COLSUM_CUH

#include "cuda/ops.cuh"

/* The rows of src (M, N), 16-byte aligned: row r's GPT_VEC(T) elements from
 * column c0, as fp32 (colsum_part_vec_kernel's `at`). */
template <class T>
struct colsum_rows {
	const T *src;
	int64_t N;
	__device__ __forceinline__ void operator()(float *x, int64_t r, int64_t c0) const
	{
		gpt_ld_vec(x, src + r * N + c0);
	}
};

/* Column sums of src (M, N), pass 1: block (x, y) sums rows
 * [y*rows, (y+1)*rows) of 32 columns into part[y][col], rows in order
 * within each thread and the 8 threads' sums combined in a fixed order. */
template <class T>
__global__ static void colsum_part_kernel(float *part, const T *src, int64_t M, int64_t N,
					  int64_t rows)
{
	__shared__ float acc[8][33];
	int64_t col = blockIdx.x * 32 + threadIdx.x;
	int64_t r0 = blockIdx.y * rows, r1 = r0 + rows < M ? r0 + rows : M;
	float s = 0.0f;
	if (col < N)
		for (int64_t r = r0 + threadIdx.y; r < r1; r += 8)
			s += gpt_ld(src + r * N + col);
	acc[threadIdx.y][threadIdx.x] = s;
	__syncthreads();
	if (threadIdx.y == 0 && col < N) {
		float t = 0.0f;
		for (int i = 0; i < 8; i++)
			t += acc[i][threadIdx.x];
		part[blockIdx.y * N + col] = t;
	}
}

/* The same with 16-byte loads (N a multiple of GPT_VEC(T), the rows
 * aligned), of the rows `at` gives (colsum_rows: a matrix's): thread x of
 * block (x, y) sums the GPT_VEC(T) columns from (x + 32 blockIdx.x)
 * GPT_VEC(T) in the same order, each column's part the same bits as
 * colsum_part_kernel's, with an eighth of the loads in bf16. */
template <class T, class Rows>
__global__ static void colsum_part_vec_kernel(float *part, Rows at, int64_t M, int64_t N, int64_t rows)
{
	const int W = GPT_VEC(T);
	__shared__ float acc[8][W][33];
	int64_t c0 = (blockIdx.x * 32 + threadIdx.x) * (int64_t)W;
	int64_t r0 = blockIdx.y * rows, r1 = r0 + rows < M ? r0 + rows : M;
	float s[W];
#pragma unroll
	for (int e = 0; e < W; e++)
		s[e] = 0.0f;
	if (c0 < N)
#pragma unroll 4
		for (int64_t r = r0 + threadIdx.y; r < r1; r += 8) {
			float x[W];
			at(x, r, c0);
#pragma unroll
			for (int e = 0; e < W; e++)
				s[e] += x[e];
		}
#pragma unroll
	for (int e = 0; e < W; e++)
		acc[threadIdx.y][e][threadIdx.x] = s[e];
	__syncthreads();
	if (threadIdx.y == 0 && c0 < N)
		for (int e = 0; e < W; e++) {
			float t = 0.0f;
			for (int i = 0; i < 8; i++)
				t += acc[i][e][threadIdx.x];
			part[blockIdx.y * N + c0 + e] = t;
		}
}

/* Pass 2: dst[col] += the parts' sum (gpt_parts_sum), block (32, 8) a 32
 * columns. */
template <class T>
__global__ static void colsum_add_kernel(T *dst, const float *part, int64_t parts, int64_t N)
{
	__shared__ float sh[8][33];
	int64_t col = blockIdx.x * 32 + threadIdx.x;
	float s = gpt_parts_sum(part, parts, N, col, sh);
	if (threadIdx.y == 0 && col < N)
		gpt_st(dst + col, gpt_ld(dst + col) + s);
}

/* The parts of M rows for N columns: at most GPT_CUDA_COLSUM_PARTS, of
 * `rows` rows each (256 or more), and the backend's scratch for their
 * sums; NULL on an error. */
static inline float *colsum_parts(gpt_backend *be, int64_t M, int64_t N, int64_t *parts, int64_t *rows,
				  gpt_err *err)
{
	int64_t p = (M + 255) / 256;
	if (p > GPT_CUDA_COLSUM_PARTS)
		p = GPT_CUDA_COLSUM_PARTS;
	*rows = (M + p - 1) / p;
	*parts = (M + *rows - 1) / *rows;
	return gpt_backend_scratch(be, (size_t)(*parts * N) * sizeof(float), err) ? NULL : (float *)be->scratch;
}

/* dst (N) += the column sums of the M rows `at` gives (N a multiple of
 * GPT_VEC(T)), on the backend's stream; M, N > 0. */
template <class T, class Rows>
static int colsum_vec_add(gpt_backend *be, T *dst, Rows at, int64_t M, int64_t N, const char *op, gpt_err *err)
{
	int64_t parts, rows;
	float *part = colsum_parts(be, M, N, &parts, &rows, err);
	if (!part)
		return err ? err->code : GPT_EINTERNAL;
	cudaStream_t s = gpt_cuda_stream(be);
	dim3 block(32, 8), grid((unsigned)((N / GPT_VEC(T) + 31) / 32), (unsigned)parts);
	colsum_part_vec_kernel<T, Rows><<<grid, block, 0, s>>>(part, at, M, N, rows);
	colsum_add_kernel<T><<<(unsigned)((N + 31) / 32), block, 0, s>>>(dst, part, parts, N);
	return gpt_cuda_launched(op, err);
}

/* dst (N) += column sums of src (M, N) (gemm.cu): the vector kernel where N
 * and src allow, else colsum_part_kernel. */
int gpt_cuda_colsum_add(gpt_backend *be, void *dst, const void *src, int64_t M, int64_t N, gpt_err *err);

#endif
