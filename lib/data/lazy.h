/* A small cache of blocks built on demand (internal to lib/data).
 *
 * The sample index keeps the epochs in use this way, and the loader the
 * chunks of its blend index: a block is a pure function of its key (an
 * epoch, a chunk), so one that was dropped is built again, the same, when
 * it is needed again, and memory does not grow with the number of keys.
 * Two slots: a batch that straddles an epoch boundary, or two threads in
 * two epochs, keep both; the least recently used slot is rebuilt. */
#ifndef GPT_DATA_LAZY_H
#define GPT_DATA_LAZY_H

#include "core/core.h"

#include <pthread.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { GPT_LAZY_SLOTS = 2 };

/* Fills `block` (the cache's block size) for `key`, from ctx. */
typedef void (*gpt_lazy_fill)(const void *ctx, int64_t key, void *block);

typedef struct gpt_lazy {
	pthread_mutex_t mu;
	size_t bytes;                 /* per block */
	const char *what;             /* for an allocation failure */
	int64_t key[GPT_LAZY_SLOTS];  /* -1: empty */
	uint64_t used[GPT_LAZY_SLOTS];
	void *block[GPT_LAZY_SLOTS];  /* allocated on first use */
	uint64_t clock;
	int64_t fills;                /* blocks built so far */
} gpt_lazy;

/* A cache of blocks of `bytes` bytes; nothing is allocated yet. */
gpt_lazy *gpt_lazy_new(size_t bytes, const char *what, gpt_err *err);
/* The block of key (>= 0), with the cache locked until gpt_lazy_unlock:
 * built by fill(ctx, key, block) in the least recently used slot when no
 * slot holds it. NULL, unlocked, with err saying so when memory runs out. */
const void *gpt_lazy_lock(gpt_lazy *c, int64_t key, gpt_lazy_fill fill, const void *ctx, gpt_err *err);
void gpt_lazy_unlock(gpt_lazy *c);
/* Blocks built so far (a cache hit builds none). */
int64_t gpt_lazy_fills(gpt_lazy *c);
void gpt_lazy_free(gpt_lazy *c);

#ifdef __cplusplus
}
#endif

#endif
