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
#include <sys/stat.h>
#include <unistd.h>

typedef struct hf_src {
	gpt_hf_weights w;
	int index_ignored;          /* model.safetensors.index.json beside model.safetensors */
	const char *prefix;         /* "transformer." or "" */
	gpt_model_shape shape;
	gpt_param_info *table;
	int64_t n_table;
	const gpt_st_tensor **src;  /* per table entry */
	const gpt_st_file **file;   /* per table entry: the file holding src */
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

/* One past the highest N of the tensors "<prefix>h.N." of f (0: none). */
static int64_t layers_held(const gpt_st_file *f, const char *prefix)
{
	int64_t top = 0;
	size_t n = strlen(prefix);
	for (int i = 0; i < f->n; i++) {
		const char *s = f->tensors[i].name;
		char *end;
		if (strncmp(s, prefix, n) != 0 || strncmp(s + n, "h.", 2) != 0 || s[n + 2] < '0' || s[n + 2] > '9')
			continue;
		long long k = strtoll(s + n + 2, &end, 10);
		if (*end == '.' && k >= top)
			top = k + 1;
	}
	return top;
}

/* The single file lacks tensor name (gptkit's p->name): say whether its
 * layers end before config.json's n_layer, its names lie under another
 * prefix (a wrapping module's state_dict), or it is no GPT-2 at all. */
static int no_tensor(const hf_src *h, const gpt_param_info *p, const char *name, gpt_err *err)
{
	const gpt_st_file *f = &h->w.files[0];
	int64_t top = layers_held(f, h->prefix);
	char wte[128];
	snprintf(wte, sizeof wte, "%swte.weight", h->prefix);
	const char *other = NULL; /* a "...wte.weight" under another prefix */
	for (int i = 0; i < f->n && !other; i++) {
		size_t n = strlen(f->tensors[i].name);
		if (n > 10 && strcmp(f->tensors[i].name + n - 10, "wte.weight") == 0)
			other = f->tensors[i].name;
	}
	char why[512];
	if (gpt_st_find(f, wte) && top > 0 && p->layer >= top)
		snprintf(why, sizeof why,
			 "; the file's layers end at h.%lld but its config.json says n_layer %lld: the config.json "
			 "is not the one saved with these weights; copy in the model's own, or set n_layer to %lld",
			 (long long)top - 1, (long long)h->shape.layers, (long long)top);
	else if (gpt_st_find(f, wte))
		snprintf(why, sizeof why,
			 "; the file holds GPT-2's names but not this one, which GPT2LMHeadModel of its config.json "
			 "has: it was saved from another model or is damaged; save the model again with save_pretrained");
	else if (other)
		snprintf(why, sizeof why,
			 "; it holds '%.128s': its names lie under another prefix than 'transformer.' (or none), as "
			 "the state_dict of a module wrapping the GPT-2 has them; save the GPT-2 itself with save_pretrained",
			 other);
	else
		snprintf(why, sizeof why,
			 "; its %d tensors%s%.128s%s are not named as Hugging Face's GPT-2 names them "
			 "([transformer.]wte.weight, wpe.weight, h.N.attn.c_attn.weight, ...): it is another "
			 "architecture's, which gptkit does not read; convert a GPT-2 (model_type gpt2)",
			 f->n, f->n ? " (the first '" : "", f->n ? f->tensors[0].name : "", f->n ? "')" : "");
	return gpt_err_set(err, GPT_EDATA, "%s: no tensor '%s' (gptkit's %s)%s", f->path, name, p->name, why);
}

/* The HF tensor for table entry p, checked against the shape it must have. */
static int find_src(hf_src *h, int64_t i, gpt_err *err)
{
	const gpt_param_info *p = &h->table[i];
	char name[128];
	int conv;
	gpt_hf_param_name(p, h->prefix, name, sizeof name, &conv);
	const gpt_st_file *f;
	const gpt_st_tensor *t = gpt_hf_find(&h->w, name, &f);
	if (!t && h->w.index)
		return gpt_err_set(err, GPT_EDATA,
				   "%s: no tensor '%s' (gptkit's %s) in its weight_map: the shards lack a tensor "
				   "of the model; save the model again with save_pretrained", h->w.index, name, p->name);
	if (!t)
		return no_tensor(h, p, name, err);
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
		return gpt_err_set(err, GPT_EDATA, "%s: tensor '%s' is %s; expected F32, F16 or BF16", f->path,
				   name, gpt_st_dtype_name(t->dtype));
	if (t->ndim != nd || t->shape[0] != want[0] || (nd == 2 && t->shape[1] != want[1]))
		return gpt_err_set(err, GPT_EDATA, "%s: tensor '%s' has another shape than config.json implies (expected [%lld%s%lld])",
				   f->path, name, (long long)want[0], nd == 2 ? ", " : "",
				   nd == 2 ? (long long)want[1] : 0LL);
	h->src[i] = t;
	h->file[i] = f;
	h->conv[i] = conv;
	return 0;
}

/* Every tensor of the files is one we convert or one we know to drop. */
static int check_extra(hf_src *h, gpt_err *err)
{
	for (int fi = 0; fi < h->w.n; fi++) {
		const gpt_st_file *f = &h->w.files[fi];
		for (int k = 0; k < f->n; k++) {
			const gpt_st_tensor *t = &f->tensors[k];
			int used = 0;
			for (int64_t i = 0; i < h->n_table && !used; i++)
				used = h->src[i] == t;
			const char *n = t->name, *dot = strrchr(n, '.');
			if (used || strcmp(n, "lm_head.weight") == 0 ||
			    (dot && (strcmp(dot, ".bias") == 0 || strcmp(dot, ".masked_bias") == 0) &&
			     dot >= n + 5 && strncmp(dot - 5, ".attn", 5) == 0))
				continue;
			return gpt_err_set(err, GPT_EDATA,
					   "%s: tensor '%s' has no place in a GPT-2 model; not converting", f->path, n);
		}
	}
	return 0;
}

/* The tensor as fp32 (the file's data is not aligned: copied first). */
static int load_f32(const gpt_st_file *f, const gpt_st_tensor *t, float *dst, gpt_err *err)
{
	size_t n = (size_t)((t->end - t->begin) / gpt_dtype_size(t->dtype));
	const void *raw = gpt_st_data(f, t);
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
		return load_f32(h->file[i], t, out, err);
	}
	int64_t in = t->shape[0], o = t->shape[1];
	float *w = gpt_malloc((size_t)(in * o) * 4, p->name, err);
	int rc = w ? load_f32(h->file[i], t, w, err) : GPT_EINTERNAL;
	for (int64_t r = 0; !rc && r < o; r++)
		for (int64_t c = 0; c < in; c++)
			out[r * in + c] = w[c * o + r];
	free(w);
	return rc;
}

