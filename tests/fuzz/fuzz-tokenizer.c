/* Fuzzes the tokenizers on arbitrary bytes: the GPT-2 BPE with the real
 * vocabulary (share/gpt2, when `make deps` installed it) and the byte
 * tokenizer.
 *
 * Checked on every input, for both tokenizers, with and without special
 * tokens: decode(encode(x)) == x; the cut gpt_encode_cut picks leaves the
 * ids unchanged (the halves' ids, concatenated, are the whole's); the input
 * read as int32 ids decodes or is refused with GPT_EDATA, never read out of
 * bounds. The encoders live for the whole run, so their piece caches fill
 * and clear as they would on a long corpus. */
#include "fuzz.h"
#include "text/text.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static gpt_tokenizer *tok[2];
static gpt_encoder *enc[2];
static int ntok;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_init(*argc > 0 ? (*argv)[0] : NULL);
	gpt_err err = {0};
	FUZZ_CHECK(gpt_tokenizer_open_bytes(&tok[0], &err) == 0, "%s", err.msg);
	ntok = 1;
	const char *dir = fuzz_gpt2_dir();
	if (dir) {
		FUZZ_CHECK(gpt_tokenizer_open_bpe(&tok[1], dir, &err) == 0, "%s", err.msg);
		ntok = 2;
	} else {
		fprintf(stderr, "fuzz-tokenizer: no GPT-2 vocabulary in share/gpt2 (set GPT_ROOT or "
				"run 'make deps'); fuzzing the byte tokenizer only\n");
	}
	for (int i = 0; i < ntok; i++)
		FUZZ_CHECK(gpt_encoder_new(&enc[i], tok[i], &err) == 0, "%s", err.msg);
	return 0;
}

static void encode(gpt_encoder *e, const uint8_t *p, size_t n, gpt_ids *ids)
{
	gpt_err err = {0};
	FUZZ_CHECK(gpt_encode(e, p, n, ids, &err) == 0, "encode: %s", err.msg);
}

static void check(int k, const uint8_t *p, size_t n, int specials)
{
	const gpt_tokenizer *t = tok[k];
	gpt_encoder *e = enc[k];
	gpt_err err = {0};
	gpt_encoder_set_specials(e, specials);
	gpt_ids ids = GPT_IDS_INIT;
	encode(e, p, n, &ids);
	int32_t V = gpt_tokenizer_vocab_size(t);
	for (int64_t i = 0; i < ids.len; i++)
		FUZZ_CHECK(ids.data[i] >= 0 && ids.data[i] < V, "id %d outside [0, %d)", ids.data[i], V);
	gpt_buf out = GPT_BUF_INIT;
	FUZZ_CHECK(gpt_decode(t, ids.data, ids.len, &out, &err) == 0, "decode: %s", err.msg);
	FUZZ_CHECK(out.len == n && (n == 0 || memcmp(out.data, p, n) == 0),
		   "tokenizer %d, specials %d: decode(encode(x)) != x (%zu bytes in, %zu out)", k,
		   specials, n, out.len);
	gpt_buf_free(&out);

	/* a cut that gpt_encode_cut allows changes no id */
	size_t target = n ? (size_t)p[0] * n / 256 : 0;
	size_t cut = gpt_encode_cut(t, p, n, target);
	FUZZ_CHECK(cut <= n && (cut == n || cut >= target), "cut %zu for target %zu of %zu", cut,
		   target, n);
	if (cut < n) {
		gpt_ids halves = GPT_IDS_INIT;
		encode(e, p, cut, &halves);
		encode(e, p + cut, n - cut, &halves);
		FUZZ_CHECK(halves.len == ids.len &&
				   memcmp(halves.data, ids.data, (size_t)ids.len * sizeof(int32_t)) == 0,
			   "tokenizer %d: cutting at %zu of %zu changes the ids", k, cut, n);
		gpt_ids_free(&halves);
	}
	gpt_ids_free(&ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	for (int k = 0; k < ntok; k++) {
		check(k, data, size, 1);
		check(k, data, size, 0);
		/* the input as ids: decoded, or refused as GPT_EDATA */
		size_t n = size / 4;
		int32_t *ids = malloc(n ? n * 4 : 1);
		FUZZ_CHECK(ids != NULL, "out of memory");
		memcpy(ids, data, n * 4);
		gpt_buf out = GPT_BUF_INIT;
		gpt_err err = {0};
		int rc = gpt_decode(tok[k], ids, (int64_t)n, &out, &err);
		FUZZ_CHECK(rc == 0 || rc == GPT_EDATA, "decode of arbitrary ids: %d %s", rc, err.msg);
		gpt_buf_free(&out);
		free(ids);
	}
	size_t v = gpt_utf8_valid_prefix(data, size);
	FUZZ_CHECK(v <= size, "valid prefix %zu of %zu", v, size);
	if (v < size)
		FUZZ_CHECK(gpt_utf8_invalid_run(data + v, size - v) > 0,
			   "byte %zu ends the valid prefix but starts no invalid run", v);
	return 0;
}
