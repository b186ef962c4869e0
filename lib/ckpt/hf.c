/* The Hugging Face GPT-2 directory: model.safetensors with transformer.*
 * names and Conv1D weights stored [in, out], config.json, and the
 * tokenizer as vocab.json + merges.txt. (Part of lib/ckpt.) */
#include "ckpt/export.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Our name -> HF's (after "h.N."), and whether it is a Conv1D weight
 * (ours [out, in] -> HF [in, out]). */
static const struct {
	const char *ours, *hf;
	int conv;
} names[] = {
	{"ln_1.weight", "ln_1.weight", 0}, {"ln_1.bias", "ln_1.bias", 0},
	{"attn.qkv.weight", "attn.c_attn.weight", 1}, {"attn.qkv.bias", "attn.c_attn.bias", 0},
	{"attn.proj.weight", "attn.c_proj.weight", 1}, {"attn.proj.bias", "attn.c_proj.bias", 0},
	{"ln_2.weight", "ln_2.weight", 0}, {"ln_2.bias", "ln_2.bias", 0},
	{"mlp.fc.weight", "mlp.c_fc.weight", 1}, {"mlp.fc.bias", "mlp.c_fc.bias", 0},
	{"mlp.proj.weight", "mlp.c_proj.weight", 1}, {"mlp.proj.bias", "mlp.c_proj.bias", 0},
};

int gpt_hf_param_name(const gpt_param_info *p, const char *prefix, char *out, size_t size, int *conv)
{
	*conv = 0;
	if (p->layer < 0) {
		snprintf(out, size, "%s%s%s", prefix, p->name,
			 strcmp(p->name, "wte") == 0 || strcmp(p->name, "wpe") == 0 ? ".weight" : "");
		return 0;
	}
	const char *rest = strchr(p->name + 2, '.');
	for (size_t k = 0; rest && k < sizeof names / sizeof *names; k++)
		if (strcmp(rest + 1, names[k].ours) == 0) {
			snprintf(out, size, "%sh.%d.%s", prefix, p->layer, names[k].hf);
			*conv = names[k].conv;
			return 0;
		}
	out[0] = '\0';
	return -1;
}

static int write_weights(gpt_export_model *m, gpt_dtype dt, const char *path, gpt_err *err)
{
	const gpt_model_shape *s = &m->shape;
	int64_t n = m->n_table;
	gpt_st_entry *e = gpt_calloc((size_t)n, sizeof *e, "tensors", err);
	char (*nm)[80] = gpt_calloc((size_t)n, sizeof *nm, "tensors", err);
	void **data = gpt_calloc((size_t)n, sizeof *data, "tensors", err);
	int rc = e && nm && data ? 0 : GPT_EINTERNAL;
	for (int64_t i = 0; !rc && i < n; i++) {
		const gpt_param_info *p = &m->table[i];
		float *w = gpt_malloc((size_t)p->numel * sizeof(float), p->name, err);
		rc = w ? gpt_export_model_read(m, i, w, err) : GPT_EINTERNAL;
		int conv = 0;
		gpt_st_entry *t = &e[i];
		t->name = nm[i];
		gpt_hf_param_name(p, "transformer.", nm[i], sizeof nm[i], &conv);
		if (p->layer < 0) {
			t->ndim = p->ndim;
			memcpy(t->shape, p->shape, sizeof t->shape);
			if (strcmp(p->name, "wte") == 0)
				t->shape[0] = s->vocab_size; /* padding rows left out */
		} else {
			int64_t in = p->shape[p->ndim - 1], out = p->numel / in;
			if (conv) {
				t->ndim = 2;
				t->shape[0] = in;
				t->shape[1] = out;
				float *tr = w ? gpt_malloc((size_t)p->numel * sizeof(float), p->name, err) : NULL;
				if (!tr) {
					rc = GPT_EINTERNAL;
				} else {
					for (int64_t o = 0; o < out; o++)
						for (int64_t c = 0; c < in; c++)
							tr[c * out + o] = w[o * in + c];
					free(w);
					w = tr;
				}
			} else {
				t->ndim = 1;
				t->shape[0] = p->numel;
			}
		}
		int64_t numel = 1;
		for (int d = 0; d < t->ndim; d++)
			numel *= t->shape[d];
		t->dtype = dt;
		if (!rc && dt != GPT_DTYPE_F32) {
			void *h = gpt_malloc((size_t)numel * 2, p->name, err);
			rc = h ? gpt_convert(h, dt, w, GPT_DTYPE_F32, (size_t)numel, err) : GPT_EINTERNAL;
			free(w);
			w = h;
		}
		t->data = data[i] = w;
	}
	gpt_buf b = GPT_BUF_INIT;
	const char *meta[] = {"format", "pt"};
	if (!rc)
		rc = gpt_st_build(e, (int)n, meta, 1, &b, err);
	if (!rc)
		rc = gpt_file_write_atomic(path, b.data, b.len, err);
	gpt_buf_free(&b);
	for (int64_t i = 0; data && i < n; i++)
		free(data[i]);
	free(data);
	free(nm);
	free(e);
	return rc;
}

