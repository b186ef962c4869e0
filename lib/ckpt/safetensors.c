/* safetensors: 8-byte little-endian header length, a JSON header, then the
 * tensors' bytes. The writer streams and hashes; the reader trusts nothing. */
#include "ckpt/ckpt.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define ST_HEADER_MAX (100u << 20) /* a header above 100 MB is not a checkpoint */

static const struct { const char *name; gpt_dtype t; } st_dtypes[] = {
	{"F32", GPT_DTYPE_F32}, {"BF16", GPT_DTYPE_BF16}, {"F16", GPT_DTYPE_F16},
	{"I8", GPT_DTYPE_I8},   {"I32", GPT_DTYPE_I32},   {"I64", GPT_DTYPE_I64},
	{"U16", GPT_DTYPE_U16},
};

const char *gpt_st_dtype_name(gpt_dtype t)
{
	for (size_t i = 0; i < sizeof st_dtypes / sizeof *st_dtypes; i++)
		if (st_dtypes[i].t == t)
			return st_dtypes[i].name;
	return "?";
}

int gpt_st_dtype_parse(const char *s, gpt_dtype *out)
{
	for (size_t i = 0; i < sizeof st_dtypes / sizeof *st_dtypes; i++)
		if (strcmp(st_dtypes[i].name, s) == 0) {
			*out = st_dtypes[i].t;
			return 0;
		}
	return -1;
}

static int64_t numel(int ndim, const int64_t *shape)
{
	int64_t n = 1;
	for (int i = 0; i < ndim; i++)
		n *= shape[i];
	return n;
}

/* Builds the header text, padded with spaces to a multiple of 8 bytes. */
static char *st_header(const gpt_st_entry *e, int n, const char *const *meta, int n_meta,
		       size_t *len, gpt_err *err)
{
	json_t *root = json_object();
	int rc = root ? 0 : GPT_EINTERNAL;
	if (!rc && n_meta > 0) {
		json_t *m = json_object();
		for (int i = 0; m && i < n_meta; i++)
			json_object_set_new(m, meta[2 * i], json_string(meta[2 * i + 1]));
		rc = !m || json_object_set_new(root, "__metadata__", m);
	}
	uint64_t off = 0;
	for (int i = 0; !rc && i < n; i++) {
		uint64_t nb = (uint64_t)numel(e[i].ndim, e[i].shape) * gpt_dtype_size(e[i].dtype);
		json_t *shape = json_array();
		for (int d = 0; d < e[i].ndim; d++)
			json_array_append_new(shape, json_integer(e[i].shape[d]));
		json_t *t = json_pack("{s:s, s:o, s:[I,I]}", "dtype", gpt_st_dtype_name(e[i].dtype),
				      "shape", shape, "data_offsets", (json_int_t)off,
				      (json_int_t)(off + nb));
		if (!t || json_object_get(root, e[i].name)) {
			json_decref(t);
			json_decref(root);
			gpt_err_set(err, GPT_EINTERNAL, "safetensors: tensor '%s' given twice", e[i].name);
			return NULL;
		}
		json_object_set_new(root, e[i].name, t);
		off += nb;
	}
	char *text = rc ? NULL : json_dumps(root, JSON_COMPACT);
	json_decref(root);
	if (!text) {
		gpt_err_set(err, GPT_EINTERNAL, "safetensors: cannot build the header");
		return NULL;
	}
	size_t tl = strlen(text), padded = (tl + 7) & ~(size_t)7;
	char *out = gpt_malloc(padded + 1, "safetensors header", err);
	if (out) {
		memcpy(out, text, tl);
		memset(out + tl, ' ', padded - tl);
		out[padded] = '\0';
		*len = padded;
	}
	free(text);
	return out;
}

int gpt_st_write(const char *path, const gpt_st_entry *entries, int n, const char *const *meta,
		 int n_meta, int64_t *bytes, uint64_t *xxh3, gpt_err *err)
{
	return gpt_st_write_stream(path, entries, n, meta, n_meta, NULL, NULL, bytes, xxh3, err);
}

