/* roquery.c - jobrunner.query's read-only connection (roquery.h), both
 * engines: libpq with default_transaction_read_only in the connection's
 * options, or the queue's SQLite file opened read-only. Each result is
 * kept in the handle (its PGresult, or SQLite's values copied into one
 * buffer) until the next query. Uses caps.h for the URL's file,
 * sqlstmt.h, util.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>
#include <sqlite3.h>

#include "caps.h"
#include "roquery.h"
#include "url.h"

struct jr_roq {
    char         *url;          /* the backend URL (PostgreSQL conninfo) */
    char         *file;         /* SQLite: the queue's file, else NULL */
    char         *attach;       /* SQLite: attached as app, or NULL */
    char         *role;         /* PostgreSQL: SET ROLE to it, or NULL */
    PGconn       *pg;
    sqlite3      *lite;
    PGresult     *res;          /* the last PostgreSQL result */
    jr_buf        data;         /* SQLite: the last result's bytes */
    jr_sqlval    *vals;         /* the last result's values */
    size_t        nvals;        /* slots in vals */
    const char  **names;        /* the last result's column names */
    jr_roq_result out;
};

static char *
dup_or_null(const char *s, int *oom)
{
    char *d;

    if (s == NULL || *s == '\0')
        return NULL;
    if ((d = strdup(s)) == NULL)
        *oom = 1;
    return d;
}

jr_roq *
jr_roq_new(const char *url, const char *attach, const char *role)
{
    jr_roq *q = calloc(1, sizeof *q);
    const char *file = url != NULL ? jr_url_file(url) : NULL;
    int oom = 0;

    if (q == NULL)
        return NULL;
    q->url = dup_or_null(url, &oom);
    q->file = dup_or_null(file, &oom);
    q->attach = dup_or_null(attach, &oom);
    q->role = dup_or_null(role, &oom);
    if (oom) {
        jr_roq_free(q);
        return NULL;
    }
    return q;
}

/* Forgets the last result. */
static void
drop_result(jr_roq *q)
{
    PQclear(q->res);
    q->res = NULL;
    jr_buf_reset(&q->data);
    free(q->names);
    q->names = NULL;
    memset(&q->out, 0, sizeof q->out);
}

static void
disconnect(jr_roq *q)
{
    drop_result(q);
    PQfinish(q->pg);
    q->pg = NULL;
    sqlite3_close_v2(q->lite);
    q->lite = NULL;
}

void
jr_roq_free(jr_roq *q)
{
    if (q == NULL)
        return;
    disconnect(q);
    jr_buf_free(&q->data);
    free(q->vals);
    free(q->url);
    free(q->file);
    free(q->attach);
    free(q->role);
    free(q);
}

/* Makes room for n values (at least twice the old room: a row at a
 * time); 0 or -1. */
static int
vals_room(jr_roq *q, size_t n)
{
    jr_sqlval *v;

    if (n <= q->nvals)
        return 0;
    if (n < q->nvals * 2)
        n = q->nvals * 2;
    if ((v = realloc(q->vals, n * sizeof *v)) == NULL)
        return -1;
    q->vals = v;
    q->nvals = n;
    return 0;
}

/* src on one line, at most size - 1 bytes, into dst. */
static void
oneline(char *dst, size_t size, const char *src)
{
    size_t n = 0;

    for (; src != NULL && *src && n + 1 < size; src++)
        dst[n++] = *src == '\n' || *src == '\r' ? ' ' : *src;
    while (n > 0 && dst[n - 1] == ' ')
        n--;
    dst[n] = '\0';
}

/* --- PostgreSQL ------------------------------------------------------ */

/* Connects q->pg read-only: the URL's own options and
 * -c default_transaction_read_only=on; 0, or -1 with why. */
