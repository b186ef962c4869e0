/* FleetX log lines: "[2022-07-27 12:40:00,833] [    INFO] - message". */
#include "core.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *level_name(gpt_log_level level)
{
	switch (level) {
	case GPT_LOG_DEBUG: return "DEBUG";
	case GPT_LOG_INFO: return "INFO";
	case GPT_LOG_WARNING: return "WARNING";
	case GPT_LOG_ERROR: return "ERROR";
	}
	return "INFO";
}

/* The colours of FleetX's colorlog set-up. */
static const char *level_color(gpt_log_level level)
{
	switch (level) {
	case GPT_LOG_DEBUG: return "\033[36m";
	case GPT_LOG_INFO: return "\033[32m";
	case GPT_LOG_WARNING: return "\033[33m";
	case GPT_LOG_ERROR: return "\033[31m";
	}
	return "";
}

void gpt_log_init(gpt_log *lg, FILE *fp, gpt_log_level min)
{
	lg->fp = fp;
	lg->min = min;
	lg->write_errno = 0;
	lg->lost = 0;
	const char *nc = getenv("NO_COLOR");
	lg->color = fp && isatty(fileno(fp)) && !(nc && *nc);
}

void gpt_log_header(char *out, size_t size, int64_t t_ms, gpt_log_level level, int color)
{
	time_t secs = (time_t)(t_ms / 1000);
	struct tm tm;
	localtime_r(&secs, &tm);
	char stamp[32];
	strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &tm);
	snprintf(out, size, "%s[%s,%03d] [%8s]%s - ", color ? level_color(level) : "", stamp,
		 (int)(t_ms % 1000), level_name(level), color ? "\033[0m" : "");
}

/* A line fp did not take: counted, and the first failure said once on
 * stderr (unless fp is stderr itself). Lines may come from several threads. */
static void write_failed(gpt_log *lg, int errnum)
{
	__atomic_add_fetch(&lg->lost, 1, __ATOMIC_RELAXED);
	clearerr(lg->fp); /* try the next line afresh: the disk may have room again */
	int none = 0;
	if (!__atomic_compare_exchange_n(&lg->write_errno, &none, errnum, 0, __ATOMIC_RELAXED,
					 __ATOMIC_RELAXED) ||
	    lg->fp == stderr)
		return;
	gpt_log w;
	gpt_log_init(&w, stderr, GPT_LOG_WARNING);
	gpt_log_printf(&w, GPT_LOG_WARNING,
		       "%s: %s: the log lines it cannot take are lost; the run goes on",
		       lg->fp == stdout ? "standard output" : "the log", strerror(errnum));
}

void gpt_log_vprintf(gpt_log *lg, gpt_log_level level, const char *fmt, va_list ap)
{
	if (!lg || !lg->fp || level < lg->min)
		return;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	char head[96];
	gpt_log_header(head, sizeof head, (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000, level,
		       lg->color);
	/* One write per line so that lines from several threads do not interleave. */
	char line[4096];
	int n = snprintf(line, sizeof line, "%s", head);
	n += vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
	if (n > (int)sizeof line - 2)
		n = (int)sizeof line - 2;
	line[n++] = '\n';
	line[n] = '\0';
	errno = 0;
	if (fputs(line, lg->fp) == EOF || fflush(lg->fp) != 0)
		write_failed(lg, errno ? errno : EIO);
}

void gpt_log_printf(gpt_log *lg, gpt_log_level level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	gpt_log_vprintf(lg, level, fmt, ap);
	va_end(ap);
}

int gpt_step_line_format(char *out, size_t size, const gpt_step_line *s)
{
	double speed = s->avg_batch_cost > 0 ? 1.0 / s->avg_batch_cost : 0.0;
	char scale[64] = "";
	if (s->loss_scale > 0)
		snprintf(scale, sizeof scale, "loss_scale: %.9f, ", s->loss_scale);
	return snprintf(out, size,
			"global step %lld, epoch: %lld, batch: %lld, loss: %.9f, "
			"avg_reader_cost: %.5f sec, avg_batch_cost: %.5f sec, speed: %.2f step/s, "
			"ips_total: %.0f tokens/s, ips: %.0f tokens/s, %slearning rate: %.5e",
			(long long)s->step, (long long)s->epoch, (long long)s->batch, s->loss,
			s->avg_reader_cost, s->avg_batch_cost, speed, s->ips_total, s->ips, scale, s->lr);
}

int gpt_eval_line_format(char *out, size_t size, const gpt_eval_line *e)
{
	double speed = e->avg_eval_cost > 0 ? 1.0 / e->avg_eval_cost : 0.0;
	/* exp() of a diverged loss is inf; print it as such rather than overflow noise */
	double ppl = e->loss < 700 ? exp(e->loss) : INFINITY;
	return snprintf(out, size,
			"[eval] global step %lld, epoch: %lld, batch: %lld, loss: %.9f, ppl: %.6f, "
			"avg_eval_cost: %.5f sec, speed: %.2f step/s",
			(long long)e->step, (long long)e->epoch, (long long)e->batch, e->loss, ppl,
			e->avg_eval_cost, speed);
}

int gpt_ckpt_line_format(char *out, size_t size, int64_t step, const char *path, int64_t bytes,
			 double seconds)
{
	return snprintf(out, size, "[checkpoint] global step %lld, path: %s, size: %lld bytes, cost: %.2f sec",
			(long long)step, path, (long long)bytes, seconds);
}

int gpt_amp_skip_line_format(char *out, size_t size, int64_t step, double old_scale, double new_scale)
{
	return snprintf(out, size,
			"[amp] global step %lld, found inf/nan in gradients: skipped the update, "
			"loss scale %g -> %g",
			(long long)step, old_scale, new_scale);
}
