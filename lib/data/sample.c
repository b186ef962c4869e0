/* The sample index: shuffled documents, seq_len+1 windows, shuffled samples. */
#include "data/sample.h"
#include "data/lazy.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

uint64_t gpt_splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in [0, n) without modulo bias (Lemire's method would do too). */
static uint64_t below(uint64_t *st, uint64_t n)
{
	uint64_t lim = UINT64_MAX - UINT64_MAX % n, r;
	do
		r = gpt_splitmix64(st);
	while (r >= lim);
	return r % n;
}

/* Fisher-Yates from the seed: the same swaps whatever the elements, so
 * shuffling positions 0..n-1 and shuffling the values they stand for give
 * the same order. */
#define SHUFFLE(v, n, seed)                                                   \
	do {                                                                  \
		uint64_t st_ = (seed);                                        \
		for (int64_t i_ = (int64_t)(n) - 1; i_ > 0; i_--) {           \
			int64_t j_ = (int64_t)below(&st_, (uint64_t)i_ + 1);  \
			__typeof__(*(v)) t_ = (v)[i_];                        \
			(v)[i_] = (v)[j_];                                    \
			(v)[j_] = t_;                                         \
		}                                                             \
	} while (0)

int gpt_split_parse(const char *spec, double w[3], gpt_err *err)
{
	w[0] = w[1] = w[2] = 0;
	const char *p = spec;
	int k = 0;
	double sum = 0;
	while (*p) {
		if (k == 3)
			return gpt_err_set(err, GPT_EUSAGE, "split '%s': expected at most 3 weights (train,valid,test)", spec);
		char *end;
		double v = strtod(p, &end);
		if (end == p || !(v >= 0) || !isfinite(v))
			return gpt_err_set(err, GPT_EUSAGE, "split '%s': expected weights like '949,50,1'", spec);
		w[k++] = v;
		sum += v;
		p = end;
		while (*p == ' ')
			p++;
		if (*p == ',' || *p == '/')
			p++;
		else if (*p)
			return gpt_err_set(err, GPT_EUSAGE, "split '%s': expected weights like '949,50,1'", spec);
	}
	if (!(sum > 0))
		return gpt_err_set(err, GPT_EUSAGE, "split '%s': the weights add up to 0", spec);
	for (int i = 0; i < 3; i++)
		w[i] /= sum;
	return 0;
}

void gpt_split_ranges(const double w[3], int64_t n_docs, int64_t begin[4])
{
	/* Megatron-LM's and PaddleNLP's get_train_valid_test_split_: each
	 * part's share of the documents rounded on its own (Python's round:
	 * ties to even, as nearbyint in the default mode), the parts laid end
	 * to end, then every bound after the first moved by what the roundings
	 * added up to, so that the last is n_docs. r_k <= x_k + 1/2 makes
	 * begin[1] = n - r_1 - r_2 >= x_0 - 1 > -1: the bounds stay in
	 * [0, n_docs] and in order. */
	int64_t r[3];
	for (int k = 0; k < 3; k++)
		r[k] = (int64_t)nearbyint(w[k] * (double)n_docs);
	int64_t diff = r[0] + r[1] + r[2] - n_docs;
	begin[0] = 0;
	for (int k = 0; k < 3; k++)
		begin[k + 1] = begin[k] + r[k];
	for (int k = 1; k < 4; k++)
		begin[k] -= diff;
}

/* The seeds of epoch e's document order (+1) and sample shuffle (+2). */
static uint64_t epoch_seed(const gpt_samples *s, int64_t e, int which)
{
	return s->seed * 0x100000001b3ull + 2 * (uint64_t)e + (uint64_t)which;
}

/* An epoch's block: per sample in the run's order, where its window starts
 * (the position in the epoch's document order << 32 | the token offset),
 * then the epoch's document order (indices into doc_ids). */
static size_t epoch_bytes(const gpt_samples *s)
{
	return (size_t)s->per_epoch * sizeof(uint64_t) + (size_t)s->n_docs * sizeof(uint32_t);
}

static void fill_epoch(const void *ctx, int64_t e, void *block)
{
	const gpt_samples *s = ctx;
	uint64_t *start = block;
	uint32_t *order = (uint32_t *)(start + s->per_epoch);
	for (int64_t i = 0; i < s->n_docs; i++)
		order[i] = (uint32_t)i;
	SHUFFLE(order, s->n_docs, epoch_seed(s, e, 1));
	/* Each epoch's windows start afresh at the epoch's first document, so
	 * an epoch is exactly a pass over its documents; window i starts at
	 * token i x seq_len of it. */
	int64_t pos = 0, off = 0;
	for (int64_t i = 0; i < s->per_epoch; i++) {
		/* skip empty documents and finished ones */
		while (off >= s->lens[s->doc_ids[order[pos]]]) {
			off -= s->lens[s->doc_ids[order[pos]]];
			pos++;
		}
		start[i] = (uint64_t)pos << 32 | (uint64_t)off;
		off += s->seq_len;
	}
	/* shuffling the starts is shuffling the sample numbers they belong to */
	SHUFFLE(start, s->per_epoch, epoch_seed(s, e, 2));
}

int gpt_samples_build(gpt_samples *s, const int64_t *doc_ids, int64_t n_docs, const int32_t *lens,
		      int seq_len, int64_t min_samples, uint64_t seed, gpt_err *err)
{
	memset(s, 0, sizeof *s);
	s->seq_len = seq_len;
	s->n_docs = n_docs;
	s->seed = seed;
	s->lens = lens;
	/* positions in an epoch's document order are 32-bit */
	if (n_docs > (int64_t)UINT32_MAX)
		return gpt_err_set(err, GPT_EDATA,
				   "the split holds %lld documents, more than the %lld the sample index takes; divide the dataset into several and give them as a blend or a directory",
				   (long long)n_docs, (long long)UINT32_MAX);
	int64_t tokens = 0;
	for (int64_t i = 0; i < n_docs; i++)
		tokens += lens[doc_ids[i]];
	if (seq_len <= 0 || tokens < (int64_t)seq_len + 1)
		return gpt_err_set(err, GPT_EDATA,
				   "the split holds %lld tokens in %lld documents, fewer than one sample of seq_len + 1 = %d tokens",
				   (long long)tokens, (long long)n_docs, seq_len + 1);
	/* An epoch yields (tokens - 1) / seq_len windows: each needs seq_len new
	 * tokens plus the one it shares with the next. */
	s->per_epoch = (tokens - 1) / seq_len;
	s->n_epochs = min_samples > s->per_epoch ? (min_samples + s->per_epoch - 1) / s->per_epoch : 1;
	s->n_samples = s->n_epochs * s->per_epoch;
	s->doc_ids = gpt_malloc((size_t)n_docs * sizeof *s->doc_ids, "document ids", err);
	s->epochs = s->doc_ids ? gpt_lazy_new(epoch_bytes(s), "an epoch of the sample index", err) : NULL;
	if (!s->epochs) {
		gpt_samples_free(s);
		return GPT_EINTERNAL;
	}
	memcpy(s->doc_ids, doc_ids, (size_t)n_docs * sizeof *s->doc_ids);
	return 0;
}

int64_t gpt_samples_pieces(const gpt_samples *s, int64_t k, gpt_sample_piece *out, int64_t cap, gpt_err *err)
{
	const uint64_t *start = gpt_lazy_lock(s->epochs, k / s->per_epoch, fill_epoch, s, err);
	if (!start)
		return -1;
	const uint32_t *order = (const uint32_t *)(start + s->per_epoch);
	uint64_t at = start[k % s->per_epoch];
	int64_t pos = (int64_t)(at >> 32), off = (int64_t)(at & 0xffffffffu), left = s->seq_len + 1, n = 0;
	/* a window ends in its epoch: the last starts seq_len + 1 tokens
	 * before the epoch's end at the latest */
	for (; left > 0 && pos < s->n_docs; pos++, off = 0) {
		int64_t doc = s->doc_ids[order[pos]], take = s->lens[doc] - off;
		if (take <= 0)
			continue;
		if (take > left)
			take = left;
		if (n < cap)
			out[n] = (gpt_sample_piece){doc, (int32_t)off, (int32_t)take};
		n++;
		left -= take;
	}
	gpt_lazy_unlock(s->epochs);
	if (left > 0) {
		gpt_err_set(err, GPT_EINTERNAL, "sample index: sample %lld runs past the end of its epoch", (long long)k);
		return -1;
	}
	return n;
}

void gpt_samples_free(gpt_samples *s)
{
	free(s->doc_ids);
	gpt_lazy_free(s->epochs);
	memset(s, 0, sizeof *s);
}
