/* Writing Megatron's indexed dataset (PREFIX.bin + PREFIX.idx), byte for
 * byte what megatron/core/datasets/indexed_dataset.py writes. */
#include "data/data.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char idx_magic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0};

int gpt_ds_dtype_size(int code)
{
	switch (code) {
	case GPT_DS_UINT8:
	case GPT_DS_INT8:
		return 1;
	case GPT_DS_INT16:
	case GPT_DS_UINT16:
		return 2;
	case GPT_DS_INT32:
	case GPT_DS_FLOAT32:
		return 4;
	case GPT_DS_INT64:
	case GPT_DS_FLOAT64:
		return 8;
	default:
		return 0;
	}
}

const char *gpt_ds_dtype_name(int code)
{
	static const char *const names[] = {"unknown", "uint8", "int8", "int16", "int32",
					    "int64", "float64", "float32", "uint16"};
	return code >= 1 && code <= 8 ? names[code] : names[0];
}

gpt_ds_dtype gpt_ds_dtype_for_vocab(int64_t vocab_size)
{
	return vocab_size < 65500 ? GPT_DS_UINT16 : GPT_DS_INT32;
}

struct gpt_ds_writer {
	char *prefix;
	char *idx_path;
	gpt_ds_dtype dtype;
	gpt_afile bin;
	int32_t *lens;
	int64_t n_docs, cap_docs;
	int64_t tokens;
	int64_t cur; /* tokens of the document being appended */
	uint16_t conv[32768];
};

int gpt_ds_writer_open(gpt_ds_writer **out, const char *prefix, gpt_ds_dtype dtype, gpt_err *err)
{
	*out = NULL;
	if (dtype != GPT_DS_UINT16 && dtype != GPT_DS_INT32)
		return gpt_err_set(err, GPT_EUSAGE, "%s: token dtype %s is not supported for writing; use uint16 or int32",
				   prefix, gpt_ds_dtype_name(dtype));
	/* "" or "dir/" would make the hidden files .bin and .idx */
	const char *base = strrchr(prefix, '/');
	base = base ? base + 1 : prefix;
	if (!*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
		return gpt_err_set(err, GPT_EUSAGE, "output '%s': expected a file name prefix PREFIX, for PREFIX.bin and PREFIX.idx",
				   prefix);
	gpt_ds_writer *w = gpt_calloc(1, sizeof *w, "dataset writer", err);
	if (!w)
		return GPT_EINTERNAL;
	w->dtype = dtype;
	gpt_buf b = GPT_BUF_INIT, i = GPT_BUF_INIT;
	int rc = gpt_buf_printf(&b, err, "%s.bin", prefix);
	if (!rc)
		rc = gpt_buf_printf(&i, err, "%s.idx", prefix);
	w->prefix = gpt_strdup(prefix, err);
	w->idx_path = i.data;
	if (!rc && !w->prefix)
		rc = GPT_EINTERNAL;
	if (!rc) {
		/* Say which directory is missing rather than naming our temporary file. */
		char *slash = strrchr(b.data, '/');
		if (slash && slash != b.data) {
			*slash = 0;
			struct stat st;
			if (stat(b.data, &st) != 0 || !S_ISDIR(st.st_mode))
				rc = gpt_err_set(err, GPT_ENOINPUT, "%s: the output directory %s does not exist; create it first",
						 prefix, b.data);
			*slash = '/';
		}
	}
	/* the .idx is opened at commit: a directory in its way is said now */
	if (!rc)
		rc = gpt_out_replaceable(w->idx_path, err);
	if (!rc)
		rc = gpt_afile_open(&w->bin, b.data, err);
	gpt_buf_free(&b);
	if (rc) {
		free(w->prefix);
		free(w->idx_path);
		free(w);
		return rc;
	}
	*out = w;
	return 0;
}

int64_t gpt_ds_writer_docs(const gpt_ds_writer *w) { return w->n_docs; }
int64_t gpt_ds_writer_tokens(const gpt_ds_writer *w) { return w->tokens; }

int gpt_ds_writer_append(gpt_ds_writer *w, const int32_t *ids, int64_t n, gpt_err *err)
{
	FILE *fp = w->bin.fp;
	if (w->dtype == GPT_DS_UINT16) {
		for (int64_t i = 0; i < n;) {
			int64_t k = n - i < 32768 ? n - i : 32768;
			for (int64_t j = 0; j < k; j++) {
				int32_t v = ids[i + j];
				if (v < 0 || v > 65535)
					return gpt_err_set(err, GPT_EDATA, "%s: token id %d does not fit uint16", w->prefix, v);
				w->conv[j] = (uint16_t)v;
			}
			if (fwrite(w->conv, 2, (size_t)k, fp) != (size_t)k)
				return gpt_err_errno(err, GPT_EIO, errno, "%s: write", w->bin.path);
			i += k;
		}
	} else if (n && fwrite(ids, 4, (size_t)n, fp) != (size_t)n) {
		return gpt_err_errno(err, GPT_EIO, errno, "%s: write", w->bin.path);
	}
	w->cur += n;
	w->tokens += n;
	return 0;
}

int gpt_ds_writer_end_doc(gpt_ds_writer *w, gpt_err *err)
{
	if (w->cur > INT32_MAX)
		return gpt_err_set(err, GPT_EDATA,
				   "%s: document %lld has %lld tokens; Megatron's index stores lengths as int32 (at most %d)",
				   w->prefix, (long long)w->n_docs, (long long)w->cur, INT32_MAX);
	if (w->n_docs == w->cap_docs) {
		int64_t cap = w->cap_docs ? w->cap_docs * 2 : 4096;
		int32_t *l = gpt_realloc(w->lens, (size_t)cap * sizeof *l, "document lengths", err);
		if (!l)
			return GPT_EINTERNAL;
		w->lens = l;
		w->cap_docs = cap;
	}
	w->lens[w->n_docs++] = (int32_t)w->cur;
	w->cur = 0;
	return 0;
}

int gpt_ds_writer_add(gpt_ds_writer *w, const int32_t *ids, int64_t n, gpt_err *err)
{
	int rc = gpt_ds_writer_append(w, ids, n, err);
	return rc ? rc : gpt_ds_writer_end_doc(w, err);
}

static int write_le64(FILE *fp, uint64_t v)
{
	unsigned char b[8];
	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)(v >> (8 * i));
	return fwrite(b, 1, 8, fp) == 8 ? 0 : -1;
}

