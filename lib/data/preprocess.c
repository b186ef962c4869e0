/* The preprocessing pipeline: the calling thread reads documents into
 * batches, N threads tokenize batches, and batches are written strictly in
 * the order they were read, so the output is the same for every N. */
#include "data/data.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define BATCH_BYTES ((size_t)256 << 10)
#define BATCH_DOCS 4096
/* Long documents are cut into segments of about this size (at places that
 * do not change their encoding), so that one big document keeps every
 * thread busy too. */
#define SEGMENT_BYTES ((size_t)64 << 10)

enum { SLOT_FREE, SLOT_FILLED, SLOT_DONE };

typedef struct batch {
	gpt_buf text;
	int64_t *doff; /* segment i is text[doff[i] .. doff[i+1]) */
	int64_t *dtok; /* tokens of segment i */
	uint8_t *last; /* 1: segment i ends its document */
	int ndocs, cap;
	gpt_ids ids;
	int64_t in_pos; /* input bytes consumed up to the end of the last segment */
	int state;
	int rc;
	gpt_err err;
} batch;

typedef struct pipeline {
	const gpt_preprocess_opts *o;
	const char *prefix; /* o->prefix without a final .bin or .idx */
	gpt_ds_writer *w;
	gpt_encoder *enc; /* the calling thread's, when threads == 1 */
	batch *slots;
	int nslots;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int64_t submitted, claimed, flushed;
	int finished;
	gpt_input_stats *in;
	int64_t prev_in; /* input position at the end of the previous part */
	gpt_buf carry;   /* the part of a document not yet cut into segments */
	int64_t shown;   /* input position of the last batch written */
	gpt_progress prog;
	char prog_items[128];
} pipeline;

static int batch_add(batch *b, const uint8_t *p, size_t n, int last, gpt_err *err)
{
	if (b->ndocs + 1 >= b->cap) {
		int cap = b->cap ? b->cap * 2 : 1024;
		int64_t *d = gpt_realloc(b->doff, (size_t)cap * sizeof *d, "batch", err);
		if (!d)
			return GPT_EINTERNAL;
		b->doff = d;
		d = gpt_realloc(b->dtok, (size_t)cap * sizeof *d, "batch", err);
		if (!d)
			return GPT_EINTERNAL;
		b->dtok = d;
		uint8_t *l = gpt_realloc(b->last, (size_t)cap, "batch", err);
		if (!l)
			return GPT_EINTERNAL;
		b->last = l;
		b->cap = cap;
	}
	if (b->ndocs == 0)
		b->doff[0] = 0;
	if (gpt_buf_append(&b->text, p, n, err))
		return GPT_EINTERNAL;
	b->last[b->ndocs] = (uint8_t)last;
	b->doff[++b->ndocs] = (int64_t)b->text.len;
	return 0;
}

static int batch_encode(const gpt_preprocess_opts *o, gpt_encoder *enc, batch *b, gpt_err *err)
{
	int32_t eot = gpt_tokenizer_eot(o->tok);
	b->ids.len = 0;
	for (int i = 0; i < b->ndocs; i++) {
		int64_t before = b->ids.len;
		int rc = gpt_encode(enc, b->text.data + b->doff[i], (size_t)(b->doff[i + 1] - b->doff[i]), &b->ids, err);
		if (rc)
			return rc;
		if (o->append_eod && b->last[i]) {
			if (gpt_ids_reserve(&b->ids, 1, err))
				return GPT_EINTERNAL;
			b->ids.data[b->ids.len++] = eot;
		}
		b->dtok[i] = b->ids.len - before;
	}
	return 0;
}

static void format_count(double v, char *out, size_t size)
{
	if (v >= 1e9)
		snprintf(out, size, "%.2fG", v / 1e9);
	else if (v >= 1e6)
		snprintf(out, size, "%.2fM", v / 1e6);
	else if (v >= 1e3)
		snprintf(out, size, "%.1fk", v / 1e3);
	else
		snprintf(out, size, "%.0f", v);
}

