/* Private to lib/infer: where the decoder finds its parameters in the table
 * of gpt_param_table (DESIGN.md section 4): wte, wpe, then per layer the
 * entries below in this order, then the final LayerNorm. */
#ifndef GPT_INFER_LAYOUT_H
#define GPT_INFER_LAYOUT_H

#include "backend/backend.h"

#include <stdint.h>

enum { P_LN1_W = 0, P_LN1_B, P_QKV_W, P_QKV_B, P_PROJ_W, P_PROJ_B, P_LN2_W, P_LN2_B,
       P_FC_W, P_FC_B, P_MPROJ_W, P_MPROJ_B, P_PER_LAYER };

#define T_WTE 0
#define T_WPE 1
#define T_LAYER(l, k) (2 + (int64_t)(l) * P_PER_LAYER + (k))

/* The table entry of weight matrix q of gpt_infer_model.qw: per layer qkv,
 * proj, fc, mlp proj (q = 4 l + j), then the head (q = 4 layers), which is
 * wte. */
static inline int64_t gpt_infer_matrix_entry(int64_t layers, int64_t q)
{
	static const int mats[4] = {P_QKV_W, P_PROJ_W, P_FC_W, P_MPROJ_W};
	return q == 4 * layers ? T_WTE : T_LAYER(q / 4, mats[q % 4]);
}

/* 1 when table entry i is one of the layers' weight matrices (not wte). */
static inline int gpt_infer_is_layer_matrix(int64_t i)
{
	int64_t k = (i - 2) % P_PER_LAYER;
	return i >= 2 && (k == P_QKV_W || k == P_PROJ_W || k == P_FC_W || k == P_MPROJ_W);
}

/* 1 when the model's host parameters hold table entry i: every entry with
 * fp32 weights; with 16-bit or int8 weights all but the layers' weight
 * matrices, which only their compact copies (gpt_infer_model.qw) hold, so
 * that those weights take their own size in memory, not fp32's as well
 * (wte stays: the embedding reads it). */
static inline int gpt_infer_host_holds(gpt_dtype wdtype, int64_t i)
{
	return wdtype == GPT_DTYPE_F32 || !gpt_infer_is_layer_matrix(i);
}

#endif
