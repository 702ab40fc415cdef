/* complete.c - what becomes of a claimed job: its result (deleted or
 * kept completed, retried, dead, snoozed, released, expired, cancelled,
 * its progress), one result at a time, fenced by the runner's token so a
 * job taken over by another runner is left alone. Uses sqlite_int.h;
 * push.c for the jobs a success pushes; round.c records a round's
 * results (the plain successes in one DELETE) with the next claim in one
 * transaction; lease.c renews and rescues leases. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqlite/sqlite_int.h"
#include "base/util.h"

/* A requeue (retry, snooze, release, rescue) of a job whose cancel was
 * requested ends it cancelled instead. */
#define REQUEUE_STATE \
    " state = CASE WHEN cancel_requested THEN 'cancelled' ELSE 'queued' END," \
    " fair_tag = NULL," \
    " finished_at = CASE WHEN cancel_requested THEN ?3 END,"

/* A retry at ?3 + ?4 would start at or past the job's deadline (NULL, so
 * false, for a job without one). */
#define PAST_DEADLINE "deadline_at <= ?3 + ?4"

/* ?7 the attempt's seconds, ?8 its worker (NULL: not known) */
#define FAILED_ATTEMPT \
    JR_SQLITE_ATTEMPT_LOG("?5", "?3", "?7", "?2", "?8", "?6")

/* The file's statements: slots of sql_text[] (sqlite_int.h); the _P
 * ones, made from the others' text without RETURNING, are for jobs
 * without a flow bit. */
enum { S_DONE, S_DONE_FLOW, S_KEEP,
       S_KEEP_P, S_RETRY_P, S_DEAD_P, S_SNOOZE_P, S_RELEASE_P, S_EXPIRED_P,
       S_CANCELLED_P, S_RETRY, S_DEAD, S_SNOOZE, S_RELEASE, S_EXPIRED,
       S_CANCELLED, S_PROGRESS, S_STEP, S_WAIT, S_WAIT_P,
       S_WAIT_READY, S_COUNT };

