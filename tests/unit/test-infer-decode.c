/* The KV-cache decoder against the training model's full forward pass:
 * logits, greedy decoding token for token, batching, seeded sampling,
 * perplexity, 16-bit storage. */
#include "infer-ref.h"
#include "tap.h"

#include <math.h>

static const gpt_model_shape shape = {
	.vocab_size = 257, .padded_vocab = 384, .max_pos = 48, .hidden = 32, .layers = 2, .heads = 4,
	.ffn = 128,
};

typedef struct collected {
	int64_t n;
	int32_t ids[16][64];
	int64_t len[16];
	int64_t prompt[16], index[16];
	int finished[16];
	double score[16];
} collected;

static int collect(void *ctx, const gpt_gen_result *r, gpt_err *err)
{
	collected *c = ctx;
	(void)err;
	if (c->n >= 16 || r->n > 64)
		return gpt_err_set(err, GPT_EINTERNAL, "too many results");
	memcpy(c->ids[c->n], r->ids, (size_t)r->n * sizeof(int32_t));
	c->len[c->n] = r->n;
	c->prompt[c->n] = r->prompt;
	c->index[c->n] = r->index;
	c->finished[c->n] = r->finished;
	c->score[c->n] = r->score;
	c->n++;
	return 0;
}

/* The mean log-probability of ids[0..n) after the prompt, and of the end
 * of text eot after them if finished, by one full forward pass. */
static double mean_logp(ref_model *r, const int32_t *prompt, int64_t plen, const int32_t *ids,
			int64_t n, int finished, int32_t eot)
{
	gpt_err err = {0};
	int32_t full[64];
	memcpy(full, prompt, (size_t)plen * sizeof(int32_t));
	memcpy(full + plen, ids, (size_t)n * sizeof(int32_t));
	ref_forward(r, full, plen + n, &err);
	double sum = 0;
	int64_t k = n + (finished != 0);
	for (int64_t i = 0; i < k; i++) {
		const float *row = r->logits + (plen - 1 + i) * r->s.padded_vocab;
		int32_t t = i < n ? ids[i] : eot;
		double mx = row[gpt_argmax(row, r->s.vocab_size)], z = 0;
		for (int64_t v = 0; v < r->s.vocab_size; v++)
			z += exp(row[v] - mx);
		sum += row[t] - mx - log(z);
	}
	return k ? sum / (double)k : 0.0;
}

static gpt_gen_opts greedy_opts(int64_t max_dec)
{
	gpt_gen_opts o = {0};
	o.strategy = GPT_DECODE_GREEDY;
	o.sampling = (gpt_sampling){0, 1.0, 1.0, 1.0};
	o.max_dec_len = max_dec;
	o.num_return_sequences = 1;
	o.num_beams = 1;
	o.eot = 256;
	o.batch = 8;
	return o;
}

/* The reference weights with one NaN in h.1.mlp.fc.weight. */
static int bad_read(void *ctx, const gpt_param_info *p, float *dst, gpt_err *err)
{
	int rc = ref_read(ctx, p, dst, err);
	if (!rc && strcmp(p->name, "h.1.mlp.fc.weight") == 0)
		dst[p->numel / 2] = NAN;
	return rc;
}

