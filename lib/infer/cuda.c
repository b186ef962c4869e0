/* Generation on a GPU: moving a loaded decoder to the CUDA backend
 * (gpt_infer_model_to_cuda). The forward itself is decode.c's, over the
 * backend's ops and, for int8 weights, gpt_cuda_linear_i8. (Part of
 * lib/infer.) */
#include "infer/infer.h"
#include "infer/layout.h"

#include "cpu/cpu.h"
#if GPT_HAVE_CUDA
#include "cuda/cuda.h"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int gpt_infer_model_to_cuda(gpt_infer_model *m, int device, gpt_err *err)
{
#if !GPT_HAVE_CUDA
	(void)m, (void)device;
	return gpt_err_set(err, GPT_EUSAGE,
			   "--device cuda: this build has no CUDA backend (built with CUDA=0 or without nvcc); use --device cpu");
#else
	if (m->cuda)
		return 0;
	if (m->cap_rows > 0)
		return gpt_err_set(err, GPT_EINTERNAL, "gpt_infer_model_to_cuda: the model has already run on the CPU");
	gpt_dtype wt = m->wdtype;
	if (wt != GPT_DTYPE_F32 && wt != GPT_DTYPE_BF16 && wt != GPT_DTYPE_F16 && wt != GPT_DTYPE_I8)
		return gpt_err_set(err, GPT_EUSAGE,
				   "--device cuda: %s weights have no CUDA kernels; use --device cpu or --dtype bf16",
				   gpt_dtype_name(wt));
	/* before anything goes up: the KV-cache attention kernel would refuse
	 * such heads only at the first prompt */
	int64_t hs = m->shape.heads > 0 ? m->shape.hidden / m->shape.heads : 0;
	if (hs > GPT_GPU_MAX_HEAD_SIZE)
		return gpt_err_set(err, GPT_EUSAGE,
				   "--device cuda: the model's head size hidden / heads = %lld / %lld = %lld is above "
				   "the CUDA attention kernels' %d; use --device cpu",
				   (long long)m->shape.hidden, (long long)m->shape.heads, (long long)hs,
				   GPT_GPU_MAX_HEAD_SIZE);
	if (gpt_cuda_device_count() == 0)
		return gpt_err_set(err, GPT_EUSAGE,
				   "--device cuda: no CUDA device is visible (check nvidia-smi and CUDA_VISIBLE_DEVICES); use --device cpu");
	/* generation steps as CUDA graphs (decode.c) unless told not to */
	const char *ge = getenv("GPT_CUDA_GRAPHS");
	int graphs = !ge || !*ge || !strcmp(ge, "1");
	if (ge && *ge && !graphs && strcmp(ge, "0"))
		return gpt_err_set(err, GPT_EUSAGE,
				   "GPT_CUDA_GRAPHS is '%s'; expected 1 (the default: each generation step one "
				   "CUDA graph) or 0 (its kernels launched one by one)", ge);
	int q8 = wt == GPT_DTYPE_I8;
	/* int8 weights keep the CPU's fp32 activations */
	gpt_dtype t = q8 ? GPT_DTYPE_F32 : wt;
	int64_t L = m->shape.layers, nq = 4 * L + 1;
	/* device offsets: the host's, less the layers' matrices with int8 */
	int64_t *doff = gpt_calloc((size_t)m->n_table, sizeof *doff, "parameter offsets", err);
	if (!doff)
		return GPT_EINTERNAL;
	int64_t total = 0;
	for (int64_t i = 0; i < m->n_table; i++) {
		doff[i] = total;
		if (!q8 || !gpt_infer_is_layer_matrix(i))
			total += (m->table[i].numel + 15) / 16 * 16;
	}
	size_t es = gpt_dtype_size(t), bytes = (size_t)total * es;
	gpt_backend dev;
	memset(&dev, 0, sizeof dev);
	int rc = gpt_backend_cuda_init(&dev, t, device, err);
	if (rc) {
		free(doff);
		return gpt_err_prefix(err, "--device cuda");
	}
	static const char *const need[] = {"alloc", "free", "upload", "download", "copy", "linear_fwd",
					   "layernorm_fwd", "gelu_fwd", "attention_kv", "attention_kv_rows",
					   "embedding_fwd", "embedding_rows_fwd", "residual_layernorm_fwd", NULL};
	static const char *const need_qat[] = {"pact_fwd", "fake_quant", NULL};
	rc = gpt_backend_require(&dev, need, err);
	if (!rc && m->act_scale)
		rc = gpt_backend_require(&dev, need_qat, err);
	void *d = NULL, *dq = NULL, *h = NULL;
	float *dact = NULL;
	if (!rc && !(d = dev.ops->alloc(&dev, bytes, "model weights", err)))
		rc = GPT_EINTERNAL;
	/* the host parameters are fp32 and, unless the weights are fp32 too,
	 * lack the layers' matrices: gathered in the device's layout and
	 * dtype, the 16-bit matrices from their host copies (the same
	 * conversion of the same fp32 values) */
	if (!rc && wt != GPT_DTYPE_F32 && !(h = gpt_calloc(1, bytes, "model weights", err)))
		rc = GPT_EINTERNAL;
	for (int64_t i = 0; !rc && h && i < m->n_table; i++)
		if (gpt_infer_host_holds(wt, i))
			rc = gpt_convert((char *)h + (size_t)doff[i] * es, t,
					 (const float *)m->params + m->offset[i], GPT_DTYPE_F32,
					 (size_t)m->table[i].numel, err);
	for (int64_t q = 0; !rc && h && !q8 && q < nq - 1; q++) {
		int64_t e = gpt_infer_matrix_entry(L, q);
		memcpy((char *)h + (size_t)doff[e] * es, m->qw[q].w, (size_t)m->table[e].numel * es);
	}
	if (!rc)
		rc = dev.ops->upload(&dev, d, h ? h : m->params, bytes, err);
	free(h);
	/* int8: every matrix's codes (16-byte aligned), then every step */
	int64_t codes = 0, steps = 0;
	for (int64_t q = 0; q8 && q < nq; q++) {
		codes += (m->qw[q].N * m->qw[q].K + 15) / 16 * 16;
		steps += m->qw[q].N;
	}
	if (!rc && q8 && !(dq = dev.ops->alloc(&dev, (size_t)codes + (size_t)steps * 4, "int8 weights", err)))
		rc = GPT_EINTERNAL;
	int64_t at = 0, sat = 0;
	for (int64_t q = 0; !rc && q8 && q < nq; q++) {
		const gpt_qweight *w = &m->qw[q];
		rc = dev.ops->upload(&dev, (char *)dq + at, w->w, (size_t)(w->N * w->K), err);
		if (!rc)
			rc = dev.ops->upload(&dev, (char *)dq + codes + 4 * sat, w->scale,
					     (size_t)w->N * sizeof(float), err);
		at += (w->N * w->K + 15) / 16 * 16;
		sat += w->N;
	}
	size_t ab = (size_t)(8 * L) * sizeof(float);
	if (!rc && m->act_scale) {
		dact = dev.ops->alloc(&dev, ab, "activation scales", err);
		rc = dact ? dev.ops->upload(&dev, dact, m->act_scale, ab, err) : GPT_EINTERNAL;
	}
	if (rc) {
		void *p[] = {d, dq, dact};
		for (size_t i = 0; i < sizeof p / sizeof *p; i++)
			if (p[i])
				dev.ops->free(&dev, p[i]);
		gpt_backend_cuda_free(&dev);
		free(doff);
		return rc;
	}
	/* the host copies go; the shapes of the linears stay for the forward,
	 * with the int8 ones' device codes and steps */
	at = sat = 0;
	for (int64_t q = 0; q < nq; q++) {
		int64_t N = m->qw[q].N, K = m->qw[q].K;
		gpt_qweight_free(&m->qw[q]);
		m->qw[q] = (gpt_qweight){.dtype = wt, .N = N, .K = K};
		if (q8) {
			m->qw[q].w = (char *)dq + at;
			m->qw[q].scale = (float *)((char *)dq + codes) + sat;
			at += (N * K + 15) / 16 * 16;
			sat += N;
		}
	}
	m->be.ops->free(&m->be, m->params);
	gpt_backend_cpu_free(&m->be);
	free(m->offset);
	m->offset = doff;
	m->be = dev;
	m->params = d;
	m->dq = dq;
	m->dact = dact;
	m->cuda = 1;
	if (!graphs) {
		m->graph_off = 1;
		snprintf(m->graph_why, sizeof m->graph_why, "GPT_CUDA_GRAPHS=0");
	}
	return 0;
#endif
}
