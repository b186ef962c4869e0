/* lib/ckpt: who writes what. A flat range of a box splits into few
 * contiguous boxes; over synthetic tp x pp x dp x sharding layouts (sharding
 * cutting tensors mid-way) the pieces the ranks write cover every element
 * of every global tensor exactly once, and each piece's flat run holds
 * exactly the elements of its box. */
#include "ckpt/ckpt.h"
#include "model/gpt.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>

/* Row-major index of global point p in box b. */
static int64_t index_in(const gpt_box *b, const int64_t *p)
{
	int64_t o = 0;
	for (int d = 0; d < b->ndim; d++)
		o = o * b->len[d] + (p[d] - b->off[d]);
	return o;
}

/* Calls f for every point of box b in row-major order. */
static void walk(const gpt_box *b, void (*f)(void *, const int64_t *), void *ctx)
{
	if (gpt_box_numel(b) == 0)
		return;
	int64_t p[GPT_MAX_DIMS];
	for (int d = 0; d < b->ndim; d++)
		p[d] = b->off[d];
	for (;;) {
		f(ctx, p);
		int d = b->ndim - 1;
		while (d >= 0 && ++p[d] == b->off[d] + b->len[d]) {
			p[d] = b->off[d];
			d--;
		}
		if (d < 0)
			return;
	}
}

typedef struct seq_ctx {
	const gpt_box *outer;
	int64_t next;
	int bad;
} seq_ctx;

static void seq_check(void *c, const int64_t *p)
{
	seq_ctx *s = c;
	if (index_in(s->outer, p) != s->next++)
		s->bad = 1;
}

static void test_range_split(void)
{
	gpt_box b = {.ndim = 3, .off = {2, 0, 5}, .len = {3, 4, 5}};
	int64_t n = gpt_box_numel(&b);
	int bad = 0, most = 0, cases = 0;
	for (int64_t first = 0; first < n; first++)
		for (int64_t count = 1; first + count <= n; count++) {
			gpt_box out[2 * GPT_MAX_DIMS];
			int k = gpt_box_range_split(&b, first, count, out);
			seq_ctx s = {&b, first, 0};
			for (int j = 0; j < k; j++) {
				if (!gpt_box_contains(&b, &out[j]))
					s.bad = 1;
				walk(&out[j], seq_check, &s);
			}
			if (s.bad || s.next != first + count || k > 5)
				bad++;
			if (k > most)
				most = k;
			cases++;
		}
	is_int(bad, 0, "every one of %d flat ranges of a [3, 4, 5] box is covered in order by its boxes",
	       cases);
	is_int(most, 5, "at most 2 x 3 - 1 = 5 boxes, and that many are needed");
	gpt_box whole[2 * GPT_MAX_DIMS];
	ok(gpt_box_range_split(&b, 0, n, whole) == 1 && whole[0].len[0] == 3 && whole[0].off[0] == 2,
	   "the whole box is one box");
	ok(gpt_box_range_split(&b, 20, 20, whole) == 1 && whole[0].off[0] == 3 && whole[0].len[0] == 1,
	   "whole rows are one box");
	is_int(gpt_box_range_split(&b, 50, 20, whole), 0, "a range past the end is refused");
	gpt_box v = {.ndim = 1, .off = {7}, .len = {10}};
	ok(gpt_box_range_split(&v, 3, 4, whole) == 1 && whole[0].off[0] == 10 && whole[0].len[0] == 4,
	   "1-d: one box");
}

typedef struct cover_ctx {
	int32_t *count; /* per global element of the tensor */
	const gpt_param_info *p;
	const float *run;  /* the flat run of the slice */
	int64_t k;
	int bad;
} cover_ctx;

static void cover(void *c, const int64_t *pt)
{
	cover_ctx *s = c;
	gpt_box full = gpt_box_full(s->p->ndim, s->p->shape);
	int64_t g = index_in(&full, pt);
	s->count[g]++;
	if (s->run[s->k++] != (float)g)
		s->bad = 1;
}

/* One layout: every rank's slices; returns elements written more or less
 * than once over all tensors, and counts pieces that cut a held box. */
