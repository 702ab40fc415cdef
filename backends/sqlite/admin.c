/* admin.c - what an operator (the command line, the HTTP API, a Lua
 * control) changes: the dead queue (retry, those of sequences gone on
 * past them by seqretry.c; purge, delete), cancels (a queued job at
 * once, a running one by request its runner polls for), queues paused
 * and resumed, finished jobs and idle queues pruned. Each in a
 * transaction of its own. Uses sqlite_int.h, seqretry.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqlite/sqlite_int.h"
#include "base/util.h"

/* A dead job retried keeps its unique key only if no queued or running
 * job holds it and no newer dead job has it; else it runs as a plain job
 * (the unique index would refuse the retry). A job without a key looks
 * for nothing, one with a key in jobs_key (migration 14): a bulk retry
 * scanned the table once per job. */
#define RETRY_KEY \
    " unique_key = CASE WHEN unique_key IS NOT NULL AND EXISTS (SELECT 1" \
    "  FROM jobs o WHERE o.name = jobs.name" \
    "  AND o.unique_key = jobs.unique_key AND o.unique_key IS NOT NULL" \
    "  AND (o.state IN ('queued', 'running')" \
    "  OR (o.state = 'dead' AND o.id > jobs.id)))" \
    "  THEN NULL ELSE unique_key END,"

/* The file's statements: slots of sql_text[] (sqlite_int.h). */
enum { S_DEAD_RETRY, S_DEAD_RETRY_ALL, S_DEAD_PURGE, S_DEAD_DELETE,
       S_PRUNE_COMPLETED, S_PRUNE_KEPT, S_PRUNE_CANCELLED, S_PRUNE_DEAD,
       S_PRUNE_EXPIRED, S_PRUNE_UNIQUE, S_PRUNE_DEPS, S_PRUNE_MEMBERS, S_PRUNE_BATCHES,
       S_CANCEL_QUEUED, S_CANCEL_RUNNING, S_EXISTS, S_CANCEL_POLL, S_PAUSE,
       S_RESUME, S_QUEUE_PRUNE, S_COUNT };

