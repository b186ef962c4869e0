/* The emulated device side for tests/gpu/emu/run.sh: the runtime state,
 * device memory as host memory, one device. EMU_LT_FOUND=0 makes cuBLASLt
 * find no algorithm, so the cuBLAS fallback runs. */
#include <cuda_runtime.h>
#include "cuda/cuda.h"
#include <atomic>
#include <cstdio>
#include <dlfcn.h>
#include <execinfo.h>
#include <map>
#include <mutex>
#include <csignal>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif
static const size_t page = (size_t)sysconf(_SC_PAGESIZE);
namespace emu {
thread_local dim3 threadIdx_, blockIdx_;
dim3 blockDim_, gridDim_;
thread_local bar *block_bar, *warp_bar;
thread_local float *warp_slot;
thread_local float *dyn_sh;
static std::mutex launch_mu;
void launch_lock(void) { launch_mu.lock(); }
void launch_unlock(void) { launch_mu.unlock(); }
#if EMU_FIBERS
/* Switching between fibers. On x86-64: a switch saves the callee-saved
 * registers on the stack it leaves, and its stack pointer in *from, then
 * takes the one of `to` and restores them there; a new fiber's stack holds
 * zeros for them and returns into its entry. Elsewhere (or with Intel CET's
 * shadow stacks, or -DEMU_UCONTEXT): ucontext, which is slower by a
 * system call (the signal mask) each switch. */
#if defined(__x86_64__) && !defined(__CET__) && !defined(EMU_UCONTEXT)
extern "C" void emu_switch(void **from, void *to);
asm(R"(
	.text
	.globl emu_switch
	.type emu_switch, @function
emu_switch:
	pushq %rbp
	pushq %rbx
	pushq %r12
	pushq %r13
	pushq %r14
	pushq %r15
	movq %rsp, (%rdi)
	movq %rsi, %rsp
	popq %r15
	popq %r14
	popq %r13
	popq %r12
	popq %rbx
	popq %rbp
	ret
	.size emu_switch, .-emu_switch
)");
struct context {
	void *sp;
};
static void ctx_make(context &c, char *stack, size_t size, void (*entry)(void))
{
	void **sp = (void **)(stack + size) - 8; /* the stack's top is 16-byte aligned */
	for (int i = 0; i < 6; i++)
		sp[i] = nullptr; /* r15, r14, r13, r12, rbx, rbp */
	sp[6] = (void *)entry; /* returned into with the stack as a call leaves it */
	sp[7] = nullptr; /* the entry's return address: it never returns */
	c.sp = sp;
}
static void ctx_swap(context &from, context &to) { emu_switch(&from.sp, to.sp); }
#else
struct context {
	ucontext_t uc;
};
static void ctx_make(context &c, char *stack, size_t size, void (*entry)(void))
{
	if (getcontext(&c.uc)) {
		perror("emu: getcontext");
		abort();
	}
	c.uc.uc_stack.ss_sp = stack;
	c.uc.uc_stack.ss_size = size;
	c.uc.uc_link = nullptr;
	makecontext(&c.uc, entry, 0);
}
static void ctx_swap(context &from, context &to)
{
	if (swapcontext(&from.uc, &to.uc)) {
		perror("emu: swapcontext");
		abort();
	}
}
#endif
/* The fibers of the block running (launches hold launch_mu): each has its
 * own stack, kept for the next block, with an unreadable page below it. */
enum : size_t { FIBER_STACK = 256 << 10 };
struct fiber {
	context c;
	char *stack;
	bool done;
	dim3 tid;
	bar *warp;
	float *slot;
};
static fiber fibers[1024];
static context sched;
static unsigned nfib, alive; /* the block's fibers, those not returned */
static unsigned cur; /* the fiber running */
static void (*cur_call)(void *);
static void *cur_ctx;
static const char *cur_kernel;
/* Arrivals, drops and returns so far, and the yields since the last one: a
 * fiber yields only while it waits at a barrier, so when every fiber left
 * has yielded once with none of these in between, none can go on. */
static unsigned long long progress, progress_seen;
static unsigned idle;
static bool rev; /* EMU_THREADS=reverse: fiber n - 1 first, then down */
static void swap(context &from, unsigned to)
{
	fiber &f = fibers[to];
	cur = to;
	threadIdx_ = f.tid;
	warp_bar = f.warp;
	warp_slot = f.slot;
	ctx_swap(from, f.c);
}
static unsigned next_alive(unsigned t)
{
	do
		t = (t + (rev ? nfib - 1 : 1)) % nfib;
	while (fibers[t].done);
	return t;
}
static void fiber_main(void)
{
	cur_call(cur_ctx);
	fibers[cur].done = true;
	progress++;
	ctx_swap(fibers[cur].c, sched); /* never resumed */
	abort();
}
/* the running fiber waits: on to the next one */
static void fiber_yield(void)
{
	if (progress != progress_seen) {
		progress_seen = progress;
		idle = 0;
	} else if (++idle > alive) {
		fprintf(stderr, "emu: kernel %s, block (%u, %u): %u of its %u threads wait at "
			"barriers (__syncthreads, __syncwarp, a shuffle) that the others do not "
			"reach: on a GPU that hangs or is undefined\n", cur_kernel, blockIdx_.x,
			blockIdx_.y, alive, nfib);
		abort();
	}
	unsigned me = cur, t = next_alive(me);
	if (t != me)
		swap(fibers[me].c, t);
}
void bar::arrive_and_wait()
{
	unsigned long long p = phase;
	progress++;
	if (++arrived == expected) {
		arrived = 0;
		phase++;
		return;
	}
	while (phase == p)
		fiber_yield();
}
void bar::arrive_and_drop()
{
	progress++;
	if (--expected && arrived == expected) {
		arrived = 0;
		phase++;
	}
}
void run_block(const char *name, unsigned n, unsigned bx, bar *const *warps, double *slots,
	       void (*call)(void *), void *ctx)
{
	cur_call = call;
	cur_ctx = ctx;
	cur_kernel = name;
	for (unsigned t = 0; t < n; t++) {
		fiber &f = fibers[t];
		if (!f.stack) {
			void *m = mmap(nullptr, FIBER_STACK + page, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (m == MAP_FAILED || mprotect(m, page, PROT_NONE)) {
				perror("emu: a fiber stack");
				abort();
			}
			f.stack = (char *)m + page;
		}
		ctx_make(f.c, f.stack, FIBER_STACK, fiber_main);
		f.done = false;
		f.tid = dim3(t % bx, t / bx);
		f.warp = warps[t / 32];
		f.slot = (float *)(slots + t / 32 * WARP_SLOT);
	}
	nfib = alive = n;
	idle = 0;
	rev = threads_reversed();
	/* a fiber that waits switches to the next; one that returns comes back here */
	for (unsigned t = rev ? n - 1 : 0; alive; alive--, t = alive ? next_alive(cur) : 0)
		swap(sched, t);
}
#endif
static std::mutex shm_mu;
static std::map<const void *, int> shm_allowed;
void shm_allow(const void *kernel, int bytes)
{
	std::lock_guard<std::mutex> l(shm_mu);
	shm_allowed[kernel] = bytes;
}
[[noreturn]] static void launch_fail(const char *name, const char *why, unsigned long long v)
{
	fprintf(stderr, "emu: the launch of kernel %s fails on a GPU: %s (%llu)\n", name, why, v);
	abort();
}
void launch_check(const void *kernel, const char *name, dim3 g, dim3 b, size_t shm)
{
	unsigned long long threads = (unsigned long long)b.x * b.y * b.z;
	if (!g.x || !g.y || !g.z || !threads)
		launch_fail(name, "an empty grid or block", 0);
	if (threads > 1024 || b.z > 64)
		launch_fail(name, "more than 1024 threads a block (or block.z > 64)", threads);
	if (g.x > 0x7fffffffu || g.y > 65535 || g.z > 65535)
		launch_fail(name, "grid.x above 2^31 - 1 or grid.y, grid.z above 65535",
			    g.y > 65535 ? g.y : g.z > 65535 ? g.z : g.x);
	if (shm > SHM_DEFAULT) {
		std::lock_guard<std::mutex> l(shm_mu);
		auto it = shm_allowed.find(kernel);
		if (it == shm_allowed.end() || (size_t)it->second < shm)
			launch_fail(name, "dynamic shared memory above 48 KiB and above what "
				    "cudaFuncSetAttribute allowed this kernel", shm);
	}
}
/* EMU_BLOCKS, EMU_THREADS: forward (the default) or reverse */
static bool env_reverse(const char *var)
{
	const char *e = getenv(var);
	if (!e || !strcmp(e, "forward"))
		return false;
	if (!strcmp(e, "reverse"))
		return true;
	fprintf(stderr, "emu: %s is forward or reverse, not '%s'\n", var, e);
	exit(2);
}
bool blocks_reversed(void)
{
	static const bool rev = env_reverse("EMU_BLOCKS");
	return rev;
}
bool threads_reversed(void)
{
	static const bool rev = env_reverse("EMU_THREADS");
#if !EMU_FIBERS
	if (rev) {
		fprintf(stderr, "emu: EMU_THREADS=reverse needs the build without EMU_SAN: under a "
			"sanitizer each CUDA thread is an OS thread, run in the system's order\n");
		exit(2);
	}
#endif
	return rev;
}
/* EMU_CPASYNC: late (the default) or early */
bool cp_async_early(void)
{
	static const bool early = [] {
		const char *e = getenv("EMU_CPASYNC");
		if (!e || !strcmp(e, "late"))
			return false;
		if (!strcmp(e, "early"))
			return true;
		fprintf(stderr, "emu: EMU_CPASYNC is late or early, not '%s'\n", e);
		exit(2);
	}();
	return early;
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
void shm_check_tail(const char *name, const float *dyn, size_t shm)
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
		launch_fail(name, "a write past the dynamic shared memory the launch asked for, "
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
 * them from host memory as cudaPointerGetAttributes does. They are mapped
 * PROT_NONE, with an unreadable page past the end. Inside device work (a
 * dev_scope: a launch, a copy, a memset, a GEMM) the first touch of an
 * allocation faults and opens it; the end of the outermost scope closes
 * what was opened. So a host access to device memory faults here as it
 * does on a GPU, and device work pays only for the allocations it touches.
 * Under a sanitizer they are plain heap blocks of the size asked for
 * instead, so that AddressSanitizer sees an access past the end. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define EMU_PROTECT 0
#else
#define EMU_PROTECT 1
#endif
struct dev_block {
	size_t n; /* the bytes device work may touch */
	bool open; /* readable, until the device work ends */
	size_t asked; /* the bytes cudaMalloc was asked for (at least 1) */
};
static std::mutex dev_mu;
static std::map<uintptr_t, dev_block> dev_blocks; /* by start */
/* The device bytes allocated (as asked for) now and at most so far: with
 * EMU_MEM_PEAK set, the most is reported on stderr at exit, as "emu: device
 * memory peak N bytes", so a test can hold a program's peak against what
 * it says it allocates (a GPU's nvidia-smi shows the same peak, plus the
 * CUDA context and the allocator's rounding). */
static size_t dev_live, dev_peak;
static void dev_peak_report(void)
{
	fprintf(stderr, "emu: device memory peak %zu bytes\n", dev_peak);
}
static int dev_peak_set = [] {
	const char *e = getenv("EMU_MEM_PEAK");
	return e && *e ? atexit(dev_peak_report) : 0;
}();
/* The emulated device's memory (EMU_MEM_LIMIT bytes, else 80 GiB): an
 * allocation past it fails as cudaMalloc does when a GPU is full, so the
 * out-of-memory message can be tested. */
static size_t dev_limit(void)
{
	static const size_t limit = [] {
		const char *e = getenv("EMU_MEM_LIMIT");
		return e && *e ? (size_t)strtoull(e, nullptr, 10) : (size_t)80 << 30;
	}();
	return limit;
}
extern "C" cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
	std::lock_guard<std::mutex> l(dev_mu);
	*total_bytes = dev_limit();
	*free_bytes = dev_live < *total_bytes ? *total_bytes - dev_live : 0;
	return cudaSuccess;
}
static int dev_depth;
/* Host waits (EMU_HOST_SYNCS): device work queued since the host last
 * waited for the device. The emulated device runs each piece of work as it
 * is queued, so this is what a GPU would still have to do when the host
 * waits: a wait with none is no stall. */
static std::atomic<bool> dev_pending;
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
	dev_depth++;
	dev_pending.store(true, std::memory_order_relaxed);
}
void host_waited(void) { dev_pending.store(false); }
} // namespace emu
/* For tests (test-comm-stage): whether device work is queued that the host
 * has not waited for since, which a stream of a library of its own (NCCL's)
 * would not wait for either. */
extern "C" int gpt_emu_device_pending(void) { return dev_pending.load(); }
namespace emu {
/* With EMU_HOST_SYNCS set, each call that blocks the host while device work
 * is queued (cudaStreamSynchronize, cudaEventSynchronize, cudaMemcpyAsync
 * into pageable host memory, cudaMemcpy but between device buffers,
 * cudaDeviceSynchronize, cudaFree, cudaFreeHost) writes on stderr one line:
 *   emu: host sync: CALL at +OFFSET +OFFSET ...
 * the return addresses of its callers in the program, as offsets into it
 * (tests/gpu/emu/syncs.sh names them with addr2line). On a GPU each is a
 * stall: the host stops queueing work until the device has caught up. */
void host_wait(const char *call)
{
	static const bool on = [] {
		const char *e = getenv("EMU_HOST_SYNCS");
		return e && *e && strcmp(e, "0");
	}();
	if (!dev_pending.exchange(false) || !on)
		return;
	void *f[16];
	int n = backtrace(f, 16), k;
	Dl_info self, d;
	char line[1024];
	k = snprintf(line, sizeof line, "emu: host sync: %s at", call);
	if (!dladdr((void *)host_wait, &self))
		self.dli_fbase = nullptr;
	for (int i = 1; i < n && k < (int)sizeof line - 24; i++)
		if (dladdr(f[i], &d) && d.dli_fbase == self.dli_fbase)
			k += snprintf(line + k, sizeof line - (size_t)k, " +%#lx",
				      (unsigned long)((uintptr_t)f[i] - (uintptr_t)d.dli_fbase));
	line[k++] = '\n';
	if (write(2, line, (size_t)k) < 0)
		return;
}
void dev_close(void)
{
	std::lock_guard<std::mutex> l(dev_mu);
	if (--dev_depth == 0)
		for (auto &b : dev_blocks)
			if (b.second.open) {
				dev_protect((void *)b.first, b.second.n, PROT_NONE);
				b.second.open = false;
			}
}
} // namespace emu
#if EMU_PROTECT
/* A fault in device memory opens the allocation inside device work; outside
 * it, or past the end of an allocation, it is a bug: say so, then abort.
 * (The thread that faults never holds dev_mu: no code touches memory that
 * a device allocation could hold while holding it.) */
static void dev_fault(int sig, siginfo_t *si, void *)
{
	uintptr_t a = (uintptr_t)si->si_addr;
	std::unique_lock<std::mutex> l(dev_mu);
	auto it = dev_blocks.upper_bound(a);
	if (it != dev_blocks.begin() && a < (--it)->first + it->second.n + page) {
		char m[240];
		size_t off = (size_t)(a - it->first), n = it->second.n;
		if (off < n && dev_depth && !it->second.open) {
			dev_protect((void *)it->first, n, PROT_READ | PROT_WRITE);
			it->second.open = true;
			return; /* the access runs again */
		}
		int k = off < n
			? snprintf(m, sizeof m, "emu: the host touched device memory at %p (%zu bytes into a "
				   "device allocation of %zu): on a GPU that is a crash or garbage\n",
				   si->si_addr, off, n)
			: snprintf(m, sizeof m, "emu: an access at %p, %zu bytes past the end of a device "
				   "allocation (of %zu, page-rounded)\n", si->si_addr, off - n, n);
		if (write(2, m, (size_t)k) < 0)
			_exit(134);
		abort();
	}
	l.unlock();
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
extern "C" void *gpt_cuda_malloc(size_t bytes, const char *what, gpt_err *err)
{
	if (emu::capture_refuses("cudaMalloc")) {
		gpt_err_set(err, GPT_EINTERNAL, "cudaMalloc for %s during a stream capture", what ? what : "data");
		return nullptr;
	}
	{
		std::unique_lock<std::mutex> l(dev_mu);
		if (dev_live + (bytes ? bytes : 1) > dev_limit()) {
			l.unlock();
			gpt_cuda_oom(err, bytes, what);
			return nullptr;
		}
	}
#if EMU_PROTECT
	size_t n = (bytes + page - 1) / page * page + page; /* one unreadable page past the end */
	void *p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("emu: mmap of device memory");
		abort();
	}
	n -= page; /* what device work may touch */
	memset(p, 0xA5, n);
	dev_protect(p, n + page, PROT_NONE);
	std::lock_guard<std::mutex> l(dev_mu);
#else
	/* the size asked for, so that an access past it is reported */
	size_t n = bytes ? bytes : 1;
	void *p = nullptr;
	if (posix_memalign(&p, 256, n))
		abort();
	memset(p, 0xA5, n);
	std::lock_guard<std::mutex> l(dev_mu);
#endif
	size_t asked = bytes ? bytes : 1;
	dev_blocks[(uintptr_t)p] = dev_block{n, false, asked};
	dev_live += asked;
	if (dev_live > dev_peak)
		dev_peak = dev_live;
	return p;
}
extern "C" void gpt_cuda_free(void *p)
{
	if (!p)
		return;
	emu::capture_refuses("cudaFree");
	emu::host_wait("cudaFree"); /* which waits for the whole device */
	std::lock_guard<std::mutex> l(dev_mu);
	auto it = dev_blocks.find((uintptr_t)p);
	if (it == dev_blocks.end()) {
		fprintf(stderr, "emu: cudaFree of %p, which is no device allocation\n", p);
		abort();
	}
#if EMU_PROTECT
	munmap(p, it->second.n + page);
#else
	free(p);
#endif
	dev_live -= it->second.asked;
	dev_blocks.erase(it);
}
extern "C" int gpt_cuda_ptr_is_device(const void *p)
{
	std::lock_guard<std::mutex> l(dev_mu);
	auto it = dev_blocks.upper_bound((uintptr_t)p);
	if (it == dev_blocks.begin())
		return 0;
	--it;
	return (uintptr_t)p < it->first + it->second.n;
}
/* pinned host memory: by start, its size */
static std::mutex host_mu;
static std::map<uintptr_t, size_t> host_blocks;
extern "C" void *gpt_cuda_host_alloc(size_t bytes, const char *, gpt_err *)
{
	void *p = malloc(bytes ? bytes : 1);
	std::lock_guard<std::mutex> l(host_mu);
	if (p)
		host_blocks[(uintptr_t)p] = bytes ? bytes : 1;
	return p;
}
extern "C" void gpt_cuda_host_free(void *p)
{
	if (!p)
		return;
	emu::capture_refuses("cudaFreeHost");
	emu::host_wait("cudaFreeHost");
	{
		std::lock_guard<std::mutex> l(host_mu);
		host_blocks.erase((uintptr_t)p);
	}
	free(p);
}
bool emu::host_pinned(const void *p)
{
	std::lock_guard<std::mutex> l(host_mu);
	auto it = host_blocks.upper_bound((uintptr_t)p);
	return it != host_blocks.begin() && (uintptr_t)p < (--it)->first + it->second;
}
/* A copy whose pointers are not where its kind says (host memory read as
 * the device's, or the reverse) is undefined behaviour on a GPU (the CUDA
 * runtime's cudaMemcpy documentation): say so, then abort. kind: 0 host to
 * device, 1 device to host, 2 device to device. */
void emu::copy_check(const char *call, void *d, const void *s, size_t n, int kind)
{
	static const char *const kinds[] = {"HostToDevice", "DeviceToHost", "DeviceToDevice"};
	if (!n)
		return;
	bool dd = gpt_cuda_ptr_is_device(d), sd = gpt_cuda_ptr_is_device(s);
	bool want_dd = kind != 1, want_sd = kind != 0;
	if (dd == want_dd && sd == want_sd)
		return;
	bool src_wrong = sd != want_sd;
	fprintf(stderr, "emu: %s of %zu bytes with kind cudaMemcpy%s: its %s %p is %s memory; on a GPU "
		"that is undefined behaviour: copy with the backend that holds the memory\n",
		call, n, kinds[kind], src_wrong ? "source" : "destination", src_wrong ? s : (const void *)d,
		(src_wrong ? sd : dd) ? "device" : "host");
	abort();
}
/* cudaMemcpy: kind 2, device to device, does not wait */
extern "C" int gpt_cuda_memcpy(void *d, const void *s, size_t n, int kind, gpt_err *err)
{
	emu::copy_check("cudaMemcpy", d, s, n, kind);
	if (emu::capture_refuses("cudaMemcpy"))
		return gpt_err_set(err, GPT_EINTERNAL, "cudaMemcpy during a stream capture");
	if (kind != 2)
		emu::host_wait("cudaMemcpy");
	{
		emu::dev_scope open;
		memmove(d, s, n);
	}
	if (kind != 2)
		emu::host_waited();
	return 0;
}
extern "C" int gpt_cuda_sync(gpt_err *err)
{
	if (emu::capture_refuses("cudaDeviceSynchronize"))
		return gpt_err_set(err, GPT_EINTERNAL, "cudaDeviceSynchronize during a stream capture");
	emu::host_wait("cudaDeviceSynchronize");
	return 0;
}
