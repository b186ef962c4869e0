/* What the training loop does when something goes wrong: a loss spike
 * (Engine.skip_spikes), a loss or gradient that is not finite
 * (Engine.nan_policy: stop, skip or rollback), a checkpoint that cannot be
 * written (Engine.save_load.on_save_error), and the faults that
 * Engine.fault_inject makes on purpose to test all of it. Every decision
 * here is taken by all ranks together, so no rank updates while another
 * skips, rolls back or stops. */
#include "train/trainer-impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int gpt_tr_faults_setup(trainer *tr, gpt_err *err)
{
	/* a nan_rank outside the world and skip_spikes without a threshold
	 * were refused by the configuration (lib/config/resolve.c) */
	const gpt_config *cfg = tr->cfg;
	if (!cfg->engine.skip_spikes.enable)
		return 0;
	return gpt_spike_window_init(&tr->spikes, cfg->engine.skip_spikes.window, err);
}

void gpt_tr_faults_free(trainer *tr)
{
	gpt_spike_window_free(&tr->spikes);
}

static int in_list(const gpt_intlist *l, int64_t v)
{
	for (int i = 0; i < l->n; i++)
		if (l->v[i] == v)
			return 1;
	return 0;
}

double gpt_tr_fault_factor(const trainer *tr, int64_t step)
{
	const gpt_config *cfg = tr->cfg;
	int64_t r = cfg->engine.fault_inject.nan_rank;
	if (in_list(&cfg->engine.fault_inject.nan_steps, step) && (r < 0 || r == tr->rank))
		return NAN;
	if (in_list(&cfg->engine.fault_inject.spike_steps, step))
		return cfg->engine.fault_inject.spike_factor;
	return 1.0;
}

int gpt_tr_judge_step(trainer *tr, double loss, double norm, int *verdict, gpt_err *err)
{
	const gpt_config *cfg = tr->cfg;
	int64_t step = tr->step + 1;
	double zl = 0, zg = 0;
	/* v[0]: the loss is not finite; v[2]: the gradients are not */
	int32_t v[3] = {!isfinite(loss), 0, !isfinite(norm)};
	if (!v[0] && !v[2] && tr->spikes.cap > 0 && step > cfg->engine.skip_spikes.warmup)
		v[1] = gpt_spike_window_check(&tr->spikes, loss, norm, cfg->engine.skip_spikes.loss_zscore,
					      cfg->engine.skip_spikes.grad_norm_zscore, &zl, &zg);
	/* The loss and the norm are already global after the reductions, so
	 * the ranks should decide alike; agreeing costs one tiny all-reduce and
	 * keeps that true in every layout. */
	if (tr->comm) {
		int rc = gpt_comm_all_reduce(gpt_comm_world(tr->comm), v, v, 3, GPT_DTYPE_I32, GPT_REDUCE_MAX, err);
		if (rc)
			return gpt_err_prefix(err, "global step %lld: agreeing on the update", (long long)step);
	}
	/* Only the gradients are scaled: a loss that is not finite came from
	 * the forward pass, which no loss scale mends (Megatron-LM's
	 * pretrain_gpt stops on it), so it goes to Engine.nan_policy even in
	 * float16, as do gradients that overflow at the minimum loss scale
	 * (DeepSpeed's loss scaler stops there too). */
	if (v[0] || (v[2] && !(tr->scaler.dynamic && tr->scaler.scale > tr->scaler.min_scale))) {
		*verdict = GPT_TR_NONFINITE;
		if (!v[0] && tr->scaler.dynamic)
			gpt_log_printf(&tr->log, GPT_LOG_WARNING,
				       "[amp] global step %lld, found inf/nan in gradients at the minimum loss scale %g: the loss scale can go no lower; Engine.nan_policy (%s) decides",
				       (long long)step, tr->scaler.scale,
				       cfg->engine.nan_policy ? cfg->engine.nan_policy : "stop");
	} else if (v[2]) {
		*verdict = GPT_TR_OVERFLOW;
	} else if (v[1]) {
		*verdict = GPT_TR_SPIKE;
		gpt_log_printf(&tr->log, GPT_LOG_WARNING,
			       "[spike] global step %lld, loss: %.9f, z-score: %.2f (threshold %g), grad_norm: %.6g, z-score: %.2f (threshold %g): skipped the update; the step stays out of the window of %lld",
			       (long long)step, loss, zl, cfg->engine.skip_spikes.loss_zscore, norm, zg,
			       cfg->engine.skip_spikes.grad_norm_zscore, (long long)tr->spikes.cap);
	} else {
		*verdict = GPT_TR_UPDATED;
		if (tr->spikes.cap > 0)
			gpt_spike_window_push(&tr->spikes, loss, norm);
	}
	return 0;
}

