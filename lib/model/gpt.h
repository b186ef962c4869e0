/* The GPT network on one rank: flat parameter and gradient buffers cut by the
 * parameter table, the forward and backward passes of the blocks over the
 * backend ops, recompute, and GPT-2 initialisation. (Part of lib/model.)
 *
 * Every rank holds a box of each global tensor (gpt_param_box): with tensor
 * and pipeline parallelism of 1 that is the whole tensor. Parameters and
 * gradients each live in one flat buffer of the backend's storage dtype, with
 * the same offsets, so an optimizer or a sharding stage works on element
 * ranges of the flat buffers. The optimizer state is not the model's: it
 * lives in lib/train, at the same offsets.
 *
 * A step is: gpt_model_zero_grad; for each micro-batch gpt_model_forward then
 * gpt_model_backward (gradients accumulate); then the optimizer. A trainer
 * that leaves the losses on the device (loss_sum NULL) takes them once with
 * gpt_model_take_losses after its own wait for the device (the norm).
 */
#ifndef GPT_MODEL_GPT_H
#define GPT_MODEL_GPT_H

#include "backend/backend.h"
#include "model/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where this rank sits in the tensor x pipeline layout. With virtual
 * pipeline stages (the interleaved schedule) a rank holds `chunks` model
 * chunks: chunk c is virtual stage c x pp + pp_rank. */
#define GPT_MAX_CHUNKS GPT_MAX_VIRTUAL_PP
typedef struct gpt_layout {
	int64_t tp, tp_rank;
	int64_t pp, pp_rank;
	int64_t chunks;                       /* >= 1 */
	int64_t layer_begin[GPT_MAX_CHUNKS];  /* the global layers of each chunk */
	int64_t layer_end[GPT_MAX_CHUNKS];
} gpt_layout;

/* One process holding everything. */
void gpt_layout_single(gpt_layout *lo, const gpt_model_shape *s);
/* The layout of tensor rank tp_rank of tp and pipeline rank pp_rank of pp,
 * with the layers split over pp x chunks virtual stages: stage_layers[v]
 * layers on virtual stage v (pp x chunks counts), or evenly when it is NULL.
 * GPT_EUSAGE naming the numbers when they do not fit. */
int gpt_layout_make(gpt_layout *lo, const gpt_model_shape *s, int64_t tp, int64_t tp_rank,
		    int64_t pp, int64_t pp_rank, int64_t chunks, const int64_t *stage_layers,
		    gpt_err *err);
/* Layers this rank holds over all its chunks. */
int64_t gpt_layout_layers(const gpt_layout *lo);

/* The box of global parameter p that a rank with layout lo holds; returns 0
 * (and an empty box) when the rank holds none of it. Tensor parallelism cuts
 * tp_dim into tp equal parts; pipeline parallelism keeps a layer's
 * parameters on the stage that owns the layer, wte on the first and last
 * stage, wpe on the first, ln_f on the last. */
int gpt_param_box(const gpt_param_info *p, const gpt_layout *lo, gpt_box *box);

typedef enum gpt_recompute {
	GPT_RECOMPUTE_NONE = 0,
	GPT_RECOMPUTE_FULL,      /* keep only each block's input */
	GPT_RECOMPUTE_ONLY_ATTN, /* recompute the attention half of each block */
	GPT_RECOMPUTE_CORE_ATTN, /* recompute softmax and dropout of attention */
} gpt_recompute;

/* "full", "only_attn", "core_attn" (FleetX's recompute_granularity). */
int gpt_recompute_parse(const char *s, gpt_recompute *out);

