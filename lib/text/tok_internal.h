/* Private to lib/text: the tokenizer's tables, shared by its .c files. */
#ifndef GPT_TEXT_TOK_INTERNAL_H
#define GPT_TEXT_TOK_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "text/text.h"

/* (left id, right id) -> the token their concatenation is, with its rank. */
typedef struct gpt_pair_slot {
	uint64_t key;  /* ((uint64)left << 32 | right) + 1; 0: empty */
	int32_t rank;
	int32_t id;
} gpt_pair_slot;

struct gpt_tokenizer {
	gpt_tok_kind kind;
	int32_t n;          /* number of ids */
	int32_t eot;        /* end-of-text id, -1 if none */
	uint8_t *bytes;     /* every token's bytes, back to back */
	int64_t *off;       /* token i is bytes[off[i] .. off[i+1]) */
	int32_t *rank;      /* merge rank of token i; INT32_MAX: not a merge result */
	int32_t byte_id[256];
	uint64_t *tok_slots; /* bytes -> (hash >> 32) << 32 | (id + 1); 0: empty */
	uint64_t tok_mask;
	gpt_pair_slot *pairs;
	uint64_t pair_mask;
	pcre2_code *re;     /* the GPT-2 pre-tokenizer pattern */
	int jit;            /* 1 when re was JIT-compiled */
};

/* The id of the token with exactly these bytes, or -1; _h takes the bytes'
 * gpt_xxh3_64 when the caller has it already. */
int32_t gpt_tok_lookup(const gpt_tokenizer *t, const uint8_t *p, size_t n);
int32_t gpt_tok_lookup_h(const gpt_tokenizer *t, const uint8_t *p, size_t n, uint64_t h);

static inline const gpt_pair_slot *gpt_tok_pair(const gpt_tokenizer *t, int32_t a, int32_t b)
{
	uint64_t key = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
	uint64_t h = (key * 0x9E3779B97F4A7C15ull) >> 20;
	for (;;) {
		const gpt_pair_slot *s = &t->pairs[h & t->pair_mask];
		if (s->key == key)
			return s;
		if (s->key == 0)
			return NULL;
		h++;
	}
}

/* Merges the piece p[0..n) (n >= 1) by rank and appends its ids to out. */
int gpt_bpe_merge(const gpt_tokenizer *t, const uint8_t *p, size_t n, gpt_ids *out, gpt_err *err);

#endif
