/* lib/infer: text generation from a trained GPT.
 *
 * Four layers, each usable on its own:
 *  - the decoder (gpt_infer_model, gpt_kv): the weights of one model in a
 *    backend, and a forward pass that appends tokens to per-sequence slots of
 *    a KV cache, so each new token costs one pass over the context, not a
 *    full forward of the sequence. Linears run over the rows of every
 *    sequence at once; attention runs per sequence (backend attention_kv),
 *    so sequences of different lengths share one batch, and a generation
 *    step (one new token a sequence) runs it, and the embedding, for all
 *    of them in one call (attention_kv_rows, embedding_rows_fwd);
 *  - samplers: temperature, top-k, top-p, repetition penalty and greedy
 *    choice on one row of logits, with draws keyed by (seed, sequence, step)
 *    so a seeded run gives the same text whatever the batch;
 *  - strategies: greedy search, sampling and beam search over a batch of
 *    prompts (gpt_generate), and perplexity (gpt_perplexity);
 *  - model sources (gpt_source): what `gpt-infer -m MODEL` names, opened as a
 *    checkpoint directory, an export bundle (read in place from the tar), a
 *    directory holding model.safetensors + config.yaml, or a Hugging Face
 *    GPT-2 directory; each gives a model shape, a config and the tokenizer.
 */
#ifndef GPT_INFER_H
#define GPT_INFER_H

#include "backend/backend.h"
#include "config/config.h"
#include "model/model.h"
#include "text/text.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- linear layers on compact weights ------------------------------------ */

/* The vector kernels of gpt_qlinear's few-row path, by instruction set. */
typedef enum gpt_qkernel {
	GPT_QKERNEL_C = 0, /* plain C, any CPU */
	GPT_QKERNEL_AVX2,  /* AVX2 + FMA + F16C; K a multiple of 8 (else plain C) */
	GPT_QKERNEL_AVX512 /* AVX-512 F, BW, VL, DQ */
} gpt_qkernel;

/* The fastest kernel this CPU runs; whether it runs kernel k. */
gpt_qkernel gpt_qkernel_best(void);
int gpt_qkernel_supported(gpt_qkernel k);

/* One weight matrix [N, K] as generation reads it: fp32 (the model's own
 * copy, not owned), bf16, fp16, or int8 with one fp32 scale per row (scale
 * = max |row| / 127, round to nearest). kernel: gpt_qkernel_best() after
 * init; a test may set any supported one. */
typedef struct gpt_qweight {
	gpt_dtype dtype;
	gpt_qkernel kernel;
	int64_t N, K;
	const void *w;
	void *owned;
	float *scale;
} gpt_qweight;

/* Memory for weight matrices (free() releases it): 64-byte aligned, and
 * from 2 MiB up in transparent huge pages where the system has them, which
 * streaming the weights for every token reads faster. */
void *gpt_weights_alloc(size_t bytes, const char *what, gpt_err *err);

/* Makes q from the fp32 matrix w (kept by pointer when dtype is fp32). */
int gpt_qweight_init(gpt_qweight *q, const float *w, int64_t N, int64_t K, gpt_dtype dtype,
		     gpt_err *err);
void gpt_qweight_free(gpt_qweight *q);
/* out (M, N) = x (M, K) q^T + bias (may be NULL), all fp32 host memory,
 * computed in fp32 with `threads` threads: a fused kernel that reads each
 * weight once for up to 8 rows, sgemm beyond. With the AVX-512 kernel a
 * row's result does not depend on M or the thread count. */
int gpt_qlinear(const gpt_qweight *q, const float *x, const float *bias, float *out, int64_t M,
		int threads, gpt_err *err);

/* ---- the decoder --------------------------------------------------------- */

/* Fills dst (p->numel floats, fp32, the layout of DESIGN.md section 4) with
 * parameter p of the model being loaded. */
typedef int (*gpt_weight_read_fn)(void *ctx, const gpt_param_info *p, float *dst, gpt_err *err);

