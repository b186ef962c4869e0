/* Encoding and decoding: special tokens, UTF-8 runs, the GPT-2 pattern
 * through PCRE2, and a per-encoder cache of merged pieces. */
#include "text/tok_internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* Pieces up to this long are cached; longer ones are rare and cheap to
 * miss relative to their merging. */
#define CACHE_PIECE_MAX 64
#define CACHE_SLOTS (1u << 19)
#define CACHE_ENTRIES (CACHE_SLOTS / 2)
#define CACHE_KEY_BYTES ((size_t)8 << 20)
#define CACHE_IDS ((size_t)2 << 20)

typedef struct cache_ent {
	uint64_t hash;
	uint32_t key_off;
	uint16_t key_len;
	uint16_t n_ids;
	uint32_t ids_off;
} cache_ent;

struct gpt_encoder {
	const gpt_tokenizer *t;
	int specials;
	pcre2_match_data *md;
	uint32_t *slots; /* entry index + 1; 0: empty */
	cache_ent *ents;
	uint32_t n_ents;
	uint8_t *keys;
	size_t keys_len;
	int32_t *ids;
	size_t ids_len;
};

int gpt_encoder_new(gpt_encoder **out, const gpt_tokenizer *t, gpt_err *err)
{
	*out = NULL;
	gpt_encoder *e = gpt_calloc(1, sizeof *e, "encoder", err);
	if (!e)
		return GPT_EINTERNAL;
	e->t = t;
	e->specials = 1;
	if (t->kind == GPT_TOK_GPT2) {
		e->md = pcre2_match_data_create_from_pattern(t->re, NULL);
		e->slots = gpt_calloc(CACHE_SLOTS, sizeof *e->slots, "token cache", err);
		e->ents = gpt_malloc(CACHE_ENTRIES * sizeof *e->ents, "token cache", err);
		e->keys = gpt_malloc(CACHE_KEY_BYTES, "token cache", err);
		e->ids = gpt_malloc(CACHE_IDS * sizeof *e->ids, "token cache", err);
		if (!e->md || !e->slots || !e->ents || !e->keys || !e->ids) {
			if (!e->md)
				gpt_err_nomem(err, 0, "regex match data");
			gpt_encoder_free(e);
			return GPT_EINTERNAL;
		}
	}
	*out = e;
	return 0;
}

void gpt_encoder_set_specials(gpt_encoder *e, int specials) { e->specials = specials; }

void gpt_encoder_free(gpt_encoder *e)
{
	if (!e)
		return;
	if (e->md)
		pcre2_match_data_free(e->md);
	free(e->slots);
	free(e->ents);
	free(e->keys);
	free(e->ids);
	free(e);
}

static int push_id(gpt_ids *out, int32_t id, gpt_err *err)
{
	if (out->len == out->cap && gpt_ids_reserve(out, 1, err))
		return GPT_EINTERNAL;
	out->data[out->len++] = id;
	return 0;
}

static void cache_clear(gpt_encoder *e)
{
	memset(e->slots, 0, CACHE_SLOTS * sizeof *e->slots);
	e->n_ents = 0;
	e->keys_len = 0;
	e->ids_len = 0;
}

static void cache_put(gpt_encoder *e, uint64_t h, const uint8_t *p, size_t n, const int32_t *ids, size_t m)
{
	if (e->n_ents == CACHE_ENTRIES || e->keys_len + n > CACHE_KEY_BYTES || e->ids_len + m > CACHE_IDS)
		cache_clear(e);
	cache_ent *c = &e->ents[e->n_ents];
	c->hash = h;
	c->key_off = (uint32_t)e->keys_len;
	c->key_len = (uint16_t)n;
	c->ids_off = (uint32_t)e->ids_len;
	c->n_ids = (uint16_t)m;
	memcpy(e->keys + e->keys_len, p, n);
	memcpy(e->ids + e->ids_len, ids, m * sizeof *ids);
	e->keys_len += n;
	e->ids_len += m;
	for (uint64_t s = h;; s++) {
		uint32_t *slot = &e->slots[s & (CACHE_SLOTS - 1)];
		if (*slot == 0) {
			*slot = ++e->n_ents;
			return;
		}
	}
}

static const cache_ent *cache_get(const gpt_encoder *e, uint64_t h, const uint8_t *p, size_t n)
{
	for (uint64_t s = h;; s++) {
		uint32_t v = e->slots[s & (CACHE_SLOTS - 1)];
		if (v == 0)
			return NULL;
		const cache_ent *c = &e->ents[v - 1];
		if (c->hash == h && c->key_len == n && memcmp(e->keys + c->key_off, p, n) == 0)
			return c;
	}
}

/* One piece: the whole piece if it is a token (most are), else a cached
 * or fresh merge. Only merged pieces are cached, so the cache holds what is
 * expensive and does not fill with common words. */
