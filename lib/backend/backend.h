/* lib/backend: what every compute backend shares.
 *
 * The dtype vocabulary (names, sizes, fp32 <-> bf16/fp16 conversion with
 * round to nearest even, the CPU reference for the CUDA cast kernels), a
 * description of the backends this build carries, and the backend interface:
 * struct gpt_backend, a context holding a static table of op function
 * pointers (backend/ops.h) that lib/cpu and lib/cuda fill in. A model gets a
 * context from gpt_backend_cpu_init (cpu/cpu.h) or its CUDA twin, checks the
 * ops it needs with gpt_backend_require, and calls be->ops->NAME(be, ...).
 * Dropout randomness is Philox4x32-10 in backend/philox.h, shared verbatim by
 * every backend so masks are identical everywhere.
 */
#ifndef GPT_BACKEND_H
#define GPT_BACKEND_H

#include "core/core.h"

#ifdef __cplusplus
extern "C" {
#endif

#include <stdint.h>

typedef enum gpt_dtype {
	GPT_DTYPE_F32 = 0,
	GPT_DTYPE_BF16,
	GPT_DTYPE_F16,
	GPT_DTYPE_I8,
	GPT_DTYPE_I32,
	GPT_DTYPE_I64,
	GPT_DTYPE_U16,
	GPT_DTYPE_COUNT
} gpt_dtype;

/* Bytes per element. */
size_t gpt_dtype_size(gpt_dtype t);
/* "fp32", "bf16", "fp16", "int8", "int32", "int64", "uint16". */
const char *gpt_dtype_name(gpt_dtype t);
/* Accepts the names above and the usual aliases (float32, float16, bfloat16,
 * f32, f16, ...); returns -1 when s names no dtype. */
int gpt_dtype_parse(const char *s, gpt_dtype *out);

/* Scalar conversions. fp32 -> bf16/fp16 round to nearest, ties to even; NaN
 * stays NaN (quiet), overflow goes to infinity as IEEE rounding says. */
uint16_t gpt_f32_to_bf16(float f);
float gpt_bf16_to_f32(uint16_t h);
uint16_t gpt_f32_to_f16(float f);
float gpt_f16_to_f32(uint16_t h);

/* fp32 master weights of bfloat16 parameters kept in two halves
 * (lib/train/optim.c): hi[i], the bf16 parameter itself, is src[i] rounded
 * to nearest on its bits with ties away from zero (not to even: this is
 * the one rounding whose carry the low half's top bit tells), lo[i] the low
 * 16 bits of src[i]; gpt_bf16_join gives src back bit for bit, so the
 * master costs 2 bytes an element beside the parameter, not 4. NaN splits
 * to a quiet NaN hi (which joins to a NaN). lo may be NULL: hi alone. */
void gpt_bf16_split(uint16_t *hi, uint16_t *lo, const float *src, size_t n);
void gpt_bf16_join(float *dst, const uint16_t *hi, const uint16_t *lo, size_t n);
/* The same for one element, on the fp32 bits u: the high half of the
 * split (the low half is u's low 16 bits), and the bits hi and lo join to;
 * the CUDA kernels call them too (lib/cuda/adamw.cu). */
#ifdef __CUDACC__
#define GPT_BF16_SPLIT_FN static inline __host__ __device__
#else
#define GPT_BF16_SPLIT_FN static inline
#endif
GPT_BF16_SPLIT_FN uint16_t gpt_bf16_split_hi(uint32_t u)
{
	return (u & 0x7fffffffu) > 0x7f800000u ? (uint16_t)((u >> 16) | 0x0040u)
					       : (uint16_t)((u + 0x8000u) >> 16);
}
GPT_BF16_SPLIT_FN uint32_t gpt_bf16_join_bits(uint16_t hi, uint16_t lo)
{
	return (uint32_t)(uint16_t)(hi - (lo >> 15)) << 16 | lo;
}

/* Array conversions between any two of fp32/bf16/fp16 (same dtype: copy). */
int gpt_convert(void *dst, gpt_dtype dst_t, const void *src, gpt_dtype src_t, size_t n,
		gpt_err *err);

/* The backends this build carries, one line, e.g. "cpu (OpenBLAS 0.3.21
 * ...); cuda (runtime 13.0, cuBLAS 13.0.0, NCCL 2.27.3, 0 devices)". This is
 * the backend registry, so it is the one place that knows every backend. */
void gpt_backend_describe(char *out, size_t size);

#ifdef __cplusplus
}
#endif

/* The ops table and struct gpt_backend. */
#include "backend/ops.h"

#endif
