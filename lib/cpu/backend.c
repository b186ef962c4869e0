/* The CPU backend's fp32 table, its context and its memory ops (host
 * memory); the bf16/fp16 table is in lowp.c. */
#include "cpu/cpu.h"
#include "cpu/kernels.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

void *gpt_cpu_alloc(gpt_backend *be, size_t bytes, const char *what, gpt_err *err)
{
	return gpt_aligned_alloc(bytes ? bytes : 1, what, err);
}

void gpt_cpu_free(gpt_backend *be, void *p)
{
	free(p);
}

int gpt_cpu_copy(gpt_backend *be, void *dst, const void *src, size_t bytes, gpt_err *err)
{
	if (bytes)
		memmove(dst, src, bytes);
	return 0;
}

int gpt_cpu_zero(gpt_backend *be, void *dst, size_t bytes, gpt_err *err)
{
	if (bytes)
		memset(dst, 0, bytes);
	return 0;
}

int gpt_cpu_sync(gpt_backend *be, gpt_err *err)
{
	return 0;
}

int gpt_cpu_convert(gpt_backend *be, void *dst, gpt_dtype dst_t, const void *src,
		       gpt_dtype src_t, int64_t n, gpt_err *err)
{
	if (n < 0)
		return gpt_err_set(err, GPT_EINTERNAL, "convert: negative count %lld",
				   (long long)n);
	return gpt_convert(dst, dst_t, src, src_t, (size_t)n, err);
}

static const gpt_backend_ops cpu_ops = {
	.alloc = gpt_cpu_alloc,
	.free = gpt_cpu_free,
	.upload = gpt_cpu_copy,
	.download = gpt_cpu_copy,
	.copy = gpt_cpu_copy,
	.zero = gpt_cpu_zero,
	.sync = gpt_cpu_sync,
	.convert = gpt_cpu_convert,
	.gemm = gpt_cpu_gemm,
	.gemm_batched = gpt_cpu_gemm_batched,
	.linear_fwd = gpt_cpu_linear_fwd,
	.linear_bwd = gpt_cpu_linear_bwd,
	.bias_add = gpt_cpu_bias_add,
	.layernorm_fwd = gpt_cpu_layernorm_fwd,
	.layernorm_bwd = gpt_cpu_layernorm_bwd,
	.gelu_fwd = gpt_cpu_gelu_fwd,
	.gelu_bwd = gpt_cpu_gelu_bwd,
	.attention_fwd = gpt_cpu_attention_fwd,
	.attention_bwd = gpt_cpu_attention_bwd,
	.attention_saved_size = gpt_cpu_attention_saved_size,
	.attention_kv = gpt_cpu_attention_kv,
	.attention_kv_rows = gpt_attention_kv_rows_each,
	.xent_fwd = gpt_cpu_xent_fwd,
	.xent_rescale = gpt_cpu_xent_rescale,
	.xent_loss = gpt_cpu_xent_loss,
	.xent_bwd = gpt_cpu_xent_bwd,
	.embedding_fwd = gpt_cpu_embedding_fwd,
	.embedding_rows_fwd = gpt_embedding_rows_each,
	.embedding_bwd = gpt_cpu_embedding_bwd,
	.residual_fwd = gpt_cpu_residual_fwd,
	.residual_bwd = gpt_cpu_residual_bwd,
	.dropout_fwd = gpt_cpu_dropout_fwd,
	.dropout_bwd = gpt_cpu_dropout_bwd,
	.adamw = gpt_cpu_adamw,
	.adamw_runs = gpt_adamw_runs_each,
	.sum_squares = gpt_cpu_sum_squares,
	.check_finite = gpt_cpu_check_finite,
	.quant_absmax = gpt_cpu_quant_absmax,
	.fake_quant = gpt_cpu_fake_quant,
	.quant_moving_avg = gpt_cpu_quant_moving_avg,
	.pact_fwd = gpt_cpu_pact_fwd,
	.pact_bwd = gpt_cpu_pact_bwd,
	.residual_layernorm_fwd = gpt_cpu_residual_layernorm_fwd,
	.residual_layernorm_bwd = gpt_cpu_residual_layernorm_bwd,
	.linear_gelu_fwd = gpt_cpu_linear_gelu_fwd,
	.linear_dgelu_bwd = gpt_cpu_linear_dgelu_bwd,
	.xent_fused = gpt_xent_fused_parts,
	.gelu_bwd_bias = gpt_gelu_bwd_bias_parts,
};

int gpt_backend_cpu_init(gpt_backend *be, gpt_dtype dtype, int threads, gpt_err *err)
{
	memset(be, 0, sizeof *be);
	if (dtype != GPT_DTYPE_F32 && dtype != GPT_DTYPE_BF16 && dtype != GPT_DTYPE_F16)
		return gpt_err_set(err, GPT_EUSAGE,
				   "cpu backend: storage dtype %s is not a float type; use fp32, "
				   "bf16 or fp16", gpt_dtype_name(dtype));
	if (threads > 0 && threads != omp_get_max_threads())
		omp_set_num_threads(threads);
	be->name = "cpu";
	be->ops = dtype == GPT_DTYPE_F32 ? &cpu_ops : &gpt_cpu_lowp_ops;
	be->dtype = dtype;
	be->threads = threads > 0 ? threads : omp_get_max_threads();
	return 0;
}

void gpt_backend_cpu_free(gpt_backend *be)
{
	gpt_cpu_lowp_free(be);
	if (be->scratch)
		free(be->scratch);
	be->scratch = NULL;
	be->scratch_size = 0;
}

int gpt_cpu_check_sizes(const char *op, gpt_err *err, int count, ...)
{
	va_list ap;
	va_start(ap, count);
	for (int i = 0; i < count; i++) {
		int64_t v = va_arg(ap, int64_t);
		if (v < 0) {
			va_end(ap);
			return gpt_err_set(err, GPT_EINTERNAL,
					   "%s: size argument %d is negative (%lld)", op, i + 1,
					   (long long)v);
		}
	}
	va_end(ap);
	return 0;
}
