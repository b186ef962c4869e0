/* Dropout with counter-based masks: the backward regenerates the forward's
 * mask from the same coordinates instead of storing it. A row's Philox
 * calls run sixteen at once with AVX-512, eight with AVX2, else one at a
 * time: the same bits on every path (gpt_cpu_dropout_row_on). */
#include "cpu/kernels.h"
#include "cpu/simd_avx512.h"

#include <string.h>

/* Features [f, e) of a row, a Philox call a block of eight (philox.h). */
static void dropout_range(float *out, const float *in, int64_t f, int64_t e, const gpt_dropout *d,
			  uint32_t thr, float scale, uint64_t sample, uint64_t position, int64_t feature)
{
	while (f < e) {
		uint64_t g = (uint64_t)(feature + f);
		uint32_t r[4];
		gpt_rng_block(r, d->key.seed, d->key.step, d->key.layer, d->key.site, sample, position, g);
		for (unsigned k = (unsigned)(g & 7u); k < 8 && f < e; k++, f++)
			out[f] = gpt_rng_pick(r, k) >= thr ? in[f] * scale : 0.0f;
	}
}

#if defined(__x86_64__)
/* The high halves of the 32-bit products a * m, lane by lane. */
GPT_AVX512_INLINE __m512i mulhi_epu32(__m512i a, __m512i m)
{
	__m512i even = _mm512_mul_epu32(a, m), odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m);
	return _mm512_mask_blend_epi32((__mmask16)0xaaaa, _mm512_srli_epi64(even, 32), odd);
}

/* n runs of 128 features from out, in (the first a multiple of 8 at
 * global feature g): gpt_philox4x32_10 in sixteen lanes, a block a lane.
 * Block i's words k = 0..3 hold its elements 2k (low half) and 2k + 1
 * (high), so as 16-bit values in element order they are word 4i + k. */
GPT_AVX512 static void dropout_runs_512(float *out, const float *in, int64_t n, const gpt_dropout *d,
					uint32_t thr, float scale, uint64_t sample, uint64_t position,
					uint64_t g)
{
	const __m512i m0 = _mm512_set1_epi32((int)GPT_PHILOX_M0), m1 = _mm512_set1_epi32((int)GPT_PHILOX_M1);
	const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
	const __m512i th = _mm512_set1_epi32((int)thr);
	const __m512 sc = _mm512_set1_ps(scale);
	for (int64_t r = 0; r < n; r++) {
		__m512i c0 = _mm512_add_epi32(_mm512_set1_epi32((int)(uint32_t)((g >> 3) + 16 * (uint64_t)r)), lane);
		__m512i c1 = _mm512_set1_epi32((int)(uint32_t)position), c2 = _mm512_set1_epi32((int)(uint32_t)sample);
		__m512i c3 = _mm512_set1_epi32((int)((d->key.layer << 8) | (d->key.site & 0xffu)));
		uint32_t k0 = d->key.seed, k1 = d->key.step;
		for (int round = 0; round < 10; round++) {
			__m512i lo0 = _mm512_mullo_epi32(c0, m0), hi0 = mulhi_epu32(c0, m0);
			__m512i lo1 = _mm512_mullo_epi32(c2, m1), hi1 = mulhi_epu32(c2, m1);
			c0 = _mm512_xor_si512(_mm512_xor_si512(hi1, c1), _mm512_set1_epi32((int)k0));
			c1 = lo1;
			c2 = _mm512_xor_si512(_mm512_xor_si512(hi0, c3), _mm512_set1_epi32((int)k1));
			c3 = lo0;
			k0 += GPT_PHILOX_W0;
			k1 += GPT_PHILOX_W1;
		}
		uint32_t w[4][16], draws[64];
		_mm512_storeu_si512(w[0], c0);
		_mm512_storeu_si512(w[1], c1);
		_mm512_storeu_si512(w[2], c2);
		_mm512_storeu_si512(w[3], c3);
		for (int i = 0; i < 16; i++)
			for (int k = 0; k < 4; k++)
				draws[4 * i + k] = w[k][i];
		const uint16_t *dr = (const uint16_t *)draws;
		for (int j = 0; j < 128; j += 16) {
			__m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(dr + j)));
			__mmask16 keep = _mm512_cmp_epu32_mask(v, th, _MM_CMPINT_NLT);
			_mm512_storeu_ps(out + 128 * r + j, _mm512_maskz_mul_ps(keep, _mm512_loadu_ps(in + 128 * r + j), sc));
		}
	}
}

