/* gpt-ckpt-merge --to-layout: a copy of a checkpoint cut as the ranks of
 * another layout would have saved it, one piece in memory at a time.
 * (Part of lib/ckpt.) */
#include "ckpt/ckpt-impl.h"
#include "config/config.h"
#include "model/gpt.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

int gpt_ckpt_layout_parse(const char *spec, gpt_ckpt_layout *out, gpt_err *err)
{
	*out = (gpt_ckpt_layout){1, 1, 1, 1, 0, 1, 0};
	int stage_given = 0;
	const char *p = spec;
	while (*p) {
		size_t n = strcspn(p, ",");
		char item[64];
		if (n == 0 || n >= sizeof item)
			return gpt_err_set(err, GPT_EUSAGE, "--to-layout %s: expected KEY=N items separated by commas", spec);
		memcpy(item, p, n);
		item[n] = '\0';
		char *eq = strchr(item, '=');
		int64_t v;
		if (!eq || gpt_parse_i64(eq + 1, &v) || v < 1)
			return gpt_err_set(err, GPT_EUSAGE, "--to-layout %s: '%s': expected KEY=N with N >= 1", spec, item);
		*eq = '\0';
		if (strcmp(item, "mp") == 0 || strcmp(item, "tp") == 0)
			out->tp = v;
		else if (strcmp(item, "pp") == 0)
			out->pp = v;
		else if (strcmp(item, "vpp") == 0)
			out->vpp = v;
		else if (strcmp(item, "dp") == 0)
			out->dp = v;
		else if (strcmp(item, "sharding") == 0)
			out->sharding = v;
		else if (strcmp(item, "stage") == 0 && v <= 3)
			out->stage = v, stage_given = 1;
		else
			return gpt_err_set(err, GPT_EUSAGE, "--to-layout %s: '%s': expected mp (or tp), pp, vpp, dp, sharding or stage (1 to 3)",
					   spec, item);
		p += n;
		if (*p == ',')
			p++;
	}
	if (!stage_given)
		out->stage = out->sharding > 1 ? 1 : 0;
	if (out->sharding == 1 && out->stage > 0 && stage_given)
		return gpt_err_set(err, GPT_EUSAGE, "--to-layout %s: stage %lld needs sharding > 1", spec,
				   (long long)out->stage);
	return 0;
}

int gpt_ckpt_read_config(const gpt_ckpt *ck, gpt_config *cfg, gpt_err *err)
{
	const char *y = gpt_ckpt_config_yaml(ck);
	char name[4096];
	snprintf(name, sizeof name, "%s/config.yaml", gpt_ckpt_path(ck));
	int rc = gpt_config_init(cfg, err);
	return rc ? rc : gpt_config_read_text(cfg, y, strlen(y), name, err);
}

int gpt_ckpt_model_shape(const gpt_ckpt *ck, gpt_model_shape *s, gpt_err *err)
{
	gpt_config cfg;
	int rc = gpt_ckpt_read_config(ck, &cfg, err);
	if (!rc) {
		s->vocab_size = cfg.model.vocab_size;
		s->padded_vocab = (s->vocab_size + GPT_VOCAB_PAD - 1) / GPT_VOCAB_PAD * GPT_VOCAB_PAD;
		s->max_pos = cfg.model.max_position_embeddings;
		s->hidden = cfg.model.hidden_size;
		s->layers = cfg.model.num_layers;
		s->heads = cfg.model.num_attention_heads;
		s->ffn = cfg.model.ffn_hidden_size > 0 ? cfg.model.ffn_hidden_size : 4 * s->hidden;
	}
	gpt_config_free(&cfg);
	return rc;
}