static int write_config(gpt_export_model *m, gpt_dtype dt, const char *path, gpt_err *err)
{
	const gpt_model_shape *s = &m->shape;
	json_t *j = json_pack("{s:[s],s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:s,s:f,s:f,s:f,s:f,s:I,s:I,s:b,s:s}",
			      "architectures", "GPT2LMHeadModel", "model_type", "gpt2", "vocab_size",
			      (json_int_t)s->vocab_size, "n_positions", (json_int_t)s->max_pos, "n_ctx",
			      (json_int_t)s->max_pos, "n_embd", (json_int_t)s->hidden, "n_layer",
			      (json_int_t)s->layers, "n_head", (json_int_t)s->heads, "n_inner",
			      (json_int_t)s->ffn, "activation_function", "gelu_new",
			      "layer_norm_epsilon", 1e-5, "resid_pdrop", 0.0, "embd_pdrop", 0.0,
			      "attn_pdrop", 0.0, "bos_token_id", (json_int_t)m->eot, "eos_token_id",
			      (json_int_t)m->eot, "tie_word_embeddings", 1, "torch_dtype",
			      dt == GPT_DTYPE_F32 ? "float32" : dt == GPT_DTYPE_BF16 ? "bfloat16" : "float16");
	char *text = j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
	json_decref(j);
	if (!text)
		return gpt_err_set(err, GPT_EINTERNAL, "config.json: out of memory");
	size_t len = strlen(text);
	text[len] = 0;
	gpt_buf b = GPT_BUF_INIT;
	int rc = gpt_buf_puts(&b, text, err);
	if (!rc)
		rc = gpt_buf_puts(&b, "\n", err);
	if (!rc)
		rc = gpt_file_write_atomic(path, b.data, b.len, err);
	gpt_buf_free(&b);
	free(text);
	return rc;
}

static int copy_file(const char *from, const char *to, gpt_err *err)
{
	char *text;
	size_t len;
	int rc = gpt_file_read_all(from, 0, &text, &len, err);
	if (rc)
		return rc;
	rc = gpt_file_write_atomic(to, text, len, err);
	free(text);
	return rc;
}

static void remove_tree(const char *dir)
{
	static const char *const files[] = {"model.safetensors", "config.json", "vocab.json",
					    "merges.txt"};
	char p[PATH_MAX + 32];
	for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
		snprintf(p, sizeof p, "%s/%s", dir, files[i]);
		unlink(p);
	}
	rmdir(dir);
	gpt_temp_drop(dir);
}

int gpt_export_hf(gpt_export_model *m, const gpt_export_opts *o, const char *out_arg, gpt_err *err)
{
	/* a directory named with a trailing slash (as a shell completes it) */
	char out[PATH_MAX];
	size_t n = strlen(out_arg);
	while (n > 1 && out_arg[n - 1] == '/')
		n--;
	if (n >= sizeof out)
		return gpt_err_set(err, GPT_EUSAGE, "%s: expected a name of at most %zu bytes", out_arg,
				   sizeof out - 1);
	memcpy(out, out_arg, n);
	out[n] = 0;
	if (gpt_path_exists(out))
		return gpt_err_set(err, GPT_EUSAGE, "%s: exists; remove it or choose another name", out);
	char tmp[PATH_MAX + 32], p[PATH_MAX + 64], q[PATH_MAX + 64];
	snprintf(tmp, sizeof tmp, "%s.tmp.%ld", out, (long)getpid());
	if (mkdir(tmp, 0755) != 0) /* named as given: the temporary is ours */
		return gpt_err_errno(err, GPT_EIO, errno, "%s: create", out_arg);
	gpt_temp_hold(tmp, 1);
	snprintf(p, sizeof p, "%s/model.safetensors", tmp);
	int rc = write_weights(m, o->dtype, p, err);
	snprintf(p, sizeof p, "%s/config.json", tmp);
	if (!rc)
		rc = write_config(m, o->dtype, p, err);
	const char *to[2] = {"vocab.json", "merges.txt"};
	for (int i = 0; !rc && !m->byte_tokenizer && i < 2; i++) {
		snprintf(p, sizeof p, "%s/%s", m->vocab, m->vocab_files[i]);
		snprintf(q, sizeof q, "%s/%s", tmp, to[i]);
		rc = copy_file(p, q, err);
	}
	if (!rc && rename(tmp, out) != 0)
		rc = gpt_err_errno(err, GPT_EIO, errno, "%s", out);
	if (!rc) {
		gpt_temp_drop(tmp);
		/* the rename is durable once the parent directory is */
		char parent[PATH_MAX];
		snprintf(parent, sizeof parent, "%s", out);
		char *slash = strrchr(parent, '/');
		if (slash && slash != parent)
			*slash = 0;
		else
			snprintf(parent, sizeof parent, "%s", slash ? "/" : ".");
		return gpt_fsync_dir(parent, err);
	}
	if (rc)
		remove_tree(tmp);
	return rc;
}
