/* unique.c - unique jobs (docs/schedules.md, "Unique jobs"): a key held
 * while a job with it waits or runs, or for a window (unique_for); a push
 * whose key is held is a duplicate, or debounces the queued holder
 * (on_conflict replace), or cancels the running one (cancel_running).
 * The writer lock of BEGIN IMMEDIATE makes look-up then insert race-free;
 * the unique index jobs_unique is the last word. Uses sqlite_int.h. */
#include <string.h>

#include "sqlite/sqlite_int.h"

/* The file's statements: slots of sql_text[] (sqlite_int.h);
 * S_UNIQUE_HOLDER, S_UNIQUE_WINDOW in this order (unique_holder). */
enum { S_UNIQUE_HOLDER, S_UNIQUE_WINDOW, S_UNIQUE_TAKE, S_UNIQUE_REPLACE,
       S_UNIQUE_CANCEL, S_UNIQUE_UNWINDOW, S_COUNT };

static const char *const sql_text[S_COUNT] = {
    [S_UNIQUE_HOLDER] =
        "SELECT id, state FROM jobs WHERE name = ?1 AND unique_key = ?2"
        " AND unique_key IS NOT NULL AND state IN ('queued', 'running')",
    [S_UNIQUE_WINDOW] =
        "SELECT job_id FROM unique_keys WHERE name = ?1 AND unique_key = ?2"
        " AND held_until > ?3 AND job_id IS NOT NULL",
    [S_UNIQUE_TAKE] =
        "INSERT OR REPLACE INTO unique_keys (name, unique_key, job_id,"
        " held_until) VALUES (?1, ?2, ?3, ?4)",
    /* debounce: queued job ?5 takes push ?1's payload ?2 (sealed: its
     * stub, the bytes ?10), run_at ?3 and the limit key they give (?9 as
     * given, else the payload's) */
    [S_UNIQUE_REPLACE] =
        "UPDATE jobs SET payload = ?2, sealed = ?10, run_at = ?3,"
        " updated_at = ?4, limit_key = " JR_SQLITE_LIMIT_KEY_OF
        " WHERE id = ?5 AND state = 'queued'",
    /* on_conflict cancel_running: the running job of name ?1 and key ?2
     * is cancelled (as admin.c's cancel of a running job) and gives up
     * its key, and the window it held (unique_for) */
    [S_UNIQUE_CANCEL] =
        "UPDATE jobs SET cancel_requested = 1, unique_key = NULL,"
        " updated_at = ?3 WHERE name = ?1 AND unique_key = ?2"
        " AND state = 'running' RETURNING id",
    [S_UNIQUE_UNWINDOW] =
        "DELETE FROM unique_keys WHERE name = ?1 AND unique_key = ?2"
        " AND job_id = ?3",
};

static sqlite3_stmt *
stmt(jr_backend *b, int which, jr_err *err)
{
    return jr_sqlite_stmt(b, &sql_text[which], err);
}

/* The job holding p's key: queued or running with it, or the job of a
 * window still held (unique_for). Returns its id, 0 if the key is free,
 * -1 on error; *queued says whether the holder is queued. */
static int64_t
unique_holder(jr_backend *b, const jr_push *p, double now, int *queued,
              jr_err *err)
{
    sqlite3_stmt *s;
    int64_t id = 0;
    int rc, which;

    *queued = 0;
    for (which = S_UNIQUE_HOLDER; which <= S_UNIQUE_WINDOW; which++) {
        if ((s = stmt(b, which, err)) == NULL)
            return -1;
        bind_text(s, 1, p->name);
        bind_text(s, 2, p->unique_key);
        sqlite3_bind_double(s, 3, now);
        if ((rc = sqlite3_step(s)) == SQLITE_ROW) {
            id = sqlite3_column_int64(s, 0);
            *queued = which == S_UNIQUE_HOLDER &&
                      strcmp(col_text(s, 1), "queued") == 0;
        }
        sqlite3_reset(s);
        if (rc != SQLITE_ROW && rc != SQLITE_DONE)
            return jr_sqlite_fail(b, err, "looking up a unique key");
        if (id > 0)
            return id;
    }
    return 0;
}

/* on_conflict cancel_running: cancels the running holder of p's key,
 * which gives up the key and its window. Returns 1 if there was one, 0
 * if not, -1 on error. */
