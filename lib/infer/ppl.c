/* Perplexity over sliding windows of the context. (Part of lib/infer.) */
#include "infer/infer.h"

#include <math.h>
#include <stdlib.h>

/* Tokens run through the model per forward call inside a window: bounds the
 * logits buffer (CHUNK x vocabulary floats) whatever the context. */
#define CHUNK 64

int gpt_perplexity(gpt_infer_model *m, const int32_t *tokens, int64_t n, double *nll_sum,
		   int64_t *count, gpt_err *err)
{
	int64_t W = m->shape.max_pos, V = m->shape.vocab_size, stride = W / 2 > 0 ? W / 2 : 1;
	if (n < 2)
		return 0;
	gpt_kv kv;
	int rc = gpt_kv_init(&kv, m, 1, W, err);
	if (rc)
		return rc;
	float *logits = gpt_malloc((size_t)(CHUNK * V) * sizeof(float), "logits", err);
	rc = logits ? 0 : GPT_EINTERNAL;
	int64_t next = 1; /* the first token not yet predicted */
	for (int64_t s = 0; !rc && next < n; s += stride) {
		int64_t e = s + W < n ? s + W : n;
		kv.len[0] = 0;
		for (int64_t c = s; !rc && c < e; c += CHUNK) {
			int64_t k = e - c < CHUNK ? e - c : CHUNK, slot = 0;
			const int32_t *tp = tokens + c;
			rc = gpt_infer_forward(m, &kv, 1, &slot, &tp, &k, 1, logits, err);
			/* row r predicts token c + r + 1 */
			for (int64_t r = 0; !rc && r < k; r++) {
				int64_t t = c + r + 1;
				if (t < next || t >= e)
					continue;
				const float *row = logits + r * V;
				float mx = row[gpt_argmax(row, V)];
				double z = 0;
				for (int64_t i = 0; i < V; i++)
					z += exp((double)row[i] - mx);
				*nll_sum += mx + log(z) - row[tokens[t]];
				(*count)++;
			}
		}
		next = e;
	}
	free(logits);
	gpt_kv_free(&kv, m);
	return rc;
}
