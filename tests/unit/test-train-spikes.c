/* lib/train: the loss-spike window: z-scores against a hand computation,
 * nothing judged before the window is full, the ring keeping only the
 * newest values, thresholds of 0 switching a series off, a window without
 * spread, clearing, and the same decision whatever the ring position. */
#include "train/train.h"
#include "tap.h"

#include <math.h>

static void test_zscore(void)
{
	gpt_spike_window w;
	gpt_err err = {0};
	ok(gpt_spike_window_init(&w, 4, &err) == 0, "a window of 4");
	double v[4] = {2.0, 4.0, 4.0, 6.0}; /* mean 4, population sd sqrt(2) */
	for (int i = 0; i < 3; i++)
		gpt_spike_window_push(&w, v[i], 10 * v[i]);
	is_near(gpt_spike_window_zscore(&w, GPT_SPIKE_LOSS, 100.0), 0.0, 0, "not full: no z-score");
	ok(!gpt_spike_window_check(&w, 1e9, 1e9, 6, 6, NULL, NULL), "not full: nothing is a spike");
	gpt_spike_window_push(&w, v[3], 10 * v[3]);
	double sd = sqrt(2.0);
	is_near(gpt_spike_window_zscore(&w, GPT_SPIKE_LOSS, 4.0 + 3 * sd), 3.0, 1e-12, "loss z-score 3");
	is_near(gpt_spike_window_zscore(&w, GPT_SPIKE_GNORM, 40.0 - 10 * sd), -1.0, 1e-12,
		"grad norm z-score -1 (scale of its own series)");
	double zl, zg;
	ok(gpt_spike_window_check(&w, 4.0 + 7 * sd, 40.0, 6, 6, &zl, &zg), "loss 7 sd above: a spike");
	is_near(zl, 7.0, 1e-12, "its loss z-score");
	is_near(zg, 0.0, 1e-12, "its grad norm z-score");
	ok(!gpt_spike_window_check(&w, 4.0 + 5 * sd, 40.0, 6, 6, NULL, NULL), "5 sd: not a spike at 6");
	ok(!gpt_spike_window_check(&w, 4.0 - 9 * sd, 40.0, 6, 6, NULL, NULL), "a drop is never a spike");
	ok(gpt_spike_window_check(&w, 4.0, 40.0 + 7 * 10 * sd, 6, 6, NULL, NULL), "grad norm spike");
	ok(!gpt_spike_window_check(&w, 4.0, 40.0 + 7 * 10 * sd, 6, 0, NULL, NULL),
	   "a grad norm threshold of 0 checks no grad norm");
	ok(!gpt_spike_window_check(&w, 4.0 + 7 * sd, 40.0, 0, 6, NULL, NULL),
	   "a loss threshold of 0 checks no loss");

	/* the ring: pushing 4 more forgets the first 4 */
	double u[4] = {1.0, 1.0, 3.0, 3.0}; /* mean 2, sd 1 */
	for (int i = 0; i < 4; i++)
		gpt_spike_window_push(&w, u[i], u[i]);
	is_int(w.n, 4, "still 4 values");
	is_near(gpt_spike_window_zscore(&w, GPT_SPIKE_LOSS, 5.0), 3.0, 1e-12, "only the newest 4 count");

	gpt_spike_window_clear(&w);
	is_int(w.n, 0, "cleared");
	ok(!gpt_spike_window_check(&w, 1e9, 1e9, 6, 6, NULL, NULL), "a cleared window judges nothing");

	for (int i = 0; i < 4; i++)
		gpt_spike_window_push(&w, 3.25, 1.0);
	is_near(gpt_spike_window_zscore(&w, GPT_SPIKE_LOSS, 100.0), 0.0, 0,
		"no spread: no z-score rather than an infinite one");
	gpt_spike_window_free(&w);
}

/* The same values through rings at different positions give the same bits. */
static void test_order(void)
{
	gpt_spike_window a, b;
	gpt_err err = {0};
	ok(gpt_spike_window_init(&a, 5, &err) == 0 && gpt_spike_window_init(&b, 5, &err) == 0, "two windows");
	for (int i = 0; i < 3; i++)
		gpt_spike_window_push(&b, 100.0 + i, 100.0 + i); /* b's ring starts elsewhere */
	double x[5] = {2.718281828, 2.71828183, 2.7182818, 2.718281829, 2.71828182};
	for (int i = 0; i < 5; i++) {
		gpt_spike_window_push(&a, x[i], x[i]);
		gpt_spike_window_push(&b, x[i], x[i]);
	}
	double za = gpt_spike_window_zscore(&a, GPT_SPIKE_LOSS, 2.7182819);
	double zb = gpt_spike_window_zscore(&b, GPT_SPIKE_LOSS, 2.7182819);
	ok(za == zb && za != 0, "identical z-scores whatever the ring position (%.17g, %.17g)", za, zb);
	gpt_spike_window_free(&a);
	gpt_spike_window_free(&b);
}

static void test_errors(void)
{
	gpt_spike_window w;
	gpt_err err = {0};
	is_int(gpt_spike_window_init(&w, 1, &err), GPT_EUSAGE, "a window of 1 is refused");
	ok(strstr(err.msg, "Engine.skip_spikes.window") != NULL, "naming the key: %s", err.msg);
	gpt_spike_window_free(&w);
}

int main(void)
{
	test_zscore();
	test_order();
	test_errors();
	return done_testing();
}
