/* gpt-ckpt-merge --from-hf: a Hugging Face GPT-2 directory as a gptkit
 * checkpoint of the weights. (Part of lib/ckpt.) The inverse of hf.c:
 * Conv1D weights [in, out] become [out, in], c_attn [C, 3C] becomes qkv
 * [3, C, C] (the same transpose), wte gains zero padding rows. */
#include "ckpt/ckpt-impl.h"
#include "config/config.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* HF's name after "h.N." -> ours, and whether it is a Conv1D weight. */
static const struct {
	const char *hf, *ours;
	int conv;
} layer_names[] = {
	{"ln_1.weight", "ln_1.weight", 0}, {"ln_1.bias", "ln_1.bias", 0},
	{"attn.c_attn.weight", "attn.qkv.weight", 1}, {"attn.c_attn.bias", "attn.qkv.bias", 0},
	{"attn.c_proj.weight", "attn.proj.weight", 1}, {"attn.c_proj.bias", "attn.proj.bias", 0},
	{"ln_2.weight", "ln_2.weight", 0}, {"ln_2.bias", "ln_2.bias", 0},
	{"mlp.c_fc.weight", "mlp.fc.weight", 1}, {"mlp.c_fc.bias", "mlp.fc.bias", 0},
	{"mlp.c_proj.weight", "mlp.proj.weight", 1}, {"mlp.c_proj.bias", "mlp.proj.bias", 0},
};

typedef struct hf_src {
	gpt_st_file st;
	const char *prefix;         /* "transformer." or "" */
	gpt_model_shape shape;
	gpt_param_info *table;
	int64_t n_table;
	const gpt_st_tensor **src;  /* per table entry */
	int *conv;                  /* per table entry */
} hf_src;

static int cfg_int(json_t *c, const char *k, const char *alt, int64_t *out)
{
	json_t *v = json_object_get(c, k);
	if (!json_is_integer(v) && alt)
		v = json_object_get(c, alt);
	if (!json_is_integer(v) || json_integer_value(v) < 1)
		return -1;
	*out = json_integer_value(v);
	return 0;
}

/* The sizes within the ranges of the Model keys they become (gpt-config(5)),
 * so that no size computed from them overflows before the tensors are
 * checked against them. */
static int check_sizes(const char *path, const gpt_model_shape *s, gpt_err *err)
{
	const struct {
		const char *hf, *ours;
		int64_t v, max;
	} f[] = {
		{"vocab_size", "vocab_size", s->vocab_size, INT64_C(1) << 30},
		{"n_positions", "max_position_embeddings", s->max_pos, INT64_C(1) << 20},
		{"n_embd", "hidden_size", s->hidden, INT64_C(1) << 20},
		{"n_layer", "num_layers", s->layers, INT64_C(1) << 16},
		{"n_head", "num_attention_heads", s->heads, INT64_C(1) << 16},
		{"n_inner", "ffn_hidden_size", s->ffn, INT64_C(1) << 24},
	};
	for (size_t i = 0; i < sizeof f / sizeof *f; i++)
		if (f[i].v > f[i].max)
			return gpt_err_set(err, GPT_EDATA, "%s: %s %lld: expected at most %lld (gptkit's Model.%s)", path,
					   f[i].hf, (long long)f[i].v, (long long)f[i].max, f[i].ours);
	return 0;
}