static const char *const sql_text[S_COUNT] = {
    /* a job pushed or waited on with result_ttl is kept (S_KEEP) */
    [S_DONE] =
        "DELETE FROM jobs WHERE id = ?1 AND state = 'running'"
        " AND locked_by = ?2 AND result_ttl IS NULL AND flow = 0",
    /* a job with children or in a batch (flow.c settles its end) */
    [S_DONE_FLOW] =
        "DELETE FROM jobs WHERE id = ?1 AND state = 'running'"
        " AND locked_by = ?2 AND result_ttl IS NULL AND flow <> 0"
        " RETURNING coalesce(trace, '')",
    /* ?7 the result (JSON or NULL), ?8 the runner's result_ttl, ?9
     * retention.completed: a job with a result or a result_ttl of its
     * own stays until keep_until; ?5 why a return value was not stored;
     * ?10 its jobrunner.sql statements (NULL: none); ?11 its run's logs
     * (NULL: none) */
    [S_KEEP] =
        "UPDATE jobs SET state = 'completed', finished_at = ?3,"
        " sql_statements = ?10,"
        " logs = CASE WHEN ?11 IS NULL THEN logs ELSE "
        JR_SQLITE_LOGS_APPEND("?11")
        "  END,"
        " generation = coalesce(?6, generation), locked_by = NULL,"
        " locked_until = NULL, cancel_requested = 0, updated_at = ?3,"
        " last_error = coalesce(?5, last_error),"
        " result = ?7, keep_until = CASE WHEN ?7 IS NOT NULL"
        "  OR result_ttl IS NOT NULL"
        "  THEN ?3 + max(coalesce(result_ttl, ?8), ?9) END"
        " WHERE id = ?1 AND state = 'running' AND locked_by = ?2"
        " RETURNING flow, state",
    /* a retry due at or past the job's deadline (schema.sql, migration
     * 21) is not scheduled: the job ends dead, 'deadline passed' (its
     * attempt's own error in its history) */
    [S_RETRY] =
        "UPDATE jobs SET"
        " state = CASE WHEN cancel_requested THEN 'cancelled'"
        "  WHEN " PAST_DEADLINE " THEN 'dead' ELSE 'queued' END,"
        " fair_tag = NULL,"
        " finished_at = CASE WHEN cancel_requested OR " PAST_DEADLINE
        "  THEN ?3 END,"
        " died_at = CASE WHEN NOT cancel_requested AND " PAST_DEADLINE
        "  THEN ?3 END," FAILED_ATTEMPT
        " run_at = ?3 + ?4, last_error = CASE WHEN " PAST_DEADLINE
        "  THEN 'deadline passed' ELSE ?5 END,"
        " generation = ?6, locked_by = NULL, locked_until = NULL,"
        " updated_at = ?3"
        " WHERE id = ?1 AND state = 'running' AND locked_by = ?2"
        " RETURNING flow, state",
    [S_DEAD] =
        "UPDATE jobs SET state = 'dead', died_at = ?3, finished_at = ?3,"
        FAILED_ATTEMPT " last_error = ?5,"
        " generation = ?6, locked_by = NULL, locked_until = NULL,"
        " updated_at = ?3"
        " WHERE id = ?1 AND state = 'running' AND locked_by = ?2"
        " RETURNING flow, state",
    [S_SNOOZE] =
        "UPDATE jobs SET" REQUEUE_STATE " run_at = ?3 + ?4,"
        " attempts = attempts - 1, generation = ?6, locked_by = NULL,"
        " locked_until = NULL, updated_at = ?3"
        " WHERE id = ?1 AND state = 'running' AND locked_by = ?2"
        " RETURNING flow, state",
    [S_RELEASE] =
        "UPDATE jobs SET" REQUEUE_STATE " attempts = attempts - 1,"
        " generation = coalesce(?6, generation),"
        " locked_by = NULL, locked_until = NULL, updated_at = ?3"
        " WHERE id = ?1 AND state = 'running' AND locked_by = ?2"
        " RETURNING flow, state",
    [S_EXPIRED] =
        "UPDATE jobs SET state = 'dead', died_at = ?3, finished_at = ?3,"
        " attempts = attempts - 1,"
        " last_error = coalesce(?5, last_error), locked_by = NULL,"
        " locked_until = NULL, updated_at = ?3"
        " WHERE id = ?1 AND state = 'running' AND locked_by = ?2"
        " RETURNING flow, state",
    [S_CANCELLED] =
        "UPDATE jobs SET state = 'cancelled', finished_at = ?3,"
        " last_error = coalesce(?5, 'cancelled'),"
        " generation = coalesce(?6, generation), locked_by = NULL,"
        " locked_until = NULL, updated_at = ?3"
        " WHERE id = ?1 AND state = 'running' AND locked_by = ?2"
        " RETURNING flow, state",
    [S_PROGRESS] =
        "UPDATE jobs SET progress_done = ?3, progress_total = ?4,"
        " progress_note = ?5"
        " WHERE id = ?1 AND state = 'running' AND locked_by = ?2",
    /* a job's steps: the whole list, only its holder's */
    [S_STEP] =
        "UPDATE jobs SET steps = ?3"
        " WHERE id = ?1 AND state = 'running' AND locked_by = ?2",
    /* a wait (schema.sql, migration 16): waiting until signal ?5 or
     * date ?4 (NULL: none), the attempt not counted; ?7 the path of the
     * record the wait keeps for later attempts (its deadline or wake),
     * NULL: none */
    [S_WAIT] =
        "UPDATE jobs SET"
        " state = CASE WHEN cancel_requested THEN 'cancelled'"
        "  ELSE 'waiting' END,"
        " finished_at = CASE WHEN cancel_requested THEN ?3 END,"
        " wait_on = CASE WHEN cancel_requested THEN NULL ELSE ?5 END,"
        " wake_at = CASE WHEN cancel_requested THEN NULL ELSE ?4 END,"
        " waits = CASE WHEN ?7 IS NULL THEN waits"
        "  ELSE json_set(coalesce(waits, '{}'), ?7, ?4) END,"
        " attempts = attempts - 1, generation = ?6, locked_by = NULL,"
        " locked_until = NULL, updated_at = ?3"
        " WHERE id = ?1 AND state = 'running' AND locked_by = ?2"
        " RETURNING flow, state",
    /* the signal a wait asks for came while the job ran: ready now */
    [S_WAIT_READY] =
        "UPDATE jobs SET state = 'queued', run_at = ?2, wait_on = NULL,"
        " fair_tag = NULL,"
        " wake_at = NULL"
        " WHERE id = ?1 AND state = 'waiting' AND wait_on IS NOT NULL"
        " AND json_type(waits, '$.signals.\"' || wait_on || '\"')"
        "  IS NOT NULL",
};

