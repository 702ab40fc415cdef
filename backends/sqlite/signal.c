/* signal.c - signals and durable sleeps (schema.sql, migration 16): a
 * signal sent to a job (kept in jobs.waits, and the job made ready in
 * the same transaction when it waits for it), the wake-up of the jobs
 * whose wait's date came (a sleep ends, a signal's wait times out), and
 * the counts of waiting jobs. The signal and the wake-up each decide on
 * the row under the write lock: whichever commits first decides, and the
 * other finds it decided. Uses sqlite_int.h. */
#include <stdio.h>
#include <string.h>

#include "sqlite/sqlite_int.h"
#include "base/util.h"

/* The file's statements: slots of sql_text[] (sqlite_int.h). */
enum { S_SIGNAL, S_SIGNAL_READ, S_WAKE_ANY, S_WAKE, S_WAIT_COUNTS,
       S_COUNT };

/* A waiting job holds no unique key (only queued and running ones do):
 * made ready while another job took its key, it runs on as a plain job,
 * as a dead job retried does; the wake also yields to a job of its key
 * woken with it. */
#define KEY_TAKEN_SQL \
    " EXISTS (SELECT 1 FROM jobs o WHERE o.name = jobs.name" \
    "  AND o.unique_key = jobs.unique_key" \
    "  AND o.state IN ('queued', 'running'))"
#define KEY_TAKEN " AND" KEY_TAKEN_SQL

static const char *const sql_text[S_COUNT] = {
    /* ?1 the job, ?2 the signal, ?3 its payload (JSON), ?4 now, ?5 the
     * path of its record: kept unless the job ended, was sent this
     * signal already or timed out waiting for it; a job waiting for it
     * is ready at once */
    [S_SIGNAL] =
        "UPDATE jobs SET waits = json_set(coalesce(waits, '{}'), ?5,"
        "  json_object('payload', json(?3), 'at', ?4)),"
        " state = CASE WHEN state = 'waiting' AND wait_on = ?2"
        "  THEN 'queued' ELSE state END,"
        " fair_tag = CASE WHEN state = 'waiting' AND wait_on = ?2"
        "  THEN NULL ELSE fair_tag END,"
        " run_at = CASE WHEN state = 'waiting' AND wait_on = ?2"
        "  THEN ?4 ELSE run_at END,"
        " wake_at = CASE WHEN state = 'waiting' AND wait_on = ?2"
        "  THEN NULL ELSE wake_at END,"
        " wait_on = CASE WHEN state = 'waiting' AND wait_on = ?2"
        "  THEN NULL ELSE wait_on END,"
        " unique_key = CASE WHEN state = 'waiting' AND wait_on = ?2" KEY_TAKEN
        "  THEN NULL ELSE unique_key END,"
        " updated_at = ?4"
        " WHERE id = ?1 AND state IN ('queued', 'running', 'waiting')"
        " AND json_type(waits, ?5) IS NULL"
        " AND json_type(waits, '$.timeouts.\"' || ?2 || '\"') IS NULL"
        " RETURNING state",
    /* the job as the signal finds it (the write lock held): its state,
     * whether it waits for ?2 now, timed out waiting for it, had it */
    [S_SIGNAL_READ] =
        "SELECT state, state = 'waiting' AND wait_on IS ?2,"
        " json_type(waits, '$.timeouts.\"' || ?2 || '\"') IS NOT NULL,"
        " json_type(waits, '$.signals.\"' || ?2 || '\"') IS NOT NULL"
        " FROM jobs WHERE id = ?1",
    /* whether a job's wait's date came by ?1: read first, so that a look
     * that finds none takes no write lock */
    [S_WAKE_ANY] = "SELECT 1 FROM jobs WHERE wake_at <= ?1 LIMIT 1",
    /* the first ?2 jobs whose wait's date came by ?1: a sleep ends, a
     * signal's wait times out (recorded for the later attempts); a row
     * left with a date by a cancel only loses it */
    [S_WAKE] =
        "UPDATE jobs SET"
        " state = CASE WHEN state = 'waiting' THEN 'queued' ELSE state END,"
        " fair_tag = CASE WHEN state = 'waiting' THEN NULL ELSE fair_tag END,"
        " run_at = CASE WHEN state = 'waiting' THEN ?1 ELSE run_at END,"
        " waits = CASE WHEN state = 'waiting' AND wait_on IS NOT NULL"
        "  THEN json_set(coalesce(waits, '{}'),"
        "  '$.timeouts.\"' || wait_on || '\"', wake_at) ELSE waits END,"
        " unique_key = CASE WHEN state = 'waiting' AND (" KEY_TAKEN_SQL
        "  OR EXISTS (SELECT 1 FROM jobs o WHERE o.name = jobs.name"
        "  AND o.unique_key = jobs.unique_key AND o.id <> jobs.id"
        "  AND o.state = 'waiting' AND o.wake_at <= ?1))"
        "  THEN NULL ELSE unique_key END,"
        " wait_on = NULL, wake_at = NULL, updated_at = ?1"
        " WHERE id IN (SELECT id FROM jobs WHERE wake_at <= ?1"
        "  ORDER BY wake_at LIMIT ?2)",
    /* waiting jobs: for a signal, for a date */
    [S_WAIT_COUNTS] =
        "SELECT (SELECT count(*) FROM jobs WHERE state = 'waiting'"
        "  AND wait_on IS NOT NULL),"
        " (SELECT count(*) FROM jobs WHERE wake_at IS NOT NULL"
        "  AND state = 'waiting' AND wait_on IS NULL)",
};

