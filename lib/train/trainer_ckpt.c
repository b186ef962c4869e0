/* Saving the trainer's state as a checkpoint and resuming from one. */
#include "train/trainer-impl.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static int download_flat(gpt_backend *be, const void *src, size_t bytes, void **out, gpt_err *err)
{
	*out = gpt_malloc(bytes, "checkpoint staging", err);
	if (!*out)
		return GPT_EINTERNAL;
	return be->ops->download(be, *out, src, bytes, err);
}

static char *state_json(trainer *tr)
{
	json_t *st = json_pack("{s:I, s:I, s:f, s:{s:f, s:I, s:I}, s:I, s:I, s:{s:I, s:I, s:I, s:I, s:I}, s:s}",
			       "step", (json_int_t)tr->step,
			       "consumed_samples", (json_int_t)(tr->step * tr->G),
			       "lr", gpt_lr_at(&tr->lr, tr->step),
			       "loss_scale", "scale", tr->scaler.scale, "good_steps",
			       (json_int_t)tr->scaler.good_steps, "bad_steps", (json_int_t)tr->scaler.bad_steps,
			       "optimizer_steps", (json_int_t)tr->opt.t,
			       "seed", (json_int_t)tr->cfg->global.seed,
			       "layout", "world_size", (json_int_t)tr->cfg->world_size,
			       "dp", (json_int_t)tr->cfg->distributed.dp_degree, "mp", (json_int_t)1,
			       "pp", (json_int_t)1, "sharding", (json_int_t)tr->sh,
			       "gptkit_version", GPT_VERSION);
	char *text = st ? json_dumps(st, JSON_INDENT(2)) : NULL;
	json_decref(st);
	return text;
}

int gpt_tr_save_checkpoint(trainer *tr, gpt_err *err)
{
	gpt_model *m = &tr->model;
	gpt_backend *be = m->be;
	double t0 = gpt_now_s();
	void *w = NULL;
	float *ea = NULL, *eas = NULL;
	size_t es = gpt_dtype_size(be->dtype);
	/* The weights are saved in fp32: the master copy when there is one, so a
	 * resumed run continues from exactly the same state. Sharded optimizer
	 * state is gathered from the shard group (every rank takes part); rank 0
	 * writes. */
	int rc = tr->opt.master ? gpt_tr_gather_f32(tr, tr->opt.master, (float **)&w, err)
		 : tr->pshard	? gpt_tr_gather_f32(tr, tr->pshard, (float **)&w, err) /* fp32: no master */
				: download_flat(be, m->params, (size_t)m->n_flat * es, &w, err);
	if (tr->opt.master)
		es = 4;
	if (!rc)
		rc = gpt_tr_gather_f32(tr, tr->opt.exp_avg, &ea, err);
	if (!rc)
		rc = gpt_tr_gather_f32(tr, tr->opt.exp_avg_sq, &eas, err);
	if (!rc && tr->rank != 0) {
		free(w);
		free(ea);
		free(eas);
		return 0;
	}
	int64_t held = 0;
	for (int64_t i = 0; i < m->n_table; i++)
		held += m->offset[i] >= 0;
	gpt_ckpt_piece *pc = rc ? NULL : gpt_calloc((size_t)(3 * held), sizeof *pc, "checkpoint pieces", err);
	char (*names)[64] = pc ? gpt_calloc((size_t)(3 * held), 64, "names", err) : NULL;
	if (!rc && !names)
		rc = GPT_EINTERNAL;
	int n = 0;
	for (int64_t i = 0; !rc && i < m->n_table; i++) {
		if (m->offset[i] < 0)
			continue;
		const gpt_param_info *p = &m->table[i];
		void *src[3] = {(char *)w + m->offset[i] * (int64_t)es, (float *)ea + m->offset[i],
				(float *)eas + m->offset[i]};
		const char *pre[3] = {"", "optim.exp_avg.", "optim.exp_avg_sq."};
		for (int k = 0; k < 3; k++) {
			snprintf(names[n], 64, "%s%s", pre[k], p->name);
			pc[n] = (gpt_ckpt_piece){.tensor = names[n], .dtype = k || tr->opt.master ? GPT_DTYPE_F32 : be->dtype,
						 .ndim = p->ndim, .box = m->box[i], .data = src[k]};
			memcpy(pc[n].shape, p->shape, sizeof p->shape);
			n++;
		}
	}
	char *state = rc ? NULL : state_json(tr);
	char *yaml = NULL;
	size_t yl = 0;
	if (!rc && state) {
		FILE *mf = open_memstream(&yaml, &yl);
		rc = mf ? gpt_config_write_yaml(tr->cfg, mf, err) : gpt_err_nomem(err, 0, "config text");
		if (mf)
			fclose(mf);
	} else if (!rc) {
		rc = gpt_err_nomem(err, 0, "state.json");
	}
	int64_t bytes = 0;
	gpt_heartbeat_beat(tr->hb, tr->step);
	if (!rc)
		rc = gpt_ckpt_save(tr->cfg->engine.save_load.output_dir, tr->step, pc, n, state,
				   yaml ? yaml : "", tr->last_ckpt, sizeof tr->last_ckpt, &bytes, err);
	gpt_heartbeat_beat(tr->hb, tr->step);
	if (!rc) {
		char line[4200];
		gpt_ckpt_line_format(line, sizeof line, tr->step, tr->last_ckpt, bytes, gpt_now_s() - t0);
		gpt_log_printf(&tr->log, GPT_LOG_INFO, "%s", line);
	}
	free(yaml);
	free(state);
	free(names);
	free(pc);
	free(w);
	free(ea);
	free(eas);
	return rc;
}