static int read_config(const char *dir, gpt_model_shape *s, gpt_err *err)
{
	char p[4096];
	snprintf(p, sizeof p, "%s/config.json", dir);
	json_error_t je;
	json_t *c = json_load_file(p, 0, &je);
	int rc = 0;
	if (!c)
		return gpt_path_exists(p) ? gpt_err_set(err, GPT_EDATA, "%s:%d: bad JSON: %s", p, je.line, je.text)
					  : gpt_err_set(err, GPT_ENOINPUT, "%s: missing; expected a Hugging Face GPT-2 directory", p);
	if (!json_is_object(c) || cfg_int(c, "vocab_size", NULL, &s->vocab_size) ||
	    cfg_int(c, "n_embd", NULL, &s->hidden) || cfg_int(c, "n_layer", NULL, &s->layers) ||
	    cfg_int(c, "n_head", NULL, &s->heads) || cfg_int(c, "n_positions", "n_ctx", &s->max_pos))
		rc = gpt_err_set(err, GPT_EDATA, "%s: expected a GPT-2 config.json with vocab_size, n_embd, n_layer, n_head and n_positions",
				 p);
	if (!rc && cfg_int(c, "n_inner", NULL, &s->ffn))
		s->ffn = 0;
	if (!rc)
		rc = check_sizes(p, s, err);
	if (!rc && !s->ffn)
		s->ffn = 4 * s->hidden; /* null: GPT-2's 4 x n_embd */
	const char *act = json_string_value(json_object_get(c, "activation_function"));
	json_t *eps = json_object_get(c, "layer_norm_epsilon"), *tie = json_object_get(c, "tie_word_embeddings");
	json_t *mt = json_object_get(c, "model_type");
	if (!rc && mt && (!json_is_string(mt) || strcmp(json_string_value(mt), "gpt2") != 0))
		rc = gpt_err_set(err, GPT_EDATA, "%s: model_type '%s': only gpt2 converts", p,
				 json_is_string(mt) ? json_string_value(mt) : "?");
	if (!rc && act && strcmp(act, "gelu_new") != 0 && strcmp(act, "gelu_pytorch_tanh") != 0)
		rc = gpt_err_set(err, GPT_EDATA, "%s: activation_function '%s': gptkit's GELU is the tanh form (gelu_new)",
				 p, act);
	if (!rc && eps && (!json_is_number(eps) || fabs(json_number_value(eps) - 1e-5) > 1e-12))
		rc = gpt_err_set(err, GPT_EDATA, "%s: layer_norm_epsilon %g: gptkit's LayerNorm uses 1e-5 (GPT-2's)",
				 p, json_number_value(eps));
	if (!rc && tie && json_is_false(tie))
		rc = gpt_err_set(err, GPT_EDATA, "%s: tie_word_embeddings false: gptkit ties the output head to wte", p);
	/* GPT2Attention's other scalings (Stanford CRFM's Mistral GPT-2s set
	 * scale_attn_by_inverse_layer_idx): the same tensors, other logits */
	json_t *sw = json_object_get(c, "scale_attn_weights"),
	       *sl = json_object_get(c, "scale_attn_by_inverse_layer_idx");
	if (!rc && sw && !json_is_true(sw))
		rc = gpt_err_set(err, GPT_EDATA,
				 "%s: scale_attn_weights false: gptkit's attention divides the scores by "
				 "sqrt(head size), as GPT-2 does", p);
	if (!rc && sl && !json_is_false(sl))
		rc = gpt_err_set(err, GPT_EDATA,
				 "%s: scale_attn_by_inverse_layer_idx true: gptkit's attention does not divide "
				 "the scores of layer i by i + 1", p);
	json_decref(c);
	if (!rc)
		s->padded_vocab = (s->vocab_size + GPT_VOCAB_PAD - 1) / GPT_VOCAB_PAD * GPT_VOCAB_PAD;
	return rc;
}

/* The HF tensor for table entry p, checked against the shape it must have. */
static int find_src(hf_src *h, int64_t i, gpt_err *err)
{
	const gpt_param_info *p = &h->table[i];
	char name[128];
	int conv = 0;
	if (p->layer < 0) {
		snprintf(name, sizeof name, "%s%s%s", h->prefix, p->name,
			 strcmp(p->name, "wte") == 0 || strcmp(p->name, "wpe") == 0 ? ".weight" : "");
	} else {
		const char *rest = strchr(p->name + 2, '.') + 1;
		name[0] = '\0';
		for (size_t k = 0; k < sizeof layer_names / sizeof *layer_names; k++)
			if (strcmp(rest, layer_names[k].ours) == 0) {
				snprintf(name, sizeof name, "%sh.%d.%s", h->prefix, p->layer, layer_names[k].hf);
				conv = layer_names[k].conv;
			}
	}
	const gpt_st_tensor *t = gpt_st_find(&h->st, name);
	if (!t)
		return gpt_err_set(err, GPT_EDATA, "%s: no tensor '%s' (gptkit's %s)", h->st.path, name, p->name);
	int64_t in = p->shape[p->ndim - 1], want[2];
	int nd;
	if (conv) {
		nd = 2, want[0] = in, want[1] = p->numel / in;
	} else if (strcmp(p->name, "wte") == 0 || strcmp(p->name, "wpe") == 0) {
		nd = 2, want[0] = strcmp(p->name, "wte") == 0 ? h->shape.vocab_size : p->shape[0], want[1] = in;
	} else {
		nd = 1, want[0] = p->numel;
	}
	if (t->dtype != GPT_DTYPE_F32 && t->dtype != GPT_DTYPE_F16 && t->dtype != GPT_DTYPE_BF16)
		return gpt_err_set(err, GPT_EDATA, "%s: tensor '%s' is %s; expected F32, F16 or BF16", h->st.path,
				   name, gpt_st_dtype_name(t->dtype));
	if (t->ndim != nd || t->shape[0] != want[0] || (nd == 2 && t->shape[1] != want[1]))
		return gpt_err_set(err, GPT_EDATA, "%s: tensor '%s' has another shape than config.json implies (expected [%lld%s%lld])",
				   h->st.path, name, (long long)want[0], nd == 2 ? ", " : "",
				   nd == 2 ? (long long)want[1] : 0LL);
	h->src[i] = t;
	h->conv[i] = conv;
	return 0;
}

