/* Quantization-aware training: the fake-quantized linears, their activation
 * scales, and the state a checkpoint keeps. (Part of lib/model.) */
#include "model/gpt-impl.h"
#include "model/qat.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const linear_names[GPT_QAT_LINEARS] = {"attn.qkv", "attn.proj", "mlp.fc",
							  "mlp.proj"};

const char *gpt_qat_linear_name(gpt_qat_linear k)
{
	return k >= 0 && k < GPT_QAT_LINEARS ? linear_names[k] : "?";
}

static int row_parallel(gpt_qat_linear k)
{
	return k == GPT_QAT_PROJ || k == GPT_QAT_MPROJ;
}

int gpt_qat_opts_from_config(gpt_qat_opts *o, const gpt_config *cfg, gpt_err *err)
{
	memset(o, 0, sizeof *o);
	const char *wt = cfg->quantization.weight_quantize_type, *at = cfg->quantization.activation_quantize_type;
	o->weight_per_channel = !wt || strcmp(wt, "channel_wise_abs_max") == 0;
	o->act_moving_average = !at || strcmp(at, "moving_average_abs_max") == 0;
	o->weight_bits = (int)cfg->quantization.weight_bits;
	o->act_bits = (int)cfg->quantization.activation_bits;
	o->moving_rate = (float)cfg->quantization.moving_rate;
	const char *pre[2] = {cfg->quantization.weight_preprocess_type,
			      cfg->quantization.activation_preprocess_type};
	const char *pre_key[2] = {"weight_preprocess_type", "activation_preprocess_type"};
	for (int i = 0; i < 2; i++) {
		if (!pre[i] || !*pre[i] || strcasecmp(pre[i], "none") == 0)
			continue;
		if (strcmp(pre[i], "PACT") != 0)
			return gpt_err_set(err, GPT_EUSAGE, "Quantization.%s: '%s'; expected None or PACT",
					   pre_key[i], pre[i]);
		o->pact[i == 0 ? GPT_PACT_WEIGHT : GPT_PACT_ACT] = 1;
	}
	o->pact_init = (float)cfg->quantization.pact_init_value;
	o->pact_lr_mult = (float)cfg->quantization.pact_lr_multiplier;
	if ((o->pact[0] || o->pact[1]) && !(o->pact_init > 0))
		return gpt_err_set(err, GPT_EUSAGE, "Quantization.pact_init_value: %g; expected a positive alpha",
				   (double)o->pact_init);
	if (o->weight_bits < 2 || o->weight_bits > 16 || o->act_bits < 2 || o->act_bits > 16)
		return gpt_err_set(err, GPT_EUSAGE,
				   "Quantization.weight_bits/activation_bits: %d and %d; expected 2 to 16 each",
				   o->weight_bits, o->act_bits);
	int rc = gpt_config_check_qat_layers(cfg, err);
	if (rc)
		return rc;
	const gpt_strlist *types = &cfg->quantization.quantizable_layer_type;
	for (int i = 0; i < types->n; i++) {
		const char *t = types->v[i];
		if (strcmp(t, "Linear") == 0) {
			for (int k = 0; k < GPT_QAT_LINEARS; k++)
				o->quantized[k] = 1;
		} else if (strcmp(t, "ColumnParallelLinear") == 0) {
			o->quantized[GPT_QAT_QKV] = o->quantized[GPT_QAT_FC] = 1;
		} else if (strcmp(t, "RowParallelLinear") == 0) {
			o->quantized[GPT_QAT_PROJ] = o->quantized[GPT_QAT_MPROJ] = 1;
		} else {
			for (int k = 0; k < GPT_QAT_LINEARS; k++)
				if (strcmp(t, linear_names[k]) == 0)
					o->quantized[k] = 1;
		}
	}
	return 0;
}

/* ---- set-up ---- */

void gpt_qat_free(gpt_model *m)
{
	gpt_qat *q = m->qat;
	if (!q)
		return;
	void *p[] = {q->scale, q->state, q->accum, q->used, q->step_max, q->cur, q->tmp, q->wscale,
		     q->wq, q->xq, q->alpha, q->dalpha, q->wgrad};
	for (size_t i = 0; i < sizeof p / sizeof *p; i++)
		if (p[i])
			m->be->ops->free(m->be, p[i]);
	free(q->alpha_h);
	free(q->dalpha_h);
	free(q->exp_avg);
	free(q->exp_avg_sq);
	free(q);
	m->qat = NULL;
}