/* Progress counts input bytes up to what has been written, not read, so
 * that a big document shows its tokenization, not its reading. */
static void progress_update(pipeline *pl)
{
	double el = gpt_now_s() - pl->prog.start_s;
	int64_t tokens = gpt_ds_writer_tokens(pl->w);
	char tok[32], rate[32];
	format_count((double)tokens, tok, sizeof tok);
	format_count(el > 0 ? (double)tokens / el : 0.0, rate, sizeof rate);
	pl->prog.total = pl->in->total_bytes; /* known once gpt_input_read has listed the input */
	snprintf(pl->prog_items, sizeof pl->prog_items, "docs, %s tokens, %s tokens/s", tok, rate);
	gpt_progress_update(&pl->prog, pl->shown, gpt_ds_writer_docs(pl->w));
}

/* Writes the oldest batch once it is tokenized and frees its slot. */
static int flush_one(pipeline *pl, gpt_err *err)
{
	batch *b = &pl->slots[pl->flushed % pl->nslots];
	pthread_mutex_lock(&pl->mu);
	while (b->state != SLOT_DONE)
		pthread_cond_wait(&pl->cv, &pl->mu);
	pthread_mutex_unlock(&pl->mu);
	if (b->rc) {
		*err = b->err;
		return b->rc;
	}
	int64_t at = 0;
	for (int i = 0; i < b->ndocs; i++) {
		int rc = gpt_ds_writer_append(pl->w, b->ids.data + at, b->dtok[i], err);
		if (!rc && b->last[i])
			rc = gpt_ds_writer_end_doc(pl->w, err);
		if (rc)
			return rc;
		at += b->dtok[i];
	}
	pl->shown = b->in_pos;
	gpt_buf_reset(&b->text);
	b->ndocs = 0;
	pthread_mutex_lock(&pl->mu);
	b->state = SLOT_FREE;
	pl->flushed++;
	pthread_mutex_unlock(&pl->mu);
	progress_update(pl);
	return 0;
}

static int submit(pipeline *pl, gpt_err *err)
{
	batch *b = &pl->slots[pl->submitted % pl->nslots];
	if (b->ndocs == 0)
		return 0;
	if (!pl->enc) {
		pthread_mutex_lock(&pl->mu);
		b->state = SLOT_FILLED;
		pl->submitted++;
		pthread_cond_broadcast(&pl->cv);
		pthread_mutex_unlock(&pl->mu);
		return 0;
	}
	b->rc = batch_encode(pl->o, pl->enc, b, &b->err);
	b->state = SLOT_DONE;
	pl->submitted++;
	return flush_one(pl, err);
}

static int add_segment(pipeline *pl, const uint8_t *p, size_t n, int last, int64_t in_pos, gpt_err *err)
{
	/* The slot to fill may still hold the batch nslots back: write that first. */
	while (pl->submitted - pl->flushed >= pl->nslots) {
		int rc = flush_one(pl, err);
		if (rc)
			return rc;
	}
	batch *b = &pl->slots[pl->submitted % pl->nslots];
	int rc = batch_add(b, p, n, last, err);
	if (rc)
		return rc;
	b->in_pos = in_pos;
	if (b->text.len >= BATCH_BYTES || b->ndocs >= BATCH_DOCS) {
		rc = submit(pl, err);
		/* Write whatever is ready without waiting, to keep memory flat. */
		while (!rc && pl->flushed < pl->submitted &&
		       __atomic_load_n(&pl->slots[pl->flushed % pl->nslots].state, __ATOMIC_ACQUIRE) == SLOT_DONE)
			rc = flush_one(pl, err);
	}
	return rc;
}

/* Parts of a document arrive in blocks; they are cut into segments only
 * where gpt_encode_cut allows, the rest carried over to the next part. */
