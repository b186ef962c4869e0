/* Deriving what the configuration leaves out (world size, the free parallel
 * degree, batch sizes, accumulation, FFN size, padded vocabulary, precision
 * level) and checking that everything fits together. Each message names the
 * keys, their numbers and where the blamed key was set. */
#include "config/config.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

#define LIMIT (INT64_C(1) << 53)

static int kid(const char *name)
{
	return gpt_config_key_find(name);
}

/* Blames key k. When k was not given but the related key alt was, the
 * message points at alt's place, since that is what the user wrote. */
static int fail(const gpt_config *cfg, int k, int alt, gpt_err *err, const char *fmt, ...)
	GPT_PRINTF(5, 6);
static int fail(const gpt_config *cfg, int k, int alt, gpt_err *err, const char *fmt, ...)
{
	char where[512], msg[GPT_ERR_MSG_MAX];
	int n, at = k;
	if (!gpt_config_given(cfg, k) && alt >= 0 && gpt_config_given(cfg, alt))
		at = alt;
	gpt_config_where(cfg, at, where, sizeof where);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return gpt_err_set(err, gpt_config_where_code(cfg, at), "%s: %s%s: %s", where,
			   gpt_config_keys(&n)[k].name,
			   gpt_config_given(cfg, k) ? "" : " (not given)", msg);
}

static void derived(gpt_config *cfg, int k, const char *why)
{
	cfg->origin[k] = (gpt_config_origin){GPT_SRC_DERIVED, why, 0, 0};
}

/* a x b, saturating at LIMIT so that absurd inputs give a message, not UB. */
static int64_t mul(int64_t a, int64_t b)
{
	if (a <= 0 || b <= 0)
		return a * b;
	return a > LIMIT / b ? LIMIT : a * b;
}

static int resolve_world(gpt_config *cfg, int64_t world, gpt_err *err)
{
	if (world > 0) {
		cfg->world_size_from = "--world-size";
	} else {
		const char *from;
		int rc = gpt_config_world_size_env(&world, &from, err);
		if (rc)
			return rc;
		cfg->world_size_from = from;
	}
	cfg->world_size = world; /* 0: the layout decides, below */
	return 0;
}

static int resolve_degrees(gpt_config *cfg, gpt_err *err)
{
	int kdp = kid("Distributed.dp_degree"), kmp = kid("Distributed.mp_degree");
	int kpp = kid("Distributed.pp_degree"), ksh = kid("Distributed.sharding.sharding_degree");
	int64_t *dp = &cfg->distributed.dp_degree, *sh = &cfg->distributed.sharding.sharding_degree;
	int64_t mp = cfg->distributed.mp_degree, pp = cfg->distributed.pp_degree;
	int gdp = gpt_config_given(cfg, kdp), gsh = gpt_config_given(cfg, ksh);
	int64_t world = cfg->world_size;
	if (!world) {
		if (!gdp) {
			*dp = 1;
			derived(cfg, kdp, "1 (no world size given)");
		}
		if (!gsh) {
			*sh = 1;
			derived(cfg, ksh, "1 (no world size given)");
		}
		cfg->world_size = mul(mul(*dp, *sh), mul(mp, pp));
		cfg->world_size_from = "the product of the degrees";
		if (cfg->world_size >= (1 << 24))
			return fail(cfg, kmp, -1, err,
				    "expected dp_degree x mp_degree x pp_degree x sharding_degree "
				    "below 16777216 ranks, found %lld x %lld x %lld x %lld",
				    (long long)*dp, (long long)mp, (long long)pp, (long long)*sh);
		return 0;
	}
	/* The degree that takes the rest: dp, or sharding after --sharding stageN. */
	int free_k = -1;
	int64_t others = mul(mp, pp);
	if (!gdp && !gsh) {
		free_k = cfg->sharding_takes_rest ? ksh : kdp;
		if (free_k == kdp)
			*sh = 1;
		else
			*dp = 1;
	} else if (!gdp) {
		free_k = kdp;
		others = mul(others, *sh);
	} else if (!gsh) {
		free_k = ksh;
		others = mul(others, *dp);
	}
	if (free_k >= 0) {
		/* Where the error points: a degree that was given and is above 1
		 * (a degree of 1 divides everything: the file's mp_degree: 1 is
		 * not what -o Distributed.dp_degree=3 on 4 ranks got wrong). */
		int kfix = gdp ? kdp : gsh ? ksh : -1;
		int64_t vfix = gdp ? *dp : gsh ? *sh : 1;
		int blame = gpt_config_given(cfg, kmp) && mp > 1   ? kmp
			    : gpt_config_given(cfg, kpp) && pp > 1 ? kpp
			    : kfix >= 0 && vfix > 1               ? kfix
			    : gpt_config_given(cfg, kmp)          ? kmp
			    : gpt_config_given(cfg, kpp)          ? kpp
			    : gdp                                 ? kdp
								  : ksh;
		if (world % others != 0)
			return fail(cfg, blame, -1, err,
				    "expected the other degrees (mp_degree %lld x pp_degree %lld%s%lld) "
				    "to divide the world size %lld (from %s), found a product of %lld",
				    (long long)mp, (long long)pp,
				    free_k == kdp ? " x sharding_degree " : " x dp_degree ",
				    (long long)(free_k == kdp ? (gsh ? *sh : 1) : (gdp ? *dp : 1)),
				    (long long)world, cfg->world_size_from, (long long)others);
		if (free_k == kdp) {
			*dp = world / others;
			derived(cfg, kdp, "world size / (mp_degree x pp_degree x sharding_degree)");
		} else {
			*sh = world / others;
			derived(cfg, ksh, "world size / (dp_degree x mp_degree x pp_degree)");
		}
		return 0;
	}
	int64_t prod = mul(mul(*dp, *sh), mul(mp, pp));
	if (prod != world)
		return fail(cfg, kdp, -1, err,
			    "expected dp_degree x mp_degree x pp_degree x sharding_degree to equal the "
			    "world size %lld (from %s), found %lld x %lld x %lld x %lld = %lld; change "
			    "a degree or leave dp_degree out to derive it",
			    (long long)world, cfg->world_size_from, (long long)*dp, (long long)mp,
			    (long long)pp, (long long)*sh, (long long)prod);
	return 0;
}