static int fill(gpt_backend *be, float *dst, float v, int64_t n, gpt_err *err)
{
	float *h = gpt_malloc((size_t)n * sizeof *h, "quantization state", err);
	if (!h)
		return GPT_EINTERNAL;
	for (int64_t i = 0; i < n; i++)
		h[i] = v;
	int rc = be->ops->upload(be, dst, h, (size_t)n * sizeof *h, err);
	free(h);
	return rc;
}

int gpt_qat_init(gpt_model *m, const gpt_qat_opts *o, gpt_err *err)
{
	static const char *const needed[] = {"quant_absmax", "fake_quant", "quant_moving_avg", NULL};
	static const char *const needed_pact[] = {"pact_fwd", "pact_bwd", NULL};
	int pact = o->pact[GPT_PACT_ACT] || o->pact[GPT_PACT_WEIGHT];
	int rc = gpt_backend_require(m->be, needed, err);
	if (!rc && pact)
		rc = gpt_backend_require(m->be, needed_pact, err);
	if (rc)
		return gpt_err_prefix(err, "Quantization.enable");
	gpt_qat_free(m);
	gpt_qat *q = gpt_calloc(1, sizeof *q, "quantization state", err);
	if (!q)
		return GPT_EINTERNAL;
	m->qat = q;
	q->o = *o;
	q->n_layers = m->n_layers;
	q->n_slots = m->n_layers * GPT_QAT_LINEARS;
	gpt_backend *be = m->be;
	int64_t BT = m->opts.batch * m->opts.seq_len, C = m->shape.hidden;
	int64_t F = m->shape.ffn / m->layout.tp;
	int64_t Cl = (m->shape.heads / m->layout.tp) * (C / m->shape.heads);
	int64_t rows = 3 * Cl > C ? 3 * Cl : C, in = C > Cl ? C : Cl;
	if (F > rows)
		rows = F;
	if (F > in)
		in = F;
	int64_t wmax = 3 * Cl * C > C * F ? 3 * Cl * C : C * F;
	size_t es = gpt_dtype_size(be->dtype), S = (size_t)(q->n_slots ? q->n_slots : 1);
	struct { void **p; size_t bytes; const char *what; } b[] = {
		{(void **)&q->scale, S * 4, "activation scales"},
		{(void **)&q->state, S * 4, "activation scales"},
		{(void **)&q->accum, S * 4, "activation scales"},
		{(void **)&q->used, S * (size_t)m->n_slots * 4, "activation scales"},
		{(void **)&q->step_max, S * 4, "activation scales"},
		{(void **)&q->cur, 4, "activation scales"},
		{(void **)&q->tmp, 8, "activation scales"},
		{(void **)&q->wscale, (size_t)rows * 4, "weight scales"},
		{&q->wq, (size_t)wmax * es, "fake-quantized weights"},
		{&q->xq, (size_t)(BT * in) * es, "fake-quantized activations"},
		{(void **)&q->alpha, pact ? 2 * S * 4 : 0, "PACT clips"},
		{(void **)&q->dalpha, pact ? 2 * S * 4 : 0, "PACT clips"},
		{&q->wgrad, o->pact[GPT_PACT_WEIGHT] ? (size_t)wmax * es : 0, "PACT weight gradients"},
	};
	for (size_t i = 0; !rc && i < sizeof b / sizeof *b; i++) {
		if (!b[i].bytes)
			continue;
		*b[i].p = be->ops->alloc(be, b[i].bytes, b[i].what, err);
		rc = *b[i].p ? 0 : err->code;
		q->bytes += (int64_t)b[i].bytes;
	}
	if (!rc && pact) {
		q->alpha_h = gpt_malloc(2 * S * sizeof(float), "PACT clips", err);
		q->dalpha_h = gpt_calloc(2 * S, sizeof(float), "PACT clips", err);
		q->exp_avg = gpt_calloc(2 * S, sizeof(float), "PACT clips", err);
		q->exp_avg_sq = gpt_calloc(2 * S, sizeof(float), "PACT clips", err);
		rc = q->alpha_h && q->dalpha_h && q->exp_avg && q->exp_avg_sq ? 0 : GPT_EINTERNAL;
		for (size_t i = 0; !rc && i < 2 * S; i++)
			q->alpha_h[i] = o->pact_init;
		if (!rc)
			rc = be->ops->upload(be, q->alpha, q->alpha_h, 2 * S * sizeof(float), err);
		if (!rc)
			rc = be->ops->zero(be, q->dalpha, 2 * S * sizeof(float), err);
	}
	/* PaddleSlim's FakeQuantMovingAverageAbsMax starts at scale 0.001,
	 * state 1, accum 1 */
	if (!rc)
		rc = fill(be, q->scale, 0.001f, (int64_t)S, err);
	if (!rc)
		rc = fill(be, q->state, 1.0f, (int64_t)S, err);
	if (!rc)
		rc = fill(be, q->accum, 1.0f, (int64_t)S, err);
	if (!rc)
		rc = fill(be, q->step_max, -1.0f, (int64_t)S, err); /* no data yet */
	if (!rc)
		rc = be->ops->zero(be, q->used, S * (size_t)m->n_slots * 4, err);
	if (rc)
		gpt_qat_free(m);
	return rc;
}

