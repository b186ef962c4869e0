/* lib/logs: line parsing for each dialect, the line reader's edge cases,
 * quantiles, warm-up skipping and the summary figures. */
#include "logs/logs.h"
#include "tap.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static gpt_logs_parser *P;

static int parse(const char *line, gpt_logs_rec *r)
{
	return gpt_logs_parse_line(P, line, strlen(line), r);
}

static int text_is(const gpt_logs_num *x, const char *want)
{
	return x->txt && (size_t)x->len == strlen(want) && memcmp(x->txt, want, (size_t)x->len) == 0;
}

static void test_fleetx(void)
{
	gpt_logs_rec r;
	const char *line = "[2022-07-27 12:40:00,833] [    INFO] - global step 1, epoch: 0, batch: 0, "
			   "loss: 11.083364487, avg_reader_cost: 0.23392 sec, avg_batch_cost: 2.05344 sec, "
			   "speed: 0.49 step/s, ips_total: 3989 tokens/s, ips: 499 tokens/s, learning rate: 5.55556e-09";
	ok(parse(line, &r), "FleetX step line parses");
	is_int(r.kind, GPT_LOGS_STEP, "it is a step");
	is_int(r.dialect, GPT_LOGS_GPTKIT, "dialect fleetx");
	is_int(r.step, 1, "step");
	is_near(r.loss.v, 11.083364487, 1e-12, "loss");
	ok(text_is(&r.loss, "11.083364487"), "loss keeps its logged text");
	is_near(r.step_time.v, 2.05344, 1e-12, "step time is avg_batch_cost");
	is_near(r.tok_total.v, 3989, 0, "ips_total is all cards");
	is_near(r.tok_card.v, 499, 0, "ips is per card");
	is_near(r.lr.v, 5.55556e-09, 1e-20, "learning rate");

	/* FleetX's colour codes, with the space before the reset code, as FleetX writes them. */
	ok(parse("\033[32m[2022-07-27 08:53:11,036] [    INFO] \033[0m - global step 10, epoch: 0, batch: 9, "
		 "loss: 11.674280167, avg_reader_cost: 0.00021 sec, avg_batch_cost: 0.28149 sec, speed: 3.55 step/s, "
		 "ips_total: 7276 tokens/s, ips: 909 tokens/s, learning rate: 3.43750e-08 \033[0m", &r) &&
		     r.step == 10 && r.tok_card.v == 909 && r.lr.v == 3.4375e-08,
	   "coloured FleetX line parses, trailing reset code ignored");
	ok(parse("[2022-05-10 11:02:03,100] [    INFO] - global step 2, epoch: 0, batch: 1, loss: 10.98, "
		 "avg_reader_cost: 0.00011 sec, avg_batch_cost: 0.20000 sec, speed: 5.00 step/s, ips: 40960 tokens/s, "
		 "learning rate: 7.50000e-09", &r) &&
		     isnan(r.tok_card.v) && r.tok_total.v == 40960,
	   "older FleetX line: a lone ips is the all-card figure");
	ok(!parse("[2022-07-27 12:40:00,833] [    INFO] - global step 1, epoch: 0, bat", &r) &&
		   r.kind == GPT_LOGS_NONE, "a truncated step line without its loss is not a record");
	ok(!parse("[2022-07-27 12:40:00,833] [    INFO] - resuming from global step 100", &r),
	   "a message that only mentions a global step is not a record");
}

/* What the trainer writes (lib/core's header and step line, with and
 * without colour) parses back to the numbers it was given. */
