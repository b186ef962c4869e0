/* Every CUDA backend op against the CPU backend (the reference) on fresh
 * random inputs at GPT-2 small shapes (B=4, T=256, C=768, 12 heads, two
 * vocabulary pieces of 50304/2), for fp32, bf16 and fp16 storage. Inputs are
 * rounded to the storage dtype first, so both backends see the same values;
 * each output element must satisfy |gpu - cpu| <= tol (|cpu| + rms(cpu))
 * with tol 1e-5 for fp32 tensors and 1e-2 for 16-bit ones. Dropout masks
 * and the embedding's gradient order must agree exactly. Then one training
 * step of a small GPT (lib/model over each backend): losses and every
 * gradient. Skips where there is no GPU. GPT_TEST_DTYPE=bf16 runs one
 * dtype, GPT_TEST_OPS=attention,xent some groups (`groups` names them). */
#include "backend/backend.h"
#include "cpu/cpu.h"
#include "cuda/cuda.h"
#include "model/gpt.h"
#define GPU_CHECK_SEED 0x2545F4914F6CDD1Dull
#include "gpu-check.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static gpt_dtype DT;
static gpt_backend cpu, gpu;
static gpt_err err;

/* One tensor on both backends: h in host (CPU backend) memory, d on the
 * device, holding the same values of dtype t. */
typedef struct ten {
	gpt_dtype t;
	int64_t n;
	void *h, *d;
} ten;

static ten ten_of(gpt_dtype t, const float *x, int64_t n)
{
	ten v = {t, n, NULL, NULL};
	size_t bytes = (size_t)n * gpt_dtype_size(t);
	v.h = xmalloc(bytes);
	gpt_convert(v.h, t, x, GPT_DTYPE_F32, (size_t)n, NULL);
	v.d = gpt_cuda_malloc(bytes, "test tensor", &err);
	if (!v.d || gpu.ops->upload(&gpu, v.d, v.h, bytes, &err)) {
		printf("Bail out! %s\n", err.msg);
		exit(1);
	}
	return v;
}

/* Random values scale * U[-1, 1) (rounded to t); fill >= 0 makes them all that value. */
static ten ten_rand(gpt_dtype t, int64_t n, double scale)
{
	float *x = xmalloc((size_t)n * sizeof *x);
	for (int64_t i = 0; i < n; i++)
		x[i] = (float)(scale * urand());
	ten v = ten_of(t, x, n);
	free(x);
	return v;
}

static ten ten_const(gpt_dtype t, int64_t n, float c)
{
	float *x = xmalloc((size_t)n * sizeof *x);
	for (int64_t i = 0; i < n; i++)
		x[i] = c;
	ten v = ten_of(t, x, n);
	free(x);
	return v;
}

static ten st(int64_t n, double scale) { return ten_rand(DT, n, scale); }
static ten f32(int64_t n, double scale) { return ten_rand(GPT_DTYPE_F32, n, scale); }

static void ten_free(ten *v)
{
	free(v->h);
	gpt_cuda_free(v->d);
	memset(v, 0, sizeof *v);
}

/* Both copies as fp32: *cpu_f, *gpu_f (malloc'd). */
static int fetch(const ten *v, float **cpu_f, float **gpu_f)
{
	size_t bytes = (size_t)v->n * gpt_dtype_size(v->t);
	void *raw = xmalloc(bytes);
	*cpu_f = xmalloc((size_t)v->n * sizeof(float));
	*gpu_f = xmalloc((size_t)v->n * sizeof(float));
	int rc = gpu.ops->download(&gpu, raw, v->d, bytes, &err);
	gpt_convert(*cpu_f, GPT_DTYPE_F32, v->h, v->t, (size_t)v->n, NULL);
	gpt_convert(*gpu_f, GPT_DTYPE_F32, raw, v->t, (size_t)v->n, NULL);
	free(raw);
	return rc;
}

/* fetch() for a check named what: on failure a failed test says why, and
 * nothing is left to free. */
static int fetch_for(const char *what, const ten *v, float **cpu_f, float **gpu_f)
{
	if (!fetch(v, cpu_f, gpu_f))
		return 0;
	ok(0, "%s %s: download: %s", gpt_dtype_name(DT), what, err.msg);
	free(*cpu_f);
	free(*gpu_f);
	return -1;
}

/* 1 when n bytes of device memory at x and y are the same */
static int dev_equal(const void *x, const void *y, size_t n)
{
	char *hx = xmalloc(n), *hy = xmalloc(n);
	int eq = !gpu.ops->download(&gpu, hx, x, n, &err) && !gpu.ops->download(&gpu, hy, y, n, &err) &&
		 memcmp(hx, hy, n) == 0;
	free(hx);
	free(hy);
	return eq;
}

/* n bytes of device floats of es bytes (2 or 4) the same bits, or both a
 * zero of either sign: the attention's tile sizes may add an exact zero's
 * products of 0 in another order (cuda.h, gpt_cuda_attention_rows); a
 * diag names the first element that differs otherwise. */
static int dev_same_z(const void *x, const void *y, size_t n, size_t es)
{
	char *hx = xmalloc(n), *hy = xmalloc(n);
	int eq = !gpu.ops->download(&gpu, hx, x, n, &err) && !gpu.ops->download(&gpu, hy, y, n, &err);
	for (size_t i = 0; eq && i + es <= n; i += es) {
		uint32_t a = 0, b = 0, mag = es == 2 ? 0x7fffu : 0x7fffffffu;
		memcpy(&a, hx + i, es);
		memcpy(&b, hy + i, es);
		if (a != b && ((a & mag) || (b & mag))) {
			diag("element %zu: bits %#x and %#x", i / es, (unsigned)a, (unsigned)b);
			eq = 0;
		}
	}
	free(hx);
	free(hy);
	return eq;
}

static double tol_of(gpt_dtype t)
{
	return t == GPT_DTYPE_F32 ? 1e-5 : 1e-2;
}

/* The largest error of n elements of g (the GPU's) against c (the
 * CPU's), relative to |cpu| + rms(cpu); its element in *wi, the rms in
 * *rms. NaN where either has one. */
static double worst_of(const float *c, const float *g, int64_t n, int64_t *wi, double *rms)
{
	double ss = 0;
	for (int64_t i = 0; i < n; i++)
		ss += (double)c[i] * c[i];
	*rms = n ? sqrt(ss / (double)n) : 0;
	double worst = 0;
	*wi = 0;
	for (int64_t i = 0; i < n; i++) {
		double d = fabs((double)g[i] - c[i]);
		double e = d == 0 ? 0 : d / (fabs(c[i]) + *rms + 1e-30);
		if (!(e <= worst)) {
			worst = e;
			*wi = i;
		}
	}
	return worst;
}

/* Every one of n elements of g (the GPU's) within tol (|cpu| + rms(cpu)) of
 * c (the CPU's), tol that of dtype t widened by factor. */
static void same_f(const char *what, gpt_dtype t, const float *c, const float *g, int64_t n,
		   double factor)
{
	double rms, tol = tol_of(t) * factor;
	int64_t wi;
	double worst = worst_of(c, g, n, &wi, &rms);
	ok(worst <= tol, "%s %s: %lld elements within %g (worst %.3g)", gpt_dtype_name(DT), what,
	   (long long)n, tol, worst);
	if (worst > tol)
		diag("element %lld: gpu %.9g cpu %.9g (rms %.3g)", (long long)wi, (double)g[wi],
		     (double)c[wi], rms);
}

/* Every element of v within tol (|cpu| + rms(cpu)); factor widens tol. */
static void same(const char *what, const ten *v, double factor)
{
	float *c, *g;
	if (fetch_for(what, v, &c, &g))
		return;
	same_f(what, v->t, c, g, v->n, factor);
	free(c);
	free(g);
}

/* v seen as rows of `parts` pieces of w elements each (dqkv: dq, dk, dv,
 * named by name[]):
 * each piece's rms error against the CPU within twice the storage dtype's
 * unit roundoff of its rms (2^-8 bf16, 2^-11 fp16). A statistic of
 * every element, unlike same()'s worst one, so it is steady from run to
 * run and shape to shape: it finds a loss of precision that the tails
 * hide (the rounding of the probabilities, an inexact D in attention's
 * backward). */
static void same_rms_parts(const char *what, const ten *v, const char *const *name, int parts,
			   int64_t w)
{
	float *c, *g;
	if (fetch_for(what, v, &c, &g))
		return;
	double u = v->t == GPT_DTYPE_BF16 ? 0x1p-8 : v->t == GPT_DTYPE_F16 ? 0x1p-11 : 0x1p-24;
	for (int q = 0; q < parts; q++) {
		double ss = 0, es = 0;
		for (int64_t i = q * w; i < v->n; i += parts * w)
			for (int64_t k = i; k < i + w && k < v->n; k++) {
				double d = (double)g[k] - c[k];
				ss += (double)c[k] * c[k];
				es += d * d;
			}
		double rel = ss > 0 ? sqrt(es / ss) : sqrt(es);
		ok(rel <= 2 * u, "%s %s, %s: rms error %.3g of the rms (%.2f unit roundoffs)",
		   gpt_dtype_name(DT), what, name[q], rel, rel / u);
	}
	free(c);
	free(g);
}

/* The device copies of two tensors hold the same bytes. */
static int same_bits(const ten *u, const ten *v)
{
	size_t bytes = (size_t)u->n * gpt_dtype_size(u->t);
	void *a = xmalloc(bytes), *b = xmalloc(bytes);
	int rc = u->n != v->n || u->t != v->t || gpu.ops->download(&gpu, a, u->d, bytes, &err) ||
		 gpu.ops->download(&gpu, b, v->d, bytes, &err) || memcmp(a, b, bytes) != 0;
	free(a);
	free(b);
	return !rc;
}

/* The zero pattern of two results is the same (dropout masks). */
static void same_zeros(const char *what, const ten *v)
{
	float *c, *g;
	int rc = fetch(v, &c, &g);
	int64_t bad = 0, zeros = 0;
	for (int64_t i = 0; !rc && i < v->n; i++) {
		bad += (c[i] == 0.0f) != (g[i] == 0.0f);
		zeros += c[i] == 0.0f;
	}
	ok(!rc && bad == 0 && zeros > 0, "%s %s: the same %lld dropped elements", gpt_dtype_name(DT),
	   what, (long long)zeros);
	if (bad)
		diag("%lld elements differ in being zero", (long long)bad);
	free(c);
	free(g);
}

#define H(v) ((v).h)
#define D(v) ((v).d)
/* Runs op on the CPU with the host pointers and on the GPU with the device
 * ones: args are written twice, once per backend, through CALL2. */
