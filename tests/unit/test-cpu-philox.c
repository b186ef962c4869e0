/* Philox4x32-10 against the Random123 known-answer vectors, and the dropout
 * mask's keying: independent of how the batch or the features are split. */
#include "backend/philox.h"
#include "cpu-check.h"

static void kat(const uint32_t ctr[4], const uint32_t key[2], const uint32_t want[4],
		const char *name)
{
	uint32_t out[4];
	gpt_philox4x32_10(out, ctr, key);
	ok(out[0] == want[0] && out[1] == want[1] && out[2] == want[2] && out[3] == want[3],
	   "philox4x32-10 known answer: %s", name);
	diag("got %08x %08x %08x %08x", out[0], out[1], out[2], out[3]);
}

int main(void)
{
	{
		uint32_t c[4] = {0, 0, 0, 0}, k[2] = {0, 0};
		uint32_t w[4] = {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8};
		kat(c, k, w, "zero counter, zero key");
	}
	{
		uint32_t c[4] = {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff};
		uint32_t k[2] = {0xffffffff, 0xffffffff};
		uint32_t w[4] = {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd};
		kat(c, k, w, "all-ones counter and key");
	}
	{
		uint32_t c[4] = {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344};
		uint32_t k[2] = {0xa4093822, 0x299f31d0};
		uint32_t w[4] = {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1};
		kat(c, k, w, "pi digits");
	}
	{
		uint32_t c[4] = {1, 2, 3, 4}, k[2] = {5, 6}, out[4];
		uint32_t in[4] = {1, 2, 3, 4};
		gpt_philox4x32_10(out, c, k);
		gpt_philox4x32_10(in, in, k);
		ok(memcmp(out, in, sizeof out) == 0, "output may alias the counter");
	}

	/* gpt_rng_bits is lane feature % 4 of the block at feature / 4 */
	{
		uint32_t blk[4];
		gpt_rng_block(blk, 7, 3, 2, 1, 11, 5, 40);
		int same = 1;
		for (int f = 40; f < 44; f++)
			same &= gpt_rng_bits(7, 3, 2, 1, 11, 5, (uint64_t)f) == blk[f - 40];
		ok(same, "rng_bits picks the lane of its feature");
		ok(gpt_rng_bits(7, 3, 2, 1, 11, 5, 40) != gpt_rng_bits(7, 4, 2, 1, 11, 5, 40) &&
		   gpt_rng_bits(7, 3, 2, 1, 11, 5, 40) != gpt_rng_bits(8, 3, 2, 1, 11, 5, 40) &&
		   gpt_rng_bits(7, 3, 2, 1, 11, 5, 40) != gpt_rng_bits(7, 3, 3, 1, 11, 5, 40) &&
		   gpt_rng_bits(7, 3, 2, 1, 11, 5, 40) != gpt_rng_bits(7, 3, 2, 2, 11, 5, 40) &&
		   gpt_rng_bits(7, 3, 2, 1, 11, 5, 40) != gpt_rng_bits(7, 3, 2, 1, 12, 5, 40) &&
		   gpt_rng_bits(7, 3, 2, 1, 11, 5, 40) != gpt_rng_bits(7, 3, 2, 1, 11, 6, 40),
		   "every coordinate changes the bits");
	}

	is_int(gpt_dropout_threshold(0.0f), 0, "p = 0 keeps everything");
	is_int(gpt_dropout_threshold(0.5f), 0x80000000u, "p = 0.5 threshold is 2^31");
	is_near(gpt_dropout_scale(0.1f), 1.0 / 0.9, 1e-6, "scale is 1 / (1 - p)");

	/* mean of the 32-bit draws over many coordinates: uniform has mean 2^31
	 * and the standard error over 2^16 draws is 2^32 / sqrt(12 * 2^16) */
	{
		double sum = 0.0;
		int n = 1 << 16;
		for (int i = 0; i < n; i++)
			sum += gpt_rng_bits(1234, 1, 0, 0, (uint64_t)(i >> 10), (uint64_t)(i >> 4 & 63),
					    (uint64_t)(i & 15));
		double mean = sum / n / 4294967296.0;
		is_near(mean, 0.5, 5 * (1.0 / sqrt(12.0 * n)), "draws average 1/2 (5 sigma)");
	}
	return done_testing();
}
