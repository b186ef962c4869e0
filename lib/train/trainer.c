/* The training loop of one process: data, micro-batches, AdamW, schedule,
 * clipping, evaluation, log lines, checkpoints and resume. */
#include "train/trainer-impl.h"
#if GPT_HAVE_CUDA
#include "cuda/cuda.h"
#endif

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- set-up ---- */

static int check_supported(const gpt_config *cfg, gpt_err *err)
{
	const char *dev = cfg->global.device ? cfg->global.device : "cpu";
	if (strcmp(dev, "gpu") == 0 && !GPT_HAVE_CUDA)
		return gpt_err_set(err, GPT_EUSAGE,
				   "Global.device: gpu: this build has no CUDA backend (built with CUDA=0 or without nvcc); rebuild with CUDA=1 or use -o Global.device=cpu");
	if (strcmp(dev, "cpu") != 0 && strcmp(dev, "gpu") != 0)
		return gpt_err_set(err, GPT_EUSAGE, "Global.device: '%s': expected cpu or gpu", dev);
	/* before the training, not at its first checkpoint */
	const char *od = cfg->engine.save_load.output_dir;
	struct stat st;
	if (od && *od && stat(od, &st) == 0 && !S_ISDIR(st.st_mode))
		return gpt_err_set(err, GPT_EUSAGE,
				   "Engine.save_load.output_dir %s: exists and is not a directory; name a directory for the checkpoints",
				   od);

	/* The settings it has no way to honour were refused by the configuration
	 * (resolve_unsupported in lib/config/resolve.c). */
	if (!cfg->data.train.dataset.input_dir || !*cfg->data.train.dataset.input_dir)
		return gpt_config_refuse(cfg, "Data.Train.dataset.input_dir", err,
					 "not set; name a dataset made by gpt-preprocess");
	return 0;
}

/* The compute backend, attached to the comm before its first collective
 * (check_run's, on host values): nccl takes only device memory, and host
 * buffers reach it staged through the attached backend's. */
static int setup_backend(trainer *tr, gpt_err *err)
{
	const gpt_config *cfg = tr->cfg;
	int rc = 0; /* a gpu device without CUDA: check_supported refused it */
	if (cfg->global.device && strcmp(cfg->global.device, "gpu") == 0) {
#if GPT_HAVE_CUDA
		rc = gpt_backend_cuda_init(&tr->be, tr->dtype, tr->device, err);
		if (rc)
			return gpt_err_prefix(err, "Global.device: gpu");
		if (tr->comm) { /* collectives get device buffers from now on */
			gpt_comm_set_memory(tr->comm, &tr->be);
			gpt_log_printf(&tr->log, GPT_LOG_INFO, "rank %d: GPU %d, collectives over %s%s", tr->rank,
				       tr->device, gpt_comm_backend_name(tr->comm),
				       strcmp(gpt_comm_backend_name(tr->comm), "shm") == 0
					       ? " (device buffers staged through pinned host memory)" : "");
		}
#endif
	} else {
		rc = gpt_backend_cpu_init(&tr->be, tr->dtype, 0, err);
	}
	return rc;
}

static int setup_model(trainer *tr, gpt_err *err)
{
	const gpt_config *cfg = tr->cfg;
	gpt_model_shape s;
	gpt_model_shape_from_config(cfg, &s);
	gpt_layout lo;
	const gpt_intlist *pl = &cfg->distributed.pp_layers;
	int rc = gpt_layout_make(&lo, &s, tr->tp, tr->tp_rank, tr->pp, tr->pp_rank, tr->chunks,
				 pl->n ? pl->v : NULL, err);
	if (rc)
		return rc;
	gpt_model_opts mo = {
		.slots = tr->slots,
		.sequence_parallel = cfg->model.sequence_parallel,
		.head_rows = cfg->model.classifier_rows,
		.fused_gelu = cfg->model.fused_linear,
		.loss_slots = tr->accum, /* a step's, taken once at its end */
		.batch = tr->MB,
		.seq_len = tr->T,
		.hidden_dropout = (float)cfg->model.hidden_dropout_prob,
		.attn_dropout = (float)cfg->model.attention_probs_dropout_prob,
		.seed = (uint32_t)cfg->global.seed,
		.flat_multiple = tr->sh,
		.no_full_grads = tr->stage >= 2,
		.no_full_params = tr->stage >= 3 || tr->pmaster,
	};
#if GPT_HAVE_CUDA
	/* fc's bias gradient from its weight gradient's GEMM too, where the
	 * backend takes them there (GPT_CUDA_BIAS_GRAD=gemm) */
	mo.fc_bias_in_gemm = strcmp(tr->be.name, "cuda") == 0 && gpt_cuda_bias_grad(&tr->be, 0) == GPT_CUDA_BGRAD_GEMM;
#endif
	if (cfg->model.use_recompute) {
		const char *g = cfg->model.recompute_granularity ? cfg->model.recompute_granularity : "full";
		if (gpt_recompute_parse(g, &mo.recompute))
			return gpt_err_set(err, GPT_EUSAGE, "Model.recompute_granularity: '%s' is not full, only_attn or core_attn", g);
		mo.no_recompute = cfg->model.no_recompute_layers.v;
		mo.n_no_recompute = cfg->model.no_recompute_layers.n;
	}
	if (!rc)
		rc = gpt_model_init(&tr->model, &tr->be, &s, &lo, &mo, err);
	if (!rc && tr->tp > 1)
		tr->model.tp_group = tr->groups.g[GPT_MESH_TP];
	if (!rc && tr->pp > 1) {
		size_t bytes = (size_t)gpt_model_stream_numel(&tr->model) * gpt_dtype_size(tr->dtype);
		tr->pp_grad_in = tr->be.ops->alloc(&tr->be, bytes, "pipeline receive buffer", err);
		rc = tr->pp_grad_in ? 0 : err->code;
	}
	if (!rc && cfg->quantization.enable)
		rc = gpt_tr_setup_qat(tr, err);
	/* Under sharding each rank keeps the optimizer state of one shard. */
	tr->shard = tr->model.n_alloc / tr->sh;
	tr->opt.begin = tr->sh_rank * tr->shard; /* for setup_zero, before the optimizer */
	tr->opt.end = tr->opt.begin + tr->shard;
	if (!rc && (tr->stage >= 2 || tr->pmaster))
		rc = gpt_tr_setup_zero(tr, err);
	int64_t end = tr->opt.end < tr->model.n_flat ? tr->opt.end : tr->model.n_flat;
	if (end < tr->opt.begin)
		end = tr->opt.begin;
	uint64_t seed = (uint64_t)cfg->global.seed;
	double std = cfg->model.initializer_range;
	/* the weights, then the optimizer's state made from them; with pmaster
	 * the master weights are made first and the weights written there */
	if (!rc && !tr->pmaster)
		rc = tr->stage >= 3 ? gpt_model_init_weights_range(&tr->model, seed, std, tr->pshard, tr->opt.begin, end, err)
				    : gpt_model_init_weights(&tr->model, seed, std, err);
	if (!rc)
		rc = gpt_optimizer_init(&tr->opt, &tr->model, tr->opt.begin, tr->opt.end, tr->pshard, tr->gshard,
					cfg->optimizer.beta1, cfg->optimizer.beta2, cfg->optimizer.epsilon,
					cfg->optimizer.weight_decay,
					(cfg->distributed.sharding.sharding_offload ? GPT_OPTIM_OFFLOAD : 0u) |
						(tr->pmaster ? GPT_OPTIM_MASTER_ONLY : 0u),
					err);
	if (!rc && tr->pmaster)
		rc = gpt_model_init_master_range(&tr->model, seed, std, tr->opt.master, tr->opt.begin, end, err);
	return rc;
}

