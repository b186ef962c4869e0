/* Causal attention for generation, against a KV cache that the op extends
 * with the new tokens' keys and values. One query attends to up to maxT
 * cached keys, so each head is a loop of dot products: the AVX-512 path
 * takes them 16 lanes at a time and the softmax's exponentials 16 at a
 * time (the plain C loop's dot products are one long dependency chain). */
#include "cpu/kernels.h"
#include "cpu/simd_avx512.h"
#include "cpu/vexp.h"

#include <math.h>
#include <omp.h>
#include <string.h>

/* orow (HS) = softmax(sc q . k_j, j < n) weighted sum of v_j; p: n floats
 * of scratch. */
static void attend_c(const float *q, const float *kh, const float *vh, int64_t n, int64_t HS,
		     float sc, float *p, float *orow)
{
	float m = -INFINITY, sum = 0.0f;
	for (int64_t j = 0; j < n; j++) {
		float s = 0.0f;
		for (int64_t e = 0; e < HS; e++)
			s += q[e] * kh[j * HS + e];
		p[j] = s * sc;
		m = p[j] > m ? p[j] : m;
	}
	for (int64_t j = 0; j < n; j++) {
		p[j] = expf(p[j] - m);
		sum += p[j];
	}
	float inv = 1.0f / sum;
	for (int64_t e = 0; e < HS; e++)
		orow[e] = 0.0f;
	for (int64_t j = 0; j < n; j++) {
		float w = p[j] * inv;
		for (int64_t e = 0; e < HS; e++)
			orow[e] += w * vh[j * HS + e];
	}
}

#if defined(__x86_64__)
GPT_AVX512 static void attend_avx512(const float *q, const float *kh, const float *vh, int64_t n,
				     int64_t HS, float sc, float *p, float *orow)
{
	__m512 mv = _mm512_set1_ps(-INFINITY);
	for (int64_t j0 = 0; j0 < n; j0 += 16) {
		/* 16 keys' scores, one vector of them */
		int64_t jn = n - j0 < 16 ? n - j0 : 16;
		for (int64_t j = j0; j < j0 + jn; j++) {
			const float *k = kh + j * HS;
			__m512 a = _mm512_setzero_ps();
			for (int64_t e = 0; e < HS; e += 16) {
				__mmask16 mk = gpt_mask16(HS - e);
				a = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mk, q + e),
						    _mm512_maskz_loadu_ps(mk, k + e), a);
			}
			p[j] = _mm512_reduce_add_ps(a) * sc;
		}
		__mmask16 mj = gpt_mask16(jn);
		mv = _mm512_mask_max_ps(mv, mj, mv, _mm512_maskz_loadu_ps(mj, p + j0));
	}
	__m512 m = _mm512_set1_ps(_mm512_reduce_max_ps(mv)), sum = _mm512_setzero_ps();
	for (int64_t j = 0; j < n; j += 16) {
		__mmask16 mj = gpt_mask16(n - j);
		__m512 e = gpt_exp_512(_mm512_sub_ps(_mm512_maskz_loadu_ps(mj, p + j), m));
		_mm512_mask_storeu_ps(p + j, mj, e);
		sum = _mm512_mask_add_ps(sum, mj, sum, e);
	}
	__m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
	for (int64_t e = 0; e < HS; e += 16) {
		__mmask16 me = gpt_mask16(HS - e);
		__m512 o = _mm512_setzero_ps();
		for (int64_t j = 0; j < n; j++)
			o = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(p[j]), inv),
					    _mm512_maskz_loadu_ps(me, vh + j * HS + e), o);
		_mm512_mask_storeu_ps(orow + e, me, o);
	}
}
#else
#define attend_avx512 attend_c
#endif

int gpt_cpu_attention_kv(gpt_backend *be, void *out, void *kcache, void *vcache,
			 const void *qkv, int64_t B, int64_t Tn, int64_t t0, int64_t maxT,
			 int64_t NH, int64_t HS, gpt_err *err)
{
	int rc = gpt_cpu_check_sizes("attention_kv", err, 6, B, Tn, t0, maxT, NH, HS);
	if (rc)
		return rc;
	if (t0 + Tn > maxT)
		return gpt_err_set(err, GPT_EUSAGE,
				   "attention_kv: positions up to %lld do not fit the cache of %lld; "
				   "shorten the prompt or the generation",
				   (long long)(t0 + Tn), (long long)maxT);
	if (HS == 0)
		return gpt_err_set(err, GPT_EINTERNAL, "attention_kv: head size is 0");
	rc = gpt_backend_scratch(be, (size_t)(be->threads * (t0 + Tn)) * sizeof(float), err);
	if (rc)
		return rc;
	const float *x = qkv;
	float *o = out, *kc = kcache, *vc = vcache;
	int64_t Cl = NH * HS, C3 = 3 * Cl;
	float sc = 1.0f / sqrtf((float)HS);
	for (int64_t b = 0; b < B; b++)
		for (int64_t i = 0; i < Tn; i++)
			for (int64_t h = 0; h < NH; h++) {
				const float *row = x + (b * Tn + i) * C3 + h * HS;
				int64_t at = ((b * NH + h) * maxT + t0 + i) * HS;
				memcpy(kc + at, row + Cl, (size_t)HS * sizeof *kc);
				memcpy(vc + at, row + 2 * Cl, (size_t)HS * sizeof *vc);
			}
	float *tmp_all = be->scratch;
	int vec = gpt_cpu_avx512();
	#pragma omp parallel for num_threads(be->threads) collapse(3) schedule(static)
	for (int64_t b = 0; b < B; b++)
		for (int64_t h = 0; h < NH; h++)
			for (int64_t i = 0; i < Tn; i++) {
				float *p = tmp_all + (int64_t)omp_get_thread_num() * (t0 + Tn);
				const float *q = x + (b * Tn + i) * C3 + h * HS;
				const float *kh = kc + (b * NH + h) * maxT * HS;
				const float *vh = vc + (b * NH + h) * maxT * HS;
				float *orow = o + (b * Tn + i) * Cl + h * HS;
				if (vec)
					attend_avx512(q, kh, vh, t0 + i + 1, HS, sc, p, orow);
				else
					attend_c(q, kh, vh, t0 + i + 1, HS, sc, p, orow);
			}
	return 0;
}
