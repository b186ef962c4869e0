/* lib/logs: reading training logs back into numbers.
 *
 * gpt-logparse turns the logs that trainers write (gptkit's own FleetX-style
 * lines, PaddleFleetX, the PaddleNLP Trainer, Megatron-LM, llm.c and
 * MindFormers) into per-step rows, per-log summaries (tokens/s, step time,
 * loss, MFU) and an SVG plot. The module has four layers, each usable alone:
 *
 *   gpt_logs_parser  one line in, one record out (PCRE2 JIT patterns behind a
 *                    memmem prefilter, so unknown lines cost almost nothing);
 *   gpt_logs_reader  lines out of a file, a .gz/.xz/.zst file, or stdin, with
 *                    big buffered reads, a cap on the line length (longer lines
 *                    are skipped and counted, never held whole in memory) and a
 *                    tail -f mode;
 *   gpt_logs_series  the steps of one log kept for summaries and plots;
 *   gpt_logs_run     the whole command: inputs, rows, summary, plot.
 *
 * Numbers that a log did not give are NaN (and step numbers -1); writers show
 * them as empty fields (TSV, CSV) or null (JSON). A nan or inf the log did
 * give keeps its text (gpt_logs_num.txt), so it is printed as the log wrote
 * it (null in JSON, which has neither) and counted in the summary.
 */
#ifndef GPT_LOGS_H
#define GPT_LOGS_H

#include "core/core.h"

#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- one line ---------------------------------------------------------- */

typedef enum gpt_logs_kind {
	GPT_LOGS_NONE = 0,
	GPT_LOGS_STEP,     /* a training step */
	GPT_LOGS_EVAL,     /* an evaluation result */
	GPT_LOGS_CKPT,     /* a checkpoint was saved */
	GPT_LOGS_OVERFLOW, /* fp16 loss-scale overflow: the update was skipped */
	GPT_LOGS_BROKEN,   /* a record that other output ran into: not used */
} gpt_logs_kind;

typedef enum gpt_logs_dialect {
	GPT_LOGS_GPTKIT = 1, /* gptkit and PaddleFleetX ("fleetx"): "global step N, ..." */
	GPT_LOGS_PADDLENLP,  /* PaddleNLP Trainer: "loss: .., global_step: .." */
	GPT_LOGS_MEGATRON,   /* Megatron-LM: "iteration N/ M | ..." */
	GPT_LOGS_LLMC,       /* llm.c: "step N/M | ..." and "step N: train loss .." */
	GPT_LOGS_MINDFORMERS, /* MindFormers: "{ Epoch:[E/N], step:[S/M], loss: .." */
} gpt_logs_dialect;

/* "fleetx" (gptkit writes FleetX lines), "paddlenlp", "megatron", "llm.c",
 * "mindformers". */
const char *gpt_logs_dialect_name(gpt_logs_dialect d);

/* A number as logged: its value (NaN when absent) and, when it was copied
 * from the line unchanged, its text there, so that writers can repeat it with
 * the precision the trainer chose. txt points into the line and is valid only
 * until the next line is read. */
typedef struct gpt_logs_num {
	double v;
	const char *txt; /* NULL when absent or derived (a unit conversion) */
	int len;
} gpt_logs_num;

typedef struct gpt_logs_rec {
	gpt_logs_kind kind;
	gpt_logs_dialect dialect;
	int64_t step;           /* -1 when the line does not say (see gpt_logs_run) */
	int64_t total_steps;    /* -1 unless the line says ("step 5/100") */
	int64_t epoch, batch;   /* PaddleFleetX's "[train] epoch: E, batch: B" (or
				 * "step: [B/N]"; B counts from 0 in each epoch),
				 * which gives no step: -1 otherwise */
	gpt_logs_num loss;      /* train loss, or the eval loss for GPT_LOGS_EVAL */
	gpt_logs_num lr;
	gpt_logs_num step_time; /* seconds per step */
	gpt_logs_num tok_card;  /* tokens/s per card */
	gpt_logs_num tok_total; /* tokens/s over all cards */
	gpt_logs_num ppl;       /* eval perplexity */
	gpt_logs_num cost;      /* seconds: checkpoint save or eval time */
	double interval_s;      /* PaddleNLP: seconds over the logging interval */
	double step_rate;       /* PaddleNLP: steps/s over the logging interval */
	const char *path;       /* checkpoint directory (into the line) */
	int path_len;
	int64_t bytes;          /* checkpoint size, -1 when not given */
	double scale_from, scale_to; /* loss scale before and after an overflow */
	int64_t overflows;      /* steps of a step record skipped for a loss-scale overflow:
				 * MindFormers' "overflow cond: True", Megatron-LM's
				 * "number of skipped iterations: K"; 0 where the line
				 * does not say */
} gpt_logs_rec;

