/* lib/cpu: the CPU backend, CBLAS (OpenBLAS) GEMM plus OpenMP kernels; the
 * reference every other backend is checked against. So far: what it is
 * built on. The ops themselves arrive with the trainer. */
#ifndef GPT_CPU_H
#define GPT_CPU_H

#include "core/core.h"

/* "OpenBLAS 0.3.21 DYNAMIC_ARCH ... (core Haswell), 2 OpenMP threads". */
void gpt_cpu_describe(char *out, size_t size);

#endif
