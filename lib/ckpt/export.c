/* gpt-export's common part: the model of a checkpoint (shape, weights,
 * config sections, tokenizer), safetensors in memory, int8 rows, and the
 * choice of writer. (Part of lib/ckpt.) */
#include "ckpt/export.h"
#include "ckpt/ckpt-impl.h"

#include "config/config.h"
#include "cpu/cpu.h"
#include "text/text.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int gpt_export_format_parse(const char *s, gpt_export_format *out)
{
	static const char *const names[] = {"bundle", "gguf", "hf"};
	for (int i = 0; i < 3; i++)
		if (strcmp(s, names[i]) == 0) {
			*out = (gpt_export_format)i;
			return 0;
		}
	return -1;
}

/* The top-level sections `Model:` and `Generation:` of a YAML text, as
 * written by gpt_config_write_yaml (sections at column 0). */
static int keep_sections(const char *y, char **out, size_t *len, gpt_err *err)
{
	gpt_buf b = GPT_BUF_INIT;
	int keep = 0, rc = gpt_buf_puts(&b, "# gptkit inference configuration: the model and generation settings\n", err);
	for (const char *p = y; !rc && *p;) {
		const char *eol = strchr(p, '\n');
		size_t n = eol ? (size_t)(eol - p + 1) : strlen(p);
		if (*p != ' ' && *p != '\n' && *p != '#' && *p != '\t')
			keep = strncmp(p, "Model:", 6) == 0 || strncmp(p, "Generation:", 11) == 0;
		if (keep)
			rc = gpt_buf_append(&b, p, n, err);
		p += n;
	}
	if (!rc && !strstr(b.data ? (char *)b.data : "", "Model:"))
		rc = gpt_err_set(err, GPT_EDATA, "config.yaml of the checkpoint has no Model section");
	if (rc) {
		gpt_buf_free(&b);
		return rc;
	}
	*out = (char *)b.data;
	*len = b.len;
	return 0;
}

/* Every tensor the config's model has, with the shape it gives, before a
 * writer sizes its buffers by the config: a config.yaml that names a larger
 * model than the checkpoint holds is an error, not a huge allocation. */
static int check_shapes(const gpt_export_model *m, gpt_err *err)
{
	int n = gpt_ckpt_tensor_count(m->ck);
	for (int64_t i = 0; i < m->n_table; i++) {
		const gpt_param_info *p = &m->table[i];
		int k = 0, nd = 0;
		const char *name = NULL;
		const int64_t *shape = NULL;
		gpt_dtype dt;
		for (; k < n; k++)
			if (!gpt_ckpt_tensor_info(m->ck, k, &name, &dt, &nd, &shape) &&
			    strcmp(name, p->name) == 0)
				break;
		if (k == n)
			return gpt_err_set(err, GPT_EDATA,
					   "%s: no tensor '%s', which the model of its config.yaml has; "
					   "the checkpoint is incomplete", gpt_ckpt_path(m->ck), p->name);
		if (nd != p->ndim || memcmp(shape, p->shape, sizeof(int64_t) * (size_t)nd) != 0) {
			char a[128] = "", b[128] = "";
			for (int d = 0; d < nd; d++)
				snprintf(a + strlen(a), sizeof a - strlen(a), "%s%lld", d ? ", " : "",
					 (long long)shape[d]);
			for (int d = 0; d < p->ndim; d++)
				snprintf(b + strlen(b), sizeof b - strlen(b), "%s%lld", d ? ", " : "",
					 (long long)p->shape[d]);
			return gpt_err_set(err, GPT_EDATA,
					   "%s: tensor '%s' has shape [%s] but its config.yaml gives [%s]; "
					   "the config and the weights disagree",
					   gpt_ckpt_path(m->ck), p->name, a, b);
		}
	}
	return 0;
}

/* A QAT checkpoint's quantization settings, which say how its weights are
 * stored in int8. */
static int read_qat(gpt_export_model *m, gpt_err *err)
{
	gpt_config cfg;
	int rc = gpt_ckpt_read_config(m->ck, &cfg, err);
	if (!rc && cfg.quantization.enable) {
		m->qat = 1;
		if ((rc = gpt_qat_opts_from_config(&m->qat_opts, &cfg, err)))
			gpt_err_prefix(err, "%s/config.yaml", gpt_ckpt_path(m->ck));
	}
	gpt_config_free(&cfg);
	return rc;
}

