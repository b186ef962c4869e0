/* test-tool: reaches library internals from the shell tests.
 *
 *   test-tool xxh3 FILE                  print the file's xxh3-64 in hex
 *   test-tool atomic-write PATH TEXT     write TEXT to PATH atomically
 *   test-tool atomic-abort PATH TEXT     write, then abort: PATH must stay as it was
 *   test-tool log LEVEL MESSAGE          one log line on stderr
 *   test-tool step-line                  a sample training step line on stderr
 *   test-tool progress TOTAL STEP        drive a progress reporter on stderr
 *   test-tool backends                   describe the compute backends
 *   test-tool model-ref IN OUT           the tests/ref/gpt_ref.py computation in gptkit
 *   test-tool sgemm N [REPEATS [bf16]]   GFLOP/s of an N x N x N GEMM on the CPU backend,
 *                                        fp32 or with bf16 storage (fp32 accumulation)
 *   test-tool adamw N [REPEATS]          ms of one AdamW update of N elements on the CPU
 *                                        backend, with the master weights the trainer
 *                                        keeps: fp32, fp16 (an fp32 copy), bf16 (split)
 *   test-tool dropout ROWS [REPEATS]     ms of the CPU backend's dropout_fwd (p = 0.1) over
 *                                        ROWS x 768 fp32 elements, of the same rows on one
 *                                        thread by each path (portable C, AVX2, AVX-512), and
 *                                        of its attention_fwd at B=1, T=512, 12 heads of 64
 *                                        with p = 0.1 and 0
 *   test-tool ckpt-diff A B              largest difference of any tensor of two checkpoints
 *   test-tool heartbeat N SECONDS        a gpt-launch worker that beats N times, SECONDS
 *                                        apart, then stalls without beating (a hang)
 */
#include "backend/backend.h"
#include "ckpt/ckpt.h"
#include "comm/comm.h"
#include "cpu/cpu.h"
#include "cpu/kernels.h"
#include "model/gpt.h"
#include "train/train.h"

#include <jansson.h>
#include <math.h>
#include "core/core.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int usage(void)
{
	fprintf(stderr, "usage: test-tool xxh3|atomic-write|atomic-abort|log|step-line|progress|backends ...\n");
	return GPT_EUSAGE;
}

/* Collects named fp32 tensors for the output file. */
typedef struct out_list {
	gpt_st_entry e[4096];
	char names[4096][64];
	int n;
} out_list;

static int out_add(out_list *o, const char *name, int ndim, const int64_t *shape, void *data)
{
	if (o->n == 4096)
		return -1;
	snprintf(o->names[o->n], 64, "%s", name);
	o->e[o->n] = (gpt_st_entry){.name = o->names[o->n], .dtype = GPT_DTYPE_F32, .ndim = ndim, .data = data};
	for (int d = 0; d < ndim; d++)
		o->e[o->n].shape[d] = shape[d];
	o->n++;
	return 0;
}

static float *download_param(gpt_model *m, int64_t i, int grad, gpt_err *err)
{
	int64_t n = gpt_box_numel(&m->box[i]);
	float *h = gpt_malloc((size_t)n * 4, "download", err);
	if (h && m->be->ops->download(m->be, h, grad ? gpt_model_grad(m, i) : gpt_model_param(m, i),
				      (size_t)n * 4, err)) {
		free(h);
		return NULL;
	}
	return h;
}

