/* A CPU emulation of the CUDA runtime subset lib/cuda uses: every CUDA
 * thread is a fiber (an OS thread in the sanitizer builds), blocks run one
 * after another, __syncthreads and warp shuffles are barriers. For checking
 * kernels on a machine with no GPU. With fibers, threads waiting at
 * barriers that not all of them reach (a GPU hangs or worse) abort the run
 * with a message.
 *
 * Launches are held to a Hopper GPU's limits, and a launch past them
 * aborts with a message (a GPU would fail it): at most 1024 threads a
 * block, grid.y and grid.z at most 65535, no empty grid or block, and
 * dynamic shared memory above 48 KiB only up to what cudaFuncSetAttribute
 * allowed that kernel (227 KiB at most). Shared memory, static and
 * dynamic, is filled with 0xff bytes (NaN in every float format) before
 * each block, so a read of what the block did not write shows, and a write
 * past the dynamic size the launch asked for aborts. Device memory
 * (emu.cpp) is mapped unreadable outside device work (a launch, a copy, a
 * memset, a GEMM), so a host access to it faults, as on a GPU.
 *
 * Blocks run in order of blockIdx, or in the reverse order with
 * EMU_BLOCKS=reverse: a kernel whose result depends on the order of its
 * blocks (one block reading what another writes) gives another result then.
 * A block's fibers run in order of their index up to a barrier, each in
 * turn, or from the last down with EMU_THREADS=reverse: a missing barrier
 * between a write to shared memory and another thread's read of it shows
 * as NaN read in one of the two orders (the reader running first).
 * Under AddressSanitizer (build.sh with EMU_SAN=address) a read or write
 * past the dynamic shared memory asked for fails where it happens, as does
 * one past a device allocation; under ThreadSanitizer (EMU_SAN=thread) two
 * threads of a block that touch the same memory, one writing, with no
 * barrier between them are a race, as compute-sanitizer's racecheck
 * reports.
 *
 * Stream capture (CUDA graphs): between cudaStreamBeginCapture and
 * cudaStreamEndCapture, launches, cuBLASLt products, copies and memsets
 * are recorded, not run, each with its arguments as they were then (a
 * GEMM's descriptors too); cudaGraphLaunch runs them again in order. A
 * call the CUDA runtime refuses during a capture (a sync, a copy to or
 * from pageable host memory, cudaMalloc, cudaFree, a synchronous memset)
 * returns cudaErrorStreamCaptureUnsupported, says so on stderr and spoils
 * the capture, whose end then returns cudaErrorStreamCaptureInvalidated,
 * as on a GPU. With EMU_CAPTURE_REFUSE set, any work does (a fallback's
 * test).
 *
 * Host syncs: with EMU_HOST_SYNCS set, each call that makes the host wait
 * for device work queued before it (cudaStreamSynchronize,
 * cudaEventSynchronize, cudaMemcpyAsync into pageable host memory; in
 * emu.cpp cudaMemcpy, cudaDeviceSynchronize, cudaFree, cudaFreeHost) is
 * said on stderr with its callers (emu.cpp's host_wait): on a GPU each
 * stalls the pipeline. tests/gpu/emu/syncs.sh counts them per training
 * step. */
#pragma once
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <cstdio>
#include <new>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
/* static __shared__ arrays live in one section, which the launcher fills
 * with 0xff bytes before each block as it does the dynamic shared memory */
#define __shared__ static __attribute__((section("emu_shared"), aligned(16)))
#define __launch_bounds__(...)
/* lib/cuda tells the emulation from nvcc by this */
#define GPT_CUDA_EMULATED 1