#define GPT_AVX2 __attribute__((target("avx2")))

/* mulhi_epu32 in eight lanes */
GPT_AVX2 static inline __m256i mulhi_epu32_256(__m256i a, __m256i m)
{
	__m256i even = _mm256_mul_epu32(a, m), odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
	return _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xaa);
}

/* dropout_runs_512 with AVX2: runs of 64 features, eight blocks a run. The
 * draws and the threshold are below 2^16, so the signed compare is the
 * unsigned one. */
GPT_AVX2 static void dropout_runs_256(float *out, const float *in, int64_t n, const gpt_dropout *d,
				      uint32_t thr, float scale, uint64_t sample, uint64_t position,
				      uint64_t g)
{
	const __m256i m0 = _mm256_set1_epi32((int)GPT_PHILOX_M0), m1 = _mm256_set1_epi32((int)GPT_PHILOX_M1);
	const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
	const __m256i th = _mm256_set1_epi32((int)thr);
	const __m256 sc = _mm256_set1_ps(scale);
	for (int64_t r = 0; r < n; r++) {
		__m256i c0 = _mm256_add_epi32(_mm256_set1_epi32((int)(uint32_t)((g >> 3) + 8 * (uint64_t)r)), lane);
		__m256i c1 = _mm256_set1_epi32((int)(uint32_t)position), c2 = _mm256_set1_epi32((int)(uint32_t)sample);
		__m256i c3 = _mm256_set1_epi32((int)((d->key.layer << 8) | (d->key.site & 0xffu)));
		uint32_t k0 = d->key.seed, k1 = d->key.step;
		for (int round = 0; round < 10; round++) {
			__m256i lo0 = _mm256_mullo_epi32(c0, m0), hi0 = mulhi_epu32_256(c0, m0);
			__m256i lo1 = _mm256_mullo_epi32(c2, m1), hi1 = mulhi_epu32_256(c2, m1);
			c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32((int)k0));
			c1 = lo1;
			c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32((int)k1));
			c3 = lo0;
			k0 += GPT_PHILOX_W0;
			k1 += GPT_PHILOX_W1;
		}
		uint32_t w[4][8], draws[32];
		_mm256_storeu_si256((__m256i *)w[0], c0);
		_mm256_storeu_si256((__m256i *)w[1], c1);
		_mm256_storeu_si256((__m256i *)w[2], c2);
		_mm256_storeu_si256((__m256i *)w[3], c3);
		for (int i = 0; i < 8; i++)
			for (int k = 0; k < 4; k++)
				draws[4 * i + k] = w[k][i];
		const uint16_t *dr = (const uint16_t *)draws;
		for (int j = 0; j < 64; j += 8) {
			__m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(dr + j)));
			__m256 drop = _mm256_castsi256_ps(_mm256_cmpgt_epi32(th, v));
			__m256 y = _mm256_mul_ps(_mm256_loadu_ps(in + 64 * r + j), sc);
			_mm256_storeu_ps(out + 64 * r + j, _mm256_andnot_ps(drop, y));
		}
	}
}
#endif

