/* bench/gpu/gpu-ops.c (build/bench/gpu-ops): the CUDA backend's ops one at
 * a time at the seed models' shapes, on the GPU, so that a kernel's speed
 * can be read in seconds, without Nsight Compute or a training run:
 *
 *   build/bench/gpu-ops [bf16|fp16] [--small] [--shape NAME] [--only PREFIX] [--once]
 *
 * Each row: the milliseconds a call takes (the mean of REPS calls after
 * WARM, timed by the host clock around calls queued on the backend's one
 * stream and a final sync; every op here runs for tens of microseconds or
 * more, so the queue never runs dry) and its rate: TFLOP/s for attention
 * and the GEMM, GB/s for the memory-bound ops. Attention is counted as
 * FlashAttention counts it, so that bench/gpu/torch_attn.py's rows for
 * PyTorch's scaled_dot_product_attention compare directly: causal forward
 * 2 B NH T^2 HS FLOPs, backward 2.5 times that (whatever a kernel
 * recomputes is its own cost). The bytes are what each op must move at
 * least once: LayerNorm forward reads x and writes y (N C elements each),
 * its backward reads x and dy and adds into dx (4 N C) and the weight
 * gradients' pass reads x and dy again (2 N C: counted at every shape, so
 * that the rates compare across sessions, though at C = 768 in 16-bit
 * the row kernel sums them now); the residual stream's dropout (p=0.1)
 * reads and writes it (2 N C), its residual add reads two and writes one
 * (3 N C), the add fused with the next LayerNorm (and the dropout) reads
 * two and writes two (4 N C); GELU's forward 2n, backward 3n; fc's bias gradient (linear_bwd
 * with only dbias) reads its output's gradient once; qkv's weight and bias
 * gradients (linear_bwd dw+dbias) count the GEMM's FLOPs, the bias from the
 * column sums or from the GEMM's BGRADB epilogue; the embedding's
 * backward reads the gradient of its output once, its tokens
 * Zipf-distributed (rank k's weight 1/k) as text's are; cross-entropy's
 * forward reads a chunk of logits, its backward reads and writes it, and
 * xent_fused (both, tp = 1) reads and writes it once; AdamW moves the
 * 16-bit parameter (read, write) and gradient, and the fp32 master and
 * moments (read, write): 3 es + 24 bytes a parameter, in one call over them
 * all, a call a run of the parameter table (the trainer's before
 * adamw_runs) and in adamw_runs; ZeRO-Offload's parts (offload: the
 * gradients down into pinned host memory, the parameters up, both at
 * once, and adamw_runs on the host's CPU backend with all its threads, the
 * state in host memory). Attention runs without dropout and with
 * the seed configs' 0.1 (p=0.1), the mask drawn as in training; the
 * tensor-core kernels in 64-row tiles, and in 128-row ones (r128: gpt_cuda_attention_rows, the
 * forward's and dq's rows, dkv's keys) where the head size allows, the
 * forward also in 64 with its scores a key tile ahead (ahead: "64a") and,
 * with dropout, in 64 after its mask is drawn (mask first: "64m"), then
 * a line saying which form each kernel takes by default (timed at its
 * first call at the shape; not with --once); generation's attention
 * (attention_kv: one new token a sequence against a full cache, its keys
 * and values the bytes; attention_kv_rows: the 8 sequences' step in one
 * call, as gpt-infer runs it). --small: shapes for checking
 * this program under the CPU emulation (tests/gpu/emu), whose figures mean
 * nothing. --shape NAME: that model's rows only (124M, 345M, 1.3B);
 * --only PREFIX: the ops whose names begin with PREFIX ("attention");
 * --once: each op called once, not timed (its rate is then one call's, with
 * no warm-up), for a profiler (tests/gpu/check.sh's attnprof stage). Exit
 * 0, or 1 on an error or usage error 64; "no CUDA device" and exit 0
 * without a GPU. */
#include "backend/backend.h"
#include "cpu/cpu.h"
#include "cuda/cuda.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int WARM = 3, REPS = 10;
static const char *only = ""; /* the ops' names' prefix to run */

