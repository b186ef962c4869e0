/* Dynamic loss scaling: back off on overflow, grow after a run of good steps. */
#include "train/train.h"

#include <math.h>

void gpt_loss_scaler_init(gpt_loss_scaler *ls, double scale, int dynamic)
{
	*ls = (gpt_loss_scaler){
		.scale = scale,
		.dynamic = dynamic,
		.incr_ratio = 2.0,
		.decr_ratio = 0.5,
		.incr_every_n_steps = 1000,
		.decr_every_n_nan_or_inf = 2,
		.min_scale = 1.0,
	};
}

int gpt_loss_scaler_check(const gpt_loss_scaler *ls, gpt_err *err)
{
	if (!(ls->scale > 0) || !isfinite(ls->scale))
		return gpt_err_set(err, GPT_EUSAGE, "Engine.mix_precision.scale_loss: expected a positive number, found %g",
				   ls->scale);
	if (!(ls->incr_ratio > 1))
		return gpt_err_set(err, GPT_EUSAGE, "loss scaler: incr_ratio must be above 1, found %g", ls->incr_ratio);
	if (!(ls->decr_ratio > 0 && ls->decr_ratio < 1))
		return gpt_err_set(err, GPT_EUSAGE, "loss scaler: decr_ratio must be in (0, 1), found %g", ls->decr_ratio);
	if (ls->incr_every_n_steps < 1 || ls->decr_every_n_nan_or_inf < 1)
		return gpt_err_set(err, GPT_EUSAGE, "loss scaler: incr_every_n_steps and decr_every_n_nan_or_inf must be at least 1");
	return 0;
}

int gpt_loss_scaler_update(gpt_loss_scaler *ls, int found_inf)
{
	if (!ls->dynamic)
		return found_inf != 0;
	if (found_inf) {
		ls->good_steps = 0;
		if (++ls->bad_steps >= ls->decr_every_n_nan_or_inf) {
			ls->scale *= ls->decr_ratio;
			if (ls->scale < ls->min_scale)
				ls->scale = ls->min_scale;
			ls->bad_steps = 0;
		}
		return 1;
	}
	ls->bad_steps = 0;
	if (++ls->good_steps >= ls->incr_every_n_steps) {
		double next = ls->scale * ls->incr_ratio;
		if (isfinite(next))
			ls->scale = next;
		ls->good_steps = 0;
	}
	return 0;
}