struct dim3 {
	unsigned x, y, z;
	dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
typedef int cudaError_t;
typedef void *cudaStream_t;
enum { cudaSuccess = 0, cudaErrorMemoryAllocation = 2 };
enum cudaMemcpyKind { cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice };
enum { cudaStreamNonBlocking = 1 };
enum { cudaErrorStreamCaptureUnsupported = 900, cudaErrorStreamCaptureInvalidated = 901,
       cudaErrorIllegalState = 401 };
/* Stream capture: the work recorded, in order */
struct emu_graph {
	std::vector<std::function<void()>> ops;
};
typedef emu_graph *cudaGraph_t;
typedef emu_graph *cudaGraphExec_t;
enum cudaStreamCaptureMode { cudaStreamCaptureModeGlobal = 0, cudaStreamCaptureModeThreadLocal = 1,
			     cudaStreamCaptureModeRelaxed = 2 };
namespace emu {
inline emu_graph *capture = nullptr; /* the capture under way */
inline bool capture_spoilt = false;
static inline bool capture_refuses(const char *call);
/* Runs f now, or, during a capture, records it for the graph (with
 * EMU_CAPTURE_REFUSE set, refuses it instead, as a runtime that cannot
 * record it would: the caller's fallback is then what runs) */
template <class F> static inline void run_or_record(F f)
{
	static const bool refuse = getenv("EMU_CAPTURE_REFUSE") && *getenv("EMU_CAPTURE_REFUSE");
	if (capture && refuse)
		capture_refuses("work (EMU_CAPTURE_REFUSE)");
	else if (capture)
		capture->ops.emplace_back(f);
	else
		f();
}
/* true (having spoilt the capture and said so) when a capture is under
 * way: call may not run during one */
static inline bool capture_refuses(const char *call)
{
	if (!capture)
		return false;
	if (!capture_spoilt)
		fprintf(stderr, "emu: %s during a stream capture: the CUDA runtime refuses it, and the capture fails\n", call);
	capture_spoilt = true;
	return true;
}
} // namespace emu
enum cudaStreamCaptureStatus { cudaStreamCaptureStatusNone = 0, cudaStreamCaptureStatusActive = 1 };
static inline cudaError_t cudaStreamIsCapturing(cudaStream_t, cudaStreamCaptureStatus *st)
{
	*st = emu::capture ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
	return 0;
}
static inline cudaError_t cudaStreamBeginCapture(cudaStream_t, cudaStreamCaptureMode)
{
	if (emu::capture)
		return cudaErrorIllegalState;
	emu::capture = new emu_graph;
	emu::capture_spoilt = false;
	return 0;
}
static inline cudaError_t cudaStreamEndCapture(cudaStream_t, cudaGraph_t *g)
{
	*g = nullptr;
	if (!emu::capture)
		return cudaErrorIllegalState;
	emu_graph *c = emu::capture;
	emu::capture = nullptr;
	if (emu::capture_spoilt) {
		delete c;
		return cudaErrorStreamCaptureInvalidated;
	}
	*g = c;
	return 0;
}
static inline cudaError_t cudaGraphInstantiate(cudaGraphExec_t *x, cudaGraph_t g, unsigned long long = 0)
{
	*x = new emu_graph(*g);
	return 0;
}
static inline cudaError_t cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t)
{
	if (emu::capture_refuses("cudaGraphLaunch"))
		return cudaErrorStreamCaptureUnsupported;
	for (auto &f : x->ops)
		f();
	return 0;
}
static inline cudaError_t cudaGraphDestroy(cudaGraph_t g) { delete g; return 0; }
static inline cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x) { delete x; return 0; }
static inline const char *cudaGetErrorString(cudaError_t) { return "emulated error"; }
static inline cudaError_t cudaGetLastError(void) { return 0; }
static inline cudaError_t cudaPeekAtLastError(void) { return 0; }
/* one device */
static inline cudaError_t cudaGetDevice(int *d)
{
	*d = 0;
	return 0;
}
static inline cudaError_t cudaSetDevice(int) { return 0; }
namespace emu {
/* calls begin() where it is declared and end() where it goes out of scope */
template <void (*begin)(void), void (*end)(void)> struct scope {
	scope() { begin(); }
	~scope() { end(); }
	scope(const scope &) = delete;
	scope &operator=(const scope &) = delete;
};
/* emu.cpp: device memory is readable by the host only inside device work
 * (a launch, a copy, a memset, a GEMM), which a dev_scope brackets */
void dev_open(void);
void dev_close(void);
using dev_scope = scope<dev_open, dev_close>;
} // namespace emu
namespace emu {
/* emu.cpp: the host waits for the device work queued so far (a call that
 * returns only when it is done); host_waited: and for what that call
 * queued itself */
void host_wait(const char *call);
void host_waited(void);
bool host_pinned(const void *p); /* inside gpt_cuda_host_alloc's memory */
/* aborts, saying why, when d or s is not the memory the kind names */
void copy_check(const char *call, void *d, const void *s, size_t n, int kind);
} // namespace emu
extern "C" void gpt_cuda_free(void *p);
/* a copy into pageable host memory returns when it is done, as on a GPU */
static inline cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind k, cudaStream_t)
{
	emu::copy_check("cudaMemcpyAsync", d, s, n, k);
	if (emu::capture) {
		const void *h = k == cudaMemcpyDeviceToHost ? d : k == cudaMemcpyHostToDevice ? s : nullptr;
		if (h && !emu::host_pinned(h) && emu::capture_refuses("cudaMemcpyAsync with pageable host memory"))
			return cudaErrorStreamCaptureUnsupported;
		emu::run_or_record([=] {
			emu::dev_scope o;
			memmove(d, s, n);
		});
		return 0;
	}
	bool waits = k == cudaMemcpyDeviceToHost && !emu::host_pinned(d);
	if (waits)
		emu::host_wait("cudaMemcpyAsync to pageable host memory");
	{
		emu::dev_scope o;
		memmove(d, s, n);
	}
	if (waits)
		emu::host_waited();
	return 0;
}
static inline cudaError_t cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t)
{
	emu::run_or_record([=] {
		emu::dev_scope o;
		memset(d, v, n);
	});
	return 0;
}
static inline cudaError_t cudaMemset(void *d, int v, size_t n)
{
	if (emu::capture_refuses("cudaMemset"))
		return cudaErrorStreamCaptureUnsupported;
	emu::dev_scope o;
	memset(d, v, n);
	return 0;
}
static inline cudaError_t cudaStreamSynchronize(cudaStream_t)
{
	if (emu::capture_refuses("cudaStreamSynchronize"))
		return cudaErrorStreamCaptureUnsupported;
	emu::host_wait("cudaStreamSynchronize");
	return 0;
}
/* Events: device work runs when it is queued here, so an event is done
 * when it is recorded, and the time between two is the host's. */
