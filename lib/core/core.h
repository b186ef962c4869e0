/* lib/core: the ground every other module stands on.
 *
 * Error reporting: a library function that can fail takes a `gpt_err *` as its
 * last argument, returns 0 on success and a non-zero gpt_status on failure, and
 * leaves a one-line message in the gpt_err (no trailing newline, starting
 * lower-case, naming the thing that failed first and saying what to do where
 * that is known). The status values are the sysexits(3) codes the commands
 * exit with, so cmd/ can return them from main() unchanged. The library never
 * exits and never writes to stdout; only cmd/ prints "prog: error: ...".
 *
 * Also here: FleetX-style log lines on stderr, atomic file writes, xxh3
 * checksums, arenas, a progress reporter for stderr, monotonic timers, small
 * file helpers and a minimal command-line option table shared by the programs.
 */
#ifndef GPT_CORE_H
#define GPT_CORE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GPT_VERSION "0.1.0"

#if defined(__GNUC__)
#define GPT_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define GPT_PRINTF(f, a)
#endif

/* ---- errors ------------------------------------------------------------ */

typedef enum gpt_status {
	GPT_OK = 0,
	GPT_EUSAGE = 64,    /* bad command line or configuration value */
	GPT_EDATA = 65,     /* malformed input data */
	GPT_ENOINPUT = 66,  /* an input file or directory does not exist */
	GPT_EINTERNAL = 70, /* a bug, an allocation failure, an unsupported backend */
	GPT_EIO = 74,       /* reading or writing failed */
} gpt_status;

#define GPT_ERR_MSG_MAX 1024

typedef struct gpt_err {
	int code;                   /* a gpt_status; 0 when nothing failed */
	char msg[GPT_ERR_MSG_MAX];  /* one line, no trailing newline */
} gpt_err;

/* Sets err (which may be NULL) to code and the formatted message; returns code
 * so that `return gpt_err_set(err, GPT_EDATA, "...")` reads naturally. */
int gpt_err_set(gpt_err *err, int code, const char *fmt, ...) GPT_PRINTF(3, 4);
int gpt_err_vset(gpt_err *err, int code, const char *fmt, va_list ap);

/* As gpt_err_set, with ": " and strerror(errnum) appended. The code is
 * GPT_ENOINPUT for ENOENT/ENOTDIR when code is GPT_EIO and reading was meant,
 * see gpt_err_errno_read; otherwise the code given. */
int gpt_err_errno(gpt_err *err, int code, int errnum, const char *fmt, ...) GPT_PRINTF(4, 5);

/* For failures to open or read an input: ENOENT/ENOTDIR give GPT_ENOINPUT,
 * anything else GPT_EIO. */
int gpt_err_errno_read(gpt_err *err, int errnum, const char *fmt, ...) GPT_PRINTF(3, 4);

/* Prepends "prefix: " (formatted) to an error already set; returns err->code. */
int gpt_err_prefix(gpt_err *err, const char *fmt, ...) GPT_PRINTF(2, 3);

/* Clears err. */
void gpt_err_clear(gpt_err *err);

/* Out-of-memory shorthand: sets GPT_EINTERNAL "out of memory allocating N bytes for WHAT". */
int gpt_err_nomem(gpt_err *err, size_t bytes, const char *what);

/* ---- allocation -------------------------------------------------------- */

/* malloc/calloc/realloc that set err on failure and return NULL. */
void *gpt_malloc(size_t n, const char *what, gpt_err *err);
void *gpt_calloc(size_t count, size_t size, const char *what, gpt_err *err);
void *gpt_realloc(void *p, size_t n, const char *what, gpt_err *err);
char *gpt_strdup(const char *s, gpt_err *err);
/* 64-byte aligned allocation, freed with free(). */
void *gpt_aligned_alloc(size_t n, const char *what, gpt_err *err);

/* Overflow-checked size arithmetic: returns 0 and sets *out, or -1 on overflow. */
int gpt_mul_size(size_t a, size_t b, size_t *out);
int gpt_add_size(size_t a, size_t b, size_t *out);

/* ---- arenas ------------------------------------------------------------ */

/* A bump allocator: many allocations, one free. Blocks grow geometrically;
 * every allocation is aligned to `align` (a power of two, at least 1). */
