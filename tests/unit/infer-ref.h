/* The reference for the lib/infer tests: a training model (lib/model) with
 * random weights, its full forward pass, and a reader that hands its
 * weights to the inference decoder. Header-only, for the test-infer-*.c. */
#ifndef GPT_TEST_INFER_REF_H
#define GPT_TEST_INFER_REF_H

#include "cpu/cpu.h"
#include "infer/infer.h"
#include "model/gpt.h"

#include <stdlib.h>
#include <string.h>

typedef struct ref_model {
	gpt_backend be;
	gpt_model m;
	gpt_model_shape s;
	float *logits; /* host copy of the last forward's (T, Vp) */
} ref_model;

/* One sequence of maxT tokens per forward (B = 1). std: weight scale. */
static inline int ref_init(ref_model *r, const gpt_model_shape *s, uint64_t seed, double std, gpt_err *err)
{
	memset(r, 0, sizeof *r);
	r->s = *s;
	gpt_layout lo;
	gpt_layout_single(&lo, s);
	gpt_model_opts mo = {.batch = 1, .seq_len = s->max_pos};
	int rc = gpt_backend_cpu_init(&r->be, GPT_DTYPE_F32, 1, err);
	if (!rc)
		rc = gpt_model_init(&r->m, &r->be, s, &lo, &mo, err);
	if (!rc)
		rc = gpt_model_init_weights(&r->m, seed, std, err);
	r->logits = malloc((size_t)(s->max_pos * s->padded_vocab) * sizeof(float));
	return rc;
}

static inline void ref_free(ref_model *r)
{
	gpt_model_free(&r->m);
	gpt_backend_cpu_free(&r->be);
	free(r->logits);
}

/* Full forward over tokens[0..n) (padded with zeros to maxT): the logits of
 * every position land in r->logits. */
static inline int ref_forward(ref_model *r, const int32_t *tokens, int64_t n, gpt_err *err)
{
	int64_t T = r->s.max_pos;
	int32_t *in = calloc((size_t)T, sizeof *in);
	memcpy(in, tokens, (size_t)n * sizeof *in);
	double ls;
	int64_t nt;
	int rc = gpt_model_forward(&r->m, in, NULL, 0, 0, 0, NULL, &ls, &nt, err);
	/* the model keeps no logits: the final hidden state times wte^T */
	size_t bytes = (size_t)(T * r->s.padded_vocab) * sizeof(float);
	void *lg = rc ? NULL : r->be.ops->alloc(&r->be, bytes, "logits", err);
	if (!rc && !lg)
		rc = err->code;
	if (!rc)
		rc = r->be.ops->linear_fwd(&r->be, lg, gpt_model_final_hidden(&r->m), gpt_model_param(&r->m, 0), NULL, T,
					   r->s.hidden, r->s.padded_vocab, err);
	if (!rc)
		rc = r->be.ops->download(&r->be, r->logits, lg, bytes, err);
	if (lg)
		r->be.ops->free(&r->be, lg);
	free(in);
	return rc;
}

/* gpt_weight_read_fn over a ref_model */
static inline int ref_read(void *ctx, const gpt_param_info *p, float *dst, gpt_err *err)
{
	ref_model *r = ctx;
	int64_t i = gpt_model_find(&r->m, p->name);
	if (i < 0)
		return gpt_err_set(err, GPT_EINTERNAL, "%s: not in the model", p->name);
	return r->be.ops->download(&r->be, dst, gpt_model_param(&r->m, i),
				   (size_t)p->numel * sizeof(float), err);
}

/* Greedy decoding by full forward passes: the reference for the KV cache. */
static inline int ref_greedy(ref_model *r, const int32_t *prompt, int64_t n, int64_t steps, int32_t eot,
		      int32_t *out, int64_t *n_out, gpt_err *err)
{
	int32_t seq[1024];
	memcpy(seq, prompt, (size_t)n * sizeof *seq);
	*n_out = 0;
	for (int64_t k = 0; k < steps; k++) {
		int rc = ref_forward(r, seq, n + k, err);
		if (rc)
			return rc;
		int32_t t = gpt_argmax(r->logits + (n + k - 1) * r->s.padded_vocab, r->s.vocab_size);
		if (t == eot)
			break;
		seq[n + k] = t;
		out[(*n_out)++] = t;
	}
	return 0;
}

#endif