typedef struct gpt_infer_model {
	gpt_backend be;         /* fp32 CPU backend: activations, LayerNorms, attention;
				   or the CUDA backend after gpt_infer_model_to_cuda */
	gpt_model_shape shape;
	gpt_param_info *table;
	int64_t n_table;
	int64_t *offset;        /* element offset of each table entry in params */
	void *params;           /* flat, in be's dtype (fp32 on the CPU); on the
				   CPU with 16-bit or int8 weights without the
				   layers' matrices, which qw alone holds
				   (gpt_infer_host_holds in layout.h) */
	gpt_dtype wdtype;       /* of the weight matrices */
	gpt_qweight *qw;        /* per layer qkv, proj, fc, mlp proj; then the head (wte) */
	float *act_scale;       /* NULL, or per layer and linear (that order): the clip
				   threshold of its fake-quantized input, 0: not quantized;
				   then as many PACT clips applied before (0: none) */
	int act_bits;           /* of those inputs */
	float ln_eps;
	/* work buffers for up to cap_rows rows */
	int64_t cap_rows;
	void *x, *ln, *qkv, *att, *tmp, *fch;
	int32_t *tokens;        /* 3 cap_rows: a call's tokens; in a step of one new
				   token a sequence, then their positions and slots */
	int64_t work_gen;       /* how many times the work buffers were made */
	/* CUDA (gpt_infer_model_to_cuda): be is the CUDA backend, params and
	 * the work buffers device memory in be's dtype; the tokens go up and
	 * the logits come down (hlogits: pinned host memory, in that dtype). With int8
	 * weights params leaves out the layers' weight matrices, and qw[i].w
	 * and qw[i].scale point to device memory in dq (codes, then steps);
	 * dact is the device copy of act_scale */
	int cuda;
	int32_t *dtokens;
	void *dlogits, *hlogits;
	void *dq;
	float *dact;
	/* CUDA graphs of generation steps (decode.c): graphs[n - 1] is the
	 * step of n sequences; graph_steps the steps that ran as one.
	 * graph_off: none are made (GPT_CUDA_GRAPHS=0, or a step could not be
	 * recorded), graph_why says why */
	struct gpt_infer_graph *graphs;
	int64_t n_graphs, graph_steps;
	int graph_off;
	char graph_why[200];
} gpt_infer_model;

/* Loads a model of shape s, reading each parameter through read(ctx, ...),
 * with the weight matrices (and the output head) held as `dtype` (fp32,
 * bf16, fp16 or int8, see gpt_qweight) and everything else in fp32, on the
 * CPU with `threads` threads (<= 0: OpenMP's default). */
int gpt_infer_model_init(gpt_infer_model *m, const gpt_model_shape *s, gpt_dtype dtype,
			 int threads, gpt_weight_read_fn read, void *ctx, gpt_err *err);
void gpt_infer_model_free(gpt_infer_model *m);
/* Moves a loaded model to CUDA device `device`: every parameter is
 * uploaded once in the weight dtype (fp32, bf16 or fp16), which is then the
 * storage dtype of the activations and the KV cache too (the CPU keeps
 * those in fp32, so 16-bit results differ a little); the forward runs on
 * the device (cuBLASLt linears, the KV-cache attention kernel) and only the
 * logits come back, as fp32, for the samplers on the host. int8 weights go
 * up as the CPU holds them (the same codes and per-row steps) and run
 * through gpt_cuda_linear_i8, everything else in fp32 as on the CPU.
 * Fake-quantized activations (a QAT bundle's input scales and clips) are
 * applied on the device by the backend's pact_fwd and fake_quant, the
 * CPU's arithmetic (exactly, in fp32 storage). The host copy is freed.
 * Before any gpt_kv_init. GPT_EUSAGE: no CUDA device, or a build without
 * CUDA. */
int gpt_infer_model_to_cuda(gpt_infer_model *m, int device, gpt_err *err);

/* Takes from the safetensors file f of an int8 bundle what quantization-
 * aware training left: the int8 codes and per-row steps of every I8 weight
 * as stored (not quantized again from their fp32 values, so the weights are
 * exactly the fake-quantized ones training used), when m holds int8
 * weights; and h.{i}.{attn.qkv|attn.proj|mlp.fc|mlp.proj}.input_scale with
 * the metadata activation_bits, after which the forward fake-quantizes the
 * input of each such linear as training did (simulated int8 activations).
 * A file without them changes nothing. */