static void test_roundtrip(void)
{
	gpt_step_line sl = {.step = 123456, .epoch = 2, .batch = 77, .loss = 3.141592653,
			    .avg_reader_cost = 0.00012, .avg_batch_cost = 0.25,
			    .ips_total = 262144, .ips = 32768, .lr = 6.0e-4};
	for (int i = 0; i < 4; i++) {
		int color = i & 1;
		char head[96], body[512], line[640];
		sl.loss_scale = i & 2 ? 65536 : 0; /* float16's field before the learning rate */
		gpt_log_header(head, sizeof head, 1700000000123, GPT_LOG_INFO, color);
		gpt_step_line_format(body, sizeof body, &sl);
		snprintf(line, sizeof line, "%s%s", head, body);
		gpt_logs_rec r;
		ok(parse(line, &r) && r.kind == GPT_LOGS_STEP && r.step == 123456 &&
			   fabs(r.loss.v - 3.141592653) < 1e-12 && r.step_time.v == 0.25 &&
			   r.tok_total.v == 262144 && r.tok_card.v == 32768 && fabs(r.lr.v - 6e-4) < 1e-15,
		   "gpt_step_line_format output parses back (colour %d, loss scale %g)", color, sl.loss_scale);
	}
}

static void test_gptkit_extras(void)
{
	gpt_logs_rec r;
	ok(parse("[2026-11-21 10:00:02,400] [    INFO] - [eval] global step 100, epoch: 0, batch: 100, "
		 "loss: 5.123456789, ppl: 167.890000, avg_eval_cost: 0.12345 sec, speed: 8.10 step/s", &r),
	   "eval line parses");
	is_int(r.kind, GPT_LOGS_EVAL, "eval kind");
	is_int(r.step, 100, "eval step");
	is_near(r.loss.v, 5.123456789, 1e-12, "eval loss");
	is_near(r.ppl.v, 167.89, 1e-9, "eval ppl");
	ok(parse("[2026-11-21 10:00:06,550] [    INFO] - [checkpoint] global step 100, path: output/step_00000100, "
		 "size: 123456789 bytes, cost: 3.45 sec", &r), "checkpoint line parses");
	is_int(r.kind, GPT_LOGS_CKPT, "checkpoint kind");
	is_int(r.bytes, 123456789, "checkpoint size");
	ok(r.path_len == 20 && memcmp(r.path, "output/step_00000100", 20) == 0, "checkpoint path");
	ok(parse("[2026-11-21 10:00:02,100] [ WARNING] - [amp] global step 7, found inf/nan in gradients: "
		 "skipped the update, loss scale 32768 -> 16384", &r), "overflow line parses");
	ok(r.kind == GPT_LOGS_OVERFLOW && r.step == 7 && r.scale_from == 32768 && r.scale_to == 16384,
	   "overflow step and scales");
	ok(parse("[2022-05-10 11:02:04,000] [    INFO] - [eval] epoch: 0, batch: 10, loss: 6.123456789, "
		 "avg_eval_cost: 0.31000 sec, speed: 3.23 step/s", &r) &&
		     r.kind == GPT_LOGS_EVAL && r.step == -1 && r.loss.v == 6.123456789,
	   "FleetX's own eval line parses, without a step");
}

