/* One log line to one record: memmem prefilters pick the dialect, then an
 * anchored PCRE2 (JIT) pattern pulls the fields out. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "logs.h"

#include <math.h>
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

/* A number as trainers print it: Python's %f/%e/%g, nan and inf included. */
#define NUM "([-+]?(?:[0-9]+(?:\\.[0-9]*)?|\\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[-+]?(?i:nan|inf)(?i:inity)?)"
#define INT "([0-9]+)"
/* A number and its unit, or a number and anything but a space or the end of
 * the line: a number that other output ran into ("avg_batch_cost:
 * 0.1/usr/lib/...") is taken, to be seen as cut short (cut_short); one that
 * the end of the log cut off is left out, and so is one in another unit
 * ("ips: 16.00000 sequences/sec" is no tokens/s). Atomic, so that "0.1" at
 * the end is not taken as "0.". */
#define NUM_UNIT(u) "(?>" NUM ")(?: " u "|(?! |$))"

enum {
	P_GPTKIT_STEP,
	P_GPTKIT_EVAL,
	P_GPTKIT_CKPT,
	P_GPTKIT_AMP,
	P_FLEETX_EVAL,
	P_FLEETX_VALID,
	P_FLEETX_TRAIN,
	P_PADDLENLP_KV,
	P_MEGATRON_STEP,
	P_MEGATRON_EVAL,
	P_MEGATRON_CKPT,
	P_LLMC_STEP,
	P_LLMC_MID,
	P_LLMC_OLD,
	P_LLMC_VAL,
	P_LLMC_FILE,
	P_MINDFORMERS,
	P_COUNT
};

/* Optional fields are written as (?:.*?, key: NUM)? so that a field a trainer
 * version adds or leaves out does not hide the ones after it. Every pattern
 * is anchored at the place its prefilter found. */