int gpt_st_write_stream(const char *path, const gpt_st_entry *entries, int n,
			const char *const *meta, int n_meta, gpt_st_fill_fn fill, void *ctx,
			int64_t *bytes, uint64_t *xxh3, gpt_err *err)
{
	size_t hlen = 0;
	char *header = st_header(entries, n, meta, n_meta, &hlen, err);
	if (!header)
		return err ? err->code : GPT_EINTERNAL;
	gpt_hasher *h = gpt_hasher_new(err);
	gpt_afile af;
	int rc = h ? gpt_afile_open(&af, path, err) : GPT_EINTERNAL;
	if (rc) {
		gpt_hasher_free(h);
		free(header);
		return rc;
	}
	unsigned char len8[8];
	for (int i = 0; i < 8; i++)
		len8[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
	int64_t total = 0;
#define ST_PUT(p, nb)                                                              \
	do {                                                                       \
		if (!rc && (nb) && fwrite((p), 1, (nb), af.fp) != (nb))             \
			rc = gpt_err_errno(err, GPT_EIO, errno, "%s: write", path); \
		if (!rc) {                                                         \
			gpt_hasher_update(h, (p), (nb));                           \
			total += (int64_t)(nb);                                    \
		}                                                                  \
	} while (0)
	ST_PUT(len8, 8);
	ST_PUT(header, hlen);
	void *buf = NULL;
	for (int i = 0; i < n && !rc; i++) {
		size_t nb = (size_t)numel(entries[i].ndim, entries[i].shape) *
			    gpt_dtype_size(entries[i].dtype);
		const void *data = entries[i].data;
		if (!data && fill) { /* one tensor in memory at a time */
			void *grown = realloc(buf, nb ? nb : 1);
			if (!grown) {
				rc = gpt_err_nomem(err, nb, entries[i].name);
				break;
			}
			buf = grown;
			rc = fill(ctx, i, buf, err);
			data = buf;
		}
		ST_PUT(data, nb);
	}
	free(buf);
#undef ST_PUT
	free(header);
	if (rc) {
		gpt_afile_abort(&af);
		gpt_hasher_free(h);
		return rc;
	}
	rc = gpt_afile_commit(&af, err);
	if (!rc && bytes)
		*bytes = total;
	if (!rc && xxh3)
		*xxh3 = gpt_hasher_digest(h);
	gpt_hasher_free(h);
	return rc;
}

/* ---- reader ---- */

static int st_bad(gpt_err *err, const char *path, const char *fmt, const char *name)
{
	char what[512];
	snprintf(what, sizeof what, fmt, name ? name : "");
	return gpt_err_set(err, GPT_EDATA, "%s: not a valid safetensors file: %s", path, what);
}

static int st_parse_tensor(gpt_st_file *f, const char *key, json_t *v, uint64_t data_size,
			   gpt_err *err)
{
	gpt_st_tensor *t = &f->tensors[f->n];
	json_t *dt = json_object_get(v, "dtype"), *shape = json_object_get(v, "shape"),
	       *offs = json_object_get(v, "data_offsets");
	if (!json_is_object(v) || !json_is_string(dt) || !json_is_array(shape) ||
	    !json_is_array(offs) || json_array_size(offs) != 2)
		return st_bad(err, f->path, "tensor '%s' lacks dtype, shape or data_offsets", key);
	if (gpt_st_dtype_parse(json_string_value(dt), &t->dtype))
		return st_bad(err, f->path, "tensor '%s' has an unsupported dtype", key);
	if (json_array_size(shape) > GPT_MAX_DIMS)
		return st_bad(err, f->path, "tensor '%s' has more than 4 dimensions", key);
	t->ndim = (int)json_array_size(shape);
	uint64_t n = 1;
	for (int d = 0; d < t->ndim; d++) {
		json_t *s = json_array_get(shape, (size_t)d);
		if (!json_is_integer(s) || json_integer_value(s) < 0 ||
		    json_integer_value(s) > ((json_int_t)1 << 40))
			return st_bad(err, f->path, "tensor '%s' has a bad shape", key);
		t->shape[d] = json_integer_value(s);
		n *= (uint64_t)t->shape[d];
		if (n > ((uint64_t)1 << 48))
			return st_bad(err, f->path, "tensor '%s' is impossibly large", key);
	}
	json_t *b = json_array_get(offs, 0), *e = json_array_get(offs, 1);
	if (!json_is_integer(b) || !json_is_integer(e) || json_integer_value(b) < 0 ||
	    json_integer_value(e) < json_integer_value(b) ||
	    (uint64_t)json_integer_value(e) > data_size)
		return st_bad(err, f->path, "tensor '%s' has data_offsets outside the file (truncated?)", key);
	t->begin = (uint64_t)json_integer_value(b);
	t->end = (uint64_t)json_integer_value(e);
	if (t->end - t->begin != n * gpt_dtype_size(t->dtype))
		return st_bad(err, f->path, "tensor '%s': data_offsets do not match dtype x shape", key);
	t->name = strdup(key);
	if (!t->name)
		return gpt_err_nomem(err, strlen(key), "tensor name");
	f->n++;
	return 0;
}

static int cmp_begin(const void *a, const void *b)
{
	const gpt_st_tensor *x = a, *y = b;
	return x->begin < y->begin ? -1 : x->begin > y->begin;
}

static int st_parse(gpt_st_file *f, gpt_err *err)
{
	if (f->size < 8)
		return st_bad(err, f->path, "shorter than the 8-byte header length%s", NULL);
	uint64_t hlen = 0;
	for (int i = 0; i < 8; i++)
		hlen |= (uint64_t)f->map[i] << (8 * i);
	if (hlen > ST_HEADER_MAX || hlen > f->size - 8)
		return st_bad(err, f->path, "the header length runs past the end of the file%s", NULL);
	f->data = f->map + 8 + hlen;
	uint64_t data_size = f->size - 8 - hlen;
	json_error_t je;
	json_t *root = json_loadb((const char *)f->map + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &je);
	if (!json_is_object(root)) {
		json_decref(root);
		return gpt_err_set(err, GPT_EDATA, "%s: not a valid safetensors file: bad JSON header: %s",
				   f->path, je.text);
	}
	size_t cap = json_object_size(root);
	f->tensors = gpt_calloc(cap ? cap : 1, sizeof *f->tensors, "tensor table", err);
	int rc = f->tensors ? 0 : GPT_EINTERNAL;
	const char *key;
	json_t *v;
	json_object_foreach(root, key, v)
	{
		if (rc)
			break;
		if (strcmp(key, "__metadata__") == 0) {
			if (!json_is_object(v)) {
				rc = st_bad(err, f->path, "__metadata__ is not an object%s", NULL);
				break;
			}
			f->meta = gpt_calloc(2 * json_object_size(v) + 1, sizeof(char *), "metadata", err);
			if (!f->meta) {
				rc = GPT_EINTERNAL;
				break;
			}
			const char *mk;
			json_t *mv;
			json_object_foreach(v, mk, mv)
			{
				if (!json_is_string(mv)) {
					rc = st_bad(err, f->path, "metadata value of '%s' is not a string", mk);
					break;
				}
				f->meta[2 * f->n_meta] = strdup(mk);
				f->meta[2 * f->n_meta + 1] = strdup(json_string_value(mv));
				f->n_meta++;
			}
			continue;
		}
		rc = st_parse_tensor(f, key, v, data_size, err);
	}
	json_decref(root);
	if (rc)
		return rc;
	/* No two tensors may share bytes. Sort a copy so the file order stays. */
	gpt_st_tensor *sorted = gpt_malloc((size_t)(f->n ? f->n : 1) * sizeof *sorted, "sort", err);
	if (!sorted)
		return GPT_EINTERNAL;
	memcpy(sorted, f->tensors, (size_t)f->n * sizeof *sorted);
	qsort(sorted, (size_t)f->n, sizeof *sorted, cmp_begin);
	uint64_t reach = 0; /* the furthest end so far */
	for (int i = 0; i < f->n && !rc; i++) {
		if (sorted[i].end > sorted[i].begin && sorted[i].begin < reach)
			rc = st_bad(err, f->path, "tensor '%s' overlaps another tensor", sorted[i].name);
		if (sorted[i].end > reach)
			reach = sorted[i].end;
	}
	free(sorted);
	return rc;
}

int gpt_st_open(gpt_st_file *f, const char *path, gpt_err *err)
{
	memset(f, 0, sizeof *f);
	f->path = strdup(path);
	if (!f->path)
		return gpt_err_nomem(err, strlen(path), "path");
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int rc = gpt_err_errno_read(err, errno, "%s", path);
		gpt_st_close(f);
		return rc;
	}
	struct stat st;
	int rc = 0;
	if (fstat(fd, &st) != 0)
		rc = gpt_err_errno(err, GPT_EIO, errno, "%s", path);
	else if (!S_ISREG(st.st_mode))
		rc = gpt_err_set(err, GPT_EDATA, "%s: not a regular file", path);
	if (!rc) {
		f->size = (size_t)st.st_size;
		if (f->size) {
			void *m = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
			if (m == MAP_FAILED)
				rc = gpt_err_errno(err, GPT_EIO, errno, "%s: mmap", path);
			else
				f->map = m;
		}
	}
	close(fd);
	if (!rc)
		rc = st_parse(f, err);
	if (rc)
		gpt_st_close(f);
	return rc;
}

