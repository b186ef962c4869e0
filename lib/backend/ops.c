/* What the backends share around the ops table: checking that a backend has
 * the ops a caller needs, and the scratch buffer ops grow on demand. */
#include "backend/backend.h"

#include <stddef.h>
#include <string.h>

#define SLOT(name) {#name, offsetof(gpt_backend_ops, name)}

static const struct {
	const char *name;
	size_t offset;
} slots[] = {
	SLOT(alloc), SLOT(free), SLOT(upload), SLOT(download), SLOT(copy), SLOT(zero),
	SLOT(sync), SLOT(convert), SLOT(gemm), SLOT(gemm_batched), SLOT(linear_fwd),
	SLOT(linear_bwd), SLOT(bias_add), SLOT(layernorm_fwd), SLOT(layernorm_bwd),
	SLOT(gelu_fwd), SLOT(gelu_bwd), SLOT(attention_fwd), SLOT(attention_bwd),
	SLOT(attention_saved_size), SLOT(attention_kv), SLOT(attention_kv_rows), SLOT(xent_fwd),
	SLOT(xent_rescale), SLOT(xent_loss), SLOT(xent_bwd), SLOT(embedding_fwd),
	SLOT(embedding_rows_fwd), SLOT(embedding_bwd), SLOT(residual_fwd), SLOT(residual_bwd),
	SLOT(dropout_fwd), SLOT(dropout_bwd), SLOT(adamw),
	SLOT(sum_squares), SLOT(check_finite), SLOT(quant_absmax), SLOT(fake_quant),
	SLOT(quant_moving_avg), SLOT(pact_fwd), SLOT(pact_bwd), SLOT(residual_layernorm_fwd),
	SLOT(residual_layernorm_bwd), SLOT(linear_gelu_fwd), SLOT(linear_dgelu_bwd), SLOT(xent_fused),
	SLOT(gelu_bwd_bias), SLOT(adamw_runs),
};

int gpt_adamw_runs_each(gpt_backend *be, void *param, float *master, uint16_t *lo, const void *grad, float *m,
			float *v, const gpt_adamw_run *runs, int64_t nruns, const gpt_adamw *h, gpt_err *err)
{
	size_t es = gpt_dtype_size(be->dtype);
	for (int64_t i = 0; i < nruns; i++) {
		int64_t k = runs[i].begin, n = runs[i].end - k;
		if (k < 0 || n < 0 || (i > 0 && k < runs[i - 1].end))
			return gpt_err_set(err, GPT_EINTERNAL, "adamw_runs: run %lld [%lld, %lld) is not after the one before",
					   (long long)i, (long long)k, (long long)runs[i].end);
		gpt_adamw hr = *h;
		hr.weight_decay = runs[i].decay ? h->weight_decay : 0.0;
		int rc = be->ops->adamw(be, param ? (char *)param + k * (int64_t)es : NULL, master ? master + k : NULL,
					lo ? lo + k : NULL, (const char *)grad + k * (int64_t)es, m + k, v + k, n, &hr, err);
		if (rc)
			return rc;
	}
	return 0;
}

int gpt_attention_kv_rows_each(gpt_backend *be, void *out, void *kcache, void *vcache,
			       const void *qkv, int64_t n, const int32_t *slot, const int32_t *pos,
			       int64_t maxT, int64_t NH, int64_t HS, gpt_err *err)
{
	int64_t es = (int64_t)gpt_dtype_size(be->dtype), Cl = NH * HS;
	for (int64_t i = 0; i < n; i++) {
		if (slot[i] < 0 || pos[i] < 0)
			return gpt_err_set(err, GPT_EUSAGE,
					   "attention_kv_rows: row %lld has slot %d and position %d; expected a "
					   "slot of the cache and a position inside it",
					   (long long)i, (int)slot[i], (int)pos[i]);
		int64_t at = (int64_t)slot[i] * Cl * maxT * es;
		int rc = be->ops->attention_kv(be, (char *)out + i * Cl * es, (char *)kcache + at,
					       (char *)vcache + at, (const char *)qkv + i * 3 * Cl * es, 1,
					       1, pos[i], maxT, NH, HS, err);
		if (rc)
			return rc;
	}
	return 0;
}