int gpt_export_model_open(gpt_export_model *m, const char *path, const gpt_export_opts *o,
			  gpt_err *err)
{
	memset(m, 0, sizeof *m);
	int rc = gpt_ckpt_open(&m->ck, path, err);
	if (rc)
		return rc;
	rc = gpt_ckpt_model_shape(m->ck, &m->shape, err);
	if (!rc && gpt_param_table(&m->shape, &m->table, &m->n_table, err))
		rc = gpt_err_prefix(err, "%s/config.yaml", gpt_ckpt_path(m->ck));
	if (!rc)
		rc = read_qat(m, err);
	if (!rc)
		rc = check_shapes(m, err);
	if (!rc)
		rc = keep_sections(gpt_ckpt_config_yaml(m->ck), &m->config, &m->config_len, err);
	m->step = gpt_ckpt_step(m->ck);
	m->byte_tokenizer = m->shape.vocab_size == 257;
	m->eot = m->byte_tokenizer ? 256 : 50256;
	/* a vocabulary named for a model that ships none would go unused */
	if (!rc && m->byte_tokenizer && o->vocab)
		rc = gpt_err_set(err, GPT_EUSAGE,
				 "--vocab %s: the model in %s has the byte tokenizer's vocabulary of 257, which "
				 "needs no vocabulary files and ships none; leave --vocab out",
				 o->vocab, gpt_ckpt_path(m->ck));
	if (!rc && !m->byte_tokenizer) {
		if (o->vocab)
			snprintf(m->vocab, sizeof m->vocab, "%s", o->vocab);
		else
			rc = gpt_vocab_find(o->exe, NULL, m->vocab, sizeof m->vocab, err);
		gpt_tokenizer *t = NULL;
		if (!rc)
			rc = gpt_tokenizer_open_bpe(&t, m->vocab, err);
		if (rc == GPT_ENOINPUT) /* the message says how to get the files */
			gpt_err_prefix(err, "%s: its %lld-token model needs the GPT-2 vocabulary it was trained with",
				       gpt_ckpt_path(m->ck), (long long)m->shape.vocab_size);
		if (!rc && gpt_tokenizer_vocab_size(t) > m->shape.vocab_size)
			rc = gpt_err_set(err, GPT_EDATA,
					 "%s: %d tokens, more than the %lld of the model in %s; pass --vocab DIR with the vocabulary it was trained with",
					 m->vocab, (int)gpt_tokenizer_vocab_size(t), (long long)m->shape.vocab_size,
					 gpt_ckpt_path(m->ck));
		if (!rc)
			m->eot = gpt_tokenizer_eot(t);
		gpt_tokenizer_free(t);
		/* the pair the tokenizer read, whichever names it goes by */
		if (!rc && gpt_vocab_pair(m->vocab, &m->vocab_files[0], &m->vocab_files[1]))
			rc = gpt_err_set(err, GPT_ENOINPUT,
					 "%s: expected encoder.json + vocab.bpe (the bundle carries them)", m->vocab);
	}
	if (rc)
		gpt_export_model_close(m);
	return rc;
}

void gpt_export_model_close(gpt_export_model *m)
{
	if (m->ck)
		gpt_ckpt_close(m->ck);
	free(m->table);
	free(m->config);
	memset(m, 0, sizeof *m);
}

int gpt_export_model_read(gpt_export_model *m, int64_t i, float *dst, gpt_err *err)
{
	const gpt_param_info *p = &m->table[i];
	gpt_box box = gpt_box_full(p->ndim, p->shape);
	int rc = gpt_ckpt_read_box(m->ck, p->name, GPT_DTYPE_F32, p->ndim, p->shape, &box, dst, err);
	/* NaN and Inf have no int8 or q8_0 value, and no use in a model */
	for (int64_t k = 0; !rc && k < p->numel; k++)
		if (!isfinite(dst[k]))
			rc = gpt_err_set(err, GPT_EDATA,
					 "%s: tensor '%s' holds %g at element %lld; expected finite values "
					 "(export an earlier checkpoint)",
					 gpt_ckpt_path(m->ck), p->name, (double)dst[k], (long long)k);
	return rc;
}