typedef struct gpt_arena_block gpt_arena_block;
typedef struct gpt_arena {
	gpt_arena_block *head;
	size_t block_size; /* size of the next block to allocate */
	size_t used;       /* bytes handed out, for accounting */
	size_t reserved;   /* bytes obtained from the system */
} gpt_arena;

void gpt_arena_init(gpt_arena *a, size_t first_block);
void *gpt_arena_alloc(gpt_arena *a, size_t n, size_t align, gpt_err *err);
void *gpt_arena_calloc(gpt_arena *a, size_t n, size_t align, gpt_err *err);
char *gpt_arena_strdup(gpt_arena *a, const char *s, gpt_err *err);
char *gpt_arena_strndup(gpt_arena *a, const char *s, size_t n, gpt_err *err);
/* Forgets every allocation but keeps the largest block for reuse. */
void gpt_arena_reset(gpt_arena *a);
void gpt_arena_free(gpt_arena *a);

/* ---- growable string buffer -------------------------------------------- */

typedef struct gpt_buf {
	char *data; /* always NUL-terminated when non-NULL */
	size_t len;
	size_t cap;
} gpt_buf;

#define GPT_BUF_INIT {NULL, 0, 0}
int gpt_buf_reserve(gpt_buf *b, size_t extra, gpt_err *err);
int gpt_buf_append(gpt_buf *b, const void *p, size_t n, gpt_err *err);
int gpt_buf_puts(gpt_buf *b, const char *s, gpt_err *err);
int gpt_buf_printf(gpt_buf *b, gpt_err *err, const char *fmt, ...) GPT_PRINTF(3, 4);
void gpt_buf_reset(gpt_buf *b);
void gpt_buf_free(gpt_buf *b);

/* ---- files ------------------------------------------------------------- */

/* Reads a whole file into a NUL-terminated malloc'd buffer (free() it).
 * max_bytes bounds the size (0: no bound); a larger file is GPT_EDATA. */
int gpt_file_read_all(const char *path, size_t max_bytes, char **out, size_t *len, gpt_err *err);
/* write(2) until done, retrying on EINTR; `what` names the file in errors. */
int gpt_write_all(int fd, const void *p, size_t n, const char *what, gpt_err *err);
/* fsync of a directory, so that a rename inside it is durable. */
int gpt_fsync_dir(const char *dir, gpt_err *err);
/* mkdir -p with mode 0777 & ~umask. */
int gpt_mkdir_p(const char *path, gpt_err *err);
/* The bytes of path that name the first of its directories that does not
 * exist, the first that gpt_mkdir_p(path) would make; 0 when all exist
 * (or path is longer than PATH_MAX). */
size_t gpt_path_first_missing(const char *path);
/* Calls f on each directory that path names from its first `from` bytes (a
 * gpt_path_first_missing) to path itself, the deepest first when down is 1;
 * on none when from is 0 (path may then be NULL). */
void gpt_path_each_dir(const char *path, size_t from, int down, void (*f)(const char *));
/* Removes, the deepest first, the directories gpt_path_each_dir names that
 * are empty: those a gpt_mkdir_p made, from a gpt_path_first_missing taken
 * before it, when what was to fill them failed. One that holds anything
 * stays, and so do its parents. */
void gpt_rmdir_made(const char *path, size_t from);
/* 1 if path exists (any type), 0 if not. */
int gpt_path_exists(const char *path);
/* 1 when path, whether it exists or not, names the directory dir or
 * something below it (links and "." and ".." resolved), else 0 (also when
 * dir does not exist). */
int gpt_path_within(const char *path, const char *dir);

/* An atomic file: written under a temporary name in the same directory
 * (".NAME.tmp.PID.N"), then fsynced, renamed over NAME and the directory
 * fsynced. Until commit, NAME is untouched; abort (or a crash) leaves no NAME.
 * The temporary name starts with '.' so listings and globs skip it. */
typedef struct gpt_afile {
	FILE *fp;        /* write through this (buffered) */
	char *path;      /* final name */
	char *tmp_path;  /* temporary name */
} gpt_afile;