static const char *const sql_text[S_COUNT] = {
    [S_DEAD_RETRY] =
        "UPDATE jobs SET state = 'queued', attempts = 0, run_at = ?2,"
        " fair_tag = NULL,"
        " died_at = NULL, finished_at = NULL, cancel_requested = 0,"
        RETRY_KEY " updated_at = ?2, expires_at = NULL, deadline_at = NULL"
        " WHERE (state = 'dead' OR state = 'expired') AND id = ?1",
    [S_DEAD_RETRY_ALL] =
        "UPDATE jobs SET state = 'queued', attempts = 0, run_at = ?1,"
        " fair_tag = NULL,"
        " died_at = NULL, finished_at = NULL, cancel_requested = 0,"
        RETRY_KEY " updated_at = ?1, deadline_at = NULL"
        " WHERE id IN (SELECT id FROM jobs WHERE died_at IS NOT NULL"
        "  AND state = 'dead' AND " JR_SQLITE_SEQ_PAST_DEAD " IS NOT 1 LIMIT ?2)",
    [S_DEAD_PURGE] =
        "DELETE FROM jobs WHERE id IN (SELECT id FROM jobs"
        " WHERE state = 'dead' AND died_at <= ?1 LIMIT ?2)",
    [S_DEAD_DELETE] = "DELETE FROM jobs WHERE state = 'dead' AND id = ?1",
    /* prune: ?1 the cut-off time, ?2 how many at most */
    [S_PRUNE_COMPLETED] =
        "DELETE FROM jobs WHERE id IN (SELECT id FROM jobs"
        " WHERE state = 'completed' AND finished_at < ?1"
        " AND keep_until IS NULL LIMIT ?2)",
    /* kept for their result (complete.c's S_KEEP): ?1 is now */
    [S_PRUNE_KEPT] =
        "DELETE FROM jobs WHERE id IN (SELECT id FROM jobs"
        " WHERE state = 'completed' AND keep_until < ?1 LIMIT ?2)",
    [S_PRUNE_CANCELLED] =
        "DELETE FROM jobs WHERE id IN (SELECT id FROM jobs"
        " WHERE state = 'cancelled' AND finished_at < ?1 LIMIT ?2)",
    [S_PRUNE_DEAD] =
        "DELETE FROM jobs WHERE id IN (SELECT id FROM jobs"
        " WHERE state = 'dead' AND died_at < ?1 LIMIT ?2)",
    /* expired jobs (docs/queues.md, "Expiry and deadlines") are kept as
     * long as dead ones, from their end */
    [S_PRUNE_EXPIRED] =
        "DELETE FROM jobs WHERE id IN (SELECT id FROM jobs"
        " WHERE state = 'expired' AND finished_at < ?1 LIMIT ?2)",
    /* windows of unique keys that ended (unique_for) */
    [S_PRUNE_UNIQUE] =
        "DELETE FROM unique_keys WHERE (name, unique_key) IN (SELECT name,"
        " unique_key FROM unique_keys WHERE held_until < ?1 LIMIT ?2)",
    /* workflows: edges whose child is gone; batches finished before ?1,
     * their members first (kept as long as cancelled jobs) */
    [S_PRUNE_DEPS] =
        "DELETE FROM job_deps WHERE (parent_id, child_id) IN (SELECT"
        " d.parent_id, d.child_id FROM job_deps d WHERE ?1 IS NOT NULL AND"
        " NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = d.child_id)"
        " LIMIT ?2)",
    [S_PRUNE_MEMBERS] =
        "DELETE FROM batch_jobs WHERE batch_id IN (SELECT id FROM batches"
        " WHERE finished_at < ?1 LIMIT ?2)",
    [S_PRUNE_BATCHES] =
        "DELETE FROM batches WHERE id IN (SELECT id FROM batches b"
        " WHERE finished_at < ?1 AND NOT EXISTS (SELECT 1 FROM batch_jobs m"
        " WHERE m.batch_id = b.id) LIMIT ?2)",
    [S_CANCEL_QUEUED] =
        "UPDATE jobs SET state = 'cancelled', finished_at = ?2,"
        " updated_at = ?2 WHERE id = ?1"
        " AND (state = 'queued' OR state = 'waiting')",
    [S_CANCEL_RUNNING] =
        "UPDATE jobs SET cancel_requested = 1, updated_at = ?2"
        " WHERE id = ?1 AND state = 'running'",
    [S_EXISTS] = "SELECT 1 FROM jobs WHERE id = ?1",
    [S_CANCEL_POLL] =
        "SELECT id FROM jobs WHERE state = 'running' AND cancel_requested = 1"
        " AND locked_by = ?1 ORDER BY id LIMIT ?2",
    [S_PAUSE] =
        "INSERT INTO queues (name, paused, paused_at, updated_at)"
        " VALUES (?1, 1, ?2, ?2) ON CONFLICT (name) DO UPDATE"
        " SET paused = 1, paused_at = coalesce(paused_at, ?2),"
        " updated_at = ?2",
    [S_RESUME] =
        "INSERT INTO queues (name, paused, updated_at) VALUES (?1, 0, ?2)"
        " ON CONFLICT (name) DO UPDATE"
        " SET paused = 0, paused_at = NULL, updated_at = ?2",
    /* idle queues (queue_prune): ?1 cut-off, ?2 kept names (JSON), ?3 at
     * most; the queued probe is jobs_claim's, the running one reads
     * jobs_lease and the dead one jobs_died (a dead row has its died_at)
     * once */
    [S_QUEUE_PRUNE] =
        "DELETE FROM queues WHERE name IN (SELECT q.name FROM queues q"
        " WHERE q.paused = 0 AND q.updated_at < ?1"
        " AND q.name NOT IN (SELECT value FROM json_each(?2))"
        " AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.state = 'queued'"
        "  AND j.queue = q.name)"
        " AND q.name NOT IN (SELECT queue FROM jobs WHERE state = 'running')"
        " AND q.name NOT IN (SELECT queue FROM jobs WHERE died_at IS NOT NULL"
        "  AND state = 'dead')"
        " LIMIT ?3)",
};

static sqlite3_stmt *
stmt(jr_backend *b, int which, jr_err *err)
{
    return jr_sqlite_stmt(b, &sql_text[which], err);
}

