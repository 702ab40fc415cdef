/* sqlstmt.c - the encoding of a job's statements (sqlstmt.h). A
 * statement is a u32 text length, the text and a NUL, a u16 count of
 * parameters, then each as a type byte and its value (i64, f64, one
 * byte, or a u32 length, the bytes and a NUL), in host byte order: the
 * worker and the master are one binary on one machine. */
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "base/sqlstmt.h"

/* The first words of statements that would end, split or leave the
 * transaction the job's statements run in, or change the session, with
 * their lengths, each compared only when its length and first letter
 * are the word's (a strlen of each, then a strncasecmp of seven, were
 * most of a jobrunner.sql call's check: 950 instructions, now 290). */
#define W(s) {s, sizeof s - 1}
static const struct { const char *w; size_t n; } refused[] = {
    W("begin"), W("commit"), W("rollback"), W("savepoint"), W("release"),
    W("end"), W("abort"), W("start"), W("set"), W("reset"), W("attach"),
    W("detach"), W("vacuum"), W("pragma"), W("prepare"), W("discard"),
    W("listen"), W("unlisten"), W("notify"), W("lock"), W("copy"),
    {NULL, 0}
};
#undef W

/* Skips spaces and SQL comments from p; returns where the text starts. */
static const char *
skip_blank(const char *p, const char *end)
{
    while (p < end) {
        if (isspace((unsigned char)*p)) {
            p++;
        } else if (end - p >= 2 && p[0] == '-' && p[1] == '-') {
            while (p < end && *p != '\n')
                p++;
        } else if (end - p >= 2 && p[0] == '/' && p[1] == '*') {
            const char *q = p + 2;
            while (q + 1 < end && !(q[0] == '*' && q[1] == '/'))
                q++;
            p = q + 1 < end ? q + 2 : end;
        } else {
            break;
        }
    }
    return p;
}

const char *
jr_sql_text_check(const char *text, size_t len)
{
    const char *p, *end = text + len, *w;
    size_t n;
    int i;

    if (len > JR_SQL_TEXT_MAX)
        return "the text is over 65536 bytes";
    if (memchr(text, '\0', len) != NULL)
        return "the text holds a NUL byte";
    p = skip_blank(text, end);
    if (p == end)
        return "the text is empty";
    for (w = p; w < end && (isalpha((unsigned char)*w) || *w == '_'); w++)
        ;
    n = (size_t)(w - p);
    for (i = 0; refused[i].w != NULL; i++)
        if (refused[i].n == n && (*p | 0x20) == refused[i].w[0] &&
            strncasecmp(p, refused[i].w, n) == 0)
            return "a statement that controls the transaction or the "
                   "session is refused (it runs inside the job's)";
    return NULL;
}

static void
put(jr_buf *b, const void *v, size_t n)
{
    jr_buf_put(b, v, n);        /* oom shows in b->oom */
}

void
jr_sql_put_text(jr_buf *b, const char *text, size_t len, int nparams)
{
    uint32_t l = (uint32_t)len;
    uint16_t np = (uint16_t)nparams;

    put(b, &l, sizeof l);
    put(b, text, len);
    put(b, "", 1);
    put(b, &np, sizeof np);
}

void
jr_sql_put_param(jr_buf *b, const jr_sqlval *v)
{
    unsigned char t = (unsigned char)v->type, one;
    uint32_t l;

    put(b, &t, 1);
    switch (v->type) {
    case JR_SQLV_INT:
        put(b, &v->i, sizeof v->i);
        break;
    case JR_SQLV_FLOAT:
        put(b, &v->f, sizeof v->f);
        break;
    case JR_SQLV_BOOL:
        one = v->i != 0;
        put(b, &one, 1);
        break;
    case JR_SQLV_TEXT:
        l = (uint32_t)v->len;
        put(b, &l, sizeof l);
        put(b, v->s, v->len);
        put(b, "", 1);
        break;
    default:
        break;
    }
}

/* Copies n bytes at *pos into v; 0, or -1 past the end. */
static int
get(const char *p, size_t len, size_t *pos, void *v, size_t n)
{
    if (len - *pos < n)
        return -1;
    memcpy(v, p + *pos, n);
    *pos += n;
    return 0;
}

/* A string of l bytes and its NUL at *pos; NULL when malformed. */
static const char *
get_str(const char *p, size_t len, size_t *pos, uint32_t l)
{
    const char *s = p + *pos;

    if (len - *pos < (size_t)l + 1 || s[l] != '\0' || memchr(s, 0, l))
        return NULL;
    *pos += (size_t)l + 1;
    return s;
}

static int
get_param(const char *p, size_t len, size_t *pos, jr_sqlval *v)
{
    unsigned char t, one;
    uint32_t l;

    memset(v, 0, sizeof *v);
    if (get(p, len, pos, &t, 1) < 0)
        return -1;
    v->type = t;
    switch (t) {
    case JR_SQLV_NULL:
        return 0;
    case JR_SQLV_INT:
        return get(p, len, pos, &v->i, sizeof v->i);
    case JR_SQLV_FLOAT:
        return get(p, len, pos, &v->f, sizeof v->f);
    case JR_SQLV_BOOL:
        if (get(p, len, pos, &one, 1) < 0 || one > 1)
            return -1;
        v->i = one;
        return 0;
    case JR_SQLV_TEXT:
        if (get(p, len, pos, &l, sizeof l) < 0 ||
            (v->s = get_str(p, len, pos, l)) == NULL)
            return -1;
        v->len = l;
        return 0;
    default:
        return -1;
    }
}

int
jr_sql_next(const char *p, size_t n, size_t *pos, jr_sqlstmt *st)
{
    uint32_t l;
    uint16_t np;
    int i;

    if (*pos == n)
        return 0;
    if (get(p, n, pos, &l, sizeof l) < 0 || l == 0 ||
        l > JR_SQL_TEXT_MAX || (st->text = get_str(p, n, pos, l)) == NULL ||
        get(p, n, pos, &np, sizeof np) < 0 || np > JR_SQL_PARAMS_MAX)
        return -1;
    st->len = l;
    st->nparams = np;
    for (i = 0; i < np; i++)
        if (get_param(p, n, pos, &st->params[i]) < 0)
            return -1;
    return 1;
}

int
jr_sql_check(const char *p, size_t len, int n)
{
    jr_sqlstmt st;
    size_t pos = 0;
    int k = 0, rc;

    if (len > JR_SQL_BYTES_MAX || n < 0 || n > JR_SQL_STMTS_MAX)
        return -1;
    while ((rc = jr_sql_next(p, len, &pos, &st)) == 1)
        k++;
    return rc == 0 && k == n ? 0 : -1;
}