typedef struct gpt_model_opts {
	int64_t batch;            /* micro-batch size B */
	int64_t seq_len;          /* T <= max_pos */
	gpt_recompute recompute;
	const int64_t *no_recompute; /* global layer indices that keep every activation
				     whatever `recompute` says (Model.no_recompute_layers);
				     read by gpt_model_init and gpt_model_activation_bytes,
				     not kept */
	int64_t n_no_recompute;
	float hidden_dropout;     /* embeddings and residual branches */
	float attn_dropout;       /* attention probabilities */
	uint32_t seed;            /* dropout seed */
	float ln_eps;             /* 1e-5 */
	int64_t flat_multiple;    /* the flat buffers' length is rounded up to a multiple
				     of this (the sharding degree, so shards are equal); <= 1: none */
	int no_full_params;       /* 1: no whole parameter buffer (ZeRO stage 3): the hooks
				     provide each unit's parameters in a window */
	int no_full_grads;        /* 1: no whole gradient buffer (ZeRO stages 2, 3): the hooks
				     provide each unit's gradient window and take it back */
	int64_t slots;            /* micro-batches whose activations are kept at once (a
				     pipeline's in-flight micro-batches); <= 1: one */
	int sequence_parallel;    /* 1 with tp > 1: the LayerNorm, dropout and residual
				     regions keep 1/tp of the B*T token rows (Megatron-LM's
				     sequence parallelism over the flattened tokens) */
	int64_t head_rows;        /* token rows per block of the fused classifier (see
				     gpt_model_forward); <= 0: about 64 Mi logits per block */
	int fused_gelu;           /* 1: the MLP's GELU inside GEMMs (the backend's
				     linear_gelu_fwd, linear_dgelu_bwd; Model.fused_linear);
				     not with QAT, whose linears quantize their inputs */
	int fc_bias_in_gemm;      /* 1: fc's bias gradient from its linear_bwd with its
				     weight gradient (the backend takes bias gradients
				     from the GEMM: CUDA's GPT_CUDA_BIAS_GRAD=gemm), not
				     with the GELU's backward (gelu_bwd_bias) */
	int64_t loss_slots;       /* micro-batches whose losses can wait in backend
				     memory for gpt_model_take_losses (a step's); <= 1: one */
} gpt_model_opts;

/* Units: the pieces of the flat buffers a pass uses one after another:
 * unit 0 is the embedding (wte, wpe: what of them this stage holds), units
 * 1..n_layers the local layers in chunk order, unit n_layers + 1 the final
 * LayerNorm. Each is one contiguous range [unit_begin, unit_end), empty on a
 * pipeline stage that holds none of it. */
typedef struct gpt_model gpt_model;
/* Quantization-aware training state (model/qat.h); NULL when off. */
typedef struct gpt_qat gpt_qat;

/* Called around each unit's use when set (ZeRO stages 2 and 3). acquire
 * runs before a unit's parameters are read (backward: 1) and must make
 * gpt_model_param work for it (setting pwin[u] when there is no whole
 * parameter buffer) and, in the backward, gradient windows gwin[u] set to
 * zero when there is no whole gradient buffer. release runs after; after the
 * backward the unit's gradients of this micro-batch are complete in gwin[u]. */
typedef struct gpt_model_hooks {
	void *ctx;
	int (*acquire)(void *ctx, gpt_model *m, int unit, int backward, gpt_err *err);
	int (*release)(void *ctx, gpt_model *m, int unit, int backward, gpt_err *err);
} gpt_model_hooks;

/* Per-layer activations kept for the backward (pointers may be shared
 * between layers under recompute). */
typedef struct gpt_layer_acts {
	void *ln1, *qkv, *atty, *res_mid, *ln2, *fch, *fch_gelu;
	float *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd;
	float *att_saved;
} gpt_layer_acts;

/* The activations of one micro-batch in flight (pipeline parallelism keeps
 * several); gpt_model_use_slot makes one the model's current set. */
typedef struct gpt_slot {
	void **res;
	gpt_layer_acts *acts;
	float *lnf_mean, *lnf_rstd;
	void *dlnf;               /* (n_rows, C): the gradient of ln_f's output, made by
				     the forward's classifier (see gpt_model_forward) */
	int head_grad;            /* 1: the last forward made dlnf and the head's wte gradient */
	int32_t *tokens;
	int32_t *host_tokens;     /* the same tokens in host memory, for embedding_bwd */
	int dropout_on;
	uint32_t step;
	int64_t sample0;
} gpt_slot;

