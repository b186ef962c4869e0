/* What the GPU op tests share: uniform random inputs from a splitmix64
 * stream (each test picks its seed, GPU_CHECK_SEED, before including this)
 * and an allocation that bails out of the TAP run when memory runs out. */
#ifndef GPT_TEST_GPU_CHECK_H
#define GPT_TEST_GPU_CHECK_H

#include "../unit/tap.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static uint64_t rng_state = GPU_CHECK_SEED;

/* Uniform in [-1, 1), splitmix64. */
static double urand(void)
{
	uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	z ^= z >> 31;
	return (double)(z >> 11) * 0x1.0p-52 - 1.0;
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p) {
		printf("Bail out! out of memory\n");
		exit(1);
	}
	return p;
}

#endif
