/* Quantization-aware training in the model: a fake-quantized linear's
 * forward and backward against fq by hand (straight-through gradients), the
 * per-step scale update, evaluation with the committed scale, PACT's clips
 * (forward, masked gradients, the alphas' gradients and AdamW step), and the
 * checkpoint state round trip. */
#include "cpu-check.h"
#include "model/qat.h"

#include <string.h>

/* out (M, N) = x (M, K) w^T, in double. */
static void matmul_t(const float *x, const float *w, int64_t M, int64_t K, int64_t N, double *out)
{
	for (int64_t i = 0; i < M; i++)
		for (int64_t j = 0; j < N; j++) {
			double s = 0;
			for (int64_t k = 0; k < K; k++)
				s += (double)x[i * K + k] * w[j * K + k];
			out[i * N + j] = s;
		}
}

/* y = clamp(x, -a, a), and the mask of the elements a gradient passes. */
static void clip(const float *x, int64_t n, float a, float *y, float *pass)
{
	for (int64_t i = 0; i < n; i++) {
		y[i] = x[i] > a ? a : x[i] < -a ? -a : x[i];
		pass[i] = x[i] >= -a && x[i] <= a;
	}
}

/* sum(g, x > a) - sum(g, x < -a), in double. */
static double alpha_grad(const double *g, const float *x, int64_t n, float a)
{
	double s = 0;
	for (int64_t i = 0; i < n; i++)
		s += x[i] > a ? g[i] : x[i] < -a ? -g[i] : 0.0;
	return s;
}