static sqlite3_stmt *
stmt(jr_backend *b, int which, jr_err *err)
{
    return jr_sqlite_stmt(b, &sql_text[which], err);
}

static int
result_stmt_index(const jr_backend *b, const jr_result *r)
{
    switch (r->kind) {
    case JR_DONE:    return b->keep_completed > 0 || r->result != NULL ?
                            S_KEEP : S_DONE;
    case JR_CANCELLED: return S_CANCELLED;
    case JR_PROGRESS: return S_PROGRESS;
    case JR_STEP:    return S_STEP;
    case JR_RETRY:   return S_RETRY;
    case JR_DEAD:    return S_DEAD;
    case JR_SNOOZE:  return S_SNOOZE;
    case JR_RELEASE: return S_RELEASE;
    case JR_EXPIRED: return S_EXPIRED;
    case JR_WAIT:    return S_WAIT;
    default:         return -1;
    }
}

/* The plain twin of a result statement that ends in RETURNING (whose
 * rows SQLite buffers in a table of its own, set up at each run: a
 * zeroed page a job): the same text with "AND flow = 0" instead, for
 * the jobs without children or batch, which have nothing to settle. */
static int
plain_slot(int which)
{
    switch (which) {
    case S_KEEP:      return S_KEEP_P;
    case S_RETRY:     return S_RETRY_P;
    case S_DEAD:      return S_DEAD_P;
    case S_SNOOZE:    return S_SNOOZE_P;
    case S_RELEASE:   return S_RELEASE_P;
    case S_EXPIRED:   return S_EXPIRED_P;
    case S_CANCELLED: return S_CANCELLED_P;
    case S_WAIT:      return S_WAIT_P;
    default:          return -1;
    }
}

/* Returns the plain twin of which (plain_slot), prepared at first use. */
static sqlite3_stmt *
plain_stmt(jr_backend *b, int which, jr_err *err)
{
    static const char ret[] = " RETURNING flow, state";
    int slot = plain_slot(which);
    const char *text = sql_text[which];
    size_t n = strlen(text) - (sizeof ret - 1);
    sqlite3_stmt *s;
    char *sql;

    if (jr_stmtmap_get(&b->st, &sql_text[slot]) != NULL)
        return jr_sqlite_stmt(b, &sql_text[slot], err);
    if (strcmp(text + n, ret) != 0) {
        jr_fail(err, JR_EDB, "sqlite: statement %d ends in no RETURNING",
                which);
        return NULL;
    }
    if ((sql = malloc(n + 32)) == NULL) {
        jr_fail(err, JR_ENOMEM, "sqlite: out of memory for a statement");
        return NULL;
    }
    snprintf(sql, n + 32, "%.*s AND flow = 0", (int)n, text);
    s = jr_sqlite_prepare(b, &sql_text[slot], sql, err);
    free(sql);
    return s;
}

/* Steps a result's statement, which returns the row's flow and new
 * state when it changed it: *st gets the state when the job has a flow
 * bit and ended (flow.c settles it), else "". Returns 1 if the row was
 * ours, 0 if not, -1 on error. */
static int
run_result(jr_backend *b, sqlite3_stmt *s, char *st, size_t size,
           jr_err *err)
{
    int rc = sqlite3_step(s), got = rc == SQLITE_ROW;

    st[0] = '\0';
    if (got) {
        if (sqlite3_column_int(s, 0) != 0)
            snprintf(st, size, "%s", col_text(s, 1));
        rc = sqlite3_step(s);
    }
    sqlite3_reset(s);
    if (rc != SQLITE_DONE)
        return jr_sqlite_fail(b, err, "recording a result");
    if (strcmp(st, "dead") && strcmp(st, "cancelled") &&
        strcmp(st, "completed"))
        st[0] = '\0';
    return got;
}

