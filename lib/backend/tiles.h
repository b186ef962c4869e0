/* The order in which the CUDA attention kernels (lib/cuda/attention_tc.cu)
 * take their tiles: a block per head and 64-row tile, in a grid of one
 * dimension. Header-only, for nvcc and a C11 compiler both, so that the
 * unit tests check on the CPU the same map the kernels use.
 *
 * A block walks the tiles of the other side of its head (the keys and
 * values for the forward and dq, the queries and output gradients for
 * dkv) up to the diagonal. Heads go in groups whose walked tiles fill
 * about GPT_ATTN_GROUP_BYTES, and a group's blocks come longest first
 * across its heads: the blocks that walk one head's tiles run at about
 * the same time, and find them in the L2 cache. (A grid of every head's
 * longest tile first, then every head's next, read each head's keys from
 * memory again for every query tile at the seed shapes: 384 heads of
 * 256 KiB each are twice a Hopper's L2.) Within a group, and so over the
 * grid's last blocks, the longest tiles go first and the shortest last. */
#ifndef GPT_TILES_H
#define GPT_TILES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define GPT_TILES_FN static inline __host__ __device__
#else
#define GPT_TILES_FN static inline
#endif

/* The L2 bytes a group's walked tiles may take: a quarter of a Hopper's
 * 50 MB, so that the two groups in flight at a time leave room for the
 * rest (the block's own tile, the outputs). */
#define GPT_ATTN_GROUP_BYTES ((size_t)12 << 20)

/* Heads a group, of bhn, when a head's walked tiles are the two T x HS
 * tensors of es-byte elements: at least 1, at most bhn. */
GPT_TILES_FN uint32_t gpt_attention_head_group(uint32_t bhn, int64_t T, int64_t HS, size_t es)
{
	size_t head = 2 * (size_t)T * (size_t)HS * es;
	size_t hg = head ? GPT_ATTN_GROUP_BYTES / head : bhn;
	return hg < 1 ? 1 : hg > bhn ? bhn : (uint32_t)hg;
}

/* Block idx (below bhn * nt) of a grid of bhn heads of nt tiles in groups
 * of hg heads: its head *bh and its tile's rank *rank, 0 the head's
 * longest. bhn * nt must fit 32 bits. */
GPT_TILES_FN void gpt_attention_tile(uint32_t idx, uint32_t nt, uint32_t bhn, uint32_t hg,
				     uint32_t *bh, uint32_t *rank)
{
	uint32_t per = nt * hg, c = idx / per, r = idx - c * per, h0 = c * hg;
	uint32_t g = bhn - h0 < hg ? bhn - h0 : hg; /* the last group may be short */
	*bh = h0 + r % g;
	*rank = r / g;
}

#endif
