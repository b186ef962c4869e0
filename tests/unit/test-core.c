/* lib/core: errors, buffers, arenas, parsers, atomic files, checksums, log
 * lines, progress formatting, threads. */
#include "core/core.h"
#include "tap.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static void test_errors(void)
{
	gpt_err err = {0};
	is_int(gpt_err_set(&err, GPT_EDATA, "%s:%d: bad", "f.yaml", 3), GPT_EDATA, "set returns the code");
	is_str(err.msg, "f.yaml:3: bad", "set formats the message");
	gpt_err_prefix(&err, "config %s", "x");
	is_str(err.msg, "config x: f.yaml:3: bad", "prefix prepends");
	gpt_err_set(&err, GPT_EDATA, "two\nlines");
	is_str(err.msg, "two lines", "a message stays on one line");
	is_int(gpt_err_errno_read(&err, ENOENT, "%s", "/nope"), GPT_ENOINPUT, "ENOENT reads as missing input");
	ok(strstr(err.msg, "/nope: ") == err.msg, "errno message names the path first: %s", err.msg);
	is_int(gpt_err_errno_read(&err, EACCES, "x"), GPT_EIO, "EACCES is an I/O error");
	is_int(gpt_err_set(NULL, GPT_EIO, "ignored"), GPT_EIO, "a NULL err is allowed");
	gpt_err_clear(&err);
	is_int(err.code, 0, "clear");
}

static void test_buf_arena(void)
{
	gpt_buf b = GPT_BUF_INIT;
	for (int i = 0; i < 1000; i++)
		gpt_buf_printf(&b, NULL, "%d,", i);
	ok(b.len > 3000 && strncmp(b.data, "0,1,2,", 6) == 0, "buf grows and keeps its content");
	ok(b.data[b.len] == '\0', "buf is NUL-terminated");
	gpt_buf_free(&b);

	gpt_arena a;
	gpt_arena_init(&a, 128);
	int aligned = 1;
	char *first = gpt_arena_strdup(&a, "hello", NULL);
	for (int i = 0; i < 1000; i++) {
		size_t al = (size_t)1 << (i % 8);
		void *p = gpt_arena_alloc(&a, (size_t)(i % 300) + 1, al, NULL);
		if (!p || ((uintptr_t)p & (al - 1)))
			aligned = 0;
		memset(p, 0xab, (size_t)(i % 300) + 1);
	}
	ok(aligned, "arena allocations honour alignment");
	is_str(first, "hello", "earlier arena allocations survive growth");
	void *big = gpt_arena_alloc(&a, 1 << 20, 64, NULL);
	ok(big != NULL, "arena serves a block larger than its block size");
	gpt_arena_reset(&a);
	ok(a.used == 0 && a.reserved >= (1 << 20), "reset keeps the largest block");
	gpt_err err = {0};
	ok(gpt_arena_alloc(&a, 8, 3, &err) == NULL && err.code == GPT_EINTERNAL,
	   "non-power-of-two alignment is refused");
	gpt_arena_free(&a);

	size_t out;
	ok(gpt_mul_size(SIZE_MAX / 2, 3, &out) == -1, "mul overflow detected");
	ok(gpt_add_size(SIZE_MAX, 1, &out) == -1, "add overflow detected");
}