static int resolve_model(gpt_config *cfg, gpt_err *err)
{
	int64_t h = cfg->model.hidden_size, a = cfg->model.num_attention_heads;
	int64_t mp = cfg->distributed.mp_degree, pp = cfg->distributed.pp_degree;
	int64_t vpp = cfg->distributed.virtual_pp_degree, L = cfg->model.num_layers;
	int kffn = kid("Model.ffn_hidden_size");
	if (h % a)
		return fail(cfg, kid("Model.num_attention_heads"), kid("Model.hidden_size"),
			    err,
			    "expected a divisor of hidden_size %lld, found %lld", (long long)h,
			    (long long)a);
	cfg->head_size = h / a;
	/* a probability of 1 drops everything and scales by 1 / (1 - p) */
	static const char *const drop[] = {"Model.hidden_dropout_prob", "Model.attention_probs_dropout_prob"};
	double p[2] = {cfg->model.hidden_dropout_prob, cfg->model.attention_probs_dropout_prob};
	for (int i = 0; i < 2; i++)
		if (!(p[i] < 1))
			return fail(cfg, kid(drop[i]), -1, err,
				    "expected a probability below 1 (1 would drop every element), found %.17g", p[i]);
	if (cfg->global.device && !strcmp(cfg->global.device, "gpu") && cfg->head_size > GPT_GPU_MAX_HEAD_SIZE)
		return fail(cfg, kid("Model.num_attention_heads"), kid("Model.hidden_size"), err,
			    "head size hidden_size / num_attention_heads = %lld / %lld = %lld is above the "
			    "CUDA attention kernels' %d on Global.device gpu; give at least %lld heads, or "
			    "train with -o Global.device=cpu",
			    (long long)h, (long long)a, (long long)cfg->head_size, GPT_GPU_MAX_HEAD_SIZE,
			    (long long)((h + GPT_GPU_MAX_HEAD_SIZE - 1) / GPT_GPU_MAX_HEAD_SIZE));
	if (!gpt_config_given(cfg, kffn)) {
		cfg->model.ffn_hidden_size = 4 * h;
		derived(cfg, kffn, "4 x hidden_size");
	}
	cfg->padded_vocab_size =
		(cfg->model.vocab_size + GPT_VOCAB_PAD - 1) / GPT_VOCAB_PAD * GPT_VOCAB_PAD;
	if (a % mp)
		return fail(cfg, kid("Distributed.mp_degree"), -1, err,
			    "expected a divisor of Model.num_attention_heads %lld (heads are split over "
			    "tensor parallel ranks), found %lld", (long long)a, (long long)mp);
	if (cfg->model.ffn_hidden_size % mp)
		return fail(cfg, kid("Distributed.mp_degree"), -1, err,
			    "expected a divisor of Model.ffn_hidden_size %lld, found %lld",
			    (long long)cfg->model.ffn_hidden_size, (long long)mp);
	if (cfg->padded_vocab_size % mp)
		return fail(cfg, kid("Distributed.mp_degree"), -1, err,
			    "expected a divisor of the padded vocabulary %lld (Model.vocab_size %lld "
			    "rounded up to a multiple of %d), found %lld",
			    (long long)cfg->padded_vocab_size, (long long)cfg->model.vocab_size,
			    GPT_VOCAB_PAD, (long long)mp);
	const gpt_intlist *pl = &cfg->distributed.pp_layers;
	if (pl->n) {
		int64_t sum = 0, least = 1;
		for (int i = 0; i < pl->n; i++) {
			sum += pl->v[i];
			least = pl->v[i] < least ? pl->v[i] : least;
		}
		if (pl->n != mul(pp, vpp) || sum != L || least < 1)
			return fail(cfg, kid("Distributed.pp_layers"), kid("Model.num_layers"), err,
				    "expected pp_degree x virtual_pp_degree = %lld counts of at least 1 layer "
				    "adding up to num_layers %lld, found %d counts adding up to %lld",
				    (long long)mul(pp, vpp), (long long)L, pl->n, (long long)sum);
	} else if (L % mul(pp, vpp)) {
		/* enough layers for every stage: an uneven split can hold them
		 * (the example has at most 16 counts of at most 5 digits) */
		int64_t S = mul(pp, vpp);
		char how[256] = "";
		if (L > S) {
			size_t w = (size_t)snprintf(how, sizeof how,
						    "; or split them unevenly with Distributed.pp_layers");
			for (int64_t i = 0; S <= 16 && i < S; i++)
				w += (size_t)snprintf(how + w, sizeof how - w, "%s%lld", i ? "," : ", e.g. [",
						      (long long)(L / S + (i < L % S)));
			if (S <= 16)
				snprintf(how + w, sizeof how - w, "]");
		}
		return fail(cfg, kid("Model.num_layers"), kid("Distributed.pp_degree"), err,
			    "expected a multiple of pp_degree x virtual_pp_degree = %lld x %lld = %lld, "
			    "found %lld%s", (long long)pp, (long long)vpp, (long long)S, (long long)L, how);
	}
	for (int i = 0; i < cfg->model.no_recompute_layers.n; i++)
		if (cfg->model.no_recompute_layers.v[i] < 0 || cfg->model.no_recompute_layers.v[i] >= L)
			return fail(cfg, kid("Model.no_recompute_layers"), -1, err,
				    "expected layer indices from 0 to num_layers - 1 = %lld, found %lld",
				    (long long)L - 1, (long long)cfg->model.no_recompute_layers.v[i]);
	if (cfg->model.sequence_parallel && mp == 1)
		return fail(cfg, kid("Model.sequence_parallel"), -1, err,
			    "expected False when Distributed.mp_degree is 1 (sequence parallelism "
			    "splits activations over tensor parallel ranks), found True");
	/* The evaluation data follows the training data unless it says otherwise. */
	static const char *const ev[][2] = {
		{"Data.Eval.dataset.name", "Data.Train.dataset.name"},
		{"Data.Eval.dataset.input_dir", "Data.Train.dataset.input_dir"},
		{"Data.Eval.dataset.split", "Data.Train.dataset.split"},
		{"Data.Eval.dataset.max_seq_len", "Data.Train.dataset.max_seq_len"},
	};
	for (size_t i = 0; i < sizeof ev / sizeof ev[0]; i++) {
		int ke = kid(ev[i][0]), kt = kid(ev[i][1]), n;
		if (gpt_config_given(cfg, ke))
			continue;
		const gpt_config_key *keys = gpt_config_keys(&n);
		memcpy((char *)cfg + keys[ke].offset, (char *)cfg + keys[kt].offset,
		       keys[ke].type == GPT_CT_INT ? sizeof(int64_t) : sizeof(char *));
		derived(cfg, ke, "the Data.Train value");
	}
	int64_t maxpos = cfg->model.max_position_embeddings;
	if (cfg->data.train.dataset.max_seq_len > maxpos)
		return fail(cfg, kid("Data.Train.dataset.max_seq_len"),
			    kid("Model.max_position_embeddings"), err,
			    "expected at most Model.max_position_embeddings %lld, found %lld",
			    (long long)maxpos, (long long)cfg->data.train.dataset.max_seq_len);
	/* evaluation runs the training's micro-batches, of its length */
	if (cfg->data.eval.dataset.max_seq_len != cfg->data.train.dataset.max_seq_len)
		return fail(cfg, kid("Data.Eval.dataset.max_seq_len"), -1, err,
			    "expected Data.Train.dataset.max_seq_len %lld (evaluation runs at the training "
			    "length), found %lld; leave it out, or set it to %lld as well "
			    "(-o Data.Eval.dataset.max_seq_len=%lld beside an override of the training length)",
			    (long long)cfg->data.train.dataset.max_seq_len,
			    (long long)cfg->data.eval.dataset.max_seq_len,
			    (long long)cfg->data.train.dataset.max_seq_len,
			    (long long)cfg->data.train.dataset.max_seq_len);
	return 0;
}