static gpt_backend gpu;
static gpt_err err;
static uint64_t rng = 0x9E3779B97F4A7C15ull;

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void fail(const char *what)
{
	fprintf(stderr, "gpu-ops: %s: %s\n", what, err.msg);
	exit(1);
}

/* n elements of dtype t on the device, uniform in scale * [-1, 1) */
static void *dev_rand(gpt_dtype t, int64_t n, float scale)
{
	size_t es = gpt_dtype_size(t);
	float *x = malloc((size_t)n * sizeof *x);
	void *h = malloc((size_t)n * es);
	void *d = gpt_cuda_malloc((size_t)n * es, "gpu-ops", &err);
	if (!x || !h || !d)
		fail("memory");
	for (int64_t i = 0; i < n; i++) {
		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		x[i] = scale * ((float)(rng >> 40) / (float)(1 << 23) - 1.0f);
	}
	gpt_convert(h, t, x, GPT_DTYPE_F32, (size_t)n, NULL);
	if (gpu.ops->upload(&gpu, d, h, (size_t)n * es, &err))
		fail("upload");
	free(x);
	free(h);
	return d;
}

static void *dev_zero(size_t bytes)
{
	void *d = gpt_cuda_malloc(bytes, "gpu-ops", &err);
	if (!d || gpu.ops->zero(&gpu, d, bytes, &err))
		fail("memory");
	return d;
}

/* One row: WARM calls, then REPS timed; rate = amount / seconds a call
 * (amount in TFLOP or GB). */
#define ROW(shape, op, amount, unit, call)                                                      \
	do {                                                                                    \
		if (strncmp(op, only, strlen(only)) != 0)                                       \
			break;                                                                  \
		for (int w_ = 0; w_ < WARM; w_++)                                               \
			if (call)                                                               \
				fail(op);                                                       \
		if (gpu.ops->sync(&gpu, &err))                                                  \
			fail(op);                                                               \
		double t0_ = now();                                                             \
		for (int r_ = 0; r_ < REPS; r_++)                                               \
			if (call)                                                               \
				fail(op);                                                       \
		if (gpu.ops->sync(&gpu, &err))                                                  \
			fail(op);                                                               \
		double s_ = (now() - t0_) / REPS;                                               \
		printf("%-6s %-30s %9.3f %9.1f %s\n", shape, op, s_ * 1e3, (amount) / s_, unit); \
	} while (0)

typedef struct shape {
	const char *name;
	int64_t B, T, NH, HS, V, xent_rows, params;
} shape;

/* A tensor of z elements at *at, with weight decay or not, joining the
 * last run where that has the same setting. */
static void add_run(gpt_adamw_run *runs, int64_t *nr, int64_t *at, int64_t z, int decay)
{
	if (*nr > 0 && runs[*nr - 1].decay == decay && runs[*nr - 1].end == *at)
		runs[*nr - 1].end += z;
	else
		runs[(*nr)++] = (gpt_adamw_run){*at, *at + z, decay};
	*at += z;
}

/* ZeRO-Offload's step in parts (lib/train/optim.c): the gradients (at,
 * in the device's gr) down into pinned host memory, the parameters (p) up,
 * both at once (the copies to the device have a stream of their own), and
 * AdamW over the parameter table's runs on the host's CPU backend, all its
 * threads, with the state in host memory (gb: its bytes as adamw_runs'
 * row counts them). */
