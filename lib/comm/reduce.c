/* The element-wise reductions of the shm backend, in a fixed order. */
#include "comm/comm-impl.h"

#include <math.h>

static float ld16(const uint16_t *p, gpt_dtype t)
{
	return t == GPT_DTYPE_BF16 ? gpt_bf16_to_f32(*p) : gpt_f16_to_f32(*p);
}

static float fmax_nan(float a, float b)
{
	if (isnan(a) || isnan(b))
		return NAN;
	return b > a ? b : a;
}

void gpt_comm_reduce(void *dst, const void *const *srcs, int nsrc, int64_t off, int64_t count,
		     gpt_dtype t, gpt_reduce_op op)
{
	int max = op == GPT_REDUCE_MAX;
	switch (t) {
	case GPT_DTYPE_F32: {
		float *d = dst;
		for (int64_t i = 0; i < count; i++) {
			float acc = ((const float *)srcs[0])[off + i];
			for (int s = 1; s < nsrc; s++) {
				float x = ((const float *)srcs[s])[off + i];
				acc = max ? fmax_nan(acc, x) : acc + x;
			}
			d[i] = acc;
		}
		break;
	}
	case GPT_DTYPE_BF16:
	case GPT_DTYPE_F16: {
		uint16_t *d = dst;
		for (int64_t i = 0; i < count; i++) {
			float acc = ld16((const uint16_t *)srcs[0] + off + i, t);
			for (int s = 1; s < nsrc; s++) {
				float x = ld16((const uint16_t *)srcs[s] + off + i, t);
				acc = max ? fmax_nan(acc, x) : acc + x;
			}
			d[i] = t == GPT_DTYPE_BF16 ? gpt_f32_to_bf16(acc) : gpt_f32_to_f16(acc);
		}
		break;
	}
	case GPT_DTYPE_I32: {
		int32_t *d = dst;
		for (int64_t i = 0; i < count; i++) {
			int32_t acc = ((const int32_t *)srcs[0])[off + i];
			for (int s = 1; s < nsrc; s++) {
				int32_t x = ((const int32_t *)srcs[s])[off + i];
				acc = max ? (x > acc ? x : acc) : (int32_t)((uint32_t)acc + (uint32_t)x);
			}
			d[i] = acc;
		}
		break;
	}
	case GPT_DTYPE_I64: {
		int64_t *d = dst;
		for (int64_t i = 0; i < count; i++) {
			int64_t acc = ((const int64_t *)srcs[0])[off + i];
			for (int s = 1; s < nsrc; s++) {
				int64_t x = ((const int64_t *)srcs[s])[off + i];
				acc = max ? (x > acc ? x : acc) : (int64_t)((uint64_t)acc + (uint64_t)x);
			}
			d[i] = acc;
		}
		break;
	}
	default:
		break;
	}
}
