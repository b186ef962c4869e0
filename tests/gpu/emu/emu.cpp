/* The emulated device side for tests/gpu/emu/run.sh: the runtime state,
 * device memory as host memory, one device. EMU_LT_FOUND=0 makes cuBLASLt
 * find no algorithm, so the cuBLAS fallback runs. */
#include <cuda_runtime.h>
#include "cuda/cuda.h"
#include <cstdio>
#include <map>
#include <mutex>
#include <csignal>
#include <sys/mman.h>
#include <unistd.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif
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
bool blocks_reversed(void)
{
	static const bool rev = [] {
		const char *e = getenv("EMU_BLOCKS");
		if (!e || !strcmp(e, "forward"))
			return false;
		if (!strcmp(e, "reverse"))
			return true;
		fprintf(stderr, "emu: EMU_BLOCKS is forward or reverse, not '%s'\n", e);
		exit(2);
	}();
	return rev;
}
/* the bounds of the static __shared__ arrays' section (the linker's; null
 * where no kernel has one) */
extern "C" char __start_emu_shared[] __attribute__((weak)), __stop_emu_shared[] __attribute__((weak));
void shm_fill_static(void)
{
	if (__start_emu_shared)
		memset(__start_emu_shared, 0xff, (size_t)(__stop_emu_shared - __start_emu_shared));
}
/* Under AddressSanitizer the dynamic shared memory past what the launch
 * asked for is poisoned while a block runs. */
void shm_poison(const float *dyn, size_t shm, bool on)
{
#if defined(__SANITIZE_ADDRESS__)
	if (on)
		ASAN_POISON_MEMORY_REGION((const char *)dyn + shm, SHM_EMU - shm);
	else
		ASAN_UNPOISON_MEMORY_REGION(dyn, SHM_EMU);
#else
	(void)dyn, (void)shm, (void)on;
#endif
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
 * them from host memory as cudaPointerGetAttributes does. Outside device
 * work (a dev_scope: a launch, a copy, a memset, a GEMM) they are mapped
 * PROT_NONE, so a host access to device memory faults here as it does on a
 * GPU. Under a sanitizer they are plain heap blocks of the size asked for
 * instead, so that AddressSanitizer sees an access past the end. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define EMU_PROTECT 0
#else
#define EMU_PROTECT 1
#endif
static std::mutex dev_mu;
static std::map<uintptr_t, size_t> dev_blocks; /* start: the bytes device work may touch */
static int dev_depth;
static const size_t page = (size_t)sysconf(_SC_PAGESIZE);
static void dev_protect(void *p, size_t n, int prot)
{
	if (mprotect(p, n, prot)) {
		perror("emu: mprotect of device memory");
		abort();
	}
}
namespace emu {
void dev_open(void)
{
	std::lock_guard<std::mutex> l(dev_mu);
	if (EMU_PROTECT && dev_depth++ == 0)
		for (auto &b : dev_blocks)
			dev_protect((void *)b.first, b.second, PROT_READ | PROT_WRITE);
}
void dev_close(void)
{
	std::lock_guard<std::mutex> l(dev_mu);
	if (EMU_PROTECT && --dev_depth == 0)
		for (auto &b : dev_blocks)
			dev_protect((void *)b.first, b.second, PROT_NONE);
}
} // namespace emu
#if EMU_PROTECT
/* A fault in device memory is a host access to it: say so, then abort.
 * (The map is read without its lock: the process is ending.) */
static void dev_fault(int sig, siginfo_t *si, void *)
{
	uintptr_t a = (uintptr_t)si->si_addr;
	auto it = dev_blocks.upper_bound(a);
	if (it != dev_blocks.begin() && a < (--it)->first + it->second + page) {
		char m[240];
		size_t off = (size_t)(a - it->first);
		int k = off < it->second
			? snprintf(m, sizeof m, "emu: the host touched device memory at %p (%zu bytes into a "
				   "device allocation of %zu): on a GPU that is a crash or garbage\n",
				   si->si_addr, off, it->second)
			: snprintf(m, sizeof m, "emu: an access at %p, %zu bytes past the end of a device "
				   "allocation (of %zu, page-rounded)\n", si->si_addr, off - it->second, it->second);
		if (write(2, m, (size_t)k) < 0)
			_exit(134);
		abort();
	}
	signal(sig, SIG_DFL);
	raise(sig);
}
static int dev_fault_set = [] {
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = dev_fault;
	sa.sa_flags = SA_SIGINFO;
	return sigaction(SIGSEGV, &sa, nullptr);
}();
#endif
extern "C" void *gpt_cuda_malloc(size_t bytes, const char *, gpt_err *)
{
#if EMU_PROTECT
	size_t n = (bytes + page - 1) / page * page + page; /* one unreadable page past the end */
	void *p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("emu: mmap of device memory");
		abort();
	}
	n -= page; /* what device work may touch */
	memset(p, 0xA5, n);
	std::lock_guard<std::mutex> l(dev_mu);
	if (dev_depth) /* inside device work: only the guard page */
		dev_protect((char *)p + n, page, PROT_NONE);
	else
		dev_protect(p, n + page, PROT_NONE);
#else
	/* the size asked for, so that an access past it is reported */
	size_t n = bytes ? bytes : 1;
	void *p = nullptr;
	if (posix_memalign(&p, 256, n))
		abort();
	memset(p, 0xA5, n);
	std::lock_guard<std::mutex> l(dev_mu);
#endif
	dev_blocks[(uintptr_t)p] = n;
	return p;
}
extern "C" void gpt_cuda_free(void *p)
{
	if (!p)
		return;
	std::lock_guard<std::mutex> l(dev_mu);
	auto it = dev_blocks.find((uintptr_t)p);
	if (it == dev_blocks.end()) {
		fprintf(stderr, "emu: cudaFree of %p, which is no device allocation\n", p);
		abort();
	}
#if EMU_PROTECT
	munmap(p, it->second + page);
#else
	free(p);
#endif
	dev_blocks.erase(it);
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
extern "C" int gpt_cuda_memcpy(void *d, const void *s, size_t n, int, gpt_err *)
{
	emu::dev_scope open;
	memmove(d, s, n);
	return 0;
}
extern "C" int gpt_cuda_sync(gpt_err *) { return 0; }