static int setup_schedule(trainer *tr, gpt_err *err)
{
	const gpt_config *cfg = tr->cfg;
	tr->lr = (gpt_lr_schedule){
		.max_lr = cfg->optimizer.lr.max_lr,
		.min_lr = cfg->optimizer.lr.min_lr,
		.warmup = gpt_config_warmup(cfg),
		.decay_steps = cfg->optimizer.lr.decay_steps > 0 ? cfg->optimizer.lr.decay_steps : tr->total_steps,
	};
	const char *name = cfg->optimizer.lr.name ? cfg->optimizer.lr.name : "CosineAnnealingWithWarmupDecay";
	int kind = gpt_lr_kind_parse(name);
	if (kind < 0) /* the config's enum already refuses others */
		return gpt_err_set(err, GPT_EINTERNAL, "Optimizer.lr.name: '%s' has no schedule", name);
	tr->lr.kind = (gpt_lr_kind)kind;
	int rc = gpt_lr_check(&tr->lr, err);
	/* fp16 needs a (dynamic) loss scale; fp32 and bf16 have fp32's range. */
	int fp16 = tr->dtype == GPT_DTYPE_F16;
	gpt_loss_scaler_init(&tr->scaler, fp16 ? cfg->engine.mix_precision.scale_loss : 1.0, fp16);
	return rc;
}

/* The validation and test splits are optional: one that holds no documents
 * leaves *out NULL, err saying why. */
static int open_split(const gpt_config_data *d, int which, int64_t seq_len, int64_t samples, int64_t vocab,
		      uint64_t seed, gpt_loader **out, gpt_err *err)
{
	const char *split = d->dataset.split ? d->dataset.split : "949,50,1";
	const char *what = which == 0 ? "Data.Train" : "Data.Eval";
	if (!d->dataset.input_dir || !*d->dataset.input_dir)
		return gpt_err_set(err, GPT_EUSAGE, "%s.dataset.input_dir: not set; name a dataset made by gpt-preprocess",
				   what);
	int rc = gpt_loader_open(out, d->dataset.input_dir, split, which, (int)seq_len, samples, seed,
				 which ? GPT_LOADER_OPTIONAL : 0, err);
	if (rc || !*out)
		return rc ? gpt_err_prefix(err, "%s.dataset.input_dir", what) : 0;
	gpt_loader_check_vocab(*out, vocab);
	return 0;
}

/* An evaluation split must not read documents the training split trains
 * on, as a Data.Eval.dataset.split other than the training's can over the
 * same data (the seed configurations give both: an override of one). */
static int apart_from_training(const trainer *tr, const gpt_loader *l, int which, gpt_err *err)
{
	gpt_err o = {0};
	if (!l || !gpt_loader_disjoint(tr->train, l, &o))
		return 0;
	const gpt_config_data *t = &tr->cfg->data.train, *e = &tr->cfg->data.eval;
	return gpt_err_set(err, GPT_EUSAGE,
			   "Data.Eval.dataset.split: the %s split of '%s' takes documents that the training split of Data.Train.dataset.split '%s' trains on (%s); give both the same split",
			   which == 1 ? "validation" : "test", e->dataset.split ? e->dataset.split : "949,50,1",
			   t->dataset.split ? t->dataset.split : "949,50,1", o.msg);
}

/* A model of any vocabulary but the byte tokenizer's 257 is, to gpt-infer
 * and gpt-export, one of GPT-2's BPE: trained on a -t bytes dataset, it
 * learns byte ids that they would feed GPT-2 ids (and its --ppl refuses the
 * dataset). The run goes on, but says so. */
static void warn_byte_data(trainer *tr)
{
	int64_t V = tr->cfg->model.vocab_size;
	for (int i = 0; V != 257 && i < gpt_loader_num_datasets(tr->train); i++) {
		const char *path;
		const gpt_dataset *ds = gpt_loader_dataset(tr->train, i, &path);
		int yes = 0;
		char why[256];
		gpt_err e = {0};
		if (gpt_dataset_looks_bytes(ds, &yes, why, sizeof why, &e) == 0 && yes) {
			gpt_log_printf(&tr->log, GPT_LOG_WARNING,
				       "%s: %s, but Model.vocab_size is %lld, which gpt-infer and gpt-export take for "
				       "GPT-2's BPE: the model would be given GPT-2 ids for the bytes it learnt; set "
				       "Model.vocab_size to 257 for byte data, or make the dataset with gpt-preprocess -t gpt2",
				       path, why, (long long)V);
			return;
		}
	}
}