struct gpt_st_file;
int gpt_infer_load_quant(gpt_infer_model *m, const struct gpt_st_file *f, gpt_err *err);

/* The KV cache: `slots` sequences of up to maxT positions, per layer (slots,
 * NH, maxT, HS) keys and values in fp32. len[s] is the
 * number of positions slot s holds. */
typedef struct gpt_kv {
	int64_t slots, maxT, layers, per_slot; /* per_slot: NH * maxT * HS elements */
	void *k, *v;
	int64_t *len;
} gpt_kv;

int gpt_kv_init(gpt_kv *kv, gpt_infer_model *m, int64_t slots, int64_t maxT, gpt_err *err);
void gpt_kv_free(gpt_kv *kv, gpt_infer_model *m);
/* Slot dst becomes a copy of slot src (its first len[src] positions). */
int gpt_kv_copy(gpt_kv *kv, gpt_infer_model *m, int64_t dst, int64_t src, gpt_err *err);

/* Appends n_tok[i] tokens tokens[i][0..n_tok[i]) to slot slot[i] for each of
 * the n chunks (distinct slots) and runs them through the model in one pass.
 * logits (fp32, vocab_size columns: padding rows are left out) receives, when
 * all = 0, one row per chunk (its last token's), else one row per token, the
 * chunks' rows in order. GPT_EUSAGE when a slot would pass maxT or the
 * model's max_pos. */
int gpt_infer_forward(gpt_infer_model *m, gpt_kv *kv, int64_t n, const int64_t *slot,
		      const int32_t *const *tokens, const int64_t *n_tok, int all, float *logits,
		      gpt_err *err);

/* ---- samplers -------------------------------------------------------------- */

typedef struct gpt_sampling {
	int64_t top_k;             /* 0: no top-k filter */
	double top_p;              /* 1: no top-p filter */
	double temperature;        /* > 0 */
	double repetition_penalty; /* 1: none */
} gpt_sampling;

/* CTRL's repetition penalty (as Hugging Face applies it): the logit of every
 * token among prev[0..n) is divided by `penalty` when positive, multiplied
 * when negative. */
void gpt_repetition_penalty(float *logits, int64_t V, const int32_t *prev, int64_t n,
			    double penalty);

/* The distribution sampling draws from, in probs (V floats): softmax of
 * logits / temperature; then top-k keeps the k most probable tokens (ties:
 * the lower id first); then top-p keeps the most probable tokens, in that
 * order, while the probability kept before each one is below top_p (so the
 * token that reaches top_p is kept, and always at least one); the rest are 0
 * and the kept ones renormalised. -inf logits are never kept. order is V
 * int32 of scratch. Returns the number of tokens kept. */
int64_t gpt_sample_probs(const float *logits, int64_t V, const gpt_sampling *s, float *probs,
			 int32_t *order);

/* The token at which the cumulative distribution of probs passes u in [0, 1)
 * (the last token with a non-zero probability when rounding leaves u above
 * the total). */
int32_t gpt_sample_draw(const float *probs, int64_t V, double u);

/* A uniform draw in [0, 1) keyed by (seed, sequence, step): the same for a
 * sequence whatever the batch it runs in. */
double gpt_sample_uniform(uint64_t seed, uint64_t sequence, uint64_t step);

/* The first index of the largest logit. */
int32_t gpt_argmax(const float *logits, int64_t V);

/* ---- generation ------------------------------------------------------------ */

typedef enum gpt_decode_strategy {
	GPT_DECODE_SAMPLING = 0,
	GPT_DECODE_GREEDY,
	GPT_DECODE_BEAM,
} gpt_decode_strategy;

