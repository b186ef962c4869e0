/* The emulated device side for tests/gpu/emu/run.sh: the runtime state,
 * device memory as host memory, one device. EMU_LT_FOUND=0 makes cuBLASLt
 * find no algorithm, so the cuBLAS fallback runs. */
#include <cuda_runtime.h>
#include "cuda/cuda.h"
#include <cstdio>
namespace emu {
thread_local dim3 threadIdx_, blockIdx_;
dim3 blockDim_, gridDim_;
thread_local std::barrier<> *block_bar, *warp_bar;
thread_local float *warp_slot;
float dyn_shared[1 << 14];
}
int emu_lt_found = getenv("EMU_LT_FOUND") ? atoi(getenv("EMU_LT_FOUND")) : 1;
extern "C" int gpt_cuda_device_count(void) { return 1; }
extern "C" int gpt_cuda_device_info_get(int, gpt_cuda_device_info *info, gpt_err *) { memset(info, 0, sizeof *info); snprintf(info->name, sizeof info->name, "emulated"); return 0; }
extern "C" void gpt_cuda_describe(char *out, size_t size) { snprintf(out, size, "emulated"); }
extern "C" int gpt_cuda_set_device(int, gpt_err *) { return 0; }
extern "C" void *gpt_cuda_malloc(size_t bytes, const char *, gpt_err *) { void *p = aligned_alloc(256, (bytes + 255) / 256 * 256 + 256); memset(p, 0xA5, (bytes + 255) / 256 * 256); return p; }
extern "C" void gpt_cuda_free(void *p) { free(p); }
extern "C" int gpt_cuda_memcpy(void *d, const void *s, size_t n, int, gpt_err *) { memmove(d, s, n); return 0; }
extern "C" int gpt_cuda_sync(gpt_err *) { return 0; }
