/* A CPU emulation of the CUDA runtime subset lib/cuda uses: every CUDA
 * thread is a std::thread, blocks run one after another, __syncthreads and
 * warp shuffles are barriers. For checking kernels on a machine with no GPU.
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
 * Under AddressSanitizer (build.sh with EMU_SAN=address) a read or write
 * past the dynamic shared memory asked for fails where it happens, as does
 * one past a device allocation; under ThreadSanitizer (EMU_SAN=thread) two
 * threads of a block that touch the same memory, one writing, with no
 * barrier between them are a race, as compute-sanitizer's racecheck
 * reports. */
#pragma once
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
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

struct dim3 {
	unsigned x, y, z;
	dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
typedef int cudaError_t;
typedef void *cudaStream_t;
enum { cudaSuccess = 0 };
enum cudaMemcpyKind { cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice };
enum { cudaStreamNonBlocking = 1 };
static inline const char *cudaGetErrorString(cudaError_t) { return "emulated error"; }
static inline cudaError_t cudaGetLastError(void) { return 0; }
namespace emu {
/* emu.cpp: device memory is readable by the host only inside device work
 * (a launch, a copy, a memset, a GEMM), which a dev_scope brackets */
void dev_open(void);
void dev_close(void);
struct dev_scope {
	dev_scope() { dev_open(); }
	~dev_scope() { dev_close(); }
	dev_scope(const dev_scope &) = delete;
	dev_scope &operator=(const dev_scope &) = delete;
};
} // namespace emu
extern "C" void gpt_cuda_free(void *p);
static inline cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind, cudaStream_t) { emu::dev_scope o; memmove(d, s, n); return 0; }
static inline cudaError_t cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t) { emu::dev_scope o; memset(d, v, n); return 0; }
static inline cudaError_t cudaMemset(void *d, int v, size_t n) { emu::dev_scope o; memset(d, v, n); return 0; }
static inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return 0; }
static inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, int) { *s = (void *)1; return 0; }
static inline cudaError_t cudaStreamDestroy(cudaStream_t) { return 0; }
static inline cudaError_t cudaFree(void *p) { gpt_cuda_free(p); return 0; }
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
namespace emu {
enum : size_t { SHM_DEFAULT = 48 << 10, SHM_OPTIN = 227 << 10, SHM_EMU = 256 << 10 };
/* emu.cpp: the per-kernel opt-in of cudaFuncSetAttribute, the launch checks. */
void shm_allow(const void *kernel, int bytes);
void launch_check(const void *kernel, dim3 g, dim3 b, size_t shm);
void shm_check_tail(const void *kernel, const float *dyn, size_t shm);
void shm_fill_static(void);
bool blocks_reversed(void); /* EMU_BLOCKS=reverse */
void shm_poison(const float *dyn, size_t shm, bool on);
} // namespace emu
template <class F> static inline cudaError_t cudaFuncSetAttribute(F *f, cudaFuncAttribute, int v)
{
	if (v < 0 || (size_t)v > emu::SHM_OPTIN)
		return 1; /* cudaErrorInvalidValue */
	emu::shm_allow(reinterpret_cast<const void *>(f), v);
	return 0;
}
struct alignas(16) uint4 { unsigned x, y, z, w; };

namespace emu {
extern thread_local dim3 threadIdx_, blockIdx_;
extern dim3 blockDim_, gridDim_;
extern thread_local std::barrier<> *block_bar, *warp_bar;
extern thread_local float *warp_slot;
extern thread_local float *dyn_sh; /* this block's dynamic shared memory */

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

struct launcher {
	dim3 g, b;
	size_t shm;
	template <class F> auto operator()(F f)
	{
		dim3 gg = g, bb = b;
		size_t sh = shm;
		const void *k = reinterpret_cast<const void *>(f);
		launch_check(k, gg, bb, sh);
		return [=](auto... args) {
			dev_scope open;
			blockDim_ = bb;
			gridDim_ = gg;
			float *dyn = (float *)aligned_alloc(256, SHM_EMU);
			const bool rev = blocks_reversed();
			for (unsigned yy = 0; yy < gg.y; yy++)
				for (unsigned xx = 0; xx < gg.x; xx++) {
					unsigned by = rev ? gg.y - 1 - yy : yy, bx = rev ? gg.x - 1 - xx : xx;
					memset(dyn, 0xff, SHM_EMU);
					shm_fill_static();
					shm_poison(dyn, sh, true);
					unsigned n = bb.x * bb.y;
					std::barrier<> blk(n);
					unsigned nw = (n + 31) / 32;
					std::vector<std::barrier<> *> wb(nw);
					std::vector<double> slots(nw * 32);
					for (unsigned w = 0; w < nw; w++)
						wb[w] = new std::barrier<>(n - 32 * w < 32 ? n - 32 * w : 32);
					std::vector<std::thread> th;
					for (unsigned t = 0; t < n; t++)
						th.emplace_back([&, t]() {
							threadIdx_ = dim3(t % bb.x, t / bb.x);
							blockIdx_ = dim3(bx, by);
							block_bar = &blk;
							dyn_sh = dyn;
							warp_bar = wb[t / 32];
							warp_slot = (float *)&slots[(t / 32) * 32];
							f(args...);
							blk.arrive_and_drop();
							wb[t / 32]->arrive_and_drop();
						});
					for (auto &x : th)
						x.join();
					for (auto *p : wb)
						delete p;
					shm_poison(dyn, sh, false);
					shm_check_tail(k, dyn, sh);
				}
			free(dyn);
		};
	}
};
static inline launcher launch(dim3 g, dim3 b, size_t shm = 0, cudaStream_t = 0) { return launcher{g, b, shm}; }
} // namespace emu

#define threadIdx emu::threadIdx_
#define blockIdx emu::blockIdx_
#define blockDim emu::blockDim_
#define gridDim emu::gridDim_
static inline void __syncthreads(void) { emu::block_bar->arrive_and_wait(); }
static inline void __syncwarp(void) { emu::warp_bar->arrive_and_wait(); }
template <class T> static inline T __shfl_sync(unsigned, T v, int src) { return emu::shfl(v, src); }
template <class T> static inline T __shfl_xor_sync(unsigned, T v, int o) { return emu::shfl(v, (int)(emu::threadIdx_.x % 32) ^ o); }
/* round-to-nearest arithmetic without contraction: plain IEEE ops on the CPU */
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
using std::isfinite;