static int on_doc(void *ctx, const char *where, const uint8_t *p, size_t n, int end, gpt_err *err)
{
	pipeline *pl = ctx;
	(void)where;
	gpt_buf *carry = &pl->carry;
	if (carry->len) {
		if (gpt_buf_append(carry, p, n, err))
			return GPT_EINTERNAL;
		p = (const uint8_t *)carry->data;
		n = carry->len;
	}
	/* The text came from input bytes [prev_in, in->bytes); its segments
	 * get positions in proportion, for the progress report. */
	int64_t start = pl->prev_in, span = pl->in->bytes - start;
	size_t total = n, done = 0;
	while (n > 2 * SEGMENT_BYTES) {
		size_t cut = gpt_encode_cut(pl->o->tok, p, n, SEGMENT_BYTES);
		if (cut >= n)
			break;
		done += cut;
		int rc = add_segment(pl, p, cut, 0, start + (int64_t)((double)span * (double)done / (double)total), err);
		if (rc)
			return rc;
		p += cut;
		n -= cut;
	}
	pl->prev_in = start + (int64_t)((double)span * (double)done / (double)total);
	if (end != GPT_INPUT_MORE) {
		pl->prev_in = pl->in->bytes;
		int rc = add_segment(pl, p, n, end == GPT_INPUT_END, pl->prev_in, err);
		gpt_buf_reset(carry);
		return rc;
	}
	if (carry->len) {
		memmove(carry->data, p, n);
		carry->len = n;
		return 0;
	}
	return gpt_buf_append(carry, p, n, err);
}

typedef struct worker_arg {
	pipeline *pl;
	gpt_encoder *enc;
} worker_arg;

static void *worker(void *arg)
{
	worker_arg *wa = arg;
	pipeline *pl = wa->pl;
	pthread_mutex_lock(&pl->mu);
	for (;;) {
		while (pl->claimed >= pl->submitted && !pl->finished)
			pthread_cond_wait(&pl->cv, &pl->mu);
		if (pl->claimed >= pl->submitted)
			break;
		batch *b = &pl->slots[pl->claimed++ % pl->nslots];
		pthread_mutex_unlock(&pl->mu);
		int rc = batch_encode(pl->o, wa->enc, b, &b->err);
		pthread_mutex_lock(&pl->mu);
		b->rc = rc;
		__atomic_store_n(&b->state, SLOT_DONE, __ATOMIC_RELEASE);
		pthread_cond_broadcast(&pl->cv);
	}
	pthread_mutex_unlock(&pl->mu);
	return NULL;
}

static void pipeline_free(pipeline *pl)
{
	for (int i = 0; i < pl->nslots; i++) {
		gpt_buf_free(&pl->slots[i].text);
		free(pl->slots[i].doff);
		free(pl->slots[i].dtok);
		free(pl->slots[i].last);
		gpt_ids_free(&pl->slots[i].ids);
	}
	free(pl->slots);
	gpt_buf_free(&pl->carry);
	gpt_encoder_free(pl->enc);
	pthread_mutex_destroy(&pl->mu);
	pthread_cond_destroy(&pl->cv);
}

static int run(pipeline *pl, const char *const *paths, int n_paths, pthread_t *tids, worker_arg *args,
	       int *started, gpt_err *err)
{
	const gpt_preprocess_opts *o = pl->o;
	for (int i = 0; o->threads > 1 && i < o->threads; i++) {
		int rc = gpt_encoder_new(&args[i].enc, o->tok, err);
		if (rc)
			return rc;
		args[i].pl = pl;
		if (pthread_create(&tids[i], NULL, worker, &args[i]) != 0)
			return gpt_err_set(err, GPT_EINTERNAL, "cannot start tokenizer thread %d of %d; try a smaller -j",
					   i + 1, o->threads);
		(*started)++;
	}
	/* The output pair is never input, though a rerun may read the
	 * directory that holds it. */
	gpt_input_opts in = o->input;
	gpt_buf bin = GPT_BUF_INIT, idx = GPT_BUF_INIT;
	int rc = gpt_buf_printf(&bin, err, "%s.bin", pl->prefix);
	if (!rc)
		rc = gpt_buf_printf(&idx, err, "%s.idx", pl->prefix);
	in.not_input[0] = bin.data;
	in.not_input[1] = idx.data;
	if (!rc)
		rc = gpt_input_read(paths, n_paths, &in, on_doc, pl, pl->in, err);
	gpt_buf_free(&bin);
	gpt_buf_free(&idx);
	if (!rc)
		rc = submit(pl, err);
	while (!rc && pl->flushed < pl->submitted)
		rc = flush_one(pl, err);
	return rc;
}

