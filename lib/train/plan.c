/* The per-rank memory plan of gpt-train --dry-run.
 *
 * Parameters, gradients and optimizer state follow from the parameter
 * table, the precision and the sharding stage. Activations are exactly the
 * buffers the model allocates for the device (model_activations): lib/model
 * counts its own buffers given the attention's saved state (the CPU
 * attention's B*NH*T*T fp32 probabilities, the GPU flash-style kernel's
 * B*NH*T log-sum-exps and, on the tensor cores, the output's low half and
 * the dropout mask: gpt_attention_flash_saved), times the micro-batches the stage's pipeline
 * schedule keeps in flight.
 *
 * The "one layer, one micro-batch" line is the textbook figure of
 * Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
 * Transformer Models" (section 4): a layer with sequence length s,
 * micro-batch b, hidden h, a heads and tensor parallel size t stores, at 16
 * bits, s*b*h*(10 + 24/t + 5*a*s/(h*t)) bytes, everything divided by t with
 * sequence parallelism; we split the terms by width so that fp32 training
 * is covered, and on the GPU replace the score term 5as^2b/t by the 4asb/t
 * bytes of the log-sum-exps (and with 16-bit activations and a head size
 * the tensor-core kernels take, the 2sbh/t bytes of the output's low half
 * and with dropout the as^2b/16t bytes of its mask).
 */
#include "train/train.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct act_shape {
	double s, b, h, a, t, r; /* r: divisor of the terms tp does not split (t with sp) */
	double e;                /* bytes per 16-bit-or-fp32 activation */
	int flash;               /* the attention keeps a row statistic, not the scores */
	int low;                 /* and the output's low half (tensor cores) */
	int mask;                /* and there with dropout its mask, a bit a probability */
} act_shape;

/* The attention's saved state: the paper's 5as^2b/t (scores and softmax at
 * 16 bits, the dropout mask in bytes), or with the GPU's flash-style
 * kernel one fp32 log-sum-exp per row and head (the backward recomputes
 * the probabilities), and on the tensor cores the 16-bit low half of the
 * output, s*b*h/t elements, and with dropout its mask, a bit for each
 * probability of the causal triangle, as^2b/16t bytes (the CUDA cores'
 * kernel regenerates it). */
static double score_bytes(const act_shape *x)
{
	if (x->flash)
		return 4 * x->a * x->s * x->b / x->t + (x->low ? 2 * x->s * x->b * x->h / x->t : 0) +
		       (x->mask ? x->a * x->s * x->s * x->b / (16 * x->t) : 0);
	return (2 * x->e + 1) * x->a * x->s * x->s * x->b / x->t;
}

static double layer_none(const act_shape *x)
{
	double sbh = x->s * x->b * x->h;
	return x->e * (4 * sbh / x->r + 12 * sbh / x->t) + 2 * sbh / x->r + score_bytes(x);
}

/* Quantization-aware training's work buffers (lib/model/qat.c): the fake-
 * quantized input of the linear at hand (its widest input over all rows of
 * the micro-batch), its fake-quantized weight, and with weight PACT the
 * weight's gradient before the clip's mask. */
static double qat_work(const gpt_config *cfg, const gpt_model_shape *shape, const act_shape *x)
{
	double C = x->h, F = (double)shape->ffn / x->t, Cl = (double)(shape->heads / (int64_t)x->t) *
								(double)(shape->hidden / shape->heads);
	double in = C > Cl ? C : Cl, w = 3 * Cl * C > C * F ? 3 * Cl * C : C * F;
	if (F > in)
		in = F;
	const char *wp = cfg->quantization.weight_preprocess_type;
	int wpact = wp && strcmp(wp, "PACT") == 0;
	return x->e * (x->s * x->b * in + w * (wpact ? 2 : 1));
}

static double layer_core_attn(const act_shape *x)
{
	return x->flash ? layer_none(x) : layer_none(x) - score_bytes(x);
}

static double layer_only_attn(const act_shape *x)
{
	/* The whole attention block is recomputed from its input: what stays
	 * are both LayerNorm inputs and the MLP's 3sbh + 16sbh/t. */
	double sbh = x->s * x->b * x->h;
	return x->e * (3 * sbh / x->r + 8 * sbh / x->t) + sbh / x->r;
}

static double layer_input(const act_shape *x)
{
	return x->e * x->s * x->b * x->h / x->r;
}

/* The gradient reduction runs in buckets beside the backward (overlap.c):
 * dp or sharding stage 1, with Distributed.overlap_grad_reduce. */