static int
pg_connect(jr_roq *q, char *why, size_t size)
{
    static const char ro[] = "-c default_transaction_read_only=on";
    const char *keys[] = {"dbname", "fallback_application_name", "options",
                          NULL};
    const char *vals[] = {q->url, "jobrunner query", ro, NULL};
    PQconninfoOption *opts, *o;
    char *options = NULL, msg[300], masked[512];
    PGresult *r;

    /* a URL the runner refuses (libpq would quote pieces of a password) */
    if (jr_url_mask(q->url, masked, sizeof masked) < 0) {
        snprintf(why, size, "cannot connect to PostgreSQL: %s", masked);
        return -1;
    }
    opts = PQconninfoParse(q->url, NULL);
    for (o = opts; o != NULL && o->keyword != NULL; o++)
        if (strcmp(o->keyword, "options") == 0 && o->val != NULL &&
            *o->val != '\0' &&
            (options = malloc(strlen(o->val) + sizeof ro + 1)) != NULL) {
            sprintf(options, "%s %s", o->val, ro);
            vals[2] = options;
        }
    PQconninfoFree(opts);
    q->pg = PQconnectdbParams(keys, vals, 1);
    free(options);
    if (q->pg == NULL || PQstatus(q->pg) != CONNECTION_OK) {
        oneline(msg, sizeof msg, q->pg ? PQerrorMessage(q->pg)
                                       : "out of memory");
        snprintf(why, size, "cannot connect to PostgreSQL: %s", msg);
        disconnect(q);
        return -1;
    }
    if (q->role != NULL) {
        char *id = PQescapeIdentifier(q->pg, q->role, strlen(q->role));
        char sql[160];

        snprintf(sql, sizeof sql, "SET ROLE %s", id ? id : "\"\"");
        PQfreemem(id);
        r = PQexec(q->pg, sql);
        if (PQresultStatus(r) != PGRES_COMMAND_OK) {
            oneline(msg, sizeof msg, PQerrorMessage(q->pg));
            snprintf(why, size, "SET ROLE to handler_role: %s", msg);
            PQclear(r);
            disconnect(q);
            return -1;
        }
        PQclear(r);
    }
    return 0;
}

/* PostgreSQL's type oids that read as Lua integers, floats, booleans. */
enum { OID_BOOL = 16, OID_INT8 = 20, OID_INT2 = 21, OID_INT4 = 23,
       OID_OID = 26, OID_FLOAT4 = 700, OID_FLOAT8 = 701 };

static int
pg_run(jr_roq *q, const jr_sqlstmt *st, char *why, size_t size)
{
    const char *params[JR_SQL_PARAMS_MAX];
    char nums[JR_SQL_PARAMS_MAX][32], msg[300], det[200];
    int i, r, c, nrows, ncols;
    size_t bytes = 0;

    for (i = 0; i < st->nparams; i++) {
        const jr_sqlval *v = &st->params[i];
        params[i] = NULL;
        if (v->type == JR_SQLV_INT)
            snprintf(nums[i], sizeof nums[i], "%lld", (long long)v->i);
        else if (v->type == JR_SQLV_FLOAT)
            snprintf(nums[i], sizeof nums[i], "%.17g", v->f);
        else if (v->type == JR_SQLV_BOOL)
            snprintf(nums[i], sizeof nums[i], "%s", v->i ? "true" : "false");
        if (v->type == JR_SQLV_TEXT)
            params[i] = v->s;
        else if (v->type != JR_SQLV_NULL)
            params[i] = nums[i];
    }
    q->res = PQexecParams(q->pg, st->text, st->nparams, NULL, params, NULL,
                          NULL, 0);
    if (PQresultStatus(q->res) != PGRES_TUPLES_OK &&
        PQresultStatus(q->res) != PGRES_COMMAND_OK) {
        const char *state = PQresultErrorField(q->res, PG_DIAG_SQLSTATE);
        const char *primary = PQresultErrorField(q->res,
                                                 PG_DIAG_MESSAGE_PRIMARY);
        oneline(msg, sizeof msg, primary ? primary : PQerrorMessage(q->pg));
        oneline(det, sizeof det, PQresultErrorField(q->res,
                                                    PG_DIAG_MESSAGE_DETAIL));
        snprintf(why, size, "%.250s%s%.180s%s (SQLSTATE %.5s)", msg,
                 *det ? " (" : "", det, *det ? ")" : "", state ? state : "?");
        if (PQstatus(q->pg) != CONNECTION_OK)
            disconnect(q);
        return -1;
    }
    nrows = PQntuples(q->res);
    ncols = PQnfields(q->res);
    if (nrows > JR_QUERY_ROWS_MAX)
        return snprintf(why, size, "%d rows, over %d (add a LIMIT)", nrows,
                        JR_QUERY_ROWS_MAX), -1;
    if (vals_room(q, (size_t)nrows * ncols + 1) < 0 ||
        (q->names = malloc((ncols + 1) * sizeof *q->names)) == NULL)
        return snprintf(why, size, "out of memory"), -1;
    for (c = 0; c < ncols; c++) {
        q->names[c] = PQfname(q->res, c);
        bytes += strlen(q->names[c]);
    }
    for (r = 0; r < nrows; r++)
        for (c = 0; c < ncols; c++) {
            jr_sqlval *v = &q->vals[(size_t)r * ncols + c];
            const char *s = PQgetvalue(q->res, r, c);
            memset(v, 0, sizeof *v);
            if (PQgetisnull(q->res, r, c)) {
                v->type = JR_SQLV_NULL;
                continue;
            }
            v->len = (size_t)PQgetlength(q->res, r, c);
            bytes += v->len;
            switch (PQftype(q->res, c)) {
            case OID_INT2: case OID_INT4: case OID_INT8: case OID_OID:
                v->type = JR_SQLV_INT;
                v->i = strtoll(s, NULL, 10);
                break;
            case OID_FLOAT4: case OID_FLOAT8:
                v->type = JR_SQLV_FLOAT;
                v->f = strtod(s, NULL);
                break;
            case OID_BOOL:
                v->type = JR_SQLV_BOOL;
                v->i = *s == 't';
                break;
            default:
                v->type = JR_SQLV_TEXT;
                v->s = s;
            }
        }
    if (bytes > JR_QUERY_BYTES_MAX)
        return snprintf(why, size, "%zu bytes of values, over %u (select "
                        "less)", bytes, JR_QUERY_BYTES_MAX), -1;
    q->out.ncols = ncols;
    q->out.nrows = nrows;
    return 0;
}

