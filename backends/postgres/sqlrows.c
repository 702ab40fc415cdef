/* sqlrows.c - identical jobrunner.sql statements of a round run as one:
 * a plain `INSERT INTO t [(cols)] VALUES (...)` whose row holds only
 * parameters, literals and casts, called by consecutive jobs of a batch,
 * becomes one multi-row INSERT of their rows in the same order (each
 * statement on PostgreSQL costs a Bind, an Execute and an executor's
 * start and end, several times the row's own insert). Only into a plain
 * table without triggers, rules or row security: the check statement
 * here, which the pipeline runs first, fails (division by zero) when the
 * table has any, and the batch then runs statement by statement
 * (sqlrun.c). Pure text work but for that check's text. Uses pg_int.h. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "postgres/pg_int.h"
#include "base/sqlstmt.h"

/* Fails (22012) when the table named $1 may not take a batch's rows as
 * one statement; no row (so no failure) when it does not exist: its
 * INSERT fails on its own. */
const char jr_pg_rows_check[] =
    "SELECT 1 / (c.relkind = 'r' AND NOT c.relhasrules"
    " AND NOT c.relrowsecurity AND NOT EXISTS (SELECT FROM pg_trigger t"
    " WHERE t.tgrelid = c.oid AND NOT t.tgisinternal))::int"
    " FROM pg_class c WHERE c.oid = to_regclass($1)";

static const char *
blank(const char *p, const char *end)
{
    while (p < end && isspace((unsigned char)*p))
        p++;
    return p;
}

/* The keyword w (lower case) at p, followed by no identifier byte: past
 * it, or NULL. */
static const char *
word(const char *p, const char *end, const char *w)
{
    size_t n = strlen(w);

    if ((size_t)(end - p) < n || strncasecmp(p, w, n) != 0)
        return NULL;
    p += n;
    if (p < end && (isalnum((unsigned char)*p) || *p == '_' || *p == '$'))
        return NULL;
    return p;
}

/* An identifier, plain or double-quoted: past it, or NULL. */
static const char *
ident(const char *p, const char *end)
{
    if (p < end && *p == '"') {
        for (p++; p < end; p++)
            if (*p == '"' && !(p + 1 < end && p[1] == '"'))
                return p + 1;
            else if (*p == '"')
                p++;
        return NULL;
    }
    if (p >= end || !(isalpha((unsigned char)*p) || *p == '_'))
        return NULL;
    while (p < end && (isalnum((unsigned char)*p) || *p == '_' || *p == '$'))
        p++;
    return p;
}

/* The row at p (its "("): past its ")", or NULL when it holds anything
 * but parameters $1..$np, numbers, plain strings, casts to a named type,
 * NULL, TRUE, FALSE and DEFAULT (no comment: a quote or a $n in one
 * is none). seen[k] marks parameter k. */
static const char *
row(const char *p, const char *end, int np, char *seen)
{
    const char *q;
    long k;

    for (p++; p < end; ) {
        if (isspace((unsigned char)*p) || *p == ',') {
            p++;
        } else if (*p == ')') {
            return p + 1;
        } else if (*p == '$') {
            for (k = 0, q = ++p; p < end && isdigit((unsigned char)*p); p++)
                if ((k = k * 10 + (*p - '0')) > np)
                    return NULL;
            if (p == q || k < 1)
                return NULL;
            seen[k] = 1;
        } else if (*p == '-' && p + 1 < end && p[1] == '-') {
            return NULL;                /* a comment: its quotes are not
                                           strings, nor its $n ours */
        } else if (isdigit((unsigned char)*p) || *p == '-' || *p == '.') {
            for (p++; p < end && (isdigit((unsigned char)*p) || *p == '.');)
                p++;
        } else if (*p == '\'') {
            for (p++; p < end; p++) {
                if (*p == '\\')
                    return NULL;        /* as the server's settings say */
                if (*p == '\'' && !(p + 1 < end && p[1] == '\''))
                    break;
                if (*p == '\'')
                    p++;
            }
            if (p++ >= end)
                return NULL;
        } else if (*p == ':' && p + 1 < end && p[1] == ':') {
            p = blank(p + 2, end);
            if ((p = ident(p, end)) == NULL)
                return NULL;
        } else if ((q = word(p, end, "null")) || (q = word(p, end, "true")) ||
                   (q = word(p, end, "false")) ||
                   (q = word(p, end, "default"))) {
            p = q;
        } else {
            return NULL;
        }
    }
    return NULL;
}