/* Whether an atomic file may be renamed over path: an existing directory
 * (or a link to one), a symbolic link, a device, a FIFO or a socket named
 * as a file to write is an error (GPT_EUSAGE), as the rename would replace
 * it (/dev/null, /dev/stdout, a link to the file meant) rather than write
 * into it; writers check before the work, not at the rename. */
int gpt_out_replaceable(const char *path, gpt_err *err);
/* Opens the temporary of path; a path gpt_out_replaceable refuses is refused. */
int gpt_afile_open(gpt_afile *af, const char *path, gpt_err *err);
/* Flushes, fsyncs and closes the temporary file, NAME still untouched: what
 * can fail for want of space or a bad disk has then failed (the temporary
 * removed and af freed) before a writer of several files replaces any. */
int gpt_afile_sync(gpt_afile *af, gpt_err *err);
/* Syncs (unless done), renames, fsyncs the directory. On failure the
 * temporary file is removed and NAME left as it was, except when only the
 * directory's fsync fails: NAME is then the new file, and the error says
 * so. Frees af either way. */
int gpt_afile_commit(gpt_afile *af, gpt_err *err);
/* Two files of one directory (a dataset's .bin as a, its .idx as b, the
 * file whose presence makes the pair readable): both synced (unless done),
 * then, with SIGINT, SIGTERM, SIGHUP and SIGQUIT blocked, the old b and the
 * old a renamed aside (".NAME.old.PID.N"), a and b renamed into place, the
 * directory fsynced once and the old files removed. A reader sees the old
 * pair, an a alone or neither, then the new pair: never a new a with an old
 * b. A failure puts the old files back (both names as they were); should
 * that fail too, the error says which hidden names hold them. When only
 * the directory's fsync fails, the new pair is in place. Frees both. */
int gpt_afile_commit_pair(gpt_afile *a, gpt_afile *b, gpt_err *err);
/* Closes and removes the temporary file; NAME is left as it was. */
void gpt_afile_abort(gpt_afile *af);
/* Writes a whole buffer to path atomically. */
int gpt_file_write_atomic(const char *path, const void *p, size_t n, gpt_err *err);

/* ---- checksums (xxh3) -------------------------------------------------- */

uint64_t gpt_xxh3_64(const void *p, size_t n);
/* Streaming xxh3-64; the state is opaque and heap-allocated. */
typedef struct gpt_hasher gpt_hasher;
gpt_hasher *gpt_hasher_new(gpt_err *err);
void gpt_hasher_update(gpt_hasher *h, const void *p, size_t n);
uint64_t gpt_hasher_digest(const gpt_hasher *h);
void gpt_hasher_free(gpt_hasher *h);
/* xxh3-64 of a file's contents. */
int gpt_xxh3_file(const char *path, uint64_t *out, gpt_err *err);
/* 16 lower-case hex digits + NUL. */
void gpt_xxh3_hex(uint64_t h, char out[17]);

/* ---- time -------------------------------------------------------------- */

/* Monotonic clock in nanoseconds / seconds. */
uint64_t gpt_now_ns(void);
double gpt_now_s(void);

/* A stopwatch that accumulates across start/stop pairs. */
typedef struct gpt_timer {
	uint64_t start_ns; /* 0 when stopped */
	uint64_t total_ns;
	uint64_t count;    /* completed start/stop pairs */
} gpt_timer;

void gpt_timer_start(gpt_timer *t);
void gpt_timer_stop(gpt_timer *t);
void gpt_timer_reset(gpt_timer *t);
double gpt_timer_seconds(const gpt_timer *t);
/* Mean seconds per completed interval (0 when none). */
double gpt_timer_mean(const gpt_timer *t);

/* ---- log lines --------------------------------------------------------- */

/* FleetX's log line: "[2022-07-27 12:40:00,833] [    INFO] - message", with
 * the time stamp and level in colour only when the stream is a terminal
 * (and NO_COLOR is unset), exactly as FleetX does it. */
typedef enum gpt_log_level {
	GPT_LOG_DEBUG = 0,
	GPT_LOG_INFO,
	GPT_LOG_WARNING,
	GPT_LOG_ERROR,
} gpt_log_level;

typedef struct gpt_log {
	FILE *fp;              /* usually stderr */
	int color;             /* 1: ANSI colour around the header */
	gpt_log_level min;     /* lines below this level are dropped */
	int write_errno;       /* the errno of the first line fp failed to take; 0 while none */
	int64_t lost;          /* lines fp failed to take */
} gpt_log;