static const char *const patterns[P_COUNT] = {
	[P_GPTKIT_STEP] = "global step " INT "(?:, epoch: " INT ")?(?:, batch: " INT ")?"
			  ".*?\\bloss: " NUM
			  "(?:.*?, avg_reader_cost: " NUM_UNIT("sec") ")?"
			  "(?:.*?, avg_batch_cost: " NUM_UNIT("sec") ")?"
			  "(?:.*?, ips_total: " NUM_UNIT("tokens/s") ")?"
			  "(?:.*?, ips: " NUM_UNIT("tokens/s") ")?"
			  "(?:.*?, learning rate: " NUM ")?",
	[P_GPTKIT_EVAL] = "\\[eval\\] global step " INT "(?:, epoch: " INT ")?(?:, batch: " INT ")?"
			  ".*?\\bloss: " NUM
			  "(?:.*?, ppl: " NUM ")?"
			  "(?:.*?, avg_eval_cost: " NUM_UNIT("sec") ")?",
	[P_GPTKIT_CKPT] = "\\[checkpoint\\] global step " INT ", path: (.*?), size: " INT " bytes"
			  "(?:, cost: " NUM_UNIT("sec") ")?",
	[P_GPTKIT_AMP] = "\\[amp\\] global step " INT ".*?loss scale " NUM " -> " NUM,
	/* "batch: B" or, in later versions, "batch: B/T" */
	[P_FLEETX_EVAL] = "\\[eval\\] epoch: " INT ", batch: " INT "(?:/[0-9]+)?, loss: " NUM
			  "(?:.*?, avg_eval_cost: " NUM_UNIT("sec") ")?",
	/* The evaluation of the trainers that write "global step N" lines
	 * (FleetX and PaddleNLP's GPT run_pretrain.py, run_evaluate): "valid
	 * step N, epoch: E, batch: B, loss: L, speed: ..", after global step
	 * N; B counts the eval batches. The "test step" lines at the end are
	 * the test set's, no evaluation of the run. */
	[P_FLEETX_VALID] = "valid step " INT ", epoch: " INT ", batch: " INT ", loss: " NUM,
	/* PaddleFleetX's engine (ppfleetx, language_module.py): no global step,
	 * the epoch and the step's index in it. Pre-training writes "epoch: E,
	 * batch: B, loss: ..", fine-tuning "epoch: E, step: [B/N], learning
	 * rate: .., loss: ..", later versions "epoch: [E/N]" and "batch: [B/T]"
	 * and the per-card "ips_per_device:X tokens/s/device", and leave two
	 * spaces before "learning rate" where they have no loss_scale to give. */
	[P_FLEETX_TRAIN] = "\\[train\\] epoch: (?|" INT "|\\[" INT "/[0-9]+\\]), "
			   "(?:batch|step): (?|" INT "|\\[" INT "/[0-9]+\\])"
			   "(?:, learning rate: " NUM ")?, loss: " NUM
			   "(?:.*?, avg_batch_cost: " NUM_UNIT("sec") ")?"
			   "(?:.*?, ips_total: " NUM_UNIT("tokens/s") ")?"
			   "(?:.*?, ips: " NUM_UNIT("tokens/s") ")?"
			   "(?:.*?, ips_per_device: ?" NUM_UNIT("tokens/s/device") ")?"
			   "(?:.*?,\\s+learning rate: " NUM ")?",
	[P_PADDLENLP_KV] = "([a-z_]+): " NUM "(?=,|\\s|$)",
	[P_MEGATRON_STEP] = "iteration\\s+" INT "/\\s*" INT "\\s*\\|"
			    "(?:.*?elapsed time per iteration \\(ms\\):\\s*" NUM ")?"
			    "(?:.*?learning rate:\\s*" NUM ")?"
			    "(?:.*?\\blm loss:\\s*" NUM ")?"
			    "(?:.*?\\| actual seqlen:\\s*" INT ")?"
			    "(?:.*?\\| number of skipped iterations:\\s*" INT ")?"
			    /* Megatron-DeepSpeed's throughput: samples/s of all
			     * GPUs, and their tokens/s over the world size */
			    "(?:.*?\\| samples per second:\\s*" NUM ")?"
			    "(?:.*?\\| tokens per gpu per second \\(tgs\\):\\s*" NUM ")?",
	/* "validation loss at iteration N | lm loss value: ..." during
	 * training; after it "... at iteration N on validation set | ..." and
	 * "... on test set | ..." (the test split: no evaluation of the run),
	 * in Megatron-LM before 2023 (and Megatron-DeepSpeed, GPT-NeoX) "...
	 * at the end of training for val data | ..." (no step: the last) and
	 * "... for test data | ...". */
	[P_MEGATRON_EVAL] = "validation loss at (?:iteration\\s+" INT "(?![0-9]| on test set)"
			    "|the end of training for val data)"
			    ".*?\\| lm loss value:\\s*" NUM
			    "(?:.*?\\| lm loss PPL:\\s*" NUM ")?",
	[P_MEGATRON_CKPT] = "saved checkpoint (?:from |at )?iteration\\s+" INT " to (\\S+)",
	/* train_gpt2.cu: "step    2/74 | loss 7.713380 (-0.72z)| norm 21.7020
	 * (-0.51z)| lr 1.71e-05 | 336.52 ms | 42.1% bf16 MFU | 1557977 tok/s",
	 * earlier "| train loss 7.713380 | norm 21.7020 | lr ..." */
	[P_LLMC_STEP] = "step\\s+" INT "/" INT " \\| (?:train )?loss " NUM
			"(?:.*?\\| lr " NUM ")?"
			"(?:.*? \\| " NUM " ms)?"
			"(?:.*? \\| " NUM " tok/s)?",
	/* train_gpt2.cu before the "|" columns: "step 1/37: train loss 4.40 norm 1.2
	 * lr 6e-4 (224.49 ms, 36484 tok/s)". */
	[P_LLMC_MID] = "step\\s+" INT "/" INT ": train loss " NUM
		       "(?:.*? lr " NUM ")?"
		       "(?:.*?\\(" NUM " ms, " NUM " tok/s\\))?",
	[P_LLMC_OLD] = "step " INT ": train loss " NUM "(?: \\(took " NUM " ms\\))?",
	[P_LLMC_VAL] = "val loss " NUM,
	/* llm.c's own log file (-o DIR/main.log): "s:10 trl:5.2 lr:0.0006 norm:1.2", "s:10 tel:5.3".
	 * A trl line's s counts from 0 (the step its stdout line calls 11/N); a
	 * tel line's s is the steps done before the evaluation. */
	[P_LLMC_FILE] = "s:" INT " (trl|tel):" NUM "(?: lr:" NUM ")?",
	/* MindFormers' MFLossMonitor: "{ Epoch:[  1/  2], step:[   10/  125],
	 * loss: 10.123, per_step_time: 1234ms, lr: 1e-05, overflow cond: False,
	 * ..." (outside dataset sink mode "loss:[10.123/10.456]", this step's and
	 * the mean so far); epoch and step count from 1; the lr is NumPy's, a
	 * 1-element array in brackets. */
	[P_MINDFORMERS] = "\\{ Epoch:\\[\\s*" INT "/\\s*" INT "\\], step:\\[\\s*" INT "/\\s*" INT "\\], "
			  "loss:\\s*(?|" NUM "|\\[\\s*" NUM "/\\s*" NUM "\\])"
			  "(?:.*?, per_step_time: " NUM "ms)?"
			  "(?:.*?, lr: \\[?" NUM ")?"
			  "(?:.*?, overflow cond: (True|False))?",
};