/* Which QAT linear a table entry's weight is, or -1. */
static int qat_linear_of(const gpt_param_info *p)
{
	if (p->layer < 0)
		return -1;
	const char *rest = strchr(p->name + 2, '.');
	for (int k = 0; rest && k < GPT_QAT_LINEARS; k++) {
		char want[32];
		snprintf(want, sizeof want, ".%s.weight", gpt_qat_linear_name((gpt_qat_linear)k));
		if (strcmp(rest, want) == 0)
			return k;
	}
	return -1;
}

int gpt_export_qat_weight(gpt_export_model *m, int64_t i, const float *w, int8_t *q, float *step,
			  int *done, gpt_err *err)
{
	const gpt_param_info *p = &m->table[i];
	int k = qat_linear_of(p);
	*done = 0;
	if (!m->qat || k < 0 || !m->qat_opts.quantized[k])
		return 0;
	const gpt_qat_opts *o = &m->qat_opts;
	if (o->weight_bits > 8)
		return gpt_err_set(err, GPT_EUSAGE,
				   "--dtype int8: %s was trained with Quantization.weight_bits %d, more than int8 holds; export fp32 or train with 8 bits or fewer",
				   gpt_ckpt_path(m->ck), o->weight_bits);
	int64_t cols = p->shape[p->ndim - 1], rows = p->numel / cols;
	float *wc = NULL;
	if (o->pact[GPT_PACT_WEIGHT]) {
		/* training quantized clip(W, alpha) */
		float a;
		int rc = gpt_export_qat_value(m, p->layer, (gpt_qat_linear)k, "weight_alpha", &a, err);
		if (rc)
			return rc;
		wc = gpt_malloc((size_t)p->numel * sizeof *wc, p->name, err);
		if (!wc)
			return GPT_EINTERNAL;
		for (int64_t j = 0; j < p->numel; j++)
			wc[j] = w[j] > a ? a : w[j] < -a ? -a : w[j];
		w = wc;
	}
	/* the scales the training computed from these very weights */
	float *s = gpt_calloc((size_t)rows, sizeof *s, "weight scales", err);
	if (!s) {
		free(wc);
		return GPT_EINTERNAL;
	}
	for (int64_t r = 0; r < rows; r++)
		for (int64_t c = 0; c < cols; c++) {
			float a = fabsf(w[r * cols + c]);
			float *d = &s[o->weight_per_channel ? r : 0];
			if (a > *d)
				*d = a;
		}
	gpt_quant_rows(w, rows, cols, s, o->weight_per_channel, o->weight_bits, NULL, q);
	float Q = gpt_quant_qmax(o->weight_bits);
	for (int64_t r = 0; r < rows; r++) {
		float sr = s[o->weight_per_channel ? r : 0];
		step[r] = sr > 0 ? sr / Q : 0.0f;
	}
	free(s);
	free(wc);
	*done = 1;
	return 0;
}

int gpt_export_qat_value(gpt_export_model *m, int64_t l, gpt_qat_linear k, const char *field,
			 float *v, gpt_err *err)
{
	char name[64];
	snprintf(name, sizeof name, "qat.h.%lld.%s.%s", (long long)l, gpt_qat_linear_name(k), field);
	int64_t one = 1;
	gpt_box box = gpt_box_full(1, &one);
	int rc = gpt_ckpt_read_box(m->ck, name, GPT_DTYPE_F32, 1, &one, &box, v, err);
	return rc ? gpt_err_prefix(err, "the state of quantization-aware training") : 0;
}