typedef struct gpt_logs_parser gpt_logs_parser;

/* Compiles the patterns (JIT where PCRE2 has it). NULL on failure, with err set. */
gpt_logs_parser *gpt_logs_parser_new(gpt_err *err);
void gpt_logs_parser_free(gpt_logs_parser *p);

/* Parses one line (without its newline; line[len] must be readable and is
 * best '\0'). Returns 1 and fills rec when the line is a record of a known
 * dialect, 0 when it is not: rec is then left with kind GPT_LOGS_NONE, or
 * GPT_LOGS_BROKEN (and its dialect) when the line holds a record that other
 * output ran into, as where several processes write one log: the start of
 * another line or record among its fields, a number cut short ("loss:
 * 10.95[2026-..."), a PaddleNLP key twice. Such a line is no record: its
 * fields could be any mix of two. A line cut where two fields meet cannot be
 * told from a whole one. Any bytes are safe: binary data is simply not
 * recognised. */
int gpt_logs_parse_line(gpt_logs_parser *p, const char *line, size_t len, gpt_logs_rec *rec);

/* ---- reading lines ----------------------------------------------------- */

typedef enum gpt_logs_read_status {
	GPT_LOGS_LINE = 1,  /* a line is ready */
	GPT_LOGS_END = 0,   /* end of input */
	GPT_LOGS_AGAIN = 2, /* follow mode: no complete line yet; call again later */
	GPT_LOGS_ERROR = -1,
} gpt_logs_read_status;

#define GPT_LOGS_MAX_LINE_DEFAULT (1u << 20)

typedef struct gpt_logs_reader gpt_logs_reader;

/* Opens path ("-" is stdin). Compressed input (gzip, xz, zstd, bzip2) is
 * recognised by its magic bytes and read through libarchive. max_line caps
 * the length of a line (0: GPT_LOGS_MAX_LINE_DEFAULT); a longer line is
 * skipped and counted. With follow, the end of a regular file is not the end:
 * next() answers GPT_LOGS_AGAIN and a later call sees what was appended (a
 * partial last line waits for its newline; a file that shrinks is read again
 * from its start). Compressed input is read to its end, not followed. */
int gpt_logs_reader_open(gpt_logs_reader **out, const char *path, size_t max_line, int follow,
			 gpt_err *err);
/* The next line, without its newline and NUL-terminated; *line stays valid
 * until the next call. A '\r' before the newline is dropped. */
gpt_logs_read_status gpt_logs_reader_next(gpt_logs_reader *r, const char **line, size_t *len,
					  gpt_err *err);
int64_t gpt_logs_reader_too_long(const gpt_logs_reader *r); /* lines skipped for length */
int64_t gpt_logs_reader_bytes(const gpt_logs_reader *r);    /* bytes read (decompressed) */
void gpt_logs_reader_close(gpt_logs_reader *r);

/* ---- one log's steps --------------------------------------------------- */

/* A step number that goes back (to the same step or an earlier one) is a
 * restart: a run resumed from a checkpoint that logs the steps after it
 * again. The series then keeps the later lines: it drops the steps and evals
 * from that step on before it adds the new one, and counts the restart. */
typedef struct gpt_logs_series {
	int64_t n, cap;         /* training steps */
	int64_t *step;
	double *loss, *step_time, *tok_card, *tok_total;
	unsigned char *nonfinite; /* 1 where the log wrote the loss as nan or inf */
	int64_t n_eval, cap_eval;
	int64_t *eval_step;
	double *eval_loss;
	int64_t n_ckpt, n_overflow;
	int64_t n_unparsed;     /* GPT_LOGS_BROKEN lines: records other output ran into */
	int64_t restarts;       /* times the step number went back */
	int dialects;           /* bit (1 << dialect) for each dialect seen */
} gpt_logs_series;

void gpt_logs_series_init(gpt_logs_series *s);
/* Keeps a STEP or EVAL record (others, GPT_LOGS_BROKEN lines included, are
 * only counted); a STEP whose step number goes back replaces what the series
 * holds from that step on (see gpt_logs_series). */
int gpt_logs_series_add(gpt_logs_series *s, const gpt_logs_rec *rec, gpt_err *err);
void gpt_logs_series_free(gpt_logs_series *s);

