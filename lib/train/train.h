/* lib/train: the pieces of the training loop that do not touch tensors
 * directly: the learning-rate schedule and the dynamic loss scaler. (The
 * optimizer, sharding stages, pipeline schedules and the loop itself build
 * on the model and the backend ops.) */
#ifndef GPT_TRAIN_H
#define GPT_TRAIN_H

#include "core/core.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* FleetX's CosineAnnealingWithWarmupDecay: a linear warmup from 0 to max_lr
 * over warmup_rate x decay_steps steps, then a half cosine from max_lr down
 * to min_lr at decay_steps, then min_lr. */
typedef struct gpt_lr_schedule {
	double max_lr;
	double min_lr;
	double warmup_rate;   /* fraction of decay_steps spent warming up */
	int64_t decay_steps;
} gpt_lr_schedule;

/* Checks the numbers (0 <= min_lr <= max_lr, 0 <= warmup_rate <= 1,
 * decay_steps > 0); the message names the offending field. */
int gpt_lr_check(const gpt_lr_schedule *s, gpt_err *err);
/* The learning rate for the update made at `step` (1 for the first update). */
double gpt_lr_at(const gpt_lr_schedule *s, int64_t step);

/* Dynamic loss scaling as in Paddle's AMP (and torch.cuda.amp.GradScaler):
 * on an overflow the step is skipped and, after decr_every_n_nan_or_inf
 * overflowing steps in a row, the scale is multiplied by decr_ratio; after
 * incr_every_n_steps good steps in a row it is multiplied by incr_ratio.
 * With dynamic off the scale never changes (steps with an overflow are still
 * skipped). */
typedef struct gpt_loss_scaler {
	double scale;
	int dynamic;
	double incr_ratio;            /* > 1 */
	double decr_ratio;            /* in (0, 1) */
	int64_t incr_every_n_steps;   /* growth interval */
	int64_t decr_every_n_nan_or_inf;
	double min_scale;             /* never below this (1.0) */
	/* state */
	int64_t good_steps;
	int64_t bad_steps;
} gpt_loss_scaler;

/* Paddle's defaults: scale 32768, x2 after 1000 good steps, x0.5 after 2 bad. */
void gpt_loss_scaler_init(gpt_loss_scaler *ls, double scale, int dynamic);
int gpt_loss_scaler_check(const gpt_loss_scaler *ls, gpt_err *err);
/* Records one step's verdict; returns 1 when the update must be skipped
 * (found_inf), 0 otherwise. The new scale is in ls->scale. */
int gpt_loss_scaler_update(gpt_loss_scaler *ls, int found_inf);

#ifdef __cplusplus
}
#endif

#endif
