/* A standalone SVG of loss and tokens/s against step, one line per log. */
#include "logs.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define W 960
#define PANEL_H 320
#define ML 90  /* left margin: y tick labels */
#define MR 30
#define MT 50  /* top margin of each panel: title */
#define MB 50  /* bottom margin: x tick labels */
#define MAX_POINTS 4000

static const char *const colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
				     "#9467bd", "#8c564b", "#e377c2", "#17becf"};

typedef struct range {
	double lo, hi;
} range;

static void xml_text(FILE *fp, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '&': fputs("&amp;", fp); break;
		case '<': fputs("&lt;", fp); break;
		case '>': fputs("&gt;", fp); break;
		case '"': fputs("&quot;", fp); break;
		default:
			/* Control bytes are not allowed in XML 1.0. */
			fputc((unsigned char)*s < 0x20 ? '?' : *s, fp);
		}
	}
}

/* A tick spacing of 1, 2 or 5 times a power of ten giving about n ticks. */
static double nice_step(double span, int n)
{
	if (!(span > 0))
		return 1;
	double raw = span / n, p = pow(10, floor(log10(raw))), f = raw / p;
	return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

static range pad(range r)
{
	if (!isfinite(r.lo))
		return (range){0, 1};
	if (r.hi - r.lo <= 0) {
		double d = fabs(r.lo) > 0 ? fabs(r.lo) * 0.05 : 1;
		return (range){r.lo - d, r.hi + d};
	}
	double d = (r.hi - r.lo) * 0.05;
	return (range){r.lo - d, r.hi + d};
}

/* The values panel p plots for series s: loss, or tokens/s (per card when
 * the log gives it, else all cards). */
static const double *values(const gpt_logs_series *s, int p, int *total)
{
	*total = 0;
	if (p == 0)
		return s->loss;
	for (int64_t i = 0; i < s->n; i++)
		if (isfinite(s->tok_card[i]))
			return s->tok_card;
	*total = 1;
	return s->tok_total;
}

static void panel(FILE *fp, int p, int y0, const gpt_logs_series *const *ser, int n)
{
	int top = y0 + p * PANEL_H, pw = W - ML - MR, ph = PANEL_H - MT - MB;
	range x = {INFINITY, -INFINITY}, y = {INFINITY, -INFINITY};
	int any_total = 0, any_card = 0;
	for (int k = 0; k < n; k++) {
		int total;
		const double *v = values(ser[k], p, &total);
		for (int64_t i = 0; i < ser[k]->n; i++) {
			if (!isfinite(v[i]))
				continue;
			if (p == 1 && total)
				any_total = 1;
			else if (p == 1)
				any_card = 1;
			double sx = (double)ser[k]->step[i];
			x.lo = fmin(x.lo, sx), x.hi = fmax(x.hi, sx);
			y.lo = fmin(y.lo, v[i]), y.hi = fmax(y.hi, v[i]);
		}
	}
	const char *title = p == 0 ? "loss" : any_card && any_total ? "tokens/s (per card; dashed: all cards)"
					  : any_total ? "tokens/s (all cards)" : "tokens/s per card";
	fprintf(fp, "<text x=\"%d\" y=\"%d\" font-size=\"18\" font-weight=\"bold\">%s</text>\n", ML,
		top + 30, title);
	fprintf(fp, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#444\"/>\n",
		ML, top + MT, pw, ph);
	if (!isfinite(x.lo)) {
		fprintf(fp, "<text x=\"%d\" y=\"%d\" font-size=\"16\" text-anchor=\"middle\" "
			    "fill=\"#666\">no data</text>\n", ML + pw / 2, top + MT + ph / 2);
		return;
	}
	x = pad(x);
	y = pad(y);
	double xs = pw / (x.hi - x.lo), ys = ph / (y.hi - y.lo);
#define PX(v) (ML + ((v) - x.lo) * xs)
#define PY(v) (top + MT + ph - ((v) - y.lo) * ys)
	double dx = nice_step(x.hi - x.lo, 8), dy = nice_step(y.hi - y.lo, 6);
	for (double t = ceil(x.lo / dx) * dx; t <= x.hi; t += dx) {
		fprintf(fp, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#ddd\"/>\n",
			PX(t), top + MT, PX(t), top + MT + ph);
		fprintf(fp, "<text x=\"%.1f\" y=\"%d\" font-size=\"13\" text-anchor=\"middle\">%.10g</text>\n",
			PX(t), top + MT + ph + 18, fabs(t) < dx * 1e-9 ? 0.0 : t);
	}
	for (double t = ceil(y.lo / dy) * dy; t <= y.hi; t += dy) {
		fprintf(fp, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", ML,
			PY(t), ML + pw, PY(t));
		double v = fabs(t) < dy * 1e-9 ? 0.0 : t;
		double big = fmax(fabs(y.lo), fabs(y.hi)); /* one unit for the whole axis */
		const char *unit = big >= 1e6 ? "M" : big >= 1e4 ? "k" : "";
		fprintf(fp, "<text x=\"%d\" y=\"%.1f\" font-size=\"13\" text-anchor=\"end\">%.6g%s</text>\n",
			ML - 6, PY(t) + 4, *unit == 'M' ? v / 1e6 : *unit == 'k' ? v / 1e3 : v, unit);
	}
	fprintf(fp, "<text x=\"%d\" y=\"%d\" font-size=\"14\" text-anchor=\"middle\">step</text>\n",
		ML + pw / 2, top + MT + ph + 40);
	for (int k = 0; k < n; k++) {
		int total;
		const double *v = values(ser[k], p, &total);
		int64_t stride = ser[k]->n / MAX_POINTS + 1;
		const char *color = colors[k % 8];
		int open = 0;
		for (int64_t i = 0; i < ser[k]->n; i++) {
			if (i % stride && i != ser[k]->n - 1)
				continue;
			if (!isfinite(v[i])) {
				if (open)
					fputs("\"/>\n", fp);
				open = 0;
				continue;
			}
			if (!open)
				fprintf(fp, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\"%s points=\"",
					color, total && any_card ? " stroke-dasharray=\"6,3\"" : "");
			fprintf(fp, "%s%.1f,%.1f", open ? " " : "", PX((double)ser[k]->step[i]), PY(v[i]));
			open = 1;
		}
		if (open)
			fputs("\"/>\n", fp);
	}
#undef PX
#undef PY
}

#define LEGEND_COLS 2

static int legend_h(int n)
{
	return 16 + 20 * ((n + LEGEND_COLS - 1) / LEGEND_COLS);
}

/* Names without the directory part they all share, and at most 50 bytes
 * (keeping the end, where workerlog.N is). */
static void legend(FILE *fp, const char *const *names, int n)
{
	size_t common = 0;
	if (n > 1) {
		const char *a = names[0];
		size_t len = strlen(a);
		for (int k = 1; k < n; k++) {
			size_t i = 0;
			while (i < len && names[k][i] == a[i])
				i++;
			len = i;
		}
		while (len > 0 && a[len - 1] != '/')
			len--;
		common = len;
	}
	for (int k = 0; k < n; k++) {
		const char *name = names[k] + common;
		size_t len = strlen(name);
		int x = ML + (k % LEGEND_COLS) * ((W - ML - MR) / LEGEND_COLS), y = 24 + 20 * (k / LEGEND_COLS);
		fprintf(fp, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"3\"/>\n",
			x, y - 5, x + 24, y - 5, colors[k % 8]);
		fprintf(fp, "<text x=\"%d\" y=\"%d\" font-size=\"13\">%s", x + 30, y, len > 50 ? "..." : "");
		xml_text(fp, len > 50 ? name + len - 47 : name);
		fputs("</text>\n", fp);
	}
}

int gpt_logs_plot_svg(const char *path, const gpt_logs_series *const *series,
		      const char *const *names, int n, gpt_err *err)
{
	gpt_afile af;
	if (gpt_afile_open(&af, path, err)) {
		/* An output that cannot be created is a write failure, not a missing input. */
		err->code = GPT_EIO;
		return gpt_err_prefix(err, "--plot: cannot write %s", path);
	}
	FILE *fp = af.fp;
	fprintf(fp, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		    "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
		    "viewBox=\"0 0 %d %d\" font-family=\"DejaVu Sans, Arial, sans-serif\">\n"
		    "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
		    W, legend_h(n) + 2 * PANEL_H, W, legend_h(n) + 2 * PANEL_H);
	legend(fp, names, n);
	for (int p = 0; p < 2; p++)
		panel(fp, p, legend_h(n), series, n);
	fputs("</svg>\n", fp);
	return gpt_afile_commit(&af, err);
}