static int check_layout(const gpt_model_shape *s, const gpt_ckpt_layout *lo, gpt_err *err)
{
	const char *what = NULL;
	int64_t v = 0;
	if (s->heads % lo->tp)
		what = "attention heads", v = s->heads;
	else if (s->ffn % lo->tp)
		what = "ffn hidden size", v = s->ffn;
	else if (s->padded_vocab % lo->tp)
		what = "padded vocabulary", v = s->padded_vocab;
	else if (s->layers < lo->pp)
		return gpt_err_set(err, GPT_EUSAGE, "--to-layout: pp %lld is more than the %lld layers",
				   (long long)lo->pp, (long long)s->layers);
	if (what)
		return gpt_err_set(err, GPT_EUSAGE, "--to-layout: mp %lld does not divide the %s (%lld)",
				   (long long)lo->tp, what, (long long)v);
	if (lo->vpp > 1 && lo->pp == 1)
		return gpt_err_set(err, GPT_EUSAGE, "--to-layout: vpp %lld needs pp above 1 (virtual stages interleave pipeline stages)",
				   (long long)lo->vpp);
	if (lo->vpp > GPT_MAX_CHUNKS)
		return gpt_err_set(err, GPT_EUSAGE, "--to-layout: vpp %lld: at most %d virtual stages per rank",
				   (long long)lo->vpp, GPT_MAX_CHUNKS);
	/* as gpt_layout_make splits them, here with the options of this program */
	if (s->layers % (lo->pp * lo->vpp))
		return gpt_err_set(err, GPT_EUSAGE, "--to-layout: the %lld layers do not split evenly over pp %lld x vpp %lld = %lld pipeline stages; give pp= and vpp= whose product divides %lld",
				   (long long)s->layers, (long long)lo->pp, (long long)lo->vpp,
				   (long long)(lo->pp * lo->vpp), (long long)s->layers);
	if (lo->tp * lo->pp * lo->dp * lo->sharding > 65536)
		return gpt_err_set(err, GPT_EUSAGE, "--to-layout: more than 65536 ranks");
	return 0;
}

typedef struct reshard_ctx {
	const gpt_ckpt *ck;
	const gpt_ckpt_piece *pc;
} reshard_ctx;

static int fill_piece(void *ctx, int i, void *buf, gpt_err *err)
{
	reshard_ctx *c = ctx;
	const gpt_ckpt_piece *p = &c->pc[i];
	return gpt_ckpt_read_box(c->ck, p->tensor, p->dtype, p->ndim, p->shape, &p->box, buf, err);
}

/* 1 when tensor `name` of the checkpoint is one of the families
 * rank_part cuts: a parameter of table t or its AdamW moments. */
static int in_families(const char *name, const gpt_param_info *t, int64_t nt)
{
	const char *p = strncmp(name, "optim.exp_avg_sq.", 17) == 0 ? name + 17
			: strncmp(name, "optim.exp_avg.", 14) == 0 ? name + 14
								     : name;
	for (int64_t i = 0; i < nt; i++)
		if (strcmp(t[i].name, p) == 0)
			return 1;
	return 0;
}

/* 1 when the rank at layout gl (first_of_stage: tensor rank 0 of the first
 * data replica) writes `name`, a tensor of no family: the scales of
 * quantization-aware training, qat.h.N.*, whole, by the first rank of the
 * stage holding layer N, as training writes them; anything else by rank 0,
 * so that a copy leaves nothing out. */
static int writes_other(const char *name, const gpt_model_shape *s, const gpt_layout *gl, int first_of_stage,
			int rank)
{
	long long l;
	int at = 0;
	if (sscanf(name, "qat.h.%lld.%n", &l, &at) == 1 && at > 0 && l >= 0 && l < s->layers) {
		for (int64_t c = 0; c < gl->chunks; c++)
			if (l >= gl->layer_begin[c] && l < gl->layer_end[c])
				return first_of_stage;
		return 0;
	}
	return rank == 0;
}

/* One target rank's pieces of the families present in ck, and the other
 * tensors it writes whole. */
