/* Loading a byte-level BPE vocabulary (OpenAI or Hugging Face file names),
 * building its lookup tables, and the byte tokenizer. */
#include "text/tok_internal.h"

#include <errno.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Unicode White_Space spelled out: PCRE2's \s differs from it (U+0085). */
#define WS "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
static const char gpt2_pattern[] =
	"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+|[" WS "]+(?![^" WS "])|[" WS "]+";

int gpt_ids_reserve(gpt_ids *v, int64_t extra, gpt_err *err)
{
	if (v->len + extra <= v->cap)
		return 0;
	int64_t cap = v->cap ? v->cap : 256;
	while (cap < v->len + extra)
		cap *= 2;
	int32_t *p = gpt_realloc(v->data, (size_t)cap * sizeof *p, "token ids", err);
	if (!p)
		return GPT_EINTERNAL;
	v->data = p;
	v->cap = cap;
	return 0;
}

void gpt_ids_free(gpt_ids *v)
{
	free(v->data);
	v->data = NULL;
	v->len = v->cap = 0;
}

static uint64_t pow2_at_least(uint64_t n)
{
	uint64_t c = 16;
	while (c < n)
		c <<= 1;
	return c;
}

int32_t gpt_tok_lookup_h(const gpt_tokenizer *t, const uint8_t *p, size_t n, uint64_t h)
{
	uint64_t tag = h >> 32;
	for (uint64_t i = h;; i++) {
		uint64_t v = t->tok_slots[i & t->tok_mask];
		if (v == 0)
			return -1;
		if (v >> 32 != tag)
			continue;
		int32_t id = (int32_t)(uint32_t)v - 1;
		if ((size_t)(t->off[id + 1] - t->off[id]) == n && memcmp(t->bytes + t->off[id], p, n) == 0)
			return id;
	}
}

int32_t gpt_tok_lookup(const gpt_tokenizer *t, const uint8_t *p, size_t n)
{
	return gpt_tok_lookup_h(t, p, n, gpt_xxh3_64(p, n));
}

static void tok_insert(gpt_tokenizer *t, int32_t id)
{
	const uint8_t *p = t->bytes + t->off[id];
	size_t n = (size_t)(t->off[id + 1] - t->off[id]);
	uint64_t h = gpt_xxh3_64(p, n);
	for (uint64_t i = h;; i++) {
		uint64_t *s = &t->tok_slots[i & t->tok_mask];
		if (*s == 0) {
			*s = (h >> 32) << 32 | ((uint64_t)id + 1);
			return;
		}
	}
}

static void pair_insert(gpt_tokenizer *t, int32_t a, int32_t b, int32_t id)
{
	uint64_t key = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
	uint64_t h = (key * 0x9E3779B97F4A7C15ull) >> 20;
	for (;; h++) {
		gpt_pair_slot *s = &t->pairs[h & t->pair_mask];
		if (s->key == key)
			return;
		if (s->key == 0) {
			s->key = key;
			s->rank = t->rank[id];
			s->id = id;
			return;
		}
	}
}

void gpt_tokenizer_free(gpt_tokenizer *t)
{
	if (!t)
		return;
	free(t->bytes);
	free(t->off);
	free(t->rank);
	free(t->tok_slots);
	free(t->pairs);
	if (t->re)
		pcre2_code_free(t->re);
	free(t);
}

gpt_tok_kind gpt_tokenizer_kind(const gpt_tokenizer *t) { return t->kind; }
int32_t gpt_tokenizer_vocab_size(const gpt_tokenizer *t) { return t->n; }
int32_t gpt_tokenizer_eot(const gpt_tokenizer *t) { return t->eot; }

const uint8_t *gpt_tokenizer_token(const gpt_tokenizer *t, int32_t id, size_t *len)
{
	if (id < 0 || id >= t->n) {
		*len = 0;
		return NULL;
	}
	*len = (size_t)(t->off[id + 1] - t->off[id]);
	return t->bytes + t->off[id];
}

