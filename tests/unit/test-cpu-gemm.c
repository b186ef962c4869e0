/* GEMM (all transposes, alpha/beta, strides, batched), the linear layer and
 * bias add, against naive double-precision products. */
#include "cpu-check.h"

/* C = alpha op(A) op(B) + beta C in double, row-major. */
static void ref_gemm(int ta, int tb, int64_t m, int64_t n, int64_t k, double alpha,
		     const float *a, int64_t lda, const float *b, int64_t ldb, double beta,
		     double *c, int64_t ldc)
{
	for (int64_t i = 0; i < m; i++)
		for (int64_t j = 0; j < n; j++) {
			double s = 0.0;
			for (int64_t p = 0; p < k; p++)
				s += (double)(ta ? a[p * lda + i] : a[i * lda + p]) *
				     (double)(tb ? b[j * ldb + p] : b[p * ldb + j]);
			c[i * ldc + j] = alpha * s + (beta == 0.0 ? 0.0 : beta * c[i * ldc + j]);
		}
}

int main(void)
{
	gpt_backend be = chk_backend();
	const int64_t m = 37, n = 29, k = 45;

	/* every transpose combination, padded leading dimensions, beta 0 / 1 / 0.5 */
	for (int ta = 0; ta < 2; ta++)
		for (int tb = 0; tb < 2; tb++)
			for (int bi = 0; bi < 3; bi++) {
				double beta = bi == 0 ? 0.0 : bi == 1 ? 1.0 : 0.5;
				int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 5, ldc = n + 2;
				int64_t ra = ta ? k : m, rb = tb ? n : k;
				float *a = chk_floats(ra * lda, 1.0), *b = chk_floats(rb * ldb, 1.0);
				float *c = chk_floats(m * ldc, 1.0);
				if (beta == 0.0)
					c[0] = NAN; /* beta = 0 must ignore what C held */
				double *want = chk_doubles_of(c, m * ldc);
				ref_gemm(ta, tb, m, n, k, 0.75, a, lda, b, ldb, beta, want, ldc);
				CHK(be.ops->gemm(&be, ta, tb, m, n, k, 0.75f, a, lda, b, ldb,
						 (float)beta, c, ldc, &chk_err));
				char what[96];
				snprintf(what, sizeof what, "gemm trans_a=%d trans_b=%d beta=%g", ta, tb,
					 beta);
				chk_close(what, c, want, m * ldc, 1e-5, 1e-5);
				free(a), free(b), free(c), free(want);
			}

	/* k = 0: C = beta C */
	{
		float c[6] = {1, 2, 3, 4, 5, 6};
		CHK(be.ops->gemm(&be, 0, 0, 2, 3, 0, 1.0f, c, 1, c, 3, 2.0f, c, 3, &chk_err));
		ok(c[0] == 2 && c[5] == 12, "gemm with k = 0 scales C by beta");
	}

	/* batched: 4 matrices at strides with gaps, accumulate */
	{
		int64_t batch = 4, sa = m * k + 7, sb = k * n + 3, sc = m * n + 11;
		float *a = chk_floats(batch * sa, 1.0), *b = chk_floats(batch * sb, 1.0);
		float *c = chk_floats(batch * sc, 1.0);
		double *want = chk_doubles_of(c, batch * sc);
		for (int64_t i = 0; i < batch; i++)
			ref_gemm(0, 1, m, n, k, 1.0, a + i * sa, k, b + i * sb, k, 1.0,
				 want + i * sc, n);
		CHK(be.ops->gemm_batched(&be, 0, 1, m, n, k, 1.0f, a, k, sa, b, k, sb, 1.0f, c, n,
					 sc, batch, &chk_err));
		chk_close("gemm_batched, trans_b, beta 1, gaps untouched", c, want, batch * sc,
			  1e-5, 1e-5);
		free(a), free(b), free(c), free(want);
	}

	/* errors: too-small leading dimension, negative size */
	{
		float x[4] = {0};
		gpt_err err = {0};
		int rc = be.ops->gemm(&be, 0, 0, 2, 2, 2, 1.0f, x, 1, x, 2, 0.0f, x, 2, &err);
		ok(rc == GPT_EINTERNAL && strstr(err.msg, "lda=1"), "gemm rejects lda < k: %s",
		   err.msg);
		rc = be.ops->gemm(&be, 0, 0, -1, 2, 2, 1.0f, x, 2, x, 2, 0.0f, x, 2, &err);
		ok(rc == GPT_EINTERNAL, "gemm rejects a negative size: %s", err.msg);
	}

	/* linear: out = inp w^T + bias; backward: dinp written, dw/dbias added */
	{
		int64_t M = 19, K = 23, N = 17;
		float *inp = chk_floats(M * K, 1.0), *w = chk_floats(N * K, 1.0);
		float *bias = chk_floats(N, 1.0), *out = chk_floats(M * N, 1.0);
		double *want = calloc((size_t)(M * N), sizeof *want);
		ref_gemm(0, 1, M, N, K, 1.0, inp, K, w, K, 0.0, want, N);
		for (int64_t i = 0; i < M * N; i++)
			want[i] += bias[i % N];
		CHK(be.ops->linear_fwd(&be, out, inp, w, bias, M, K, N, &chk_err));
		chk_close("linear_fwd with bias", out, want, M * N, 1e-5, 1e-5);
		ref_gemm(0, 1, M, N, K, 1.0, inp, K, w, K, 0.0, want, N);
		CHK(be.ops->linear_fwd(&be, out, inp, w, NULL, M, K, N, &chk_err));
		chk_close("linear_fwd without bias", out, want, M * N, 1e-5, 1e-5);

		float *dout = chk_floats(M * N, 1.0), *dinp = chk_floats(M * K, 1.0);
		float *dw = chk_floats(N * K, 1.0), *db = chk_floats(N, 1.0);
		double *wdinp = calloc((size_t)(M * K), sizeof *wdinp);
		double *wdw = chk_doubles_of(dw, N * K), *wdb = chk_doubles_of(db, N);
		ref_gemm(0, 0, M, K, N, 1.0, dout, N, w, K, 0.0, wdinp, K);
		ref_gemm(1, 0, N, K, M, 1.0, dout, N, inp, K, 1.0, wdw, K);
		for (int64_t i = 0; i < M; i++)
			for (int64_t j = 0; j < N; j++)
				wdb[j] += dout[i * N + j];
		CHK(be.ops->linear_bwd(&be, dinp, dw, db, dout, inp, w, M, K, N, &chk_err));
		chk_close("linear_bwd dinp = dout w (written)", dinp, wdinp, M * K, 1e-5, 1e-5);
		chk_close("linear_bwd dw += dout^T inp", dw, wdw, N * K, 1e-5, 1e-5);
		chk_close("linear_bwd dbias += column sums", db, wdb, N, 1e-5, 1e-5);
		CHK(be.ops->linear_bwd(&be, NULL, NULL, db, dout, inp, w, M, K, N, &chk_err));
		for (int64_t i = 0; i < M; i++)
			for (int64_t j = 0; j < N; j++)
				wdb[j] += dout[i * N + j];
		chk_close("linear_bwd with only dbias", db, wdb, N, 1e-5, 1e-5);

		double *wout = chk_doubles_of(out, M * N);
		for (int64_t i = 0; i < M * N; i++)
			wout[i] += bias[i % N];
		CHK(be.ops->bias_add(&be, out, bias, M, N, &chk_err));
		chk_close("bias_add", out, wout, M * N, 1e-6, 1e-6);
		free(inp), free(w), free(bias), free(out), free(want), free(dout), free(dinp);
		free(dw), free(db), free(wdinp), free(wdw), free(wdb), free(wout);
	}
	gpt_backend_cpu_free(&be);
	return done_testing();
}