static int resolve_pipeline(gpt_config *cfg, gpt_err *err)
{
	int ks = kid("Distributed.pipeline_schedule"), kv = kid("Distributed.virtual_pp_degree");
	int64_t vpp = cfg->distributed.virtual_pp_degree;
	if (vpp > 1 && cfg->distributed.pp_degree == 1)
		return fail(cfg, kv, kid("Distributed.pp_degree"), err,
			    "expected 1 when Distributed.pp_degree is 1 (virtual stages interleave "
			    "pipeline stages), found %lld", (long long)vpp);
	if (!cfg->distributed.pipeline_schedule) {
		cfg->distributed.pipeline_schedule = vpp > 1 ? "interleaved" : "1F1B";
		derived(cfg, ks, vpp > 1 ? "virtual_pp_degree > 1" : "the default");
		return 0;
	}
	int inter = strcmp(cfg->distributed.pipeline_schedule, "interleaved") == 0;
	if (inter && vpp == 1)
		return fail(cfg, ks, kv, err,
			    "expected FThenB or 1F1B when Distributed.virtual_pp_degree is 1, found "
			    "interleaved; set virtual_pp_degree to 2 or more");
	if (!inter && vpp > 1)
		return fail(cfg, ks, kv, err,
			    "expected interleaved when Distributed.virtual_pp_degree is %lld, found %s",
			    (long long)vpp, cfg->distributed.pipeline_schedule);
	return 0;
}

