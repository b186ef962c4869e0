/* AdamW over a flat range, with optional fp32 master weights (fp32 storage;
 * 16-bit parameters go through lowp.c, which updates the master here), or
 * bf16 parameters with split master weights (gpt_cpu_adamw_split). */
#include "cpu/kernels.h"

#include <math.h>
#include <omp.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define ADAMW_X86 1
#endif

typedef struct adamw_k {
	float b1, b2, a1, a2, c1, c2, lr, wd, eps, gs;
} adamw_k;

/* One element; the vector path below does the same operations in the same
 * order (no fused multiply-add: -std=c11 does not contract), so an element
 * gets the same bits wherever a shard or a vector cuts the range. */
static inline float adamw_one(const adamw_k *k, float *w, float g, float *m, float *v)
{
	float gi = g * k->gs;
	float mi = k->b1 * *m + k->a1 * gi;
	float vi = k->b2 * *v + k->a2 * gi * gi;
	*m = mi;
	*v = vi;
	float wi = *w;
	wi -= k->lr * (mi * k->c1 / (sqrtf(vi * k->c2) + k->eps) + k->wd * wi);
	*w = wi;
	return wi;
}

static void adamw_range_s(const adamw_k *k, float *p, float *w, const float *g, float *m, float *v,
			  int64_t n)
{
	for (int64_t i = 0; i < n; i++) {
		float wi = adamw_one(k, w + i, g[i], m + i, v + i);
		if (p != w)
			p[i] = wi;
	}
}

#ifdef ADAMW_X86
/* The coefficients in 16 lanes, and adamw_one on 16 elements at g, m, v
 * (updated) with the weights wi: the new weights. */
typedef struct adamw_k512 {
	__m512 b1, b2, a1, a2, c1, c2, lr, wd, eps, gs;
} adamw_k512;

__attribute__((target("avx512f"))) static inline adamw_k512 adamw_lanes(const adamw_k *k)
{
	return (adamw_k512){_mm512_set1_ps(k->b1), _mm512_set1_ps(k->b2), _mm512_set1_ps(k->a1),
			    _mm512_set1_ps(k->a2), _mm512_set1_ps(k->c1), _mm512_set1_ps(k->c2),
			    _mm512_set1_ps(k->lr), _mm512_set1_ps(k->wd), _mm512_set1_ps(k->eps),
			    _mm512_set1_ps(k->gs)};
}

__attribute__((target("avx512f"), always_inline)) static inline __m512
adamw_16(const adamw_k512 *c, __m512 wi, const float *g, float *m, float *v)
{
	__m512 gi = _mm512_mul_ps(_mm512_loadu_ps(g), c->gs);
	__m512 mi = _mm512_add_ps(_mm512_mul_ps(c->b1, _mm512_loadu_ps(m)), _mm512_mul_ps(c->a1, gi));
	__m512 vi = _mm512_add_ps(_mm512_mul_ps(c->b2, _mm512_loadu_ps(v)),
				  _mm512_mul_ps(_mm512_mul_ps(c->a2, gi), gi));
	_mm512_storeu_ps(m, mi);
	_mm512_storeu_ps(v, vi);
	__m512 den = _mm512_add_ps(_mm512_sqrt_ps(_mm512_mul_ps(vi, c->c2)), c->eps);
	__m512 upd = _mm512_add_ps(_mm512_div_ps(_mm512_mul_ps(mi, c->c1), den), _mm512_mul_ps(c->wd, wi));
	return _mm512_sub_ps(wi, _mm512_mul_ps(c->lr, upd));
}

/* The update streams 28 bytes an element (read g, m, v, w; write m, v, w):
 * with 16 lanes it runs at memory speed, where scalar sqrtss and divss did
 * not. */
__attribute__((target("avx512f"))) static void adamw_range_512(const adamw_k *k, float *p, float *w,
								const float *g, float *m, float *v,
								int64_t n)
{
	adamw_k512 c = adamw_lanes(k);
	int64_t i = 0;
	for (; i + 16 <= n; i += 16) {
		__m512 wi = adamw_16(&c, _mm512_loadu_ps(w + i), g + i, m + i, v + i);
		_mm512_storeu_ps(w + i, wi);
		if (p != w)
			_mm512_storeu_ps(p + i, wi);
	}
	adamw_range_s(k, p + i, w + i, g + i, m + i, v + i, n - i);
}
#endif

/* Split master weights: each element joined, updated and split again in
 * one pass (gpt_bf16_join_bits, gpt_bf16_split_hi). */
static void split_range_s(const adamw_k *k, uint16_t *hi, uint16_t *lo, const float *g, float *m,
			  float *v, int64_t n)
{
	for (int64_t i = 0; i < n; i++) {
		uint32_t u = gpt_bf16_join_bits(hi[i], lo[i]);
		float w;
		memcpy(&w, &u, 4);
		adamw_one(k, &w, g[i], m + i, v + i);
		memcpy(&u, &w, 4);
		lo[i] = (uint16_t)u;
		hi[i] = gpt_bf16_split_hi(u);
	}
}