static void test_paddlenlp(void)
{
	gpt_logs_rec r;
	ok(parse("[2023-06-01 09:00:10,512] [    INFO] - loss: 10.98765432, learning_rate: 1e-05, global_step: 10, "
		 "interval_runtime: 10.512, interval_samples_per_second: 15.2207, interval_steps_per_second: 0.9513, "
		 "epoch: 0.0625", &r), "PaddleNLP line parses");
	ok(r.kind == GPT_LOGS_STEP && r.dialect == GPT_LOGS_PADDLENLP, "PaddleNLP step");
	is_int(r.step, 10, "global_step");
	is_near(r.loss.v, 10.98765432, 1e-12, "loss");
	is_near(r.lr.v, 1e-5, 1e-18, "learning_rate");
	is_near(r.interval_s, 10.512, 1e-12, "interval_runtime");
	is_near(r.step_rate, 0.9513, 1e-12, "interval_steps_per_second");
	ok(parse("[2023-06-01 09:00:10,512] [    INFO] - global_step: 20, loss: 9.5, learning_rate: 2e-05, "
		 "interval_runtime: 8.5, interval_samples_per_second: 18.8, interval_tokens_per_second_per_device: 5120.0", &r) &&
		     r.step == 20 && r.loss.v == 9.5 && r.tok_card.v == 5120,
	   "keys in another order, tokens/s per device");
	ok(parse("[2023-06-01 09:00:30,000] [    INFO] - eval_loss: 8.5, eval_runtime: 2.9, "
		 "eval_samples_per_second: 55.1, eval_steps_per_second: 6.9, epoch: 0.1875", &r) &&
		     r.kind == GPT_LOGS_EVAL && r.loss.v == 8.5 && r.step == -1,
	   "PaddleNLP eval line");
	/* found by fuzzing: the conversion of inf to a step number was undefined */
	ok(parse("global_step: INF, loss: 1.5", &r) && r.kind == GPT_LOGS_STEP && r.step == -1,
	   "global_step: INF is a step without a number");
	ok(parse("global_step: 1e300, loss: 1.5", &r) && r.step == -1, "so is one beyond int64");
}

static void test_megatron(void)
{
	gpt_logs_rec r;
	ok(parse(" iteration        2/     500 | consumed samples:         1024 | elapsed time per iteration (ms): "
		 "2100.0 | learning rate: 2.000E-06 | global batch size:   512 | lm loss: 1.050000E+01 | loss scale: "
		 "4096.0 | grad norm: 10.100 | number of skipped iterations:   0 | number of nan iterations:   0 |", &r),
	   "Megatron line parses");
	ok(r.kind == GPT_LOGS_STEP && r.dialect == GPT_LOGS_MEGATRON, "Megatron step");
	is_int(r.step, 2, "iteration");
	is_int(r.total_steps, 500, "train iterations");
	is_near(r.step_time.v, 2.1, 1e-12, "elapsed ms to seconds");
	is_near(r.loss.v, 10.5, 1e-12, "lm loss");
	is_near(r.lr.v, 2e-6, 1e-18, "learning rate");
	ok(parse("[2024-05-01 10:00:00] iteration      100/  500000 | elapsed time per iteration (ms): 250.5 | "
		 "learning rate: 3.000E-04 | lm loss: 3.250000E+00 |", &r) &&
		     r.step == 100 && fabs(r.step_time.v - 0.2505) < 1e-12 && r.loss.v == 3.25 && r.lr.v == 3e-4,
	   "Megatron line with fewer columns and a time stamp");
	ok(parse(" validation loss at iteration 4 | lm loss value: 9.400000E+00 | lm loss PPL: 1.210286E+04 | ", &r) &&
		     r.kind == GPT_LOGS_EVAL && r.step == 4 && r.loss.v == 9.4,
	   "Megatron validation line");
}

