/* Monotonic clock and accumulating stopwatches. */
#include "core.h"

#include <time.h>

uint64_t gpt_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

double gpt_now_s(void)
{
	return (double)gpt_now_ns() * 1e-9;
}

void gpt_timer_start(gpt_timer *t)
{
	t->start_ns = gpt_now_ns();
}

void gpt_timer_stop(gpt_timer *t)
{
	if (!t->start_ns)
		return;
	t->total_ns += gpt_now_ns() - t->start_ns;
	t->start_ns = 0;
	t->count++;
}

void gpt_timer_reset(gpt_timer *t)
{
	t->start_ns = t->total_ns = t->count = 0;
}

double gpt_timer_seconds(const gpt_timer *t)
{
	return (double)t->total_ns * 1e-9;
}

double gpt_timer_mean(const gpt_timer *t)
{
	return t->count ? gpt_timer_seconds(t) / (double)t->count : 0.0;
}
