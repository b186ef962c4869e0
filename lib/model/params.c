/* The GPT parameter table (DESIGN.md section 4) and the parameter count. */
#include "model/model.h"

#include <stdlib.h>
#include <string.h>

void gpt_model_shape_from_config(const gpt_config *cfg, gpt_model_shape *s)
{
	s->vocab_size = cfg->model.vocab_size;
	s->padded_vocab = cfg->padded_vocab_size;
	s->max_pos = cfg->model.max_position_embeddings;
	s->hidden = cfg->model.hidden_size;
	s->layers = cfg->model.num_layers;
	s->heads = cfg->model.num_attention_heads;
	s->ffn = cfg->model.ffn_hidden_size;
}

static int check(const gpt_model_shape *s, gpt_err *err)
{
	if (s->vocab_size < 1 || s->padded_vocab < s->vocab_size || s->max_pos < 1 ||
	    s->hidden < 1 || s->layers < 1 || s->heads < 1 || s->ffn < 1)
		return gpt_err_set(err, GPT_EUSAGE,
				   "model shape: expected positive sizes and padded_vocab >= vocab_size, "
				   "found V=%lld Vp=%lld maxT=%lld C=%lld L=%lld heads=%lld F=%lld",
				   (long long)s->vocab_size, (long long)s->padded_vocab,
				   (long long)s->max_pos, (long long)s->hidden, (long long)s->layers,
				   (long long)s->heads, (long long)s->ffn);
	if (s->hidden % s->heads)
		return gpt_err_set(err, GPT_EUSAGE,
				   "model shape: expected hidden size %lld to be a multiple of the %lld "
				   "heads", (long long)s->hidden, (long long)s->heads);
	if (s->layers > (1 << 20))
		return gpt_err_set(err, GPT_EUSAGE, "model shape: expected at most 2^20 layers, found %lld",
				   (long long)s->layers);
	return 0;
}

static void add(gpt_param_info *t, int64_t *i, const char *name, int layer, gpt_param_place place,
		int ndim, int64_t d0, int64_t d1, int64_t d2, int tp_dim, int decay)
{
	gpt_param_info *p = &t[(*i)++];
	memset(p, 0, sizeof *p);
	if (layer >= 0)
		snprintf(p->name, sizeof p->name, "h.%d.%s", layer, name);
	else
		snprintf(p->name, sizeof p->name, "%s", name);
	p->ndim = ndim;
	p->shape[0] = d0;
	p->shape[1] = d1;
	p->shape[2] = d2;
	p->numel = d0 * (ndim > 1 ? d1 : 1) * (ndim > 2 ? d2 : 1);
	p->tp_dim = tp_dim;
	p->decay = decay;
	p->place = place;
	p->layer = layer;
}

int gpt_param_table(const gpt_model_shape *s, gpt_param_info **out, int64_t *n, gpt_err *err)
{
	*out = NULL;
	*n = 0;
	int rc = check(s, err);
	if (rc)
		return rc;
	int64_t total = 2 + 12 * s->layers + 2, i = 0;
	gpt_param_info *t = gpt_calloc((size_t)total, sizeof *t, "the parameter table", err);
	if (!t)
		return err->code;
	int64_t C = s->hidden, F = s->ffn;
	/* Weights are [out, in]; tp splits column-parallel weights by output
	 * rows and row-parallel ones by input columns (Megatron). */
	add(t, &i, "wte", -1, GPT_PARAM_EMBED, 2, s->padded_vocab, C, 0, 0, 1);
	add(t, &i, "wpe", -1, GPT_PARAM_EMBED, 2, s->max_pos, C, 0, -1, 1);
	for (int l = 0; l < s->layers; l++) {
		add(t, &i, "ln_1.weight", l, GPT_PARAM_LAYER, 1, C, 0, 0, -1, 0);
		add(t, &i, "ln_1.bias", l, GPT_PARAM_LAYER, 1, C, 0, 0, -1, 0);
		add(t, &i, "attn.qkv.weight", l, GPT_PARAM_LAYER, 3, 3, C, C, 1, 1);
		add(t, &i, "attn.qkv.bias", l, GPT_PARAM_LAYER, 2, 3, C, 0, 1, 0);
		add(t, &i, "attn.proj.weight", l, GPT_PARAM_LAYER, 2, C, C, 0, 1, 1);
		add(t, &i, "attn.proj.bias", l, GPT_PARAM_LAYER, 1, C, 0, 0, -1, 0);
		add(t, &i, "ln_2.weight", l, GPT_PARAM_LAYER, 1, C, 0, 0, -1, 0);
		add(t, &i, "ln_2.bias", l, GPT_PARAM_LAYER, 1, C, 0, 0, -1, 0);
		add(t, &i, "mlp.fc.weight", l, GPT_PARAM_LAYER, 2, F, C, 0, 0, 1);
		add(t, &i, "mlp.fc.bias", l, GPT_PARAM_LAYER, 1, F, 0, 0, 0, 0);
		add(t, &i, "mlp.proj.weight", l, GPT_PARAM_LAYER, 2, C, F, 0, 1, 1);
		add(t, &i, "mlp.proj.bias", l, GPT_PARAM_LAYER, 1, C, 0, 0, -1, 0);
	}
	add(t, &i, "ln_f.weight", -1, GPT_PARAM_FINAL, 1, C, 0, 0, -1, 0);
	add(t, &i, "ln_f.bias", -1, GPT_PARAM_FINAL, 1, C, 0, 0, -1, 0);
	*out = t;
	*n = i;
	return 0;
}

int64_t gpt_param_count(const gpt_model_shape *s)
{
	gpt_param_info *t;
	int64_t n, sum = 0;
	gpt_err err = {0};
	if (gpt_param_table(s, &t, &n, &err))
		return -1;
	for (int64_t i = 0; i < n; i++)
		sum += t[i].numel;
	free(t);
	return sum;
}

int64_t gpt_param_numel_tp(const gpt_param_info *p, int64_t tp)
{
	if (p->tp_dim < 0 || tp <= 1)
		return p->numel;
	return p->numel / tp;
}
