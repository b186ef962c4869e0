/* The steps of one log and the figures of its summary. */
#include "logs.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void gpt_logs_series_init(gpt_logs_series *s)
{
	memset(s, 0, sizeof *s);
}

void gpt_logs_series_free(gpt_logs_series *s)
{
	free(s->step);
	free(s->loss);
	free(s->step_time);
	free(s->tok_card);
	free(s->tok_total);
	free(s->nonfinite);
	free(s->eval_step);
	free(s->eval_loss);
	gpt_logs_series_init(s);
}

static int grow(void **p, int64_t cap, size_t elem, gpt_err *err)
{
	void *q = gpt_realloc(*p, (size_t)cap * elem, "log series", err);
	if (!q)
		return err->code;
	*p = q;
	return 0;
}

/* The step number went back to step: the run was resumed from a checkpoint
 * and does the steps after it again. What the log said of those steps before
 * is dropped, so that they count once, as the resumed run did them. */
static void restart(gpt_logs_series *s, int64_t step)
{
	while (s->n > 0 && s->step[s->n - 1] >= step)
		s->n--;
	/* not only the last: an eval that waited for its step (llm.c's val
	 * loss) may come after evals of the steps dropped */
	int64_t k = 0;
	for (int64_t i = 0; i < s->n_eval; i++)
		if (s->eval_step[i] < step) {
			s->eval_step[k] = s->eval_step[i];
			s->eval_loss[k++] = s->eval_loss[i];
		}
	s->n_eval = k;
	s->restarts++;
}

int gpt_logs_series_add(gpt_logs_series *s, const gpt_logs_rec *rec, gpt_err *err)
{
	if (rec->kind == GPT_LOGS_BROKEN) {
		s->n_unparsed++;
		return 0;
	}
	s->dialects |= 1 << rec->dialect;
	if (rec->kind == GPT_LOGS_CKPT) {
		s->n_ckpt++;
		return 0;
	}
	if (rec->kind == GPT_LOGS_OVERFLOW) {
		s->n_overflow++;
		return 0;
	}
	if (rec->kind == GPT_LOGS_EVAL) {
		if (s->n_eval == s->cap_eval) {
			int64_t cap = s->cap_eval ? 2 * s->cap_eval : 64;
			if (grow((void **)&s->eval_step, cap, sizeof(int64_t), err) ||
			    grow((void **)&s->eval_loss, cap, sizeof(double), err))
				return err->code;
			s->cap_eval = cap;
		}
		s->eval_step[s->n_eval] = rec->step;
		s->eval_loss[s->n_eval++] = rec->loss.v;
		return 0;
	}
	if (rec->kind != GPT_LOGS_STEP)
		return 0;
	s->n_overflow += rec->overflows; /* those a step line reports: MindFormers, Megatron-LM */
	if (rec->step >= 0 && s->n > 0 && s->step[s->n - 1] >= rec->step)
		restart(s, rec->step);
	if (s->n == s->cap) {
		int64_t cap = s->cap ? 2 * s->cap : 1024;
		if (grow((void **)&s->step, cap, sizeof(int64_t), err) ||
		    grow((void **)&s->loss, cap, sizeof(double), err) ||
		    grow((void **)&s->step_time, cap, sizeof(double), err) ||
		    grow((void **)&s->tok_card, cap, sizeof(double), err) ||
		    grow((void **)&s->tok_total, cap, sizeof(double), err) ||
		    grow((void **)&s->nonfinite, cap, 1, err))
			return err->code;
		s->cap = cap;
	}
	int64_t i = s->n++;
	s->step[i] = rec->step;
	s->loss[i] = rec->loss.v;
	s->step_time[i] = rec->step_time.v;
	s->tok_card[i] = rec->tok_card.v;
	s->tok_total[i] = rec->tok_total.v;
	s->nonfinite[i] = isinf(rec->loss.v) || (isnan(rec->loss.v) && rec->loss.txt);
	return 0;
}

int64_t gpt_logs_default_skip(int64_t steps)
{
	if (steps <= 1)
		return 0;
	return (steps + 9) / 10;
}