/* The figures of gpt-logparse --summary. NaN where unknown. */
typedef struct gpt_logs_summary {
	int64_t steps;          /* training step records, a step repeated by a restart once */
	int64_t skipped;        /* warm-up records left out of the speed figures */
	double tok_card[3];     /* p10, median, p90 tokens/s per card */
	double tok_total[3];    /* p10, median, p90 tokens/s over all cards */
	double step_time[3];    /* p10, median, p90 seconds per step */
	double loss_first, loss_last, loss_min; /* over the finite losses */
	int64_t loss_min_step;
	int64_t loss_nonfinite; /* step records whose loss was nan or inf */
	double mfu;             /* fraction of peak, from the median tokens/s per card */
} gpt_logs_summary;

/* The default warm-up: 10% of the step records rounded up, at least 1, but
 * none when there is only one. */
int64_t gpt_logs_default_skip(int64_t steps);

/* skip < 0 means the default. params and peak_tflops <= 0 mean unknown (no MFU).
 * MFU = median tokens/s per card x 6 x params / (peak_tflops x 1e12). */
int gpt_logs_summarize(const gpt_logs_series *s, int64_t skip, double params, double peak_tflops,
		       gpt_logs_summary *out, gpt_err *err);

/* Linear-interpolation quantile (numpy's default) of sorted[0..n); NaN if n == 0. */
double gpt_logs_quantile(const double *sorted, int64_t n, double q);

/* ---- plot -------------------------------------------------------------- */

/* Writes a standalone SVG (atomically): loss against step above, tokens/s
 * (per card where known, else total) against step below, one line per log,
 * with a legend of names. */
int gpt_logs_plot_svg(const char *path, const gpt_logs_series *const *series,
		      const char *const *names, int n, gpt_err *err);

/* ---- the command ------------------------------------------------------- */

typedef enum gpt_logs_format {
	GPT_LOGS_TSV = 0,
	GPT_LOGS_CSV,
	GPT_LOGS_JSON, /* JSON Lines: one object per row */
} gpt_logs_format;

/* Parses "tsv", "csv", "json"; GPT_EUSAGE otherwise. */
int gpt_logs_format_parse(const char *s, gpt_logs_format *out, gpt_err *err);

typedef struct gpt_logs_opts {
	gpt_logs_format format;
	int summary;            /* one summary row per log instead of step rows */
	int64_t skip_steps;     /* warm-up step records to leave out; < 0: default */
	const char *plot;       /* SVG path or NULL */
	double params;          /* model parameters (MFU); <= 0 unknown */
	double peak_tflops;     /* peak TFLOPS per card (MFU); <= 0 unknown */
	int follow;             /* keep reading growing files, print rows as they come */
	double poll_s;          /* follow: wait between polls (0: 0.2 s) */
	size_t max_line;        /* 0: GPT_LOGS_MAX_LINE_DEFAULT */
	const char *const *inputs; /* files, directories (DIR/workerlog.*), "-"; none: stdin */
	int ninputs;
	FILE *out;              /* where rows and summaries go */
} gpt_logs_opts;

typedef struct gpt_logs_counts {
	int64_t lines;    /* lines read */
	int64_t records;  /* lines recognised */
	int64_t unknown;  /* non-blank lines not recognised */
	int64_t unparsed; /* records other output ran into, skipped (GPT_LOGS_BROKEN) */
	int64_t too_long; /* lines over the length cap */
	int64_t bytes;    /* bytes read */
	int64_t logs;     /* log files read */
} gpt_logs_counts;

/* Runs gpt-logparse. Inputs: a directory stands for its workerlog.* files
 * (rank N from workerlog.N, else 0); with follow, also for those that appear
 * in it later (read from their start), and it may have none yet. Evals
 * without a step number (PaddleFleetX's "[eval] epoch" and PaddleNLP's eval
 * lines) take the last training step seen in the same log (none before the
 * first); llm.c's "val loss" the steps done before the step line after it
 * (the last step after the last). PaddleFleetX's "[train] epoch: E, batch: B"
 * line is step B + 1 in the first epoch the log shows, and B + 1 past the
 * last step logged before in each later one. counts (may be NULL) is filled
 * even on failure. */
int gpt_logs_run(const gpt_logs_opts *o, gpt_logs_counts *counts, gpt_err *err);

/* Rank from a file name: N for ".../workerlog.N" (also "workerlog.N.gz"), else 0. */
int64_t gpt_logs_rank_from_path(const char *path);

#ifdef __cplusplus
}
#endif

#endif
