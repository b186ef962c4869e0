/* Reading token datasets: Megatron's indexed dataset and llm.c shards, both
 * mapped read-only and checked field by field before use. */
#include "data/data.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define LLMC_MAGIC 20240520
#define LLMC_MAGIC_LLAMA3 20240801
#define LLMC_MAGIC_EVAL 20240522
#define LLMC_HEADER_BYTES 1024
#define LLMC_EOT 50256
#define IDX_HEADER 34 /* magic 9 + version 8 + dtype 1 + two counts 16 */

typedef struct mapped {
	const uint8_t *p;
	size_t size;
} mapped;

struct gpt_dataset {
	gpt_ds_format format;
	gpt_ds_dtype dtype;
	int item;
	mapped bin, idx;
	const uint8_t *tokens; /* start of the token area */
	int64_t n_seq;
	int64_t n_docs;
	int64_t n_tokens;
	int64_t *doc_start; /* token offset of each document, n_docs + 1 entries */
};

static int map_file(const char *path, mapped *m, gpt_err *err)
{
	m->p = NULL;
	m->size = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return gpt_err_errno_read(err, errno, "%s: open", path);
	struct stat st;
	if (fstat(fd, &st) != 0) {
		int e = errno;
		close(fd);
		return gpt_err_errno(err, GPT_EIO, e, "%s: stat", path);
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return gpt_err_set(err, GPT_EDATA, "%s: not a regular file", path);
	}
	m->size = (size_t)st.st_size;
	if (m->size) {
		void *p = mmap(NULL, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (p == MAP_FAILED) {
			int e = errno;
			close(fd);
			return gpt_err_errno(err, GPT_EIO, e, "%s: mmap", path);
		}
		m->p = p;
	}
	close(fd);
	return 0;
}

static void unmap(mapped *m)
{
	if (m->p)
		munmap((void *)m->p, m->size);
	m->p = NULL;
}

static uint64_t rd64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

static int32_t rd32(const uint8_t *p)
{
	int32_t v;
	memcpy(&v, p, 4);
	return v;
}

void gpt_dataset_close(gpt_dataset *ds)
{
	if (!ds)
		return;
	unmap(&ds->bin);
	unmap(&ds->idx);
	free(ds->doc_start);
	free(ds);
}

static int check_index(gpt_dataset *ds, const char *idx_path, const char *bin_path, gpt_err *err)
{
	const uint8_t *p = ds->idx.p;
	size_t size = ds->idx.size;
	/* Megatron-LM's lazy and cached datasets (--dataset-impl lazy/cached,
	 * gone since 2023) wrote "TNTIDX\0\0" and another layout */
	if (size < 9 || memcmp(p, "MMIDIDX\0\0", 9) != 0)
		return gpt_err_set(err, GPT_EDATA,
				   "%s: not a Megatron index (expected the magic \"MMIDIDX\\0\\0\" at the start)%s", idx_path,
				   size >= 4 && rd32(p) == LLMC_MAGIC ? "; it is an llm.c shard, open it by its own name"
				   : size >= 8 && memcmp(p, "TNTIDX\0\0", 8) == 0
					   ? "; it is the index of Megatron-LM's old lazy or cached dataset "
					     "(--dataset-impl lazy or cached), which gptkit does not read: make the data again "
					     "with gpt-preprocess, or with Megatron's preprocess_data.py --dataset-impl mmap"
					   : "");
	if (size < IDX_HEADER)
		return gpt_err_set(err, GPT_EDATA, "%s: truncated: %zu bytes, the header alone takes %d", idx_path, size,
				   IDX_HEADER);
	uint64_t version = rd64(p + 9);
	if (version != 1)
		return gpt_err_set(err, GPT_EDATA, "%s: index version %llu; only version 1 is known", idx_path,
				   (unsigned long long)version);
	int code = p[17];
	ds->item = gpt_ds_dtype_size(code);
	if (!ds->item || code == GPT_DS_FLOAT32 || code == GPT_DS_FLOAT64)
		return gpt_err_set(err, GPT_EDATA, "%s: dtype code %d is not an integer token type (Megatron codes 1-5, 8)",
				   idx_path, code);
	ds->dtype = (gpt_ds_dtype)code;
	uint64_t s = rd64(p + 18), d = rd64(p + 26);
	/* Each count is bounded by the file size first, so the sums cannot overflow. */
	if (s > size / 12 || d > size / 8 || d == 0)
		return gpt_err_set(err, GPT_EDATA, "%s: %llu sequences and %llu document indices cannot fit in %zu bytes",
				   idx_path, (unsigned long long)s, (unsigned long long)d, size);
	uint64_t want = IDX_HEADER + s * 12 + d * 8;
	if (size != want && size != want + s) /* + s: Megatron's optional per-sequence modes */
		return gpt_err_set(err, GPT_EDATA, "%s: %zu bytes, but %llu sequences and %llu document indices need %llu%s",
				   idx_path, size, (unsigned long long)s, (unsigned long long)d, (unsigned long long)want,
				   size < want ? " (truncated)" : "");
	ds->n_seq = (int64_t)s;
	ds->n_docs = (int64_t)d - 1;
	const uint8_t *lens = p + IDX_HEADER, *ptrs = lens + 4 * s, *docs = ptrs + 8 * s;
	uint64_t bin_size = ds->bin.size, item = (uint64_t)ds->item, data_end = 0;
	for (uint64_t i = 0; i < s; i++) {
		int32_t len = rd32(lens + 4 * i);
		uint64_t ptr = rd64(ptrs + 8 * i);
		if (len < 0 || ptr % item || ptr > bin_size || (bin_size - ptr) / item < (uint64_t)len)
			return gpt_err_set(err, GPT_EDATA,
					   "%s: sequence %llu (%d tokens at byte %llu) lies outside %s (%llu bytes); the pair does not belong together or the .bin is truncated",
					   idx_path, (unsigned long long)i, len, (unsigned long long)ptr, bin_path,
					   (unsigned long long)bin_size);
		if (ptr + (uint64_t)len * item > data_end)
			data_end = ptr + (uint64_t)len * item;
	}
	/* Megatron's writers put the tokens back to back and nothing after
	 * them: bytes the index does not reach mean a .bin of another index
	 * (a bigger corpus, or another dtype), whose tokens would be read at
	 * the wrong places. */
	if (data_end != bin_size)
		return gpt_err_set(err, GPT_EDATA,
				   "%s: %llu bytes, but its index %s ends its last sequence at byte %llu (%s tokens); the pair does not belong together: make both again with gpt-preprocess",
				   bin_path, (unsigned long long)bin_size, idx_path, (unsigned long long)data_end,
				   gpt_ds_dtype_name(ds->dtype));
	ds->doc_start = gpt_malloc((size_t)d * sizeof *ds->doc_start, "document offsets", err);
	if (!ds->doc_start)
		return GPT_EINTERNAL;
	if (rd64(docs) != 0 || rd64(docs + 8 * (d - 1)) != s)
		return gpt_err_set(err, GPT_EDATA, "%s: document indices must run from 0 to the sequence count %llu",
				   idx_path, (unsigned long long)s);
	uint64_t prev = 0;
	for (uint64_t k = 0; k < d; k++) {
		uint64_t first = rd64(docs + 8 * k);
		if (first > s)
			return gpt_err_set(err, GPT_EDATA, "%s: document index %llu is %llu, beyond the %llu sequences",
					   idx_path, (unsigned long long)k, (unsigned long long)first, (unsigned long long)s);
		if (first < prev)
			return gpt_err_set(err, GPT_EDATA, "%s: document index %llu is %llu, after %llu; they must not decrease",
					   idx_path, (unsigned long long)k, (unsigned long long)first,
					   (unsigned long long)prev);
		prev = first;
		/* Documents are read as one run of tokens: their sequences must be adjacent. */
		uint64_t end = k + 1 < d ? rd64(docs + 8 * (k + 1)) : first;
		for (uint64_t j = first; j + 1 < end && j + 1 < s; j++)
			if (rd64(ptrs + 8 * (j + 1)) != rd64(ptrs + 8 * j) + (uint64_t)rd32(lens + 4 * j) * item)
				return gpt_err_set(err, GPT_EDATA, "%s: the sequences of document %llu are not adjacent in %s",
						   idx_path, (unsigned long long)k, bin_path);
		ds->doc_start[k] = first < s ? (int64_t)(rd64(ptrs + 8 * first) / item) : (int64_t)(bin_size / item);
	}
	ds->n_tokens = 0;
	for (int64_t k = 0; k < ds->n_docs; k++)
		ds->n_tokens += gpt_dataset_doc_len(ds, k);
	ds->tokens = ds->bin.p;
	return 0;
}

/* Document lengths for Megatron: from the index, by sequence. */
int64_t gpt_dataset_doc_len(const gpt_dataset *ds, int64_t i)
{
	if (i < 0 || i >= ds->n_docs)
		return -1;
	if (ds->format == GPT_DS_LLMC)
		return ds->doc_start[i + 1] - ds->doc_start[i];
	const uint8_t *lens = ds->idx.p + IDX_HEADER, *docs = lens + 12 * (uint64_t)ds->n_seq;
	uint64_t a = rd64(docs + 8 * (uint64_t)i), b = rd64(docs + 8 * (uint64_t)(i + 1));
	int64_t n = 0;
	for (uint64_t j = a; j < b; j++)
		n += rd32(lens + 4 * j);
	return n;
}

static int open_megatron(gpt_dataset *ds, const char *prefix, gpt_err *err)
{
	gpt_buf b = GPT_BUF_INIT, x = GPT_BUF_INIT;
	ds->format = GPT_DS_MEGATRON;
	int rc = gpt_buf_printf(&b, err, "%s.bin", prefix);
	if (!rc)
		rc = gpt_buf_printf(&x, err, "%s.idx", prefix);
	if (!rc)
		rc = map_file(x.data, &ds->idx, err);
	if (!rc)
		rc = map_file(b.data, &ds->bin, err);
	if (!rc)
		rc = check_index(ds, x.data, b.data, err);
	gpt_buf_free(&b);
	gpt_buf_free(&x);
	return rc;
}

static int open_llmc(gpt_dataset *ds, const char *path, gpt_err *err)
{
	ds->format = GPT_DS_LLMC;
	int rc = map_file(path, &ds->bin, err);
	if (rc)
		return rc;
	const uint8_t *p = ds->bin.p;
	if (ds->bin.size < LLMC_HEADER_BYTES)
		return gpt_err_set(err, GPT_EDATA, "%s: truncated llm.c shard: %zu bytes, the header alone takes %d", path,
				   ds->bin.size, LLMC_HEADER_BYTES);
	int32_t version = rd32(p + 4), ntok = rd32(p + 8);
	if (version != 1)
		return gpt_err_set(err, GPT_EDATA, "%s: llm.c shard version %d; only version 1 (uint16 tokens) is supported",
				   path, version);
	if (ntok < 0 || ds->bin.size != LLMC_HEADER_BYTES + 2 * (size_t)ntok)
		return gpt_err_set(err, GPT_EDATA, "%s: the header says %d tokens (%lld bytes with the header) but the file has %zu bytes",
				   path, ntok, (long long)LLMC_HEADER_BYTES + 2LL * ntok, ds->bin.size);
	ds->dtype = GPT_DS_UINT16;
	ds->item = 2;
	ds->tokens = p + LLMC_HEADER_BYTES;
	ds->n_tokens = ntok;
	int64_t n = 0;
	for (int32_t i = 0; i < ntok; i++) {
		uint16_t v;
		memcpy(&v, ds->tokens + 2 * (size_t)i, 2);
		n += i == 0 || v == LLMC_EOT;
	}
	ds->doc_start = gpt_malloc((size_t)(n + 1) * sizeof *ds->doc_start, "document offsets", err);
	if (!ds->doc_start)
		return GPT_EINTERNAL;
	int64_t k = 0;
	for (int32_t i = 0; i < ntok; i++) {
		uint16_t v;
		memcpy(&v, ds->tokens + 2 * (size_t)i, 2);
		if (i == 0 || v == LLMC_EOT)
			ds->doc_start[k++] = i;
	}
	ds->doc_start[k] = ntok;
	ds->n_docs = k;
	return 0;
}

static int ends_with(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);
	return a >= b && strcmp(s + a - b, suf) == 0;
}

