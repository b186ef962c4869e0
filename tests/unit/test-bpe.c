/* lib/text: the byte tokenizer, UTF-8 runs, and the GPT-2 BPE against a
 * naive reference merge (tiktoken's rule written the obvious way). The
 * GPT-2 part runs when share/gpt2 holds the vocabulary (make deps). */
#include "tap.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "text/tok_internal.h"

static uint64_t rng = 88172645463325252ull;
static uint32_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)rng;
}

static void test_bytes(void)
{
	gpt_err err = {0};
	gpt_tokenizer *t;
	gpt_encoder *e;
	is_int(gpt_tokenizer_open_bytes(&t, &err), 0, "byte tokenizer opens");
	is_int(gpt_tokenizer_vocab_size(t), 257, "257 ids");
	is_int(gpt_tokenizer_eot(t), 256, "end-of-text is 256");
	is_int(gpt_encoder_new(&e, t, &err), 0, "encoder");
	uint8_t all[256];
	for (int i = 0; i < 256; i++)
		all[i] = (uint8_t)i;
	gpt_ids ids = GPT_IDS_INIT;
	gpt_encode(e, all, 256, &ids, &err);
	int same = ids.len == 256;
	for (int i = 0; same && i < 256; i++)
		same = ids.data[i] == i;
	ok(same, "each byte is its own id");
	gpt_buf b = GPT_BUF_INIT;
	int32_t eot = 256;
	is_int(gpt_decode(t, &eot, 1, &b, &err), 0, "decode end-of-text");
	is_str(b.data, "<|endoftext|>", "end-of-text decodes as its text");
	int32_t bad = 257;
	is_int(gpt_decode(t, &bad, 1, &b, &err), GPT_EDATA, "an id out of range is an error");
	gpt_buf_free(&b);
	gpt_ids_free(&ids);
	gpt_encoder_free(e);
	gpt_tokenizer_free(t);
}

static void test_utf8(void)
{
	const uint8_t ok1[] = "a\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80z";
	is_int(gpt_utf8_valid_prefix(ok1, sizeof ok1 - 1), sizeof ok1 - 1, "valid UTF-8 is valid");
	const uint8_t s[] = "ab\xe2\x80" "c";
	is_int(gpt_utf8_valid_prefix(s, 5), 2, "a truncated sequence ends the valid prefix");
	is_int(gpt_utf8_invalid_run(s + 2, 3), 2, "its two bytes form one invalid run");
	const uint8_t sur[] = "\xed\xa0\x80x";
	is_int(gpt_utf8_valid_prefix(sur, 4), 0, "a surrogate is invalid");
	is_int(gpt_utf8_invalid_run(sur, 4), 3, "all three bytes of it");
	const uint8_t over[] = "\xc0\x80\xf4\x90\x80\x80\xf4\x8f\xbf\xbf";
	is_int(gpt_utf8_invalid_run(over, 10), 6, "overlong and above U+10FFFF are invalid, U+10FFFF is not");

	/* What Python's bytes.decode("utf-8", "replace") gives (Hugging Face's
	 * and tiktoken's decode): one U+FFFD a maximal subpart. */
	static const struct {
		const char *in, *want;
	} lossy[] = {
		{"\x80\x80", "\uFFFD\uFFFD"},
		{"\xed\xa0\x80", "\uFFFD\uFFFD\uFFFD"},
		{"\xf0\x9f\x98", "\uFFFD"},
		{"\xe2(\xa1", "\uFFFD(\uFFFD"},
		{"\xc0\x80", "\uFFFD\uFFFD"},
		{"\xff\xfe", "\uFFFD\uFFFD"},
		{"\xf0\x9f\x98\xf0\x9f", "\uFFFD\uFFFD"},
		{"\xf4\x90\x80\x80", "\uFFFD\uFFFD\uFFFD\uFFFD"},
		{"\xe0\x80\xaf", "\uFFFD\uFFFD\uFFFD"},
		{"a\xe2\x80", "a\uFFFD"},
		{"\xf4\x8f\xbf\xbf\xe4\xb8", "\U0010FFFF\uFFFD"},
		{"ok \xc3\xa9", "ok \u00e9"},
	};
	int same = 1;
	for (size_t i = 0; i < sizeof lossy / sizeof lossy[0]; i++) {
		gpt_buf b = GPT_BUF_INIT;
		gpt_err err = {0};
		int rc = gpt_utf8_lossy(lossy[i].in, strlen(lossy[i].in), &b, &err);
		if (rc || b.len != strlen(lossy[i].want) || memcmp(b.data, lossy[i].want, b.len) != 0) {
			diag("case %zu: got '%.*s'", i, (int)b.len, b.data ? b.data : "");
			same = 0;
		}
		gpt_buf_free(&b);
	}
	ok(same, "invalid UTF-8 becomes one U+FFFD a maximal subpart, as Python's errors=replace");
}

