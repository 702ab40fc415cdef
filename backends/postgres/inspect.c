/* inspect.c - reads for people and the dashboard: stats per name, the
 * queue list, ready jobs per queue, one job shown, jobs listed by filter.
 * Owns their statements. Uses conn.c, arrays.h. */

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "postgres/pg_int.h"
#include "where.h"
#include "postgres/arrays.h"

/* The columns of show and list, in the order row_fields reads them. */
#define JOB_COLUMNS \
    "id, name, queue, state, attempts, coalesce(max_retries, -1), priority," \
    " extract(epoch FROM run_at)::float8," \
    " extract(epoch FROM created_at)::float8," \
    " extract(epoch FROM updated_at)::float8," \
    " extract(epoch FROM started_at)::float8," \
    " extract(epoch FROM finished_at)::float8, last_error, generation," \
    " locked_by, extract(epoch FROM locked_until)::float8, progress_done," \
    " progress_total, progress_note, cancel_requested, limit_key"

/* One count per stored state (job.h's JR_STATES, queued split by run_at
 * into ready and scheduled), in the list's order: what state_counts
 * reads. A new state is a count here. */
#define STATE_COUNTS \
    "count(*) FILTER (WHERE state = 'queued' AND run_at <= now())," \
    " count(*) FILTER (WHERE state = 'queued' AND run_at > now())," \
    " count(*) FILTER (WHERE state = 'running')," \
    " count(*) FILTER (WHERE state = 'dead')," \
    " count(*) FILTER (WHERE state = 'cancelled')," \
    " count(*) FILTER (WHERE state = 'completed')," \
    " count(*) FILTER (WHERE state = 'waiting')," \
    " count(*) FILTER (WHERE state = 'expired')"

/* Reads STATE_COUNTS of row i from column col on into n (a queue without
 * jobs: NULLs, read as 0), and the sums. */
static void
state_counts(const PGresult *res, int i, int col, long *n)
{
    for (int st = 0; st < JR_NSTATES; st++)
        if (!(jr_state_flags(st) & JR_ST_SUM))
            n[st] = atol(PQgetvalue(res, i, col++));
    jr_state_sum(n);
}

static const pg_stmt st_stats = {"jr_stats", 0,
    "SELECT name, " STATE_COUNTS
    " FROM {{schema}}.jobs GROUP BY name ORDER BY name COLLATE \"C\""};

int
jr_pg_stats(jr_backend *b, jr_stat_cb cb, void *arg, jr_err *err)
{
    PGresult *res;
    jr_stat_row row;
    int i;

    if (jr_pg_ready(b, err) < 0 ||
        (res = jr_pg_run(b, &st_stats, NULL, "reading stats", err)) == NULL)
        return -1;
    for (i = 0; i < PQntuples(res); i++) {
        row.name = PQgetvalue(res, i, 0);
        state_counts(res, i, 1, row.n);
        if (cb(&row, arg) != 0)
            break;
    }
    PQclear(res);
    return 0;
}

static const pg_stmt st_queue_list = {"jr_queue_list", 0,
    "WITH c AS (SELECT queue, extract(epoch FROM min(run_at) FILTER"
    "  (WHERE state = 'queued' AND run_at <= now()))::float8, " STATE_COUNTS
    "  FROM {{schema}}.jobs GROUP BY queue),"
    " n AS (SELECT name FROM {{schema}}.queues UNION SELECT queue FROM c)"
    " SELECT n.name, coalesce(q.paused, false),"
    " extract(epoch FROM q.paused_at)::float8, c.*"
    " FROM n LEFT JOIN {{schema}}.queues q ON q.name = n.name"
    " LEFT JOIN c ON c.queue = n.name ORDER BY n.name COLLATE \"C\""};

int
jr_pg_queue_list(jr_backend *b, jr_queue_cb cb, void *arg, jr_err *err)
{
    PGresult *res;
    jr_queue_row row;
    int i;

    if (jr_pg_ready(b, err) < 0 ||
        (res = jr_pg_run(b, &st_queue_list, NULL, "listing queues", err)) == NULL)
        return -1;
    for (i = 0; i < PQntuples(res); i++) {
        row.name = PQgetvalue(res, i, 0);
        row.paused = strcmp(PQgetvalue(res, i, 1), "t") == 0;
        row.paused_at = strtod(PQgetvalue(res, i, 2), NULL);
        row.oldest_ready = strtod(PQgetvalue(res, i, 4), NULL); /* 3: queue */
        state_counts(res, i, 5, row.n);
        if (cb(&row, arg) != 0)
            break;
    }
    PQclear(res);
    return 0;
}