static void test_llmc(void)
{
	gpt_logs_rec r;
	ok(parse("step    1/74 | train loss 7.926287 | norm 43.1151 | lr 8.57e-06 | 1020.88 ms | -0.0% bf16 MFU | "
		 "514073 tok/s", &r), "llm.c line parses");
	ok(r.kind == GPT_LOGS_STEP && r.dialect == GPT_LOGS_LLMC, "llm.c step");
	is_int(r.step, 1, "step");
	is_int(r.total_steps, 74, "steps in all");
	is_near(r.loss.v, 7.926287, 1e-12, "loss");
	is_near(r.lr.v, 8.57e-6, 1e-18, "lr");
	is_near(r.step_time.v, 1.02088, 1e-12, "ms to seconds");
	is_near(r.tok_total.v, 514073, 0, "tok/s (all processes)");
	ok(parse("step 1: train loss 4.677 (took 1234.56 ms)", &r) && r.step == 1 && r.loss.v == 4.677 &&
		   fabs(r.step_time.v - 1.23456) < 1e-12, "old llm.c line");
	ok(parse("val loss 3.456", &r) && r.kind == GPT_LOGS_EVAL && r.loss.v == 3.456, "llm.c val loss");
	ok(parse("step    1/37: train loss 4.406481 norm 1.2345 lr 6.00e-04 (224.49 ms, 36484 tok/s)", &r) &&
		   r.step == 1 && r.total_steps == 37 && r.loss.v == 4.406481 && r.lr.v == 6e-4 &&
		   fabs(r.step_time.v - 0.22449) < 1e-12 && r.tok_total.v == 36484,
	   "llm.c line of the colon era");
	ok(parse("step    2/74 | loss 7.713380 (-0.72z)| norm 21.7020 (-0.51z)| lr 1.71e-05 | 336.52 ms | "
		 "42.1% bf16 MFU | 1557977 tok/s", &r) && r.step == 2 && r.loss.v == 7.71338 &&
		   r.lr.v == 1.71e-5 && fabs(r.step_time.v - 0.33652) < 1e-12 && r.tok_total.v == 1557977,
	   "llm.c line with z-scores: the lr after \"(-0.51z)|\"");
	ok(parse("s:20 trl:5.123400 lr:0.000600 norm:1.2000", &r) && r.kind == GPT_LOGS_STEP &&
		   r.step == 21 && r.loss.v == 5.1234 && r.lr.v == 6e-4,
	   "llm.c main.log train line: s counts from 0, the step is s + 1 as stdout has it");
	ok(parse("s:20 tel:5.3", &r) && r.kind == GPT_LOGS_EVAL && r.step == 20 && r.loss.v == 5.3,
	   "llm.c main.log eval line");
}

static void test_mindformers(void)
{
	gpt_logs_rec r;
	ok(parse("2024-03-01 10:00:10,123 - mindformers[mindformers/core/callback/callback.py:318] - INFO - "
		 "{ Epoch:[  2/  3], step:[   10/  125], loss: 7.345, per_step_time: 512ms, lr: 1e-05, "
		 "overflow cond: False, loss_scale: 1024.0, global_norm: [3.345], train_throughput_per_npu: 123.456T",
		 &r), "MindFormers line parses");
	ok(r.kind == GPT_LOGS_STEP && r.dialect == GPT_LOGS_MINDFORMERS, "MindFormers step");
	is_int(r.step, 135, "step (E - 1) x N + S");
	is_int(r.total_steps, 375, "steps in all");
	is_near(r.loss.v, 7.345, 0, "loss");
	is_near(r.step_time.v, 0.512, 1e-15, "ms to seconds, the unit without a space");
	is_near(r.lr.v, 1e-5, 0, "lr");
	ok(parse("{ Epoch:[  1/  1], step:[    3/  125], loss:[ 7.001/ 7.210], per_step_time: 498ms, "
		 "lr: [9.999e-06], overflow cond: False, loss_scale: 1024.0", &r) &&
		   r.kind == GPT_LOGS_STEP && r.step == 3 && r.loss.v == 7.001 && r.lr.v == 9.999e-6,
	   "outside sink mode: this step's loss of [this/mean], the lr in brackets");
	ok(!parse("{ Epoch:[  1/  1], step:[    3/  125], loss: 7.00/usr/lib/x, per_step_time: 498ms", &r) &&
		   r.kind == GPT_LOGS_BROKEN && r.dialect == GPT_LOGS_MINDFORMERS,
	   "a loss that other output ran into: broken");
	ok(!parse("  0.4% |                                                  | 0.45311 samples/s/p  2:26:42 }", &r),
	   "the progress line is no record");
}

