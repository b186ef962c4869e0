/* gpt-infer: prompts in, prompt + generation out; or the perplexity of a
 * text or dataset. (Part of lib/infer.) */
#include "infer/infer.h"

#include "ckpt/ckpt.h"
#include "data/data.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct run {
	const gpt_infer_args *a;
	const gpt_tokenizer *tok;
	FILE *out;
	char **text;     /* prompts as given */
	size_t *text_len;
	int32_t **ids;   /* and as encoded (after --truncate) */
	int64_t *len;
	gpt_buf dec;     /* scratch for decoding */
} run;

/* --stop: whether the generated text so far contains the stop string. */
static int stop_at(void *ctx, const int32_t *ids, int64_t n)
{
	run *r = ctx;
	gpt_err err = {0};
	gpt_buf_reset(&r->dec);
	if (gpt_decode(r->tok, ids, n, &r->dec, &err))
		return 0;
	return memmem(r->dec.data, r->dec.len, r->a->stop, strlen(r->a->stop)) != NULL;
}

static int emit(void *ctx, const gpt_gen_result *res, gpt_err *err)
{
	run *r = ctx;
	gpt_buf_reset(&r->dec);
	int rc = gpt_decode(r->tok, res->ids, res->n, &r->dec, err);
	if (rc)
		return rc;
	size_t n = r->dec.len;
	if (r->a->stop) {
		const char *at = memmem(r->dec.data, n, r->a->stop, strlen(r->a->stop));
		if (at)
			n = (size_t)(at - (const char *)r->dec.data);
	}
	const char *prompt = r->text[res->prompt];
	size_t plen = r->text_len[res->prompt];
	if (!r->a->jsonl) {
		fwrite(prompt, 1, plen, r->out);
		fwrite(r->dec.data, 1, n, r->out);
		fputc('\n', r->out);
	} else {
		gpt_buf p = GPT_BUF_INIT, g = GPT_BUF_INIT;
		rc = gpt_utf8_lossy(prompt, plen, &p, err);
		if (!rc)
			rc = gpt_utf8_lossy(r->dec.data, n, &g, err);
		json_t *ids = json_array(), *pids = json_array();
		for (int64_t i = 0; ids && i < res->n; i++)
			json_array_append_new(ids, json_integer(res->ids[i]));
		for (int64_t i = 0; pids && i < r->len[res->prompt]; i++)
			json_array_append_new(pids, json_integer(r->ids[res->prompt][i]));
		json_t *o = rc || !ids || !pids
				    ? NULL
				    : json_pack("{s:I,s:I,s:s%,s:s%,s:I,s:b,s:f,s:O,s:O}", "prompt",
						   (json_int_t)res->prompt, "index", (json_int_t)res->index,
						   "prompt_text", p.data ? (char *)p.data : "", p.len,
						   "text", g.data ? (char *)g.data : "", g.len, "tokens",
						   (json_int_t)res->n, "finished", res->finished, "score",
						   res->score, "prompt_ids", pids, "ids", ids);
		json_decref(ids);
		json_decref(pids);
		char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
		if (!rc && !s)
			rc = gpt_err_set(err, GPT_EINTERNAL, "json output: out of memory");
		if (s)
			fprintf(r->out, "%s\n", s);
		free(s);
		json_decref(o);
		gpt_buf_free(&p);
		gpt_buf_free(&g);
	}
	if (!rc && fflush(r->out) != 0)
		rc = gpt_err_errno(err, GPT_EIO, errno, "standard output");
	return rc;
}

static int read_prompts(run *r, FILE *in, int64_t *n, gpt_err *err)
{
	const gpt_infer_args *a = r->a;
	*n = 0;
	if (a->prompts) {
		r->text = gpt_calloc((size_t)a->n_prompts + 1, sizeof *r->text, "prompts", err);
		r->text_len = gpt_calloc((size_t)a->n_prompts + 1, sizeof *r->text_len, "prompts", err);
		if (!r->text || !r->text_len)
			return GPT_EINTERNAL;
		for (int i = 0; i < a->n_prompts; i++) {
			r->text[i] = gpt_strdup(a->prompts[i], err);
			if (!r->text[i])
				return GPT_EINTERNAL;
			r->text_len[i] = strlen(a->prompts[i]);
			(*n)++;
		}
		return 0;
	}
	char *line = NULL;
	size_t cap = 0;
	ssize_t got;
	int64_t have = 0;
	while ((got = getline(&line, &cap, in)) >= 0) {
		if (got && line[got - 1] == '\n')
			line[--got] = 0;
		if (got && line[got - 1] == '\r') /* a file with Windows line ends */
			line[--got] = 0;
		if (*n == have) {
			have = have ? 2 * have : 16;
			char **t = realloc(r->text, (size_t)have * sizeof *t);
			size_t *l = t ? realloc(r->text_len, (size_t)have * sizeof *l) : NULL;
			if (t)
				r->text = t;
			if (!t || !l) {
				free(line);
				return gpt_err_nomem(err, (size_t)have * sizeof *t, "prompts");
			}
			r->text_len = l;
		}
		r->text[*n] = gpt_malloc((size_t)got + 1, "prompt", err);
		if (!r->text[*n]) {
			free(line);
			return GPT_EINTERNAL;
		}
		memcpy(r->text[*n], line, (size_t)got + 1);
		r->text_len[(*n)++] = (size_t)got;
	}
	int bad = ferror(in);
	free(line);
	if (bad)
		return gpt_err_errno(err, GPT_EIO, errno, "standard input");
	return 0;
}

