/* GGUF v3 for llama.cpp's gpt2 architecture: metadata, the GPT-2 (or byte)
 * vocabulary with token types and merges, and the tensors token_embd,
 * position_embd, blk.N.{attn_norm,attn_qkv,attn_output,ffn_norm,ffn_up,
 * ffn_down}, output_norm and output (a copy of token_embd), in f32, f16 or
 * q8_0 (blocks of 32: an f16 scale and 32 int8). Dimensions are written
 * fastest first, as ggml counts them, so our [out, in] row-major weights go
 * in unchanged as ne = {in, out}. (Part of lib/ckpt.) */
#include "ckpt/export.h"

#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define GGUF_ALIGN 32

enum { GGUF_U32 = 4, GGUF_I32 = 5, GGUF_F32 = 6, GGUF_STRING = 8, GGUF_ARRAY = 9 };
enum { GGML_F32 = 0, GGML_F16 = 1, GGML_Q8_0 = 8 };
enum { FTYPE_ALL_F32 = 0, FTYPE_MOSTLY_F16 = 1, FTYPE_MOSTLY_Q8_0 = 7 };

typedef struct w {
	gpt_buf *b;
	int rc;
	gpt_err *err;
} w;

static void put(w *o, const void *p, size_t n)
{
	if (!o->rc)
		o->rc = gpt_buf_append(o->b, p, n, o->err);
}
static void u32(w *o, uint32_t v) { put(o, &v, 4); } /* little-endian hosts only (x86, arm) */
static void u64(w *o, uint64_t v) { put(o, &v, 8); }
static void str(w *o, const char *s, size_t n)
{
	u64(o, n);
	put(o, s, n);
}
static void key(w *o, const char *k, uint32_t type)
{
	str(o, k, strlen(k));
	u32(o, type);
}
static void kv_u32(w *o, const char *k, uint32_t v)
{
	key(o, k, GGUF_U32);
	u32(o, v);
}
static void kv_str(w *o, const char *k, const char *v)
{
	key(o, k, GGUF_STRING);
	str(o, v, strlen(v));
}
static void kv_f32(w *o, const char *k, float v)
{
	key(o, k, GGUF_F32);
	put(o, &v, 4);
}

/* GPT-2's printable stand-in for each byte (the alphabet of encoder.json). */
static int byte_char(int b, char out[4])
{
	int cp = b;
	if (!((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))) {
		int n = 0;
		for (int x = 0; x < b; x++)
			if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255)))
				n++;
		cp = 256 + n;
	}
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	out[0] = (char)(0xc0 | (cp >> 6));
	out[1] = (char)(0x80 | (cp & 0x3f));
	return 2;
}

/* tokenizer.ggml.*: tokens by id, their types, merges. */
static int vocab(w *o, gpt_export_model *m)
{
	int64_t V = m->shape.vocab_size;
	char **tok = gpt_calloc((size_t)V, sizeof *tok, "gguf vocabulary", o->err);
	char *enc = NULL, *merges = NULL;
	size_t enc_len = 0, merges_len = 0;
	json_t *j = NULL;
	int rc = tok ? 0 : GPT_EINTERNAL;
	if (!rc && m->byte_tokenizer) {
		for (int b = 0; b < 256 && !rc; b++) {
			tok[b] = gpt_calloc(1, 4, "gguf vocabulary", o->err);
			if (tok[b])
				byte_char(b, tok[b]);
			else
				rc = GPT_EINTERNAL;
		}
		if (!rc)
			tok[256] = gpt_strdup("<|endoftext|>", o->err);
	} else if (!rc) {
		char p[PATH_MAX + 32];
		snprintf(p, sizeof p, "%s/%s", m->vocab, m->vocab_files[0]);
		rc = gpt_file_read_all(p, 0, &enc, &enc_len, o->err);
		snprintf(p, sizeof p, "%s/%s", m->vocab, m->vocab_files[1]);
		if (!rc)
			rc = gpt_file_read_all(p, 0, &merges, &merges_len, o->err);
		json_error_t je;
		j = rc ? NULL : json_loadb(enc, enc_len, 0, &je);
		if (!rc && !json_is_object(j))
			rc = gpt_err_set(o->err, GPT_EDATA, "%s/%s: not a JSON object", m->vocab, m->vocab_files[0]);
		const char *k;
		json_t *v;
		if (!rc)
			json_object_foreach(j, k, v) {
				json_int_t id = json_integer_value(v);
				if (id >= 0 && id < V)
					tok[id] = (char *)k;
			}
	}
	/* a model vocabulary wider than the tokenizer's gets placeholder tokens */
	char pad[32];
	key(o, "tokenizer.ggml.tokens", GGUF_ARRAY);
	u32(o, GGUF_STRING);
	u64(o, (uint64_t)V);
	for (int64_t i = 0; !rc && i < V; i++) {
		snprintf(pad, sizeof pad, "<|pad%lld|>", (long long)i);
		const char *t = tok[i] ? tok[i] : pad;
		str(o, t, strlen(t));
	}
	key(o, "tokenizer.ggml.token_type", GGUF_ARRAY);
	u32(o, GGUF_I32);
	u64(o, (uint64_t)V);
	for (int64_t i = 0; i < V; i++) {
		int32_t type = i == m->eot ? 3 : tok && tok[i] ? 1 : 5; /* control, normal, unused */
		put(o, &type, 4);
	}
	/* merges: the lines of vocab.bpe after its version header */
	int64_t nm = 0;
	size_t first = merges && merges_len > 8 && memcmp(merges, "#version", 8) == 0
			       ? (size_t)(strchr(merges, '\n') ? strchr(merges, '\n') - merges + 1 : (ptrdiff_t)merges_len)
			       : 0;
	for (size_t i = first; merges && i < merges_len;) {
		const char *eol = memchr(merges + i, '\n', merges_len - i);
		size_t n = eol ? (size_t)(eol - merges - i) : merges_len - i;
		if (n && !(n == 1 && merges[i] == '\r'))
			nm++;
		i += n + 1;
	}
	key(o, "tokenizer.ggml.merges", GGUF_ARRAY);
	u32(o, GGUF_STRING);
	u64(o, (uint64_t)nm);
	for (size_t i = first; merges && i < merges_len;) {
		const char *eol = memchr(merges + i, '\n', merges_len - i);
		size_t n = eol ? (size_t)(eol - merges - i) : merges_len - i, l = n;
		if (l && merges[i + l - 1] == '\r')
			l--;
		if (l)
			str(o, merges + i, l);
		i += n + 1;
	}
	kv_u32(o, "tokenizer.ggml.bos_token_id", (uint32_t)m->eot);
	kv_u32(o, "tokenizer.ggml.eos_token_id", (uint32_t)m->eot);
	if (m->byte_tokenizer && tok)
		for (int b = 0; b < 257; b++)
			free(tok[b]);
	free(tok);
	json_decref(j);
	free(enc);
	free(merges);
	return rc ? rc : o->rc;
}

