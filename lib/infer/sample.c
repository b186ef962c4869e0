/* Samplers on one row of logits: repetition penalty, temperature, top-k,
 * top-p, the draw, greedy choice. (Part of lib/infer.) */
#include "infer/infer.h"

#include "backend/philox.h"

#include <math.h>
#include <stdlib.h>

void gpt_repetition_penalty(float *logits, int64_t V, const int32_t *prev, int64_t n,
			    double penalty)
{
	if (penalty == 1.0)
		return;
	/* a token seen twice is penalised once */
	for (int64_t i = 0; i < n; i++) {
		int32_t t = prev[i];
		if (t < 0 || t >= V)
			continue;
		int seen = 0;
		for (int64_t j = 0; j < i && !seen; j++)
			seen = prev[j] == t;
		if (seen)
			continue;
		logits[t] = logits[t] > 0 ? (float)(logits[t] / penalty) : (float)(logits[t] * penalty);
	}
}

int32_t gpt_argmax(const float *logits, int64_t V)
{
	int32_t best = 0;
	for (int64_t i = 1; i < V; i++)
		if (logits[i] > logits[best])
			best = (int32_t)i;
	return best;
}

/* Probabilities descending, lower id first on ties. */
static int by_prob(const void *a, const void *b, void *ctx)
{
	const float *p = ctx;
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	if (p[x] != p[y])
		return p[x] > p[y] ? -1 : 1;
	return x < y ? -1 : x > y;
}

/* Rearranges a[0..n) so that a[0..k) are its k first elements in by_prob's
 * order (in any order among themselves): quickselect, O(n) on average, so
 * top-k over a 50257-token vocabulary does not sort it all every token. */
static void select_top(int32_t *a, int64_t n, int64_t k, const float *p)
{
	int64_t lo = 0, hi = n - 1;
	while (lo < hi) {
		int64_t mid = lo + (hi - lo) / 2;
		/* median of three as the pivot, moved to hi */
		if (by_prob(&a[mid], &a[lo], (void *)p) < 0) { int32_t t = a[mid]; a[mid] = a[lo]; a[lo] = t; }
		if (by_prob(&a[hi], &a[lo], (void *)p) < 0) { int32_t t = a[hi]; a[hi] = a[lo]; a[lo] = t; }
		if (by_prob(&a[mid], &a[hi], (void *)p) < 0) { int32_t t = a[mid]; a[mid] = a[hi]; a[hi] = t; }
		int32_t pivot = a[hi];
		int64_t st = lo;
		for (int64_t i = lo; i < hi; i++)
			if (by_prob(&a[i], &pivot, (void *)p) < 0) {
				int32_t t = a[i]; a[i] = a[st]; a[st] = t;
				st++;
			}
		a[hi] = a[st];
		a[st] = pivot;
		if (st == k - 1 || st == k)
			return;
		if (st < k)
			lo = st + 1;
		else
			hi = st - 1;
	}
}

int64_t gpt_sample_probs(const float *logits, int64_t V, const gpt_sampling *s, float *probs,
			 int32_t *order)
{
	double t = s->temperature > 0 ? s->temperature : 1.0;
	float mx = -INFINITY;
	for (int64_t i = 0; i < V; i++)
		if (logits[i] > mx)
			mx = logits[i];
	double sum = 0;
	for (int64_t i = 0; i < V; i++) {
		double e = isinf(logits[i]) && logits[i] < 0 ? 0.0 : exp(((double)logits[i] - mx) / t);
		probs[i] = (float)e;
		sum += e;
	}
	int64_t live = 0;
	for (int64_t i = 0; i < V; i++) {
		probs[i] = (float)(probs[i] / sum);
		if (probs[i] > 0)
			order[live++] = (int32_t)i;
	}
	if (live == 0) /* every logit -inf: nothing sensible to keep but the first */
		order[live++] = 0, probs[0] = 1;
	int64_t keep = live;
	if ((s->top_k > 0 && s->top_k < live) || s->top_p < 1.0) {
		if (s->top_k > 0 && s->top_k < live) {
			select_top(order, live, s->top_k, probs);
			keep = s->top_k;
		}
		qsort_r(order, (size_t)keep, sizeof *order, by_prob, probs);
		if (s->top_p < 1.0) {
			double before = 0;
			int64_t k = 0;
			while (k < keep && (k == 0 || before < s->top_p))
				before += probs[order[k++]];
			keep = k;
		}
	}
	double kept = 0;
	for (int64_t i = 0; i < keep; i++)
		kept += probs[order[i]];
	for (int64_t i = keep; i < live; i++)
		probs[order[i]] = 0;
	for (int64_t i = 0; i < keep; i++)
		probs[order[i]] = (float)(probs[order[i]] / kept);
	return keep;
}

int32_t gpt_sample_draw(const float *probs, int64_t V, double u)
{
	double c = 0;
	int32_t last = 0;
	for (int64_t i = 0; i < V; i++) {
		if (probs[i] <= 0)
			continue;
		c += probs[i];
		last = (int32_t)i;
		if (u < c)
			return last;
	}
	return last;
}

double gpt_sample_uniform(uint64_t seed, uint64_t sequence, uint64_t step)
{
	uint32_t r[4], ctr[4] = {(uint32_t)step, (uint32_t)(step >> 32), (uint32_t)sequence,
				 (uint32_t)(sequence >> 32)};
	uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32) ^ 0x6e667265u};
	gpt_philox4x32_10(r, ctr, key);
	/* 53 random bits */
	uint64_t bits = ((uint64_t)r[0] << 21) ^ (uint64_t)(r[1] >> 11);
	return (double)(bits & ((1ull << 53) - 1)) / 9007199254740992.0;
}
