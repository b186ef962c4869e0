/* Greedy search and sampling over a batch of prompts with a KV cache, and
 * the Generation section of the config. (Part of lib/infer.) */
#include "infer/infer.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether the user set key k: in the -c file (any file but the model's own
 * config.yaml, whose values have origin model_where) or with -o. */
static int user_given(const gpt_config *cfg, int k, const char *model_where)
{
	const gpt_config_origin *o = &cfg->origin[k];
	return o->src == GPT_SRC_OVERRIDE || o->src == GPT_SRC_FLAG ||
	       (o->src == GPT_SRC_FILE && !(model_where && o->where == model_where));
}

int gpt_gen_refuse(const gpt_config *cfg, const char *model_where, const char *key,
		   const char *alt, gpt_err *err, const char *fmt, ...)
{
	char msg[GPT_ERR_MSG_MAX];
	int k = gpt_config_key_find(key), ka = alt ? gpt_config_key_find(alt) : -1;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (k < 0) /* not a key: a programming error, still a message */
		return gpt_err_set(err, GPT_EINTERNAL, "%s: %s", key, msg);
	char where[512];
	const char *from = cfg->origin[k].src == GPT_SRC_FILE ? "the model's config.yaml" : "the default";
	int at = user_given(cfg, k, model_where) ? k
		 : ka >= 0 && user_given(cfg, ka, model_where) ? ka /* what the user wrote */
								 : -1;
	if (at < 0)
		return gpt_err_set(err, GPT_EUSAGE, "%s (%s): %s%s%s%s", key, from, msg,
				   strncmp(key, "Generation.", 11) == 0 ? "; give -o " : "",
				   strncmp(key, "Generation.", 11) == 0 ? key : "",
				   strncmp(key, "Generation.", 11) == 0 ? "=N" : "");
	/* as gpt-train's configuration errors: file:line:col and 65, or the -o and 64 */
	if (at == k)
		return gpt_config_refuse(cfg, key, err, "%s", msg);
	gpt_config_where(cfg, at, where, sizeof where);
	return gpt_err_set(err, gpt_config_where_code(cfg, at), "%s: %s (%s): %s", where, key, from,
			   msg);
}

int gpt_gen_opts_from_config(gpt_gen_opts *o, const gpt_config *cfg, const char *model_where,
			     int64_t max_pos, gpt_err *err)
{
	memset(o, 0, sizeof *o);
	const char *ds = cfg->generation.decode_strategy ? cfg->generation.decode_strategy : "sampling";
	if (strcmp(ds, "sampling") == 0)
		o->strategy = GPT_DECODE_SAMPLING;
	else if (strcmp(ds, "greedy_search") == 0)
		o->strategy = GPT_DECODE_GREEDY;
	else if (strcmp(ds, "beam_search") == 0)
		o->strategy = GPT_DECODE_BEAM;
	else
		return gpt_gen_refuse(cfg, model_where, "Generation.decode_strategy", NULL, err,
				      "expected sampling, greedy_search or beam_search, found '%s'", ds);
	o->sampling.top_k = cfg->generation.top_k;
	o->sampling.top_p = cfg->generation.top_p;
	o->sampling.temperature = cfg->generation.temperature;
	o->sampling.repetition_penalty = cfg->generation.repetition_penalty;
	o->min_dec_len = cfg->generation.min_dec_len;
	o->max_dec_len = cfg->generation.max_dec_len;
	o->num_return_sequences = cfg->generation.num_return_sequences;
	o->num_beams = cfg->generation.num_beams;
	o->length_penalty = cfg->generation.length_penalty;
	o->early_stopping = cfg->generation.early_stopping;
	o->seed = (uint64_t)cfg->generation.seed;
	o->eot = -1;
	o->batch = 8;
	/* as gpt-train's configuration words them: a setting the strategy
	 * would ignore, or one that only repeats the same sequence, is an error */
	if (max_pos > 0 && (o->max_dec_len < 1 || o->max_dec_len >= max_pos))
		return gpt_gen_refuse(cfg, model_where, "Generation.max_dec_len", NULL, err,
				      "expected 1 to %lld, below the model's context of %lld positions, "
				      "found %lld", (long long)max_pos - 1, (long long)max_pos,
				      (long long)o->max_dec_len);
	if (o->min_dec_len > o->max_dec_len)
		return gpt_gen_refuse(cfg, model_where, "Generation.min_dec_len",
				      "Generation.max_dec_len", err,
				      "expected at most Generation.max_dec_len %lld, found %lld",
				      (long long)o->max_dec_len, (long long)o->min_dec_len);
	if (o->strategy != GPT_DECODE_BEAM && o->num_beams > 1)
		return gpt_gen_refuse(cfg, model_where, "Generation.num_beams",
				      "Generation.decode_strategy", err,
				      "expected 1 unless Generation.decode_strategy is beam_search (it is "
				      "%s), found %lld", ds, (long long)o->num_beams);
	if (o->strategy == GPT_DECODE_GREEDY && o->num_return_sequences > 1)
		return gpt_gen_refuse(cfg, model_where, "Generation.num_return_sequences",
				      "Generation.decode_strategy", err,
				      "expected 1 with greedy_search (every sequence would be the same), "
				      "found %lld", (long long)o->num_return_sequences);
	if (o->strategy == GPT_DECODE_BEAM && o->num_return_sequences > o->num_beams)
		return gpt_gen_refuse(cfg, model_where, "Generation.num_return_sequences",
				      "Generation.num_beams", err,
				      "expected at most Generation.num_beams %lld with beam_search, found "
				      "%lld", (long long)o->num_beams, (long long)o->num_return_sequences);
	return 0;
}