int gpt_st_build(const gpt_st_entry *e, int n, const char *const *meta, int n_meta, gpt_buf *out,
		 gpt_err *err)
{
	json_t *h = json_object(), *md = n_meta ? json_object() : NULL;
	uint64_t off = 0;
	for (int i = 0; i < n_meta; i++)
		json_object_set_new(md, meta[2 * i], json_string(meta[2 * i + 1]));
	if (md)
		json_object_set_new(h, "__metadata__", md);
	for (int i = 0; i < n; i++) {
		json_t *shape = json_array();
		uint64_t numel = 1;
		for (int d = 0; d < e[i].ndim; d++) {
			json_array_append_new(shape, json_integer(e[i].shape[d]));
			numel *= (uint64_t)e[i].shape[d];
		}
		uint64_t bytes = numel * gpt_dtype_size(e[i].dtype);
		json_object_set_new(h, e[i].name,
				    json_pack("{s:s,s:o,s:[I,I]}", "dtype", gpt_st_dtype_name(e[i].dtype),
					      "shape", shape, "data_offsets", (json_int_t)off,
					      (json_int_t)(off + bytes)));
		off += bytes;
	}
	char *text = json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(h);
	if (!text)
		return gpt_err_set(err, GPT_EINTERNAL, "safetensors header: out of memory");
	size_t hl = strlen(text), pad = (8 - hl % 8) % 8;
	uint64_t hlen = hl + pad;
	unsigned char le[8];
	for (int i = 0; i < 8; i++)
		le[i] = (unsigned char)(hlen >> (8 * i));
	int rc = gpt_buf_reserve(out, 8 + hlen + off, err);
	if (!rc)
		rc = gpt_buf_append(out, le, 8, err);
	if (!rc)
		rc = gpt_buf_append(out, text, hl, err);
	if (!rc)
		rc = gpt_buf_append(out, "        ", pad, err);
	free(text);
	for (int i = 0; !rc && i < n; i++) {
		uint64_t numel = 1;
		for (int d = 0; d < e[i].ndim; d++)
			numel *= (uint64_t)e[i].shape[d];
		rc = gpt_buf_append(out, e[i].data, numel * gpt_dtype_size(e[i].dtype), err);
	}
	return rc;
}

void gpt_quantize_rows(const float *x, int64_t rows, int64_t cols, int8_t *q, float *scale)
{
	for (int64_t r = 0; r < rows; r++) {
		const float *row = x + r * cols;
		float mx = 0;
		for (int64_t c = 0; c < cols; c++)
			if (fabsf(row[c]) > mx)
				mx = fabsf(row[c]);
		float s = mx / 127.0f, inv = s > 0 ? 1.0f / s : 0;
		scale[r] = s;
		/* a row of subnormal values has a step whose inverse overflows:
		 * 0 * inf would be NaN, and NaN has no int8 value. Such rows
		 * divide (|x| / s <= 127 still); every other row multiplies. */
		int divide = !isfinite(inv);
		for (int64_t c = 0; c < cols; c++) {
			float v = nearbyintf(divide ? row[c] / s : row[c] * inv);
			q[r * cols + c] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
		}
	}
}

/* A GGUF may take any name, so an existing file there is replaced only
 * when it is a GGUF (an earlier export) or empty: not a run's `latest`, a
 * dataset's .bin or a checkpoint's weights that a slip of -o names. */