struct gpt_logs_parser {
	pcre2_code *re[P_COUNT];
	int jit[P_COUNT];
	pcre2_match_data *md;
	pcre2_match_context *mctx;
	pcre2_jit_stack *stack;
	/* The line being parsed: where its record's fields begin (past the
	 * dialect's key words), and whether it shows other output run into
	 * the record (a number cut short, a PaddleNLP key twice). */
	const char *body;
	int mixed;
};

const char *gpt_logs_dialect_name(gpt_logs_dialect d)
{
	switch (d) {
	case GPT_LOGS_GPTKIT: return "fleetx";
	case GPT_LOGS_PADDLENLP: return "paddlenlp";
	case GPT_LOGS_MEGATRON: return "megatron";
	case GPT_LOGS_LLMC: return "llm.c";
	case GPT_LOGS_MINDFORMERS: return "mindformers";
	}
	return "unknown";
}

void gpt_logs_parser_free(gpt_logs_parser *p)
{
	if (!p)
		return;
	for (int i = 0; i < P_COUNT; i++)
		pcre2_code_free(p->re[i]);
	pcre2_match_data_free(p->md);
	pcre2_match_context_free(p->mctx);
	pcre2_jit_stack_free(p->stack);
	free(p);
}

gpt_logs_parser *gpt_logs_parser_new(gpt_err *err)
{
	gpt_logs_parser *p = gpt_calloc(1, sizeof *p, "log parser", err);
	if (!p)
		return NULL;
	for (int i = 0; i < P_COUNT; i++) {
		int code;
		PCRE2_SIZE off;
		p->re[i] = pcre2_compile((PCRE2_SPTR)patterns[i], PCRE2_ZERO_TERMINATED,
					 PCRE2_ANCHORED, &code, &off, NULL);
		if (!p->re[i]) {
			PCRE2_UCHAR msg[256];
			pcre2_get_error_message(code, msg, sizeof msg);
			gpt_err_set(err, GPT_EINTERNAL, "log pattern %d, offset %zu: %s", i,
				    (size_t)off, (const char *)msg);
			gpt_logs_parser_free(p);
			return NULL;
		}
		p->jit[i] = pcre2_jit_compile(p->re[i], PCRE2_JIT_COMPLETE) == 0;
	}
	p->md = pcre2_match_data_create(32, NULL);
	p->mctx = pcre2_match_context_create(NULL);
	/* The lazy skips backtrack over the line; a 1 MiB line must not exhaust
	 * the default 32 KiB JIT stack. */
	p->stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, NULL);
	if (!p->md || !p->mctx || !p->stack) {
		gpt_logs_parser_free(p);
		gpt_err_nomem(err, 0, "log parser match data");
		return NULL;
	}
	pcre2_jit_stack_assign(p->mctx, NULL, p->stack);
	return p;
}

/* Runs pattern i anchored at s[0..n); returns the number of groups set
 * (>= 1) or 0 when it does not match. */
static int run(gpt_logs_parser *p, int i, const char *s, size_t n)
{
	int rc = p->jit[i] ? pcre2_jit_match(p->re[i], (PCRE2_SPTR)s, n, 0, 0, p->md, p->mctx)
			   : pcre2_match(p->re[i], (PCRE2_SPTR)s, n, 0, 0, p->md, p->mctx);
	return rc > 0 ? rc : 0;
}

static int group(gpt_logs_parser *p, const char *s, int rc, int g, const char **t, int *len)
{
	PCRE2_SIZE *ov = pcre2_get_ovector_pointer(p->md);
	if (g >= rc || ov[2 * g] == PCRE2_UNSET)
		return 0;
	*t = s + ov[2 * g];
	*len = (int)(ov[2 * g + 1] - ov[2 * g]);
	return 1;
}

/* Decimal text to double, correctly rounded. The common case (at most 19
 * significant digits, a power of ten within 1e22, a mantissa within 2^53)
 * is exact in double arithmetic (Clinger's fast path); the rest goes to
 * strtod. strtod alone was a quarter of the parsing time. */
