/* Quantization-aware training (the Quantization section; PaddleSlim's
 * meanings) on one rank. (Part of lib/model.)
 *
 * When on, each chosen linear of each block computes y = fq(x) fq(W)^T + b,
 * fq being the backend's fake_quant (quantize, round, clamp, dequantize):
 * weights with a scale from the current weights (abs_max per tensor, or
 * channel_wise_abs_max per output row), inputs with a scale that is either
 * the current batch's abs max (abs_max) or a moving average of it
 * (moving_average_abs_max). The backward uses the same fq(x) and fq(W) and
 * passes gradients straight through the quantizers (PaddleSlim's STE), so
 * the fp32 master weights keep learning.
 *
 * The moving average advances once per optimizer step with the largest |x|
 * of the step's whole global batch (gpt_qat_step_end, after every micro-
 * batch): with one micro-batch on one process this is PaddleSlim's update,
 * and in any layout it gives the same scales. Within a step a micro-batch
 * quantizes its input with the scale that an update with its own max would
 * give; evaluation (training = 0) uses the committed scale.
 *
 * Layouts: a column-parallel linear (attn.qkv, mlp.fc) holds whole input
 * rows and a slice of the output channels; a row-parallel one (attn.proj,
 * mlp.proj) holds a slice of the inputs. So per-tensor weight scales and
 * everything of the row-parallel linears need a max over the tensor
 * parallel group: the tp_max hook (NULL: one tp rank; an error when tp > 1).
 * data_max reduces the step's maxima over every rank that holds the same
 * layers (dp x sharding x tp), NULL on one process.
 *
 * PACT (weight_preprocess_type / activation_preprocess_type: PACT, as
 * PaddleSlim's PACT layer) clips a quantized linear's weight or input to
 * [-alpha, alpha] before its quantizer, alpha being a learned scalar per
 * linear and kind (initially pact_init, 100 in PaddleSlim). Its gradient is
 * the sum of the upstream gradient over the clipped elements (signed), and
 * the gradient passes only where |x| <= alpha. A rank's part of that sum is
 * partial (a column-parallel input's gradient before its tp all-reduce, a
 * row-parallel slice, a weight slice, one replica's batch), so the step
 * sums it over tp (tp_sum) and the data replicas (data_sum). The alphas
 * are trained by AdamW on the host (gpt_qat_pact_step) with the schedule's
 * learning rate times pact_lr_mult (PaddleSlim: 1000), the run's betas,
 * epsilon and weight decay, and their gradients count in the global norm.
 *
 * The state (per layer and quantized linear: the committed scale and the
 * moving average's state and accum; with PACT each alpha and its AdamW
 * moments) is checkpointed through gpt_qat_tensors / gpt_qat_set under the
 * names "qat.h.{i}.{attn.qkv|attn.proj|mlp.fc|mlp.proj}.{field}", field
 * being scale, state, accum, and with PACT act_alpha, weight_alpha and
 * their .exp_avg and .exp_avg_sq, each a [1] fp32 tensor replicated over
 * tp. */
#ifndef GPT_MODEL_QAT_H
#define GPT_MODEL_QAT_H

#include "model/gpt.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum gpt_qat_linear {
	GPT_QAT_QKV = 0, /* attn.qkv, column parallel */
	GPT_QAT_PROJ,    /* attn.proj, row parallel */
	GPT_QAT_FC,      /* mlp.fc, column parallel */
	GPT_QAT_MPROJ,   /* mlp.proj, row parallel */
	GPT_QAT_LINEARS
} gpt_qat_linear;

/* "attn.qkv", "attn.proj", "mlp.fc", "mlp.proj". */
const char *gpt_qat_linear_name(gpt_qat_linear k);

typedef struct gpt_qat_opts {
	int quantized[GPT_QAT_LINEARS]; /* which linears are fake-quantized */
	int weight_per_channel;         /* channel_wise_abs_max, else abs_max */
	int act_moving_average;         /* moving_average_abs_max, else abs_max */
	int weight_bits, act_bits;
	float moving_rate;
	int pact[2];        /* PACT clipping of inputs [GPT_PACT_ACT] and weights [GPT_PACT_WEIGHT] */
	float pact_init;    /* initial alpha */
	float pact_lr_mult; /* alpha's learning rate over the schedule's */
} gpt_qat_opts;

enum { GPT_PACT_ACT = 0, GPT_PACT_WEIGHT = 1 };

/* From the Quantization section (enable must be set). quantizable_layer_type
 * takes PaddleSlim's names: Linear (all four), ColumnParallelLinear (qkv,
 * fc), RowParallelLinear (proj, mlp proj), or ours (attn.qkv, ...). The
 * embedding and the output head (the tied wte) are not quantized; asking
 * for them or another layer kind is GPT_EUSAGE naming the key. */