static void pact_checks(gpt_backend *be, const gpt_model_shape *s, const gpt_layout *lo,
			const gpt_model_opts *mo)
{
	gpt_model m;
	CHK(gpt_model_init(&m, be, s, lo, mo, &chk_err));
	gpt_qat_opts qo = {.quantized = {1, 1, 1, 1}, .weight_per_channel = 1, .act_moving_average = 1,
			   .weight_bits = 8, .act_bits = 8, .moving_rate = 0.9f, .pact = {1, 1},
			   .pact_init = 0.4f, .pact_lr_mult = 10.0f};
	CHK(gpt_qat_init(&m, &qo, &chk_err));
	enum { M = 8, K = 8, N = 32 };
	float *x = chk_floats(M * K, 2.0), *w = chk_floats(N * K, 0.5), *b = chk_floats(N, 0.1);
	float out[M * N], xc[M * K], xpass[M * K], wc[N * K], wpass[N * K], xq[M * K], wq[N * K], ws[N];
	const float a = 0.4f;
	clip(x, M * K, a, xc, xpass);
	clip(w, N * K, a, wc, wpass);
	float xs = (0.9f * 1 + a) / (0.9f * 1 + 1); /* every row of x reaches past 0.4 */
	for (int j = 0; j < N; j++) {
		ws[j] = 0;
		for (int k = 0; k < K; k++)
			ws[j] = fmaxf(ws[j], fabsf(wc[j * K + k]));
	}
	gpt_quant_rows(wc, N, K, ws, 1, 8, wq, NULL);
	gpt_quant_rows(xc, 1, M * K, &xs, 0, 8, xq, NULL);
	m.dropout_on = 1;
	CHK(gpt_qat_linear_fwd(&m, 0, GPT_QAT_FC, out, x, w, b, M, K, N, &chk_err));
	double want[M * N];
	matmul_t(xq, wq, M, K, N, want);
	for (int i = 0; i < M; i++)
		for (int j = 0; j < N; j++)
			want[i * N + j] += b[j];
	chk_close("PACT forward: fq(clip(x)) fq(clip(W))^T + b", out, want, M * N, 1e-5, 1e-5);

	float *dout = chk_floats(M * N, 1.0), dx[M * K], dw[N * K], db[N];
	for (int i = 0; i < N * K; i++)
		dw[i] = 1.0f; /* weight gradients accumulate */
	memset(db, 0, sizeof db);
	CHK(gpt_qat_linear_bwd(&m, 0, GPT_QAT_FC, dx, dw, db, dout, x, w, M, K, N, &chk_err));
	double gx[M * K], gw[N * K], wdx[M * K], wdw[N * K];
	for (int i = 0; i < M; i++)
		for (int k = 0; k < K; k++) {
			double t = 0;
			for (int j = 0; j < N; j++)
				t += (double)dout[i * N + j] * wq[j * K + k];
			gx[i * K + k] = t;
			wdx[i * K + k] = t * xpass[i * K + k];
		}
	for (int j = 0; j < N; j++)
		for (int k = 0; k < K; k++) {
			double t = 0;
			for (int i = 0; i < M; i++)
				t += (double)dout[i * N + j] * xq[i * K + k];
			gw[j * K + k] = t;
			wdw[j * K + k] = 1.0 + t * wpass[j * K + k];
		}
	chk_close("PACT dx: dout fq(clip(W)), zero where |x| > alpha", dx, wdx, M * K, 1e-5, 1e-5);
	chk_close("PACT dW: added, dout^T fq(clip(x)), zero where |W| > alpha", dw, wdw, N * K, 1e-5, 1e-5);
	CHK(gpt_qat_step_end(&m, &chk_err));
	double sumsq;
	CHK(gpt_qat_pact_grads(&m, &sumsq, &chk_err));
	gpt_qat *q = m.qat;
	int64_t fc = 0 * GPT_QAT_LINEARS + GPT_QAT_FC;
	double gax = alpha_grad(gx, x, M * K, a), gaw = alpha_grad(gw, w, N * K, a);
	is_near(q->dalpha_h[fc], gax, 1e-4 * (1 + fabs(gax)), "input alpha's gradient: %.6g", gax);
	is_near(q->dalpha_h[q->n_slots + fc], gaw, 1e-4 * (1 + fabs(gaw)), "weight alpha's gradient: %.6g", gaw);
	is_near(sumsq, gax * gax + gaw * gaw, 1e-4 * (1 + sumsq), "their sum of squares for the global norm");
	double again;
	CHK(gpt_qat_pact_grads(&m, &again, &chk_err));
	ok(again == 0, "the gradients are zeroed for the next step");
	/* the second call took those zeros: the step gets the first call's sums */
	q->dalpha_h[fc] = (float)gax;
	q->dalpha_h[q->n_slots + fc] = (float)gaw;

	gpt_adamw h = {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1,
		       .grad_scale = 0.5, .t = 1};
	CHK(gpt_qat_pact_step(&m, &h, &chk_err));
	/* step 1 of AdamW: m / sqrt(v) after bias correction is sign(g) */
	double lr = 1e-3 * 10;
	double ax = a - lr * ((gax > 0 ? 1 : -1) + 0.1 * a), aw = a - lr * ((gaw > 0 ? 1 : -1) + 0.1 * a);
	is_near(q->alpha_h[fc], ax, 1e-6, "input alpha after one AdamW step at lr x 10: %.6g", ax);
	is_near(q->alpha_h[q->n_slots + fc], aw, 1e-6, "weight alpha likewise: %.6g", aw);
	is_near(q->alpha_h[1 * GPT_QAT_LINEARS + GPT_QAT_QKV], a - lr * 0.1 * a, 1e-7,
		"an alpha without gradient only decays");

	gpt_qat_tensor *t;
	int64_t nt;
	CHK(gpt_qat_tensors(&m, &t, &nt, &chk_err));
	ok(nt == 2 * 4 * 9, "with PACT: 9 state tensors per quantized linear");
	int at = -1;
	for (int i = 0; i < nt; i++)
		if (strcmp(t[i].name, "qat.h.0.mlp.fc.act_alpha") == 0)
			at = i;
	ok(at >= 0 && t[at].value == q->alpha_h[fc] &&
	   strcmp(t[at + 3].name, "qat.h.0.mlp.fc.weight_alpha") == 0 &&
	   t[at + 3].value == q->alpha_h[q->n_slots + fc] &&
	   strcmp(t[at + 5].name, "qat.h.0.mlp.fc.weight_alpha.exp_avg_sq") == 0,
	   "names qat.h.0.mlp.fc.act_alpha, .weight_alpha, their .exp_avg and .exp_avg_sq");
	ok(gpt_qat_tensor_is_pact("qat.h.0.mlp.fc.act_alpha.exp_avg") &&
	   !gpt_qat_tensor_is_pact("qat.h.0.mlp.fc.scale"), "gpt_qat_tensor_is_pact");
	gpt_model m2;
	CHK(gpt_model_init(&m2, be, s, lo, mo, &chk_err));
	CHK(gpt_qat_init(&m2, &qo, &chk_err));
	CHK(gpt_qat_set(&m2, t, nt, &chk_err));
	gpt_qat_tensor *t2;
	int64_t nt2;
	CHK(gpt_qat_tensors(&m2, &t2, &nt2, &chk_err));
	ok(nt2 == nt && memcmp(t, t2, (size_t)nt * sizeof *t) == 0, "gpt_qat_set restores the alphas and moments");
	float dev;
	CHK(be->ops->download(be, &dev, m2.qat->alpha + fc, 4, &chk_err));
	ok(dev == q->alpha_h[fc], "and the alphas the kernels read");
	gpt_qat_tensors_free(t);
	gpt_qat_tensors_free(t2);
	gpt_model_free(&m2);
	free(x), free(w), free(b), free(dout);
	gpt_model_free(&m);
}

