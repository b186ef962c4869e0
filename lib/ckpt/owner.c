/* Who writes what: the pieces a rank saves, cut out of its flat buffers.
 * (Part of lib/ckpt.)
 *
 * Every element of every global tensor is written exactly once across the
 * job. A rank holds, for each table entry, one box (gpt_param_box) at an
 * offset of its flat buffers; its optimizer owns a flat range [begin, end)
 * of them (a ZeRO shard, or everything). Copies exist along three axes and
 * one copy is chosen on each: data replicas (dp_rank 0 writes), tensor
 * parallel ranks for the tensors tp does not split (tp_rank 0 writes), and
 * pipeline stages for the embedding tied between the first and last stage
 * (the first stage writes). What is left is cut by the flat range: a range
 * inside a row-major box is at most 2 x ndim - 1 boxes. */
#include "ckpt/ckpt.h"

#include <stdlib.h>
#include <string.h>

/* Elements [first, first + count) of box b in its row-major order, as boxes
 * of global coordinates, appended at out; returns how many. Each box found
 * is itself one contiguous run of that order, so a piece is a pointer and a
 * length in the flat buffer. d is the dimension being split: dimensions
 * before it are fixed by `at` (already in out's offsets). */
static int split(const gpt_box *b, int d, gpt_box at, int64_t first, int64_t count, gpt_box *out)
{
	if (count <= 0)
		return 0;
	int nd = b->ndim;
	int64_t inner = 1;
	for (int k = d + 1; k < nd; k++)
		inner *= b->len[k];
	int64_t r0 = first / inner, r1 = (first + count) / inner; /* whole rows [ra, r1) */
	int64_t ra = first % inner ? r0 + 1 : r0;
	int n = 0;
	if (d == nd - 1 || (first % inner == 0 && count % inner == 0)) {
		at.off[d] = b->off[d] + first / inner;
		at.len[d] = count / inner;
		for (int k = d + 1; k < nd; k++) {
			at.off[k] = b->off[k];
			at.len[k] = b->len[k];
		}
		out[0] = at;
		return 1;
	}
	if (r0 == (first + count - 1) / inner) { /* all inside one row of dimension d */
		at.off[d] = b->off[d] + r0;
		at.len[d] = 1;
		return split(b, d + 1, at, first - r0 * inner, count, out);
	}
	if (first % inner) { /* the end of a partial first row */
		at.off[d] = b->off[d] + r0;
		at.len[d] = 1;
		n += split(b, d + 1, at, first - r0 * inner, inner - first % inner, out + n);
	}
	if (r1 > ra) {
		at.off[d] = b->off[d] + ra;
		at.len[d] = r1 - ra;
		for (int k = d + 1; k < nd; k++) {
			at.off[k] = b->off[k];
			at.len[k] = b->len[k];
		}
		out[n++] = at;
	}
	if ((first + count) % inner) { /* the start of a partial last row */
		at.off[d] = b->off[d] + r1;
		at.len[d] = 1;
		n += split(b, d + 1, at, 0, (first + count) % inner, out + n);
	}
	return n;
}

int gpt_box_range_split(const gpt_box *b, int64_t first, int64_t count, gpt_box *out)
{
	if (count <= 0 || first < 0 || first + count > gpt_box_numel(b))
		return 0;
	if (b->ndim == 0) {
		out[0] = *b;
		return 1;
	}
	gpt_box at;
	memset(&at, 0, sizeof at);
	at.ndim = b->ndim;
	return split(b, 0, at, first, count, out);
}

int gpt_ckpt_writes(const gpt_param_info *p, const gpt_ckpt_rank *r)
{
	if (r->dp_rank != 0)
		return 0;
	if (p->tp_dim < 0 && r->tp_rank != 0)
		return 0;
	/* the embedding's owner is the first stage; the last holds a tied copy */
	if (p->place == GPT_PARAM_EMBED && r->pp_rank != 0)
		return 0;
	return 1;
}

/* Where sub (a box inside b) starts in b's row-major order. */
static int64_t box_offset_of(const gpt_box *b, const gpt_box *sub)
{
	int64_t o = 0;
	for (int d = 0; d < b->ndim; d++)
		o = o * b->len[d] + (sub->off[d] - b->off[d]);
	return o;
}

int gpt_ckpt_slices(const gpt_param_info *table, int64_t n_table, const int64_t *offset,
		    const gpt_box *box, const gpt_ckpt_rank *r, gpt_ckpt_slice **out, int64_t *n,
		    gpt_err *err)
{
	*out = NULL;
	*n = 0;
	int64_t cap = 0;
	for (int64_t i = 0; i < n_table; i++)
		if (offset[i] >= 0)
			cap += 2 * (box[i].ndim ? box[i].ndim : 1) - 1;
	gpt_ckpt_slice *s = gpt_calloc((size_t)(cap ? cap : 1), sizeof *s, "checkpoint slices", err);
	if (!s)
		return GPT_EINTERNAL;
	int64_t k = 0;
	for (int64_t i = 0; i < n_table; i++) {
		if (offset[i] < 0 || (r->writers_only && !gpt_ckpt_writes(&table[i], r)))
			continue;
		int64_t a = offset[i], b = offset[i] + gpt_box_numel(&box[i]);
		int64_t x0 = a > r->begin ? a : r->begin, x1 = b < r->end ? b : r->end;
		if (x1 <= x0)
			continue;
		gpt_box parts[2 * GPT_MAX_DIMS];
		int np = gpt_box_range_split(&box[i], x0 - a, x1 - x0, parts);
		for (int j = 0; j < np; j++) {
			s[k].tensor = i;
			s[k].box = parts[j];
			s[k].flat = a + box_offset_of(&box[i], &parts[j]);
			k++;
		}
	}
	*out = s;
	*n = k;
	return 0;
}
