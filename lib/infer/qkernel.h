/* Private to lib/infer: the vector kernels of the linear layers on compact
 * weights, each in the file that compiles it for its instruction set (so no
 * file needs a global -m flag and the program runs on any x86-64). */
#ifndef GPT_INFER_QKERNEL_H
#define GPT_INFER_QKERNEL_H

#include "infer/infer.h"

/* AVX-512 (F, BW, VL): out[i * N + n] = x[i] . w[n] (+ bias[n]) for rows n
 * in [n0, n1) and M <= 8 input rows (any K). Each (row, input) dot product
 * is summed in the same order whatever M, n0 and n1, so a sequence's
 * logits do not depend on the batch it runs in or the thread count. */
void gpt_qrows_avx512(const gpt_qweight *q, const float *x, const float *bias, float *out,
		      int64_t M, int64_t n0, int64_t n1);
/* Weight rows [n0, n1) widened to fp32 into out ((n1 - n0) * K floats). */
void gpt_qwiden_avx512(const gpt_qweight *q, int64_t n0, int64_t n1, float *out);

#endif