struct emu_event {
	std::chrono::steady_clock::time_point at;
};
typedef struct emu_event *cudaEvent_t;
enum { cudaEventDefault = 0, cudaEventDisableTiming = 2, cudaErrorNotReady = 600 };
static inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned) { *e = new emu_event(); return 0; }
static inline cudaError_t cudaEventDestroy(cudaEvent_t e) { delete e; return 0; }
static inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t) { e->at = std::chrono::steady_clock::now(); return 0; }
static inline cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
	*ms = std::chrono::duration<float, std::milli>(b->at - a->at).count();
	return 0;
}
static inline cudaError_t cudaEventQuery(cudaEvent_t)
{
	return emu::capture_refuses("cudaEventQuery") ? cudaErrorStreamCaptureUnsupported : 0;
}
static inline cudaError_t cudaEventSynchronize(cudaEvent_t)
{
	if (emu::capture_refuses("cudaEventSynchronize"))
		return cudaErrorStreamCaptureUnsupported;
	emu::host_wait("cudaEventSynchronize");
	return 0;
}
static inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, int) { *s = (void *)1; return 0; }
static inline cudaError_t cudaStreamDestroy(cudaStream_t) { return 0; }
/* streams run in order of the host's calls here: nothing to wait for */
static inline cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned) { return 0; }
static inline cudaError_t cudaFree(void *p)
{
	if (emu::capture_refuses("cudaFree"))
		return cudaErrorStreamCaptureUnsupported;
	gpt_cuda_free(p);
	return 0;
}
/* emu.cpp: the emulated device's size (EMU_MEM_LIMIT bytes, else 80 GiB)
 * less what is allocated */
