/* dtype names, sizes and the scalar fp32 <-> bf16/fp16 conversions. */
#include "backend/backend.h"

#include <math.h>
#include <string.h>
#include <strings.h>

size_t gpt_dtype_size(gpt_dtype t)
{
	switch (t) {
	case GPT_DTYPE_F32: return 4;
	case GPT_DTYPE_BF16: return 2;
	case GPT_DTYPE_F16: return 2;
	case GPT_DTYPE_I8: return 1;
	case GPT_DTYPE_I32: return 4;
	case GPT_DTYPE_I64: return 8;
	case GPT_DTYPE_U16: return 2;
	case GPT_DTYPE_COUNT: break;
	}
	return 0;
}

static const char *const names[GPT_DTYPE_COUNT] = {"fp32", "bf16", "fp16", "int8",
						     "int32", "int64", "uint16"};

const char *gpt_dtype_name(gpt_dtype t)
{
	return (unsigned)t < GPT_DTYPE_COUNT ? names[t] : "unknown";
}

int gpt_dtype_parse(const char *s, gpt_dtype *out)
{
	static const struct { const char *name; gpt_dtype t; } alias[] = {
		{"float32", GPT_DTYPE_F32}, {"f32", GPT_DTYPE_F32}, {"float", GPT_DTYPE_F32},
		{"bfloat16", GPT_DTYPE_BF16}, {"float16", GPT_DTYPE_F16}, {"f16", GPT_DTYPE_F16},
		{"half", GPT_DTYPE_F16}, {"i8", GPT_DTYPE_I8}, {"i32", GPT_DTYPE_I32},
		{"i64", GPT_DTYPE_I64}, {"u16", GPT_DTYPE_U16},
	};
	for (int i = 0; i < GPT_DTYPE_COUNT; i++)
		if (strcasecmp(s, names[i]) == 0) {
			*out = (gpt_dtype)i;
			return 0;
		}
	for (size_t i = 0; i < sizeof alias / sizeof *alias; i++)
		if (strcasecmp(s, alias[i].name) == 0) {
			*out = alias[i].t;
			return 0;
		}
	return -1;
}

static uint32_t f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

static float bits_f32(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

uint16_t gpt_f32_to_bf16(float f)
{
	uint32_t u = f32_bits(f);
	if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep the sign, force quiet */
		return (uint16_t)((u >> 16) | 0x0040u);
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

float gpt_bf16_to_f32(uint16_t h)
{
	return bits_f32((uint32_t)h << 16);
}

uint16_t gpt_f32_to_f16(float f)
{
	uint32_t u = f32_bits(f);
	uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
	uint32_t a = u & 0x7fffffffu;
	if (a > 0x7f800000u)
		return sign | 0x7e00u; /* quiet NaN */
	if (a >= 0x477ff000u)  /* rounds to >= 65520: infinity */
		return sign | 0x7c00u;
	if (a < 0x38800000u) { /* below the smallest normal 2^-14: subnormal or zero */
		if (a < 0x33000000u) /* below half the smallest subnormal 2^-25 (ties go to 0) */
			return sign;
		uint32_t mant = (a & 0x7fffffu) | 0x800000u;
		/* value = mant * 2^(exp-150) and the subnormal unit is 2^-24 */
		int shift = 126 - (int)(a >> 23);
		uint32_t res = mant >> shift;
		uint32_t rem = mant & ((1u << shift) - 1);
		uint32_t half = 1u << (shift - 1);
		if (rem > half || (rem == half && (res & 1u)))
			res++;
		return sign | (uint16_t)res;
	}
	/* normal: rebias exponent 127 -> 15 and round 23 -> 10 mantissa bits */
	uint32_t r = a - 0x38000000u; /* (127 - 15) << 23 */
	uint32_t res = r >> 13;
	uint32_t rem = r & 0x1fffu;
	if (rem > 0x1000u || (rem == 0x1000u && (res & 1u)))
		res++; /* may carry into the exponent, which is correct rounding */
	return sign | (uint16_t)res;
}

float gpt_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
	if (e == 0) {
		if (m == 0)
			return bits_f32(sign);
		/* subnormal: m * 2^-24 */
		float v = (float)m * 5.9604644775390625e-8f;
		return sign ? -v : v;
	}
	if (e == 31)
		return bits_f32(sign | 0x7f800000u | (m << 13));
	return bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

int gpt_convert(void *dst, gpt_dtype dst_t, const void *src, gpt_dtype src_t, size_t n,
		gpt_err *err)
{
	int ok_src = src_t == GPT_DTYPE_F32 || src_t == GPT_DTYPE_BF16 || src_t == GPT_DTYPE_F16;
	int ok_dst = dst_t == GPT_DTYPE_F32 || dst_t == GPT_DTYPE_BF16 || dst_t == GPT_DTYPE_F16;
	if (!ok_src || !ok_dst)
		return gpt_err_set(err, GPT_EINTERNAL, "cannot convert %s to %s",
				   gpt_dtype_name(src_t), gpt_dtype_name(dst_t));
	if (src_t == dst_t) {
		memmove(dst, src, n * gpt_dtype_size(src_t));
		return 0;
	}
	const uint16_t *s16 = src;
	const float *s32 = src;
	uint16_t *d16 = dst;
	float *d32 = dst;
	#pragma omp parallel for schedule(static) if (n > (1 << 16))
	for (size_t i = 0; i < n; i++) {
		float v = src_t == GPT_DTYPE_F32 ? s32[i]
			: src_t == GPT_DTYPE_BF16 ? gpt_bf16_to_f32(s16[i]) : gpt_f16_to_f32(s16[i]);
		if (dst_t == GPT_DTYPE_F32)
			d32[i] = v;
		else if (dst_t == GPT_DTYPE_BF16)
			d16[i] = gpt_f32_to_bf16(v);
		else
			d16[i] = gpt_f32_to_f16(v);
	}
	return 0;
}
