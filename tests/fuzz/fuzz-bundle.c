/* Fuzzes the inference bundle reader (gpt_source_open on a gpt-export
 * bundle, read in place through libarchive, or on its unpacked directory),
 * then loads what opens and, for a small model, generates two tokens.
 *
 * The first byte picks the form:
 *  - bit 0 clear: the rest is the bundle file itself (model.tar; bit 2
 *    names it model.tar.gz, which changes nothing for the reader, which
 *    goes by the bytes);
 *  - bit 0 set: the rest is MANIFEST %%%% CONFIG %%%% MODEL [%%%% ENCODER
 *    %%%% MERGES], the members manifest.json, config.yaml,
 *    model.safetensors, encoder.json and vocab.bpe, which the harness packs
 *    into a tar (bit 2: gzip-compressed; bit 3: an unpacked directory
 *    instead). With bit 1 set it first writes each member's true size and
 *    xxh3 into the manifest's "files", so that the fuzzer gets past the
 *    checksums to the config, the weights and the tokenizer. */
#include "fuzz.h"
#include "infer/infer.h"

#include <archive.h>
#include <archive_entry.h>
#include <jansson.h>
#include <sys/stat.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Models up to this many parameters generate (every model that opens is
 * loaded: its weights are in the input, so their size is bounded). */
#define MAX_RUN_PARAMS (1 << 16)

static const char *const member[] = {"manifest.json", "config.yaml", "model.safetensors",
				     "encoder.json", "vocab.bpe"};
static char exe[PATH_MAX];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_init(*argc > 0 ? (*argv)[0] : NULL);
	/* the default GPT-2 vocabulary of a model without one: none here, so
	 * that a bundle is judged by what it carries */
	fuzz_path(exe, sizeof exe, "bin/gpt-infer");
	char p[PATH_MAX];
	fuzz_path(p, sizeof p, "dir");
	FUZZ_CHECK(mkdir(p, 0777) == 0, "%s", p);
	return 0;
}

static char *fix_manifest(const fuzz_part *parts, int n)
{
	json_error_t je;
	json_t *root = json_loadb((const char *)parts[0].p, parts[0].n, 0, &je);
	json_t *files = json_object_get(root, "files");
	if (!json_is_object(files)) {
		json_decref(root);
		return NULL;
	}
	for (int i = 1; i < n; i++) {
		char hex[17];
		gpt_xxh3_hex(gpt_xxh3_64(parts[i].p, parts[i].n), hex);
		json_object_set_new(files, member[i],
				    json_pack("{s:I, s:s}", "bytes", (json_int_t)parts[i].n, "xxh3", hex));
	}
	char *out = json_dumps(root, JSON_PRESERVE_ORDER | JSON_INDENT(1));
	json_decref(root);
	return out;
}

static void write_tar(const char *path, const fuzz_part *parts, int n, int gzip)
{
	struct archive *a = archive_write_new();
	FUZZ_CHECK(a != NULL, "archive_write_new");
	archive_write_set_format_ustar(a);
	if (gzip)
		archive_write_add_filter_gzip(a);
	archive_write_set_bytes_in_last_block(a, 1);
	FUZZ_CHECK(archive_write_open_filename(a, path) == ARCHIVE_OK, "%s", archive_error_string(a));
	for (int i = 0; i < n; i++) {
		struct archive_entry *e = archive_entry_new();
		archive_entry_set_pathname(e, member[i]);
		archive_entry_set_size(e, (la_int64_t)parts[i].n);
		archive_entry_set_filetype(e, AE_IFREG);
		archive_entry_set_perm(e, 0644);
		FUZZ_CHECK(archive_write_header(a, e) == ARCHIVE_OK, "%s", archive_error_string(a));
		if (parts[i].n)
			FUZZ_CHECK(archive_write_data(a, parts[i].p, parts[i].n) == (la_ssize_t)parts[i].n,
				   "%s", archive_error_string(a));
		archive_entry_free(e);
	}
	FUZZ_CHECK(archive_write_close(a) == ARCHIVE_OK, "%s", archive_error_string(a));
	archive_write_free(a);
}

