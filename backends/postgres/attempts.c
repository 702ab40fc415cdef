/* attempts.c - a job's attempt history (migration 12) as show gives it:
 * the failed attempts complete.c appends to the job's attempt_log, read
 * back through the job_attempts view, oldest first; and its runs' logs
 * (migration 20) as text. Unprepared (a show
 * is rare). Uses conn.c. */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "postgres/pg_int.h"

static char *
dup_col(const PGresult *res, int r, int c, int *oom)
{
    char *d;

    if (PQgetisnull(res, r, c))
        return NULL;
    if ((d = strdup(PQgetvalue(res, r, c))) == NULL)
        *oom = 1;
    return d;
}

/* Copies row r of res (the query's columns) into a. */
static void
attempt_fields(const PGresult *res, int r, jr_attempt_row *a, int *oom)
{
    a->attempt = atoi(PQgetvalue(res, r, 0));
    a->error = dup_col(res, r, 1, oom);
    a->at = strtod(PQgetvalue(res, r, 2), NULL);
    a->duration = PQgetisnull(res, r, 3) ? NAN :
                  strtod(PQgetvalue(res, r, 3), NULL);
    a->runner = dup_col(res, r, 4, oom);
    a->worker = PQgetisnull(res, r, 5) ? 0 : atoi(PQgetvalue(res, r, 5));
    a->generation = dup_col(res, r, 6, oom);
}

int
jr_pg_attempts(jr_backend *b, int64_t id, jr_attempt_row *a, int max,
            jr_err *err)
{
    char sid[24], smax[16], *sql;
    const char *params[2] = {sid, smax};
    PGresult *res;
    int i, n, oom = 0;

    snprintf(sid, sizeof sid, "%lld", (long long)id);
    snprintf(smax, sizeof smax, "%d", max);
    /* the newest max, in order */
    sql = jr_pg_expand(b, "SELECT * FROM (SELECT attempt, error,"
                    " extract(epoch FROM at)::float8, duration, runner,"
                    " worker, generation, n FROM {{schema}}.job_attempts"
                    " WHERE job_id = $1::bigint ORDER BY n DESC"
                    " LIMIT $2::int) x ORDER BY n");
    if (sql == NULL)
        return jr_fail(err, JR_ENOMEM, "postgres: out of memory");
    res = PQexecParams(b->conn, sql, 2, NULL, params, NULL, NULL, 0);
    free(sql);
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        jr_pg_fail(b, res, "reading a job's attempts", err);
        PQclear(res);
        return -1;
    }
    n = PQntuples(res) < max ? PQntuples(res) : max;
    for (i = 0; i < n; i++)
        attempt_fields(res, i, &a[i], &oom);
    PQclear(res);
    if (oom) {
        jr_attempt_rows_clear(a, n);
        return jr_fail(err, JR_ENOMEM, "job %lld: out of memory reading "
                       "its attempts", (long long)id);
    }
    return n;
}

int
jr_pg_job_logs(jr_backend *b, int64_t id, char **out, jr_err *err)
{
    char sid[24], *sql;
    const char *params[1] = {sid};
    PGresult *res;
    int found, oom = 0;

    *out = NULL;
    snprintf(sid, sizeof sid, "%lld", (long long)id);
    sql = jr_pg_expand(b, "SELECT logs::text FROM {{schema}}.jobs"
                       " WHERE id = $1::bigint");
    if (sql == NULL)
        return jr_fail(err, JR_ENOMEM, "postgres: out of memory");
    res = PQexecParams(b->conn, sql, 1, NULL, params, NULL, NULL, 0);
    free(sql);
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        jr_pg_fail(b, res, "reading a job's logs", err);
        PQclear(res);
        return -1;
    }
    if ((found = PQntuples(res) > 0))
        *out = dup_col(res, 0, 0, &oom);
    PQclear(res);
    if (oom)
        return jr_fail(err, JR_ENOMEM, "job %lld: out of memory reading its "
                       "logs", (long long)id);
    return found;
}