static void offload_rows(const shape *s, gpt_dtype dt, void *p, void *gr, const gpt_adamw_run *runs, int64_t nr,
			 int64_t at, double gb)
{
	size_t pb = (size_t)at * gpt_dtype_size(dt), mes = dt == GPT_DTYPE_BF16 ? 2 : 4;
	double GB = 1e9;
	char fb[64];
	if (strncmp("offload", only, strlen(only)) != 0 && strncmp(only, "offload", strlen(only)) != 0)
		return;
	void *hp = gpt_cuda_host_alloc(pb, "gpu-ops", &err), *hg = hp ? gpt_cuda_host_alloc(pb, "gpu-ops", &err) : NULL;
	if (!hg)
		fail("pinned memory");
	memset(hp, 0, pb);
	memset(hg, 0, pb);
	ROW(s->name, "offload: gradients down", (double)pb / GB, "GB/s",
	    gpt_cuda_copy_async(&gpu, hg, gr, pb, 0, &err));
	ROW(s->name, "offload: parameters up", (double)pb / GB, "GB/s",
	    gpt_cuda_copy_async(&gpu, p, hp, pb, 1, &err) || gpt_cuda_copies_join(&gpu, &err));
	ROW(s->name, "offload: both at once", 2.0 * (double)pb / GB, "GB/s",
	    gpt_cuda_copy_async(&gpu, hg, gr, pb, 0, &err) || gpt_cuda_copy_async(&gpu, p, hp, pb, 1, &err) ||
		    gpt_cuda_copies_join(&gpu, &err));
	gpt_backend cpu;
	if (gpt_backend_cpu_init(&cpu, dt, 0, &err))
		fail("the CPU backend");
	void *hmaster = calloc((size_t)at, mes);
	float *hm1 = calloc((size_t)at, 4), *hm2 = calloc((size_t)at, 4);
	if (!hmaster || !hm1 || !hm2)
		fail("host memory");
	gpt_adamw hpar = {.lr = 1e-4, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1,
			  .grad_scale = 1.0, .t = 1};
	snprintf(fb, sizeof fb, "offload: host adamw_runs (%dt)", cpu.threads);
	ROW(s->name, fb, gb, "GB/s",
	    cpu.ops->adamw_runs(&cpu, hp, dt == GPT_DTYPE_F16 ? hmaster : NULL, dt == GPT_DTYPE_BF16 ? hmaster : NULL, hg,
				hm1, hm2, runs, nr, &hpar, &err));
	gpt_backend_cpu_free(&cpu);
	free(hmaster), free(hm1), free(hm2);
	gpt_cuda_host_free(hp), gpt_cuda_host_free(hg);
}

