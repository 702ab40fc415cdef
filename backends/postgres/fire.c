/* fire.c - schedules' fires (migration 5): each fire is an ordinary job
 * whose unique key makes it once across runners, recorded with the fire;
 * the last fire of each schedule. Statements unprepared (a fire is rare).
 * Uses conn.c. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "postgres/pg_int.h"

/* Runs sql ({{schema}} expanded) with $1 schedule, $2 at (epoch seconds)
 * and $3 n, unprepared (a fire is rare). Returns its result (caller
 * PQclears) or NULL with err set. */
static PGresult *
fire_sql(jr_backend *b, const char *tmpl, const char *schedule, double at,
         long long n, jr_err *err)
{
    char ats[40], ns[32], *sql = pg_expand(b, tmpl);
    const char *params[3] = {schedule, ats, ns};
    PGresult *res;
    ExecStatusType st;

    if (sql == NULL) {
        jr_fail(err, JR_ENOMEM, "postgres: out of memory");
        return NULL;
    }
    snprintf(ats, sizeof ats, "%.17g", at);
    snprintf(ns, sizeof ns, "%lld", n);
    res = PQexecParams(b->conn, sql, 3, NULL, params, NULL, NULL, 0);
    free(sql);
    st = PQresultStatus(res);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
        pg_fail(b, res, "recording a schedule's fire", err);
        PQclear(res);
        return NULL;
    }
    return res;
}

/* Runs fire_sql for its row count; -1 with err set. */
static int
fire_count(jr_backend *b, const char *tmpl, const char *schedule, double at,
           long long n, jr_err *err)
{
    PGresult *res = fire_sql(b, tmpl, schedule, at, n, err);
    int rows;

    if (res == NULL)
        return -1;
    rows = atoi(PQcmdTuples(res));
    PQclear(res);
    return rows;
}

static int
pg_fire_one(jr_backend *b, jr_fire *f, int keep, jr_err *err)
{
    const jr_push *pp = &f->job;
    int rc;

    f->inserted = 0;
    f->job.run_at = f->at;
    f->job.run_in = 0;
    if (jr_push_check(&f->job, b->max_payload, err) < 0 ||
        pg_ready(b, err) < 0 ||
        pg_run_plain(b, "BEGIN", "beginning a transaction", err) < 0)
        return -1;
    /* nothing when this fire or a later one is recorded: another runner's
     * (a concurrent insert of the same fire waits, then does nothing) */
    rc = fire_count(b, "INSERT INTO {{schema}}.schedule_fires (schedule, "
                    "fire_at) SELECT $1, to_timestamp($2::float8) WHERE "
                    "$3::bigint = 0 AND NOT EXISTS (SELECT 1 FROM "
                    "{{schema}}.schedule_fires WHERE schedule = $1 AND "
                    "fire_at >= to_timestamp($2::float8)) "
                    "ON CONFLICT DO NOTHING", f->schedule, f->at, 0, err);
    if (rc <= 0) {
        pg_rollback(b);
        return rc;
    }
    if (pg_insert_jobs(b, &pp, 1, &f->id, err) < 0 ||
        fire_count(b, "UPDATE {{schema}}.schedule_fires SET job_id = $3 "
                   "WHERE schedule = $1 AND fire_at = "
                   "to_timestamp($2::float8)", f->schedule, f->at, f->id,
                   err) < 0 ||
        fire_count(b, "DELETE FROM {{schema}}.schedule_fires WHERE "
                   "schedule = $1 AND fire_at < (SELECT fire_at FROM "
                   "{{schema}}.schedule_fires WHERE schedule = $1 AND "
                   "$2::float8 IS NOT NULL ORDER BY fire_at DESC LIMIT 1 "
                   "OFFSET $3)", f->schedule, f->at, keep > 0 ? keep - 1 : 0,
                   err) < 0 ||
        pg_run_plain(b, "COMMIT", "committing a schedule's fire", err) < 0) {
        pg_rollback(b);
        return -1;
    }
    f->inserted = 1;
    return 1;
}

int
pg_fire(jr_backend *b, jr_fire *f, int n, int keep, jr_err *err)
{
    int i, rc, count = 0;

    for (i = 0; i < n; i++) {
        if ((rc = pg_fire_one(b, &f[i], keep, err)) < 0)
            return -1;
        count += rc;
    }
    return count;
}

int
pg_last_fires(jr_backend *b, jr_fire_cb cb, void *arg, jr_err *err)
{
    PGresult *res;
    int i;

    if (pg_ready(b, err) < 0 ||
        (res = fire_sql(b, "SELECT DISTINCT ON (schedule) schedule, "
                        "extract(epoch FROM fire_at)::float8, "
                        "coalesce(job_id, 0) FROM {{schema}}.schedule_fires "
                        "WHERE $1::text IS NULL AND $2::float8 = 0 AND "
                        "$3::bigint = 0 ORDER BY schedule, fire_at DESC",
                        NULL, 0, 0, err)) == NULL)
        return -1;
    for (i = 0; i < PQntuples(res); i++)
        if (cb(PQgetvalue(res, i, 0), strtod(PQgetvalue(res, i, 1), NULL),
               strtoll(PQgetvalue(res, i, 2), NULL, 10), arg) != 0)
            break;
    PQclear(res);
    return 0;
}
