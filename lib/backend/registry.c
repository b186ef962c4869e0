/* The registry of compute backends this build carries. */
#include "backend/backend.h"
#include "cpu/cpu.h"
#if GPT_HAVE_CUDA
#include "cuda/cuda.h"
#endif

void gpt_backend_describe(char *out, size_t size)
{
	char cpu[256], cuda[256] = "not built (CUDA=0)";
	gpt_cpu_describe(cpu, sizeof cpu);
#if GPT_HAVE_CUDA
	gpt_cuda_describe(cuda, sizeof cuda);
#endif
	snprintf(out, size, "cpu: %s\ncuda: %s", cpu, cuda);
}