int main(void)
{
	gpt_err err = {0};
	ref_model r;
	int rc = ref_init(&r, &shape, 7, 0.4, &err);
	ok(rc == 0, "reference model%s", rc ? err.msg : "");
	gpt_infer_model m;
	rc = gpt_infer_model_init(&m, &shape, GPT_DTYPE_F32, 1, ref_read, &r, &err);
	ok(rc == 0, "decoder loads the weights%s", rc ? err.msg : "");

	/* logits: chunks of 5, 1 and the rest through the cache equal one full forward */
	int32_t seq[48];
	for (int i = 0; i < 48; i++)
		seq[i] = (i * 37 + 11) % 256;
	ref_forward(&r, seq, 48, &err);
	gpt_kv kv;
	is_int(gpt_kv_init(&kv, &m, 2, 48, &err), 0, "kv cache");
	float *lg = malloc((size_t)(48 * 257) * sizeof(float));
	int64_t slot = 1, cuts[4] = {0, 5, 6, 48};
	double worst = 0;
	for (int c = 0; c < 3; c++) {
		int64_t k = cuts[c + 1] - cuts[c];
		const int32_t *tp = seq + cuts[c];
		rc = gpt_infer_forward(&m, &kv, 1, &slot, &tp, &k, 1, lg + cuts[c] * 257, &err);
		if (rc)
			break;
	}
	is_int(rc, 0, "forward in three chunks%s", rc ? err.msg : "");
	for (int t = 0; t < 48; t++)
		for (int v = 0; v < 257; v++) {
			double d = fabs(lg[t * 257 + v] - r.logits[t * 384 + v]);
			if (d > worst)
				worst = d;
		}
	ok(worst < 1e-4, "logits equal the training forward's (max |diff| %.2g)", worst);
	is_int(kv.len[1], 48, "the slot holds 48 positions");
	int64_t one = 1;
	const int32_t *tp = seq;
	is_int(gpt_infer_forward(&m, &kv, 1, &slot, &tp, &one, 0, lg, &err), GPT_EUSAGE,
	       "a token past the context is refused");
	ok(strstr(err.msg, "context") != NULL, "message: %s", err.msg);
	gpt_kv_free(&kv, &m);

	/* greedy with the cache == greedy by full forward passes */
	int32_t p0[] = {72, 101, 108, 108, 111}, p1[] = {3, 200}, p2[] = {33, 34, 35, 36, 37, 38, 39, 40, 41};
	const int32_t *prompts[] = {p0, p1, p2};
	int64_t lens[] = {5, 2, 9};
	gpt_gen_opts o = greedy_opts(30);
	collected got = {0};
	rc = gpt_generate(&m, &o, 3, prompts, lens, collect, &got, &err);
	is_int(rc, 0, "greedy generation of three prompts in one batch%s", rc ? err.msg : "");
	is_int(got.n, 3, "three results");
	for (int p = 0; p < 3; p++) {
		int32_t want[64];
		int64_t nw;
		ref_greedy(&r, prompts[p], lens[p], 30, 256, want, &nw, &err);
		int same = got.len[p] == nw && memcmp(got.ids[p], want, (size_t)nw * 4) == 0;
		ok(same && got.prompt[p] == p, "prompt %d: %lld greedy tokens equal full forward passes", p,
		   (long long)nw);
	}
	/* the score: the mean log-probability of the tokens chosen (the end of
	 * text included), as FleetX's and PaddleNLP's greedy search reports it */
	for (int p = 0; p < 3; p++) {
		double want = mean_logp(&r, prompts[p], lens[p], got.ids[p], got.len[p], got.finished[p], 256);
		ok(!got.finished[p] && fabs(got.score[p] - want) < 1e-4,
		   "prompt %d: score %.6f is the mean log-probability %.6f of its %lld tokens", p,
		   got.score[p], want, (long long)got.len[p]);
	}
	/* the end of text counts: the 4th greedy token made the end of text */
	o.eot = got.ids[0][3];
	collected ge = {0};
	rc = gpt_generate(&m, &o, 1, prompts, lens, collect, &ge, &err);
	ok(rc == 0 && ge.n == 1 && ge.finished[0] && ge.len[0] <= 3 &&
	   fabs(ge.score[0] - mean_logp(&r, p0, 5, ge.ids[0], ge.len[0], 1, o.eot)) < 1e-4,
	   "finished after %lld tokens: the end of text is in the mean (score %.6f)",
	   (long long)ge.len[0], ge.score[0]);
	o.eot = 256;
	/* the same one at a time */
	collected alone = {0};
	o.batch = 1;
	rc = gpt_generate(&m, &o, 3, prompts, lens, collect, &alone, &err);
	ok(rc == 0 && alone.n == 3 && memcmp(alone.ids, got.ids, sizeof got.ids) == 0,
	   "batch 1 gives the same tokens as batch 8");

	/* sampling: seeded runs repeat, the batch does not matter, seeds differ */
	o = greedy_opts(20);
	o.strategy = GPT_DECODE_SAMPLING;
	o.sampling = (gpt_sampling){40, 0.9, 0.8, 1.0};
	o.num_return_sequences = 2;
	o.seed = 1234;
	collected s1 = {0}, s2 = {0}, s3 = {0};
	rc = gpt_generate(&m, &o, 3, prompts, lens, collect, &s1, &err);
	is_int(rc, 0, "sampling, 2 sequences per prompt%s", rc ? err.msg : "");
	is_int(s1.n, 6, "six results");
	ok(s1.prompt[1] == 0 && s1.index[1] == 1 && s1.prompt[2] == 1, "results in prompt, index order");
	o.batch = 2;
	gpt_generate(&m, &o, 3, prompts, lens, collect, &s2, &err);
	ok(memcmp(s1.ids, s2.ids, sizeof s1.ids) == 0 && memcmp(s1.len, s2.len, sizeof s1.len) == 0,
	   "the same seed gives the same samples in batches of 2");
	o.seed = 99;
	gpt_generate(&m, &o, 3, prompts, lens, collect, &s3, &err);
	ok(memcmp(s1.ids, s3.ids, sizeof s1.ids) != 0, "another seed gives other samples");
	ok(memcmp(s1.ids[0], s1.ids[1], 20 * 4) != 0, "two sequences of one prompt differ");

	/* a model wider than its tokenizer (FleetX's 50304 over GPT-2's 50257):
	 * only ids below o.vocab are generated; here the limit is the first id
	 * greedy decoding takes without it */
	o = greedy_opts(10);
	int32_t lim = got.ids[0][0];
	ok(lim > 1, "greedy's first token %d leaves room below it", (int)lim);
	o.vocab = lim;
	collected gv = {0};
	rc = gpt_generate(&m, &o, 3, prompts, lens, collect, &gv, &err);
	int below = rc == 0 && gv.n == 3;
	for (int64_t i = 0; below && i < gv.n; i++)
		for (int64_t t = 0; t < gv.len[i]; t++)
			below = below && gv.ids[i][t] < lim;
	ok(below, "greedy with vocab %d: every id below it%s", (int)lim, rc ? err.msg : "");
	ref_forward(&r, p0, 5, &err);
	ok(below && gv.ids[0][0] == gpt_argmax(r.logits + 4 * 384, lim),
	   "the first is the best of the ids below it");
	o.strategy = GPT_DECODE_SAMPLING;
	o.sampling = (gpt_sampling){0, 1.0, 1e6, 1.0}; /* near uniform: without the limit most ids pass it */
	o.num_return_sequences = 2;
	collected sv = {0};
	rc = gpt_generate(&m, &o, 3, prompts, lens, collect, &sv, &err);
	below = rc == 0 && sv.n == 6;
	for (int64_t i = 0; below && i < sv.n; i++)
		for (int64_t t = 0; t < sv.len[i]; t++)
			below = below && sv.ids[i][t] < lim;
	ok(below, "sampling with vocab %d: every id below it%s", (int)lim, rc ? err.msg : "");
	o = greedy_opts(10);
	o.vocab = lim;
	o.strategy = GPT_DECODE_BEAM;
	o.num_beams = 3;
	o.num_return_sequences = 3;
	o.length_penalty = 1.0;
	gpt_gen_result br[3];
	int64_t nbr = 0;
	rc = gpt_beam_search(&m, &o, p0, 5, br, &nbr, &err);
	below = rc == 0 && nbr == 3;
	for (int64_t i = 0; i < nbr; i++) {
		for (int64_t t = 0; t < br[i].n; t++)
			below = below && br[i].ids[t] < lim;
		free(br[i].ids);
	}
	ok(below, "beam search with vocab %d: every id below it%s", (int)lim, rc ? err.msg : "");

	/* errors: a prompt that leaves no room, a too long max_dec_len */
	o = greedy_opts(45);
	is_int(gpt_generate(&m, &o, 3, prompts, lens, collect, &got, &err), GPT_EUSAGE,
	       "prompt + max_dec_len past the context is refused");
	ok(strstr(err.msg, "prompt 1: 5 tokens") && strstr(err.msg, "--truncate"), "message: %s", err.msg);
	o = greedy_opts(48);
	is_int(gpt_generate(&m, &o, 1, prompts, lens, collect, &got, &err), GPT_EUSAGE,
	       "max_dec_len of the whole context is refused");

	/* perplexity equals the training loss on one window */
	double nll = 0;
	int64_t cnt = 0;
	rc = gpt_perplexity(&m, seq, 48, &nll, &cnt, &err);
	int32_t tgt[48];
	for (int i = 0; i < 47; i++)
		tgt[i] = seq[i + 1];
	tgt[47] = -1;
	double ls = 0;
	int64_t nt = 0;
	gpt_model_forward(&r.m, seq, tgt, 0, 0, 0, NULL, &ls, &nt, &err);
	ok(rc == 0 && cnt == 47 && nt == 47 && fabs(nll - ls) < 1e-3 * ls,
	   "perplexity: nll %.5f over %lld tokens, training loss %.5f over %lld", nll, (long long)cnt,
	   ls, (long long)nt);
	/* longer than the context: windows overlap, every token counted once */
	int32_t longseq[130];
	for (int i = 0; i < 130; i++)
		longseq[i] = (i * 53 + 7) % 256;
	nll = 0;
	cnt = 0;
	rc = gpt_perplexity(&m, longseq, 130, &nll, &cnt, &err);
	ok(rc == 0 && cnt == 129, "130 tokens: 129 predictions over sliding windows (%lld)", (long long)cnt);

	/* bf16 storage: runs and mostly agrees with fp32 */
	gpt_infer_model mb;
	rc = gpt_infer_model_init(&mb, &shape, GPT_DTYPE_BF16, 1, ref_read, &r, &err);
	collected gb = {0};
	o = greedy_opts(10);
	if (!rc)
		rc = gpt_generate(&mb, &o, 3, prompts, lens, collect, &gb, &err);
	ok(rc == 0 && gb.n == 3, "bf16 weights generate%s", rc ? err.msg : "");
	gpt_infer_model_free(&mb);

	/* a NaN or Inf weight is refused at load (found by fuzzing: int8 had no value for it) */
	for (int k = 0; k < 2; k++) {
		gpt_infer_model mn;
		rc = gpt_infer_model_init(&mn, &shape, k ? GPT_DTYPE_I8 : GPT_DTYPE_F32, 1, bad_read, &r,
					  &err);
		ok(rc == GPT_EDATA && strstr(err.msg, "h.1.mlp.fc.weight") && strstr(err.msg, "finite"),
		   "a %s weight is refused: %s", k ? "NaN int8" : "NaN fp32", err.msg);
		if (!rc)
			gpt_infer_model_free(&mn);
	}

	free(lg);
	gpt_infer_model_free(&m);
	ref_free(&r);
	return done_testing();
}