int gpt_preprocess(const gpt_preprocess_opts *o, const char *const *paths, int n_paths, gpt_preprocess_stats *st,
		   gpt_err *err)
{
	memset(st, 0, sizeof *st);
	double t0 = gpt_now_s();
	if (o->threads < 1 || o->threads > 1024)
		return gpt_err_set(err, GPT_EUSAGE, "-j %d: expected a thread count from 1 to 1024", o->threads);
	if (o->append_eod && gpt_tokenizer_eot(o->tok) < 0)
		return gpt_err_set(err, GPT_EUSAGE, "--append-eod: the vocabulary has no <|endoftext|> token; use --no-append-eod");
	pipeline pl;
	memset(&pl, 0, sizeof pl);
	pl.o = o;
	pl.in = &st->input;
	pl.nslots = o->threads > 1 ? 2 * o->threads + 2 : 1;
	pthread_mutex_init(&pl.mu, NULL);
	pthread_cond_init(&pl.cv, NULL);
	pl.slots = gpt_calloc((size_t)pl.nslots, sizeof *pl.slots, "batches", err);
	/* -o x.bin writes x.bin and x.idx, the pair that readers open by that name */
	gpt_buf prefix = GPT_BUF_INIT;
	int rc = pl.slots ? gpt_buf_printf(&prefix, err, "%.*s", (int)gpt_ds_prefix_len(o->prefix), o->prefix)
			  : GPT_EINTERNAL;
	pl.prefix = prefix.data;
	if (!rc && o->threads == 1)
		rc = gpt_encoder_new(&pl.enc, o->tok, err);
	if (!rc)
		rc = gpt_ds_writer_open(&pl.w, pl.prefix, gpt_ds_dtype_for_vocab(gpt_tokenizer_vocab_size(o->tok)), err);
	if (rc) {
		pipeline_free(&pl);
		gpt_buf_free(&prefix);
		return rc;
	}
	gpt_progress_init(&pl.prog, o->progress, "gpt-preprocess", "B", 0);
	pl.prog.items_unit = pl.prog_items;
	pl.prog.plain_interval_s = 0;
	pthread_t *tids = gpt_calloc((size_t)o->threads, sizeof *tids, "threads", err);
	worker_arg *args = gpt_calloc((size_t)o->threads, sizeof *args, "threads", err);
	int started = 0;
	rc = tids && args ? 0 : GPT_EINTERNAL;
	if (!rc) {
		rc = run(&pl, paths, n_paths, tids, args, &started, err);
	}
	pthread_mutex_lock(&pl.mu);
	pl.finished = 1;
	/* On failure workers may still hold claimed batches; they finish them and stop. */
	pl.submitted = pl.claimed < pl.submitted && rc ? pl.claimed : pl.submitted;
	pthread_cond_broadcast(&pl.cv);
	pthread_mutex_unlock(&pl.mu);
	for (int i = 0; i < started; i++)
		pthread_join(tids[i], NULL);
	for (int i = 0; args && i < o->threads; i++)
		gpt_encoder_free(args[i].enc);
	free(tids);
	free(args);
	pl.shown = st->input.bytes;
	progress_update(&pl);
	gpt_progress_finish(&pl.prog);
	st->docs = gpt_ds_writer_docs(pl.w);
	st->tokens = gpt_ds_writer_tokens(pl.w);
	if (!rc && st->docs == 0)
		rc = gpt_err_set(err, GPT_EDATA, "no documents in the input (%lld empty%s%s); nothing written",
				 (long long)st->input.empty, o->input.skip_binary && st->input.binary ? ", binary ones skipped" : "",
				 st->input.links ? ", links inside archives skipped: extract them to read what the links name" : "");
	if (rc) {
		gpt_ds_writer_abort(pl.w);
		/* a run that dies at its last input file is not a dataset short of that file */
		if (st->input.corrupt) {
			size_t used = strlen(err->msg);
			snprintf(err->msg + used, sizeof err->msg - used, "; nothing was written to %s.bin and %s.idx",
				 pl.prefix, pl.prefix);
		}
	} else
		rc = gpt_ds_writer_commit(pl.w, err);
	pipeline_free(&pl);
	gpt_buf_free(&prefix);
	st->seconds = gpt_now_s() - t0;
	return rc;
}