static int rank_part(const gpt_ckpt *ck, const gpt_model_shape *s, const gpt_param_info *t, int64_t nt,
		     const gpt_ckpt_layout *lo, int rank, const char *stage, gpt_err *err)
{
	int64_t tp_r = rank % lo->tp, sh_r = rank / lo->tp % lo->sharding;
	int64_t dp_r = rank / (lo->tp * lo->sharding) % lo->dp, pp_r = rank / (lo->tp * lo->sharding * lo->dp);
	gpt_layout gl;
	int rc0 = gpt_layout_make(&gl, s, lo->tp, tp_r, lo->pp, pp_r, lo->pp > 1 ? lo->vpp : 1, NULL, err);
	if (rc0)
		return rc0;
	int64_t *offset = gpt_calloc((size_t)nt, sizeof *offset, "layout", err);
	gpt_box *box = offset ? gpt_calloc((size_t)nt, sizeof *box, "layout", err) : NULL;
	if (!box) {
		free(offset);
		return GPT_EINTERNAL;
	}
	int64_t n_flat = 0;
	for (int64_t i = 0; i < nt; i++) {
		offset[i] = gpt_param_box(&t[i], &gl, &box[i]) ? n_flat : -1;
		if (offset[i] >= 0)
			n_flat += gpt_box_numel(&box[i]);
	}
	int64_t shard = (n_flat + lo->sharding - 1) / lo->sharding;
	gpt_ckpt_rank r = {.tp_rank = tp_r, .pp_rank = pp_r, .dp_rank = dp_r, .begin = sh_r * shard,
			   .end = (sh_r + 1) * shard, .writers_only = 1};
	gpt_ckpt_slice *sl = NULL;
	int64_t ns = 0;
	int rc = gpt_ckpt_slices(t, nt, offset, box, &r, &sl, &ns, err);
	static const char *const pre[3] = {"", "optim.exp_avg.", "optim.exp_avg_sq."};
	int fam = gpt_ckpt_has_tensor(ck, "optim.exp_avg.wte") ? 3 : 1;
	int n_ck = gpt_ckpt_tensor_count(ck);
	gpt_ckpt_piece *pc = rc ? NULL : gpt_calloc((size_t)(fam * ns + n_ck + 1), sizeof *pc, "pieces", err);
	char (*names)[96] = pc ? gpt_calloc((size_t)(fam * ns + n_ck + 1), sizeof *names, "pieces", err) : NULL;
	if (!rc && !names)
		rc = GPT_EINTERNAL;
	int n = 0;
	for (int k = 0; k < fam && !rc; k++)
		for (int64_t j = 0; j < ns && !rc; j++) {
			const gpt_param_info *p = &t[sl[j].tensor];
			const char *nm;
			gpt_dtype dt = GPT_DTYPE_F32, qdt;
			int nd;
			const int64_t *shp;
			snprintf(names[n], sizeof *names, "%s%s", pre[k], p->name);
			for (int q = 0; q < gpt_ckpt_tensor_count(ck); q++) /* keep the stored dtype */
				if (gpt_ckpt_tensor_info(ck, q, &nm, &qdt, &nd, &shp) == 0 && strcmp(nm, names[n]) == 0)
					dt = qdt;
			pc[n] = (gpt_ckpt_piece){.tensor = names[n], .dtype = dt, .ndim = p->ndim, .box = sl[j].box};
			memcpy(pc[n].shape, p->shape, sizeof p->shape);
			n++;
		}
	int first_of_stage = tp_r == 0 && sh_r == 0 && dp_r == 0;
	for (int q = 0; q < n_ck && !rc; q++) {
		const char *nm;
		gpt_dtype dt;
		int nd;
		const int64_t *shp;
		if (gpt_ckpt_tensor_info(ck, q, &nm, &dt, &nd, &shp) || in_families(nm, t, nt) ||
		    !writes_other(nm, s, &gl, first_of_stage, rank))
			continue;
		snprintf(names[n], sizeof *names, "%s", nm);
		pc[n] = (gpt_ckpt_piece){.tensor = names[n], .dtype = dt, .ndim = nd, .box = gpt_box_full(nd, shp)};
		memcpy(pc[n].shape, shp, sizeof(int64_t) * (size_t)nd);
		n++;
	}
	reshard_ctx c = {ck, pc};
	if (!rc)
		rc = gpt_ckpt_write_part(stage, rank, pc, n, fill_piece, &c, err);
	free(names);
	free(pc);
	free(sl);
	free(box);
	free(offset);
	return rc;
}