/* Before any of it runs through the model, the dataset is checked to be
 * the model's tokenizer's: one the byte tokenizer made holds, for a model
 * of GPT-2's BPE, ids within its vocabulary that stand for other tokens (a
 * perplexity that means nothing); one made by a larger vocabulary (GPT-2's
 * for a byte model) ids outside the model's. Either is GPT_EDATA saying
 * what to do. */
static int check_ppl_dataset(const gpt_dataset *ds, const gpt_infer_model *m, const gpt_tokenizer *tok,
			     gpt_err *err)
{
	int64_t V = m->shape.vocab_size;
	int bytes = gpt_tokenizer_kind(tok) == GPT_TOK_BYTES, yes = 0;
	char why[256];
	/* a vocabulary whose end-of-text is 256 writes what the test looks for */
	int rc = bytes || gpt_tokenizer_eot(tok) == 256 ? 0 : gpt_dataset_looks_bytes(ds, &yes, why, sizeof why, err);
	if (!rc && yes)
		return gpt_err_set(err, GPT_EDATA,
				   "%s, but the model's vocabulary is GPT-2's (%lld tokens), in which these ids are "
				   "other tokens: its perplexity would mean nothing; make the dataset with the model's "
				   "tokenizer (gpt-preprocess -t gpt2, the default)",
				   why, (long long)V);
	int64_t doc = -1, token;
	int32_t id;
	if (!rc)
		rc = gpt_dataset_find_outside(ds, V, &doc, &token, &id, err);
	if (!rc && doc >= 0)
		rc = gpt_err_set(err, GPT_EDATA,
				 "document %lld, token %lld: id %d is outside the model's vocabulary of %lld%s; make "
				 "the dataset with the model's tokenizer (gpt-preprocess -t %s)",
				 (long long)doc, (long long)token, (int)id, (long long)V,
				 bytes ? " (the byte tokenizer's, ids 0 to 256): the dataset was made with another "
					 "tokenizer, such as GPT-2's (gpt-preprocess's default)"
				       : ": the dataset was made with a larger vocabulary",
				 bytes ? "bytes" : "gpt2");
	return rc;
}

/* --ppl names a dataset when gpt_dataset_open takes it for one by its name
 * (PREFIX.bin, PREFIX.idx, an llm.c shard) or PREFIX.idx exists; anything
 * else is a text file (a .bin read as text gave a perplexity of its bytes). */
static int ppl_dataset(const char *path)
{
	char idx[PATH_MAX];
	if (gpt_ds_prefix_len(path) != strlen(path))
		return 1;
	snprintf(idx, sizeof idx, "%s.idx", path);
	return gpt_path_exists(idx);
}

