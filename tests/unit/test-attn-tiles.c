/* The CUDA attention kernels' tile order (backend/tiles.h), checked on the
 * CPU: every head's every tile exactly once, groups of heads in turn, each
 * group longest tile first, and the group sizes for the L2. */
#include <stdlib.h>

#include "backend/tiles.h"
#include "tap.h"

/* 0 when the grid of bhn heads of nt tiles in groups of hg is a
 * bijection onto (head, rank), its groups contiguous and each group's
 * ranks non-decreasing; else a message in why */
static int order_ok(uint32_t bhn, uint32_t nt, uint32_t hg, char *why, size_t n)
{
	unsigned char *seen = calloc((size_t)bhn * nt, 1);
	uint32_t prev_rank = 0, prev_group = 0;
	int rc = 0;
	if (!seen)
		return snprintf(why, n, "out of memory"), 1;
	for (uint32_t idx = 0; idx < bhn * nt && !rc; idx++) {
		uint32_t bh, rank, group = idx / (nt * hg);
		gpt_attention_tile(idx, nt, bhn, hg, &bh, &rank);
		if (bh >= bhn || rank >= nt)
			rc = snprintf(why, n, "block %u: head %u rank %u out of range", idx, bh, rank);
		else if (seen[(size_t)bh * nt + rank]++)
			rc = snprintf(why, n, "block %u: head %u rank %u twice", idx, bh, rank);
		else if (bh / hg != group)
			rc = snprintf(why, n, "block %u: head %u outside group %u", idx, bh, group);
		else if (idx && group == prev_group && rank < prev_rank)
			rc = snprintf(why, n, "block %u: rank %u after %u", idx, rank, prev_rank);
		prev_rank = rank;
		prev_group = group;
	}
	free(seen);
	return rc;
}

int main(void)
{
	static const uint32_t shapes[][3] = {
		/* bhn, nt, hg */
		{1, 1, 1},   {1, 16, 1},  {48, 4, 48}, {384, 16, 48}, {384, 16, 384},
		{7, 5, 3},   {7, 5, 7},   {13, 1, 4},  {100, 9, 1},   {5, 33, 2},
	};
	for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
		char why[160] = "";
		uint32_t bhn = shapes[s][0], nt = shapes[s][1], hg = shapes[s][2];
		ok(!order_ok(bhn, nt, hg, why, sizeof why),
		   "%u heads of %u tiles in groups of %u: each once, groups in turn, longest first", bhn,
		   nt, hg);
		if (why[0])
			diag("%s", why);
	}

	/* the first blocks are the first group's longest tiles, head by head */
	uint32_t bh, rank;
	gpt_attention_tile(0, 16, 384, 48, &bh, &rank);
	ok(bh == 0 && rank == 0, "block 0: head 0, longest tile");
	gpt_attention_tile(47, 16, 384, 48, &bh, &rank);
	ok(bh == 47 && rank == 0, "block 47: head 47, longest tile");
	gpt_attention_tile(48, 16, 384, 48, &bh, &rank);
	ok(bh == 0 && rank == 1, "block 48: head 0, next tile");
	gpt_attention_tile(16 * 48, 16, 384, 48, &bh, &rank);
	ok(bh == 48 && rank == 0, "block 768: the second group's first head, longest tile");
	/* a short last group: 7 heads in groups of 3, the last of 1 */
	gpt_attention_tile(2 * 5 * 3, 5, 7, 3, &bh, &rank);
	ok(bh == 6 && rank == 0, "short last group: its one head's longest tile");
	gpt_attention_tile(2 * 5 * 3 + 4, 5, 7, 3, &bh, &rank);
	ok(bh == 6 && rank == 4, "short last group: its one head's shortest tile last");

	/* groups: 12 MiB of walked tiles (two T x HS tensors) */
	is_int(gpt_attention_head_group(384, 1024, 64, 2), 48,
	       "124M seed shapes (T 1024, head 64, bf16): 48 heads a group");
	is_int(gpt_attention_head_group(20, 1024, 64, 2), 20, "no more heads a group than there are");
	is_int(gpt_attention_head_group(384, 1 << 20, 128, 2), 1,
	       "a head above the budget: groups of one");
	is_int(gpt_attention_head_group(384, 8192, 64, 2), 6, "T 8192: 6 heads a group");
	return done_testing();
}