int gpt_embedding_rows_each(gpt_backend *be, void *out, const int32_t *tokens, const int32_t *pos,
			    const void *wte, const void *wpe, int64_t N, int64_t C, int64_t v0,
			    int64_t Vl, gpt_err *err)
{
	int64_t es = (int64_t)gpt_dtype_size(be->dtype);
	for (int64_t r = 0; r < N; r++) {
		int rc = be->ops->embedding_fwd(be, (char *)out + r * C * es, tokens + r, wte, wpe, 1, 1,
						C, v0, Vl, pos[r], err);
		if (rc)
			return rc;
	}
	return 0;
}

int gpt_xent_fused_parts(gpt_backend *be, float *loss, float *max, float *sumexp, float *tlogit,
			 void *dlogits, const void *logits, const int32_t *targets, float dloss,
			 int64_t N, int64_t Vl, int64_t ld, int64_t V, gpt_err *err)
{
	const gpt_backend_ops *o = be->ops;
	int rc = o->xent_fwd(be, max, sumexp, tlogit, logits, targets, N, Vl, ld, 0, V, err);
	if (!rc)
		rc = o->xent_loss(be, loss, max, sumexp, tlogit, targets, N, err);
	if (!rc)
		rc = o->xent_bwd(be, dlogits, logits, targets, max, sumexp, dloss, N, Vl, ld, 0, V, err);
	return rc;
}

int gpt_gelu_bwd_bias_parts(gpt_backend *be, void *dinp, void *dbias, const void *inp, const void *dout,
			    int64_t M, int64_t N, gpt_err *err)
{
	const gpt_backend_ops *o = be->ops;
	int rc = o->gelu_bwd(be, dinp, inp, dout, M * N, err);
	if (!rc && dbias)
		rc = o->linear_bwd(be, NULL, NULL, dbias, dinp, NULL, NULL, M, 0, N, err);
	return rc;
}

int gpt_backend_require(const gpt_backend *be, const char *const *names, gpt_err *err)
{
	for (; *names; names++) {
		size_t i, n = sizeof slots / sizeof *slots;
		for (i = 0; i < n; i++)
			if (strcmp(slots[i].name, *names) == 0)
				break;
		if (i == n)
			return gpt_err_set(err, GPT_EINTERNAL, "backend op '%s' does not exist",
					   *names);
		void (*fn)(void);
		memcpy(&fn, (const char *)be->ops + slots[i].offset, sizeof fn);
		if (!fn)
			return gpt_err_set(err, GPT_EINTERNAL,
					   "%s backend: op %s is not supported with dtype %s; "
					   "use another backend or dtype",
					   be->name, *names, gpt_dtype_name(be->dtype));
	}
	return 0;
}

int gpt_backend_scratch(gpt_backend *be, size_t bytes, gpt_err *err)
{
	if (bytes <= be->scratch_size)
		return 0;
	if (be->scratch)
		be->ops->free(be, be->scratch);
	be->scratch_size = 0;
	be->scratch = be->ops->alloc(be, bytes, "backend scratch", err);
	if (!be->scratch)
		return err ? err->code : GPT_EINTERNAL;
	be->scratch_size = bytes;
	return 0;
}

int gpt_attention_tensor_cores(gpt_dtype dt, int64_t HS)
{
	return (dt == GPT_DTYPE_BF16 || dt == GPT_DTYPE_F16) && HS > 0 && HS % 16 == 0 && HS <= 128;
}

int64_t gpt_attention_mask_words(int64_t T)
{
	int64_t nb = (T + 7) / 8;
	return nb * (nb + 1) / 2;
}

int64_t gpt_attention_flash_saved(gpt_dtype storage, int64_t B, int64_t T, int64_t NH, int64_t HS,
				  int dropout)
{
	int64_t lse = (B * NH * T + 3) / 4 * 4;
	if (!gpt_attention_tensor_cores(storage, HS))
		return lse;
	int64_t low = (B * T * NH * HS * (int64_t)gpt_dtype_size(storage) + 15) / 16 * 4;
	return lse + low + (dropout ? 2 * B * NH * gpt_attention_mask_words(T) : 0);
}

int64_t gpt_cuda_work_bytes(int64_t C, int64_t N, int64_t B, int64_t T, int64_t NH)
{
	int64_t floats = GPT_CUDA_COLSUM_PARTS * N;
	if (2 * GPT_CUDA_COLSUM_PARTS * C > floats)
		floats = 2 * GPT_CUDA_COLSUM_PARTS * C;
	if (B * NH * T > floats)
		floats = B * NH * T;
	return (int64_t)GPT_CUDA_BLAS_WORKSPACE + floats * (int64_t)sizeof(float);
}