static int gguf_replaceable(const char *out, gpt_err *err)
{
	struct stat st;
	if (stat(out, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0)
		return 0;
	char magic[4] = {0};
	int fd = open(out, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return gpt_err_errno_read(err, errno, "%s: cannot read the file it would replace", out);
	ssize_t got = read(fd, magic, sizeof magic);
	close(fd);
	if (got == (ssize_t)sizeof magic && memcmp(magic, "GGUF", 4) == 0)
		return 0;
	return gpt_err_set(err, GPT_EUSAGE,
			   "%s: exists and is not a GGUF file; gpt-export replaces only an earlier "
			   "export there: remove it or choose another name", out);
}

int gpt_export(const char *ckpt_path, const gpt_export_opts *o, char *out_path, size_t size,
	       gpt_err *err)
{
	static const char *const def[] = {GPT_EXPORT_BUNDLE_NAME, "model.gguf", "model-hf"};
	const char *out = o->out ? o->out : def[o->format];
	char in_dir[PATH_MAX];
	if (!o->out && o->out_dir) {
		if ((size_t)snprintf(in_dir, sizeof in_dir, "%s/%s", o->out_dir, def[o->format]) >= sizeof in_dir)
			return gpt_err_set(err, GPT_EUSAGE, "%s: the output directory's name is too long", o->out_dir);
		out = in_dir;
	}
	if (o->dtype != GPT_DTYPE_F32 && o->dtype != GPT_DTYPE_BF16 && o->dtype != GPT_DTYPE_F16 &&
	    o->dtype != GPT_DTYPE_I8)
		return gpt_err_set(err, GPT_EUSAGE, "--dtype %s: expected fp32, bf16, fp16 or int8",
				   gpt_dtype_name(o->dtype));
	if (o->format == GPT_EXPORT_HF && o->dtype == GPT_DTYPE_I8)
		return gpt_err_set(err, GPT_EUSAGE,
				   "--dtype int8: a Hugging Face GPT-2 directory holds fp32, bf16 or fp16 "
				   "weights; use --format bundle or gguf for int8");
	if (o->format == GPT_EXPORT_GGUF && o->dtype == GPT_DTYPE_BF16)
		return gpt_err_set(err, GPT_EUSAGE,
				   "--dtype bf16: the GGUF writer writes f32, f16 or q8_0 (--dtype int8)");
	/* a GGUF file or a directory under a bundle's name would be read as a
	 * bundle (gpt-infer -m goes by the name) and fail there */
	if (o->format != GPT_EXPORT_BUNDLE && gpt_export_bundle_filter(out) >= 0)
		return gpt_err_set(err, GPT_EUSAGE,
				   "-o %s: a bundle's name, but --format %s writes %s; name it otherwise (default %s), "
				   "or leave --format out for a bundle",
				   out, o->format == GPT_EXPORT_HF ? "hf" : "gguf",
				   o->format == GPT_EXPORT_HF ? "a Hugging Face directory" : "a GGUF file", def[o->format]);
	/* before the weights are converted, not at the rename */
	if (o->format != GPT_EXPORT_HF && gpt_out_replaceable(out, err))
		return GPT_EUSAGE;
	gpt_export_model m;
	int rc = gpt_export_model_open(&m, ckpt_path, o, err);
	if (rc)
		return rc;
	size_t made = !o->out && o->out_dir ? gpt_path_first_missing(o->out_dir) : 0;
	if ((rc = gpt_ckpt_out_outside(m.ck, out, err)) ||
	    (o->format == GPT_EXPORT_GGUF && (rc = gguf_replaceable(out, err))) ||
	    (made && (rc = gpt_mkdir_p(o->out_dir, err)))) {
		gpt_rmdir_made(o->out_dir, made);
		gpt_export_model_close(&m);
		return rc;
	}
	switch (o->format) {
	case GPT_EXPORT_BUNDLE: rc = gpt_export_bundle(&m, o, out, err); break;
	case GPT_EXPORT_HF: rc = gpt_export_hf(&m, o, out, err); break;
	default: rc = gpt_export_gguf(&m, o, out, err); break;
	}
	gpt_export_model_close(&m);
	if (rc)
		gpt_rmdir_made(o->out_dir, made);
	if (!rc)
		snprintf(out_path, size, "%s", out);
	return rc;
}

int gpt_export_fleetx_names(const char *config, const char *const *overrides, int n_overrides, char *ckpt,
			    char *out_dir, int *by_override, gpt_err *err)
{
	static const char *const names[] = {"Engine.save_load.ckpt_dir", "Engine.save_load.output_dir"};
	ckpt[0] = out_dir[0] = 0;
	*by_override = 0;
	gpt_config cfg;
	int rc = gpt_config_init(&cfg, err);
	if (!rc && config)
		rc = gpt_config_read_file(&cfg, config, err);
	for (int i = 0; !rc && i < n_overrides; i++) {
		const char *a = overrides[i], *eq = strchr(a, '=');
		size_t n = eq ? (size_t)(eq - a) : strlen(a);
		int which = -1;
		for (int j = 0; j < 2; j++)
			if (n == strlen(names[j]) && strncmp(a, names[j], n) == 0)
				which = j;
		if (which < 0)
			rc = gpt_err_set(err, GPT_EUSAGE,
					 "-o %s: gpt-export takes Engine.save_load.ckpt_dir (the checkpoint) and "
					 "Engine.save_load.output_dir (the directory to write into), as FleetX's "
					 "tools/export.py does; the model's own config.yaml gives the rest", a);
		else if (!(rc = gpt_config_override(&cfg, a, err)))
			*by_override |= which ? GPT_EXPORT_DIR_BY_O : GPT_EXPORT_CKPT_BY_O;
	}
	const char *c = cfg.engine.save_load.ckpt_dir, *d = cfg.engine.save_load.output_dir;
	if (!rc && c && *c && gpt_config_given(&cfg, gpt_config_key_find(names[0])))
		snprintf(ckpt, PATH_MAX, "%s", c);
	/* FleetX writes into output_dir, ./output unless set: with a file
	 * given, or the key itself */
	if (!rc && d && *d && (config || gpt_config_given(&cfg, gpt_config_key_find(names[1]))))
		snprintf(out_dir, PATH_MAX, "%s", d);
	gpt_config_free(&cfg);
	return rc;
}