int gpt_tokenizer_open_bytes(gpt_tokenizer **out, gpt_err *err)
{
	*out = NULL;
	gpt_tokenizer *t = gpt_calloc(1, sizeof *t, "byte tokenizer", err);
	if (!t)
		return GPT_EINTERNAL;
	t->kind = GPT_TOK_BYTES;
	t->n = 257;
	t->eot = 256;
	size_t eot_len = strlen(GPT_TEXT_EOT);
	t->bytes = gpt_malloc(256 + eot_len, "byte tokenizer", err);
	t->off = gpt_malloc(258 * sizeof *t->off, "byte tokenizer", err);
	if (!t->bytes || !t->off) {
		gpt_tokenizer_free(t);
		return GPT_EINTERNAL;
	}
	for (int i = 0; i < 256; i++) {
		t->bytes[i] = (uint8_t)i;
		t->off[i] = i;
		t->byte_id[i] = i;
	}
	memcpy(t->bytes + 256, GPT_TEXT_EOT, eot_len);
	t->off[256] = 256;
	t->off[257] = 256 + (int64_t)eot_len;
	*out = t;
	return 0;
}

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves,
 * the others for U+0100 upwards in byte order. Fills the inverse map. */
static void byte_alphabet(int32_t cp_to_byte[324])
{
	for (int i = 0; i < 324; i++)
		cp_to_byte[i] = -1;
	int n = 0;
	for (int b = 0; b < 256; b++) {
		int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
		if (printable)
			cp_to_byte[b] = b;
		else
			cp_to_byte[256 + n++] = b;
	}
}

/* Decodes a vocabulary string (UTF-8 over the byte alphabet) into raw bytes;
 * returns the length, or -1 if a character is outside the alphabet. */
static long alphabet_decode(const int32_t cp_to_byte[324], const char *s, size_t n, uint8_t *out)
{
	long len = 0;
	for (size_t i = 0; i < n;) {
		uint8_t c = (uint8_t)s[i];
		uint32_t cp;
		if (c < 0x80) {
			cp = c;
			i += 1;
		} else if ((c & 0xE0) == 0xC0 && i + 1 < n) {
			cp = ((uint32_t)(c & 0x1F) << 6) | ((uint8_t)s[i + 1] & 0x3F);
			i += 2;
		} else {
			return -1;
		}
		if (cp >= 324 || cp_to_byte[cp] < 0)
			return -1;
		out[len++] = (uint8_t)cp_to_byte[cp];
	}
	return len;
}

static int has_pair(const char *dir, const char *a, const char *b)
{
	char p1[PATH_MAX], p2[PATH_MAX];
	snprintf(p1, sizeof p1, "%s/%s", dir, a);
	snprintf(p2, sizeof p2, "%s/%s", dir, b);
	return access(p1, R_OK) == 0 && access(p2, R_OK) == 0;
}

#define HOWTO_VOCAB "run 'make deps' in the gptkit source tree (it installs share/gpt2), or pass --vocab DIR with encoder.json + vocab.bpe (or vocab.json + merges.txt, or gpt2-vocab.json + gpt2-merges.txt)"

/* The names the two files go by: OpenAI's, Hugging Face's, and those of
 * Megatron-LM's examples and PaddleFleetX's downloads. */
static const char *const bpe_names[][2] = {
	{"encoder.json", "vocab.bpe"},
	{"vocab.json", "merges.txt"},
	{"gpt2-vocab.json", "gpt2-merges.txt"},
};

