/* Byte-pair merging of one piece: repeatedly merge the adjacent pair of
 * lowest rank (leftmost on ties) until no pair is a token. Short pieces use
 * arrays on the stack (quadratic but tiny); long ones a heap over a linked
 * list, so a pathological piece (megabytes without a space) stays n log n. */
#include "text/tok_internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define SHORT_PIECE 256

static int merge_short(const gpt_tokenizer *t, const uint8_t *p, size_t n, gpt_ids *out, gpt_err *err)
{
	int32_t ids[SHORT_PIECE], rk[SHORT_PIECE], mid[SHORT_PIECE];
	size_t m = n;
	for (size_t i = 0; i < n; i++)
		ids[i] = t->byte_id[p[i]];
	for (size_t i = 0; i + 1 < m; i++) {
		const gpt_pair_slot *s = gpt_tok_pair(t, ids[i], ids[i + 1]);
		rk[i] = s ? s->rank : INT32_MAX;
		mid[i] = s ? s->id : -1;
	}
	while (m > 1) {
		size_t best = 0;
		int32_t br = rk[0];
		for (size_t i = 1; i + 1 < m; i++)
			if (rk[i] < br) {
				br = rk[i];
				best = i;
			}
		if (br == INT32_MAX)
			break;
		ids[best] = mid[best];
		size_t tail = m - best - 2;
		memmove(ids + best + 1, ids + best + 2, tail * sizeof *ids);
		memmove(rk + best + 1, rk + best + 2, tail * sizeof *rk);
		memmove(mid + best + 1, mid + best + 2, tail * sizeof *mid);
		m--;
		if (best + 1 < m) {
			const gpt_pair_slot *s = gpt_tok_pair(t, ids[best], ids[best + 1]);
			rk[best] = s ? s->rank : INT32_MAX;
			mid[best] = s ? s->id : -1;
		}
		if (best > 0) {
			const gpt_pair_slot *s = gpt_tok_pair(t, ids[best - 1], ids[best]);
			rk[best - 1] = s ? s->rank : INT32_MAX;
			mid[best - 1] = s ? s->id : -1;
		}
	}
	if (gpt_ids_reserve(out, (int64_t)m, err))
		return GPT_EINTERNAL;
	memcpy(out->data + out->len, ids, m * sizeof *ids);
	out->len += (int64_t)m;
	return 0;
}

typedef struct heap_ent {
	int32_t rank;
	int32_t left, right; /* the ids the pair had when pushed */
	int32_t pos;         /* node of the left symbol = its first byte */
} heap_ent;

static int ent_less(const heap_ent *a, const heap_ent *b)
{
	return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

typedef struct heap {
	heap_ent *e;
	size_t n, cap;
} heap;

static int heap_push(heap *h, heap_ent v, gpt_err *err)
{
	if (h->n == h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 1024;
		heap_ent *e = gpt_realloc(h->e, cap * sizeof *e, "merge heap", err);
		if (!e)
			return GPT_EINTERNAL;
		h->e = e;
		h->cap = cap;
	}
	size_t i = h->n++;
	while (i > 0 && ent_less(&v, &h->e[(i - 1) / 2])) {
		h->e[i] = h->e[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h->e[i] = v;
	return 0;
}

static heap_ent heap_pop(heap *h)
{
	heap_ent top = h->e[0], last = h->e[--h->n];
	size_t i = 0;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= h->n)
			break;
		if (c + 1 < h->n && ent_less(&h->e[c + 1], &h->e[c]))
			c++;
		if (!ent_less(&h->e[c], &last))
			break;
		h->e[i] = h->e[c];
		i = c;
	}
	if (h->n)
		h->e[i] = last;
	return top;
}

static int push_pair(const gpt_tokenizer *t, heap *h, const int32_t *id, int32_t pos, int32_t nx, gpt_err *err)
{
	const gpt_pair_slot *s = gpt_tok_pair(t, id[pos], id[nx]);
	if (!s)
		return 0;
	heap_ent v = {s->rank, id[pos], id[nx], pos};
	return heap_push(h, v, err);
}

static int merge_long(const gpt_tokenizer *t, const uint8_t *p, size_t n, gpt_ids *out, gpt_err *err)
{
	if (n > INT32_MAX)
		return gpt_err_set(err, GPT_EDATA, "a piece of %zu bytes without a break is too long to merge (at most %d)",
				   n, INT32_MAX);
	int32_t *id = gpt_malloc(n * sizeof *id, "merge state", err);
	int32_t *next = gpt_malloc(n * sizeof *next, "merge state", err);
	int32_t *prev = gpt_malloc(n * sizeof *prev, "merge state", err);
	heap h = {NULL, 0, 0};
	int rc = (!id || !next || !prev) ? GPT_EINTERNAL : 0;
	for (size_t i = 0; !rc && i < n; i++) {
		id[i] = t->byte_id[p[i]];
		next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
		prev[i] = (int32_t)i - 1;
	}
	for (size_t i = 0; !rc && i + 1 < n; i++)
		rc = push_pair(t, &h, id, (int32_t)i, (int32_t)i + 1, err);
	while (!rc && h.n) {
		heap_ent v = heap_pop(&h);
		int32_t nx = next[v.pos];
		/* Stale when either side has merged since the entry was pushed. */
		if (id[v.pos] != v.left || nx < 0 || id[nx] != v.right)
			continue;
		const gpt_pair_slot *s = gpt_tok_pair(t, v.left, v.right);
		id[v.pos] = s->id;
		id[nx] = -1;
		next[v.pos] = next[nx];
		if (next[nx] >= 0)
			prev[next[nx]] = v.pos;
		if (prev[v.pos] >= 0)
			rc = push_pair(t, &h, id, prev[v.pos], v.pos, err);
		if (!rc && next[v.pos] >= 0)
			rc = push_pair(t, &h, id, v.pos, next[v.pos], err);
	}
	if (!rc) {
		int64_t m = 0;
		for (int32_t i = 0; i >= 0; i = next[i])
			m++;
		rc = gpt_ids_reserve(out, m, err);
		for (int32_t i = 0; !rc && i >= 0; i = next[i])
			out->data[out->len++] = id[i];
	}
	free(h.e);
	free(id);
	free(next);
	free(prev);
	return rc;
}

int gpt_bpe_merge(const gpt_tokenizer *t, const uint8_t *p, size_t n, gpt_ids *out, gpt_err *err)
{
	if (n == 1) {
		if (gpt_ids_reserve(out, 1, err))
			return GPT_EINTERNAL;
		out->data[out->len++] = t->byte_id[p[0]];
		return 0;
	}
	return n <= SHORT_PIECE ? merge_short(t, p, n, out, err) : merge_long(t, p, n, out, err);
}
