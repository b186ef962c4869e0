/* Beam search on a model small enough to enumerate every continuation: the
 * best beam is the best-scoring sequence, for several length penalties. */
#include "infer-ref.h"
#include "tap.h"

#include <math.h>

/* 5 tokens, 4 the end of text */
static const gpt_model_shape shape = {
	.vocab_size = 5, .padded_vocab = 128, .max_pos = 8, .hidden = 16, .layers = 1, .heads = 2,
	.ffn = 64,
};
#define EOT 4
#define MAXD 3

typedef struct best {
	double score;
	int32_t ids[MAXD];
	int64_t n;
} best;

/* log-softmax of row at t, from the reference model's logits */
static double ref_logp(ref_model *r, int64_t pos, int32_t t)
{
	const float *row = r->logits + pos * r->s.padded_vocab;
	double mx = row[gpt_argmax(row, 5)], z = 0;
	for (int i = 0; i < 5; i++)
		z += exp(row[i] - mx);
	return row[t] - mx - log(z);
}

/* Every continuation of up to MAXD tokens, by full forward passes. */
static void enumerate(ref_model *r, int32_t *seq, int64_t plen, int64_t g, double sum, double lp,
		      best *b)
{
	gpt_err err = {0};
	ref_forward(r, seq, plen + g, &err);
	double lps[5];
	for (int t = 0; t < 5; t++)
		lps[t] = ref_logp(r, plen + g - 1, t);
	for (int t = 0; t < 5; t++) {
		double s = sum + lps[t];
		if (t == EOT || g + 1 == MAXD) {
			/* PaddleNLP's BeamHypotheses: over ((n + 5) / 6)^lp, n the
			 * tokens generated without the end of text */
			int64_t n = t == EOT ? g : g + 1;
			double norm = s / pow((double)(n + 5) / 6.0, lp);
			if (norm > b->score) {
				b->score = norm;
				memcpy(b->ids, seq + plen, (size_t)g * sizeof(int32_t));
				if (t != EOT)
					b->ids[g] = t;
				b->n = n;
			}
			if (t == EOT)
				continue;
		}
		if (g + 1 < MAXD) {
			seq[plen + g] = t;
			enumerate(r, seq, plen, g + 1, s, lp, b);
		}
	}
}

int main(void)
{
	gpt_err err = {0};
	ref_model r;
	int rc = ref_init(&r, &shape, 11, 0.1, &err);
	ok(rc == 0, "reference model");
	gpt_infer_model m;
	rc = gpt_infer_model_init(&m, &shape, GPT_DTYPE_F32, 1, ref_read, &r, &err);
	ok(rc == 0, "decoder");
	const double lps[] = {1.0, 0.0, 2.0, -0.5};
	const int32_t prompts[3][2] = {{1, 2}, {0, 0}, {3, 1}};
	for (int pi = 0; pi < 3; pi++)
		for (size_t li = 0; li < sizeof lps / sizeof *lps; li++) {
			int32_t seq[8] = {prompts[pi][0], prompts[pi][1]};
			best want = {-INFINITY, {0}, 0};
			enumerate(&r, seq, 2, 0, 0, lps[li], &want);
			gpt_gen_opts o = {0};
			o.strategy = GPT_DECODE_BEAM;
			o.sampling = (gpt_sampling){0, 1.0, 1.0, 1.0};
			o.max_dec_len = MAXD;
			o.num_beams = 80; /* 4^3 running continuations and more: exhaustive */
			o.num_return_sequences = 2;
			o.length_penalty = lps[li];
			o.eot = EOT;
			gpt_gen_result res[2];
			int64_t nr = 0;
			rc = gpt_beam_search(&m, &o, prompts[pi], 2, res, &nr, &err);
			int same = rc == 0 && nr == 2 && res[0].n == want.n &&
				   memcmp(res[0].ids, want.ids, (size_t)want.n * sizeof(int32_t)) == 0 &&
				   fabs(res[0].score - want.score) < 1e-4 && res[1].score <= res[0].score;
			ok(same, "prompt %d, length_penalty %g: best beam (%lld tokens, %.5f) = enumeration (%lld tokens, %.5f)",
			   pi, lps[li], (long long)(nr ? res[0].n : -1), nr ? res[0].score : 0.0,
			   (long long)want.n, want.score);
			for (int64_t i = 0; i < nr; i++)
				free(res[i].ids);
		}
	/* one beam is greedy */
	gpt_gen_opts o = {0};
	o.strategy = GPT_DECODE_BEAM;
	o.sampling = (gpt_sampling){0, 1.0, 1.0, 1.0};
	o.max_dec_len = 5;
	o.num_beams = 1;
	o.num_return_sequences = 1;
	o.length_penalty = 1.0;
	o.eot = EOT;
	gpt_gen_result res[1];
	int64_t nr = 0;
	int32_t want[8];
	int64_t nw = 0;
	rc = gpt_beam_search(&m, &o, prompts[0], 2, res, &nr, &err);
	ref_greedy(&r, prompts[0], 2, 5, EOT, want, &nw, &err);
	ok(rc == 0 && nr == 1 && res[0].n == nw && memcmp(res[0].ids, want, (size_t)nw * 4) == 0,
	   "num_beams 1 gives the greedy tokens (%lld)", (long long)nw);
	if (nr)
		free(res[0].ids);
	/* early stopping ends with num_beams hypotheses, the best of them first */
	o.num_beams = 3;
	o.num_return_sequences = 3;
	o.early_stopping = 1;
	gpt_gen_result r3[3];
	rc = gpt_beam_search(&m, &o, prompts[1], 2, r3, &nr, &err);
	ok(rc == 0 && nr == 3 && r3[0].score >= r3[1].score && r3[1].score >= r3[2].score,
	   "early stopping: three hypotheses, best first");
	for (int64_t i = 0; i < nr; i++)
		free(r3[i].ids);
	gpt_infer_model_free(&m);
	ref_free(&r);
	return done_testing();
}
