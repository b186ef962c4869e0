/* The backend context: init, the ops table and gpt_backend_require, memory
 * ops and scratch. */
#include "cpu-check.h"

int main(void)
{
	gpt_backend be = chk_backend();
	is_str(be.name, "cpu", "the backend names itself");
	ok(be.threads >= 1, "thread count is set (%d)", be.threads);
	is_int(be.dtype, GPT_DTYPE_F32, "storage dtype fp32");

	static const char *const all[] = {
		"alloc", "free", "upload", "download", "copy", "zero", "sync", "convert", "gemm",
		"gemm_batched", "linear_fwd", "linear_bwd", "bias_add", "layernorm_fwd",
		"layernorm_bwd", "gelu_fwd", "gelu_bwd", "attention_fwd", "attention_bwd",
		"attention_saved_size", "attention_kv", "attention_kv_rows", "xent_fwd", "xent_rescale",
		"xent_loss", "xent_bwd", "embedding_fwd", "embedding_rows_fwd", "embedding_bwd",
		"residual_fwd", "residual_bwd", "dropout_fwd", "dropout_bwd", "adamw", "sum_squares",
		"check_finite", "quant_absmax", "fake_quant", "quant_moving_avg", "pact_fwd", "pact_bwd",
		"residual_layernorm_fwd", "residual_layernorm_bwd", "linear_gelu_fwd", "linear_dgelu_bwd",
		"xent_fused", "gelu_bwd_bias", "adamw_runs", NULL};
	gpt_err err = {0};
	is_int(gpt_backend_require(&be, all, &err), 0, "the cpu backend provides every op");
	is_int(sizeof(gpt_backend_ops) / sizeof(void (*)(void)), sizeof all / sizeof *all - 1,
	       "the list above names every slot of the table");

	/* a table with a NULL slot: the caller is told which op and backend */
	{
		gpt_backend_ops partial = *be.ops;
		partial.attention_bwd = NULL;
		gpt_backend other = be;
		other.name = "test";
		other.ops = &partial;
		int rc = gpt_backend_require(&other, all, &err);
		ok(rc == GPT_EINTERNAL && strstr(err.msg, "test backend: op attention_bwd is not supported"),
		   "a NULL slot is named: %s", err.msg);
		static const char *const typo[] = {"gemm", "attention_fwdd", NULL};
		rc = gpt_backend_require(&be, typo, &err);
		ok(rc == GPT_EINTERNAL && strstr(err.msg, "'attention_fwdd' does not exist"),
		   "an unknown op name is an error: %s", err.msg);
	}

	/* storage dtypes: fp32, bf16 and fp16; anything else is a clear error */
	{
		gpt_backend b16;
		CHK(gpt_backend_cpu_init(&b16, GPT_DTYPE_BF16, 0, &chk_err));
		ok(b16.dtype == GPT_DTYPE_BF16 && gpt_backend_require(&b16, all, &err) == 0,
		   "bf16 storage: every op is there");
		gpt_backend_cpu_free(&b16);
		int rc = gpt_backend_cpu_init(&b16, GPT_DTYPE_I32, 0, &err);
		ok(rc == GPT_EUSAGE && strstr(err.msg, "int32 is not a float type"),
		   "int32 storage refused: %s", err.msg);
	}

	/* memory ops */
	{
		float host[100], back[100];
		for (int i = 0; i < 100; i++)
			host[i] = (float)i;
		float *d = be.ops->alloc(&be, sizeof host, "test buffer", &chk_err);
		float *d2 = be.ops->alloc(&be, sizeof host, "test buffer", &chk_err);
		ok(d && d2 && ((uintptr_t)d & 63) == 0, "alloc gives 64-byte aligned memory");
		CHK(be.ops->upload(&be, d, host, sizeof host, &chk_err));
		CHK(be.ops->copy(&be, d2, d, sizeof host, &chk_err));
		CHK(be.ops->zero(&be, d, 10 * sizeof *d, &chk_err));
		CHK(be.ops->download(&be, back, d2, sizeof back, &chk_err));
		CHK(be.ops->sync(&be, &chk_err));
		ok(memcmp(back, host, sizeof host) == 0, "upload, copy, download");
		CHK(be.ops->download(&be, back, d, sizeof back, &chk_err));
		ok(back[0] == 0 && back[9] == 0 && back[10] == 10, "zero clears the first bytes only");
		be.ops->free(&be, d);
		be.ops->free(&be, d2);
	}

	/* scratch grows and is released */
	CHK(gpt_backend_scratch(&be, 1000, &chk_err));
	ok(be.scratch && be.scratch_size >= 1000, "scratch grows to 1000 bytes");
	void *s = be.scratch;
	CHK(gpt_backend_scratch(&be, 10, &chk_err));
	ok(be.scratch == s, "a smaller request keeps the buffer");
	gpt_backend_cpu_free(&be);
	ok(!be.scratch && be.scratch_size == 0, "free releases the scratch");

	char desc[512];
	gpt_backend_describe(desc, sizeof desc);
	ok(strstr(desc, "cpu: ") != NULL, "describe lists the cpu backend: %s", desc);
	return done_testing();
}