const gpt_st_tensor *gpt_st_find(const gpt_st_file *f, const char *name)
{
	for (int i = 0; i < f->n; i++)
		if (strcmp(f->tensors[i].name, name) == 0)
			return &f->tensors[i];
	return NULL;
}

const void *gpt_st_data(const gpt_st_file *f, const gpt_st_tensor *t)
{
	return f->data + t->begin;
}

const char *gpt_st_meta(const gpt_st_file *f, const char *key)
{
	for (int i = 0; i < f->n_meta; i++)
		if (f->meta[2 * i] && strcmp(f->meta[2 * i], key) == 0)
			return f->meta[2 * i + 1];
	return NULL;
}

void gpt_st_close(gpt_st_file *f)
{
	if (f->map)
		munmap((void *)f->map, f->size);
	for (int i = 0; i < f->n; i++)
		free(f->tensors[i].name);
	free(f->tensors);
	for (int i = 0; i < 2 * f->n_meta; i++)
		free(f->meta[i]);
	free(f->meta);
	free(f->path);
	memset(f, 0, sizeof *f);
}

int gpt_st_open_mapped(gpt_st_file *f, const char *name, void *map, size_t size, gpt_err *err)
{
	memset(f, 0, sizeof *f);
	f->path = strdup(name);
	f->map = map;
	f->size = size;
	if (!f->path) {
		gpt_st_close(f);
		return gpt_err_nomem(err, strlen(name), "path");
	}
	int rc = st_parse(f, err);
	if (rc)
		gpt_st_close(f);
	return rc;
}