/* ---- the linears ---- */

static int tp_max(gpt_model *m, float *buf, int64_t n, gpt_err *err)
{
	gpt_qat *q = m->qat;
	if (m->layout.tp <= 1)
		return 0;
	if (!q->tp_max)
		return gpt_err_set(err, GPT_EINTERNAL,
				   "quantization-aware training: tensor parallel %lld without the tp max hook (gpt_qat.tp_max)",
				   (long long)m->layout.tp);
	return q->tp_max(q->tp_ctx, buf, n, err);
}

/* q->wq = fq(w), or fq(clip(w)) under PACT, for the [N, K] local weight of
 * linear k in slot. */
static int fq_weight(gpt_model *m, int64_t slot, gpt_qat_linear k, const void *w, int64_t N, int64_t K,
		     gpt_err *err)
{
	gpt_qat *q = m->qat;
	const gpt_backend_ops *o = m->be->ops;
	int per = q->o.weight_per_channel, rc;
	if (q->o.pact[GPT_PACT_WEIGHT]) {
		OP(o->pact_fwd(m->be, q->wq, w, q->alpha + q->n_slots + slot, N * K, err));
		w = q->wq;
	}
	OP(o->quant_absmax(m->be, q->wscale, w, N, K, per, 0, err));
	/* a row-parallel weight's rows are split over tp; a whole-tensor max
	 * spans every rank's slice */
	if (!per || row_parallel(k))
		OP(tp_max(m, q->wscale, per ? N : 1, err));
	return o->fake_quant(m->be, q->wq, w, q->wscale, N, K, per, q->o.weight_bits, err);
}

/* q->xq = fq(inp), or fq(clip(inp)) under PACT, with the scale of slot: in
 * training from this batch (and noted for the step's update), else the
 * committed one. */
static int fq_input(gpt_model *m, int64_t slot, gpt_qat_linear k, const void *inp, int64_t n,
		    gpt_err *err)
{
	gpt_qat *q = m->qat;
	gpt_backend *be = m->be;
	const gpt_backend_ops *o = be->ops;
	float *used = q->used + m->cur_slot * q->n_slots; /* per micro-batch in flight */
	int rc;
	if (q->o.pact[GPT_PACT_ACT]) {
		OP(o->pact_fwd(be, q->xq, inp, q->alpha + slot, n, err));
		inp = q->xq; /* fake_quant below works in place */
	}
	if (m->dropout_on || !q->o.act_moving_average) {
		OP(o->quant_absmax(be, q->cur, inp, 1, n, 0, 0, err));
		if (row_parallel(k))
			OP(tp_max(m, q->cur, 1, err));
	}
	if (m->dropout_on) {
		/* max is idempotent: a recompute in the backward notes the same max */
		OP(o->quant_absmax(be, q->step_max + slot, inp, 1, n, 0, 1, err));
		if (q->o.act_moving_average)
			OP(o->quant_moving_avg(be, q->state + slot, q->accum + slot, used + slot, q->cur, 1,
					       q->o.moving_rate, 0, err));
		else
			OP(o->copy(be, used + slot, q->cur, 4, err));
	} else {
		OP(o->copy(be, used + slot, q->o.act_moving_average ? q->scale + slot : q->cur, 4, err));
	}
	return o->fake_quant(be, q->xq, inp, used + slot, 1, n, 0, q->o.act_bits, err);
}

