/* What the gpt-export writers (bundle.c, hf.c, gguf.c) share: the model
 * read from a checkpoint, and safetensors built in memory. (Internal to
 * lib/ckpt.) */
#ifndef GPT_CKPT_EXPORT_H
#define GPT_CKPT_EXPORT_H

#include "ckpt/ckpt.h"
#include "model/model.h"
#include "model/qat.h"

#include <limits.h>

typedef struct gpt_export_model {
	gpt_ckpt *ck;
	gpt_model_shape shape;
	gpt_param_info *table;
	int64_t n_table;
	char *config;           /* the Model and Generation sections of config.yaml */
	size_t config_len;
	int byte_tokenizer;     /* 1: the byte vocabulary (257), no tokenizer files */
	char vocab[PATH_MAX];   /* else the GPT-2 vocabulary directory */
	const char *vocab_files[2]; /* its encoder and merges files' names there (gpt_vocab_pair) */
	int32_t eot;
	int64_t step;
	int qat;                /* trained with Quantization.enable: */
	gpt_qat_opts qat_opts;  /* its settings (the scales are the qat.* tensors) */
} gpt_export_model;

int gpt_export_model_open(gpt_export_model *m, const char *path, const gpt_export_opts *o,
			  gpt_err *err);
void gpt_export_model_close(gpt_export_model *m);
/* Table entry i as fp32 into dst (numel floats). */
int gpt_export_model_read(gpt_export_model *m, int64_t i, float *dst, gpt_err *err);

/* A safetensors file in memory: entries in order, metadata pairs. */
int gpt_st_build(const gpt_st_entry *e, int n, const char *const *meta, int n_meta, gpt_buf *out,
		 gpt_err *err);

/* int8 per row (every dimension but the last): scale = max |x| / 127,
 * codes round(x / scale) in [-127, 127]. x must be finite. */
void gpt_quantize_rows(const float *x, int64_t rows, int64_t cols, int8_t *q, float *scale);

/* int8 codes and per-row steps of weight table entry i of a QAT checkpoint
 * (a linear the training fake-quantized), exactly training's fq(W), or
 * fq(clip(W)) with weight PACT: q[rows x cols] and step[rows] with W ~ q *
 * step. 0 with *done = 0 when entry i was not quantized by the training
 * (then the caller quantizes it after training); GPT_EUSAGE when the
 * training used more than 8 weight bits. */
int gpt_export_qat_weight(gpt_export_model *m, int64_t i, const float *w, int8_t *q, float *step,
			  int *done, gpt_err *err);
/* A [1] state tensor of linear k of layer l, qat.h.{l}.{k}.{field}: the
 * activation scale ("scale", the quantizer's clip threshold) or PACT's
 * alphas ("act_alpha", "weight_alpha"). */
int gpt_export_qat_value(gpt_export_model *m, int64_t l, gpt_qat_linear k, const char *field,
			 float *v, gpt_err *err);

/* The archive filter a bundle named OUT is written with (its extension:
 * .tar.zst, .tzst, .tar.gz, .tgz or .tar), or -1 for another name. */
int gpt_export_bundle_filter(const char *out);
int gpt_export_bundle(gpt_export_model *m, const gpt_export_opts *o, const char *out, gpt_err *err);
int gpt_export_hf(gpt_export_model *m, const gpt_export_opts *o, const char *out, gpt_err *err);
int gpt_export_gguf(gpt_export_model *m, const gpt_export_opts *o, const char *out, gpt_err *err);

#endif