/* tiktoken's merge written plainly: bytes as parts, merge the adjacent pair
 * whose concatenation has the lowest rank, leftmost first. */
static void naive_merge(const gpt_tokenizer *t, const uint8_t *p, size_t n, gpt_ids *out)
{
	size_t *start = malloc((n + 1) * sizeof *start), m = n;
	for (size_t i = 0; i <= n; i++)
		start[i] = i;
	for (;;) {
		int32_t best_rank = INT32_MAX;
		size_t best = 0;
		for (size_t i = 0; i + 2 <= m; i++) {
			int32_t id = gpt_tok_lookup(t, p + start[i], start[i + 2] - start[i]);
			if (id >= 0 && t->rank[id] < best_rank) {
				best_rank = t->rank[id];
				best = i;
			}
		}
		if (best_rank == INT32_MAX)
			break;
		memmove(start + best + 1, start + best + 2, (m - best - 1) * sizeof *start);
		m--;
	}
	for (size_t i = 0; i < m; i++) {
		gpt_ids_reserve(out, 1, NULL);
		out->data[out->len++] = gpt_tok_lookup(t, p + start[i], start[i + 1] - start[i]);
	}
	free(start);
}

static int ids_equal(const gpt_ids *a, const gpt_ids *b)
{
	return a->len == b->len && memcmp(a->data, b->data, (size_t)a->len * 4) == 0;
}