/* A tied head must be wte itself. */
static int check_head(hf_src *h, gpt_err *err)
{
	const gpt_st_file *lf;
	const gpt_st_tensor *lm = gpt_hf_find(&h->w, "lm_head.weight", &lf), *wte = h->src[0];
	if (!lm)
		return 0;
	if (lm->dtype == wte->dtype && lm->end - lm->begin == wte->end - wte->begin &&
	    memcmp(gpt_st_data(lf, lm), gpt_st_data(h->file[0], wte), (size_t)(lm->end - lm->begin)) == 0)
		return 0;
	return gpt_err_set(err, GPT_EDATA, "%s: lm_head.weight differs from wte: an untied head; gptkit ties them",
			   lf->path);
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

/* ---- the weights: model.safetensors, or the shards an index lists ---- */

const gpt_st_tensor *gpt_hf_find(const gpt_hf_weights *w, const char *name, const gpt_st_file **file)
{
	for (int i = 0; i < w->n; i++) {
		const gpt_st_tensor *t = gpt_st_find(&w->files[i], name);
		if (t) {
			if (file)
				*file = &w->files[i];
			return t;
		}
	}
	if (file)
		*file = NULL;
	return NULL;
}

void gpt_hf_weights_close(gpt_hf_weights *w)
{
	for (int i = 0; i < w->n; i++)
		gpt_st_close(&w->files[i]); /* one never opened is zero: nothing to do */
	free(w->files);
	free(w->index);
	memset(w, 0, sizeof *w);
}

#define NOT_ONE_SAVE "the index and the shards are not of one save; save the model again with save_pretrained"

/* A shard the index names and the first tensor it puts there. */
typedef struct shard_ref {
	const char *file, *tensor;
} shard_ref;

static int shard_of(const shard_ref *sh, int n, const char *file)
{
	int k = 0;
	while (k < n && strcmp(sh[k].file, file) != 0)
		k++;
	return k;
}

/* The shard files the weight_map of index names, each once (file names
 * only: the shards lie in the directory beside the index). */
static int shard_names(json_t *map, const char *index, const char *dir, shard_ref *sh, int *n,
		       gpt_err *err)
{
	const char *key;
	json_t *v;
	json_object_foreach(map, key, v)
	{
		const char *f = json_string_value(v);
		if (!f)
			return gpt_err_set(err, GPT_EDATA, "%s: weight_map entry '%s': expected the name of a shard file",
					   index, key);
		if (!*f || strchr(f, '/') || strcmp(f, ".") == 0 || strcmp(f, "..") == 0)
			return gpt_err_set(err, GPT_EDATA,
					   "%s: weight_map entry '%s' names shard '%s', which is not a file name: the "
					   "shards must lie in %s beside the index; not reading another path",
					   index, key, f, dir);
		if (shard_of(sh, *n, f) == *n)
			sh[(*n)++] = (shard_ref){f, key};
	}
	return 0;
}

/* Every tensor in the shard the weight_map gives it, and no shard holding
 * a tensor the map gives another shard or none. */
static int check_shards(json_t *map, const char *index, const gpt_hf_weights *w, const shard_ref *sh,
			gpt_err *err)
{
	const char *key;
	json_t *v;
	json_object_foreach(map, key, v)
	{
		const gpt_st_file *f = &w->files[shard_of(sh, w->n, json_string_value(v))];
		if (!gpt_st_find(f, key))
			return gpt_err_set(err, GPT_EDATA, "%s: weight_map puts tensor '%s' in %s, which does not hold it; "
					   NOT_ONE_SAVE, index, key, f->path);
	}
	for (int k = 0; k < w->n; k++)
		for (int i = 0; i < w->files[k].n; i++) {
			const char *name = w->files[k].tensors[i].name;
			const char *f = json_string_value(json_object_get(map, name));
			if (!f)
				return gpt_err_set(err, GPT_EDATA, "%s: holds tensor '%s', which %s does not list; "
						   NOT_ONE_SAVE, w->files[k].path, name, index);
			if (strcmp(f, sh[k].file) != 0)
				return gpt_err_set(err, GPT_EDATA, "%s: holds tensor '%s' too, which %s puts in %s; "
						   NOT_ONE_SAVE, w->files[k].path, name, index, f);
		}
	return 0;
}

/* The shards that index (DIR/model.safetensors.index.json, as
 * save_pretrained writes it above max_shard_size) lists, all mapped: each
 * tensor is read from the shard its weight_map names. */
static int open_shards(gpt_hf_weights *w, const char *dir, const char *index, gpt_err *err)
{
	json_error_t je;
	json_t *root = json_load_file(index, JSON_REJECT_DUPLICATES, &je);
	if (!root)
		return gpt_err_set(err, GPT_EDATA, "%s:%d: bad JSON: %s%s", index, je.line, je.text,
				   strstr(je.text, "duplicate") ? " (a tensor or key given twice); save the model again" : "");
	json_t *map = json_object_get(root, "weight_map");
	size_t n_map = json_object_size(map);
	int rc = 0, n = 0;
	if (!json_is_object(map) || n_map == 0)
		rc = gpt_err_set(err, GPT_EDATA,
				 "%s: expected an object \"weight_map\" naming the shard file of each tensor, as "
				 "save_pretrained writes it", index);
	shard_ref *sh = rc ? NULL : gpt_calloc(n_map, sizeof *sh, "shards", err);
	if (!rc && !sh)
		rc = GPT_EINTERNAL;
	if (!rc)
		rc = shard_names(map, index, dir, sh, &n, err);
	w->files = rc ? NULL : gpt_calloc((size_t)n, sizeof *w->files, "shards", err);
	if (!rc && !w->files)
		rc = GPT_EINTERNAL;
	if (!rc)
		w->n = n;
	for (int k = 0; k < n && !rc; k++) {
		char p[4096];
		snprintf(p, sizeof p, "%s/%s", dir, sh[k].file);
		rc = gpt_st_open(&w->files[k], p, err);
		if (rc == GPT_ENOINPUT)
			rc = gpt_err_set(err, GPT_ENOINPUT,
					 "%s: tensor '%s' is in shard %s, which is missing; copy every shard the "
					 "index lists into %s", index, sh[k].tensor, p, dir);
		else if (rc)
			gpt_err_prefix(err, "%s lists a shard gptkit cannot read (fetch or save it again)", index);
	}
	if (!rc)
		rc = check_shards(map, index, w, sh, err);
	if (!rc) {
		w->index = strdup(index);
		if (!w->index)
			rc = gpt_err_nomem(err, strlen(index), "path");
	}
	free(sh);
	json_decref(root);
	return rc;
}

/* model.safetensors and an index are missing: say what the directory holds
 * instead (transformers' save_pretrained writes pickles without
 * safe_serialization), or, holding no weights at all, what was looked for.
 * err holds why model.safetensors did not open: a link to nowhere (as a
 * copied Hugging Face cache snapshot holds) keeps that message. */
static int missing_weights(const char *hf_dir, gpt_err *err)
{
	static const char *const other[] = {"pytorch_model.bin.index.json", "pytorch_model.bin"};
	char p[4096];
	for (size_t i = 0; i < sizeof other / sizeof *other; i++) {
		snprintf(p, sizeof p, "%s/%s", hf_dir, other[i]);
		if (gpt_path_exists(p))
			return gpt_err_set(err, GPT_ENOINPUT,
					   "%s/model.safetensors: missing; the weights are PyTorch pickles (%s), which "
					   "gptkit does not read: save the model again with save_pretrained(DIR, "
					   "safe_serialization=True)", hf_dir, p);
	}
	struct stat st;
	char to[4096];
	snprintf(p, sizeof p, "%s/model.safetensors", hf_dir);
	ssize_t n = lstat(p, &st) == 0 && S_ISLNK(st.st_mode) ? readlink(p, to, sizeof to - 1) : -1;
	if (n >= 0) {
		to[n] = '\0';
		return gpt_err_set(err, GPT_ENOINPUT,
				   "%s: a symbolic link to %s, which does not exist (a Hugging Face cache snapshot "
				   "links to the cache's blobs); copy the snapshot with cp -L, or name it in the cache",
				   p, to);
	}
	return gpt_err_set(err, GPT_ENOINPUT,
			   "%s: holds config.json but no weights: found none of model.safetensors, "
			   "model.safetensors.index.json (with its shards), pytorch_model.bin and "
			   "pytorch_model.bin.index.json; copy the model's weights beside config.json (save_pretrained(DIR, "
			   "safe_serialization=True) writes model.safetensors), or name the directory that holds them",
			   hf_dir);
}

/* The weights as transformers' from_pretrained picks them: model.safetensors
 * when there is one, else the shards of model.safetensors.index.json. */
static int open_weights(hf_src *h, const char *hf_dir, gpt_err *err)
{
	char p[4096], index[4096];
	snprintf(p, sizeof p, "%s/model.safetensors", hf_dir);
	snprintf(index, sizeof index, "%s/model.safetensors.index.json", hf_dir);
	h->w.files = gpt_calloc(1, sizeof *h->w.files, "weights", err);
	if (!h->w.files)
		return GPT_EINTERNAL;
	h->w.n = 1;
	int rc = gpt_st_open(&h->w.files[0], p, err);
	if (!rc)
		h->index_ignored = gpt_path_exists(index);
	if (rc != GPT_ENOINPUT)
		return rc;
	gpt_hf_weights_close(&h->w);
	if (gpt_path_exists(index))
		return open_shards(&h->w, hf_dir, index, err);
	return missing_weights(hf_dir, err);
}

/* Opens and checks the directory (see gpt_hf_open); on failure h holds at
 * most the weights and the tables (hf_free_tables, gpt_hf_weights_close). */
static int hf_open(hf_src *h, const char *hf_dir, gpt_err *err)
{
	memset(h, 0, sizeof *h);
	int rc = read_config(hf_dir, &h->shape, err);
	if (rc)
		return rc;
	if (gpt_param_table(&h->shape, &h->table, &h->n_table, err)) {
		if (err)
			err->code = GPT_EDATA; /* a model no GPT-2 can be: the file is bad */
		return gpt_err_prefix(err, "%s/config.json", hf_dir);
	}
	rc = open_weights(h, hf_dir, err);
	if (rc)
		return rc;
	h->prefix = gpt_hf_find(&h->w, "transformer.wte.weight", NULL) ? "transformer." : "";
	h->src = gpt_calloc((size_t)h->n_table, sizeof *h->src, "tensors", err);
	h->file = h->src ? gpt_calloc((size_t)h->n_table, sizeof *h->file, "tensors", err) : NULL;
	h->conv = h->file ? gpt_calloc((size_t)h->n_table, sizeof *h->conv, "tensors", err) : NULL;
	rc = h->conv ? 0 : GPT_EINTERNAL;
	for (int64_t i = 0; i < h->n_table && !rc; i++)
		rc = find_src(h, i, err);
	if (!rc)
		rc = check_extra(h, err);
	if (!rc)
		rc = check_head(h, err);
	return rc;
}

/* Frees what hf_open made but the weights. */
static void hf_free_tables(hf_src *h)
{
	free(h->src);
	free(h->file);
	free(h->conv);
	free(h->table);
	h->src = NULL, h->file = NULL, h->conv = NULL, h->table = NULL;
}

int gpt_hf_open(const char *hf_dir, gpt_model_shape *shape, gpt_hf_weights *w, const char **prefix,
		gpt_err *err)
{
	hf_src h;
	int rc = hf_open(&h, hf_dir, err);
	hf_free_tables(&h);
	if (rc) {
		gpt_hf_weights_close(&h.w);
		return rc;
	}
	*shape = h.shape;
	*w = h.w;
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
	const gpt_hf_weights *w = &c->h->w;
	if (!rc && c->progress && w->index)
		fprintf(c->progress, "gpt-ckpt-merge: converting %lld tensors of the %d shards %s lists\n",
			(long long)c->h->n_table, w->n, w->index);
	else if (!rc && c->progress)
		fprintf(c->progress, "gpt-ckpt-merge: converting %lld tensors of %s%s\n", (long long)c->h->n_table,
			w->files[0].path,
			c->h->index_ignored ? " (model.safetensors.index.json beside it and its shards left "
					      "unread: the one file comes first, as in transformers' from_pretrained)"
					    : "");
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
	gpt_hf_weights_close(&h.w);
	return rc;
}
