/* The inference bundle: a tar (zstd or gzip through libarchive) of
 * manifest.json, config.yaml, model.safetensors and the tokenizer files.
 * (Part of lib/ckpt.) */
#include "ckpt/export.h"

#include <archive.h>
#include <archive_entry.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BUNDLE_VERSION 1

static int ends_with(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);
	return a >= b && strcmp(s + a - b, suf) == 0;
}

/* Weight matrices go to int8; wpe, biases and LayerNorms stay fp32. */
static int quantized(const gpt_param_info *p)
{
	return p->ndim >= 2 && strcmp(p->name, "wpe") != 0 && !ends_with(p->name, ".bias");
}

/* model.safetensors in memory, in the export dtype. */
static int build_weights(gpt_export_model *m, gpt_dtype dt, gpt_buf *out, gpt_err *err)
{
	int64_t n = m->n_table, ne = 0;
	/* int8 of a QAT checkpoint: one activation scale per quantized linear,
	 * and its PACT clip with activation PACT */
	int nf = m->qat && m->qat_opts.pact[GPT_PACT_ACT] ? 2 : 1;
	int64_t na = dt == GPT_DTYPE_I8 && m->qat ? nf * m->shape.layers * GPT_QAT_LINEARS : 0;
	gpt_st_entry *e = gpt_calloc((size_t)(2 * n + na), sizeof *e, "tensors", err);
	void **data = gpt_calloc((size_t)(2 * n + na), sizeof *data, "tensors", err);
	char **names = gpt_calloc((size_t)(n + na), sizeof *names, "tensors", err);
	int rc = e && data && names ? 0 : GPT_EINTERNAL;
	for (int64_t i = 0; !rc && i < n; i++) {
		const gpt_param_info *p = &m->table[i];
		float *w = gpt_malloc((size_t)p->numel * sizeof(float), p->name, err);
		if (!w) {
			rc = GPT_EINTERNAL;
			break;
		}
		rc = gpt_export_model_read(m, i, w, err);
		gpt_st_entry *t = &e[ne];
		t->name = p->name;
		t->ndim = p->ndim;
		memcpy(t->shape, p->shape, sizeof p->shape);
		if (rc) {
			free(w);
		} else if (dt == GPT_DTYPE_I8 && quantized(p)) {
			int64_t cols = p->shape[p->ndim - 1], rows = p->numel / cols;
			int8_t *q = gpt_malloc((size_t)p->numel, p->name, err);
			float *sc = gpt_malloc((size_t)rows * sizeof(float), p->name, err);
			names[i] = gpt_malloc(strlen(p->name) + 8, p->name, err);
			if (!q || !sc || !names[i]) {
				free(q);
				free(sc);
				free(w);
				rc = GPT_EINTERNAL;
				break;
			}
			int done = 0;
			rc = gpt_export_qat_weight(m, i, w, q, sc, &done, err);
			if (!done)
				gpt_quantize_rows(w, rows, cols, q, sc);
			free(w);
			if (rc) {
				free(q);
				free(sc);
				break;
			}
			t->dtype = GPT_DTYPE_I8;
			t->data = data[ne++] = q;
			sprintf(names[i], "%s.scale", p->name);
			e[ne] = (gpt_st_entry){names[i], GPT_DTYPE_F32, 1, {rows}, sc};
			data[ne++] = sc;
		} else if (dt == GPT_DTYPE_BF16 || dt == GPT_DTYPE_F16) {
			void *h = gpt_malloc((size_t)p->numel * 2, p->name, err);
			rc = h ? gpt_convert(h, dt, w, GPT_DTYPE_F32, (size_t)p->numel, err) : GPT_EINTERNAL;
			free(w);
			t->dtype = dt;
			t->data = data[ne++] = h;
		} else {
			t->dtype = GPT_DTYPE_F32;
			t->data = data[ne++] = w;
		}
	}
	/* fake-quantized inputs: h.{i}.{linear}.input_scale, the clip threshold
	 * s of fq(x) = round(clamp(x, -s, s) Q / s) s / Q, Q = 2^(bits-1) - 1;
	 * with activation PACT also h.{i}.{linear}.input_clip, the alpha that
	 * clips x before (training computed fq(clamp(x, -alpha, alpha))) */
	static const char *const field[2] = {"scale", "act_alpha"}, *const suffix[2] = {"input_scale", "input_clip"};
	for (int64_t l = 0; !rc && l < m->shape.layers && na; l++)
		for (int k = 0; !rc && k < GPT_QAT_LINEARS; k++)
			for (int f = 0; !rc && f < nf; f++) {
				if (!m->qat_opts.quantized[k])
					continue;
				int64_t at = n + (f * m->shape.layers + l) * GPT_QAT_LINEARS + k;
				float *v = gpt_malloc(sizeof *v, "activation scale", err);
				names[at] = gpt_malloc(64, "activation scale", err);
				if (!v || !names[at]) {
					free(v);
					rc = GPT_EINTERNAL;
					break;
				}
				snprintf(names[at], 64, "h.%lld.%s.%s", (long long)l,
					 gpt_qat_linear_name((gpt_qat_linear)k), suffix[f]);
				rc = gpt_export_qat_value(m, l, (gpt_qat_linear)k, field[f], v, err);
				e[ne] = (gpt_st_entry){names[at], GPT_DTYPE_F32, 1, {1}, v};
				data[ne++] = v;
			}
	char bits[16];
	snprintf(bits, sizeof bits, "%d", m->qat_opts.act_bits);
	const char *meta[] = {"format", "gptkit", "dtype", gpt_dtype_name(dt), "activation_bits", bits};
	if (!rc)
		rc = gpt_st_build(e, (int)ne, meta, na ? 3 : 2, out, err);
	for (int64_t i = 0; data && i < 2 * n + na; i++)
		free(data[i]);
	for (int64_t i = 0; names && i < n + na; i++)
		free(names[i]);
	free(e);
	free(data);
	free(names);
	return rc;
}

