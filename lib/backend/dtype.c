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

void gpt_bf16_split(uint16_t *hi, uint16_t *lo, const float *src, size_t n)
{
	#pragma omp parallel for schedule(static) if (n > (1 << 16))
	for (size_t i = 0; i < n; i++) {
		uint32_t u = f32_bits(src[i]);
		if (lo)
			lo[i] = (uint16_t)u;
		hi[i] = gpt_bf16_split_hi(u);
	}
}

void gpt_bf16_join(float *dst, const uint16_t *hi, const uint16_t *lo, size_t n)
{
	#pragma omp parallel for schedule(static) if (n > (1 << 16))
	for (size_t i = 0; i < n; i++)
		dst[i] = bits_f32(gpt_bf16_join_bits(hi[i], lo[i]));
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

/* The conversions of whole blocks of 8 with x86 vector instructions when
 * the processor has them (F16C for fp16, AVX2 for bf16): the same results
 * as the scalar functions above (round to nearest even), which a block
 * holding a NaN falls back to so that NaNs come out the same too. Each
 * returns how many elements it converted (a multiple of 8). */
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>

__attribute__((target("avx,f16c"))) static size_t f32_to_f16_x86(uint16_t *d, const float *s, size_t n)
{
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 v = _mm256_loadu_ps(s + i);
		if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q))) {
			for (size_t k = i; k < i + 8; k++)
				d[k] = gpt_f32_to_f16(s[k]);
			continue;
		}
		_mm_storeu_si128((__m128i *)(d + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
	}
	return i;
}

__attribute__((target("avx,f16c"))) static size_t f16_to_f32_x86(float *d, const uint16_t *s, size_t n)
{
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m128i h = _mm_loadu_si128((const __m128i *)(s + i));
		/* exponent all ones and a mantissa: a NaN */
		__m128i e = _mm_and_si128(h, _mm_set1_epi16(0x7fff));
		if (_mm_movemask_epi8(_mm_cmpgt_epi16(e, _mm_set1_epi16(0x7c00)))) {
			for (size_t k = i; k < i + 8; k++)
				d[k] = gpt_f16_to_f32(s[k]);
			continue;
		}
		_mm256_storeu_ps(d + i, _mm256_cvtph_ps(h));
	}
	return i;
}

__attribute__((target("avx2"))) static size_t f32_to_bf16_x86(uint16_t *d, const float *s, size_t n)
{
	size_t i = 0;
	const __m256i abs = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
	const __m256i bias = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1);
	for (; i + 8 <= n; i += 8) {
		__m256i u = _mm256_loadu_si256((const __m256i *)(s + i));
		if (_mm256_movemask_epi8(_mm256_cmpgt_epi32(_mm256_and_si256(u, abs), inf))) {
			for (size_t k = i; k < i + 8; k++)
				d[k] = gpt_f32_to_bf16(s[k]);
			continue;
		}
		__m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
		__m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(bias, lsb)), 16);
		/* pack the low 16 bits of the 8 lanes, in order */
		__m128i lo = _mm256_castsi256_si128(r), hi = _mm256_extracti128_si256(r, 1);
		_mm_storeu_si128((__m128i *)(d + i), _mm_packus_epi32(lo, hi));
	}
	return i;
}

__attribute__((target("avx2"))) static size_t bf16_to_f32_x86(float *d, const uint16_t *s, size_t n)
{
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(s + i)));
		_mm256_storeu_si256((__m256i *)(d + i), _mm256_slli_epi32(w, 16));
	}
	return i;
}

/* F16C and AVX with the operating system saving the YMM registers, read
 * from CPUID directly: clang before 15 has no "f16c" for
 * __builtin_cpu_supports. */
static int have_f16c(void)
{
	unsigned a, b, c, d;
	if (!__get_cpuid(1, &a, &b, &c, &d))
		return 0;
	unsigned want = (1u << 27) | (1u << 28) | (1u << 29); /* OSXSAVE, AVX, F16C */
	if ((c & want) != want)
		return 0;
	unsigned lo, hi;
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return (lo & 6u) == 6u; /* XMM and YMM state */
}

static size_t convert_fast(void *dst, gpt_dtype dst_t, const void *src, gpt_dtype src_t, size_t n)
{
	/* 0: not known yet, else 1 + F16C + 2 x AVX2; threads that race here
	 * compute the same value */
	static int known;
	int k = __atomic_load_n(&known, __ATOMIC_RELAXED);
	if (!k) {
		__builtin_cpu_init();
		int h = have_f16c();
		k = 1 + h + 2 * (h && __builtin_cpu_supports("avx2"));
		__atomic_store_n(&known, k, __ATOMIC_RELAXED);
	}
	int f16c = (k - 1) & 1, avx2 = (k - 1) >> 1;
	if (src_t == GPT_DTYPE_F32 && dst_t == GPT_DTYPE_F16 && f16c)
		return f32_to_f16_x86(dst, src, n);
	if (src_t == GPT_DTYPE_F16 && dst_t == GPT_DTYPE_F32 && f16c)
		return f16_to_f32_x86(dst, src, n);
	if (src_t == GPT_DTYPE_F32 && dst_t == GPT_DTYPE_BF16 && avx2)
		return f32_to_bf16_x86(dst, src, n);
	if (src_t == GPT_DTYPE_BF16 && dst_t == GPT_DTYPE_F32 && avx2)
		return bf16_to_f32_x86(dst, src, n);
	return 0;
}
#else
static size_t convert_fast(void *dst, gpt_dtype dst_t, const void *src, gpt_dtype src_t, size_t n)
{
	(void)dst, (void)dst_t, (void)src, (void)src_t, (void)n;
	return 0;
}
#endif

static void convert_scalar(void *dst, gpt_dtype dst_t, const void *src, gpt_dtype src_t, size_t i0,
			   size_t n)
{
	const uint16_t *s16 = src;
	const float *s32 = src;
	uint16_t *d16 = dst;
	float *d32 = dst;
	for (size_t i = i0; i < n; i++) {
		float v = src_t == GPT_DTYPE_F32 ? s32[i]
			: src_t == GPT_DTYPE_BF16 ? gpt_bf16_to_f32(s16[i]) : gpt_f16_to_f32(s16[i]);
		if (dst_t == GPT_DTYPE_F32)
			d32[i] = v;
		else if (dst_t == GPT_DTYPE_BF16)
			d16[i] = gpt_f32_to_bf16(v);
		else
			d16[i] = gpt_f32_to_f16(v);
	}
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
	/* chunks of 4096 elements, a multiple of 8, over the threads */
	size_t chunk = 4096, nc = (n + chunk - 1) / chunk;
	size_t ds = gpt_dtype_size(dst_t), ss = gpt_dtype_size(src_t);
	#pragma omp parallel for schedule(static) if (n > (1 << 16))
	for (size_t c = 0; c < nc; c++) {
		size_t a = c * chunk, len = n - a < chunk ? n - a : chunk;
		void *d = (char *)dst + a * ds;
		const void *s = (const char *)src + a * ss;
		convert_scalar(d, dst_t, s, src_t, convert_fast(d, dst_t, s, src_t, len), len);
	}
	return 0;
}
