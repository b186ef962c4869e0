/* fp32 <-> bf16/fp16 through the backend's convert op: every one of the
 * 65536 16-bit values decodes to the value its fields say and round-trips;
 * every halfway case rounds to even; subnormals, overflow to infinity, NaN. */
#include "cpu-check.h"

static uint32_t bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

static float from_bits(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

/* fp16 value from its fields, independently of the library. */
static double f16_value(uint16_t h)
{
	int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
	double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
	return s ? -v : v;
}

int main(void)
{
	gpt_backend be = chk_backend();
	enum { N = 65536 };
	uint16_t *h = malloc(N * 2), *h2 = malloc(N * 2);
	float *f = malloc(N * 4);
	for (int i = 0; i < N; i++)
		h[i] = (uint16_t)i;

	/* fp16: decode, round trip */
	CHK(be.ops->convert(&be, f, GPT_DTYPE_F32, h, GPT_DTYPE_F16, N, &chk_err));
	int dec = 1, trip = 1;
	for (int i = 0; i < N; i++) {
		double want = f16_value((uint16_t)i);
		dec &= isnan(want) ? isnan(f[i]) : (double)f[i] == want && !!signbit(f[i]) == (i >> 15);
	}
	ok(dec, "fp16 -> fp32: all 65536 values decode exactly (zeros, subnormals, inf, NaN)");
	CHK(be.ops->convert(&be, h2, GPT_DTYPE_F16, f, GPT_DTYPE_F32, N, &chk_err));
	for (int i = 0; i < N; i++)
		trip &= isnan(f[i]) ? isnan(f16_value(h2[i])) : h2[i] == i;
	ok(trip, "fp16 -> fp32 -> fp16: all 65536 values round-trip (NaN stays NaN)");

	/* bf16: decode is the top half of fp32; round trip */
	CHK(be.ops->convert(&be, f, GPT_DTYPE_F32, h, GPT_DTYPE_BF16, N, &chk_err));
	dec = 1, trip = 1;
	for (int i = 0; i < N; i++)
		dec &= bits(f[i]) == (uint32_t)i << 16;
	ok(dec, "bf16 -> fp32: all 65536 values are the upper 16 bits");
	CHK(be.ops->convert(&be, h2, GPT_DTYPE_BF16, f, GPT_DTYPE_F32, N, &chk_err));
	for (int i = 0; i < N; i++)
		trip &= isnan(f[i]) ? isnan(from_bits((uint32_t)h2[i] << 16)) : h2[i] == i;
	ok(trip, "bf16 -> fp32 -> bf16: all 65536 values round-trip (NaN stays NaN)");

	/* every bf16 halfway point rounds to the even neighbour; just above and
	 * below go to the nearer one */
	{
		int ties = 1, near = 1;
		for (uint32_t i = 0; i < N; i++) {
			if ((i & 0x7fff) >= 0x7f80)
				continue; /* inf and NaN have no upper neighbour */
			uint32_t mid = i << 16 | 0x8000;
			uint16_t even = (uint16_t)(i & 1 ? i + 1 : i);
			ties &= gpt_f32_to_bf16(from_bits(mid)) == even;
			near &= gpt_f32_to_bf16(from_bits(mid - 1)) == i &&
				gpt_f32_to_bf16(from_bits(mid + 1)) == (uint16_t)(i + 1);
		}
		ok(ties, "bf16: every halfway case rounds to even (max finite + half -> inf)");
		ok(near, "bf16: one ulp off the halfway point rounds to the nearer value");
	}

	/* every fp16 halfway point (normal and subnormal) rounds to even */
	{
		int ties = 1, near = 1;
		for (uint32_t i = 0; i < N; i++) {
			if ((i & 0x7fff) >= 0x7bff)
				continue; /* max finite, inf, NaN: checked below */
			double a = f16_value((uint16_t)i), b = f16_value((uint16_t)(i + 1));
			float mid = (float)((a + b) / 2); /* exact: fp16 has 11 bits */
			uint16_t even = (uint16_t)(i & 1 ? i + 1 : i);
			ties &= gpt_f32_to_f16(mid) == even;
			if (mid != 0.0f)
				near &= gpt_f32_to_f16(from_bits(bits(mid) - 1)) == i &&
					gpt_f32_to_f16(from_bits(bits(mid) + 1)) == (uint16_t)(i + 1);
		}
		ok(ties, "fp16: every halfway case rounds to even (subnormals included)");
		ok(near, "fp16: one ulp off the halfway point rounds to the nearer value");
	}

	/* fp16 edges */
	is_int(gpt_f32_to_f16(65504.0f), 0x7bff, "fp16: 65504 is the largest finite value");
	is_int(gpt_f32_to_f16(65519.996f), 0x7bff, "fp16: just below 65520 stays finite");
	is_int(gpt_f32_to_f16(65520.0f), 0x7c00, "fp16: 65520 rounds (to even) to infinity");
	is_int(gpt_f32_to_f16(1e6f), 0x7c00, "fp16: overflow is +inf");
	is_int(gpt_f32_to_f16(-1e6f), 0xfc00, "fp16: negative overflow is -inf");
	is_int(gpt_f32_to_f16(0x1p-25f), 0x0000, "fp16: half the smallest subnormal ties to 0");
	is_int(gpt_f32_to_f16(0x1.8p-25f), 0x0001, "fp16: 0.75 of the smallest subnormal is 1");
	is_int(gpt_f32_to_f16(-0x1p-30f), 0x8000, "fp16: underflow keeps the sign (-0)");
	is_int(gpt_f32_to_f16(0x1p-24f), 0x0001, "fp16: 2^-24 is the smallest subnormal");
	is_int(gpt_f32_to_f16(0x1.ffcp-15f), 0x0400, "fp16: the largest subnormal + half rounds up to the smallest normal");
	ok(isnan(gpt_f16_to_f32(gpt_f32_to_f16(NAN))), "fp16: NaN stays NaN");
	/* bf16 edges */
	is_int(gpt_f32_to_bf16(from_bits(0x7f7fffffu)), 0x7f80, "bf16: FLT_MAX rounds to +inf");
	is_int(gpt_f32_to_bf16(from_bits(0x7f800001u)) & 0x7fc0, 0x7fc0,
	       "bf16: a signalling NaN with low payload stays NaN (quiet)");
	is_int(gpt_f32_to_bf16(from_bits(0x00008000u)), 0x0000, "bf16: subnormal tie to even (0)");
	is_int(gpt_f32_to_bf16(from_bits(0x00018000u)), 0x0002, "bf16: subnormal tie to even (2)");

	/* bf16 <-> fp16 directly, and a dtype that is not a float */
	{
		uint16_t a = 0x3c01, b, c; /* fp16 1 + 2^-10 */
		CHK(be.ops->convert(&be, &b, GPT_DTYPE_BF16, &a, GPT_DTYPE_F16, 1, &chk_err));
		is_int(b, 0x3f80, "fp16 1+2^-10 -> bf16 rounds to 1.0");
		CHK(be.ops->convert(&be, &c, GPT_DTYPE_F16, &b, GPT_DTYPE_BF16, 1, &chk_err));
		is_int(c, 0x3c00, "bf16 1.0 -> fp16 1.0");
		gpt_err err = {0};
		int32_t i32 = 0;
		ok(be.ops->convert(&be, &i32, GPT_DTYPE_I32, f, GPT_DTYPE_F32, 1, &err) != 0 &&
		   strstr(err.msg, "int32"), "convert to int32 is refused: %s", err.msg);
	}
	{
		/* the vector paths (F16C, AVX2) against the scalar functions: every
		 * 16-bit value, and about a million 32-bit patterns (every 4099th,
		 * which walks through every exponent, ties, NaNs and infinities) */
		enum { NV = 65536 };
		static uint16_t all[NV], back[NV];
		static float wide[NV];
		long bad = 0;
		for (int i = 0; i < NV; i++)
			all[i] = (uint16_t)i;
		gpt_convert(wide, GPT_DTYPE_F32, all, GPT_DTYPE_F16, NV, &chk_err);
		for (int i = 0; i < NV; i++) {
			float r = gpt_f16_to_f32((uint16_t)i);
			bad += memcmp(&r, &wide[i], 4) != 0;
		}
		gpt_convert(wide, GPT_DTYPE_F32, all, GPT_DTYPE_BF16, NV, &chk_err);
		for (int i = 0; i < NV; i++) {
			float r = gpt_bf16_to_f32((uint16_t)i);
			bad += memcmp(&r, &wide[i], 4) != 0;
		}
		is_int(bad, 0, "every fp16 and bf16 value widens as the scalar functions do");
		long bad16 = 0, badbf = 0;
		for (uint64_t base = 0; base < (1ull << 32); base += (uint64_t)NV * 4099) {
			for (int i = 0; i < NV; i++) {
				uint32_t u = (uint32_t)(base + (uint64_t)i * 4099);
				memcpy(&wide[i], &u, 4);
			}
			gpt_convert(back, GPT_DTYPE_F16, wide, GPT_DTYPE_F32, NV, &chk_err);
			for (int i = 0; i < NV; i++)
				bad16 += back[i] != gpt_f32_to_f16(wide[i]);
			gpt_convert(back, GPT_DTYPE_BF16, wide, GPT_DTYPE_F32, NV, &chk_err);
			for (int i = 0; i < NV; i++)
				badbf += back[i] != gpt_f32_to_bf16(wide[i]);
		}
		is_int(bad16, 0, "fp32 -> fp16 in blocks rounds as the scalar function");
		is_int(badbf, 0, "fp32 -> bf16 in blocks rounds as the scalar function");
	}
	{
		/* split master weights: every high half with low halves at and
		 * around the rounding point, then a walk through every 4099th
		 * pattern; the halves join to the same bits (NaN to a NaN), and
		 * the high half is round to nearest, ties away from zero */
		enum { NS = 65536 * 8 };
		static const uint16_t lows[8] = {0, 1, 0x7fff, 0x8000, 0x8001, 0xfffe, 0xffff, 0x1234};
		static float x[NS], y[NS];
		static uint16_t hi[NS], lo[NS], hi2[NS];
		long joined = 0, round = 0, nan_ok = 0, nans = 0, tot = 0;
		for (uint64_t pass = 0; pass < 1 + (1ull << 32) / ((uint64_t)NS * 4099) + 1; pass++) {
			for (int i = 0; i < NS; i++) {
				uint32_t u = pass == 0 ? (uint32_t)(i / 8) << 16 | lows[i % 8]
						       : (uint32_t)(((pass - 1) * NS + (uint64_t)i) * 4099);
				x[i] = from_bits(u);
			}
			gpt_bf16_split(hi, lo, x, NS);
			gpt_bf16_split(hi2, NULL, x, NS);
			gpt_bf16_join(y, hi, lo, NS);
			for (int i = 0; i < NS; i++, tot++) {
				uint32_t u = bits(x[i]);
				if (isnan(x[i])) {
					nans++;
					nan_ok += isnan(y[i]) && isnan(gpt_bf16_to_f32(hi[i])) && hi2[i] == hi[i];
					continue;
				}
				joined += bits(y[i]) == u && lo[i] == (uint16_t)u;
				uint16_t want = (u & 0xffff) == 0x8000 ? (uint16_t)((u >> 16) + 1)
									: gpt_f32_to_bf16(x[i]);
				round += hi[i] == want && hi2[i] == want;
			}
		}
		is_int(joined, tot - nans, "bf16 split master: %ld patterns join back bit for bit", tot - nans);
		is_int(round, tot - nans,
		       "bf16 split master: the high half rounds to nearest as convert does, ties away from zero");
		is_int(nan_ok, nans, "bf16 split master: %ld NaNs split to a NaN and join to a NaN", nans);
	}
	free(h), free(h2), free(f);
	gpt_backend_cpu_free(&be);
	return done_testing();
}
