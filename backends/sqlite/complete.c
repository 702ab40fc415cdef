/* complete.c - what becomes of a claimed job: its result (deleted or
 * kept completed, retried, dead, snoozed, released, expired, cancelled,
 * its progress), fenced by the runner's token so a job taken over by
 * another runner is left alone; a batch of results with the next claim
 * in one transaction; lease renewal, and the rescue of jobs whose lease
 * ran out (their runner lost). Uses sqlite_int.h; push.c for the jobs a
 * success pushes, claim.c for the claim. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqlite/sqlite_int.h"
#include "base/util.h"

/* A requeue (retry, snooze, release, rescue) of a job whose cancel was
 * requested ends it cancelled instead. */
#define REQUEUE_STATE \
    " state = CASE WHEN cancel_requested THEN 'cancelled' ELSE 'queued' END," \
    " finished_at = CASE WHEN cancel_requested THEN ?3 END,"

static const char *const sql_text[S_COUNT] = {
    [S_DONE] =
        "DELETE FROM jobs WHERE id = ?1 AND state = 'running'"
        " AND locked_by = ?2",
    /* plain successes of one batch: one statement, not one each */
    [S_DONE_MANY] =
        "DELETE FROM jobs WHERE id IN (SELECT value FROM json_each(?1))"
        " AND state = 'running' AND locked_by = ?2",
    [S_KEEP] =
        "UPDATE jobs SET state = 'completed', finished_at = ?3,"
        " generation = coalesce(?6, generation), locked_by = NULL,"
        " locked_until = NULL, cancel_requested = 0, updated_at = ?3"
        " WHERE id = ?1 AND state = 'running' AND locked_by = ?2",
    [S_RETRY] =
        "UPDATE jobs SET" REQUEUE_STATE " run_at = ?3 + ?4, last_error = ?5,"
        " generation = ?6, locked_by = NULL, locked_until = NULL,"
        " updated_at = ?3"
        " WHERE id = ?1 AND state = 'running' AND locked_by = ?2",
    [S_DEAD] =
        "UPDATE jobs SET state = 'dead', died_at = ?3, finished_at = ?3,"
        " last_error = ?5,"
        " generation = ?6, locked_by = NULL, locked_until = NULL,"
        " updated_at = ?3"
        " WHERE id = ?1 AND state = 'running' AND locked_by = ?2",
    [S_SNOOZE] =
        "UPDATE jobs SET" REQUEUE_STATE " run_at = ?3 + ?4,"
        " attempts = attempts - 1, generation = ?6, locked_by = NULL,"
        " locked_until = NULL, updated_at = ?3"
        " WHERE id = ?1 AND state = 'running' AND locked_by = ?2",
    [S_RELEASE] =
        "UPDATE jobs SET" REQUEUE_STATE " attempts = attempts - 1,"
        " locked_by = NULL, locked_until = NULL, updated_at = ?3"
        " WHERE id = ?1 AND state = 'running' AND locked_by = ?2",
    [S_EXPIRED] =
        "UPDATE jobs SET state = 'dead', died_at = ?3, finished_at = ?3,"
        " attempts = attempts - 1,"
        " last_error = coalesce(?5, last_error), locked_by = NULL,"
        " locked_until = NULL, updated_at = ?3"
        " WHERE id = ?1 AND state = 'running' AND locked_by = ?2",
    [S_CANCELLED] =
        "UPDATE jobs SET state = 'cancelled', finished_at = ?3,"
        " last_error = coalesce(?5, 'cancelled'),"
        " generation = coalesce(?6, generation), locked_by = NULL,"
        " locked_until = NULL, updated_at = ?3"
        " WHERE id = ?1 AND state = 'running' AND locked_by = ?2",
    [S_PROGRESS] =
        "UPDATE jobs SET progress_done = ?3, progress_total = ?4,"
        " progress_note = ?5"
        " WHERE id = ?1 AND state = 'running' AND locked_by = ?2",
    [S_RENEW] =
        "UPDATE jobs SET locked_until = ?2"
        " WHERE state = 'running' AND locked_by = ?1"
        " AND id IN (SELECT value FROM json_each(?3))",
    [S_RESCUE] =
        "UPDATE jobs SET"
        " state = CASE WHEN cancel_requested THEN 'cancelled' ELSE 'queued'"
        "  END,"
        " finished_at = CASE WHEN cancel_requested THEN ?1 END,"
        " last_error = CASE WHEN cancel_requested"
        "  THEN 'cancelled: lease expired: runner lost'"
        "  ELSE 'lease expired: runner lost' END,"
        " locked_by = NULL, locked_until = NULL, updated_at = ?1"
        " WHERE state = 'running' AND locked_until < ?1",
};