/* A success of a job with a flow bit, which the plain statements leave
 * alone: deleted (or kept); *st gets "completed" when it was ours. Its
 * trace context is kept for its batch's callbacks (b->gone_trace). */
static int
done_flow(jr_backend *b, const char *token, const jr_result *r, char *st,
          size_t size, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_DONE_FLOW, err);
    int changed;

    if (s == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, r->id);
    bind_text(s, 2, token);
    if ((changed = jr_sqlite_step_one(b, s, b->gone_trace,
                                      sizeof b->gone_trace, NULL, err,
                                      "recording a result")) > 0) {
        b->gone_id = r->id;
        snprintf(st, size, "completed");
    }
    return changed;
}

/* Binds S_KEEP's ?10: r's jobrunner.sql statements, NULL for none; and
 * ?11, its run's logs. */
static void
bind_nsql(sqlite3_stmt *s, const jr_result *r)
{
    if (r->nsql > 0)
        sqlite3_bind_int(s, 10, r->nsql);
    else
        sqlite3_bind_null(s, 10);
    jr_sqlite_bind_logs(s, 11, r);
}

/* A success S_DONE did not delete: kept if ours with a result_ttl
 * (*st as run_result sets it). */
static int
keep_one(jr_backend *b, const char *token, const jr_result *r, double now,
         char *st, size_t size, jr_err *err)
{
    sqlite3_stmt *s;
    int k, changed = 0;

    for (k = 0; k < 2 && changed == 0; k++) {
        if ((s = k ? stmt(b, S_KEEP, err) : plain_stmt(b, S_KEEP, err)) ==
            NULL)
            return -1;
        sqlite3_bind_int64(s, 1, r->id);
        bind_text(s, 2, token);
        sqlite3_bind_double(s, 3, now);
        bind_text(s, 5, r->error);
        bind_text(s, 6, r->generation);
        sqlite3_bind_null(s, 7);
        sqlite3_bind_double(s, 8, b->result_ttl);
        sqlite3_bind_double(s, 9, b->keep_completed);
        bind_nsql(s, r);
        changed = k ? run_result(b, s, st, size, err) :
                      run(b, s, err, "recording a result");
    }
    return changed;
}

/* Binds a wait's date (?4), signal (?5) and record's path (?7). */
static void
bind_wait(sqlite3_stmt *s, const jr_result *r)
{
    char path[200];

    if (isfinite(r->wake_at))
        sqlite3_bind_double(s, 4, r->wake_at);
    else
        sqlite3_bind_null(s, 4);
    bind_text(s, 5, r->wait_on);
    if (r->wait_on != NULL)     /* a name of [A-Za-z0-9_.:-] */
        snprintf(path, sizeof path, "$.deadlines.\"%s\"", r->wait_on);
    else
        snprintf(path, sizeof path, "$.sleeps.\"%d\"", r->sleep_n);
    if (isfinite(r->wake_at))   /* path dies here: SQLite copies it */
        sqlite3_bind_text(s, 7, path, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(s, 7);
}

/* A wait recorded: ready at once when its signal came while it ran. */
static int
wait_ready(jr_backend *b, const jr_result *r, double now, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_WAIT_READY, err);

    if (s == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, r->id);
    sqlite3_bind_double(s, 2, now);
    return run(b, s, err, "recording a wait");
}