static int write_index(gpt_ds_writer *w, FILE *fp)
{
	uint8_t code = (uint8_t)w->dtype;
	int64_t item = gpt_ds_dtype_size(w->dtype);
	if (fwrite(idx_magic, 1, 9, fp) != 9 || write_le64(fp, 1) || fwrite(&code, 1, 1, fp) != 1 ||
	    write_le64(fp, (uint64_t)w->n_docs) || write_le64(fp, (uint64_t)w->n_docs + 1))
		return -1;
	/* Little-endian hosts only (x86-64, aarch64): the arrays go out as they are. */
	if (w->n_docs && fwrite(w->lens, 4, (size_t)w->n_docs, fp) != (size_t)w->n_docs)
		return -1;
	int64_t ptr = 0;
	for (int64_t i = 0; i < w->n_docs; i++) {
		if (write_le64(fp, (uint64_t)ptr))
			return -1;
		ptr += (int64_t)w->lens[i] * item;
	}
	for (int64_t i = 0; i <= w->n_docs; i++)
		if (write_le64(fp, (uint64_t)i))
			return -1;
	return 0;
}

static void writer_release(gpt_ds_writer *w)
{
	free(w->prefix);
	free(w->idx_path);
	free(w->lens);
	free(w);
}

int gpt_ds_writer_commit(gpt_ds_writer *w, gpt_err *err)
{
	if (w->cur) {
		gpt_ds_writer_abort(w);
		return gpt_err_set(err, GPT_EINTERNAL, "dataset writer: commit inside a document");
	}
	gpt_afile idx;
	int rc = gpt_afile_open(&idx, w->idx_path, err);
	if (rc) {
		gpt_afile_abort(&w->bin);
		writer_release(w);
		return rc;
	}
	if (write_index(w, idx.fp)) {
		rc = gpt_err_errno(err, GPT_EIO, errno, "%s: write", idx.path);
		goto fail;
	}
	/* Both new files on disk before the old pair is touched: a full or
	 * failing disk leaves that pair as it was. */
	if ((rc = gpt_afile_sync(&w->bin, err)) || (rc = gpt_afile_sync(&idx, err)))
		goto fail;
	/* the .idx, which makes the pair a dataset, aside first and in place
	 * last: a failure puts the old pair back */
	rc = gpt_afile_commit_pair(&w->bin, &idx, err);
	writer_release(w);
	return rc;
fail:
	gpt_afile_abort(&idx);
	gpt_afile_abort(&w->bin);
	writer_release(w);
	return rc;
}

void gpt_ds_writer_abort(gpt_ds_writer *w)
{
	if (!w)
		return;
	gpt_afile_abort(&w->bin);
	writer_release(w);
}