/* The interleaved schedule takes micro-batches in groups of pp. */
static int resolve_interleave(gpt_config *cfg, gpt_err *err)
{
	int64_t pp = cfg->distributed.pp_degree, acc = cfg->engine.accumulate_steps;
	if (strcmp(cfg->distributed.pipeline_schedule, "interleaved") != 0 || acc % pp == 0)
		return 0;
	return fail(cfg, kid("Engine.accumulate_steps"), kid("Distributed.pp_degree"), err,
		    "expected a multiple of pp_degree %lld with the interleaved schedule, found %lld; "
		    "change the batch sizes, or set Distributed.virtual_pp_degree to 1 (1F1B)",
		    (long long)pp, (long long)acc);
}

/* When dp_degree or sharding_degree took the rest of the world size, the
 * number of data replicas came from how many ranks were started, not from
 * the file: what to append to an error about a batch size `what` that they
 * must divide, saying so; else "". */
static void replicas_note(const gpt_config *cfg, const char *what, int64_t batch, char *out, size_t n)
{
	int kdp = kid("Distributed.dp_degree"), ksh = kid("Distributed.sharding.sharding_degree");
	int64_t dp = cfg->distributed.dp_degree, sh = cfg->distributed.sharding.sharding_degree;
	int64_t mp = cfg->distributed.mp_degree, pp = cfg->distributed.pp_degree;
	int ddp = cfg->origin[kdp].src == GPT_SRC_DERIVED && dp > 1;
	int dsh = cfg->origin[ksh].src == GPT_SRC_DERIVED && sh > 1;
	*out = '\0';
	if ((!ddp && !dsh) || !cfg->world_size_from)
		return;
	snprintf(out, n, "; %s %lld is the world size %lld (from %s) / (%s %lld x mp_degree %lld x pp_degree %lld): "
		 "start a number of ranks, or give degrees, that make dp_degree x sharding_degree a divisor of %s %lld",
		 ddp ? "dp_degree" : "sharding_degree", (long long)(ddp ? dp : sh), (long long)cfg->world_size,
		 cfg->world_size_from, ddp ? "sharding_degree" : "dp_degree", (long long)(ddp ? sh : dp),
		 (long long)mp, (long long)pp, what, (long long)batch);
}