/* Every tensor of the file is one we convert or one we know to drop. */
static int check_extra(hf_src *h, gpt_err *err)
{
	for (int k = 0; k < h->st.n; k++) {
		const gpt_st_tensor *t = &h->st.tensors[k];
		int used = 0;
		for (int64_t i = 0; i < h->n_table && !used; i++)
			used = h->src[i] == t;
		const char *n = t->name, *dot = strrchr(n, '.');
		if (used || strcmp(n, "lm_head.weight") == 0 ||
		    (dot && (strcmp(dot, ".bias") == 0 || strcmp(dot, ".masked_bias") == 0) && dot >= n + 5 &&
		     strncmp(dot - 5, ".attn", 5) == 0))
			continue;
		return gpt_err_set(err, GPT_EDATA, "%s: tensor '%s' has no place in a GPT-2 model; not converting",
				   h->st.path, n);
	}
	return 0;
}

/* The tensor as fp32 (the file's data is not aligned: copied first). */
static int load_f32(const hf_src *h, const gpt_st_tensor *t, float *dst, gpt_err *err)
{
	size_t n = (size_t)((t->end - t->begin) / gpt_dtype_size(t->dtype));
	const void *raw = gpt_st_data(&h->st, t);
	if (t->dtype == GPT_DTYPE_F32) {
		memcpy(dst, raw, n * 4);
		return 0;
	}
	uint16_t *tmp = gpt_malloc(n * 2 + 2, "conversion", err);
	if (!tmp)
		return GPT_EINTERNAL;
	memcpy(tmp, raw, n * 2);
	int rc = gpt_convert(dst, GPT_DTYPE_F32, tmp, t->dtype, n, err);
	free(tmp);
	return rc;
}

static int fill(void *ctx, int i, void *buf, gpt_err *err)
{
	hf_src *h = ctx;
	const gpt_param_info *p = &h->table[i];
	const gpt_st_tensor *t = h->src[i];
	float *out = buf;
	if (!h->conv[i]) {
		memset(out, 0, (size_t)p->numel * 4); /* wte's padding rows */
		return load_f32(h, t, out, err);
	}
	int64_t in = t->shape[0], o = t->shape[1];
	float *w = gpt_malloc((size_t)(in * o) * 4, p->name, err);
	int rc = w ? load_f32(h, t, w, err) : GPT_EINTERNAL;
	for (int64_t r = 0; !rc && r < o; r++)
		for (int64_t c = 0; c < in; c++)
			out[r * in + c] = w[c * o + r];
	free(w);
	return rc;
}

/* A tied head must be wte itself. */
static int check_head(hf_src *h, gpt_err *err)
{
	const gpt_st_tensor *lm = gpt_st_find(&h->st, "lm_head.weight"), *wte = h->src[0];
	if (!lm)
		return 0;
	if (lm->dtype == wte->dtype && lm->end - lm->begin == wte->end - wte->begin &&
	    memcmp(gpt_st_data(&h->st, lm), gpt_st_data(&h->st, wte), (size_t)(lm->end - lm->begin)) == 0)
		return 0;
	return gpt_err_set(err, GPT_EDATA, "%s: lm_head.weight differs from wte: an untied head; gptkit ties them",
			   h->st.path);
}

/* The configuration of the model for a run from the converted weights:
 * output_dir the checkpoint's directory (as --to-layout's copy has it), so
 * that gpt-train -c OUT/step_00000000/config.yaml trains from them and saves
 * beside them, not from scratch into ./output. */
