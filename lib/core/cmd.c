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