size_t gpt_ds_prefix_len(const char *path)
{
	size_t n = strlen(path);
	/* ".bin" alone is a name, not a suffix */
	int named = n > 4 && path[n - 5] != '/';
	return named && (ends_with(path, ".bin") || ends_with(path, ".idx")) ? n - 4 : n;
}

/* The first int32 of a file (an llm.c magic), 0 when there is none. */
static int32_t file_magic(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	uint8_t h[4];
	ssize_t n = read(fd, h, 4);
	close(fd);
	return n == 4 ? rd32(h) : 0;
}

static int is_llmc_file(const char *path) { return file_magic(path) == LLMC_MAGIC; }

/* The other files of llm.c's dev/data scripts (data_common.py): what a
 * .bin without its .idx is when its magic says so; else NULL. */
static const char *llmc_other(const char *path)
{
	switch (file_magic(path)) {
	case LLMC_MAGIC_LLAMA3:
		return "an llm.c shard of Llama 3 tokens (magic 20240801, uint32 ids); gptkit trains GPT-2 and reads "
		       "llm.c's GPT-2 shards (magic 20240520): tokenize with the script's default -m gpt-2";
	case LLMC_MAGIC_EVAL:
		return "an llm.c evaluation file (magic 20240522: HellaSwag or MMLU examples), no token shard to "
		       "train on; give the *_train_*.bin or *_val_*.bin shards";
	}
	return NULL;
}