static int overlapped(const gpt_config *cfg)
{
	int64_t sh = cfg->distributed.sharding.sharding_degree;
	return cfg->distributed.overlap_grad_reduce && cfg->distributed.dp_degree * sh > 1 &&
	       !(sh > 1 && cfg->distributed.sharding.sharding_stage >= 2);
}

/* The pipeline rank holding a layer: virtual stage v is on rank v % pp. */
static int stage_of_layer(const gpt_config *cfg, int64_t layer, int64_t L, int64_t pp, int64_t vpp)
{
	const gpt_intlist *pl = &cfg->distributed.pp_layers;
	if (!pl->n)
		return (int)((layer / (L / (pp * vpp))) % pp);
	int64_t v = 0, end = pl->v[0];
	while (layer >= end && v + 1 < pl->n)
		end += pl->v[++v];
	return (int)(v % pp);
}

static double ceil_div(double a, int64_t d)
{
	return d > 1 ? (double)(((int64_t)a + d - 1) / d) : a;
}

/* The activations are what gpt_model_init allocates (lib/model counts its
 * own buffers, given the attention's saved floats per head: T*T on the CPU,
 * T on the GPU) with one slot per micro-batch in flight, which the stage's
 * schedule gives exactly. */
static void model_activations(const gpt_config *cfg, const gpt_model_shape *shape,
			      gpt_train_stage_mem *st, int64_t s, int64_t tp, int64_t pp, int flash,
			      gpt_dtype storage)
{
	int64_t vpp = pp > 1 ? cfg->distributed.virtual_pp_degree : 1;
	gpt_layout lo;
	gpt_err e = {0};
	const gpt_intlist *pl = &cfg->distributed.pp_layers;
	if (gpt_layout_make(&lo, shape, tp, 0, pp, s, vpp, pl->n ? pl->v : NULL, &e))
		return; /* the resolved config divides the layers: not reached */
	gpt_model_opts o = {.batch = cfg->global.micro_batch_size,
			    .seq_len = cfg->data.train.dataset.max_seq_len, .slots = 1,
			    .loss_slots = cfg->engine.accumulate_steps,
			    .sequence_parallel = cfg->model.sequence_parallel,
			    .head_rows = cfg->model.classifier_rows,
			    .no_full_grads = cfg->distributed.sharding.sharding_degree > 1 &&
					     cfg->distributed.sharding.sharding_stage >= 2};
	if (pp > 1) {
		gpt_pipe_op *ops;
		int64_t n;
		const char *name = cfg->distributed.pipeline_schedule ? cfg->distributed.pipeline_schedule : "1F1B";
		if (gpt_pipe_schedule(name, pp, s, vpp, cfg->engine.accumulate_steps, &ops, &n, &e) == 0) {
			o.slots = gpt_pipe_slots(ops, n, vpp);
			free(ops);
		}
	}
	st->in_flight = (double)o.slots;
	int64_t NH = shape->heads / tp, HS = shape->hidden / shape->heads;
	int64_t saved = flash ? gpt_attention_flash_saved(storage, o.batch, o.seq_len, NH, HS,
							  cfg->model.attention_probs_dropout_prob > 0)
			      : o.batch * NH * o.seq_len * o.seq_len;
	size_t es = cfg->mixed ? 2 : 4;
	double none = (double)gpt_model_activation_bytes(shape, &lo, &o, es, saved);
	o.recompute = GPT_RECOMPUTE_FULL;
	double full = (double)gpt_model_activation_bytes(shape, &lo, &o, es, saved);
	o.recompute = GPT_RECOMPUTE_NONE;
	if (cfg->model.use_recompute) {
		const char *g = cfg->model.recompute_granularity ? cfg->model.recompute_granularity : "full";
		gpt_recompute_parse(g, &o.recompute);
		o.no_recompute = cfg->model.no_recompute_layers.v;
		o.n_no_recompute = cfg->model.no_recompute_layers.n;
	}
	double conf = (double)gpt_model_activation_bytes(shape, &lo, &o, es, saved);
	/* the pipeline's buffer for a received activation gradient */
	double recv = pp > 1 ? (double)gpt_model_stream_numel_for(shape, &lo, &o) * (double)es : 0;
	st->act_none = none + recv;
	st->act_full = full + recv;
	st->act_config = conf + recv;
}