/* The options of Megatron-LM's and PaddleFleetX's preprocess_data.py,
 * which gpt-preprocess does not take: whose they are and what to give. */
void gpt_preprocess_flag_hint(const char *arg, gpt_err *err)
{
	static const char mg[] = "Megatron-LM's", fx[] = "PaddleFleetX's", both[] = "Megatron-LM's and PaddleFleetX's";
	static const char inputs[] = "give the input files, directories or - (stdin) as arguments";
	static const char prefix[] = "give -o PREFIX, which writes PREFIX.bin and PREFIX.idx as named (Megatron-LM "
				     "adds _KEY_document to the prefix: -o PREFIX_text_document makes the same names)";
	static const char vocab[] = "give --vocab DIR, the directory that holds the vocabulary and merges files";
	static const char split[] = "gpt-preprocess does not split documents into sentences: each document is one "
				    "sequence; leave it out";
	static const char progress[] = "progress goes to standard error when it is a terminal; leave it out";
	static const char chinese[] = "gpt-preprocess does no Chinese word segmentation (FleetX's serves ERNIE's "
				      "whole-word masking; GPT-2's BPE takes the text as it is); leave it out";
	static const char *const tbl[] = {
		"model_name", fx, "the tokenizer is -t gpt2 (GPT-2's vocabulary, from --vocab DIR where it "
				  "is not installed) or -t bytes",
		"data_format", fx, "JSON lines are read by name (*.jsonl, *.json) or with --format jsonl",
		"input", mg, inputs,
		"input_path", fx, inputs,
		"output-prefix", mg, prefix,
		"output_prefix", fx, prefix,
		"workers", both, "give -j N (tokenizer threads; the output is the same for any N)",
		"partitions", mg, "give -j N; the input is read once, in order, whatever N",
		"json-keys", mg, "give --json-key KEY, repeated for several keys: the first a record has is its text, "
				 "all into one dataset (Megatron-LM writes a dataset per key)",
		"json_key", fx, "give --json-key KEY",
		"tokenizer-type", mg, "give -t gpt2 (GPT2BPETokenizer) or -t bytes",
		"tokenizer_name", fx, "give -t gpt2 (GPTTokenizer) or -t bytes",
		"vocab-file", mg, vocab,
		"merge-file", mg, vocab,
		"append_eos", fx, "give --append-eod (the default)",
		"dataset-impl", mg, "the output is always the mmap indexed dataset; leave it out",
		"split-sentences", mg, split,
		"split_sentences", fx, split,
		"keep-newlines", mg, split,
		"log-interval", mg, progress,
		"log_interval", fx, progress,
		"chinese", fx, chinese,
		"cn_whole_word_segment", fx, chinese,
		"cn_seg_func", fx, chinese,
		"cn_splited", fx, chinese,
		"cn_split_dimer", fx, chinese,
		NULL, NULL, NULL,
	};
	gpt_opts_foreign_hint(arg, tbl, err);
}
