/* Fake quantization ops on hand-made tensors: exact values, rounding half
 * away from zero, clamping, per-row scales, the moving-average update, PACT's
 * clip and its gradients, and 16-bit storage. */
#include "cpu-check.h"

#include <string.h>


int main(void)
{
	gpt_backend be = chk_backend();

	/* 3 bits: Q = 3; scale 3 makes the grid the integers */
	float x[6] = {0.5f, 1.5f, -2.5f, 3.7f, -0.49f, -7.0f}, y[6];
	float s3 = 3.0f;
	CHK(be.ops->fake_quant(&be, y, x, &s3, 1, 6, 0, 3, &chk_err));
	float want3[6] = {1, 2, -3, 3, -0.0f, -3};
	ok(memcmp(y, want3, sizeof y) == 0,
	   "3 bits: halves round away from zero (0.5 -> 1, -2.5 -> -3), clamp to [-3, 3]");

	/* per tensor abs_max */
	float t[4] = {0.5f, -1.0f, 0.25f, 2.0f}, st = -1;
	CHK(be.ops->quant_absmax(&be, &st, t, 1, 4, 0, 0, &chk_err));
	is_near(st, 2.0, 0, "abs_max of a tensor");
	CHK(be.ops->fake_quant(&be, t, t, &st, 2, 2, 0, 8, &chk_err)); /* in place */
	float step = 2.0f / 127.0f;
	float want_t[4] = {32 * step, -64 * step, 16 * step, 127 * step};
	ok(memcmp(t, want_t, sizeof t) == 0, "8 bits per tensor, in place: q = 32, -64, 16, 127");

	/* per output channel */
	float w[6] = {1.0f, -4.0f, 2.0f, 0.25f, 0.5f, -0.125f}, sc[2], wq[6];
	CHK(be.ops->quant_absmax(&be, sc, w, 2, 3, 1, 0, &chk_err));
	ok(sc[0] == 4.0f && sc[1] == 0.5f, "channel-wise abs_max: 4 and 0.5");
	CHK(be.ops->fake_quant(&be, wq, w, sc, 2, 3, 1, 8, &chk_err));
	float s0 = 4.0f / 127.0f, s1 = 0.5f / 127.0f;
	float want_w[6] = {32 * s0, -127 * s0, 64 * s0, 64 * s1, 127 * s1, -32 * s1};
	ok(memcmp(wq, want_w, sizeof wq) == 0,
	   "8 bits per row: q = (32, -127, 64), (64, 127, -32); 63.5 rounds to 64");
	int8_t q[6];
	float deq[6];
	gpt_quant_rows(w, 2, 3, sc, 1, 8, deq, q);
	int8_t want_q[6] = {32, -127, 64, 64, 127, -32};
	ok(memcmp(q, want_q, sizeof q) == 0 && memcmp(deq, wq, sizeof deq) == 0,
	   "gpt_quant_rows: the int8 codes and the op's values");

	/* a zero scale gives zeros, not NaN */
	float z[3] = {0, 0, 0}, zs = 0, zo[3] = {1, 1, 1};
	CHK(be.ops->quant_absmax(&be, &zs, z, 1, 3, 0, 0, &chk_err));
	CHK(be.ops->fake_quant(&be, zo, z, &zs, 1, 3, 0, 8, &chk_err));
	ok(zs == 0 && zo[0] == 0 && zo[1] == 0 && zo[2] == 0, "an all-zero tensor stays zero");

	/* a scale whose inverse step overflows (127 / 1e-38 > FLT_MAX): zero
	 * stays zero (0 * inf was NaN), the rest on the grid */
	float ts = 1e-38f, tx[4] = {0, ts, -ts, ts * 0.25f}, ty[4];
	int8_t tq[4];
	CHK(be.ops->fake_quant(&be, ty, tx, &ts, 1, 4, 0, 8, &chk_err));
	gpt_quant_rows(tx, 1, 4, &ts, 0, 8, NULL, tq);
	ok(tq[0] == 0 && tq[1] == 127 && tq[2] == -127 && tq[3] == 32,
	   "a scale of 1e-38: codes 0, 127, -127, 32 (got %d %d %d %d)", tq[0], tq[1], tq[2], tq[3]);
	ok(ty[0] == 0 && ty[1] == 127 * (ts / 127) && ty[2] == -127 * (ts / 127) && ty[3] == 32 * (ts / 127),
	   "and the op's values are the codes times the step");

	/* accumulate: the largest over calls */
	float acc2[2] = {3.0f, 0.1f}, more[6] = {-2.0f, 1.0f, 0.5f, 0.2f, -0.3f, 0.0f};
	CHK(be.ops->quant_absmax(&be, acc2, more, 2, 3, 1, 1, &chk_err));
	ok(acc2[0] == 3.0f && acc2[1] == 0.3f, "accumulate keeps max(old, new) per row: 3 and 0.3");

	/* moving_average_abs_max from PaddleSlim's initial state 1, 1 */
	float state[2] = {1, 1}, accum[2] = {1, 1}, scale[2] = {0, 0}, cur[2] = {5, 2};
	CHK(be.ops->quant_moving_avg(&be, state, accum, scale, cur, 2, 0.9f, 0, &chk_err));
	ok(state[0] == 1 && accum[0] == 1 && scale[0] == (0.9f + 5) / 1.9f &&
	   scale[1] == (0.9f + 2) / 1.9f, "without commit: the scale of an update, state unchanged");
	CHK(be.ops->quant_moving_avg(&be, state, accum, scale, cur, 2, 0.9f, 1, &chk_err));
	ok(state[0] == 0.9f * 1 + 1 && accum[0] == 0.9f * 1 + 5 && scale[0] == (0.9f + 5) / 1.9f,
	   "moving average: state 1.9, accum 5.9, scale accum / state");
	cur[0] = 3;
	CHK(be.ops->quant_moving_avg(&be, state, accum, scale, cur, 1, 0.9f, 1, &chk_err));
	is_near(scale[0], (0.9 * 5.9 + 3) / (0.9 * 1.9 + 1), 1e-6, "second update: 8.31 / 2.71");
	float none[2] = {-1, -1}, before[2] = {state[0], scale[0]};
	CHK(be.ops->quant_moving_avg(&be, state, accum, scale, none, 1, 0.9f, 1, &chk_err));
	ok(state[0] == before[0] && scale[0] == before[1], "cur < 0 (no data) leaves a scale as it is");
	ok(be.ops->quant_moving_avg(&be, state, accum, scale, cur, 1, 1.5f, 1, &chk_err) != 0,
	   "a rate outside [0, 1] is refused");
	ok(be.ops->fake_quant(&be, y, x, &s3, 1, 6, 0, 1, &chk_err) != 0, "1 bit is refused");

	/* larger random tensor: every value on the grid and within half a step */
	enum { R = 37, K = 129 };
	float *a = chk_floats(R * K, 3.0), *aq = malloc(R * K * sizeof *aq), as[R];
	CHK(be.ops->quant_absmax(&be, as, a, R, K, 1, 0, &chk_err));
	CHK(be.ops->fake_quant(&be, aq, a, as, R, K, 1, 8, &chk_err));
	int good = 1;
	for (int r = 0; r < R; r++)
		for (int k = 0; k < K; k++) {
			float st8 = as[r] / 127.0f, v = aq[r * K + k];
			float code = v / st8;
			good &= fabsf(code - roundf(code)) < 1e-3f && fabsf(v - a[r * K + k]) <= 0.5f * st8 * 1.0001f;
		}
	ok(good, "random rows: values on the grid, error at most half a step");

	/* 16-bit storage: the op converts, quantizes in fp32 and rounds back */
	gpt_backend bb;
	CHK(gpt_backend_cpu_init(&bb, GPT_DTYPE_BF16, 0, &chk_err));
	uint16_t hb[R * K], hq[R * K];
	float back[R * K], bs[R], want_b[R * K];
	gpt_convert(hb, GPT_DTYPE_BF16, a, GPT_DTYPE_F32, R * K, &chk_err);
	gpt_convert(back, GPT_DTYPE_F32, hb, GPT_DTYPE_BF16, R * K, &chk_err);
	CHK(bb.ops->quant_absmax(&bb, bs, hb, R, K, 1, 0, &chk_err));
	CHK(bb.ops->fake_quant(&bb, hq, hb, bs, R, K, 1, 8, &chk_err));
	gpt_quant_rows(back, R, K, bs, 1, 8, want_b, NULL);
	uint16_t want_h[R * K];
	gpt_convert(want_h, GPT_DTYPE_BF16, want_b, GPT_DTYPE_F32, R * K, &chk_err);
	ok(memcmp(hq, want_h, sizeof hq) == 0, "bf16 storage: fp32 arithmetic, rounded on store");
	gpt_backend_cpu_free(&bb);

	/* PACT: clamp to [-a, a]; the gradient passes where -a <= x <= a (the
	 * boundary included: relu'(0) = 0) and the clipped ones feed alpha */
	float px[6] = {-3.0f, -1.5f, -1.0f, 0.25f, 1.0f, 2.5f}, alpha = 1.0f, py[6];
	CHK(be.ops->pact_fwd(&be, py, px, &alpha, 6, &chk_err));
	float want_p[6] = {-1, -1, -1, 0.25f, 1, 1};
	ok(memcmp(py, want_p, sizeof py) == 0, "pact_fwd: clamp(x, -1, 1)");
	float pg[6] = {1, 2, 4, 8, 16, 32}, pdx[6], dal = 0.5f;
	CHK(be.ops->pact_bwd(&be, pdx, &dal, pg, px, &alpha, 6, 0, &chk_err));
	float want_dx[6] = {0, 0, 4, 8, 16, 0};
	ok(memcmp(pdx, want_dx, sizeof pdx) == 0, "pact_bwd: dx = dy inside [-a, a], boundary included");
	is_near(dal, 0.5 + 32 - 1 - 2, 0, "pact_bwd adds sum(dy, x > a) - sum(dy, x < -a) to dalpha");
	float acc[6] = {1, 1, 1, 1, 1, 1};
	dal = 0;
	CHK(be.ops->pact_bwd(&be, acc, &dal, pg, px, &alpha, 6, 1, &chk_err));
	float want_acc[6] = {1, 1, 5, 9, 17, 1};
	ok(memcmp(acc, want_acc, sizeof acc) == 0 && dal == 29.0f, "accumulate = 1 adds the masked dy");
	memcpy(pdx, pg, sizeof pg);
	CHK(be.ops->pact_bwd(&be, pdx, &dal, pdx, px, &alpha, 6, 0, &chk_err));
	ok(memcmp(pdx, want_dx, sizeof pdx) == 0, "dx may alias dy");

	/* the alpha sum does not depend on the thread count */
	enum { PN = 100000 };
	float *pbx = chk_floats(PN, 3.0), *pbg = chk_floats(PN, 1.0), *pbd = malloc(PN * sizeof(float));
	float d1 = 0, d2 = 0;
	double dref = 0;
	for (int i = 0; i < PN; i++)
		dref += pbx[i] > 1.0f ? pbg[i] : pbx[i] < -1.0f ? -pbg[i] : 0.0;
	be.threads = 1;
	CHK(be.ops->pact_bwd(&be, pbd, &d1, pbg, pbx, &alpha, PN, 0, &chk_err));
	be.threads = 2;
	CHK(be.ops->pact_bwd(&be, pbd, &d2, pbg, pbx, &alpha, PN, 0, &chk_err));
	ok(d1 == d2, "1 and 2 threads give the same alpha gradient bit for bit (%.9g)", (double)d1);
	is_near(d1, dref, 1e-3, "and it is the sum (%.6g)", dref);
	free(pbx), free(pbg), free(pbd);

	/* bf16 storage: clamped in fp32, rounded on store */
	CHK(gpt_backend_cpu_init(&bb, GPT_DTYPE_BF16, 0, &chk_err));
	uint16_t bx[6], by[6], bwant[6];
	float a13 = 1.3f; /* not a bf16 value: the clip rounds */
	gpt_convert(bx, GPT_DTYPE_BF16, px, GPT_DTYPE_F32, 6, &chk_err);
	CHK(bb.ops->pact_fwd(&bb, by, bx, &a13, 6, &chk_err));
	float fw[6] = {-1.3f, -1.3f, -1.0f, 0.25f, 1.0f, 1.3f};
	gpt_convert(bwant, GPT_DTYPE_BF16, fw, GPT_DTYPE_F32, 6, &chk_err);
	ok(memcmp(by, bwant, sizeof by) == 0, "bf16 pact_fwd: clamp in fp32, round on store");
	gpt_backend_cpu_free(&bb);

	free(a);
	free(aq);
	gpt_backend_cpu_free(&be);
	return done_testing();
}
