/* Dropout with counter-based masks: the backward regenerates the forward's
 * mask from the same coordinates instead of storing it. */
#include "cpu/kernels.h"

#include <string.h>

int gpt_cpu_dropout_check(const char *op, const gpt_dropout *d, gpt_err *err)
{
	if (!d)
		return 0;
	if (!(d->p >= 0.0f && d->p < 1.0f))
		return gpt_err_set(err, GPT_EINTERNAL,
				   "%s: dropout probability %g is outside [0, 1)", op, (double)d->p);
	if (d->sample0 < 0 || d->feature0 < 0 || d->t0 < 0)
		return gpt_err_set(err, GPT_EINTERNAL,
				   "%s: negative dropout offset (sample0 %lld, feature0 %lld, t0 %lld)", op,
				   (long long)d->sample0, (long long)d->feature0, (long long)d->t0);
	if (d->key.layer >= (1u << 24) || d->key.site >= 256u)
		return gpt_err_set(err, GPT_EINTERNAL,
				   "%s: dropout layer %u or site %u out of range (< 2^24, < 256)",
				   op, d->key.layer, d->key.site);
	return 0;
}

/* Both directions are the same map: y = x * mask / (1 - p). */
static int apply(gpt_backend *be, const char *op, float *out, const float *inp, int64_t B,
		 int64_t T, int64_t F, const gpt_dropout *d, gpt_err *err)
{
	int rc = gpt_cpu_check_sizes(op, err, 3, B, T, F);
	if (!rc)
		rc = gpt_cpu_dropout_check(op, d, err);
	if (rc)
		return rc;
	if (!d)
		return gpt_err_set(err, GPT_EINTERNAL, "%s: no dropout site given", op);
	if (d->p == 0.0f) {
		if (out != inp)
			memmove(out, inp, (size_t)(B * T * F) * sizeof *out);
		return 0;
	}
	uint32_t thr = gpt_dropout_threshold(d->p);
	float scale = gpt_dropout_scale(d->p);
	#pragma omp parallel for num_threads(be->threads) schedule(static) if (B * T * F > 4096)
	for (int64_t r = 0; r < B * T; r++) {
		int64_t b = r / T, t = r % T;
		gpt_cpu_dropout_row(out + r * F, inp + r * F, F, d, thr, scale, d->sample0 + b, d->t0 + t,
				    d->feature0);
	}
	return 0;
}

int gpt_cpu_dropout_fwd(gpt_backend *be, void *out, const void *inp, int64_t B, int64_t T,
			int64_t F, const gpt_dropout *d, gpt_err *err)
{
	return apply(be, "dropout_fwd", out, inp, B, T, F, d, err);
}

int gpt_cpu_dropout_bwd(gpt_backend *be, void *dinp, const void *dout, int64_t B, int64_t T,
			int64_t F, const gpt_dropout *d, gpt_err *err)
{
	return apply(be, "dropout_bwd", dinp, dout, B, T, F, d, err);
}
