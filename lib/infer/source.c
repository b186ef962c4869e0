/* Model sources: a checkpoint, an export bundle read in place, an unpacked
 * bundle directory, or a Hugging Face GPT-2 directory. (Part of lib/infer.) */
#include "infer/infer.h"

#include "ckpt/ckpt.h"

#include <archive.h>
#include <errno.h>
#include <archive_entry.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#define BUNDLE_VERSION 1
#define BUNDLE_MAX_TEXT (64u << 20)

struct gpt_source {
	gpt_source_kind kind;
	char *path;
	gpt_model_shape shape;
	gpt_config cfg;
	int cfg_ok;
	gpt_tokenizer *tok;
	gpt_ckpt *ck;
	gpt_st_file st;
	int st_ok;
	gpt_hf_weights hf;     /* a Hugging Face directory's */
	const char *hf_prefix; /* "transformer." or "" */
	gpt_dtype dtype;       /* of the stored weights */
};

gpt_source_kind gpt_source_kind_of(const gpt_source *src) { return src->kind; }
const gpt_model_shape *gpt_source_shape(const gpt_source *src) { return &src->shape; }
gpt_config *gpt_source_config(gpt_source *src) { return &src->cfg; }
const gpt_tokenizer *gpt_source_tokenizer(const gpt_source *src) { return src->tok; }
gpt_dtype gpt_source_dtype(const gpt_source *src) { return src->dtype; }

void gpt_source_free(gpt_source *src)
{
	if (!src)
		return;
	if (src->ck)
		gpt_ckpt_close(src->ck);
	if (src->st_ok)
		gpt_st_close(&src->st);
	gpt_hf_weights_close(&src->hf);
	if (src->cfg_ok)
		gpt_config_free(&src->cfg);
	gpt_tokenizer_free(src->tok);
	free(src->path);
	free(src);
}

static int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

static int shape_from_config(gpt_source *src, gpt_err *err)
{
	const gpt_config *c = &src->cfg;
	gpt_model_shape *s = &src->shape;
	s->vocab_size = c->model.vocab_size;
	s->padded_vocab = round_up(s->vocab_size, GPT_VOCAB_PAD);
	s->max_pos = c->model.max_position_embeddings;
	s->hidden = c->model.hidden_size;
	s->layers = c->model.num_layers;
	s->heads = c->model.num_attention_heads;
	s->ffn = c->model.ffn_hidden_size > 0 ? c->model.ffn_hidden_size : 4 * s->hidden;
	gpt_param_info *t;
	int64_t n;
	int rc = gpt_param_table(s, &t, &n, err);
	if (rc)
		return gpt_err_prefix(err, "%s: config.yaml", src->path);
	free(t);
	return 0;
}

/* Tokenizer of a model that carries none: bytes for a 257-token vocabulary,
 * else GPT-2's from the default place. */
static int default_tokenizer(gpt_source *src, const char *exe, gpt_err *err)
{
	if (src->shape.vocab_size == 257)
		return gpt_tokenizer_open_bytes(&src->tok, err);
	char dir[PATH_MAX];
	int rc = gpt_vocab_find(exe,
				"run 'make deps' in the gptkit source tree (it installs share/gpt2), or export the "
				"model with its vocabulary (gpt-export --vocab DIR) and generate from the bundle",
				dir, sizeof dir, err);
	if (!rc)
		rc = gpt_tokenizer_open_bpe(&src->tok, dir, err);
	if (rc == GPT_ENOINPUT)
		gpt_err_prefix(err, "%s: its %lld-token model needs the GPT-2 vocabulary", src->path,
			       (long long)src->shape.vocab_size);
	return rc;
}

static int check_tokenizer(gpt_source *src, gpt_err *err)
{
	int32_t n = gpt_tokenizer_vocab_size(src->tok);
	if (n > src->shape.vocab_size)
		return gpt_err_set(err, GPT_EDATA,
				   "%s: the tokenizer has %d tokens but the model only %lld; the model "
				   "was trained with another tokenizer",
				   src->path, (int)n, (long long)src->shape.vocab_size);
	return 0;
}

/* ---- checkpoints ---------------------------------------------------------- */