/* state.json with the target layout (and the one it came from). */
static char *new_state(const gpt_ckpt *ck, const gpt_ckpt_layout *lo, gpt_err *err)
{
	json_error_t je;
	json_t *st = json_loads(gpt_ckpt_state_json(ck), 0, &je);
	if (!json_is_object(st)) {
		json_decref(st);
		gpt_err_set(err, GPT_EDATA, "%s/state.json: not a JSON object", gpt_ckpt_path(ck));
		return NULL;
	}
	json_t *old = json_object_get(st, "layout");
	if (old)
		json_object_set(st, "resharded_from", old);
	json_object_set_new(st, "layout",
			    json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "world_size",
				      (json_int_t)(lo->tp * lo->pp * lo->dp * lo->sharding), "dp", (json_int_t)lo->dp,
				      "mp", (json_int_t)lo->tp, "pp", (json_int_t)lo->pp, "vpp", (json_int_t)lo->vpp,
				      "sharding", (json_int_t)lo->sharding, "sharding_stage", (json_int_t)lo->stage));
	char *text = json_dumps(st, JSON_INDENT(2));
	json_decref(st);
	if (!text)
		gpt_err_nomem(err, 0, "state.json");
	return text;
}

int gpt_ckpt_out_outside(const gpt_ckpt *ck, const char *out, gpt_err *err)
{
	if (gpt_path_within(out, gpt_ckpt_path(ck)))
		return gpt_err_set(err, GPT_EUSAGE, "%s: inside the checkpoint %s being read, whose files it would replace; write somewhere else",
				   out, gpt_ckpt_path(ck));
	return 0;
}

int gpt_ckpt_out_free(const char *out_dir, gpt_err *err)
{
	char p[4096];
	snprintf(p, sizeof p, "%s/latest", out_dir);
	if (gpt_path_exists(p))
		return gpt_err_set(err, GPT_EUSAGE, "%s: already holds checkpoints (a 'latest' file); choose a new directory",
				   out_dir);
	return 0;
}

/* Sets key (a full name) to v, as --to-layout (or --micro-batch-size) gave it. */
static int set_int(gpt_config *cfg, const char *key, int64_t v, const gpt_config_origin *o, gpt_err *err)
{
	char t[32];
	snprintf(t, sizeof t, "%lld", (long long)v);
	return gpt_config_set_scalar(cfg, gpt_config_key_find(key), t, 0, o, err);
}

/* Makes key not given, so that resolving derives it for the new layout. */
static int unset(gpt_config *cfg, const char *key, gpt_err *err)
{
	gpt_config_origin o = {GPT_SRC_DEFAULT, NULL, 0, 0};
	return gpt_config_set_scalar(cfg, gpt_config_key_find(key), NULL, 1, &o, err);
}

/* The largest divisor of n that is at most m (1 at least). */
static int64_t divisor_upto(int64_t n, int64_t m)
{
	for (int64_t d = m < n ? m : n; d > 1; d--)
		if (n % d == 0)
			return d;
	return 1;
}

/* Whether the new layout trains the checkpoint's global batch G: G / (dp x
 * sharding) samples per data replica, in micro-batches of m, a multiple of
 * pp of them under the interleaved schedule. The message says what to
 * change. */
static int check_batch(const gpt_config *cfg, const gpt_ckpt_layout *lo, const char *yaml, gpt_err *err)
{
	int64_t G = cfg->global.global_batch_size, m = cfg->global.micro_batch_size;
	int64_t data = lo->dp * lo->sharding, groups = lo->vpp > 1 ? lo->pp : 1;
	const char *given = lo->micro ? "--micro-batch-size" : "the checkpoint's Global.micro_batch_size";
	if (G % data)
		return gpt_err_set(err, GPT_EUSAGE, "--to-layout: the global batch of %lld samples (Global.global_batch_size in %s) does not split over dp %lld x sharding %lld = %lld data replicas; choose dp and sharding whose product divides %lld, so that the copy trains as the run that saved it",
				   (long long)G, yaml, (long long)lo->dp, (long long)lo->sharding, (long long)data,
				   (long long)G);
	int64_t l = G / data;
	if (l % groups)
		return gpt_err_set(err, GPT_EUSAGE, "--to-layout: the interleaved schedule (vpp %lld) takes micro-batches in groups of pp %lld, and a batch of %lld samples per data replica (global batch %lld / (dp %lld x sharding %lld)) makes no whole number of groups; choose fewer data replicas or vpp=1",
				   (long long)lo->vpp, (long long)lo->pp, (long long)l, (long long)G, (long long)lo->dp,
				   (long long)lo->sharding);
	if ((l / groups) % m) {
		int64_t d = divisor_upto(l / groups, m);
		char other[96] = "", inter[96] = "";
		if (groups > 1)
			snprintf(inter, sizeof inter, " into a multiple of pp %lld micro-batches (the interleaved schedule)",
				 (long long)groups);
		if (d > 1)
			snprintf(other, sizeof other, " (or another divisor of %lld)", (long long)(l / groups));
		return gpt_err_set(err, GPT_EUSAGE, "--to-layout: micro-batches of %lld samples (%s) do not divide the batch of %lld samples of each of the %lld data replicas (global batch %lld / (dp %lld x sharding %lld))%s; give --micro-batch-size %lld%s, or choose fewer data replicas",
				   (long long)m, given, (long long)l, (long long)data, (long long)G, (long long)lo->dp,
				   (long long)lo->sharding, inter,
				   (long long)d, other);
	}
	return 0;
}