static void test_gpt2(const char *dir)
{
	gpt_err err = {0};
	gpt_tokenizer *t;
	gpt_encoder *e;
	if (!ok(gpt_tokenizer_open_bpe(&t, dir, &err) == 0, "GPT-2 vocabulary loads from %s", dir)) {
		diag("%s", err.msg);
		return;
	}
	is_int(gpt_tokenizer_vocab_size(t), 50257, "50257 ids");
	is_int(gpt_tokenizer_eot(t), 50256, "end-of-text is 50256");
	gpt_encoder_new(&e, t, &err);
	gpt_ids ids = GPT_IDS_INIT, ref = GPT_IDS_INIT;
	const char *text = "Hello world<|endoftext|> it's";
	gpt_encode(e, text, strlen(text), &ids, &err);
	int32_t want[] = {15496, 995, 50256, 340, 338};
	ok(ids.len == 5 && memcmp(ids.data, want, sizeof want) == 0, "known ids for 'Hello world<|endoftext|> it's'");
	gpt_encoder_set_specials(e, 0);
	ids.len = 0;
	gpt_encode(e, GPT_TEXT_EOT, strlen(GPT_TEXT_EOT), &ids, &err);
	ok(ids.len > 1, "with specials off, <|endoftext|> is plain text (%lld ids)", (long long)ids.len);
	gpt_encoder_set_specials(e, 1);

	/* Pieces on both sides of the short/long switch, of letters (many
	 * merges) and of arbitrary bytes (invalid UTF-8 included). */
	int agree = 1;
	uint8_t piece[700];
	for (int k = 0; k < 300 && agree; k++) {
		size_t n = 2 + next_rand() % 600;
		for (size_t i = 0; i < n; i++)
			piece[i] = k % 3 ? (uint8_t)("etaoinshrdlucmfw"[next_rand() % 16]) : (uint8_t)next_rand();
		ids.len = ref.len = 0;
		gpt_bpe_merge(t, piece, n, &ids, &err);
		naive_merge(t, piece, n, &ref);
		agree = ids_equal(&ids, &ref);
		if (!agree)
			diag("piece %d of %zu bytes merges differently", k, n);
	}
	ok(agree, "merging equals the naive reference on 300 pieces of 2-601 bytes");

	/* Random byte strings encode and decode back to themselves. */
	int round = 1;
	gpt_buf back = GPT_BUF_INIT;
	uint8_t buf[4096];
	for (int k = 0; k < 200 && round; k++) {
		size_t n = next_rand() % sizeof buf;
		for (size_t i = 0; i < n; i++)
			buf[i] = k % 2 ? (uint8_t)next_rand() : (uint8_t)(" \n'sa1\xc3\xa9\xe4"[next_rand() % 10]);
		ids.len = 0;
		gpt_buf_reset(&back);
		gpt_encode(e, buf, n, &ids, &err);
		gpt_decode(t, ids.data, ids.len, &back, &err);
		round = back.len == n && (n == 0 || memcmp(back.data, buf, n) == 0);
	}
	ok(round, "200 random byte strings decode back to themselves");

	/* More distinct words than the cache holds: results must not change
	 * when the cache is full, cleared, or cold. */
	gpt_buf words = GPT_BUF_INIT;
	for (int k = 0; k < 150000; k++)
		gpt_buf_printf(&words, NULL, " w%xq%c", next_rand(), "aeiou"[k % 5]);
	ids.len = ref.len = 0;
	gpt_encode(e, words.data, words.len, &ids, &err);
	gpt_encode(e, words.data, words.len, &ref, &err);
	ok(ids_equal(&ids, &ref), "a warm cache gives the same ids (%lld)", (long long)ids.len);
	gpt_encoder *cold;
	gpt_encoder_new(&cold, t, &err);
	ref.len = 0;
	gpt_encode(cold, words.data, words.len, &ref, &err);
	ok(ids_equal(&ids, &ref), "a cold encoder gives the same ids");
	gpt_encoder_free(cold);

	/* Cutting where gpt_encode_cut says keeps the ids. */
	const char *mixed = "x  y\n\n z.  'll 12 34\xe2\x80 caf\xc3\xa9 !! <|endoftext|> a\tb   c";
	gpt_buf mix = GPT_BUF_INIT;
	for (int k = 0; k < 2000; k++)
		gpt_buf_append(&mix, mixed + next_rand() % 20, 1 + next_rand() % 30, NULL);
	ids.len = 0;
	gpt_encode(e, mix.data, mix.len, &ids, &err);
	int cuts = 0, kept = 1;
	for (size_t target = 1; target < mix.len && kept; target += 1 + next_rand() % 997) {
		size_t cut = gpt_encode_cut(t, mix.data, mix.len, target);
		if (cut >= mix.len)
			break;
		ref.len = 0;
		gpt_encode(e, mix.data, cut, &ref, &err);
		gpt_encode(e, mix.data + cut, mix.len - cut, &ref, &err);
		kept = ids_equal(&ids, &ref);
		cuts++;
	}
	ok(kept && cuts > 10, "encoding both sides of %d cuts gives the ids of the whole", cuts);
	gpt_buf_free(&mix);
	gpt_buf_free(&words);
	gpt_buf_free(&back);
	gpt_ids_free(&ids);
	gpt_ids_free(&ref);
	gpt_encoder_free(e);
	gpt_tokenizer_free(t);
}

