/* Quantization-aware training in the trainer: the Quantization section to
 * the model's fake-quantized linears, and the all-reduce behind the step's
 * activation maxima. */
#include "train/trainer-impl.h"

#include <string.h>

/* Every rank holding the same layers saw a part of the global batch. */
static int data_max(void *ctx, float *buf, int64_t n, gpt_err *err)
{
	trainer *tr = ctx;
	return gpt_comm_all_reduce(tr->groups.g[GPT_MESH_DATA], buf, buf, n, GPT_DTYPE_F32,
				   GPT_REDUCE_MAX, err);
}

/* The tensor parallel ranks of one slice: row-parallel inputs and weights
 * are split over them (the model calls this only when tp > 1). */
static int tp_max(void *ctx, float *buf, int64_t n, gpt_err *err)
{
	trainer *tr = ctx;
	return gpt_comm_all_reduce(tr->groups.g[GPT_MESH_TP], buf, buf, n, GPT_DTYPE_F32,
				   GPT_REDUCE_MAX, err);
}

/* PACT's gradients: a sum over the same groups */
static int data_sum(void *ctx, float *buf, int64_t n, gpt_err *err)
{
	trainer *tr = ctx;
	return gpt_comm_all_reduce(tr->groups.g[GPT_MESH_DATA], buf, buf, n, GPT_DTYPE_F32,
				   GPT_REDUCE_SUM, err);
}

static int tp_sum(void *ctx, float *buf, int64_t n, gpt_err *err)
{
	trainer *tr = ctx;
	return gpt_comm_all_reduce(tr->groups.g[GPT_MESH_TP], buf, buf, n, GPT_DTYPE_F32,
				   GPT_REDUCE_SUM, err);
}

int gpt_tr_setup_qat(trainer *tr, gpt_err *err)
{
	gpt_qat_opts o;
	int rc = gpt_qat_opts_from_config(&o, tr->cfg, err);
	if (!rc)
		rc = gpt_qat_init(&tr->model, &o, err);
	if (rc)
		return rc;
	if (tr->comm && tr->groups.g[GPT_MESH_TP]) {
		tr->model.qat->tp_max = tp_max;
		tr->model.qat->tp_sum = tp_sum;
		tr->model.qat->tp_ctx = tr;
	}
	if (tr->comm && tr->replicas > 1) {
		tr->model.qat->data_max = data_max;
		tr->model.qat->data_sum = data_sum;
		tr->model.qat->data_ctx = tr;
	}
	char which[64] = "";
	for (int k = 0; k < GPT_QAT_LINEARS; k++)
		if (o.quantized[k])
			snprintf(which + strlen(which), sizeof which - strlen(which), "%s%s", *which ? " " : "",
				 gpt_qat_linear_name((gpt_qat_linear)k));
	char act[64];
	if (o.act_moving_average)
		snprintf(act, sizeof act, "moving_average_abs_max (moving_rate %g)", o.moving_rate);
	else
		snprintf(act, sizeof act, "abs_max");
	char pact[96] = "";
	if (o.pact[GPT_PACT_ACT] || o.pact[GPT_PACT_WEIGHT])
		snprintf(pact, sizeof pact, "; PACT clipping of %s (alpha %g, learning rate x %g)",
			 o.pact[GPT_PACT_ACT] && o.pact[GPT_PACT_WEIGHT] ? "inputs and weights"
			 : o.pact[GPT_PACT_ACT]			 ? "inputs"
								 : "weights",
			 (double)o.pact_init, (double)o.pact_lr_mult);
	gpt_log_printf(&tr->log, GPT_LOG_INFO,
		       "quantization-aware training of %s: weights %d-bit %s, activations %d-bit %s%s", which,
		       o.weight_bits, o.weight_per_channel ? "channel_wise_abs_max" : "abs_max", o.act_bits, act,
		       pact);
	return 0;
}
