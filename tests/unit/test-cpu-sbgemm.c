/* The AVX512_BF16 matrix product (gemm_bf16.c): every transpose, sizes
 * that cut the 8 x 32 tile, the k pairs and the k, n blocks, beta 0 and
 * not, against a double reference on the same bf16 values within the
 * bound of fp32 accumulation; the same bits
 * for one and two threads; skipped where the CPU lacks AVX512_BF16. */
#include "cpu-check.h"
#include "cpu/kernels.h"

static uint16_t *bf16_of(const float *x, int64_t n)
{
	uint16_t *h = malloc((size_t)(n ? n : 1) * 2);
	gpt_convert(h, GPT_DTYPE_BF16, x, GPT_DTYPE_F32, (size_t)n, NULL);
	return h;
}

static float *f32_of(const uint16_t *h, int64_t n)
{
	float *x = malloc((size_t)(n ? n : 1) * sizeof *x);
	gpt_convert(x, GPT_DTYPE_F32, h, GPT_DTYPE_BF16, (size_t)n, NULL);
	return x;
}

static void check(void *work, int threads, int ta, int tb, int64_t m, int64_t n, int64_t k,
		  float alpha, float beta)
{
	int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 1, ldc = n + 5;
	int64_t na = (ta ? k : m) * lda, nb = (tb ? n : k) * ldb;
	float *af = chk_floats(na, 1.0), *bf = chk_floats(nb, 1.0), *c = chk_floats(m * ldc, 1.0);
	uint16_t *a = bf16_of(af, na), *b = bf16_of(bf, nb);
	float *ar = f32_of(a, na), *br = f32_of(b, nb);
	double *want = malloc((size_t)(m * ldc) * sizeof *want), *bound = malloc((size_t)(m * ldc) * sizeof *bound);
	for (int64_t i = 0; i < m; i++)
		for (int64_t j = 0; j < ldc; j++) {
			double s = 0, sa = 0;
			for (int64_t p = 0; j < n && p < k; p++) {
				double x = (double)ar[ta ? p * lda + i : i * lda + p] * br[tb ? j * ldb + p : p * ldb + j];
				s += x;
				sa += fabs(x);
			}
			double c0 = c[i * ldc + j];
			want[i * ldc + j] = j < n ? alpha * s + (beta == 0.0f ? 0.0 : beta * c0) : c0;
			bound[i * ldc + j] = (double)(k + 2) * 0x1p-24 * (fabs(alpha) * sa + fabs(beta * c0)) + 1e-30;
		}
	gpt_cpu_sbgemm(threads, work, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
	double worst = 0;
	for (int64_t i = 0; i < m * ldc; i++) {
		double e = fabs(c[i] - want[i]) / bound[i];
		if (!(e <= worst))
			worst = e;
	}
	ok(worst <= 1.0, "ta %d tb %d m %lld n %lld k %lld alpha %g beta %g, %d threads: within (k + 2) 2^-24 of the sum of |terms| (worst %.3g), gaps kept",
	   ta, tb, (long long)m, (long long)n, (long long)k, alpha, beta, threads, worst);
	free(af), free(bf), free(c), free(a), free(b), free(ar), free(br), free(want), free(bound);
}

int main(void)
{
	if (!gpt_cpu_sbgemm_ok())
		return skip_all("this CPU lacks AVX512_BF16");
	void *work = malloc(gpt_cpu_sbgemm_work_bytes());
	for (int ta = 0; ta < 2; ta++)
		for (int tb = 0; tb < 2; tb++) {
			check(work, 1, ta, tb, 13, 37, 9, 1.0f, 0.0f);
			check(work, 2, ta, tb, 64, 100, 300, 0.5f, 1.0f);
		}
	check(work, 1, 0, 1, 1, 1, 1, 1.0f, 2.0f);
	check(work, 2, 0, 0, 3, 4100, 5, 1.0f, 0.5f);
	check(work, 2, 1, 0, 300, 40, 520, 1.0f, 1.0f);

	/* the same bits whatever the thread count */
	enum { M = 72, N = 200, K = 301 };
	float *af = chk_floats(M * K, 1.0), *bf = chk_floats(K * N, 1.0);
	uint16_t *a = bf16_of(af, M * K), *b = bf16_of(bf, K * N);
	float *c1 = calloc(M * N, 4), *c2 = calloc(M * N, 4);
	gpt_cpu_sbgemm(1, work, 0, 0, M, N, K, 1.0f, a, K, b, N, 0.0f, c1, N);
	gpt_cpu_sbgemm(2, work, 0, 0, M, N, K, 1.0f, a, K, b, N, 0.0f, c2, N);
	ok(memcmp(c1, c2, sizeof(float) * M * N) == 0, "one and two threads give the same bits");
	free(af), free(bf), free(a), free(b), free(c1), free(c2), free(work);
	return done_testing();
}
