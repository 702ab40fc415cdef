/* inspect.c - what an operator reads: counts per job name and per queue,
 * the dead queue, the paused queues, the ready jobs per queue (the
 * runner's metrics), one job in full and lists of jobs by state, name
 * and queue. Reads only, outside any write transaction. Uses
 * sqlite_int.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqlite/sqlite_int.h"
#include "base/util.h"
#include "where.h"

/* The columns of show and list, in the order row_fields reads them. */
#define JOB_COLUMNS \
    "id, name, queue, state, attempts, max_retries, priority, run_at," \
    " created_at, updated_at, started_at, finished_at, last_error," \
    " generation, locked_by, locked_until, progress_done, progress_total," \
    " progress_note, cancel_requested, limit_key"

#define LIST_SQL(order) \
    "SELECT " JOB_COLUMNS " FROM jobs" \
    " WHERE id < coalesce(?8, 9223372036854775807) AND id > coalesce(?9, 0)" \
    " AND (?1 IS NULL OR state = ?1" \
    "  OR (?1 = 'scheduled' AND state = 'queued' AND run_at > ?5)" \
    "  OR (?1 = 'ready' AND state = 'queued' AND run_at <= ?5))" \
    " AND (?2 IS NULL OR name = ?2) AND (?3 IS NULL OR queue = ?3)" \
    " AND (?6 IS NULL OR (json_extract(payload, ?6) IS json_extract(?7, '$')" \
    "  AND replace(json_type(payload, ?6), 'integer', 'real')" \
    "   = replace(json_type(?7), 'integer', 'real')))" \
    " ORDER BY id " order " LIMIT ?4"

/* One count per stored state (job.h's JR_STATES, queued split by run_at
 * into ready and scheduled), in the list's order: what state_counts
 * reads. A new state is a sum here. */
#define STATE_COUNTS \
    "sum(state = 'queued' AND run_at <= ?1)," \
    " sum(state = 'queued' AND run_at > ?1), sum(state = 'running')," \
    " sum(state = 'dead'), sum(state = 'cancelled')," \
    " sum(state = 'completed'), sum(state = 'waiting')," \
    " sum(state = 'expired')"

/* The file's statements: slots of sql_text[] (sqlite_int.h). */
enum { S_STATS, S_DEAD_LIST, S_QUEUE_LIST, S_PAUSED, S_READY_BY_QUEUE, S_SHOW,
       S_LIST, S_LIST_ASC, S_COUNT };

static const char *const sql_text[S_COUNT] = {
    [S_STATS] =
        "SELECT name, " STATE_COUNTS " FROM jobs GROUP BY name"
        " ORDER BY name",
    [S_DEAD_LIST] =
        "SELECT id, name, queue, attempts, last_error, generation, died_at,"
        " created_at FROM jobs WHERE died_at IS NOT NULL AND state = 'dead'"
        " ORDER BY died_at DESC, id DESC LIMIT ?1",
    [S_QUEUE_LIST] =
        "WITH c AS (SELECT queue, min(CASE WHEN state = 'queued'"
        "  AND run_at <= ?1 THEN run_at END), " STATE_COUNTS
        " FROM jobs GROUP BY queue),"
        " n AS (SELECT name FROM queues UNION SELECT queue FROM c)"
        " SELECT n.name, coalesce(q.paused, 0), q.paused_at, c.*"
        " FROM n LEFT JOIN queues q ON q.name = n.name"
        " LEFT JOIN c ON c.queue = n.name ORDER BY n.name",
    [S_SHOW] =
        "SELECT " JOB_COLUMNS ", jr_payload(payload, sealed), unique_key,"
        " result,"
        " coalesce(keep_until, 0), wait_on, coalesce(wake_at, 0), waits,"
        " steps, coalesce(sql_statements, 0), coalesce(expires_at, 0),"
        " coalesce(deadline, 0), coalesce(deadline_at, 0), coalesce(cost, 0)"
        " FROM jobs WHERE id = ?1",
    /* ?1 state (or scheduled, ready), ?2 name, ?3 queue, NULL: any; ?4
     * limit; ?5 now; ?6 a payload path, ?7 the JSON literal it equals
     * (where.h; NULL: any); ids below ?8, above ?9 (a keyset page: the
     * rowid range is an index seek, never an offset) */
    [S_LIST] = LIST_SQL("DESC"),
    [S_LIST_ASC] = LIST_SQL("ASC"),
    [S_PAUSED] = "SELECT name FROM queues WHERE paused = 1 ORDER BY name",
    [S_READY_BY_QUEUE] =
        "SELECT queue, count(*) FROM (SELECT queue FROM jobs"
        " WHERE state = 'queued' AND run_at <= ?1"
        " AND name IN (SELECT value FROM json_each(?2))"
        " AND queue NOT IN (SELECT name FROM queues WHERE paused = 1)"
        " LIMIT ?3) GROUP BY queue ORDER BY queue",
};