struct gpt_group;

struct gpt_model {
	gpt_backend *be;
	gpt_model_shape shape;
	gpt_layout layout;
	gpt_model_opts opts;
	gpt_param_info *table;    /* the global parameter table */
	int64_t n_table;
	int64_t *offset;          /* per table entry: element offset in the flat buffers, -1: not held */
	gpt_box *box;             /* per table entry: the box held */
	int64_t n_flat;           /* elements of parameters in the flat buffers */
	int64_t n_alloc;          /* their length: n_flat rounded up, the tail zero */
	void *params, *grads;     /* flat, storage dtype, backend memory */

	/* Which tensors this rank counts once in the global gradient norm and
	 * writes to a checkpoint: 1 for what it holds, except that a tensor
	 * replicated over tp counts on tp rank 0 only and the tied wte on the
	 * first pipeline stage only. Per table entry. */
	int8_t *owner;
	/* The tensor-parallel group (NULL when tp = 1): the caller sets it
	 * after gpt_model_init. Activations and their gradients are summed
	 * (and the cross-entropy's statistics reduced) over it. */
	struct gpt_group *tp_group;

	/* activations, backend memory: the current slot's (see gpt_slot) */
	int64_t n_layers;         /* local layers, over every chunk */
	int64_t *glayer;          /* per local layer: its global layer */
	int64_t *lchunk;          /* per local layer: its chunk */
	gpt_recompute *lrecompute; /* per local layer: opts.recompute, or none for the
				     layers opts.no_recompute names */
	int64_t lc_begin[GPT_MAX_CHUNKS], lc_end[GPT_MAX_CHUNKS]; /* each chunk's local layers */
	gpt_slot *slots;
	int64_t n_slots, cur_slot;
	void **res;               /* n_layers + chunks residual streams (n_rows, C): chunk
				     c's layer l reads res[l + c] and writes res[l + c + 1] */
	gpt_layer_acts *acts;     /* n_layers */
	float *lnf_mean, *lnf_rstd;
	void *dlnf;
	int head_grad;
	/* the classifier's work buffers, shared by the slots: the logits of
	 * head_rows rows at a time (Vp / tp columns), turned into their gradient in
	 * place; per row of a block the cross-entropy's maximum, sum of
	 * exponentials and target logit (one array, the last two adjacent) and
	 * the maximum over the tp pieces; the losses and targets of the
	 * micro-batch; with no whole gradient buffer, the head's part of wte's
	 * gradient until the backward adds it to the window */
	void *lnf;                /* (n_rows, C): ln_f's output */
	int64_t head_rows;
	void *logits;             /* (head_rows, Vp / tp); the memory of d_f, which
				     is not live while the head runs */
	float *xent_max, *xent_sumexp, *xent_tlogit, *xent_gmax; /* (head_rows) each */
	float *losses;            /* (loss_slots, B*T): a micro-batch's losses each, the
				     first loss_next of them waiting for gpt_model_take_losses */
	int64_t loss_slots, loss_next;
	void *head_dw;            /* (Vp / tp, C) or NULL */
	int64_t n_rows;           /* token rows of the residual streams: B*T, or B*T/tp
				     under sequence parallelism (rows [tp_rank x n_rows, +n_rows)) */
	void *gath, *tmp_s, *d_s, *ln_tmp; /* sequence parallel work buffers: (B*T, C), two
				     (n_rows, C) and a LayerNorm's weight and bias gradients */
	void *tmp_c, *d_c, *d_c2, *d_res, *d_f, *d_qkv; /* work buffers, shared by the slots */
	/* the backward: the gradient of the branch of residual dropout site
	 * (layer, site), made by the LayerNorm's backward before it
	 * (residual_layernorm_bwd) and waiting at `at` (d_c or d_c2) */
	struct {
		int on;
		uint32_t layer, site;
		void *at;
	} bwd_drop;
	int32_t *tokens, *targets; /* (B*T), backend memory */
	int32_t *host_tokens;      /* (B*T), host: the current slot's tokens */
	float *host_losses;        /* (loss_slots, B*T), host */
	int64_t act_bytes;         /* activation memory allocated */
	int dropout_on;            /* set by forward: 1 in training */
	uint32_t step;             /* the step forward ran for */
	int64_t sample0;

