/* Checkpoint directories: write under a temporary name, verify on open. */
#include "ckpt/ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CKPT_FORMAT "gptkit-checkpoint"
#define CKPT_VERSION 1

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

/* ---- save ---- */

/* Checks that the pieces of each tensor lie inside it, do not overlap and
 * add up to all of it: together that is an exact tiling. */
static int check_tiling(const char *where, const char *name, int ndim, const int64_t *shape,
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

static json_t *int_array(int n, const int64_t *v)
{
	json_t *a = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(a, json_integer(v[i]));
	return a;
}

static int add_file_entry(json_t *files, const char *dir, const char *name, gpt_err *err)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	struct stat st;
	if (stat(path, &st) != 0)
		return gpt_err_errno(err, GPT_EIO, errno, "%s", path);
	uint64_t h;
	int rc = gpt_xxh3_file(path, &h, err);
	if (rc)
		return rc;
	char hex[17];
	gpt_xxh3_hex(h, hex);
	json_object_set_new(files, name, json_pack("{s:I, s:s}", "size", (json_int_t)st.st_size,
						   "xxh3", hex));
	return 0;
}

/* Removes a directory we created and the plain files in it. */
static void remove_tree(const char *dir)
{
	DIR *d = opendir(dir);
	if (d) {
		struct dirent *e;
		char p[4096];
		while ((e = readdir(d))) {
			if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
				continue;
			snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
			unlink(p);
		}
		closedir(d);
	}
	rmdir(dir);
}

static int write_pieces(const char *tmp, const gpt_ckpt_piece *pieces, int n, json_t *tensors,
			gpt_err *err)
{
	const char *file = "rank-00000.safetensors";
	gpt_st_entry *e = gpt_calloc((size_t)(n ? n : 1), sizeof *e, "entries", err);
	char (*keys)[256] = gpt_calloc((size_t)(n ? n : 1), 256, "keys", err);
	int rc = e && keys ? 0 : GPT_EINTERNAL;
	for (int i = 0; i < n && !rc; i++) {
		const gpt_ckpt_piece *p = &pieces[i];
		json_t *t = json_object_get(tensors, p->tensor);
		if (!t) {
			t = json_pack("{s:s, s:o, s:[]}", "dtype", gpt_st_dtype_name(p->dtype), "shape",
				      int_array(p->ndim, p->shape), "pieces");
			json_object_set_new(tensors, p->tensor, t);
		}
		size_t k = json_array_size(json_object_get(t, "pieces"));
		if (k == 0)
			snprintf(keys[i], 256, "%s", p->tensor);
		else
			snprintf(keys[i], 256, "%s#%zu", p->tensor, k);
		json_array_append_new(json_object_get(t, "pieces"),
				      json_pack("{s:s, s:s, s:o, s:o}", "file", file, "key", keys[i],
						"offset", int_array(p->box.ndim, p->box.off), "shape",
						int_array(p->box.ndim, p->box.len)));
		e[i] = (gpt_st_entry){.name = keys[i], .dtype = p->dtype, .ndim = p->box.ndim,
				      .data = p->data};
		memcpy(e[i].shape, p->box.len, sizeof e[i].shape);
	}
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", tmp, file);
	if (!rc)
		rc = gpt_st_write(path, e, n, NULL, 0, NULL, NULL, err);
	free(e);
	free(keys);
	return rc;
}

static int check_pieces(const gpt_ckpt_piece *pieces, int n, gpt_err *err)
{
	/* Group by tensor name; n is small (hundreds), so quadratic is fine. */
	gpt_box *boxes = gpt_calloc((size_t)(n ? n : 1), sizeof *boxes, "boxes", err);
	char *seen = gpt_calloc((size_t)(n ? n : 1), 1, "seen", err);
	int rc = boxes && seen ? 0 : GPT_EINTERNAL;
	for (int i = 0; i < n && !rc; i++) {
		if (seen[i])
			continue;
		int m = 0;
		for (int j = i; j < n; j++) {
			if (strcmp(pieces[j].tensor, pieces[i].tensor) != 0)
				continue;
			if (pieces[j].ndim != pieces[i].ndim || pieces[j].dtype != pieces[i].dtype ||
			    memcmp(pieces[j].shape, pieces[i].shape, sizeof pieces[i].shape) != 0 ||
			    pieces[j].box.ndim != pieces[i].ndim)
				rc = gpt_err_set(err, GPT_EINTERNAL,
						 "checkpoint: pieces of '%s' disagree on dtype or shape",
						 pieces[i].tensor);
			seen[j] = 1;
			boxes[m++] = pieces[j].box;
		}
		if (!rc)
			rc = check_tiling("checkpoint", pieces[i].tensor, pieces[i].ndim,
					  pieces[i].shape, boxes, m, err);
	}
	free(boxes);
	free(seen);
	return rc;
}

