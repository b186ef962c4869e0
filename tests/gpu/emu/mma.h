/* The warp-wide tensor-core instructions lib/cuda uses (attention_tc.cu:
 * PTX mma.sync m16n8k16 with bf16 or fp16 operands and fp32 accumulators,
 * and ldmatrix .x4), for tests/gpu/emu/run.sh, where lib/cuda includes it
 * in place of nvcc's <mma.h> when GPT_CUDA_EMULATED. */
#pragma once
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace emu {
static inline float emu_f(__nv_bfloat16 v) { return __bfloat162float(v); }
static inline float emu_f(__half v) { return __half2float(v); }

/* One lane's part of PTX's mma.sync.aligned.m16n8k16.row.col.f32 with
 * bf16 or fp16 (E) operands: d += A B over the warp, A 16x16 and B 16x8
 * spread over the lanes' registers as the PTX ISA lays them out (lane l,
 * g = l / 4, t = l % 4: a[0] A(g, 2t..2t+1), a[1] A(g+8, 2t..), a[2]
 * A(g, 2t+8..), a[3] A(g+8, 2t+8..); b[0] B(2t..2t+1, g), b[1] B(2t+8.., g);
 * d[0..3] D(g, 2t), D(g, 2t+1), D(g+8, 2t), D(g+8, 2t+1); the lower half of
 * a register the lower column or row). Every lane publishes its registers
 * in the warp's exchange slots between two warp barriers, so all 32 lanes
 * must call it, as on hardware; products are exact and added in fp32. */
template <class E> static inline float mma_half(uint32_t r, int hi)
{
	uint16_t h = (uint16_t)(hi ? r >> 16 : r & 0xffffu);
	E e;
	memcpy(&e, &h, sizeof h);
	return emu_f(e);
}

template <class E> static inline void mma_m16n8k16(float *d, const uint32_t *a, const uint32_t *b)
{
	static_assert(WARP_SLOT * sizeof(double) >= 32 * 6 * sizeof(uint32_t), "exchange slots");
	int lane = (int)(threadIdx_.x % 32), g = lane >> 2, t = lane & 3;
	uint32_t *s = (uint32_t *)warp_slot;
	for (int k = 0; k < 4; k++)
		s[lane * 6 + k] = a[k];
	s[lane * 6 + 4] = b[0];
	s[lane * 6 + 5] = b[1];
	warp_bar->arrive_and_wait();
	for (int q = 0; q < 4; q++) {
		int r = g + (q >= 2 ? 8 : 0), n = 2 * t + (q & 1);
		float acc = d[q];
		for (int k = 0; k < 16; k++) {
			float av = mma_half<E>(s[((r % 8) * 4 + (k % 8) / 2) * 6 + (r >= 8) + 2 * (k >= 8)], k % 2);
			float bv = mma_half<E>(s[(n * 4 + (k % 8) / 2) * 6 + 4 + (k >= 8)], k % 2);
			acc += av * bv;
		}
		d[q] = acc;
	}
	warp_bar->arrive_and_wait();
}

/* One lane's part of PTX's ldmatrix.sync.aligned.m8n8.x4(.trans).shared.b16:
 * lane l gives p, the address of row l % 8 of 8x8 matrix l / 8 (8 16-bit
 * elements, 16-byte aligned, else the run stops: a GPU's result would be
 * undefined); r[i] gets matrix i's elements (l / 4, 2(l % 4)) and
 * (l / 4, 2(l % 4) + 1), or with trans (2(l % 4), l / 4) and
 * (2(l % 4) + 1, l / 4), the first in the lower half. The addresses go
 * through the warp's exchange slots between two warp barriers. */
static inline void ldmatrix_x4(uint32_t *r, const void *p, bool trans)
{
	int lane = (int)(threadIdx_.x % 32), g = lane >> 2, t = lane & 3;
	if ((uintptr_t)p % 16 != 0) {
		fprintf(stderr, "emu: ldmatrix row address %p is not 16-byte aligned\n", p);
		abort();
	}
	const uint16_t **s = (const uint16_t **)warp_slot;
	s[lane] = (const uint16_t *)p;
	warp_bar->arrive_and_wait();
	for (int i = 0; i < 4; i++) {
		uint32_t lo = trans ? s[i * 8 + 2 * t][g] : s[i * 8 + g][2 * t];
		uint32_t hi = trans ? s[i * 8 + 2 * t + 1][g] : s[i * 8 + g][2 * t + 1];
		r[i] = lo | hi << 16;
	}
	warp_bar->arrive_and_wait();
}
} // namespace emu
