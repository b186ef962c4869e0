/* Error values: a status code and a one-line message, passed by the caller. */
#include "core.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int gpt_err_vset(gpt_err *err, int code, const char *fmt, va_list ap)
{
	if (!err)
		return code;
	err->code = code;
	vsnprintf(err->msg, sizeof err->msg, fmt, ap);
	/* A message is one line: fold any newline a caller let through. */
	for (char *p = err->msg; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	return code;
}

int gpt_err_set(gpt_err *err, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	gpt_err_vset(err, code, fmt, ap);
	va_end(ap);
	return code;
}

static void append_strerror(gpt_err *err, int errnum)
{
	size_t n = strlen(err->msg);
	snprintf(err->msg + n, sizeof err->msg - n, ": %s", strerror(errnum));
}

int gpt_err_errno(gpt_err *err, int code, int errnum, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	gpt_err_vset(err, code, fmt, ap);
	va_end(ap);
	if (err)
		append_strerror(err, errnum);
	return code;
}

int gpt_err_errno_read(gpt_err *err, int errnum, const char *fmt, ...)
{
	int code = (errnum == ENOENT || errnum == ENOTDIR) ? GPT_ENOINPUT : GPT_EIO;
	va_list ap;
	va_start(ap, fmt);
	gpt_err_vset(err, code, fmt, ap);
	va_end(ap);
	if (err)
		append_strerror(err, errnum);
	return code;
}

int gpt_err_prefix(gpt_err *err, const char *fmt, ...)
{
	if (!err)
		return 0;
	char prefix[GPT_ERR_MSG_MAX], old[GPT_ERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof prefix, fmt, ap);
	va_end(ap);
	memcpy(old, err->msg, sizeof old);
	snprintf(err->msg, sizeof err->msg, "%s: %s", prefix, old);
	return err->code;
}

void gpt_err_clear(gpt_err *err)
{
	if (err) {
		err->code = 0;
		err->msg[0] = '\0';
	}
}

int gpt_err_nomem(gpt_err *err, size_t bytes, const char *what)
{
	return gpt_err_set(err, GPT_EINTERNAL, "out of memory allocating %zu bytes for %s",
			   bytes, what ? what : "data");
}
