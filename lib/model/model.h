/* lib/model: the GPT model.
 *
 * So far this is the parameter table of DESIGN.md section 4: every global
 * (layout-free) parameter with its name, shape, the dimension tensor
 * parallelism splits, whether weight decay applies, and where it lives
 * (embedding, layer i, final LayerNorm). The parameter count, the memory plan
 * of gpt-train --dry-run, and later the flat parameter buffers, the optimizer
 * and the checkpoint index are all computed from this one table.
 */
#ifndef GPT_MODEL_H
#define GPT_MODEL_H

#include "config/config.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gpt_model_shape {
	int64_t vocab_size;   /* the tokenizer's vocabulary (rows past it are padding) */
	int64_t padded_vocab; /* Vp: vocab_size rounded up to a multiple of GPT_VOCAB_PAD */
	int64_t max_pos;      /* maxT: rows of the position embedding */
	int64_t hidden;       /* C */
	int64_t layers;       /* L */
	int64_t heads;        /* a; C is a multiple */
	int64_t ffn;          /* F */
} gpt_model_shape;

typedef enum gpt_param_place {
	GPT_PARAM_EMBED = 0, /* wte, wpe: first pipeline stage (wte also on the last, tied) */
	GPT_PARAM_LAYER,     /* h.{i}.*: the stage that owns layer i */
	GPT_PARAM_FINAL,     /* ln_f.*: last pipeline stage */
} gpt_param_place;

#define GPT_PARAM_NAME_MAX 40

typedef struct gpt_param_info {
	char name[GPT_PARAM_NAME_MAX]; /* "h.3.attn.qkv.weight" */
	int ndim;
	int64_t shape[3];              /* global shape, [out, in] for weights */
	int64_t numel;
	int tp_dim;                    /* dimension split over tp, -1: replicated */
	int decay;                     /* 1: AdamW weight decay applies */
	gpt_param_place place;
	int layer;                     /* for GPT_PARAM_LAYER, else -1 */
} gpt_param_info;

/* The shape of the configured model (cfg must be resolved). */
void gpt_model_shape_from_config(const gpt_config *cfg, gpt_model_shape *s);

/* Builds the table: wte, wpe, then per layer ln_1.weight/bias, attn.qkv.weight/
 * bias, attn.proj.weight/bias, ln_2.weight/bias, mlp.fc.weight/bias,
 * mlp.proj.weight/bias, then ln_f.weight/bias. *out is malloc'd (free()).
 * GPT_EUSAGE when the shape is inconsistent (hidden not a multiple of heads,
 * a size not positive). */
int gpt_param_table(const gpt_model_shape *s, gpt_param_info **out, int64_t *n, gpt_err *err);

/* Elements in the model, each counted once (the output head is wte, tied),
 * padding rows of wte included. -1 when the shape is inconsistent. */
int64_t gpt_param_count(const gpt_model_shape *s);

/* Elements of one parameter that a tensor parallel rank holds out of tp. */
int64_t gpt_param_numel_tp(const gpt_param_info *p, int64_t tp);

#ifdef __cplusplus
}
#endif

#endif