static int parse_encoder(gpt_tokenizer *t, const char *path, const char *text, size_t len, gpt_err *err)
{
	int rc = 0;
	json_error_t je;
	json_t *root = json_loadb(text, len, 0, &je);
	if (!root)
		return gpt_err_set(err, GPT_EDATA, "%s:%d: not valid JSON: %s; fetch the file again", path,
				   je.line, je.text);
	if (!json_is_object(root)) {
		rc = gpt_err_set(err, GPT_EDATA, "%s: expected a JSON object of token -> id", path);
		goto out;
	}
	size_t n = json_object_size(root);
	int32_t max_id = -1;
	const char *key;
	json_t *val;
	json_object_foreach(root, key, val) {
		json_int_t id = json_is_integer(val) ? json_integer_value(val) : -1;
		if (id < 0 || id >= 1 << 24) {
			rc = gpt_err_set(err, GPT_EDATA, "%s: token '%s': expected an id in [0, 16777216)", path, key);
			goto out;
		}
		if (id > max_id)
			max_id = (int32_t)id;
	}
	if ((size_t)max_id + 1 != n) {
		rc = gpt_err_set(err, GPT_EDATA, "%s: %zu tokens but the largest id is %d; expected ids 0..%zu without gaps",
				 path, n, max_id, n - 1);
		goto out;
	}
	t->n = (int32_t)n;
	size_t total = 0;
	json_object_foreach(root, key, val) total += strlen(key);
	char **str = gpt_calloc(n, sizeof *str, "vocabulary", err);
	size_t *slen = gpt_calloc(n, sizeof *slen, "vocabulary", err);
	t->bytes = gpt_malloc(total + 1, "vocabulary", err);
	t->off = gpt_malloc((n + 1) * sizeof *t->off, "vocabulary", err);
	if (!str || !slen || !t->bytes || !t->off) {
		free(str);
		free(slen);
		rc = GPT_EINTERNAL;
		goto out;
	}
	json_object_foreach(root, key, val) {
		int32_t id = (int32_t)json_integer_value(val);
		if (str[id]) {
			rc = gpt_err_set(err, GPT_EDATA, "%s: id %d is given to both '%s' and '%s'", path, id, str[id], key);
			break;
		}
		str[id] = (char *)key;
		slen[id] = strlen(key);
	}
	int32_t cp_to_byte[324];
	byte_alphabet(cp_to_byte);
	int64_t off = 0;
	t->eot = -1;
	for (int32_t id = 0; !rc && id < t->n; id++) {
		t->off[id] = off;
		if (strcmp(str[id], GPT_TEXT_EOT) == 0) {
			t->eot = id;
			memcpy(t->bytes + off, str[id], slen[id]);
			off += (int64_t)slen[id];
			continue;
		}
		long blen = alphabet_decode(cp_to_byte, str[id], slen[id], t->bytes + off);
		if (blen <= 0)
			rc = gpt_err_set(err, GPT_EDATA, "%s: token %d '%s' is not in GPT-2's byte alphabet", path, id, str[id]);
		else
			off += blen;
	}
	t->off[t->n] = off;
	free(str);
	free(slen);
out:
	json_decref(root);
	return rc;
}

typedef int (*vocab_parser)(gpt_tokenizer *t, const char *path, const char *text, size_t len,
			    gpt_err *err);

/* Reads a vocabulary file whole and parses it from memory (json_load_file
 * reads a byte at a time). */
static int load_file(gpt_tokenizer *t, const char *path, vocab_parser parse, gpt_err *err)
{
	char *text;
	size_t len;
	int rc = gpt_file_read_all(path, 0, &text, &len, err);
	if (rc)
		return rc;
	rc = parse(t, path, text, len, err);
	free(text);
	return rc;
}

static int build_tables(gpt_tokenizer *t, const char *enc_path, gpt_err *err)
{
	t->tok_mask = pow2_at_least((uint64_t)t->n * 4) - 1;
	t->tok_slots = gpt_calloc(t->tok_mask + 1, sizeof *t->tok_slots, "vocabulary index", err);
	t->rank = gpt_malloc((size_t)t->n * sizeof *t->rank, "vocabulary ranks", err);
	if (!t->tok_slots || !t->rank)
		return GPT_EINTERNAL;
	for (int i = 0; i < 256; i++)
		t->byte_id[i] = -1;
	for (int32_t id = 0; id < t->n; id++) {
		t->rank[id] = INT32_MAX;
		if (id == t->eot)
			continue;
		if (gpt_tok_lookup(t, t->bytes + t->off[id], (size_t)(t->off[id + 1] - t->off[id])) >= 0)
			return gpt_err_set(err, GPT_EDATA, "%s: token %d repeats the bytes of an earlier token", enc_path, id);
		tok_insert(t, id);
		if (t->off[id + 1] - t->off[id] == 1)
			t->byte_id[t->bytes[t->off[id]]] = id;
	}
	for (int i = 0; i < 256; i++)
		if (t->byte_id[i] < 0)
			return gpt_err_set(err, GPT_EDATA, "%s: no token for the byte 0x%02x; a byte-level vocabulary has all 256",
					   enc_path, i);
	return 0;
}