int gpt_cpu_dropout_row_on(int path, float *out, const float *in, int64_t F, const gpt_dropout *d,
			   uint32_t threshold, float scale, int64_t sample, int64_t position, int64_t feature)
{
	int64_t f = 0;
	if (path < 0 || path > 2)
		return -1;
#if defined(__x86_64__)
	int64_t head = (8 - feature % 8) % 8, run = path == 2 ? 128 : 64;
	if (path == 2 && !gpt_cpu_avx512())
		return -1;
	if (path == 1 && !__builtin_cpu_supports("avx2"))
		return -1;
	if (path > 0 && F - head >= run) {
		dropout_range(out, in, 0, head, d, threshold, scale, (uint64_t)sample, (uint64_t)position,
			      feature);
		int64_t n = (F - head) / run;
		if (path == 2)
			dropout_runs_512(out + head, in + head, n, d, threshold, scale, (uint64_t)sample,
					 (uint64_t)position, (uint64_t)(feature + head));
		else
			dropout_runs_256(out + head, in + head, n, d, threshold, scale, (uint64_t)sample,
					 (uint64_t)position, (uint64_t)(feature + head));
		f = head + run * n;
	}
#else
	if (path > 0)
		return -1;
#endif
	dropout_range(out, in, f, F, d, threshold, scale, (uint64_t)sample, (uint64_t)position, feature);
	return 0;
}

void gpt_cpu_dropout_row(float *out, const float *in, int64_t F, const gpt_dropout *d,
			 uint32_t threshold, float scale, int64_t sample, int64_t position,
			 int64_t feature)
{
	int path = 0; /* the widest this CPU runs; rows shorter than a run (the
		       * attention's first ones) skip the checks */
#if defined(__x86_64__)
	if (F >= 64)
		path = gpt_cpu_avx512() ? 2 : __builtin_cpu_supports("avx2") ? 1 : 0;
#endif
	gpt_cpu_dropout_row_on(path, out, in, F, d, threshold, scale, sample, position, feature);
}

int gpt_cpu_dropout_check(const char *op, const gpt_dropout *d, gpt_err *err)
{
	if (!d)
		return 0;
	if (!(d->p >= 0.0f && d->p < 1.0f))
		return gpt_err_set(err, GPT_EINTERNAL,
				   "%s: dropout probability %g is outside [0, 1)", op, (double)d->p);
	if (d->sample0 < 0 || d->feature0 < 0 || d->t0 < 0)
		return gpt_err_set(err, GPT_EINTERNAL,
				   "%s: negative dropout offset (sample0 %lld, feature0 %lld, t0 %lld)", op,
				   (long long)d->sample0, (long long)d->feature0, (long long)d->t0);
	if (d->key.layer >= (1u << 24) || d->key.site >= 256u)
		return gpt_err_set(err, GPT_EINTERNAL,
				   "%s: dropout layer %u or site %u out of range (< 2^24, < 256)",
				   op, d->key.layer, d->key.site);
	return 0;
}

/* Both directions are the same map: y = x * mask / (1 - p). */
static int apply(gpt_backend *be, const char *op, float *out, const float *inp, int64_t B,
		 int64_t T, int64_t F, const gpt_dropout *d, gpt_err *err)
{
	int rc = gpt_cpu_check_sizes(op, err, 3, B, T, F);
	if (!rc)
		rc = gpt_cpu_dropout_check(op, d, err);
	if (rc)
		return rc;
	if (!d)
		return gpt_err_set(err, GPT_EINTERNAL, "%s: no dropout site given", op);
	if (d->p == 0.0f) {
		if (out != inp)
			memmove(out, inp, (size_t)(B * T * F) * sizeof *out);
		return 0;
	}
	uint32_t thr = gpt_dropout_threshold(d->p);
	float scale = gpt_dropout_scale(d->p);
	#pragma omp parallel for num_threads(be->threads) schedule(static) if (B * T * F > 4096)
	for (int64_t r = 0; r < B * T; r++) {
		int64_t b = r / T, t = r % T;
		gpt_cpu_dropout_row(out + r * F, inp + r * F, F, d, thr, scale, d->sample0 + b, d->t0 + t,
				    d->feature0);
	}
	return 0;
}

int gpt_cpu_dropout_fwd(gpt_backend *be, void *out, const void *inp, int64_t B, int64_t T,
			int64_t F, const gpt_dropout *d, gpt_err *err)
{
	return apply(be, "dropout_fwd", out, inp, B, T, F, d, err);
}

int gpt_cpu_dropout_bwd(gpt_backend *be, void *dinp, const void *dout, int64_t B, int64_t T,
			int64_t F, const gpt_dropout *d, gpt_err *err)
{
	return apply(be, "dropout_bwd", dinp, dout, B, T, F, d, err);
}
