/* The sample index: shuffled documents, seq_len+1 windows, shuffled samples. */
#include "data/sample.h"

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

static void shuffle(int64_t *v, int64_t n, uint64_t seed)
{
	uint64_t st = seed;
	for (int64_t i = n - 1; i > 0; i--) {
		int64_t j = (int64_t)below(&st, (uint64_t)i + 1);
		int64_t t = v[i];
		v[i] = v[j];
		v[j] = t;
	}
}

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

int gpt_samples_build(gpt_samples *s, const int64_t *doc_ids, int64_t n_docs, const int32_t *lens,
		      int seq_len, int64_t min_samples, uint64_t seed, gpt_err *err)
{
	memset(s, 0, sizeof *s);
	s->seq_len = seq_len;
	s->n_docs = n_docs;
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
	size_t nd = (size_t)(s->n_epochs * n_docs), ns = (size_t)s->n_samples;
	s->doc_order = gpt_malloc(nd * sizeof *s->doc_order, "document order", err);
	s->start_doc = gpt_malloc(ns * sizeof *s->start_doc, "sample index", err);
	s->start_off = gpt_malloc(ns * sizeof *s->start_off, "sample index", err);
	s->shuffle = gpt_malloc(ns * sizeof *s->shuffle, "sample shuffle", err);
	if (!s->doc_order || !s->start_doc || !s->start_off || !s->shuffle) {
		gpt_samples_free(s);
		return GPT_EINTERNAL;
	}
	for (int64_t e = 0; e < s->n_epochs; e++) {
		int64_t *o = s->doc_order + e * n_docs;
		memcpy(o, doc_ids, (size_t)n_docs * sizeof *o);
		shuffle(o, n_docs, seed * 0x100000001b3ull + 2 * (uint64_t)e + 1);
	}
	/* Each epoch's windows start afresh at the epoch's first document, so
	 * an epoch is exactly a pass over its documents. */
	for (int64_t e = 0; e < s->n_epochs; e++) {
		const int64_t *o = s->doc_order + e * n_docs;
		int64_t pos = 0, off = 0;
		for (int64_t i = 0; i < s->per_epoch; i++) {
			int64_t k = e * s->per_epoch + i;
			/* skip empty documents and finished ones */
			while (off >= lens[o[pos]]) {
				off -= lens[o[pos]];
				pos++;
			}
			s->start_doc[k] = e * n_docs + pos;
			s->start_off[k] = (int32_t)off;
			off += seq_len;
		}
		int64_t *sh = s->shuffle + e * s->per_epoch;
		for (int64_t i = 0; i < s->per_epoch; i++)
			sh[i] = e * s->per_epoch + i;
		shuffle(sh, s->per_epoch, seed * 0x100000001b3ull + 2 * (uint64_t)e + 2);
	}
	return 0;
}

void gpt_samples_locate(const gpt_samples *s, int64_t k, int64_t *doc_pos, int32_t *offset)
{
	int64_t j = s->shuffle[k];
	*doc_pos = s->start_doc[j];
	*offset = s->start_off[j];
}

void gpt_samples_free(gpt_samples *s)
{
	free(s->doc_order);
	free(s->start_doc);
	free(s->start_off);
	free(s->shuffle);
	memset(s, 0, sizeof *s);
}