	/* units and windows (see gpt_model_hooks) */
	int n_units;
	int64_t *unit_begin, *unit_end; /* element ranges of the flat buffers */
	void **pwin, **gwin;      /* per unit: a window holding its range, or NULL */
	gpt_model_hooks hooks;
	gpt_qat *qat;             /* fake-quantized linears (model/qat.h), NULL: none */
};

/* Lays out the flat buffers and allocates parameters, gradients and the
 * activations for micro-batches of opts->batch x opts->seq_len. */
int gpt_model_init(gpt_model *m, gpt_backend *be, const gpt_model_shape *s, const gpt_layout *lo,
		   const gpt_model_opts *opts, gpt_err *err);
void gpt_model_free(gpt_model *m);

/* The bytes of activations (and work buffers) gpt_model_init allocates for
 * these options, given the per-layer size of the attention's saved state in
 * floats (the backend's attention_saved_size). gpt-train --dry-run uses it,
 * and gpt_model_init's own total is checked against it by the tests. */
int64_t gpt_model_activation_bytes(const gpt_model_shape *s, const gpt_layout *lo,
				   const gpt_model_opts *o, size_t elem_size, int64_t saved_floats);

/* Token rows per block of the fused classifier for BT rows of Vl logits
 * (Vp / tp): opts->head_rows, or by default about 64 Mi logits per block;
 * never more than BT. */
int64_t gpt_model_head_rows(const gpt_model_opts *o, int64_t BT, int64_t Vl);

/* Index of a global parameter in the table, or -1. */
int64_t gpt_model_find(const gpt_model *m, const char *name);
/* The unit table entry i belongs to. */
int gpt_model_unit_of(const gpt_model *m, int64_t i);
/* Where table entry i's parameters / gradients are: in the whole buffer, or
 * in its unit's window when there is one. */
void *gpt_model_param(const gpt_model *m, int64_t i);
void *gpt_model_grad(const gpt_model *m, int64_t i);

/* GPT-2 initialisation from a counter-based generator keyed by (seed, tensor,
 * global element index), so every layout initialises the same global
 * weights: normal(0, std) for weights, std / sqrt(2 x layers) for the two
 * output projections, zero biases, unit LayerNorm weights, zero padding rows
 * of wte. */
int gpt_model_init_weights(gpt_model *m, uint64_t seed, double std, gpt_err *err);
/* The same for the flat range [begin, end) only, written to dst (backend
 * memory holding that range): a shard under ZeRO stage 3. */
int gpt_model_init_weights_range(gpt_model *m, uint64_t seed, double std, void *dst,
				 int64_t begin, int64_t end, gpt_err *err);
/* The same as fp32 values (the initial weights rounded to the storage dtype
 * and widened back) into master, backend memory holding [begin, end): the
 * fp32 master weights of 16-bit parameters kept nowhere else. */
int gpt_model_init_master_range(gpt_model *m, uint64_t seed, double std, float *master,
				int64_t begin, int64_t end, gpt_err *err);

/* Starts a step: gradients to zero, and nothing of an earlier step (a
 * head gradient, losses in the slots) waiting. */
int gpt_model_zero_grad(gpt_model *m, gpt_err *err);

