/* The nvcuda::wmma subset lib/cuda uses (16x16x16 tiles, bf16 or fp16
 * inputs, fp32 accumulators), for tests/gpu/emu/run.sh. A fragment here
 * holds the whole 16x16 tile in every lane, so element-wise operations
 * applied uniformly to x[0..num_elements) act as on hardware, where each
 * lane holds an unspecified part. Loads read the tile in every lane; stores
 * write it from lane 0 between two warp barriers (so they neither race with
 * the warp's earlier reads of that memory nor with one another); mma_sync
 * multiplies the bf16/fp16 values exactly and accumulates in fp32 as the
 * tensor cores do (in another order). Code must still __syncwarp() before
 * loading what other lanes stored with ordinary writes, as on hardware.
 * Loads and stores abort where a GPU's would be undefined: a pointer not
 * 32-byte aligned, or a row stride (ldm) not a multiple of 16 bytes. */
#pragma once
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cstdio>
#include <type_traits>

namespace nvcuda {
namespace wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K, class T, class Layout = void> struct fragment {
	static_assert(M == 16 && N == 16 && K == 16, "the emulation has 16x16x16 tiles only");
	enum { num_elements = 256 };
	float x[256]; /* row-major tile (the values a fragment of T holds, as float) */
};

static inline float emu_f(float v) { return v; }
static inline float emu_f(__nv_bfloat16 v) { return __bfloat162float(v); }
static inline float emu_f(__half v) { return __half2float(v); }

/* load_matrix_sync's and store_matrix_sync's requirements (CUDA C++
 * Programming Guide, "Warp Matrix Functions") */
static inline void emu_check(const char *what, const void *p, unsigned ldm, size_t elem)
{
	if ((uintptr_t)p % 32 == 0 && ldm * elem % 16 == 0)
		return;
	fprintf(stderr, "emu: wmma::%s at %p with ldm %u (%zu-byte elements) is undefined on a GPU: "
		"the pointer must be 32-byte aligned and ldm a multiple of 16 bytes\n", what, p, ldm, elem);
	abort();
}

template <class Use, class T, class L, class S>
static inline void load_matrix_sync(fragment<Use, 16, 16, 16, T, L> &f, const S *p, unsigned ldm)
{
	emu_check("load_matrix_sync", p, ldm, sizeof(S));
	for (int r = 0; r < 16; r++)
		for (int c = 0; c < 16; c++)
			f.x[r * 16 + c] = emu_f(std::is_same<L, col_major>::value ? p[c * ldm + r]
										 : p[r * ldm + c]);
}

static inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float> &f, const float *p,
				    unsigned ldm, layout_t l)
{
	emu_check("load_matrix_sync", p, ldm, sizeof(float));
	for (int r = 0; r < 16; r++)
		for (int c = 0; c < 16; c++)
			f.x[r * 16 + c] = l == mem_col_major ? p[c * ldm + r] : p[r * ldm + c];
}

static inline void store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 16, float> &f,
				     unsigned ldm, layout_t l)
{
	emu_check("store_matrix_sync", p, ldm, sizeof(float));
	emu::warp_bar->arrive_and_wait();
	if (emu::threadIdx_.x % 32 == 0)
		for (int r = 0; r < 16; r++)
			for (int c = 0; c < 16; c++)
				(l == mem_col_major ? p[c * ldm + r] : p[r * ldm + c]) = f.x[r * 16 + c];
	emu::warp_bar->arrive_and_wait();
}

template <class Use, class T, class L>
static inline void fill_fragment(fragment<Use, 16, 16, 16, T, L> &f, float v)
{
	for (int e = 0; e < 256; e++)
		f.x[e] = emu_f(v);
}

template <class T, class LA, class LB>
static inline void mma_sync(fragment<accumulator, 16, 16, 16, float> &d,
			    const fragment<matrix_a, 16, 16, 16, T, LA> &a,
			    const fragment<matrix_b, 16, 16, 16, T, LB> &b,
			    const fragment<accumulator, 16, 16, 16, float> &c)
{
	float out[256];
	for (int r = 0; r < 16; r++)
		for (int n = 0; n < 16; n++) {
			float s = c.x[r * 16 + n];
			for (int k = 0; k < 16; k++)
				s += a.x[r * 16 + k] * b.x[k * 16 + n];
			out[r * 16 + n] = s;
		}
	for (int e = 0; e < 256; e++)
		d.x[e] = out[e];
}
} // namespace wmma
} // namespace nvcuda
