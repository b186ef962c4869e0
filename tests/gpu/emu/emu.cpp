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
thread_local float *dyn_sh;
static std::mutex shm_mu;
static std::map<const void *, int> shm_allowed;
void shm_allow(const void *kernel, int bytes)
{
	std::lock_guard<std::mutex> l(shm_mu);
	shm_allowed[kernel] = bytes;
}
[[noreturn]] static void launch_fail(const void *kernel, const char *why, unsigned long long v)
{
	fprintf(stderr, "emu: the launch of kernel %p fails on a GPU: %s (%llu)\n", kernel, why, v);
	abort();
}
void launch_check(const void *kernel, dim3 g, dim3 b, size_t shm)
{
	unsigned long long threads = (unsigned long long)b.x * b.y * b.z;
	if (!g.x || !g.y || !g.z || !threads)
		launch_fail(kernel, "an empty grid or block", 0);
	if (threads > 1024 || b.z > 64)
		launch_fail(kernel, "more than 1024 threads a block (or block.z > 64)", threads);
	if (g.x > 0x7fffffffu || g.y > 65535 || g.z > 65535)
		launch_fail(kernel, "grid.x above 2^31 - 1 or grid.y, grid.z above 65535",
			    g.y > 65535 ? g.y : g.z > 65535 ? g.z : g.x);
	if (shm > SHM_DEFAULT) {
		std::lock_guard<std::mutex> l(shm_mu);
		auto it = shm_allowed.find(kernel);
		if (it == shm_allowed.end() || (size_t)it->second < shm)
			launch_fail(kernel, "dynamic shared memory above 48 KiB and above what "
				    "cudaFuncSetAttribute allowed this kernel", shm);
	}
}
void shm_check_tail(const void *kernel, const float *dyn, size_t shm)
{
	const unsigned char *p = (const unsigned char *)dyn;
	const size_t n = SHM_EMU; /* a multiple of 8 */
	size_t i = shm;
	while (i < n && i % 8 && p[i] == 0xff)
		i++;
	if (i % 8 == 0) /* word by word, then to the byte that differs */
		while (i < n && *(const uint64_t *)(p + i) == ~(uint64_t)0)
			i += 8;
	while (i < n && p[i] == 0xff)
		i++;
	if (i < n)
		launch_fail(kernel, "a write past the dynamic shared memory the launch asked for, "
			    "first changed byte", i);
}
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
