/* What the CPU backend runs on: the BLAS build and the thread count. */
#include "cpu/cpu.h"

#include <omp.h>

/* OpenBLAS's own introspection (declared in its cblas.h, which we do not
 * include here to keep the BLAS header out of the public headers). */
char *openblas_get_config(void);
char *openblas_get_corename(void);

void gpt_cpu_describe(char *out, size_t size)
{
	snprintf(out, size, "%s (core %s), %d OpenMP threads", openblas_get_config(),
		 openblas_get_corename(), omp_get_max_threads());
}