int
jr_pg_rows_shape(const char *text, size_t len, int np, jr_pg_rows *s)
{
    const char *p = text, *end = text + len, *q;
    char seen[JR_SQL_PARAMS_MAX + 1];
    int k;

    if (np < 0 || np > JR_SQL_PARAMS_MAX)
        return 0;
    memset(seen, 0, sizeof seen);
    p = blank(p, end);
    if ((p = word(p, end, "insert")) == NULL || p == end ||
        !isspace((unsigned char)*p) ||
        (p = word(blank(p, end), end, "into")) == NULL)
        return 0;
    s->name = p = blank(p, end);
    if ((p = ident(p, end)) == NULL)
        return 0;
    if (p < end && *p == '.' && (p = ident(p + 1, end)) == NULL)
        return 0;
    s->name_len = (size_t)(p - s->name);
    p = blank(p, end);
    if (p < end && *p == '(') {
        do {
            if ((p = ident(blank(p + 1, end), end)) == NULL)
                return 0;
            p = blank(p, end);
        } while (p < end && *p == ',');
        if (p >= end || *p != ')')
            return 0;
        p = blank(p + 1, end);
    }
    if ((p = word(p, end, "values")) == NULL)
        return 0;
    p = blank(p, end);
    if (p >= end || *p != '(')
        return 0;
    s->row = (size_t)(p - text);
    if ((q = row(p, end, np, seen)) == NULL)
        return 0;
    s->row_end = (size_t)(q - text);
    p = blank(q, end);
    if (p < end && *p == ';')
        p = blank(p + 1, end);
    if (p != end)
        return 0;
    for (k = 1; k <= np; k++)
        if (!seen[k])
            return 0;           /* a parameter no row takes */
    return 1;
}

/* "$" and parameter number v (positive) at num (16 bytes); returns the
 * length. snprintf cost a row of one parameter about 400 instructions,
 * rebuilt for every INSERT of a batch. */
static size_t
dollar(char *num, long v)
{
    char tmp[20];
    size_t n = 0, k = 0;

    do
        tmp[n++] = (char)('0' + v % 10);
    while ((v /= 10) != 0 && n < 14);
    num[k++] = '$';
    while (n > 0)
        num[k++] = tmp[--n];
    return k;
}

char *
jr_pg_rows_text(const char *text, size_t len, const jr_pg_rows *s, int np,
                int m)
{
    jr_buf b = {0};
    const char *p, *r = text + s->row, *end = text + s->row_end;
    char num[16];
    int i;
    long k;

    jr_buf_put(&b, text, s->row);
    for (i = 0; i < m; i++) {
        if (i > 0)
            jr_buf_put(&b, ", ", 2);
        for (p = r; p < end; p++) {
            if (*p == '\'') {           /* a string: as it is */
                const char *q = p + 1;
                while (q < end && !(*q == '\'' && !(q + 1 < end &&
                                                    q[1] == '\'')))
                    q += *q == '\'' ? 2 : 1;
                jr_buf_put(&b, p, (size_t)(q + 1 - p));
                p = q;
            } else if (*p == ':' && p + 1 < end && p[1] == ':') {
                /* a cast's type name, "quoted" or with a $: as it is */
                const char *q = ident(blank(p + 2, end), end);
                jr_buf_put(&b, p, (size_t)(q - p));
                p = q - 1;
            } else if (*p == '$') {
                for (k = 0; p + 1 < end && isdigit((unsigned char)p[1]); p++)
                    k = k * 10 + (p[1] - '0');
                jr_buf_put(&b, num, dollar(num, k + (long)i * np));
            } else {
                jr_buf_put(&b, p, 1);
            }
        }
    }
    jr_buf_put(&b, end, len - s->row_end);
    jr_buf_put(&b, "", 1);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}