static int open_ckpt(gpt_source *src, const char *exe, gpt_err *err)
{
	int rc = gpt_ckpt_open(&src->ck, src->path, err);
	if (rc)
		return rc;
	const char *y = gpt_ckpt_config_yaml(src->ck);
	if (!y)
		return gpt_err_set(err, GPT_EDATA, "%s: the checkpoint holds no config.yaml",
				   gpt_ckpt_path(src->ck));
	rc = gpt_config_read_text(&src->cfg, y, strlen(y), "config.yaml", err);
	if (rc)
		return gpt_err_prefix(err, "%s", gpt_ckpt_path(src->ck));
	rc = shape_from_config(src, err);
	if (!rc)
		rc = default_tokenizer(src, exe, err);
	return rc;
}

/* ---- bundles and bundle directories ----------------------------------------- */

static int parse_manifest(gpt_source *src, const char *text, size_t len, json_t **out,
			  gpt_err *err)
{
	json_error_t je;
	json_t *m = json_loadb(text, len, 0, &je);
	json_t *v = json_object_get(m, "version");
	if (!json_is_object(m) || !json_is_integer(v) ||
	    !json_is_string(json_object_get(m, "format")) ||
	    strcmp(json_string_value(json_object_get(m, "format")), "gptkit-bundle") != 0 ||
	    !json_is_object(json_object_get(m, "files"))) {
		json_decref(m);
		return gpt_err_set(err, GPT_EDATA,
				   "%s: manifest.json: expected format \"gptkit-bundle\", a version and "
				   "files; re-export the model with gpt-export", src->path);
	}
	if (json_integer_value(v) > BUNDLE_VERSION) {
		int64_t ver = json_integer_value(v);
		json_decref(m);
		return gpt_err_set(err, GPT_EDATA,
				   "%s: bundle version %lld is newer than this gpt-infer reads (%d); "
				   "upgrade gptkit", src->path, (long long)ver, BUNDLE_VERSION);
	}
	*out = m;
	return 0;
}

/* Checks one file of the bundle against the manifest. */
static int check_file(gpt_source *src, json_t *man, const char *name, const void *p, size_t n,
		      gpt_err *err)
{
	json_t *f = json_object_get(json_object_get(man, "files"), name);
	json_t *b = json_object_get(f, "bytes"), *h = json_object_get(f, "xxh3");
	if (!json_is_integer(b) || !json_is_string(h))
		return gpt_err_set(err, GPT_EDATA, "%s: manifest.json has no size and xxh3 for %s",
				   src->path, name);
	char hex[17];
	gpt_xxh3_hex(gpt_xxh3_64(p, n), hex);
	if ((size_t)json_integer_value(b) != n || strcmp(hex, json_string_value(h)) != 0)
		return gpt_err_set(err, GPT_EDATA,
				   "%s: %s is corrupt: expected %lld bytes with xxh3 %s, found %zu bytes "
				   "with xxh3 %s", src->path, name, (long long)json_integer_value(b),
				   json_string_value(h), n, hex);
	return 0;
}

typedef struct bundle_files {
	char *manifest, *config, *encoder, *merges;
	size_t manifest_len, config_len, encoder_len, merges_len;
	void *model;
	size_t model_len;
} bundle_files;

static void bundle_files_free(bundle_files *b)
{
	free(b->manifest);
	free(b->config);
	free(b->encoder);
	free(b->merges);
	if (b->model)
		munmap(b->model, b->model_len ? b->model_len : 1);
}

