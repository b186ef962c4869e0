/* Saving checkpoints from many ranks: a staging directory, one part per
 * rank, and a publication that checks the whole before renaming it into
 * place. (Part of lib/ckpt; see gpt_ckpt_prepare in ckpt.h.) */
#include "ckpt/ckpt-impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

void gpt_ckpt_stage_dir(const char *output_dir, int64_t step, char *stage_dir, size_t size)
{
	snprintf(stage_dir, size, "%s/.step_%08lld.tmp", output_dir, (long long)step);
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
	gpt_temp_drop(dir);
}

void gpt_ckpt_discard(const char *output_dir, int64_t step)
{
	char tmp[4096];
	gpt_ckpt_stage_dir(output_dir, step, tmp, sizeof tmp);
	remove_tree(tmp);
}

void gpt_ckpt_discard_unpublished(const char *output_dir, int64_t step)
{
	gpt_ckpt_discard(output_dir, step);
	if (!gpt_ckpt_unpublished(output_dir, step))
		return;
	char p[4096];
	snprintf(p, sizeof p, "%s/step_%08lld/index.json", output_dir, (long long)step);
	unlink(p); /* first: a half-removed directory is never taken for complete */
	snprintf(p, sizeof p, "%s/step_%08lld", output_dir, (long long)step);
	remove_tree(p);
}

#define DIGITS "0123456789"

/* name past the prefix pre, or NULL */
static const char *past(const char *name, const char *pre)
{
	size_t n = strlen(pre);
	return strncmp(name, pre, n) == 0 ? name + n : NULL;
}

/* ".latest.tmp.PID.N", as gpt_afile_open names the temporaries of `latest`. */
static int is_latest_temp(const char *name)
{
	const char *p = past(name, ".latest.tmp.");
	size_t pid = p ? strspn(p, DIGITS) : 0;
	if (pid == 0 || p[pid] != '.')
		return 0;
	p += pid + 1;
	size_t n = strspn(p, DIGITS);
	return n > 0 && p[n] == '\0';
}

/* ".step_NNNNNNNN.tmp" (gpt_ckpt_stage_dir) or ".step_NNNNNNNN.unpublished"
 * (gpt_ckpt_prepare's checkpoint set aside): a save's directories. */
static int is_save_dir(const char *name)
{
	const char *p = past(name, ".step_");
	size_t n = p ? strspn(p, DIGITS) : 0;
	return n >= 8 && (strcmp(p + n, ".tmp") == 0 || strcmp(p + n, ".unpublished") == 0);
}

