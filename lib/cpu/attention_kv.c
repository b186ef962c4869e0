/* Causal attention for generation, against a KV cache that the op extends
 * with the new tokens' keys and values. */
#include "cpu/kernels.h"

#include <math.h>
#include <omp.h>
#include <string.h>

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
	#pragma omp parallel for num_threads(be->threads) collapse(3) schedule(static)
	for (int64_t b = 0; b < B; b++)
		for (int64_t h = 0; h < NH; h++)
			for (int64_t i = 0; i < Tn; i++) {
				float *p = tmp_all + (int64_t)omp_get_thread_num() * (t0 + Tn);
				const float *q = x + (b * Tn + i) * C3 + h * HS;
				const float *kh = kc + (b * NH + h) * maxT * HS;
				const float *vh = vc + (b * NH + h) * maxT * HS;
				int64_t n = t0 + i + 1;
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
				float *orow = o + (b * Tn + i) * Cl + h * HS;
				for (int64_t e = 0; e < HS; e++)
					orow[e] = 0.0f;
				for (int64_t j = 0; j < n; j++) {
					float w = p[j] * inv;
					for (int64_t e = 0; e < HS; e++)
						orow[e] += w * vh[j * HS + e];
				}
			}
	return 0;
}