static char *config_text(const gpt_model_shape *s, const char *out_dir, gpt_err *err)
{
	gpt_config cfg;
	int rc = gpt_config_init(&cfg, err);
	char a[9][96];
	snprintf(a[0], sizeof a[0], "Model.vocab_size=%lld", (long long)s->vocab_size);
	snprintf(a[1], sizeof a[1], "Model.hidden_size=%lld", (long long)s->hidden);
	snprintf(a[2], sizeof a[2], "Model.num_layers=%lld", (long long)s->layers);
	snprintf(a[3], sizeof a[3], "Model.num_attention_heads=%lld", (long long)s->heads);
	snprintf(a[4], sizeof a[4], "Model.ffn_hidden_size=%lld", (long long)s->ffn);
	snprintf(a[5], sizeof a[5], "Model.max_position_embeddings=%lld", (long long)s->max_pos);
	/* training windows no longer than the positions the model has */
	int64_t T = s->max_pos < 1024 ? s->max_pos : 1024;
	snprintf(a[6], sizeof a[6], "Data.Train.dataset.max_seq_len=%lld", (long long)T);
	snprintf(a[7], sizeof a[7], "Data.Eval.dataset.max_seq_len=%lld", (long long)T);
	/* the CPU trainer is what this build has */
	snprintf(a[8], sizeof a[8], "Global.device=cpu");
	for (int i = 0; i < 9 && !rc; i++)
		rc = gpt_config_override(&cfg, a[i], err);
	gpt_config_origin od = {GPT_SRC_FLAG, "gpt-ckpt-merge's OUT", 0, 0};
	if (!rc)
		rc = gpt_config_set_scalar(&cfg, gpt_config_key_find("Engine.save_load.output_dir"), out_dir, 0, &od,
					   err);
	if (!rc)
		rc = gpt_config_resolve(&cfg, 1, err);
	char *yaml = NULL;
	size_t yl = 0;
	FILE *mf = rc ? NULL : open_memstream(&yaml, &yl);
	if (!rc)
		rc = mf ? gpt_config_write_yaml(&cfg, mf, err) : gpt_err_nomem(err, 0, "config.yaml");
	if (mf)
		fclose(mf);
	gpt_config_free(&cfg);
	if (rc) {
		free(yaml);
		return NULL;
	}
	return yaml;
}

/* model.safetensors is missing: say what the directory holds instead
 * (transformers' save_pretrained writes shards with an index above its
 * max_shard_size, and pytorch_model.bin without safe_serialization). */
static int missing_weights(const char *hf_dir, gpt_err *err)
{
	static const struct {
		const char *file, *what, *fix;
	} other[] = {
		{"model.safetensors.index.json", "in shards listed by", "max_shard_size=\"1000GB\""},
		{"pytorch_model.bin", "a PyTorch pickle, in", "safe_serialization=True"},
	};
	for (size_t i = 0; i < sizeof other / sizeof *other; i++) {
		char p[4096];
		snprintf(p, sizeof p, "%s/%s", hf_dir, other[i].file);
		if (gpt_path_exists(p))
			return gpt_err_set(err, GPT_ENOINPUT,
					   "%s/model.safetensors: missing; the weights are %s %s, which gptkit does not "
					   "read: save the model again with save_pretrained(DIR, %s)",
					   hf_dir, other[i].what, p, other[i].fix);
	}
	return GPT_ENOINPUT;
}

/* Opens and checks the directory (see gpt_hf_open); on failure h holds at
 * most the open file and the tables (hf_free_tables, gpt_st_close). */
static int hf_open(hf_src *h, const char *hf_dir, gpt_err *err)
{
	memset(h, 0, sizeof *h);
	char p[4096];
	int rc = read_config(hf_dir, &h->shape, err);
	if (rc)
		return rc;
	if (gpt_param_table(&h->shape, &h->table, &h->n_table, err)) {
		if (err)
			err->code = GPT_EDATA; /* a model no GPT-2 can be: the file is bad */
		return gpt_err_prefix(err, "%s/config.json", hf_dir);
	}
	snprintf(p, sizeof p, "%s/model.safetensors", hf_dir);
	rc = gpt_st_open(&h->st, p, err);
	if (rc == GPT_ENOINPUT)
		rc = missing_weights(hf_dir, err);
	if (rc) {
		free(h->table);
		memset(h, 0, sizeof *h);
		return rc;
	}
	h->prefix = gpt_st_find(&h->st, "transformer.wte.weight") ? "transformer." : "";
	h->src = gpt_calloc((size_t)h->n_table, sizeof *h->src, "tensors", err);
	h->conv = h->src ? gpt_calloc((size_t)h->n_table, sizeof *h->conv, "tensors", err) : NULL;
	rc = h->conv ? 0 : GPT_EINTERNAL;
	for (int64_t i = 0; i < h->n_table && !rc; i++)
		rc = find_src(h, i, err);
	if (!rc)
		rc = check_extra(h, err);
	if (!rc)
		rc = check_head(h, err);
	return rc;
}

