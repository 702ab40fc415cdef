/* fire.c - a schedule's fires (migration 5): each fire recorded once in
 * schedule_fires, whichever runner gets there first, with the job it
 * pushed, in one transaction; the newest few kept; the last fire of each
 * schedule read back at start. Its statements are prepared per call (a
 * fire is rare), not kept in the cache. Uses sqlite_int.h; push.c for
 * the job. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqlite/sqlite_int.h"
#include "base/util.h"

/* Runs sql with ?1 schedule, ?2 at, ?3 n (an integer; the parameters sql
 * does not use are not bound); returns the rows it changed, or -1 with
 * err set. */
static int
fire_sql(jr_backend *b, const char *sql, const char *schedule, double at,
         sqlite3_int64 n, jr_err *err)
{
    sqlite3_stmt *s;
    int rc;

    if (sqlite3_prepare_v2(b->db, sql, -1, &s, NULL) != SQLITE_OK)
        return jr_sqlite_fail(b, err, "preparing a schedule statement");
    bind_text(s, 1, schedule);
    sqlite3_bind_double(s, 2, at);
    sqlite3_bind_int64(s, 3, n);
    rc = sqlite3_step(s);
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW)
        return jr_sqlite_fail(b, err, "recording a schedule's fire");
    return sqlite3_changes(b->db);
}