static int
unique_cancel(jr_backend *b, const jr_push *p, double now, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_UNIQUE_CANCEL, err);
    int64_t id = 0;
    int rc;

    if (s == NULL)
        return -1;
    bind_text(s, 1, p->name);
    bind_text(s, 2, p->unique_key);
    sqlite3_bind_double(s, 3, now);
    if ((rc = sqlite3_step(s)) == SQLITE_ROW)
        id = sqlite3_column_int64(s, 0);
    while (rc == SQLITE_ROW)
        rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc != SQLITE_DONE)
        return jr_sqlite_fail(b, err, "cancelling a unique job");
    if (id == 0)
        return 0;
    if ((s = stmt(b, S_UNIQUE_UNWINDOW, err)) == NULL)
        return -1;
    bind_text(s, 1, p->name);
    bind_text(s, 2, p->unique_key);
    sqlite3_bind_int64(s, 3, id);
    return run(b, s, err, "cancelling a unique job") < 0 ? -1 : 1;
}

/* A push whose key is held: debounce (on_conflict replace or
 * cancel_running) moves a queued holder to p's payload, run_at and limit
 * key, and in a fair queue to the key and turn they give (fairreplace.c); a
 * running one is never replaced. */
static int
unique_conflict(jr_backend *b, const jr_push *p, int64_t holder, double now,
                jr_err *err)
{
    sqlite3_stmt *s;
    int rc;

    if (p->on_conflict == JR_CONFLICT_KEEP || holder == 0)
        return JR_PUSH_DUPLICATE;
    if ((s = stmt(b, S_UNIQUE_REPLACE, err)) == NULL)
        return -1;
    bind_text(s, 1, p->name);
    jr_sqlite_bind_sealed(s, 2, 10, p->payload ? p->payload : "{}");
    sqlite3_bind_double(s, 3, p->run_at > 0 ? p->run_at : now + p->run_in);
    sqlite3_bind_double(s, 4, now);
    sqlite3_bind_int64(s, 5, holder);
    bind_text(s, 9, p->key);
    if ((rc = run(b, s, err, "replacing a unique job")) < 0)
        return -1;
    if (rc > 0 && jr_sqlite_fair_replaced(b, holder, now, err) < 0)
        return -1;
    return rc > 0 ? JR_PUSH_REPLACED : JR_PUSH_DUPLICATE;
}

/* Holds p's key until now + unique_for for job id. */
static int
unique_take(jr_backend *b, const jr_push *p, int64_t id, double now,
            jr_err *err)
{
    sqlite3_stmt *s;

    if (p->unique_for <= 0)
        return 0;
    if ((s = stmt(b, S_UNIQUE_TAKE, err)) == NULL)
        return -1;
    bind_text(s, 1, p->name);
    bind_text(s, 2, p->unique_key);
    sqlite3_bind_int64(s, 3, id);
    sqlite3_bind_double(s, 4, now + p->unique_for);
    return run(b, s, err, "holding a unique key") < 0 ? -1 : 0;
}

/* Inserts p, or finds the job that holds its key. */
int
jr_sqlite_insert_one(jr_backend *b, const jr_push *p, double now,
                     int64_t *id, jr_err *err)
{
    int64_t holder, got;
    int queued, outcome = JR_PUSH_NEW, cancelled = 0;

    if (p->unique_key != NULL &&
        p->on_conflict == JR_CONFLICT_CANCEL_RUNNING &&
        (cancelled = unique_cancel(b, p, now, err)) < 0)
        return -1;
    if (cancelled)
        outcome = JR_PUSH_SUPERSEDED;
    if (p->unique_key == NULL) {
        outcome = jr_sqlite_insert_row(b, p, now, id, err);
    } else if ((holder = unique_holder(b, p, now, &queued, err)) < 0) {
        return -1;
    } else if (holder > 0) {
        if ((outcome = unique_conflict(b, p, queued ? holder : 0, now,
                                       err)) < 0)
            return -1;
        if (id != NULL)
            *id = holder;
    } else if (jr_sqlite_insert_row(b, p, now, &got, err) < 0 ||
               unique_take(b, p, got, now, err) < 0) {
        return -1;
    } else if (id != NULL) {
        *id = got;
    }
    if (outcome >= 0 && p->outcome != NULL)
        *p->outcome = outcome;
    return outcome < 0 ? -1 : 0;
}
