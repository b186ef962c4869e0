/* Fuzzes what gpt-export reads to write GGUF (and bundles): the checkpoint's
 * config.yaml, which sets the model shape and the tokenizer, and tensors of
 * the shapes it names.
 *
 * Input: one byte of options, then config.yaml.
 *  - bits 0-1: --dtype fp32, fp16, int8 or bf16 (which GGUF refuses);
 *  - bit 2: the checkpoint holds tensors of the shapes the fuzzed config
 *    names (when the model is small), else those of a fixed tiny model, so
 *    that the config and the tensors disagree;
 *  - bit 3: write a bundle (model.tar) instead, which gpt_source_open must
 *    then read back.
 * A GGUF file written is parsed back: header, every metadata pair, every
 * tensor's dimensions, type and offset, which must lie, aligned, inside the
 * file, and the metadata must give the model's shape. */
#include "ckpt/ckpt.h"
#include "config/config.h"
#include "fuzz.h"
#include "infer/infer.h"
#include "model/model.h"

#include <ftw.h>
#include <sys/stat.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_PARAMS (1 << 18)

static char exe[PATH_MAX], ckdir[PATH_MAX];
static const gpt_model_shape tiny = {.vocab_size = 257, .padded_vocab = 384, .max_pos = 8,
				     .hidden = 4, .layers = 1, .heads = 2, .ffn = 16};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_init(*argc > 0 ? (*argv)[0] : NULL);
	fuzz_path(exe, sizeof exe, "bin/gpt-export"); /* no vocabulary next to it */
	fuzz_path(ckdir, sizeof ckdir, "ck");
	return 0;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* The checkpoint: tensors of shape s with small deterministic values. */