static void test_bad_vocab(void)
{
	gpt_err err = {0};
	gpt_tokenizer *t;
	char dir[] = "/tmp/test-bpe.XXXXXX";
	if (!mkdtemp(dir))
		return;
	is_int(gpt_tokenizer_open_bpe(&t, dir, &err), GPT_ENOINPUT, "an empty directory has no vocabulary");
	ok(strstr(err.msg, "make deps") != NULL, "and the message says how to get one");
	char p1[256], p2[256];
	snprintf(p1, sizeof p1, "%s/encoder.json", dir);
	snprintf(p2, sizeof p2, "%s/vocab.bpe", dir);
	gpt_file_write_atomic(p1, "{\"a\": 0, \"b\": 2}", 16, &err);
	gpt_file_write_atomic(p2, "#version: 0.2\n", 14, &err);
	is_int(gpt_tokenizer_open_bpe(&t, dir, &err), GPT_EDATA, "ids with a gap are malformed");
	ok(strstr(err.msg, "without gaps") != NULL, "named as such: %s", err.msg);
	unlink(p1);
	unlink(p2);
	rmdir(dir);
}

/* The default places: <exe dir>/../share/gpt2, then the installed
 * <exe dir>/../share/gptkit/gpt2. Only the files' presence matters here. */
static void test_vocab_find(void)
{
	gpt_err err = {0};
	char root[] = "/tmp/test-vocab.XXXXXX";
	if (!mkdtemp(root))
		return;
	char p[512], found[512], exe[512];
	snprintf(exe, sizeof exe, "%s/bin/gpt-preprocess", root);
	snprintf(p, sizeof p, "%s/bin", root);
	mkdir(p, 0777);
	gpt_file_write_atomic(exe, "", 0, &err);
	is_int(gpt_vocab_find(exe, NULL, found, sizeof found, &err), GPT_ENOINPUT, "no vocabulary next to the program");
	ok(strstr(err.msg, "make deps") && strstr(err.msg, "--vocab"), "the message says how to get one");
	snprintf(p, sizeof p, "%s/share/gptkit/gpt2", root);
	gpt_mkdir_p(p, &err);
	snprintf(p, sizeof p, "%s/share/gptkit/gpt2/encoder.json", root);
	gpt_file_write_atomic(p, "", 0, &err);
	snprintf(p, sizeof p, "%s/share/gptkit/gpt2/vocab.bpe", root);
	gpt_file_write_atomic(p, "", 0, &err);
	is_int(gpt_vocab_find(exe, NULL, found, sizeof found, &err), 0, "the installed place is found");
	ok(strstr(found, "/share/gptkit/gpt2") != NULL, "as %s", found);
	snprintf(p, sizeof p, "%s/share/gpt2", root);
	gpt_mkdir_p(p, &err);
	snprintf(p, sizeof p, "%s/share/gpt2/vocab.json", root);
	gpt_file_write_atomic(p, "", 0, &err);
	snprintf(p, sizeof p, "%s/share/gpt2/merges.txt", root);
	gpt_file_write_atomic(p, "", 0, &err);
	is_int(gpt_vocab_find(exe, NULL, found, sizeof found, &err), 0, "the source-tree place wins");
	ok(strstr(found, "/share/gpt2") != NULL && !strstr(found, "gptkit"), "as %s", found);
	char cmd[600];
	snprintf(cmd, sizeof cmd, "rm -rf %s", root);
	if (system(cmd) != 0)
		diag("could not remove %s", root);
}

int main(void)
{
	(void)skip_all;
	test_bytes();
	test_utf8();
	test_bad_vocab();
	test_vocab_find();
	const char *root = getenv("GPT_ROOT");
	char dir[1024];
	snprintf(dir, sizeof dir, "%s/share/gpt2", root ? root : ".");
	struct stat st;
	if (stat(dir, &st) == 0)
		test_gpt2(dir);
	else
		diag("no GPT-2 vocabulary in %s (run make deps): BPE tests not run", dir);
	return done_testing();
}