typedef struct member {
	const char *name;
	const void *data;
	size_t len;
	char *owned;
} member;

/* libarchive's failure on out: its errno's words where it kept one */
static int archive_fail(struct archive *a, const char *out, const char *what, gpt_err *err)
{
	int e = archive_errno(a);
	if (e > 0)
		return gpt_err_errno(err, GPT_EIO, e, "%s: %s", out, what);
	return gpt_err_set(err, GPT_EIO, "%s: %s: %s", out, what, archive_error_string(a));
}

static int add_member(struct archive *a, const char *out, const member *f, gpt_err *err)
{
	struct archive_entry *e = archive_entry_new();
	if (!e)
		return gpt_err_set(err, GPT_EINTERNAL, "libarchive: out of memory");
	archive_entry_set_pathname(e, f->name);
	archive_entry_set_size(e, (la_int64_t)f->len);
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0644);
	archive_entry_set_mtime(e, time(NULL), 0);
	int rc = 0;
	if (archive_write_header(a, e) != ARCHIVE_OK ||
	    (f->len && archive_write_data(a, f->data, f->len) != (la_ssize_t)f->len))
		rc = archive_fail(a, out, f->name, err);
	archive_entry_free(e);
	return rc;
}

static char *manifest(gpt_export_model *m, gpt_dtype dt, const member *f, int n)
{
	json_t *files = json_object();
	for (int i = 0; i < n; i++) {
		char hex[17];
		gpt_xxh3_hex(gpt_xxh3_64(f[i].data, f[i].len), hex);
		json_object_set_new(files, f[i].name,
				    json_pack("{s:I,s:s}", "bytes", (json_int_t)f[i].len, "xxh3", hex));
	}
	json_t *j = json_pack("{s:s,s:i,s:s,s:s,s:s,s:I,s:o}", "format", "gptkit-bundle", "version",
			      BUNDLE_VERSION, "gptkit", GPT_VERSION, "dtype", gpt_dtype_name(dt),
			      "tokenizer", m->byte_tokenizer ? "bytes" : "gpt2", "step",
			      (json_int_t)m->step, "files", files);
	/* how int8 weights were made: from the learned scales of quantization-
	 * aware training (activations too), or after training (weights only) */
	if (j && dt == GPT_DTYPE_I8) {
		const gpt_qat_opts *q = &m->qat_opts;
		json_t *qj = m->qat ? json_pack("{s:s,s:i,s:s,s:i,s:s}", "method", "qat", "weight_bits",
						q->weight_bits, "weight_quantize_type",
						q->weight_per_channel ? "channel_wise_abs_max" : "abs_max",
						"activation_bits", q->act_bits, "activation_quantize_type",
						q->act_moving_average ? "moving_average_abs_max" : "abs_max")
				    : json_pack("{s:s,s:i,s:s}", "method", "post-training", "weight_bits", 8,
						"weight_quantize_type", "channel_wise_abs_max");
		json_object_set_new(j, "quantization", qj);
	}
	char *s = j ? json_dumps(j, JSON_INDENT(1) | JSON_PRESERVE_ORDER) : NULL;
	json_decref(j);
	return s;
}

