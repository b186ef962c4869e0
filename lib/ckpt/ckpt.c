/* Checkpoint directories: open, verify, read boxes (save.c writes them). */
#include "ckpt/ckpt-impl.h"
#include "ckpt/export.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


typedef struct ckpt_piece {
	int file;     /* index into files */
	const gpt_st_tensor *st;
	gpt_box box;
} ckpt_piece;

typedef struct ckpt_tensor {
	char *name;
	gpt_dtype dtype;
	int ndim;
	int64_t shape[GPT_MAX_DIMS];
	ckpt_piece *pieces;
	int n_pieces;
} ckpt_tensor;

struct gpt_ckpt {
	char *path;
	int64_t step;
	char *state_json;
	char *config_yaml;
	gpt_st_file *files;
	char **file_names;
	int n_files;
	ckpt_tensor *tensors;
	int n_tensors;
};

/* Checks that the pieces of each tensor lie inside it, do not overlap and
 * add up to all of it: together that is an exact tiling. */
int gpt_ckpt_check_tiling(const char *where, const char *name, int ndim, const int64_t *shape,
			  const gpt_box *boxes, int n, gpt_err *err)
{
	gpt_box full = gpt_box_full(ndim, shape), ov;
	int64_t sum = 0;
	for (int i = 0; i < n; i++) {
		if (!gpt_box_contains(&full, &boxes[i]))
			return gpt_err_set(err, GPT_EDATA, "%s: tensor '%s': piece %d lies outside the tensor",
					   where, name, i);
		for (int j = 0; j < i; j++)
			if (gpt_box_intersect(&boxes[i], &boxes[j], &ov))
				return gpt_err_set(err, GPT_EDATA,
						   "%s: tensor '%s': pieces %d and %d overlap", where,
						   name, j, i);
		sum += gpt_box_numel(&boxes[i]);
	}
	if (sum != gpt_box_numel(&full))
		return gpt_err_set(err, GPT_EDATA,
				   "%s: tensor '%s': the pieces cover %lld of %lld elements", where, name,
				   (long long)sum, (long long)gpt_box_numel(&full));
	return 0;
}

/* ---- open ---- */

int gpt_ckpt_latest(const char *output_dir, char *path, size_t size, gpt_err *err)
{
	char p[4096];
	snprintf(p, sizeof p, "%s/latest", output_dir);
	char *text = NULL;
	int rc = gpt_file_read_all(p, 4096, &text, NULL, err);
	if (rc)
		return rc;
	size_t n = strcspn(text, "\r\n");
	text[n] = '\0';
	if (n == 0 || strchr(text, '/') || strncmp(text, "step_", 5) != 0) {
		rc = gpt_err_set(err, GPT_EDATA, "%s: expected a step directory name like step_00000100, found '%.64s'",
				 p, text);
		free(text);
		return rc;
	}
	snprintf(path, size, "%s/%s", output_dir, text);
	free(text);
	return 0;
}

/* Sizes and offsets are bounded as the safetensors reader bounds shapes
 * (each at most 2^40, their product at most 2^48, zeros counted as ones),
 * so that no box arithmetic on them overflows. */
static int json_shape(json_t *a, int *ndim, int64_t *shape)
{
	const int64_t max_numel = (int64_t)1 << 48;
	if (!json_is_array(a) || json_array_size(a) > GPT_MAX_DIMS)
		return -1;
	*ndim = (int)json_array_size(a);
	int64_t n = 1;
	for (int i = 0; i < *ndim; i++) {
		json_t *v = json_array_get(a, (size_t)i);
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) > ((json_int_t)1 << 40))
			return -1;
		shape[i] = json_integer_value(v);
		if (shape[i] > 1 && n > max_numel / shape[i])
			return -1;
		n *= shape[i] ? shape[i] : 1;
	}
	return 0;
}