/* Binds r to s, the statement which of its kind. */
static void
bind_result(jr_backend *b, sqlite3_stmt *s, int which, const char *token,
            const jr_result *r, double now)
{
    sqlite3_bind_int64(s, 1, r->id);
    bind_text(s, 2, token);
    if (which == S_STEP) {
        bind_text(s, 3, r->result);
    } else if (which == S_PROGRESS) {
        bind_number(s, 3, r->done);
        bind_number(s, 4, r->total);
        bind_text(s, 5, r->note);
    } else if (which != S_DONE) {
        sqlite3_bind_double(s, 3, now);
        sqlite3_bind_double(s, 4, r->delay);
        bind_text(s, 5, r->error);
        bind_text(s, 6, r->generation);
        if (which == S_RETRY || which == S_DEAD) {
            if (r->secs > 0)
                sqlite3_bind_double(s, 7, r->secs);
            if (r->worker > 0)
                sqlite3_bind_int(s, 8, r->worker);
        }
    }
    if (which == S_KEEP) {
        bind_text(s, 7, r->result);
        sqlite3_bind_double(s, 8, b->result_ttl);
        sqlite3_bind_double(s, 9, b->keep_completed);
        bind_nsql(s, r);
    }
    if (which == S_WAIT)
        bind_wait(s, r);
}

/* 1 if the STEP result r is followed in its batch (which ends before
 * end), at most STEP_LOOK results on, by a STEP of the same job: each
 * holds the job's whole list, so only the last is written (a look that
 * misses one writes it twice, in order). */
#define STEP_LOOK 64

static int
superseded(const jr_result *r, const jr_result *end)
{
    const jr_result *k;

    for (k = r + 1; k < end && k <= r + STEP_LOOK; k++)
        if (k->kind == JR_STEP && k->id == r->id)
            return 1;
    return 0;
}

/* Applies one result; returns 1 if the row was still ours, 0 if fenced
 * off, -1 on error. A success's pushes go in before its end is settled
 * (flow.c): a member that adds to its own batch keeps the batch open. */
int
jr_sqlite_complete_one(jr_backend *b, const char *token, const jr_result *r,
                       const jr_result *end, double now, jr_err *err)
{
    int which = result_stmt_index(b, r), changed;
    sqlite3_stmt *s;
    char st[16] = "";

    if (which < 0)
        return jr_fail(err, JR_EPROTO, "job %lld: unknown result kind %d",
                       (long long)r->id, r->kind);
    if (which == S_STEP && superseded(r, end))
        return 1;               /* counted as applied: the later one is */
    if (r->kind == JR_DONE && r->held == 1 && r->lines_wanted != NULL &&
        b->keep_completed > 0) {
        *r->lines_wanted = 1;   /* kept: left running for its lines */
        return 1;
    }
    if (which == S_DONE || which == S_PROGRESS || which == S_STEP) {
        if ((s = stmt(b, which, err)) == NULL)
            return -1;
        bind_result(b, s, which, token, r, now);
        changed = run(b, s, err, "recording a result");
    } else {                    /* the plain twin, then the flow one */
        if ((s = plain_stmt(b, which, err)) == NULL)
            return -1;
        bind_result(b, s, which, token, r, now);
        if ((changed = run(b, s, err, "recording a result")) == 0) {
            if ((s = stmt(b, which, err)) == NULL)
                return -1;
            bind_result(b, s, which, token, r, now);
            changed = run_result(b, s, st, sizeof st, err);
        }
    }
    if (changed == 0 && which == S_DONE)    /* ours with a flow bit? */
        changed = done_flow(b, token, r, st, sizeof st, err);
    if (changed == 0 && which == S_DONE && r->held == 1 &&
        r->lines_wanted != NULL) {
        *r->lines_wanted = 1;   /* ours with a result_ttl, or not ours:
                                   left for its lines (held_left) */
        return 1;
    }
    if (changed == 0 && which == S_DONE)    /* ours with a result_ttl? */
        changed = keep_one(b, token, r, now, st, sizeof st, err);
    if (changed <= 0)
        return changed;
    if (r->kind == JR_WAIT && r->wait_on != NULL &&
        wait_ready(b, r, now, err) < 0)
        return -1;
    if (r->kind == JR_DONE && jr_sqlite_insert_all(b, r->pushes, r->npushes,
                                                   NULL, now, err) < 0)
        return -1;
    if (st[0] != '\0' && jr_sqlite_flow_settle(b, r->id, st,
            r->kind == JR_DONE ? r->result : NULL, now, err) < 0)
        return -1;
    return 1;
}