typedef struct tinfo {
	char name[64];
	int64_t src;     /* table entry */
	int64_t rows;    /* rows written (wte: the true vocabulary) */
	int64_t cols;    /* ne[0] */
	int ndim;
	uint32_t type;
	uint64_t offset, bytes;
} tinfo;

static uint64_t tensor_bytes(uint32_t type, int64_t rows, int64_t cols)
{
	uint64_t n = (uint64_t)(rows * cols);
	return type == GGML_F32 ? 4 * n : type == GGML_F16 ? 2 * n : n / 32 * 34;
}

static void q8_0(const float *x, int64_t n, unsigned char *out)
{
	for (int64_t b = 0; b < n / 32; b++) {
		unsigned char *o = out + 34 * b;
		float d;
		gpt_quantize_rows(x + 32 * b, 1, 32, (int8_t *)(o + 2), &d);
		uint16_t h = gpt_f32_to_f16(d);
		memcpy(o, &h, 2);
	}
}

static const char *const blk_names[] = {
	"attn_norm.weight", "attn_norm.bias", "attn_qkv.weight", "attn_qkv.bias",
	"attn_output.weight", "attn_output.bias", "ffn_norm.weight", "ffn_norm.bias",
	"ffn_up.weight", "ffn_up.bias", "ffn_down.weight", "ffn_down.bias",
};