static int verify_files(gpt_ckpt *ck, json_t *files, int checksums, gpt_err *err)
{
	const char *name;
	json_t *v;
	ck->file_names = gpt_calloc(json_object_size(files) + 1, sizeof(char *), "file names", err);
	ck->files = gpt_calloc(json_object_size(files) + 1, sizeof(gpt_st_file), "files", err);
	if (!ck->file_names || !ck->files)
		return GPT_EINTERNAL;
	json_object_foreach(files, name, v)
	{
		char p[4096];
		snprintf(p, sizeof p, "%s/%s", ck->path, name);
		json_t *sz = json_object_get(v, "size"), *hx = json_object_get(v, "xxh3");
		if (strchr(name, '/') || !json_is_integer(sz) || !json_is_string(hx))
			return gpt_err_set(err, GPT_EDATA, "%s/index.json: bad entry for file '%s'", ck->path, name);
		struct stat st;
		if (stat(p, &st) != 0) /* a file the index lists is missing: an incomplete checkpoint */
			return gpt_err_errno(err, errno == ENOENT ? GPT_EDATA : GPT_EIO, errno,
					     "%s: checkpoint file listed in index.json", p);
		if ((json_int_t)st.st_size != json_integer_value(sz))
			return gpt_err_set(err, GPT_EDATA, "%s: size %lld, index.json says %lld (truncated or replaced)",
					   p, (long long)st.st_size, (long long)json_integer_value(sz));
		uint64_t h = 0;
		int rc = checksums ? gpt_xxh3_file(p, &h, err) : 0;
		if (rc)
			return rc;
		char hex[17];
		gpt_xxh3_hex(h, hex);
		if (checksums && strcmp(hex, json_string_value(hx)) != 0)
			return gpt_err_set(err, GPT_EDATA, "%s: checksum %s, index.json says %s (the file is corrupted)",
					   p, hex, json_string_value(hx));
		size_t nl = strlen(name);
		if (nl > 12 && strcmp(name + nl - 12, ".safetensors") == 0) {
			if ((rc = gpt_st_open(&ck->files[ck->n_files], p, err)))
				return rc;
			if (!(ck->file_names[ck->n_files] = strdup(name)))
				return gpt_err_nomem(err, nl, "name");
			ck->n_files++;
		}
	}
	return 0;
}

static int load_tensor(gpt_ckpt *ck, const char *name, json_t *v, gpt_err *err)
{
	ckpt_tensor *t = &ck->tensors[ck->n_tensors];
	const char *where = ck->path;
	json_t *dt = json_object_get(v, "dtype"), *pieces = json_object_get(v, "pieces");
	if (!json_is_string(dt) || gpt_st_dtype_parse(json_string_value(dt), &t->dtype) ||
	    json_shape(json_object_get(v, "shape"), &t->ndim, t->shape) || !json_is_array(pieces))
		return gpt_err_set(err, GPT_EDATA, "%s/index.json: tensor '%s' lacks a valid dtype, shape or pieces",
				   where, name);
	if (!(t->name = strdup(name)))
		return gpt_err_nomem(err, strlen(name), "name");
	ck->n_tensors++;
	size_t np = json_array_size(pieces);
	t->pieces = gpt_calloc(np ? np : 1, sizeof *t->pieces, "pieces", err);
	gpt_box *boxes = gpt_calloc(np ? np : 1, sizeof *boxes, "boxes", err);
	if (!t->pieces || !boxes) {
		free(boxes);
		return GPT_EINTERNAL;
	}
	int rc = 0;
	for (size_t i = 0; i < np && !rc; i++) {
		json_t *pc = json_array_get(pieces, i);
		json_t *file = json_object_get(pc, "file"), *key = json_object_get(pc, "key");
		ckpt_piece *p = &t->pieces[i];
		int on = 0, ln = 0;
		int64_t shp[GPT_MAX_DIMS];
		if (!json_is_string(file) || !json_is_string(key) ||
		    json_shape(json_object_get(pc, "offset"), &on, p->box.off) ||
		    json_shape(json_object_get(pc, "shape"), &ln, p->box.len) || on != t->ndim ||
		    ln != t->ndim) {
			rc = gpt_err_set(err, GPT_EDATA, "%s/index.json: tensor '%s': piece %zu is malformed",
					 where, name, i);
			break;
		}
		p->box.ndim = t->ndim;
		p->file = -1;
		for (int f = 0; f < ck->n_files; f++)
			if (strcmp(ck->file_names[f], json_string_value(file)) == 0)
				p->file = f;
		if (p->file < 0) {
			rc = gpt_err_set(err, GPT_EDATA, "%s/index.json: tensor '%s' refers to '%s', which is not a listed file",
					 where, name, json_string_value(file));
			break;
		}
		p->st = gpt_st_find(&ck->files[p->file], json_string_value(key));
		memcpy(shp, p->box.len, sizeof shp);
		if (!p->st || p->st->dtype != t->dtype || p->st->ndim != t->ndim ||
		    memcmp(p->st->shape, shp, sizeof(int64_t) * (size_t)t->ndim) != 0) {
			rc = gpt_err_set(err, GPT_EDATA, "%s/%s: tensor '%s' (piece of '%s') is missing or has another dtype or shape than index.json says",
					 where, json_string_value(file), json_string_value(key), name);
			break;
		}
		boxes[i] = p->box;
		t->n_pieces++;
	}
	char idx[4096];
	snprintf(idx, sizeof idx, "%s/index.json", where);
	if (!rc)
		rc = gpt_ckpt_check_tiling(idx, name, t->ndim, t->shape, boxes, (int)np, err);
	free(boxes);
	return rc;
}