/* Numbers come out as strtod would read them, on the fast path and off it. */
static void test_numbers(void)
{
	const char *nums[] = {"0.00013", "11.083364487", "5.55556e-09", "1.000E-06", "3989", "-0.0", "5.",
			      "1234567890123456789", "12345678901234567890123", "9007199254740993",
			      "1e22", "1e23", "4.9e-324", "2.2250738585072014e-308", "0.1", "+7.5e+01",
			      "123.456e-30", "0000000000000000000000012.5"};
	int good = 1;
	for (size_t i = 0; i < sizeof nums / sizeof *nums; i++) {
		char line[160];
		gpt_logs_rec r;
		snprintf(line, sizeof line, "[x] - global step 1, loss: %s, learning rate: 1", nums[i]);
		if (!parse(line, &r) || r.loss.v != strtod(nums[i], NULL)) {
			diag("%s: got %.17g, want %.17g", nums[i], r.loss.v, strtod(nums[i], NULL));
			good = 0;
		}
	}
	ok(good, "decimal conversion matches strtod");
	gpt_logs_rec r;
	ok(parse("[x] - global step 1, loss: nan, learning rate: inf", &r) && isnan(r.loss.v) && isinf(r.lr.v),
	   "nan and inf");
}

static void test_garbage(void)
{
	gpt_logs_rec r;
	char bin[512];
	for (size_t i = 0; i < sizeof bin; i++)
		bin[i] = (char)(i * 151 + 7);
	memcpy(bin + 100, "global step ", 12);
	ok(!gpt_logs_parse_line(P, bin, sizeof bin, &r), "binary bytes around a key are not a record");
	ok(!parse("", &r) && !parse("step", &r) && !parse("iteration", &r), "short lines are not records");
	ok(!parse("global step 5, loss: abc", &r), "a loss that is not a number is not a record");
}

/* Two writers on one log: a record that other output ran into is no record
 * (its fields could come from either line), and is told apart from an
 * unknown line so that it can be counted. */
static void test_interleaved(void)
{
	gpt_logs_rec r;
	ok(!parse("[2026-11-21 10:00:01,967] [    INFO] - global step 2, epoch: 0, batch: 1, loss: 10.9548028"
		  "[2026-11-21 10:00:02,075] [    INFO] - global step 3, epoch: 0, batch: 2, loss: 10.782803726, "
		  "avg_reader_cost: 0.00013 sec, avg_batch_cost: 0.10738 sec, ips_total: 76289 tokens/s", &r) &&
		   r.kind == GPT_LOGS_BROKEN && r.dialect == GPT_LOGS_GPTKIT && r.step == -1 && isnan(r.loss.v),
	   "two FleetX lines in one: broken, no fields");
	ok(!parse("[x] - global step 4, epoch: 0, batch: 3, loss: 10.77, avg_batch_cost: 0.1/usr/lib/w.py:1: "
		  "UserWarning", &r) && r.kind == GPT_LOGS_BROKEN, "a number cut short by other output: broken");
	ok(!parse("[x] - loss: 10.98, learning_rate: 1e-05, glo loss: 9.87, learning_rate: 2e-05, global_step: 20", &r) &&
		   r.kind == GPT_LOGS_BROKEN && r.dialect == GPT_LOGS_PADDLENLP, "a PaddleNLP key twice: broken");
	ok(!parse(" iteration        2/     500 | consumed samples:   1024 | learning rate:  iteration        3/"
		  "     500 | lm loss: 1.000000E+01 |", &r) && r.kind == GPT_LOGS_BROKEN, "two Megatron lines: broken");
	ok(!parse("step    1/74 | train loss 7.92step    2/74 | train loss 7.713380 | lr 1.71e-05", &r) &&
		   r.kind == GPT_LOGS_BROKEN, "two llm.c lines: broken");
	ok(!parse("just some text", &r) && r.kind == GPT_LOGS_NONE, "an unknown line stays unknown");
	ok(parse("[2024-05-01 10:00:00]  successfully saved checkpoint from iteration     100 to /ckpt/run1 "
		 "[ t 1/ 8, p 1/ 1 ]", &r) && r.kind == GPT_LOGS_CKPT && r.step == 100,
	   "Megatron's checkpoint line is whole: its iteration is its own");
	ok(parse("[x] - global step 7, epoch: 0, batch: 6, loss: 3.5, avg_batch_cost: 0.1\033[0m", &r) &&
		   r.step_time.v == 0.1, "a colour code right after a number is no cut");
	ok(parse("[x] - global step 7, epoch: 0, batch: 6, loss: 3.5, avg_batch_cost: 0.1", &r) &&
		   isnan(r.step_time.v), "a field the end of the log cut off is left out");
}