/* Runs the model of tests/ref/gpt_ref.py from the same input file. */
static int model_ref(const char *in, const char *out, gpt_err *err)
{
	gpt_st_file f;
	int rc = gpt_st_open(&f, in, err);
	if (rc)
		return rc;
	json_t *cfg = json_loads(gpt_st_meta(&f, "config") ? gpt_st_meta(&f, "config") : "", 0, NULL);
	const gpt_st_tensor *wte = gpt_st_find(&f, "wte"), *wpe = gpt_st_find(&f, "wpe"),
			    *fc = gpt_st_find(&f, "h.0.mlp.fc.weight"), *tok = gpt_st_find(&f, "tokens");
	if (!cfg || !wte || !wpe || !fc || !tok || tok->ndim != 2) {
		gpt_st_close(&f);
		json_decref(cfg);
		return gpt_err_set(err, GPT_EDATA, "%s: expected wte, wpe, h.0.mlp.fc.weight, tokens and a config", in);
	}
	gpt_model_shape s = {.vocab_size = json_integer_value(json_object_get(cfg, "vocab_size")),
			     .padded_vocab = wte->shape[0], .max_pos = wpe->shape[0],
			     .hidden = wte->shape[1],
			     .heads = json_integer_value(json_object_get(cfg, "num_attention_heads")),
			     .ffn = fc->shape[0]};
	char name[64];
	do
		snprintf(name, sizeof name, "h.%lld.ln_1.weight", (long long)s.layers);
	while (gpt_st_find(&f, name) && ++s.layers);
	int64_t B = tok->shape[0], T = tok->shape[1] - 1;
	int32_t *tokens = malloc((size_t)(B * (T + 1)) * 4), *inp = malloc((size_t)(B * T) * 4),
		*tgt = malloc((size_t)(B * T) * 4);
	memcpy(tokens, gpt_st_data(&f, tok), (size_t)(B * (T + 1)) * 4);
	for (int64_t b = 0; b < B; b++)
		for (int64_t t = 0; t < T; t++) {
			inp[b * T + t] = tokens[b * (T + 1) + t];
			tgt[b * T + t] = tokens[b * (T + 1) + t + 1];
		}
	const char *rcs = json_string_value(json_object_get(cfg, "recompute"));
	if (rcs && strcmp(rcs, "none") == 0)
		rcs = NULL;
	gpt_model_opts mo = {.batch = B, .seq_len = T,
			     .head_rows = json_integer_value(json_object_get(cfg, "head_rows"))};
	if (rcs && gpt_recompute_parse(rcs, &mo.recompute))
		rc = gpt_err_set(err, GPT_EUSAGE, "bad recompute '%s'", rcs);
	gpt_backend be;
	gpt_model m;
	memset(&m, 0, sizeof m);
	gpt_layout lo;
	gpt_layout_single(&lo, &s);
	if (!rc)
		rc = gpt_backend_cpu_init(&be, GPT_DTYPE_F32, 0, err);
	if (!rc)
		rc = gpt_model_init(&m, &be, &s, &lo, &mo, err);
	if (!rc) {
		int64_t want = gpt_model_activation_bytes(&s, &lo, &mo, 4,
							  be.ops->attention_saved_size(&be, B, T, s.heads, s.hidden / s.heads, mo.attn_dropout > 0));
		if (want != m.act_bytes)
			rc = gpt_err_set(err, GPT_EINTERNAL, "activations: allocated %lld bytes, gpt_model_activation_bytes says %lld",
					 (long long)m.act_bytes, (long long)want);
		fprintf(stderr, "activations: %lld bytes\n", (long long)m.act_bytes);
	}
	for (int64_t i = 0; !rc && i < m.n_table; i++) {
		const gpt_st_tensor *t = gpt_st_find(&f, m.table[i].name);
		if (!t || t->dtype != GPT_DTYPE_F32 || gpt_box_numel(&m.box[i]) * 4 != (int64_t)(t->end - t->begin))
			rc = gpt_err_set(err, GPT_EDATA, "%s: tensor %s missing or of the wrong size", in, m.table[i].name);
		else
			rc = be.ops->upload(&be, gpt_model_param(&m, i), gpt_st_data(&f, t), t->end - t->begin, err);
	}
	static out_list o;
	o.n = 0;
	double loss_sum = 0;
	int64_t ntok = 0;
	int64_t lshape[3] = {B, T, s.padded_vocab};
	float *logits = malloc((size_t)(B * T * s.padded_vocab) * 4);
	static float losses[64];
	/* the classifier makes the gradient in the forward: the weight of a
	 * token's loss is needed before it (every target counts here) */
	float dloss = 1.0f / (float)(B * T);
	void *dev_logits = NULL;
	if (!rc)
		rc = gpt_model_forward(&m, inp, tgt, 0, 1, 0, &dloss, &loss_sum, &ntok, err);
	if (!rc && ntok != B * T)
		rc = gpt_err_set(err, GPT_EDATA, "%s: %lld of %lld targets count", in, (long long)ntok, (long long)(B * T));
	/* the logits are never kept: the final hidden state times wte^T */
	if (!rc && !(dev_logits = be.ops->alloc(&be, (size_t)(B * T * s.padded_vocab) * 4, "logits", err)))
		rc = err->code;
	if (!rc)
		rc = be.ops->linear_fwd(&be, dev_logits, gpt_model_final_hidden(&m), gpt_model_param(&m, 0), NULL, B * T,
					s.hidden, s.padded_vocab, err);
	if (!rc)
		rc = be.ops->download(&be, logits, dev_logits, (size_t)(B * T * s.padded_vocab) * 4, err);
	if (dev_logits)
		be.ops->free(&be, dev_logits);
	if (!rc)
		rc = gpt_model_backward(&m, err);
	losses[0] = (float)(loss_sum / (double)ntok);
	out_add(&o, "logits", 3, lshape, logits);
	out_add(&o, "loss", 0, NULL, &losses[0]);
	for (int64_t i = 0; !rc && i < m.n_table; i++) {
		float *g = download_param(&m, i, 1, err);
		snprintf(name, sizeof name, "grad.%s", m.table[i].name);
		rc = g ? out_add(&o, name, m.table[i].ndim, m.table[i].shape, g) : err->code;
	}
	gpt_optimizer op;
	memset(&op, 0, sizeof op);
	if (!rc)
		rc = gpt_optimizer_init(&op, &m, 0, m.n_alloc, NULL, NULL, json_real_value(json_object_get(cfg, "beta1")),
					json_real_value(json_object_get(cfg, "beta2")),
					json_number_value(json_object_get(cfg, "epsilon")),
					json_number_value(json_object_get(cfg, "weight_decay")), 0, err);
	int steps = (int)json_integer_value(json_object_get(cfg, "steps"));
	double clip = json_number_value(json_object_get(cfg, "grad_clip"));
	for (int k = 1; !rc && k <= steps && k < 64; k++) {
		rc = gpt_model_zero_grad(&m, err);
		if (!rc)
			rc = gpt_model_forward(&m, inp, tgt, 1, (uint32_t)k, 0, &dloss, &loss_sum, &ntok, err);
		if (!rc)
			rc = gpt_model_backward(&m, err);
		double sumsq = 0;
		if (!rc)
			rc = gpt_optimizer_grad_sumsq(&op, &sumsq, err);
		double norm = sqrt(sumsq);
		double scale = clip > 0 && norm > clip ? clip / (norm + 1e-6) : 1.0;
		if (!rc)
			rc = gpt_optimizer_step(&op, json_number_value(json_object_get(cfg, "lr")), scale, err);
		losses[k] = (float)(loss_sum / (double)ntok);
		snprintf(name, sizeof name, "loss.%d", k);
		out_add(&o, name, 0, NULL, &losses[k]);
	}
	for (int64_t i = 0; !rc && i < m.n_table; i++) {
		float *w = download_param(&m, i, 0, err);
		snprintf(name, sizeof name, "final.%s", m.table[i].name);
		rc = w ? out_add(&o, name, m.table[i].ndim, m.table[i].shape, w) : err->code;
	}
	if (!rc)
		rc = gpt_st_write(out, o.e, o.n, NULL, 0, NULL, NULL, err);
	for (int i = 2; i < o.n; i++)
		if (strncmp(o.names[i], "loss.", 5) != 0)
			free((void *)o.e[i].data);
	free(logits);
	gpt_optimizer_free(&op);
	gpt_model_free(&m);
	if (be.ops)
		gpt_backend_cpu_free(&be);
	free(tokens);
	free(inp);
	free(tgt);
	json_decref(cfg);
	gpt_st_close(&f);
	return rc;
}