static int save(const gpt_model_shape *s, const char *config, gpt_err *err)
{
	nftw(ckdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	gpt_param_info *t;
	int64_t n;
	int rc = gpt_param_table(s, &t, &n, err);
	FUZZ_CHECK(rc == 0, "table of a valid shape: %s", err->msg);
	gpt_ckpt_piece *p = calloc((size_t)n, sizeof *p);
	float **data = calloc((size_t)n, sizeof *data);
	FUZZ_CHECK(p && data, "out of memory");
	for (int64_t i = 0; i < n; i++) {
		data[i] = malloc((size_t)t[i].numel * sizeof(float));
		FUZZ_CHECK(data[i] != NULL, "out of memory");
		for (int64_t k = 0; k < t[i].numel; k++)
			data[i][k] = (float)((k * 7 + i) % 13 - 6) / 8;
		p[i] = (gpt_ckpt_piece){.tensor = t[i].name, .dtype = GPT_DTYPE_F32, .ndim = t[i].ndim,
					.data = data[i]};
		memcpy(p[i].shape, t[i].shape, sizeof p[i].shape);
		p[i].box = gpt_box_full(t[i].ndim, t[i].shape);
	}
	rc = gpt_ckpt_save(ckdir, 1, p, (int)n, "{\"step\": 1}", config, NULL, 0, NULL, err);
	FUZZ_CHECK(rc == 0, "save: %s", err->msg);
	for (int64_t i = 0; i < n; i++)
		free(data[i]);
	free(data);
	free(p);
	free(t);
	return rc;
}

/* ---- reading GGUF back ---- */

typedef struct rd {
	const uint8_t *p;
	size_t n, at;
} rd;

static uint64_t take(rd *r, size_t k)
{
	FUZZ_CHECK(r->at + k <= r->n, "GGUF: %zu bytes at %zu run past the end (%zu)", k, r->at, r->n);
	uint64_t v = 0;
	memcpy(&v, r->p + r->at, k);
	r->at += k;
	return v;
}

static void skip_str(rd *r, char *out, size_t size)
{
	uint64_t len = take(r, 8);
	FUZZ_CHECK(len <= r->n - r->at, "GGUF: a string of %llu bytes", (unsigned long long)len);
	if (out)
		snprintf(out, size, "%.*s", (int)(len < size ? len : size - 1), (const char *)r->p + r->at);
	r->at += len;
}

static uint64_t value(rd *r, uint32_t type)
{
	static const int sizes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
	FUZZ_CHECK(type <= 12, "GGUF: value type %u", type);
	if (type == 8) {
		skip_str(r, NULL, 0);
		return 0;
	}
	if (type == 9) {
		uint32_t et = (uint32_t)take(r, 4);
		uint64_t n = take(r, 8);
		FUZZ_CHECK(et != 9 && n <= r->n, "GGUF: array of %llu of type %u", (unsigned long long)n, et);
		for (uint64_t i = 0; i < n; i++)
			value(r, et);
		return n;
	}
	return take(r, (size_t)sizes[type]);
}

static void check_gguf(const char *path, const gpt_model_shape *s, int64_t n_table)
{
	char *text;
	size_t n;
	gpt_err err = {0};
	FUZZ_CHECK(gpt_file_read_all(path, 0, &text, &n, &err) == 0, "%s", err.msg);
	rd r = {(const uint8_t *)text, n, 0};
	FUZZ_CHECK(take(&r, 4) == 0x46554747u, "GGUF: bad magic");
	FUZZ_CHECK(take(&r, 4) == 3, "GGUF: not version 3");
	uint64_t nt = take(&r, 8), nkv = take(&r, 8);
	FUZZ_CHECK(nt == (uint64_t)n_table + 1, "GGUF: %llu tensors for a table of %lld",
		   (unsigned long long)nt, (long long)n_table);
	uint64_t align = 32, hidden = 0, vocab = 0;
	for (uint64_t i = 0; i < nkv; i++) {
		char key[128];
		skip_str(&r, key, sizeof key);
		uint32_t type = (uint32_t)take(&r, 4);
		uint64_t v = value(&r, type);
		if (strcmp(key, "general.alignment") == 0)
			align = v;
		else if (strcmp(key, "gpt2.embedding_length") == 0)
			hidden = v;
		else if (strcmp(key, "tokenizer.ggml.tokens") == 0)
			vocab = v;
	}
	FUZZ_CHECK(align == 32 && hidden == (uint64_t)s->hidden && vocab == (uint64_t)s->vocab_size,
		   "GGUF: alignment %llu, embedding_length %llu, %llu tokens for C=%lld V=%lld",
		   (unsigned long long)align, (unsigned long long)hidden, (unsigned long long)vocab,
		   (long long)s->hidden, (long long)s->vocab_size);
	uint64_t *off = calloc(nt, sizeof *off), *bytes = calloc(nt, sizeof *bytes);
	FUZZ_CHECK(off && bytes, "out of memory");
	for (uint64_t i = 0; i < nt; i++) {
		skip_str(&r, NULL, 0);
		uint32_t nd = (uint32_t)take(&r, 4);
		FUZZ_CHECK(nd >= 1 && nd <= 4, "GGUF: tensor %llu has %u dimensions", (unsigned long long)i, nd);
		uint64_t numel = 1;
		for (uint32_t d = 0; d < nd; d++)
			numel *= take(&r, 8);
		uint32_t type = (uint32_t)take(&r, 4);
		FUZZ_CHECK(type == 0 || type == 1 || type == 8, "GGUF: tensor type %u", type);
		bytes[i] = type == 0 ? 4 * numel : type == 1 ? 2 * numel : numel / 32 * 34;
		FUZZ_CHECK(type != 8 || numel % 32 == 0, "GGUF: q8_0 tensor of %llu", (unsigned long long)numel);
		off[i] = take(&r, 8);
		FUZZ_CHECK(off[i] % align == 0, "GGUF: tensor offset %llu unaligned", (unsigned long long)off[i]);
	}
	size_t data0 = (r.at + align - 1) / align * align;
	for (uint64_t i = 0; i < nt; i++)
		FUZZ_CHECK(data0 + off[i] + bytes[i] <= n, "GGUF: tensor %llu ends at %llu, past %zu",
			   (unsigned long long)i, (unsigned long long)(data0 + off[i] + bytes[i]), n);
	free(off);
	free(bytes);
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	int opt = data[0];
	char *config = fuzz_strndup(data + 1, size - 1);
	gpt_err err = {0};

	/* the shape gpt-export will see (it reads the config unresolved) */
	gpt_model_shape s = tiny;
	gpt_config cfg;
	FUZZ_CHECK(gpt_config_init(&cfg, &err) == 0, "%s", err.msg);
	if ((opt & 4) && gpt_config_read_text(&cfg, config, strlen(config), "config.yaml", &err) == 0) {
		gpt_model_shape c = {.vocab_size = cfg.model.vocab_size,
				     .max_pos = cfg.model.max_position_embeddings,
				     .hidden = cfg.model.hidden_size, .layers = cfg.model.num_layers,
				     .heads = cfg.model.num_attention_heads};
		c.padded_vocab = (c.vocab_size + GPT_VOCAB_PAD - 1) / GPT_VOCAB_PAD * GPT_VOCAB_PAD;
		c.ffn = cfg.model.ffn_hidden_size > 0 ? cfg.model.ffn_hidden_size : 4 * c.hidden;
		int64_t np = gpt_param_count(&c);
		if (np > 0 && np <= MAX_PARAMS)
			s = c;
	}
	gpt_config_free(&cfg);
	save(&s, config, &err);

	static const gpt_dtype dtypes[] = {GPT_DTYPE_F32, GPT_DTYPE_F16, GPT_DTYPE_I8, GPT_DTYPE_BF16};
	int bundle = opt & 8;
	char out[PATH_MAX], got[PATH_MAX];
	fuzz_path(out, sizeof out, bundle ? "model.tar" : "model.gguf");
	gpt_export_opts o = {.format = bundle ? GPT_EXPORT_BUNDLE : GPT_EXPORT_GGUF,
			     .dtype = dtypes[opt & 3], .out = out, .vocab = fuzz_gpt2_dir(), .exe = exe};
	int rc = gpt_export(ckdir, &o, got, sizeof got, &err);
	FUZZ_SAY("export: %s", rc ? err.msg : "written");
	if (rc) {
		FUZZ_CHECK(err.msg[0] && rc != GPT_EINTERNAL, "export failed with %d: %s", rc, err.msg);
		free(config);
		return 0;
	}
	/* what was written describes the model the config names */
	gpt_config_init(&cfg, &err);
	FUZZ_CHECK(gpt_config_read_text(&cfg, config, strlen(config), "config.yaml", &err) == 0,
		   "an exported config does not read: %s", err.msg);
	gpt_model_shape want = {.vocab_size = cfg.model.vocab_size,
				.max_pos = cfg.model.max_position_embeddings,
				.hidden = cfg.model.hidden_size, .layers = cfg.model.num_layers,
				.heads = cfg.model.num_attention_heads};
	want.padded_vocab = (want.vocab_size + GPT_VOCAB_PAD - 1) / GPT_VOCAB_PAD * GPT_VOCAB_PAD;
	want.ffn = cfg.model.ffn_hidden_size > 0 ? cfg.model.ffn_hidden_size : 4 * want.hidden;
	gpt_config_free(&cfg);
	FUZZ_CHECK(memcmp(&want, &s, sizeof s) == 0, "exported a model of another shape than saved");
	if (!bundle) {
		gpt_param_info *t;
		int64_t n;
		FUZZ_CHECK(gpt_param_table(&s, &t, &n, &err) == 0, "%s", err.msg);
		free(t);
		check_gguf(out, &s, n);
	} else {
		gpt_source *src;
		rc = gpt_source_open(&src, out, exe, &err);
		FUZZ_CHECK(rc == 0, "an exported bundle does not open: %s", err.msg);
		FUZZ_CHECK(memcmp(gpt_source_shape(src), &s, sizeof s) == 0, "the bundle has another shape");
		gpt_source_free(src);
	}
	free(config);
	return 0;
}