/* After the files are gathered: verify, then config, weights, tokenizer. */
static int open_files(gpt_source *src, bundle_files *b, const char *exe, gpt_err *err)
{
	if (!b->manifest || !b->config || !b->model)
		return gpt_err_set(err, GPT_EDATA,
				   "%s: not a gptkit bundle: expected manifest.json, config.yaml and "
				   "model.safetensors in it", src->path);
	json_t *man = NULL;
	int rc = parse_manifest(src, b->manifest, b->manifest_len, &man, err);
	if (rc)
		return rc;
	rc = check_file(src, man, "config.yaml", b->config, b->config_len, err);
	if (!rc)
		rc = check_file(src, man, "model.safetensors", b->model, b->model_len, err);
	if (!rc && b->encoder)
		rc = check_file(src, man, "encoder.json", b->encoder, b->encoder_len, err);
	if (!rc && b->merges)
		rc = check_file(src, man, "vocab.bpe", b->merges, b->merges_len, err);
	const char *dts = json_string_value(json_object_get(man, "dtype"));
	if (!rc && (!dts || gpt_dtype_parse(dts, &src->dtype) ||
		    (src->dtype != GPT_DTYPE_F32 && src->dtype != GPT_DTYPE_BF16 &&
		     src->dtype != GPT_DTYPE_F16 && src->dtype != GPT_DTYPE_I8)))
		rc = gpt_err_set(err, GPT_EDATA, "%s: manifest.json: expected dtype fp32, bf16, fp16 or int8, found \"%s\"",
				 src->path, dts ? dts : "");
	const char *tk = json_string_value(json_object_get(man, "tokenizer"));
	char tkind[16];
	snprintf(tkind, sizeof tkind, "%s", tk ? tk : "");
	json_decref(man);
	if (rc)
		return rc;
	rc = gpt_config_read_text(&src->cfg, b->config, b->config_len, "config.yaml", err);
	if (rc)
		return gpt_err_prefix(err, "%s", src->path);
	rc = shape_from_config(src, err);
	if (rc)
		return rc;
	char name[PATH_MAX];
	snprintf(name, sizeof name, "%s: model.safetensors", src->path);
	rc = gpt_st_open_mapped(&src->st, name, b->model, b->model_len, err);
	b->model = NULL; /* the file owns it now */
	if (rc)
		return rc;
	src->st_ok = 1;
	if (strcmp(tkind, "bytes") == 0)
		return gpt_tokenizer_open_bytes(&src->tok, err);
	if (strcmp(tkind, "gpt2") == 0) {
		if (!b->encoder || !b->merges)
			return gpt_err_set(err, GPT_EDATA,
					   "%s: the manifest names the gpt2 tokenizer but encoder.json "
					   "or vocab.bpe is missing; re-export the model", src->path);
		return gpt_tokenizer_open_bpe_mem(&src->tok, src->path, b->encoder, b->encoder_len,
						  b->merges, b->merges_len, err);
	}
	(void)exe;
	return gpt_err_set(err, GPT_EDATA,
			   "%s: manifest.json: expected tokenizer \"gpt2\" or \"bytes\", found \"%s\"",
			   src->path, tkind);
}

static int read_entry_text(struct archive *a, const char *path, const char *name, size_t size,
			   char **out, size_t *len, gpt_err *err)
{
	if (size > BUNDLE_MAX_TEXT)
		return gpt_err_set(err, GPT_EDATA, "%s: %s is %zu bytes, more than a bundle holds",
				   path, name, size);
	char *p = gpt_malloc(size + 1, name, err);
	if (!p)
		return GPT_EINTERNAL;
	la_ssize_t got = size ? archive_read_data(a, p, size) : 0;
	if (got < 0 || (size_t)got != size) {
		free(p);
		return gpt_err_set(err, GPT_EDATA, "%s: %s: truncated or unreadable: %s", path, name,
				   got < 0 ? archive_error_string(a) : "short read");
	}
	p[size] = 0;
	free(*out);
	*out = p;
	*len = size;
	return 0;
}

/* A file that is no bundle but a kind gpt-infer is often handed: a GGUF
 * file (gpt-export --format gguf's, for llama.cpp), or one safetensors
 * file (of a Hugging Face directory or a checkpoint). An error naming it
 * and what to give instead, or 0. */
static int foreign_file(const gpt_source *src, gpt_err *err)
{
	unsigned char h[9] = {0};
	FILE *fp = fopen(src->path, "rb");
	size_t n = fp ? fread(h, 1, sizeof h, fp) : 0;
	if (fp)
		fclose(fp);
	const char *foreign = gpt_ckpt_foreign(src->path);
	if (foreign)
		return gpt_err_set(err, GPT_EDATA, "%s: %s", src->path, foreign);
	if (n >= 4 && memcmp(h, "GGUF", 4) == 0)
		return gpt_err_set(err, GPT_EDATA,
				   "%s: a GGUF file, which llama.cpp runs and gpt-infer does not read; give "
				   "gpt-infer the checkpoint it was exported from, or a bundle of it "
				   "(gpt-export)", src->path);
	/* safetensors: an 8-byte little-endian header length, then '{' */
	if (n == sizeof h && h[8] == '{' && h[6] == 0 && h[7] == 0)
		return gpt_err_set(err, GPT_EDATA,
				   "%s: a single safetensors file; give the directory that holds it with "
				   "its config.json (Hugging Face) or manifest.json (an unpacked bundle), "
				   "or the checkpoint directory", src->path);
	return 0;
}

