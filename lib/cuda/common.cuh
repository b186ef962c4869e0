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

/* The answer of cudaEventQuery or cudaStreamQuery, q. "Not ready" is an
 * answer, not a failure, but the runtime may keep it as the thread's last
 * error, which the next launch's check (cudaGetLastError, in
 * gpt_cuda_launched) would then report as that op's: cleared here, as
 * PyTorch and Paddle clear it, only when it is what is kept. */
static inline cudaError_t gpt_cuda_query(cudaError_t q)
{
	if (q == cudaErrorNotReady && cudaPeekAtLastError() == cudaErrorNotReady)
		(void)cudaGetLastError();
	return q;
}

#endif