static int read_text(const char *dir, const char *name, char **out, gpt_err *err)
{
	char p[4096];
	snprintf(p, sizeof p, "%s/%s", dir, name);
	return gpt_file_read_all(p, 64u << 20, out, NULL, err);
}

static int has_file(const char *dir, const char *name)
{
	char p[4096];
	snprintf(p, sizeof p, "%s/%s", dir, name);
	return gpt_path_exists(p);
}

const char *gpt_ckpt_foreign(const char *path)
{
	struct stat st;
	if (stat(path, &st) != 0)
		return NULL;
	if (S_ISREG(st.st_mode)) {
		unsigned char h[4] = {0};
		FILE *fp = fopen(path, "rb");
		size_t n = fp ? fread(h, 1, sizeof h, fp) : 0;
		if (fp)
			fclose(fp);
		uint32_t magic = (uint32_t)h[0] | (uint32_t)h[1] << 8 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 24;
		if (n == 4 && magic == 20240326) /* llm.c's gpt2_124M.bin, model_NNNNNNNN.bin */
			return "an llm.c model file, which gptkit does not read; llm.c's train_gpt2.py writes "
			       "gpt2_124M.bin from Hugging Face's gpt2, a directory that gpt-infer -m reads and "
			       "gpt-ckpt-merge --from-hf makes a checkpoint of";
		return NULL;
	}
	if (!S_ISDIR(st.st_mode))
		return NULL;
	/* FleetX's checkpoints (mp_00_sharding_00_pp_00/) */
	if (has_file(path, "model.pdparams"))
		return "a PaddlePaddle checkpoint (model.pdparams), which gptkit does not read";
	/* Megatron-LM's --save directory, an iter_NNNNNNN of it (mp_rank_00/
	 * model_optim_rng.pt, or torch_dist's common.pt and .metadata) */
	if (has_file(path, "latest_checkpointed_iteration.txt") || has_file(path, "mp_rank_00") ||
	    has_file(path, "mp_rank_00_000") || has_file(path, "common.pt"))
		return "a Megatron-LM checkpoint, which gptkit does not read";
	return NULL;
}

/* What gptkit's other programs write, named where a checkpoint is
 * expected: a Hugging Face GPT-2 directory (gpt-export --format hf,
 * gpt-ckpt-merge --to-hf, or downloaded) or an inference bundle, packed or
 * unpacked (gpt-export). Neither holds a training state; the error says
 * what reads it and what to give instead. 0 for anything else. */
static int own_other_kind(const char *path, gpt_err *err)
{
	struct stat st;
	if (stat(path, &st) != 0)
		return 0;
	if (S_ISDIR(st.st_mode) && has_file(path, "config.json"))
		return gpt_err_set(err, GPT_EDATA,
				   "%s: a Hugging Face GPT-2 directory, not a gptkit checkpoint; "
				   "gpt-ckpt-merge --from-hf %s OUT converts it into one, to name here instead "
				   "(gpt-infer -m reads the directory as it is)", path, path);
	if ((S_ISDIR(st.st_mode) && has_file(path, "manifest.json")) ||
	    (S_ISREG(st.st_mode) && gpt_export_bundle_filter(path) >= 0))
		return gpt_err_set(err, GPT_EDATA,
				   "%s: an inference bundle (gpt-export's), the weights alone for gpt-infer -m, "
				   "not a checkpoint; give the checkpoint it was exported from", path);
	/* what gpt-export -o Engine.save_load.output_dir=DIR (FleetX's form) makes */
	if (S_ISDIR(st.st_mode) && has_file(path, GPT_EXPORT_BUNDLE_NAME))
		return gpt_err_set(err, GPT_EDATA,
				   "%s: no checkpoint, only an inference bundle (%s/%s, gpt-export's), which "
				   "gpt-infer -m reads (or -o Inference.model_dir=%s); training and exports want "
				   "the checkpoint it was exported from", path, path, GPT_EXPORT_BUNDLE_NAME, path);
	return 0;
}

int gpt_ckpt_open(gpt_ckpt **out, const char *path, gpt_err *err)
{
	return gpt_ckpt_open_opts(out, path, 1, err);
}

