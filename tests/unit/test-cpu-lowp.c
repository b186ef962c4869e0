/* bf16 and fp16 storage: every op on 16-bit operands gives exactly the fp32
 * backend's result on the same (representable) values, rounded to nearest
 * even once on store; strided gaps are untouched; AdamW keeps fp32 masters. */
#include "cpu-check.h"

static gpt_dtype dt;
static gpt_backend f32, lp;

/* Rounds x in place to values the 16-bit dtype can hold. */
static float *rep(float *x, int64_t n)
{
	uint16_t *h = malloc((size_t)(n ? n : 1) * 2);
	gpt_convert(h, dt, x, GPT_DTYPE_F32, (size_t)n, NULL);
	gpt_convert(x, GPT_DTYPE_F32, h, dt, (size_t)n, NULL);
	free(h);
	return x;
}

static float *rnd(int64_t n, double scale)
{
	return rep(chk_floats(n, scale), n);
}

static uint16_t *h16(const float *x, int64_t n)
{
	uint16_t *h = malloc((size_t)(n ? n : 1) * 2);
	gpt_convert(h, dt, x, GPT_DTYPE_F32, (size_t)n, NULL);
	return h;
}

/* got (16-bit) holds exactly round(want) for all n elements. */
static void same(const char *what, const uint16_t *got, const float *want, int64_t n)
{
	uint16_t *w = h16(want, n);
	int64_t bad = -1;
	for (int64_t i = 0; i < n && bad < 0; i++)
		if (got[i] != w[i])
			bad = i;
	ok(bad < 0, "%s %s: the rounded fp32 result, bit for bit (%lld elements)",
	   gpt_dtype_name(dt), what, (long long)n);
	if (bad >= 0)
		diag("element %lld: got 0x%04x want 0x%04x", (long long)bad, got[bad], w[bad]);
	free(w);
}