/* Colour when fp is a terminal and the environment variable NO_COLOR is unset.
 *
 * A line that fp fails to take (a full disk under a redirected standard
 * output, a pipe whose reader is gone) is lost and counted, and the next
 * line is tried as usual: a log never stops the work it reports on. The
 * first such failure is reported once on stderr as a WARNING line naming
 * the stream ("standard output" for stdout) and the error; the caller reads
 * write_errno and lost to decide what the failure means at the end. */
void gpt_log_init(gpt_log *lg, FILE *fp, gpt_log_level min);
void gpt_log_printf(gpt_log *lg, gpt_log_level level, const char *fmt, ...) GPT_PRINTF(3, 4);
void gpt_log_vprintf(gpt_log *lg, gpt_log_level level, const char *fmt, va_list ap);
/* Formats the header "[YYYY-MM-DD HH:MM:SS,mmm] [   LEVEL] - " for the wall
 * clock time t_ms (milliseconds since the epoch, local time) into out. */
void gpt_log_header(char *out, size_t size, int64_t t_ms, gpt_log_level level, int color);

/* The per-step training line, FleetX's format:
 * "global step 1, epoch: 0, batch: 0, loss: 11.083364487, avg_reader_cost: 0.23392 sec,
 *  avg_batch_cost: 2.05344 sec, speed: 0.49 step/s, ips_total: 3989 tokens/s,
 *  ips: 499 tokens/s, learning rate: 5.55556e-09" */
typedef struct gpt_step_line {
	int64_t step;
	int64_t epoch;
	int64_t batch;
	double loss;
	double avg_reader_cost; /* seconds per step waiting for data */
	double avg_batch_cost;  /* seconds per step */
	double ips_total;       /* tokens/s over all ranks */
	double ips;             /* tokens/s per card */
	double loss_scale;      /* > 0: float16's loss scale, written before the
				 * learning rate as FleetX's later lines do
				 * ("loss_scale: 32768.000000000, "); 0: none */
	double lr;
} gpt_step_line;

/* Writes the message part (no header, no newline) into out; returns what
 * snprintf returns. */
int gpt_step_line_format(char *out, size_t size, const gpt_step_line *s);

/* The evaluation line:
 * "[eval] global step 100, epoch: 0, batch: 99, loss: 5.123456789, ppl: 167.890000,
 *  avg_eval_cost: 0.12345 sec, speed: 8.10 step/s" (speed in eval batches per second;
 *  epoch and batch are those of the step's own line). */
typedef struct gpt_eval_line {
	int64_t step, epoch, batch;
	double loss;
	double avg_eval_cost; /* seconds per eval batch */
} gpt_eval_line;
int gpt_eval_line_format(char *out, size_t size, const gpt_eval_line *e);

/* The checkpoint line:
 * "[checkpoint] global step 100, path: output/step_00000100, size: 123456789 bytes, cost: 3.45 sec" */
int gpt_ckpt_line_format(char *out, size_t size, int64_t step, const char *path, int64_t bytes,
			 double seconds);

/* The loss-scale overflow line (logged at WARNING):
 * "[amp] global step 7, found inf/nan in gradients: skipped the update, loss scale 32768 -> 16384" */
int gpt_amp_skip_line_format(char *out, size_t size, int64_t step, double old_scale, double new_scale);

/* ---- progress ---------------------------------------------------------- */

/* A progress reporter for stderr. On a terminal: one line redrawn at most 10
 * times a second with a bar (when the total is known), the amount done, the
 * rate and the ETA. Otherwise: nothing, or with `plain_interval_s` > 0 a plain
 * line at most that often. The amount is in `unit` ("B" is shown scaled as
 * KB/MB/GB; anything else as a plain count). */
typedef struct gpt_progress {
	FILE *fp;
	int tty;
	const char *label;
	const char *unit;
	int64_t total;       /* <= 0: unknown */
	int64_t done;
	int64_t items;       /* a second count, e.g. documents (shown when > 0) */
	const char *items_unit;
	double start_s;
	double last_draw_s;
	double plain_interval_s;
	int drawn;
} gpt_progress;

