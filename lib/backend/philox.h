/* Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
 * 3", SC'11) and the dropout mask built on it.
 *
 * Header-only and written so that both a C11 compiler and nvcc accept it:
 * the CPU and CUDA backends include this one file, so a dropout mask is the
 * same bits on either. A mask bit is a pure function of global coordinates
 * (seed, step, layer, site, sample in the global batch, position, global
 * feature), never of rank, micro-batch or thread, so any parallel layout and
 * any recompute draw exactly the same mask.
 *
 * Coordinates map onto one Philox call as
 *   key     = { seed, step }
 *   counter = { feature / 8, position, sample, layer << 8 | site }
 * and an element takes 16 of its 128 bits: feature % 8 = e picks word
 * e / 2 of the four outputs, its low half for even e, its high half for
 * odd (gpt_rng_pick). One call serves eight features, twice what a 32-bit
 * draw an element gives; in the attention's dropout, T^2 / 2 draws a
 * head, Philox's rounds were most of the cost (gpu-ops on an H100,
 * 2026-11-27: the forward at 124M took 0.547 ms with p = 0.1, 0.285
 * without). The price is p's resolution, 2^-16 (gpt_dropout_threshold). Hence the limits: seed and step are 32-bit,
 * layer < 2^24, site < 2^8, sample and position < 2^32, feature < 2^35. */
#ifndef GPT_PHILOX_H
#define GPT_PHILOX_H

#include <stdint.h>

#ifdef __CUDACC__
#define GPT_PHILOX_FN static inline __host__ __device__
#else
#define GPT_PHILOX_FN static inline
#endif

#define GPT_PHILOX_M0 0xD2511F53u
#define GPT_PHILOX_M1 0xCD9E8D57u
#define GPT_PHILOX_W0 0x9E3779B9u
#define GPT_PHILOX_W1 0xBB67AE85u

/* Philox4x32 with 10 rounds: ctr[4] -> out[4] under key[2]. out may alias ctr. */
GPT_PHILOX_FN void gpt_philox4x32_10(uint32_t out[4], const uint32_t ctr[4],
				     const uint32_t key[2])
{
	uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
	uint32_t k0 = key[0], k1 = key[1];
	for (int r = 0; r < 10; r++) {
		uint64_t p0 = (uint64_t)GPT_PHILOX_M0 * c0;
		uint64_t p1 = (uint64_t)GPT_PHILOX_M1 * c2;
		uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
		uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
		c0 = hi1 ^ c1 ^ k0;
		c1 = lo1;
		c2 = hi0 ^ c3 ^ k1;
		c3 = lo0;
		k0 += GPT_PHILOX_W0;
		k1 += GPT_PHILOX_W1;
	}
	out[0] = c0;
	out[1] = c1;
	out[2] = c2;
	out[3] = c3;
}

/* The 128 bits of features 8 (feature / 8) .. + 7 at one coordinate. */
GPT_PHILOX_FN void gpt_rng_block(uint32_t out[4], uint32_t seed, uint32_t step,
				 uint32_t layer, uint32_t site, uint64_t sample,
				 uint64_t position, uint64_t feature)
{
	uint32_t ctr[4], key[2];
	ctr[0] = (uint32_t)(feature >> 3);
	ctr[1] = (uint32_t)position;
	ctr[2] = (uint32_t)sample;
	ctr[3] = (layer << 8) | (site & 0xffu);
	key[0] = seed;
	key[1] = step;
	gpt_philox4x32_10(out, ctr, key);
}

/* The 16-bit draw of element e (feature % 8) of a block. */
GPT_PHILOX_FN uint32_t gpt_rng_pick(const uint32_t r[4], unsigned e)
{
	/* selects, not r[e / 2]: an indexed array would live in a GPU
	 * thread's local memory */
	uint32_t w = e < 4 ? (e < 2 ? r[0] : r[1]) : (e < 6 ? r[2] : r[3]);
	return (e & 1u) ? w >> 16 : w & 0xffffu;
}

/* The 16-bit draw of one element. */
GPT_PHILOX_FN uint32_t gpt_rng_draw(uint32_t seed, uint32_t step, uint32_t layer,
				    uint32_t site, uint64_t sample, uint64_t position,
				    uint64_t feature)
{
	uint32_t r[4];
	gpt_rng_block(r, seed, step, layer, site, sample, position, feature);
	return gpt_rng_pick(r, (unsigned)(feature & 7u));
}

/* An element is kept when its draw is >= this threshold: p taken to the
 * nearest multiple of 2^-16, times 2^16, and at least 1 for any p > 0 (so
 * that a small p still drops), at most 2^16 - 1. p must lie in [0, 1). */
GPT_PHILOX_FN uint32_t gpt_dropout_threshold(float p)
{
	double t = (double)p * 65536.0 + 0.5;
	if (!(p > 0.0f))
		return 0u;
	return t < 1.0 ? 1u : t >= 65535.0 ? 65535u : (uint32_t)t;
}

/* The factor kept elements are multiplied by: 1 / (1 - p') for the p'
 * the threshold drops with, so that the expectation is exactly the
 * input's (1 / (1 - p) to 2^-16). */
GPT_PHILOX_FN float gpt_dropout_scale(float p)
{
	return (float)(65536.0 / (double)(65536u - gpt_dropout_threshold(p)));
}

#undef GPT_PHILOX_FN

#endif