/* Prints the largest absolute difference over every tensor two checkpoints
 * share ("max-abs-diff X TENSOR"); different tensor sets are an error. */
static int ckpt_diff(const char *a, const char *b, gpt_err *err)
{
	gpt_ckpt *ca = NULL, *cb = NULL;
	int rc = gpt_ckpt_open(&ca, a, err);
	if (!rc)
		rc = gpt_ckpt_open(&cb, b, err);
	double worst = 0;
	const char *where = "-";
	int n = rc ? 0 : gpt_ckpt_tensor_count(ca);
	if (!rc && n != gpt_ckpt_tensor_count(cb))
		rc = gpt_err_set(err, GPT_EDATA, "%s and %s hold different numbers of tensors", a, b);
	for (int i = 0; i < n && !rc; i++) {
		const char *name;
		gpt_dtype dt;
		int nd;
		const int64_t *shape;
		gpt_ckpt_tensor_info(ca, i, &name, &dt, &nd, &shape);
		gpt_box box = gpt_box_full(nd, shape);
		size_t cnt = (size_t)gpt_box_numel(&box);
		float *x = malloc(cnt * 4 + 4), *y = malloc(cnt * 4 + 4);
		rc = !x || !y ? gpt_err_nomem(err, cnt * 8, "diff") : 0;
		if (!rc)
			rc = gpt_ckpt_read_box(ca, name, GPT_DTYPE_F32, nd, shape, &box, x, err);
		if (!rc)
			rc = gpt_ckpt_read_box(cb, name, GPT_DTYPE_F32, nd, shape, &box, y, err);
		for (size_t k = 0; !rc && k < cnt; k++) {
			double d = fabs((double)x[k] - (double)y[k]);
			if (!(d <= worst)) {
				worst = d;
				where = name;
			}
		}
		free(x);
		free(y);
	}
	if (!rc)
		printf("max-abs-diff %.3g %s\n", worst, where);
	gpt_ckpt_close(ca);
	gpt_ckpt_close(cb);
	return rc;
}