static int quantized(const gpt_model *m, int64_t l, gpt_qat_linear k, gpt_err *err)
{
	if (!m->qat || !m->qat->o.quantized[k])
		return 0;
	if (l < 0 || l >= m->qat->n_layers)
		return -gpt_err_set(err, GPT_EINTERNAL, "qat: layer %lld outside the %lld local layers",
				    (long long)l, (long long)m->qat->n_layers);
	return 1;
}

int gpt_qat_linear_fwd(gpt_model *m, int64_t l, gpt_qat_linear k, void *out, const void *inp,
		       const void *w, const void *bias, int64_t M, int64_t K, int64_t N,
		       gpt_err *err)
{
	const gpt_backend_ops *o = m->be->ops;
	int rc = quantized(m, l, k, err);
	if (rc < 0)
		return -rc;
	if (!rc)
		return o->linear_fwd(m->be, out, inp, w, bias, M, K, N, err);
	OP(fq_weight(m, l * GPT_QAT_LINEARS + k, k, w, N, K, err));
	OP(fq_input(m, l * GPT_QAT_LINEARS + k, k, inp, M * K, err));
	return o->linear_fwd(m->be, out, m->qat->xq, m->qat->wq, bias, M, K, N, err);
}

int gpt_qat_linear_bwd(gpt_model *m, int64_t l, gpt_qat_linear k, void *dinp, void *dw,
		       void *dbias, const void *dout, const void *inp, const void *w, int64_t M,
		       int64_t K, int64_t N, gpt_err *err)
{
	gpt_qat *q = m->qat;
	const gpt_backend_ops *o = m->be->ops;
	int rc = quantized(m, l, k, err);
	if (rc < 0)
		return -rc;
	if (!rc)
		return o->linear_bwd(m->be, dinp, dw, dbias, dout, inp, w, M, K, N, err);
	/* the forward's fq(W) and fq(x) again: the weights and alphas have not
	 * changed and used[slot] still holds the forward's input scale */
	int64_t slot = l * GPT_QAT_LINEARS + k;
	gpt_backend *be = m->be;
	OP(fq_weight(m, slot, k, w, N, K, err));
	const void *x = inp;
	if (q->o.pact[GPT_PACT_ACT]) {
		OP(o->pact_fwd(be, q->xq, inp, q->alpha + slot, M * K, err));
		x = q->xq;
	}
	OP(o->fake_quant(be, q->xq, x, q->used + m->cur_slot * q->n_slots + slot, 1, M * K, 0,
			 q->o.act_bits, err));
	/* straight through: d fq(x) / dx = 1, d fq(W) / dW = 1; PACT's clip
	 * then masks the gradient and feeds its alpha's */
	if (q->o.pact[GPT_PACT_WEIGHT] && dw) {
		OP(o->linear_bwd(be, dinp, NULL, dbias, dout, q->xq, q->wq, M, K, N, err));
		size_t bytes = (size_t)(N * K) * gpt_dtype_size(be->dtype);
		OP(o->zero(be, q->wgrad, bytes, err));
		OP(o->linear_bwd(be, NULL, q->wgrad, NULL, dout, q->xq, q->wq, M, K, N, err));
		OP(o->pact_bwd(be, dw, q->dalpha + q->n_slots + slot, q->wgrad, w,
			       q->alpha + q->n_slots + slot, N * K, 1, err));
	} else {
		OP(o->linear_bwd(be, dinp, dw, dbias, dout, q->xq, q->wq, M, K, N, err));
	}
	if (q->o.pact[GPT_PACT_ACT] && dinp)
		OP(o->pact_bwd(be, dinp, q->dalpha + slot, dinp, inp, q->alpha + slot, M * K, 0, err));
	return 0;
}