extern "C" cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes);
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
namespace emu {
enum : size_t { SHM_DEFAULT = 48 << 10, SHM_OPTIN = 227 << 10, SHM_EMU = 256 << 10 };
/* emu.cpp: the per-kernel opt-in of cudaFuncSetAttribute, the launch checks. */
void shm_allow(const void *kernel, int bytes);
void launch_check(const void *kernel, const char *name, dim3 g, dim3 b, size_t shm);
void shm_check_tail(const char *name, const float *dyn, size_t shm);
void shm_fill_static(void);
bool blocks_reversed(void); /* EMU_BLOCKS=reverse */
bool threads_reversed(void); /* EMU_THREADS=reverse (fibers only) */
bool cp_async_early(void); /* EMU_CPASYNC=early */
void shm_poison(const float *dyn, size_t shm, bool on);
} // namespace emu
template <class F> static inline cudaError_t cudaFuncSetAttribute(F *f, cudaFuncAttribute, int v)
{
	if (v < 0 || (size_t)v > emu::SHM_OPTIN)
		return 1; /* cudaErrorInvalidValue */
	emu::shm_allow(reinterpret_cast<const void *>(f), v);
	return 0;
}
struct alignas(8) uint2 { unsigned x, y; };
struct alignas(16) uint4 { unsigned x, y, z, w; };

/* Each CUDA thread is a fiber of the launching thread (emu.cpp), switched
 * at barriers, or, in the sanitizer builds, an OS thread, so that
 * ThreadSanitizer sees the threads of a block run side by side and
 * AddressSanitizer needs no stack-switching annotations. Fibers are some
 * 50 times faster: no thread to start, no scheduler between barriers. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define EMU_FIBERS 0
#else
#define EMU_FIBERS 1
#endif
namespace emu {
#if EMU_FIBERS
/* A barrier of fibers (emu.cpp): a waiting fiber yields to the next. */
struct bar {
	unsigned expected, arrived = 0;
	unsigned long long phase = 0;
	explicit bar(unsigned n) : expected(n) {}
	void arrive_and_wait();
	void arrive_and_drop();
};
/* Runs one block: n fibers, fiber t the thread (t % bx, t / bx) of warp
 * barrier warps[t / 32] and exchange slots slots + t / 32 * WARP_SLOT, each
 * calling call(ctx) until every one has returned. Aborts with a message
 * when no fiber can go on (threads waiting at barriers not all reach). */
void run_block(const char *name, unsigned n, unsigned bx, bar *const *warps, double *slots,
	       void (*call)(void *), void *ctx);
#else
using bar = std::barrier<>;
#endif
/* one launch at a time: the launch state is global */
void launch_lock(void);
void launch_unlock(void);
using launch_scope = scope<launch_lock, launch_unlock>;
extern thread_local dim3 threadIdx_, blockIdx_;
extern dim3 blockDim_, gridDim_;
extern thread_local bar *block_bar, *warp_bar;
extern thread_local float *warp_slot;
/* doubles of exchange space a warp has: a shuffle's value a lane, or the
 * operand registers of a warp-wide matrix product (mma.h) */
enum { WARP_SLOT = 128 };
extern thread_local float *dyn_sh; /* this block's dynamic shared memory */

/* each lane's pred != 0 as bit lane of every lane's result */
static inline unsigned ballot(int pred)
{
	int lane = threadIdx_.x % 32;
	unsigned *slot = (unsigned *)warp_slot;
	slot[lane] = pred != 0;
	warp_bar->arrive_and_wait();
	unsigned r = 0;
	for (int i = 0; i < 32; i++)
		r |= slot[i] << i;
	warp_bar->arrive_and_wait();
	return r;
}

template <class T> static inline T shfl(T v, int src)
{
	int lane = threadIdx_.x % 32;
	T *slot = (T *)warp_slot;
	slot[lane] = v;
	warp_bar->arrive_and_wait();
	T r = slot[src];
	warp_bar->arrive_and_wait();
	return r;
}