/* --- SQLite ---------------------------------------------------------- */

static int
lite_connect(jr_roq *q, char *why, size_t size)
{
    sqlite3_stmt *s = NULL;
    int rc;

    rc = sqlite3_open_v2(q->file, &q->lite, SQLITE_OPEN_READONLY |
                         SQLITE_OPEN_NOMUTEX, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_extended_result_codes(q->lite, 1);
        sqlite3_busy_timeout(q->lite, 5000);
    }
    if (rc == SQLITE_OK && q->attach != NULL) {
        rc = sqlite3_prepare_v2(q->lite, "ATTACH DATABASE ?1 AS app", -1, &s,
                                NULL);
        if (rc == SQLITE_OK) {
            sqlite3_bind_text(s, 1, q->attach, -1, SQLITE_STATIC);
            rc = sqlite3_step(s) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
        }
        sqlite3_finalize(s);
    }
    if (rc != SQLITE_OK) {
        snprintf(why, size, "cannot open '%s' read-only: %s", q->file,
                 q->lite ? sqlite3_errmsg(q->lite) : "out of memory");
        disconnect(q);
        return -1;
    }
    return 0;
}

/* Copies n bytes of p into q->data; the offset, or -1. */
static long
keep(jr_roq *q, const void *p, size_t n)
{
    size_t at = q->data.len;

    if (jr_buf_put(&q->data, p, n) < 0 || jr_buf_put(&q->data, "", 1) < 0)
        return -1;
    return (long)at;
}

