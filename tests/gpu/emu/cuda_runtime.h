/* A CPU emulation of the CUDA runtime subset lib/cuda uses: every CUDA
 * thread is a std::thread, blocks run one after another, __syncthreads and
 * warp shuffles are barriers. For checking kernels on a machine with no GPU. */
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
#define __shared__ static
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
static inline cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind, cudaStream_t) { memmove(d, s, n); return 0; }
static inline cudaError_t cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t) { memset(d, v, n); return 0; }
static inline cudaError_t cudaMemset(void *d, int v, size_t n) { memset(d, v, n); return 0; }
static inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return 0; }
static inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, int) { *s = (void *)1; return 0; }
static inline cudaError_t cudaStreamDestroy(cudaStream_t) { return 0; }
static inline cudaError_t cudaFree(void *p) { free(p); return 0; }
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
/* Checks the request against the emulated dynamic shared memory (emu.cpp). */
template <class F> static inline cudaError_t cudaFuncSetAttribute(F *, cudaFuncAttribute, int v) { return v <= (4 << 16) ? 0 : 1; }
struct alignas(16) uint4 { unsigned x, y, z, w; };

namespace emu {
extern thread_local dim3 threadIdx_, blockIdx_;
extern dim3 blockDim_, gridDim_;
extern thread_local std::barrier<> *block_bar, *warp_bar;
extern thread_local float *warp_slot;
extern float dyn_shared[];

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
	template <class F> auto operator()(F f)
	{
		dim3 gg = g, bb = b;
		return [=](auto... args) {
			blockDim_ = bb;
			gridDim_ = gg;
			for (unsigned by = 0; by < gg.y; by++)
				for (unsigned bx = 0; bx < gg.x; bx++) {
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
				}
		};
	}
};
static inline launcher launch(dim3 g, dim3 b, size_t = 0, cudaStream_t = 0) { return launcher{g, b}; }
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