/* PTX cp.async (attention_tc.cu's tiles): a thread's copies wait in its
 * queue and land when its cp.async.wait_group lets them (those of all but
 * the newest n committed groups), the latest a GPU may land them, so a
 * read of the destination before the wait sees shared memory's 0xff fill
 * (NaN). With EMU_CPASYNC=early they land when issued instead, the
 * earliest a GPU may: a copy into a buffer that another thread may still
 * be reading (no barrier since its last read) then overwrites what that
 * thread reads next, in one of the two orders of EMU_THREADS. A copy of
 * n < size bytes fills the rest with zeros, as PTX's src-size operand
 * does. The queues are emptied at each block's start. */
struct async_copy {
	void *dst;
	const void *src;
	unsigned n, size;
	unsigned long long group;
};
struct async_queue {
	std::vector<async_copy> q;
	unsigned long long committed = 0;
};
inline async_queue async_queues[1024];
static inline async_queue &async_of_thread() { return async_queues[threadIdx_.x + threadIdx_.y * blockDim_.x]; }
static inline void cp_async(void *dst, const void *src, unsigned n, unsigned size)
{
	if (emu::cp_async_early()) {
		memcpy(dst, src, n);
		memset((char *)dst + n, 0, size - n);
		return;
	}
	async_queue &a = async_of_thread();
	a.q.push_back({dst, src, n, size, a.committed});
}
static inline void cp_async_commit(void) { async_of_thread().committed++; }
static inline void cp_async_wait(unsigned pending)
{
	async_queue &a = async_of_thread();
	std::vector<async_copy> left;
	for (const async_copy &c : a.q)
		if (c.group + pending < a.committed) {
			memcpy(c.dst, c.src, c.n);
			memset((char *)c.dst + c.n, 0, c.size - c.n);
		} else {
			left.push_back(c);
		}
	a.q.swap(left);
}
static inline void cp_async_reset(void)
{
	for (async_queue &a : async_queues) {
		a.q.clear();
		a.committed = 0;
	}
}

/* One launch's state: step() ends the block that ran (its shared memory
 * checked) and sets up the next one (shared memory refilled, fresh block
 * and warp barriers: a thread that returns drops out of its barriers).
 * With OS threads, the threads live through the whole grid and meet
 * between blocks at a barrier whose completion is step(): it runs in the
 * last thread to arrive while every other waits. */
struct grid {
	const char *k; /* the kernel's name */
	dim3 g, b;
	size_t sh;
	unsigned n, nw; /* threads a block, warps a block */
	unsigned long long next = 0, count;
	bool rev, done = false;
	dim3 at; /* the block running */
	float *dyn;
	std::vector<double> slots;
	alignas(bar) unsigned char blk[sizeof(bar)];
	std::vector<bar *> wb;
	bar &block() { return *reinterpret_cast<bar *>(blk); }
	void end_block()
	{
		block().~bar();
		for (auto *p : wb)
			delete p;
		wb.clear();
		shm_poison(dyn, sh, false);
		shm_check_tail(k, dyn, sh);
	}
	void step() noexcept
	{
		if (next)
			end_block();
		if (next == count) {
			done = true;
			return;
		}
		unsigned long long i = rev ? count - 1 - next : next;
		next++;
		at = dim3((unsigned)(i % g.x), (unsigned)(i / g.x % g.y), (unsigned)(i / g.x / g.y));
		memset(dyn, 0xff, SHM_EMU);
		cp_async_reset();
		shm_fill_static();
		shm_poison(dyn, sh, true);
		new (blk) bar(n);
		for (unsigned w = 0; w < nw; w++)
			wb.push_back(new bar(n - 32 * w < 32 ? n - 32 * w : 32));
	}
	struct on_step {
		grid *s;
		void operator()() noexcept { s->step(); }
	};
};