/* log softmax of logits at index t */
static double log_prob(const float *logits, int64_t V, int32_t t)
{
	float mx = logits[gpt_argmax(logits, V)];
	double s = 0;
	for (int64_t i = 0; i < V; i++)
		s += exp((double)logits[i] - mx);
	return (double)logits[t] - mx - log(s);
}

typedef struct seq {
	int64_t prompt, index, id; /* id: the global sequence number, keys the draws */
	int32_t *ids;              /* prompt + generated */
	int64_t n_prompt, n;
	int done, finished;
	double score;
} seq;

/* Chooses the next token of sequence q from its logits row (modified). */
static int32_t next_token(const gpt_gen_opts *o, seq *q, float *row, int64_t V, float *probs,
			  int32_t *order)
{
	int64_t gen = q->n - q->n_prompt;
	gpt_repetition_penalty(row, V, q->ids, q->n, o->sampling.repetition_penalty);
	if (o->eot >= 0 && o->eot < V && gen < o->min_dec_len)
		row[o->eot] = -INFINITY;
	int32_t t;
	if (o->strategy == GPT_DECODE_GREEDY) {
		t = gpt_argmax(row, V);
	} else {
		gpt_sample_probs(row, V, &o->sampling, probs, order);
		t = gpt_sample_draw(probs, V, gpt_sample_uniform(o->seed, (uint64_t)q->id, (uint64_t)gen));
	}
	q->score += log_prob(row, V, t);
	return t;
}

void gpt_gen_stats_prompt(gpt_gen_stats *s, int64_t tokens, double secs)
{
	if (!s)
		return;
	if (s->prompt_passes++ == 0) {
		s->first_prompt_tokens = tokens;
		s->first_prompt_s = secs;
	}
	s->prompt_tokens += tokens;
	s->prompt_s += secs;
}

/* The ids a generation may choose from: the first `vocab` of the model's. */
int64_t gpt_gen_vocab(const gpt_gen_opts *o, int64_t V)
{
	return o->vocab > 0 && o->vocab < V ? o->vocab : V;
}

