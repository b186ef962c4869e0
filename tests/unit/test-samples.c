/* lib/data sample index: splits, windows over shuffled documents, shuffles. */
#include "data/sample.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>

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

	/* 5 documents of lengths 1..9; document d holds tokens d*100 + i. */
	int32_t lens[6] = {7, 0, 9, 3, 5, 1};
	int64_t ids[6] = {0, 1, 2, 3, 4, 5};
	gpt_samples s;
	int seq = 4;
	ok(gpt_samples_build(&s, ids, 6, lens, seq, 10, 1234, &err) == 0, "build %s", err.msg);
	is_int(s.per_epoch, (25 - 1) / 4, "samples per epoch = (tokens - 1) / seq_len");
	ok(s.n_samples >= 10 && s.n_epochs == 2, "enough epochs for 10 samples");
	/* Every window equals the brute-force concatenation of its epoch. */
	int good = 1;
	for (int64_t e = 0; e < s.n_epochs; e++) {
		int stream[64], n = 0;
		for (int64_t i = 0; i < 6; i++) {
			int64_t d = s.doc_order[e * 6 + i];
			for (int t = 0; t < lens[d]; t++)
				stream[n++] = (int)d * 100 + t;
		}
		for (int64_t i = 0; i < s.per_epoch; i++) {
			int64_t k = e * s.per_epoch + i, pos = s.start_doc[k];
			int32_t off = s.start_off[k];
			for (int t = 0; t <= seq; t++) {
				while (off >= lens[s.doc_order[pos]]) {
					off -= lens[s.doc_order[pos]];
					pos++;
				}
				if ((int)s.doc_order[pos] * 100 + off != stream[i * seq + t])
					good = 0;
				off++;
			}
		}
	}
	ok(good, "every window is the right seq_len + 1 tokens of its epoch's stream");
	char *seen = calloc((size_t)s.n_samples, 1);
	int perm = 1;
	for (int64_t k = 0; k < s.n_samples; k++) {
		int64_t j = s.shuffle[k];
		perm &= j >= 0 && j < s.n_samples && !seen[j] && (j / s.per_epoch == k / s.per_epoch);
		seen[j] = 1;
	}
	ok(perm, "the sample shuffle is a permutation within each epoch");
	free(seen);
	gpt_samples t;
	gpt_samples_build(&t, ids, 6, lens, seq, 10, 1234, &err);
	ok(memcmp(s.shuffle, t.shuffle, (size_t)s.n_samples * 8) == 0 &&
	   memcmp(s.doc_order, t.doc_order, (size_t)(s.n_epochs * 6) * 8) == 0, "the same seed, the same index");
	gpt_samples_free(&t);
	gpt_samples u;
	int differ = 0;
	for (uint64_t seed = 1; seed < 5 && !differ; seed++) {
		gpt_samples_build(&u, ids, 6, lens, seq, 10, 1234 + seed, &err);
		differ = memcmp(s.shuffle, u.shuffle, (size_t)s.n_samples * 8) != 0;
		gpt_samples_free(&u);
	}
	ok(differ, "another seed, another order");
	gpt_samples_free(&s);
	int64_t two[1] = {3};
	ok(gpt_samples_build(&s, two, 1, lens, seq, 1, 1, &err) == GPT_EDATA && strstr(err.msg, "fewer than one sample"),
	   "a split too small for one sample: %s", err.msg);
	return done_testing();
}