static int open_bundle(gpt_source *src, const char *exe, gpt_err *err)
{
	int frc = foreign_file(src, err);
	if (frc)
		return frc;
	struct archive *a = archive_read_new();
	if (!a)
		return gpt_err_set(err, GPT_EINTERNAL, "libarchive: out of memory");
	archive_read_support_filter_all(a);
	archive_read_support_format_tar(a);
	int rc = 0;
	bundle_files b = {0};
	if (archive_read_open_filename(a, src->path, 1 << 16) != ARCHIVE_OK) {
		rc = gpt_err_set(err, GPT_EDATA, "%s: not a readable bundle: %s", src->path,
				 archive_error_string(a));
		goto out;
	}
	struct archive_entry *e;
	int r;
	while (!rc && (r = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
		const char *name = archive_entry_pathname(e);
		int64_t size = archive_entry_size(e);
		if (size < 0 || !archive_entry_size_is_set(e)) {
			rc = gpt_err_set(err, GPT_EDATA, "%s: %s has no size", src->path, name);
			break;
		}
		if (strcmp(name, "manifest.json") == 0)
			rc = read_entry_text(a, src->path, name, (size_t)size, &b.manifest, &b.manifest_len, err);
		else if (strcmp(name, "config.yaml") == 0)
			rc = read_entry_text(a, src->path, name, (size_t)size, &b.config, &b.config_len, err);
		else if (strcmp(name, "encoder.json") == 0)
			rc = read_entry_text(a, src->path, name, (size_t)size, &b.encoder, &b.encoder_len, err);
		else if (strcmp(name, "vocab.bpe") == 0)
			rc = read_entry_text(a, src->path, name, (size_t)size, &b.merges, &b.merges_len, err);
		else if (strcmp(name, "model.safetensors") == 0 && !b.model) {
			/* anonymous memory, so the safetensors reader can own and unmap it */
			size_t n = (size_t)size;
			void *p = mmap(NULL, n ? n : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (p == MAP_FAILED) {
				rc = gpt_err_nomem(err, n, "model.safetensors");
				break;
			}
			b.model = p;
			b.model_len = n;
			size_t got = 0;
			while (got < n) {
				la_ssize_t k = archive_read_data(a, (char *)p + got, n - got);
				if (k <= 0)
					break;
				got += (size_t)k;
			}
			if (got != n)
				rc = gpt_err_set(err, GPT_EDATA, "%s: model.safetensors: truncated (%zu of %zu bytes): %s",
						 src->path, got, n, archive_error_string(a) ? archive_error_string(a) : "short read");
		}
	}
	if (!rc && r != ARCHIVE_EOF)
		rc = gpt_err_set(err, GPT_EDATA, "%s: corrupt bundle: %s; export it again", src->path,
				 archive_error_string(a));
	if (!rc)
		rc = open_files(src, &b, exe, err);
out:
	bundle_files_free(&b);
	archive_read_free(a);
	return rc;
}

static int read_dir_file(const char *dir, const char *name, int need, char **out, size_t *len,
			 gpt_err *err)
{
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s/%s", dir, name);
	if (!need && !gpt_path_exists(p))
		return 0;
	return gpt_file_read_all(p, 0, out, len, err);
}

static int open_dir(gpt_source *src, const char *exe, gpt_err *err)
{
	bundle_files b = {0};
	int rc = read_dir_file(src->path, "manifest.json", 1, &b.manifest, &b.manifest_len, err);
	if (!rc)
		rc = read_dir_file(src->path, "config.yaml", 1, &b.config, &b.config_len, err);
	if (!rc)
		rc = read_dir_file(src->path, "encoder.json", 0, &b.encoder, &b.encoder_len, err);
	if (!rc)
		rc = read_dir_file(src->path, "vocab.bpe", 0, &b.merges, &b.merges_len, err);
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s/model.safetensors", src->path);
	/* mapped, not read: the safetensors reader takes the mapping over */
	int fd = rc ? -1 : open(p, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (!rc && fd < 0)
		rc = gpt_err_errno_read(err, errno, "%s", p);
	else if (!rc && fstat(fd, &st) != 0)
		rc = gpt_err_errno(err, GPT_EIO, errno, "%s", p);
	if (!rc) {
		b.model_len = (size_t)st.st_size;
		b.model = mmap(NULL, b.model_len ? b.model_len : 1, PROT_READ, MAP_PRIVATE, fd, 0);
		if (b.model == MAP_FAILED) {
			b.model = NULL;
			rc = gpt_err_errno(err, GPT_EIO, errno, "%s: mmap", p);
		}
	}
	if (fd >= 0)
		close(fd);
	if (!rc)
		rc = open_files(src, &b, exe, err);
	bundle_files_free(&b);
	return rc;
}

/* ---- Hugging Face GPT-2 ------------------------------------------------------ */

/* A Hugging Face GPT-2 directory, checked as gpt-ckpt-merge --from-hf
 * checks it. */
static int open_hf(gpt_source *src, const char *exe, gpt_err *err)
{
	int rc = gpt_hf_open(src->path, &src->shape, &src->hf, &src->hf_prefix, err);
	if (rc)
		return rc;
	src->cfg.model.vocab_size = src->shape.vocab_size;
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s/vocab.json", src->path);
	if (gpt_path_exists(p))
		return gpt_tokenizer_open_bpe(&src->tok, src->path, err);
	return default_tokenizer(src, exe, err);
}

int gpt_source_open(gpt_source **out, const char *path, const char *exe, gpt_err *err)
{
	*out = NULL;
	gpt_source *src = gpt_calloc(1, sizeof *src, "model source", err);
	if (!src)
		return GPT_EINTERNAL;
	src->path = gpt_strdup(path, err);
	int rc = src->path ? gpt_config_init(&src->cfg, err) : GPT_EINTERNAL;
	src->cfg_ok = rc == 0;
	struct stat st;
	char p[PATH_MAX];
	if (!rc && stat(path, &st) != 0)
		rc = gpt_err_errno_read(err, errno, "%s", path);
	if (!rc && S_ISDIR(st.st_mode)) {
		snprintf(p, sizeof p, "%s/config.json", path);
		if (gpt_path_exists(p)) {
			src->kind = GPT_SOURCE_HF;
			rc = open_hf(src, exe, err);
		} else {
			snprintf(p, sizeof p, "%s/manifest.json", path);
			if (gpt_path_exists(p)) {
				src->kind = GPT_SOURCE_DIR;
				rc = open_dir(src, exe, err);
			} else {
				src->kind = GPT_SOURCE_CKPT;
				rc = open_ckpt(src, exe, err);
			}
		}
	} else if (!rc) {
		src->kind = GPT_SOURCE_BUNDLE;
		rc = open_bundle(src, exe, err);
	}
	if (!rc)
		rc = check_tokenizer(src, err);
	if (rc) {
		gpt_source_free(src);
		return rc;
	}
	*out = src;
	return 0;
}

/* ---- weights ----------------------------------------------------------------- */

static int read_hf(gpt_source *src, const gpt_param_info *p, float *dst, gpt_err *err)
{
	char name[128];
	int conv;
	if (gpt_hf_param_name(p, src->hf_prefix, name, sizeof name, &conv))
		return gpt_err_set(err, GPT_EINTERNAL, "%s: no Hugging Face name", p->name);
	const gpt_st_file *f; /* the shard holding it (gpt_hf_open checked there is one) */
	if (!gpt_hf_find(&src->hf, name, &f))
		return gpt_err_set(err, GPT_EINTERNAL, "%s: no tensor '%s'", src->path, name);
	const gpt_model_shape *s = &src->shape;
	if (strcmp(p->name, "wte") == 0) {
		/* the padding rows past the vocabulary are zero */
		int64_t sh[2] = {s->vocab_size, s->hidden};
		memset(dst, 0, (size_t)p->numel * sizeof *dst);
		return gpt_st_read_f32(f, name, 2, sh, dst, err);
	}
	if (!conv) {
		int64_t n = p->numel;
		return gpt_st_read_f32(f, name, p->ndim == 2 && strcmp(p->name, "wpe") ? 1 : p->ndim,
				       p->ndim == 2 && strcmp(p->name, "wpe") ? &n : p->shape, dst, err);
	}
	/* Conv1D: [in, out]; ours is [out, in] (qkv: [3, C, C] = [3C, C]) */
	int64_t out = p->numel / p->shape[p->ndim - 1], in = p->shape[p->ndim - 1];
	int64_t sh[2] = {in, out};
	float *tmp = gpt_malloc((size_t)p->numel * sizeof *tmp, "weight transpose", err);
	if (!tmp)
		return GPT_EINTERNAL;
	int rc = gpt_st_read_f32(f, name, 2, sh, tmp, err);
	for (int64_t i = 0; !rc && i < in; i++)
		for (int64_t o = 0; o < out; o++)
			dst[o * in + i] = tmp[i * out + o];
	free(tmp);
	return rc;
}

int gpt_source_read(void *ctx, const gpt_param_info *p, float *dst, gpt_err *err)
{
	gpt_source *src = ctx;
	switch (src->kind) {
	case GPT_SOURCE_CKPT: {
		gpt_box box = gpt_box_full(p->ndim, p->shape);
		return gpt_ckpt_read_box(src->ck, p->name, GPT_DTYPE_F32, p->ndim, p->shape, &box, dst,
					 err);
	}
	case GPT_SOURCE_HF: return read_hf(src, p, dst, err);
	default: return gpt_st_read_f32(&src->st, p->name, p->ndim, p->shape, dst, err);
	}
}

/* The weights' shapes against the config's model, before the decoder sizes
 * its buffers by the config: a config.yaml that names a larger model than
 * the weights hold is an error, not a huge allocation. (Hugging Face
 * directories name and lay out their tensors otherwise; read_hf checks
 * them one by one.) */
static int check_shapes(const gpt_source *src, gpt_err *err)
{
	if (src->kind == GPT_SOURCE_HF)
		return 0;
	gpt_param_info *t;
	int64_t n;
	int rc = gpt_param_table(&src->shape, &t, &n, err);
	for (int64_t i = 0; !rc && i < n; i++) {
		const gpt_param_info *p = &t[i];
		int nd = -1;
		const int64_t *shape = NULL;
		if (src->kind == GPT_SOURCE_CKPT) {
			int nt = gpt_ckpt_tensor_count(src->ck);
			const char *name;
			gpt_dtype dt;
			for (int k = 0; k < nt; k++)
				if (!gpt_ckpt_tensor_info(src->ck, k, &name, &dt, &nd, &shape) &&
				    strcmp(name, p->name) == 0)
					break;
				else
					nd = -1;
		} else {
			const gpt_st_tensor *st = gpt_st_find(&src->st, p->name);
			if (st) {
				nd = st->ndim;
				shape = st->shape;
			}
		}
		if (nd < 0)
			rc = gpt_err_set(err, GPT_EDATA, "%s: no tensor '%s', which the model of its "
					 "config.yaml has", src->path, p->name);
		else if (nd != p->ndim || memcmp(shape, p->shape, sizeof(int64_t) * (size_t)nd) != 0) {
			char a[128] = "", b[128] = "";
			for (int d = 0; d < nd; d++)
				snprintf(a + strlen(a), sizeof a - strlen(a), "%s%lld", d ? ", " : "",
					 (long long)shape[d]);
			for (int d = 0; d < p->ndim; d++)
				snprintf(b + strlen(b), sizeof b - strlen(b), "%s%lld", d ? ", " : "",
					 (long long)p->shape[d]);
			rc = gpt_err_set(err, GPT_EDATA, "%s: tensor '%s' has shape [%s] but config.yaml "
					 "gives [%s]; the config and the weights disagree", src->path,
					 p->name, a, b);
		}
	}
	free(t);
	return rc;
}

int gpt_source_load(gpt_source *src, gpt_infer_model *m, gpt_dtype dtype, int threads,
		    gpt_err *err)
{
	int rc = check_shapes(src, err);
	if (!rc)
		rc = gpt_infer_model_init(m, &src->shape, dtype, threads, gpt_source_read, src, err);
	if (!rc && (src->kind == GPT_SOURCE_BUNDLE || src->kind == GPT_SOURCE_DIR)) {
		rc = gpt_infer_load_quant(m, &src->st, err);
		if (rc)
			gpt_infer_model_free(m);
	}
	return rc;
}