/* One micro-batch forward. tokens and targets are host arrays (B x T,
 * targets may be NULL: the forward stops at ln_f, gpt_model_final_hidden).
 * sample0 is the global index of the first sample in the step's global batch
 * and step the optimizer step (they key dropout); training = 0 turns dropout
 * off. On return *loss_sum is the sum of the per-token losses (targets < 0
 * are ignored) and *n_tokens the number of tokens that count. With loss_sum
 * NULL the losses stay in backend memory, in the next free one of
 * opts.loss_slots slots, until gpt_model_take_losses sums them: a device then
 * does not wait for each micro-batch (n_tokens is counted on the host either
 * way).
 *
 * The classifier is fused: it runs over blocks of head_rows token rows, and
 * each block's logits become, in the same pass, the block's losses and, when
 * a backward will follow, their gradient, from which the block's share of
 * the gradients of ln_f's output and of wte is taken at once; the logits of
 * the whole micro-batch never exist. So the forward needs dloss, the weight
 * of each token's loss in the gradient (1 / tokens in the global batch,
 * times the loss scale), when a backward follows, and NULL when none does
 * (evaluation). The head's wte gradient accumulates into m->grads here (with
 * no whole gradient buffer, into head_dw until the backward). */
int gpt_model_forward(gpt_model *m, const int32_t *tokens, const int32_t *targets, int training,
		      uint32_t step, int64_t sample0, const float *dloss, double *loss_sum,
		      int64_t *n_tokens, gpt_err *err);
/* *loss_sum = the losses of the forwards since the last call that were
 * given no loss_sum: each forward's sum of its tokens' losses (in double, in
 * token order) added in the order they ran, the same bits as adding their
 * loss_sums. One download, which waits for the backend's queued work: call
 * it after something else that waits (the gradients' norm). Empties the
 * slots; 0 with none waiting. */
int gpt_model_take_losses(gpt_model *m, double *loss_sum, gpt_err *err);
/* The backward of the last forward, which must have had a dloss; gradients
 * accumulate into m->grads. */
int gpt_model_backward(gpt_model *m, gpt_err *err);
/* The final hidden state of the last forward: ln_f's output for all B*T
 * rows (B*T, C), backend memory, valid until the next forward or backward
 * (under sequence parallelism a work buffer the backward reuses); the
 * logits are it times wte^T. */
const void *gpt_model_final_hidden(const gpt_model *m);

/* ---- pipeline stages ----
 * gpt_model_forward/backward run every chunk of a model that has the whole
 * network (pp = 1). A pipeline stage runs one chunk at a time on the current
 * slot: the first virtual stage embeds `tokens`, the others start from the
 * activation the caller put in gpt_model_chunk_input; the last virtual
 * stage ends in the loss over `targets`, the others leave their output in
 * gpt_model_chunk_output. The backward of a chunk that is not the last
 * virtual stage starts from the gradient the caller put in
 * gpt_model_dgrad; every chunk but the first virtual stage leaves the
 * gradient of its input there. */
void gpt_model_use_slot(gpt_model *m, int64_t slot);
int gpt_model_chunk_is_first(const gpt_model *m, int64_t chunk);
int gpt_model_chunk_is_last(const gpt_model *m, int64_t chunk);
void *gpt_model_chunk_input(const gpt_model *m, int64_t chunk);
void *gpt_model_chunk_output(const gpt_model *m, int64_t chunk);
void *gpt_model_dgrad(const gpt_model *m);
/* Elements of a chunk's input or output, and of the gradient, that go from
 * stage to stage: n_rows x hidden. */
int64_t gpt_model_stream_numel(const gpt_model *m);
/* The same before there is a model. */
int64_t gpt_model_stream_numel_for(const gpt_model_shape *s, const gpt_layout *lo,
				   const gpt_model_opts *o);
int gpt_model_forward_chunk(gpt_model *m, int64_t chunk, const int32_t *tokens,
			    const int32_t *targets, int training, uint32_t step, int64_t sample0,
			    const float *dloss, double *loss_sum, int64_t *n_tokens, gpt_err *err);
int gpt_model_backward_chunk(gpt_model *m, int64_t chunk, gpt_err *err);

#ifdef __cplusplus
}
#endif

#endif
