/* Helpers for the thin command files in cmd/. */
#include "core.h"

#include <errno.h>
#include <string.h>

int gpt_cmd_fail(const char *prog, const gpt_err *err)
{
	int code = err && err->code ? err->code : GPT_EINTERNAL;
	fprintf(stderr, "%s: error: %s\n", prog,
		err && err->msg[0] ? err->msg : "internal error with no message");
	return code;
}

int gpt_cmd_fail_options(const char *prog, const gpt_err *err, char **rest, int nrest,
			 void (*hint)(const char *arg, gpt_err *err))
{
	int code = gpt_cmd_fail(prog, err);
	for (int i = 0; i < nrest; i++) {
		const char *a = rest[i];
		if (strncmp(a, "--", 2) != 0 || !a[2])
			continue;
		gpt_err e = {0};
		gpt_err_set(&e, GPT_EUSAGE, "unknown option %.*s", (int)strcspn(a, "="), a);
		char plain[sizeof e.msg];
		memcpy(plain, e.msg, sizeof plain);
		hint(a, &e);
		if (strcmp(e.msg, plain) != 0)
			fprintf(stderr, "%s: error: also %s\n", prog, e.msg);
	}
	return code;
}

int gpt_cmd_stdout_done(const char *prog)
{
	errno = 0;
	if (fflush(stdout) == 0 && !ferror(stdout))
		return 0;
	fprintf(stderr, "%s: error: standard output: %s\n", prog, strerror(errno ? errno : EIO));
	return GPT_EIO;
}

void gpt_cmd_version(const char *prog, FILE *fp)
{
	fprintf(fp, "%s (gptkit) %s\n", prog, GPT_VERSION);
}