static const pg_stmt st_ready_by_queue = {
    "jr_ready_by_queue", 2,
    "SELECT queue, count(*) FROM (SELECT queue FROM {{schema}}.jobs"
    " WHERE state = 'queued' AND run_at <= now()"
    " AND name = ANY($1::text[]) AND queue NOT IN"
    " (SELECT name FROM {{schema}}.queues WHERE paused)"
    " LIMIT $2::bigint) t GROUP BY queue ORDER BY queue COLLATE \"C\""};

int
jr_pg_ready_by_queue(jr_backend *b, const char *const *names, int nnames,
                  long limit, jr_count_cb cb, void *arg, jr_err *err)
{
    char slimit[24];
    const char *params[2];
    jr_buf s = {0};
    PGresult *res;
    int i;

    if (nnames <= 0)
        return 0;
    if (jr_pg_ready(b, err) < 0)
        return -1;
    for (i = 0; i < nnames; i++)
        sb_elem(&s, names[i]);
    snprintf(slimit, sizeof slimit, "%ld", limit);
    params[0] = sb_array(&s);
    params[1] = slimit;
    if (s.oom) {
        free(s.p);
        return jr_fail(err, JR_ENOMEM, "postgres: out of memory");
    }
    res = jr_pg_run(b, &st_ready_by_queue, params, "counting ready jobs", err);
    free(s.p);
    if (res == NULL)
        return -1;
    for (i = 0; i < PQntuples(res); i++)
        if (cb(PQgetvalue(res, i, 0), atol(PQgetvalue(res, i, 1)), arg) != 0)
            break;
    PQclear(res);
    return 0;
}

static const char *
col_text(const PGresult *res, int r, int c)
{
    return PQgetisnull(res, r, c) ? NULL : PQgetvalue(res, r, c);
}

/* A number column; NULL is dflt. */
static double
col_number(const PGresult *res, int r, int c, double dflt)
{
    return PQgetisnull(res, r, c) ? dflt : strtod(PQgetvalue(res, r, c),
                                                  NULL);
}

/* Reads the JOB_COLUMNS of row r into j. */
static void
row_fields(const PGresult *res, int r, jr_job_row *j)
{
    j->id = strtoll(PQgetvalue(res, r, 0), NULL, 10);
    j->name = PQgetvalue(res, r, 1);
    j->queue = PQgetvalue(res, r, 2);
    j->state = PQgetvalue(res, r, 3);
    j->payload = NULL;
    j->attempts = atoi(PQgetvalue(res, r, 4));
    j->max_retries = atoi(PQgetvalue(res, r, 5));
    j->priority = atoi(PQgetvalue(res, r, 6));
    j->run_at = col_number(res, r, 7, 0);
    j->created_at = col_number(res, r, 8, 0);
    j->updated_at = col_number(res, r, 9, 0);
    j->started_at = col_number(res, r, 10, 0);
    j->finished_at = col_number(res, r, 11, 0);
    j->last_error = col_text(res, r, 12);
    j->generation = col_text(res, r, 13);
    j->locked_by = col_text(res, r, 14);
    j->locked_until = col_number(res, r, 15, 0);
    j->progress_done = col_number(res, r, 16, NAN);
    j->progress_total = col_number(res, r, 17, NAN);
    j->progress_note = col_text(res, r, 18);
    j->cancel_requested = strcmp(PQgetvalue(res, r, 19), "t") == 0;
    j->unique_key = NULL;
    j->limit_key = PQgetisnull(res, r, 20) ? NULL : PQgetvalue(res, r, 20);
    j->result = NULL;
    j->keep_until = 0;
    j->sql_statements = 0;
    j->cost = 0;
    j->history = NULL;
    j->nhistory = 0;
    j->steps = NULL;
    j->wait_on = NULL;
    j->wake_at = 0;
    j->waits = NULL;
    j->expires_at = j->deadline = j->deadline_at = 0;
}

static const pg_stmt st_show = {"jr_show", 1,
    "SELECT " JOB_COLUMNS ", " JR_PG_PAYLOAD("") ", unique_key,"
    " result::text,"
    " coalesce(extract(epoch FROM keep_until), 0), wait_on,"
    " coalesce(extract(epoch FROM wake_at), 0), waits::text, steps::text,"
    " coalesce(sql_statements, 0),"
    " coalesce(extract(epoch FROM expires_at), 0), coalesce(deadline, 0),"
    " coalesce(extract(epoch FROM deadline_at), 0), coalesce(cost, 0)"
    " FROM {{schema}}.jobs"
    " WHERE id = $1::bigint"};