static char *write_tmp(const char *data, size_t n)
{
	static char path[64];
	strcpy(path, "/tmp/test-logs.XXXXXX");
	int fd = mkstemp(path);
	if (fd < 0 || write(fd, data, n) != (ssize_t)n)
		return NULL;
	close(fd);
	return path;
}

static void test_reader(void)
{
	gpt_err err = {0};
	/* A 100-byte cap: the 300-byte line is skipped and counted; CRLF and a
	 * last line without its newline are handled. */
	char data[1024];
	size_t n = 0;
	n += (size_t)sprintf(data + n, "one\r\n");
	memset(data + n, 'x', 300);
	n += 300;
	data[n++] = '\n';
	n += (size_t)sprintf(data + n, "\ntwo\nthree");
	char *path = write_tmp(data, n);
	ok(path != NULL, "temporary log written");
	gpt_logs_reader *r;
	ok(gpt_logs_reader_open(&r, path, 100, 0, &err) == 0, "reader opens");
	const char *line;
	size_t len;
	const char *want[] = {"one", "", "two", "three"};
	int i = 0, good = 1;
	gpt_logs_read_status st;
	while ((st = gpt_logs_reader_next(r, &line, &len, &err)) == GPT_LOGS_LINE) {
		if (i >= 4 || strcmp(line, want[i]) != 0 || strlen(line) != len)
			good = 0;
		i++;
	}
	ok(st == GPT_LOGS_END && i == 4 && good, "lines: CR dropped, long line skipped, last line kept");
	is_int(gpt_logs_reader_too_long(r), 1, "one line too long");
	is_int(gpt_logs_reader_bytes(r), (long long)n, "bytes counted");
	gpt_logs_reader_close(r);
	unlink(path);

	/* Lines longer than a read: the buffer grows up to the cap, no further. */
	size_t big = 1500000, huge = 3000000;
	char *d2 = malloc(big + huge + 16);
	memset(d2, 'a', big);
	d2[big] = '\n';
	memset(d2 + big + 1, 'b', huge);
	memcpy(d2 + big + 1 + huge, "\nend\n", 5);
	path = write_tmp(d2, big + huge + 6);
	free(d2);
	ok(path && gpt_logs_reader_open(&r, path, 2000000, 0, &err) == 0, "reader opens with a 2 MB cap");
	st = gpt_logs_reader_next(r, &line, &len, &err);
	ok(st == GPT_LOGS_LINE && len == big && line[0] == 'a' && line[big - 1] == 'a', "a 1.5 MB line is read whole");
	st = gpt_logs_reader_next(r, &line, &len, &err);
	ok(st == GPT_LOGS_LINE && len == 3 && strcmp(line, "end") == 0, "the 3 MB line is skipped");
	is_int(gpt_logs_reader_too_long(r), 1, "and counted");
	gpt_logs_reader_close(r);
	unlink(path);
	ok(gpt_logs_reader_open(&r, "/nonexistent/log", 0, 0, &err) == GPT_ENOINPUT, "missing file: 66");
	ok(strstr(err.msg, "/nonexistent/log") != NULL, "the message names the file");
}

