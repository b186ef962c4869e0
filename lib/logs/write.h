/* Internal to lib/logs: the row and summary writers behind gpt_logs_run. Each
 * appends to a gpt_buf so that a row goes out in one fwrite. */
#ifndef GPT_LOGS_WRITE_H
#define GPT_LOGS_WRITE_H

#include "logs.h"

void gpt_logs_write_row_header(gpt_buf *b, gpt_logs_format f, gpt_err *err);
void gpt_logs_write_summary_header(gpt_buf *b, gpt_logs_format f, gpt_err *err);
/* The source and rank fields, written once per log and repeated before each row. */
void gpt_logs_write_prefix(gpt_buf *b, gpt_logs_format f, const char *source, int64_t rank,
			   gpt_err *err);
void gpt_logs_write_row(gpt_buf *b, gpt_logs_format f, const char *prefix, size_t prefix_len,
			const gpt_logs_rec *r, gpt_err *err);
void gpt_logs_write_summary(gpt_buf *b, gpt_logs_format f, const char *source, int64_t rank,
			    const gpt_logs_series *s, const gpt_logs_summary *m, gpt_err *err);

#endif