/* Whether schedule is paused (1), or not (0); -1 with err set. */
static int
paused(jr_backend *b, const char *schedule, jr_err *err)
{
    sqlite3_stmt *s;
    int rc, p = 0;

    if (sqlite3_prepare_v2(b->db, "SELECT paused FROM schedules WHERE "
                           "name = ?1", -1, &s, NULL) != SQLITE_OK)
        return jr_sqlite_fail(b, err, "reading a schedule's pause");
    bind_text(s, 1, schedule);
    if ((rc = sqlite3_step(s)) == SQLITE_ROW)
        p = sqlite3_column_int(s, 0) != 0;
    sqlite3_finalize(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return jr_sqlite_fail(b, err, "reading a schedule's pause");
    return p;
}

/* The job of the schedule's fire before f's, when it has not ended: 0
 * when there is none, -1 with err set. */
static int64_t
previous_job(jr_backend *b, const jr_fire *f, jr_err *err)
{
    sqlite3_stmt *s;
    int64_t id = 0;
    int rc;

    if (sqlite3_prepare_v2(b->db, "SELECT j.id FROM (SELECT job_id FROM "
                           "schedule_fires WHERE schedule = ?1 AND fire_at "
                           "< ?2 AND job_id IS NOT NULL ORDER BY fire_at "
                           "DESC LIMIT 1) f JOIN jobs j ON j.id = f.job_id "
                           "WHERE j.state IN ('queued', 'running', "
                           "'waiting')", -1, &s, NULL) != SQLITE_OK)
        return jr_sqlite_fail(b, err, "reading a schedule's previous job");
    bind_text(s, 1, f->schedule);
    sqlite3_bind_double(s, 2, f->at);
    if ((rc = sqlite3_step(s)) == SQLITE_ROW)
        id = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return jr_sqlite_fail(b, err, "reading a schedule's previous job");
    return id;
}

/* overlap: in the fire's transaction, skips it (1: recorded without a
 * job) or cancels the previous fire's job while it has not ended; 0 goes
 * on, -1 with err set. */
static int
overlap(jr_backend *b, jr_fire *f, jr_err *err)
{
    int64_t prev;

    if (f->overlap == 0 || (prev = previous_job(b, f, err)) == 0)
        return 0;
    if (prev < 0)
        return -1;
    if (f->overlap == 1) {      /* JR_OVERLAP_SKIP */
        f->id = prev;
        return 1;
    }
    return jr_sqlite_cancel_one(b, prev, jr_now(), err) < 0 ? -1 : 0;
}

static int
fire_one(jr_backend *b, jr_fire *f, int keep, jr_err *err)
{
    int rc;

    f->inserted = 0;
    f->job.run_at = f->at + (f->delay > 0 ? f->delay : 0);
    f->job.run_in = 0;
    if (jr_push_check(&f->job, 0, err) < 0 || jr_sqlite_begin(b, err) < 0)
        return -1;
    /* nothing when this fire or a later one is recorded (another
     * runner's; a fire asked for by hand: this one only), or when the
     * schedule is paused */
    rc = fire_sql(b, "INSERT OR IGNORE INTO schedule_fires (schedule, "
                  "fire_at) SELECT ?1, ?2 WHERE (?3 = 1 OR NOT EXISTS "
                  "(SELECT 1 FROM schedule_fires WHERE schedule = ?1 "
                  "AND fire_at >= ?2)) AND NOT EXISTS (SELECT 1 FROM "
                  "schedules WHERE name = ?1 AND paused = 1)", f->schedule,
                  f->at, f->manual != 0 || f->backfill != 0, err);
    if (rc == 0 && (rc = paused(b, f->schedule, err)) > 0) {
        f->inserted = -2;
        rc = 0;
    }
    if (rc <= 0) {
        jr_sqlite_rollback(b);
        return rc;
    }
    if ((rc = overlap(b, f, err)) != 0) {
        if (rc < 0 || jr_sqlite_commit(b, err) < 0) {
            jr_sqlite_rollback(b);
            return -1;
        }
        f->inserted = -3;       /* skipped: the previous job runs */
        return 0;
    }
    if (jr_sqlite_insert_one(b, &f->job, jr_now(), &f->id, err) < 0 ||
        fire_sql(b, "UPDATE schedule_fires SET job_id = ?3 WHERE "
                 "schedule = ?1 AND fire_at = ?2", f->schedule, f->at,
                 f->id, err) < 0 ||
        (f->backfill && fire_sql(b, "UPDATE schedule_fires SET backfill = "
                                 "1 WHERE schedule = ?1 AND fire_at = ?2",
                                 f->schedule, f->at, 0, err) < 0) ||
        (!f->backfill &&
         fire_sql(b, "DELETE FROM schedule_fires WHERE schedule = ?1 AND "
                  "backfill IS NULL AND fire_at < (SELECT fire_at FROM "
                  "schedule_fires WHERE schedule = ?1 AND backfill IS NULL "
                  "ORDER BY fire_at DESC LIMIT 1 OFFSET ?3)", f->schedule,
                  f->at, keep > 0 ? keep - 1 : 0, err) < 0)) {
        jr_sqlite_rollback(b);
        return -1;
    }
    if (jr_sqlite_commit(b, err) < 0)
        return -1;
    f->inserted = 1;
    return 1;
}

int
jr_sqlite_fire(jr_backend *b, jr_fire *f, int n, int keep, jr_err *err)
{
    int i, rc, count = 0;

    for (i = 0; i < n; i++) {
        if ((rc = fire_one(b, &f[i], keep, err)) < 0)
            return -1;
        count += rc;
    }
    return count;
}

int
jr_sqlite_last_fires(jr_backend *b, jr_fire_cb cb, void *arg, jr_err *err)
{
    sqlite3_stmt *s;
    int rc;

    if (jr_sqlite_file_check(b, err) < 0)
        return -1;
    /* a bare column beside max() comes from the row of the max */
    if (sqlite3_prepare_v2(b->db, "SELECT schedule, max(fire_at), "
                           "coalesce(job_id, 0) FROM schedule_fires "
                           "GROUP BY schedule ORDER BY schedule", -1, &s,
                           NULL) != SQLITE_OK)
        return jr_sqlite_fail(b, err, "reading the last fires");
    while ((rc = sqlite3_step(s)) == SQLITE_ROW)
        if (cb((const char *)sqlite3_column_text(s, 0),
               sqlite3_column_double(s, 1), sqlite3_column_int64(s, 2),
               arg) != 0)
            break;
    sqlite3_finalize(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return jr_sqlite_fail(b, err, "reading the last fires");
    return 0;
}

/* ---- schedule controls (migration 12) ---- */

#define FIRE_SKEW 60.0          /* seconds a fire asked for by hand may be
                                   from now: the runners fire asks up to a
                                   minute old, and a later instant would
                                   hold back the schedule's fires until
                                   then */

static const char *const ctl_sql[] = {
    [JR_SCHED_PAUSE] =
        "INSERT INTO schedules AS s (name, paused, paused_at, updated_at)"
        " VALUES (?1, 1, ?2, ?2) ON CONFLICT (name) DO UPDATE"
        " SET paused = 1, paused_at = coalesce(s.paused_at, ?2),"
        " updated_at = ?2 WHERE s.paused = 0",
    [JR_SCHED_RESUME] =
        "UPDATE schedules SET paused = 0, paused_at = NULL, updated_at = ?2"
        " WHERE name = ?1 AND paused = 1",
    [JR_SCHED_FIRE] =
        "INSERT INTO schedules AS s (name, fire_at, updated_at)"
        " VALUES (?1, ?3, ?2) ON CONFLICT (name) DO UPDATE"
        " SET fire_at = ?3, updated_at = ?2"
        " WHERE s.fire_at IS NULL OR s.fire_at < ?3",
};

/* Asks for a fire of name at instant at (kept unless a later one was
 * asked for). Returns 1 if the row changed, 0, or -1 with err set. */
static int
ask_fire(jr_backend *b, const char *name, double now, double at,
         jr_err *err)
{
    sqlite3_stmt *s;
    int rc;

    if ((rc = paused(b, name, err)) != 0)
        return rc < 0 ? -1 : jr_fail(err, JR_EINPUT, "schedule '%s' is "
                                     "paused: resume it first", name);
    if (sqlite3_prepare_v2(b->db, ctl_sql[JR_SCHED_FIRE], -1, &s, NULL) !=
        SQLITE_OK)
        return jr_sqlite_fail(b, err, "asking for a schedule's fire");
    bind_text(s, 1, name);
    sqlite3_bind_double(s, 2, now);
    sqlite3_bind_double(s, 3, at);
    rc = sqlite3_step(s);
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE)
        return jr_sqlite_fail(b, err, "asking for a schedule's fire");
    return sqlite3_changes(b->db);
}

/* The body of sched_ctl's transaction. */
static int
ctl_tx(jr_backend *b, const char *name, int what, double now, double at,
       jr_err *err)
{
    int rc;

    if (what == JR_SCHED_FIRE)
        return ask_fire(b, name, now, at, err);
    if ((rc = fire_sql(b, ctl_sql[what], name, now, 0, err)) < 0)
        return -1;
    /* the resume instant is the last fire: the paused time never fires */
    if (what == JR_SCHED_RESUME && rc > 0 &&
        fire_sql(b, "INSERT OR IGNORE INTO schedule_fires (schedule, "
                 "fire_at) VALUES (?1, ?2)", name, now, 0, err) < 0)
        return -1;
    return rc;
}

int
jr_sqlite_sched_ctl(jr_backend *b, const char *name, int what, double *at,
                    jr_err *err)
{
    double now = jr_now();
    int rc;

    if (jr_name_check(name, "schedule name", err) < 0)
        return -1;
    if (what < JR_SCHED_PAUSE || what > JR_SCHED_FIRE)
        return jr_fail(err, JR_EINPUT, "schedule '%s': unknown control %d",
                       name, what);
    if (what == JR_SCHED_FIRE && *at > 0 && fabs(*at - jr_now()) > FIRE_SKEW)
        return jr_fail(err, JR_EINPUT, "schedule '%s': fire instant %.3f is "
                       "more than %.0fs from now", name, *at, FIRE_SKEW);
    if (what == JR_SCHED_FIRE && *at <= 0)
        *at = floor(now);
    if (jr_sqlite_begin(b, err) < 0)
        return -1;
    if ((rc = ctl_tx(b, name, what, now, what == JR_SCHED_FIRE ? *at : 0,
                     err)) < 0) {
        jr_sqlite_rollback(b);
        return -1;
    }
    return jr_sqlite_commit(b, err) < 0 ? -1 : rc > 0;
}

int
jr_sqlite_sched_states(jr_backend *b, jr_sched_cb cb, void *arg,
                       jr_err *err)
{
    sqlite3_stmt *s;
    int rc;

    if (jr_sqlite_file_check(b, err) < 0)
        return -1;
    if (sqlite3_prepare_v2(b->db, "SELECT name, paused, coalesce(paused_at,"
                           " 0), coalesce(fire_at, 0) FROM schedules"
                           " ORDER BY name", -1, &s, NULL) != SQLITE_OK)
        return jr_sqlite_fail(b, err, "reading the schedule controls");
    while ((rc = sqlite3_step(s)) == SQLITE_ROW)
        if (cb(col_text(s, 0), sqlite3_column_int(s, 1),
               sqlite3_column_double(s, 2), sqlite3_column_double(s, 3),
               arg) != 0)
            break;
    sqlite3_finalize(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return jr_sqlite_fail(b, err, "reading the schedule controls");
    return 0;
}