static int setup_data(trainer *tr, gpt_err *err)
{
	const gpt_config *cfg = tr->cfg;
	uint64_t seed = (uint64_t)cfg->global.seed;
	int64_t steps = cfg->engine.max_steps;
	int rc = open_split(&cfg->data.train, 0, tr->T, steps * tr->G, cfg->model.vocab_size, seed, &tr->train, err);
	if (rc)
		return rc;
	warn_byte_data(tr);
	int64_t per_epoch = gpt_loader_epoch_samples(tr->train);
	if (per_epoch < tr->G)
		return gpt_err_set(err, GPT_EDATA,
				   "%s: the training split holds %lld samples of %lld tokens, fewer than one global batch of %lld; use more data or a smaller Global.global_batch_size",
				   cfg->data.train.dataset.input_dir, (long long)per_epoch,
				   (long long)tr->T + 1, (long long)tr->G);
	/* FleetX sizes its dataset by max_steps, so its default of one epoch
	 * never ends a run early; an epoch count given explicitly does. */
	int k = gpt_config_key_find("Engine.num_train_epochs");
	if (k >= 0 && gpt_config_given(cfg, k)) {
		int64_t per = per_epoch / tr->G; /* >= 1, checked above */
		if (cfg->engine.num_train_epochs < steps / per + 1 && cfg->engine.num_train_epochs * per < steps)
			steps = cfg->engine.num_train_epochs * per;
	}
	tr->total_steps = steps;
	/* A split without validation documents (Megatron-LM's '100,0,0', or a
	 * small corpus) trains without evaluations, as Megatron-LM does. */
	if (cfg->engine.eval_freq > 0 && cfg->engine.eval_iters > 0) {
		gpt_err verr = {0};
		rc = open_split(&cfg->data.eval, 1, tr->T, cfg->engine.eval_iters * tr->G, cfg->model.vocab_size, seed + 1,
				&tr->valid, &verr);
		if (rc) {
			*err = verr;
			return rc;
		}
		if ((rc = apart_from_training(tr, tr->valid, 1, err)))
			return rc;
		if (!tr->valid)
			gpt_log_printf(&tr->log, GPT_LOG_WARNING,
				       "no evaluation during training: %s; Engine.eval_freq=0 trains without one and without this warning",
				       verr.msg);
	}
	/* The test split is evaluated after training; a split without test
	 * documents (a small corpus, or a third weight of 0) skips that. */
	if (cfg->engine.test_iters > 0) {
		gpt_err terr = {0};
		if (open_split(&cfg->data.eval, 2, tr->T, cfg->engine.test_iters * tr->G, cfg->model.vocab_size, seed + 2,
			       &tr->test, &terr) || !tr->test)
			gpt_log_printf(&tr->log, GPT_LOG_WARNING,
				       "no test evaluation after training: %s; Engine.test_iters=0 trains without one and without this warning",
				       terr.msg);
		if ((rc = apart_from_training(tr, tr->test, 2, err)))
			return rc;
	}
	tr->inp = gpt_malloc((size_t)(tr->MB * tr->T) * 4, "inputs", err);
	tr->tgt = gpt_malloc((size_t)(tr->MB * tr->T) * 4, "targets", err);
	if (!tr->inp || !tr->tgt)
		return GPT_EINTERNAL;
	return gpt_tr_prefetch_start(&tr->pf, tr->train, tr->LB, tr->T + 1, err);
}

/* Splits sample rows (T + 1 tokens) into inputs and next-token targets. */
static void split_rows(trainer *tr, const int32_t *rows)
{
	for (int64_t b = 0; b < tr->MB; b++)
		for (int64_t t = 0; t < tr->T; t++) {
			tr->inp[b * tr->T + t] = rows[b * (tr->T + 1) + t];
			tr->tgt[b * tr->T + t] = rows[b * (tr->T + 1) + t + 1];
		}
}

/* ---- steps ---- */

/* Each replica evaluates its share of every batch of `l`; the sums are
 * added. The line is the [eval] line, or the same with [test]. */
static int evaluate(trainer *tr, const gpt_loader *l, int64_t iters, int test, gpt_err *err)
{
	double t0 = gpt_now_s(), sum = 0;
	int64_t ntok = 0, first = tr->replica * tr->LB;
	/* a pipeline takes the replica's whole batch at once, else a micro-batch */
	int64_t nrows = tr->pp > 1 ? tr->LB : tr->MB;
	int32_t *rows = gpt_malloc((size_t)(nrows * (tr->T + 1)) * 4, "eval batch", err);
	int rc = rows ? 0 : GPT_EINTERNAL;
	if (tr->pp > 1) {
		for (int64_t it = 0; it < iters && !rc; it++) {
			for (int64_t b = 0; b < tr->LB && !rc; b++)
				rc = gpt_loader_sample(l, (it * tr->G + first + b) % gpt_loader_size(l),
						       rows + b * (tr->T + 1), err);
			double s = 0;
			int64_t n = 0;
			if (!rc)
				rc = gpt_tr_pipeline_eval(tr, rows, (uint32_t)tr->step, &s, &n, err);
			sum += s;
			ntok += n;
			gpt_heartbeat_beat(tr->hb, tr->step);
		}
	}
	for (int64_t it = 0; tr->pp == 1 && it < iters && !rc; it++)
		for (int64_t j = 0; j < tr->accum && !rc; j++) {
			for (int64_t b = 0; b < tr->MB && !rc; b++)
				rc = gpt_loader_sample(l, (it * tr->G + first + j * tr->MB + b) % gpt_loader_size(l),
						       rows + b * (tr->T + 1), err);
			split_rows(tr, rows);
			double s = 0;
			int64_t n = 0;
			if (!rc)
				rc = gpt_model_forward(&tr->model, tr->inp, tr->tgt, 0, (uint32_t)tr->step, 0, NULL, &s, &n,
						       err);
			sum += s;
			ntok += n;
			gpt_heartbeat_beat(tr->hb, tr->step);
		}
	free(rows);
	if (!rc)
		rc = gpt_tr_sum_over_replicas(tr, &sum, &ntok, err);
	if (rc)
		return gpt_err_prefix(err, "%s at global step %lld", test ? "test" : "evaluation",
				      (long long)tr->step);
	/* the epoch and batch of the step evaluated after, as its step line gives them */
	int64_t spe = gpt_loader_epoch_samples(tr->train) / tr->G;
	int64_t last = tr->step > 0 ? tr->step - 1 : 0;
	gpt_eval_line e = {.step = tr->step, .epoch = last / spe, .batch = last % spe,
			   .loss = ntok ? sum / (double)ntok : 0,
			   .avg_eval_cost = iters ? (gpt_now_s() - t0) / (double)iters : 0};
	char line[512];
	gpt_eval_line_format(line, sizeof line, &e);
	if (test)
		memcpy(line, "[test]", 6); /* same width as "[eval]" */
	gpt_log_printf(&tr->log, GPT_LOG_INFO, "%s", line);
	return 0;
}

/* One optimizer step over this replica's part of the global batch in
 * `rows`; *loss gets the mean over the whole global batch. */