static void bench_shape(const shape *s, gpt_dtype dt)
{
	const gpt_backend_ops *o = gpu.ops;
	int64_t B = s->B, T = s->T, NH = s->NH, HS = s->HS, C = NH * HS, BT = B * T, F = 4 * C;
	double es = (double)gpt_dtype_size(dt), GB = 1e9, TF = 1e12;
	char fb[64];

	/* attention */
	void *qkv = dev_rand(dt, BT * 3 * C, 1.5f), *out = dev_rand(dt, BT * C, 1.0f);
	void *dout = dev_rand(dt, BT * C, 1.0f), *dqkv = dev_zero((size_t)(BT * 3 * C) * (size_t)es);
	float *saved = dev_zero((size_t)o->attention_saved_size(&gpu, B, T, NH, HS, 1) * sizeof(float)); /* dropout or not */
	double fwd = 2.0 * (double)B * (double)NH * (double)T * (double)T * (double)HS;
	/* without dropout, and with the seed configs' attention_probs_dropout_prob */
	gpt_dropout drop = {.p = 0.1f, .key = {.seed = 1234, .step = 7, .layer = 3, .site = 1}};
	int tca = gpt_cuda_attention_tensor_cores(dt, HS), tc = HS <= 64 && tca;
	for (int d = 0; d < 2; d++) {
		const gpt_dropout *dp = d ? &drop : NULL;
		const char *ps = d ? " p=0.1" : "";
		gpt_cuda_attention_rows(&gpu, 64); /* the plain rows: 64-row tiles */
		snprintf(fb, sizeof fb, "attention_fwd HS=%lld%s", (long long)HS, ps);
		ROW(s->name, fb, fwd / TF, "TFLOP/s",
		    o->attention_fwd(&gpu, out, saved, qkv, B, T, NH, HS, dp, &err));
		/* the forward in 128-row tiles (gpt_cuda_attention_rows) */
		if (tc) {
			gpt_cuda_attention_rows(&gpu, 128);
			snprintf(fb, sizeof fb, "attention_fwd HS=%lld%s r128", (long long)HS, ps);
			ROW(s->name, fb, fwd / TF, "TFLOP/s",
			    o->attention_fwd(&gpu, out, saved, qkv, B, T, NH, HS, dp, &err));
			gpt_cuda_attention_rows(&gpu, 64);
		}
		/* the forward in 64-row tiles, the scores a key tile ahead */
		if (tca) {
			gpt_cuda_attention_rows(&gpu, GPT_CUDA_ATTN_AHEAD);
			snprintf(fb, sizeof fb, "attention_fwd HS=%lld%s ahead", (long long)HS, ps);
			ROW(s->name, fb, fwd / TF, "TFLOP/s",
			    o->attention_fwd(&gpu, out, saved, qkv, B, T, NH, HS, dp, &err));
			gpt_cuda_attention_rows(&gpu, 64);
		}
		/* with dropout, in 64-row tiles after a kernel of its own has
		 * drawn the mask (its time included) */
		if (tca && d) {
			gpt_cuda_attention_rows(&gpu, GPT_CUDA_ATTN_MASKED);
			snprintf(fb, sizeof fb, "attention_fwd HS=%lld%s mask first", (long long)HS, ps);
			ROW(s->name, fb, fwd / TF, "TFLOP/s",
			    o->attention_fwd(&gpu, out, saved, qkv, B, T, NH, HS, dp, &err));
			gpt_cuda_attention_rows(&gpu, 64);
		}
		snprintf(fb, sizeof fb, "attention_bwd HS=%lld%s", (long long)HS, ps);
		ROW(s->name, fb, 2.5 * fwd / TF, "TFLOP/s",
		    o->attention_bwd(&gpu, dqkv, dout, out, qkv, saved, B, T, NH, HS, dp, &err));
		/* dq in 128-row tiles, dkv in 128-key ones (without dropout) */
		if (tc) {
			gpt_cuda_attention_rows(&gpu, 128);
			snprintf(fb, sizeof fb, "attention_bwd HS=%lld%s r128", (long long)HS, ps);
			ROW(s->name, fb, 2.5 * fwd / TF, "TFLOP/s",
			    o->attention_bwd(&gpu, dqkv, dout, out, qkv, saved, B, T, NH, HS, dp, &err));
		}
		/* what training takes by default: each kernel's fastest form,
		 * timed at its first call (not under --once, whose calls a
		 * profiler counts) */
		gpt_cuda_attention_rows(&gpu, GPT_CUDA_ATTN_AUTO);
		int used[3];
		if (tca && REPS > 1 && strncmp("attention", only, strlen(only)) == 0) {
			if (o->attention_fwd(&gpu, out, saved, qkv, B, T, NH, HS, dp, &err) ||
			    o->attention_bwd(&gpu, dqkv, dout, out, qkv, saved, B, T, NH, HS, dp, &err))
				fail("attention, auto rows");
			gpt_cuda_attention_rows_used(&gpu, used);
			printf("%-6s attention HS=%lld%s: by default the forward, dq and dkv take %s, %s and %s rows\n",
			       s->name, (long long)HS, ps, gpt_cuda_attention_form(used[0]),
			       gpt_cuda_attention_form(used[1]), gpt_cuda_attention_form(used[2]));
		}
	}
	gpt_cuda_free(qkv), gpt_cuda_free(out), gpt_cuda_free(dout), gpt_cuda_free(dqkv);
	gpt_cuda_free(saved);

	/* generation: one new token a sequence against a cache of T - 1
	 * (gpt-infer's attention), 1 and 8 sequences; the rate is the cache's
	 * keys and values read */
	for (int64_t gb = 1; gb <= 8; gb += 7) {
		size_t cb = (size_t)(gb * NH * T * HS) * (size_t)es;
		void *kc = dev_zero(cb), *vc = dev_zero(cb), *q1 = dev_rand(dt, gb * 3 * C, 1.0f);
		void *o1 = dev_zero((size_t)(gb * C) * (size_t)es);
		snprintf(fb, sizeof fb, "attention_kv B=%lld ctx=%lld", (long long)gb, (long long)T);
		ROW(s->name, fb, 2.0 * (double)cb / GB, "GB/s",
		    o->attention_kv(&gpu, o1, kc, vc, q1, gb, 1, T - 1, T, NH, HS, &err));
		/* the 8 sequences' step in one call, as gpt-infer runs it: their
		 * slots and positions in device memory */
		if (gb == 8) {
			int32_t rows[16];
			for (int i = 0; i < 8; i++)
				rows[i] = i, rows[8 + i] = (int32_t)(T - 1);
			int32_t *drows = dev_zero(sizeof rows);
			if (o->upload(&gpu, drows, rows, sizeof rows, &err))
				fail("upload");
			snprintf(fb, sizeof fb, "attention_kv_rows B=8 ctx=%lld", (long long)T);
			ROW(s->name, fb, 2.0 * (double)cb / GB, "GB/s",
			    o->attention_kv_rows(&gpu, o1, kc, vc, q1, 8, drows, drows + 8, T, NH, HS, &err));
			gpt_cuda_free(drows);
		}
		gpt_cuda_free(kc), gpt_cuda_free(vc), gpt_cuda_free(q1), gpt_cuda_free(o1);
	}

	/* the MLP's fc: a GEMM with its bias, then the GELU */
	void *x = dev_rand(dt, BT * C, 1.0f), *w = dev_rand(dt, F * C, 0.05f), *bias = dev_rand(dt, F, 0.5f);
	void *h = dev_zero((size_t)(BT * F) * (size_t)es), *g = dev_rand(dt, BT * F, 1.0f);
	ROW(s->name, "linear_fwd (fc)", 2.0 * (double)BT * (double)C * (double)F / TF, "TFLOP/s",
	    o->linear_fwd(&gpu, h, x, w, bias, BT, C, F, &err));
	ROW(s->name, "gelu_fwd", 2.0 * (double)(BT * F) * es / GB, "GB/s",
	    o->gelu_fwd(&gpu, g, h, BT * F, &err));
	ROW(s->name, "gelu_bwd", 3.0 * (double)(BT * F) * es / GB, "GB/s",
	    o->gelu_bwd(&gpu, g, h, g, BT * F, &err));
	/* fc's bias gradient alone: the column sums of its output's gradient */
	void *dbias = dev_zero((size_t)F * (size_t)es);
	ROW(s->name, "linear_bwd dbias (fc)", (double)(BT * F) * es / GB, "GB/s",
	    o->linear_bwd(&gpu, NULL, NULL, dbias, g, NULL, NULL, BT, C, F, &err));
	gpt_cuda_free(dbias);
	gpt_cuda_free(w), gpt_cuda_free(bias), gpt_cuda_free(h), gpt_cuda_free(g);

	/* qkv's weight and bias gradients, the bias from the column sums and
	 * from the weight gradient's GEMM (cuBLASLt's BGRADB epilogue,
	 * gpt_cuda_bias_grad; a line says when cuBLASLt had no algorithm for
	 * it and the sums ran): the rate counts the GEMM's FLOPs */
	{
		void *gq = dev_rand(dt, BT * 3 * C, 1.0f), *dwq = dev_zero((size_t)(3 * C * C) * (size_t)es);
		void *dbq = dev_zero((size_t)(3 * C) * (size_t)es);
		double fl = 2.0 * (double)BT * (double)C * (double)(3 * C) / TF;
		ROW(s->name, "linear_bwd dw+dbias (qkv)", fl, "TFLOP/s",
		    o->linear_bwd(&gpu, NULL, dwq, dbq, gq, x, NULL, BT, C, 3 * C, &err));
		int was = gpt_cuda_bias_grad(&gpu, GPT_CUDA_BGRAD_GEMM);
		int64_t n0 = gpt_cuda_bias_grad_gemms(&gpu);
		ROW(s->name, "linear_bwd dw+dbias (qkv) BGRADB", fl, "TFLOP/s",
		    o->linear_bwd(&gpu, NULL, dwq, dbq, gq, x, NULL, BT, C, 3 * C, &err));
		if (gpt_cuda_bias_grad_gemms(&gpu) == n0 && strncmp("linear_bwd dw+dbias (qkv) BGRADB", only, strlen(only)) == 0)
			printf("%-6s linear_bwd: cuBLASLt has no algorithm with BGRADB here: the row ran the column sums\n",
			       s->name);
		gpt_cuda_bias_grad(&gpu, was);
		gpt_cuda_free(gq), gpt_cuda_free(dwq), gpt_cuda_free(dbq);
	}

	/* LayerNorm over the residual stream */
	void *y = dev_zero((size_t)(BT * C) * (size_t)es), *dy = dev_rand(dt, BT * C, 1.0f);
	void *lw = dev_rand(dt, C, 1.0f), *lb = dev_rand(dt, C, 0.1f);
	void *dlw = dev_zero((size_t)C * (size_t)es), *dlb = dev_zero((size_t)C * (size_t)es);
	float *mean = dev_zero((size_t)BT * sizeof(float)), *rstd = dev_zero((size_t)BT * sizeof(float));
	ROW(s->name, "layernorm_fwd", 2.0 * (double)(BT * C) * es / GB, "GB/s",
	    o->layernorm_fwd(&gpu, y, mean, rstd, x, lw, lb, BT, C, 1e-5f, &err));
	ROW(s->name, "layernorm_bwd", 6.0 * (double)(BT * C) * es / GB, "GB/s",
	    o->layernorm_bwd(&gpu, y, dlw, dlb, dy, x, lw, mean, rstd, BT, C, &err));
	/* the residual stream's dropout (hidden_dropout_prob 0.1): read and
	 * written once, the mask drawn from Philox */
	gpt_dropout hd = {.p = 0.1f, .key = {.seed = 1, .step = 1, .layer = 1, .site = GPT_RNG_SITE_MLP_RESID}};
	ROW(s->name, "dropout_fwd p=0.1", 2.0 * (double)(BT * C) * es / GB, "GB/s",
	    o->dropout_fwd(&gpu, y, x, B, T, C, &hd, &err));
	ROW(s->name, "residual_fwd", 3.0 * (double)(BT * C) * es / GB, "GB/s",
	    o->residual_fwd(&gpu, y, x, dy, BT * C, &err));
	/* the model's add and LayerNorm in one pass (reads the stream and
	 * the branch, writes the sum and its LayerNorm: 4 N C), and with the
	 * branch's dropout inside it, where it was dropout_fwd's pass before */
	{
		void *res = dev_zero((size_t)(BT * C) * (size_t)es);
		ROW(s->name, "residual_layernorm_fwd", 4.0 * (double)(BT * C) * es / GB, "GB/s",
		    o->residual_layernorm_fwd(&gpu, res, y, mean, rstd, x, dy, lw, lb, BT, C, 1e-5f, NULL, 0, &err));
		ROW(s->name, "residual_layernorm_fwd, dropout p=0.1", 4.0 * (double)(BT * C) * es / GB, "GB/s",
		    o->residual_layernorm_fwd(&gpu, res, y, mean, rstd, x, dy, lw, lb, BT, C, 1e-5f, &hd, T, &err));
		/* its backward: layernorm_bwd, and the branch's gradient dropped
		 * from the stream's as written, where dropout_bwd read it again */
		ROW(s->name, "residual_layernorm_bwd, dropout p=0.1", 7.0 * (double)(BT * C) * es / GB, "GB/s",
		    o->residual_layernorm_bwd(&gpu, y, res, dlw, dlb, dy, x, lw, mean, rstd, BT, C, &hd, T, &err));
		gpt_cuda_free(res);
	}
	/* the embedding's backward: the tokens Zipf-distributed over the
	 * vocabulary, as text's are (the most frequent about 9% of them), in
	 * host memory, as the model gives them; the rate is the gradient read
	 * once */
	{
		int64_t V = s->V;
		int32_t *tok = malloc((size_t)BT * sizeof *tok);
		double *cdf = malloc((size_t)V * sizeof *cdf), z = 0;
		if (!tok || !cdf)
			fail("memory");
		for (int64_t k = 0; k < V; k++)
			cdf[k] = z += 1.0 / (double)(k + 1);
		for (int64_t i = 0; i < BT; i++) {
			rng = rng * 6364136223846793005ull + 1442695040888963407ull;
			double u = (double)(rng >> 11) * 0x1p-53 * z;
			int64_t lo = 0, hi = V - 1;
			while (lo < hi) { /* the first rank whose cdf passes u */
				int64_t mid = (lo + hi) / 2;
				if (cdf[mid] < u)
					lo = mid + 1;
				else
					hi = mid;
			}
			tok[i] = (int32_t)(lo * 7919 % V); /* ranks scattered over the ids */
		}
		void *dwte = dev_zero((size_t)(V * C) * (size_t)es), *dwpe = dev_zero((size_t)(T * C) * (size_t)es);
		ROW(s->name, "embedding_bwd (Zipf tokens)", (double)(BT * C) * es / GB, "GB/s",
		    o->embedding_bwd(&gpu, dwte, dwpe, dy, tok, B, T, C, 0, V, 0, &err));
		gpt_cuda_free(dwte), gpt_cuda_free(dwpe);
		free(tok);
		free(cdf);
	}
	gpt_cuda_free(x), gpt_cuda_free(y), gpt_cuda_free(dy), gpt_cuda_free(lw), gpt_cuda_free(lb);
	gpt_cuda_free(dlw), gpt_cuda_free(dlb), gpt_cuda_free(mean), gpt_cuda_free(rstd);

	/* cross-entropy over one chunk of rows of the classifier */
	int64_t R = s->xent_rows, V = s->V;
	void *logits = dev_rand(dt, R * V, 4.0f);
	int32_t *tg = malloc((size_t)R * sizeof *tg);
	int32_t *targets = gpt_cuda_malloc((size_t)R * sizeof *targets, "gpu-ops", &err);
	float *mx = dev_zero((size_t)R * sizeof(float)), *se = dev_zero((size_t)R * sizeof(float));
	float *tl = dev_zero((size_t)R * sizeof(float));
	if (!tg || !targets)
		fail("memory");
	for (int64_t r = 0; r < R; r++)
		tg[r] = (int32_t)((r * 7919) % V);
	if (o->upload(&gpu, targets, tg, (size_t)R * sizeof *tg, &err))
		fail("upload");
	ROW(s->name, "xent_fwd", (double)(R * V) * es / GB, "GB/s",
	    o->xent_fwd(&gpu, mx, se, tl, logits, targets, R, V, V, 0, V, &err));
	ROW(s->name, "xent_bwd", 2.0 * (double)(R * V) * es / GB, "GB/s",
	    o->xent_bwd(&gpu, logits, logits, targets, mx, se, 1e-6f, R, V, V, 0, V, &err));
	/* both in one pass over memory: the logits read once, the gradient written */
	float *ls = dev_zero((size_t)R * sizeof(float));
	ROW(s->name, "xent_fused", 2.0 * (double)(R * V) * es / GB, "GB/s",
	    o->xent_fused(&gpu, ls, mx, se, tl, logits, logits, targets, 1e-6f, R, V, V, V, &err));
	gpt_cuda_free(ls);
	gpt_cuda_free(logits), gpt_cuda_free(targets), gpt_cuda_free(mx), gpt_cuda_free(se);
	gpt_cuda_free(tl);
	free(tg);

	/* AdamW over the model's parameters, with the master weights the
	 * trainer keeps (lib/train/optim.c): none for fp32, an fp32 copy for
	 * fp16, the low halves for bf16 */
	/* (zeros: its speed does not depend on the values, and billions of
	 * random values would take the host longer than the rest) */
	int64_t n = s->params;
	size_t mes = dt == GPT_DTYPE_F32 ? 0 : dt == GPT_DTYPE_BF16 ? 2 : 4;
	void *p = dev_zero((size_t)n * (size_t)es), *gr = dev_zero((size_t)n * (size_t)es);
	void *master = dev_zero((size_t)n * (mes ? mes : 1));
	float *m1 = dev_zero((size_t)n * 4), *m2 = dev_zero((size_t)n * 4);
	gpt_adamw hp = {.lr = 1e-4, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1,
			.grad_scale = 1.0, .t = 1};
	ROW(s->name, "adamw", (double)n * (3.0 * es + 16.0 + 2.0 * (double)mes) / GB, "GB/s",
	    o->adamw(&gpu, p, mes == 4 ? master : NULL, mes == 2 ? master : NULL, gr, m1, m2, n, &hp,
		     &err));
	/* the same over the runs of a GPT-2's parameter table as the trainer
	 * makes them (lib/train/optim.c: the tensors in the table's order,
	 * those with weight decay and those without in runs), a call a run and
	 * in adamw_runs' launches */
	{
		int64_t L = (n - (s->V + T) * C - 2 * C) / (12 * C * C + 13 * C), nr = 0, at = 0;
		gpt_adamw_run *runs = malloc((size_t)(8 * L + 4) * sizeof *runs);
		if (!runs)
			fail("memory");
		add_run(runs, &nr, &at, s->V * C, 1); /* wte, wpe */
		add_run(runs, &nr, &at, T * C, 1);
		for (int64_t l = 0; l < L; l++) {
			int64_t z[] = {2 * C, 3 * C * C, 3 * C, C * C, 3 * C, 4 * C * C, 4 * C, 4 * C * C, C};
			for (int r = 0; r < 9; r++) /* ln_1, qkv, its bias, proj, its bias and ln_2, fc, ... */
				add_run(runs, &nr, &at, z[r], r % 2);
		}
		add_run(runs, &nr, &at, 2 * C, 0); /* ln_f */
		double gb = (double)at * (3.0 * es + 16.0 + 2.0 * (double)mes) / GB;
		if (at > n)
			fail("the parameter table");
		ROW(s->name, "adamw (a call a run)", gb, "GB/s",
		    gpt_adamw_runs_each(&gpu, p, mes == 4 ? master : NULL, mes == 2 ? master : NULL, gr, m1, m2, runs,
					nr, &hp, &err));
		ROW(s->name, "adamw_runs", gb, "GB/s",
		    o->adamw_runs(&gpu, p, mes == 4 ? master : NULL, mes == 2 ? master : NULL, gr, m1, m2, runs, nr,
				  &hp, &err));
		offload_rows(s, dt, p, gr, runs, nr, at, gb);
		free(runs);
	}
	gpt_cuda_free(p), gpt_cuda_free(gr), gpt_cuda_free(master), gpt_cuda_free(m1), gpt_cuda_free(m2);
}