struct launcher {
	const char *name;
	dim3 g, b;
	size_t shm;
	template <class F> auto operator()(F f)
	{
		dim3 gg = g, bb = b;
		size_t sh = shm;
		const char *k = name;
		launch_check(reinterpret_cast<const void *>(f), k, gg, bb, sh);
		return [=](auto... args) { run_or_record([=] {
			launch_scope one;
			dev_scope open;
			blockDim_ = bb;
			gridDim_ = gg;
			grid s;
			s.k = k, s.g = gg, s.b = bb, s.sh = sh;
			s.n = bb.x * bb.y;
			s.nw = (s.n + 31) / 32;
			s.count = (unsigned long long)gg.x * gg.y * gg.z;
			s.rev = blocks_reversed();
			s.dyn = (float *)aligned_alloc(256, SHM_EMU);
			s.slots.resize(s.nw * WARP_SLOT);
#if EMU_FIBERS
			auto body = [&]() {
				f(args...);
				block_bar->arrive_and_drop();
				warp_bar->arrive_and_drop();
			};
			dyn_sh = s.dyn;
			for (s.step(); !s.done; s.step()) {
				blockIdx_ = s.at;
				block_bar = &s.block();
				run_block(k, s.n, bb.x, s.wb.data(), s.slots.data(),
					  [](void *c) { (*static_cast<decltype(body) *>(c))(); }, &body);
			}
#else
			threads_reversed(); /* which fails here */
			std::barrier<grid::on_step> step(s.n, grid::on_step{&s});
			std::vector<std::thread> th;
			for (unsigned t = 0; t < s.n; t++)
				th.emplace_back([&, t]() {
					threadIdx_ = dim3(t % bb.x, t / bb.x);
					dyn_sh = s.dyn;
					warp_slot = (float *)&s.slots[(t / 32) * WARP_SLOT];
					for (;;) {
						step.arrive_and_wait();
						if (s.done)
							break;
						blockIdx_ = s.at;
						block_bar = &s.block();
						warp_bar = s.wb[t / 32];
						f(args...);
						block_bar->arrive_and_drop();
						warp_bar->arrive_and_drop();
					}
				});
			for (auto &x : th)
				x.join();
#endif
			free(s.dyn);
		}); };
	}
};
/* build.sh writes NAME<<<CONFIG>>>(ARGS) as emu::launch("NAME", CONFIG)(NAME)(ARGS) */
static inline launcher launch(const char *name, dim3 g, dim3 b, size_t shm = 0, cudaStream_t = 0)
{
	return launcher{name, g, b, shm};
}
} // namespace emu

#define threadIdx emu::threadIdx_
#define blockIdx emu::blockIdx_
#define blockDim emu::blockDim_
#define gridDim emu::gridDim_
static inline void __syncthreads(void) { emu::block_bar->arrive_and_wait(); }
static inline void __syncwarp(void) { emu::warp_bar->arrive_and_wait(); }
template <class T> static inline T __shfl_sync(unsigned, T v, int src) { return emu::shfl(v, src); }
static inline unsigned __ballot_sync(unsigned, int pred) { return emu::ballot(pred); }
template <class T> static inline T __shfl_xor_sync(unsigned, T v, int o) { return emu::shfl(v, (int)(emu::threadIdx_.x % 32) ^ o); }
/* round-to-nearest arithmetic without contraction: plain IEEE ops on the CPU */
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
/* a float's bits and back */
static inline unsigned __float_as_uint(float f)
{
	unsigned u;
	memcpy(&u, &f, 4);
	return u;
}
static inline float __uint_as_float(unsigned u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}
/* the fast intrinsics as the GPU computes them, but for the last bits of
 * its approximate 2^x and reciprocal: __expf is 2^(x log2 e) with the
 * product rounded to fp32, __fdividef a times 1/b, 0 for |b| in (2^126,
 * 2^128) */
namespace emu {
static inline float fast_exp(float x) { return exp2f(x * 1.44269504f); }
} // namespace emu
#define __expf emu::fast_exp /* glibc declares an __expf of its own */
static inline float __fdividef(float a, float b)
{
	float m = fabsf(b);
	return m > 0x1p126f && m < INFINITY ? 0.0f : a * (1.0f / b);
}
using std::isfinite;
