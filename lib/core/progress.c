/* A progress reporter for stderr: a redrawn bar on a terminal, sparse plain
 * lines (or nothing) otherwise. */
#include "core.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void gpt_format_bytes(double bytes, char *out, size_t size)
{
	static const char *units[] = {"B", "KB", "MB", "GB", "TB", "PB"};
	int u = 0;
	while (fabs(bytes) >= 1000.0 && u < 5) {
		bytes /= 1000.0;
		u++;
	}
	if (u == 0)
		snprintf(out, size, "%.0f B", bytes);
	else
		snprintf(out, size, "%.1f %s", bytes, units[u]);
}

void gpt_format_duration(double seconds, char *out, size_t size)
{
	if (!(seconds >= 0) || seconds > 1e9) {
		snprintf(out, size, "?");
		return;
	}
	long s = (long)(seconds + 0.5);
	if (s >= 3600)
		snprintf(out, size, "%ldh%02ldm", s / 3600, (s / 60) % 60);
	else if (s >= 60)
		snprintf(out, size, "%ldm%02lds", s / 60, s % 60);
	else
		snprintf(out, size, "%lds", s);
}

static void format_amount(const gpt_progress *p, double v, char *out, size_t size)
{
	if (p->unit && strcmp(p->unit, "B") == 0)
		gpt_format_bytes(v, out, size);
	else
		snprintf(out, size, "%.0f%s%s", v, p->unit && *p->unit ? " " : "",
			 p->unit ? p->unit : "");
}

void gpt_progress_init(gpt_progress *p, FILE *fp, const char *label, const char *unit, int64_t total)
{
	memset(p, 0, sizeof *p);
	p->fp = fp;
	p->label = label;
	p->unit = unit;
	p->total = total;
	p->items_unit = "";
	p->start_s = gpt_now_s();
	const char *force = getenv("GPT_PROGRESS");
	if (force && *force)
		p->tty = strcmp(force, "0") != 0;
	else
		p->tty = fp && isatty(fileno(fp));
}

void gpt_progress_format(const gpt_progress *p, double now_s, char *out, size_t size)
{
	double el = now_s - p->start_s;
	double rate = el > 0 ? (double)p->done / el : 0;
	char done[32], rate_s[40], eta[24], items[64] = "";
	format_amount(p, (double)p->done, done, sizeof done);
	format_amount(p, rate, rate_s, sizeof rate_s);
	if (p->items > 0)
		snprintf(items, sizeof items, ", %lld %s", (long long)p->items, p->items_unit);
	int n = 0;
	if (p->total > 0) {
		double f = (double)p->done / (double)p->total;
		if (f > 1)
			f = 1;
		char bar[21];
		int fill = (int)(f * 20);
		for (int i = 0; i < 20; i++)
			bar[i] = i < fill ? '#' : '.';
		bar[20] = '\0';
		if (rate > 0)
			gpt_format_duration((double)(p->total - p->done) / rate, eta, sizeof eta);
		else
			snprintf(eta, sizeof eta, "?");
		n = snprintf(out, size, "%s [%s] %3.0f%% %s%s, %s/s, ETA %s", p->label ? p->label : "",
			     bar, f * 100, done, items, rate_s, eta);
	} else {
		n = snprintf(out, size, "%s %s%s, %s/s", p->label ? p->label : "", done, items, rate_s);
	}
	(void)n;
}

static void draw(gpt_progress *p, double now, int final)
{
	char line[256];
	gpt_progress_format(p, now, line, sizeof line);
	if (p->tty)
		fprintf(p->fp, "\r\033[K%s%s", line, final ? "\n" : "");
	else
		fprintf(p->fp, "%s\n", line);
	fflush(p->fp);
	p->last_draw_s = now;
	p->drawn = 1;
}

void gpt_progress_update(gpt_progress *p, int64_t done, int64_t items)
{
	p->done = done;
	p->items = items;
	if (!p->fp)
		return;
	double now = gpt_now_s();
	if (p->tty) {
		if (now - p->last_draw_s >= 0.1)
			draw(p, now, 0);
	} else if (p->plain_interval_s > 0 && now - p->last_draw_s >= p->plain_interval_s &&
		   now - p->start_s >= p->plain_interval_s) {
		draw(p, now, 0);
	}
}

void gpt_progress_finish(gpt_progress *p)
{
	if (p->fp && (p->tty || (p->plain_interval_s > 0 && p->drawn)))
		draw(p, gpt_now_s(), 1);
}
