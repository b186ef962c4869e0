/* N-d boxes of global tensors: intersection and strided copy. */
#include "core/core.h"

#include <string.h>

gpt_box gpt_box_full(int ndim, const int64_t *shape)
{
	gpt_box b;
	memset(&b, 0, sizeof b);
	b.ndim = ndim;
	for (int i = 0; i < ndim; i++)
		b.len[i] = shape[i];
	return b;
}

int64_t gpt_box_numel(const gpt_box *b)
{
	int64_t n = 1;
	for (int i = 0; i < b->ndim; i++)
		n *= b->len[i];
	return n;
}

int gpt_box_intersect(const gpt_box *a, const gpt_box *b, gpt_box *out)
{
	if (a->ndim != b->ndim)
		return 0;
	gpt_box r;
	memset(&r, 0, sizeof r);
	r.ndim = a->ndim;
	for (int i = 0; i < a->ndim; i++) {
		int64_t lo = a->off[i] > b->off[i] ? a->off[i] : b->off[i];
		int64_t ha = a->off[i] + a->len[i], hb = b->off[i] + b->len[i];
		int64_t hi = ha < hb ? ha : hb;
		if (hi <= lo)
			return 0;
		r.off[i] = lo;
		r.len[i] = hi - lo;
	}
	*out = r;
	return 1;
}

int gpt_box_contains(const gpt_box *outer, const gpt_box *inner)
{
	if (outer->ndim != inner->ndim)
		return 0;
	for (int i = 0; i < outer->ndim; i++)
		if (inner->off[i] < outer->off[i] ||
		    inner->off[i] + inner->len[i] > outer->off[i] + outer->len[i])
			return 0;
	return 1;
}

/* Row-major offset (in elements) of the global point p within box b. */
static int64_t offset_in(const gpt_box *b, const int64_t *p)
{
	int64_t o = 0;
	for (int i = 0; i < b->ndim; i++)
		o = o * b->len[i] + (p[i] - b->off[i]);
	return o;
}

void gpt_box_copy(void *dst, const gpt_box *dst_box, const void *src, const gpt_box *src_box,
		  const gpt_box *region, size_t elem_size)
{
	int nd = region->ndim;
	if (nd == 0) {
		memcpy(dst, src, elem_size);
		return;
	}
	if (gpt_box_numel(region) == 0)
		return;
	/* Copy runs along the last dimension; walk the others like an odometer. */
	int64_t p[GPT_MAX_DIMS];
	for (int i = 0; i < nd; i++)
		p[i] = region->off[i];
	size_t run = (size_t)region->len[nd - 1] * elem_size;
	for (;;) {
		memcpy((char *)dst + (size_t)offset_in(dst_box, p) * elem_size,
		       (const char *)src + (size_t)offset_in(src_box, p) * elem_size, run);
		int d = nd - 2;
		while (d >= 0) {
			if (++p[d] < region->off[d] + region->len[d])
				break;
			p[d] = region->off[d];
			d--;
		}
		if (d < 0)
			break;
	}
}