int gpt_train_memory_plan(const gpt_config *cfg, gpt_train_memory *m, gpt_err *err)
{
	memset(m, 0, sizeof *m);
	if (!cfg->resolved)
		return gpt_err_set(err, GPT_EINTERNAL, "memory plan: configuration not resolved");
	gpt_model_shape shape;
	gpt_model_shape_from_config(cfg, &shape);
	gpt_param_info *tab;
	int64_t n;
	int rc = gpt_param_table(&shape, &tab, &n, err);
	if (rc)
		return rc;
	int64_t pp = cfg->distributed.pp_degree, tp = cfg->distributed.mp_degree;
	int64_t vpp = cfg->distributed.virtual_pp_degree, L = shape.layers;
	int64_t d = cfg->distributed.sharding.sharding_degree;
	int64_t stage = cfg->distributed.sharding.sharding_stage;
	int o2 = cfg->mixed && strcmp(cfg->engine.mix_precision.level, "O2") == 0;
	int from_master = gpt_train_params_from_master(cfg);
	m->stage = gpt_calloc((size_t)pp, sizeof *m->stage, "the memory plan", err);
	if (!m->stage) {
		free(tab);
		return err->code;
	}
	m->pp = pp;
	m->param_bytes_each = o2 ? 2 : 4;
	m->grad_bytes_each = o2 ? 2 : 4;
	/* the master weights: bf16's split (lib/train/optim.c), the parameters
	 * their high halves, 2 bytes each beside them; fp16's a 4-byte copy */
	m->optim_bytes_each = !o2 ? 8 : gpt_train_storage_dtype(cfg) == GPT_DTYPE_BF16 ? 10 : 12;
	m->act_bytes_each = cfg->mixed ? 2 : 4;
	int64_t layer_params = 0; /* one layer's elements on a tp rank */
	int64_t embed_params = 0, final_params = 0;
	for (int64_t i = 0; i < n; i++) {
		const gpt_param_info *p = &tab[i];
		int64_t el = gpt_param_numel_tp(p, tp);
		m->param_count += p->numel;
		if (p->place == GPT_PARAM_LAYER && p->layer == 0)
			layer_params += el;
		if (p->place == GPT_PARAM_EMBED)
			embed_params += el;
		if (p->place == GPT_PARAM_FINAL)
			final_params += el;
		if (p->place == GPT_PARAM_LAYER) {
			m->stage[stage_of_layer(cfg, p->layer, L, pp, vpp)].params += el;
		} else if (p->place == GPT_PARAM_FINAL) {
			m->stage[pp - 1].params += el;
		} else {
			m->stage[0].params += el;
			/* the tied output head: the last stage holds its own copy of wte */
			if (pp > 1 && strcmp(p->name, "wte") == 0)
				m->stage[pp - 1].params += el;
		}
	}
	free(tab);

	int gpu = cfg->global.device && strcmp(cfg->global.device, "gpu") == 0;
	act_shape x = {(double)cfg->data.train.dataset.max_seq_len,
		       (double)cfg->global.micro_batch_size,
		       (double)shape.hidden,
		       (double)shape.heads,
		       (double)tp,
		       cfg->model.sequence_parallel ? (double)tp : 1.0,
		       (double)m->act_bytes_each,
		       gpu,
		       0,
		       0};
	gpt_dtype storage = gpt_train_storage_dtype(cfg);
	x.low = x.flash && gpt_attention_tensor_cores(storage, shape.hidden / shape.heads);
	x.mask = x.low && cfg->model.attention_probs_dropout_prob > 0;
	const char *gran = cfg->model.recompute_granularity;
	m->layer_none = layer_none(&x);
	m->layer_full = layer_input(&x);
	m->layer_config = !cfg->model.use_recompute ? m->layer_none
			  : strcmp(gran, "core_attn") == 0 ? layer_core_attn(&x)
			  : strcmp(gran, "only_attn") == 0 ? layer_only_attn(&x)
							    : m->layer_full;
	for (int64_t l = 0; l < L; l++)
		m->stage[stage_of_layer(cfg, l, L, pp, vpp)].layers++;
	for (int64_t s = 0; s < pp; s++) {
		gpt_train_stage_mem *st = &m->stage[s];
		model_activations(cfg, &shape, st, s, tp, pp, x.flash, storage);
		if (cfg->quantization.enable && st->layers > 0) {
			double q = qat_work(cfg, &shape, &x);
			st->act_none += q;
			st->act_full += q;
			st->act_config += q;
		}
		double P = (double)st->params;
		/* Stages 2 and 3 work on one unit at a time: a window for one layer,
		 * plus the embedding and the final LayerNorm, which stay whole for
		 * the step (wte is used at both ends of the model). */
		double window = (double)layer_params + (s == 0 || s == pp - 1 ? (double)embed_params : 0) +
				(s == pp - 1 ? (double)final_params : 0);
		/* fp16 at stage 3: no shard, the master weights are the parameters */
		st->param_bytes = from_master ? 0 : ceil_div(P, stage >= 3 ? d : 1) * m->param_bytes_each;
		if (stage >= 3 && (d > 1 || from_master))
			st->param_bytes += window * m->param_bytes_each;
		st->grad_bytes = ceil_div(P, stage >= 2 ? d : 1) * m->grad_bytes_each;
		if (stage >= 2 && d > 1)
			st->grad_bytes += (window + (cfg->distributed.overlap_grad_reduce ? (double)layer_params : 0)) *
					  m->grad_bytes_each; /* overlapped: a second layer window */
		double opt = ceil_div(P, d) * m->optim_bytes_each;
		/* offload moves the state of a GPU rank to the host, with the
		 * pinned images the shard's gradients come down into and its
		 * parameters go up from; a CPU rank's state is there already
		 * (offload changes nothing), so it stays in the rank's total */
		if (cfg->distributed.sharding.sharding_offload && gpu)
			st->optim_host = opt + 2 * ceil_div(P, d) * m->param_bytes_each;
		else
			st->optim_device = opt;
		if (gpu) {
			int64_t C = shape.hidden, N = shape.ffn / tp;
			if (3 * C / tp > N)
				N = 3 * C / tp;
			if (C > N)
				N = C;
			st->work = (double)gpt_cuda_work_bytes(C, N, cfg->global.micro_batch_size,
							       cfg->data.train.dataset.max_seq_len,
							       shape.heads / tp);
		}
		st->device_total = st->param_bytes + st->grad_bytes + st->optim_device + st->act_config +
				   st->work;
		/* over shm, GPU ranks stage each bucket in pinned host memory of
		 * its own while it is reduced: at most the gradients once */
		if (overlapped(cfg) && gpu)
			st->overlap_host = st->grad_bytes;
		if (st->device_total > m->stage[m->busiest].device_total)
			m->busiest = (int)s;
	}
	return 0;
}