static int run_group(gpt_infer_model *m, const gpt_gen_opts *o, seq *sq, int64_t ns,
		     gpt_gen_emit_fn emit, void *ctx, gpt_err *err)
{
	int64_t V = m->shape.vocab_size, Vg = gpt_gen_vocab(o, V), maxT = 0,
		nrs = o->num_return_sequences;
	for (int64_t i = 0; i < ns; i++)
		if (sq[i].n_prompt + o->max_dec_len > maxT)
			maxT = sq[i].n_prompt + o->max_dec_len;
	gpt_kv kv;
	int rc = gpt_kv_init(&kv, m, ns, maxT, err);
	if (rc)
		return rc;
	int64_t np = ns / nrs;
	int64_t *slot = gpt_calloc((size_t)ns, sizeof *slot, "generation", err);
	int64_t *ntok = gpt_calloc((size_t)ns, sizeof *ntok, "generation", err);
	int64_t *who = gpt_calloc((size_t)ns, sizeof *who, "generation", err);
	const int32_t **tok = gpt_calloc((size_t)ns, sizeof *tok, "generation", err);
	float *logits = gpt_malloc((size_t)(ns * V) * sizeof(float), "logits", err);
	float *probs = gpt_malloc((size_t)V * sizeof(float), "probabilities", err);
	int32_t *order = gpt_malloc((size_t)V * sizeof(int32_t), "sampling", err);
	rc = slot && ntok && who && tok && logits && probs && order ? 0 : GPT_EINTERNAL;
	/* each prompt once, then its cache and logits copied to its other sequences */
	for (int64_t p = 0; !rc && p < np; p++) {
		slot[p] = p * nrs;
		tok[p] = sq[p * nrs].ids;
		ntok[p] = sq[p * nrs].n_prompt;
	}
	double t0 = gpt_now_s();
	if (!rc)
		rc = gpt_infer_forward(m, &kv, np, slot, tok, ntok, 0, logits, err);
	if (o->stats) {
		int64_t n = 0;
		for (int64_t p = 0; p < np; p++)
			n += ntok[p];
		gpt_gen_stats_prompt(o->stats, n, gpt_now_s() - t0);
	}
	for (int64_t p = np - 1; !rc && p >= 0; p--)
		for (int64_t r = nrs - 1; r >= 0 && !rc; r--) {
			memmove(logits + (p * nrs + r) * V, logits + p * V, (size_t)V * sizeof(float));
			rc = gpt_kv_copy(&kv, m, p * nrs + r, p * nrs, err);
		}
	int64_t active = ns;
	for (int64_t i = 0; i < ns; i++)
		who[i] = i;
	while (!rc && active > 0) {
		int64_t k = 0;
		for (int64_t a = 0; a < active; a++) {
			seq *q = &sq[who[a]];
			int32_t t = next_token(o, q, logits + a * V, Vg, probs, order);
			if (t == o->eot) {
				q->done = q->finished = 1;
				continue;
			}
			q->ids[q->n++] = t;
			if (q->n - q->n_prompt >= o->max_dec_len ||
			    (o->stop && o->stop(o->stop_ctx, q->ids + q->n_prompt, q->n - q->n_prompt))) {
				q->done = 1;
				continue;
			}
			who[k] = who[a];
			slot[k] = who[a];
			tok[k] = q->ids + q->n - 1;
			ntok[k] = 1;
			k++;
		}
		active = k;
		t0 = gpt_now_s();
		if (active)
			rc = gpt_infer_forward(m, &kv, active, slot, tok, ntok, 0, logits, err);
		if (o->stats) {
			o->stats->generate_s += gpt_now_s() - t0;
			o->stats->generated_tokens += active;
		}
	}
	for (int64_t i = 0; !rc && i < ns; i++) {
		/* the mean log-probability of the tokens chosen, the end of text
		 * included, as FleetX's and PaddleNLP's greedy and sampling
		 * report it (their update_scores_for_generation) */
		int64_t gen = sq[i].n - sq[i].n_prompt, scored = gen + sq[i].finished;
		gpt_gen_result r = {sq[i].prompt, sq[i].index, sq[i].ids + sq[i].n_prompt, gen,
				    sq[i].finished, scored ? sq[i].score / (double)scored : 0.0};
		rc = emit(ctx, &r, err);
	}
	free(slot);
	free(ntok);
	free(who);
	free(tok);
	free(logits);
	free(probs);
	free(order);
	gpt_kv_free(&kv, m);
	return rc;
}

