/* err.c - filling jr_err. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/err.h"

int
jr_fail(jr_err *err, int code, const char *fmt, ...)
{
    va_list ap;

    if (err == NULL)
        return -1;
    err->code = code;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return -1;
}

int
jr_fail_errno(jr_err *err, int code, int errnum, const char *fmt, ...)
{
    va_list ap;
    size_t n;

    if (err == NULL)
        return -1;
    err->code = code;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    n = strlen(err->msg);
    snprintf(err->msg + n, sizeof err->msg - n, ": %s", strerror(errnum));
    return -1;
}

int
jr_err_prefix(jr_err *err, const char *fmt, ...)
{
    char was[sizeof err->msg];
    va_list ap;
    size_t n;

    if (err == NULL)
        return -1;
    memcpy(was, err->msg, sizeof was);
    was[sizeof was - 1] = '\0';
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    n = strlen(err->msg);
    snprintf(err->msg + n, sizeof err->msg - n, ": %s", was);
    return -1;
}

void
jr_err_clear(jr_err *err)
{
    if (err == NULL)
        return;
    err->code = 0;
    err->msg[0] = '\0';
}
