/* Learning-rate schedules: linear warmup, then a cosine or linear decay to
 * a floor, or a constant rate. */
#include "train/train.h"

#include <math.h>
#include <string.h>

int gpt_lr_check(const gpt_lr_schedule *s, gpt_err *err)
{
	if (!(s->max_lr >= 0) || !isfinite(s->max_lr))
		return gpt_err_set(err, GPT_EUSAGE, "Optimizer.lr.max_lr: expected a number >= 0, found %g", s->max_lr);
	/* Constant never reaches min_lr; the decays run down to it. */
	if (!(s->min_lr >= 0) || (s->min_lr > s->max_lr && s->kind != GPT_LR_CONSTANT))
		return gpt_err_set(err, GPT_EUSAGE, "Optimizer.lr.min_lr: expected a number between 0 and max_lr (%g), found %g",
				   s->max_lr, s->min_lr);
	if (s->decay_steps <= 0)
		return gpt_err_set(err, GPT_EUSAGE, "Optimizer.lr.decay_steps: expected a positive number of steps, found %lld",
				   (long long)s->decay_steps);
	if (!(s->warmup >= 0 && s->warmup <= (double)s->decay_steps))
		return gpt_err_set(err, GPT_EUSAGE,
				   "Optimizer.lr.warmup_steps: expected 0 to decay_steps (%lld) warm-up steps, found %g",
				   (long long)s->decay_steps, s->warmup);
	return 0;
}

double gpt_lr_at(const gpt_lr_schedule *s, int64_t step)
{
	double warmup = s->warmup;
	double t = (double)step;
	if (warmup > 0 && t <= warmup)
		return s->max_lr * t / warmup;
	if (s->kind == GPT_LR_CONSTANT)
		return s->max_lr;
	if (step > s->decay_steps)
		return s->min_lr;
	double ratio = (t - warmup) / ((double)s->decay_steps - warmup);
	double coeff = s->kind == GPT_LR_LINEAR ? 1.0 - ratio : 0.5 * (cos(M_PI * ratio) + 1.0);
	return s->min_lr + coeff * (s->max_lr - s->min_lr);
}

int gpt_lr_kind_parse(const char *name)
{
	static const char *const names[] = {"CosineAnnealingWithWarmupDecay", "LinearDecayWithWarmup",
					    "Constant"};
	for (int i = 0; i < 3; i++)
		if (strcmp(name, names[i]) == 0)
			return i;
	return -1;
}