/* After a transaction of a bulk action that began at t0 (jr_mono()):
 * waits as long as it took, 0.2 s at most, so that the writers it kept
 * waiting (pushes, a runner's results) get the lock before its next. */
static void
bulk_pause(double t0)
{
    double d = jr_mono() - t0;

    sqlite3_sleep(d < 0.001 ? 1 : d > 0.2 ? 200 : (int)(d * 1000));
}

/* Runs statement which (?1 its time, ?2 JR_BULK_ROWS) in transactions of
 * its own until it changes fewer rows than that. Returns how many it
 * changed, or -1 (the transactions before stay done). */
static int
bulk_run(jr_backend *b, int which, double at, const char *what,
         jr_err *err)
{
    sqlite3_stmt *s;
    double t0;
    int total = 0, rc;

    do {
        t0 = jr_mono();
        if (jr_sqlite_begin(b, err) < 0)
            return -1;
        if ((s = stmt(b, which, err)) == NULL)
            return jr_sqlite_write_end(b, -1, err);
        sqlite3_bind_double(s, 1, at);
        sqlite3_bind_int(s, 2, JR_BULK_ROWS);
        if ((rc = jr_sqlite_write_end(b, run(b, s, err, what), err)) < 0)
            return -1;
        total += rc;
        if (rc == JR_BULK_ROWS)
            bulk_pause(t0);
    } while (rc == JR_BULK_ROWS);
    return total;
}

/* The dead jobs whose sequences have gone on past them, each to its
 * sequence's end (seqretry.c), JR_BULK_ROWS a transaction, each
 * sequence's in their order; before the others (S_DEAD_RETRY_ALL, which
 * leaves them). Returns how many, or -1 (the transactions before stay
 * done). */
static int
retry_past(jr_backend *b, double now, jr_err *err)
{
    int64_t ids[JR_BULK_ROWS];
    sqlite3_stmt *s;
    double t0;
    int total = 0, n, i, rc;

    do {
        t0 = jr_mono();
        if (jr_sqlite_begin(b, err) < 0)
            return -1;
        if ((n = jr_sqlite_seq_past_dead(b, ids, JR_BULK_ROWS, err)) < 0)
            return jr_sqlite_write_end(b, -1, err);
        for (i = 0; i < n; i++) {
            if ((s = stmt(b, S_DEAD_RETRY, err)) == NULL)
                return jr_sqlite_write_end(b, -1, err);
            sqlite3_bind_int64(s, 1, ids[i]);
            sqlite3_bind_double(s, 2, now);
            if ((rc = jr_sqlite_seq_again(b, ids[i], s, now, NULL, err)) < 0)
                return jr_sqlite_write_end(b, -1, err);
            total += rc;
        }
        if (jr_sqlite_write_end(b, 0, err) < 0)
            return -1;
        if (n == JR_BULK_ROWS)
            bulk_pause(t0);
    } while (n == JR_BULK_ROWS);
    return total;
}

int
jr_sqlite_dead_retry(jr_backend *b, const int64_t *ids, int n, jr_err *err)
{
    sqlite3_stmt *s;
    double now = jr_now(), t0 = jr_mono();
    int total = 0, i, rc;

    if (n < 0) {
        if ((total = retry_past(b, now, err)) < 0 ||
            (rc = bulk_run(b, S_DEAD_RETRY_ALL, now, "retrying dead jobs",
                           err)) < 0)
            return -1;
        return total + rc;
    }
    if (jr_sqlite_begin(b, err) < 0)
        return -1;
    for (i = 0; i < n; i++) {
        if ((s = stmt(b, S_DEAD_RETRY, err)) == NULL)
            goto fail;
        sqlite3_bind_int64(s, 1, ids[i]);
        sqlite3_bind_double(s, 2, now);
        /* one the sequence went on past goes to its end */
        if ((rc = jr_sqlite_seq_again(b, ids[i], s, now, NULL, err)) < 0)
            goto fail;
        total += rc;
        /* a long list, JR_BULK_ROWS a transaction */
        if ((i + 1) % JR_BULK_ROWS == 0 && i + 1 < n) {
            if (jr_sqlite_commit(b, err) < 0)
                return -1;
            bulk_pause(t0);
            t0 = jr_mono();
            if (jr_sqlite_begin(b, err) < 0)
                return -1;
        }
    }
    return jr_sqlite_commit(b, err) < 0 ? -1 : total;
fail:
    jr_sqlite_rollback(b);
    return -1;
}

