/* fp16 for tests/gpu/emu/run.sh, converted by lib/backend (round to nearest even). */
#pragma once
#include <cstdint>
extern "C" uint16_t gpt_f32_to_f16(float f);
extern "C" float gpt_f16_to_f32(uint16_t h);
struct __half { uint16_t x; };
static inline float __half2float(__half h) { return gpt_f16_to_f32(h.x); }
static inline __half __float2half_rn(float f) { return __half{gpt_f32_to_f16(f)}; }