void gpt_train_memory_free(gpt_train_memory *m)
{
	free(m->stage);
	memset(m, 0, sizeof *m);
}

/* "174,591,889,408" */
static void grouped(int64_t v, char *out, size_t size)
{
	char digits[32];
	int n = snprintf(digits, sizeof digits, "%lld", (long long)v), j = 0;
	for (int i = 0; i < n && (size_t)j + 2 < size; i++) {
		if (i && (n - i) % 3 == 0)
			out[j++] = ',';
		out[j++] = digits[i];
	}
	out[j] = '\0';
}

static const char *human_count(double v, char *out, size_t size)
{
	if (v >= 1e9)
		snprintf(out, size, "%.1fB", v / 1e9);
	else if (v >= 1e6)
		snprintf(out, size, "%.1fM", v / 1e6);
	else if (v >= 1e3)
		snprintf(out, size, "%.1fK", v / 1e3);
	else
		snprintf(out, size, "%.0f", v);
	return out;
}

const char *gpt_train_format_mem(double bytes, char *out, size_t size)
{
	if (bytes == 0)
		snprintf(out, size, "0 B");
	else if (bytes >= 1024.0 * 1024 * 1024)
		snprintf(out, size, "%.2f GiB", bytes / (1024.0 * 1024 * 1024));
	else
		snprintf(out, size, "%.1f MiB", bytes / (1024.0 * 1024));
	return out;
}

static const char *grad_reduction(const gpt_config *cfg, char *out, size_t size)
{
	int64_t sh = cfg->distributed.sharding.sharding_degree;
	if (cfg->distributed.dp_degree * sh == 1)
		snprintf(out, size, "none (one data replica)");
	else if (sh > 1 && cfg->distributed.sharding.sharding_stage >= 2)
		snprintf(out, size, "unit by unit inside the backward (sharding stage %lld)%s, reduce-scattered over the sharding group%s",
			 (long long)cfg->distributed.sharding.sharding_stage,
			 cfg->distributed.overlap_grad_reduce ? ", each overlapped with the units before it" : "",
			 cfg->distributed.dp_degree > 1 ? "; the shards summed over dp once a step" : "");
	else if (overlapped(cfg))
		snprintf(out, size, "overlapped with the last backward, buckets of at least %g MB",
			 cfg->distributed.comm_buffer_size);
	else
		snprintf(out, size, "after the backward");
	return out;
}