/* The checkpoint's configuration for the layout lo: its degrees, the batch
 * sizes derived again from the kept global and micro batch, the pipeline
 * schedule and stage split derived again (the copy cuts layers evenly),
 * sequence parallelism off without tensor parallelism; output_dir the
 * copy's directory and no ckpt_dir, so that training resumes from the
 * copy, not from the run it came from; everything else as it was. Resolved
 * for the new world size and printed as YAML. */
static char *new_config(const gpt_ckpt *ck, const gpt_ckpt_layout *lo, const char *out_dir, gpt_err *err)
{
	gpt_config cfg;
	char yaml[4200], flag[160], mflag[64];
	snprintf(yaml, sizeof yaml, "%s/config.yaml", gpt_ckpt_path(ck));
	int at = snprintf(flag, sizeof flag, "--to-layout mp=%lld,pp=%lld,vpp=%lld,dp=%lld,sharding=%lld",
			  (long long)lo->tp, (long long)lo->pp, (long long)lo->vpp, (long long)lo->dp,
			  (long long)lo->sharding);
	if (lo->sharding > 1)
		snprintf(flag + at, sizeof flag - (size_t)at, ",stage=%lld", (long long)lo->stage);
	snprintf(mflag, sizeof mflag, "--micro-batch-size %lld", (long long)lo->micro);
	gpt_config_origin o = {GPT_SRC_FLAG, flag, 0, 0}, om = {GPT_SRC_FLAG, mflag, 0, 0};
	int rc = gpt_ckpt_read_config(ck, &cfg, err);
	if (!rc && !gpt_config_given(&cfg, gpt_config_key_find("Global.global_batch_size")))
		rc = gpt_err_set(err, GPT_EDATA, "%s: no Global.global_batch_size, the batch the copy must train; a checkpoint gpt-train saved has one",
				 yaml);
	if (!rc && lo->micro)
		rc = set_int(&cfg, "Global.micro_batch_size", lo->micro, &om, err);
	if (!rc)
		rc = check_batch(&cfg, lo, yaml, err);
	if (!rc)
		rc = set_int(&cfg, "Distributed.mp_degree", lo->tp, &o, err);
	if (!rc)
		rc = set_int(&cfg, "Distributed.pp_degree", lo->pp, &o, err);
	if (!rc)
		rc = set_int(&cfg, "Distributed.virtual_pp_degree", lo->vpp, &o, err);
	if (!rc)
		rc = set_int(&cfg, "Distributed.dp_degree", lo->dp, &o, err);
	if (!rc)
		rc = set_int(&cfg, "Distributed.sharding.sharding_degree", lo->sharding, &o, err);
	if (!rc && lo->sharding > 1) /* with sharding 1 the stage means nothing: kept */
		rc = set_int(&cfg, "Distributed.sharding.sharding_stage", lo->stage, &o, err);
	gpt_config_origin od = {GPT_SRC_FLAG, "gpt-ckpt-merge's OUT", 0, 0};
	if (!rc)
		rc = gpt_config_set_scalar(&cfg, gpt_config_key_find("Engine.save_load.output_dir"), out_dir, 0, &od,
					   err);
	if (!rc)
		rc = unset(&cfg, "Engine.save_load.ckpt_dir", err);
	if (!rc && lo->tp == 1 && cfg.model.sequence_parallel)
		rc = gpt_config_set_scalar(&cfg, gpt_config_key_find("Model.sequence_parallel"), "False", 0, &o, err);
	static const char *const derive[] = {"Global.local_batch_size", "Engine.accumulate_steps",
					     "Distributed.pp_layers"};
	for (size_t i = 0; i < sizeof derive / sizeof *derive && !rc; i++)
		rc = unset(&cfg, derive[i], err);
	/* FThenB or 1F1B stays without virtual stages; interleaved follows vpp */
	const char *sched = cfg.distributed.pipeline_schedule;
	if (!rc && (lo->vpp > 1 || (sched && strcmp(sched, "interleaved") == 0)))
		rc = unset(&cfg, "Distributed.pipeline_schedule", err);
	if (!rc && gpt_config_resolve(&cfg, lo->tp * lo->pp * lo->dp * lo->sharding, err))
		rc = gpt_err_prefix(err, "--to-layout: %s in the new layout", yaml);
	char *text = NULL;
	size_t len = 0;
	FILE *mf = rc ? NULL : open_memstream(&text, &len);
	if (!rc)
		rc = mf ? gpt_config_write_yaml(&cfg, mf, err) : gpt_err_nomem(err, 0, "config.yaml");
	if (mf && fclose(mf) && !rc)
		rc = gpt_err_nomem(err, 0, "config.yaml");
	gpt_config_free(&cfg);
	if (rc) {
		free(text);
		return NULL;
	}
	return text;
}