static int train_step(trainer *tr, const int32_t *rows, double *loss, int *skipped, gpt_err *err)
{
	gpt_model *m = &tr->model;
	gpt_tr_overlap_begin(tr);
	int rc = gpt_model_zero_grad(m, err);
	if (!rc && tr->gshard)
		rc = m->be->ops->zero(m->be, tr->gshard, (size_t)tr->shard * gpt_dtype_size(m->be->dtype), err);
	double sum = 0;
	int64_t ntok = 0;
	/* every token of the global batch weighs the same, whichever rank has it */
	double fault = gpt_tr_fault_factor(tr, tr->step + 1); /* 1 unless a test injects a fault */
	float dloss = (float)(tr->scaler.scale / (double)(tr->G * tr->T) * fault);
	uint32_t step = (uint32_t)(tr->step + 1);
	if (!rc && tr->wte_held_back && m->unit_end[0] > m->unit_begin[0])
		rc = m->be->ops->zero(m->be, tr->gw[0],
				      (size_t)(m->unit_end[0] - m->unit_begin[0]) * gpt_dtype_size(m->be->dtype), err);
	if (!rc && tr->pp > 1)
		rc = gpt_tr_pipeline_step(tr, rows, step, dloss, &ntok, err);
	for (int64_t j = 0; tr->pp == 1 && j < tr->accum && !rc; j++) {
		split_rows(tr, rows + j * tr->MB * (tr->T + 1));
		int64_t n = 0;
		/* sample0: the global index of this micro-batch's first sample,
		 * which keys dropout the same in every layout; the losses wait
		 * on the device for the end of the step */
		rc = gpt_model_forward(m, tr->inp, tr->tgt, 1, step, tr->replica * tr->LB + j * tr->MB,
				       &dloss, NULL, &n, err);
		if (!rc)
			rc = gpt_model_backward(m, err);
		ntok += n;
	}
	if (!rc)
		rc = gpt_qat_step_end(m, err);
	if (tr->ov.on) /* waits for the buckets even after a failure */
		rc = gpt_tr_overlap_end(tr, rc, err);
	else if (!(rc = gpt_tr_zero_drain(tr, rc, err))) /* the same for stages 2 and 3 */
		rc = gpt_tr_reduce_grads(tr, err);
	double sumsq = 0, pact_sumsq = 0;
	if (!rc)
		rc = gpt_optimizer_grad_sumsq(&tr->opt, &sumsq, err);
	/* after the norm's wait, so a step waits for its device once: the
	 * losses, then their sums over the stages and the replicas */
	if (!rc)
		rc = gpt_model_take_losses(m, &sum, err);
	sum *= fault;
	if (!rc)
		rc = gpt_tr_sum_over_stages(tr, &sum, &ntok, err);
	if (!rc)
		rc = gpt_tr_sum_over_replicas(tr, &sum, &ntok, err);
	/* PACT's alphas: the same sums on every tp and sharding rank after
	 * gpt_qat_step_end, so one of them counts them */
	if (!rc)
		rc = gpt_qat_pact_grads(m, &pact_sumsq, err);
	if (tr->tp_rank == 0 && tr->sh_rank == 0)
		sumsq += pact_sumsq;
	/* the shards, the tp slices and the stages hold disjoint parts (each
	 * replicated tensor counted by one owner), so their parts add to the
	 * global norm; the data replicas hold the same */
	if (!rc) {
		float v = (float)sumsq;
		static const gpt_mesh_axis axes[] = {GPT_MESH_SHARDING, GPT_MESH_TP, GPT_MESH_PP};
		int64_t deg[] = {tr->sh, tr->tp, tr->pp};
		for (int a = 0; a < 3 && !rc; a++)
			if (deg[a] > 1)
				rc = gpt_comm_all_reduce(tr->groups.g[axes[a]], &v, &v, 1, GPT_DTYPE_F32,
							 GPT_REDUCE_SUM, err);
		sumsq = v;
	}
	if (rc)
		return rc;
	*loss = ntok ? sum / (double)ntok : 0;
	double norm = sqrt(sumsq) / tr->scaler.scale;
	int verdict;
	if ((rc = gpt_tr_judge_step(tr, *loss, norm, &verdict, err)))
		return rc;
	tr->last_scale = tr->scaler.scale;
	*skipped = verdict;
	double lr = tr->step_lr = gpt_lr_at(&tr->lr, tr->lr_steps + 1);
	if (verdict != GPT_TR_OVERFLOW)
		tr->lr_steps++;
	/* the loss scale keeps its count: a spike is no overflow, and a
	 * non-finite loss or gradients at the minimum scale are Engine.nan_policy's */
	if (verdict == GPT_TR_SPIKE || verdict == GPT_TR_NONFINITE)
		return 0;
	if (gpt_loss_scaler_update(&tr->scaler, verdict == GPT_TR_OVERFLOW))
		return 0;
	double clip = tr->cfg->optimizer.grad_clip.clip_norm, scale = 1.0 / tr->scaler.scale;
	if (clip > 0 && norm > clip)
		scale *= clip / (norm + 1e-6);
	rc = gpt_optimizer_step(&tr->opt, lr, scale, err);
	if (!rc && m->qat) {
		gpt_adamw h = {.lr = lr, .beta1 = tr->opt.beta1,
			       .beta2 = tr->opt.beta2, .eps = tr->opt.eps,
			       .weight_decay = tr->opt.weight_decay, .grad_scale = scale, .t = tr->opt.t};
		rc = gpt_qat_pact_step(m, &h, err);
	}
	/* each rank updated its shard: gather the whole parameters again (at
	 * stage 3 they stay sharded; the windows are gathered when used) */
	tr->pw_valid[0] = tr->pw_valid[2] = 0;
	if (!rc && tr->sh > 1 && tr->stage < 3)
		rc = gpt_comm_all_gather(tr->groups.g[GPT_MESH_SHARDING],
					 (char *)m->params + tr->opt.begin * (int64_t)gpt_dtype_size(m->be->dtype),
					 m->params, tr->shard, m->be->dtype, err);
	return rc;
}

int gpt_tr_saves_at(const trainer *tr, int64_t step)
{
	/* every save_steps steps, at the end, and every save_epoch epochs */
	const gpt_config *cfg = tr->cfg;
	int64_t spe = gpt_loader_epoch_samples(tr->train) / tr->G;
	int64_t ss = cfg->engine.save_load.save_steps, se = cfg->engine.save_load.save_epoch;
	int by_steps = ss > 0 && (step % ss == 0 || step == tr->total_steps);
	int by_epoch = se > 0 && step % spe == 0 && step / spe % se == 0;
	return by_steps || by_epoch;
}

#if GPT_HAVE_CUDA
/* Which tiles the GPU's attention took at the first step (the forward,
 * dq and dkv kernels each time their forms at their first call and keep
 * the fastest, unless GPT_CUDA_ATTN_ROWS says), where it has the choice:
 * a head size up to 128 on the tensor cores (above 64, the forward's
 * two forms of 64 rows). */
