/* Causal attention with probability dropout: forward against a double
 * reference that draws the mask from the documented coordinates; backward
 * against central finite differences; the mask does not depend on how the
 * batch or the heads are split. */
#include "backend/philox.h"
#include "cpu-check.h"

enum { B = 2, T = 5, NH = 3, HS = 4, CL = NH * HS, C3 = 3 * CL };

static gpt_dropout drop = {0.3f, {99, 7, 2, GPT_RNG_SITE_ATTN_PROBS}, 4, 1, 0};

static double mask(const gpt_dropout *d, int b, int h, int t, int j)
{
	if (!d || d->p == 0.0f)
		return 1.0;
	uint32_t r = gpt_rng_draw(d->key.seed, d->key.step, d->key.layer, d->key.site,
				  (uint64_t)(d->sample0 + b), (uint64_t)t,
				  (uint64_t)((d->feature0 + h) * T + j));
	return r >= gpt_dropout_threshold(d->p) ? (double)gpt_dropout_scale(d->p) : 0.0;
}

static void ref_attn(double *out, const double *x, const gpt_dropout *d)
{
	for (int b = 0; b < B; b++)
		for (int h = 0; h < NH; h++)
			for (int t = 0; t < T; t++) {
				double s[T], m = -INFINITY, sum = 0;
				for (int j = 0; j <= t; j++) {
					s[j] = 0;
					for (int i = 0; i < HS; i++)
						s[j] += x[(b * T + t) * C3 + h * HS + i] *
							x[(b * T + j) * C3 + CL + h * HS + i];
					s[j] /= sqrt((double)HS);
					m = fmax(m, s[j]);
				}
				for (int j = 0; j <= t; j++)
					sum += (s[j] = exp(s[j] - m));
				for (int i = 0; i < HS; i++) {
					double o = 0;
					for (int j = 0; j <= t; j++)
						o += s[j] / sum * mask(d, b, h, t, j) *
						     x[(b * T + j) * C3 + 2 * CL + h * HS + i];
					out[(b * T + t) * CL + h * HS + i] = o;
				}
			}
}

static double loss(const double *x, const float *g, const gpt_dropout *d)
{
	double out[B * T * CL], s = 0;
	ref_attn(out, x, d);
	for (int i = 0; i < B * T * CL; i++)
		s += out[i] * g[i];
	return s;
}

static void check(gpt_backend *be, const gpt_dropout *d, const char *name)
{
	float *x = chk_floats(B * T * C3, 1.5), *g = chk_floats(B * T * CL, 1.0);
	float out[B * T * CL], *saved, dx[B * T * C3];
	double *xd = chk_doubles_of(x, B * T * C3), want[B * T * CL], wdx[B * T * C3];
	saved = malloc((size_t)be->ops->attention_saved_size(be, B, T, NH, HS, 1) * sizeof *saved);
	ref_attn(want, xd, d);
	CHK(be->ops->attention_fwd(be, out, saved, x, B, T, NH, HS, d, &chk_err));
	char what[128];
	snprintf(what, sizeof what, "attention_fwd, %s", name);
	chk_close(what, out, want, B * T * CL, 1e-6, 1e-5);
	for (int i = 0; i < B * T * C3; i++) {
		const double h = 1e-6;
		double keep = xd[i];
		xd[i] = keep + h;
		double up = loss(xd, g, d);
		xd[i] = keep - h;
		double dn = loss(xd, g, d);
		xd[i] = keep;
		wdx[i] = (up - dn) / (2 * h);
	}
	memset(dx, 0xff, sizeof dx); /* NaN: the op must write every element */
	CHK(be->ops->attention_bwd(be, dx, g, NULL, x, saved, B, T, NH, HS, d, &chk_err));
	snprintf(what, sizeof what, "attention_bwd dqkv (finite differences), %s", name);
	chk_close(what, dx, wdx, B * T * C3, 1e-5, 1e-4);
	free(x), free(g), free(xd), free(saved);
}