static int perplexity(const gpt_infer_args *a, gpt_infer_model *m, const gpt_tokenizer *tok,
		      FILE *out, gpt_err *err)
{
	double nll = 0, t0 = gpt_now_s();
	int64_t count = 0, docs = 0;
	int rc = 0;
	if (ppl_dataset(a->ppl)) {
		gpt_dataset *ds;
		rc = gpt_dataset_open(&ds, a->ppl, err);
		if (rc)
			return rc;
		rc = check_ppl_dataset(ds, m, tok, err);
		int32_t *buf = NULL;
		docs = gpt_dataset_num_docs(ds);
		for (int64_t d = 0; !rc && d < docs; d++) {
			int64_t n = gpt_dataset_doc_len(ds, d);
			int32_t *b = realloc(buf, (size_t)(n ? n : 1) * sizeof *b);
			if (!b) {
				rc = gpt_err_nomem(err, (size_t)n * 4, "document");
				break;
			}
			buf = b;
			rc = gpt_dataset_read(ds, d, 0, n, buf, err);
			if (!rc)
				rc = gpt_perplexity(m, buf, n, &nll, &count, err);
		}
		free(buf);
		gpt_dataset_close(ds);
	} else {
		char *text;
		size_t len;
		rc = gpt_file_read_all(a->ppl, 0, &text, &len, err);
		if (rc)
			return rc;
		gpt_encoder *e;
		gpt_ids ids = GPT_IDS_INIT;
		rc = gpt_encoder_new(&e, tok, err);
		if (!rc) {
			rc = gpt_encode(e, text, len, &ids, err);
			gpt_encoder_free(e);
		}
		free(text);
		docs = 1;
		if (!rc)
			rc = gpt_perplexity(m, ids.data, ids.len, &nll, &count, err);
		gpt_ids_free(&ids);
	}
	if (rc)
		return gpt_err_prefix(err, "%s", a->ppl);
	if (count == 0)
		return gpt_err_set(err, GPT_EDATA, "%s: fewer than 2 tokens; nothing to predict", a->ppl);
	double secs = gpt_now_s() - t0, loss = nll / (double)count;
	if (a->jsonl)
		fprintf(out, "{\"perplexity\":%.17g,\"loss\":%.17g,\"tokens\":%lld,\"documents\":%lld}\n",
			exp(loss), loss, (long long)count, (long long)docs);
	else
		fprintf(out, "perplexity: %.4f, loss: %.6f, tokens: %lld, documents: %lld\n", exp(loss),
			loss, (long long)count, (long long)docs);
	if (fflush(out) != 0)
		return gpt_err_errno(err, GPT_EIO, errno, "standard output");
	if (a->stats && a->err_out)
		fprintf(a->err_out, "perplexity: %lld tokens predicted in %.3f s, %.1f tokens/s\n",
			(long long)count, secs, secs > 0 ? (double)count / secs : 0.0);
	return 0;
}

/* FleetX names the model on the command line: tools/inference.py with
 * -o Inference.model_dir=DIR (an exported model), tasks/gpt/generation.py
 * with -o Engine.save_load.ckpt_dir=DIR (a checkpoint); gpt-infer reads
 * both kinds. The value of such an override, or NULL. */
static const char *model_override(const char *ov)
{
	static const char *const keys[] = {"Inference.model_dir=", "Engine.save_load.ckpt_dir="};
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
		if (strncmp(ov, keys[i], strlen(keys[i])) == 0)
			return ov + strlen(keys[i]);
	return NULL;
}

static int setup(const gpt_infer_args *a, gpt_source *src, gpt_gen_opts *g, gpt_err *err)
{
	gpt_config *cfg = gpt_source_config(src);
	int rc = 0, nkeys;
	/* the origin of the model's own config.yaml, before -c reads over it */
	const char *model_where = NULL;
	gpt_config_keys(&nkeys);
	for (int k = 0; k < nkeys && !model_where; k++)
		if (cfg->origin[k].src == GPT_SRC_FILE)
			model_where = cfg->origin[k].where;
	if (a->config)
		rc = gpt_config_read_file(cfg, a->config, err);
	for (int i = 0; !rc && i < a->n_overrides; i++) {
		if (model_override(a->overrides[i]))
			continue; /* named the model, see gpt_infer_run */
		if (strncmp(a->overrides[i], "Generation.", 11) != 0)
			return gpt_err_set(err, GPT_EUSAGE,
					   "-o %s: only Generation keys apply to gpt-infer (the model "
					   "fixes the rest)", a->overrides[i]);
		if (a->ppl)
			return gpt_err_set(err, GPT_EUSAGE,
					   "-o %s: Generation keys apply to generation, not to --ppl "
					   "(the perplexity depends on the model alone); leave it out",
					   a->overrides[i]);
		rc = gpt_config_override(cfg, a->overrides[i], err);
	}
	if (!rc && cfg->inference.mp_degree > 1)
		rc = gpt_gen_refuse(cfg, model_where, "Inference.mp_degree", NULL, err,
				    "expected 1 (gpt-infer runs a model in one process), found %lld; give 1 "
				    "or leave it out", (long long)cfg->inference.mp_degree);
	if (!rc)
		rc = gpt_gen_opts_from_config(g, cfg, model_where,
					      a->ppl ? 0 : gpt_source_shape(src)->max_pos, err);
	if (rc)
		return rc;
	g->eot = gpt_tokenizer_eot(gpt_source_tokenizer(src));
	/* a model wider than its tokenizer (FleetX's vocab_size 50304) never
	 * generates the ids that have no text */
	g->vocab = gpt_tokenizer_vocab_size(gpt_source_tokenizer(src));
	/* beam search decodes one prompt at a time, its beams together */
	if (a->batch > 0 && g->strategy == GPT_DECODE_BEAM)
		return gpt_err_set(err, GPT_EUSAGE,
				   "--batch %lld: beam_search decodes one prompt at a time, its "
				   "Generation.num_beams beams together, and takes no batch; leave --batch out",
				   (long long)a->batch);
	g->batch = a->batch > 0 ? a->batch : 8;
	return 0;
}

