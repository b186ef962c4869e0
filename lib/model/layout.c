/* Where a rank sits in the tensor x pipeline layout, the box of each global
 * tensor it holds, and the recompute granularity names. (Part of lib/model;
 * declared in model/gpt.h.) */
#include "model/gpt.h"

#include <string.h>
#include <strings.h>

void gpt_layout_single(gpt_layout *lo, const gpt_model_shape *s)
{
	memset(lo, 0, sizeof *lo);
	lo->tp = lo->pp = lo->chunks = 1;
	lo->layer_end[0] = s->layers;
}

int gpt_layout_make(gpt_layout *lo, const gpt_model_shape *s, int64_t tp, int64_t tp_rank,
		    int64_t pp, int64_t pp_rank, int64_t chunks, const int64_t *stage_layers,
		    gpt_err *err)
{
	memset(lo, 0, sizeof *lo);
	if (tp < 1 || pp < 1 || chunks < 1 || chunks > GPT_MAX_CHUNKS || tp_rank < 0 || tp_rank >= tp ||
	    pp_rank < 0 || pp_rank >= pp)
		return gpt_err_set(err, GPT_EUSAGE,
				   "layout: tp rank %lld of %lld, pp rank %lld of %lld with %lld chunks (at most %d) is not a layout",
				   (long long)tp_rank, (long long)tp, (long long)pp_rank, (long long)pp,
				   (long long)chunks, GPT_MAX_CHUNKS);
	int64_t vs = pp * chunks, sum = 0;
	for (int64_t v = 0; stage_layers && v < vs; v++)
		sum += stage_layers[v] >= 1 ? stage_layers[v] : -s->layers - 1;
	if (stage_layers ? sum != s->layers : s->layers % vs)
		return gpt_err_set(err, GPT_EUSAGE,
				   "Model.num_layers: %lld layers do not split %s over pp_degree x virtual_pp_degree = %lld x %lld stages; choose degrees (or Distributed.pp_layers) that fit",
				   (long long)s->layers, stage_layers ? "as Distributed.pp_layers says" : "evenly",
				   (long long)pp, (long long)chunks);
	*lo = (gpt_layout){.tp = tp, .tp_rank = tp_rank, .pp = pp, .pp_rank = pp_rank, .chunks = chunks};
	int64_t begin = 0;
	for (int64_t v = 0; v < vs; v++) {
		int64_t n = stage_layers ? stage_layers[v] : s->layers / vs;
		if (v % pp == pp_rank) {
			lo->layer_begin[v / pp] = begin;
			lo->layer_end[v / pp] = begin + n;
		}
		begin += n;
	}
	return 0;
}

int64_t gpt_layout_layers(const gpt_layout *lo)
{
	int64_t n = 0;
	for (int64_t c = 0; c < lo->chunks; c++)
		n += lo->layer_end[c] - lo->layer_begin[c];
	return n;
}

int gpt_param_box(const gpt_param_info *p, const gpt_layout *lo, gpt_box *box)
{
	memset(box, 0, sizeof *box);
	int first = lo->pp_rank == 0, last = lo->pp_rank == lo->pp - 1;
	int held = 0;
	switch (p->place) {
	case GPT_PARAM_EMBED:
		held = first || (last && strcmp(p->name, "wte") == 0);
		break;
	case GPT_PARAM_LAYER:
		for (int64_t c = 0; c < lo->chunks; c++)
			held |= p->layer >= lo->layer_begin[c] && p->layer < lo->layer_end[c];
		break;
	default:
		held = last;
		break;
	}
	if (!held)
		return 0;
	box->ndim = p->ndim;
	for (int d = 0; d < p->ndim; d++)
		box->len[d] = p->shape[d];
	if (p->tp_dim >= 0 && lo->tp > 1) {
		box->len[p->tp_dim] = p->shape[p->tp_dim] / lo->tp;
		box->off[p->tp_dim] = box->len[p->tp_dim] * lo->tp_rank;
	}
	return 1;
}

int gpt_recompute_parse(const char *s, gpt_recompute *out)
{
	static const struct { const char *name; gpt_recompute r; } names[] = {
		{"full", GPT_RECOMPUTE_FULL},
		{"only_attn", GPT_RECOMPUTE_ONLY_ATTN},
		{"core_attn", GPT_RECOMPUTE_CORE_ATTN},
	};
	for (size_t i = 0; i < sizeof names / sizeof *names; i++)
		if (strcasecmp(s, names[i].name) == 0) {
			*out = names[i].r;
			return 0;
		}
	return -1;
}