static void log_attention_tiles(trainer *tr)
{
	const gpt_config *cfg = tr->cfg;
	int64_t hs = cfg->model.hidden_size / cfg->model.num_attention_heads;
	int used[3];
	if (strcmp(tr->be.name, "cuda") != 0 || !gpt_cuda_attention_tensor_cores(tr->dtype, hs))
		return;
	gpt_cuda_attention_rows_used(&tr->be, used);
	if (!used[0])
		return;
	int timed = 1;
	for (int k = 0; k < 3; k++)
		timed &= gpt_cuda_attention_kind_rows(&tr->be, k) == GPT_CUDA_ATTN_AUTO;
	gpt_log_printf(&tr->log, GPT_LOG_INFO,
		       "attention tiles: forward %s, dq %s, dkv %s rows (%s)", gpt_cuda_attention_form(used[0]),
		       gpt_cuda_attention_form(used[1]), gpt_cuda_attention_form(used[2]),
		       timed ? "each the fastest of its forms (64, 128; the forward's 64a: scores a key tile ahead, "
			       "and 64m: the dropout mask drawn first), timed at its first call; "
			       "GPT_CUDA_ATTN_ROWS=64, 64a, 64m or 128 sets them, F,Q,K each kernel's"
			     : "GPT_CUDA_ATTN_ROWS");
}

/* Under GPT_CUDA_BIAS_GRAD=gemm, how many of the first step's bias
 * gradients cuBLASLt's epilogue gave (the others: the column sums, where
 * it has no algorithm with it for the shape). */
static void log_bias_grads(trainer *tr)
{
	if (strcmp(tr->be.name, "cuda") != 0 || gpt_cuda_bias_grad(&tr->be, 0) != GPT_CUDA_BGRAD_GEMM)
		return;
	gpt_log_printf(&tr->log, GPT_LOG_INFO,
		       "bias gradients: %lld of the first step's from cuBLASLt's BGRADB epilogue "
		       "(GPT_CUDA_BIAS_GRAD=gemm; column sums where it has no algorithm for a shape)",
		       (long long)gpt_cuda_bias_grad_gemms(&tr->be));
}

/* Under GPT_CUDA_GEMM_TUNE, what the first step's timing of cuBLASLt's
 * algorithms chose. */
static void log_gemm_tuning(trainer *tr)
{
	int n;
	if (strcmp(tr->be.name, "cuda") != 0 || (n = gpt_cuda_gemm_tune(&tr->be, 0)) < 2)
		return;
	int64_t moved, timed = gpt_cuda_gemm_tuned(&tr->be, &moved);
	gpt_log_printf(&tr->log, GPT_LOG_INFO,
		       "GEMM algorithms: %lld shapes timed, %lld of them faster in another than cuBLASLt's first "
		       "(GPT_CUDA_GEMM_TUNE=%d: the fastest of its first %d, timed at a shape's first call; the "
		       "bits may differ from run to run)",
		       (long long)timed, (long long)moved, n, n);
}
#endif

static int run(trainer *tr, gpt_err *err)
{
	const gpt_config *cfg = tr->cfg;
	/* An epoch is the steps one pass over the training split makes, whole
	 * global batches only (drop_last); the samples left over start the next. */
	int64_t spe = gpt_loader_epoch_samples(tr->train) / tr->G;
	double t_int = gpt_now_s(), reader = 0, loss_int = 0;
	int64_t steps_in_int = 0;
	int rc = 0;
#if GPT_HAVE_CUDA
	int tiles_logged = 0;
#endif
	if (tr->step < tr->total_steps)
		gpt_tr_prefetch_request(&tr->pf, tr->step * tr->G + tr->replica * tr->LB, tr->LB);
	while (tr->step < tr->total_steps && !rc) {
		double w0 = gpt_now_s();
		int32_t *rows = gpt_tr_prefetch_wait(&tr->pf, tr->step * tr->G + tr->replica * tr->LB, err);
		reader += gpt_now_s() - w0;
		if (!rows)
			return gpt_err_prefix(err, "reading the batch of global step %lld", (long long)tr->step + 1);
		if (tr->step + 1 < tr->total_steps)
			gpt_tr_prefetch_request(&tr->pf, (tr->step + 1) * tr->G + tr->replica * tr->LB, tr->LB);
		double loss;
		int skipped = 0;
		rc = train_step(tr, rows, &loss, &skipped, err);
		if (rc)
			return gpt_err_prefix(err, "global step %lld", (long long)tr->step + 1);
#if GPT_HAVE_CUDA
		if (!tiles_logged++) {
			log_attention_tiles(tr);
			log_bias_grads(tr);
			log_gemm_tuning(tr);
		}
#endif
		tr->step++;
		tr->consumed_samples += tr->G;
		tr->consumed_tokens += tr->G * tr->T;
		steps_in_int++;
		loss_int += loss;
		gpt_heartbeat_beat(tr->hb, tr->step);
		/* log, skip, stop or roll back (which leaves tr->step as it is) */
		if (skipped == GPT_TR_OVERFLOW) { /* what the float16 loss scale is for */
			char line[256];
			gpt_amp_skip_line_format(line, sizeof line, tr->step, tr->last_scale, tr->scaler.scale);
			gpt_log_printf(&tr->log, GPT_LOG_WARNING, "%s", line);
		}
		if (skipped == GPT_TR_NONFINITE && (rc = gpt_tr_nonfinite(tr, loss, err)))
			return rc;
		/* the loss, as the costs, is the mean over the steps since the
		 * last line (FleetX's eager engine and Megatron-LM average it
		 * over the logging interval too) */
		if (tr->step % cfg->engine.logging_freq == 0 || tr->step == tr->total_steps) {
			double el = gpt_now_s() - t_int;
			double cost = el / (double)steps_in_int;
			gpt_step_line sl = {.step = tr->step,
					    .epoch = (tr->step - 1) / spe,
					    .batch = (tr->step - 1) % spe,
					    .loss = loss_int / (double)steps_in_int,
					    .avg_reader_cost = reader / (double)steps_in_int,
					    .avg_batch_cost = cost,
					    .ips_total = (double)(tr->G * tr->T) / cost,
					    .ips = (double)(tr->G * tr->T) / cost / (double)cfg->world_size,
					    /* float16's scale, as FleetX, PaddleNLP and
					     * Megatron-LM give it on every line */
					    .loss_scale = tr->scaler.dynamic ? tr->scaler.scale : 0,
					    .lr = tr->step_lr};
			char line[512];
			gpt_step_line_format(line, sizeof line, &sl);
			gpt_log_printf(&tr->log, GPT_LOG_INFO, "%s", line);
			t_int = gpt_now_s();
			reader = loss_int = 0;
			steps_in_int = 0;
		}
		/* evaluations and saves are no step time: the next line's
		 * avg_batch_cost and ips leave them out, as Megatron-LM stops its
		 * interval timer around them */
		double t_side = gpt_now_s();
		if (tr->valid && cfg->engine.eval_freq > 0 && tr->step % cfg->engine.eval_freq == 0)
			rc = evaluate(tr, tr->valid, cfg->engine.eval_iters, 0, err);
		if (!rc && gpt_tr_saves_at(tr, tr->step))
			rc = gpt_tr_save(tr, tr->step == tr->total_steps, err);
		if (!rc)
			rc = gpt_tr_ckpt_poll(tr, err);
		t_int += gpt_now_s() - t_side;
		/* A stop signal on any rank: every rank ends after this step. */
		int32_t stop = tr->stop && *tr->stop;
		if (!rc && tr->comm)
			rc = gpt_comm_all_reduce(gpt_comm_world(tr->comm), &stop, &stop, 1, GPT_DTYPE_I32,
						 GPT_REDUCE_MAX, err);
		if (!rc && stop) {
			gpt_log_printf(&tr->log, GPT_LOG_WARNING,
				       "stop requested (SIGTERM or SIGUSR1): saving global step %lld and stopping",
				       (long long)tr->step);
			if (tr->saved_step != tr->step)
				rc = gpt_tr_save(tr, 1, err);
			return rc;
		}
	}
	if (!rc && tr->test && tr->step == tr->total_steps)
		rc = evaluate(tr, tr->test, cfg->engine.test_iters, 1, err);
	return rc;
}