static int check_prompts(const gpt_infer_model *m, const gpt_gen_opts *o, int64_t n,
			 const int64_t *len, gpt_err *err)
{
	if (o->max_dec_len < 1 || o->max_dec_len >= m->shape.max_pos)
		return gpt_err_set(err, GPT_EUSAGE,
				   "Generation.max_dec_len %lld: expected 1 to %lld, below the model's "
				   "context of %lld positions; give -o Generation.max_dec_len=N",
				   (long long)o->max_dec_len, (long long)m->shape.max_pos - 1,
				   (long long)m->shape.max_pos);
	for (int64_t i = 0; i < n; i++) {
		if (len[i] < 1)
			return gpt_err_set(err, GPT_EUSAGE, "prompt %lld: empty; give at least one token",
					   (long long)i + 1);
		if (len[i] + o->max_dec_len > m->shape.max_pos)
			return gpt_err_set(err, GPT_EUSAGE,
					   "prompt %lld: %lld tokens + max_dec_len %lld pass the model's "
					   "context of %lld positions; shorten it, lower "
					   "Generation.max_dec_len or use --truncate",
					   (long long)i + 1, (long long)len[i], (long long)o->max_dec_len,
					   (long long)m->shape.max_pos);
	}
	return 0;
}

int gpt_generate(gpt_infer_model *m, const gpt_gen_opts *o, int64_t n,
		 const int32_t *const *prompt, const int64_t *len, gpt_gen_emit_fn emit, void *ctx,
		 gpt_err *err)
{
	int rc = check_prompts(m, o, n, len, err);
	if (rc)
		return rc;
	if (o->strategy == GPT_DECODE_BEAM) {
		gpt_gen_result *res = gpt_calloc((size_t)o->num_beams, sizeof *res, "beams", err);
		if (!res)
			return GPT_EINTERNAL;
		for (int64_t p = 0; !rc && p < n; p++) {
			int64_t nr = 0;
			rc = gpt_beam_search(m, o, prompt[p], len[p], res, &nr, err);
			for (int64_t i = 0; i < nr; i++) {
				res[i].prompt = p;
				if (!rc)
					rc = emit(ctx, &res[i], err);
				free(res[i].ids);
			}
		}
		free(res);
		return rc;
	}
	int64_t nrs = o->num_return_sequences < 1 ? 1 : o->num_return_sequences;
	int64_t per = o->batch / nrs < 1 ? 1 : o->batch / nrs; /* prompts per group */
	seq *sq = gpt_calloc((size_t)(per * nrs), sizeof *sq, "sequences", err);
	if (!sq)
		return GPT_EINTERNAL;
	for (int64_t p0 = 0; !rc && p0 < n; p0 += per) {
		int64_t np = n - p0 < per ? n - p0 : per, ns = 0;
		for (int64_t p = p0; !rc && p < p0 + np; p++)
			for (int64_t r = 0; r < nrs; r++) {
				seq *q = &sq[ns++];
				memset(q, 0, sizeof *q);
				q->prompt = p;
				q->index = r;
				q->id = p * nrs + r;
				q->n_prompt = q->n = len[p];
				q->ids = gpt_malloc((size_t)(len[p] + o->max_dec_len) * sizeof(int32_t),
						    "sequence", err);
				if (!q->ids) {
					rc = GPT_EINTERNAL;
					break;
				}
				memcpy(q->ids, prompt[p], (size_t)len[p] * sizeof(int32_t));
			}
		if (!rc)
			rc = run_group(m, o, sq, ns, emit, ctx, err);
		for (int64_t i = 0; i < ns; i++)
			free(sq[i].ids);
	}
	free(sq);
	return rc;
}