static sqlite3_stmt *
stmt(jr_backend *b, int which, jr_err *err)
{
    return jr_sqlite_stmt(b, &sql_text[which], err);
}

/* Reads STATE_COUNTS from column col on into n (a queue without jobs:
 * NULLs, read as 0), and the sums. */
static void
state_counts(sqlite3_stmt *s, int col, long *n)
{
    for (int st = 0; st < JR_NSTATES; st++)
        if (!(jr_state_flags(st) & JR_ST_SUM))
            n[st] = sqlite3_column_int64(s, col++);
    jr_state_sum(n);
}

int
jr_sqlite_stats(jr_backend *b, jr_stat_cb cb, void *arg, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_STATS, err);
    jr_stat_row row;
    int rc;

    if (s == NULL)
        return -1;
    sqlite3_bind_double(s, 1, jr_now());
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        row.name = (const char *)sqlite3_column_text(s, 0);
        state_counts(s, 1, row.n);
        if (cb(&row, arg) != 0)
            break;
    }
    sqlite3_reset(s);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 :
           jr_sqlite_fail(b, err, "reading stats");
}

int
jr_sqlite_dead_list(jr_backend *b, int limit, jr_dead_cb cb, void *arg,
                    jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_DEAD_LIST, err);
    jr_dead_row row;
    int rc;

    if (s == NULL)
        return -1;
    sqlite3_bind_int(s, 1, limit > 0 ? limit : -1);     /* -1: no limit */
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        row.id = sqlite3_column_int64(s, 0);
        row.name = (const char *)sqlite3_column_text(s, 1);
        row.queue = (const char *)sqlite3_column_text(s, 2);
        row.attempts = sqlite3_column_int(s, 3);
        row.last_error = (const char *)sqlite3_column_text(s, 4);
        row.generation = (const char *)sqlite3_column_text(s, 5);
        row.died_at = sqlite3_column_double(s, 6);
        row.created_at = sqlite3_column_double(s, 7);
        if (cb(&row, arg) != 0)
            break;
    }
    sqlite3_reset(s);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 :
           jr_sqlite_fail(b, err, "listing dead jobs");
}

int
jr_sqlite_paused(jr_backend *b, jr_name_cb cb, void *arg, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_PAUSED, err);
    int rc;

    if (s == NULL)
        return -1;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW)
        if (cb((const char *)sqlite3_column_text(s, 0), arg) != 0)
            break;
    sqlite3_reset(s);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 :
           jr_sqlite_fail(b, err, "reading the paused queues");
}

int
jr_sqlite_ready_by_queue(jr_backend *b, const char *const *names,
                         int nnames, long limit, jr_count_cb cb, void *arg,
                         jr_err *err)
{
    sqlite3_stmt *s;
    char *json;
    int rc;

    if (nnames == 0)
        return 0;
    if ((json = jr_sqlite_names_json(names, nnames)) == NULL)
        return jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
    if ((s = stmt(b, S_READY_BY_QUEUE, err)) == NULL) {
        free(json);
        return -1;
    }
    sqlite3_bind_double(s, 1, jr_now());
    bind_text(s, 2, json);
    sqlite3_bind_int64(s, 3, limit);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW)
        if (cb((const char *)sqlite3_column_text(s, 0),
               (long)sqlite3_column_int64(s, 1), arg) != 0)
            break;
    sqlite3_reset(s);
    free(json);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 :
           jr_sqlite_fail(b, err, "counting ready jobs");
}

int
jr_sqlite_queue_list(jr_backend *b, jr_queue_cb cb, void *arg, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_QUEUE_LIST, err);
    jr_queue_row row;
    int rc;

    if (s == NULL)
        return -1;
    sqlite3_bind_double(s, 1, jr_now());
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        row.name = (const char *)sqlite3_column_text(s, 0);
        row.paused = sqlite3_column_int(s, 1);
        row.paused_at = sqlite3_column_double(s, 2);
        row.oldest_ready = sqlite3_column_double(s, 4);  /* 3: c.queue */
        state_counts(s, 5, row.n);
        if (cb(&row, arg) != 0)
            break;
    }
    sqlite3_reset(s);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 :
           jr_sqlite_fail(b, err, "listing queues");
}

static double
col_number(sqlite3_stmt *s, int i)
{
    return sqlite3_column_type(s, i) == SQLITE_NULL ? NAN :
           sqlite3_column_double(s, i);
}

