/* sqlstmt.h - the statements a handler's jobrunner.sql records
 * (docs/handlers.md, "Writes that commit with the job"): their caps, the
 * checks a text passes, and the one encoding they travel in from the
 * worker, through the result frame, to the backend that runs them in the
 * transaction recording the job's success. Owns the codec only. Uses
 * util.h for the buffer. */
#ifndef JR_SQLSTMT_H
#define JR_SQLSTMT_H

#include <stddef.h>
#include <stdint.h>

#include "base/util.h"

#define JR_SQL_TEXT_MAX   65536     /* bytes of one statement's text */
#define JR_SQL_PARAMS_MAX 100       /* parameters of one statement */
#define JR_SQL_BYTES_MAX  (4u << 20) /* bytes of a job's statements and
                                       their parameters, encoded */
#define JR_SQL_STMTS_MAX  1000      /* statements of one job */
#define JR_SQL_ERR_MAX    600       /* bytes of a failed statement's
                                       message (jr_result.sql_error) */

/* A parameter's type. */
enum {
    JR_SQLV_NULL = 0,           /* nil */
    JR_SQLV_INT,                /* i: a 64-bit integer, exact */
    JR_SQLV_FLOAT,              /* f */
    JR_SQLV_TEXT,               /* s, len bytes, NUL-terminated, no NUL */
    JR_SQLV_BOOL                /* i: 0 or 1 */
};

typedef struct jr_sqlval {
    int         type;           /* JR_SQLV_* */
    int64_t     i;
    double      f;
    const char *s;              /* borrowed from the encoding */
    size_t      len;
} jr_sqlval;

/* One decoded statement; text borrowed from the encoding, NUL-terminated. */
typedef struct jr_sqlstmt {
    const char *text;
    size_t      len;
    int         nparams;
    jr_sqlval   params[JR_SQL_PARAMS_MAX];
} jr_sqlstmt;

/* Checks a statement's text of len bytes: not empty, at most
 * JR_SQL_TEXT_MAX bytes, no NUL byte, and not one that would end or
 * split the transaction it runs in (BEGIN, COMMIT, ROLLBACK, SAVEPOINT,
 * RELEASE, END, ABORT, START, SET, RESET, ATTACH, DETACH, VACUUM, PRAGMA,
 * after comments and spaces): NULL, or why not, a static string. */
const char *jr_sql_text_check(const char *text, size_t len);

/* Appends a statement's text to b: call once, then jr_sql_put_param for
 * each of nparams parameters, in order. */
void jr_sql_put_text(jr_buf *b, const char *text, size_t len, int nparams);
void jr_sql_put_param(jr_buf *b, const jr_sqlval *v);

/* Decodes the statement at *pos of the encoding p[0..n) into st and moves
 * *pos past it. Returns 1, 0 at the end, -1 when malformed. */
int  jr_sql_next(const char *p, size_t n, size_t *pos, jr_sqlstmt *st);

/* Checks a whole encoding holds n statements and nothing else: 0 or -1. */
int  jr_sql_check(const char *p, size_t len, int n);

#endif