static void test_parsers(void)
{
	int64_t i;
	double d;
	int b;
	ok(gpt_parse_i64("42", &i) == 0 && i == 42, "i64 parses");
	ok(gpt_parse_i64("-7", &i) == 0 && i == -7, "negative i64 parses");
	ok(gpt_parse_i64("4x", &i) != 0, "trailing junk refused");
	ok(gpt_parse_i64("", &i) != 0, "empty refused");
	ok(gpt_parse_i64(" 4", &i) != 0, "leading space refused");
	ok(gpt_parse_i64("99999999999999999999", &i) != 0, "overflow refused");
	ok(gpt_parse_f64("1e-4", &d) == 0 && d == 1e-4, "f64 parses exponents");
	ok(gpt_parse_f64("nan", &d) != 0 && gpt_parse_f64("inf", &d) != 0, "nan/inf refused");
	ok(gpt_parse_f64("1e-400", &d) == GPT_PARSE_RANGE && d == 0 && gpt_parse_f64("-1e400", &d) == GPT_PARSE_RANGE,
	   "f64: underflow to 0 and overflow are out of range");
	ok(gpt_parse_f64("0e-400", &d) == 0 && d == 0 && gpt_parse_f64("1e-310", &d) == 0 && d > 0,
	   "f64: an exact 0 and a denormal are numbers");
	{
		/* what PyYAML 6 (yaml.safe_load) makes of each: an int, or a string
		 * or float (-1 here) */
		static const struct {
			const char *s;
			int rc;
			int64_t v;
		} yi[] = {
			{"0x40", 0, 64}, {"1_000", 0, 1000}, {"017", 0, 15}, {"0_17", 0, 15}, {"0b1_0", 0, 2},
			{"-0x10", 0, -16}, {"+12", 0, 12}, {"1:30", 0, 90}, {"1_0:3:04", 0, 36184}, {"-1:30", 0, -90},
			{"1:5", 0, 65}, {"0", 0, 0}, {"00", 0, 0}, {"-0", 0, 0}, {"0xFF_ff", 0, 65535}, {"1__", 0, 1},
			{"9223372036854775807", 0, INT64_MAX}, {"-9223372036854775808", 0, INT64_MIN},
			{"9223372036854775808", GPT_PARSE_RANGE, 0}, {"0x8000000000000000", GPT_PARSE_RANGE, 0},
			{"09", -1, 0}, {"0o17", -1, 0}, {"64.0", -1, 0}, {"1e3", -1, 0}, {"0X40", -1, 0},
			{"0b", -1, 0}, {"0x_", -1, 0}, {"1:60", -1, 0}, {"0:30", -1, 0}, {"_1", -1, 0}, {"", -1, 0},
			{" 1", -1, 0}, {"1 ", -1, 0}, {"0x1:30", -1, 0}, {"1:", -1, 0}, {"1:123", -1, 0},
		};
		int all = 1;
		for (size_t k = 0; k < sizeof yi / sizeof *yi; k++) {
			int64_t v = 0;
			int rc = gpt_parse_yaml_int(yi[k].s, &v);
			if (rc != yi[k].rc || (rc == 0 && v != yi[k].v)) {
				diag("gpt_parse_yaml_int(\"%s\"): %d, %lld", yi[k].s, rc, (long long)v);
				all = 0;
			}
		}
		ok(all, "YAML 1.1 integers as PyYAML resolves them: hex, binary, octal, _, base 60; not 0o, 09, 64.0");
	}
	ok(gpt_parse_bool("True", &b) == 0 && b == 1, "Python's True");
	ok(gpt_parse_bool("off", &b) == 0 && b == 0, "off");
	ok(gpt_parse_bool("maybe", &b) != 0, "maybe is not a bool");
	is_int(gpt_edit_distance("hiden_size", "hidden_size"), 1, "edit distance, one insertion");
	is_int(gpt_edit_distance("kitten", "sitting"), 3, "edit distance, kitten/sitting");
	is_int(gpt_edit_distance("ABC", "abc"), 0, "edit distance ignores case");
}