typedef struct gpt_gen_opts {
	gpt_decode_strategy strategy;
	gpt_sampling sampling;
	int64_t min_dec_len, max_dec_len; /* generated tokens */
	int64_t num_return_sequences;
	int64_t num_beams;
	double length_penalty;
	int early_stopping;
	uint64_t seed;
	int32_t eot;                      /* end-of-text id, -1: none */
	int64_t vocab;                    /* ids that may be generated: [0, vocab), the
					     tokenizer's, where the model's vocabulary is
					     wider (FleetX's 50304 over GPT-2's 50257: the
					     ids past it have no text); 0: all */
	int64_t batch;                    /* sequences decoded together (>= 1) */
	/* may be NULL: called after each token with the generated ids so far;
	 * non-zero ends the sequence there (gpt-infer --stop) */
	int (*stop)(void *ctx, const int32_t *ids, int64_t n);
	void *stop_ctx;
	struct gpt_gen_stats *stats;      /* may be NULL: timings add up here */
} gpt_gen_opts;

/* Where the time of gpt_generate went: prompt processing (the first pass
 * over each prompt) and generation (every later pass), wall-clock seconds
 * of the model's forward passes and the tokens they took; of the prompt
 * passes (one a group of prompts, or a beam search), how many ran and what
 * the first took, which holds the one-time costs of a run's first forward
 * (on a GPU, the first use of its libraries, kernels and buffers). */
typedef struct gpt_gen_stats {
	int64_t prompt_tokens, generated_tokens;
	double prompt_s, generate_s;
	int64_t prompt_passes, first_prompt_tokens;
	double first_prompt_s;
} gpt_gen_stats;

/* Adds a prompt pass of tokens in secs to s (NULL: nothing). */
void gpt_gen_stats_prompt(gpt_gen_stats *s, int64_t tokens, double secs);

/* The number of ids a generation with o chooses from, of a model's V. */
int64_t gpt_gen_vocab(const gpt_gen_opts *o, int64_t V);

/* From the Generation section of a resolved or unresolved config, checked
 * against a model of max_pos positions (0: not checked here). A value that
 * does not fit is refused as gpt-train refuses its configuration's: naming
 * the file's line (GPT_EDATA) or the -o (GPT_EUSAGE). model_where, when not
 * NULL, is the origin name (cfg->origin[k].where) of the model's own
 * config.yaml, read into cfg before the user's file: a value from there, or
 * a default, is a usage error naming the key, as an -o fixes it. */
int gpt_gen_opts_from_config(gpt_gen_opts *o, const gpt_config *cfg, const char *model_where,
			     int64_t max_pos, gpt_err *err);
/* That refusal, of key (and of alt instead, when key was not set by the
 * user but alt was, as the key to change). */
int gpt_gen_refuse(const gpt_config *cfg, const char *model_where, const char *key,
		   const char *alt, gpt_err *err, const char *fmt, ...) GPT_PRINTF(6, 7);

/* One generated sequence. */
typedef struct gpt_gen_result {
	int64_t prompt;      /* index of its prompt */
	int64_t index;       /* 0 .. num_return_sequences-1 */
	int32_t *ids;        /* generated ids (end-of-text left out) */
	int64_t n;
	int finished;        /* 1: ended at end-of-text, 0: at max_dec_len */
	double score;        /* mean log-probability of the tokens chosen, the end
			      * of text included (beam: the length-penalised sum) */
} gpt_gen_result;

/* Called with each result as soon as its prompt is done, in prompt order and
 * then index order; a non-zero return stops generation with that code. */
typedef int (*gpt_gen_emit_fn)(void *ctx, const gpt_gen_result *r, gpt_err *err);

/* Generates for each of n prompts (prompt[i][0..len[i]), at least one token
 * each). Each prompt must leave room for max_dec_len new tokens within the
 * model's max_pos (GPT_EUSAGE naming the prompt otherwise). */
int gpt_generate(gpt_infer_model *m, const gpt_gen_opts *o, int64_t n,
		 const int32_t *const *prompt, const int64_t *len, gpt_gen_emit_fn emit, void *ctx,
		 gpt_err *err);

/* Beam search for one prompt: up to num_return_sequences best hypotheses,
 * best first, scored as PaddleNLP's generate scores them: sum of
 * log-probabilities / ((n + 5) / 6)^length_penalty, n the tokens generated
 * without the end-of-text token.
 * With early_stopping the search ends once num_beams hypotheses are done;
 * otherwise only when no running beam can still beat the worst of them
 * (exact for any length_penalty). results[i].ids are malloc'd. */
