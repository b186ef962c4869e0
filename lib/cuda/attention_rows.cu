/* The tensor-core attention's tile rows: the setting and what was picked
 * (attention_rows.cuh). */
#include "cuda/attention_rows.cuh"

#include <string.h>

int gpt_cuda_attention_rows(gpt_backend *be, int rows)
{
	gpt_cuda_ctx *cx = gpt_cuda_ctx_of(be);
	int was = cx->attn_rows;
	if (rows != 64 && rows != 128 && rows != GPT_CUDA_ATTN_AHEAD && rows != GPT_CUDA_ATTN_MASKED &&
	    rows != GPT_CUDA_ATTN_AUTO)
		return rows == 0 ? was : -1;
	cx->attn_rows = rows;
	memset(cx->attn_kind_rows, 0, sizeof cx->attn_kind_rows); /* every kernel's */
	return was;
}

int gpt_cuda_attention_kind_rows(gpt_backend *be, int kind)
{
	gpt_cuda_ctx *cx = gpt_cuda_ctx_of(be);
	if (kind < 0 || kind > 2)
		return -1;
	return cx->attn_kind_rows[kind] ? cx->attn_kind_rows[kind] : cx->attn_rows;
}

int gpt_cuda_attention_rows_used(gpt_backend *be, int rows[3])
{
	gpt_cuda_ctx *cx = gpt_cuda_ctx_of(be);
	memcpy(rows, cx->attn_last, sizeof cx->attn_last);
	return cx->attn_npick;
}

const gpt_cuda_attn_pick *gpt_cuda_attn_find(const gpt_cuda_ctx *cx, const gpt_cuda_attn_pick *k)
{
	for (int i = 0; i < cx->attn_npick; i++) {
		const gpt_cuda_attn_pick *p = &cx->attn_pick[i];
		if (p->kind == k->kind && p->drop == k->drop && p->vec == k->vec && p->HS == k->HS && p->T == k->T &&
		    p->bhn == k->bhn)
			return p;
	}
	return NULL;
}

const char *gpt_cuda_attention_form(int rows)
{
	switch (rows) {
	case 64:
		return "64";
	case 128:
		return "128";
	case GPT_CUDA_ATTN_AHEAD:
		return "64a";
	case GPT_CUDA_ATTN_MASKED:
		return "64m";
	default:
		return "?";
	}
}
