/* Token + position embedding: forward against a direct lookup, vocabulary
 * slices summing to the full lookup, the t0 offset, rows at positions of
 * their own (embedding_rows_fwd); backward against the
 * direct sums (it is linear, so this is exact analytically), accumulation,
 * and identical bits for any thread count. */
#include "cpu-check.h"

enum { B = 3, T = 4, C = 70, VL = 10, MAXT = 8 };

int main(void)
{
	gpt_backend be = chk_backend();
	float *wte = chk_floats(VL * C, 1.0), *wpe = chk_floats(MAXT * C, 1.0);
	int32_t tok[B * T] = {0, 3, 3, 9, 5, 3, 0, 1, 9, 9, 2, 3};
	float out[B * T * C];
	double want[B * T * C];
	for (int r = 0; r < B * T; r++)
		for (int j = 0; j < C; j++)
			want[r * C + j] = (double)wte[tok[r] * C + j] + wpe[(2 + r % T) * C + j];
	CHK(be.ops->embedding_fwd(&be, out, tok, wte, wpe, B, T, C, 0, VL, 2, &chk_err));
	chk_close("embedding_fwd, positions from t0 = 2", out, want, B * T * C, 0, 1e-7);

	/* two vocabulary slices [0, 6) and [6, 10), wpe on the first only: their
	 * sum is the full lookup, exactly */
	{
		float a[B * T * C], b[B * T * C];
		CHK(be.ops->embedding_fwd(&be, a, tok, wte, wpe, B, T, C, 0, 6, 2, &chk_err));
		CHK(be.ops->embedding_fwd(&be, b, tok, wte + 6 * C, NULL, B, T, C, 6, 4, 2,
					  &chk_err));
		int same = 1;
		for (int i = 0; i < B * T * C; i++)
			same &= a[i] + b[i] == out[i];
		ok(same, "vocabulary slices sum to the full embedding bit for bit");
	}

	/* rows at positions of their own (a generation step of sequences of
	 * different lengths): each row embedding_fwd's at its position */
	{
		int32_t pos[4] = {5, 0, 7, 2};
		float rows[4 * C], one[4 * C];
		CHK(be.ops->embedding_rows_fwd(&be, rows, tok, pos, wte, wpe, 4, C, 0, VL, &chk_err));
		for (int r = 0; r < 4; r++)
			CHK(be.ops->embedding_fwd(&be, one + r * C, tok + r, wte, wpe, 1, 1, C, 0, VL,
						  pos[r], &chk_err));
		ok(memcmp(rows, one, sizeof rows) == 0,
		   "embedding_rows_fwd: row r is embedding_fwd's at position pos[r], bit for bit");
		double wr[4 * C];
		for (int r = 0; r < 4; r++)
			for (int j = 0; j < C; j++)
				wr[r * C + j] = (double)wte[tok[r] * C + j] + wpe[pos[r] * C + j];
		chk_close("embedding_rows_fwd against a direct lookup", rows, wr, 4 * C, 0, 1e-7);
	}

	float *g = chk_floats(B * T * C, 1.0);
	float *dwte = chk_floats(VL * C, 1.0), *dwpe = chk_floats(MAXT * C, 1.0);
	double *wdte = chk_doubles_of(dwte, VL * C), *wdpe = chk_doubles_of(dwpe, MAXT * C);
	for (int r = 0; r < B * T; r++)
		for (int j = 0; j < C; j++) {
			wdte[tok[r] * C + j] += g[r * C + j];
			wdpe[(2 + r % T) * C + j] += g[r * C + j];
		}
	float *dwte1 = malloc(VL * C * sizeof *dwte1), *dwpe1 = malloc(MAXT * C * sizeof *dwpe1);
	memcpy(dwte1, dwte, VL * C * sizeof *dwte1);
	memcpy(dwpe1, dwpe, MAXT * C * sizeof *dwpe1);
	CHK(be.ops->embedding_bwd(&be, dwte, dwpe, g, tok, B, T, C, 0, VL, 2, &chk_err));
	chk_close("embedding_bwd dwte += (repeated tokens)", dwte, wdte, VL * C, 1e-6, 1e-6);
	chk_close("embedding_bwd dwpe +=", dwpe, wdpe, MAXT * C, 1e-6, 1e-6);

	gpt_backend one;
	CHK(gpt_backend_cpu_init(&one, GPT_DTYPE_F32, 1, &chk_err));
	CHK(one.ops->embedding_bwd(&one, dwte1, dwpe1, g, tok, B, T, C, 0, VL, 2, &chk_err));
	ok(memcmp(dwte1, dwte, VL * C * sizeof *dwte) == 0 &&
	   memcmp(dwpe1, dwpe, MAXT * C * sizeof *dwpe) == 0,
	   "embedding_bwd: 1 thread and %d threads give identical bits", be.threads);

	/* a slice's backward touches only its own rows */
	{
		float *ds = calloc(4 * C, sizeof *ds);
		double *wds = calloc(4 * C, sizeof *wds);
		for (int r = 0; r < B * T; r++)
			if (tok[r] >= 6)
				for (int j = 0; j < C; j++)
					wds[(tok[r] - 6) * C + j] += g[r * C + j];
		CHK(be.ops->embedding_bwd(&be, ds, NULL, g, tok, B, T, C, 6, 4, 0, &chk_err));
		chk_close("embedding_bwd on the slice [6, 10)", ds, wds, 4 * C, 1e-6, 1e-6);
		free(ds), free(wds);
	}
	gpt_backend_cpu_free(&one);
	free(wte), free(wpe), free(g), free(dwte), free(dwpe), free(wdte), free(wdpe);
	free(dwte1), free(dwpe1);
	gpt_backend_cpu_free(&be);
	return done_testing();
}