/* Reads the merges: each line "A B" makes the token A+B with rank = its line. */
static int parse_merges(gpt_tokenizer *t, const char *path, const char *text, size_t len, gpt_err *err)
{
	int rc = 0;
	int32_t cp_to_byte[324];
	byte_alphabet(cp_to_byte);
	uint8_t buf[1024];
	int32_t rank = 0;
	long line = 0;
	for (const char *p = text; !rc && p < text + len;) {
		const char *eol = memchr(p, '\n', (size_t)(text + len - p));
		if (!eol)
			eol = text + len;
		line++;
		size_t ll = (size_t)(eol - p);
		if (ll && p[ll - 1] == '\r')
			ll--;
		if (ll == 0 || (line == 1 && p[0] == '#')) {
			p = eol + 1;
			continue;
		}
		const char *sp = memchr(p, ' ', ll);
		if (!sp || sp == p || sp == p + ll - 1 || ll > sizeof buf) {
			rc = gpt_err_set(err, GPT_EDATA, "%s:%ld: expected 'LEFT RIGHT', found '%.*s'", path, line,
					 (int)(ll > 80 ? 80 : ll), p);
			break;
		}
		long a = alphabet_decode(cp_to_byte, p, (size_t)(sp - p), buf);
		long b = a > 0 ? alphabet_decode(cp_to_byte, sp + 1, (size_t)(p + ll - sp - 1), buf + a) : -1;
		int32_t id = b > 0 ? gpt_tok_lookup(t, buf, (size_t)(a + b)) : -1;
		if (id < 0) {
			rc = gpt_err_set(err, GPT_EDATA, "%s:%ld: the merge '%.*s' makes no token of the vocabulary", path,
					 line, (int)(ll > 80 ? 80 : ll), p);
			break;
		}
		if (t->rank[id] == INT32_MAX)
			t->rank[id] = rank;
		rank++;
		p = eol + 1;
	}
	return rc;
}

/* Every way a merge result splits into two tokens becomes a pair entry, so
 * that merging never needs to look at bytes (tiktoken's rule: a pair merges
 * when its concatenation is a token). */
static int build_pairs(gpt_tokenizer *t, gpt_err *err)
{
	uint64_t count = 0;
	for (int32_t id = 0; id < t->n; id++)
		if (t->rank[id] != INT32_MAX)
			count += (uint64_t)(t->off[id + 1] - t->off[id] - 1);
	t->pair_mask = pow2_at_least(count + count / 4 + 16) - 1; /* most splits are not pairs */
	t->pairs = gpt_calloc(t->pair_mask + 1, sizeof *t->pairs, "merge table", err);
	if (!t->pairs)
		return GPT_EINTERNAL;
	for (int32_t id = 0; id < t->n; id++) {
		if (t->rank[id] == INT32_MAX)
			continue;
		const uint8_t *p = t->bytes + t->off[id];
		size_t n = (size_t)(t->off[id + 1] - t->off[id]);
		for (size_t k = 1; k < n; k++) {
			int32_t a = gpt_tok_lookup(t, p, k), b = a >= 0 ? gpt_tok_lookup(t, p + k, n - k) : -1;
			if (b >= 0)
				pair_insert(t, a, b, id);
		}
	}
	return 0;
}

static int compile_pattern(gpt_tokenizer *t, gpt_err *err)
{
	int ec;
	PCRE2_SIZE eo;
	t->re = pcre2_compile((PCRE2_SPTR)gpt2_pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_NO_UTF_CHECK, &ec,
			      &eo, NULL);
	if (!t->re) {
		PCRE2_UCHAR msg[256];
		pcre2_get_error_message(ec, msg, sizeof msg);
		return gpt_err_set(err, GPT_EINTERNAL, "GPT-2 pattern, offset %zu: %s", (size_t)eo, (char *)msg);
	}
	t->jit = pcre2_jit_compile(t->re, PCRE2_JIT_COMPLETE) == 0;
	return 0;
}

int gpt_vocab_pair(const char *dir, const char **encoder, const char **merges)
{
	for (size_t i = 0; i < sizeof bpe_names / sizeof bpe_names[0]; i++)
		if (has_pair(dir, bpe_names[i][0], bpe_names[i][1])) {
			*encoder = bpe_names[i][0];
			*merges = bpe_names[i][1];
			return 0;
		}
	return -1;
}