int gpt_qat_step_end(gpt_model *m, gpt_err *err)
{
	gpt_qat *q = m->qat;
	if (!q || q->n_slots == 0)
		return 0;
	gpt_backend *be = m->be;
	const gpt_backend_ops *o = be->ops;
	int rc;
	/* column-parallel inputs are the same on every tp rank, so one max over
	 * every slot is right for both kinds */
	OP(tp_max(m, q->step_max, q->n_slots, err));
	if (q->data_max)
		OP(q->data_max(q->data_ctx, q->step_max, q->n_slots, err));
	if (q->o.act_moving_average) {
		OP(o->quant_moving_avg(be, q->state, q->accum, q->scale, q->step_max, q->n_slots,
				       q->o.moving_rate, 1, err));
	} else {
		/* abs_max keeps the last step's max, for export; slots that saw no
		 * data (-1) keep theirs: the rate-0 average is exactly that */
		OP(o->quant_moving_avg(be, q->state, q->accum, q->scale, q->step_max, q->n_slots, 0.0f,
				       1, err));
	}
	if (q->alpha) {
		/* every rank's part of an alpha's gradient is partial (see qat.h) */
		if (m->layout.tp > 1) {
			if (!q->tp_sum)
				return gpt_err_set(err, GPT_EINTERNAL,
						   "quantization-aware training: tensor parallel %lld without the tp sum hook (gpt_qat.tp_sum)",
						   (long long)m->layout.tp);
			OP(q->tp_sum(q->tp_ctx, q->dalpha, 2 * q->n_slots, err));
		}
		if (q->data_sum)
			OP(q->data_sum(q->data_ctx, q->dalpha, 2 * q->n_slots, err));
	}
	return fill(be, q->step_max, -1.0f, q->n_slots, err);
}

int gpt_qat_pact_grads(gpt_model *m, double *sumsq, gpt_err *err)
{
	gpt_qat *q = m->qat;
	*sumsq = 0;
	if (!q || !q->alpha)
		return 0;
	size_t bytes = 2 * (size_t)q->n_slots * sizeof(float);
	int rc = m->be->ops->download(m->be, q->dalpha_h, q->dalpha, bytes, err);
	if (!rc)
		rc = m->be->ops->zero(m->be, q->dalpha, bytes, err);
	double s = 0;
	for (int64_t i = 0; i < 2 * q->n_slots; i++)
		s += (double)q->dalpha_h[i] * q->dalpha_h[i];
	*sumsq = s;
	return rc;
}

int gpt_qat_pact_step(gpt_model *m, const gpt_adamw *h, gpt_err *err)
{
	gpt_qat *q = m->qat;
	if (!q || !q->alpha)
		return 0;
	if (h->t < 1)
		return gpt_err_set(err, GPT_EINTERNAL, "PACT: step %lld is not 1-based", (long long)h->t);
	/* lib/cpu's adamw arithmetic, in fp32, on the host */
	float b1 = (float)h->beta1, b2 = (float)h->beta2;
	float a1 = (float)(1.0 - h->beta1), a2 = (float)(1.0 - h->beta2);
	float c1 = (float)(1.0 / (1.0 - pow(h->beta1, (double)h->t)));
	float c2 = (float)(1.0 / (1.0 - pow(h->beta2, (double)h->t)));
	float lr = (float)(h->lr * q->o.pact_lr_mult), wd = (float)h->weight_decay, eps = (float)h->eps;
	float gs = (float)h->grad_scale;
	for (int p = 0; p < 2; p++) {
		if (!q->o.pact[p])
			continue;
		for (int64_t s = 0; s < q->n_slots; s++) {
			if (!q->o.quantized[s % GPT_QAT_LINEARS])
				continue;
			int64_t i = p * q->n_slots + s;
			float g = q->dalpha_h[i] * gs;
			float mi = b1 * q->exp_avg[i] + a1 * g;
			float vi = b2 * q->exp_avg_sq[i] + a2 * g * g;
			q->exp_avg[i] = mi;
			q->exp_avg_sq[i] = vi;
			float a = q->alpha_h[i];
			a -= lr * (mi * c1 / (sqrtf(vi * c2) + eps) + wd * a);
			q->alpha_h[i] = a > 0 ? a : 0.0f;
		}
	}
	return m->be->ops->upload(m->be, q->alpha, q->alpha_h, 2 * (size_t)q->n_slots * sizeof(float), err);
}

/* ---- checkpoint state ---- */

/* Fields 0-2 live in backend memory; 3-8 are PACT's, on the host. */
#define N_FIELDS 9
static const char *const field_names[N_FIELDS] = {
	"scale", "state", "accum",
	"act_alpha", "act_alpha.exp_avg", "act_alpha.exp_avg_sq",
	"weight_alpha", "weight_alpha.exp_avg", "weight_alpha.exp_avg_sq"};

static int field_on(const gpt_qat *q, int f)
{
	return f < 3 || (f < 6 ? q->o.pact[GPT_PACT_ACT] : q->o.pact[GPT_PACT_WEIGHT]);
}