/* Reads the JOB_COLUMNS of the current row of s into r. */
static void
row_fields(sqlite3_stmt *s, jr_job_row *r)
{
    r->id = sqlite3_column_int64(s, 0);
    r->name = col_text(s, 1);
    r->queue = col_text(s, 2);
    r->state = col_text(s, 3);
    r->payload = NULL;
    r->attempts = sqlite3_column_int(s, 4);
    r->max_retries = sqlite3_column_type(s, 5) == SQLITE_NULL ? -1 :
                     sqlite3_column_int(s, 5);
    r->priority = sqlite3_column_int(s, 6);
    r->run_at = sqlite3_column_double(s, 7);
    r->created_at = sqlite3_column_double(s, 8);
    r->updated_at = sqlite3_column_double(s, 9);
    r->started_at = sqlite3_column_double(s, 10);
    r->finished_at = sqlite3_column_double(s, 11);
    r->last_error = col_text(s, 12);
    r->generation = col_text(s, 13);
    r->locked_by = col_text(s, 14);
    r->locked_until = sqlite3_column_double(s, 15);
    r->progress_done = col_number(s, 16);
    r->progress_total = col_number(s, 17);
    r->progress_note = col_text(s, 18);
    r->cancel_requested = sqlite3_column_int(s, 19);
    r->unique_key = NULL;
    r->limit_key = col_text(s, 20);
    r->result = NULL;
    r->keep_until = 0;
    r->sql_statements = 0;
    r->cost = 0;
    r->history = NULL;
    r->nhistory = 0;
    r->steps = NULL;
    r->wait_on = NULL;
    r->wake_at = 0;
    r->waits = NULL;
    r->expires_at = r->deadline = r->deadline_at = 0;
}

int
jr_sqlite_show(jr_backend *b, int64_t id, jr_job_cb cb, void *arg, jr_err *err)
{
    jr_attempt_row att[JR_ATTEMPTS_KEPT];
    sqlite3_stmt *s;
    jr_job_row row;
    int rc, natt;

    if ((natt = jr_sqlite_attempts(b, id, att, JR_ATTEMPTS_KEPT, err)) < 0)
        return -1;
    if ((s = stmt(b, S_SHOW, err)) == NULL) {
        jr_attempt_rows_clear(att, natt);
        return -1;
    }
    sqlite3_bind_int64(s, 1, id);
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        row_fields(s, &row);
        row.payload = col_text(s, 21);
        row.unique_key = col_text(s, 22);
        row.result = col_text(s, 23);
        row.keep_until = sqlite3_column_double(s, 24);
        row.wait_on = col_text(s, 25);
        row.wake_at = sqlite3_column_double(s, 26);
        row.waits = col_text(s, 27);
        row.steps = col_text(s, 28);
        row.sql_statements = sqlite3_column_int(s, 29);
        row.expires_at = sqlite3_column_double(s, 30);
        row.deadline = sqlite3_column_double(s, 31);
        row.deadline_at = sqlite3_column_double(s, 32);
        row.cost = (long)sqlite3_column_int64(s, 33);
        row.history = att;
        row.nhistory = natt;
        cb(&row, arg);
    }
    sqlite3_reset(s);
    jr_attempt_rows_clear(att, natt);
    if (rc == SQLITE_DONE)
        return jr_fail(err, JR_ENOTFOUND, "job %lld: no such job",
                       (long long)id);
    return rc == SQLITE_ROW ? 0 : jr_sqlite_fail(b, err, "reading a job");
}

/* Binds id as parameter i, or NULL when it is 0 (not given). */
static void
bind_id(sqlite3_stmt *s, int i, int64_t id)
{
    if (id > 0)
        sqlite3_bind_int64(s, i, id);
    else
        sqlite3_bind_null(s, i);
}

int
jr_sqlite_list(jr_backend *b, const jr_list_filter *f, jr_job_cb cb,
               void *arg, jr_err *err)
{
    static const jr_list_filter all;
    sqlite3_stmt *s;
    jr_where w;
    jr_job_row row;
    int rc;

    if (f == NULL)
        f = &all;
    if (jr_list_filter_check(f, err) < 0 ||
        (f->where != NULL && jr_where_parse(f->where, &w, err) < 0) ||
        (s = stmt(b, f->after_id > 0 || f->oldest ? S_LIST_ASC : S_LIST,
                  err)) == NULL)
        return -1;
    bind_text(s, 1, f->state);
    bind_text(s, 2, f->name);
    bind_text(s, 3, f->queue);
    sqlite3_bind_int(s, 4, f->limit > 0 ? f->limit : -1);
    sqlite3_bind_double(s, 5, jr_now());
    bind_text(s, 6, f->where ? w.sqlite_path : NULL);
    bind_text(s, 7, f->where ? w.literal : NULL);
    bind_id(s, 8, f->before_id);
    bind_id(s, 9, f->after_id);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        row_fields(s, &row);
        if (cb(&row, arg) != 0)
            break;
    }
    sqlite3_reset(s);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 :
           jr_sqlite_fail(b, err, "listing jobs");
}