static int encode_piece(gpt_encoder *e, const uint8_t *p, size_t n, gpt_ids *out, gpt_err *err)
{
	const gpt_tokenizer *t = e->t;
	if (n == 1)
		return push_id(out, t->byte_id[p[0]], err);
	uint64_t h = gpt_xxh3_64(p, n);
	int32_t id = gpt_tok_lookup_h(t, p, n, h);
	if (id >= 0)
		return push_id(out, id, err);
	if (n > CACHE_PIECE_MAX)
		return gpt_bpe_merge(t, p, n, out, err);
	const cache_ent *c = cache_get(e, h, p, n);
	if (c) {
		if (gpt_ids_reserve(out, c->n_ids, err))
			return GPT_EINTERNAL;
		memcpy(out->data + out->len, e->ids + c->ids_off, c->n_ids * sizeof(int32_t));
		out->len += c->n_ids;
		return 0;
	}
	int64_t start = out->len;
	int rc = gpt_bpe_merge(t, p, n, out, err);
	if (!rc)
		cache_put(e, h, p, n, out->data + start, (size_t)(out->len - start));
	return rc;
}

static size_t utf8_char_len(const uint8_t *p, size_t n)
{
	uint8_t c = p[0];
	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF)
		return n >= 2 && (p[1] & 0xC0) == 0x80 ? 2 : 0;
	if (c >= 0xE0 && c <= 0xEF) {
		if (n < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80)
			return 0;
		if ((c == 0xE0 && p[1] < 0xA0) || (c == 0xED && p[1] > 0x9F))
			return 0; /* overlong, surrogate */
		return 3;
	}
	if (c >= 0xF0 && c <= 0xF4) {
		if (n < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80)
			return 0;
		if ((c == 0xF0 && p[1] < 0x90) || (c == 0xF4 && p[1] > 0x8F))
			return 0; /* overlong, above U+10FFFF */
		return 4;
	}
	return 0;
}

size_t gpt_utf8_valid_prefix(const uint8_t *p, size_t n)
{
	size_t i = 0;
	while (i < n) {
		/* ASCII eight bytes at a time: most text is mostly ASCII. */
		while (i + 8 <= n) {
			uint64_t w;
			memcpy(&w, p + i, 8);
			if (w & 0x8080808080808080ull)
				break;
			i += 8;
		}
		if (i >= n)
			break;
		size_t k = utf8_char_len(p + i, n - i);
		if (!k)
			break;
		i += k;
	}
	return i;
}

size_t gpt_utf8_invalid_run(const uint8_t *p, size_t n)
{
	size_t i = 0;
	while (i < n && utf8_char_len(p + i, n - i) == 0)
		i++;
	return i;
}

/* The maximal subpart at p, where no valid character starts: the bytes
 * that begin a well-formed character before it goes wrong, at least one. */
static size_t utf8_maximal_subpart(const uint8_t *p, size_t n)
{
	uint8_t c = p[0], lo = 0x80, hi = 0xBF;
	size_t tail;
	if (c >= 0xC2 && c <= 0xDF) {
		tail = 1;
	} else if (c >= 0xE0 && c <= 0xEF) {
		tail = 2;
		lo = c == 0xE0 ? 0xA0 : 0x80; /* not overlong */
		hi = c == 0xED ? 0x9F : 0xBF; /* not a surrogate */
	} else if (c >= 0xF0 && c <= 0xF4) {
		tail = 3;
		lo = c == 0xF0 ? 0x90 : 0x80; /* not overlong */
		hi = c == 0xF4 ? 0x8F : 0xBF; /* not above U+10FFFF */
	} else {
		return 1;
	}
	size_t k = 1;
	while (k <= tail && k < n && p[k] >= lo && p[k] <= hi) {
		k++;
		lo = 0x80;
		hi = 0xBF;
	}
	return k;
}

int gpt_utf8_lossy(const void *text, size_t n, gpt_buf *out, gpt_err *err)
{
	const uint8_t *p = text;
	while (n) {
		size_t ok = gpt_utf8_valid_prefix(p, n);
		if (gpt_buf_append(out, p, ok, err))
			return GPT_EINTERNAL;
		p += ok;
		n -= ok;
		if (!n)
			break;
		size_t bad = utf8_maximal_subpart(p, n);
		if (gpt_buf_append(out, "\xef\xbf\xbd", 3, err))
			return GPT_EINTERNAL;
		p += bad;
		n -= bad;
	}
	return 0;
}

/* A run of valid UTF-8, cut into pieces by the GPT-2 pattern. The pattern
 * matches at every position (its last branches take any character), so the
 * pieces tile the run; a gap would still be encoded, never dropped. */