int gpt_ckpt_open_opts(gpt_ckpt **out, const char *path, int checksums, gpt_err *err)
{
	*out = NULL;
	char dir[4096], idx[4096];
	snprintf(idx, sizeof idx, "%s/index.json", path);
	int rc = 0;
	if (gpt_path_exists(idx)) {
		snprintf(dir, sizeof dir, "%s", path);
	} else {
		char latest[4096];
		snprintf(latest, sizeof latest, "%s/latest", path);
		if (!gpt_path_exists(latest)) {
			if (!gpt_path_exists(path))
				return gpt_err_set(err, GPT_ENOINPUT, "%s: no such checkpoint directory", path);
			const char *foreign = gpt_ckpt_foreign(path);
			if (foreign)
				return gpt_err_set(err, GPT_EDATA,
						   "%s: %s; expected a gptkit checkpoint (a step directory "
						   "with index.json, or an output directory with latest)", path, foreign);
			if ((rc = own_other_kind(path, err)))
				return rc;
			/* a consolidated .safetensors: one file */
			struct stat st;
			if (stat(path, &st) == 0 && !S_ISDIR(st.st_mode))
				return gpt_err_set(err, GPT_EDATA,
						   "%s: a file, not a checkpoint directory; expected a step directory "
						   "with index.json (as output_dir/step_00000400), or an output "
						   "directory with latest", path);
			return gpt_err_set(err, GPT_EDATA, "%s: not a complete checkpoint: no index.json (and no 'latest' file)",
					   path);
		}
		if ((rc = gpt_ckpt_latest(path, dir, sizeof dir, err)))
			return rc;
		snprintf(idx, sizeof idx, "%s/index.json", dir);
		if (!gpt_path_exists(idx))
			/* said to gpt-train resuming, gpt-export, gpt-infer and gpt-ckpt-merge alike */
			return gpt_err_set(err, GPT_EDATA, "%s: 'latest' names %s, which is not a complete checkpoint (no index.json); refusing to read it: name a complete step directory of %s instead",
					   path, dir, path);
	}
	gpt_ckpt *ck = gpt_calloc(1, sizeof *ck, "checkpoint", err);
	if (!ck || !(ck->path = strdup(dir))) {
		free(ck);
		return GPT_EINTERNAL;
	}
	json_error_t je;
	json_t *index = json_load_file(idx, JSON_REJECT_DUPLICATES, &je);
	json_t *fmt = json_object_get(index, "format"), *ver = json_object_get(index, "version");
	json_t *files = json_object_get(index, "files"), *tensors = json_object_get(index, "tensors");
	if (!index)
		rc = gpt_err_set(err, GPT_EDATA, "%s:%d: bad JSON: %s", idx, je.line, je.text);
	else if (!json_is_string(fmt) || strcmp(json_string_value(fmt), GPT_CKPT_FORMAT) != 0)
		rc = gpt_err_set(err, GPT_EDATA, "%s: not a gptkit checkpoint index (format is not '%s')", idx,
				 GPT_CKPT_FORMAT);
	else if (!json_is_integer(ver) || json_integer_value(ver) != GPT_CKPT_VERSION)
		rc = gpt_err_set(err, GPT_EDATA, "%s: checkpoint format version %lld; this gptkit reads version %d; use a newer gptkit",
				 idx, (long long)json_integer_value(ver), GPT_CKPT_VERSION);
	else if (!json_is_object(files) || !json_is_object(tensors) ||
		 !json_is_integer(json_object_get(index, "step")))
		rc = gpt_err_set(err, GPT_EDATA, "%s: lacks step, files or tensors", idx);
	if (!rc) {
		ck->step = json_integer_value(json_object_get(index, "step"));
		rc = verify_files(ck, files, checksums, err);
	}
	if (!rc)
		rc = read_text(dir, "state.json", &ck->state_json, err);
	if (!rc)
		rc = read_text(dir, "config.yaml", &ck->config_yaml, err);
	if (!rc) {
		ck->tensors = gpt_calloc(json_object_size(tensors) + 1, sizeof *ck->tensors, "tensors", err);
		rc = ck->tensors ? 0 : GPT_EINTERNAL;
	}
	const char *name;
	json_t *v;
	json_object_foreach(tensors, name, v)
	{
		if (rc)
			break;
		rc = load_tensor(ck, name, v, err);
	}
	json_decref(index);
	if (rc) {
		gpt_ckpt_close(ck);
		return rc;
	}
	*out = ck;
	return 0;
}

const char *gpt_ckpt_path(const gpt_ckpt *ck) { return ck->path; }
int64_t gpt_ckpt_step(const gpt_ckpt *ck) { return ck->step; }
const char *gpt_ckpt_state_json(const gpt_ckpt *ck) { return ck->state_json; }
const char *gpt_ckpt_config_yaml(const gpt_ckpt *ck) { return ck->config_yaml; }
int gpt_ckpt_tensor_count(const gpt_ckpt *ck) { return ck->n_tensors; }