/* ---- non-finite steps ---- */

/* Goes back to the last complete checkpoint and on from the step after the
 * offending one: the weights, the optimizer and the loss scale are the
 * checkpoint's, the step counter (and with it the data position and the
 * learning rate) stays where it is, so the batches from the checkpoint to
 * the offending one are passed over, as restarts of large runs skip the
 * data window that diverged. */
static int rollback(trainer *tr, double loss, gpt_err *err)
{
	const gpt_config *cfg = tr->cfg;
	int64_t bad = tr->step, max = cfg->engine.nan_max_rollbacks;
	const char *out = cfg->engine.save_load.output_dir, *ckd = cfg->engine.save_load.ckpt_dir;
	char latest[4096];
	snprintf(latest, sizeof latest, "%s/latest", out ? out : ".");
	const char *from = out && gpt_path_exists(latest) ? out : ckd && *ckd ? ckd : NULL;
	if (!from)
		return gpt_err_set(err, GPT_EDATA,
				   "global step %lld: the loss or the gradients are not finite (loss %g) and Engine.nan_policy rollback has no checkpoint to go back to (%s holds none yet); stopped before the update; save earlier (Engine.save_load.save_steps)",
				   (long long)bad, loss, out ? out : "output_dir");
	if (tr->rollbacks >= max)
		return gpt_err_set(err, GPT_EDATA,
				   "global step %lld: the loss or the gradients are not finite (loss %g) after %lld rollbacks, the most Engine.nan_max_rollbacks allows; stopped before the update; the last good checkpoint is in %s",
				   (long long)bad, loss, (long long)tr->rollbacks, from);
	gpt_log_printf(&tr->log, GPT_LOG_WARNING,
		       "global step %lld: the loss or the gradients are not finite (loss %g); rolling back to the last checkpoint in %s (rollback %lld of at most %lld, Engine.nan_policy: rollback)",
		       (long long)bad, loss, from, (long long)tr->rollbacks + 1, (long long)max);
	/* the batches passed over were taken from the data: they stay counted */
	int64_t samples = tr->consumed_samples, tokens = tr->consumed_tokens, lr_steps = tr->lr_steps;
	int rc = gpt_tr_load_checkpoint(tr, from, err);
	if (rc)
		return gpt_err_prefix(err, "global step %lld: rolling back", (long long)bad);
	int64_t back = tr->step;
	tr->step = bad;
	tr->lr_steps = lr_steps;
	tr->consumed_samples = samples;
	tr->consumed_tokens = tokens;
	tr->rollbacks++;
	tr->pw_valid[0] = tr->pw_valid[2] = 0; /* the parameters changed under the windows */
	if (tr->spikes.cap > 0)
		gpt_spike_window_clear(&tr->spikes); /* its values led here */
	gpt_log_printf(&tr->log, GPT_LOG_WARNING,
		       "rolled back to the weights and optimizer state of global step %lld; training goes on at global step %lld with the next batch, passing over the batches of global steps %lld to %lld (consumed samples %lld)",
		       (long long)back, (long long)bad + 1, (long long)back + 1, (long long)bad,
		       (long long)samples);
	return 0;
}

int gpt_tr_nonfinite(trainer *tr, double loss, gpt_err *err)
{
	const char *policy = tr->cfg->engine.nan_policy ? tr->cfg->engine.nan_policy : "stop";
	if (strcmp(policy, "skip") == 0) {
		gpt_log_printf(&tr->log, GPT_LOG_WARNING,
			       "global step %lld: the loss or the gradients are not finite (loss %g); skipped the update (Engine.nan_policy: skip)",
			       (long long)tr->step, loss);
		return 0;
	}
	/* A background save in flight holds the state before this step, which
	 * was finite: it is published first (every rank is here, as the ranks
	 * agreed on the verdict), so that a rollback goes back to it and a stop
	 * names it rather than discarding it unpublished. */
	int rc = gpt_tr_ckpt_finish(tr, 0, 0, err);
	if (rc)
		return rc;
	if (strcmp(policy, "rollback") == 0)
		return rollback(tr, loss, err);
	return gpt_err_set(err, GPT_EDATA,
			   "global step %lld: the loss or the gradients are not finite (loss %g); stopping before the update%s%s",
			   (long long)tr->step, loss, tr->last_ckpt[0] ? "; the last good checkpoint is " : "",
			   tr->last_ckpt);
}