/* Terminal detection uses isatty(fileno(fp)); GPT_PROGRESS=0/1 forces it off/on. */
void gpt_progress_init(gpt_progress *p, FILE *fp, const char *label, const char *unit, int64_t total);
void gpt_progress_update(gpt_progress *p, int64_t done, int64_t items);
/* Draws the final state (on a terminal) and ends the line. */
void gpt_progress_finish(gpt_progress *p);
/* Formats the current status into out (used by the drawing and by tests). */
void gpt_progress_format(const gpt_progress *p, double now_s, char *out, size_t size);
/* Human-readable size: "1.5 MB" (decimal units). */
void gpt_format_bytes(double bytes, char *out, size_t size);
/* "1h02m", "3m05s", "12s". */
void gpt_format_duration(double seconds, char *out, size_t size);

/* ---- threads ----------------------------------------------------------- */

/* Runs fn(arg, i) for i in [0, n) on n threads (i = 0 on the caller's) and
 * joins them. Returns the first non-zero value returned by any fn (by index),
 * or GPT_EINTERNAL with a message in err if a thread could not be started. */
typedef int (*gpt_thread_fn)(void *arg, int index);
int gpt_threads_run(int n, gpt_thread_fn fn, void *arg, gpt_err *err);

/* Number of CPUs this process may run on (sched_getaffinity), at least 1. */
int gpt_cpu_count(void);

/* ---- small parsers ----------------------------------------------------- */

/* Strict number parsing: the whole string must be a number in range. */
int gpt_parse_i64(const char *s, int64_t *out);
/* An integer as PyYAML (YAML 1.1, what FleetX and PaddleNLP read their
 * configurations with) resolves one, underscores ignored: [-+]? then a
 * decimal (0, or 1-9 first), 0b binary, 0x hexadecimal, an octal with a
 * leading 0 (017 is 15), or base 60 (1:30 is 90). Not 0o17, 09 or 64.0
 * (PyYAML's strings and floats). 0; -1 when it is none of those;
 * GPT_PARSE_RANGE beyond int64. */
int gpt_parse_yaml_int(const char *s, int64_t *out);
/* gpt_parse_f64: GPT_PARSE_RANGE for a number beyond a double, one that
 * overflows to infinity or a nonzero one that underflows to 0 (*out is set
 * to that: +-HUGE_VAL or 0). */
#define GPT_PARSE_RANGE (-2)
int gpt_parse_f64(const char *s, double *out);
/* true/false/yes/no/on/off/1/0 in any case, and Python's True/False. */
int gpt_parse_bool(const char *s, int *out);

/* Levenshtein distance (bytes, case-insensitive), for "did you mean". */
int gpt_edit_distance(const char *a, const char *b);

/* ---- boxes ------------------------------------------------------------- */

/* An N-d box is the slice of a global tensor that a rank holds under tensor
 * and pipeline parallelism (offset and length per dimension). The model, the
 * optimizer and the checkpoints all speak in boxes. */
#define GPT_MAX_DIMS 4


typedef struct gpt_box {
	int ndim;
	int64_t off[GPT_MAX_DIMS];
	int64_t len[GPT_MAX_DIMS];
} gpt_box;

/* The whole of a tensor of the given shape. */
gpt_box gpt_box_full(int ndim, const int64_t *shape);
int64_t gpt_box_numel(const gpt_box *b);
/* 1 and the overlap in *out when a and b overlap, else 0. */
int gpt_box_intersect(const gpt_box *a, const gpt_box *b, gpt_box *out);
/* 1 when inner lies inside outer. */
int gpt_box_contains(const gpt_box *outer, const gpt_box *inner);
/* Copies region (inside both boxes) from src, a dense row-major array that
 * covers src_box, to dst, a dense row-major array that covers dst_box. */
void gpt_box_copy(void *dst, const gpt_box *dst_box, const void *src, const gpt_box *src_box,
		  const gpt_box *region, size_t elem_size);

/* ---- command-line options ---------------------------------------------- */

/* One table drives both getopt_long parsing and --help, so they cannot
 * disagree. Each program lists its options once. */