int gpt_dataset_open(gpt_dataset **out, const char *path, gpt_err *err)
{
	*out = NULL;
	gpt_dataset *ds = gpt_calloc(1, sizeof *ds, "dataset", err);
	if (!ds)
		return GPT_EINTERNAL;
	int rc;
	char *prefix = gpt_strdup(path, err);
	if (!prefix) {
		free(ds);
		return GPT_EINTERNAL;
	}
	prefix[gpt_ds_prefix_len(prefix)] = 0;
	gpt_buf idx = GPT_BUF_INIT;
	rc = gpt_buf_printf(&idx, err, "%s.idx", prefix);
	if (!rc) {
		struct stat st;
		const char *other = NULL;
		if (ends_with(path, ".bin") && is_llmc_file(path))
			rc = open_llmc(ds, path, err);
		else if (ends_with(path, ".bin") && stat(idx.data, &st) != 0 && (other = llmc_other(path)))
			rc = gpt_err_set(err, GPT_EDATA, "%s: %s", path, other);
		else if (stat(idx.data, &st) == 0 || !(stat(path, &st) == 0 && S_ISREG(st.st_mode)) ||
			 ends_with(path, ".bin")) /* a .bin that is no llm.c shard wants its index */
			rc = open_megatron(ds, prefix, err);
		else if (is_llmc_file(path))
			rc = open_llmc(ds, path, err);
		else
			rc = gpt_err_set(err, GPT_EDATA,
					 "%s: not a dataset: expected PREFIX.bin + PREFIX.idx (Megatron) or an llm.c .bin shard (magic %d)",
					 path, LLMC_MAGIC);
	}
	if (rc == GPT_ENOINPUT && ds->format == GPT_DS_MEGATRON)
		gpt_err_prefix(err, "dataset %s (expects %s.bin and %s.idx)", path, prefix, prefix);
	free(prefix);
	gpt_buf_free(&idx);
	if (rc) {
		gpt_dataset_close(ds);
		return rc;
	}
	*out = ds;
	return 0;
}