int gpt_infer_run(const gpt_infer_args *a, FILE *in, FILE *out, gpt_err *err)
{
	int cuda = a->device && strcmp(a->device, "cuda") == 0;
	if (a->device && !cuda && strcmp(a->device, "cpu") != 0)
		return gpt_err_set(err, GPT_EUSAGE, "--device %s: expected cpu or cuda", a->device);
	/* without -m: the last -o Inference.model_dir or
	 * Engine.save_load.ckpt_dir, else -c FILE's Inference.model_dir, else
	 * its Engine.save_load.ckpt_dir */
	const char *model = a->model;
	gpt_config ic;
	int rc = 0, have_ic = 0, by_model_dir = 0;
	for (int i = 0; i < a->n_overrides; i++) {
		const char *v = model_override(a->overrides[i]);
		if (!v)
			continue;
		if (a->model)
			return gpt_err_set(err, GPT_EUSAGE,
					   "-o %s names the model, as -m does; give one of them",
					   a->overrides[i]);
		if (!*v)
			return gpt_err_set(err, GPT_EUSAGE, "-o %s: expected a model directory or file",
					   a->overrides[i]);
		model = v;
		by_model_dir = strncmp(a->overrides[i], "Inference.", 10) == 0;
	}
	if (!model && a->config) {
		rc = gpt_config_init(&ic, err);
		have_ic = rc == 0;
		if (!rc)
			rc = gpt_config_read_file(&ic, a->config, err);
		if (!rc && gpt_config_given(&ic, gpt_config_key_find("Inference.model_dir")) &&
		    ic.inference.model_dir) {
			model = ic.inference.model_dir;
			by_model_dir = 1;
		} else if (!rc && gpt_config_given(&ic, gpt_config_key_find("Engine.save_load.ckpt_dir")))
			model = ic.engine.save_load.ckpt_dir;
	}
	if (!rc && !model)
		rc = gpt_err_set(err, GPT_EUSAGE, "-m MODEL is required (or -o Inference.model_dir=DIR, or Inference.model_dir or Engine.save_load.ckpt_dir in the -c file); see gpt-infer --help");
	/* FleetX's tools/inference.py reads the model that its tools/export.py
	 * wrote into Engine.save_load.output_dir from Inference.model_dir; the
	 * bundle gpt-export writes there (beside the run's checkpoint when that
	 * is the run's output_dir) is the model that key names. */
	char bundle[PATH_MAX];
	struct stat dst;
	if (!rc && by_model_dir && stat(model, &dst) == 0 && S_ISDIR(dst.st_mode) &&
	    (size_t)snprintf(bundle, sizeof bundle, "%s/%s", model, GPT_EXPORT_BUNDLE_NAME) < sizeof bundle &&
	    gpt_path_exists(bundle)) {
		char ck[PATH_MAX];
		snprintf(ck, sizeof ck, "%s/latest", model);
		if (a->err_out && gpt_path_exists(ck))
			fprintf(a->err_out,
				"gpt-infer: Inference.model_dir %s: reading the bundle %s, not the checkpoint "
				"beside it (-m %s reads that)\n", model, bundle, model);
		model = bundle;
	}
	gpt_source *src = NULL;
	if (!rc)
		rc = gpt_source_open(&src, model, a->exe, err);
	if (have_ic)
		gpt_config_free(&ic);
	if (rc)
		return rc;
	gpt_gen_opts g;
	run r = {a, gpt_source_tokenizer(src), out, NULL, NULL, NULL, NULL, GPT_BUF_INIT};
	gpt_infer_model m = {0};
	int64_t n = 0;
	int32_t **ids = NULL;
	int64_t *len = NULL;
	rc = setup(a, src, &g, err);
	if (!rc && a->stop) {
		if (!*a->stop)
			rc = gpt_err_set(err, GPT_EUSAGE, "--stop: expected a non-empty string");
		g.stop = stop_at;
		g.stop_ctx = &r;
	}
	gpt_gen_stats st = {0};
	if (a->stats)
		g.stats = &st;
	if (!rc)
		rc = gpt_source_load(src, &m, a->dtype_set ? a->dtype : gpt_source_dtype(src),
				     a->threads, err);
	if (!rc && cuda)
		rc = gpt_infer_model_to_cuda(&m, 0, err);
	if (!rc && a->ppl) {
		rc = perplexity(a, &m, r.tok, out, err);
		goto out;
	}
	if (!rc)
		rc = read_prompts(&r, in, &n, err);
	if (!rc && n == 0)
		rc = gpt_err_set(err, GPT_EUSAGE, "no prompt: give prompts as arguments or one a line on standard input");
	ids = rc ? NULL : gpt_calloc((size_t)n, sizeof *ids, "prompts", err);
	len = rc ? NULL : gpt_calloc((size_t)n, sizeof *len, "prompts", err);
	if (!rc && (!ids || !len))
		rc = GPT_EINTERNAL;
	r.ids = ids;
	r.len = len;
	gpt_encoder *e = NULL;
	if (!rc)
		rc = gpt_encoder_new(&e, r.tok, err);
	int64_t room = m.shape.max_pos - g.max_dec_len;
	for (int64_t i = 0; !rc && i < n; i++) {
		const uint8_t *t = (const uint8_t *)r.text[i];
		size_t ok = gpt_utf8_valid_prefix(t, r.text_len[i]);
		/* prompts from standard input are its lines, one each */
		char where[64];
		snprintf(where, sizeof where, a->n_prompts ? "prompt %lld" : "standard input, line %lld (prompt %lld)",
			 (long long)i + 1, (long long)i + 1);
		if (ok != r.text_len[i]) {
			rc = gpt_err_set(err, GPT_EDATA,
					 "%s: not valid UTF-8 at byte %zu of %zu (0x%02x), counting from 1; give UTF-8 text (iconv -t UTF-8 converts)",
					 where, ok + 1, r.text_len[i], t[ok]);
			break;
		}
		gpt_ids v = GPT_IDS_INIT;
		rc = gpt_encode(e, t, r.text_len[i], &v, err);
		ids[i] = v.data;
		len[i] = v.len;
		if (!rc && len[i] == 0)
			rc = gpt_err_set(err, GPT_EUSAGE, "%s: empty; give some text%s", where,
					 a->n_prompts ? "" : ", or remove the blank line (every line is a prompt)");
		if (!rc && a->truncate && room > 0 && len[i] > room) {
			memmove(ids[i], ids[i] + (len[i] - room), (size_t)room * sizeof(int32_t));
			len[i] = room;
		}
	}
	gpt_encoder_free(e);
	if (!rc)
		rc = gpt_generate(&m, &g, n, (const int32_t *const *)ids, len, emit, &r, err);
	if (!rc && a->stats && a->err_out)
		fprintf(a->err_out,
			"prompt: %lld tokens in %.3f s, %.1f tokens/s; generation: %lld tokens in "
			"%.3f s, %.1f tokens/s\n",
			(long long)st.prompt_tokens, st.prompt_s,
			st.prompt_s > 0 ? (double)st.prompt_tokens / st.prompt_s : 0.0,
			(long long)st.generated_tokens, st.generate_s,
			st.generate_s > 0 ? (double)st.generated_tokens / st.generate_s : 0.0);
	/* the prompt passes after the first, without its one-time costs */
	if (!rc && a->stats && a->err_out && st.prompt_passes > 1) {
		int64_t nt = st.prompt_tokens - st.first_prompt_tokens;
		double s = st.prompt_s - st.first_prompt_s;
		fprintf(a->err_out, "prompt passes after the first: %lld in %.6f s, %lld tokens, %.1f tokens/s\n",
			(long long)(st.prompt_passes - 1), s, (long long)nt, s > 0 ? (double)nt / s : 0.0);
	}
	/* on a GPU: how many generation steps ran as a CUDA graph (decode.c) */
	if (!rc && a->stats && a->err_out && m.cuda)
		fprintf(a->err_out, "CUDA graphs: %lld steps%s%s\n", (long long)m.graph_steps,
			m.graph_off ? ", then off: " : "", m.graph_off ? m.graph_why : "");
out:
	for (int64_t i = 0; i < n; i++) {
		if (ids)
			free(ids[i]);
		free(r.text[i]);
	}
	free(ids);
	free(len);
	free(r.text);
	free(r.text_len);
	gpt_buf_free(&r.dec);
	gpt_infer_model_free(&m);
	gpt_source_free(src);
	return rc;
}