int
jr_sqlite_dead_purge(jr_backend *b, double older_than, jr_err *err)
{
    return bulk_run(b, S_DEAD_PURGE, jr_now() - older_than,
                    "purging dead jobs", err);
}

int
jr_sqlite_dead_delete(jr_backend *b, const int64_t *ids, int n, jr_err *err)
{
    sqlite3_stmt *s;
    int total = 0, i, rc;

    if (jr_sqlite_begin(b, err) < 0)
        return -1;
    for (i = 0; i < n; i++) {
        if ((s = stmt(b, S_DEAD_DELETE, err)) == NULL)
            goto fail;
        sqlite3_bind_int64(s, 1, ids[i]);
        if ((rc = run(b, s, err, "deleting a dead job")) < 0)
            goto fail;
        total += rc;
    }
    return jr_sqlite_commit(b, err) < 0 ? -1 : total;
fail:
    jr_sqlite_rollback(b);
    return -1;
}

/* Deletes at most limit rows of one finished state older than age
 * seconds (age < 0: none). Returns how many, or -1. */
static int
prune_state(jr_backend *b, int which, double age, int limit, jr_err *err)
{
    sqlite3_stmt *s;

    if (age < 0 || limit <= 0)
        return 0;
    if ((s = stmt(b, which, err)) == NULL)
        return -1;
    sqlite3_bind_double(s, 1, jr_now() - age);
    sqlite3_bind_int(s, 2, limit);
    return run(b, s, err, "pruning finished jobs");
}

/* Workflow rows: edges to children gone, batches finished and kept as
 * long as cancelled jobs (older_cancelled < 0: kept). */
static int
prune_flow(jr_backend *b, double older_cancelled, int limit, jr_err *err)
{
    int n, rc;

    if ((n = prune_state(b, S_PRUNE_DEPS, 0, limit, err)) < 0 ||
        (rc = prune_state(b, S_PRUNE_MEMBERS, older_cancelled, limit - n,
                          err)) < 0 ||
        (rc = prune_state(b, S_PRUNE_BATCHES, older_cancelled, limit - n,
                          err)) < 0)
        return -1;
    return n + rc;
}

int
jr_sqlite_prune(jr_backend *b, double older_completed,
                double older_cancelled, double older_dead, int limit,
                jr_err *err)
{
    int n = 0, rc;

    if (limit <= 0)
        return 0;
    if (jr_sqlite_begin(b, err) < 0)
        return -1;
    if ((rc = prune_state(b, S_PRUNE_COMPLETED, older_completed, limit,
                          err)) < 0)
        goto fail;
    n += rc;
    if ((rc = prune_state(b, S_PRUNE_KEPT, 0, limit - n, err)) < 0)
        goto fail;
    n += rc;
    if ((rc = prune_state(b, S_PRUNE_CANCELLED, older_cancelled, limit - n,
                          err)) < 0)
        goto fail;
    n += rc;
    if ((rc = prune_state(b, S_PRUNE_DEAD, older_dead, limit - n, err)) < 0)
        goto fail;
    n += rc;
    if ((rc = prune_state(b, S_PRUNE_EXPIRED, older_dead, limit - n,
                          err)) < 0)
        goto fail;
    n += rc;
    /* windows of unique keys that ended (unique_for) */
    if ((rc = prune_state(b, S_PRUNE_UNIQUE, 0, limit - n, err)) < 0)
        goto fail;
    n += rc;
    if ((rc = prune_flow(b, older_cancelled, limit - n, err)) < 0)
        goto fail;
    n += rc;
    return jr_sqlite_commit(b, err) < 0 ? -1 : n;
fail:
    jr_sqlite_rollback(b);
    return -1;
}

