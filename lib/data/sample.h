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
#include "data/data.h"

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

struct gpt_lazy;

/* Only the sizes are kept for the whole run: an epoch's document order,
 * window starts and sample shuffle depend on nothing but (seed, epoch, the
 * documents' lengths, seq_len), so they are built when a sample of that
 * epoch is read and kept for the two epochs read last (a batch can straddle
 * an epoch boundary). Memory: 8 bytes a document, plus 8 bytes a sample of
 * one epoch and 4 a document for each of the two, whatever the number of
 * epochs; the samples are the same as with every epoch built up front. */
typedef struct gpt_samples {
	int seq_len;
	int64_t n_samples;    /* samples available: n_epochs x per_epoch */
	int64_t per_epoch;    /* samples per epoch */
	int64_t n_docs;       /* documents in the split */
	int64_t n_epochs;
	uint64_t seed;
	int64_t *doc_ids;     /* the split's documents (a copy) */
	const int32_t *lens;  /* by document id: the caller's, kept while this is */
	struct gpt_lazy *epochs;
} gpt_samples;

/* A stretch of a sample: len tokens of document doc from token off. */
typedef struct gpt_sample_piece {
	int64_t doc;
	int32_t off, len;
} gpt_sample_piece;

/* Sets up the index for the documents doc_ids[0..n_docs) with lengths
 * lens[doc_id] (tokens, read again whenever an epoch is built, so lens must
 * outlive s), enough epochs for min_samples samples (at least one epoch).
 * Fails with GPT_EDATA (naming the numbers) when the split holds fewer than
 * seq_len + 1 tokens, or more documents than the index's 32-bit positions
 * take (2^32 - 1). */
int gpt_samples_build(gpt_samples *s, const int64_t *doc_ids, int64_t n_docs, const int32_t *lens,
		      int seq_len, int64_t min_samples, uint64_t seed, gpt_err *err);
/* The pieces of run sample k (0 <= k < n_samples): the seq_len + 1 tokens
 * it reads, document after document, empty documents skipped. Writes the
 * first cap of them to out and returns how many there are (at most
 * seq_len + 1; when more than cap, call again with room for all), or -1
 * with err set when k's epoch had to be built and memory ran out. Several
 * threads may call it at once. */
int64_t gpt_samples_pieces(const gpt_samples *s, int64_t k, gpt_sample_piece *out, int64_t cap, gpt_err *err);
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
 * index covers at least min_samples samples (more epochs as needed); like
 * each dataset's (see gpt_samples), a blend's is built as it is read, from
 * what each dataset gave before every 2^16th blended sample (8 bytes a
 * dataset each), 2^16 samples at a time. Several threads may read samples
 * at once.
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
/* The datasets the loader reads (one, or those of a blend): dataset i and
 * its path as the spec names it. */
int gpt_loader_num_datasets(const gpt_loader *l);
const gpt_dataset *gpt_loader_dataset(const gpt_loader *l, int i, const char **path);
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