/* Rank 0 holds output_dir (gpt_ckpt_lock: an flock of the directory,
 * released when the process ends) so that a second run, or gpt-ckpt-merge,
 * does not write into it; every rank
 * checks that all were started with the same configuration. */
static int check_run(trainer *tr, gpt_err *err)
{
	const char *od = tr->cfg->engine.save_load.output_dir;
	int rc = 0;
	if (tr->rank == 0 && od && *od)
		tr->out_made = gpt_path_first_missing(od);
	if (tr->rank == 0 && od && *od && !(rc = gpt_mkdir_p(od, err))) {
		rc = gpt_ckpt_lock("Engine.save_load.output_dir", od, &tr->out_lock, err);
		/* held now, so no other run (nor gpt-ckpt-merge) is saving into it */
		int files = 0, dirs = 0;
		if (!rc)
			gpt_ckpt_remove_leftovers(od, &files, &dirs);
		if (files)
			gpt_log_printf(&tr->log, GPT_LOG_INFO,
				       "%s: removed %d temporary file%s of `latest` left by a run killed while it replaced it",
				       od, files, files > 1 ? "s" : "");
		if (dirs)
			gpt_log_printf(&tr->log, GPT_LOG_INFO,
				       "%s: removed %d staging director%s of a save that a killed run left",
				       od, dirs, dirs > 1 ? "ies" : "y");
	}
	if (!tr->comm)
		return rc;
	/* a hash of the resolved configuration, and its complement: the
	 * maxima of both over the ranks agree only where all hashes do */
	gpt_err yerr = {0};
	char *yaml = gpt_tr_config_yaml(tr, &yerr);
	uint64_t h = yaml ? gpt_xxh3_64(yaml, strlen(yaml)) : 0;
	free(yaml);
	int32_t v[9] = {rc != 0};
	for (int i = 0; i < 4; i++) {
		v[1 + i] = (int32_t)((h >> (16 * i)) & 0xffff);
		v[5 + i] = 0xffff - v[1 + i];
	}
	gpt_err cerr = {0};
	int crc = gpt_comm_all_reduce(gpt_comm_world(tr->comm), v, v, 9, GPT_DTYPE_I32, GPT_REDUCE_MAX,
				      rc ? &cerr : err);
	if (rc || crc)
		return rc ? rc : crc;
	if (v[0])
		return gpt_err_set(err, GPT_EUSAGE, "rank 0 cannot use Engine.save_load.output_dir %s; its worker log says why", od);
	for (int i = 0; i < 4; i++)
		if (v[1 + i] != 0xffff - v[5 + i])
			return gpt_err_set(err, GPT_EUSAGE,
					   "the ranks were started with different configurations (another config file or -o override on some); start every rank with the same ones");
	return 0;
}

static void trainer_free(trainer *tr)
{
	gpt_tr_prefetch_stop(&tr->pf);
	gpt_tr_faults_free(tr);
	gpt_tr_overlap_free(tr);
	gpt_optimizer_free(&tr->opt);
	gpt_tr_free_zero(tr);
	if (tr->pp_grad_in)
		tr->be.ops->free(&tr->be, tr->pp_grad_in);
	free(tr->sched);
	gpt_model_free(&tr->model);
	/* the comm outlives the backend here: it must not stage through it */
	if (tr->comm)
		gpt_comm_set_memory(tr->comm, NULL);
#if GPT_HAVE_CUDA
	if (tr->be.ops && strcmp(tr->be.name, "cuda") == 0)
		gpt_backend_cuda_free(&tr->be);
	else
#endif
	if (tr->be.ops)
		gpt_backend_cpu_free(&tr->be);
	gpt_loader_close(tr->train);
	gpt_loader_close(tr->valid);
	gpt_loader_close(tr->test);
	gpt_heartbeat_close(tr->hb);
	if (tr->out_lock >= 0)
		close(tr->out_lock);
	free(tr->inp);
	free(tr->tgt);
	if (tr->comm) {
		gpt_mesh_groups_free(&tr->groups);
		gpt_comm_close(tr->comm);
	}
}

gpt_dtype gpt_train_storage_dtype(const gpt_config *cfg)
{
	if (!cfg->mixed)
		return GPT_DTYPE_F32;
	const char *d = cfg->engine.mix_precision.dtype;
	return d && strcmp(d, "bfloat16") == 0 ? GPT_DTYPE_BF16 : GPT_DTYPE_F16;
}

int gpt_train_params_from_master(const gpt_config *cfg)
{
	int gpu = cfg->global.device && strcmp(cfg->global.device, "gpu") == 0;
	return cfg->distributed.sharding.sharding_stage >= 3 && gpt_train_storage_dtype(cfg) == GPT_DTYPE_F16 &&
	       !(cfg->distributed.sharding.sharding_offload && gpu);
}

/* 1 when path is dir itself or an entry of it (a checkpoint of its own). */
static int in_dir(const char *path, const char *dir)
{
	char a[PATH_MAX], b[PATH_MAX];
	if (!realpath(path, a) || !realpath(dir, b))
		return 0;
	if (strcmp(a, b) == 0)
		return 1;
	char *s = strrchr(a, '/');
	if (!s)
		return 0;
	s[s == a] = '\0'; /* the parent; "/" stays "/" */
	return strcmp(a, b) == 0;
}