static int resolve_batch(gpt_config *cfg, gpt_err *err)
{
	int kg = kid("Global.global_batch_size"), kl = kid("Global.local_batch_size");
	int km = kid("Global.micro_batch_size"), ka = kid("Engine.accumulate_steps");
	int64_t *g = &cfg->global.global_batch_size, *l = &cfg->global.local_batch_size;
	int64_t *m = &cfg->global.micro_batch_size, *acc = &cfg->engine.accumulate_steps;
	int64_t dp = cfg->distributed.dp_degree, sh = cfg->distributed.sharding.sharding_degree;
	int64_t data = mul(dp, sh);
	int gg = gpt_config_given(cfg, kg), gl = gpt_config_given(cfg, kl);
	int gm = gpt_config_given(cfg, km), ga = gpt_config_given(cfg, ka);

	char note[512];
	if (gg) {
		replicas_note(cfg, "global_batch_size", *g, note, sizeof note);
		if (*g % data)
			return fail(cfg, kg, -1, err,
				    "expected a multiple of dp_degree x sharding_degree = %lld x %lld = "
				    "%lld (the data replicas), found %lld%s",
				    (long long)dp, (long long)sh, (long long)data, (long long)*g, note);
		if (gl && *l != *g / data)
			return fail(cfg, kl, -1, err,
				    "expected global_batch_size / (dp_degree x sharding_degree) = %lld / "
				    "(%lld x %lld) = %lld, found %lld; leave it out to derive it",
				    (long long)*g, (long long)dp, (long long)sh, (long long)(*g / data),
				    (long long)*l);
		*l = *g / data;
		if (!gl)
			derived(cfg, kl, "global_batch_size / (dp_degree x sharding_degree)");
	} else if (gl) {
		*g = mul(*l, data);
		derived(cfg, kg, "local_batch_size x dp_degree x sharding_degree");
	}
	if (gg || gl) {
		if (gm) {
			replicas_note(cfg, "global_batch_size / micro_batch_size", *g / *m, note, sizeof note);
			if (*l % *m)
				return fail(cfg, km, -1, err,
					    "expected a divisor of local_batch_size %lld (global_batch_size "
					    "%lld / (dp_degree %lld x sharding_degree %lld)), found %lld%s",
					    (long long)*l, (long long)*g, (long long)dp, (long long)sh,
					    (long long)*m, *g % *m ? "" : note);
			if (ga && *acc != *l / *m)
				return fail(cfg, ka, -1, err,
					    "expected local_batch_size / micro_batch_size = %lld / %lld = "
					    "%lld, found %lld; leave it out to derive it, as FleetX does",
					    (long long)*l, (long long)*m, (long long)(*l / *m),
					    (long long)*acc);
			*acc = *l / *m;
			if (!ga)
				derived(cfg, ka, "local_batch_size / micro_batch_size");
		} else {
			if (!ga)
				*acc = 1;
			if (*l % *acc)
				return fail(cfg, ka, -1, err,
					    "expected a divisor of local_batch_size %lld, found %lld",
					    (long long)*l, (long long)*acc);
			*m = *l / *acc;
			derived(cfg, km, "local_batch_size / accumulate_steps");
			if (!ga)
				derived(cfg, ka, "1 (micro_batch_size not given)");
		}
	} else {
		if (!gm) {
			*m = 1;
			derived(cfg, km, "1 (no batch size given)");
		}
		if (!ga) {
			*acc = 1;
			derived(cfg, ka, "1 (no batch size given)");
		}
		*l = mul(*m, *acc);
		*g = mul(*l, data);
		derived(cfg, kl, "micro_batch_size x accumulate_steps");
		derived(cfg, kg, "local_batch_size x dp_degree x sharding_degree");
	}
	if (*g >= LIMIT)
		return fail(cfg, kg, -1, err, "expected a global batch below 2^53 samples, found more");
	return 0;
}

/* Sequence parallelism gives each tp rank 1/mp_degree of a micro-batch's
 * B x T token rows: whole sequences, or equal parts of one (the model's own
 * check, made here so that --print-config and --dry-run refuse it too). */
static int resolve_sequence_parallel(gpt_config *cfg, gpt_err *err)
{
	int64_t mp = cfg->distributed.mp_degree, B = cfg->global.micro_batch_size;
	int64_t T = cfg->data.train.dataset.max_seq_len, BT = mul(B, T);
	if (!cfg->model.sequence_parallel || mp == 1)
		return 0;
	int64_t n = BT / mp;
	if (BT % mp == 0 && n > 0 && (T % n == 0 || n % T == 0))
		return 0;
	return fail(cfg, kid("Model.sequence_parallel"), -1, err,
		    "expected the %lld x %lld tokens of a micro-batch (Global.micro_batch_size x "
		    "Data.Train.dataset.max_seq_len) to split into Distributed.mp_degree %lld equal parts "
		    "of whole sequences or of one sequence, found parts of %lld tokens%s; choose sizes "
		    "that do, or set it to False",
		    (long long)B, (long long)T, (long long)mp, (long long)n,
		    BT % mp ? " and a remainder" : "");
}

/* Sizes small enough that every count the trainer makes of them is exact
 * (in doubles and in int64 products): the parameters, and one micro-batch's
 * widest activations over all layers (the FFN's, or the attention scores
 * where the T x T matrix is stored). */
static int resolve_sizes(gpt_config *cfg, gpt_err *err)
{
	double B = (double)cfg->global.micro_batch_size, C = (double)cfg->model.hidden_size;
	double T = (double)cfg->data.train.dataset.max_seq_len;
	double F = (double)cfg->model.ffn_hidden_size, L = (double)cfg->model.num_layers;
	double wide = F > 3 * C ? F : 3 * C, scores = (double)cfg->model.num_attention_heads * T;
	if (scores > wide)
		wide = scores;
	double params = L * (2 * C * F + 4 * C * C + F + 9 * C) + (double)cfg->padded_vocab_size * C +
			(double)cfg->model.max_position_embeddings * C;
	if (params >= LIMIT)
		return fail(cfg, kid("Model.hidden_size"), kid("Model.num_layers"), err,
			    "the model would have %.3g parameters, beyond 2^53 (no machine holds them); "
			    "choose smaller sizes", params);
	if (B * T * wide * L >= LIMIT)
		return fail(cfg, kid("Global.micro_batch_size"), -1, err,
			    "%lld sequences of %.0f tokens through %lld layers would hold %.3g activations, "
			    "beyond 2^53 (no machine holds them); lower micro_batch_size or max_seq_len",
			    (long long)cfg->global.micro_batch_size, T, (long long)cfg->model.num_layers,
			    B * T * wide * L);
	return 0;
}