#ifdef ADAMW_X86
__attribute__((target("avx512f"))) static void split_range_512(const adamw_k *k, uint16_t *hi,
								uint16_t *lo, const float *g, float *m,
								float *v, int64_t n)
{
	adamw_k512 c = adamw_lanes(k);
	const __m512i half = _mm512_set1_epi32(0x8000), quiet = _mm512_set1_epi32(0x40);
	const __m512i abs = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
	int64_t i = 0;
	for (; i + 16 <= n; i += 16) {
		__m512i l = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(lo + i)));
		__m512i h = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(hi + i)));
		/* (hi - carry) << 16 | lo: the shift drops what the subtraction borrowed */
		__m512 wi = _mm512_castsi512_ps(
			_mm512_or_si512(_mm512_slli_epi32(_mm512_sub_epi32(h, _mm512_srli_epi32(l, 15)), 16), l));
		__m512i u = _mm512_castps_si512(adamw_16(&c, wi, g + i, m + i, v + i));
		__m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, half), 16);
		__mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, abs), inf);
		r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(_mm512_srli_epi32(u, 16), quiet));
		_mm256_storeu_si256((__m256i *)(lo + i), _mm512_cvtepi32_epi16(u));
		_mm256_storeu_si256((__m256i *)(hi + i), _mm512_cvtepi32_epi16(r));
	}
	split_range_s(k, hi + i, lo + i, g + i, m + i, v + i, n - i);
}
#endif

/* One thread's piece: the fp32 weights w (p their copy), or with lo the
 * split master weights, p the high halves. */
static void adamw_range(const adamw_k *k, void *p, float *w, uint16_t *lo, const float *g, float *m,
			float *v, int64_t n)
{
#ifdef ADAMW_X86
	if (__builtin_cpu_supports("avx512f")) {
		if (lo)
			split_range_512(k, p, lo, g, m, v, n);
		else
			adamw_range_512(k, p, w, g, m, v, n);
		return;
	}
#endif
	if (lo)
		split_range_s(k, p, lo, g, m, v, n);
	else
		adamw_range_s(k, p, w, g, m, v, n);
}

/* gpt_cpu_adamw, and with lo the split master weights' update (param their
 * high halves, grad fp32), the same threads over the same pieces. */
static int adamw_run(gpt_backend *be, void *param, float *master, uint16_t *lo, const float *grad,
		     float *m, float *v, int64_t n, const gpt_adamw *h, gpt_err *err)
{
	int rc = gpt_cpu_check_sizes("adamw", err, 1, n);
	if (rc)
		return rc;
	if (h->t < 1)
		return gpt_err_set(err, GPT_EINTERNAL, "adamw: step %lld is not 1-based",
				   (long long)h->t);
	if (!param && !master)
		return gpt_err_set(err, GPT_EINTERNAL, "adamw: no weights to update");
	size_t ps = lo ? 2 : 4;
	float *w = master ? master : param;
	adamw_k k = {
		.b1 = (float)h->beta1, .b2 = (float)h->beta2,
		.a1 = (float)(1.0 - h->beta1), .a2 = (float)(1.0 - h->beta2),
		.c1 = (float)(1.0 / (1.0 - pow(h->beta1, (double)h->t))),
		.c2 = (float)(1.0 / (1.0 - pow(h->beta2, (double)h->t))),
		.lr = (float)h->lr, .wd = (float)h->weight_decay, .eps = (float)h->eps,
		.gs = (float)h->grad_scale,
	};
	int64_t blocks = (n + 255) / 256;
	#pragma omp parallel num_threads(be->threads) if (n > 16384)
	{
		int nt = omp_get_num_threads(), t = omp_get_thread_num();
		int64_t i0 = blocks * t / nt * 256, i1 = blocks * (t + 1) / nt * 256;
		if (i1 > n)
			i1 = n;
		if (i1 > i0)
			adamw_range(&k, (char *)param + (size_t)i0 * ps, w + i0, lo ? lo + i0 : NULL, grad + i0,
				    m + i0, v + i0, i1 - i0);
	}
	return 0;
}

int gpt_cpu_adamw(gpt_backend *be, void *param, float *master, uint16_t *lo, const void *grad,
		  float *m, float *v, int64_t n, const gpt_adamw *h, gpt_err *err)
{
	if (lo)
		return gpt_err_set(err, GPT_EINTERNAL, "adamw: fp32 parameters have no split master weights");
	return adamw_run(be, param, master, NULL, grad, m, v, n, h, err);
}

int gpt_cpu_adamw_split(gpt_backend *be, uint16_t *hi, uint16_t *lo, const float *grad, float *m,
			float *v, int64_t n, const gpt_adamw *h, gpt_err *err)
{
	return adamw_run(be, hi, NULL, lo, grad, m, v, n, h, err);
}
