/* err.h - the error value every fallible call fills: a code and one sentence
 * saying what failed, where and why. The caller owns it, usually on its stack.
 * Uses nothing. */
#ifndef JR_ERR_H
#define JR_ERR_H

enum {
    JR_OK = 0,
    JR_EUSAGE,          /* bad command line or argument */
    JR_ECONFIG,         /* bad configuration file */
    JR_EINPUT,          /* bad job name, payload, option */
    JR_EDB,             /* database error */
    JR_ELUA,            /* error raised in Lua */
    JR_ESYS,            /* system call failed */
    JR_ENOMEM,          /* out of memory */
    JR_ENOTFOUND,       /* no such job, file */
    JR_EPROTO           /* malformed frame between processes */
};

typedef struct jr_err {
    int  code;          /* JR_E...; 0 means no error */
    char msg[512];      /* what failed, where, why */
} jr_err;

/* Formats msg into err (err may be NULL) and returns -1. */
int jr_fail(jr_err *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Like jr_fail, then appends ": " and strerror(errnum). */
int jr_fail_errno(jr_err *err, int code, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Puts the formatted text and ": " before err's message, keeping its code
 * (the message may not be an argument of fmt: it is copied first). Returns
 * -1; err may be NULL. */
int jr_err_prefix(jr_err *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Clears err (NULL is a no-op). */
void jr_err_clear(jr_err *err);

#endif
