/* The moving window of recent losses and gradient norms that loss-spike
 * detection (Engine.skip_spikes) judges a step against. */
#include "train/train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int gpt_spike_window_init(gpt_spike_window *w, int64_t cap, gpt_err *err)
{
	memset(w, 0, sizeof *w);
	if (cap < 2)
		return gpt_err_set(err, GPT_EUSAGE,
				   "Engine.skip_spikes.window: expected at least 2 steps, found %lld",
				   (long long)cap);
	w->loss = gpt_calloc((size_t)cap, sizeof *w->loss, "spike window", err);
	w->gnorm = w->loss ? gpt_calloc((size_t)cap, sizeof *w->gnorm, "spike window", err) : NULL;
	if (!w->gnorm) {
		gpt_spike_window_free(w);
		return GPT_EINTERNAL;
	}
	w->cap = cap;
	return 0;
}

void gpt_spike_window_free(gpt_spike_window *w)
{
	free(w->loss);
	free(w->gnorm);
	memset(w, 0, sizeof *w);
}

void gpt_spike_window_clear(gpt_spike_window *w)
{
	w->n = 0;
	w->next = 0;
}

void gpt_spike_window_push(gpt_spike_window *w, double loss, double gnorm)
{
	w->loss[w->next] = loss;
	w->gnorm[w->next] = gnorm;
	w->next = (w->next + 1) % w->cap;
	if (w->n < w->cap)
		w->n++;
}

double gpt_spike_window_zscore(const gpt_spike_window *w, int which, double x)
{
	if (w->n < w->cap)
		return 0;
	const double *v = which == GPT_SPIKE_GNORM ? w->gnorm : w->loss;
	/* oldest first: the same order on every rank and after any number of
	 * wraps; two passes, as the values sit close to their mean */
	double sum = 0;
	for (int64_t i = 0; i < w->n; i++)
		sum += v[(w->next + i) % w->cap];
	double mean = sum / (double)w->n, ss = 0;
	for (int64_t i = 0; i < w->n; i++) {
		double d = v[(w->next + i) % w->cap] - mean;
		ss += d * d;
	}
	double sd = sqrt(ss / (double)w->n);
	if (!(sd > 1e-9 * fabs(mean)))
		return 0;
	return (x - mean) / sd;
}

int gpt_spike_window_check(const gpt_spike_window *w, double loss, double gnorm,
			   double loss_threshold, double gnorm_threshold, double *zl, double *zg)
{
	double a = gpt_spike_window_zscore(w, GPT_SPIKE_LOSS, loss);
	double b = gpt_spike_window_zscore(w, GPT_SPIKE_GNORM, gnorm);
	if (zl)
		*zl = a;
	if (zg)
		*zg = b;
	return (loss_threshold > 0 && a > loss_threshold) || (gnorm_threshold > 0 && b > gnorm_threshold);
}