static void test_files(void)
{
	char dir[] = "/tmp/gptkit-core-XXXXXX";
	ok(mkdtemp(dir) != NULL, "scratch directory");
	char path[256], tmpdir[300];
	snprintf(path, sizeof path, "%s/out.txt", dir);
	gpt_err err = {0};
	ok(gpt_file_write_atomic(path, "v1", 2, &err) == 0, "atomic write");
	gpt_afile af;
	ok(gpt_afile_open(&af, path, &err) == 0, "afile open");
	fputs("v2-partial", af.fp);
	char *got = NULL;
	size_t len = 0;
	gpt_file_read_all(path, 0, &got, &len, &err);
	is_str(got, "v1", "the old content stays until commit");
	free(got);
	gpt_afile_abort(&af);
	gpt_file_read_all(path, 0, &got, &len, &err);
	is_str(got, "v1", "abort leaves the old content");
	free(got);
	ok(gpt_afile_open(&af, path, &err) == 0, "afile open again");
	fputs("v2", af.fp);
	ok(gpt_afile_commit(&af, &err) == 0, "commit");
	gpt_file_read_all(path, 0, &got, &len, &err);
	is_str(got, "v2", "commit replaces the content");
	free(got);
	ok(gpt_file_read_all(path, 1, &got, &len, &err) == GPT_EDATA, "size limit enforced");
	/* No temporary file remains. */
	char cmd[400];
	snprintf(cmd, sizeof cmd, "test $(ls -A %s | wc -l) = 1", dir);
	ok(system(cmd) == 0, "no temporary files left behind");
	snprintf(tmpdir, sizeof tmpdir, "%s/a/b/c", dir);
	ok(gpt_mkdir_p(tmpdir, &err) == 0 && gpt_path_exists(tmpdir), "mkdir -p");
	gpt_rmdir_made(NULL, 0); /* nothing made: there may be no path at all */
	ok(gpt_path_exists(tmpdir), "gpt_rmdir_made of nothing made, with no path, removes nothing");
	ok(gpt_file_read_all("/nonexistent/x", 0, &got, &len, &err) == GPT_ENOINPUT,
	   "missing file is GPT_ENOINPUT");
	ok(gpt_file_read_all(dir, 0, &got, &len, &err) == GPT_ENOINPUT, "a directory is not a file");
	/* gpt_path_within: dir is "DIR/a", made above with b/c below it */
	char a[300], q[400], ln[300];
	snprintf(a, sizeof a, "%s/a", dir);
	snprintf(ln, sizeof ln, "%s/link", dir);
	ok(symlink("a/b", ln) == 0, "a link into a/b");
	static const struct {
		const char *rel;
		int in;
	} within[] = {
		{"a", 1}, {"a/", 1}, {"a/b/c", 1}, {"a/new.txt", 1}, {"a/no/such/dir/x", 1},
		{"a/b/../x", 1}, {"a/no/../../x", 0}, {"link/x", 1}, {"a/../out.txt", 0},
		{"ab", 0}, {"out.txt", 0}, {"a/b/../../a", 1},
	};
	for (size_t i = 0; i < sizeof within / sizeof within[0]; i++) {
		snprintf(q, sizeof q, "%s/%s", dir, within[i].rel);
		ok(gpt_path_within(q, a) == within[i].in, "%s is %swithin a", within[i].rel, within[i].in ? "" : "not ");
	}
	ok(gpt_path_within(a, "/nonexistent") == 0, "nothing is within a directory that does not exist");
	ok(gpt_path_within("/", "/") == 1 && gpt_path_within(a, "/") == 1, "everything is within /");
	char bad[300];
	snprintf(bad, sizeof bad, "%s/missing-dir/out.txt", dir);
	ok(gpt_file_write_atomic(bad, "x", 1, &err) != 0, "atomic write into a missing directory fails: %s", err.msg);

	/* xxh3 of "" and of "abc" (values from the xxhash reference, XXH3_64bits). */
	char hex[17];
	gpt_xxh3_hex(gpt_xxh3_64("", 0), hex);
	is_str(hex, "2d06800538d394c2", "xxh3 of the empty string");
	uint64_t h;
	ok(gpt_xxh3_file(path, &h, &err) == 0 && h == gpt_xxh3_64("v2", 2), "file hash equals buffer hash");
	gpt_hasher *st = gpt_hasher_new(&err);
	gpt_hasher_update(st, "v", 1);
	gpt_hasher_update(st, "2", 1);
	ok(gpt_hasher_digest(st) == h, "streaming hash equals one-shot hash");
	gpt_hasher_free(st);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	ok(system(cmd) == 0, "cleanup");
}

static void test_log_lines(void)
{
	char line[512];
	gpt_step_line s = {.step = 1, .loss = 11.083364487, .avg_reader_cost = 0.23392,
			   .avg_batch_cost = 2.05344, .ips_total = 3989, .ips = 499, .lr = 5.55556e-09};
	gpt_step_line_format(line, sizeof line, &s);
	is_str(line,
	       "global step 1, epoch: 0, batch: 0, loss: 11.083364487, avg_reader_cost: 0.23392 sec, "
	       "avg_batch_cost: 2.05344 sec, speed: 0.49 step/s, ips_total: 3989 tokens/s, "
	       "ips: 499 tokens/s, learning rate: 5.55556e-09",
	       "the FleetX step line, exactly");
	s.loss_scale = 32768;
	gpt_step_line_format(line, sizeof line, &s);
	is_str(line,
	       "global step 1, epoch: 0, batch: 0, loss: 11.083364487, avg_reader_cost: 0.23392 sec, "
	       "avg_batch_cost: 2.05344 sec, speed: 0.49 step/s, ips_total: 3989 tokens/s, "
	       "ips: 499 tokens/s, loss_scale: 32768.000000000, learning rate: 5.55556e-09",
	       "float16: the loss scale before the learning rate, as FleetX's later lines");
	char head[128];
	setenv("TZ", "UTC", 1);
	gpt_log_header(head, sizeof head, 1658925600833LL, GPT_LOG_INFO, 0);
	is_str(head, "[2022-07-27 12:40:00,833] [    INFO] - ", "log header, plain");
	gpt_log_header(head, sizeof head, 1658925600833LL, GPT_LOG_WARNING, 1);
	is_str(head, "\033[33m[2022-07-27 12:40:00,833] [ WARNING]\033[0m - ", "log header, coloured");
	gpt_eval_line e = {.step = 100, .epoch = 0, .batch = 100, .loss = 2.0, .avg_eval_cost = 0.5};
	gpt_eval_line_format(line, sizeof line, &e);
	is_str(line, "[eval] global step 100, epoch: 0, batch: 100, loss: 2.000000000, ppl: 7.389056, "
		     "avg_eval_cost: 0.50000 sec, speed: 2.00 step/s", "eval line");
	gpt_ckpt_line_format(line, sizeof line, 100, "output/step_00000100", 1234, 3.456);
	is_str(line, "[checkpoint] global step 100, path: output/step_00000100, size: 1234 bytes, cost: 3.46 sec",
	       "checkpoint line");
	gpt_amp_skip_line_format(line, sizeof line, 7, 32768, 16384);
	is_str(line, "[amp] global step 7, found inf/nan in gradients: skipped the update, loss scale 32768 -> 16384",
	       "amp skip line");
}