int gpt_beam_search(gpt_infer_model *m, const gpt_gen_opts *o, const int32_t *prompt,
		    int64_t len, gpt_gen_result *results, int64_t *n_results, gpt_err *err);

/* Mean negative log-likelihood of tokens[1..n) given what precedes them, over
 * windows of up to max_pos tokens that overlap by half (every token after
 * the first is predicted once, with at least half a window of context when
 * the text is long). *nll_sum and *count can be summed over texts;
 * perplexity = exp(sum / count). */
int gpt_perplexity(gpt_infer_model *m, const int32_t *tokens, int64_t n, double *nll_sum,
		   int64_t *count, gpt_err *err);

/* ---- model sources ------------------------------------------------------- */

typedef enum gpt_source_kind {
	GPT_SOURCE_CKPT = 1, /* a training checkpoint (or a directory with `latest`) */
	GPT_SOURCE_BUNDLE,   /* gpt-export's .tar.zst / .tar.gz */
	GPT_SOURCE_DIR,      /* model.safetensors + config.yaml (an unpacked bundle) */
	GPT_SOURCE_HF,       /* a Hugging Face GPT-2 directory (config.json) */
} gpt_source_kind;

typedef struct gpt_source gpt_source;

/* Opens what `path` names (see gpt_source_kind). exe is argv[0], for finding
 * the default GPT-2 vocabulary when the model carries none. */
int gpt_source_open(gpt_source **out, const char *path, const char *exe, gpt_err *err);
void gpt_source_free(gpt_source *src);
gpt_source_kind gpt_source_kind_of(const gpt_source *src);
const gpt_model_shape *gpt_source_shape(const gpt_source *src);
/* The model's configuration (Generation defaults included; HF: defaults),
 * to which a caller may apply its own -c file and -o overrides. */
gpt_config *gpt_source_config(gpt_source *src);
const gpt_tokenizer *gpt_source_tokenizer(const gpt_source *src);
/* The dtype of the stored weights: a bundle's (fp32, bf16, fp16, int8),
 * else fp32. */
gpt_dtype gpt_source_dtype(const gpt_source *src);
/* Loads the weights into a decoder (see gpt_infer_model_init). */
int gpt_source_load(gpt_source *src, gpt_infer_model *m, gpt_dtype dtype, int threads,
		    gpt_err *err);
/* The weight reader of the source, for writers that convert models. */
int gpt_source_read(void *src, const gpt_param_info *p, float *dst, gpt_err *err);

/* Reads tensor `name` of a safetensors file (ckpt/ckpt.h), which must have
 * the given shape, as fp32 into dst: F32, BF16 and F16 are converted, I8 is
 * scaled by the F32 tensor NAME.scale, one scale per row (every dimension
 * but the last): per output channel of a [out, in] weight. */
struct gpt_st_file;
int gpt_st_read_f32(const struct gpt_st_file *f, const char *name, int ndim, const int64_t *shape,
		    float *dst, gpt_err *err);

/* ---- the gpt-infer program ------------------------------------------------- */

typedef struct gpt_infer_args {
	const char *model;
	const char *exe;
	const char *config;        /* -c FILE, or NULL */
	char *const *overrides;    /* -o KEY=VALUE */
	int n_overrides;
	char *const *prompts;      /* NULL: one prompt a line from in */
	int n_prompts;
	const char *stop;          /* --stop STRING, or NULL */
	const char *ppl;           /* --ppl FILE|PREFIX, or NULL */
	const char *device;        /* "cpu" (default) or "cuda" */
	int jsonl;
	int truncate;              /* keep the end of a prompt that is too long */
	int threads;
	int64_t batch;
	int stats;                 /* print timings to err_out */
	int dtype_set;             /* 0: weights in memory as the model stores them */
	gpt_dtype dtype;           /* else fp32, bf16, fp16 or int8 */
	FILE *err_out;
} gpt_infer_args;

/* Runs gpt-infer: reads prompts (from args or one a line from in), writes
 * prompt + generation per result to out (plain text, or JSON lines), or the
 * perplexity with --ppl. */
int gpt_infer_run(const gpt_infer_args *a, FILE *in, FILE *out, gpt_err *err);

#ifdef __cplusplus
}
#endif

#endif