double gpt_logs_quantile(const double *sorted, int64_t n, double q)
{
	if (n <= 0)
		return NAN;
	double pos = q * (double)(n - 1);
	int64_t lo = (int64_t)floor(pos);
	if (lo >= n - 1)
		return sorted[n - 1];
	double frac = pos - (double)lo;
	return sorted[lo] + (sorted[lo + 1] - sorted[lo]) * frac;
}

/* Moves the k-th smallest of v[0..n) to v[k], with nothing larger before it
 * and nothing smaller after it (quickselect, median-of-three pivot). A full
 * sort of millions of steps was a sixth of the --summary time. */
static void select_kth(double *v, int64_t n, int64_t k)
{
	int64_t lo = 0, hi = n - 1;
	while (hi > lo) {
		double a = v[lo], b = v[lo + (hi - lo) / 2], c = v[hi];
		double pivot = a < b ? (b < c ? b : a < c ? c : a) : (a < c ? a : b < c ? c : b);
		int64_t i = lo, j = hi;
		while (i <= j) {
			while (v[i] < pivot)
				i++;
			while (v[j] > pivot)
				j--;
			if (i <= j) {
				double t = v[i];
				v[i++] = v[j];
				v[j--] = t;
			}
		}
		if (k <= j)
			hi = j;
		else if (k >= i)
			lo = i;
		else
			return;
	}
}

/* gpt_logs_quantile of v[0..n) without sorting it (v is reordered). */
static double quantile_unsorted(double *v, int64_t n, double q)
{
	if (n <= 0)
		return NAN;
	double pos = q * (double)(n - 1);
	int64_t lo = (int64_t)floor(pos);
	if (lo >= n - 1) {
		select_kth(v, n, n - 1);
		return v[n - 1];
	}
	select_kth(v, n, lo);
	double next = v[lo + 1];
	for (int64_t i = lo + 2; i < n; i++)
		next = v[i] < next ? v[i] : next;
	return v[lo] + (next - v[lo]) * (pos - (double)lo);
}

/* p10, median, p90 of the finite values of v[from..n). */
static void quantiles(const double *v, int64_t from, int64_t n, double out[3], double *tmp)
{
	int64_t m = 0;
	for (int64_t i = from; i < n; i++)
		if (isfinite(v[i]))
			tmp[m++] = v[i];
	out[0] = quantile_unsorted(tmp, m, 0.1);
	out[1] = quantile_unsorted(tmp, m, 0.5);
	out[2] = quantile_unsorted(tmp, m, 0.9);
}

int gpt_logs_summarize(const gpt_logs_series *s, int64_t skip, double params, double peak_tflops,
		       gpt_logs_summary *out, gpt_err *err)
{
	memset(out, 0, sizeof *out);
	out->steps = s->n;
	if (skip < 0)
		skip = gpt_logs_default_skip(s->n);
	out->skipped = skip < s->n ? skip : s->n;
	double *tmp = NULL;
	if (s->n > 0 && !(tmp = gpt_malloc((size_t)s->n * sizeof *tmp, "summary", err)))
		return err->code;
	quantiles(s->tok_card, out->skipped, s->n, out->tok_card, tmp);
	quantiles(s->tok_total, out->skipped, s->n, out->tok_total, tmp);
	quantiles(s->step_time, out->skipped, s->n, out->step_time, tmp);
	free(tmp);
	out->loss_first = out->loss_last = out->loss_min = NAN;
	out->loss_min_step = -1;
	for (int64_t i = 0; i < s->n; i++) {
		double l = s->loss[i];
		/* A diverged step is counted, not taken into the loss figures;
		 * an absent loss (NaN without text) is neither. */
		if (!isfinite(l)) {
			out->loss_nonfinite += s->nonfinite[i];
			continue;
		}
		if (isnan(out->loss_first))
			out->loss_first = l;
		out->loss_last = l;
		if (isnan(out->loss_min) || l < out->loss_min) {
			out->loss_min = l;
			out->loss_min_step = s->step[i];
		}
	}
	out->mfu = NAN;
	if (params > 0 && peak_tflops > 0 && isfinite(out->tok_card[1]))
		out->mfu = out->tok_card[1] * 6.0 * params / (peak_tflops * 1e12);
	return 0;
}