int main(void)
{
	gpt_backend be = chk_backend();
	gpt_model_shape s = {.vocab_size = 257, .padded_vocab = 384, .max_pos = 8, .hidden = 8,
			     .layers = 2, .heads = 2, .ffn = 32};
	gpt_layout lo;
	gpt_layout_single(&lo, &s);
	gpt_model_opts mo = {.batch = 2, .seq_len = 4};
	gpt_model m;
	CHK(gpt_model_init(&m, &be, &s, &lo, &mo, &chk_err));
	gpt_qat_opts qo = {.quantized = {1, 0, 1, 1}, .weight_per_channel = 1, .act_moving_average = 1,
			   .weight_bits = 8, .act_bits = 8, .moving_rate = 0.9f};
	CHK(gpt_qat_init(&m, &qo, &chk_err));

	enum { M = 8, K = 8, N = 32 }; /* mlp.fc of layer 1: (B T, C) x [F, C] */
	float *x = chk_floats(M * K, 2.0), *w = chk_floats(N * K, 0.5), *b = chk_floats(N, 0.1);
	float out[M * N], ws[N], wq[N * K], xq[M * K];
	m.dropout_on = 1; /* a training forward */
	CHK(gpt_qat_linear_fwd(&m, 1, GPT_QAT_FC, out, x, w, b, M, K, N, &chk_err));
	float xmax = 0;
	for (int i = 0; i < M * K; i++)
		xmax = fmaxf(xmax, fabsf(x[i]));
	for (int j = 0; j < N; j++) {
		ws[j] = 0;
		for (int k = 0; k < K; k++)
			ws[j] = fmaxf(ws[j], fabsf(w[j * K + k]));
	}
	float xs = (0.9f * 1 + xmax) / (0.9f * 1 + 1); /* PaddleSlim's first update from 1, 1 */
	gpt_quant_rows(w, N, K, ws, 1, 8, wq, NULL);
	gpt_quant_rows(x, 1, M * K, &xs, 0, 8, xq, NULL);
	double want[M * N];
	matmul_t(xq, wq, M, K, N, want);
	for (int i = 0; i < M; i++)
		for (int j = 0; j < N; j++)
			want[i * N + j] += b[j];
	chk_close("forward: fq(x) fq(W)^T + b, x scaled by the moving average's update", out, want,
		  M * N, 1e-5, 1e-5);
	float plain[M * N];
	CHK(gpt_qat_linear_fwd(&m, 1, GPT_QAT_PROJ, plain, x, w, b, M, K, N, &chk_err));
	double pw[M * N];
	matmul_t(x, w, M, K, N, pw);
	for (int i = 0; i < M; i++)
		for (int j = 0; j < N; j++)
			pw[i * N + j] += b[j];
	chk_close("a linear left out of quantizable_layer_type is the plain linear", plain, pw, M * N,
		  1e-5, 1e-5);

	/* backward: the same fq(x), fq(W); gradients pass straight through */
	float *dout = chk_floats(M * N, 1.0), dx[M * K], dw[N * K], db[N];
	memset(dw, 0, sizeof dw);
	memset(db, 0, sizeof db);
	CHK(gpt_qat_linear_bwd(&m, 1, GPT_QAT_FC, dx, dw, db, dout, x, w, M, K, N, &chk_err));
	double wdx[M * K], wdw[N * K];
	for (int i = 0; i < M; i++)
		for (int k = 0; k < K; k++) {
			double t = 0;
			for (int j = 0; j < N; j++)
				t += (double)dout[i * N + j] * wq[j * K + k];
			wdx[i * K + k] = t;
		}
	for (int j = 0; j < N; j++)
		for (int k = 0; k < K; k++) {
			double t = 0;
			for (int i = 0; i < M; i++)
				t += (double)dout[i * N + j] * xq[i * K + k];
			wdw[j * K + k] = t;
		}
	chk_close("dx = dout fq(W) (identity through fq(x))", dx, wdx, M * K, 1e-5, 1e-5);
	chk_close("dW = dout^T fq(x) (identity through fq(W))", dw, wdw, N * K, 1e-5, 1e-5);

	/* the step's update: committed with the step's max, used by evaluation */
	float x2[M * K];
	for (int i = 0; i < M * K; i++)
		x2[i] = x[i] * 0.25f;
	CHK(gpt_qat_linear_fwd(&m, 1, GPT_QAT_FC, out, x2, w, b, M, K, N, &chk_err));
	CHK(gpt_qat_step_end(&m, &chk_err));
	gpt_qat_tensor *t;
	int64_t nt;
	CHK(gpt_qat_tensors(&m, &t, &nt, &chk_err));
	ok(nt == 2 * 3 * 3, "state tensors: 2 layers x 3 quantized linears x (scale, state, accum)");
	int at = -1;
	for (int i = 0; i < nt; i++)
		if (strcmp(t[i].name, "qat.h.1.mlp.fc.scale") == 0)
			at = i;
	ok(at >= 0 && strcmp(t[at + 1].name, "qat.h.1.mlp.fc.state") == 0 &&
	   strcmp(t[at + 2].name, "qat.h.1.mlp.fc.accum") == 0, "names qat.h.1.mlp.fc.{scale,state,accum}");
	if (at >= 0) {
		ok(t[at + 1].value == 1.9f && t[at + 2].value == 0.9f + xmax && t[at].value == xs,
		   "one commit per step, with the largest |x| of its micro-batches (%g)", xmax);
		ok(t[0].value == 0.001f, "a linear never run keeps PaddleSlim's initial scale 0.001");
	}
	m.dropout_on = 0; /* evaluation: the committed scale, no update */
	CHK(gpt_qat_linear_fwd(&m, 1, GPT_QAT_FC, out, x2, w, b, M, K, N, &chk_err));
	float x2q[M * K];
	gpt_quant_rows(x2, 1, M * K, &xs, 0, 8, x2q, NULL);
	matmul_t(x2q, wq, M, K, N, want);
	for (int i = 0; i < M; i++)
		for (int j = 0; j < N; j++)
			want[i * N + j] += b[j];
	chk_close("evaluation quantizes with the committed scale", out, want, M * N, 1e-5, 1e-5);

	/* round trip through another model */
	gpt_model m2;
	CHK(gpt_model_init(&m2, &be, &s, &lo, &mo, &chk_err));
	CHK(gpt_qat_init(&m2, &qo, &chk_err));
	CHK(gpt_qat_set(&m2, t, nt, &chk_err));
	gpt_qat_tensor *t2;
	int64_t nt2;
	CHK(gpt_qat_tensors(&m2, &t2, &nt2, &chk_err));
	ok(nt2 == nt && memcmp(t, t2, (size_t)nt * sizeof *t) == 0, "gpt_qat_set restores every value");
	ok(gpt_qat_set(&m2, t, nt - 1, &chk_err) == GPT_EDATA && strstr(chk_err.msg, "no tensor qat.h.1.mlp.proj.accum"),
	   "a missing tensor is named: %s", chk_err.msg);
	gpt_qat_tensors_free(t);
	gpt_qat_tensors_free(t2);
	gpt_model_free(&m2);

	/* configuration */
	gpt_config cfg;
	CHK(gpt_config_init(&cfg, &chk_err));
	cfg.quantization.enable = 1;
	CHK(gpt_qat_opts_from_config(&qo, &cfg, &chk_err));
	ok(qo.quantized[0] && qo.quantized[1] && qo.quantized[2] && qo.quantized[3] &&
	   qo.weight_per_channel && qo.act_moving_average && qo.weight_bits == 8 && qo.act_bits == 8 &&
	   qo.moving_rate == 0.9f, "defaults: every linear, channel-wise weights, moving-average inputs, 8 bits");
	CHK(gpt_config_override(&cfg, "Quantization.quantizable_layer_type=[RowParallelLinear]", &chk_err));
	CHK(gpt_qat_opts_from_config(&qo, &cfg, &chk_err));
	ok(!qo.quantized[0] && qo.quantized[1] && !qo.quantized[2] && qo.quantized[3],
	   "RowParallelLinear: attn.proj and mlp.proj");
	CHK(gpt_config_override(&cfg, "Quantization.quantizable_layer_type=[Conv2D]", &chk_err));
	ok(gpt_qat_opts_from_config(&qo, &cfg, &chk_err) == GPT_EUSAGE && strstr(chk_err.msg, "Conv2D"),
	   "an unknown layer kind is refused: %s", chk_err.msg);
	CHK(gpt_config_override(&cfg, "Quantization.quantizable_layer_type=[Linear]", &chk_err));
	CHK(gpt_config_override(&cfg, "Quantization.activation_preprocess_type=PACT", &chk_err));
	CHK(gpt_qat_opts_from_config(&qo, &cfg, &chk_err));
	ok(qo.pact[GPT_PACT_ACT] && !qo.pact[GPT_PACT_WEIGHT] && qo.pact_init == 100.0f &&
	   qo.pact_lr_mult == 1000.0f, "activation PACT with PaddleSlim's alpha 100 and learning rate x 1000");
	gpt_config_free(&cfg);

	pact_checks(&be, &s, &lo, &mo);

	free(x), free(w), free(b), free(dout);
	gpt_model_free(&m);
	gpt_backend_cpu_free(&be);
	return done_testing();
}
