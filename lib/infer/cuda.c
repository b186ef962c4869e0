/* Generation on a GPU: moving a loaded decoder to the CUDA backend
 * (gpt_infer_model_to_cuda). The forward itself is decode.c's, over the
 * backend's ops. (Part of lib/infer.) */
#include "infer/infer.h"

#include "cpu/cpu.h"
#if GPT_HAVE_CUDA
#include "cuda/cuda.h"
#endif

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
	gpt_dtype t = m->wdtype;
	if (t != GPT_DTYPE_F32 && t != GPT_DTYPE_BF16 && t != GPT_DTYPE_F16)
		return gpt_err_set(err, GPT_EUSAGE,
				   "--device cuda: %s weights have no CUDA kernels (weight-only int8 GEMM runs on the CPU); use --device cpu or --dtype bf16",
				   gpt_dtype_name(t));
	for (int64_t i = 0; m->act_scale && i < 4 * m->shape.layers; i++)
		if (m->act_scale[i] > 0)
			return gpt_err_set(err, GPT_EUSAGE,
					   "--device cuda: the model fake-quantizes the inputs of its linears (quantization-aware training), which only the CPU simulates; use --device cpu");
	if (gpt_cuda_device_count() == 0)
		return gpt_err_set(err, GPT_EUSAGE,
				   "--device cuda: no CUDA device is visible (check nvidia-smi and CUDA_VISIBLE_DEVICES); use --device cpu");
	int64_t last = m->n_table - 1;
	int64_t total = m->offset[last] + (m->table[last].numel + 15) / 16 * 16;
	size_t es = gpt_dtype_size(t), bytes = (size_t)total * es;
	gpt_backend dev;
	memset(&dev, 0, sizeof dev);
	int rc = gpt_backend_cuda_init(&dev, t, device, err);
	if (rc)
		return gpt_err_prefix(err, "--device cuda");
	static const char *const need[] = {"alloc", "free", "upload", "download", "copy", "linear_fwd",
					   "layernorm_fwd", "gelu_fwd", "attention_kv", "embedding_fwd",
					   "residual_fwd", NULL};
	rc = gpt_backend_require(&dev, need, err);
	void *d = rc ? NULL : dev.ops->alloc(&dev, bytes, "model weights", err);
	void *h = d && es != 4 ? gpt_malloc(bytes, "model weights", err) : NULL;
	if (!rc && (!d || (es != 4 && !h)))
		rc = GPT_EINTERNAL;
	/* the host parameters are fp32 with the same offsets */
	if (!rc && h)
		rc = gpt_convert(h, t, m->params, GPT_DTYPE_F32, (size_t)total, err);
	if (!rc)
		rc = dev.ops->upload(&dev, d, h ? h : m->params, bytes, err);
	free(h);
	if (rc) {
		if (d)
			dev.ops->free(&dev, d);
		gpt_backend_cuda_free(&dev);
		return rc;
	}
	/* the host copies go; the shapes of the linears stay for the forward */
	for (int64_t i = 0; i < 4 * m->shape.layers + 1; i++) {
		int64_t N = m->qw[i].N, K = m->qw[i].K;
		gpt_qweight_free(&m->qw[i]);
		m->qw[i] = (gpt_qweight){.dtype = t, .N = N, .K = K};
	}
	m->be.ops->free(&m->be, m->params);
	gpt_backend_cpu_free(&m->be);
	m->be = dev;
	m->params = d;
	m->cuda = 1;
	return 0;
#endif
}