static int64_t check_layout(int tp, int pp, int dp, int sh, int64_t *cuts, int *flat_bad)
{
	gpt_model_shape s = {.vocab_size = 257, .padded_vocab = 384, .max_pos = 16, .hidden = 8,
			     .layers = 4, .heads = 2, .ffn = 32};
	gpt_param_info *t;
	int64_t nt;
	gpt_err err = {0};
	if (gpt_param_table(&s, &t, &nt, &err))
		return -1;
	int32_t **count = calloc((size_t)nt, sizeof *count);
	for (int64_t i = 0; i < nt; i++)
		count[i] = calloc((size_t)t[i].numel, sizeof **count);
	int64_t *offset = calloc((size_t)nt, sizeof *offset);
	gpt_box *box = calloc((size_t)nt, sizeof *box);
	*cuts = 0;
	for (int pr = 0; pr < pp; pr++)
		for (int dr = 0; dr < dp; dr++)
			for (int sr = 0; sr < sh; sr++)
				for (int tr = 0; tr < tp; tr++) {
					gpt_layout lo;
					gpt_err lerr = {0};
					if (gpt_layout_make(&lo, &s, tp, tr, pp, pr, 1, NULL, &lerr)) {
						diag("layout: %s", lerr.msg);
						exit(1);
					}
					int64_t n_flat = 0;
					for (int64_t i = 0; i < nt; i++) {
						offset[i] = gpt_param_box(&t[i], &lo, &box[i]) ? n_flat : -1;
						if (offset[i] >= 0)
							n_flat += gpt_box_numel(&box[i]);
					}
					int64_t n_alloc = (n_flat + sh - 1) / sh * sh, shard = n_alloc / sh;
					/* the flat buffer holds each element's global index */
					float *flat = calloc((size_t)n_alloc, sizeof *flat);
					for (int64_t i = 0; i < nt; i++) {
						if (offset[i] < 0)
							continue;
						gpt_box full = gpt_box_full(t[i].ndim, t[i].shape);
						int64_t k = 0, pt[GPT_MAX_DIMS];
						for (int d = 0; d < t[i].ndim; d++)
							pt[d] = box[i].off[d];
						for (int64_t e = 0; e < gpt_box_numel(&box[i]); e++) {
							flat[offset[i] + k++] = (float)index_in(&full, pt);
							int d = t[i].ndim - 1;
							while (d >= 0 && ++pt[d] == box[i].off[d] + box[i].len[d]) {
								pt[d] = box[i].off[d];
								d--;
							}
						}
					}
					gpt_ckpt_rank r = {.tp_rank = tr, .pp_rank = pr, .dp_rank = dr,
							   .begin = sr * shard, .end = (sr + 1) * shard,
							   .writers_only = 1};
					gpt_ckpt_slice *sl;
					int64_t ns;
					if (gpt_ckpt_slices(t, nt, offset, box, &r, &sl, &ns, &err) == 0) {
						for (int64_t j = 0; j < ns; j++) {
							int64_t i = sl[j].tensor;
							cover_ctx c = {count[i], &t[i], flat + sl[j].flat, 0, 0};
							walk(&sl[j].box, cover, &c);
							if (c.bad || sl[j].flat < r.begin ||
							    sl[j].flat + gpt_box_numel(&sl[j].box) > r.end)
								*flat_bad = 1;
							*cuts += gpt_box_numel(&sl[j].box) != gpt_box_numel(&box[i]);
						}
						free(sl);
					}
					free(flat);
				}
	int64_t wrong = 0;
	for (int64_t i = 0; i < nt; i++) {
		for (int64_t e = 0; e < t[i].numel; e++)
			wrong += count[i][e] != 1;
		free(count[i]);
	}
	free(count);
	free(offset);
	free(box);
	free(t);
	return wrong;
}

static void test_layouts(void)
{
	static const int lay[][4] = {
		{1, 1, 1, 1}, {2, 1, 1, 1}, {1, 2, 1, 1}, {1, 1, 2, 1}, {1, 1, 1, 2},
		{2, 2, 1, 2}, {2, 2, 2, 2}, {1, 1, 1, 3}, {2, 2, 1, 4}, {1, 4, 2, 3},
	};
	for (size_t i = 0; i < sizeof lay / sizeof *lay; i++) {
		int64_t cuts = 0;
		int flat_bad = 0;
		int64_t wrong = check_layout(lay[i][0], lay[i][1], lay[i][2], lay[i][3], &cuts, &flat_bad);
		is_int(wrong, 0, "tp %d pp %d dp %d sharding %d: every element written exactly once",
		       lay[i][0], lay[i][1], lay[i][2], lay[i][3]);
		ok(!flat_bad, "  and every piece's flat run holds its box, inside the rank's range");
		if (lay[i][3] > 1)
			ok(cuts > 0, "  sharding cut %lld pieces out of held boxes", (long long)cuts);
	}
}

static void test_rule(void)
{
	gpt_model_shape s = {.vocab_size = 257, .padded_vocab = 384, .max_pos = 16, .hidden = 8,
			     .layers = 2, .heads = 2, .ffn = 32};
	gpt_param_info *t;
	int64_t nt;
	gpt_err err = {0};
	if (gpt_param_table(&s, &t, &nt, &err))
		return;
	gpt_ckpt_rank r = {.tp_rank = 1, .pp_rank = 1, .dp_rank = 0};
	ok(!gpt_ckpt_writes(&t[0], &r), "wte on the last stage is the tied copy: not written there");
	r.pp_rank = 0;
	ok(gpt_ckpt_writes(&t[0], &r), "wte (vocab parallel) on tp rank 1 of the first stage is written");
	ok(!gpt_ckpt_writes(&t[1], &r), "wpe (replicated over tp) is written by tp rank 0 only");
	ok(!gpt_ckpt_writes(&t[2], &r), "a LayerNorm on tp rank 1: not written");
	ok(gpt_ckpt_writes(&t[4], &r), "qkv weight (split by heads) on tp rank 1: written");
	r.dp_rank = 1;
	r.tp_rank = 0;
	ok(!gpt_ckpt_writes(&t[4], &r), "data replica 1 writes nothing");
	free(t);
}

int main(void)
{
	test_range_split();
	test_rule();
	test_layouts();
	return done_testing();
}
