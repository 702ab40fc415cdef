/* fire.c - schedules' fires (migration 5): each fire is an ordinary job
 * whose unique key makes it once across runners, recorded with the fire;
 * the last fire of each schedule. Statements unprepared (a fire is rare).
 * Uses conn.c. */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "postgres/pg_int.h"
#include "base/seqkey.h"
#include "base/util.h"

/* Runs sql ({{schema}} expanded) with $1 schedule, $2 at (epoch seconds)
 * and $3 n, unprepared (a fire is rare). Returns its result (caller
 * PQclears) or NULL with err set. */
static PGresult *
fire_sql(jr_backend *b, const char *tmpl, const char *schedule, double at,
         long long n, jr_err *err)
{
    char ats[40], ns[32], *sql = jr_pg_expand(b, tmpl);
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
        jr_pg_fail(b, res, "recording a schedule's fire", err);
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

/* Whether schedule is paused (1) or not (0); -1 with err set. */
static int
paused(jr_backend *b, const char *schedule, jr_err *err)
{
    PGresult *res = fire_sql(b, "SELECT 1 FROM {{schema}}.schedules WHERE "
                             "name = $1 AND paused AND $2::float8 = 0 AND "
                             "$3::bigint = 0", schedule, 0, 0, err);
    int p;

    if (res == NULL)
        return -1;
    p = PQntuples(res) > 0;
    PQclear(res);
    return p;
}

/* overlap: in the fire's transaction, skips it (1: recorded without a
 * job) or cancels the previous fire's job (the cancel function) while
 * it has not ended; 0 goes on, -1 with err set. */
static int
overlap(jr_backend *b, jr_fire *f, jr_err *err)
{
    PGresult *res;
    int64_t prev;

    if (f->overlap == 0)
        return 0;
    if ((res = fire_sql(b, "SELECT j.id FROM (SELECT job_id FROM "
                        "{{schema}}.schedule_fires WHERE schedule = $1 AND "
                        "fire_at < to_timestamp($2::float8) AND job_id IS "
                        "NOT NULL AND $3::bigint = 0 ORDER BY fire_at DESC "
                        "LIMIT 1) f JOIN {{schema}}.jobs j ON j.id = "
                        "f.job_id WHERE j.state IN ('queued', "
                        "'running', 'waiting')", f->schedule, f->at, 0,
                        err)) == NULL)
        return -1;
    prev = PQntuples(res) > 0 ? strtoll(PQgetvalue(res, 0, 0), NULL, 10) :
           0;
    PQclear(res);
    if (prev == 0)
        return 0;
    if (f->overlap == 1) {      /* JR_OVERLAP_SKIP */
        f->id = prev;
        return 1;
    }
    if ((res = fire_sql(b, "SELECT {{schema}}.cancel($3::bigint) WHERE "
                        "$1::text IS NOT NULL AND $2::float8 > 0",
                        f->schedule, f->at, prev, err)) == NULL)
        return -1;
    PQclear(res);
    return 0;
}

/* The fire's job, in the sequence of its handler when it has one
 * (seqpath.c). */
static int
insert_fired(jr_backend *b, const jr_push *p, int64_t *id, jr_err *err)
{
    const jr_push **qpp;
    jr_push *q;
    int rc = jr_pg_seq_defaults_pp(b, &p, 1, &q, &qpp, err);

    if (rc <= 0)
        return rc < 0 ? -1 : jr_pg_insert_jobs(b, &p, 1, id, err);
    rc = jr_pg_insert_linked(b, qpp, 1, id, err);
    free(qpp);
    jr_seq_apply_free(q, 1);
    return rc;
}

static int
jr_pg_fire_one(jr_backend *b, jr_fire *f, int keep, jr_err *err)
{
    const jr_push *pp = &f->job;
    int rc;

    f->inserted = 0;
    f->job.run_at = f->at + (f->delay > 0 ? f->delay : 0);
    f->job.run_in = 0;
    if (jr_push_check(&f->job, b->max_payload, err) < 0 ||
        jr_pg_ready(b, err) < 0 ||
        jr_pg_run_plain(b, "BEGIN", "beginning a transaction", err) < 0)
        return -1;
    /* nothing when this fire or a later one is recorded: another runner's
     * (a concurrent insert of the same fire waits, then does nothing; a
     * fire asked for by hand: this one only), or when the schedule is
     * paused */
    rc = fire_count(b, "INSERT INTO {{schema}}.schedule_fires (schedule, "
                    "fire_at) SELECT $1, to_timestamp($2::float8) WHERE "
                    "($3::bigint = 1 OR NOT EXISTS (SELECT 1 FROM "
                    "{{schema}}.schedule_fires WHERE schedule = $1 AND "
                    "fire_at >= to_timestamp($2::float8))) AND NOT EXISTS "
                    "(SELECT 1 FROM {{schema}}.schedules WHERE name = $1 "
                    "AND paused) ON CONFLICT DO NOTHING", f->schedule,
                    f->at, f->manual != 0 || f->backfill != 0, err);
    if (rc == 0 && (rc = paused(b, f->schedule, err)) > 0) {
        f->inserted = -2;       /* paused: refused, as if fired */
        rc = 0;
    }
    if (rc <= 0) {
        jr_pg_rollback(b);
        return rc;
    }
    if ((rc = overlap(b, f, err)) != 0) {
        if (rc < 0 || jr_pg_run_plain(b, "COMMIT", "committing a schedule's "
                                      "fire", err) < 0) {
            jr_pg_rollback(b);
            return -1;
        }
        f->inserted = -3;       /* skipped: the previous job runs */
        return 0;
    }
    if (insert_fired(b, pp, &f->id, err) < 0 ||
        fire_count(b, "UPDATE {{schema}}.schedule_fires SET job_id = $3 "
                   "WHERE schedule = $1 AND fire_at = "
                   "to_timestamp($2::float8)", f->schedule, f->at, f->id,
                   err) < 0 ||
        (f->backfill &&
         fire_count(b, "UPDATE {{schema}}.schedule_fires SET backfill = "
                    "true WHERE schedule = $1 AND fire_at = "
                    "to_timestamp($2::float8) AND $3::bigint = 0",
                    f->schedule, f->at, 0, err) < 0) ||
        (!f->backfill &&
         fire_count(b, "DELETE FROM {{schema}}.schedule_fires WHERE "
                    "schedule = $1 AND backfill IS NULL AND fire_at < "
                    "(SELECT fire_at FROM {{schema}}.schedule_fires WHERE "
                    "schedule = $1 AND backfill IS NULL AND $2::float8 IS "
                    "NOT NULL ORDER BY fire_at DESC LIMIT 1 OFFSET $3)",
                    f->schedule, f->at, keep > 0 ? keep - 1 : 0, err) < 0) ||
        jr_pg_run_plain(b, "COMMIT", "committing a schedule's fire", err) < 0) {
        jr_pg_rollback(b);
        return -1;
    }
    f->inserted = 1;
    return 1;
}

int
jr_pg_fire(jr_backend *b, jr_fire *f, int n, int keep, jr_err *err)
{
    int i, rc, count = 0;

    for (i = 0; i < n; i++) {
        if ((rc = jr_pg_fire_one(b, &f[i], keep, err)) < 0)
            return -1;
        count += rc;
    }
    return count;
}

int
jr_pg_last_fires(jr_backend *b, jr_fire_cb cb, void *arg, jr_err *err)
{
    PGresult *res;
    int i;

    if (jr_pg_ready(b, err) < 0 ||
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

/* ---- schedule controls (migration 12) ---- */

#define FIRE_SKEW 60.0          /* seconds a fire asked for by hand may be
                                   from now: the runners fire asks up to a
                                   minute old, and a later instant would
                                   hold back the schedule's fires until
                                   then */

/* $1 name; $2 the fire's instant, epoch seconds (0: the current second);
 * $3 unused. FIRE returns the instant asked for. */
static const char *const ctl_sql[] = {
    [JR_SCHED_PAUSE] =
        "INSERT INTO {{schema}}.schedules AS s (name, paused, paused_at,"
        " updated_at) SELECT $1, true, now(), now()"
        " WHERE $2::float8 = 0 AND $3::bigint = 0"
        " ON CONFLICT (name) DO UPDATE SET paused = true,"
        " paused_at = now(), updated_at = now() WHERE NOT s.paused",
    /* the resume instant is the last fire: the paused time never fires */
    [JR_SCHED_RESUME] =
        "WITH r AS (UPDATE {{schema}}.schedules SET paused = false,"
        "  paused_at = NULL, updated_at = now()"
        "  WHERE name = $1 AND paused AND $2::float8 = 0"
        "  AND $3::bigint = 0 RETURNING name),"
        " f AS (INSERT INTO {{schema}}.schedule_fires (schedule, fire_at)"
        "  SELECT name, now() FROM r ON CONFLICT DO NOTHING)"
        " SELECT count(*) FROM r",
    [JR_SCHED_FIRE] =
        "WITH t AS (SELECT CASE WHEN $2::float8 > 0"
        "  THEN to_timestamp($2::float8)"
        "  ELSE date_trunc('second', now()) END AS at, $3::bigint AS z),"
        " u AS (INSERT INTO {{schema}}.schedules AS s (name, fire_at,"
        "  updated_at) SELECT $1, at, now() FROM t"
        "  ON CONFLICT (name) DO UPDATE SET fire_at = excluded.fire_at,"
        "  updated_at = now()"
        "  WHERE s.fire_at IS NULL OR s.fire_at < excluded.fire_at"
        "  RETURNING 1)"
        " SELECT extract(epoch FROM at)::float8, (SELECT count(*) FROM u)"
        " FROM t",
};

/* The body of sched_ctl's transaction: the row's change (1 or 0). */
static int
ctl_tx(jr_backend *b, const char *name, int what, double *at, jr_err *err)
{
    PGresult *res;
    int rc;

    if (what == JR_SCHED_FIRE && (rc = paused(b, name, err)) != 0)
        return rc < 0 ? -1 : jr_fail(err, JR_EINPUT, "schedule '%s' is "
                                     "paused: resume it first", name);
    if (what == JR_SCHED_PAUSE)
        return fire_count(b, ctl_sql[what], name, 0, 0, err);
    res = fire_sql(b, ctl_sql[what], name, what == JR_SCHED_FIRE ? *at : 0,
                   0, err);
    if (res == NULL)
        return -1;
    if (what == JR_SCHED_FIRE) {
        *at = strtod(PQgetvalue(res, 0, 0), NULL);
        rc = atoi(PQgetvalue(res, 0, 1));
    } else {
        rc = atoi(PQgetvalue(res, 0, 0));
    }
    PQclear(res);
    return rc;
}

int
jr_pg_sched_ctl(jr_backend *b, const char *name, int what, double *at,
             jr_err *err)
{
    int rc;

    if (jr_name_check(name, "schedule name", err) < 0)
        return -1;
    if (what < JR_SCHED_PAUSE || what > JR_SCHED_FIRE)
        return jr_fail(err, JR_EINPUT, "schedule '%s': unknown control %d",
                       name, what);
    if (what == JR_SCHED_FIRE && *at > 0 && fabs(*at - jr_now()) > FIRE_SKEW)
        return jr_fail(err, JR_EINPUT, "schedule '%s': fire instant %.3f is "
                       "more than %.0fs from now", name, *at, FIRE_SKEW);
    if (jr_pg_ready(b, err) < 0 ||
        jr_pg_run_plain(b, "BEGIN", "beginning a transaction", err) < 0)
        return -1;
    if ((rc = ctl_tx(b, name, what, at, err)) < 0 ||
        jr_pg_run_plain(b, "COMMIT", "committing a schedule control",
                     err) < 0) {
        jr_pg_rollback(b);
        return -1;
    }
    return rc > 0;
}

int
jr_pg_sched_states(jr_backend *b, jr_sched_cb cb, void *arg, jr_err *err)
{
    PGresult *res;
    int i;

    if (jr_pg_ready(b, err) < 0 ||
        (res = fire_sql(b, "SELECT name, paused, coalesce(extract(epoch FROM"
                        " paused_at)::float8, 0), coalesce(extract(epoch"
                        " FROM fire_at)::float8, 0) FROM"
                        " {{schema}}.schedules WHERE $1::text IS NULL AND"
                        " $2::float8 = 0 AND $3::bigint = 0"
                        " ORDER BY name COLLATE \"C\"", NULL, 0, 0,
                        err)) == NULL)
        return -1;
    for (i = 0; i < PQntuples(res); i++)
        if (cb(PQgetvalue(res, i, 0), strcmp(PQgetvalue(res, i, 1), "t") == 0,
               strtod(PQgetvalue(res, i, 2), NULL),
               strtod(PQgetvalue(res, i, 3), NULL), arg) != 0)
            break;
    PQclear(res);
    return 0;
}