/* test-tool dropout: what the CPU backend's dropout costs alone and in
 * the attention (the draws: backend/philox.h, cpu/dropout.c) */
static int time_dropout(const char *rows_s, const char *reps_s, gpt_err *err)
{
	int64_t rows, reps;
	if (gpt_parse_i64(rows_s, &rows) || rows < 1 || gpt_parse_i64(reps_s, &reps) || reps < 1)
		return gpt_err_set(err, GPT_EUSAGE, "dropout: ROWS and REPEATS must be positive integers");
	enum { F = 768, T = 512, NH = 12, HS = 64 };
	gpt_backend be;
	if (gpt_backend_cpu_init(&be, GPT_DTYPE_F32, 0, err))
		return -1;
	int rc = 0;
	float *x = calloc((size_t)(rows * F), sizeof *x), *qkv = calloc((size_t)T * 3 * NH * HS, sizeof *qkv);
	float *out = calloc((size_t)T * NH * HS, sizeof *out), *saved = NULL;
	int64_t ns = be.ops->attention_saved_size(&be, 1, T, NH, HS, 1);
	if (ns > 0)
		saved = calloc((size_t)ns, sizeof *saved);
	if (!x || !qkv || !out || !saved) {
		rc = gpt_err_set(err, GPT_EINTERNAL, "dropout: out of memory for %lld rows", (long long)rows);
		goto done;
	}
	for (int64_t i = 0; i < rows * F; i++)
		x[i] = (float)(i % 13) * 0.1f;
	for (int64_t i = 0; i < (int64_t)T * 3 * NH * HS; i++)
		qkv[i] = (float)(i % 11) * 0.05f - 0.25f;
	gpt_dropout d = {.p = 0.1f, .key = {.seed = 1, .step = 1, .layer = 0, .site = GPT_RNG_SITE_MLP_RESID}};
	rc = be.ops->dropout_fwd(&be, x, x, 1, rows, F, &d, err); /* warm up */
	double t0 = gpt_now_s();
	for (int64_t r = 0; r < reps && !rc; r++)
		rc = be.ops->dropout_fwd(&be, x, x, 1, rows, F, &d, err);
	if (!rc)
		printf("dropout_fwd %lld x %d: %.3f ms\n", (long long)rows, F, (gpt_now_s() - t0) / (double)reps * 1e3);
	/* the same rows' draws on one thread by each path this CPU runs */
	static const char *const path_name[] = {"portable C", "AVX2", "AVX-512"};
	uint32_t thr = gpt_dropout_threshold(d.p);
	float scale = gpt_dropout_scale(d.p);
	for (int path = 0; path < 3 && !rc; path++) {
		if (gpt_cpu_dropout_row_on(path, x, x, F, &d, thr, scale, 0, 0, 0) != 0) {
			printf("dropout rows, %s: not on this CPU\n", path_name[path]);
			continue;
		}
		t0 = gpt_now_s();
		for (int64_t r = 0; r < reps; r++)
			for (int64_t i = 0; i < rows; i++)
				gpt_cpu_dropout_row_on(path, x + i * F, x + i * F, F, &d, thr, scale, 0, i, 0);
		printf("dropout rows %lld x %d, %s, one thread: %.3f ms\n", (long long)rows, F, path_name[path],
		       (gpt_now_s() - t0) / (double)reps * 1e3);
	}
	d.key.site = GPT_RNG_SITE_ATTN_PROBS;
	for (int k = 0; k < 2 && !rc; k++) {
		d.p = k == 0 ? 0.1f : 0.0f;
		rc = be.ops->attention_fwd(&be, out, saved, qkv, 1, T, NH, HS, &d, err);
		t0 = gpt_now_s();
		for (int64_t r = 0; r < reps && !rc; r++)
			rc = be.ops->attention_fwd(&be, out, saved, qkv, 1, T, NH, HS, &d, err);
		if (!rc)
			printf("attention_fwd T=%d, %d heads of %d, p=%g: %.3f ms\n", T, NH, HS, (double)d.p,
			       (gpt_now_s() - t0) / (double)reps * 1e3);
	}
done:
	free(x), free(qkv), free(out), free(saved);
	gpt_backend_cpu_free(&be);
	return rc;
}

