/* bf16 for tests/gpu/emu/run.sh, converted by lib/backend (round to nearest even). */
#pragma once
#include <cstdint>
extern "C" uint16_t gpt_f32_to_bf16(float f);
extern "C" float gpt_bf16_to_f32(uint16_t h);
struct __nv_bfloat16 { uint16_t x; };
static inline float __bfloat162float(__nv_bfloat16 h) { return gpt_bf16_to_f32(h.x); }
static inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16{gpt_f32_to_bf16(f)}; }