static int json_int(json_t *o, const char *k, int64_t *out)
{
	json_t *v = json_object_get(o, k);
	if (!json_is_integer(v))
		return -1;
	*out = json_integer_value(v);
	return 0;
}

/* Resumes from a checkpoint directory (or a directory holding `latest`). */
int gpt_tr_load_checkpoint(trainer *tr, const char *path, gpt_err *err)
{
	gpt_ckpt *ck;
	int rc = gpt_ckpt_open(&ck, path, err);
	if (rc)
		return gpt_err_prefix(err, "cannot resume");
	gpt_model *m = &tr->model;
	gpt_backend *be = m->be;
	/* Whole flat fp32 images of the weights and moments; each rank then
	 * keeps the range its optimizer holds (a shard under sharding). */
	size_t n_all = (size_t)m->n_alloc;
	float *full[3] = {gpt_calloc(n_all, 4, "checkpoint staging", err),
			  gpt_calloc(n_all, 4, "checkpoint staging", err),
			  gpt_calloc(n_all, 4, "checkpoint staging", err)};
	if (!full[0] || !full[1] || !full[2])
		rc = GPT_EINTERNAL;
	for (int64_t i = 0; !rc && i < m->n_table; i++) {
		if (m->offset[i] < 0)
			continue;
		const gpt_param_info *p = &m->table[i];
		char name[96];
		const char *pre[3] = {"", "optim.exp_avg.", "optim.exp_avg_sq."};
		for (int k = 0; k < 3 && !rc; k++) {
			snprintf(name, sizeof name, "%s%s", pre[k], p->name);
			rc = gpt_ckpt_read_box(ck, name, GPT_DTYPE_F32, p->ndim, p->shape, &m->box[i],
					       full[k] + m->offset[i], err);
			gpt_heartbeat_beat(tr->hb, tr->step);
		}
	}
	int64_t b0 = tr->opt.begin, cnt = tr->opt.end - tr->opt.begin;
	if (!rc)
		rc = be->ops->upload(be, tr->opt.exp_avg, full[1] + b0, (size_t)cnt * 4, err);
	if (!rc)
		rc = be->ops->upload(be, tr->opt.exp_avg_sq, full[2] + b0, (size_t)cnt * 4, err);
	if (!rc && tr->opt.master)
		rc = be->ops->upload(be, tr->opt.master, full[0] + b0, (size_t)cnt * 4, err);
	/* the parameters: fp32, or the master weights rounded; whole, or the
	 * shard at stage 3 */
	if (!rc && be->dtype != GPT_DTYPE_F32)
		rc = gpt_convert(full[1], be->dtype, full[0], GPT_DTYPE_F32, n_all, err);
	size_t pes = gpt_dtype_size(be->dtype);
	const char *img = (const char *)(be->dtype == GPT_DTYPE_F32 ? full[0] : full[1]);
	if (!rc)
		rc = tr->pshard ? be->ops->upload(be, tr->pshard, img + b0 * (int64_t)pes, (size_t)cnt * pes, err)
				: be->ops->upload(be, m->params, img, n_all * pes, err);
	for (int k = 0; k < 3; k++)
		free(full[k]);

	json_error_t je;
	json_t *st = rc ? NULL : json_loads(gpt_ckpt_state_json(ck), 0, &je);
	int64_t step = 0, t = 0, good = 0, bad = 0;
	json_t *ls = json_object_get(st, "loss_scale");
	if (!rc && (!st || json_int(st, "step", &step) || json_int(st, "optimizer_steps", &t) ||
		    json_int(ls, "good_steps", &good) || json_int(ls, "bad_steps", &bad) ||
		    !json_is_number(json_object_get(ls, "scale"))))
		rc = gpt_err_set(err, GPT_EDATA, "%s/state.json: expected step, optimizer_steps and loss_scale",
				 gpt_ckpt_path(ck));
	if (!rc) {
		tr->step = step;
		tr->opt.t = t;
		tr->scaler.scale = json_number_value(json_object_get(ls, "scale"));
		tr->scaler.good_steps = good;
		tr->scaler.bad_steps = bad;
		snprintf(tr->last_ckpt, sizeof tr->last_ckpt, "%s", gpt_ckpt_path(ck));
		gpt_log_printf(&tr->log, GPT_LOG_INFO, "resumed from %s at global step %lld",
			       gpt_ckpt_path(ck), (long long)step);
	}
	json_decref(st);
	gpt_ckpt_close(ck);
	return rc;
}