/* ---- saving ---- */

/* A complete step_N/ of this very step that `latest` does not name is what
 * a save left when it failed after its rename: gpt_ckpt_prepare replaces it;
 * rank 0 says so in the log. */
static void note_stale_step(trainer *tr)
{
	const char *out = tr->cfg->engine.save_load.output_dir;
	if (tr->rank != 0 || !gpt_ckpt_unpublished(out, tr->step))
		return;
	gpt_log_printf(&tr->log, GPT_LOG_WARNING,
		       "%s/step_%08lld: left by a save that failed before `latest` named it; removing it to save global step %lld again",
		       out, (long long)tr->step, (long long)tr->step);
}

int gpt_tr_save(trainer *tr, int last, gpt_err *err)
{
	gpt_err serr = {0};
	/* a background save still in flight completes first, its failure its own */
	int rc = gpt_tr_ckpt_finish(tr, 0, 0, err);
	if (rc)
		return rc;
	note_stale_step(tr);
	rc = gpt_tr_save_checkpoint(tr, &serr);
	/* Rank 0 may fail where the others wrote nothing, or the reverse:
	 * every rank must go on, or stop, together. */
	int32_t failed = rc != 0;
	if (tr->comm) {
		int arc = gpt_comm_all_reduce(gpt_comm_world(tr->comm), &failed, &failed, 1, GPT_DTYPE_I32,
					      GPT_REDUCE_MAX, err);
		if (arc)
			return gpt_err_prefix(err, "global step %lld: agreeing on the checkpoint", (long long)tr->step);
	}
	if (!failed) {
		tr->saved_step = tr->step;
		return 0;
	}
	return gpt_tr_save_failed(tr, tr->step, rc ? serr.msg : "another rank could not write its part (see its log)",
				  rc ? serr.code : GPT_EIO, last, err);
}

int gpt_tr_save_failed(trainer *tr, int64_t step, const char *why, int code, int last, gpt_err *err)
{
	const gpt_config *cfg = tr->cfg;
	char prev[4096], tail[4200], kept[4300];
	gpt_err lerr = {0};
	char idx[4200];
	int named = gpt_ckpt_latest(cfg->engine.save_load.output_dir, prev, sizeof prev, &lerr) == 0;
	snprintf(idx, sizeof idx, "%s/index.json", prev);
	if (named && gpt_path_exists(idx)) {
		snprintf(tail, sizeof tail, "the last complete checkpoint is %s", prev);
		snprintf(kept, sizeof kept, "the last complete checkpoint (%s) and `latest` are left as they were", prev);
	} else if (named) {
		snprintf(tail, sizeof tail, "`latest` names %s, which is not a complete checkpoint", prev);
		snprintf(kept, sizeof kept, "`latest` is left as it was, naming %s, which is not a complete checkpoint", prev);
	} else {
		snprintf(tail, sizeof tail, "there is no complete checkpoint yet");
		snprintf(kept, sizeof kept, "there is no complete checkpoint yet");
	}
	gpt_log_printf(&tr->log, GPT_LOG_ERROR, "[checkpoint] global step %lld, saving failed: %s; %s",
		       (long long)step, why, kept);
	int stop = !cfg->engine.save_load.on_save_error || strcmp(cfg->engine.save_load.on_save_error, "continue") != 0;
	if (stop || last)
		return gpt_err_set(err, code ? code : GPT_EIO,
				   "global step %lld: the checkpoint could not be saved: %s; stopping (%s); %s",
				   (long long)step, why,
				   stop ? "Engine.save_load.on_save_error: stop" : "the run ends with this save", tail);
	gpt_log_printf(&tr->log, GPT_LOG_WARNING,
		       "training goes on without the checkpoint of global step %lld (Engine.save_load.on_save_error: continue)",
		       (long long)step);
	return 0;
}