int main(int argc, char **argv)
{
	const char *prog = "test-tool";
	gpt_err err = {0};
	if (argc < 2)
		return usage();
	const char *verb = argv[1];
	if (strcmp(verb, "xxh3") == 0 && argc == 3) {
		uint64_t h;
		if (gpt_xxh3_file(argv[2], &h, &err))
			return gpt_cmd_fail(prog, &err);
		char hex[17];
		gpt_xxh3_hex(h, hex);
		printf("%s\n", hex);
		return 0;
	}
	if ((strcmp(verb, "atomic-write") == 0 || strcmp(verb, "atomic-abort") == 0) && argc == 4) {
		gpt_afile af;
		if (gpt_afile_open(&af, argv[2], &err))
			return gpt_cmd_fail(prog, &err);
		fputs(argv[3], af.fp);
		if (strcmp(verb, "atomic-abort") == 0) {
			gpt_afile_abort(&af);
			return 0;
		}
		if (gpt_afile_commit(&af, &err))
			return gpt_cmd_fail(prog, &err);
		return 0;
	}
	if (strcmp(verb, "log") == 0 && argc == 4) {
		gpt_log lg;
		gpt_log_init(&lg, stderr, GPT_LOG_DEBUG);
		gpt_log_level lv = strcmp(argv[2], "warning") == 0 ? GPT_LOG_WARNING
				 : strcmp(argv[2], "error") == 0   ? GPT_LOG_ERROR
				 : strcmp(argv[2], "debug") == 0   ? GPT_LOG_DEBUG
								   : GPT_LOG_INFO;
		gpt_log_printf(&lg, lv, "%s", argv[3]);
		return 0;
	}
	if (strcmp(verb, "step-line") == 0 && argc == 2) {
		gpt_step_line s = {.step = 1, .epoch = 0, .batch = 0, .loss = 11.083364487,
				   .avg_reader_cost = 0.23392, .avg_batch_cost = 2.05344,
				   .ips_total = 3989, .ips = 499, .lr = 5.55556e-09};
		char line[512];
		gpt_step_line_format(line, sizeof line, &s);
		gpt_log lg;
		gpt_log_init(&lg, stderr, GPT_LOG_INFO);
		gpt_log_printf(&lg, GPT_LOG_INFO, "%s", line);
		return 0;
	}
	if (strcmp(verb, "progress") == 0 && argc == 4) {
		int64_t total, step;
		if (gpt_parse_i64(argv[2], &total) || gpt_parse_i64(argv[3], &step) || step <= 0)
			return usage();
		gpt_progress p;
		gpt_progress_init(&p, stderr, "work", "B", total);
		p.plain_interval_s = 0.001;
		for (int64_t d = 0; d <= (total > 0 ? total : 10 * step); d += step) {
			gpt_progress_update(&p, d, d / step);
			usleep(2000);
		}
		gpt_progress_finish(&p);
		return 0;
	}
	if (strcmp(verb, "sgemm") == 0 && argc >= 3 && argc <= 5) {
		int64_t n, reps = 10;
		if (gpt_parse_i64(argv[2], &n) || n < 1 || (argc >= 4 && gpt_parse_i64(argv[3], &reps)) ||
		    (argc == 5 && strcmp(argv[4], "bf16") != 0))
			return usage();
		gpt_dtype dt = argc == 5 ? GPT_DTYPE_BF16 : GPT_DTYPE_F32;
		gpt_backend be;
		if (gpt_backend_cpu_init(&be, dt, 0, &err))
			return gpt_cmd_fail(prog, &err);
		size_t es = gpt_dtype_size(dt);
		float *f = calloc((size_t)(n * n), 4);
		void *a = calloc((size_t)(n * n), es), *b = calloc((size_t)(n * n), es), *c = calloc((size_t)(n * n), es);
		for (int64_t i = 0; i < n * n; i++)
			f[i] = (float)(i % 7) * 0.1f;
		gpt_convert(a, dt, f, GPT_DTYPE_F32, (size_t)(n * n), NULL);
		gpt_convert(b, dt, f, GPT_DTYPE_F32, (size_t)(n * n), NULL);
		be.ops->gemm(&be, 0, 1, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n, &err); /* warm up */
		double t0 = gpt_now_s();
		for (int64_t r = 0; r < reps; r++)
			be.ops->gemm(&be, 0, 1, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n, &err);
		double el = gpt_now_s() - t0;
		printf("%.1f\n", 2.0 * (double)n * (double)n * (double)n * (double)reps / el * 1e-9);
		free(f);
		free(a);
		free(b);
		free(c);
		gpt_backend_cpu_free(&be);
		return 0;
	}
	if (strcmp(verb, "adamw") == 0 && argc >= 3 && argc <= 4) {
		int64_t n, reps = 5;
		if (gpt_parse_i64(argv[2], &n) || n < 1 || (argc == 4 && (gpt_parse_i64(argv[3], &reps) || reps < 1)))
			return usage();
		static const gpt_dtype dts[] = {GPT_DTYPE_F32, GPT_DTYPE_F16, GPT_DTYPE_BF16};
		for (size_t d = 0; d < sizeof dts / sizeof *dts; d++) {
			gpt_backend be;
			if (gpt_backend_cpu_init(&be, dts[d], 0, &err))
				return gpt_cmd_fail(prog, &err);
			size_t es = gpt_dtype_size(dts[d]);
			void *p = calloc((size_t)n, es), *g = calloc((size_t)n, es);
			float *m = calloc((size_t)n, 4), *v = calloc((size_t)n, 4);
			float *master = dts[d] == GPT_DTYPE_F16 ? calloc((size_t)n, 4) : NULL;
			uint16_t *lo = dts[d] == GPT_DTYPE_BF16 ? calloc((size_t)n, 2) : NULL;
			if (!p || !g || !m || !v || (dts[d] == GPT_DTYPE_F16 && !master) || (dts[d] == GPT_DTYPE_BF16 && !lo)) {
				fprintf(stderr, "%s: adamw: out of memory for %lld elements\n", prog, (long long)n);
				return GPT_EINTERNAL;
			}
			gpt_adamw h = {.lr = 1e-4, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1,
				       .grad_scale = 1.0, .t = 1};
			int rc = be.ops->adamw(&be, p, master, lo, g, m, v, n, &h, &err); /* warm up */
			double t0 = gpt_now_s();
			for (int64_t r = 0; r < reps && !rc; r++) {
				h.t = r + 2;
				rc = be.ops->adamw(&be, p, master, lo, g, m, v, n, &h, &err);
			}
			double el = gpt_now_s() - t0;
			if (rc)
				return gpt_cmd_fail(prog, &err);
			printf("%s %s %.2f ms\n", gpt_dtype_name(dts[d]),
			       master ? "fp32-copy" : lo ? "split" : "none", el / (double)reps * 1e3);
			free(p), free(g), free(m), free(v), free(master), free(lo);
			gpt_backend_cpu_free(&be);
		}
		return 0;
	}
	if (strcmp(verb, "dropout") == 0 && argc >= 3 && argc <= 4)
		return time_dropout(argv[2], argc == 4 ? argv[3] : "5", &err) ? gpt_cmd_fail(prog, &err) : 0;
	if (strcmp(verb, "heartbeat") == 0 && argc == 4) {
		int64_t n;
		double gap;
		gpt_heartbeat *hb = NULL;
		if (gpt_parse_i64(argv[2], &n) || n < 0 || gpt_parse_f64(argv[3], &gap) || !(gap >= 0))
			return usage();
		if (gpt_heartbeat_open(&hb, environ, &err))
			return gpt_cmd_fail(prog, &err);
		for (int64_t i = 1; i <= n; i++) {
			usleep((useconds_t)(gap * 1e6));
			gpt_heartbeat_beat(hb, i);
		}
		for (;;)
			pause();
	}
	if (strcmp(verb, "ckpt-diff") == 0 && argc == 4)
		return ckpt_diff(argv[2], argv[3], &err) ? gpt_cmd_fail(prog, &err) : 0;
	if (strcmp(verb, "model-ref") == 0 && argc == 4)
		return model_ref(argv[2], argv[3], &err) ? gpt_cmd_fail(prog, &err) : 0;
	if (strcmp(verb, "backends") == 0 && argc == 2) {
		char line[1024];
		gpt_backend_describe(line, sizeof line);
		printf("%s\n", line);
		return 0;
	}
	return usage();
}
