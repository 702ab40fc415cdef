/* fire.c - a schedule's fires (migration 5): each fire recorded once in
 * schedule_fires, whichever runner gets there first, with the job it
 * pushed, in one transaction; the newest few kept; the last fire of each
 * schedule read back at start. Its statements are prepared per call (a
 * fire is rare), not kept in the cache. Uses sqlite_int.h; push.c for
 * the job. */
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

static int
fire_one(jr_backend *b, jr_fire *f, int keep, jr_err *err)
{
    int rc;

    f->inserted = 0;
    f->job.run_at = f->at;
    f->job.run_in = 0;
    if (jr_push_check(&f->job, 0, err) < 0 || jr_sqlite_begin(b, err) < 0)
        return -1;
    /* nothing when this fire or a later one is recorded: another runner's */
    rc = fire_sql(b, "INSERT OR IGNORE INTO schedule_fires (schedule, "
                  "fire_at) SELECT ?1, ?2 WHERE NOT EXISTS "
                  "(SELECT 1 FROM schedule_fires WHERE schedule = ?1 "
                  "AND fire_at >= ?2)", f->schedule, f->at, 0, err);
    if (rc <= 0) {
        jr_sqlite_rollback(b);
        return rc;
    }
    if (jr_sqlite_insert_one(b, &f->job, jr_now(), &f->id, err) < 0 ||
        fire_sql(b, "UPDATE schedule_fires SET job_id = ?3 WHERE "
                 "schedule = ?1 AND fire_at = ?2", f->schedule, f->at,
                 f->id, err) < 0 ||
        fire_sql(b, "DELETE FROM schedule_fires WHERE schedule = ?1 AND "
                 "fire_at < (SELECT fire_at FROM schedule_fires WHERE "
                 "schedule = ?1 ORDER BY fire_at DESC LIMIT 1 OFFSET ?3)",
                 f->schedule, f->at,
                 keep > 0 ? keep - 1 : 0, err) < 0) {
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