/* 1 when `latest` is absent or names a step before `step`: then a complete
 * step directory is the remains of a save killed between its rename and the
 * update of `latest`. No resume took it (they follow `latest`), and the run
 * that resumed from the older checkpoint recomputes the same step, so it may
 * be replaced; refusing would make every restart fail the same way. */
static int unpublished(const char *output_dir, int64_t step)
{
	char p[4096], dir[4096];
	snprintf(p, sizeof p, "%s/latest", output_dir);
	if (!gpt_path_exists(p))
		return 1;
	gpt_err e2 = {0};
	int64_t at;
	if (gpt_ckpt_latest(output_dir, dir, sizeof dir, &e2))
		return 0;
	const char *b = strrchr(dir, '/');
	return gpt_parse_i64(b + 1 + 5, &at) == 0 && at < step;
}

int gpt_ckpt_save(const char *output_dir, int64_t step, const gpt_ckpt_piece *pieces, int n,
		  const char *state_json, const char *config_yaml, char *path, size_t path_size,
		  int64_t *bytes, gpt_err *err)
{
	int rc = check_pieces(pieces, n, err);
	if (rc)
		return rc;
	char final[4096], tmp[4096], p[4096];
	snprintf(final, sizeof final, "%s/step_%08lld", output_dir, (long long)step);
	snprintf(tmp, sizeof tmp, "%s/.step_%08lld.tmp.%ld", output_dir, (long long)step, (long)getpid());
	snprintf(p, sizeof p, "%s/index.json", final);
	char orphan[4096] = "";
	if (gpt_path_exists(p)) {
		if (!unpublished(output_dir, step))
			return gpt_err_set(err, GPT_EIO, "%s: a complete checkpoint already exists; not overwriting it",
					   final);
		/* Set aside until the new one is in place and named. */
		snprintf(orphan, sizeof orphan, "%s/.step_%08lld.orphan.%ld", output_dir, (long long)step,
			 (long)getpid());
		remove_tree(orphan);
		if (rename(final, orphan) != 0)
			return gpt_err_errno(err, GPT_EIO, errno, "%s: move the unfinished save aside", final);
	}
	if ((rc = gpt_mkdir_p(output_dir, err)))
		return rc;
	remove_tree(tmp); /* a leftover of an earlier run of this very process id */
	if (mkdir(tmp, 0777) != 0)
		return gpt_err_errno(err, GPT_EIO, errno, "%s: create directory", tmp);

	json_t *index = json_pack("{s:s, s:i, s:I, s:{}, s:{}}", "format", CKPT_FORMAT, "version",
				  CKPT_VERSION, "step", (json_int_t)step, "files", "tensors");
	json_t *files = json_object_get(index, "files"), *tensors = json_object_get(index, "tensors");
	rc = write_pieces(tmp, pieces, n, tensors, err);
	snprintf(p, sizeof p, "%s/state.json", tmp);
	if (!rc)
		rc = gpt_file_write_atomic(p, state_json, strlen(state_json), err);
	snprintf(p, sizeof p, "%s/config.yaml", tmp);
	if (!rc)
		rc = gpt_file_write_atomic(p, config_yaml, strlen(config_yaml), err);
	const char *names[] = {"rank-00000.safetensors", "state.json", "config.yaml"};
	for (int i = 0; i < 3 && !rc; i++)
		rc = add_file_entry(files, tmp, names[i], err);
	int64_t total = 0;
	const char *fname;
	json_t *fv;
	json_object_foreach(files, fname, fv) total += json_integer_value(json_object_get(fv, "size"));
	char *text = rc ? NULL : json_dumps(index, JSON_INDENT(1));
	json_decref(index);
	snprintf(p, sizeof p, "%s/index.json", tmp);
	if (!rc && !text)
		rc = gpt_err_set(err, GPT_EINTERNAL, "checkpoint: cannot build index.json");
	/* index.json last: a directory without it is never taken for complete. */
	if (!rc)
		rc = gpt_file_write_atomic(p, text, strlen(text), err);
	if (text)
		total += (int64_t)strlen(text);
	free(text);
	if (!rc)
		rc = gpt_fsync_dir(tmp, err);
	if (!rc && rename(tmp, final) != 0)
		rc = gpt_err_errno(err, GPT_EIO, errno, "%s: rename into place", final);
	if (!rc)
		rc = gpt_fsync_dir(output_dir, err);
	if (rc) {
		remove_tree(tmp);
		return rc;
	}
	char latest[4096], name[64];
	snprintf(latest, sizeof latest, "%s/latest", output_dir);
	int nl = snprintf(name, sizeof name, "step_%08lld\n", (long long)step);
	rc = gpt_file_write_atomic(latest, name, (size_t)nl, err);
	if (!rc && orphan[0])
		remove_tree(orphan);
	if (!rc && path)
		snprintf(path, path_size, "%s", final);
	if (!rc && bytes)
		*bytes = total;
	return rc;
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

static int json_shape(json_t *a, int *ndim, int64_t *shape)
{
	if (!json_is_array(a) || json_array_size(a) > GPT_MAX_DIMS)
		return -1;
	*ndim = (int)json_array_size(a);
	for (int i = 0; i < *ndim; i++) {
		json_t *v = json_array_get(a, (size_t)i);
		if (!json_is_integer(v) || json_integer_value(v) < 0)
			return -1;
		shape[i] = json_integer_value(v);
	}
	return 0;
}

static int verify_files(gpt_ckpt *ck, json_t *files, gpt_err *err)
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
		if (stat(p, &st) != 0)
			return gpt_err_errno_read(err, errno, "%s: checkpoint file listed in index.json", p);
		if ((json_int_t)st.st_size != json_integer_value(sz))
			return gpt_err_set(err, GPT_EDATA, "%s: size %lld, index.json says %lld (truncated or replaced)",
					   p, (long long)st.st_size, (long long)json_integer_value(sz));
		uint64_t h;
		int rc = gpt_xxh3_file(p, &h, err);
		if (rc)
			return rc;
		char hex[17];
		gpt_xxh3_hex(h, hex);
		if (strcmp(hex, json_string_value(hx)) != 0)
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
		rc = check_tiling(idx, name, t->ndim, t->shape, boxes, (int)np, err);
	free(boxes);
	return rc;
}

