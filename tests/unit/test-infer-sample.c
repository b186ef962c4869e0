/* Samplers on hand-made distributions: temperature, top-k, top-p, the draw,
 * repetition penalty, greedy choice, the keyed uniform draws. */
#include "infer/infer.h"
#include "tap.h"

#include <math.h>

static void set_logits(float *l, const double *p, int n)
{
	for (int i = 0; i < n; i++)
		l[i] = p[i] > 0 ? (float)log(p[i]) : -INFINITY;
}

/* max |probs - want| */
static double diff(const float *probs, const double *want, int n)
{
	double d = 0;
	for (int i = 0; i < n; i++)
		if (fabs(probs[i] - want[i]) > d)
			d = fabs(probs[i] - want[i]);
	return d;
}

int main(void)
{
	/* shuffled so that sorting matters: ids 3, 0, 4, 1, 2 from most to least */
	const double p[5] = {0.2, 0.1, 0.05, 0.5, 0.15};
	float l[5], probs[5];
	int32_t order[5];
	set_logits(l, p, 5);
	gpt_sampling s = {0, 1.0, 1.0, 1.0};

	int64_t k = gpt_sample_probs(l, 5, &s, probs, order);
	ok(k == 5 && diff(probs, p, 5) < 1e-6, "no filter: the softmax itself");

	s.top_k = 2;
	k = gpt_sample_probs(l, 5, &s, probs, order);
	double w2[5] = {0.2 / 0.7, 0, 0, 0.5 / 0.7, 0};
	ok(k == 2 && diff(probs, w2, 5) < 1e-6, "top_k 2 keeps ids 3 and 0, renormalised");

	s.top_k = 0;
	s.top_p = 0.6;
	k = gpt_sample_probs(l, 5, &s, probs, order);
	ok(k == 2 && diff(probs, w2, 5) < 1e-6, "top_p 0.6: 0.5 is below it, so 0.2 is kept too");
	s.top_p = 0.5;
	k = gpt_sample_probs(l, 5, &s, probs, order);
	double w1[5] = {0, 0, 0, 1, 0};
	ok(k == 1 && diff(probs, w1, 5) < 1e-6, "top_p 0.5: the first token reaches it alone");
	s.top_p = 0.71;
	k = gpt_sample_probs(l, 5, &s, probs, order);
	double w3[5] = {0.2 / 0.85, 0, 0, 0.5 / 0.85, 0.15 / 0.85};
	ok(k == 3 && diff(probs, w3, 5) < 1e-6, "top_p 0.71: three tokens");
	s.top_p = 1e-9;
	k = gpt_sample_probs(l, 5, &s, probs, order);
	ok(k == 1 && probs[3] == 1.0f, "a tiny top_p still keeps the most probable token");
	s.top_p = 0;
	k = gpt_sample_probs(l, 5, &s, probs, order);
	ok(k == 1 && probs[3] == 1.0f, "top_p 0 keeps the most probable token alone");

	s.top_p = 0.9;
	s.top_k = 2;
	k = gpt_sample_probs(l, 5, &s, probs, order);
	ok(k == 2 && diff(probs, w2, 5) < 1e-6, "top_k applies before top_p");

	s = (gpt_sampling){0, 1.0, 2.0, 1.0};
	gpt_sample_probs(l, 5, &s, probs, order);
	double z = 0, wt[5];
	for (int i = 0; i < 5; i++)
		z += sqrt(p[i]);
	for (int i = 0; i < 5; i++)
		wt[i] = sqrt(p[i]) / z;
	ok(diff(probs, wt, 5) < 1e-6, "temperature 2 takes the square root of the probabilities");
	s.temperature = 0.01;
	gpt_sample_probs(l, 5, &s, probs, order);
	ok(probs[3] > 0.999999f, "a low temperature is nearly greedy");

	/* ties: top-k keeps the lower ids */
	float tie[6] = {1, 2, 2, 2, 0, 2};
	s = (gpt_sampling){2, 1.0, 1.0, 1.0};
	float pt[6];
	int32_t ot[6];
	gpt_sample_probs(tie, 6, &s, pt, ot);
	ok(pt[1] == 0.5f && pt[2] == 0.5f && pt[3] == 0 && pt[5] == 0, "top_k ties go to the lower ids");
	is_int(gpt_argmax(tie, 6), 1, "argmax: the first of equal maxima");

	/* -inf is never kept */
	float ninf[4] = {0, -INFINITY, 0, -INFINITY};
	s = (gpt_sampling){0, 1.0, 1.0, 1.0};
	float pn[4];
	int32_t on[4];
	k = gpt_sample_probs(ninf, 4, &s, pn, on);
	ok(k == 2 && pn[1] == 0 && pn[3] == 0 && pn[0] == 0.5f, "-inf logits get probability 0");

	/* the draw is the inverse of the cumulative distribution */
	float d[5] = {0.2f, 0, 0.3f, 0.5f, 0};
	is_int(gpt_sample_draw(d, 5, 0.0), 0, "u = 0 draws the first token");
	is_int(gpt_sample_draw(d, 5, 0.19), 0, "u = 0.19: still the first");
	is_int(gpt_sample_draw(d, 5, 0.21), 2, "u = 0.21: the zero-probability token is skipped");
	is_int(gpt_sample_draw(d, 5, 0.9999999), 3, "u near 1: the last possible token");

	/* repetition penalty */
	float rp[4] = {2.0f, -2.0f, 1.0f, 4.0f};
	int32_t prev[] = {0, 1, 0, 0};
	gpt_repetition_penalty(rp, 4, prev, 4, 2.0);
	ok(rp[0] == 1.0f && rp[1] == -4.0f && rp[2] == 1.0f && rp[3] == 4.0f,
	   "repetition penalty: positive halved, negative doubled, once per token, others untouched");

	/* keyed uniform draws */
	double u1 = gpt_sample_uniform(1, 2, 3), u2 = gpt_sample_uniform(1, 2, 3);
	ok(u1 == u2 && u1 >= 0 && u1 < 1, "a draw is a function of (seed, sequence, step)");
	ok(gpt_sample_uniform(1, 2, 4) != u1 && gpt_sample_uniform(1, 3, 3) != u1 &&
		   gpt_sample_uniform(2, 2, 3) != u1, "each coordinate changes it");
	double mean = 0;
	for (int i = 0; i < 10000; i++)
		mean += gpt_sample_uniform(5, 0, (uint64_t)i);
	mean /= 10000;
	ok(fabs(mean - 0.5) < 0.02, "uniform: mean %.4f over 10000 draws", mean);
	/* sampling by draws follows the distribution */
	int hits[5] = {0};
	s = (gpt_sampling){0, 1.0, 1.0, 1.0};
	gpt_sample_probs(l, 5, &s, probs, order);
	for (int i = 0; i < 20000; i++)
		hits[gpt_sample_draw(probs, 5, gpt_sample_uniform(9, 1, (uint64_t)i))]++;
	ok(fabs(hits[3] / 20000.0 - 0.5) < 0.02 && fabs(hits[2] / 20000.0 - 0.05) < 0.01,
	   "20000 draws: token 3 %.3f (0.5), token 2 %.3f (0.05)", hits[3] / 20000.0,
	   hits[2] / 20000.0);
	/* a large vocabulary with many ties: top-k by selection equals a full sort */
	enum { BIG = 5000 };
	static float bl[BIG], bp[BIG];
	static int32_t bo[BIG];
	uint32_t st = 3;
	for (int i = 0; i < BIG; i++) {
		st = st * 1664525u + 1013904223u;
		bl[i] = (float)((st >> 24) % 40) / 8.0f; /* 40 distinct values: ties everywhere */
	}
	int kk[] = {1, 7, 50, 333, 4999};
	for (int c = 0; c < 5; c++) {
		s = (gpt_sampling){kk[c], 1.0, 1.0, 1.0};
		int64_t kept = gpt_sample_probs(bl, BIG, &s, bp, bo);
		/* the kept ids: the kk largest logits, lower ids first among equals */
		int good = kept == kk[c], n = 0;
		for (int v = 39; v >= 0 && n < kk[c]; v--)
			for (int i = 0; i < BIG && n < kk[c]; i++)
				if (bl[i] == v / 8.0f) {
					good = good && bp[i] > 0;
					n++;
				}
		int nz = 0;
		for (int i = 0; i < BIG; i++)
			nz += bp[i] > 0;
		ok(good && nz == kk[c], "top_k %d of 5000 with ties: exactly the first %d by logit then id", kk[c], kk[c]);
	}
	return done_testing();
}