#define CALL2(op, cargs, gargs)                                                          \
	do {                                                                             \
		if (cpu.ops->op cargs) {                                                 \
			ok(0, "%s cpu " #op ": %s", gpt_dtype_name(DT), err.msg);        \
			return;                                                          \
		}                                                                        \
		if (gpu.ops->op gargs) {                                                 \
			ok(0, "%s cuda " #op ": %s", gpt_dtype_name(DT), err.msg);       \
			return;                                                          \
		}                                                                        \
	} while (0)

#ifndef GPT_CUDA_EMU
enum { B = 4, T = 256, C = 768, NH = 12, HS = 64, F = 3072, BT = B * T };
#define VOCAB 50257
#define VPAD 50304
#define GEMM_M 256, n = 384, k = 768
#define BATCHED 12, bm = 256, bn = 256, bk = 64
#define ADAMW_N (1 << 20)
#define MODEL_SHAPE .max_pos = 128, .hidden = 256, .layers = 2, .heads = 4, .ffn = 1024
#define MODEL_T 128
/* more attention shapes: B, T, heads, head size, qkv misaligned */
#define ATTN_MORE {2, 333, 4, 128, 0}, {3, 200, 2, 48, 1}, {2, 150, 3, 32, 0}, {2, 200, 2, 96, 0}
/* more LayerNorm shapes: rows, C, inputs misaligned by one element */
#define LN_MORE {64, 1000, 0}, {64, 1600, 0}, {64, 2560, 0}, {64, 770, 0}, {64, 768, 1}, {2309, 96, 0}
#else /* tests/gpu/emu/run.sh: small shapes (T not a multiple of the tiles) for a CPU emulation */
enum { B = 2, T = 45, C = 128, NH = 2, HS = 64, F = 512, BT = B * T };
#define VOCAB 1000
#define VPAD 1024
#define GEMM_M 37, n = 45, k = 70
#define BATCHED 3, bm = 33, bn = 40, bk = 20
#define ADAMW_N (1 << 14)
#define MODEL_SHAPE .max_pos = 64, .hidden = 128, .layers = 2, .heads = 2, .ffn = 512
#define MODEL_T 64
#define ATTN_MORE {1, 140, 1, 64, 0}, {1, 100, 1, 128, 0}, {1, 70, 1, 48, 1}, {1, 40, 1, 32, 0}, {1, 90, 2, 96, 0}
#define LN_MORE {20, 328, 0}, {16, 1000, 0}, {12, 1056, 0}, {8, 2040, 0}, {20, 130, 0}, {20, 128, 1}, {2309, 96, 0}
#endif

static void test_gemm(void)
{
	int64_t m = GEMM_M;
	for (int ta = 0; ta < 2; ta++)
		for (int tb = 0; tb < 2; tb++) {
			int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 5, ldc = n + 7;
			ten a = st((ta ? k : m) * lda, 1), b = st((tb ? n : k) * ldb, 1);
			ten c = st(m * ldc, 1);
			CALL2(gemm, (&cpu, ta, tb, m, n, k, 0.5f, H(a), lda, H(b), ldb, 1.0f, H(c), ldc, &err),
			      (&gpu, ta, tb, m, n, k, 0.5f, D(a), lda, D(b), ldb, 1.0f, D(c), ldc, &err));
			char what[64];
			snprintf(what, sizeof what, "gemm trans %d%d, beta 1, strided", ta, tb);
			same(what, &c, 1);
			ten_free(&a);
			ten_free(&b);
			ten_free(&c);
		}
	/* beta 0 ignores NaN in C */
	ten a = st(m * k, 1), b = st(n * k, 1), c = ten_const(DT, m * n, NAN);
	CALL2(gemm, (&cpu, 0, 1, m, n, k, 1.0f, H(a), k, H(b), k, 0.0f, H(c), n, &err),
	      (&gpu, 0, 1, m, n, k, 1.0f, D(a), k, D(b), k, 0.0f, D(c), n, &err));
	same("gemm beta 0 over NaN", &c, 1);
	ten_free(&c);
	/* batched, as attention's heads would be */
	int64_t bs = BATCHED;
	ten ba = st(bs * bm * bk, 1), bb = st(bs * bn * bk, 1), bc = st(bs * bm * bn, 1);
	CALL2(gemm_batched, (&cpu, 0, 1, bm, bn, bk, 0.125f, H(ba), bk, bm * bk, H(bb), bk, bn * bk,
			     0.0f, H(bc), bn, bm * bn, bs, &err),
	      (&gpu, 0, 1, bm, bn, bk, 0.125f, D(ba), bk, bm * bk, D(bb), bk, bn * bk, 0.0f, D(bc), bn,
	       bm * bn, bs, &err));
	same("gemm_batched", &bc, 1);
	ten_free(&a);
	ten_free(&b);
	ten_free(&ba);
	ten_free(&bb);
	ten_free(&bc);
}

/* The context keeps cuBLASLt's plan for each product's shape (gemm.cu's
 * lt_plan): products alike but for one thing the plan holds (a transpose,
 * a leading dimension, a batch stride; of the same alignment, which the
 * plan's key holds too), each twice in turn, the second round from the
 * plans. */
static void test_gemm_plans(void)
{
	const int64_t s = 24, bs = 3;
	struct {
		int ta, tb;
		int64_t lda, ldb, ldc, sa, sb, sc;
	} v[] = {
		{0, 0, s, s, s, 0, 0, 0},
		{0, 1, s, s, s, 0, 0, 0},
		{1, 0, s, s, s, 0, 0, 0},
		{1, 1, s, s, s, 0, 0, 0},
		{0, 1, s + 16, s, s, 0, 0, 0},
		{0, 1, s, s + 16, s, 0, 0, 0},
		{0, 1, s, s, s + 16, 0, 0, 0},
		{0, 1, s, s, s, s * s, s * s, s * s},
		{0, 1, s, s, s, s * s + 128, s * s, s * s},
		{0, 1, s, s, s, s * s, s * s + 128, s * s},
		{0, 1, s, s, s, s * s, s * s, s * s + 128},
	};
	for (int round = 0; round < 2; round++)
		for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
			int64_t nb = v[i].sc ? bs : 1, sa = v[i].sa, sb = v[i].sb, sc = v[i].sc;
			/* all the size of the largest: the emulation's allocations
			 * end where a page does, their alignment that of the size */
			int64_t all = (bs - 1) * (s * s + 128) + s * (s + 16);
			ten a = st(all, 1), b = st(all, 1), c = st(all, 1);
			CALL2(gemm_batched, (&cpu, v[i].ta, v[i].tb, s, s, s, 0.5f, H(a), v[i].lda, sa, H(b),
					     v[i].ldb, sb, 1.0f, H(c), v[i].ldc, sc, nb, &err),
			      (&gpu, v[i].ta, v[i].tb, s, s, s, 0.5f, D(a), v[i].lda, sa, D(b), v[i].ldb, sb,
			       1.0f, D(c), v[i].ldc, sc, nb, &err));
			char what[96];
			snprintf(what, sizeof what, "gemm plans, round %d: trans %d%d, ld %lld %lld %lld, batch %lld",
				 round + 1, v[i].ta, v[i].tb, (long long)v[i].lda, (long long)v[i].ldb,
				 (long long)v[i].ldc, (long long)nb);
			same(what, &c, 1);
			ten_free(&a);
			ten_free(&b);
			ten_free(&c);
		}
	/* more shapes than the context keeps plans for (256): old ones give
	 * way, and come back */
	const int64_t many = 300, w = 8;
	ten a = st(many * w, 1), b = st(w * w, 1), c = st(many * w, 1);
	int bad = 0;
	for (int round = 0; round < 2; round++)
		for (int64_t m = 1; m <= many; m++) {
			CALL2(gemm, (&cpu, 0, 1, m, w, w, 1.0f, H(a), w, H(b), w, 0.0f, H(c), w, &err),
			      (&gpu, 0, 1, m, w, w, 1.0f, D(a), w, D(b), w, 0.0f, D(c), w, &err));
			float *hc, *hg;
			int64_t wi;
			double rms;
			if (fetch(&c, &hc, &hg)) {
				bad++;
				continue;
			}
			bad += !(worst_of(hc, hg, c.n, &wi, &rms) <= tol_of(DT));
			free(hc);
			free(hg);
		}
	ok(bad == 0, "%s gemm plans: %lld shapes twice, %d not the CPU's", gpt_dtype_name(DT),
	   (long long)many, bad);
	ten_free(&a);
	ten_free(&b);
	ten_free(&c);
}

static void test_linear(void)
{
	ten x = st(BT * C, 1), w = st(3 * C * C, 0.05), bias = st(3 * C, 0.5);
	ten y = st(BT * 3 * C, 1);
	CALL2(linear_fwd, (&cpu, H(y), H(x), H(w), H(bias), BT, C, 3 * C, &err),
	      (&gpu, D(y), D(x), D(w), D(bias), BT, C, 3 * C, &err));
	same("linear_fwd with bias (qkv)", &y, 1);
	CALL2(linear_fwd, (&cpu, H(y), H(x), H(w), NULL, BT, C, 3 * C, &err),
	      (&gpu, D(y), D(x), D(w), NULL, BT, C, 3 * C, &err));
	same("linear_fwd without bias", &y, 1);
	/* a bias at an odd element offset (a flat parameter buffer) */
	ten bias2 = st(3 * C + 1, 0.5);
	CALL2(linear_fwd, (&cpu, H(y), H(x), H(w), (char *)H(bias2) + gpt_dtype_size(DT), BT, C, 3 * C, &err),
	      (&gpu, D(y), D(x), D(w), (char *)D(bias2) + gpt_dtype_size(DT), BT, C, 3 * C, &err));
	same("linear_fwd with a misaligned bias", &y, 1);
	ten_free(&x);
	ten_free(&w);
	ten_free(&bias);
	ten_free(&bias2);
	ten_free(&y);

	/* backward of the MLP's fc: K = 768, N = 3072; dw and dbias accumulate */
	ten g = st(BT * F, 1), inp = st(BT * C, 1), w2 = st(F * C, 0.05);
	ten dinp = ten_const(DT, BT * C, NAN), dw = st(F * C, 1), db = st(F, 1);
	CALL2(linear_bwd, (&cpu, H(dinp), H(dw), H(db), H(g), H(inp), H(w2), BT, C, F, &err),
	      (&gpu, D(dinp), D(dw), D(db), D(g), D(inp), D(w2), BT, C, F, &err));
	same("linear_bwd dinp (written over NaN)", &dinp, 1);
	same("linear_bwd dw (accumulated)", &dw, 1);
	same("linear_bwd dbias (accumulated)", &db, 1);
	/* the bias gradient from the weight gradient's product (cuBLASLt's
	 * BGRADB epilogue, gpt_cuda_bias_grad): the same bounds. Emulated, the
	 * epilogue must have run; on a GPU a note says whether cuBLASLt took it
	 * (else the column sums ran) */
	{
		int was = gpt_cuda_bias_grad(&gpu, GPT_CUDA_BGRAD_GEMM);
		int64_t n0 = gpt_cuda_bias_grad_gemms(&gpu);
		CALL2(linear_bwd, (&cpu, H(dinp), H(dw), H(db), H(g), H(inp), H(w2), BT, C, F, &err),
		      (&gpu, D(dinp), D(dw), D(db), D(g), D(inp), D(w2), BT, C, F, &err));
		int64_t ran = gpt_cuda_bias_grad_gemms(&gpu) - n0;
		same("linear_bwd dw, its GEMM with the BGRADB epilogue (accumulated)", &dw, 1);
		same("linear_bwd dbias from the BGRADB epilogue (accumulated)", &db, 1);
		int now = gpt_cuda_bias_grad(&gpu, 0), bad = gpt_cuda_bias_grad(&gpu, 3);
		gpt_cuda_bias_grad(&gpu, was);
		ok((was == GPT_CUDA_BGRAD_SUMS || was == GPT_CUDA_BGRAD_GEMM) && now == GPT_CUDA_BGRAD_GEMM && bad == -1 &&
		   gpt_cuda_bias_grad(&gpu, 0) == was,
		   "%s gpt_cuda_bias_grad: 0 asks, another value is refused", gpt_dtype_name(DT));
#ifdef GPT_CUDA_EMU
		ok(ran == 1, "%s linear_bwd: the bias gradient came from the epilogue (%lld times)", gpt_dtype_name(DT),
		   (long long)ran);
#else
		diag("%s linear_bwd (M %d, K %d, N %d): cuBLASLt %s", gpt_dtype_name(DT), BT, C, F,
		     ran ? "took the BGRADB epilogue" : "has no algorithm with the BGRADB epilogue: the column sums ran");
#endif
	}
	CALL2(linear_bwd, (&cpu, NULL, NULL, H(db), H(g), H(inp), H(w2), BT, C, F, &err),
	      (&gpu, NULL, NULL, D(db), D(g), D(inp), D(w2), BT, C, F, &err));
	same("linear_bwd dbias only", &db, 1);
	/* N not a multiple of a 16-byte vector: the element-wise column sums */
	CALL2(linear_bwd, (&cpu, NULL, NULL, H(db), H(g), H(inp), H(w2), BT, C, F - 1, &err),
	      (&gpu, NULL, NULL, D(db), D(g), D(inp), D(w2), BT, C, F - 1, &err));
	same("linear_bwd dbias only, N odd", &db, 1);
	/* rows in more than 8 parts of 256 (pass 2's threads add several each) */
	{
		int64_t m = 9 * 256 + 5;
		ten g2 = st(m * 72, 1), db2 = st(72, 1);
		for (int64_t n = 72; n >= 70; n -= 2) {
			CALL2(linear_bwd, (&cpu, NULL, NULL, H(db2), H(g2), NULL, NULL, m, C, n, &err),
			      (&gpu, NULL, NULL, D(db2), D(g2), NULL, NULL, m, C, n, &err));
			same(n == 72 ? "linear_bwd dbias only, 2309 rows" : "linear_bwd dbias only, 2309 rows, N = 70",
			     &db2, 1);
		}
		ten_free(&g2);
		ten_free(&db2);
	}
	ten out = st(BT * C, 1), b3 = st(C, 1);
	CALL2(bias_add, (&cpu, H(out), H(b3), BT, C, &err), (&gpu, D(out), D(b3), BT, C, &err));
	same("bias_add", &out, 1);
	ten_free(&g);
	ten_free(&inp);
	ten_free(&w2);
	ten_free(&dinp);
	ten_free(&dw);
	ten_free(&db);
	ten_free(&out);
	ten_free(&b3);
}

/* Model.fused_linear: fc and its GELU in one GEMM (GELU_AUX_BIAS), and the
 * projection's input gradient times the GELU's derivative (DGELU), against
 * the CPU's two ops each; a misaligned bias takes the unfused path. The
 * GELU's output and the input gradient compose a GEMM, a rounding and the
 * GELU (its derivative), which cuBLASLt evaluates in its own way from the
 * unrounded product: on an H200 (2026-11-26) they differed from the CPU's
 * by up to 2.2e-5 (fp32) and 0.013 (bf16) of the op tolerance's measure,
 * hence three times the tolerance for those two; the GELU's input and the
 * weight and bias gradients, plain GEMMs, keep the op tolerance. The
 * backward takes the same inputs on both sides (not each side's forward
 * results), so that it is checked alone. */
static void test_gelu_fusions(void)
{
	ten x = st(BT * C, 1), w = st(F * C, 0.05), bias = st(F + 1, 0.5);
	ten pre = ten_const(DT, BT * F, NAN), y = ten_const(DT, BT * F, NAN);
	for (int off = 0; off < 2; off++) {
		size_t bo = (size_t)off * gpt_dtype_size(DT);
		CALL2(linear_gelu_fwd, (&cpu, H(y), H(pre), H(x), H(w), (char *)H(bias) + bo, BT, C, F, &err),
		      (&gpu, D(y), D(pre), D(x), D(w), (char *)D(bias) + bo, BT, C, F, &err));
		same(off ? "linear_gelu_fwd out, misaligned bias" : "linear_gelu_fwd out", &y, 3);
		same(off ? "linear_gelu_fwd pre, misaligned bias" : "linear_gelu_fwd pre", &pre, 1);
	}
	/* the projection (K = F, N = C) whose input is a GELU's output y2 of pre2 */
	ten g = st(BT * C, 1), w2 = st(C * F, 0.05), y2 = st(BT * F, 1), pre2 = st(BT * F, 2);
	ten dinp = ten_const(DT, BT * F, NAN), dw = st(C * F, 1), db = st(C, 1);
	CALL2(linear_dgelu_bwd, (&cpu, H(dinp), H(dw), H(db), H(g), H(y2), H(w2), H(pre2), BT, F, C, &err),
	      (&gpu, D(dinp), D(dw), D(db), D(g), D(y2), D(w2), D(pre2), BT, F, C, &err));
	same("linear_dgelu_bwd dinp (written over NaN)", &dinp, 3);
	same("linear_dgelu_bwd dw (accumulated)", &dw, 1);
	same("linear_dgelu_bwd dbias (accumulated)", &db, 1);
	ten_free(&x), ten_free(&w), ten_free(&bias), ten_free(&pre), ten_free(&y);
	ten_free(&g), ten_free(&w2), ten_free(&y2), ten_free(&pre2), ten_free(&dinp), ten_free(&dw),
		ten_free(&db);
}

static void test_layernorm(void)
{
	ten x = st(BT * C, 2), w = st(C, 1), b = st(C, 1), y = st(BT * C, 1);
	ten mean = f32(BT, 1), rstd = f32(BT, 1);
	/* an offset so that the mean matters */
	float *xs = xmalloc(BT * C * sizeof *xs);
	for (int64_t i = 0; i < BT * C; i++)
		xs[i] = (float)(3.0 + 2.0 * urand());
	ten_free(&x);
	x = ten_of(DT, xs, BT * C);
	free(xs);
	CALL2(layernorm_fwd, (&cpu, H(y), H(mean), H(rstd), H(x), H(w), H(b), BT, C, 1e-5f, &err),
	      (&gpu, D(y), D(mean), D(rstd), D(x), D(w), D(b), BT, C, 1e-5f, &err));
	same("layernorm_fwd out", &y, 1);
	same("layernorm_fwd mean", &mean, 1);
	same("layernorm_fwd rstd", &rstd, 1);
	ten g = st(BT * C, 1), dx = st(BT * C, 1), dw = st(C, 1), db = st(C, 1);
	CALL2(layernorm_bwd, (&cpu, H(dx), H(dw), H(db), H(g), H(x), H(w), (float *)H(mean), (float *)H(rstd), BT, C, &err),
	      (&gpu, D(dx), D(dw), D(db), D(g), D(x), D(w), (float *)D(mean), (float *)D(rstd), BT, C, &err));
	same("layernorm_bwd dinp (accumulated)", &dx, 1);
	same("layernorm_bwd dw (accumulated)", &dw, 1);
	same("layernorm_bwd db (accumulated)", &db, 1);
	CALL2(layernorm_bwd, (&cpu, H(dx), NULL, NULL, H(g), H(x), H(w), (float *)H(mean), (float *)H(rstd), BT, C, &err),
	      (&gpu, D(dx), NULL, NULL, D(g), D(x), D(w), (float *)D(mean), (float *)D(rstd), BT, C, &err));
	same("layernorm_bwd without dw, db", &dx, 1);
	/* the residual dropout's backward fused in: the CPU's two ops; on the
	 * GPU the bits of its own layernorm_bwd then dropout_bwd, with the
	 * weight gradients (their pass in the row kernel) and without, and
	 * from a feature the kernels leave to those two ops */
	{
		gpt_dropout dd = {.p = 0.1f, .key = {.seed = 99, .step = 4, .layer = 2, .site = GPT_RNG_SITE_ATTN_RESID},
				  .sample0 = 3, .feature0 = 0, .t0 = 0};
		size_t bytes = (size_t)(BT * C) * gpt_dtype_size(DT), cb = (size_t)C * gpt_dtype_size(DT);
		for (int k = 0; k < 3; k++) {
			int wg = k != 1;
			dd.feature0 = k == 2 ? 3 : 0;
			ten dbr = st(BT * C, 1), dx2 = st(BT * C, 1), dbr2 = st(BT * C, 1), dw2 = st(C, 1), db2 = st(C, 1);
			int rc = gpu.ops->copy(&gpu, dx2.d, dx.d, bytes, &err) || gpu.ops->copy(&gpu, dw2.d, dw.d, cb, &err) ||
				 gpu.ops->copy(&gpu, db2.d, db.d, cb, &err);
			CALL2(residual_layernorm_bwd, (&cpu, H(dx), H(dbr), wg ? H(dw) : NULL, wg ? H(db) : NULL, H(g), H(x), H(w), (float *)H(mean), (float *)H(rstd), BT, C, &dd, T, &err),
			      (&gpu, D(dx), D(dbr), wg ? D(dw) : NULL, wg ? D(db) : NULL, D(g), D(x), D(w), (float *)D(mean), (float *)D(rstd), BT, C, &dd, T, &err));
			const char *how = k == 0 ? "" : k == 1 ? " without dw, db" : " from feature 3";
			char what[96];
			snprintf(what, sizeof what, "residual_layernorm_bwd%s: dinp", how);
			same(what, &dx, 1);
			snprintf(what, sizeof what, "residual_layernorm_bwd%s: dbranch", how);
			same(what, &dbr, 1);
			if (wg) {
				snprintf(what, sizeof what, "residual_layernorm_bwd%s: dw", how);
				same(what, &dw, 1);
				snprintf(what, sizeof what, "residual_layernorm_bwd%s: db", how);
				same(what, &db, 1);
			}
			rc = rc ||
			     gpu.ops->layernorm_bwd(&gpu, dx2.d, wg ? dw2.d : NULL, wg ? db2.d : NULL, g.d, x.d, w.d,
						    (float *)mean.d, (float *)rstd.d, BT, C, &err) ||
			     gpu.ops->dropout_bwd(&gpu, dbr2.d, dx2.d, B, T, C, &dd, &err);
			ok(!rc && same_bits(&dx, &dx2) && same_bits(&dbr, &dbr2) && same_bits(&dw, &dw2) &&
				   same_bits(&db, &db2),
			   "%s residual_layernorm_bwd%s: the bits of layernorm_bwd then dropout_bwd on the gpu %s",
			   gpt_dtype_name(DT), how, rc ? err.msg : "");
			ten_free(&dbr), ten_free(&dx2), ten_free(&dbr2), ten_free(&dw2), ten_free(&db2);
		}
	}
	/* the residual add fused in: the CPU's two ops; on the GPU the very bits
	 * of its own two, the branch's stream written over (res aliases b) */
	ten a = st(BT * C, 1), r = st(BT * C, 1), r2 = st(BT * C, 1), y2 = st(BT * C, 1);
	ten mean2 = f32(BT, 1), rstd2 = f32(BT, 1);
	CALL2(residual_layernorm_fwd, (&cpu, H(r), H(y), H(mean), H(rstd), H(x), H(a), H(w), H(b), BT, C, 1e-5f, NULL, 0, &err),
	      (&gpu, D(r), D(y), D(mean), D(rstd), D(x), D(a), D(w), D(b), BT, C, 1e-5f, NULL, 0, &err));
	same("residual_layernorm_fwd res", &r, 1);
	same("residual_layernorm_fwd out", &y, 1);
	same("residual_layernorm_fwd mean", &mean, 1);
	same("residual_layernorm_fwd rstd", &rstd, 1);
	size_t rb = (size_t)(BT * C) * gpt_dtype_size(DT);
	int rc = gpu.ops->copy(&gpu, r2.d, a.d, rb, &err) ||
		 gpu.ops->residual_fwd(&gpu, r2.d, x.d, r2.d, BT * C, &err) ||
		 gpu.ops->layernorm_fwd(&gpu, y2.d, (float *)mean2.d, (float *)rstd2.d, r2.d, w.d, b.d, BT, C, 1e-5f,
					&err) ||
		 gpu.ops->residual_layernorm_fwd(&gpu, a.d, y.d, (float *)mean.d, (float *)rstd.d, x.d, a.d, w.d, b.d, BT,
						 C, 1e-5f, NULL, 0, &err);
	ok(!rc && same_bits(&a, &r2) && same_bits(&y, &y2) && same_bits(&mean, &mean2) && same_bits(&rstd, &rstd2),
	   "%s residual_layernorm_fwd in place: the bits of residual_fwd then layernorm_fwd on the gpu %s",
	   gpt_dtype_name(DT), rc ? err.msg : "");
	/* the branch dropped first (the model's residual dropout, a tensor-
	 * parallel feature offset and a sequence-parallel t0): the CPU's
	 * three ops; on the GPU the bits of its own three, b left as it was */
	gpt_dropout d = {.p = 0.1f, .key = {.seed = 1234, .step = 7, .layer = 3, .site = GPT_RNG_SITE_MLP_RESID},
			 .sample0 = 8, .feature0 = 768, .t0 = 13};
	ten bd = st(BT * C, 1), bd2 = ten_const(DT, BT * C, 0.0f);
	rc = gpu.ops->copy(&gpu, bd2.d, bd.d, rb, &err);
	CALL2(residual_layernorm_fwd, (&cpu, H(r), H(y), H(mean), H(rstd), H(x), H(bd), H(w), H(b), BT, C, 1e-5f, &d, T, &err),
	      (&gpu, D(r), D(y), D(mean), D(rstd), D(x), D(bd), D(w), D(b), BT, C, 1e-5f, &d, T, &err));
	same("residual_layernorm_fwd with dropout res", &r, 1);
	same("residual_layernorm_fwd with dropout out", &y, 1);
	same("residual_layernorm_fwd with dropout rstd", &rstd, 1);
	rc = rc || gpu.ops->dropout_fwd(&gpu, bd2.d, bd2.d, B, T, C, &d, &err) ||
	     gpu.ops->residual_fwd(&gpu, r2.d, x.d, bd2.d, BT * C, &err) ||
	     gpu.ops->layernorm_fwd(&gpu, y2.d, (float *)mean2.d, (float *)rstd2.d, r2.d, w.d, b.d, BT, C, 1e-5f, &err);
	ok(!rc && same_bits(&r, &r2) && same_bits(&y, &y2) && same_bits(&mean, &mean2) && same_bits(&rstd, &rstd2),
	   "%s residual_layernorm_fwd with dropout: the bits of dropout_fwd, residual_fwd, layernorm_fwd on the gpu %s",
	   gpt_dtype_name(DT), rc ? err.msg : "");
	ten *all[] = {&x, &w, &b, &y, &mean, &rstd, &g, &dx, &dw, &db, &a, &r, &r2, &y2, &mean2, &rstd2, &bd, &bd2};
	for (size_t i = 0; i < sizeof all / sizeof *all; i++)
		ten_free(all[i]);
}

/* same(), named by the op, the part, the row length and the alignment */
static void same_at(const char *op, const char *part, int64_t c, int mis, const ten *v)
{
	char what[128];
	snprintf(what, sizeof what, "%s C=%lld%s %s", op, (long long)c, mis ? " misaligned" : "", part);
	same(what, v, 1);
}

/* LayerNorm at one more shape (lib/cuda/layernorm.cu's two forms): rows
 * whose vectors leave lanes idle or fill several a lane, rows past what
 * the vector kernels hold in registers, C not a multiple of a 16-byte
 * vector or the row tensors one element past an aligned address (the
 * scalar kernels). */
static void test_layernorm_at(int64_t n, int64_t c, int mis)
{
	size_t o = (size_t)mis * gpt_dtype_size(DT);
	int64_t nc = n * c + mis;
	ten x = st(nc, 2), a = st(nc, 1), w = st(c, 1), b = st(c, 1), y = st(nc, 1), r = st(nc, 1);
	ten mean = f32(n, 1), rstd = f32(n, 1), g = st(nc, 1), dx = st(nc, 1), dw = st(c, 1), db = st(c, 1);
#define HO(v) ((char *)H(v) + o)
#define DO(v) ((char *)D(v) + o)
	CALL2(residual_layernorm_fwd, (&cpu, HO(r), HO(y), H(mean), H(rstd), HO(x), HO(a), H(w), H(b), n, c, 1e-5f, NULL, 0, &err),
	      (&gpu, DO(r), DO(y), D(mean), D(rstd), DO(x), DO(a), D(w), D(b), n, c, 1e-5f, NULL, 0, &err));
	same_at("residual_layernorm_fwd", "out", c, mis, &y);
	same_at("residual_layernorm_fwd", "res", c, mis, &r);
	/* with dropout, its features from 5 (blocks of eight straddled), the
	 * rows one sequence from position 3 (a was dropped in place on the
	 * CPU, left on the GPU: a fresh branch) */
	gpt_dropout d = {.p = 0.25f, .key = {.seed = 77, .step = 2, .layer = 1, .site = GPT_RNG_SITE_ATTN_RESID},
			 .sample0 = 2, .feature0 = 5, .t0 = 3};
	ten bd = st(nc, 1);
	CALL2(residual_layernorm_fwd, (&cpu, HO(r), HO(y), H(mean), H(rstd), HO(x), HO(bd), H(w), H(b), n, c, 1e-5f, &d, n, &err),
	      (&gpu, DO(r), DO(y), D(mean), D(rstd), DO(x), DO(bd), D(w), D(b), n, c, 1e-5f, &d, n, &err));
	same_at("residual_layernorm_fwd", "with dropout res", c, mis, &r);
	ten_free(&bd);
	CALL2(layernorm_fwd, (&cpu, HO(y), H(mean), H(rstd), HO(x), H(w), H(b), n, c, 1e-5f, &err),
	      (&gpu, DO(y), D(mean), D(rstd), DO(x), D(w), D(b), n, c, 1e-5f, &err));
	same_at("layernorm_fwd", "out", c, mis, &y);
	same_at("layernorm_fwd", "rstd", c, mis, &rstd);
	CALL2(layernorm_bwd, (&cpu, HO(dx), H(dw), H(db), HO(g), HO(x), H(w), (float *)H(mean), (float *)H(rstd), n, c, &err),
	      (&gpu, DO(dx), D(dw), D(db), DO(g), DO(x), D(w), (float *)D(mean), (float *)D(rstd), n, c, &err));
	same_at("layernorm_bwd", "dinp", c, mis, &dx);
	same_at("layernorm_bwd", "dw", c, mis, &dw);
	same_at("layernorm_bwd", "db", c, mis, &db);
	/* and with the residual dropout's backward: the row kernels' draws
	 * (from feature 8, a multiple of every dtype's vector) */
	ten dbr = st(nc, 1);
	d.feature0 = 8;
	CALL2(residual_layernorm_bwd, (&cpu, HO(dx), HO(dbr), H(dw), H(db), HO(g), HO(x), H(w), (float *)H(mean), (float *)H(rstd), n, c, &d, n, &err),
	      (&gpu, DO(dx), DO(dbr), D(dw), D(db), DO(g), DO(x), D(w), (float *)D(mean), (float *)D(rstd), n, c, &d, n, &err));
	same_at("residual_layernorm_bwd", "dinp", c, mis, &dx);
	same_at("residual_layernorm_bwd", "dbranch", c, mis, &dbr);
	same_at("residual_layernorm_bwd", "dw", c, mis, &dw);
	ten_free(&dbr);
#undef HO
#undef DO
	ten *all[] = {&x, &a, &w, &b, &y, &r, &mean, &rstd, &g, &dx, &dw, &db};
	for (size_t i = 0; i < sizeof all / sizeof *all; i++)
		ten_free(all[i]);
}

static void test_layernorm_more(void)
{
	static const struct {
		int64_t n, c;
		int mis;
	} more[] = {LN_MORE};
	for (size_t k = 0; k < sizeof more / sizeof *more; k++)
		test_layernorm_at(more[k].n, more[k].c, more[k].mis);
}

static void test_elementwise(void)
{
	int64_t n = BT * F;
	ten x = st(n, 4), y = st(n, 1), g = st(n, 1);
	CALL2(gelu_fwd, (&cpu, H(y), H(x), n, &err), (&gpu, D(y), D(x), n, &err));
	same("gelu_fwd", &y, 1);
	CALL2(gelu_bwd, (&cpu, H(g), H(x), H(g), n, &err), (&gpu, D(g), D(x), D(g), n, &err));
	same("gelu_bwd (in place)", &g, 1);
	/* a length that leaves a part vector (the element-wise tail), and the
	 * tensors one element past an aligned address (the element-wise kernels) */
	size_t es = gpt_dtype_size(DT);
	CALL2(gelu_fwd, (&cpu, H(y), H(x), n - 3, &err), (&gpu, D(y), D(x), n - 3, &err));
	same("gelu_fwd, n not whole vectors", &y, 1);
	CALL2(gelu_bwd, (&cpu, H(g), H(x), H(y), n - 3, &err), (&gpu, D(g), D(x), D(y), n - 3, &err));
	same("gelu_bwd, n not whole vectors", &g, 1);
	CALL2(gelu_fwd, (&cpu, (char *)H(y) + es, H(x), n - 1, &err), (&gpu, (char *)D(y) + es, D(x), n - 1, &err));
	same("gelu_fwd misaligned", &y, 1);
	CALL2(gelu_bwd, (&cpu, (char *)H(g) + es, (char *)H(x) + es, (char *)H(g) + es, n - 1, &err),
	      (&gpu, (char *)D(g) + es, (char *)D(x) + es, (char *)D(g) + es, n - 1, &err));
	same("gelu_bwd misaligned, in place", &g, 1);
	/* gelu_bwd_bias (F columns: fc's): in place, as the model calls it,
	 * against the CPU; on the GPU the very bits of gelu_bwd then
	 * linear_bwd's dbias; then F - 1 columns and a misaligned dinp (the
	 * two ops), and no dbias */
	{
		ten dy = st(n, 1), dy2 = st(n, 1), db = st(F, 1), db2 = st(F, 1);
		size_t nb = (size_t)n * es, fb = (size_t)F * es;
		int rc = gpu.ops->copy(&gpu, dy2.d, dy.d, nb, &err) || gpu.ops->copy(&gpu, db2.d, db.d, fb, &err);
		CALL2(gelu_bwd_bias, (&cpu, H(dy), H(db), H(x), H(dy), BT, F, &err),
		      (&gpu, D(dy), D(db), D(x), D(dy), BT, F, &err));
		same("gelu_bwd_bias dinp (in place)", &dy, 1);
		same("gelu_bwd_bias dbias (accumulated)", &db, 1);
		rc = rc || gpu.ops->gelu_bwd(&gpu, dy2.d, x.d, dy2.d, n, &err) ||
		     gpu.ops->linear_bwd(&gpu, NULL, NULL, db2.d, dy2.d, NULL, NULL, BT, 0, F, &err);
		ok(!rc && same_bits(&dy, &dy2) && same_bits(&db, &db2),
		   "%s gelu_bwd_bias: the bits of gelu_bwd then linear_bwd's dbias on the gpu %s", gpt_dtype_name(DT),
		   rc ? err.msg : "");
		CALL2(gelu_bwd_bias, (&cpu, H(dy), H(db), H(x), H(g), BT, F - 1, &err),
		      (&gpu, D(dy), D(db), D(x), D(g), BT, F - 1, &err));
		same("gelu_bwd_bias dinp, F - 1 columns", &dy, 1);
		same("gelu_bwd_bias dbias, F - 1 columns", &db, 1);
		CALL2(gelu_bwd_bias, (&cpu, (char *)H(dy) + es, H(db), H(x), H(g), BT - 1, F, &err),
		      (&gpu, (char *)D(dy) + es, D(db), D(x), D(g), BT - 1, F, &err));
		same("gelu_bwd_bias dinp misaligned", &dy, 1);
		same("gelu_bwd_bias dbias, dinp misaligned", &db, 1);
		CALL2(gelu_bwd_bias, (&cpu, H(dy), NULL, H(x), H(g), BT, F, &err),
		      (&gpu, D(dy), NULL, D(x), D(g), BT, F, &err));
		same("gelu_bwd_bias without dbias", &dy, 1);
		ten *all[] = {&dy, &dy2, &db, &db2};
		for (size_t i = 0; i < sizeof all / sizeof *all; i++)
			ten_free(all[i]);
	}
	CALL2(residual_fwd, (&cpu, H(y), H(x), H(y), n, &err), (&gpu, D(y), D(x), D(y), n, &err));
	same("residual_fwd (out aliases b)", &y, 1);
	CALL2(residual_bwd, (&cpu, H(x), H(y), H(g), n, &err), (&gpu, D(x), D(y), D(g), n, &err));
	same("residual_bwd da", &x, 1);
	same("residual_bwd db", &y, 1);
	CALL2(residual_bwd, (&cpu, NULL, H(y), H(g), n, &err), (&gpu, NULL, D(y), D(g), n, &err));
	same("residual_bwd db only", &y, 1);
	CALL2(residual_fwd, (&cpu, H(y), H(x), H(g), n - 3, &err), (&gpu, D(y), D(x), D(g), n - 3, &err));
	same("residual_fwd, n not whole vectors", &y, 1);
	CALL2(residual_fwd, (&cpu, (char *)H(y) + es, H(x), H(g), n - 1, &err),
	      (&gpu, (char *)D(y) + es, D(x), D(g), n - 1, &err));
	same("residual_fwd misaligned", &y, 1);
	CALL2(residual_bwd, (&cpu, H(x), NULL, H(g), n - 3, &err), (&gpu, D(x), NULL, D(g), n - 3, &err));
	same("residual_bwd da only, n not whole vectors", &x, 1);
	CALL2(residual_bwd, (&cpu, H(x), (char *)H(y) + es, H(g), n - 1, &err),
	      (&gpu, D(x), (char *)D(y) + es, D(g), n - 1, &err));
	same("residual_bwd misaligned db", &y, 1);
	gpt_dropout d = {.p = 0.1f, .key = {.seed = 1234, .step = 7, .layer = 3, .site = GPT_RNG_SITE_MLP_RESID},
			 .sample0 = 8, .feature0 = 768, .t0 = 13};
	ten a = st(BT * C, 1), o = st(BT * C, 1);
	CALL2(dropout_fwd, (&cpu, H(o), H(a), B, T, C, &d, &err), (&gpu, D(o), D(a), B, T, C, &d, &err));
	same("dropout_fwd p=0.1", &o, 1);
	same_zeros("dropout_fwd mask", &o);
	CALL2(dropout_bwd, (&cpu, H(a), H(a), B, T, C, &d, &err), (&gpu, D(a), D(a), B, T, C, &d, &err));
	same("dropout_bwd in place", &a, 1);
	same_zeros("dropout_bwd mask", &a);
	/* a tensor-parallel slice whose features start and end inside a
	 * Philox group of eight (the kernel takes a group a thread) */
	d.feature0 = 6;
	CALL2(dropout_fwd, (&cpu, H(o), H(a), B, T, C - 3, &d, &err), (&gpu, D(o), D(a), B, T, C - 3, &d, &err));
	same("dropout_fwd p=0.1, features 6 .. C + 2", &o, 1);
	same_zeros("dropout_fwd mask, features 6 .. C + 2", &o);
	d.p = 0;
	CALL2(dropout_fwd, (&cpu, H(o), H(g), B, T, C, &d, &err), (&gpu, D(o), D(g), B, T, C, &d, &err));
	same("dropout_fwd p=0 copies", &o, 1);
	ten_free(&x);
	ten_free(&y);
	ten_free(&g);
	ten_free(&a);
	ten_free(&o);
}

/* Attention at one shape: the output, then the gradients (which use the
 * GPU's own output and saved state). bf16/fp16 at head sizes that are
 * multiples of 16 run on the tensor-core kernels (attention_tc.cu), which
 * round the probabilities and their gradients to the storage dtype before
 * the products, as FlashAttention does: one more rounding in every term of
 * the sums, and dq sums terms that cancel (each row of dS sums to zero).
 * The errors scale with the dtype's precision (fp16's are an eighth of
 * bf16's, within the op tolerance). Each gradient's rms error is checked
 * against twice the unit roundoff (same_rms_parts; at the emulator's
 * shapes 0.6 to 0.8 of it), and every element against a bound that the
 * tails need: bf16's worst reach 0.011 (output) and 0.044 (gradients: an
 * element of dv at T=333, HS=128 with dropout) when the emulator runs the
 * GPU test's shapes, and a GPU's lie further out (on an H200, 2026-11-26:
 * 0.0406 for the gradients at T=256 with dropout where the emulator had
 * 0.0276), hence two and eight times the op tolerance for bf16 there. */
static void test_attention_at(int64_t b, int64_t t, int64_t nh, int64_t hs, float p, int mis)
{
	int64_t bt = b * t, c = nh * hs, n3 = bt * 3 * c;
	size_t es = gpt_dtype_size(DT);
	gpt_dropout d = {.p = p, .key = {.seed = 99, .step = 5, .layer = 2, .site = GPT_RNG_SITE_ATTN_PROBS},
			 .sample0 = 4, .feature0 = 12};
	/* mis: qkv one element past an aligned address (the element-wise tile loads) */
	ten qkv = st(n3 + mis, 1.5), out = st(bt * c, 1);
	void *qh = (char *)H(qkv) + mis * es, *qd = (char *)D(qkv) + mis * es;
	int64_t ncs = cpu.ops->attention_saved_size(&cpu, b, t, nh, hs, p > 0);
	int64_t ngs = gpu.ops->attention_saved_size(&gpu, b, t, nh, hs, p > 0);
	float *cs = xmalloc((size_t)ncs * sizeof *cs);
	float *gs = gpt_cuda_malloc((size_t)ngs * sizeof *gs, "saved", &err);
	char what[128];
	int tc = gpt_cuda_attention_tensor_cores(DT, hs);
	const char *path = tc ? "tensor cores" : "cuda cores";
	CALL2(attention_fwd, (&cpu, H(out), cs, qh, b, t, nh, hs, &d, &err),
	      (&gpu, D(out), gs, qd, b, t, nh, hs, &d, &err));
	snprintf(what, sizeof what, "attention_fwd B=%lld T=%lld heads=%lld HS=%lld p=%g%s (%s)",
		 (long long)b, (long long)t, (long long)nh, (long long)hs, (double)p,
		 mis ? " misaligned" : "", path);
	same(what, &out, tc && DT == GPT_DTYPE_BF16 ? 2 : 1);
	if (tc) {
		/* in 64- and 128-row tiles (16 and 32 rows a warp; heads up to
		 * 64), in 64 with the scores a key tile ahead and, with dropout,
		 * in 64 after the mask is drawn by a kernel of its own, as in
		 * the form auto timed fastest above: the same bits, saved state
		 * (the mask's words) too */
		size_t ob = (size_t)(bt * c) * es, sb = (size_t)ngs * sizeof(float);
		/* the dropout mask's words, after the statistics and the low half */
		size_t mb = p > 0 ? (size_t)(2 * b * nh * gpt_attention_mask_words(t)) * sizeof(float) : 0;
		void *o2 = gpt_cuda_malloc(ob, "out", &err);
		float *gs2 = gpt_cuda_malloc(sb, "saved", &err);
		static const int forms[] = {64, GPT_CUDA_ATTN_AHEAD, GPT_CUDA_ATTN_MASKED, 128};
		for (int fi = 0; fi < 4; fi++) {
			if ((forms[fi] == GPT_CUDA_ATTN_MASKED && p == 0) || (forms[fi] == 128 && hs > 64))
				continue;
			int was = gpt_cuda_attention_rows(&gpu, forms[fi]);
			int rc = !o2 || !gs2 || gpu.ops->attention_fwd(&gpu, o2, gs2, qd, b, t, nh, hs, &d, &err);
			gpt_cuda_attention_rows(&gpu, was);
			size_t lb = (size_t)((b * nh * t + 3) / 4 * 4) * sizeof(float); /* the statistics */
			ok(was == GPT_CUDA_ATTN_AUTO && !rc && dev_same_z(o2, D(out), ob, es) &&
			   dev_same_z(gs2, gs, lb, 4) && dev_same_z((char *)gs2 + lb, (char *)gs + lb, ob, es) &&
			   dev_equal((char *)gs2 + sb - mb, (char *)gs + sb - mb, mb),
			   "%s %s in form %s: the same output and saved state, bit for bit (zeros of either sign)",
			   gpt_dtype_name(DT), what, gpt_cuda_attention_form(forms[fi]));
		}
		/* mis: the output one element past an aligned address too (its
		 * pairs written 2 bytes at a time, write_acc) */
		if (mis) {
			char *o3 = gpt_cuda_malloc(ob + es, "out", &err);
			int rc = !o3 || !gs2 || gpu.ops->attention_fwd(&gpu, o3 + es, gs2, qd, b, t, nh, hs, &d, &err);
			ok(!rc && dev_same_z(o3 + es, D(out), ob, es),
			   "%s %s, the output misaligned too: the same output, bit for bit (zeros of either sign)",
			   gpt_dtype_name(DT), what);
			gpt_cuda_free(o3);
		}
		gpt_cuda_free(o2);
		gpt_cuda_free(gs2);
	}
	ten g = st(bt * c, 1), dqkv = ten_const(DT, n3, NAN);
	CALL2(attention_bwd, (&cpu, H(dqkv), H(g), H(out), qh, cs, b, t, nh, hs, &d, &err),
	      (&gpu, D(dqkv), D(g), D(out), qd, gs, b, t, nh, hs, &d, &err));
	snprintf(what, sizeof what, "attention_bwd dqkv T=%lld HS=%lld p=%g (%s)", (long long)t,
		 (long long)hs, (double)p, path);
	same(what, &dqkv, tc && DT == GPT_DTYPE_BF16 ? 8 : 1);
	if (tc && mis) { /* the gradients one element past an aligned address too */
		size_t gb = (size_t)n3 * es;
		char *d3 = gpt_cuda_malloc(gb + es, "dqkv", &err);
		int rc = !d3 || gpu.ops->attention_bwd(&gpu, d3 + es, D(g), D(out), qd, gs, b, t, nh, hs, &d, &err);
		ok(!rc && dev_same_z(d3 + es, D(dqkv), gb, es),
		   "%s %s, dqkv misaligned too: the same gradients, bit for bit (zeros of either sign)",
		   gpt_dtype_name(DT), what);
		gpt_cuda_free(d3);
	}
	if (tc && hs <= 64) {
		/* dq and dkv in 64- and 128-row tiles: the same bits */
		size_t gb = (size_t)n3 * es;
		void *d2 = gpt_cuda_malloc(gb, "dqkv", &err);
		for (int rows = 64; rows <= 128; rows += 64) {
			int was = gpt_cuda_attention_rows(&gpu, rows);
			int rc = !d2 || gpu.ops->attention_bwd(&gpu, d2, D(g), D(out), qd, gs, b, t, nh, hs, &d, &err);
			gpt_cuda_attention_rows(&gpu, was);
			ok(!rc && dev_same_z(d2, D(dqkv), gb, es),
			   "%s %s in %d-row tiles: the same gradients, bit for bit (zeros of either sign)",
			   gpt_dtype_name(DT), what, rows);
		}
		gpt_cuda_free(d2);
	}
	static const char *const parts[] = {"dq", "dk", "dv"};
	if (tc)
		same_rms_parts(what, &dqkv, parts, 3, c);
	int64_t lse = (b * nh * t + 3) / 4 * 4, low = tc ? (bt * c * (int64_t)es + 15) / 16 * 4 : 0;
	int64_t nb = (t + 7) / 8, mask = tc && p > 0 ? 2 * b * nh * (nb * (nb + 1) / 2) : 0;
	ok(ngs == lse + low + mask, "attention saves %lld floats: the softmax statistics%s", (long long)ngs,
	   !tc ? " only" : p > 0 ? ", the output's low half and the dropout mask" : " and the output's low half");
	free(cs);
	gpt_cuda_free(gs);
	ten_free(&qkv);
	ten_free(&out);
	ten_free(&g);
	ten_free(&dqkv);
}

static void test_attention(float p)
{
	/* several 64-row tiles, T not a multiple of them; head sizes of each
	 * padded width (32, 64, 128), 48 padded to 64 with its qkv misaligned
	 * (tiles copied element by element), 96 padded to 128 with it aligned
	 * (by cp.async, zeros past the head) */
	static const struct {
		int b, t, nh, hs, mis;
	} more[] = {ATTN_MORE};
	test_attention_at(B, T, NH, HS, p, 0);
	for (size_t k = 0; k < sizeof more / sizeof *more; k++)
		test_attention_at(more[k].b, more[k].t, more[k].nh, more[k].hs, p, more[k].mis);
	if (DT != GPT_DTYPE_F32)
		ok(gpt_cuda_attention_tensor_cores(DT, 64) && gpt_cuda_attention_tensor_cores(DT, 48) &&
		   !gpt_cuda_attention_tensor_cores(DT, 40) && !gpt_cuda_attention_tensor_cores(GPT_DTYPE_F32, 64),
		   "%s attention at head sizes 48 and 64 runs on the tensor cores, 40 and fp32 on the cuda cores",
		   gpt_dtype_name(DT));
}

/* A prompt of t0 tokens into a cache of maxT positions (b sequences, nh
 * heads of hs), then `more` generated tokens one at a time: each output
 * and the caches against the CPU. A prompt of many rows takes each row's
 * keys in one chunk; a new token's keys are split into chunks over blocks
 * and merged (attention_kv.cu), at caches long enough for several. */
static void test_attention_kv_at(int64_t b, int64_t maxT, int64_t t0, int64_t more, int64_t nh, int64_t hs)
{
	int64_t Cl = nh * hs;
	char what[96];
	ten kc = ten_const(DT, b * nh * maxT * hs, 0), vc = ten_const(DT, b * nh * maxT * hs, 0);
	ten q1 = st(b * t0 * 3 * Cl, 1.5), o1 = st(b * t0 * Cl, 1);
	CALL2(attention_kv, (&cpu, H(o1), H(kc), H(vc), H(q1), b, t0, 0, maxT, nh, hs, &err),
	      (&gpu, D(o1), D(kc), D(vc), D(q1), b, t0, 0, maxT, nh, hs, &err));
	snprintf(what, sizeof what, "attention_kv prompt of %lld (B=%lld heads=%lld HS=%lld)", (long long)t0,
		 (long long)b, (long long)nh, (long long)hs);
	same(what, &o1, 1);
	ten q2 = st(b * 3 * Cl, 1.5), o2 = st(b * Cl, 1);
	for (int64_t k = 0; k < more; k++) {
		CALL2(attention_kv, (&cpu, H(o2), H(kc), H(vc), H(q2), b, 1, t0 + k, maxT, nh, hs, &err),
		      (&gpu, D(o2), D(kc), D(vc), D(q2), b, 1, t0 + k, maxT, nh, hs, &err));
		snprintf(what, sizeof what, "attention_kv token %lld after a prompt of %lld (HS=%lld)",
			 (long long)(t0 + k + 1), (long long)t0, (long long)hs);
		same(what, &o2, 1);
	}
	same("attention_kv key cache", &kc, 1);
	same("attention_kv value cache", &vc, 1);
	ten *all[] = {&kc, &vc, &q1, &o1, &q2, &o2};
	for (size_t i = 0; i < sizeof all / sizeof *all; i++)
		ten_free(all[i]);
}

static void test_attention_kv(void)
{
	test_attention_kv_at(2, 64, 20, 1, NH, HS);
	/* caches of several chunks of keys for a new token: 64 keys or more
	 * each, a chunk's last partly used; head sizes 128 and 48 */
	test_attention_kv_at(1, 400, 300, 3, 2, 64);
	test_attention_kv_at(2, 200, 130, 2, 1, 128);
	test_attention_kv_at(1, 220, 195, 2, 3, 48);
}

static ten tokens_of(const int32_t *t, int64_t n)
{
	ten v = {GPT_DTYPE_I32, n, xmalloc((size_t)n * 4), NULL};
	memcpy(v.h, t, (size_t)n * 4);
	v.d = gpt_cuda_malloc((size_t)n * 4, "tokens", &err);
	if (!v.d || gpu.ops->upload(&gpu, v.d, v.h, (size_t)n * 4, &err)) {
		printf("Bail out! %s\n", err.msg);
		exit(1);
	}
	return v;
}

/* A generation step of n sequences in one call (attention_kv_rows): row i
 * the new token of the sequence in slot slot[i] of S caches of maxT
 * positions (random, beyond the positions too), at position pos[i] (both
 * device memory on the GPU); its output and the caches against the CPU,
 * and bit for bit against attention_kv a sequence at a time on the
 * device. */
static void test_attention_kv_rows_at(int64_t S, int64_t maxT, int64_t nh, int64_t hs, int64_t n,
				      const int32_t *slot, const int32_t *pos)
{
	int64_t Cl = nh * hs, per = nh * maxT * hs, es = (int64_t)gpt_dtype_size(DT);
	ten kc = st(S * per, 1), vc = st(S * per, 1), q = st(n * 3 * Cl, 1.5), o = st(n * Cl, 1);
	ten kc1 = st(S * per, 1), vc1 = st(S * per, 1), o1 = st(n * Cl, 1);
	ten *all[] = {&kc, &vc, &q, &o, &kc1, &vc1, &o1};
	ten ds = tokens_of(slot, n), dp = tokens_of(pos, n);
	char what[96];
	int rc = gpu.ops->copy(&gpu, kc1.d, kc.d, (size_t)(S * per * es), &err) ||
		 gpu.ops->copy(&gpu, vc1.d, vc.d, (size_t)(S * per * es), &err);
	for (int64_t i = 0; !rc && i < n; i++)
		rc = gpu.ops->attention_kv(&gpu, (char *)o1.d + i * Cl * es, (char *)kc1.d + slot[i] * per * es,
					   (char *)vc1.d + slot[i] * per * es, (char *)q.d + i * 3 * Cl * es, 1, 1,
					   pos[i], maxT, nh, hs, &err);
	ok(!rc, "%s attention_kv a sequence at a time: %s", gpt_dtype_name(DT), rc ? err.msg : "ran");
	CALL2(attention_kv_rows, (&cpu, H(o), H(kc), H(vc), H(q), n, slot, pos, maxT, nh, hs, &err),
	      (&gpu, D(o), D(kc), D(vc), D(q), n, ds.d, dp.d, maxT, nh, hs, &err));
	snprintf(what, sizeof what, "attention_kv_rows of %lld sequences (heads=%lld HS=%lld)", (long long)n,
		 (long long)nh, (long long)hs);
	same(what, &o, 1);
	same("attention_kv_rows key cache", &kc, 1);
	same("attention_kv_rows value cache", &vc, 1);
	ok(same_bits(&o, &o1) && same_bits(&kc, &kc1) && same_bits(&vc, &vc1),
	   "%s %s: output and caches attention_kv's a sequence at a time, bit for bit", gpt_dtype_name(DT), what);
	for (size_t i = 0; i < sizeof all / sizeof *all; i++)
		ten_free(all[i]);
	ten_free(&ds);
	ten_free(&dp);
}

static void test_attention_kv_rows(void)
{
	/* slots out of order, one sequence empty so far; rows of 1 to 5
	 * chunks of 64 keys, one a chunk and a key long */
	static const int32_t slot[] = {3, 0, 4, 1}, pos[] = {300, 0, 130, 64};
	test_attention_kv_rows_at(5, 320, 2, 64, 4, slot, pos);
	test_attention_kv_rows_at(5, 320, 1, 128, 4, slot, pos);
	/* every row one chunk: no merge */
	static const int32_t pos1[] = {20, 3};
	test_attention_kv_rows_at(5, 64, NH, HS, 2, slot, pos1);
	/* 64 heads: rows of chunks of 96 keys (11) and of 64 (2) */
	static const int32_t slot2[] = {1, 0}, pos2[] = {1050, 100};
	test_attention_kv_rows_at(2, 1100, 64, 16, 2, slot2, pos2);
	/* a position past the cache: nothing of that row written, the error
	 * at the next download */
	int64_t Cl = NH * HS, per = NH * 64 * HS;
	ten kc = st(2 * per, 1), vc = st(2 * per, 1), q = st(2 * 3 * Cl, 1.5), o = st(2 * Cl, 1);
	static const int32_t bs[] = {0, 1}, bp[] = {5, 64};
	ten ds = tokens_of(bs, 2), dp = tokens_of(bp, 2);
	int rc = gpu.ops->attention_kv_rows(&gpu, o.d, kc.d, vc.d, q.d, 2, ds.d, dp.d, 64, NH, HS, &err);
	float *hc = NULL, *hg = NULL;
	if (!rc)
		rc = fetch(&o, &hc, &hg);
	ok(rc == GPT_EUSAGE && strstr(err.msg, "row 1 has slot 1 and position 64"),
	   "%s attention_kv_rows past the cache: an error at the next download: %s", gpt_dtype_name(DT),
	   rc ? err.msg : "none");
	free(hc);
	free(hg);
	ten *all[] = {&kc, &vc, &q, &o, &ds, &dp};
	for (size_t i = 0; i < sizeof all / sizeof *all; i++)
		ten_free(all[i]);
}

static void test_xent(void)
{
	int64_t Vl = VPAD / 2;
	int32_t *tg = xmalloc(BT * 4);
	for (int64_t i = 0; i < BT; i++)
		tg[i] = i % 17 == 5 ? -1 : (int32_t)((urand() + 1) * 0.5 * VOCAB);
	tg[3] = VOCAB - 1;
	tg[4] = (int32_t)Vl;
	ten tgt = tokens_of(tg, BT);
	ten lg[2], mx[2], se[2], tl[2];
	for (int piece = 0; piece < 2; piece++) {
		int64_t v0 = piece * Vl;
		lg[piece] = st(BT * Vl, 4);
		mx[piece] = f32(BT, 1);
		se[piece] = f32(BT, 1);
		tl[piece] = f32(BT, 1);
		CALL2(xent_fwd, (&cpu, H(mx[piece]), H(se[piece]), H(tl[piece]), H(lg[piece]), H(tgt), BT, Vl, Vl, v0, VOCAB, &err),
		      (&gpu, D(mx[piece]), D(se[piece]), D(tl[piece]), D(lg[piece]), D(tgt), BT, Vl, Vl, v0, VOCAB, &err));
		char what[64];
		snprintf(what, sizeof what, "xent_fwd piece %d max", piece);
		same(what, &mx[piece], 1);
		snprintf(what, sizeof what, "xent_fwd piece %d sumexp", piece);
		same(what, &se[piece], 1);
		snprintf(what, sizeof what, "xent_fwd piece %d target logit", piece);
		same(what, &tl[piece], 1);
	}
	/* combine the pieces as a tp group would: the maximum on the host */
	float *gm = xmalloc(BT * sizeof *gm), *a = H(mx[0]), *b = H(mx[1]);
	for (int64_t i = 0; i < BT; i++)
		gm[i] = a[i] > b[i] ? a[i] : b[i];
	ten gmax = ten_of(GPT_DTYPE_F32, gm, BT);
	free(gm);
	for (int piece = 0; piece < 2; piece++)
		CALL2(xent_rescale, (&cpu, H(se[piece]), H(mx[piece]), H(gmax), BT, &err),
		      (&gpu, D(se[piece]), D(mx[piece]), D(gmax), BT, &err));
	same("xent_rescale", &se[1], 1);
	/* the reduced sums, from the CPU's values, on both */
	float *s0 = H(se[0]), *s1 = H(se[1]), *t0 = H(tl[0]), *t1 = H(tl[1]);
	float *ssum = xmalloc(BT * sizeof *ssum), *tsum = xmalloc(BT * sizeof *tsum);
	for (int64_t i = 0; i < BT; i++) {
		ssum[i] = s0[i] + s1[i];
		tsum[i] = t0[i] + t1[i];
	}
	ten gse = ten_of(GPT_DTYPE_F32, ssum, BT), gtl = ten_of(GPT_DTYPE_F32, tsum, BT);
	ten loss = f32(BT, 1);
	CALL2(xent_loss, (&cpu, H(loss), H(gmax), H(gse), H(gtl), H(tgt), BT, &err),
	      (&gpu, D(loss), D(gmax), D(gse), D(gtl), D(tgt), BT, &err));
	same("xent_loss", &loss, 1);
	for (int piece = 0; piece < 2; piece++) {
		ten dl = ten_const(DT, BT * Vl, NAN);
		/* the GPU in place, the CPU into a separate buffer */
		CALL2(xent_bwd, (&cpu, H(dl), H(lg[piece]), H(tgt), H(gmax), H(gse), 0.5f, BT, Vl, Vl, piece * Vl, VOCAB, &err),
		      (&gpu, D(lg[piece]), D(lg[piece]), D(tgt), D(gmax), D(gse), 0.5f, BT, Vl, Vl, piece * Vl, VOCAB, &err));
		memcpy(H(lg[piece]), H(dl), (size_t)(BT * Vl) * gpt_dtype_size(DT));
		same(piece ? "xent_bwd piece 1 (padding columns 0)" : "xent_bwd piece 0 (in place)", &lg[piece], 1);
		ten_free(&dl);
	}
	/* a target outside the vocabulary: reported by the next sync */
	tg[7] = VOCAB;
	ten bad = tokens_of(tg, BT);
	int rc = gpu.ops->xent_fwd(&gpu, D(mx[0]), D(se[0]), D(tl[0]), D(lg[0]), D(bad), BT, Vl, Vl, 0,
				   VOCAB, &err);
	if (!rc)
		rc = gpu.ops->sync(&gpu, &err);
	ok(rc == GPT_EDATA && strstr(err.msg, "outside the vocabulary"),
	   "%s xent_fwd: a target of %d is reported by sync: %s", gpt_dtype_name(DT), VOCAB, err.msg);
	ok(gpu.ops->sync(&gpu, &err) == 0, "%s the report is cleared once made", gpt_dtype_name(DT));
	for (int piece = 0; piece < 2; piece++) {
		ten_free(&lg[piece]);
		ten_free(&mx[piece]);
		ten_free(&se[piece]);
		ten_free(&tl[piece]);
	}
	ten *all[] = {&tgt, &gmax, &gse, &gtl, &loss, &bad};
	for (size_t i = 0; i < sizeof all / sizeof *all; i++)
		ten_free(all[i]);
	free(tg);
	free(ssum);
	free(tsum);
}

/* The cross-entropy at one more layout of a vocabulary piece of Vl
 * columns from v0, rows ld apart, of a vocabulary of V: rows not 16-byte
 * aligned (the element-wise path), real columns or Vl not whole vectors
 * (the columns after the vectors). The gradient not in place, into a
 * buffer of zeros, where the columns between Vl and ld stay zero. */
static void test_xent_at(int64_t Vl, int64_t ld, int64_t v0, int64_t V)
{
	int32_t *tg = xmalloc(BT * 4);
	for (int64_t i = 0; i < BT; i++)
		tg[i] = i % 13 == 5 ? -1 : (int32_t)((urand() + 1) * 0.5 * V);
	tg[1] = (int32_t)(V - 1);
	tg[2] = (int32_t)v0;
	ten tgt = tokens_of(tg, BT), lg = st(BT * ld, 4), mx = f32(BT, 1), se = f32(BT, 1), tl = f32(BT, 1);
	ten dl = ten_const(DT, BT * ld, 0.0f);
	char what[128];
	CALL2(xent_fwd, (&cpu, H(mx), H(se), H(tl), H(lg), H(tgt), BT, Vl, ld, v0, V, &err),
	      (&gpu, D(mx), D(se), D(tl), D(lg), D(tgt), BT, Vl, ld, v0, V, &err));
	snprintf(what, sizeof what, "xent_fwd Vl=%lld ld=%lld V=%lld max", (long long)Vl, (long long)ld, (long long)V);
	same(what, &mx, 1);
	snprintf(what, sizeof what, "xent_fwd Vl=%lld ld=%lld V=%lld sumexp", (long long)Vl, (long long)ld, (long long)V);
	same(what, &se, 1);
	snprintf(what, sizeof what, "xent_fwd Vl=%lld ld=%lld V=%lld target logit", (long long)Vl, (long long)ld, (long long)V);
	same(what, &tl, 1);
	CALL2(xent_bwd, (&cpu, H(dl), H(lg), H(tgt), H(mx), H(se), 0.25f, BT, Vl, ld, v0, V, &err),
	      (&gpu, D(dl), D(lg), D(tgt), D(mx), D(se), 0.25f, BT, Vl, ld, v0, V, &err));
	snprintf(what, sizeof what, "xent_bwd Vl=%lld ld=%lld V=%lld", (long long)Vl, (long long)ld, (long long)V);
	same(what, &dl, 1);
	ten *all[] = {&tgt, &lg, &mx, &se, &tl, &dl};
	for (size_t i = 0; i < sizeof all / sizeof *all; i++)
		ten_free(all[i]);
	free(tg);
}

/* xent_fused (the whole vocabulary, Vl columns of which V real, rows ld
 * apart; the gradient in place or into zeros) against the CPU's (the three
 * ops in turn), and the same bits as the GPU's own three ops. */
static void test_xent_fused_at(int64_t Vl, int64_t ld, int64_t V, int inplace)
{
	int32_t *tg = xmalloc(BT * 4);
	for (int64_t i = 0; i < BT; i++)
		tg[i] = i % 11 == 3 ? -1 : (int32_t)((urand() + 1) * 0.5 * V);
	tg[1] = (int32_t)(V - 1);
	tg[2] = 0;
	ten tgt = tokens_of(tg, BT), lg = st(BT * ld, 4), mx = f32(BT, 1), se = f32(BT, 1), tl = f32(BT, 1);
	ten loss = f32(BT, 1), dl = ten_const(DT, BT * ld, 0.0f);
	size_t lb = (size_t)(BT * ld) * gpt_dtype_size(DT), fb = (size_t)BT * sizeof(float);
	/* the GPU's three ops first, on a copy of the logits */
	void *lg2 = gpt_cuda_malloc(lb, "logits", &err), *dl2 = gpt_cuda_malloc(lb, "dlogits", &err);
	float *f2 = gpt_cuda_malloc(4 * fb, "stats", &err);
	int rc = !lg2 || !dl2 || !f2 || gpu.ops->copy(&gpu, lg2, D(lg), lb, &err) ||
		 gpu.ops->copy(&gpu, dl2, D(dl), lb, &err) ||
		 gpt_xent_fused_parts(&gpu, f2, f2 + BT, f2 + 2 * BT, f2 + 3 * BT, inplace ? lg2 : dl2, lg2,
				      D(tgt), 0.25f, BT, Vl, ld, V, &err);
	char what[128];
	snprintf(what, sizeof what, "xent_fused Vl=%lld ld=%lld V=%lld%s", (long long)Vl, (long long)ld,
		 (long long)V, inplace ? " (in place)" : "");
	CALL2(xent_fused, (&cpu, H(loss), H(mx), H(se), H(tl), H(dl), H(lg), H(tgt), 0.25f, BT, Vl, ld, V, &err),
	      (&gpu, D(loss), D(mx), D(se), D(tl), inplace ? D(lg) : D(dl), D(lg), D(tgt), 0.25f, BT, Vl, ld, V,
	       &err));
	ten *g = &dl;
	if (inplace) { /* the CPU's gradient went to dl: compare it with the logits' buffer */
		memcpy(H(lg), H(dl), lb);
		g = &lg;
	}
	static const char *const part[] = {"loss", "max", "sumexp", "target logit", "gradient"};
	const ten *got[] = {&loss, &mx, &se, &tl, g};
	for (int k = 0; k < 5; k++) {
		char pw[160];
		snprintf(pw, sizeof pw, "%s %s", what, part[k]);
		same(pw, got[k], 1);
	}
	ok(!rc && dev_equal(f2, D(loss), fb) && dev_equal(f2 + BT, D(mx), fb) &&
	   dev_equal(f2 + 2 * BT, D(se), fb) && dev_equal(f2 + 3 * BT, D(tl), fb) &&
	   dev_equal(inplace ? lg2 : dl2, D(*g), lb),
	   "%s %s: the same bits as xent_fwd, xent_loss and xent_bwd", gpt_dtype_name(DT), what);
	gpt_cuda_free(lg2);
	gpt_cuda_free(dl2);
	gpt_cuda_free(f2);
	ten *all[] = {&tgt, &lg, &mx, &se, &tl, &loss, &dl};
	for (size_t i = 0; i < sizeof all / sizeof *all; i++)
		ten_free(all[i]);
	free(tg);
}

static void test_xent_more(void)
{
	int64_t Vl = VPAD / 2;
	test_xent_at(Vl, Vl + 1, Vl, VOCAB);
	test_xent_at(Vl - 3, Vl, Vl - 3, VOCAB);
	test_xent_fused_at(VPAD, VPAD, VOCAB, 1);
	test_xent_fused_at(VOCAB, VOCAB + 1, VOCAB, 0);
	/* rows of more vectors than a block has threads (a thread's second
	 * vector), and of more than two a thread (its next two) */
	test_xent_fused_at(20000, 20000, 19995, 1);
	test_xent_fused_at(60000, 60000, 59990, 1);
}

static void test_embedding(void)
{
	int64_t Vl = VPAD / 2, maxT = 1024;
	int32_t *tk = xmalloc(BT * 4);
	/* many repeats (a few ids) and ids in both pieces */
	for (int64_t i = 0; i < BT; i++)
		tk[i] = i % 3 ? (int32_t)(((urand() + 1) * 0.5) * 40) * 1237 % VOCAB
			      : (int32_t)((urand() + 1) * 0.5 * VOCAB);
	ten tok = tokens_of(tk, BT);
	for (int piece = 0; piece < 2; piece++) {
		int64_t v0 = piece * Vl, t0 = piece ? 7 : 0;
		ten wte = st(Vl * C, 1), wpe = st(maxT * C, 1), out = st(BT * C, 1);
		const void *pc = piece ? NULL : H(wpe), *pg = piece ? NULL : D(wpe);
		CALL2(embedding_fwd, (&cpu, H(out), H(tok), H(wte), pc, B, T, C, v0, Vl, t0, &err),
		      (&gpu, D(out), D(tok), D(wte), pg, B, T, C, v0, Vl, t0, &err));
		same(piece ? "embedding_fwd piece 1, no wpe" : "embedding_fwd piece 0 with wpe", &out, 1);
		ten *all[] = {&wte, &wpe, &out};
		for (size_t i = 0; i < sizeof all / sizeof *all; i++)
			ten_free(all[i]);
		/* the tokens on the device (read back), then in host memory (as
		 * the model gives them) */
		for (int host = 0; host < 2; host++) {
			ten dwte = st(Vl * C, 1), dwpe = st(maxT * C, 1), g = st(BT * C, 1);
			CALL2(embedding_bwd, (&cpu, H(dwte), H(dwpe), H(g), H(tok), B, T, C, v0, Vl, t0, &err),
			      (&gpu, D(dwte), D(dwpe), D(g), host ? H(tok) : D(tok), B, T, C, v0, Vl, t0,
			       &err));
			char what[96];
			snprintf(what, sizeof what, "embedding_bwd piece %d dwte (t0 %d), tokens in %s memory",
				 piece, (int)t0, host ? "host" : "device");
			same(what, &dwte, DT == GPT_DTYPE_F32 ? 0.01 : 1);
			same("embedding_bwd dwpe", &dwpe, DT == GPT_DTYPE_F32 ? 0.01 : 1);
			ten *bwd[] = {&dwte, &dwpe, &g};
			for (size_t i = 0; i < sizeof bwd / sizeof *bwd; i++)
				ten_free(bwd[i]);
		}
	}
	/* a frequent token (two rows in five: more rows than a warp reads at a
	 * time, 32) and channels not a multiple of 32 (a warp's part of the
	 * last stripe): the CPU's sums in the CPU's order, so its very bits */
	{
		int32_t *hk = xmalloc(BT * 4);
		for (int64_t i = 0; i < BT; i++)
			hk[i] = i % 5 < 2 ? 13 : i % 5 == 2 ? 7 : (int32_t)((urand() + 1) * 0.5 * VOCAB);
		ten htok = tokens_of(hk, BT), dwte = st(VPAD * C, 1), g = st(BT * C, 1);
		int64_t c2 = C - 5;
		CALL2(embedding_bwd, (&cpu, H(dwte), NULL, H(g), H(htok), B, T, c2, 0, VPAD, 0, &err),
		      (&gpu, D(dwte), NULL, D(g), H(htok), B, T, c2, 0, VPAD, 0, &err));
		same("embedding_bwd dwte, a frequent token, C not a multiple of 32 (bit for bit)", &dwte, 0);
		ten *all[] = {&htok, &dwte, &g};
		for (size_t i = 0; i < sizeof all / sizeof *all; i++)
			ten_free(all[i]);
		free(hk);
	}
	/* a position of each row's own (embedding_rows_fwd) */
	{
		int32_t ps[] = {5, 0, 1000, 7, 3};
		ten pos = tokens_of(ps, 5), wte = st(VPAD * C, 1), wpe = st(maxT * C, 1), out = st(5 * C, 1);
		CALL2(embedding_rows_fwd, (&cpu, H(out), H(tok), H(pos), H(wte), H(wpe), 5, C, 0, VPAD, &err),
		      (&gpu, D(out), D(tok), D(pos), D(wte), D(wpe), 5, C, 0, VPAD, &err));
		same("embedding_rows_fwd", &out, 1);
		ten *all[] = {&pos, &wte, &wpe, &out};
		for (size_t i = 0; i < sizeof all / sizeof *all; i++)
			ten_free(all[i]);
	}
	ten_free(&tok);
	free(tk);
}

/* One bf16 AdamW step at learning rate 0 leaves the split master weights as
 * they were (w - 0 x update), so the kernel's join and split are seen
 * alone, on the bits: every low half (those with the top bit set borrow
 * from the high half, 0x8000 is the tie) beside high parts where the carry
 * crosses a sign, the denormal-normal boundary, a power of two and the
 * largest finite value (whose high half rounds to infinity). The device
 * gives back its input, as the host (lib/cpu) does. */
static void split_round_trip(void)
{
	static const uint16_t top[] = {0x0000, 0x8000, 0x007f, 0x807f, 0x3f7f, 0xbf80, 0x7f7f, 0xff7f};
	int64_t n = (int64_t)(sizeof top / sizeof *top) << 16;
	float *w = xmalloc((size_t)n * 4);
	for (int64_t i = 0; i < n; i++) {
		uint32_t u = (uint32_t)top[i >> 16] << 16 | (uint32_t)(i & 0xffff);
		memcpy(&w[i], &u, 4);
	}
	ten hi = ten_const(GPT_DTYPE_BF16, n, 0.0f), lo = ten_const(GPT_DTYPE_BF16, n, 0.0f);
	ten g = ten_const(GPT_DTYPE_BF16, n, 0.0f), m = ten_const(GPT_DTYPE_F32, n, 0.0f);
	ten v = ten_const(GPT_DTYPE_F32, n, 0.0f);
	uint16_t *want = xmalloc((size_t)n * 4), *got = xmalloc((size_t)n * 4);
	gpt_bf16_split(want, want + n, w, (size_t)n);
	memcpy(H(hi), want, (size_t)n * 2);
	memcpy(H(lo), want + n, (size_t)n * 2);
	gpt_adamw h = {.lr = 0, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1,
		       .grad_scale = 1, .t = 1};
	if (gpu.ops->upload(&gpu, D(hi), want, (size_t)n * 2, &err) ||
	    gpu.ops->upload(&gpu, D(lo), want + n, (size_t)n * 2, &err)) {
		ok(0, "bf16 adamw split round trip: upload: %s", err.msg);
		goto out;
	}
	CALL2(adamw, (&cpu, H(hi), NULL, H(lo), H(g), H(m), H(v), n, &h, &err),
	      (&gpu, D(hi), NULL, D(lo), D(g), D(m), D(v), n, &h, &err));
	if (gpu.ops->download(&gpu, got, D(hi), (size_t)n * 2, &err) ||
	    gpu.ops->download(&gpu, got + n, D(lo), (size_t)n * 2, &err)) {
		ok(0, "bf16 adamw split round trip: download: %s", err.msg);
		goto out;
	}
	int64_t bad = -1, cbad = -1;
	for (int64_t i = 0; i < n && (bad < 0 || cbad < 0); i++) {
		if (bad < 0 && (got[i] != want[i] || got[n + i] != want[n + i]))
			bad = i;
		if (cbad < 0 && (((uint16_t *)H(hi))[i] != want[i] || ((uint16_t *)H(lo))[i] != want[n + i]))
			cbad = i;
	}
	ok(bad < 0 && cbad < 0,
	   "bf16 adamw at lr 0 keeps %lld split master weights bit for bit (device: first change at %lld, host: at %lld)",
	   (long long)n, (long long)bad, (long long)cbad);
out:
	free(w), free(want), free(got);
	ten *all[] = {&hi, &lo, &g, &m, &v};
	for (size_t i = 0; i < sizeof all / sizeof *all; i++)
		ten_free(all[i]);
}

/* Small uploads (staged through the two halves of the pinned staging
 * memory) queued behind GEMMs that keep the device busy: at the second
 * switch of halves the first half's copies are not done, so
 * cudaEventQuery answers "not ready" and the host waits. The runtime may
 * keep that answer as the thread's last error; the next op's launch check
 * must not report it as its own failure (gpt_cuda_query clears it). */
static void test_staging_busy(void)
{
#ifdef GPT_CUDA_EMU
	enum { G = 64 };
	const int reps = 2;
#else
	enum { G = 8192 }; /* 1.1 TFLOP a product: tens of ms in all */
	const int reps = DT == GPT_DTYPE_F32 ? 4 : 40;
#endif
	enum { PIECE = 1 << 20, PIECES = 5 }; /* 5 MiB: both 2 MiB halves, and a switch back */
	size_t es = gpt_dtype_size(DT), gb = (size_t)G * G * es;
	void *a = gpt_cuda_malloc(gb, "test matrix", &err), *c = a ? gpt_cuda_malloc(gb, "test matrix", &err) : NULL;
	void *d = c ? gpt_cuda_malloc((size_t)PIECE * PIECES, "test uploads", &err) : NULL;
	char *h = calloc(PIECE, 1);
	int rc = d && h ? gpu.ops->zero(&gpu, a, gb, &err) : GPT_EINTERNAL;
	for (int r = 0; r < reps && !rc; r++)
		rc = gpu.ops->gemm(&gpu, 0, 1, G, G, G, 1.0f, a, G, a, G, 0.0f, c, G, &err);
	for (int k = 0; k < PIECES && !rc; k++)
		rc = gpu.ops->upload(&gpu, (char *)d + (size_t)k * PIECE, h, PIECE, &err);
	ten x = ten_const(DT, 1000, 0.5f), acc = ten_const(GPT_DTYPE_F32, 1, 0.0f);
	if (!rc)
		rc = gpu.ops->sum_squares(&gpu, D(acc), D(x), 1000, &err);
	float got = 0;
	if (!rc)
		rc = gpu.ops->download(&gpu, &got, D(acc), 4, &err);
	ok(!rc && got == 250.0f,
	   "%s uploads that wait for the staging memory behind busy GEMMs: the op after them runs (%s, %g)",
	   gpt_dtype_name(DT), rc ? err.msg : "ok", (double)got);
	free(h);
	gpt_cuda_free(a), gpt_cuda_free(c), gpt_cuda_free(d);
	ten_free(&x);
	ten_free(&acc);
}

/* AdamW's two paths on the GPU, the same bits: each array's copy at an
 * aligned address (quads of four elements, then a tail of one) and one
 * element further on (every element one a thread), from the same values:
 * with master weights (fp32: without), and with bf16's split master. */
/* AdamW's five arrays of n elements (p; the fp32 master, or bf16's low
 * halves; g; m; v) at a[i].d, and a copy of each on the device at element
 * off of b[i] (es[i]: their elements' sizes); 0 when all are made. */
static int adamw_arrays(ten a[5], char *b[5], size_t es[5], int64_t n, int split, int64_t off)
{
	a[0] = st(n, 0.1), a[1] = split ? ten_const(GPT_DTYPE_BF16, n, 0.0f) : f32(n, 0.1), a[2] = st(n, 1);
	a[3] = f32(n, 0.01), a[4] = ten_const(GPT_DTYPE_F32, n, 0.0004f);
	int rc = 0;
	for (int i = 0; i < 5; i++) {
		es[i] = gpt_dtype_size(a[i].t);
		b[i] = gpt_cuda_malloc((size_t)(n + off) * es[i], "test tensor", &err);
		rc = rc || !b[i] || gpu.ops->copy(&gpu, b[i] + off * es[i], a[i].d, (size_t)n * es[i], &err);
	}
	return rc;
}

/* 1 when adamw_arrays' two sets hold the same bits; then frees them. */
static int adamw_same_free(ten a[5], char *b[5], const size_t es[5], int64_t n, int64_t off)
{
	int same_all = 1;
	for (int i = 0; i < 5; i++) {
		size_t bytes = (size_t)n * es[i];
		char *x = xmalloc(bytes), *y = xmalloc(bytes);
		same_all = same_all && !gpu.ops->download(&gpu, x, a[i].d, bytes, &err) &&
			   !gpu.ops->download(&gpu, y, b[i] + off * es[i], bytes, &err) && !memcmp(x, y, bytes);
		free(x);
		free(y);
		gpt_cuda_free(b[i]);
		ten_free(&a[i]);
	}
	return same_all;
}

/* The quads' kernel against one element a thread: the second set one
 * element on, where no quad is aligned. */
static void adamw_paths(void)
{
	int64_t n = 4 * 97 + 1;
	int split = DT == GPT_DTYPE_BF16;
	ten a[5];
	char *b[5] = {NULL};
	size_t es[5];
	int rc = adamw_arrays(a, b, es, n, split, 1);
	for (int64_t t = 1; t <= 2 && !rc; t++) {
		gpt_adamw h = {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1,
			       .grad_scale = 0.5, .t = t};
		for (int k = 0; k < 2 && !rc; k++) {
			void *x[5];
			for (int i = 0; i < 5; i++)
				x[i] = k ? b[i] + es[i] : a[i].d;
			rc = gpu.ops->adamw(&gpu, x[0], split ? NULL : x[1], split ? x[1] : NULL, x[2], x[3], x[4], n,
					    &h, &err);
		}
	}
	int same_all = adamw_same_free(a, b, es, n, 1) && !rc;
	ok(same_all, "%s adamw in quads and one element a thread%s: the same bits %s", gpt_dtype_name(DT),
	   split ? " (split master)" : "", rc ? err.msg : "");
}

/* adamw_runs in the CUDA backend's launches against a call a run
 * (gpt_adamw_runs_each, the CPU's definition) on the GPU: the same bits,
 * two steps; runs that start and end inside quads, a run of fewer than 4
 * elements, a gap left as it was, and (the second table) more runs than a
 * launch takes. */
static void adamw_runs_paths(void)
{
	int64_t n = 4 * 97 + 1;
	int split = DT == GPT_DTYPE_BF16;
	gpt_adamw_run t1[] = {{0, 5, 1}, {5, 101, 0}, {103, 200, 1}, {200, 202, 0}, {202, 389, 1}};
	gpt_adamw_run t2[100];
	for (int i = 0; i < 100; i++)
		t2[i] = (gpt_adamw_run){3 * i + (i > 50), 3 * i + 3, i % 3 != 1};
	const gpt_adamw_run *tabs[] = {t1, t2};
	int64_t ns[] = {5, 100}, gap[] = {101, 153};
	for (int tb = 0; tb < 2; tb++) {
		ten a[5];
		char *b[5] = {NULL};
		size_t es[5];
		int rc = adamw_arrays(a, b, es, n, split, 0);
		float m0 = ((const float *)H(a[3]))[gap[tb]], m1 = NAN;
		for (int64_t t = 1; t <= 2 && !rc; t++) {
			gpt_adamw h = {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1,
				       .grad_scale = 0.5, .t = t};
			char *x[5];
			for (int i = 0; i < 5; i++)
				x[i] = a[i].d;
			rc = gpu.ops->adamw_runs(&gpu, x[0], split ? NULL : (float *)x[1], split ? (uint16_t *)x[1] : NULL,
						 x[2], (float *)x[3], (float *)x[4], tabs[tb], ns[tb], &h, &err) ||
			     gpt_adamw_runs_each(&gpu, b[0], split ? NULL : (float *)b[1], split ? (uint16_t *)b[1] : NULL,
						 b[2], (float *)b[3], (float *)b[4], tabs[tb], ns[tb], &h, &err);
		}
		/* the gap's first element: its moment as it was */
		rc = rc || gpu.ops->download(&gpu, &m1, (float *)a[3].d + gap[tb], sizeof m1, &err);
		int same_all = adamw_same_free(a, b, es, n, 0) && !rc;
		ok(same_all && m1 == m0, "%s adamw_runs (%lld runs%s): the bits of a call a run, the gap as it was %s",
		   gpt_dtype_name(DT), (long long)ns[tb], split ? ", split master" : "", rc ? err.msg : "");
	}
}

static void test_optimizer(void)
{
	adamw_paths();
	adamw_runs_paths();
	int64_t n = ADAMW_N;
	ten p = st(n, 0.1), g = st(n, 1), m = f32(n, 0.01), v = ten_const(GPT_DTYPE_F32, n, 0.0004f);
	float *mv = xmalloc((size_t)n * sizeof *mv);
	gpt_convert(mv, GPT_DTYPE_F32, H(p), DT, (size_t)n, NULL);
	ten master = ten_of(GPT_DTYPE_F32, mv, n);
	free(mv);
	for (int64_t t = 1; t <= 2; t++) {
		gpt_adamw h = {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1,
			       .grad_scale = 0.5, .t = t};
		CALL2(adamw, (&cpu, H(p), H(master), NULL, H(g), H(m), H(v), n, &h, &err),
		      (&gpu, D(p), D(master), NULL, D(g), D(m), D(v), n, &h, &err));
	}
	same("adamw param (two steps, master weights)", &p, 1);
	same("adamw master", &master, 1);
	same("adamw m", &m, 1);
	same("adamw v", &v, 1);
	if (DT == GPT_DTYPE_F32) {
		gpt_adamw h = {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .grad_scale = 1, .t = 3};
		CALL2(adamw, (&cpu, H(p), NULL, NULL, H(g), H(m), H(v), n, &h, &err),
		      (&gpu, D(p), NULL, NULL, D(g), D(m), D(v), n, &h, &err));
		same("adamw without master weights", &p, 1);
	}
	if (DT == GPT_DTYPE_BF16) {
		/* the trainer's split master weights: the parameter is the high
		 * half, lo the low half, both updated (lo starts at zero bits) */
		ten q = st(n, 0.1), lo = ten_const(GPT_DTYPE_BF16, n, 0.0f), m2 = f32(n, 0.01);
		ten v2 = ten_const(GPT_DTYPE_F32, n, 0.0004f);
		for (int64_t t = 1; t <= 2; t++) {
			gpt_adamw h = {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1,
				       .grad_scale = 0.5, .t = t};
			CALL2(adamw, (&cpu, H(q), NULL, H(lo), H(g), H(m2), H(v2), n, &h, &err),
			      (&gpu, D(q), NULL, D(lo), D(g), D(m2), D(v2), n, &h, &err));
		}
		same("adamw param (two steps, split master weights)", &q, 1);
		same("adamw m (split master weights)", &m2, 1);
		same("adamw v (split master weights)", &v2, 1);
		uint16_t *gh = xmalloc((size_t)n * 2), *gl = xmalloc((size_t)n * 2);
		float *cw = xmalloc((size_t)n * 4), *gw = xmalloc((size_t)n * 4);
		if (gpu.ops->download(&gpu, gh, D(q), (size_t)n * 2, &err) ||
		    gpu.ops->download(&gpu, gl, D(lo), (size_t)n * 2, &err)) {
			ok(0, "bf16 adamw split master: download: %s", err.msg);
		} else {
			gpt_bf16_join(cw, H(q), H(lo), (size_t)n);
			gpt_bf16_join(gw, gh, gl, (size_t)n);
			same_f("adamw master (split, joined)", GPT_DTYPE_F32, cw, gw, n, 1);
		}
		free(gh), free(gl), free(cw), free(gw);
		ten *sp[] = {&q, &lo, &m2, &v2};
		for (size_t i = 0; i < sizeof sp / sizeof *sp; i++)
			ten_free(sp[i]);
		split_round_trip();
	}
	ten acc = ten_const(GPT_DTYPE_F32, 1, 2.5f);
	CALL2(sum_squares, (&cpu, H(acc), H(g), n, &err), (&gpu, D(acc), D(g), n, &err));
	CALL2(sum_squares, (&cpu, H(acc), H(p), n - 3, &err), (&gpu, D(acc), D(p), n - 3, &err));
	same("sum_squares (accumulated)", &acc, 1);
	ten flag = ten_const(GPT_DTYPE_F32, 1, 0.0f);
	CALL2(check_finite, (&cpu, H(flag), H(g), n, &err), (&gpu, D(flag), D(g), n, &err));
	same("check_finite: all finite leaves the flag", &flag, 1);
	float inf = INFINITY;
	size_t es = gpt_dtype_size(DT);
	gpt_convert((char *)H(g) + (size_t)(n - 5) * es, DT, &inf, GPT_DTYPE_F32, 1, NULL);
	gpu.ops->upload(&gpu, (char *)D(g) + (size_t)(n - 5) * es, (char *)H(g) + (size_t)(n - 5) * es, es, &err);
	CALL2(check_finite, (&cpu, H(flag), H(g), n, &err), (&gpu, D(flag), D(g), n, &err));
	float got = 0;
	gpu.ops->download(&gpu, &got, D(flag), 4, &err);
	ok(got == 1.0f && *(float *)H(flag) == 1.0f, "%s check_finite: an infinity sets the flag",
	   gpt_dtype_name(DT));
	ten *all[] = {&p, &g, &m, &v, &master, &acc, &flag};
	for (size_t i = 0; i < sizeof all / sizeof *all; i++)
		ten_free(all[i]);
}

/* Fake quantization and PACT: the CPU's arithmetic, so exact but for the
 * order of PACT's alpha sum. */
static void test_quant(void)
{
	int64_t R = 3 * NH, K = C, n = R * K;
	ten x = st(n, 2), sr = ten_const(GPT_DTYPE_F32, R, 0.5f), s1 = ten_const(GPT_DTYPE_F32, 1, 0.25f);
	CALL2(quant_absmax, (&cpu, H(sr), H(x), R, K, 1, 1, &err), (&gpu, D(sr), D(x), R, K, 1, 1, &err));
	same("quant_absmax per row, accumulated", &sr, 0);
	CALL2(quant_absmax, (&cpu, H(s1), H(x), R, K, 0, 0, &err), (&gpu, D(s1), D(x), R, K, 0, 0, &err));
	same("quant_absmax per tensor", &s1, 0);
	ten q = st(n, 1);
	CALL2(fake_quant, (&cpu, H(q), H(x), H(sr), R, K, 1, 8, &err), (&gpu, D(q), D(x), D(sr), R, K, 1, 8, &err));
	same("fake_quant per row, 8 bits", &q, 0);
	CALL2(fake_quant, (&cpu, H(x), H(x), H(s1), R, K, 0, 4, &err), (&gpu, D(x), D(x), D(s1), R, K, 0, 4, &err));
	same("fake_quant per tensor, 4 bits, in place", &x, 0);
	/* a scale whose inverse step overflows: zeros (0 * inf was NaN) and
	 * values within it, 8 and 16 bits */
	ten tz = ten_const(DT, n, 0.0f), tx = st(n, 1e-38), ts = ten_const(GPT_DTYPE_F32, 1, 1e-38f);
	for (int bits = 8; bits <= 16; bits += 8) {
		CALL2(fake_quant, (&cpu, H(q), H(tz), H(ts), R, K, 0, bits, &err),
		      (&gpu, D(q), D(tz), D(ts), R, K, 0, bits, &err));
		same(bits == 8 ? "fake_quant, a scale of 1e-38, zeros, 8 bits"
			       : "fake_quant, a scale of 1e-38, zeros, 16 bits", &q, 0);
		CALL2(fake_quant, (&cpu, H(q), H(tx), H(ts), R, K, 0, bits, &err),
		      (&gpu, D(q), D(tx), D(ts), R, K, 0, bits, &err));
		same(bits == 8 ? "fake_quant, a scale of 1e-38, 8 bits" : "fake_quant, a scale of 1e-38, 16 bits",
		     &q, 0);
	}
	ten_free(&tz);
	ten_free(&tx);
	ten_free(&ts);
	ten state = ten_const(GPT_DTYPE_F32, R, 1.0f), accum = ten_const(GPT_DTYPE_F32, R, 1.0f);
	CALL2(quant_moving_avg, (&cpu, H(state), H(accum), H(sr), H(sr), R, 0.9f, 1, &err),
	      (&gpu, D(state), D(accum), D(sr), D(sr), R, 0.9f, 1, &err));
	same("quant_moving_avg scale", &sr, 0);
	same("quant_moving_avg accum", &accum, 0);
	ten px = st(n, 2), py = st(n, 1), dy = st(n, 1), dx = st(n, 1);
	ten alpha = ten_const(GPT_DTYPE_F32, 1, 0.75f), dal = ten_const(GPT_DTYPE_F32, 1, 0.5f);
	CALL2(pact_fwd, (&cpu, H(py), H(px), H(alpha), n, &err), (&gpu, D(py), D(px), D(alpha), n, &err));
	same("pact_fwd", &py, 0);
	CALL2(pact_bwd, (&cpu, H(dx), H(dal), H(dy), H(px), H(alpha), n, 1, &err),
	      (&gpu, D(dx), D(dal), D(dy), D(px), D(alpha), n, 1, &err));
	same("pact_bwd dx (accumulated)", &dx, 1);
	CALL2(pact_bwd, (&cpu, H(dy), H(dal), H(dy), H(px), H(alpha), n, 0, &err),
	      (&gpu, D(dy), D(dal), D(dy), D(px), D(alpha), n, 0, &err));
	same("pact_bwd dx (written over dy)", &dy, 0);
	same("pact_bwd dalpha", &dal, 1);
	ten *all[] = {&x, &sr, &s1, &q, &state, &accum, &px, &py, &dy, &dx, &alpha, &dal};
	for (size_t i = 0; i < sizeof all / sizeof *all; i++)
		ten_free(all[i]);
}

static void test_convert(void)
{
	int64_t n = 1 << 16;
	ten x = st(n, 100);
	for (int t = 0; t < 3; t++) {
		gpt_dtype to = (gpt_dtype)t;
		ten y = ten_const(to, n, 0);
		CALL2(convert, (&cpu, H(y), to, H(x), DT, n, &err), (&gpu, D(y), to, D(x), DT, n, &err));
		char what[64];
		snprintf(what, sizeof what, "convert to %s", gpt_dtype_name(to));
		same(what, &y, 0);
		ten_free(&y);
	}
	ten_free(&x);
}

/* One training step of a small GPT with dropout on both backends, the
 * classifier in blocks of 96 rows (the last one short); fused: the MLP's
 * GELU inside its GEMMs (Model.fused_linear). */
static void test_model(int fused)
{
	gpt_model_shape s = {.vocab_size = 1000, .padded_vocab = 1024, MODEL_SHAPE};
	gpt_layout lo;
	gpt_layout_single(&lo, &s);
	gpt_model_opts mo = {.batch = 2, .seq_len = MODEL_T, .hidden_dropout = 0.1f, .attn_dropout = 0.1f,
			     .seed = 42, .head_rows = 96, .fused_gelu = fused};
	const char *how = fused ? " (GELU in the GEMMs)" : "";
	gpt_model mc, mg;
	memset(&mc, 0, sizeof mc);
	memset(&mg, 0, sizeof mg);
	int64_t n = mo.batch * mo.seq_len;
	int32_t *tok = xmalloc((size_t)n * 4), *tgt = xmalloc((size_t)n * 4);
	for (int64_t i = 0; i < n; i++) {
		tok[i] = (int32_t)((urand() + 1) * 0.5 * s.vocab_size);
		tgt[i] = i % 31 == 3 ? -1 : (int32_t)((urand() + 1) * 0.5 * s.vocab_size);
	}
	double lc = 0, lg = 0;
	int64_t nc = 0, ng = 0;
	int rc = gpt_model_init(&mc, &cpu, &s, &lo, &mo, &err);
	rc = rc || gpt_model_init(&mg, &gpu, &s, &lo, &mo, &err);
	rc = rc || gpt_model_init_weights(&mc, 7, 0.02, &err) || gpt_model_init_weights(&mg, 7, 0.02, &err);
	rc = rc || gpt_model_zero_grad(&mc, &err) || gpt_model_zero_grad(&mg, &err);
	int64_t counted = 0;
	for (int64_t i = 0; i < n; i++)
		counted += tgt[i] >= 0;
	float dloss = 1.0f / (float)counted;
	rc = rc || gpt_model_forward(&mc, tok, tgt, 1, 3, 0, &dloss, &lc, &nc, &err);
	rc = rc || gpt_model_forward(&mg, tok, tgt, 1, 3, 0, &dloss, &lg, &ng, &err);
	rc = rc || gpt_model_backward(&mc, &err);
	rc = rc || gpt_model_backward(&mg, &err);
	if (rc) {
		ok(0, "%s model step%s: %s", gpt_dtype_name(DT), how, err.msg);
	} else {
		double tol = DT == GPT_DTYPE_F32 ? 1e-5 : 1e-2;
		ok(nc == ng && fabs(lc - lg) <= tol * fabs(lc), "%s model step%s: loss %.7f on the gpu, %.7f on the cpu (%lld tokens)",
		   gpt_dtype_name(DT), how, lg / (double)ng, lc / (double)nc, (long long)ng);
		size_t es = gpt_dtype_size(DT);
		for (int64_t i = 0; i < mc.n_table; i++) {
			ten one = {DT, gpt_box_numel(&mc.box[i]), (char *)mc.grads + (size_t)mc.offset[i] * es,
				   (char *)mg.grads + (size_t)mg.offset[i] * es};
			char what[96];
			snprintf(what, sizeof what, "model gradient %s%s", mc.table[i].name, how);
			/* a whole network's rounding differences add up: 10x the op tolerance */
			same(what, &one, 10);
		}
	}
	gpt_model_free(&mc);
	gpt_model_free(&mg);
	free(tok);
	free(tgt);
}

static void test_attention_both(void)
{
	test_attention(0.0f);
	test_attention(0.1f);
	/* Model.max_position_embeddings' most, 1048576 positions, is 131072
	 * row blocks on the cuda cores (fp32, head size 40): more than one
	 * grid.y, which the launches take in slices of GPT_CUDA_GRID_Y (the
	 * emulation's slices of 2 split every shape above). No batch: the
	 * shape's checks and no work (a real one is 10^12 scores a head). */
	int lrc = gpu.ops->attention_fwd(&gpu, NULL, NULL, NULL, 0, 1048576, 1, 40, NULL, &err);
	if (!lrc)
		lrc = gpu.ops->attention_bwd(&gpu, NULL, NULL, NULL, NULL, NULL, 0, 1048576, 1, 40, NULL, &err);
	ok(lrc == 0, "%s attention takes sequences of 1048576 positions%s%s", gpt_dtype_name(DT),
	   lrc ? ": " : "", lrc ? err.msg : "");
}

/* calls attention_fwd (and _bwd) once at a shape of T=t, 2 heads of hs
 * (qkv zeros, the output its own gradient; dropout p) and returns
 * gpt_cuda_attention_rows_used's count, used[] the rows each kernel took, or -1 */
static int rows_at(int64_t t, int64_t hs, float p, int bwd, int used[3])
{
	int64_t nh = 2, n3 = t * 3 * nh * hs;
	size_t es = gpt_dtype_size(DT);
	gpt_dropout d = {.p = p, .key = {.seed = 7, .site = GPT_RNG_SITE_ATTN_PROBS}};
	int64_t ns = gpu.ops->attention_saved_size(&gpu, 1, t, nh, hs, p > 0);
	void *qkv = gpt_cuda_malloc((size_t)n3 * es, "qkv", &err), *dq = gpt_cuda_malloc((size_t)n3 * es, "dqkv", &err);
	void *o = gpt_cuda_malloc((size_t)(t * nh * hs) * es, "out", &err);
	float *sv = gpt_cuda_malloc((size_t)ns * sizeof(float), "saved", &err);
	int rc = !qkv || !dq || !o || !sv || gpu.ops->zero(&gpu, qkv, (size_t)n3 * es, &err) ||
		 gpu.ops->attention_fwd(&gpu, o, sv, qkv, 1, t, nh, hs, &d, &err) ||
		 (bwd && gpu.ops->attention_bwd(&gpu, dq, o, o, qkv, sv, 1, t, nh, hs, &d, &err)) ||
		 gpu.ops->sync(&gpu, &err);
	if (rc)
		diag("attention at T=%lld HS=%lld: %s", (long long)t, (long long)hs, err.msg);
	gpt_cuda_free(qkv);
	gpt_cuda_free(dq);
	gpt_cuda_free(o);
	gpt_cuda_free(sv);
	int n = gpt_cuda_attention_rows_used(&gpu, used);
	return rc ? -1 : n;
}

static int rows_ok(int r)
{
	return r == 64 || r == 128;
}

/* the forward's forms: those two, 64 with the scores a tile ahead and,
 * with dropout, 64 after the mask is drawn */
static int fwd_ok(int r, int drop)
{
	return rows_ok(r) || r == GPT_CUDA_ATTN_AHEAD || (drop && r == GPT_CUDA_ATTN_MASKED);
}

#define FORM(r) gpt_cuda_attention_form(r)

/* The tensor-core attention's forms (gpt_cuda_attention_rows): by default
 * each kernel's first call at a shape times its forms (64 and 128 rows,
 * the forward 64a too, and 64m with dropout) and keeps the fastest, a
 * later call times nothing; heads above 64 have no 128 (the forward times 64 and 64a, dq and dkv
 * take 64); a forced setting is taken as it is, 64 where a kernel has not
 * that form; past GPT_CUDA_ATTN_PICKS shapes, 64 untimed. (That each
 * gives the same bits: test_attention_at.) */
static void test_attention_rows(void)
{
	if (!gpt_cuda_attention_tensor_cores(DT, 64))
		return;
	int u[3], n0, n;
	const char *dt = gpt_dtype_name(DT);
	gpt_cuda_attention_rows(&gpu, GPT_CUDA_ATTN_AUTO);
	n0 = gpt_cuda_attention_rows_used(&gpu, u);
	n = rows_at(77, 64, 0, 0, u);
	ok(n == n0 + 1 && fwd_ok(u[0], 0), "%s attention_fwd's first call at a shape times its forms (%s)", dt,
	   FORM(u[0]));
	int f = u[0];
	n = rows_at(77, 64, 0, 1, u);
	ok(n == n0 + 3 && u[0] == f && rows_ok(u[1]) && rows_ok(u[2]),
	   "%s then the forward keeps it, and dq and dkv time theirs (%s and %s rows)", dt, FORM(u[1]), FORM(u[2]));
	int q = u[1], k = u[2];
	n = rows_at(77, 64, 0, 1, u);
	ok(n == n0 + 3 && u[0] == f && u[1] == q && u[2] == k, "%s a second call at the shape times nothing", dt);
	n = rows_at(77, 64, 0.1f, 1, u);
	ok(n == n0 + 6 && fwd_ok(u[0], 1) && rows_ok(u[1]) && rows_ok(u[2]),
	   "%s with dropout each kernel times its own too (%s, %s and %s)", dt, FORM(u[0]), FORM(u[1]), FORM(u[2]));
	n = rows_at(77, 128, 0, 1, u);
	ok(n == n0 + 7 && (u[0] == 64 || u[0] == GPT_CUDA_ATTN_AHEAD) && u[1] == 64 && u[2] == 64,
	   "%s a head size of 128: the forward times 64 and 64a (%s), dq and dkv take 64 untimed", dt, FORM(u[0]));
	int was = gpt_cuda_attention_rows(&gpu, 128);
	n = rows_at(78, 64, 0, 1, u);
	ok(was == GPT_CUDA_ATTN_AUTO && n == n0 + 7 && u[0] == 128 && u[1] == 128 && u[2] == 128,
	   "%s forced 128-row tiles are taken untimed", dt);
	n = rows_at(78, 64, 0.1f, 1, u);
	ok(u[0] == 128 && u[1] == 128 && u[2] == 128, "%s forced 128, with dropout too", dt);
	n = rows_at(78, 128, 0, 1, u);
	ok(n == n0 + 7 && u[0] == 64 && u[1] == 64 && u[2] == 64, "%s forced 128 at a head size of 128: 64", dt);
	gpt_cuda_attention_rows(&gpu, GPT_CUDA_ATTN_AHEAD);
	n = rows_at(78, 64, 0.1f, 1, u);
	ok(n == n0 + 7 && u[0] == GPT_CUDA_ATTN_AHEAD && u[1] == 64 && u[2] == 64,
	   "%s forced 64a: the forward takes it, dq and dkv 64 rows, untimed", dt);
	n = rows_at(78, 128, 0, 1, u);
	ok(n == n0 + 7 && u[0] == GPT_CUDA_ATTN_AHEAD && u[1] == 64 && u[2] == 64,
	   "%s forced 64a at a head size of 128 too", dt);
	gpt_cuda_attention_rows(&gpu, GPT_CUDA_ATTN_MASKED);
	n = rows_at(78, 64, 0.1f, 1, u);
	ok(n == n0 + 7 && u[0] == GPT_CUDA_ATTN_MASKED && u[1] == 64 && u[2] == 64,
	   "%s forced 64m with dropout: the forward takes it, dq and dkv 64 rows, untimed", dt);
	n = rows_at(78, 64, 0, 1, u);
	ok(n == n0 + 7 && u[0] == 64 && u[1] == 64 && u[2] == 64, "%s forced 64m without dropout: 64", dt);
	ok(gpt_cuda_attention_rows(&gpu, 96) == -1 && gpt_cuda_attention_rows(&gpu, 0) == GPT_CUDA_ATTN_MASKED,
	   "%s 96 rows are refused, the setting unchanged", dt);
	ok(gpt_cuda_attention_kind_rows(&gpu, 0) == GPT_CUDA_ATTN_MASKED &&
	   gpt_cuda_attention_kind_rows(&gpu, 2) == GPT_CUDA_ATTN_MASKED && gpt_cuda_attention_kind_rows(&gpu, 3) == -1,
	   "%s a setting for every kernel is each kernel's", dt);
	gpt_cuda_attention_rows(&gpu, GPT_CUDA_ATTN_AUTO);
	/* the table full: later shapes take 64 untimed */
	for (int64_t t = 16; n >= 0 && n < GPT_CUDA_ATTN_PICKS; t++)
		n = rows_at(t, 32, 0, 0, u);
	n0 = n;
	n = rows_at(15, 32, 0, 0, u);
	ok(n0 == GPT_CUDA_ATTN_PICKS && n == n0 && u[0] == 64, "%s past %d shapes, a new one takes 64 rows untimed", dt,
	   GPT_CUDA_ATTN_PICKS);
}

static void test_models(void)
{
	test_model(0);
	test_model(1);
}

/* The groups of tests, in order; GPT_TEST_OPS=layernorm,xent (say) runs those only. */
static const struct {
	const char *name;
	void (*run)(void);
} groups[] = {
	{"gemm", test_gemm},
	{"gemm_plans", test_gemm_plans},
	{"linear", test_linear},
	{"gelu", test_gelu_fusions},
	{"layernorm", test_layernorm},
	{"layernorm_more", test_layernorm_more},
	{"elementwise", test_elementwise},
	{"attention", test_attention_both},
	{"attention_rows", test_attention_rows},
	{"attention_kv", test_attention_kv},
	{"attention_kv_rows", test_attention_kv_rows},
	{"xent", test_xent},
	{"xent_more", test_xent_more},
	{"embedding", test_embedding},
	{"optimizer", test_optimizer},
	{"staging", test_staging_busy},
	{"quant", test_quant},
	{"convert", test_convert},
	{"model", test_models},
};
#define N_GROUPS (sizeof groups / sizeof *groups)

/* whether the comma-separated list names the first n bytes of name */
static int listed(const char *list, const char *name, size_t n)
{
	for (const char *p = list; *p;) {
		size_t k = strcspn(p, ",");
		if (k == n && strncmp(p, name, n) == 0)
			return 1;
		p += k + (p[k] == ',');
	}
	return 0;
}

/* every name in GPT_TEST_OPS is a group, or the run bails out */
static int ops_valid(const char *ops)
{
	for (const char *p = ops; *p;) {
		size_t k = strcspn(p, ","), g = 0;
		while (g < N_GROUPS && !listed(groups[g].name, p, k))
			g++;
		if (g == N_GROUPS) {
			printf("Bail out! GPT_TEST_OPS names '%.*s', which is no group of tests (test-cuda-ops.c's groups)\n",
			       (int)k, p);
			return 0;
		}
		p += k + (p[k] == ',');
	}
	return 1;
}

int main(void)
{
	if (gpt_cuda_device_count() == 0)
		return skip_all("no CUDA device (the CUDA backend's ops are tested on a GPU only)");
	const char *ops = getenv("GPT_TEST_OPS");
	if (!ops)
		ops = "";
	if (!ops_valid(ops))
		return 1;
	const gpt_dtype dts[] = {GPT_DTYPE_F32, GPT_DTYPE_BF16, GPT_DTYPE_F16};
	/* GPT_TEST_DTYPE=bf16 (say) runs one dtype */
	const char *only = getenv("GPT_TEST_DTYPE");
	for (size_t i = 0; i < sizeof dts / sizeof *dts; i++) {
		DT = dts[i];
		if (only && strcmp(only, gpt_dtype_name(DT)) != 0)
			continue;
		if (gpt_backend_cpu_init(&cpu, DT, 0, &err) || gpt_backend_cuda_init(&gpu, DT, 0, &err)) {
			printf("Bail out! %s\n", err.msg);
			return 1;
		}
		/* the default, whatever GPT_CUDA_ATTN_ROWS says */
		gpt_cuda_attention_rows(&gpu, GPT_CUDA_ATTN_AUTO);
		for (size_t g = 0; g < N_GROUPS; g++)
			if (!*ops || listed(ops, groups[g].name, strlen(groups[g].name)))
				groups[g].run();
		gpt_backend_cpu_free(&cpu);
		gpt_backend_cuda_free(&gpu);
	}
	return done_testing();
}