/* The host array of PACT field f (3-8), at the kind's offset. */
static float *pact_field(gpt_qat *q, int f)
{
	float *a[3] = {q->alpha_h, q->exp_avg, q->exp_avg_sq};
	return a[(f - 3) % 3] + (f >= 6 ? q->n_slots : 0);
}

int gpt_qat_tensor_is_pact(const char *name)
{
	return strstr(name, "_alpha") != NULL;
}

/* Every field of every slot into h (N_FIELDS x S floats), or back. */
static int state_io(gpt_model *m, float *h, int to_host, gpt_err *err)
{
	gpt_qat *q = m->qat;
	size_t S = (size_t)q->n_slots;
	float *dev[3] = {q->scale, q->state, q->accum};
	int rc = 0;
	for (int f = 0; f < N_FIELDS && !rc; f++) {
		if (!field_on(q, f))
			continue;
		if (f < 3)
			rc = to_host ? m->be->ops->download(m->be, h + f * S, dev[f], S * 4, err)
				     : m->be->ops->upload(m->be, dev[f], h + f * S, S * 4, err);
		else if (to_host)
			memcpy(h + f * S, pact_field(q, f), S * 4);
		else
			memcpy(pact_field(q, f), h + f * S, S * 4);
	}
	if (!rc && !to_host && q->alpha)
		rc = m->be->ops->upload(m->be, q->alpha, q->alpha_h, 2 * S * 4, err);
	return rc;
}

int gpt_qat_tensors(const gpt_model *m, gpt_qat_tensor **out, int64_t *n, gpt_err *err)
{
	*out = NULL;
	*n = 0;
	gpt_qat *q = m->qat;
	if (!q)
		return 0;
	size_t S = (size_t)q->n_slots;
	float *h = gpt_malloc(N_FIELDS * S * sizeof *h + 1, "quantization state", err);
	gpt_qat_tensor *t = gpt_calloc(N_FIELDS * S + 1, sizeof *t, "quantization state", err);
	int rc = h && t ? state_io((gpt_model *)m, h, 1, err) : GPT_EINTERNAL;
	int64_t c = 0;
	for (int64_t l = 0; !rc && l < q->n_layers; l++)
		for (int k = 0; k < GPT_QAT_LINEARS; k++) {
			if (!q->o.quantized[k])
				continue;
			for (int f = 0; f < N_FIELDS; f++) {
				if (!field_on(q, f))
					continue;
				snprintf(t[c].name, sizeof t[c].name, "qat.h.%lld.%s.%s",
					 (long long)m->glayer[l], linear_names[k], field_names[f]);
				t[c].value = h[f * S + (size_t)(l * GPT_QAT_LINEARS + k)];
				c++;
			}
		}
	free(h);
	if (rc) {
		free(t);
		return rc;
	}
	*out = t;
	*n = c;
	return 0;
}

void gpt_qat_tensors_free(gpt_qat_tensor *t)
{
	free(t);
}

int gpt_qat_set(gpt_model *m, const gpt_qat_tensor *t, int64_t n, gpt_err *err)
{
	gpt_qat *q = m->qat;
	if (!q)
		return n ? gpt_err_set(err, GPT_EINTERNAL, "qat: state given to a model without quantization") : 0;
	size_t S = (size_t)q->n_slots;
	float *h = gpt_malloc(N_FIELDS * S * sizeof *h + 1, "quantization state", err);
	if (!h)
		return GPT_EINTERNAL;
	int rc = state_io(m, h, 1, err);
	for (int64_t l = 0; !rc && l < q->n_layers; l++)
		for (int k = 0; !rc && k < GPT_QAT_LINEARS; k++) {
			if (!q->o.quantized[k])
				continue;
			for (int f = 0; !rc && f < N_FIELDS; f++) {
				if (!field_on(q, f))
					continue;
				char name[64];
				snprintf(name, sizeof name, "qat.h.%lld.%s.%s",
					 (long long)m->glayer[l], linear_names[k], field_names[f]);
				int64_t i;
				for (i = 0; i < n && strcmp(t[i].name, name) != 0; i++)
					;
				if (i == n)
					rc = gpt_err_set(err, GPT_EDATA, "quantization state: no tensor %s", name);
				else
					h[f * S + (size_t)(l * GPT_QAT_LINEARS + k)] = t[i].value;
			}
		}
	if (!rc)
		rc = state_io(m, h, 0, err);
	free(h);
	return rc;
}
