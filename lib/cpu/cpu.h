/* lib/cpu: the CPU backend, CBLAS (OpenBLAS) GEMM plus OpenMP kernels; the
 * reference every other backend is checked against.
 *
 * gpt_backend_cpu_init fills a gpt_backend (backend/ops.h) whose ops run
 * synchronously on host memory and compute in fp32. Element-wise and row
 * kernels are OpenMP loops with be->threads threads; GEMMs go to OpenBLAS's
 * OpenMP build, which takes its threads from the same libgomp pool, and are
 * never called from inside a parallel region, so the two never oversubscribe
 * the cores. Reductions whose order could depend on the thread count
 * (embedding and bias gradients, LayerNorm weight gradients) are split by
 * column, so results are bit-identical for any thread count. */
#ifndef GPT_CPU_H
#define GPT_CPU_H

#include "backend/backend.h"

/* "OpenBLAS 0.3.21 DYNAMIC_ARCH ... (core Haswell), 2 OpenMP threads". */
void gpt_cpu_describe(char *out, size_t size);

/* Fills be with the CPU backend. dtype is the storage dtype of the ops'
 * tensors: fp32, or bf16/fp16, where each op converts its 16-bit operands to
 * fp32, computes exactly as the fp32 backend does and rounds what it stores
 * to nearest even (so a 16-bit run equals an fp32 run with a rounding after
 * every op; slower, for exercising the mixed-precision path without a GPU).
 * Any other dtype is GPT_EUSAGE. threads <= 0 takes OpenMP's default
 * (OMP_NUM_THREADS or the CPU count); a positive count also becomes the
 * calling thread's OpenMP default, which OpenBLAS follows. */
int gpt_backend_cpu_init(gpt_backend *be, gpt_dtype dtype, int threads, gpt_err *err);
/* Releases the scratch memory; be can be initialised again. */
void gpt_backend_cpu_free(gpt_backend *be);

/* Fake quantization on host fp32 arrays, the arithmetic of the fake_quant
 * op (backend/ops.h): the exporters use it so that an int8 weight is
 * exactly the fake-quantized weight training saw. gpt_quant_qmax is
 * Q = 2^(bits-1) - 1. gpt_quant_rows quantizes rows x cols of x with scale
 * (per tensor, or per row when per_row) and writes the dequantized values
 * q * (s / Q) to out and, for bits <= 8, q to q_out; either may be NULL. */
float gpt_quant_qmax(int bits);
void gpt_quant_rows(const float *x, int64_t rows, int64_t cols, const float *scale, int per_row,
		    int bits, float *out, int8_t *q_out);

#endif