int
jr_pg_show(jr_backend *b, int64_t id, jr_job_cb cb, void *arg, jr_err *err)
{
    jr_attempt_row att[JR_ATTEMPTS_KEPT];
    char sid[24];
    const char *params[1] = {sid};
    PGresult *res;
    jr_job_row row;
    int natt;

    snprintf(sid, sizeof sid, "%lld", (long long)id);
    if (jr_pg_ready(b, err) < 0 ||
        (natt = jr_pg_attempts(b, id, att, JR_ATTEMPTS_KEPT, err)) < 0)
        return -1;
    if ((res = jr_pg_run(b, &st_show, params, "reading a job", err)) == NULL) {
        jr_attempt_rows_clear(att, natt);
        return -1;
    }
    if (PQntuples(res) == 0) {
        PQclear(res);
        jr_attempt_rows_clear(att, natt);
        return jr_fail(err, JR_ENOTFOUND, "job %lld: no such job",
                       (long long)id);
    }
    row_fields(res, 0, &row);
    row.payload = PQgetvalue(res, 0, 21);
    row.unique_key = PQgetisnull(res, 0, 22) ? NULL :
                     PQgetvalue(res, 0, 22);
    row.result = col_text(res, 0, 23);
    row.keep_until = col_number(res, 0, 24, 0);
    row.wait_on = col_text(res, 0, 25);
    row.wake_at = col_number(res, 0, 26, 0);
    row.waits = col_text(res, 0, 27);
    row.steps = col_text(res, 0, 28);
    row.sql_statements = atoi(PQgetvalue(res, 0, 29));
    row.expires_at = col_number(res, 0, 30, 0);
    row.deadline = col_number(res, 0, 31, 0);
    row.deadline_at = col_number(res, 0, 32, 0);
    row.cost = atol(PQgetvalue(res, 0, 33));
    row.history = att;
    row.nhistory = natt;
    cb(&row, arg);
    PQclear(res);
    jr_attempt_rows_clear(att, natt);
    return 0;
}

/* $1 state (or scheduled, ready), $2 name, $3 queue: NULL any; $4
 * limit, NULL: all; $5 a payload path as text[], $6 the JSON it equals
 * (where.h; NULL: any); ids below $7, above $8 (a keyset page: an index
 * range on the primary key, never an offset) */
#define LIST_SQL(order) \
    "SELECT " JOB_COLUMNS " FROM {{schema}}.jobs" \
    " WHERE id < coalesce($7::bigint, 9223372036854775807)" \
    " AND id > coalesce($8::bigint, 0)" \
    " AND ($1::text IS NULL OR state = $1::text" \
    "  OR ($1::text = 'scheduled' AND state = 'queued'" \
    "   AND run_at > now())" \
    "  OR ($1::text = 'ready' AND state = 'queued' AND run_at <= now()))" \
    " AND ($2::text IS NULL OR name = $2::text)" \
    " AND ($3::text IS NULL OR queue = $3::text)" \
    " AND ($5::text[] IS NULL OR payload #> $5::text[] = $6::jsonb)" \
    " ORDER BY id " order " LIMIT $4::bigint"
static const pg_stmt st_list = {"jr_list", 8, LIST_SQL("DESC")};
static const pg_stmt st_list_asc = {"jr_list_asc", 8,
                                    LIST_SQL("ASC")};

int
jr_pg_list(jr_backend *b, const jr_list_filter *f, jr_job_cb cb, void *arg,
        jr_err *err)
{
    static const jr_list_filter all;
    char slimit[16], sbefore[24], safter[24];
    const char *params[8] = {0};
    PGresult *res;
    jr_where w;
    jr_job_row row;
    int i;

    if (f == NULL)
        f = &all;
    if (jr_list_filter_check(f, err) < 0 ||
        (f->where != NULL && jr_where_parse(f->where, &w, err) < 0) ||
        jr_pg_ready(b, err) < 0)
        return -1;
    snprintf(slimit, sizeof slimit, "%d", f->limit);
    snprintf(sbefore, sizeof sbefore, "%lld", (long long)f->before_id);
    snprintf(safter, sizeof safter, "%lld", (long long)f->after_id);
    params[0] = f->state;
    params[1] = f->name;
    params[2] = f->queue;
    params[3] = f->limit > 0 ? slimit : NULL;
    params[4] = f->where ? w.pg_path : NULL;
    params[5] = f->where ? w.literal : NULL;
    params[6] = f->before_id > 0 ? sbefore : NULL;
    params[7] = f->after_id > 0 ? safter : NULL;
    if ((res = jr_pg_run(b, f->after_id > 0 || f->oldest ? &st_list_asc :
                         &st_list, params, "listing jobs", err)) == NULL)
        return -1;
    for (i = 0; i < PQntuples(res); i++) {
        row_fields(res, i, &row);
        if (cb(&row, arg) != 0)
            break;
    }
    PQclear(res);
    return 0;
}