#if GPT_HAVE_CUDA
/* This rank's stage's device memory in the plan of cfg (gpt-train
 * --dry-run's figure) into out; 0 when there is none. */
static int stage_plan(const trainer *tr, const gpt_config *cfg, char *out, size_t size)
{
	gpt_train_memory mem;
	gpt_err e = {0};
	if (gpt_train_memory_plan(cfg, &mem, &e) != 0)
		return 0;
	int64_t s = tr->pp_rank < mem.pp ? tr->pp_rank : 0;
	gpt_train_format_mem(mem.stage[s].device_total, out, size);
	gpt_train_memory_free(&mem);
	return 1;
}

/* A GPU that ran out of memory: err gets what the plan of this rank's
 * stage asks for (gpt-train --dry-run's figure) and what needs less; for a
 * float16 run, what the same run asks for in bfloat16, whose master
 * weights are kept split, and at sharding_stage 3, where the master
 * weights are the only copy (each 2 bytes a parameter less). */
static void oom_plan(const trainer *tr, gpt_err *err)
{
	size_t n = strlen(err->msg);
	char plan[128] = "", bf[320] = "", b[32];
	if (stage_plan(tr, tr->cfg, b, sizeof b))
		snprintf(plan, sizeof plan, "; this rank's plan is %s of device memory", b);
	if (tr->dtype == GPT_DTYPE_F16) {
		gpt_config c = *tr->cfg; /* read only: the plan of the same run in bfloat16 */
		c.engine.mix_precision.dtype = (char *)"bfloat16";
		if (stage_plan(tr, &c, b, sizeof b))
			snprintf(bf, sizeof bf, ", Engine.mix_precision.dtype=bfloat16 (%s: its master weights are kept split, 2 bytes a parameter less)",
				 b);
		c = *tr->cfg;
		c.distributed.sharding.sharding_stage = 3;
		size_t k = strlen(bf);
		if (tr->sh == 1 && !tr->pmaster && gpt_train_params_from_master(&c) && stage_plan(tr, &c, b, sizeof b))
			snprintf(bf + k, sizeof bf - k, ", Distributed.sharding.sharding_stage=3 (%s: the float16 parameters kept only as the fp32 master weights)",
				 b);
	}
	snprintf(err->msg + n, sizeof err->msg - n,
		 "%s (gpt-train --dry-run prints it for every rank); a smaller Global.micro_batch_size, "
		 "Model.use_recompute%s, Distributed.sharding (stage 1 to 3, sharding_offload) or more tensor or "
		 "pipeline parallelism needs less",
		 plan, bf);
}
#endif