/* Runs statement which on (id, now); returns changes or -1. */
static int
run_id(jr_backend *b, int which, int64_t id, double now, jr_err *err,
       const char *what)
{
    sqlite3_stmt *s = stmt(b, which, err);

    if (s == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_double(s, 2, now);
    return run(b, s, err, what);
}

/* The JR_CANCEL_* outcome of cancelling id, in the open transaction. */
int
jr_sqlite_cancel_one(jr_backend *b, int64_t id, double now, jr_err *err)
{
    sqlite3_stmt *s;
    int rc;

    if ((rc = run_id(b, S_CANCEL_QUEUED, id, now, err, "cancelling a job"))
        != 0)
        return rc < 0 || jr_sqlite_flow_check(b, id, "cancelled", now,
                                              err) < 0 ? -1 : JR_CANCEL_DONE;
    if ((rc = run_id(b, S_CANCEL_RUNNING, id, now, err, "cancelling a job"))
        != 0)
        return rc < 0 ? -1 : JR_CANCEL_REQUESTED;
    if ((s = stmt(b, S_EXISTS, err)) == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, id);
    rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return jr_sqlite_fail(b, err, "cancelling a job");
    return rc == SQLITE_ROW ? JR_CANCEL_FINISHED : JR_CANCEL_NOTFOUND;
}

int
jr_sqlite_cancel(jr_backend *b, const int64_t *ids, int n, int *outcome,
                 jr_err *err)
{
    double now = jr_now();
    int i;

    if (n <= 0)
        return 0;
    if (jr_sqlite_begin(b, err) < 0)
        return -1;
    for (i = 0; i < n; i++) {
        if ((outcome[i] = jr_sqlite_cancel_one(b, ids[i], now, err)) < 0) {
            jr_sqlite_rollback(b);
            return -1;
        }
    }
    return jr_sqlite_commit(b, err);
}

int
jr_sqlite_cancelled(jr_backend *b, const char *token, int64_t *ids,
                    int max, jr_err *err)
{
    sqlite3_stmt *s;
    int n = 0, rc;

    if (max <= 0)
        return 0;
    if ((s = stmt(b, S_CANCEL_POLL, err)) == NULL)
        return -1;
    bind_text(s, 1, token);
    sqlite3_bind_int(s, 2, max);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW && n < max)
        ids[n++] = sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? n :
           jr_sqlite_fail(b, err, "reading cancel requests");
}

static int
set_paused(jr_backend *b, int which, const char *queue, jr_err *err)
{
    sqlite3_stmt *s;

    if (jr_name_check(queue, "queue name", err) < 0)
        return -1;
    if (jr_sqlite_begin(b, err) < 0)
        return -1;
    if ((s = stmt(b, which, err)) == NULL)
        return jr_sqlite_write_end(b, -1, err);
    bind_text(s, 1, queue);
    sqlite3_bind_double(s, 2, jr_now());
    return jr_sqlite_write_end(b, run(b, s, err, which == S_PAUSE ?
                                      "pausing a queue" : "resuming a queue"),
                               err) < 0 ? -1 : 0;
}

int
jr_sqlite_pause(jr_backend *b, const char *queue, jr_err *err)
{
    return set_paused(b, S_PAUSE, queue, err);
}

int
jr_sqlite_resume(jr_backend *b, const char *queue, jr_err *err)
{
    return set_paused(b, S_RESUME, queue, err);
}

int
jr_sqlite_queue_prune(jr_backend *b, double idle, const char *const *keep,
                      int nkeep, int limit, jr_err *err)
{
    char *json = jr_sqlite_names_json(keep, nkeep);
    sqlite3_stmt *s;
    int n = -1;

    if (json == NULL)
        return jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
    if (jr_sqlite_begin(b, err) == 0 &&
        (s = stmt(b, S_QUEUE_PRUNE, err)) != NULL) {
        sqlite3_bind_double(s, 1, jr_now() - idle);
        bind_text(s, 2, json);
        sqlite3_bind_int(s, 3, limit);
        n = run(b, s, err, "pruning idle queues");
    }
    free(json);
    if (n < 0 || jr_sqlite_commit(b, err) < 0) {
        jr_sqlite_rollback(b);
        return -1;
    }
    return n;
}

