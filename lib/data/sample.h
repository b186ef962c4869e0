/* The sample index: which seq_len+1 token windows a training run reads, in
 * which order. (Part of lib/data; kept in its own header.)
 *
 * As in Megatron-LM's GPT dataset: the documents of a split are shuffled per
 * epoch from the seed and concatenated; sample i is the window of seq_len+1
 * tokens starting at token i x seq_len of that stream (consecutive samples
 * share one token: the last target of one is the first input of the next);
 * the samples of each epoch are shuffled again, always, as Megatron-LM's and
 * FleetX's GPTDataset read theirs through a shuffle index whatever their
 * samplers say (FleetX's GPTBatchSampler keeps its shuffle flag unused). Everything depends only on
 * the documents' lengths, the seed and seq_len, never on the parallel
 * layout, so every layout reads the same global batches. */
#ifndef GPT_DATA_SAMPLE_H
#define GPT_DATA_SAMPLE_H

#include "core/core.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Splits n_docs documents by a weight string such as "949,50,1" into
 * consecutive ranges: begin[k] .. begin[k+1] for split k (k = 0 train,
 * 1 validation, 2 test), the bounds Megatron-LM's and PaddleNLP's
 * get_train_valid_test_split_ gives. Fewer than 3 weights leave the rest
 * empty. */
int gpt_split_parse(const char *spec, double weights[3], gpt_err *err);
void gpt_split_ranges(const double weights[3], int64_t n_docs, int64_t begin[4]);

typedef struct gpt_samples {
	int seq_len;
	int64_t n_samples;    /* samples available (all epochs built) */
	int64_t per_epoch;    /* samples per epoch */
	int64_t n_docs;       /* documents in the split */
	/* the shuffled concatenation, epoch after epoch: document ids */
	int64_t *doc_order;   /* n_epochs x n_docs */
	int64_t n_epochs;
	/* per sample (in stream order): position in doc_order and token offset */
	int64_t *start_doc;
	int32_t *start_off;
	int64_t *shuffle;     /* sample k of the run reads stream sample shuffle[k] */
} gpt_samples;

/* Builds the index for the documents doc_ids[0..n_docs) with lengths
 * lens[doc_id] (tokens), enough epochs for min_samples samples (at least one
 * epoch). Fails with GPT_EDATA (naming the numbers) when the split holds
 * fewer than seq_len + 1 tokens. */
int gpt_samples_build(gpt_samples *s, const int64_t *doc_ids, int64_t n_docs, const int32_t *lens,
		      int seq_len, int64_t min_samples, uint64_t seed, gpt_err *err);
/* The (document position, offset) where run sample k starts; k < n_samples. */
void gpt_samples_locate(const gpt_samples *s, int64_t k, int64_t *doc_pos, int32_t *offset);
void gpt_samples_free(gpt_samples *s);

/* The loader: samples by global index from one dataset, a directory of
 * datasets, or a weighted blend, for one split.
 *
 * spec is a dataset prefix (PREFIX.bin/.idx or an llm.c shard), a directory
 * (every *.idx prefix and *.bin llm.c shard in it, weighted by their token
 * counts), or Megatron's blend "W1 PREFIX1 W2 PREFIX2 ..." (weights need not
 * add up to 1) or "PREFIX1 PREFIX2 ..." (weighted by their token counts).
 * Each dataset's documents are split by `split` ("949,50,1")
 * and `which` (0 train, 1 validation, 2 test) picks the part. Blending is
 * Megatron's: sample k goes to the dataset furthest behind its share. The
 * index covers at least min_samples samples (more epochs as needed).
 *
 * flags: with GPT_LOADER_OPTIONAL a split that holds no documents in any of the datasets is no error but no loader: 0 with *out
 * NULL and err saying why (as Megatron-LM goes without a validation or test
 * set that its split leaves empty). A split empty in some of the datasets
 * only is GPT_EDATA either way. */
typedef struct gpt_loader gpt_loader;

enum { GPT_LOADER_OPTIONAL = 1 };

int gpt_loader_open(gpt_loader **out, const char *spec, const char *split, int which, int seq_len,
		    int64_t min_samples, uint64_t seed, int flags, gpt_err *err);
/* Samples in one pass over the split's documents (all datasets). */
int64_t gpt_loader_epoch_samples(const gpt_loader *l);
/* Samples the index covers. */
int64_t gpt_loader_size(const gpt_loader *l);
/* The seq_len + 1 tokens of sample k into out. */
int gpt_loader_sample(const gpt_loader *l, int64_t k, int32_t *out, gpt_err *err);
/* GPT_EUSAGE naming the dataset and the documents when a and b read some
 * of the same documents of a dataset (the same path), as a validation split
 * taken by another split string than the training's can. */
int gpt_loader_disjoint(const gpt_loader *a, const gpt_loader *b, gpt_err *err);
/* From now on a sample holding an id outside [0, vocab) is GPT_EDATA naming
 * the dataset, the document and the token (0: unchecked, the default). */
void gpt_loader_check_vocab(gpt_loader *l, int64_t vocab);
void gpt_loader_close(gpt_loader *l);

/* A small deterministic generator for shuffles (splitmix64). */
uint64_t gpt_splitmix64(uint64_t *state);

#ifdef __cplusplus
}
#endif

#endif