int gpt_tokenizer_open_bpe(gpt_tokenizer **out, const char *dir, gpt_err *err)
{
	*out = NULL;
	const char *enc_name = NULL, *merges_name = NULL;
	if (gpt_vocab_pair(dir, &enc_name, &merges_name)) {
		struct stat st;
		if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode)) {
			/* Megatron's --vocab-file and --merge-file name files */
			char *copy = gpt_strdup(dir, err);
			int rc = copy ? gpt_err_set(err, GPT_EUSAGE,
						    "%s: a file, where the directory holding the vocabulary files is "
						    "expected: pass --vocab %s",
						    dir, dirname(copy))
				      : GPT_EINTERNAL;
			free(copy);
			return rc;
		}
		return gpt_err_set(err, GPT_ENOINPUT, "%s: no GPT-2 vocabulary (encoder.json + vocab.bpe); " HOWTO_VOCAB,
				   dir);
	}
	char enc_path[PATH_MAX], merges_path[PATH_MAX];
	snprintf(enc_path, sizeof enc_path, "%s/%s", dir, enc_name);
	snprintf(merges_path, sizeof merges_path, "%s/%s", dir, merges_name);
	gpt_tokenizer *t = gpt_calloc(1, sizeof *t, "tokenizer", err);
	if (!t)
		return GPT_EINTERNAL;
	t->kind = GPT_TOK_GPT2;
	int rc = load_file(t, enc_path, parse_encoder, err);
	if (!rc)
		rc = build_tables(t, enc_path, err);
	if (!rc)
		rc = load_file(t, merges_path, parse_merges, err);
	if (!rc)
		rc = build_pairs(t, err);
	if (!rc)
		rc = compile_pattern(t, err);
	if (rc) {
		gpt_tokenizer_free(t);
		return rc;
	}
	*out = t;
	return 0;
}

static int holds_vocab(const char *dir)
{
	return has_pair(dir, "encoder.json", "vocab.bpe") || has_pair(dir, "vocab.json", "merges.txt");
}

int gpt_vocab_find(const char *exe_path, const char *howto, char *out, size_t size, gpt_err *err)
{
	char exe[PATH_MAX];
	if (!exe_path || !realpath(exe_path, exe)) {
		ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
		if (n <= 0)
			return gpt_err_errno(err, GPT_EIO, errno, "/proc/self/exe: cannot find the program's directory; pass --vocab DIR");
		exe[n] = 0;
	}
	char *slash = strrchr(exe, '/');
	if (slash)
		*slash = 0;
	static const char *const rel[] = {"../share/gpt2", "../share/gptkit/gpt2"};
	for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
		char cand[PATH_MAX];
		snprintf(cand, sizeof cand, "%s/%s", exe, rel[i]);
		if (holds_vocab(cand)) {
			char *r = realpath(cand, NULL);
			snprintf(out, size, "%s", r ? r : cand);
			free(r);
			return 0;
		}
	}
	return gpt_err_set(err, GPT_ENOINPUT, "no GPT-2 vocabulary in %s/../share/gpt2 or %s/../share/gptkit/gpt2; %s",
			   exe, exe, howto ? howto : HOWTO_VOCAB);
}

int gpt_tokenizer_open_bpe_mem(gpt_tokenizer **out, const char *name, const char *encoder,
			       size_t encoder_len, const char *merges, size_t merges_len, gpt_err *err)
{
	*out = NULL;
	gpt_tokenizer *t = gpt_calloc(1, sizeof *t, "tokenizer", err);
	if (!t)
		return GPT_EINTERNAL;
	t->kind = GPT_TOK_GPT2;
	char enc_name[PATH_MAX], merges_name[PATH_MAX];
	snprintf(enc_name, sizeof enc_name, "%s: encoder.json", name);
	snprintf(merges_name, sizeof merges_name, "%s: vocab.bpe", name);
	int rc = parse_encoder(t, enc_name, encoder, encoder_len, err);
	if (!rc)
		rc = build_tables(t, enc_name, err);
	if (!rc)
		rc = parse_merges(t, merges_name, merges, merges_len, err);
	if (!rc)
		rc = build_pairs(t, err);
	if (!rc)
		rc = compile_pattern(t, err);
	if (rc) {
		gpt_tokenizer_free(t);
		return rc;
	}
	*out = t;
	return 0;
}
