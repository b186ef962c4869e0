/* lib/model's own: what gpt.c, pass.c, head.c and qat.c share and nothing
 * outside uses: the parameter table's indices, the error-passing OP, the
 * tensor and sequence parallel sums over the tp group, and the hooks. */
#ifndef GPT_MODEL_IMPL_H
#define GPT_MODEL_IMPL_H

#include "comm/comm.h"
#include "model/gpt.h"

/* Table entries per layer, in gpt_param_table's order. */
enum {
	P_LN1_W, P_LN1_B, P_QKV_W, P_QKV_B, P_PROJ_W, P_PROJ_B,
	P_LN2_W, P_LN2_B, P_FC_W, P_FC_B, P_MPROJ_W, P_MPROJ_B, P_PER_LAYER
};
#define T_WTE 0
#define T_WPE 1
#define T_LAYER(l, k) (2 + (int64_t)(l) * P_PER_LAYER + (k))
#define T_LNF_W(m) (2 + (m)->shape.layers * P_PER_LAYER)
#define T_LNF_B(m) (T_LNF_W(m) + 1)

#define OP(call)                          \
	do {                              \
		if ((rc = (call)))        \
			return rc;        \
	} while (0)

/* Sums a tensor-parallel partial result over the tp group, in place. */
static inline int tp_sum(gpt_model *m, void *buf, int64_t n, gpt_err *err)
{
	if (m->layout.tp == 1)
		return 0;
	return gpt_comm_all_reduce(m->tp_group, buf, buf, n, m->be->dtype, GPT_REDUCE_SUM, err);
}

static inline int seqpar(const gpt_model *m)
{
	return m->n_rows != m->opts.batch * m->opts.seq_len;
}

/* Sequence parallelism: the whole (B*T, C) tensor from every rank's rows,
 * and a partial (B*T, C) sum reduced to this rank's rows. */
static inline int sp_gather(gpt_model *m, void *full, const void *rows, gpt_err *err)
{
	return gpt_comm_all_gather(m->tp_group, rows, full, m->n_rows * m->shape.hidden, m->be->dtype, err);
}

static inline int sp_scatter(gpt_model *m, void *rows, const void *full, gpt_err *err)
{
	return gpt_comm_reduce_scatter(m->tp_group, full, rows, m->n_rows * m->shape.hidden, m->be->dtype,
				       GPT_REDUCE_SUM, err);
}

/* The hooks around unit `unit`'s use (gpt_model_hooks), when set. */
static inline int hook(gpt_model *m, int acquire, int unit, int backward, gpt_err *err)
{
	int (*f)(void *, gpt_model *, int, int, gpt_err *) = acquire ? m->hooks.acquire : m->hooks.release;
	return f ? f(m->hooks.ctx, m, unit, backward, err) : 0;
}

/* head.c: the head after the last chunk's layers, ln_f and the fused
 * classifier (gpt_model_forward), on the current slot. */
int gpt_model_head_fwd(gpt_model *m, int64_t chunk, const int32_t *targets, const float *dloss,
		       double *loss_sum, int64_t *n_tokens, gpt_err *err);

#endif
