/* Dropout and the residual add: the mask is the documented function of
 * global coordinates, so a region computed through offsets equals the same
 * region of the full mask; the keep rate is near 1 - p; the backward applies
 * the forward's mask. */
#include "backend/philox.h"
#include "cpu-check.h"
#include "cpu/kernels.h"

enum { B = 4, T = 6, F = 37 };

int main(void)
{
	gpt_backend be = chk_backend();
	gpt_dropout d = {0.25f, {1234, 10, 3, GPT_RNG_SITE_MLP_RESID}, 8, 0, 0};
	float *x = chk_floats(B * T * F, 1.0), full[B * T * F];
	for (int i = 0; i < B * T * F; i++)
		x[i] += 2.0f; /* never zero, so zeros in the output are drops */
	CHK(be.ops->dropout_fwd(&be, full, x, B, T, F, &d, &chk_err));

	/* against the documented coordinates */
	{
		double want[B * T * F];
		uint32_t thr = gpt_dropout_threshold(d.p);
		for (int b = 0; b < B; b++)
			for (int t = 0; t < T; t++)
				for (int f = 0; f < F; f++) {
					int i = (b * T + t) * F + f;
					uint32_t r = gpt_rng_draw(1234, 10, 3, GPT_RNG_SITE_MLP_RESID,
								  (uint64_t)(8 + b), (uint64_t)t,
								  (uint64_t)f);
					want[i] = r >= thr ? (double)(x[i] * gpt_dropout_scale(d.p)) : 0.0;
				}
		chk_close("dropout_fwd draws the mask of (seed, step, layer, site, sample, position, feature)",
			  full, want, B * T * F, 0, 0);
	}

	/* samples 1..2 and features 5..29 as another layout would hold them */
	{
		enum { b0 = 1, nb = 2, f0 = 5, nf = 25 };
		float xs[nb * T * nf], ys[nb * T * nf];
		for (int b = 0; b < nb; b++)
			for (int t = 0; t < T; t++)
				memcpy(xs + (b * T + t) * nf, x + ((b0 + b) * T + t) * F + f0,
				       nf * sizeof *xs);
		gpt_dropout ds = d;
		ds.sample0 += b0;
		ds.feature0 += f0;
		CHK(be.ops->dropout_fwd(&be, ys, xs, nb, T, nf, &ds, &chk_err));
		int same = 1;
		for (int b = 0; b < nb; b++)
			for (int t = 0; t < T; t++)
				same &= memcmp(ys + (b * T + t) * nf, full + ((b0 + b) * T + t) * F + f0,
					       nf * sizeof *ys) == 0;
		ok(same, "a slice through sample0/feature0 offsets equals that region of the full mask");
	}

	/* long rows (dropout.c draws runs of 128 features sixteen Philox calls
	 * at a time where the CPU has AVX-512) at feature offsets 0 and 3,
	 * in place and not: each element as the documented coordinates say */
	{
		enum { LT = 3, LF = 1000 };
		float *xl = chk_floats(LT * LF, 1.0), *yl = malloc(LT * LF * sizeof *yl);
		for (int i = 0; i < LT * LF; i++)
			xl[i] += 2.0f;
		for (int k = 0; k < 3; k++) {
			gpt_dropout dl = {0.3f, {4321, 2, 5, GPT_RNG_SITE_ATTN_RESID}, 1, k == 1 ? 3 : 0, 0};
			float *dst = yl;
			if (k == 2) { /* in place */
				memcpy(yl, xl, LT * LF * sizeof *yl);
				CHK(be.ops->dropout_fwd(&be, yl, yl, 1, LT, LF, &dl, &chk_err));
			} else {
				CHK(be.ops->dropout_fwd(&be, dst, xl, 1, LT, LF, &dl, &chk_err));
			}
			uint32_t thr = gpt_dropout_threshold(dl.p);
			int same = 1;
			for (int t = 0; t < LT; t++)
				for (int f = 0; f < LF; f++) {
					uint32_t r = gpt_rng_draw(4321, 2, 5, GPT_RNG_SITE_ATTN_RESID, 1, (uint64_t)t,
								  (uint64_t)(dl.feature0 + f));
					float want = r >= thr ? xl[t * LF + f] * gpt_dropout_scale(dl.p) : 0.0f;
					same &= memcmp(&want, yl + t * LF + f, sizeof want) == 0;
				}
			ok(same, "rows of %d features from feature %lld%s: the documented mask, bit for bit", LF,
			   (long long)dl.feature0, k == 2 ? ", in place" : "");
		}
		free(xl), free(yl);
	}

	/* each path this CPU runs (portable C, AVX2's eight Philox calls at
	 * once, AVX-512's sixteen) over rows long enough for several runs,
	 * from features 0, 3 and 8, in place: the scalar path's bits */
	{
		enum { LF = 777 };
		float *xl = chk_floats(LF, 1.0), ref[LF], y[LF];
		gpt_dropout dl = {0.4f, {99, 7, 2, GPT_RNG_SITE_MLP_RESID}, 0, 0, 0};
		uint32_t thr = gpt_dropout_threshold(dl.p);
		float sc = gpt_dropout_scale(dl.p);
		static const int64_t from[] = {0, 3, 8};
		for (int path = 1; path <= 2; path++)
			for (int k = 0; k < 3; k++) {
				gpt_cpu_dropout_row_on(0, ref, xl, LF, &dl, thr, sc, 5, 9, from[k]);
				memcpy(y, xl, sizeof y);
				if (gpt_cpu_dropout_row_on(path, y, y, LF, &dl, thr, sc, 5, 9, from[k]) != 0) {
					diag("this CPU has no %s: not checked", path == 1 ? "AVX2" : "AVX-512");
					continue;
				}
				ok(memcmp(y, ref, sizeof y) == 0, "%s from feature %lld, in place: the portable path's bits",
				   path == 1 ? "AVX2" : "AVX-512", (long long)from[k]);
			}
		free(xl);
	}

	/* keep rate over a large tensor: binomial, 5 sigma */
	{
		int64_t n = 1 << 18;
		float *ones = malloc((size_t)n * sizeof *ones), *y = malloc((size_t)n * sizeof *y);
		for (int64_t i = 0; i < n; i++)
			ones[i] = 1.0f;
		gpt_dropout dl = {0.1f, {5, 1, 0, GPT_RNG_SITE_EMBED}, 0, 0, 0};
		CHK(be.ops->dropout_fwd(&be, y, ones, 64, 64, n / 4096, &dl, &chk_err));
		int64_t kept = 0;
		int vals = 1;
		for (int64_t i = 0; i < n; i++) {
			kept += y[i] != 0.0f;
			vals &= y[i] == 0.0f || y[i] == gpt_dropout_scale(0.1f);
		}
		double rate = (double)kept / (double)n;
		is_near(rate, 0.9, 5 * sqrt(0.9 * 0.1 / (double)n), "keep rate near 1 - p = 0.9");
		ok(vals, "kept elements are scaled by 1 / (1 - p)");
		free(ones), free(y);
	}

	/* t0: a slice of positions (sequence parallelism) draws what the same
	 * rows of the whole tensor draw */
	{
		enum { TT = 8, FF = 16 };
		float *xs = chk_floats(TT * FF, 1.0), whole[TT * FF], part[TT * FF];
		gpt_dropout dw = {0.5f, {77, 3, 1, GPT_RNG_SITE_ATTN_RESID}, 5, 0, 0};
		CHK(be.ops->dropout_fwd(&be, whole, xs, 1, TT, FF, &dw, &chk_err));
		gpt_dropout dp = dw;
		dp.t0 = 3;
		CHK(be.ops->dropout_fwd(&be, part, xs + 3 * FF, 1, 4, FF, &dp, &chk_err));
		ok(memcmp(part, whole + 3 * FF, 4 * FF * sizeof(float)) == 0,
		   "positions 3..6 with t0 = 3 are the rows 3..6 of the whole");
		free(xs);
	}

	/* backward: same mask; in place; p = 0 is the identity */
	{
		float *g = chk_floats(B * T * F, 1.0), dx[B * T * F];
		CHK(be.ops->dropout_bwd(&be, dx, g, B, T, F, &d, &chk_err));
		int same = 1;
		for (int i = 0; i < B * T * F; i++)
			same &= (dx[i] == 0.0f) == (full[i] == 0.0f) &&
				(full[i] == 0.0f || dx[i] == g[i] * gpt_dropout_scale(d.p));
		ok(same, "dropout_bwd applies the forward's mask and scale");
		CHK(be.ops->dropout_bwd(&be, g, g, B, T, F, &d, &chk_err));
		ok(memcmp(g, dx, sizeof dx) == 0, "dropout_bwd in place: same bits");
		gpt_dropout d0 = d;
		d0.p = 0.0f;
		CHK(be.ops->dropout_fwd(&be, dx, x, B, T, F, &d0, &chk_err));
		ok(memcmp(dx, x, sizeof dx) == 0, "p = 0 is the identity");
		gpt_dropout bad = d;
		bad.p = 1.0f;
		gpt_err err = {0};
		ok(be.ops->dropout_fwd(&be, dx, x, B, T, F, &bad, &err) == GPT_EINTERNAL &&
		   strstr(err.msg, "outside [0, 1)"), "p = 1 is refused: %s", err.msg);
		free(g);
	}

	/* residual add and its backward (adds into both) */
	{
		enum { n = 5000 };
		float *a = chk_floats(n, 1.0), *b = chk_floats(n, 1.0), *o = malloc(n * sizeof *o);
		double *w = malloc(n * sizeof *w);
		for (int i = 0; i < n; i++)
			w[i] = (double)a[i] + b[i];
		CHK(be.ops->residual_fwd(&be, o, a, b, n, &chk_err));
		chk_close("residual_fwd", o, w, n, 0, 1e-7);
		double *wa = chk_doubles_of(a, n), *wb = chk_doubles_of(b, n);
		for (int i = 0; i < n; i++)
			wa[i] += o[i], wb[i] += o[i];
		CHK(be.ops->residual_bwd(&be, a, b, o, n, &chk_err));
		chk_close("residual_bwd da += dout", a, wa, n, 0, 1e-7);
		chk_close("residual_bwd db += dout", b, wb, n, 0, 1e-7);
		free(a), free(b), free(o), free(w), free(wa), free(wb);
	}
	free(x);
	gpt_backend_cpu_free(&be);
	return done_testing();
}