int main(void)
{
	gpt_backend be = chk_backend();
	int dropped = 0, total = 0;
	for (int b = 0; b < B; b++)
		for (int h = 0; h < NH; h++)
			for (int t = 0; t < T; t++)
				for (int j = 0; j <= t; j++, total++)
					dropped += mask(&drop, b, h, t, j) == 0.0;
	ok(dropped > 0 && dropped < total, "the dropout case drops %d of %d probabilities",
	   dropped, total);
	check(&be, NULL, "no dropout");
	check(&be, &drop, "dropout p = 0.3");

	/* split: sample 1 alone (sample0 + 1) and heads 1..2 alone (feature0 + 1)
	 * reproduce the corresponding part of the full run */
	{
		float *x = chk_floats(B * T * C3, 1.5);
		float full[B * T * CL], *saved = malloc(B * NH * T * T * sizeof *saved);
		CHK(be.ops->attention_fwd(&be, full, saved, x, B, T, NH, HS, &drop, &chk_err));
		gpt_dropout d1 = drop;
		d1.sample0 += 1;
		float part[T * CL];
		CHK(be.ops->attention_fwd(&be, part, saved, x + T * C3, 1, T, NH, HS, &d1,
					  &chk_err));
		ok(memcmp(part, full + T * CL, sizeof part) == 0,
		   "attention: sample 1 run alone gives the same output");
		/* heads 1, 2 as a tensor-parallel rank sees them */
		enum { nh = 2, cl = nh * HS };
		float xs[B * T * 3 * cl], outs[B * T * cl];
		for (int r = 0; r < B * T; r++)
			for (int part3 = 0; part3 < 3; part3++)
				memcpy(xs + r * 3 * cl + part3 * cl, x + r * C3 + part3 * CL + HS,
				       cl * sizeof *xs);
		gpt_dropout d2 = drop;
		d2.feature0 += 1;
		CHK(be.ops->attention_fwd(&be, outs, saved, xs, B, T, nh, HS, &d2, &chk_err));
		int same = 1;
		for (int r = 0; r < B * T; r++)
			same &= memcmp(outs + r * cl, full + r * CL + HS, cl * sizeof *outs) == 0;
		ok(same, "attention: heads 1..2 run alone (feature0 + 1) give the same output");
		free(x), free(saved);
	}
	/* generation: a 3-token prompt, then one token at a time, through the
	 * KV cache, equals full attention over the 5 tokens */
	{
		enum { MAXT = 7 };
		float *x = chk_floats(B * T * C3, 1.5), full[B * T * CL];
		float *saved = malloc(B * NH * T * T * sizeof *saved);
		CHK(be.ops->attention_fwd(&be, full, saved, x, B, T, NH, HS, NULL, &chk_err));
		float *kc = malloc(B * NH * MAXT * HS * sizeof *kc);
		float *vc = malloc(B * NH * MAXT * HS * sizeof *vc);
		float inc[B * T * CL];
		int64_t steps[3][2] = {{0, 3}, {3, 1}, {4, 1}}; /* t0, Tn */
		for (int s = 0; s < 3; s++) {
			int64_t t0 = steps[s][0], tn = steps[s][1];
			float xs[B * 3 * C3], os[B * 3 * CL];
			for (int b = 0; b < B; b++)
				memcpy(xs + b * tn * C3, x + (b * T + t0) * C3,
				       (size_t)(tn * C3) * sizeof *xs);
			CHK(be.ops->attention_kv(&be, os, kc, vc, xs, B, tn, t0, MAXT, NH, HS,
						 &chk_err));
			for (int b = 0; b < B; b++)
				memcpy(inc + (b * T + t0) * CL, os + b * tn * CL,
				       (size_t)(tn * CL) * sizeof *os);
		}
		chk_close_f("attention_kv: prompt then single tokens equal full attention", inc, full,
			    B * T * CL, 1e-6, 1e-5);
		int cached = 1;
		for (int b = 0; b < B; b++)
			for (int h = 0; h < NH; h++)
				for (int t = 0; t < T; t++)
					cached &= memcmp(kc + ((b * NH + h) * MAXT + t) * HS,
							 x + (b * T + t) * C3 + CL + h * HS,
							 HS * sizeof *kc) == 0 &&
						  memcmp(vc + ((b * NH + h) * MAXT + t) * HS,
							 x + (b * T + t) * C3 + 2 * CL + h * HS,
							 HS * sizeof *vc) == 0;
		ok(cached, "attention_kv: the cache holds every position's k and v, (B, NH, maxT, HS)");
		gpt_err err = {0};
		float o1[B * CL];
		int rc = be.ops->attention_kv(&be, o1, kc, vc, x, B, 1, MAXT, MAXT, NH, HS, &err);
		ok(rc == GPT_EUSAGE && strstr(err.msg, "do not fit the cache of 7"),
		   "attention_kv past the cache is an error: %s", err.msg);
		free(x), free(saved), free(kc), free(vc);
	}
	/* a generation step of 3 sequences in caches of 4 (slots 2, 0 and 3,
	 * holding 5, 0 and 6 of 7 positions): attention_kv_rows is
	 * attention_kv on each one's cache, bit for bit, outputs and caches */
	{
		enum { MAXT = 7, S = 4, N = 3, SLOT = NH * MAXT * HS };
		int32_t slot[N] = {2, 0, 3}, pos[N] = {5, 0, 6};
		float *kc = chk_floats(S * SLOT, 1.0), *vc = chk_floats(S * SLOT, 1.0);
		float *x = chk_floats(N * C3, 1.5), kc1[S * SLOT], vc1[S * SLOT], o[N * CL], o1[N * CL];
		memcpy(kc1, kc, sizeof kc1);
		memcpy(vc1, vc, sizeof vc1);
		CHK(be.ops->attention_kv_rows(&be, o, kc, vc, x, N, slot, pos, MAXT, NH, HS, &chk_err));
		for (int i = 0; i < N; i++)
			CHK(be.ops->attention_kv(&be, o1 + i * CL, kc1 + slot[i] * SLOT, vc1 + slot[i] * SLOT,
						 x + i * C3, 1, 1, pos[i], MAXT, NH, HS, &chk_err));
		ok(memcmp(o, o1, sizeof o) == 0 && memcmp(kc, kc1, sizeof kc1) == 0 &&
			   memcmp(vc, vc1, sizeof vc1) == 0,
		   "attention_kv_rows: each row attention_kv's on its slot's cache, bit for bit");
		int at = 1;
		for (int i = 0; i < N; i++)
			for (int h = 0; h < NH; h++)
				at &= memcmp(kc + slot[i] * SLOT + (h * MAXT + pos[i]) * HS,
					     x + i * C3 + CL + h * HS, HS * sizeof *kc) == 0;
		ok(at, "attention_kv_rows: row i's keys at position pos[i] of slot slot[i]");
		gpt_err err = {0};
		pos[1] = MAXT;
		int rc = be.ops->attention_kv_rows(&be, o, kc, vc, x, N, slot, pos, MAXT, NH, HS, &err);
		ok(rc == GPT_EUSAGE && strstr(err.msg, "do not fit the cache of 7"),
		   "attention_kv_rows past the cache is an error: %s", err.msg);
		pos[1] = 0, slot[2] = -1;
		rc = be.ops->attention_kv_rows(&be, o, kc, vc, x, N, slot, pos, MAXT, NH, HS, &err);
		ok(rc == GPT_EUSAGE && strstr(err.msg, "row 2 has slot -1 and position 6"),
		   "attention_kv_rows with a slot below 0 is an error: %s", err.msg);
		free(kc), free(vc), free(x);
	}
	gpt_backend_cpu_free(&be);
	return done_testing();
}