int gpt_export_gguf(gpt_export_model *m, const gpt_export_opts *opt, const char *out,
		    gpt_err *err)
{
	const gpt_model_shape *s = &m->shape;
	uint32_t wtype = opt->dtype == GPT_DTYPE_F16 ? GGML_F16 : opt->dtype == GPT_DTYPE_I8 ? GGML_Q8_0 : GGML_F32;
	if (wtype == GGML_Q8_0 && (s->hidden % 32 || s->ffn % 32))
		return gpt_err_set(err, GPT_EUSAGE,
				   "--dtype int8: q8_0 needs hidden (%lld) and ffn (%lld) sizes that are "
				   "multiples of 32", (long long)s->hidden, (long long)s->ffn);
	int64_t nt = m->n_table + 1; /* + output.weight */
	tinfo *ti = gpt_calloc((size_t)nt, sizeof *ti, "gguf tensors", err);
	if (!ti)
		return GPT_EINTERNAL;
	uint64_t off = 0;
	for (int64_t i = 0; i < nt; i++) {
		const gpt_param_info *p = &m->table[i < m->n_table ? i : 0];
		tinfo *t = &ti[i];
		t->src = i < m->n_table ? i : 0;
		t->cols = p->shape[p->ndim - 1];
		t->rows = p->numel / t->cols;
		t->ndim = p->ndim == 1 ? 1 : 2;
		if (i == m->n_table)
			snprintf(t->name, sizeof t->name, "output.weight");
		else if (strcmp(p->name, "wte") == 0)
			snprintf(t->name, sizeof t->name, "token_embd.weight");
		else if (strcmp(p->name, "wpe") == 0)
			snprintf(t->name, sizeof t->name, "position_embd.weight");
		else if (p->layer < 0)
			snprintf(t->name, sizeof t->name, "output_norm.%s",
				 strcmp(p->name, "ln_f.weight") == 0 ? "weight" : "bias");
		else
			snprintf(t->name, sizeof t->name, "blk.%d.%s", p->layer,
				 blk_names[(i - 2) % 12]);
		if (t->src == 0)
			t->rows = s->vocab_size; /* padding rows left out */
		if (strstr(t->name, "qkv.bias")) { /* [3, C] -> 3C */
			t->cols = p->numel;
			t->rows = 1;
			t->ndim = 1;
		}
		t->type = t->ndim == 1 ? GGML_F32 : strcmp(p->name, "wpe") == 0 && wtype == GGML_Q8_0 ? GGML_F16 : wtype;
		t->bytes = tensor_bytes(t->type, t->rows, t->cols);
		t->offset = off;
		off += (t->bytes + GGUF_ALIGN - 1) / GGUF_ALIGN * GGUF_ALIGN;
	}
	gpt_buf b = GPT_BUF_INIT;
	w o = {&b, 0, err};
	put(&o, "GGUF", 4);
	u32(&o, 3);
	u64(&o, (uint64_t)nt);
	u64(&o, 18); /* metadata pairs: 13 here, 5 in vocab() */
	kv_str(&o, "general.architecture", "gpt2");
	kv_str(&o, "general.name", "gptkit");
	kv_u32(&o, "general.alignment", GGUF_ALIGN);
	kv_u32(&o, "general.file_type", wtype == GGML_F32 ? FTYPE_ALL_F32 : wtype == GGML_F16 ? FTYPE_MOSTLY_F16 : FTYPE_MOSTLY_Q8_0);
	kv_u32(&o, "general.quantization_version", 2);
	kv_u32(&o, "gpt2.context_length", (uint32_t)s->max_pos);
	kv_u32(&o, "gpt2.embedding_length", (uint32_t)s->hidden);
	kv_u32(&o, "gpt2.feed_forward_length", (uint32_t)s->ffn);
	kv_u32(&o, "gpt2.block_count", (uint32_t)s->layers);
	kv_u32(&o, "gpt2.attention.head_count", (uint32_t)s->heads);
	kv_f32(&o, "gpt2.attention.layer_norm_epsilon", 1e-5f);
	kv_str(&o, "tokenizer.ggml.model", "gpt2");
	kv_str(&o, "tokenizer.ggml.pre", "gpt-2");
	int rc = vocab(&o, m);
	for (int64_t i = 0; !rc && i < nt; i++) {
		str(&o, ti[i].name, strlen(ti[i].name));
		u32(&o, (uint32_t)ti[i].ndim);
		u64(&o, (uint64_t)ti[i].cols);
		if (ti[i].ndim == 2)
			u64(&o, (uint64_t)ti[i].rows);
		u32(&o, ti[i].type);
		u64(&o, ti[i].offset);
		rc = o.rc;
	}
	static const char zeros[GGUF_ALIGN] = {0};
	if (!rc)
		put(&o, zeros, (GGUF_ALIGN - b.len % GGUF_ALIGN) % GGUF_ALIGN);
	size_t data0 = b.len;
	if (!(rc = rc ? rc : o.rc))
		rc = gpt_buf_reserve(&b, off, err);
	float *x = NULL;
	for (int64_t i = 0; !rc && i < nt; i++) {
		const gpt_param_info *p = &m->table[ti[i].src];
		float *nx = realloc(x, (size_t)p->numel * sizeof *x);
		if (!nx) {
			rc = gpt_err_nomem(err, (size_t)p->numel * 4, "gguf tensor");
			break;
		}
		x = nx;
		rc = gpt_export_model_read(m, ti[i].src, x, err);
		if (rc)
			break;
		int64_t n = ti[i].rows * ti[i].cols;
		put(&o, zeros, data0 + ti[i].offset - b.len); /* alignment of the previous one */
		if (!(rc = o.rc) && gpt_buf_reserve(&b, ti[i].bytes, err) == 0) {
			unsigned char *dst = (unsigned char *)b.data + b.len;
			if (ti[i].type == GGML_F32)
				memcpy(dst, x, (size_t)n * 4);
			else if (ti[i].type == GGML_F16)
				rc = gpt_convert(dst, GPT_DTYPE_F16, x, GPT_DTYPE_F32, (size_t)n, err);
			else
				q8_0(x, n, dst);
			b.len += ti[i].bytes;
		} else if (!rc) {
			rc = GPT_EINTERNAL;
		}
	}
	free(x);
	if (!rc)
		put(&o, zeros, (GGUF_ALIGN - b.len % GGUF_ALIGN) % GGUF_ALIGN);
	if (!rc && !(rc = o.rc))
		rc = gpt_file_write_atomic(out, b.data, b.len, err);
	gpt_buf_free(&b);
	free(ti);
	return rc;
}