typedef struct gpt_opt {
	const char *lng;   /* long name without "--", or NULL */
	int shrt;          /* short letter, or 0 */
	const char *arg;   /* argument placeholder ("FILE"), or NULL for a flag */
	int id;            /* value returned by gpt_opts_next for this option */
	const char *help;  /* one line; NULL: not listed (another spelling of an option) */
} gpt_opt;

typedef struct gpt_opts {
	const gpt_opt *table; /* terminated by an entry with id 0 */
	int argc;
	char **argv;
	int index;         /* next argv element to look at */
	const char *arg;   /* the current option's argument, if it takes one */
	int stop_at_first_operand; /* 1: options end at the first operand (like a launcher) */
} gpt_opts;

/* Returns the id of the next option, 0 at the end of the options, or -1 on a
 * bad option (message in err, code GPT_EUSAGE). Options and operands may mix
 * (argv is permuted as GNU getopt does, unless stop_at_first_operand); after
 * the end, argv[index..argc) are the operands in order ("--" ends options).
 * Uses getopt_long, so only one gpt_opts may be in use at a time. */
void gpt_opts_init(gpt_opts *o, const gpt_opt *table, int argc, char **argv);
int gpt_opts_next(gpt_opts *o, gpt_err *err);
/* Writes the OPTIONS part of --help, one option a line, aligned (an option
 * too wide for the column has its description on the next line). */
void gpt_opts_help(const gpt_opt *table, FILE *fp);
/* After gpt_opts_next said "unknown option --NAME" for arg (--NAME or
 * --NAME=VALUE): when NAME is one of another tool's options in tbl
 * (triples: NAME, whose it is, what to do here; ended by NULL), err becomes
 * "unknown option --NAME (WHOSE); WHAT". A NAME "-X" in tbl is the short
 * option -X, matched when arg is "-X" and getopt refused X. Otherwise err is
 * left as it is. */
void gpt_opts_foreign_hint(const char *arg, const char *const *tbl, gpt_err *err);

/* ---- temporaries removed on a signal ------------------------------------ */

/* The library holds the name of each temporary file (is_dir 0) or
 * directory of plain files (1) it makes, from its creation until it is
 * renamed into place or removed (drop). At most 64 are held; the rest are
 * left to the caller's own cleanup. */
void gpt_temp_hold(const char *path, int is_dir);
void gpt_temp_drop(const char *path);

/* ---- command helpers (for cmd/, never called by the library itself) ----- */

/* Prints "prog: error: MSG" to stderr and returns err->code (70 if unset),
 * for `return gpt_cmd_fail(prog, &err);` in main(). */
int gpt_cmd_fail(const char *prog, const gpt_err *err);
/* gpt_cmd_fail for an unknown option, then, so that a command pasted from
 * another tool is mended in one go, "prog: error: also unknown option
 * --NAME (WHOSE); WHAT" for each later word of the command line (rest,
 * nrest: what the option parser left unread) that hint (a
 * gpt_opts_foreign_hint user) knows as another tool's option. */
int gpt_cmd_fail_options(const char *prog, const gpt_err *err, char **rest, int nrest,
			 void (*hint)(const char *arg, gpt_err *err));
/* After a command printed what it was asked for (--help, --version,
 * --list-keys) to standard output: 0 when it all went out, else
 * "prog: error: standard output: ERROR" on stderr and GPT_EIO, so that a
 * full disk or a closed pipe is not taken for success. */
int gpt_cmd_stdout_done(const char *prog);
/* Prints "prog VERSION" and the build's backends to fp. */
void gpt_cmd_version(const char *prog, FILE *fp);
/* SIGINT, SIGTERM and SIGHUP (unless ignored from the start) remove the
 * temporaries held (gpt_temp_hold), then end the process as the signal
 * would have: an interrupted writer leaves nothing behind. */
void gpt_cmd_remove_temps_on_signals(void);
/* SIGXFSZ ignored (unless a handler is set): a write past the file size
 * limit (ulimit -f, a batch system's RLIMIT_FSIZE) fails with EFBIG, which
 * the writer reports with the file's name and cleans up after, rather
 * than the signal's default action ending the process on the spot with a
 * temporary left behind and no word of which file. */
void gpt_cmd_file_size_limit_as_error(void);

#ifdef __cplusplus
}
#endif

#endif