int main(int argc, char **argv)
{
	gpt_dtype dt = GPT_DTYPE_BF16;
	int small = 0;
	const char *want = NULL;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--small") == 0)
			small = 1;
		else if (strcmp(argv[i], "--once") == 0)
			WARM = 0, REPS = 1;
		else if (strcmp(argv[i], "--shape") == 0 && i + 1 < argc)
			want = argv[++i];
		else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
			only = argv[++i];
		else if (strcmp(argv[i], "bf16") == 0)
			dt = GPT_DTYPE_BF16;
		else if (strcmp(argv[i], "fp16") == 0)
			dt = GPT_DTYPE_F16;
		else {
			fprintf(stderr, "usage: gpu-ops [bf16|fp16] [--small] [--shape NAME] [--only PREFIX] [--once]\n");
			return 64;
		}
	}
	if (gpt_cuda_device_count() == 0) {
		printf("gpu-ops: no CUDA device\n");
		return 0;
	}
	if (gpt_backend_cuda_init(&gpu, dt, 0, &err))
		fail("the CUDA backend");
	/* GPT-2 124M at B=32, the 345M and 1.3B seed configs at B=8, T=1024;
	 * xent over one chunk of 1280 rows (Model.classifier_rows' default) */
	static const shape big[] = {
		{"124M", 32, 1024, 12, 64, 50304, 1280, 124475904},
		{"345M", 8, 1024, 16, 64, 50304, 1280, 354871296},
		{"1.3B", 8, 1024, 16, 128, 50304, 1280, 1313722368},
	};
	static const shape tiny[] = {{"small", 1, 80, 2, 64, 300, 40, 247168}}; /* a layer: the parameter table's runs */
	const shape *sh = small ? tiny : big;
	size_t ns = small ? 1 : sizeof big / sizeof *big;
	int ran = 0;
	printf("%-6s %-30s %9s %9s\n", "model", "op", "ms", "rate");
	for (size_t i = 0; i < ns; i++)
		if (!want || strcmp(want, sh[i].name) == 0)
			bench_shape(&sh[i], dt), ran++;
	if (!ran) {
		fprintf(stderr, "gpu-ops: no shape '%s' (shapes: %s)\n", want,
			small ? "small" : "124M, 345M, 1.3B");
		gpt_backend_cuda_free(&gpu);
		return 64;
	}
	gpt_backend_cuda_free(&gpu);
	return 0;
}
