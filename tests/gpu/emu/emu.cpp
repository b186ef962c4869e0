/* The emulated device side for tests/gpu/emu/run.sh: the runtime state,
 * device memory as host memory, one device. EMU_LT_FOUND=0 makes cuBLASLt
 * find no algorithm, so the cuBLAS fallback runs. */
#include <cuda_runtime.h>
#include "cuda/cuda.h"
#include <cstdio>
#include <map>
#include <mutex>
namespace emu {
thread_local dim3 threadIdx_, blockIdx_;
dim3 blockDim_, gridDim_;
thread_local std::barrier<> *block_bar, *warp_bar;
thread_local float *warp_slot;
alignas(256) float dyn_shared[1 << 16]; /* 256 KiB: above any GPU's per-block limit */
}
int emu_lt_found = getenv("EMU_LT_FOUND") ? atoi(getenv("EMU_LT_FOUND")) : 1;
extern "C" int gpt_cuda_device_count(void) { return 1; }
extern "C" int gpt_cuda_device_info_get(int, gpt_cuda_device_info *info, gpt_err *) { memset(info, 0, sizeof *info); snprintf(info->name, sizeof info->name, "emulated"); return 0; }
extern "C" void gpt_cuda_describe(char *out, size_t size) { snprintf(out, size, "emulated"); }
extern "C" int gpt_cuda_set_device(int, gpt_err *) { return 0; }
extern "C" int gpt_cuda_device_id(int, char out[48], gpt_err *) { snprintf(out, 48, "GPU-emulated"); return 0; }
/* Device allocations are remembered, so gpt_cuda_ptr_is_device can tell
 * them from host memory as cudaPointerGetAttributes does. */
static std::mutex dev_mu;
static std::map<uintptr_t, size_t> dev_blocks;
extern "C" void *gpt_cuda_malloc(size_t bytes, const char *, gpt_err *)
{
	size_t n = (bytes + 255) / 256 * 256 + 256;
	void *p = aligned_alloc(256, n);
	memset(p, 0xA5, n - 256);
	std::lock_guard<std::mutex> l(dev_mu);
	dev_blocks[(uintptr_t)p] = n;
	return p;
}
extern "C" void gpt_cuda_free(void *p)
{
	if (!p)
		return;
	{
		std::lock_guard<std::mutex> l(dev_mu);
		dev_blocks.erase((uintptr_t)p);
	}
	free(p);
}
extern "C" int gpt_cuda_ptr_is_device(const void *p)
{
	std::lock_guard<std::mutex> l(dev_mu);
	auto it = dev_blocks.upper_bound((uintptr_t)p);
	if (it == dev_blocks.begin())
		return 0;
	--it;
	return (uintptr_t)p < it->first + it->second;
}
extern "C" void *gpt_cuda_host_alloc(size_t bytes, const char *, gpt_err *) { return malloc(bytes ? bytes : 1); }
extern "C" void gpt_cuda_host_free(void *p) { free(p); }
extern "C" int gpt_cuda_memcpy(void *d, const void *s, size_t n, int, gpt_err *) { memmove(d, s, n); return 0; }
extern "C" int gpt_cuda_sync(gpt_err *) { return 0; }