static void ops(void)
{
	enum { M = 9, K = 11, N = 7, LDC = N + 3 };
	/* gemm, trans_b, beta 1, padded C whose gaps must stay as they were */
	{
		float *a = rnd(M * K, 1), *b = rnd(N * K, 1), *c = rnd(M * LDC, 1);
		uint16_t *a16 = h16(a, M * K), *b16 = h16(b, N * K), *c16 = h16(c, M * LDC);
		CHK(f32.ops->gemm(&f32, 0, 1, M, N, K, 0.5f, a, K, b, K, 1.0f, c, LDC, &chk_err));
		CHK(lp.ops->gemm(&lp, 0, 1, M, N, K, 0.5f, a16, K, b16, K, 1.0f, c16, LDC, &chk_err));
		same("gemm (gaps included)", c16, c, M * LDC);
		/* batched, trans_a, beta 0 */
		float *cb = rnd(2 * M * N, 1);
		uint16_t *cb16 = h16(cb, 2 * M * N);
		CHK(f32.ops->gemm_batched(&f32, 1, 0, M, N, 4, 1.0f, a, M, 4 * M, b, N, 4 * N, 0.0f,
					  cb, N, M * N, 2, &chk_err));
		CHK(lp.ops->gemm_batched(&lp, 1, 0, M, N, 4, 1.0f, a16, M, 4 * M, b16, N, 4 * N,
					 0.0f, cb16, N, M * N, 2, &chk_err));
		same("gemm_batched", cb16, cb, 2 * M * N);
		free(a), free(b), free(c), free(a16), free(b16), free(c16), free(cb), free(cb16);
	}
	/* linear forward and backward, bias add */
	{
		float *x = rnd(M * K, 1), *w = rnd(N * K, 1), *bias = rnd(N, 1), o[M * N];
		float *g = rnd(M * N, 1), dx[M * K], *dw = rnd(N * K, 1), *db = rnd(N, 1);
		uint16_t *x16 = h16(x, M * K), *w16 = h16(w, N * K), *b16 = h16(bias, N);
		uint16_t o16[M * N], *g16 = h16(g, M * N), dx16[M * K];
		uint16_t *dw16 = h16(dw, N * K), *db16 = h16(db, N);
		CHK(f32.ops->linear_fwd(&f32, o, x, w, bias, M, K, N, &chk_err));
		CHK(lp.ops->linear_fwd(&lp, o16, x16, w16, b16, M, K, N, &chk_err));
		same("linear_fwd", o16, o, M * N);
		CHK(f32.ops->linear_bwd(&f32, dx, dw, db, g, x, w, M, K, N, &chk_err));
		CHK(lp.ops->linear_bwd(&lp, dx16, dw16, db16, g16, x16, w16, M, K, N, &chk_err));
		same("linear_bwd dinp", dx16, dx, M * K);
		same("linear_bwd dw", dw16, dw, N * K);
		same("linear_bwd dbias", db16, db, N);
		rep(o, M * N);
		CHK(f32.ops->bias_add(&f32, o, bias, M, N, &chk_err));
		CHK(lp.ops->bias_add(&lp, o16, b16, M, N, &chk_err));
		same("bias_add", o16, o, M * N);
		free(x), free(w), free(bias), free(g), free(dw), free(db), free(x16), free(w16);
		free(b16), free(g16), free(dw16), free(db16);
	}
	/* layernorm, gelu, residual, dropout */
	{
		float *x = rnd(M * K, 2), *w = rnd(K, 1), *b = rnd(K, 1), o[M * K], mean[M], rstd[M];
		float *g = rnd(M * K, 1), *dx = rnd(M * K, 1), *dw = rnd(K, 1), *db = rnd(K, 1);
		float mean16[M], rstd16[M];
		uint16_t *x16 = h16(x, M * K), *w16 = h16(w, K), *b16 = h16(b, K), o16[M * K];
		uint16_t *g16 = h16(g, M * K), *dx16 = h16(dx, M * K), *dw16 = h16(dw, K);
		uint16_t *db16 = h16(db, K);
		CHK(f32.ops->layernorm_fwd(&f32, o, mean, rstd, x, w, b, M, K, 1e-5f, &chk_err));
		CHK(lp.ops->layernorm_fwd(&lp, o16, mean16, rstd16, x16, w16, b16, M, K, 1e-5f,
					  &chk_err));
		same("layernorm_fwd", o16, o, M * K);
		ok(memcmp(mean, mean16, sizeof mean) == 0 && memcmp(rstd, rstd16, sizeof rstd) == 0,
		   "%s layernorm_fwd: fp32 mean and rstd identical", gpt_dtype_name(dt));
		CHK(f32.ops->layernorm_bwd(&f32, dx, dw, db, g, x, w, mean, rstd, M, K, &chk_err));
		CHK(lp.ops->layernorm_bwd(&lp, dx16, dw16, db16, g16, x16, w16, mean, rstd, M, K,
					  &chk_err));
		same("layernorm_bwd dinp", dx16, dx, M * K);
		same("layernorm_bwd dw", dw16, dw, K);
		same("layernorm_bwd db", db16, db, K);

		CHK(f32.ops->gelu_fwd(&f32, o, x, M * K, &chk_err));
		CHK(lp.ops->gelu_fwd(&lp, o16, x16, M * K, &chk_err));
		same("gelu_fwd", o16, o, M * K);
		CHK(f32.ops->gelu_bwd(&f32, o, x, g, M * K, &chk_err));
		CHK(lp.ops->gelu_bwd(&lp, o16, x16, g16, M * K, &chk_err));
		same("gelu_bwd", o16, o, M * K);

		CHK(f32.ops->residual_fwd(&f32, o, x, g, M * K, &chk_err));
		CHK(lp.ops->residual_fwd(&lp, o16, x16, g16, M * K, &chk_err));
		same("residual_fwd", o16, o, M * K);
		rep(dx, M * K); /* the 16-bit run holds the rounded layernorm_bwd result */
		CHK(f32.ops->residual_bwd(&f32, dx, NULL, g, M * K, &chk_err));
		CHK(lp.ops->residual_bwd(&lp, dx16, NULL, g16, M * K, &chk_err));
		same("residual_bwd", dx16, dx, M * K);

		gpt_dropout d = {0.2f, {3, 4, 5, GPT_RNG_SITE_ATTN_RESID}, 2, 0, 0};
		CHK(f32.ops->dropout_fwd(&f32, o, x, M, 1, K, &d, &chk_err));
		CHK(lp.ops->dropout_fwd(&lp, o16, x16, M, 1, K, &d, &chk_err));
		same("dropout_fwd", o16, o, M * K);
		CHK(f32.ops->dropout_bwd(&f32, o, g, M, 1, K, &d, &chk_err));
		CHK(lp.ops->dropout_bwd(&lp, o16, g16, M, 1, K, &d, &chk_err));
		same("dropout_bwd", o16, o, M * K);
		free(x), free(w), free(b), free(g), free(dx), free(dw), free(db), free(x16);
		free(w16), free(b16), free(g16), free(dx16), free(dw16), free(db16);
	}
	/* attention with dropout */
	{
		enum { B = 2, T = 4, NH = 2, HS = 3, C3 = 3 * NH * HS, CL = NH * HS };
		gpt_dropout d = {0.25f, {1, 2, 0, GPT_RNG_SITE_ATTN_PROBS}, 0, 0, 0};
		float *x = rnd(B * T * C3, 1), *g = rnd(B * T * CL, 1), o[B * T * CL];
		float dx[B * T * C3], s32[B * NH * T * T], s16[B * NH * T * T];
		uint16_t *x16 = h16(x, B * T * C3), *g16 = h16(g, B * T * CL), o16[B * T * CL];
		uint16_t dx16[B * T * C3];
		CHK(f32.ops->attention_fwd(&f32, o, s32, x, B, T, NH, HS, &d, &chk_err));
		CHK(lp.ops->attention_fwd(&lp, o16, s16, x16, B, T, NH, HS, &d, &chk_err));
		same("attention_fwd", o16, o, B * T * CL);
		CHK(f32.ops->attention_bwd(&f32, dx, g, NULL, x, s32, B, T, NH, HS, &d, &chk_err));
		CHK(lp.ops->attention_bwd(&lp, dx16, g16, NULL, x16, s16, B, T, NH, HS, &d, &chk_err));
		same("attention_bwd", dx16, dx, B * T * C3);
		enum { MAXT = 6 };
		float kc[B * NH * MAXT * HS] = {0}, vc[B * NH * MAXT * HS] = {0};
		uint16_t kc16[B * NH * MAXT * HS] = {0}, vc16[B * NH * MAXT * HS] = {0};
		CHK(f32.ops->attention_kv(&f32, o, kc, vc, x, B, T, 0, MAXT, NH, HS, &chk_err));
		CHK(lp.ops->attention_kv(&lp, o16, kc16, vc16, x16, B, T, 0, MAXT, NH, HS,
					 &chk_err));
		same("attention_kv", o16, o, B * T * CL);
		same("attention_kv k cache", kc16, kc, B * NH * MAXT * HS);
		free(x), free(g), free(x16), free(g16);
	}
	/* cross-entropy on a padded, strided piece; in-place backward */
	{
		enum { R = 5, VL = 16, LD = 20 };
		int32_t tg[R] = {3, -1, 9, 0, 11};
		float *l = rnd(R * LD, 3), mx[R], se[R], tl[R], mx16[R], se16[R], tl16[R];
		uint16_t *l16 = h16(l, R * LD);
		CHK(f32.ops->xent_fwd(&f32, mx, se, tl, l, tg, R, VL, LD, 0, 12, &chk_err));
		CHK(lp.ops->xent_fwd(&lp, mx16, se16, tl16, l16, tg, R, VL, LD, 0, 12, &chk_err));
		ok(memcmp(mx, mx16, sizeof mx) == 0 && memcmp(se, se16, sizeof se) == 0 &&
		   memcmp(tl, tl16, sizeof tl) == 0, "%s xent_fwd: identical fp32 pieces",
		   gpt_dtype_name(dt));
		CHK(f32.ops->xent_bwd(&f32, l, l, tg, mx, se, 0.25f, R, VL, LD, 0, 12, &chk_err));
		CHK(lp.ops->xent_bwd(&lp, l16, l16, tg, mx, se, 0.25f, R, VL, LD, 0, 12, &chk_err));
		same("xent_bwd in place (row gaps included)", l16, l, R * LD);
		free(l), free(l16);
	}
	/* embedding with positions from t0 */
	{
		enum { B = 2, T = 3, C = 5, VL = 6, MAXT = 8 };
		int32_t tok[B * T] = {1, 5, 1, 0, 2, 5};
		float *te = rnd(VL * C, 1), *pe = rnd(MAXT * C, 1), o[B * T * C];
		float *g = rnd(B * T * C, 1), *dte = rnd(VL * C, 1), *dpe = rnd(MAXT * C, 1);
		uint16_t *te16 = h16(te, VL * C), *pe16 = h16(pe, MAXT * C), o16[B * T * C];
		uint16_t *g16 = h16(g, B * T * C), *dte16 = h16(dte, VL * C);
		uint16_t *dpe16 = h16(dpe, MAXT * C);
		CHK(f32.ops->embedding_fwd(&f32, o, tok, te, pe, B, T, C, 0, VL, 4, &chk_err));
		CHK(lp.ops->embedding_fwd(&lp, o16, tok, te16, pe16, B, T, C, 0, VL, 4, &chk_err));
		same("embedding_fwd", o16, o, B * T * C);
		CHK(f32.ops->embedding_bwd(&f32, dte, dpe, g, tok, B, T, C, 0, VL, 4, &chk_err));
		CHK(lp.ops->embedding_bwd(&lp, dte16, dpe16, g16, tok, B, T, C, 0, VL, 4, &chk_err));
		same("embedding_bwd dwte", dte16, dte, VL * C);
		same("embedding_bwd dwpe (rows outside [t0, t0+T) untouched)", dpe16, dpe, MAXT * C);
		free(te), free(pe), free(g), free(dte), free(dpe), free(te16), free(pe16), free(g16);
		free(dte16), free(dpe16);
	}
	/* AdamW with fp32 masters; reductions */
	{
		enum { n = 100 };
		float *master = chk_floats(n, 1), *g = rnd(n, 0.1), m[n] = {0}, v[n] = {0};
		float mcopy[n], m2[n] = {0}, v2[n] = {0}, p32[n];
		uint16_t p16[n], *g16 = h16(g, n);
		memcpy(mcopy, master, sizeof mcopy);
		gpt_adamw h = {1e-2, 0.9, 0.999, 1e-8, 0.1, 1.0, 1};
		CHK(f32.ops->adamw(&f32, p32, mcopy, NULL, g, m2, v2, n, &h, &chk_err));
		CHK(lp.ops->adamw(&lp, p16, master, NULL, g16, m, v, n, &h, &chk_err));
		ok(memcmp(master, mcopy, sizeof mcopy) == 0 && memcmp(m, m2, sizeof m) == 0 &&
		   memcmp(v, v2, sizeof v) == 0, "%s adamw: master and moments as in fp32",
		   gpt_dtype_name(dt));
		same("adamw: the parameter is the rounded master", p16, master, n);
		gpt_err err = {0};
		ok(lp.ops->adamw(&lp, p16, NULL, NULL, g16, m, v, n, &h, &err) == GPT_EINTERNAL &&
		   strstr(err.msg, "master"), "%s adamw without master weights: %s",
		   gpt_dtype_name(dt), err.msg);

		float s32 = 0, s16 = 0, flag = 0;
		CHK(f32.ops->sum_squares(&f32, &s32, g, n, &chk_err));
		CHK(lp.ops->sum_squares(&lp, &s16, g16, n, &chk_err));
		ok(s32 == s16, "%s sum_squares: same as fp32", gpt_dtype_name(dt));
		CHK(lp.ops->check_finite(&lp, &flag, g16, n, &chk_err));
		ok(flag == 0.0f, "%s check_finite: finite", gpt_dtype_name(dt));
		g16[17] = dt == GPT_DTYPE_BF16 ? 0x7f80 : 0x7c00; /* +inf */
		CHK(lp.ops->check_finite(&lp, &flag, g16, n, &chk_err));
		ok(flag == 1.0f, "%s check_finite: flags inf", gpt_dtype_name(dt));
		free(master), free(g), free(g16);
	}
	/* the same past one block of the optimizer's ops (2^20 elements) and
	 * past the reductions' pieces: the fp32 path's bits on the widened
	 * gradients, with no fp32 copy of them all */
	{
		const int64_t n = (1 << 20) + 4099;
		float *master = chk_floats(n, 1), *g = rnd(n, 0.1), *g32 = malloc((size_t)n * 4);
		float *m = calloc((size_t)n, 4), *v = calloc((size_t)n, 4), *m2 = calloc((size_t)n, 4);
		float *v2 = calloc((size_t)n, 4), *mcopy = malloc((size_t)n * 4), *p32 = malloc((size_t)n * 4);
		uint16_t *p16 = malloc((size_t)n * 2), *g16 = h16(g, n);
		gpt_convert(g32, GPT_DTYPE_F32, g16, dt, (size_t)n, NULL);
		memcpy(mcopy, master, (size_t)n * 4);
		gpt_adamw h = {1e-2, 0.9, 0.999, 1e-8, 0.1, 1.0, 3};
		CHK(f32.ops->adamw(&f32, p32, mcopy, NULL, g32, m2, v2, n, &h, &chk_err));
		CHK(lp.ops->adamw(&lp, p16, master, NULL, g16, m, v, n, &h, &chk_err));
		ok(memcmp(master, mcopy, (size_t)n * 4) == 0 && memcmp(m, m2, (size_t)n * 4) == 0 &&
		   memcmp(v, v2, (size_t)n * 4) == 0, "%s adamw over %lld elements (blocks): as in fp32",
		   gpt_dtype_name(dt), (long long)n);
		same("adamw over blocks: the parameter is the rounded master", p16, master, n);
		float s32 = 0.5f, s16 = 0.5f, flag = 0;
		CHK(f32.ops->sum_squares(&f32, &s32, g32, n, &chk_err));
		CHK(lp.ops->sum_squares(&lp, &s16, g16, n, &chk_err));
		ok(s32 == s16, "%s sum_squares over %lld elements: the fp32 bits (%.9g)", gpt_dtype_name(dt),
		   (long long)n, (double)s16);
		g16[n - 1] = dt == GPT_DTYPE_BF16 ? 0x7f7f : 0x7bff; /* the largest finite */
		CHK(lp.ops->check_finite(&lp, &flag, g16, n, &chk_err));
		ok(flag == 0.0f, "%s check_finite: the largest finite value is finite", gpt_dtype_name(dt));
		g16[n - 1] = dt == GPT_DTYPE_BF16 ? 0xffc1 : 0xfe01; /* a negative NaN, last */
		CHK(lp.ops->check_finite(&lp, &flag, g16, n, &chk_err));
		ok(flag == 1.0f, "%s check_finite: flags a NaN at the end", gpt_dtype_name(dt));
		free(master), free(g), free(g32), free(m), free(v), free(m2), free(v2), free(mcopy);
		free(p32), free(p16), free(g16);
	}
	/* bf16's split master weights (the trainer's): two steps over more
	 * than a block give the fp32 path's master and moments bit for bit */
	{
		const int64_t n = (1 << 20) + 4099;
		float *master = chk_floats(n, 1), *g = rnd(n, 0.1), *g32 = malloc((size_t)n * 4);
		float *m = calloc((size_t)n, 4), *v = calloc((size_t)n, 4), *m2 = calloc((size_t)n, 4);
		float *v2 = calloc((size_t)n, 4), *p32 = malloc((size_t)n * 4), *w = malloc((size_t)n * 4);
		uint16_t *hi = malloc((size_t)n * 2), *lo = malloc((size_t)n * 2), *g16 = h16(g, n);
		gpt_convert(g32, GPT_DTYPE_F32, g16, dt, (size_t)n, NULL);
		gpt_bf16_split(hi, lo, master, (size_t)n);
		for (int64_t t = 1; t <= 2; t++) {
			gpt_adamw h = {1e-2, 0.9, 0.999, 1e-8, 0.1, 1.0, t};
			CHK(f32.ops->adamw(&f32, p32, master, NULL, g32, m2, v2, n, &h, &chk_err));
			gpt_err err = {0};
			int rc = lp.ops->adamw(&lp, hi, NULL, lo, g16, m, v, n, &h, &err);
			if (dt != GPT_DTYPE_BF16) {
				ok(rc == GPT_EINTERNAL && strstr(err.msg, "bf16 only"),
				   "%s adamw: split master weights are refused: %s", gpt_dtype_name(dt), err.msg);
				break;
			}
			CHK(rc);
		}
		if (dt == GPT_DTYPE_BF16) {
			gpt_bf16_join(w, hi, lo, (size_t)n);
			ok(memcmp(w, master, (size_t)n * 4) == 0 && memcmp(m, m2, (size_t)n * 4) == 0 &&
			   memcmp(v, v2, (size_t)n * 4) == 0,
			   "bf16 adamw, split master, two steps over %lld elements: master and moments as in fp32",
			   (long long)n);
			uint16_t *want = malloc((size_t)n * 2);
			gpt_bf16_split(want, NULL, master, (size_t)n);
			ok(memcmp(hi, want, (size_t)n * 2) == 0,
			   "bf16 adamw, split master: the parameter is the master's high half, rounded");
			free(want);
			gpt_err err = {0};
			ok(lp.ops->adamw(&lp, hi, master, lo, g16, m, v, n, &(gpt_adamw){.t = 1}, &err) ==
				   GPT_EINTERNAL && strstr(err.msg, "whole or"),
			   "bf16 adamw: master and its low halves at once are refused: %s", err.msg);
		}
		free(master), free(g), free(g32), free(m), free(v), free(m2), free(v2), free(p32), free(w);
		free(hi), free(lo), free(g16);
	}
}

int main(void)
{
	f32 = chk_backend();
	gpt_dtype dts[2] = {GPT_DTYPE_BF16, GPT_DTYPE_F16};
	for (int i = 0; i < 2; i++) {
		dt = dts[i];
		CHK(gpt_backend_cpu_init(&lp, dt, 0, &chk_err));
		ops();
		gpt_backend_cpu_free(&lp);
	}
	gpt_backend_cpu_free(&f32);
	return done_testing();
}