int gpt_qat_opts_from_config(gpt_qat_opts *o, const gpt_config *cfg, gpt_err *err);

typedef int (*gpt_qat_max_fn)(void *ctx, float *buf, int64_t n, gpt_err *err);

struct gpt_qat {
	gpt_qat_opts o;
	int64_t n_layers;           /* local layers; slot = layer * GPT_QAT_LINEARS + linear */
	int64_t n_slots;
	/* backend memory, fp32, n_slots each */
	float *scale, *state, *accum; /* committed activation scales and their moving average */
	float *used;                  /* per model slot (micro-batch in flight): the scale its last
					 forward used, for its backward */
	float *step_max;              /* largest |x| of this step so far, -1: none yet */
	float *cur, *tmp;             /* 1 and 2 floats of work */
	float *wscale;                /* weight scales of the linear at hand */
	void *wq, *xq;                /* fq(W) and fq(x) of the linear at hand */
	gpt_qat_max_fn tp_max, data_max; /* all-reduce max over buffers of backend memory */
	gpt_qat_max_fn tp_sum, data_sum; /* all-reduce sum, likewise (PACT's gradients) */
	void *tp_ctx, *data_ctx;
	/* PACT: kind p (GPT_PACT_ACT, GPT_PACT_WEIGHT), slot s at [p * n_slots + s] */
	float *alpha, *dalpha;            /* backend memory, 2 n_slots each */
	float *alpha_h, *dalpha_h;        /* host copies */
	float *exp_avg, *exp_avg_sq;      /* host, AdamW's moments of the alphas */
	void *wgrad;                      /* a clipped weight's gradient before the mask */
	int64_t bytes;                    /* backend memory of all the above */
};

/* Sets up m->qat for model m (after gpt_model_init; gpt_model_free frees it)
 * with PaddleSlim's initial state: scale 0.001, state 1, accum 1. */
int gpt_qat_init(gpt_model *m, const gpt_qat_opts *o, gpt_err *err);
void gpt_qat_free(gpt_model *m);

/* linear_fwd / linear_bwd of linear k of local layer l (backend/ops.h
 * arguments), fake-quantized when m->qat quantizes it, else the plain op. */
int gpt_qat_linear_fwd(gpt_model *m, int64_t l, gpt_qat_linear k, void *out, const void *inp,
		       const void *w, const void *bias, int64_t M, int64_t K, int64_t N,
		       gpt_err *err);
int gpt_qat_linear_bwd(gpt_model *m, int64_t l, gpt_qat_linear k, void *dinp, void *dw,
		       void *dbias, const void *dout, const void *inp, const void *w, int64_t M,
		       int64_t K, int64_t N, gpt_err *err);

/* After the last micro-batch of a training step: reduces the step's maxima
 * (tp_max, data_max) and commits them to the scales, and sums PACT's
 * gradients (tp_sum, data_sum). No-op without QAT. */
int gpt_qat_step_end(gpt_model *m, gpt_err *err);

/* After gpt_qat_step_end: takes PACT's gradients to the host (zeroing them
 * for the next step) and gives their sum of squares, still multiplied by
 * the loss scale like every gradient (0 without PACT). */
int gpt_qat_pact_grads(gpt_model *m, double *sumsq, gpt_err *err);

/* AdamW on the alphas with the gradients gpt_qat_pact_grads took, h being
 * the step's settings for the weights (lr is multiplied by pact_lr_mult
 * here; weight decay applies, as FleetX decays every parameter whose name
 * holds neither "bias" nor "norm"). An alpha is kept >= 0. */
int gpt_qat_pact_step(gpt_model *m, const gpt_adamw *h, gpt_err *err);

/* The state as named host tensors (see above); free with gpt_qat_tensors_free. */
typedef struct gpt_qat_tensor {
	char name[64];
	float value;
} gpt_qat_tensor;
int gpt_qat_tensors(const gpt_model *m, gpt_qat_tensor **out, int64_t *n, gpt_err *err);
void gpt_qat_tensors_free(gpt_qat_tensor *t);
/* Sets the state from tensors (the names of gpt_qat_tensors; all of them). */
int gpt_qat_set(gpt_model *m, const gpt_qat_tensor *t, int64_t n, gpt_err *err);
/* Whether a state tensor's name is PACT's (alphas and their moments): a
 * checkpoint of QAT without PACT lacks them, and PACT then starts fresh. */
int gpt_qat_tensor_is_pact(const char *name);

#ifdef __cplusplus
}
#endif

#endif