static void test_progress(void)
{
	gpt_progress p;
	gpt_progress_init(&p, NULL, "tokenize", "B", 2000000);
	p.start_s = 100.0;
	p.done = 1000000;
	p.items = 12;
	p.items_unit = "docs";
	char out[256];
	gpt_progress_format(&p, 110.0, out, sizeof out);
	is_str(out, "tokenize [##########..........]  50% 1.0 MB, 12 docs, 100.0 KB/s, ETA 10s",
	       "progress with a known total");
	p.total = 0;
	gpt_progress_format(&p, 110.0, out, sizeof out);
	is_str(out, "tokenize 1.0 MB, 12 docs, 100.0 KB/s", "progress with an unknown total");
	char d[32];
	gpt_format_duration(3725, d, sizeof d);
	is_str(d, "1h02m", "duration in hours");
	gpt_format_bytes(999, d, sizeof d);
	is_str(d, "999 B", "bytes below a kilobyte");
}

static int count_fn(void *arg, int index)
{
	int *slots = arg;
	slots[index] = index + 1;
	return index == 3 ? 42 : 0;
}

static void test_threads(void)
{
	int slots[8] = {0};
	gpt_err err = {0};
	int rc = gpt_threads_run(8, count_fn, slots, &err);
	int all = 1;
	for (int i = 0; i < 8; i++)
		all &= slots[i] == i + 1;
	ok(all, "every thread ran its index");
	is_int(rc, 42, "the first non-zero result is returned");
	ok(gpt_cpu_count() >= 1, "cpu count");
	gpt_timer t = {0};
	gpt_timer_start(&t);
	usleep(2000);
	gpt_timer_stop(&t);
	ok(gpt_timer_seconds(&t) >= 0.002 && t.count == 1, "timer measures a sleep");
}