int gpt_train_memory_write(const gpt_config *cfg, const gpt_train_memory *m, FILE *fp,
			   gpt_err *err)
{
	errno = 0; /* what a failed write sets, named in the error */
	char a[64], b[64], c[64], d[160];
	const gpt_train_stage_mem *w = &m->stage[m->busiest];
	int64_t sh = cfg->distributed.sharding.sharding_degree;
	int64_t sstage = cfg->distributed.sharding.sharding_stage;
	grouped(m->param_count, a, sizeof a);
	fprintf(fp, "parameters: %s (%s)\n", a, human_count((double)m->param_count, b, sizeof b));
	fprintf(fp, "model: %lld layers, hidden %lld, %lld heads (head size %lld), ffn %lld, "
		    "vocabulary %lld padded to %lld, sequence %lld\n",
		(long long)cfg->model.num_layers, (long long)cfg->model.hidden_size,
		(long long)cfg->model.num_attention_heads, (long long)cfg->head_size,
		(long long)cfg->model.ffn_hidden_size, (long long)cfg->model.vocab_size,
		(long long)cfg->padded_vocab_size, (long long)cfg->data.train.dataset.max_seq_len);
	fprintf(fp, "layout: world size %lld (from %s) = dp %lld x mp %lld x pp %lld x sharding "
		    "%lld; virtual pp %lld, schedule %s\n",
		(long long)cfg->world_size, cfg->world_size_from ? cfg->world_size_from : "?",
		(long long)cfg->distributed.dp_degree, (long long)cfg->distributed.mp_degree,
		(long long)cfg->distributed.pp_degree, (long long)sh,
		(long long)cfg->distributed.virtual_pp_degree, cfg->distributed.pipeline_schedule);
	fprintf(fp, "batch: global %lld = micro %lld x accumulate %lld x dp %lld x sharding %lld "
		    "(local %lld)\n",
		(long long)cfg->global.global_batch_size, (long long)cfg->global.micro_batch_size,
		(long long)cfg->engine.accumulate_steps, (long long)cfg->distributed.dp_degree,
		(long long)sh, (long long)cfg->global.local_batch_size);
	if (cfg->mixed) {
		fprintf(fp, "precision: %s %s (%d-byte parameters and gradients, %d-byte activations%s)",
			cfg->engine.mix_precision.level, cfg->engine.mix_precision.dtype,
			m->param_bytes_each, m->act_bytes_each,
			m->optim_bytes_each == 12 ? ", fp32 master weights"
			: m->optim_bytes_each == 10 ? ", fp32 master weights: the parameters and their low halves"
						    : "");
		if (strcmp(cfg->engine.mix_precision.dtype, "float16") == 0)
			fprintf(fp, ", loss scale %g", cfg->engine.mix_precision.scale_loss);
		fputc('\n', fp);
	} else {
		fprintf(fp, "precision: fp32 (4-byte parameters, gradients and activations)\n");
	}
	fprintf(fp, "sharding: stage %lld over %lld rank%s, offload %s\n", (long long)sstage,
		(long long)sh, sh == 1 ? "" : "s",
		cfg->distributed.sharding.sharding_offload ? "on" : "off");
	const gpt_intlist *keep = &cfg->model.no_recompute_layers;
	fprintf(fp, "recompute: %s", cfg->model.use_recompute ? cfg->model.recompute_granularity : "off");
	for (int i = 0; cfg->model.use_recompute && i < keep->n; i++)
		fprintf(fp, "%s%lld", i ? ", " : keep->n > 1 ? ", except layers " : ", except layer ",
			(long long)keep->v[i]);
	fprintf(fp, "%s\n", cfg->model.use_recompute && keep->n ? " (Model.no_recompute_layers)" : "");
	int64_t BT = cfg->global.micro_batch_size * cfg->data.train.dataset.max_seq_len;
	int64_t Vl = cfg->padded_vocab_size / cfg->distributed.mp_degree;
	gpt_model_opts ho = {.head_rows = cfg->model.classifier_rows};
	int64_t R = gpt_model_head_rows(&ho, BT, Vl);
	fprintf(fp, "classifier: blocks of %lld of a micro-batch's %lld token rows, %s of logits at a time "
		    "(Model.classifier_rows)\n",
		(long long)R, (long long)BT, gpt_train_format_mem((double)(R * Vl * m->act_bytes_each), a, sizeof a));
	fprintf(fp, "gradient reduction: %s\n", grad_reduction(cfg, d, sizeof d));
	fprintf(fp, "\nper-rank memory, busiest rank (pipeline stage %d of %lld: %lld layers, %s "
		    "parameter elements, micro-batches in flight: %.4g):\n",
		m->busiest, (long long)m->pp, (long long)w->layers,
		(grouped(w->params, a, sizeof a), a), w->in_flight);
	fprintf(fp, "  parameters:       %12s  (%d bytes each%s)\n",
		gpt_train_format_mem(w->param_bytes, a, sizeof a), m->param_bytes_each,
		gpt_train_params_from_master(cfg)
			? ", none kept: a window for one layer, the embedding and ln_f, cast from the fp32 master weights when used (sharding_stage 3 in float16)"
		: sstage >= 3 && sh > 1
			? ", split over the sharding group, plus a window for one layer, the embedding and ln_f"
			: "");
	fprintf(fp, "  gradients:        %12s  (%d bytes each%s)\n", gpt_train_format_mem(w->grad_bytes, a, sizeof a),
		m->grad_bytes_each,
		sstage < 2 || sh == 1 ? ""
		: cfg->distributed.overlap_grad_reduce
			? ", split over the sharding group, plus windows for two layers (their reductions overlap), the embedding and ln_f"
			: ", split over the sharding group, plus a window for one layer, the embedding and ln_f");
	int images = cfg->distributed.sharding.sharding_offload && cfg->global.device &&
		     strcmp(cfg->global.device, "gpu") == 0;
	fprintf(fp, "  optimizer state:  %12s  device, %s host  (%s, %d bytes each%s%s)\n",
		gpt_train_format_mem(w->optim_device, a, sizeof a), gpt_train_format_mem(w->optim_host, b, sizeof b),
		m->optim_bytes_each == 12   ? "fp32 master + m + v"
		: m->optim_bytes_each == 10 ? "the fp32 master's low halves + m + v"
					    : "m + v",
		m->optim_bytes_each,
		sh > 1 ? ", split over the sharding group" : "",
		images ? "; on the host with pinned images of the parameters and gradients"
		: cfg->distributed.sharding.sharding_offload ? "; offload changes nothing on a CPU rank, whose state is in host memory already"
							      : "");
	fprintf(fp, "  activations:      %12s  without recompute, %s with full recompute, %s as "
		    "configured\n",
		gpt_train_format_mem(w->act_none, a, sizeof a), gpt_train_format_mem(w->act_full, b, sizeof b),
		gpt_train_format_mem(w->act_config, c, sizeof c));
	if (w->work > 0)
		fprintf(fp, "  backend work:     %12s  (the cuBLASLt workspace and the largest temporary of an op)\n",
			gpt_train_format_mem(w->work, a, sizeof a));
	fprintf(fp, "  total:            %12s  device, %s host\n", gpt_train_format_mem(w->device_total, a, sizeof a),
		gpt_train_format_mem(w->optim_host, d, sizeof d));
	if (w->overlap_host > 0)
		fprintf(fp, "  overlap staging:  %12s  pinned host, where GPU ranks share a device over shm "
			    "(none over nccl)\n", gpt_train_format_mem(w->overlap_host, a, sizeof a));
	fprintf(fp, "  one layer, one micro-batch: %s stored, %s kept under full recompute\n",
		gpt_train_format_mem(m->layer_none, a, sizeof a), gpt_train_format_mem(m->layer_full, b, sizeof b));
	if (m->pp > 1) {
		fprintf(fp, "\nper stage:\n  %5s %6s %14s %14s %14s\n", "stage", "layers",
			"parameters", "activations", "device total");
		for (int64_t s = 0; s < m->pp; s++)
			fprintf(fp, "  %5lld %6lld %14s %14s %14s\n", (long long)s,
				(long long)m->stage[s].layers, gpt_train_format_mem(m->stage[s].param_bytes, a, sizeof a),
				gpt_train_format_mem(m->stage[s].act_config, b, sizeof b),
				gpt_train_format_mem(m->stage[s].device_total, c, sizeof c));
	}
	if (fflush(fp) || ferror(fp))
		return gpt_err_errno(err, GPT_EIO, errno ? errno : EIO, "writing the dry-run report");
	return 0;
}
