/* lib/train: the learning-rate schedule and the loss scaler. */
#include "train/train.h"
#include "tap.h"

#include <math.h>

int main(void)
{
	gpt_lr_schedule s = {.max_lr = 1e-4, .min_lr = 1e-5, .warmup = 100, .decay_steps = 10000};
	gpt_err err = {0};
	ok(gpt_lr_check(&s, &err) == 0, "a valid schedule");
	is_near(gpt_lr_at(&s, 0), 0, 0, "lr 0 before the first update");
	is_near(gpt_lr_at(&s, 1), 1e-6, 1e-18, "warmup: 1/100 of max_lr after 1 of 100 warmup steps");
	is_near(gpt_lr_at(&s, 100), 1e-4, 1e-18, "max_lr at the end of warmup");
	is_near(gpt_lr_at(&s, 5050), 5.5e-5, 1e-12, "halfway through the decay: the midpoint");
	is_near(gpt_lr_at(&s, 10000), 1e-5, 1e-15, "min_lr at decay_steps");
	is_near(gpt_lr_at(&s, 20000), 1e-5, 0, "min_lr after");
	int mono = 1;
	for (int64_t t = 101; t <= 10000; t++)
		mono &= gpt_lr_at(&s, t) <= gpt_lr_at(&s, t - 1);
	ok(mono, "non-increasing after warmup");
	gpt_lr_schedule nowarm = {.max_lr = 1, .min_lr = 0, .warmup = 0, .decay_steps = 10};
	is_near(gpt_lr_at(&nowarm, 0), 1, 1e-15, "no warmup: max_lr at once");
	gpt_lr_schedule frac = {.max_lr = 1e-3, .min_lr = 1e-4, .warmup = 0.33 * 20, .decay_steps = 20};
	is_near(gpt_lr_at(&frac, 6), 1e-3 * 6 / 6.6, 1e-15, "a warm-up of 6.6 steps is not rounded (FleetX)");
	gpt_lr_schedule lin = {.kind = GPT_LR_LINEAR, .max_lr = 1, .min_lr = 0.1, .warmup = 10,
			       .decay_steps = 100};
	is_near(gpt_lr_at(&lin, 5), 0.5, 1e-15, "linear: the same warm-up");
	is_near(gpt_lr_at(&lin, 10), 1, 1e-15, "linear: max_lr at its end");
	is_near(gpt_lr_at(&lin, 55), 0.55, 1e-15, "linear: halfway down to min_lr halfway through");
	is_near(gpt_lr_at(&lin, 100), 0.1, 1e-15, "linear: min_lr at decay_steps");
	is_near(gpt_lr_at(&lin, 300), 0.1, 0, "linear: min_lr after");
	gpt_lr_schedule con = {.kind = GPT_LR_CONSTANT, .max_lr = 1, .min_lr = 0.1, .warmup = 10,
			       .decay_steps = 100};
	is_near(gpt_lr_at(&con, 5), 0.5, 1e-15, "constant: the same warm-up");
	ok(gpt_lr_at(&con, 10) == 1 && gpt_lr_at(&con, 100) == 1 && gpt_lr_at(&con, 1000) == 1,
	   "constant: max_lr from then on");
	ok(gpt_lr_kind_parse("LinearDecayWithWarmup") == GPT_LR_LINEAR && gpt_lr_kind_parse("Constant") == GPT_LR_CONSTANT &&
	   gpt_lr_kind_parse("CosineAnnealingWithWarmupDecay") == GPT_LR_COSINE && gpt_lr_kind_parse("cosine") == -1,
	   "the names of Optimizer.lr.name");
	gpt_lr_schedule over = frac;
	over.warmup = 20.5;
	ok(gpt_lr_check(&over, &err) == GPT_EUSAGE && strstr(err.msg, "warmup_steps"),
	   "a warm-up past decay_steps is refused: %s", err.msg);
	s.min_lr = 1;
	ok(gpt_lr_check(&s, &err) == GPT_EUSAGE && strstr(err.msg, "min_lr"), "min_lr above max_lr: %s", err.msg);
	s.kind = GPT_LR_LINEAR;
	ok(gpt_lr_check(&s, &err) == GPT_EUSAGE, "min_lr above max_lr: refused for the linear decay too");
	s.kind = GPT_LR_CONSTANT;
	ok(gpt_lr_check(&s, &err) == 0 && gpt_lr_at(&s, 1000) == s.max_lr,
	   "Constant never uses min_lr: one above max_lr is no error");
	s.min_lr = -1;
	ok(gpt_lr_check(&s, &err) == GPT_EUSAGE, "a negative min_lr is refused even for Constant");

	gpt_loss_scaler ls;
	gpt_loss_scaler_init(&ls, 32768, 1);
	ok(gpt_loss_scaler_check(&ls, &err) == 0, "default scaler is valid");
	is_int(gpt_loss_scaler_update(&ls, 1), 1, "an overflow skips the step");
	is_near(ls.scale, 32768, 0, "one overflow does not back off yet (Paddle: after 2)");
	gpt_loss_scaler_update(&ls, 1);
	is_near(ls.scale, 16384, 0, "two in a row halve the scale");
	ls.incr_every_n_steps = 3;
	for (int i = 0; i < 3; i++)
		is_int(gpt_loss_scaler_update(&ls, 0), 0, "a good step is taken");
	is_near(ls.scale, 32768, 0, "growth after the interval");
	gpt_loss_scaler fixed;
	gpt_loss_scaler_init(&fixed, 1024, 0);
	ok(gpt_loss_scaler_update(&fixed, 1) == 1 && fixed.scale == 1024, "static scale: skip, keep the scale");
	fixed.scale = NAN;
	ok(gpt_loss_scaler_check(&fixed, &err) != 0, "a NaN scale is refused");
	return done_testing();
}
