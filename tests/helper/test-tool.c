/* test-tool: reaches library internals from the shell tests.
 *
 *   test-tool xxh3 FILE                  print the file's xxh3-64 in hex
 *   test-tool atomic-write PATH TEXT     write TEXT to PATH atomically
 *   test-tool atomic-abort PATH TEXT     write, then abort: PATH must stay as it was
 *   test-tool log LEVEL MESSAGE          one log line on stderr
 *   test-tool step-line                  a sample training step line on stderr
 *   test-tool progress TOTAL STEP        drive a progress reporter on stderr
 *   test-tool backends                   describe the compute backends
 */
#include "backend/backend.h"
#include "core/core.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int usage(void)
{
	fprintf(stderr, "usage: test-tool xxh3|atomic-write|atomic-abort|log|step-line|progress|backends ...\n");
	return GPT_EUSAGE;
}

int main(int argc, char **argv)
{
	const char *prog = "test-tool";
	gpt_err err = {0};
	if (argc < 2)
		return usage();
	const char *verb = argv[1];
	if (strcmp(verb, "xxh3") == 0 && argc == 3) {
		uint64_t h;
		if (gpt_xxh3_file(argv[2], &h, &err))
			return gpt_cmd_fail(prog, &err);
		char hex[17];
		gpt_xxh3_hex(h, hex);
		printf("%s\n", hex);
		return 0;
	}
	if ((strcmp(verb, "atomic-write") == 0 || strcmp(verb, "atomic-abort") == 0) && argc == 4) {
		gpt_afile af;
		if (gpt_afile_open(&af, argv[2], &err))
			return gpt_cmd_fail(prog, &err);
		fputs(argv[3], af.fp);
		if (strcmp(verb, "atomic-abort") == 0) {
			gpt_afile_abort(&af);
			return 0;
		}
		if (gpt_afile_commit(&af, &err))
			return gpt_cmd_fail(prog, &err);
		return 0;
	}
	if (strcmp(verb, "log") == 0 && argc == 4) {
		gpt_log lg;
		gpt_log_init(&lg, stderr, GPT_LOG_DEBUG);
		gpt_log_level lv = strcmp(argv[2], "warning") == 0 ? GPT_LOG_WARNING
				 : strcmp(argv[2], "error") == 0   ? GPT_LOG_ERROR
				 : strcmp(argv[2], "debug") == 0   ? GPT_LOG_DEBUG
								   : GPT_LOG_INFO;
		gpt_log_printf(&lg, lv, "%s", argv[3]);
		return 0;
	}
	if (strcmp(verb, "step-line") == 0 && argc == 2) {
		gpt_step_line s = {.step = 1, .epoch = 0, .batch = 0, .loss = 11.083364487,
				   .avg_reader_cost = 0.23392, .avg_batch_cost = 2.05344,
				   .ips_total = 3989, .ips = 499, .lr = 5.55556e-09};
		char line[512];
		gpt_step_line_format(line, sizeof line, &s);
		gpt_log lg;
		gpt_log_init(&lg, stderr, GPT_LOG_INFO);
		gpt_log_printf(&lg, GPT_LOG_INFO, "%s", line);
		return 0;
	}
	if (strcmp(verb, "progress") == 0 && argc == 4) {
		int64_t total, step;
		if (gpt_parse_i64(argv[2], &total) || gpt_parse_i64(argv[3], &step) || step <= 0)
			return usage();
		gpt_progress p;
		gpt_progress_init(&p, stderr, "work", "B", total);
		p.plain_interval_s = 0.001;
		for (int64_t d = 0; d <= (total > 0 ? total : 10 * step); d += step) {
			gpt_progress_update(&p, d, d / step);
			usleep(2000);
		}
		gpt_progress_finish(&p);
		return 0;
	}
	if (strcmp(verb, "backends") == 0 && argc == 2) {
		char line[1024];
		gpt_backend_describe(line, sizeof line);
		printf("%s\n", line);
		return 0;
	}
	return usage();
}
