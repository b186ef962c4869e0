/* Beam search for one prompt over the KV-cache decoder. (Part of lib/infer.) */
#include "infer/infer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct cand {
	double score;
	int64_t beam;
	int32_t tok;
} cand;

static int by_score(const void *a, const void *b)
{
	const cand *x = a, *y = b;
	if (x->score != y->score)
		return x->score > y->score ? -1 : 1;
	if (x->beam != y->beam)
		return x->beam < y->beam ? -1 : 1;
	return x->tok < y->tok ? -1 : x->tok > y->tok;
}

typedef struct beams {
	const gpt_gen_opts *o;
	gpt_gen_result *hyp; /* finished hypotheses, best first, at most num_beams */
	int64_t n_hyp;
} beams;

/* PaddleNLP's length normalisation (its BeamHypotheses, GNMT's): the
 * summed log-probability over ((len + 5) / 6)^length_penalty, len the
 * tokens generated without the end of text. */
static double norm(const gpt_gen_opts *o, double sum, int64_t len)
{
	return sum / pow((double)(len + 5) / 6.0, o->length_penalty);
}

/* Adds a hypothesis if it is among the num_beams best so far. */
static int add_hyp(beams *b, const int32_t *ids, int64_t n, double sum, int finished, gpt_err *err)
{
	double s = norm(b->o, sum, n);
	int64_t nb = b->o->num_beams, at = b->n_hyp;
	while (at > 0 && b->hyp[at - 1].score < s)
		at--;
	if (at >= nb)
		return 0;
	int32_t *copy = gpt_malloc((size_t)(n ? n : 1) * sizeof(int32_t), "hypothesis", err);
	if (!copy)
		return GPT_EINTERNAL;
	memcpy(copy, ids, (size_t)n * sizeof(int32_t));
	if (b->n_hyp == nb)
		free(b->hyp[--b->n_hyp].ids);
	memmove(b->hyp + at + 1, b->hyp + at, (size_t)(b->n_hyp - at) * sizeof *b->hyp);
	b->hyp[at] = (gpt_gen_result){0, 0, copy, n, finished, s};
	b->n_hyp++;
	return 0;
}