/* The tokens the training, each evaluation and the test read (steps x
 * global batch x max_seq_len) below 2^53, so that the sample indices and
 * the running counts of samples and tokens stay exact in int64 products
 * and doubles; no run comes near (the largest read some 2^44 tokens). */
static int resolve_run_length(gpt_config *cfg, gpt_err *err)
{
	static const char *const key[3] = {"Engine.max_steps", "Engine.eval_iters", "Engine.test_iters"};
	const int64_t n[3] = {cfg->engine.max_steps, cfg->engine.eval_iters, cfg->engine.test_iters};
	double G = (double)cfg->global.global_batch_size, T = (double)cfg->data.train.dataset.max_seq_len;
	for (int i = 0; i < 3; i++)
		if ((double)n[i] * G * T >= (double)LIMIT)
			return fail(cfg, kid(key[i]), -1, err,
				    "%lld global batches of %lld x %.0f tokens would be %.3g tokens, beyond "
				    "2^53 (no run reads that many, and the counts would overflow); choose fewer",
				    (long long)n[i], (long long)cfg->global.global_batch_size, T, (double)n[i] * G * T);
	return 0;
}

static int resolve_precision(gpt_config *cfg, gpt_err *err)
{
	int kl = kid("Engine.mix_precision.level");
	const char *level = cfg->engine.mix_precision.level;
	int on = cfg->engine.mix_precision.enable || cfg->engine.mix_precision.use_pure_fp16;
	if (!cfg->engine.mix_precision.enable && gpt_config_given(cfg, kid("Engine.mix_precision.enable"))) {
		/* An enable: False said is the switch, as in FleetX's later
		 * configs, whose level (O2 by default) then goes unread; it
		 * also turns off the use_pure_fp16 of an older file. */
		on = 0;
		level = "O0";
		cfg->engine.mix_precision.level = (char *)level;
		derived(cfg, kl, "mixed precision disabled (Engine.mix_precision.enable False)");
	} else if (level && gpt_config_given(cfg, kl)) {
		int l0 = strcmp(level, "O0") == 0, l2 = strcmp(level, "O2") == 0;
		if (cfg->engine.mix_precision.use_pure_fp16 && !l2)
			return fail(cfg, kl, -1, err,
				    "expected O2 with Engine.mix_precision.use_pure_fp16 True, found %s",
				    level);
		if (cfg->engine.mix_precision.enable && l0)
			return fail(cfg, kl, -1, err,
				    "expected O1 or O2 with Engine.mix_precision.enable True, found O0");
		on = !l0;
	} else {
		level = on ? "O2" : "O0";
		cfg->engine.mix_precision.level = (char *)level;
		derived(cfg, kl, on ? "mixed precision enabled" : "mixed precision disabled");
	}
	cfg->mixed = on;
	cfg->engine.mix_precision.enable = on;
	cfg->engine.mix_precision.use_pure_fp16 = strcmp(level, "O2") == 0;
	return 0;
}

/* Overlapping the gradient reduction pays on a GPU, where the reduction
 * runs beside the kernels; on the CPU its progress thread takes a core from
 * the compute, so it is off there unless asked for. FleetX's
 * sharding.reduce_overlap asks for it too. */
static int resolve_overlap(gpt_config *cfg, gpt_err *err)
{
	int ko = kid("Distributed.overlap_grad_reduce"), kr = kid("Distributed.sharding.reduce_overlap");
	int *on = &cfg->distributed.overlap_grad_reduce;
	if (gpt_config_given(cfg, ko)) {
		if (!*on && cfg->distributed.sharding.reduce_overlap)
			return fail(cfg, ko, kr, err,
				    "expected True with Distributed.sharding.reduce_overlap True, found False; "
				    "set one of them to agree with the other");
		return 0;
	}
	if (cfg->distributed.sharding.reduce_overlap) {
		*on = 1;
		derived(cfg, ko, "Distributed.sharding.reduce_overlap True");
		return 0;
	}
	*on = cfg->global.device && strcmp(cfg->global.device, "gpu") == 0;
	derived(cfg, ko, *on ? "Global.device gpu" : "Global.device cpu");
	return 0;
}

double gpt_config_warmup(const gpt_config *cfg)
{
	if (gpt_config_given(cfg, kid("Optimizer.lr.warmup_steps")))
		return (double)cfg->optimizer.lr.warmup_steps;
	return cfg->optimizer.lr.warmup_rate * (double)cfg->optimizer.lr.decay_steps;
}

