/* Shared by the .cu files: turning CUDA errors into gpt_err values. */
#ifndef GPT_CUDA_COMMON_CUH
#define GPT_CUDA_COMMON_CUH

#include "cuda/cuda.h"

#include <cuda_runtime.h>

static inline int gpt_cuda_check(cudaError_t e, const char *what, gpt_err *err)
{
	if (e == cudaSuccess)
		return 0;
	return gpt_err_set(err, GPT_EINTERNAL, "cuda: %s: %s", what, cudaGetErrorString(e));
}

#endif