static int64_t param_count(const gpt_model_shape *s)
{
	gpt_param_info *t;
	int64_t n, sum = 0;
	gpt_err err = {0};
	if (gpt_param_table(s, &t, &n, &err))
		return -1;
	for (int64_t i = 0; i < n; i++)
		sum = t[i].numel > INT64_MAX - sum ? INT64_MAX : sum + t[i].numel;
	free(t);
	return sum;
}

static int emit(void *ctx, const gpt_gen_result *r, gpt_err *err)
{
	(void)ctx;
	(void)err;
	FUZZ_CHECK(r->n >= 0 && r->n <= 2, "%lld tokens generated, at most 2 asked", (long long)r->n);
	return 0;
}

static void use(gpt_source *src)
{
	const gpt_model_shape *s = gpt_source_shape(src);
	const gpt_tokenizer *tok = gpt_source_tokenizer(src);
	FUZZ_CHECK(tok != NULL, "an open source without a tokenizer");
	FUZZ_CHECK(gpt_tokenizer_vocab_size(tok) <= s->vocab_size, "tokenizer larger than the model");
	int64_t params = param_count(s);
	FUZZ_SAY("opened: %lld parameters, vocabulary %lld", (long long)params, (long long)s->vocab_size);
	if (params < 0)
		return;
	gpt_infer_model m;
	gpt_err err = {0};
	int rc = gpt_source_load(src, &m, gpt_source_dtype(src), 1, &err);
	FUZZ_SAY("load: %s", rc ? err.msg : "loaded");
	if (rc) {
		FUZZ_CHECK(rc == GPT_EDATA && err.msg[0], "load failed with %d: %s", rc, err.msg);
		return;
	}
	if (params <= MAX_RUN_PARAMS && s->max_pos >= 3) {
		gpt_gen_opts o = {0};
		o.strategy = GPT_DECODE_GREEDY;
		o.sampling = (gpt_sampling){0, 1.0, 1.0, 1.0};
		o.max_dec_len = 2;
		o.num_return_sequences = 1;
		o.num_beams = 1;
		o.eot = gpt_tokenizer_eot(tok);
		o.batch = 1;
		int32_t prompt[1] = {0};
		const int32_t *pp[1] = {prompt};
		int64_t len[1] = {1};
		rc = gpt_generate(&m, &o, 1, pp, len, emit, NULL, &err);
		FUZZ_CHECK(rc == 0, "generation on a loaded model failed: %s", err.msg);
	}
	gpt_infer_model_free(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	int mode = data[0];
	data++;
	size--;
	char path[PATH_MAX];
	fuzz_path(path, sizeof path, mode & 4 ? "model.tar.gz" : "model.tar");
	if (mode & 1) {
		fuzz_part parts[5];
		int n = fuzz_split(data, size, parts, 5);
		char *fixed = mode & 2 ? fix_manifest(parts, n) : NULL;
		if (fixed)
			parts[0] = (fuzz_part){(const uint8_t *)fixed, strlen(fixed)};
		if (mode & 8) {
			fuzz_path(path, sizeof path, "dir");
			for (int i = 0; i < 5; i++) {
				char name[64], p[PATH_MAX];
				snprintf(name, sizeof name, "dir/%s", member[i]);
				fuzz_path(p, sizeof p, name);
				if (i < n)
					fuzz_write(name, parts[i].p, parts[i].n);
				else
					unlink(p);
			}
		} else {
			write_tar(path, parts, n, mode & 4);
		}
		free(fixed);
	} else {
		fuzz_write(mode & 4 ? "model.tar.gz" : "model.tar", data, size);
	}
	gpt_source *src;
	gpt_err err = {0};
	int rc = gpt_source_open(&src, path, exe, &err);
	FUZZ_SAY("open: %s", rc ? err.msg : "opened");
	if (rc) {
		FUZZ_CHECK(src == NULL && err.msg[0], "rc %d without a message", rc);
		return 0;
	}
	FUZZ_CHECK(gpt_source_kind_of(src) == ((mode & 9) == 9 ? GPT_SOURCE_DIR : GPT_SOURCE_BUNDLE),
		   "kind %d", gpt_source_kind_of(src));
	use(src);
	gpt_source_free(src);
	return 0;
}