/* Frees what hf_open made but the open file. */
static void hf_free_tables(hf_src *h)
{
	free(h->src);
	free(h->conv);
	free(h->table);
	h->src = NULL, h->conv = NULL, h->table = NULL;
}

int gpt_hf_open(const char *hf_dir, gpt_model_shape *shape, gpt_st_file *st, const char **prefix,
		gpt_err *err)
{
	hf_src h;
	int rc = hf_open(&h, hf_dir, err);
	hf_free_tables(&h);
	if (rc) {
		if (h.st.path)
			gpt_st_close(&h.st);
		return rc;
	}
	*shape = h.shape;
	*st = h.st;
	*prefix = h.prefix;
	return 0;
}

typedef struct import_ctx {
	hf_src *h;
	const gpt_ckpt_piece *pc;
	const char *hf_dir, *out_dir, *yaml;
	FILE *progress;
	char *path;
	size_t path_size;
	int64_t *bytes;
} import_ctx;

/* Step 0's one part and its publication (gpt_ckpt_write_new). */
static int write_import(void *ctx, gpt_err *err)
{
	const import_ctx *c = ctx;
	char stage[4096];
	gpt_ckpt_stage_dir(c->out_dir, 0, stage, sizeof stage);
	int rc = gpt_ckpt_prepare(c->out_dir, 0, err);
	if (!rc && c->progress)
		fprintf(c->progress, "gpt-ckpt-merge: converting %lld tensors of %s\n", (long long)c->h->n_table,
			c->h->st.path);
	if (!rc)
		rc = gpt_ckpt_write_part(stage, 0, c->pc, (int)c->h->n_table, fill, c->h, err);
	json_t *st = json_pack("{s:i, s:i, s:i, s:i, s:{s:s}, s:{s:i, s:i, s:i, s:i, s:i, s:i, s:i}, s:s}", "step", 0,
			       "consumed_samples", 0, "consumed_tokens", 0, "optimizer_steps", 0, "source", "huggingface", c->hf_dir,
			       "layout", "world_size", 1, "dp", 1, "mp", 1, "pp", 1, "vpp", 1, "sharding", 1,
			       "sharding_stage", 0, "gptkit_version", GPT_VERSION);
	char *state = st ? json_dumps(st, JSON_INDENT(2)) : NULL;
	json_decref(st);
	if (!rc && !state)
		rc = gpt_err_nomem(err, 0, "state.json");
	if (!rc)
		rc = gpt_ckpt_publish(c->out_dir, 0, 1, state, c->yaml, 0, c->path, c->path_size, c->bytes, err);
	free(state);
	return rc;
}

int gpt_ckpt_from_hf(const char *hf_dir, const char *out_dir, FILE *progress, char *path,
		     size_t path_size, int64_t *bytes, gpt_err *err)
{
	hf_src h;
	int rc = hf_open(&h, hf_dir, err);
	int st_ok = h.st.path != NULL;
	gpt_ckpt_piece *pc = rc ? NULL : gpt_calloc((size_t)h.n_table, sizeof *pc, "pieces", err);
	if (!rc && !pc)
		rc = GPT_EINTERNAL;
	for (int64_t i = 0; i < h.n_table && !rc; i++) {
		const gpt_param_info *q = &h.table[i];
		pc[i] = (gpt_ckpt_piece){.tensor = q->name, .dtype = GPT_DTYPE_F32, .ndim = q->ndim,
					 .box = gpt_box_full(q->ndim, q->shape)};
		memcpy(pc[i].shape, q->shape, sizeof q->shape);
	}
	char *yaml = rc ? NULL : config_text(&h.shape, out_dir, err);
	if (!rc && !yaml)
		rc = err->code;
	import_ctx c = {&h, pc, hf_dir, out_dir, yaml, progress, path, path_size, bytes};
	if (!rc)
		rc = gpt_ckpt_write_new(out_dir, 0, write_import, &c, err);
	free(yaml);
	free(pc);
	hf_free_tables(&h);
	if (st_ok)
		gpt_st_close(&h.st);
	return rc;
}