static sqlite3_stmt *
stmt(jr_backend *b, int which, jr_err *err)
{
    return jr_sqlite_stmt(b, &sql_text[which], err);
}

/* Reads job id as the signal name finds it, in the write transaction:
 * returns 1 if it waits for it now, 0 if the signal is to be kept, or -1
 * with err set when it is refused (st gets its state, size bytes). */
static int
signal_read(jr_backend *b, int64_t id, const char *name, char *st,
            size_t size, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_SIGNAL_READ, err);
    int rc, waits_now, timed_out, had;

    if (s == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, id);
    bind_text(s, 2, name);
    if ((rc = sqlite3_step(s)) != SQLITE_ROW) {
        sqlite3_reset(s);
        return rc == SQLITE_DONE ? jr_fail(err, JR_ENOTFOUND, "signal '%s' "
                                           "to job %lld refused: no such "
                                           "job", name, (long long)id)
                                 : jr_sqlite_fail(b, err, "sending a signal");
    }
    snprintf(st, size, "%s", col_text(s, 0));
    waits_now = sqlite3_column_int(s, 1);
    timed_out = sqlite3_column_int(s, 2);
    had = sqlite3_column_int(s, 3);
    sqlite3_reset(s);
    if (had || timed_out || (strcmp(st, "queued") && strcmp(st, "running")
                             && strcmp(st, "waiting")))
        return jr_signal_refused(err, id, name, st, timed_out);
    return waits_now;
}

/* Sends the signal to the job signal_read found open. */
static int
signal_write(jr_backend *b, int64_t id, const char *name,
             const char *payload, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_SIGNAL, err);
    char path[160];
    int rc;

    if (s == NULL)
        return -1;
    snprintf(path, sizeof path, "$.signals.\"%s\"", name);
    sqlite3_bind_int64(s, 1, id);
    bind_text(s, 2, name);
    bind_text(s, 3, payload != NULL ? payload : "{}");
    sqlite3_bind_double(s, 4, jr_now());
    bind_text(s, 5, path);
    rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return jr_sqlite_fail(b, err, "sending a signal");
    return rc == SQLITE_ROW ? 0 : jr_fail(err, JR_EDB, "signal '%s' to "
                                          "job %lld: the job changed under "
                                          "the write lock", name,
                                          (long long)id);
}

int
jr_sqlite_signal(jr_backend *b, int64_t id, const char *name,
                 const char *payload, char *state, size_t size, jr_err *err)
{
    int woken;

    if (jr_signal_check(name, payload, 0, err) < 0)
        return -1;
    if (jr_sqlite_begin(b, err) < 0)
        return -1;
    if ((woken = signal_read(b, id, name, state, size, err)) < 0 ||
        signal_write(b, id, name, payload, err) < 0) {
        jr_sqlite_rollback(b);
        return -1;
    }
    if (woken)
        snprintf(state, size, "queued");
    return jr_sqlite_commit(b, err) < 0 ? -1 : woken;
}

/* The waiting jobs whose date came, up to max: how many, or -1. */
static int
wake_due(jr_backend *b, int max, jr_err *err)
{
    sqlite3_stmt *s;
    int rc;

    if (max <= 0)
        return 0;
    if ((s = stmt(b, S_WAKE_ANY, err)) == NULL)
        return -1;
    sqlite3_bind_double(s, 1, jr_now());
    rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc != SQLITE_ROW)
        return rc == SQLITE_DONE ? 0 : jr_sqlite_fail(b, err,
                                                      "waking waiting jobs");
    if (jr_sqlite_begin(b, err) < 0)
        return -1;
    if ((s = stmt(b, S_WAKE, err)) == NULL)
        return jr_sqlite_write_end(b, -1, err);
    sqlite3_bind_double(s, 1, jr_now());
    sqlite3_bind_int(s, 2, max);
    return jr_sqlite_write_end(b, run(b, s, err, "waking waiting jobs"),
                               err);
}

int
jr_sqlite_wake(jr_backend *b, int max, jr_err *err)
{
    int expired = jr_sqlite_expire(b, max, err), woken;

    if (expired < 0 || (woken = wake_due(b, max, err)) < 0)
        return -1;
    return expired + woken;
}

int
jr_sqlite_wait_counts(jr_backend *b, long *on_signal, long *on_date,
                      jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_WAIT_COUNTS, err);
    int rc;

    if (s == NULL)
        return -1;
    if ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        *on_signal = (long)sqlite3_column_int64(s, 0);
        *on_date = (long)sqlite3_column_int64(s, 1);
    }
    sqlite3_reset(s);
    return rc == SQLITE_ROW ? 0 : jr_sqlite_fail(b, err,
                                                 "counting waiting jobs");
}