typedef struct copy_ctx {
	const gpt_ckpt *ck;
	const gpt_ckpt_layout *lo;
	const gpt_model_shape *s;
	const gpt_param_info *t;
	int64_t nt;
	const char *out_dir;
	const char *config; /* the copy's config.yaml */
	FILE *progress;
	char *path;
	size_t path_size;
	int64_t *bytes;
} copy_ctx;

/* The parts of every target rank, then the publication (gpt_ckpt_write_new). */
static int write_copy(void *ctx, gpt_err *err)
{
	const copy_ctx *c = ctx;
	const gpt_ckpt_layout *lo = c->lo;
	int64_t step = gpt_ckpt_step(c->ck);
	int world = (int)(lo->tp * lo->pp * lo->dp * lo->sharding);
	char stage[4096];
	gpt_ckpt_stage_dir(c->out_dir, step, stage, sizeof stage);
	int rc = gpt_ckpt_prepare(c->out_dir, step, err);
	gpt_progress pr;
	if (c->progress)
		gpt_progress_init(&pr, c->progress, "gpt-ckpt-merge", "ranks", world);
	for (int r = 0; r < world && !rc; r++) {
		rc = rank_part(c->ck, c->s, c->t, c->nt, lo, r, stage, err);
		if (c->progress)
			gpt_progress_update(&pr, r + 1, r + 1);
	}
	if (c->progress)
		gpt_progress_finish(&pr);
	char *state = rc ? NULL : new_state(c->ck, lo, err);
	if (!rc && !state)
		rc = err->code;
	if (!rc)
		rc = gpt_ckpt_publish(c->out_dir, step, world, state, c->config, 0, c->path,
				      c->path_size, c->bytes, err);
	free(state);
	return rc;
}

int gpt_ckpt_reshard(const gpt_ckpt *ck, const gpt_ckpt_layout *lo, const char *out_dir,
		     FILE *progress, char *path, size_t path_size, int64_t *bytes, gpt_err *err)
{
	gpt_model_shape s;
	gpt_param_info *t = NULL;
	int64_t nt = 0;
	int rc = gpt_ckpt_out_outside(ck, out_dir, err);
	if (!rc)
		rc = gpt_ckpt_model_shape(ck, &s, err);
	if (!rc)
		rc = check_layout(&s, lo, err);
	char *config = rc ? NULL : new_config(ck, lo, out_dir, err);
	if (!rc && !config)
		rc = err->code;
	if (!rc)
		rc = gpt_param_table(&s, &t, &nt, err);
	copy_ctx c = {ck, lo, &s, t, nt, out_dir, config, progress, path, path_size, bytes};
	if (!rc)
		rc = gpt_ckpt_write_new(out_dir, gpt_ckpt_step(ck), write_copy, &c, err);
	free(config);
	free(t);
	return rc;
}