int gpt_export_bundle_filter(const char *out)
{
	if (ends_with(out, ".tar.zst") || ends_with(out, ".tzst"))
		return ARCHIVE_FILTER_ZSTD;
	if (ends_with(out, ".tar.gz") || ends_with(out, ".tgz"))
		return ARCHIVE_FILTER_GZIP;
	if (ends_with(out, ".tar"))
		return ARCHIVE_FILTER_NONE;
	return -1;
}

int gpt_export_bundle(gpt_export_model *m, const gpt_export_opts *o, const char *out, gpt_err *err)
{
	int filter = gpt_export_bundle_filter(out);
	if (filter < 0)
		return gpt_err_set(err, GPT_EUSAGE,
				   "-o %s: expected a bundle name ending in .tar.zst, .tzst, .tar.gz, .tgz or .tar%s", out,
				   ends_with(out, ".gguf") ? "; a GGUF file is written with --format gguf" : "");
	gpt_buf w = GPT_BUF_INIT;
	member f[5];
	int nf = 0, rc = build_weights(m, o->dtype, &w, err);
	if (rc) {
		gpt_buf_free(&w);
		return rc;
	}
	f[nf++] = (member){"config.yaml", m->config, m->config_len, NULL};
	f[nf++] = (member){"model.safetensors", w.data, w.len, NULL};
	/* under the names the bundle's reader takes, whatever they were */
	const char *tok[2] = {"encoder.json", "vocab.bpe"};
	for (int i = 0; !rc && !m->byte_tokenizer && i < 2; i++) {
		char p[PATH_MAX + 32];
		snprintf(p, sizeof p, "%s/%s", m->vocab, m->vocab_files[i]);
		f[nf] = (member){tok[i], NULL, 0, NULL};
		rc = gpt_file_read_all(p, 0, &f[nf].owned, &f[nf].len, err);
		f[nf].data = f[nf].owned;
		nf += rc == 0;
	}
	char *man = rc ? NULL : manifest(m, o->dtype, f, nf);
	if (!rc && !man)
		rc = gpt_err_set(err, GPT_EINTERNAL, "manifest: out of memory");
	gpt_afile af;
	if (!rc)
		rc = gpt_afile_open(&af, out, err);
	if (!rc) {
		struct archive *a = archive_write_new();
		if (!a || archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
		    archive_write_add_filter(a, filter) != ARCHIVE_OK ||
		    /* no zero padding after the compressed stream (zstd rejects it) */
		    archive_write_set_bytes_in_last_block(a, 1) != ARCHIVE_OK ||
		    archive_write_open_FILE(a, af.fp) != ARCHIVE_OK)
			rc = gpt_err_set(err, GPT_EINTERNAL, "%s: libarchive cannot write this kind: %s", out,
					 a ? archive_error_string(a) : "out of memory");
		member mf = {"manifest.json", man, man ? strlen(man) : 0, NULL};
		if (!rc)
			rc = add_member(a, out, &mf, err);
		for (int i = 0; !rc && i < nf; i++)
			rc = add_member(a, out, &f[i], err);
		if (!rc && archive_write_close(a) != ARCHIVE_OK)
			rc = archive_fail(a, out, "finishing the archive", err);
		archive_write_free(a);
		if (rc)
			gpt_afile_abort(&af);
		else
			rc = gpt_afile_commit(&af, err);
	}
	free(man);
	for (int i = 0; i < nf; i++)
		free(f[i].owned);
	gpt_buf_free(&w);
	return rc;
}