static void test_stats(void)
{
	double v[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
	is_near(gpt_logs_quantile(v, 10, 0.5), 5.5, 1e-12, "median of 1..10");
	is_near(gpt_logs_quantile(v, 10, 0.1), 1.9, 1e-12, "p10 of 1..10 (linear)");
	is_near(gpt_logs_quantile(v, 10, 0.9), 9.1, 1e-12, "p90 of 1..10 (linear)");
	is_near(gpt_logs_quantile(v, 1, 0.9), 1, 0, "one value");
	ok(isnan(gpt_logs_quantile(v, 0, 0.5)), "no values: NaN");
	/* The summary's quantiles (quickselect) agree with the sorted ones. */
	{
		gpt_err e = {0};
		gpt_logs_series s;
		gpt_logs_series_init(&s);
		int64_t n = 1000; /* p10, median, p90 interpolate */
		double *sorted = malloc((size_t)n * sizeof *sorted);
		unsigned x = 12345;
		for (int64_t i = 0; i < n; i++) {
			gpt_logs_rec r;
			memset(&r, 0, sizeof r);
			r.kind = GPT_LOGS_STEP;
			r.step = i;
			x = x * 1103515245u + 12345u;
			r.tok_card.v = sorted[i] = (double)(x % 1000); /* many ties */
			r.loss.v = r.step_time.v = r.tok_total.v = 1;
			gpt_logs_series_add(&s, &r, &e);
		}
		for (int64_t i = 1; i < n; i++) /* insertion sort: the reference */
			for (int64_t j = i; j > 0 && sorted[j - 1] > sorted[j]; j--) {
				double t = sorted[j];
				sorted[j] = sorted[j - 1];
				sorted[j - 1] = t;
			}
		gpt_logs_summary m;
		gpt_logs_summarize(&s, 0, 0, 0, &m, &e);
		ok(m.tok_card[0] == gpt_logs_quantile(sorted, n, 0.1) &&
			   m.tok_card[1] == gpt_logs_quantile(sorted, n, 0.5) &&
			   m.tok_card[2] == gpt_logs_quantile(sorted, n, 0.9),
		   "quickselect quantiles equal sorted ones");
		free(sorted);
		gpt_logs_series_free(&s);
	}
	is_int(gpt_logs_default_skip(0), 0, "default skip of 0 steps");
	is_int(gpt_logs_default_skip(1), 0, "default skip of 1 step");
	is_int(gpt_logs_default_skip(2), 1, "default skip of 2 steps");
	is_int(gpt_logs_default_skip(10), 1, "default skip of 10 steps");
	is_int(gpt_logs_default_skip(11), 2, "default skip of 11 steps");
	is_int(gpt_logs_default_skip(100), 10, "default skip of 100 steps");

	gpt_err err = {0};
	gpt_logs_series s;
	gpt_logs_series_init(&s);
	for (int i = 1; i <= 5; i++) {
		gpt_logs_rec r;
		memset(&r, 0, sizeof r);
		r.kind = GPT_LOGS_STEP;
		r.dialect = GPT_LOGS_GPTKIT;
		r.step = i;
		r.loss.v = 10 - i + (i == 3 ? -5 : 0);
		r.step_time.v = i == 1 ? 9.0 : 0.5;
		r.tok_card.v = i == 1 ? 10 : 1000 * i;
		r.tok_total.v = NAN;
		gpt_logs_series_add(&s, &r, &err);
	}
	gpt_logs_summary m;
	ok(gpt_logs_summarize(&s, 1, 1e9, 100, &m, &err) == 0, "summarize");
	is_int(m.steps, 5, "steps");
	is_int(m.skipped, 1, "skipped");
	is_near(m.tok_card[1], 3500, 1e-9, "median tokens/s after the warm-up");
	is_near(m.step_time[1], 0.5, 1e-12, "median step time after the warm-up");
	ok(isnan(m.tok_total[1]), "unknown totals stay unknown");
	is_near(m.loss_first, 9, 0, "first loss");
	is_near(m.loss_last, 5, 0, "last loss");
	is_near(m.loss_min, 2, 0, "min loss");
	is_int(m.loss_min_step, 3, "step of the min loss");
	is_near(m.mfu, 3500 * 6 * 1e9 / 100e12, 1e-12, "MFU = tok/s x 6N / peak");
	ok(gpt_logs_summarize(&s, 99, 0, 0, &m, &err) == 0 && m.skipped == 5 && isnan(m.tok_card[1]) &&
		   isnan(m.mfu), "skipping everything leaves speeds unknown; no MFU without a peak");
	gpt_logs_series_free(&s);
}

/* A resumed run logs the steps after its checkpoint again: the later lines
 * replace the earlier ones from the step that went back, evals included. */
static void test_restart(void)
{
	gpt_err err = {0};
	gpt_logs_series s;
	gpt_logs_series_init(&s);
	const int64_t steps[] = {1, 2, 3, 4, 5, 3, 4, 5, 6, 6};
	for (int i = 0; i < 10; i++) {
		gpt_logs_rec r;
		memset(&r, 0, sizeof r);
		r.kind = GPT_LOGS_STEP;
		r.step = steps[i];
		r.loss.v = i < 5 ? 9 : 10 - i; /* the later attempt: 5 4 3 2 1 */
		r.step_time.v = r.tok_card.v = r.tok_total.v = 1;
		gpt_logs_series_add(&s, &r, &err);
		if (steps[i] == 3) { /* an eval after step 3 of each attempt */
			r.kind = GPT_LOGS_EVAL;
			r.loss.v = i;
			gpt_logs_series_add(&s, &r, &err);
		}
	}
	int in_order = s.n == 6;
	for (int64_t i = 0; in_order && i < 6; i++)
		in_order = s.step[i] == i + 1;
	ok(in_order, "steps 1 to 6, each once");
	ok(s.loss[1] == 9 && s.loss[2] == 5 && s.loss[4] == 3 && s.loss[5] == 1,
	   "from step 3 on, the losses are those of the later lines");
	ok(s.n_eval == 1 && s.eval_loss[0] == 5, "the eval of the first attempt went with its steps");
	is_int(s.restarts, 2, "two restarts: to step 3, and step 6 again");
	gpt_logs_summary m;
	ok(gpt_logs_summarize(&s, 0, 0, 0, &m, &err) == 0 && m.steps == 6 && m.loss_min == 1 && m.loss_min_step == 6,
	   "the summary counts each step once");
	gpt_logs_series_free(&s);
}

static void test_misc(void)
{
	is_int(gpt_logs_rank_from_path("log/workerlog.3"), 3, "rank from workerlog.3");
	is_int(gpt_logs_rank_from_path("workerlog.12.gz"), 12, "rank from workerlog.12.gz");
	is_int(gpt_logs_rank_from_path("train.log"), 0, "rank 0 otherwise");
	is_int(gpt_logs_rank_from_path("workerlog.x"), 0, "rank 0 for a non-number");
	gpt_logs_format f;
	gpt_err err = {0};
	ok(gpt_logs_format_parse("csv", &f, &err) == 0 && f == GPT_LOGS_CSV, "csv format");
	ok(gpt_logs_format_parse("xml", &f, &err) == GPT_EUSAGE && strstr(err.msg, "xml"), "unknown format: 64");
}

int main(void)
{
	gpt_err err = {0};
	P = gpt_logs_parser_new(&err);
	if (!P) {
		printf("Bail out! %s\n", err.msg);
		return 1;
	}
	test_fleetx();
	test_roundtrip();
	test_gptkit_extras();
	test_paddlenlp();
	test_megatron();
	test_llmc();
	test_mindformers();
	test_numbers();
	test_garbage();
	test_interleaved();
	test_reader();
	test_stats();
	test_restart();
	test_misc();
	gpt_logs_parser_free(P);
	return done_testing();
}