int gpt_ckpt_lock(const char *what, const char *output_dir, int *fd, gpt_err *err)
{
	const char *sp = what ? " " : "";
	what = what ? what : "";
	*fd = open(output_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (*fd < 0)
		return gpt_err_errno(err, GPT_EIO, errno, "%s%s%s", what, sp, output_dir);
	if (flock(*fd, LOCK_EX | LOCK_NB) == 0)
		return 0;
	int e = errno;
	close(*fd);
	*fd = -1;
	if (e != EWOULDBLOCK)
		return gpt_err_errno(err, GPT_EIO, e, "%s%s%s: lock", what, sp, output_dir);
	return gpt_err_set(err, GPT_EUSAGE,
			   "%s%s%s: another run is training into it or gpt-ckpt-merge is writing into it; wait for it to end or name another directory",
			   what, sp, output_dir);
}

void gpt_ckpt_remove_leftovers(const char *output_dir, int *files, int *dirs)
{
	*files = *dirs = 0;
	DIR *d = opendir(output_dir);
	if (!d)
		return;
	struct dirent *e;
	char p[4096];
	while ((e = readdir(d))) {
		snprintf(p, sizeof p, "%s/%s", output_dir, e->d_name);
		/* one left (no permission) costs nothing but its space */
		if (is_latest_temp(e->d_name)) {
			*files += unlink(p) == 0;
		} else if (is_save_dir(e->d_name)) {
			remove_tree(p);
			*dirs += !gpt_path_exists(p);
		}
	}
	closedir(d);
}

int gpt_ckpt_unpublished(const char *output_dir, int64_t step)
{
	char p[4096], dir[4096];
	snprintf(p, sizeof p, "%s/step_%08lld/index.json", output_dir, (long long)step);
	if (!gpt_path_exists(p))
		return 0;
	snprintf(p, sizeof p, "%s/latest", output_dir);
	if (!gpt_path_exists(p))
		return 1;
	gpt_err e2 = {0};
	int64_t at;
	if (gpt_ckpt_latest(output_dir, dir, sizeof dir, &e2))
		return 0;
	const char *b = strrchr(dir, '/');
	return b && strncmp(b + 1, "step_", 5) == 0 && gpt_parse_i64(b + 1 + 5, &at) == 0 && at < step;
}

int gpt_ckpt_check_free(const char *output_dir, int64_t step, gpt_err *err)
{
	char p[4096];
	snprintf(p, sizeof p, "%s/step_%08lld/index.json", output_dir, (long long)step);
	if (gpt_path_exists(p)) {
		if (gpt_ckpt_unpublished(output_dir, step))
			return 0;
		return gpt_err_set(err, GPT_EIO, "%s/step_%08lld: a complete checkpoint already exists; not overwriting it; move it out of %s to save global step %lld there",
				   output_dir, (long long)step, output_dir, (long long)step);
	}
	/* not ours: a save renames a whole directory to this name, so what is
	 * there without index.json is a partial copy or removal */
	snprintf(p, sizeof p, "%s/step_%08lld", output_dir, (long long)step);
	if (gpt_path_exists(p))
		return gpt_err_set(err, GPT_EIO, "%s: exists but is not a complete checkpoint (no index.json; a save never leaves one); move it out of the way to save global step %lld there",
				   p, (long long)step);
	return 0;
}

int gpt_ckpt_prepare(const char *output_dir, int64_t step, gpt_err *err)
{
	char p[4096], tmp[4096];
	int rc = gpt_ckpt_check_free(output_dir, step, err);
	if (rc)
		return rc;
	snprintf(p, sizeof p, "%s/step_%08lld/index.json", output_dir, (long long)step);
	if (gpt_path_exists(p)) { /* unpublished */
		char final[4096], aside[4096];
		snprintf(final, sizeof final, "%s/step_%08lld", output_dir, (long long)step);
		snprintf(aside, sizeof aside, "%s/.step_%08lld.unpublished", output_dir, (long long)step);
		remove_tree(aside);
		if (rename(final, aside) != 0)
			return gpt_err_errno(err, GPT_EIO, errno, "%s: move the unpublished checkpoint aside", final);
		remove_tree(aside);
	}
	rc = gpt_mkdir_p(output_dir, err);
	if (rc)
		return rc;
	gpt_ckpt_stage_dir(output_dir, step, tmp, sizeof tmp);
	remove_tree(tmp); /* a leftover of a failed or killed attempt */
	if (mkdir(tmp, 0777) != 0)
		return gpt_err_errno(err, GPT_EIO, errno, "%s: create directory", tmp);
	gpt_temp_hold(tmp, 1);
	return 0;
}

static json_t *int_array(int n, const int64_t *v)
{
	json_t *a = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(a, json_integer(v[i]));
	return a;
}

int gpt_ckpt_write_part(const char *stage_dir, int rank, const gpt_ckpt_piece *pieces, int n,
			gpt_st_fill_fn fill, void *ctx, gpt_err *err)
{
	char file[64], path[4096];
	snprintf(file, sizeof file, "rank-%05d.safetensors", rank);
	gpt_st_entry *e = gpt_calloc((size_t)(n ? n : 1), sizeof *e, "entries", err);
	char (*keys)[96] = gpt_calloc((size_t)(n ? n : 1), 96, "keys", err);
	json_t *part = json_pack("{s:i, s:[]}", "rank", rank, "pieces");
	json_t *list = json_object_get(part, "pieces");
	int rc = e && keys && part ? 0 : gpt_err_nomem(err, 0, "checkpoint part");
	for (int i = 0; i < n && !rc; i++) {
		const gpt_ckpt_piece *p = &pieces[i];
		/* keys are unique within the file: a tensor's later pieces get #k */
		int k = 0;
		for (int j = 0; j < i; j++)
			k += strcmp(pieces[j].tensor, p->tensor) == 0;
		if (k)
			snprintf(keys[i], sizeof keys[i], "%s#%d", p->tensor, k);
		else
			snprintf(keys[i], sizeof keys[i], "%s", p->tensor);
		json_array_append_new(list, json_pack("{s:s, s:s, s:o, s:s, s:o, s:o}", "tensor", p->tensor,
						      "dtype", gpt_st_dtype_name(p->dtype), "tensor_shape",
						      int_array(p->ndim, p->shape), "key", keys[i], "offset",
						      int_array(p->box.ndim, p->box.off), "shape",
						      int_array(p->box.ndim, p->box.len)));
		e[i] = (gpt_st_entry){.name = keys[i], .dtype = p->dtype, .ndim = p->box.ndim, .data = p->data};
		memcpy(e[i].shape, p->box.len, sizeof e[i].shape);
	}
	int64_t bytes = 0;
	uint64_t h = 0;
	snprintf(path, sizeof path, "%s/%s", stage_dir, file);
	if (!rc && n > 0)
		rc = gpt_st_write_stream(path, e, n, NULL, 0, fill, ctx, &bytes, &h, err);
	if (!rc && n > 0) {
		char hex[17];
		gpt_xxh3_hex(h, hex);
		json_object_set_new(part, "file", json_string(file));
		json_object_set_new(part, "size", json_integer(bytes));
		json_object_set_new(part, "xxh3", json_string(hex));
	}
	char *text = rc ? NULL : json_dumps(part, JSON_COMPACT);
	if (!rc && !text)
		rc = gpt_err_nomem(err, 0, "checkpoint part");
	/* written after the data and atomically: its presence says the part is whole */
	snprintf(path, sizeof path, "%s/rank-%05d.json", stage_dir, rank);
	if (!rc)
		rc = gpt_file_write_atomic(path, text, strlen(text), err);
	free(text);
	json_decref(part);
	free(e);
	free(keys);
	return rc;
}

static json_t *load_part(const char *tmp, int r, gpt_err *err)
{
	char p[4096];
	snprintf(p, sizeof p, "%s/rank-%05d.json", tmp, r);
	json_error_t je;
	json_t *part = json_load_file(p, JSON_REJECT_DUPLICATES, &je);
	if (!part) {
		if (!gpt_path_exists(p))
			gpt_err_set(err, GPT_EIO, "%s: missing: rank %d did not finish writing its part", p, r);
		else
			gpt_err_set(err, GPT_EDATA, "%s:%d: bad JSON: %s", p, je.line, je.text);
	}
	return part;
}

static int shape_of(json_t *a, int *nd, int64_t *v)
{
	if (!json_is_array(a) || json_array_size(a) > GPT_MAX_DIMS)
		return -1;
	*nd = (int)json_array_size(a);
	for (int i = 0; i < *nd; i++) {
		json_t *x = json_array_get(a, (size_t)i);
		if (!json_is_integer(x))
			return -1;
		v[i] = json_integer_value(x);
	}
	return 0;
}

/* Adds one part's file and pieces to the index. */
static int merge_part(const char *tmp, int r, json_t *part, json_t *files, json_t *tensors, gpt_err *err)
{
	json_t *file = json_object_get(part, "file"), *pieces = json_object_get(part, "pieces");
	if (!json_is_array(pieces))
		return gpt_err_set(err, GPT_EDATA, "%s/rank-%05d.json: no pieces", tmp, r);
	if (file) {
		if (!json_is_string(file) || !json_is_integer(json_object_get(part, "size")) ||
		    !json_is_string(json_object_get(part, "xxh3")))
			return gpt_err_set(err, GPT_EDATA, "%s/rank-%05d.json: bad file entry", tmp, r);
		json_object_set_new(files, json_string_value(file),
				    json_pack("{s:O, s:O}", "size", json_object_get(part, "size"), "xxh3",
					      json_object_get(part, "xxh3")));
	} else if (json_array_size(pieces) > 0) {
		return gpt_err_set(err, GPT_EDATA, "%s/rank-%05d.json: pieces but no file", tmp, r);
	}
	size_t i;
	json_t *pc;
	json_array_foreach(pieces, i, pc)
	{
		const char *name = json_string_value(json_object_get(pc, "tensor"));
		json_t *dt = json_object_get(pc, "dtype"), *ts = json_object_get(pc, "tensor_shape");
		if (!name || !json_is_string(dt) || !json_is_array(ts) ||
		    !json_is_string(json_object_get(pc, "key")))
			return gpt_err_set(err, GPT_EDATA, "%s/rank-%05d.json: piece %zu is malformed", tmp, r, i);
		json_t *t = json_object_get(tensors, name);
		if (!t) {
			t = json_pack("{s:O, s:O, s:[]}", "dtype", dt, "shape", ts, "pieces");
			json_object_set_new(tensors, name, t);
		} else if (!json_equal(json_object_get(t, "dtype"), dt) || !json_equal(json_object_get(t, "shape"), ts)) {
			return gpt_err_set(err, GPT_EDATA, "%s/rank-%05d.json: tensor '%s': another dtype or shape than an earlier rank's piece",
					   tmp, r, name);
		}
		json_array_append_new(json_object_get(t, "pieces"),
				      json_pack("{s:O, s:O, s:O, s:O}", "file", file, "key", json_object_get(pc, "key"),
						"offset", json_object_get(pc, "offset"), "shape",
						json_object_get(pc, "shape")));
	}
	return 0;
}

static int check_index(const char *tmp, json_t *tensors, gpt_err *err)
{
	const char *name;
	json_t *t;
	int rc = 0;
	json_object_foreach(tensors, name, t)
	{
		json_t *pieces = json_object_get(t, "pieces");
		size_t np = json_array_size(pieces);
		gpt_box *boxes = gpt_calloc(np ? np : 1, sizeof *boxes, "boxes", err);
		int nd = 0, ndo, ndl;
		int64_t shape[GPT_MAX_DIMS];
		if (!boxes)
			return GPT_EINTERNAL;
		if (shape_of(json_object_get(t, "shape"), &nd, shape))
			rc = gpt_err_set(err, GPT_EDATA, "%s: tensor '%s': bad shape", tmp, name);
		for (size_t i = 0; i < np && !rc; i++) {
			json_t *pc = json_array_get(pieces, i);
			if (shape_of(json_object_get(pc, "offset"), &ndo, boxes[i].off) ||
			    shape_of(json_object_get(pc, "shape"), &ndl, boxes[i].len) || ndo != nd || ndl != nd)
				rc = gpt_err_set(err, GPT_EDATA, "%s: tensor '%s': piece %zu has a bad box", tmp, name, i);
			boxes[i].ndim = nd;
		}
		if (!rc)
			rc = gpt_ckpt_check_tiling(tmp, name, nd, shape, boxes, (int)np, err);
		free(boxes);
		if (rc)
			return rc;
	}
	return 0;
}

static int write_text(const char *tmp, const char *name, const char *text, json_t *files, gpt_err *err)
{
	char p[4096], hex[17];
	snprintf(p, sizeof p, "%s/%s", tmp, name);
	size_t n = strlen(text);
	int rc = gpt_file_write_atomic(p, text, n, err);
	gpt_xxh3_hex(gpt_xxh3_64(text, n), hex);
	if (!rc)
		json_object_set_new(files, name, json_pack("{s:I, s:s}", "size", (json_int_t)n, "xxh3", hex));
	return rc;
}

static int cmp_step(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? 1 : x > y ? -1 : 0; /* newest first */
}

/* The steps below `below` of output_dir's complete checkpoint directories
 * (step_N/ with index.json; never a partial one: it may be another run's in
 * progress), newest first, malloc'd; NULL (and *n 0) when none or out of
 * memory. */
static int64_t *complete_steps(const char *output_dir, int64_t below, size_t *n)
{
	*n = 0;
	DIR *d = opendir(output_dir);
	if (!d)
		return NULL;
	int64_t *steps = NULL;
	size_t cap = 0;
	struct dirent *e;
	char p[4096];
	while ((e = readdir(d))) {
		long long s;
		char tail;
		if (sscanf(e->d_name, "step_%lld%c", &s, &tail) != 1 || s >= below)
			continue;
		snprintf(p, sizeof p, "%s/%s/index.json", output_dir, e->d_name);
		if (!gpt_path_exists(p))
			continue;
		if (*n == cap) {
			int64_t *g = realloc(steps, (cap = cap ? 2 * cap : 16) * sizeof *steps);
			if (!g)
				break;
			steps = g;
		}
		steps[(*n)++] = s;
	}
	closedir(d);
	if (steps)
		qsort(steps, *n, sizeof *steps, cmp_step);
	return steps;
}

/* Keeps the new checkpoint and the keep_last - 1 newest complete ones
 * before it. Those of later steps (left by a run that went further before
 * this one resumed from an earlier checkpoint) are neither counted nor
 * removed: counting them would remove this run's own newest ones first. */
static void prune(const char *output_dir, int64_t step, int64_t keep_last)
{
	size_t n;
	int64_t *steps = complete_steps(output_dir, step, &n);
	char p[4096];
	for (size_t i = (size_t)(keep_last - 1); i < n; i++) {
		snprintf(p, sizeof p, "%s/step_%08lld/index.json", output_dir, (long long)steps[i]);
		unlink(p); /* first: a half-removed directory is never taken for complete */
		snprintf(p, sizeof p, "%s/step_%08lld", output_dir, (long long)steps[i]);
		remove_tree(p);
	}
	free(steps);
}

int gpt_ckpt_earlier(const char *path, char *bad, char *out, size_t size)
{
	char dir[4096], idx[4096], parent[4096];
	gpt_err e2 = {0};
	int64_t below = INT64_MAX;
	snprintf(idx, sizeof idx, "%s/latest", path);
	int has_latest = gpt_path_exists(idx);
	snprintf(idx, sizeof idx, "%s/index.json", path);
	bad[0] = '\0';
	if (!gpt_path_exists(idx) && has_latest && gpt_ckpt_latest(path, dir, sizeof dir, &e2)) {
		snprintf(parent, sizeof parent, "%s", path); /* `latest` names nothing */
	} else {
		if (gpt_path_exists(idx) || !has_latest)
			snprintf(dir, sizeof dir, "%s", path);
		size_t len = strlen(dir);
		while (len > 1 && dir[len - 1] == '/')
			dir[--len] = '\0';
		char *slash = strrchr(dir, '/');
		long long step;
		char tail;
		if (sscanf(slash ? slash + 1 : dir, "step_%lld%c", &step, &tail) != 1)
			return 0;
		below = step;
		snprintf(bad, size, "%s", dir);
		if (!slash)
			snprintf(parent, sizeof parent, ".");
		else
			snprintf(parent, sizeof parent, "%.*s", slash == dir ? 1 : (int)(slash - dir), dir);
	}
	size_t n;
	int64_t *steps = complete_steps(parent, below, &n);
	if (n > 0)
		snprintf(out, size, "%s%sstep_%08lld", parent, strcmp(parent, "/") ? "/" : "", (long long)steps[0]);
	free(steps);
	return n > 0;
}

int gpt_ckpt_publish(const char *output_dir, int64_t step, int n_ranks, const char *state_json,
		     const char *config_yaml, int64_t keep_last, char *path, size_t path_size,
		     int64_t *bytes, gpt_err *err)
{
	char tmp[4096], final[4096], p[4096];
	gpt_ckpt_stage_dir(output_dir, step, tmp, sizeof tmp);
	snprintf(final, sizeof final, "%s/step_%08lld", output_dir, (long long)step);
	json_t *index = json_pack("{s:s, s:i, s:I, s:i, s:{}, s:{}}", "format", GPT_CKPT_FORMAT, "version",
				  GPT_CKPT_VERSION, "step", (json_int_t)step, "ranks", n_ranks, "files",
				  "tensors");
	json_t *files = json_object_get(index, "files"), *tensors = json_object_get(index, "tensors");
	int rc = index ? 0 : gpt_err_nomem(err, 0, "index.json");
	for (int r = 0; r < n_ranks && !rc; r++) {
		json_t *part = load_part(tmp, r, err);
		rc = part ? merge_part(tmp, r, part, files, tensors, err) : err->code;
		json_decref(part);
	}
	if (!rc)
		rc = check_index(tmp, tensors, err);
	if (!rc)
		rc = write_text(tmp, "state.json", state_json, files, err);
	if (!rc)
		rc = write_text(tmp, "config.yaml", config_yaml, files, err);
	int64_t total = 0;
	const char *fname;
	json_t *fv;
	json_object_foreach(files, fname, fv) total += json_integer_value(json_object_get(fv, "size"));
	char *text = rc ? NULL : json_dumps(index, JSON_INDENT(1));
	json_decref(index);
	if (!rc && !text)
		rc = gpt_err_nomem(err, 0, "index.json");
	for (int r = 0; r < n_ranks && !rc; r++) {
		snprintf(p, sizeof p, "%s/rank-%05d.json", tmp, r);
		unlink(p); /* their content is in index.json now */
	}
	/* index.json last: a directory without it is never taken for complete */
	snprintf(p, sizeof p, "%s/index.json", tmp);
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
		gpt_temp_drop(tmp);
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
	if (!rc && keep_last > 0)
		prune(output_dir, step, keep_last);
	if (!rc && path)
		snprintf(path, path_size, "%s", final);
	if (!rc && bytes)
		*bytes = total;
	return rc;
}

int gpt_ckpt_save(const char *output_dir, int64_t step, const gpt_ckpt_piece *pieces, int n,
		  const char *state_json, const char *config_yaml, char *path, size_t path_size,
		  int64_t *bytes, gpt_err *err)
{
	char tmp[4096];
	gpt_ckpt_stage_dir(output_dir, step, tmp, sizeof tmp);
	int rc = gpt_ckpt_prepare(output_dir, step, err);
	if (!rc)
		rc = gpt_ckpt_write_part(tmp, 0, pieces, n, NULL, NULL, err);
	if (!rc)
		rc = gpt_ckpt_publish(output_dir, step, 1, state_json, config_yaml, 0, path, path_size,
				      bytes, err);
	if (rc)
		gpt_ckpt_discard(output_dir, step);
	return rc;
}
