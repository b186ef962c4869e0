/* What the libFuzzer harnesses share: a private scratch directory, writing
 * the input (or parts of it) to files there, splitting an input into parts,
 * the repository root (for share/gpt2), and a check that turns a broken
 * library promise into a crash the fuzzer records.
 *
 * A harness is one fuzz-NAME.c defining LLVMFuzzerTestOneInput (and, when it
 * needs set-up, LLVMFuzzerInitialize, which must call fuzz_init). Inputs are
 * never trusted to name paths: every file a harness writes lies in the
 * scratch directory under a fixed name. */
#ifndef GPT_FUZZ_H
#define GPT_FUZZ_H

#include "core/core.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The separator between the parts of a structured input: a line of its
 * own, readable in the seed files. */
#define FUZZ_SEP "\n%%%%\n"
#define FUZZ_SEP_LEN 6

typedef struct fuzz_part {
	const uint8_t *p;
	size_t n;
} fuzz_part;

static char fuzz_dir[PATH_MAX];  /* the scratch directory */
static char fuzz_root[PATH_MAX]; /* the repository root, "" when unknown */
static int fuzz_verbose;         /* FUZZ_VERBOSE=1: print why inputs fail */

/* With FUZZ_VERBOSE=1, says what became of an input (for writing seeds). */
#define FUZZ_SAY(...)                                  \
	do {                                           \
		if (fuzz_verbose) {                    \
			fprintf(stderr, "fuzz: " __VA_ARGS__); \
			fputc('\n', stderr);          \
		}                                      \
	} while (0)

#define FUZZ_CHECK(cond, ...)                                                                \
	do {                                                                                 \
		if (!(cond)) {                                                               \
			fprintf(stderr, "fuzz: check failed at %s:%d: %s: ", __FILE__, __LINE__, \
				#cond);                                                      \
			fprintf(stderr, __VA_ARGS__);                                        \
			fputc('\n', stderr);                                                 \
			abort();                                                             \
		}                                                                            \
	} while (0)

static inline void fuzz_cleanup(void)
{
	if (!fuzz_dir[0])
		return;
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", fuzz_dir);
	if (system(cmd) != 0)
		fprintf(stderr, "fuzz: could not remove %s\n", fuzz_dir);
}

/* The scratch directory, the repository root (from GPT_ROOT, else two levels
 * above build/fuzz/<harness>), and one OpenMP thread. */
static inline void fuzz_init(const char *argv0)
{
	setenv("OMP_NUM_THREADS", "1", 1);
	fuzz_verbose = getenv("FUZZ_VERBOSE") && atoi(getenv("FUZZ_VERBOSE")) > 0;
	setenv("OPENBLAS_NUM_THREADS", "1", 1);
	const char *tmp = getenv("TMPDIR");
	snprintf(fuzz_dir, sizeof fuzz_dir, "%s/gptkit-fuzz.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(fuzz_dir)) {
		perror("fuzz: mkdtemp");
		exit(1);
	}
	atexit(fuzz_cleanup);
	const char *root = getenv("GPT_ROOT");
	if (root && *root) {
		snprintf(fuzz_root, sizeof fuzz_root, "%s", root);
		return;
	}
	char exe[PATH_MAX];
	if (argv0 && realpath(argv0, exe)) {
		for (int up = 0; up < 3; up++) {
			char *s = strrchr(exe, '/');
			if (s)
				*s = 0;
		}
		snprintf(fuzz_root, sizeof fuzz_root, "%s", exe);
	}
}

/* path = <scratch>/name */
static inline void fuzz_path(char *out, size_t size, const char *name)
{
	snprintf(out, size, "%s/%s", fuzz_dir, name);
}

/* Writes p[0..n) to <scratch>/name (replacing it); aborts on failure, which
 * is the machine's fault, not the input's. */
static inline void fuzz_write(const char *name, const void *p, size_t n)
{
	char path[PATH_MAX];
	fuzz_path(path, sizeof path, name);
	FILE *fp = fopen(path, "wb");
	FUZZ_CHECK(fp != NULL, "%s", path);
	FUZZ_CHECK(n == 0 || fwrite(p, 1, n, fp) == n, "%s", path);
	FUZZ_CHECK(fclose(fp) == 0, "%s", path);
}

/* Splits data at FUZZ_SEP into at most max parts (the last takes the rest);
 * returns how many. */
static inline int fuzz_split(const uint8_t *data, size_t n, fuzz_part *parts, int max)
{
	int k = 0;
	while (k < max - 1) {
		const uint8_t *s = memmem(data, n, FUZZ_SEP, FUZZ_SEP_LEN);
		if (!s)
			break;
		parts[k].p = data;
		parts[k].n = (size_t)(s - data);
		k++;
		n -= parts[k - 1].n + FUZZ_SEP_LEN;
		data = s + FUZZ_SEP_LEN;
	}
	parts[k].p = data;
	parts[k].n = n;
	return k + 1;
}

/* A NUL-terminated copy (free() it). */
static inline char *fuzz_strndup(const uint8_t *p, size_t n)
{
	char *s = malloc(n + 1);
	FUZZ_CHECK(s != NULL, "out of memory");
	if (n)
		memcpy(s, p, n);
	s[n] = 0;
	return s;
}

/* <root>/share/gpt2 when it holds the GPT-2 vocabulary, else NULL. */
static inline const char *fuzz_gpt2_dir(void)
{
	static char dir[PATH_MAX + 16];
	char p[PATH_MAX + 32];
	if (!fuzz_root[0])
		return NULL;
	snprintf(dir, sizeof dir, "%s/share/gpt2", fuzz_root);
	snprintf(p, sizeof p, "%s/encoder.json", dir);
	if (access(p, R_OK) != 0)
		return NULL;
	snprintf(p, sizeof p, "%s/vocab.bpe", dir);
	return access(p, R_OK) == 0 ? dir : NULL;
}

#endif
