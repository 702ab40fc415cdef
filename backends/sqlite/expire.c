/* expire.c - the sweep of expired jobs on SQLite (schema.sql, migration
 * 21; docs/queues.md, "Expiry and deadlines"): queued jobs never started
 * whose expires_at passed end in the state expired, a bounded batch at a
 * time, run by the wake-up op (signal.c) each time it runs; a job with a
 * flow bit has its children, batch and sequence settled as for any end
 * (flow.c). The claims pass such jobs over meanwhile
 * (JR_SQLITE_UNEXPIRED), so a late sweep starts none. Uses sqlite_int.h
 * and flow.c. */
#include <stdlib.h>

#include "sqlite/sqlite_int.h"
#include "base/util.h"

/* The file's statements: slots of sql_text[] (sqlite_int.h). */
enum { S_EXPIRE_ANY, S_EXPIRE, S_COUNT };

/* the jobs the sweep ends: queued, never started (no attempt counted
 * and no handler's generation: JR_SQLITE_UNEXPIRED), expires_at by ?1 (the
 * jobs_expiry index: a job without an expiry is not in it) */
#define EXPIRED_BY \
    " expires_at <= ?1 AND expires_at IS NOT NULL AND state = 'queued'" \
    " AND attempts = 0 AND generation IS NULL"

static const char *const sql_text[S_COUNT] = {
    /* read first, so that a look that finds none takes no write lock */
    [S_EXPIRE_ANY] = "SELECT 1 FROM jobs WHERE" EXPIRED_BY " LIMIT 1",
    [S_EXPIRE] =
        "UPDATE jobs SET state = 'expired', finished_at = ?1,"
        " updated_at = ?1, last_error = 'expired: not started by its"
        " expires_at'"
        " WHERE id IN (SELECT id FROM jobs WHERE" EXPIRED_BY
        " ORDER BY expires_at LIMIT ?2) RETURNING id, flow",
};

static sqlite3_stmt *
stmt(jr_backend *b, int which, jr_err *err)
{
    return jr_sqlite_stmt(b, &sql_text[which], err);
}

/* In the open transaction: ends up to max expired jobs, their flows
 * settled. Returns how many, or -1. */
static int
sweep(jr_backend *b, int max, double now, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_EXPIRE, err);
    int64_t *flows;
    int rc, n = 0, nf = 0, i;

    if (s == NULL)
        return -1;
    if ((flows = malloc((size_t)max * sizeof *flows)) == NULL)
        return jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
    sqlite3_bind_double(s, 1, now);
    sqlite3_bind_int(s, 2, max);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        n++;
        if (sqlite3_column_int(s, 1) != 0 && nf < max)
            flows[nf++] = sqlite3_column_int64(s, 0);
    }
    sqlite3_reset(s);
    if (rc != SQLITE_DONE)
        n = jr_sqlite_fail(b, err, "expiring jobs");
    for (i = 0; n >= 0 && i < nf; i++)
        if (jr_sqlite_flow_settle(b, flows[i], "expired", NULL, now,
                                  err) < 0)
            n = -1;
    free(flows);
    return n;
}

int
jr_sqlite_expire(jr_backend *b, int max, jr_err *err)
{
    sqlite3_stmt *s;
    double now = jr_now();
    int rc;

    if (max <= 0)
        return 0;
    if ((s = stmt(b, S_EXPIRE_ANY, err)) == NULL)
        return -1;
    sqlite3_bind_double(s, 1, now);
    rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc != SQLITE_ROW)
        return rc == SQLITE_DONE ? 0 : jr_sqlite_fail(b, err,
                                                      "expiring jobs");
    if (jr_sqlite_begin(b, err) < 0)
        return -1;
    return jr_sqlite_write_end(b, sweep(b, max, now, err), err);
}