static sqlite3_stmt *
stmt(jr_backend *b, int which, jr_err *err)
{
    return jr_sqlite_stmt(b, which, sql_text[which], err);
}

static int
result_stmt_index(const jr_backend *b, int kind)
{
    switch (kind) {
    case JR_DONE:    return b->keep_completed > 0 ? S_KEEP : S_DONE;
    case JR_CANCELLED: return S_CANCELLED;
    case JR_PROGRESS: return S_PROGRESS;
    case JR_RETRY:   return S_RETRY;
    case JR_DEAD:    return S_DEAD;
    case JR_SNOOZE:  return S_SNOOZE;
    case JR_RELEASE: return S_RELEASE;
    case JR_EXPIRED: return S_EXPIRED;
    default:         return -1;
    }
}

/* Applies one result; returns 1 if the row was still ours, 0 if fenced
 * off, -1 on error. */
static int
complete_one(jr_backend *b, const char *token, const jr_result *r, double now,
             jr_err *err)
{
    int which = result_stmt_index(b, r->kind), changed;
    sqlite3_stmt *s;

    if (which < 0)
        return jr_fail(err, JR_EPROTO, "job %lld: unknown result kind %d",
                       (long long)r->id, r->kind);
    if ((s = stmt(b, which, err)) == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, r->id);
    bind_text(s, 2, token);
    if (which == S_PROGRESS) {
        bind_number(s, 3, r->done);
        bind_number(s, 4, r->total);
        bind_text(s, 5, r->note);
    } else if (which != S_DONE) {
        sqlite3_bind_double(s, 3, now);
        sqlite3_bind_double(s, 4, r->delay);
        bind_text(s, 5, r->error);
        bind_text(s, 6, r->generation);
    }
    if ((changed = run(b, s, err, "recording a result")) <= 0)
        return changed;
    if (r->kind == JR_DONE && jr_sqlite_insert_all(b, r->pushes, r->npushes,
                                                   NULL, now, err) < 0)
        return -1;
    return 1;
}

/* 1 if r is a success whose row is simply deleted. */
static int
plain_done(const jr_backend *b, const jr_result *r)
{
    return r->kind == JR_DONE && r->npushes == 0 && b->keep_completed <= 0;
}

/* Applies r[0..n) in a transaction: the plain successes in one DELETE
 * after the others (a job's progress comes before its end, never after),
 * the rest one statement each, in order. Returns how many rows were
 * still ours. */
static int
complete_all(jr_backend *b, const char *token, const jr_result *r, int n,
             double now, jr_err *err)
{
    sqlite3_stmt *s;
    char *ids = NULL, *p = NULL;
    int applied = 0, nplain = 0, i, rc;

    for (i = 0; i < n; i++)
        nplain += plain_done(b, &r[i]);
    if (nplain > 1) {
        if ((p = ids = malloc((size_t)nplain * 22 + 3)) == NULL)
            return jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
        *p++ = '[';
    }
    for (i = 0; i < n; i++) {
        if (ids != NULL && plain_done(b, &r[i])) {
            p += sprintf(p, "%s%lld", p == ids + 1 ? "" : ",",
                         (long long)r[i].id);
            continue;
        }
        if ((rc = complete_one(b, token, &r[i], now, err)) < 0) {
            free(ids);
            return -1;
        }
        applied += rc;
    }
    if (ids == NULL)
        return applied;
    strcpy(p, "]");
    if ((s = stmt(b, S_DONE_MANY, err)) == NULL) {
        free(ids);
        return -1;
    }
    bind_text(s, 1, ids);
    bind_text(s, 2, token);
    rc = run(b, s, err, "recording results");
    free(ids);
    return rc < 0 ? -1 : applied + rc;
}

