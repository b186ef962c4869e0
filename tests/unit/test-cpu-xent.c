/* Softmax cross-entropy over vocabulary pieces: one piece against a double
 * reference (loss, and the gradient against finite differences of it); 2 and
 * 4 pieces reduced as a tensor-parallel group would give the same loss and
 * gradient; padding columns never matter; ignored rows; bad targets. */
#include "cpu-check.h"

enum { N = 7, V = 40, VP = 64 }; /* vocabulary 40 padded to 64 */

static double ref_loss_row(const double *row, int target)
{
	double m = -INFINITY, s = 0;
	for (int j = 0; j < V; j++)
		m = fmax(m, row[j]);
	for (int j = 0; j < V; j++)
		s += exp(row[j] - m);
	return log(s) + m - row[target];
}

/* Runs the pieces protocol with `pieces` equal slices of the padded
 * vocabulary; returns per-row losses in loss and the gradient in dl. */
static void run(gpt_backend *be, int pieces, const float *logits, const int32_t *tg,
		float dloss, float *loss, float *dl)
{
	int64_t vl = VP / pieces;
	float mx[4][N], se[4][N], tl[4][N], gmax[N], gse[N], gtl[N];
	for (int p = 0; p < pieces; p++)
		CHK(be->ops->xent_fwd(be, mx[p], se[p], tl[p], logits + p * vl, tg, N, vl, VP,
				      p * vl, V, &chk_err));
	/* the all-reduces, by hand: max, then sums of the rescaled pieces */
	for (int r = 0; r < N; r++) {
		gmax[r] = -INFINITY;
		for (int p = 0; p < pieces; p++)
			gmax[r] = fmaxf(gmax[r], mx[p][r]);
	}
	for (int r = 0; r < N; r++)
		gse[r] = gtl[r] = 0;
	for (int p = 0; p < pieces; p++) {
		if (pieces > 1)
			CHK(be->ops->xent_rescale(be, se[p], mx[p], gmax, N, &chk_err));
		for (int r = 0; r < N; r++)
			gse[r] += se[p][r], gtl[r] += tl[p][r];
	}
	CHK(be->ops->xent_loss(be, loss, gmax, gse, gtl, tg, N, &chk_err));
	for (int p = 0; p < pieces; p++)
		CHK(be->ops->xent_bwd(be, dl + p * vl, logits + p * vl, tg, gmax, gse, dloss, N,
				      vl, VP, p * vl, V, &chk_err));
}

int main(void)
{
	gpt_backend be = chk_backend();
	float *logits = chk_floats(N * VP, 4.0);
	int32_t tg[N] = {0, 39, 5, 17, -1, 33, 16};
	for (int r = 0; r < N; r++)
		for (int j = V; j < VP; j++)
			logits[r * VP + j] = 1e30f * (j % 2 ? 1.0f : -1.0f); /* padding: must not matter */
	const float dloss = 1.0f / 6; /* six rows are not ignored */

	double *ld = chk_doubles_of(logits, N * VP), wloss[N], wdl[N * VP];
	for (int r = 0; r < N; r++)
		wloss[r] = tg[r] < 0 ? 0 : ref_loss_row(ld + r * VP, tg[r]);
	for (int r = 0; r < N; r++)
		for (int j = 0; j < VP; j++) {
			wdl[r * VP + j] = 0;
			if (tg[r] < 0 || j >= V)
				continue;
			const double h = 1e-6;
			double keep = ld[r * VP + j];
			ld[r * VP + j] = keep + h;
			double up = ref_loss_row(ld + r * VP, tg[r]);
			ld[r * VP + j] = keep - h;
			double dn = ref_loss_row(ld + r * VP, tg[r]);
			ld[r * VP + j] = keep;
			wdl[r * VP + j] = (up - dn) / (2 * h) * dloss;
		}

	float loss1[N], dl1[N * VP];
	run(&be, 1, logits, tg, dloss, loss1, dl1);
	chk_close("one piece: loss per row (ignored row 0)", loss1, wloss, N, 1e-5, 1e-6);
	chk_close("one piece: dlogits (finite differences; padding and ignored row 0)", dl1, wdl,
		  N * VP, 1e-6, 1e-4);
	for (int pieces = 2; pieces <= 4; pieces *= 2) {
		float lossp[N], dlp[N * VP];
		char what[96];
		run(&be, pieces, logits, tg, dloss, lossp, dlp);
		snprintf(what, sizeof what, "%d pieces: same loss as one piece", pieces);
		chk_close_f(what, lossp, loss1, N, 1e-6, 1e-6);
		snprintf(what, sizeof what, "%d pieces: same dlogits as one piece", pieces);
		chk_close_f(what, dlp, dl1, N * VP, 1e-7, 1e-6);
	}

	/* in place, as the fused classifier uses it */
	{
		float *inpl = malloc(N * VP * sizeof *inpl), loss2[N];
		memcpy(inpl, logits, N * VP * sizeof *inpl);
		float mx[N], se[N], tl[N];
		CHK(be.ops->xent_fwd(&be, mx, se, tl, inpl, tg, N, VP, VP, 0, V, &chk_err));
		CHK(be.ops->xent_loss(&be, loss2, mx, se, tl, tg, N, &chk_err));
		CHK(be.ops->xent_bwd(&be, inpl, inpl, tg, mx, se, dloss, N, VP, VP, 0, V, &chk_err));
		ok(memcmp(inpl, dl1, sizeof dl1) == 0, "xent_bwd in place: same bits");
		free(inpl);
	}

	/* a target beyond the true vocabulary (a padding id) is bad data */
	{
		int32_t bad[N] = {0, 40, 0, 0, 0, 0, 0};
		float mx[N], se[N], tl[N];
		gpt_err err = {0};
		int rc = be.ops->xent_fwd(&be, mx, se, tl, logits, bad, N, VP, VP, 0, V, &err);
		ok(rc == GPT_EDATA && strstr(err.msg, "target 40"),
		   "a target in the padding is an error: %s", err.msg);
	}
	free(logits), free(ld);
	gpt_backend_cpu_free(&be);
	return done_testing();
}