int gpt_beam_search(gpt_infer_model *m, const gpt_gen_opts *o, const int32_t *prompt,
		    int64_t len, gpt_gen_result *results, int64_t *n_results, gpt_err *err)
{
	int64_t V = m->shape.vocab_size, Vg = gpt_gen_vocab(o, V), nb = o->num_beams,
		maxd = o->max_dec_len;
	*n_results = 0;
	gpt_kv kv;
	int rc = gpt_kv_init(&kv, m, 2 * nb, len + maxd, err);
	if (rc)
		return rc;
	beams b = {o, gpt_calloc((size_t)nb + 1, sizeof(gpt_gen_result), "hypotheses", err), 0};
	float *logits = gpt_malloc((size_t)(nb * V) * sizeof(float), "logits", err);
	cand *c = gpt_malloc((size_t)(nb * V) * sizeof *c, "beam candidates", err);
	/* per beam: prompt + generated ids, two sets (running, next) */
	int32_t *ids = gpt_malloc((size_t)(2 * nb * (len + maxd)) * sizeof(int32_t), "beams", err);
	double *score = gpt_calloc((size_t)(2 * nb), sizeof *score, "beams", err);
	int64_t *slot = gpt_calloc((size_t)nb, sizeof *slot, "beams", err);
	int64_t *ntok = gpt_calloc((size_t)nb, sizeof *ntok, "beams", err);
	const int32_t **tok = gpt_calloc((size_t)nb, sizeof *tok, "beams", err);
	rc = b.hyp && logits && c && ids && score && slot && ntok && tok ? 0 : GPT_EINTERNAL;
	int64_t W = len + maxd, cur = 0, nrun = 1; /* running set: slots [cur*nb, cur*nb + nrun) */
	if (!rc) {
		memcpy(ids, prompt, (size_t)len * sizeof(int32_t));
		slot[0] = 0;
		tok[0] = prompt;
		ntok[0] = len;
		double t0 = gpt_now_s();
		rc = gpt_infer_forward(m, &kv, 1, slot, tok, ntok, 0, logits, err);
		gpt_gen_stats_prompt(o->stats, len, gpt_now_s() - t0);
	}
	for (int64_t g = 0; !rc && g < maxd && nrun > 0; g++) {
		/* candidates: every token of every running beam */
		int64_t nc = 0;
		for (int64_t j = 0; j < nrun; j++) {
			float *row = logits + j * V;
			const int32_t *bi = ids + (cur * nb + j) * W;
			gpt_repetition_penalty(row, Vg, bi, len + g, o->sampling.repetition_penalty);
			if (o->eot >= 0 && o->eot < Vg && g < o->min_dec_len)
				row[o->eot] = -INFINITY;
			float mx = row[gpt_argmax(row, Vg)];
			double s = 0;
			for (int64_t t = 0; t < Vg; t++)
				s += exp((double)row[t] - mx);
			double lse = mx + log(s);
			for (int64_t t = 0; t < Vg; t++)
				if (!(isinf(row[t]) && row[t] < 0))
					c[nc++] = (cand){score[cur * nb + j] + row[t] - lse, j, (int32_t)t};
		}
		qsort(c, (size_t)nc, sizeof *c, by_score);
		int64_t nxt = 1 - cur, nnew = 0;
		for (int64_t i = 0; i < nc && nnew < nb && !rc; i++) {
			const int32_t *src = ids + (cur * nb + c[i].beam) * W;
			if (c[i].tok == o->eot) {
				if (i < nb)
					rc = add_hyp(&b, src + len, g, c[i].score, 1, err);
				continue;
			}
			int32_t *dst = ids + (nxt * nb + nnew) * W;
			memcpy(dst, src, (size_t)(len + g) * sizeof(int32_t));
			dst[len + g] = c[i].tok;
			if (o->stop && o->stop(o->stop_ctx, dst + len, g + 1)) {
				/* a stop string ends the hypothesis as the end of text
				 * does, its token kept (the text is cut at output);
				 * not "finished", which the end of text alone is */
				if (i < nb)
					rc = add_hyp(&b, dst + len, g + 1, c[i].score, 0, err);
				continue;
			}
			score[nxt * nb + nnew] = c[i].score;
			rc = gpt_kv_copy(&kv, m, nxt * nb + nnew, cur * nb + c[i].beam, err);
			nnew++;
		}
		cur = nxt;
		nrun = nnew;
		if (rc)
			break;
		if (g + 1 == maxd) {
			for (int64_t j = 0; j < nrun && !rc; j++)
				rc = add_hyp(&b, ids + (cur * nb + j) * W + len, g + 1,
					     score[cur * nb + j], 0, err);
			break;
		}
		if (b.n_hyp >= nb) {
			if (o->early_stopping)
				break;
			/* the best any running beam can still reach: its sum only
			 * falls, its length (g + 1 now) grows up to max_dec_len */
			double best = -INFINITY;
			for (int64_t j = 0; j < nrun; j++) {
				int64_t L = o->length_penalty > 0 ? maxd : g + 1;
				double s = norm(o, score[cur * nb + j], L);
				if (s > best)
					best = s;
			}
			if (best <= b.hyp[b.n_hyp - 1].score)
				break;
		}
		for (int64_t j = 0; j < nrun; j++) {
			slot[j] = cur * nb + j;
			tok[j] = ids + (cur * nb + j) * W + len + g;
			ntok[j] = 1;
		}
		double t0 = gpt_now_s();
		if (nrun)
			rc = gpt_infer_forward(m, &kv, nrun, slot, tok, ntok, 0, logits, err);
		if (o->stats) {
			o->stats->generate_s += gpt_now_s() - t0;
			o->stats->generated_tokens += nrun;
		}
	}
	int64_t want = o->num_return_sequences < b.n_hyp ? o->num_return_sequences : b.n_hyp;
	for (int64_t i = 0; i < b.n_hyp; i++) {
		if (!rc && i < want) {
			results[i] = b.hyp[i];
			results[i].index = i;
		} else {
			free(b.hyp[i].ids);
		}
	}
	*n_results = rc ? 0 : want;
	free(b.hyp);
	free(logits);
	free(c);
	free(ids);
	free(score);
	free(slot);
	free(ntok);
	free(tok);
	gpt_kv_free(&kv, m);
	return rc;
}