static double to_double(const char *t, int len)
{
	static const double pow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
				       1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
				       1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
	int i = 0, neg = 0, digits = 0, frac = 0, exp = 0;
	uint64_t m = 0;
	if (i < len && (t[i] == '-' || t[i] == '+'))
		neg = t[i++] == '-';
	for (int in_frac = 0; i < len; i++) {
		if (t[i] == '.' && !in_frac) {
			in_frac = 1;
			continue;
		}
		if (t[i] < '0' || t[i] > '9')
			break;
		if (m || t[i] != '0')
			digits++; /* significant digits: leading zeros do not count */
		m = m * 10 + (uint64_t)(t[i] - '0'); /* wraps past 19 digits; then unused */
		frac += in_frac;
	}
	if (i < len && (t[i] == 'e' || t[i] == 'E')) {
		int eneg = 0, e = 0;
		i++;
		if (i < len && (t[i] == '-' || t[i] == '+'))
			eneg = t[i++] == '-';
		for (; i < len && t[i] >= '0' && t[i] <= '9' && e < 10000; i++)
			e = e * 10 + (t[i] - '0');
		exp = eneg ? -e : e;
	}
	exp -= frac;
	if (i == len && digits <= 19 && m <= (1ull << 53) && exp >= -22 && exp <= 22) {
		double v = (double)m;
		v = exp < 0 ? v / pow10[-exp] : v * pow10[exp];
		return neg ? -v : v;
	}
	char tmp[64];
	if (len >= (int)sizeof tmp)
		return NAN;
	memcpy(tmp, t, (size_t)len);
	tmp[len] = '\0';
	return strtod(tmp, NULL);
}

/* True when c, just after a number, shows that the number was cut short by
 * other output: trainers follow a number with a separator, a unit after a
 * space, or the end of the line, never with a letter, digit, '.' or '['
 * ("loss: 10.95[2026-11-21 ..." is one line run into another). */
static int cut_short(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' ||
	       c == '[' || c == '_' || c == '/' || c == ':';
}

/* A number from group g; a NaN value with no text when the group is unset. */
static gpt_logs_num num(gpt_logs_parser *p, const char *s, int rc, int g)
{
	gpt_logs_num x = {NAN, NULL, 0};
	const char *t;
	int len;
	if (group(p, s, rc, g, &t, &len) && len < 64) {
		x.v = to_double(t, len);
		x.txt = t;
		x.len = len;
		p->mixed |= cut_short(t[len]);
	}
	return x;
}

static int64_t integer(gpt_logs_parser *p, const char *s, int rc, int g)
{
	const char *t;
	int len;
	if (!group(p, s, rc, g, &t, &len) || len > 18)
		return -1;
	int64_t v = 0;
	for (int i = 0; i < len; i++)
		v = v * 10 + (t[i] - '0');
	return v;
}

static gpt_logs_num derived(double v)
{
	return (gpt_logs_num){v, NULL, 0};
}

/* Milliseconds as logged to seconds. A nan or inf stays as it is, text and
 * all, so that it is printed as the log wrote it. */
static gpt_logs_num ms_to_s(gpt_logs_num ms)
{
	return ms.txt && isfinite(ms.v) ? derived(ms.v / 1000.0) : ms;
}

static void rec_init(gpt_logs_rec *r)
{
	gpt_logs_num none = {NAN, NULL, 0};
	memset(r, 0, sizeof *r);
	r->step = r->total_steps = r->bytes = r->epoch = r->batch = -1;
	r->loss = r->lr = r->step_time = r->tok_card = r->tok_total = r->ppl = r->cost = none;
	r->interval_s = r->step_rate = r->scale_from = r->scale_to = NAN;
}

static int has_before(const char *line, const char *at, const char *tag)
{
	size_t n = strlen(tag);
	return (size_t)(at - line) >= n && memcmp(at - n, tag, n) == 0;
}