static int encode_valid(gpt_encoder *e, const uint8_t *s, size_t n, gpt_ids *out, gpt_err *err)
{
	const gpt_tokenizer *t = e->t;
	size_t pos = 0;
	PCRE2_SIZE *ov = pcre2_get_ovector_pointer(e->md);
	while (pos < n) {
		int rc = t->jit ? pcre2_jit_match(t->re, s, n, pos, 0, e->md, NULL)
				: pcre2_match(t->re, s, n, pos, PCRE2_NO_UTF_CHECK, e->md, NULL);
		size_t a, b;
		if (rc == PCRE2_ERROR_NOMATCH) {
			a = b = n;
		} else if (rc < 0) {
			PCRE2_UCHAR msg[256];
			pcre2_get_error_message(rc, msg, sizeof msg);
			return gpt_err_set(err, GPT_EINTERNAL, "GPT-2 pattern: match failed at byte %zu: %s", pos,
					   (char *)msg);
		} else {
			a = ov[0];
			b = ov[1];
		}
		if (a > pos && encode_piece(e, s + pos, a - pos, out, err))
			return GPT_EINTERNAL;
		if (b <= a) { /* an empty match: take one character so we move on */
			if (a >= n)
				break;
			b = a + (utf8_char_len(s + a, n - a) ? utf8_char_len(s + a, n - a) : 1);
		}
		if (encode_piece(e, s + a, b - a, out, err))
			return GPT_EINTERNAL;
		pos = b;
	}
	return 0;
}

static int encode_ordinary(gpt_encoder *e, const uint8_t *s, size_t n, gpt_ids *out, gpt_err *err)
{
	size_t i = 0;
	while (i < n) {
		size_t v = gpt_utf8_valid_prefix(s + i, n - i);
		if (v && encode_valid(e, s + i, v, out, err))
			return GPT_EINTERNAL;
		i += v;
		size_t bad = gpt_utf8_invalid_run(s + i, n - i);
		if (bad && encode_piece(e, s + i, bad, out, err))
			return GPT_EINTERNAL;
		i += bad;
	}
	return 0;
}

int gpt_encode(gpt_encoder *e, const void *text, size_t n, gpt_ids *out, gpt_err *err)
{
	const uint8_t *s = text;
	const gpt_tokenizer *t = e->t;
	if (t->kind == GPT_TOK_BYTES) {
		if (gpt_ids_reserve(out, (int64_t)n, err))
			return GPT_EINTERNAL;
		for (size_t i = 0; i < n; i++)
			out->data[out->len + (int64_t)i] = s[i];
		out->len += (int64_t)n;
		return 0;
	}
	/* Reserving about a token per four bytes up front saves most regrowth. */
	if (gpt_ids_reserve(out, (int64_t)(n / 4 + 16), err))
		return GPT_EINTERNAL;
	if (!e->specials || t->eot < 0)
		return encode_ordinary(e, s, n, out, err);
	static const char eot[] = GPT_TEXT_EOT;
	size_t el = sizeof eot - 1;
	while (n) {
		const uint8_t *hit = memmem(s, n, eot, el);
		size_t seg = hit ? (size_t)(hit - s) : n;
		if (seg && encode_ordinary(e, s, seg, out, err))
			return GPT_EINTERNAL;
		if (!hit)
			break;
		if (push_id(out, t->eot, err))
			return GPT_EINTERNAL;
		s += seg + el;
		n -= seg + el;
	}
	return 0;
}

size_t gpt_encode_cut(const gpt_tokenizer *t, const void *text, size_t n, size_t target)
{
	const uint8_t *s = text;
	if (target == 0 || target >= n)
		return n;
	if (t->kind == GPT_TOK_BYTES)
		return target;
	/* No piece of the GPT-2 pattern holds a space except at its start, or
	 * in a run of whitespace, which a printable character before the space
	 * rules out: the piece holding the space starts at it. Cutting there
	 * keeps UTF-8 runs and <|endoftext|> (no spaces) whole as well. */
	for (size_t i = target; i < n; i++) {
		const uint8_t *sp = memchr(s + i, ' ', n - i);
		if (!sp)
			return n;
		i = (size_t)(sp - s);
		if (s[i - 1] > 0x20 && s[i - 1] < 0x7f)
			return i;
	}
	return n;
}

int gpt_decode(const gpt_tokenizer *t, const int32_t *ids, int64_t n, gpt_buf *out, gpt_err *err)
{
	for (int64_t i = 0; i < n; i++) {
		if (ids[i] < 0 || ids[i] >= t->n)
			return gpt_err_set(err, GPT_EDATA, "token %lld: id %d is outside the vocabulary [0, %d)",
					   (long long)i, ids[i], t->n);
		size_t len = (size_t)(t->off[ids[i] + 1] - t->off[ids[i]]);
		if (gpt_buf_append(out, t->bytes + t->off[ids[i]], len, err))
			return GPT_EINTERNAL;
	}
	return 0;
}