static int
lite_run(jr_roq *q, const jr_sqlstmt *st, char *why, size_t size)
{
    sqlite3_stmt *s = NULL;
    const char *tail = NULL;
    size_t nv = 0, i;
    int rc, c, ncols, nrows = 0;
    long at;

    rc = sqlite3_prepare_v2(q->lite, st->text, (int)st->len + 1, &s, &tail);
    if (rc == SQLITE_OK && s == NULL)
        return snprintf(why, size, "no statement in the text"), -1;
    if (rc == SQLITE_OK && tail != NULL && tail[strspn(tail, " \t\r\n;")]) {
        sqlite3_finalize(s);
        return snprintf(why, size, "the text holds more than one "
                        "statement"), -1;
    }
    for (c = 0; rc == SQLITE_OK && c < st->nparams; c++) {
        const jr_sqlval *v = &st->params[c];
        if (v->type == JR_SQLV_INT || v->type == JR_SQLV_BOOL)
            sqlite3_bind_int64(s, c + 1, v->i);
        else if (v->type == JR_SQLV_FLOAT)
            sqlite3_bind_double(s, c + 1, v->f);
        else if (v->type == JR_SQLV_TEXT)
            sqlite3_bind_text(s, c + 1, v->s, (int)v->len, SQLITE_STATIC);
    }
    ncols = rc == SQLITE_OK ? sqlite3_column_count(s) : 0;
    if (rc == SQLITE_OK &&
        (q->names = malloc((ncols + 1) * sizeof *q->names)) == NULL)
        rc = SQLITE_NOMEM;
    for (c = 0; rc == SQLITE_OK && c < ncols; c++) {
        const char *name = sqlite3_column_name(s, c);
        if ((at = keep(q, name, strlen(name))) < 0)
            rc = SQLITE_NOMEM;
        q->names[c] = (const char *)(intptr_t)at;
    }
    while (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        rc = SQLITE_OK;
        if (++nrows > JR_QUERY_ROWS_MAX) {
            sqlite3_finalize(s);
            return snprintf(why, size, "over %d rows (add a LIMIT)",
                            JR_QUERY_ROWS_MAX), -1;
        }
        if (vals_room(q, nv + ncols + 1) < 0) {
            rc = SQLITE_NOMEM;
            break;
        }
        for (c = 0; c < ncols; c++) {
            jr_sqlval *v = &q->vals[nv++];
            const void *p;
            memset(v, 0, sizeof *v);
            switch (sqlite3_column_type(s, c)) {
            case SQLITE_INTEGER:
                v->type = JR_SQLV_INT;
                v->i = sqlite3_column_int64(s, c);
                break;
            case SQLITE_FLOAT:
                v->type = JR_SQLV_FLOAT;
                v->f = sqlite3_column_double(s, c);
                break;
            case SQLITE_TEXT:
            case SQLITE_BLOB:
                p = sqlite3_column_type(s, c) == SQLITE_TEXT
                    ? (const void *)sqlite3_column_text(s, c)
                    : sqlite3_column_blob(s, c);
                v->type = JR_SQLV_TEXT;
                v->len = (size_t)sqlite3_column_bytes(s, c);
                v->i = keep(q, p ? p : "", v->len);
                if (v->i < 0)
                    rc = SQLITE_NOMEM;
                break;
            default:
                v->type = JR_SQLV_NULL;
            }
        }
        if (rc == SQLITE_OK && q->data.len > JR_QUERY_BYTES_MAX) {
            sqlite3_finalize(s);
            return snprintf(why, size, "over %u bytes of values (select "
                            "less)", JR_QUERY_BYTES_MAX), -1;
        }
    }
    if (rc != SQLITE_DONE) {
        snprintf(why, size, "%s", rc == SQLITE_NOMEM ? "out of memory"
                 : sqlite3_errmsg(q->lite));
        sqlite3_finalize(s);
        return -1;
    }
    sqlite3_finalize(s);
    for (c = 0; c < ncols; c++)
        q->names[c] = q->data.p + (intptr_t)q->names[c];
    for (i = 0; i < nv; i++)
        if (q->vals[i].type == JR_SQLV_TEXT)
            q->vals[i].s = q->data.p + q->vals[i].i;
    q->out.ncols = ncols;
    q->out.nrows = nrows;
    return 0;
}

int
jr_roq_run(jr_roq *q, const jr_sqlstmt *st, const jr_roq_result **out,
           char *why, size_t size)
{
    int rc;

    drop_result(q);
    if (q->url == NULL)
        return snprintf(why, size, "no database (the runner's URL is "
                        "unknown here)"), -1;
    if (q->file != NULL) {
        if (q->lite == NULL && lite_connect(q, why, size) < 0)
            return -1;
        rc = lite_run(q, st, why, size);
    } else {
        if (q->pg == NULL && pg_connect(q, why, size) < 0)
            return -1;
        rc = pg_run(q, st, why, size);
    }
    if (rc < 0) {
        drop_result(q);
        return -1;
    }
    q->out.names = q->names;
    q->out.vals = q->vals;
    *out = &q->out;
    return 0;
}