static int is_digits(const char *s, int n)
{
	for (int i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return 0;
	return 1;
}

/* True when s[0..n) is one or more spaces and then a digit. */
static int spaces_digit(const char *s, size_t n)
{
	size_t i = 0;
	while (i < n && s[i] == ' ')
		i++;
	return i > 0 && i < n && is_digits(s + i, 1);
}

/* True when s[0..n) holds the beginning of another log line or record: a
 * log header's date ("[2026-11-21"), "step N" (FleetX, gptkit, llm.c),
 * "iteration N" (Megatron), "s:N t" (llm.c's main.log) or, unless paddle,
 * "global_step: " (PaddleNLP). Past its key words, no record of ours holds
 * one; a line that does is two outputs written into one (several processes
 * on one log, or a line written in pieces with stderr in between). */
static int another_start(const char *s, size_t n, int paddle)
{
	for (size_t i = 0; i < n; i++) {
		const char *c = s + i;
		size_t left = n - i;
		switch (*c) {
		case '[':
			if (left >= 11 && is_digits(c + 1, 4) && c[5] == '-' && is_digits(c + 6, 2) &&
			    c[8] == '-' && is_digits(c + 9, 2))
				return 1;
			break;
		case 's':
			if (left > 4 && memcmp(c, "step", 4) == 0 && spaces_digit(c + 4, left - 4))
				return 1;
			if (left > 2 && c[1] == ':' && is_digits(c + 2, 1)) {
				size_t k = 3;
				while (k < left && is_digits(c + k, 1))
					k++;
				if (left - k >= 2 && c[k] == ' ' && c[k + 1] == 't')
					return 1;
			}
			break;
		case 'i':
			if (left > 9 && memcmp(c, "iteration", 9) == 0 && spaces_digit(c + 9, left - 9))
				return 1;
			break;
		case 'g':
			if (!paddle && left >= 13 && memcmp(c, "global_step: ", 13) == 0)
				return 1;
			break;
		}
	}
	return 0;
}

/* A record that other output ran into is not used: its fields may be any
 * mix of two lines. It is told apart from an unknown line (GPT_LOGS_BROKEN)
 * so that it can be counted. */
static int finish(gpt_logs_parser *p, const char *line, size_t len, int paddle, gpt_logs_rec *r)
{
	const char *end = line + len;
	if (!p->mixed && !another_start(p->body, (size_t)(end - p->body), paddle))
		return 1;
	gpt_logs_dialect d = r->dialect;
	rec_init(r);
	r->kind = GPT_LOGS_BROKEN;
	r->dialect = d;
	return 0;
}

static int parse_gptkit(gpt_logs_parser *p, const char *line, size_t len, const char *at,
			gpt_logs_rec *r)
{
	const char *end = line + len;
	int rc;
	r->dialect = GPT_LOGS_GPTKIT;
	p->body = at + 12;
	if (has_before(line, at, "[eval] ")) {
		at -= 7;
		if (!(rc = run(p, P_GPTKIT_EVAL, at, (size_t)(end - at))))
			return 0;
		r->kind = GPT_LOGS_EVAL;
		r->step = integer(p, at, rc, 1);
		r->loss = num(p, at, rc, 4);
		r->ppl = num(p, at, rc, 5);
		r->cost = num(p, at, rc, 6);
		return 1;
	}
	if (has_before(line, at, "[checkpoint] ")) {
		at -= 13;
		if (!(rc = run(p, P_GPTKIT_CKPT, at, (size_t)(end - at))))
			return 0;
		r->kind = GPT_LOGS_CKPT;
		r->step = integer(p, at, rc, 1);
		group(p, at, rc, 2, &r->path, &r->path_len);
		r->bytes = integer(p, at, rc, 3);
		r->cost = num(p, at, rc, 4);
		return 1;
	}
	if (has_before(line, at, "[amp] ")) {
		at -= 6;
		if (!(rc = run(p, P_GPTKIT_AMP, at, (size_t)(end - at))))
			return 0;
		r->kind = GPT_LOGS_OVERFLOW;
		r->step = integer(p, at, rc, 1);
		r->scale_from = num(p, at, rc, 2).v;
		r->scale_to = num(p, at, rc, 3).v;
		return 1;
	}
	/* other tagged lines ("[test] global step", "[spike] global step") are
	 * no training steps */
	if (at - line >= 2 && at[-1] == ' ' && at[-2] == ']')
		return 0;
	if (!(rc = run(p, P_GPTKIT_STEP, at, (size_t)(end - at))))
		return 0;
	r->kind = GPT_LOGS_STEP;
	r->step = integer(p, at, rc, 1);
	r->loss = num(p, at, rc, 4);
	r->step_time = num(p, at, rc, 6);
	gpt_logs_num total = num(p, at, rc, 7), ips = num(p, at, rc, 8);
	if (total.txt) {
		r->tok_total = total;
		r->tok_card = ips;
	} else {
		/* Older FleetX wrote only "ips", and it was the all-card figure. */
		r->tok_total = ips;
	}
	r->lr = num(p, at, rc, 9);
	return 1;
}

/* PaddleNLP logs a Python dict as "key: value, key: value" in no fixed order. */
static int parse_paddlenlp(gpt_logs_parser *p, const char *line, size_t len, gpt_logs_rec *r)
{
	const char *end = line + len, *s = line;
	gpt_logs_num loss = derived(NAN), eval_loss = derived(NAN), ppl = derived(NAN);
	gpt_logs_num steps_per_s = derived(NAN), tok_dev = derived(NAN), tok = derived(NAN);
	int64_t step = -1;
	int found = 0; /* a bit for each key used; 1 loss, 2 eval_loss, 4 global_step */
	while (s < end) {
		const char *c = memchr(s, ':', (size_t)(end - s));
		if (!c)
			break;
		const char *k = c;
		while (k > s && ((k[-1] >= 'a' && k[-1] <= 'z') || k[-1] == '_'))
			k--;
		/* A window, not the rest of the line: PCRE2 may scan the whole
		 * subject for a required character on every call, which made
		 * a line of many colons quadratic. */
		size_t win = (size_t)(end - k) < 200 ? (size_t)(end - k) : 200;
		int rc = k < c && c - k < 100 ? run(p, P_PADDLENLP_KV, k, win) : 0;
		if (!rc) {
			s = c + 1;
			continue;
		}
		const char *key = k;
		int klen = 0, bit = 0;
		group(p, k, rc, 1, &key, &klen);
		gpt_logs_num v = num(p, k, rc, 2);
		PCRE2_SIZE *ov = pcre2_get_ovector_pointer(p->md);
		if (!p->body)
			p->body = k;
		s = k + ov[1];
#define KEY(lit) (klen == (int)sizeof(lit) - 1 && memcmp(key, lit, sizeof(lit) - 1) == 0)
		if (KEY("loss"))
			loss = v, bit = 1;
		else if (KEY("eval_loss"))
			eval_loss = v, bit = 2;
		else if (KEY("global_step")) /* any number here: inf or nan is no step */
			step = v.v >= 0 && v.v < 9e18 ? (int64_t)v.v : -1, bit = 4;
		else if (KEY("eval_ppl") || KEY("eval_perplexity"))
			ppl = v, bit = 8;
		else if (KEY("learning_rate"))
			r->lr = v, bit = 16;
		else if (KEY("interval_runtime"))
			r->interval_s = v.v, bit = 32;
		else if (KEY("interval_steps_per_second"))
			steps_per_s = v, bit = 64;
		else if (KEY("interval_tokens_per_second_per_device"))
			tok_dev = v, bit = 128;
		else if (KEY("interval_tokens_per_second"))
			tok = v, bit = 256;
		else if (KEY("eval_runtime"))
			r->cost = v, bit = 512;
#undef KEY
		/* one dict names a key once: twice is two lines in one */
		p->mixed |= (found & bit) != 0;
		found |= bit;
	}
	r->dialect = GPT_LOGS_PADDLENLP;
	if ((found & 5) == 5) {
		r->kind = GPT_LOGS_STEP;
		r->step = step;
		r->loss = loss;
		r->step_rate = steps_per_s.v;
		r->tok_card = tok_dev;
		r->tok_total = tok;
		return 1;
	}
	if (found & 2) {
		r->kind = GPT_LOGS_EVAL;
		r->step = step;
		r->loss = eval_loss;
		r->ppl = ppl.txt ? ppl : derived(exp(eval_loss.v));
		return 1;
	}
	return 0;
}

static int parse_megatron(gpt_logs_parser *p, const char *line, size_t len, const char *at,
			  gpt_logs_rec *r)
{
	const char *end = line + len, *v;
	int rc;
	r->dialect = GPT_LOGS_MEGATRON;
	if ((v = memmem(line, len, "validation loss at ", 19)) &&
	    (rc = run(p, P_MEGATRON_EVAL, v, (size_t)(end - v)))) {
		r->kind = GPT_LOGS_EVAL;
		r->step = integer(p, v, rc, 1);
		/* past "iteration N" or "the end of training for val data" */
		p->body = v + (r->step >= 0 ? 28 : 51);
		r->loss = num(p, v, rc, 2);
		r->ppl = num(p, v, rc, 3);
		return 1;
	}
	if ((v = memmem(line, len, "saved checkpoint ", 17)) &&
	    (rc = run(p, P_MEGATRON_CKPT, v, (size_t)(end - v)))) {
		r->kind = GPT_LOGS_CKPT;
		r->step = integer(p, v, rc, 1);
		group(p, v, rc, 2, &r->path, &r->path_len);
		p->body = r->path; /* past "iteration N" */
		return 1;
	}
	for (; at; at = memmem(at + 1, (size_t)(end - at - 1), "iteration", 9)) {
		if (!(rc = run(p, P_MEGATRON_STEP, at, (size_t)(end - at))))
			continue;
		p->body = at + 9;
		r->kind = GPT_LOGS_STEP;
		r->step = integer(p, at, rc, 1);
		r->total_steps = integer(p, at, rc, 2);
		r->step_time = ms_to_s(num(p, at, rc, 3));
		r->lr = num(p, at, rc, 4);
		r->loss = num(p, at, rc, 5);
		int64_t seqlen = integer(p, at, rc, 6);
		r->overflows = integer(p, at, rc, 7);
		if (r->overflows < 0)
			r->overflows = 0;
		gpt_logs_num samples = num(p, at, rc, 8);
		if (samples.txt && seqlen > 0)
			r->tok_total = derived(samples.v * (double)seqlen);
		r->tok_card = num(p, at, rc, 9);
		return 1;
	}
	return 0;
}

static int parse_llmc(gpt_logs_parser *p, const char *s, size_t n, gpt_logs_rec *r)
{
	int rc;
	r->dialect = GPT_LOGS_LLMC;
	p->body = s + 2; /* past "st", "va" or "s:" */
	if (s[0] == 'v') {
		if (!(rc = run(p, P_LLMC_VAL, s, n)))
			return 0;
		r->kind = GPT_LOGS_EVAL;
		r->loss = num(p, s, rc, 1);
		return 1;
	}
	/* the current step line and the colon-era one capture the same fields */
	if ((rc = run(p, P_LLMC_STEP, s, n)) || (rc = run(p, P_LLMC_MID, s, n))) {
		r->kind = GPT_LOGS_STEP;
		r->step = integer(p, s, rc, 1);
		r->total_steps = integer(p, s, rc, 2);
		r->loss = num(p, s, rc, 3);
		r->lr = num(p, s, rc, 4);
		r->step_time = ms_to_s(num(p, s, rc, 5));
		/* llm.c's tok/s counts every process's tokens. */
		r->tok_total = num(p, s, rc, 6);
		return 1;
	}
	if ((rc = run(p, P_LLMC_FILE, s, n))) {
		const char *k = "tel";
		int klen = 3;
		group(p, s, rc, 2, &k, &klen);
		r->kind = k[1] == 'r' ? GPT_LOGS_STEP : GPT_LOGS_EVAL;
		r->step = integer(p, s, rc, 1);
		if (r->kind == GPT_LOGS_STEP && r->step >= 0)
			r->step++; /* numbered as stdout numbers it, and as evals count */
		r->loss = num(p, s, rc, 3);
		r->lr = num(p, s, rc, 4);
		return 1;
	}
	if ((rc = run(p, P_LLMC_OLD, s, n))) {
		r->kind = GPT_LOGS_STEP;
		r->step = integer(p, s, rc, 1);
		r->loss = num(p, s, rc, 2);
		r->step_time = ms_to_s(num(p, s, rc, 3));
		return 1;
	}
	return 0;
}

static int parse_mindformers(gpt_logs_parser *p, const char *at, size_t n, gpt_logs_rec *r)
{
	int rc = run(p, P_MINDFORMERS, at, n);
	if (!rc)
		return 0;
	r->dialect = GPT_LOGS_MINDFORMERS;
	r->kind = GPT_LOGS_STEP;
	p->body = at + 9;
	int64_t epoch = integer(p, at, rc, 1), epochs = integer(p, at, rc, 2);
	int64_t step = integer(p, at, rc, 3), per_epoch = integer(p, at, rc, 4);
	/* the global step, as MindFormers itself counts it */
	if (epoch >= 1 && step >= 1 && per_epoch >= 1 && epoch < INT64_MAX / 2 / per_epoch)
		r->step = (epoch - 1) * per_epoch + step;
	if (epochs >= 1 && per_epoch >= 1 && epochs < INT64_MAX / 2 / per_epoch)
		r->total_steps = epochs * per_epoch;
	/* "[7.001/7.210]" and "1234ms" are whole numbers, not cut short */
	int mixed = p->mixed;
	r->loss = num(p, at, rc, 5);
	const char *b = r->loss.txt;
	while (b && b > at && b[-1] == ' ')
		b--;
	if (b && b[-1] == '[')
		p->mixed = mixed;
	mixed = p->mixed;
	r->step_time = ms_to_s(num(p, at, rc, 7));
	p->mixed = mixed;
	r->lr = num(p, at, rc, 8);
	const char *t;
	int len;
	r->overflows = group(p, at, rc, 9, &t, &len) && len == 4; /* True */
	return 1;
}

/* FleetX's evals: "valid step N, epoch: E, batch: B, loss: L" of the
 * trainers that log "global step N", and the engine's "[eval] epoch: E,
 * batch: B, loss: L, avg_eval_cost: T sec", which gives no step. */
static int parse_fleetx_eval(gpt_logs_parser *p, const char *line, size_t len, const char *at,
			     gpt_logs_rec *r)
{
	int valid = at[0] == 'v';
	int rc = run(p, valid ? P_FLEETX_VALID : P_FLEETX_EVAL, at, (size_t)(line + len - at));
	if (!rc)
		return 0;
	r->dialect = GPT_LOGS_GPTKIT;
	r->kind = GPT_LOGS_EVAL;
	if (valid) {
		r->step = integer(p, at, rc, 1);
		r->loss = num(p, at, rc, 4);
	} else {
		r->loss = num(p, at, rc, 3);
		r->cost = num(p, at, rc, 4);
	}
	p->body = at + (valid ? 11 : 14);
	return finish(p, line, len, 0, r);
}

int gpt_logs_parse_line(gpt_logs_parser *p, const char *line, size_t len, gpt_logs_rec *r)
{
	rec_init(r);
	p->body = NULL;
	p->mixed = 0;
	if (len < 8)
		return 0;
	const char *at;
	if ((at = memmem(line, len, "global step ", 12))) {
		if (parse_gptkit(p, line, len, at, r))
			return finish(p, line, len, 0, r);
		rec_init(r);
		return 0;
	}
	if ((at = memmem(line, len, "valid step ", 11)) || (at = memmem(line, len, "[eval] epoch: ", 14)))
		return parse_fleetx_eval(p, line, len, at, r);
	if ((at = memmem(line, len, "[train] epoch: ", 15))) {
		int rc = run(p, P_FLEETX_TRAIN, at, (size_t)(line + len - at));
		if (!rc)
			return 0;
		r->dialect = GPT_LOGS_GPTKIT;
		r->kind = GPT_LOGS_STEP;
		r->epoch = integer(p, at, rc, 1);
		r->batch = integer(p, at, rc, 2);
		r->lr = num(p, at, rc, 3);
		r->loss = num(p, at, rc, 4);
		r->step_time = num(p, at, rc, 5);
		r->tok_total = num(p, at, rc, 6);
		r->tok_card = num(p, at, rc, 7);
		if (!r->tok_total.txt) { /* a lone ips is the all-card figure, as above */
			r->tok_total = r->tok_card;
			r->tok_card = derived(NAN);
		}
		/* ips counts per data-parallel replica; ips_per_device is per card */
		gpt_logs_num dev = num(p, at, rc, 8);
		if (dev.txt)
			r->tok_card = dev;
		if (!r->lr.txt)
			r->lr = num(p, at, rc, 9);
		p->body = at + 15;
		return finish(p, line, len, 0, r);
	}
	if ((at = memmem(line, len, "{ Epoch:[", 9))) {
		if (parse_mindformers(p, at, (size_t)(line + len - at), r))
			return finish(p, line, len, 0, r);
		rec_init(r);
		return 0;
	}
	if (memmem(line, len, "global_step: ", 13) || memmem(line, len, "eval_loss: ", 11)) {
		if (parse_paddlenlp(p, line, len, r))
			return finish(p, line, len, 1, r);
		rec_init(r);
		return 0;
	}
	if ((at = memmem(line, len, "iteration", 9)) || memmem(line, len, "validation loss at the end of", 29)) {
		if (parse_megatron(p, line, len, at, r))
			return finish(p, line, len, 0, r);
		rec_init(r);
		return 0;
	}
	size_t i = 0;
	while (i < len && (line[i] == ' ' || line[i] == '\t'))
		i++;
	size_t rest = len - i;
	if ((rest >= 5 && memcmp(line + i, "step ", 5) == 0) ||
	    (rest >= 9 && memcmp(line + i, "val loss ", 9) == 0) ||
	    (rest >= 2 && memcmp(line + i, "s:", 2) == 0)) {
		if (parse_llmc(p, line + i, len - i, r))
			return finish(p, line, len, 0, r);
		rec_init(r);
	}
	return 0;
}
