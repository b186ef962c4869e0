/* lib/data sample index: splits, windows over shuffled documents, shuffles. */
#include "data/lazy.h"
#include "data/sample.h"
#include "tap.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- the reference: every epoch built up front, the simple way --------- *
 * Epoch e: the documents shuffled (Fisher-Yates from splitmix64, seed
 * seed x 0x100000001b3 + 2e + 1), concatenated, cut into windows of
 * seq + 1 tokens every seq tokens, the windows shuffled (seed ... + 2e + 2).
 * Token t of document d stands for d x 10000 + t. */

typedef struct ref_index {
	int64_t n_docs, per_epoch, first, n_epochs, seq; /* epochs first .. first + n_epochs - 1 */
	int64_t *stream;  /* per epoch: its tokens, concatenated */
	int64_t *shuffle; /* run sample k reads window shuffle[k] of k's epoch */
	int64_t tokens;
} ref_index;

static void ref_shuffle(int64_t *v, int64_t n, uint64_t st)
{
	for (int64_t i = n - 1; i > 0; i--) {
		uint64_t m = (uint64_t)i + 1, lim = UINT64_MAX - UINT64_MAX % m, r;
		do
			r = gpt_splitmix64(&st);
		while (r >= lim);
		int64_t j = (int64_t)(r % m), t = v[i];
		v[i] = v[j];
		v[j] = t;
	}
}

static void ref_build(ref_index *r, const int64_t *ids, int64_t n_docs, const int32_t *lens, int seq,
		      int64_t first, int64_t n_epochs, uint64_t seed)
{
	r->n_docs = n_docs;
	r->first = first;
	r->seq = seq;
	r->n_epochs = n_epochs;
	r->tokens = 0;
	for (int64_t i = 0; i < n_docs; i++)
		r->tokens += lens[ids[i]];
	r->per_epoch = (r->tokens - 1) / seq;
	r->stream = malloc((size_t)(n_epochs * r->tokens) * sizeof *r->stream);
	r->shuffle = malloc((size_t)(n_epochs * r->per_epoch) * sizeof *r->shuffle);
	int64_t *order = malloc((size_t)n_docs * sizeof *order);
	for (int64_t e = 0; e < n_epochs; e++) {
		uint64_t seed_e = seed * 0x100000001b3ull + 2 * (uint64_t)(first + e);
		memcpy(order, ids, (size_t)n_docs * sizeof *order);
		ref_shuffle(order, n_docs, seed_e + 1);
		int64_t *st = r->stream + e * r->tokens;
		for (int64_t i = 0; i < n_docs; i++)
			for (int32_t t = 0; t < lens[order[i]]; t++)
				*st++ = order[i] * 10000 + t;
		int64_t *sh = r->shuffle + e * r->per_epoch;
		for (int64_t i = 0; i < r->per_epoch; i++)
			sh[i] = i;
		ref_shuffle(sh, r->per_epoch, seed_e + 2);
	}
	free(order);
}

static void ref_free(ref_index *r)
{
	free(r->stream);
	free(r->shuffle);
}

/* Whether run sample k of s reads what the reference says; its window's
 * number in the epoch in *window. */
static int same_sample(const gpt_samples *s, const ref_index *r, int64_t k, int64_t *window)
{
	gpt_sample_piece pc[64];
	gpt_err err = {0};
	int64_t n = gpt_samples_pieces(s, k, pc, 64, &err);
	if (n < 1 || n > 64)
		return 0;
	int64_t e = k / r->per_epoch - r->first, w = r->shuffle[k - r->first * r->per_epoch];
	const int64_t *want = r->stream + e * r->tokens + w * r->seq;
	int64_t t = 0;
	for (int64_t i = 0; i < n; i++)
		for (int32_t j = 0; j < pc[i].len; j++)
			if (t > r->seq || want[t++] != pc[i].doc * 10000 + pc[i].off + j)
				return 0;
	if (window)
		*window = w;
	return t == r->seq + 1;
}

typedef struct reader {
	const gpt_samples *s;
	const ref_index *r;
	uint64_t seed;
	int64_t bad;
} reader;

/* Random samples, each one checked, from several threads at once. */
static void *read_random(void *arg)
{
	reader *rd = arg;
	int64_t n = rd->r->n_epochs * rd->r->per_epoch;
	for (int i = 0; i < 3000; i++)
		rd->bad += !same_sample(rd->s, rd->r, (int64_t)(gpt_splitmix64(&rd->seed) % (uint64_t)n), NULL);
	return NULL;
}


