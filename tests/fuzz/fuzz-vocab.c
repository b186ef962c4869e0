/* Fuzzes the vocabulary readers: encoder.json + vocab.bpe from memory (as a
 * bundle holds them) and from a directory under both spellings (OpenAI's
 * encoder.json + vocab.bpe, Hugging Face's vocab.json + merges.txt).
 *
 * Input: ENCODER %%%% MERGES [%%%% TEXT]. A vocabulary that loads must
 * encode TEXT (else the input itself) to ids that decode back to it, and
 * both readers must agree on whether it loads. */
#include "fuzz.h"
#include "text/text.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_init(*argc > 0 ? (*argv)[0] : NULL);
	return 0;
}

static void check_roundtrip(const gpt_tokenizer *t, const uint8_t *p, size_t n, int specials)
{
	gpt_encoder *e;
	gpt_err err = {0};
	FUZZ_CHECK(gpt_encoder_new(&e, t, &err) == 0, "encoder: %s", err.msg);
	gpt_encoder_set_specials(e, specials);
	gpt_ids ids = GPT_IDS_INIT;
	FUZZ_CHECK(gpt_encode(e, p, n, &ids, &err) == 0, "encode: %s", err.msg);
	gpt_buf out = GPT_BUF_INIT;
	FUZZ_CHECK(gpt_decode(t, ids.data, ids.len, &out, &err) == 0, "decode: %s", err.msg);
	FUZZ_CHECK(out.len == n && (n == 0 || memcmp(out.data, p, n) == 0),
		   "decode(encode(x)) != x: %zu bytes in, %zu out", n, out.len);
	gpt_buf_free(&out);
	gpt_ids_free(&ids);
	gpt_encoder_free(e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_part part[3];
	int np = fuzz_split(data, size, part, 3);
	if (np < 2)
		return 0;
	gpt_err err = {0};
	gpt_tokenizer *t = NULL;
	int rc = gpt_tokenizer_open_bpe_mem(&t, "fuzz", (const char *)part[0].p, part[0].n,
					    (const char *)part[1].p, part[1].n, &err);
	FUZZ_SAY("memory: %s", rc ? err.msg : "loaded");
	FUZZ_CHECK(rc == 0 ? t != NULL : t == NULL && err.msg[0], "open_bpe_mem: rc %d", rc);

	/* the same files from a directory, spelled as OpenAI or Hugging Face */
	int hf = size % 2;
	char enc[PATH_MAX], mrg[PATH_MAX];
	fuzz_path(enc, sizeof enc, hf ? "encoder.json" : "vocab.json");
	fuzz_path(mrg, sizeof mrg, hf ? "vocab.bpe" : "merges.txt");
	unlink(enc);
	unlink(mrg);
	fuzz_write(hf ? "vocab.json" : "encoder.json", part[0].p, part[0].n);
	fuzz_write(hf ? "merges.txt" : "vocab.bpe", part[1].p, part[1].n);
	gpt_tokenizer *t2 = NULL;
	gpt_err err2 = {0};
	int rc2 = gpt_tokenizer_open_bpe(&t2, fuzz_dir, &err2);
	FUZZ_CHECK((rc == 0) == (rc2 == 0), "memory: %d (%s), directory: %d (%s)", rc, err.msg, rc2,
		   err2.msg);
	if (t) {
		FUZZ_CHECK(gpt_tokenizer_vocab_size(t) == gpt_tokenizer_vocab_size(t2), "sizes differ");
		const uint8_t *text = np == 3 ? part[2].p : data;
		size_t tn = np == 3 ? part[2].n : size;
		check_roundtrip(t, text, tn, 1);
		check_roundtrip(t, text, tn, 0);
		int32_t eot = gpt_tokenizer_eot(t);
		size_t len;
		FUZZ_CHECK(eot < 0 || gpt_tokenizer_token(t, eot, &len) != NULL, "eot %d has no bytes", eot);
	}
	gpt_tokenizer_free(t);
	gpt_tokenizer_free(t2);
	return 0;
}