static int resolve_rest(gpt_config *cfg, gpt_err *err)
{
	int kw = kid("Optimizer.lr.warmup_steps");
	if (!gpt_config_given(cfg, kw)) {
		cfg->optimizer.lr.warmup_steps =
			(int64_t)llround(cfg->optimizer.lr.warmup_rate * (double)cfg->optimizer.lr.decay_steps);
		derived(cfg, kw, "warmup_rate x decay_steps");
	}
	if (cfg->optimizer.lr.warmup_steps > cfg->optimizer.lr.decay_steps)
		return fail(cfg, kw, kid("Optimizer.lr.decay_steps"), err,
			    "expected at most Optimizer.lr.decay_steps %lld, found %lld",
			    (long long)cfg->optimizer.lr.decay_steps,
			    (long long)cfg->optimizer.lr.warmup_steps);
	/* The decays run from max_lr down to min_lr. FleetX's formula would
	 * climb after the warm-up when min_lr is the larger (its single-card
	 * docs' example, max_lr 1e-5 and min_lr 5e-5, has them swapped);
	 * Megatron-LM refuses that, and so does gptkit, here so that
	 * --print-config and --dry-run say so too. Constant never uses min_lr. */
	const char *sched = cfg->optimizer.lr.name ? cfg->optimizer.lr.name : "CosineAnnealingWithWarmupDecay";
	int kmin = kid("Optimizer.lr.min_lr"), kmax = kid("Optimizer.lr.max_lr");
	double lo = cfg->optimizer.lr.min_lr, hi = cfg->optimizer.lr.max_lr;
	if (lo > hi && strcmp(sched, "Constant") != 0) {
		if (!gpt_config_given(cfg, kmin))
			return fail(cfg, kmin, kmax, err,
				    "expected at most Optimizer.lr.max_lr %g, found the default %g; "
				    "set Optimizer.lr.min_lr, the rate %s decays to (0 for none)",
				    hi, lo, sched);
		return fail(cfg, kmin, kmax, err,
			    "expected at most Optimizer.lr.max_lr %g, found %g; %s decays from max_lr "
			    "down to min_lr: swap the two (FleetX's single-card example, max_lr 1e-5 and "
			    "min_lr 5e-5, has them the wrong way round and would raise the rate after "
			    "the warm-up)",
			    hi, lo, sched);
	}
	if (cfg->generation.min_dec_len > cfg->generation.max_dec_len)
		return fail(cfg, kid("Generation.min_dec_len"), kid("Generation.max_dec_len"),
			    err,
			    "expected at most Generation.max_dec_len %lld, found %lld",
			    (long long)cfg->generation.max_dec_len,
			    (long long)cfg->generation.min_dec_len);
	int beam = strcmp(cfg->generation.decode_strategy, "beam_search") == 0;
	if (!beam && cfg->generation.num_beams > 1)
		return fail(cfg, kid("Generation.num_beams"), kid("Generation.decode_strategy"),
			    err,
			    "expected 1 unless Generation.decode_strategy is beam_search (it is %s), "
			    "found %lld", cfg->generation.decode_strategy,
			    (long long)cfg->generation.num_beams);
	if (beam && cfg->generation.num_return_sequences > cfg->generation.num_beams)
		return fail(cfg, kid("Generation.num_return_sequences"),
			    kid("Generation.decode_strategy"), err,
			    "expected at most Generation.num_beams %lld with beam_search, found %lld",
			    (long long)cfg->generation.num_beams,
			    (long long)cfg->generation.num_return_sequences);
	if (!strcmp(cfg->generation.decode_strategy, "greedy_search") &&
	    cfg->generation.num_return_sequences > 1)
		return fail(cfg, kid("Generation.num_return_sequences"),
			    kid("Generation.decode_strategy"), err,
			    "expected 1 with greedy_search (every sequence would be the same), "
			    "found %lld", (long long)cfg->generation.num_return_sequences);
	return 0;
}

/* The linears quantization-aware training fake-quantizes, by Paddle's
 * layer names or gptkit's (lib/model/qat.c maps them): config.h. */
int gpt_config_check_qat_layers(const gpt_config *cfg, gpt_err *err)
{
	static const char *const layers[] = {"Linear", "ColumnParallelLinear", "RowParallelLinear",
					     "attn.qkv", "attn.proj", "mlp.fc", "mlp.proj"};
	const gpt_strlist *types = &cfg->quantization.quantizable_layer_type;
	const char *key = "Quantization.quantizable_layer_type";
	if (types->n == 0)
		return gpt_config_refuse(cfg, key, err,
					 "empty; name Linear (every linear of the blocks), ColumnParallelLinear or "
					 "RowParallelLinear");
	for (int i = 0; i < types->n; i++) {
		const char *t = types->v[i];
		size_t j = 0;
		while (j < sizeof layers / sizeof *layers && strcmp(t, layers[j]) != 0)
			j++;
		if (j < sizeof layers / sizeof *layers)
			continue;
		if (!strcmp(t, "Embedding") || !strcmp(t, "VocabParallelEmbedding") ||
		    !strcmp(t, "wte") || !strcmp(t, "lm_head"))
			return gpt_config_refuse(cfg, key, err,
						 "%s: the embedding and the output head (the tied wte) are not "
						 "fake-quantized by this trainer; gpt-export --dtype int8 quantizes wte "
						 "after training", t);
		return gpt_config_refuse(cfg, key, err,
					 "%s is not a layer of GPT; expected Linear, ColumnParallelLinear, "
					 "RowParallelLinear, attn.qkv, attn.proj, mlp.fc or mlp.proj", t);
	}
	return 0;
}