int gpt_ckpt_tensor_info(const gpt_ckpt *ck, int i, const char **name, gpt_dtype *dtype, int *ndim,
			 const int64_t **shape)
{
	if (i < 0 || i >= ck->n_tensors)
		return -1;
	*name = ck->tensors[i].name;
	*dtype = ck->tensors[i].dtype;
	*ndim = ck->tensors[i].ndim;
	*shape = ck->tensors[i].shape;
	return 0;
}

static const ckpt_tensor *find_tensor(const gpt_ckpt *ck, const char *name)
{
	for (int i = 0; i < ck->n_tensors; i++)
		if (strcmp(ck->tensors[i].name, name) == 0)
			return &ck->tensors[i];
	return NULL;
}

int gpt_ckpt_has_tensor(const gpt_ckpt *ck, const char *name)
{
	return find_tensor(ck, name) != NULL;
}

static void shape_str(int ndim, const int64_t *s, char *out, size_t size)
{
	int n = snprintf(out, size, "[");
	for (int i = 0; i < ndim && n > 0 && (size_t)n < size; i++)
		n += snprintf(out + n, size - (size_t)n, "%s%lld", i ? ", " : "", (long long)s[i]);
	if (n > 0 && (size_t)n < size)
		snprintf(out + n, size - (size_t)n, "]");
}

int gpt_ckpt_read_box(const gpt_ckpt *ck, const char *name, gpt_dtype dtype, int ndim,
		      const int64_t *want_shape, const gpt_box *box, void *dst, gpt_err *err)
{
	const ckpt_tensor *t = find_tensor(ck, name);
	if (!t)
		return gpt_err_set(err, GPT_EDATA, "%s: checkpoint has no tensor '%s'", ck->path, name);
	if (want_shape && (ndim != t->ndim || memcmp(want_shape, t->shape, sizeof(int64_t) * (size_t)ndim))) {
		char a[128], b[128];
		shape_str(t->ndim, t->shape, a, sizeof a);
		shape_str(ndim, want_shape, b, sizeof b);
		return gpt_err_set(err, GPT_EDATA, "%s: tensor '%s' has shape %s in the checkpoint but %s in the model; the model configuration differs from the one saved",
				   ck->path, name, a, b);
	}
	gpt_box full = gpt_box_full(t->ndim, t->shape);
	if (box->ndim != t->ndim || !gpt_box_contains(&full, box))
		return gpt_err_set(err, GPT_EINTERNAL, "%s: tensor '%s': requested box lies outside the tensor",
				   ck->path, name);
	size_t es = gpt_dtype_size(t->dtype), ds = gpt_dtype_size(dtype);
	for (int i = 0; i < t->n_pieces; i++) {
		const ckpt_piece *p = &t->pieces[i];
		gpt_box r;
		if (!gpt_box_intersect(&p->box, box, &r))
			continue;
		const void *src = gpt_st_data(&ck->files[p->file], p->st);
		if (dtype == t->dtype) {
			gpt_box_copy(dst, box, src, &p->box, &r, es);
			continue;
		}
		/* Gather the overlap densely, convert it, then place it. */
		size_t n = (size_t)gpt_box_numel(&r);
		void *a = gpt_malloc(n * es, "conversion buffer", err);
		void *b = a ? gpt_malloc(n * ds, "conversion buffer", err) : NULL;
		int rc = b ? 0 : GPT_EINTERNAL;
		if (!rc) {
			gpt_box_copy(a, &r, src, &p->box, &r, es);
			rc = gpt_convert(b, dtype, a, t->dtype, n, err);
		}
		if (!rc)
			gpt_box_copy(dst, box, b, &r, &r, ds);
		free(a);
		free(b);
		if (rc)
			return gpt_err_prefix(err, "%s: tensor '%s'", ck->path, name);
	}
	return 0;
}

void gpt_ckpt_close(gpt_ckpt *ck)
{
	if (!ck)
		return;
	for (int i = 0; i < ck->n_files; i++) {
		gpt_st_close(&ck->files[i]);
		free(ck->file_names[i]);
	}
	free(ck->files);
	free(ck->file_names);
	for (int i = 0; i < ck->n_tensors; i++) {
		free(ck->tensors[i].name);
		free(ck->tensors[i].pieces);
	}
	free(ck->tensors);
	free(ck->state_json);
	free(ck->config_yaml);
	free(ck->path);
	free(ck);
}