gpt_ds_format gpt_dataset_format(const gpt_dataset *ds) { return ds->format; }
int64_t gpt_dataset_num_docs(const gpt_dataset *ds) { return ds->n_docs; }
int64_t gpt_dataset_num_tokens(const gpt_dataset *ds) { return ds->n_tokens; }
gpt_ds_dtype gpt_dataset_dtype(const gpt_dataset *ds) { return ds->dtype; }
int64_t gpt_dataset_file_bytes(const gpt_dataset *ds) { return (int64_t)(ds->bin.size + ds->idx.size); }

const void *gpt_dataset_doc_data(const gpt_dataset *ds, int64_t i, int64_t *ntokens)
{
	int64_t n = gpt_dataset_doc_len(ds, i);
	*ntokens = n < 0 ? 0 : n;
	if (n < 0)
		return NULL;
	return ds->tokens + (size_t)ds->doc_start[i] * (size_t)ds->item;
}

int64_t gpt_ids_outside(const int32_t *t, int64_t n, int64_t vocab)
{
	for (int64_t k = 0; k < n; k++)
		if (t[k] < 0 || t[k] >= vocab)
			return k;
	return -1;
}

int gpt_dataset_find_outside(const gpt_dataset *ds, int64_t vocab, int64_t *doc, int64_t *token, int32_t *id,
			     gpt_err *err)
{
	*doc = *token = -1;
	*id = 0;
	int32_t *ids = gpt_malloc(65536 * sizeof *ids, "token buffer", err);
	if (!ids)
		return GPT_EINTERNAL;
	int rc = 0;
	for (int64_t d = 0; !rc && *doc < 0 && d < ds->n_docs; d++) {
		int64_t len = gpt_dataset_doc_len(ds, d), k;
		for (int64_t at = 0; !rc && *doc < 0 && at < len; at += k) {
			k = len - at < 65536 ? len - at : 65536;
			rc = gpt_dataset_read(ds, d, at, k, ids, err);
			int64_t bad = rc ? -1 : gpt_ids_outside(ids, k, vocab);
			if (bad >= 0)
				*doc = d, *token = at + bad, *id = ids[bad];
		}
	}
	free(ids);
	return rc;
}

