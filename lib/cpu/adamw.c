/* AdamW over a flat range, with optional fp32 master weights (fp32 storage;
 * 16-bit parameters go through lowp.c, which updates the master here). */
#include "cpu/kernels.h"

#include <math.h>
#include <omp.h>

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
/* The update streams 28 bytes an element (read g, m, v, w; write m, v, w):
 * with 16 lanes it runs at memory speed, where scalar sqrtss and divss did
 * not. */
__attribute__((target("avx512f"))) static void adamw_range_512(const adamw_k *k, float *p, float *w,
								const float *g, float *m, float *v,
								int64_t n)
{
	__m512 b1 = _mm512_set1_ps(k->b1), b2 = _mm512_set1_ps(k->b2), a1 = _mm512_set1_ps(k->a1);
	__m512 a2 = _mm512_set1_ps(k->a2), c1 = _mm512_set1_ps(k->c1), c2 = _mm512_set1_ps(k->c2);
	__m512 lr = _mm512_set1_ps(k->lr), wd = _mm512_set1_ps(k->wd), eps = _mm512_set1_ps(k->eps);
	__m512 gs = _mm512_set1_ps(k->gs);
	int64_t i = 0;
	for (; i + 16 <= n; i += 16) {
		__m512 gi = _mm512_mul_ps(_mm512_loadu_ps(g + i), gs);
		__m512 mi = _mm512_add_ps(_mm512_mul_ps(b1, _mm512_loadu_ps(m + i)), _mm512_mul_ps(a1, gi));
		__m512 vi = _mm512_add_ps(_mm512_mul_ps(b2, _mm512_loadu_ps(v + i)),
					  _mm512_mul_ps(_mm512_mul_ps(a2, gi), gi));
		_mm512_storeu_ps(m + i, mi);
		_mm512_storeu_ps(v + i, vi);
		__m512 wi = _mm512_loadu_ps(w + i);
		__m512 den = _mm512_add_ps(_mm512_sqrt_ps(_mm512_mul_ps(vi, c2)), eps);
		__m512 upd = _mm512_add_ps(_mm512_div_ps(_mm512_mul_ps(mi, c1), den), _mm512_mul_ps(wd, wi));
		wi = _mm512_sub_ps(wi, _mm512_mul_ps(lr, upd));
		_mm512_storeu_ps(w + i, wi);
		if (p != w)
			_mm512_storeu_ps(p + i, wi);
	}
	adamw_range_s(k, p + i, w + i, g + i, m + i, v + i, n - i);
}
#endif

static void adamw_range(const adamw_k *k, float *p, float *w, const float *g, float *m, float *v,
			int64_t n)
{
#ifdef ADAMW_X86
	if (__builtin_cpu_supports("avx512f")) {
		adamw_range_512(k, p, w, g, m, v, n);
		return;
	}
#endif
	adamw_range_s(k, p, w, g, m, v, n);
}

int gpt_cpu_adamw(gpt_backend *be, void *param, float *master, uint16_t *lo, const void *grad,
		  float *m, float *v, int64_t n, const gpt_adamw *h, gpt_err *err)
{
	int rc = gpt_cpu_check_sizes("adamw", err, 1, n);
	if (rc)
		return rc;
	if (lo)
		return gpt_err_set(err, GPT_EINTERNAL, "adamw: fp32 parameters have no split master weights");
	if (h->t < 1)
		return gpt_err_set(err, GPT_EINTERNAL, "adamw: step %lld is not 1-based",
				   (long long)h->t);
	float *p = param;
	float *w = master ? master : p;
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
			adamw_range(&k, p + i0, w + i0, (const float *)grad + i0, m + i0, v + i0, i1 - i0);
	}
	return 0;
}