static void test_opts(void)
{
	static const gpt_opt table[] = {
		{"config", 'c', "FILE", 'c', "config file"},
		{"override", 'o', "KEY=VALUE", 'o', "override"},
		{"dry-run", 0, NULL, 256, "dry run"},
		{NULL, 0, NULL, 0, NULL},
	};
	char *argv[] = {"prog", "-c", "a.yaml", "operand", "--dry-run", "-oX=1", "--", "-c", NULL};
	gpt_opts o;
	gpt_err err = {0};
	gpt_opts_init(&o, table, 8, argv);
	int ids[8], n = 0, id;
	const char *args[8];
	while ((id = gpt_opts_next(&o, &err)) > 0) {
		args[n] = o.arg;
		ids[n++] = id;
	}
	ok(id == 0 && n == 3 && ids[0] == 'c' && ids[1] == 256 && ids[2] == 'o', "options parsed in order");
	is_str(args[0], "a.yaml", "short option argument");
	is_str(args[2], "X=1", "attached short argument");
	ok(o.index == 6 && strcmp(argv[6], "operand") == 0 && strcmp(argv[7], "-c") == 0,
	   "operands permuted to the end, '--' respected");
	char *bad[] = {"prog", "--nope", NULL};
	gpt_opts_init(&o, table, 2, bad);
	ok(gpt_opts_next(&o, &err) == -1 && err.code == GPT_EUSAGE, "unknown long option");
	ok(strstr(err.msg, "--nope") != NULL, "message names it: %s", err.msg);
	char *miss[] = {"prog", "-c", NULL};
	gpt_opts_init(&o, table, 2, miss);
	ok(gpt_opts_next(&o, &err) == -1 && strstr(err.msg, "needs an argument"), "missing argument: %s", err.msg);
	/* A long option with one dash is refused by name, not read as -c with
	 * the argument "onfig" or as an unknown -d; '-' and '_' are told apart
	 * with a hint. */
	static const gpt_opt t2[] = {
		{"config", 'c', "FILE", 'c', "config file"},
		{"dry_run", 'd', NULL, 'd', "dry run"},
		{NULL, 0, NULL, 0, NULL},
	};
	char *one[] = {"prog", "-config", "a.yaml", NULL};
	gpt_opts_init(&o, t2, 3, one);
	ok(gpt_opts_next(&o, &err) == -1 && err.code == GPT_EUSAGE &&
		   strstr(err.msg, "unknown option -config: a long option takes two dashes; did you mean --config?"),
	   "one-dash long option with an argument: %s", err.msg);
	char *one2[] = {"prog", "x", "-c", "a.yaml", "op", "-dry-run=1", NULL};
	gpt_opts_init(&o, t2, 6, one2);
	ok(gpt_opts_next(&o, &err) == 'c', "a short option before it parses");
	ok(gpt_opts_next(&o, &err) == -1 && strstr(err.msg, "unknown option -dry-run:") &&
		   strstr(err.msg, "did you mean --dry_run?"),
	   "one-dash long option past operands, '-' for '_': %s", err.msg);
	char *cl[] = {"prog", "-dc", "x", "--", "-config", NULL};
	gpt_opts_init(&o, t2, 5, cl);
	ok(gpt_opts_next(&o, &err) == 'd' && gpt_opts_next(&o, &err) == 'c' && gpt_opts_next(&o, &err) == 0 &&
		   o.index == 4,
	   "short clusters and operands after -- stay as they were");
	char *us[] = {"prog", "--dry-run", NULL};
	gpt_opts_init(&o, t2, 2, us);
	ok(gpt_opts_next(&o, &err) == -1 && strstr(err.msg, "unknown option --dry-run; did you mean --dry_run?"),
	   "'-' for '_' in a long option: %s", err.msg);
}

/* A signal in a command that called gpt_cmd_remove_temps_on_signals: the
 * held temporaries (a file, a directory of files) go, a dropped one stays,
 * and the process ends of the signal. */
static void test_temps_on_signal(void)
{
	char dir[] = "/tmp/gptkit-temps-XXXXXX";
	ok(mkdtemp(dir) != NULL, "scratch directory");
	char f[300], d[300], in[400], kept[300], cmd[400];
	snprintf(f, sizeof f, "%s/.out.tmp", dir);
	snprintf(d, sizeof d, "%s/.step.tmp", dir);
	snprintf(kept, sizeof kept, "%s/kept", dir);
	pid_t pid = fork();
	if (pid == 0) {
		gpt_err err = {0};
		gpt_cmd_remove_temps_on_signals();
		gpt_file_write_atomic(kept, "k", 1, &err);
		gpt_temp_hold(kept, 0);
		gpt_temp_drop(kept);
		gpt_file_write_atomic(f, "x", 1, &err);
		gpt_temp_hold(f, 0);
		mkdir(d, 0777);
		gpt_temp_hold(d, 1);
		for (int i = 0; i < 300; i++) { /* several reads of the listing */
			snprintf(in, sizeof in, "%s/rank-%05d.safetensors", d, i);
			gpt_file_write_atomic(in, "y", 1, &err);
		}
		raise(SIGTERM);
		_exit(0);
	}
	int st = 0;
	ok(pid > 0 && waitpid(pid, &st, 0) == pid, "the child ran");
	ok(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM, "it ended of SIGTERM (status %d)", st);
	ok(!gpt_path_exists(f) && !gpt_path_exists(d), "its temporaries are gone");
	ok(gpt_path_exists(kept), "what it no longer held stays");
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	ok(system(cmd) == 0, "cleanup");
}

int main(void)
{
	test_errors();
	test_buf_arena();
	test_parsers();
	test_files();
	test_temps_on_signal();
	test_log_lines();
	test_progress();
	test_threads();
	test_opts();
	return done_testing();
}