int
jr_sqlite_complete(jr_backend *b, const char *token, const jr_result *r,
                   int n, jr_err *err)
{
    int applied;

    if (n == 0)
        return 0;
    if (jr_sqlite_begin(b, err) < 0)
        return -1;
    if ((applied = complete_all(b, token, r, n, jr_now(), err)) < 0) {
        jr_sqlite_rollback(b);
        return -1;
    }
    return jr_sqlite_commit(b, err) < 0 ? -1 : applied;
}

/* Records the results and claims, in one transaction: one fsync a round
 * instead of two. */
int
jr_sqlite_complete_claim(jr_backend *b, const char *token,
                         const jr_result *r, int nr, int *applied,
                         double lease, const jr_claim_spec *spec,
                         jr_job **out, jr_err *err)
{
    double now = jr_now();
    int n;

    *applied = 0;
    if (jr_sqlite_begin(b, err) < 0)
        return -1;
    if (nr > 0 && (*applied = complete_all(b, token, r, nr, now, err)) < 0) {
        *applied = 0;
        jr_sqlite_rollback(b);
        return -1;
    }
    if ((n = jr_sqlite_claim_rows(b, token, lease, spec, out, now, err)) < 0) {
        jr_sqlite_rollback(b);
        return -1;
    }
    return jr_sqlite_commit_claimed(b, out, n, err);
}

/* The ids as a JSON array, for json_each (malloc'd; NULL: no memory). */
static char *
ids_json(const int64_t *ids, int n)
{
    char *t = malloc((size_t)n * 21 + 3), *p = t;
    int i;

    if (t == NULL)
        return NULL;
    *p++ = '[';
    for (i = 0; i < n; i++)
        p += sprintf(p, i ? ",%lld" : "%lld", (long long)ids[i]);
    strcpy(p, "]");
    return t;
}

int
jr_sqlite_renew(jr_backend *b, const char *token, double lease,
                const int64_t *ids, int n, jr_err *err)
{
    sqlite3_stmt *s;
    char *list;
    int rc;

    if (n <= 0)
        return 0;
    if ((list = ids_json(ids, n)) == NULL)
        return jr_fail(err, JR_ENOMEM, "sqlite: renewing leases: out of memory");
    if (jr_sqlite_begin(b, err) < 0) {
        free(list);
        return -1;
    }
    if ((s = stmt(b, S_RENEW, err)) == NULL) {
        free(list);
        return jr_sqlite_write_end(b, -1, err);
    }
    bind_text(s, 1, token);
    sqlite3_bind_double(s, 2, jr_now() + lease);
    sqlite3_bind_text(s, 3, list, -1, SQLITE_TRANSIENT);
    rc = jr_sqlite_write_end(b, run(b, s, err, "renewing leases"), err);
    free(list);
    return rc;
}

int
jr_sqlite_rescue(jr_backend *b, jr_err *err)
{
    sqlite3_stmt *s;

    if (jr_sqlite_begin(b, err) < 0)
        return -1;
    if ((s = stmt(b, S_RESCUE, err)) == NULL)
        return jr_sqlite_write_end(b, -1, err);
    sqlite3_bind_double(s, 1, jr_now());
    return jr_sqlite_write_end(b, run(b, s, err, "requeueing expired "
                                      "leases"), err);
}
