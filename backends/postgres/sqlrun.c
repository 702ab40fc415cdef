/* sqlrun.c - a job's jobrunner.sql statements (job.h's jr_result.sql),
 * run on the runner's connection in the transaction recording its
 * success, each job's in a savepoint of its own, under SET LOCAL ROLE to
 * the config's handler_role when one is set: a statement that fails
 * rolls back that job's statements only, and its success becomes a
 * failed attempt with the server's message and SQLSTATE (sqlres.h).
 * Uses pg_int.h, arrays.h, sqlstmt.h, sqlres.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "postgres/pg_int.h"
#include "postgres/arrays.h"
#include "base/sqlstmt.h"
#include "sqlres.h"

/* the jobs of the batch with statements that are still this runner's,
 * locked until the commit: no rescue takes one between its statements
 * and its end */
static const pg_stmt st_ours = {"jr_sql_ours", 2,
    "SELECT id FROM {{schema}}.jobs WHERE id = ANY($2::bigint[])"
    " AND state = 'running' AND locked_by = $1::text"
    " ORDER BY id FOR UPDATE"};

int
jr_pg_role_set(jr_backend *b, const char *role, jr_err *err)
{
    char q[140], *p = q;
    const char *s;

    b->role_sql[0] = '\0';
    if (role == NULL)
        return 0;
    if (*role == '\0' || strlen(role) > 63)
        return jr_fail(err, JR_EUSAGE, "postgres: handler_role '%s' must be "
                       "1 to 63 bytes", role);
    *p++ = '"';
    for (s = role; *s; s++) {
        if (*s == '"')
            *p++ = '"';
        *p++ = *s;
    }
    *p++ = '"';
    *p = '\0';
    snprintf(b->role_sql, sizeof b->role_sql, "; SET LOCAL ROLE %s", q);
    return 0;
}

/* The ids of the successes of r[0..n) with statements that are ours,
 * sorted, into ids (n slots); how many, or -1. */
static int
ours(jr_backend *b, const char *token, const jr_result *r, int n,
     int64_t *ids, jr_err *err)
{
    const char *params[2] = {token, NULL};
    jr_buf a = {0};
    char num[24];
    PGresult *res;
    int i, m;

    for (i = 0; i < n; i++) {
        if (r[i].kind != JR_DONE || r[i].nsql <= 0)
            continue;
        snprintf(num, sizeof num, "%lld", (long long)r[i].id);
        sb_num(&a, num);
    }
    params[1] = sb_array(&a);
    if (a.oom) {
        free(a.p);
        return jr_fail(err, JR_ENOMEM, "postgres: out of memory");
    }
    res = jr_pg_run(b, &st_ours, params, "locking jobs with statements",
                    err);
    free(a.p);
    if (res == NULL)
        return -1;
    m = PQntuples(res);
    for (i = 0; i < m && i < n; i++)
        ids[i] = strtoll(PQgetvalue(res, i, 0), NULL, 10);
    PQclear(res);
    return i;
}

/* One parameter as text (into buf, or borrowed from v), NULL for NULL. */
static const char *
param_text(const jr_sqlval *v, char *buf, size_t size)
{
    switch (v->type) {
    case JR_SQLV_INT:
        snprintf(buf, size, "%lld", (long long)v->i);
        return buf;
    case JR_SQLV_FLOAT:
        snprintf(buf, size, "%.17g", v->f);
        return buf;
    case JR_SQLV_BOOL:
        return v->i ? "true" : "false";
    case JR_SQLV_TEXT:
        return v->s;
    default:
        return NULL;
    }
}

/* Runs one statement; NULL, or the server's error (res, to PQclear). A
 * connection lost is reported in *lost. */
static PGresult *
run_one(jr_backend *b, const jr_sqlstmt *st, int *lost)
{
    char nums[JR_SQL_PARAMS_MAX][32];
    const char *values[JR_SQL_PARAMS_MAX];
    ExecStatusType t;
    PGresult *res;
    int i;

    for (i = 0; i < st->nparams; i++)
        values[i] = param_text(&st->params[i], nums[i], sizeof nums[i]);
    res = PQexecParams(b->conn, st->text, st->nparams, NULL, values, NULL,
                       NULL, 0);
    t = PQresultStatus(res);
    if (t == PGRES_COMMAND_OK || t == PGRES_TUPLES_OK) {
        PQclear(res);
        return NULL;
    }
    *lost = PQstatus(b->conn) != CONNECTION_OK;
    return res;
}

/* The server's message of res, with its detail and SQLSTATE, in why. */
static void
describe(const PGresult *res, const PGconn *c, char *why, size_t size)
{
    const char *primary = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
    const char *detail = PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL);
    const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    char msg[300], det[200];

    jr_pg_oneline(msg, sizeof msg, primary ? primary : PQerrorMessage(c));
    jr_pg_oneline(det, sizeof det, detail);
    snprintf(why, size, "%.250s%s%.180s%s (SQLSTATE %.5s)", msg,
             *det ? " (" : "",
             det, *det ? ")" : "", state ? state : "?");
}

/* Runs r's statements in a savepoint; 0 (r a failed attempt if one of
 * them failed), or -1 with err set when the connection is in trouble. */
static int
run_job(jr_backend *b, jr_result *r, jr_err *err)
{
    char open[200], why[JR_SQL_ERR_MAX - 100];
    PGresult *res = NULL;
    jr_sqlstmt st;
    size_t pos = 0;
    int k = 0, lost = 0;

    snprintf(open, sizeof open, "SAVEPOINT jr_sql%s", b->role_sql);
    if (jr_pg_run_plain(b, open, "a savepoint for a job's statements",
                        err) < 0)
        return -1;
    while (res == NULL && jr_sql_next(r->sql, r->sql_len, &pos, &st) == 1) {
        k++;
        res = run_one(b, &st, &lost);
    }
    if (res == NULL) {
        r->sql_error[0] = '\0';
        return jr_pg_run_plain(b, b->role_sql[0] ? "RESET ROLE; RELEASE "
                               "jr_sql" : "RELEASE jr_sql",
                               "releasing a job's savepoint", err);
    }
    if (lost) {
        jr_pg_fail(b, res, "a job's statement", err);
        PQclear(res);
        return -1;
    }
    describe(res, b->conn, why, sizeof why);
    PQclear(res);
    if (jr_pg_run_plain(b, "ROLLBACK TO jr_sql; RELEASE jr_sql",
                        "rolling back a job's statements", err) < 0)
        return -1;
    jr_sqlres_fail(r, k, why);
    return 0;
}

int
jr_pg_sql_run(jr_backend *b, const char *token, jr_result *r, int n,
              jr_err *err)
{
    int64_t *ids = malloc((size_t)n * sizeof *ids);
    int i, m, rc = 0;

    if (ids == NULL)
        return jr_fail(err, JR_ENOMEM, "postgres: out of memory");
    if ((m = ours(b, token, r, n, ids, err)) < 0) {
        free(ids);
        return -1;
    }
    for (i = 0; i < n && rc == 0; i++) {
        if (r[i].kind != JR_DONE || r[i].nsql <= 0 ||
            !bsearch(&r[i].id, ids, (size_t)m, sizeof *ids, jr_pg_cmp_id))
            continue;
        rc = run_job(b, &r[i], err);
    }
    free(ids);
    return rc;
}
