/* What an int8 bundle of a quantization-aware training run carries beyond
 * its weights: the stored int8 codes used as they are, and the scales of the
 * fake-quantized activations. (Part of lib/infer.) */
#include "infer/infer.h"

#include "ckpt/ckpt.h"

#include <stdlib.h>
#include <string.h>

/* Replaces q's codes and steps with the stored ones of tensor name (rows
 * [0, q->N) of it) when both are int8. */
static int stored_codes(gpt_qweight *q, const gpt_st_file *f, const char *name, gpt_err *err)
{
	const gpt_st_tensor *t = gpt_st_find(f, name);
	if (!t || t->dtype != GPT_DTYPE_I8 || q->dtype != GPT_DTYPE_I8)
		return 0;
	char sname[128];
	snprintf(sname, sizeof sname, "%s.scale", name);
	const gpt_st_tensor *s = gpt_st_find(f, sname);
	/* rows: every dimension but the last (qkv's [3, C, C] has 3C) */
	int64_t cols = t->shape[t->ndim - 1], rows = 1;
	for (int d = 0; d + 1 < t->ndim; d++)
		rows *= t->shape[d];
	if (!s || s->dtype != GPT_DTYPE_F32 || (int64_t)((s->end - s->begin) / 4) != rows ||
	    cols != q->K || rows < q->N)
		return gpt_err_set(err, GPT_EDATA, "%s: int8 tensor '%s' does not match its scales or the model",
				   f->path, name);
	memcpy(q->owned, gpt_st_data(f, t), (size_t)(q->N * q->K));
	memcpy(q->scale, gpt_st_data(f, s), (size_t)q->N * sizeof(float));
	return 0;
}

int gpt_infer_load_quant(gpt_infer_model *m, const gpt_st_file *f, gpt_err *err)
{
	static const char *const lin[4] = {"attn.qkv", "attn.proj", "mlp.fc", "mlp.proj"};
	int64_t L = m->shape.layers;
	char name[96];
	int rc = 0, any = 0;
	for (int64_t l = 0; !rc && l < L; l++)
		for (int j = 0; !rc && j < 4; j++) {
			snprintf(name, sizeof name, "h.%lld.%s.weight", (long long)l, lin[j]);
			rc = stored_codes(&m->qw[4 * l + j], f, name, err);
		}
	if (!rc)
		rc = stored_codes(&m->qw[4 * L], f, "wte", err);
	/* input_scale, then input_clip (activation PACT's alpha) */
	static const char *const kind[2] = {"input_scale", "input_clip"};
	for (int c = 0; c < 2; c++)
		for (int64_t l = 0; !rc && l < L; l++)
			for (int j = 0; !rc && j < 4; j++) {
				snprintf(name, sizeof name, "h.%lld.%s.%s", (long long)l, lin[j], kind[c]);
				const gpt_st_tensor *t = gpt_st_find(f, name);
				if (!t)
					continue;
				if (t->dtype != GPT_DTYPE_F32 || t->end - t->begin != 4)
					return gpt_err_set(err, GPT_EDATA, "%s: '%s': expected one F32 value", f->path, name);
				if (c == 1 && !m->act_scale)
					return gpt_err_set(err, GPT_EDATA, "%s: '%s' without input scales", f->path, name);
				if (!m->act_scale) {
					m->act_scale = gpt_calloc((size_t)(8 * L), sizeof *m->act_scale, "activation scales", err);
					if (!m->act_scale)
						return GPT_EINTERNAL;
				}
				memcpy(&m->act_scale[4 * L * c + 4 * l + j], gpt_st_data(f, t), sizeof(float));
				any = 1;
			}
	if (!rc && any) {
		const char *b = gpt_st_meta(f, "activation_bits");
		int64_t bits = 0;
		if (!b || gpt_parse_i64(b, &bits) || bits < 2 || bits > 16)
			return gpt_err_set(err, GPT_EDATA,
					   "%s: activation scales without __metadata__ activation_bits of 2 to 16 (found %s)",
					   f->path, b ? b : "none");
		m->act_bits = (int)bits;
	}
	return rc;
}
