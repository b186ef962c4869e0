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

	/* gpt_rng_draw is the low or high half of word (feature % 8) / 2 of the
	 * block at feature / 8 */
	{
		uint32_t blk[4], nxt[4];
		gpt_rng_block(blk, 7, 3, 2, 1, 11, 5, 40);
		gpt_rng_block(nxt, 7, 3, 2, 1, 11, 5, 48);
		int same = 1;
		for (int f = 40; f < 48; f++) {
			uint32_t w = blk[(f - 40) / 2];
			same &= gpt_rng_draw(7, 3, 2, 1, 11, 5, (uint64_t)f) ==
				(f % 2 ? w >> 16 : w & 0xffffu);
			same &= gpt_rng_pick(blk, (unsigned)(f - 40)) ==
				gpt_rng_draw(7, 3, 2, 1, 11, 5, (uint64_t)f);
		}
		ok(same, "rng_draw picks the half word of its feature");
		uint32_t b47[4];
		gpt_rng_block(b47, 7, 3, 2, 1, 11, 5, 47);
		ok(memcmp(b47, blk, sizeof blk) == 0 && memcmp(nxt, blk, sizeof blk) != 0,
		   "features 40..47 share a block, 48 starts the next");
		uint32_t d = gpt_rng_draw(7, 3, 2, 1, 11, 5, 40);
		ok(d != gpt_rng_draw(7, 4, 2, 1, 11, 5, 40) && d != gpt_rng_draw(8, 3, 2, 1, 11, 5, 40) &&
		   d != gpt_rng_draw(7, 3, 3, 1, 11, 5, 40) && d != gpt_rng_draw(7, 3, 2, 2, 11, 5, 40) &&
		   d != gpt_rng_draw(7, 3, 2, 1, 12, 5, 40) && d != gpt_rng_draw(7, 3, 2, 1, 11, 6, 40) &&
		   d != gpt_rng_draw(7, 3, 2, 1, 11, 5, 48),
		   "every coordinate changes the draw");
	}

	is_int(gpt_dropout_threshold(0.0f), 0, "p = 0 keeps everything");
	is_int(gpt_dropout_threshold(0.5f), 0x8000u, "p = 0.5: threshold 2^15");
	is_int(gpt_dropout_threshold(0.1f), 6554, "p = 0.1: the nearest multiple of 2^-16");
	is_int(gpt_dropout_threshold(1e-7f), 1, "a small p > 0 still drops");
	is_int(gpt_dropout_threshold(0.99999994f), 65535, "p near 1 keeps 2^-16");
	is_near(gpt_dropout_scale(0.1f), 65536.0 / (65536 - 6554), 1e-7,
		"scale is 1 / (1 - p') for the p' dropped");
	is_near(gpt_dropout_scale(0.1f), 1.0 / 0.9, 1e-5, "... 1 / (1 - p) to 2^-16");

	/* mean of the 16-bit draws over many coordinates and every element of
	 * a block: uniform has mean (2^16 - 1) / 2, the standard error over
	 * 2^16 draws 2^16 / sqrt(12 * 2^16) */
	{
		double sum = 0.0, low = 0.0;
		int n = 1 << 16;
		for (int i = 0; i < n; i++) {
			uint32_t r = gpt_rng_draw(1234, 1, 0, 0, (uint64_t)(i >> 10), (uint64_t)(i >> 4 & 63),
						  (uint64_t)(i & 15));
			sum += r;
			low += r < 6554;
		}
		double mean = sum / n / 65536.0;
		is_near(mean, 0.5, 5 * (1.0 / sqrt(12.0 * n)), "draws average 1/2 (5 sigma)");
		is_near(low / n, 6554.0 / 65536, 5 * sqrt(0.1 * 0.9 / n), "p = 0.1 drops 10%% (5 sigma)");
	}
	return done_testing();
}