/* Settings the trainer has no way to honour are refused, not ignored; here,
 * so that --print-config and --dry-run refuse them too, naming where they
 * were set. */
static int resolve_unsupported(gpt_config *cfg, gpt_err *err)
{
	if (cfg->mixed && !strcmp(cfg->engine.mix_precision.level, "O1"))
		return fail(cfg, kid("Engine.mix_precision.level"), -1, err,
			    "O1 (fp32 parameters, 16-bit compute) is not supported; gptkit trains O2 "
			    "(16-bit parameters, fp32 master weights): set it to O2 or leave it out");
	/* Paddle's GEMM ops: 16-bit inputs and outputs under O2 here, always;
	 * a black list asks for fp32 outputs (the usual cure for an fp16
	 * overflow), which this trainer cannot give. The other names of the
	 * lists ask for what it does anyway or for nothing it has. */
	static const char *const gemms[] = {"matmul", "matmul_v2", "mul", "fused_gemm_epilogue",
					    "linear", "einsum"};
	const gpt_strlist *bl = &cfg->engine.mix_precision.custom_black_list;
	for (int i = 0; cfg->mixed && i < bl->n; i++)
		for (size_t j = 0; j < sizeof gemms / sizeof *gemms; j++)
			if (!strcmp(bl->v[i], gemms[j]))
				return fail(cfg, kid("Engine.mix_precision.custom_black_list"), -1, err,
					    "%s: the GEMMs run on 16-bit inputs and write 16-bit outputs "
					    "under mixed precision, whatever the lists say; remove it, or "
					    "train in fp32 (Engine.mix_precision.enable False)",
					    bl->v[i]);
	/* the CUDA backend's GEMMs always add the bias in cuBLASLt's epilogue */
	if (cfg->model.fused_linear && cfg->global.device && !strcmp(cfg->global.device, "cpu"))
		return fail(cfg, kid("Model.fused_linear"), -1, err,
			    "a CUDA GEMM epilogue; the CPU backend has none; set it to False, or train "
			    "with -o Global.device=gpu");
	if (!cfg->data.train.drop_last || !cfg->data.eval.drop_last)
		return fail(cfg,
			    kid(cfg->data.train.drop_last ? "Data.Eval.sampler.drop_last"
							  : "Data.Train.sampler.drop_last"),
			    -1, err, "False is not supported; every step takes a full global batch");
	if (cfg->distributed.sharding.broadcast_overlap)
		return fail(cfg, kid("Distributed.sharding.broadcast_overlap"), -1, err, "%s; set it to False",
			    cfg->distributed.sharding.sharding_stage >= 3
				    ? "at sharding_stage 3 each layer's parameters are gathered when the "
				      "layer runs and the layer waits for them: no gather runs beside the "
				      "compute"
				    : "the parameters are gathered right after the update, before the next "
				      "forward, so nothing can overlap");
	int64_t r = cfg->engine.fault_inject.nan_rank, world = cfg->world_size;
	if (cfg->engine.fault_inject.nan_steps.n > 0 && r >= world)
		return fail(cfg, kid("Engine.fault_inject.nan_rank"), -1, err,
			    "%lld is not a rank of this run of %lld; use -1 (every rank) or 0 to %lld",
			    (long long)r, (long long)world, (long long)world - 1);
	if (cfg->engine.skip_spikes.enable && cfg->engine.skip_spikes.loss_zscore <= 0 &&
	    cfg->engine.skip_spikes.grad_norm_zscore <= 0)
		return fail(cfg, kid("Engine.skip_spikes.enable"), -1, err,
			    "True with loss_zscore and grad_norm_zscore both 0, so nothing would be "
			    "checked; give one a threshold (6 is usual) or set enable to False");
	return cfg->quantization.enable ? gpt_config_check_qat_layers(cfg, err) : 0;
}

int gpt_config_resolve(gpt_config *cfg, int64_t world_size, gpt_err *err)
{
	int rc;
	if ((rc = resolve_world(cfg, world_size, err)) || (rc = resolve_degrees(cfg, err)) ||
	    (rc = resolve_pipeline(cfg, err)) || (rc = resolve_model(cfg, err)) ||
	    (rc = resolve_batch(cfg, err)) || (rc = resolve_sequence_parallel(cfg, err)) ||
	    (rc = resolve_sizes(cfg, err)) || (rc = resolve_run_length(cfg, err)) ||
	    (rc = resolve_interleave(cfg, err)) ||
	    (rc = resolve_precision(cfg, err)) || (rc = resolve_overlap(cfg, err)) ||
	    (rc = resolve_rest(cfg, err)) || (rc = resolve_unsupported(cfg, err)))
		return rc;
	cfg->resolved = 1;
	return 0;
}