int gpt_train_run(const gpt_config *cfg, FILE *log, const volatile sig_atomic_t *stop,
		  gpt_err *err)
{
	trainer tr;
	memset(&tr, 0, sizeof tr);
	tr.out_lock = -1;
	tr.cfg = cfg;
	tr.stop = stop;
	gpt_log_init(&tr.log, log, GPT_LOG_INFO);
	tr.G = cfg->global.global_batch_size;
	tr.MB = cfg->global.micro_batch_size;
	tr.accum = cfg->engine.accumulate_steps;
	tr.T = cfg->data.train.dataset.max_seq_len;
	tr.mixed = cfg->mixed;
	tr.dtype = gpt_train_storage_dtype(cfg);
	int rc = check_supported(cfg, err);
	if (!rc)
		rc = gpt_heartbeat_open(&tr.hb, environ, err);
	if (!rc)
		rc = gpt_tr_setup_parallel(&tr, err);
	if (!rc)
		rc = setup_backend(&tr, err);
	if (!rc)
		rc = check_run(&tr, err);
	if (!rc && tr.MB * tr.accum * tr.replicas != tr.G)
		rc = gpt_err_set(err, GPT_EINTERNAL, "batch: micro %lld x accumulate %lld x replicas %lld != global %lld",
				 (long long)tr.MB, (long long)tr.accum, (long long)tr.replicas, (long long)tr.G);
	if (!rc)
		rc = setup_data(&tr, err);
	if (!rc)
		rc = setup_schedule(&tr, err);
	if (!rc)
		rc = setup_model(&tr, err);
	if (!rc)
		rc = gpt_tr_faults_setup(&tr, err);
	if (!rc)
		rc = gpt_tr_overlap_setup(&tr, err);
	/* Resume: output_dir/latest (a restarted job) when it exists, unless
	 * ckpt_dir names output_dir or one of its own checkpoints; else an
	 * explicit ckpt_dir, which must load. */
	const char *ck = cfg->engine.save_load.ckpt_dir, *od = cfg->engine.save_load.output_dir;
	char latest[4096];
	snprintf(latest, sizeof latest, "%s/latest", od ? od : ".");
	int own = od && *od && gpt_path_exists(latest);
	if (!rc && ck && *ck && own && gpt_path_exists(ck) && !in_dir(ck, od)) {
		gpt_log_printf(&tr.log, GPT_LOG_INFO,
			       "%s/latest names a checkpoint of this run: resuming from it, not from Engine.save_load.ckpt_dir %s, which starts a run whose output_dir holds none; to start from %s again, give a new output_dir",
			       od, ck, ck);
		rc = gpt_tr_load_checkpoint(&tr, od, err);
	} else if (!rc && ck && *ck) {
		rc = gpt_tr_load_checkpoint(&tr, ck, err);
	} else if (!rc && own) {
		rc = gpt_tr_load_checkpoint(&tr, od, err);
	}
	if (!rc)
		rc = gpt_tr_check_saves(&tr, err);
	if (!rc) {
		/* What this run allocated, to hold against gpt-train --dry-run. */
		double es = (double)gpt_dtype_size(tr.dtype), n = (double)tr.model.n_alloc;
		double wb = 0; /* stages 2 and 3 (and pmaster): the three windows */
		if (tr.stage >= 2 || tr.pmaster) {
			int64_t l = gpt_tr_zero_layer_span(&tr.model);
			int last = tr.model.n_units - 1;
			wb = (double)(tr.model.unit_end[0] - tr.model.unit_begin[0] + l +
				      tr.model.unit_end[last] - tr.model.unit_begin[last]) * es;
		}
		double shard = (double)tr.shard * es;
		double pb = tr.pmaster ? wb : tr.stage >= 3 ? shard + wb : n * es;
		double gb = tr.stage >= 2 ? shard + wb : n * es;
		if (tr.zov) /* overlapped reductions: a second layer gradient window */
			gb += (double)gpt_tr_zero_layer_span(&tr.model) * es;
		double opt = (double)(tr.opt.end - tr.opt.begin) *
			     (tr.opt.master ? 12.0 : tr.opt.master_lo ? 10.0 : 8.0);
		double host = tr.opt.host ? opt : 0; /* offloaded: host memory, with its images */
		if (tr.opt.host) {
			host += 2 * (double)(tr.opt.end - tr.opt.begin) * es;
			opt = 0;
		}
		double act = (double)tr.model.act_bytes; /* and the pipeline's receive buffer */
		if (tr.pp_grad_in)
			act += (double)gpt_model_stream_numel(&tr.model) * es;
		if (tr.model.qat) /* quantization-aware training's work buffers */
			act += (double)tr.model.qat->bytes;
		char a[32], b[32], c[32], d[32], e[32];
		/* in --dry-run's units, which predict these figures */
		gpt_train_format_mem(pb, a, sizeof a);
		gpt_train_format_mem(gb, b, sizeof b);
		gpt_train_format_mem(opt, c, sizeof c);
		gpt_train_format_mem(act, d, sizeof d);
		gpt_train_format_mem(pb + gb + opt + act, e, sizeof e);
		gpt_log_printf(&tr.log, GPT_LOG_INFO,
			       "memory: parameters %s, gradients %s, optimizer state %s, activations %s, total %s (%.0f bytes)",
			       a, b, c, d, e, pb + gb + opt + act);
		if (tr.pmaster && tr.rank == 0)
			gpt_log_printf(&tr.log, GPT_LOG_INFO,
				       "memory: the float16 parameters are kept only as the fp32 master weights (Distributed.sharding.sharding_stage 3): each layer's are cast into a window when it runs, 2 bytes a parameter less");
		if (host > 0) {
			gpt_train_format_mem(host, a, sizeof a);
			gpt_log_printf(&tr.log, GPT_LOG_INFO,
				       "memory: optimizer state offloaded to host memory: %s with the host images "
				       "of the parameters and gradients (AdamW runs on the CPU, in %lld chunk%s of about "
				       "%lld elements, each chunk's copies beside the host's work on the others; "
				       "GPT_OFFLOAD_CHUNK sets the elements)",
				       a, (long long)tr.opt.nchunks, tr.opt.nchunks == 1 ? "" : "s",
				       (long long)tr.opt.chunk_elems);
		}
		/* Why the steps differ from Engine.max_steps, when they do: an
		 * explicit epoch count that ends the run first, a resumed run. */
		char why[256] = "";
		if (tr.step > 0 && tr.step < tr.total_steps)
			snprintf(why, sizeof why, "%lld left after global step %lld", (long long)(tr.total_steps - tr.step),
				 (long long)tr.step);
		if (tr.total_steps < cfg->engine.max_steps) {
			size_t l = strlen(why);
			snprintf(why + l, sizeof why - l,
				 "%sEngine.num_train_epochs %lld, of %lld steps each, ends it before Engine.max_steps %lld",
				 l ? "; " : "", (long long)cfg->engine.num_train_epochs,
				 (long long)(tr.total_steps / cfg->engine.num_train_epochs), (long long)cfg->engine.max_steps);
		}
		gpt_log_printf(&tr.log, GPT_LOG_INFO,
			       "training %lld parameters for %lld steps%s%s%s: global batch %lld x %lld tokens, micro-batch %lld, %lld accumulation steps, rank %d of %lld (data replica %lld of %lld, sharding stage %lld over %lld, tp rank %lld of %lld, pipeline stage %lld of %lld)",
			       (long long)gpt_param_count(&tr.model.shape), (long long)tr.total_steps,
			       why[0] ? " (" : "", why, why[0] ? ")" : "", (long long)tr.G, (long long)tr.T, (long long)tr.MB, (long long)tr.accum,
			       tr.rank, (long long)cfg->world_size, (long long)tr.replica,
			       (long long)tr.replicas,
			       tr.sh > 1 || tr.pmaster ? (long long)cfg->distributed.sharding.sharding_stage : 0LL,
			       (long long)tr.sh, (long long)tr.tp_rank, (long long)tr.tp, (long long)tr.pp_rank,
			       (long long)tr.pp);
		/* A restarted job whose checkpoint already holds every step ends
		 * at once (exit 0, as Megatron-LM's and PaddleNLP's loops do), but
		 * says so rather than log nothing. */
		if (tr.step >= tr.total_steps && tr.last_ckpt[0] && tr.rank == 0) {
			char limit[128];
			if (tr.total_steps < cfg->engine.max_steps)
				snprintf(limit, sizeof limit, "Engine.num_train_epochs %lld make %lld steps",
					 (long long)cfg->engine.num_train_epochs, (long long)tr.total_steps);
			else
				snprintf(limit, sizeof limit, "Engine.max_steps is %lld", (long long)tr.total_steps);
			gpt_log_printf(&tr.log, tr.step > tr.total_steps ? GPT_LOG_WARNING : GPT_LOG_INFO,
				       "nothing left to train: %s is at global step %lld and %s; raise it to train on, or give a new Engine.save_load.output_dir to start over",
				       tr.last_ckpt, (long long)tr.step, limit);
		}
		gpt_heartbeat_beat(tr.hb, tr.step);
		rc = run(&tr, err);
	}
	rc = gpt_tr_ckpt_finish(&tr, rc, 1, err);
#if GPT_HAVE_CUDA
	if (rc && strstr(err->msg, GPT_CUDA_OOM))
		oom_plan(&tr, err);
#endif
	/* The run went on without its log (gpt_log said so when it began);
	 * what it trained and saved stands, but a log file with holes in it
	 * (a full disk, an I/O error) is no success either, so that "gpt-train
	 * >log && next" stops there. A reader that went away (EPIPE: a closed
	 * pipe, a killed launcher) chose not to read on, as with "| head": no
	 * failure. A failure of the run's own comes first. */
	if (!rc && tr.log.write_errno && tr.log.write_errno != EPIPE)
		rc = gpt_err_set(err, GPT_EIO,
				 "%s: %s: %lld log line%s could not be written (the training itself did not fail)",
				 log == stdout ? "standard output" : "the log", strerror(tr.log.write_errno),
				 (long long)tr.log.lost, tr.log.lost == 1 ? "" : "s");
	/* A run that failed before it saved anything leaves no output_dir
	 * behind that it made (a damaged checkpoint to resume from, a bad
	 * dataset): only empty directories go, and only those it made. */
	if (rc && tr.out_made && tr.out_lock >= 0) {
		gpt_rmdir_made(od, tr.out_made);
		close(tr.out_lock); /* after: no other run wrote there meanwhile */
		tr.out_lock = -1;
	}
	trainer_free(&tr);
	return rc;
}