int gpt_dataset_check_ids(const int32_t *t, int64_t n, int64_t vocab, int64_t doc, int64_t start,
			  gpt_err *err)
{
	int64_t k = gpt_ids_outside(t, n, vocab);
	if (k >= 0)
		return gpt_err_set(err, GPT_EDATA,
				   "document %lld, token %lld: id %d is outside the model's vocabulary of %lld; the data was made with a larger vocabulary than Model.vocab_size",
				   (long long)doc, (long long)(start + k), t[k], (long long)vocab);
	return 0;
}

int gpt_dataset_read(const gpt_dataset *ds, int64_t i, int64_t start, int64_t n, int32_t *out, gpt_err *err)
{
	int64_t len;
	const uint8_t *p = gpt_dataset_doc_data(ds, i, &len);
	if (!p)
		return gpt_err_set(err, GPT_EUSAGE, "document %lld does not exist; the dataset has %lld", (long long)i,
				   (long long)ds->n_docs);
	if (start < 0 || n < 0 || start > len || n > len - start)
		return gpt_err_set(err, GPT_EUSAGE, "document %lld: tokens [%lld, %lld) are outside its %lld tokens",
				   (long long)i, (long long)start, (long long)(start + n), (long long)len);
	p += (size_t)start * (size_t)ds->item;
	for (int64_t k = 0; k < n; k++, p += ds->item) {
		switch (ds->dtype) {
		case GPT_DS_UINT8: out[k] = *p; break;
		case GPT_DS_INT8: out[k] = (int8_t)*p; break;
		case GPT_DS_UINT16: { uint16_t v; memcpy(&v, p, 2); out[k] = v; break; }
		case GPT_DS_INT16: { int16_t v; memcpy(&v, p, 2); out[k] = v; break; }
		case GPT_DS_INT32: out[k] = rd32(p); break;
		default: {
			int64_t v;
			memcpy(&v, p, 8);
			if (v < INT32_MIN || v > INT32_MAX)
				return gpt_err_set(err, GPT_EDATA, "document %lld: token %lld is %lld, beyond int32",
						   (long long)i, (long long)(start + k), (long long)v);
			out[k] = (int32_t)v;
		}
		}
	}
	return 0;
}