static int read_text(const char *dir, const char *name, char **out, gpt_err *err)
{
	char p[4096];
	snprintf(p, sizeof p, "%s/%s", dir, name);
	return gpt_file_read_all(p, 64u << 20, out, NULL, err);
}

int gpt_ckpt_open(gpt_ckpt **out, const char *path, gpt_err *err)
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
			return gpt_err_set(err, GPT_EDATA, "%s: not a complete checkpoint: no index.json (and no 'latest' file)",
					   path);
		}
		if ((rc = gpt_ckpt_latest(path, dir, sizeof dir, err)))
			return rc;
		snprintf(idx, sizeof idx, "%s/index.json", dir);
		if (!gpt_path_exists(idx))
			return gpt_err_set(err, GPT_EDATA, "%s: 'latest' names %s, which is not a complete checkpoint (no index.json); refusing to resume from it",
					   path, dir);
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
	else if (!json_is_string(fmt) || strcmp(json_string_value(fmt), CKPT_FORMAT) != 0)
		rc = gpt_err_set(err, GPT_EDATA, "%s: not a gptkit checkpoint index (format is not '%s')", idx,
				 CKPT_FORMAT);
	else if (!json_is_integer(ver) || json_integer_value(ver) != CKPT_VERSION)
		rc = gpt_err_set(err, GPT_EDATA, "%s: checkpoint format version %lld; this gptkit reads version %d; use a newer gptkit",
				 idx, (long long)json_integer_value(ver), CKPT_VERSION);
	else if (!json_is_object(files) || !json_is_object(tensors) ||
		 !json_is_integer(json_object_get(index, "step")))
		rc = gpt_err_set(err, GPT_EDATA, "%s: lacks step, files or tensors", idx);
	if (!rc) {
		ck->step = json_integer_value(json_object_get(index, "step"));
		rc = verify_files(ck, files, err);
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