int main(void)
{
	double w[3];
	int64_t b[4];
	gpt_err err = {0};
	ok(gpt_split_parse("949,50,1", w, &err) == 0, "parse 949,50,1");
	gpt_split_ranges(w, 1000, b);
	ok(b[0] == 0 && b[1] == 949 && b[2] == 999 && b[3] == 1000, "1000 documents: 949/50/1");
	/* Megatron-LM's get_train_valid_test_split_ (each part rounded, ties
	 * to even, then the bounds moved to end at n); the expected bounds
	 * are what it returns in Python */
	gpt_split_ranges(w, 10, b);
	ok(b[1] == 10 && b[2] == 10 && b[3] == 10, "10 documents: 10/0/0 (%lld %lld %lld)", (long long)b[1],
	   (long long)b[2], (long long)b[3]);
	gpt_split_ranges(w, 12345, b);
	ok(b[1] == 11716 && b[2] == 12333 && b[3] == 12345, "12345 documents: 11716/617/12 (%lld %lld %lld)",
	   (long long)b[1], (long long)b[2], (long long)b[3]);
	static const struct {
		const char *spec;
		int64_t n, b1, b2;
	} meg[] = {{"1,1", 5, 3, 5}, {"1,1", 7, 3, 7}, {"1,2,1", 10, 3, 8}, {"98,2,0", 3, 3, 3},
		   {"0.1,0.45,0.45", 1, 1, 1}, {"1,1,1", 2, 0, 1}, {"0,1,0", 3, 0, 3}, {"8,1,1", 0, 0, 0}};
	for (size_t i = 0; i < sizeof meg / sizeof *meg; i++) {
		ok(gpt_split_parse(meg[i].spec, w, &err) == 0, "parse %s", meg[i].spec);
		gpt_split_ranges(w, meg[i].n, b);
		ok(b[0] == 0 && b[1] == meg[i].b1 && b[2] == meg[i].b2 && b[3] == meg[i].n,
		   "%s over %lld documents: bounds 0 %lld %lld %lld as Megatron-LM's (%lld %lld %lld)",
		   meg[i].spec, (long long)meg[i].n, (long long)meg[i].b1, (long long)meg[i].b2,
		   (long long)meg[i].n, (long long)b[1], (long long)b[2], (long long)b[3]);
	}
	ok(gpt_split_parse("1", w, &err) == 0 && w[0] == 1 && w[1] == 0, "one weight: all train");
	ok(gpt_split_parse("9,x", w, &err) == GPT_EUSAGE, "bad weights refused: %s", err.msg);
	ok(gpt_split_parse("0,0,0", w, &err) == GPT_EUSAGE, "zero weights refused");

	/* 6 documents, one empty; document d holds tokens d x 10000 + t. */
	int32_t lens[6] = {7, 0, 9, 3, 5, 1};
	int64_t ids[6] = {0, 1, 2, 3, 4, 5};
	gpt_samples s;
	int seq = 4;
	ok(gpt_samples_build(&s, ids, 6, lens, seq, 10, 1234, &err) == 0, "build %s", err.msg);
	is_int(s.per_epoch, (25 - 1) / 4, "samples per epoch = (tokens - 1) / seq_len");
	ok(s.n_samples >= 10 && s.n_epochs == 2, "enough epochs for 10 samples");
	ref_index r;
	ref_build(&r, ids, 6, lens, seq, 0, s.n_epochs, 1234);
	int good = 1;
	for (int64_t k = 0; k < s.n_samples; k++)
		good &= same_sample(&s, &r, k, NULL);
	ok(good, "every sample is the reference's: the right seq_len + 1 tokens of its epoch's stream");
	gpt_sample_piece one;
	int64_t pieces = 0;
	for (int64_t k = 0; k < s.n_samples && pieces <= 1; k++)
		pieces = gpt_samples_pieces(&s, k, &one, 1, &err);
	ok(pieces > 1, "a window over several documents says how many pieces it has when given room for one (%lld)",
	   (long long)pieces);
	ref_free(&r);
	gpt_samples t;
	gpt_samples_build(&t, ids, 6, lens, seq, 10, 1234, &err);
	good = 1;
	for (int64_t k = 0; k < s.n_samples; k++) {
		gpt_sample_piece pa[8], pb[8];
		int64_t na = gpt_samples_pieces(&s, k, pa, 8, &err), nb = gpt_samples_pieces(&t, k, pb, 8, &err);
		good &= na == nb && na > 0 && na <= 8 && memcmp(pa, pb, (size_t)na * sizeof *pa) == 0;
	}
	ok(good, "the same seed, the same samples");
	gpt_samples_free(&t);
	int differ = 0;
	for (uint64_t seed = 1; seed < 5 && !differ; seed++) {
		gpt_samples_build(&t, ids, 6, lens, seq, 10, 1234 + seed, &err);
		for (int64_t k = 0; k < s.n_samples && !differ; k++) {
			gpt_sample_piece pa[8], pb[8];
			gpt_samples_pieces(&s, k, pa, 8, &err);
			gpt_samples_pieces(&t, k, pb, 8, &err);
			differ = pa[0].doc != pb[0].doc || pa[0].off != pb[0].off;
		}
		gpt_samples_free(&t);
	}
	ok(differ, "another seed, another order");
	gpt_samples_free(&s);
	int64_t two[1] = {3};
	ok(gpt_samples_build(&s, two, 1, lens, seq, 1, 1, &err) == GPT_EDATA && strstr(err.msg, "fewer than one sample"),
	   "a split too small for one sample: %s", err.msg);
	/* positions in an epoch are 32-bit: refused before any id is read */
	ok(gpt_samples_build(&s, two, (int64_t)1 << 32, lens, seq, 1, 1, &err) == GPT_EDATA &&
	   strstr(err.msg, "4294967296 documents") && strstr(err.msg, "blend"),
	   "a split of 2^32 documents is refused: %s", err.msg);

	/* Many epochs of 300 documents (a fifth empty, some of one token), a
	 * subset of the ids in another order, several seq_len: every sample as
	 * the reference's, in order, backwards and at random, an epoch built
	 * once for a pass in order. */
	enum { ND = 300 };
	static int32_t big_lens[ND + 50];
	static int64_t big_ids[ND];
	uint64_t st = 42;
	for (int i = 0; i < ND + 50; i++) {
		uint64_t x = gpt_splitmix64(&st) % 10;
		big_lens[i] = x < 2 ? 0 : x < 3 ? 1 : 1 + (int32_t)(gpt_splitmix64(&st) % 120);
	}
	for (int i = 0; i < ND; i++)
		big_ids[i] = ND + 49 - i;
	static const int seqs[] = {1, 3, 64, 500};
	for (size_t q = 0; q < sizeof seqs / sizeof *seqs; q++) {
		int sq = seqs[q];
		ok(gpt_samples_build(&s, big_ids, ND, big_lens, sq, 0, 77 + q, &err) == 0, "seq_len %d: one epoch", sq);
		int64_t per = s.per_epoch, epochs = 40 + 1000 / per;
		gpt_samples_free(&s);
		ok(gpt_samples_build(&s, big_ids, ND, big_lens, sq, epochs * per, 77 + q, &err) == 0 &&
		   s.n_epochs == epochs, "seq_len %d: %lld epochs of %lld samples", sq, (long long)epochs,
		   (long long)per);
		ref_build(&r, big_ids, ND, big_lens, sq, 0, s.n_epochs, 77 + q);
		int64_t n = s.n_samples, bad = 0, not_perm = 0;
		char *seen = calloc((size_t)r.per_epoch, 1);
		for (int64_t k = 0; k < n; k++) {
			int64_t win = -1;
			bad += !same_sample(&s, &r, k, &win);
			if (k % r.per_epoch == 0)
				memset(seen, 0, (size_t)r.per_epoch);
			not_perm += win < 0 || seen[win]++;
		}
		free(seen);
		is_int(bad, 0, "seq_len %d: every sample in order is the reference's", sq);
		is_int(not_perm, 0, "seq_len %d: each epoch reads each of its windows once", sq);
		is_int(gpt_lazy_fills(s.epochs), s.n_epochs, "seq_len %d: a pass in order builds each epoch once", sq);
		bad = 0;
		for (int64_t k = n - 1; k >= 0; k--)
			bad += !same_sample(&s, &r, k, NULL);
		for (int64_t i = 0; i < 3000; i++)
			bad += !same_sample(&s, &r, (int64_t)(gpt_splitmix64(&st) % (uint64_t)n), NULL);
		is_int(bad, 0, "seq_len %d: backwards and at random too, epochs built again", sq);
		reader rd[4];
		pthread_t tid[4];
		for (int i = 0; i < 4; i++) {
			rd[i] = (reader){&s, &r, 1000 + (uint64_t)i, 0};
			pthread_create(&tid[i], NULL, read_random, &rd[i]);
		}
		bad = 0;
		for (int i = 0; i < 4; i++) {
			pthread_join(tid[i], NULL);
			bad += rd[i].bad;
		}
		is_int(bad, 0, "seq_len %d: 4 threads at random epochs at once read the reference's samples", sq);
		ref_free(&r);
		gpt_samples_free(&s);
	}

	/* The memory does not grow with the epochs: 10^12 samples over 350
	 * documents (once 20 bytes a sample), the last as the reference's. */
	ok(gpt_samples_build(&s, big_ids, ND, big_lens, 16, 1000000000000, 5, &err) == 0,
	   "an index of 10^12 samples over a small split");
	int64_t last_e = s.n_epochs - 1;
	ref_build(&r, big_ids, ND, big_lens, 16, last_e, 1, 5);
	good = 1;
	for (int64_t i = 0; i < s.per_epoch; i++)
		good &= same_sample(&s, &r, last_e * s.per_epoch + i, NULL);
	ok(good, "the samples of its last epoch (%lld) are the reference's", (long long)last_e);
	ref_free(&r);
	gpt_samples_free(&s);
	return done_testing();
}
