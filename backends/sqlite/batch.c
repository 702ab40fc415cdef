/* batch.c - batches on SQLite (docs/workflows.md): the batch a pushed
 * job makes or joins, a member's end reaching its batch (the last member
 * pushes the batch's callbacks once), and the read of batch show. Runs in
 * the caller's transaction, called from flow.c. Owns the batch
 * statements; uses sqlite_int.h and push.c (the callbacks are inserted as
 * any push). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqlite/sqlite_int.h"

/* The file's statements: slots of sql_text[] (sqlite_int.h). */
enum { S_FLOW_BATCH_NEW, S_FLOW_BATCH_JOIN, S_FLOW_BATCH_EXISTS,
       S_FLOW_MEMBER_ADD, S_FLOW_JOB_BATCH, S_FLOW_MEMBER_END,
       S_FLOW_BATCH_DEC, S_FLOW_BATCH_PAYLOAD, S_FLOW_BATCH_RESULTS,
       S_FLOW_BATCH_FIRED, S_FLOW_BATCH_ROW, S_FLOW_MEMBERS,
       S_FLOW_MEMBER_TRACE, S_COUNT };

static const char *const sql_text[S_COUNT] = {
    [S_FLOW_BATCH_NEW] =
        "INSERT INTO batches (on_complete, on_success, payload, queue,"
        " results, created_at) VALUES (?1, ?2, coalesce(?3, '{}'),"
        " coalesce(?4, 'default'), ?5, ?6)",
    [S_FLOW_BATCH_JOIN] =
        "UPDATE batches SET total = total + 1, pending = pending + 1"
        " WHERE id = ?1 AND finished_at IS NULL",
    [S_FLOW_BATCH_EXISTS] = "SELECT 1 FROM batches WHERE id = ?1",
    [S_FLOW_MEMBER_ADD] =
        "INSERT INTO batch_jobs (batch_id, job_id) VALUES (?1, ?2)",
    [S_FLOW_JOB_BATCH] =
        "UPDATE jobs SET batch_id = ?2, flow = flow | 2 WHERE id = ?1",
    [S_FLOW_MEMBER_END] =
        "UPDATE batch_jobs SET state = ?2, result = ?3"
        " WHERE job_id = ?1 AND state IS NULL RETURNING batch_id",
    [S_FLOW_BATCH_DEC] =
        "UPDATE batches SET pending = pending - 1,"
        " completed = completed + (?2 = 'completed'),"
        " dead = dead + (?2 = 'dead' OR ?2 = 'expired'),"
        " cancelled = cancelled + (?2 = 'cancelled'),"
        " finished_at = CASE WHEN pending <= 1 THEN ?3 END"
        " WHERE id = ?1 AND finished_at IS NULL RETURNING pending",
    [S_FLOW_BATCH_PAYLOAD] =
        "SELECT on_complete, CASE WHEN dead = 0 AND cancelled = 0"
        " THEN on_success END, queue, json_object('batch', id,"
        " 'counts', json_object('completed', completed, 'dead', dead,"
        " 'cancelled', cancelled),"
        " 'members', (SELECT json_group_array(job_id) FROM (SELECT job_id"
        "  FROM batch_jobs WHERE batch_id = ?1 ORDER BY job_id)),"
        " 'payload', json(payload)), results FROM batches WHERE id = ?1",
    [S_FLOW_BATCH_RESULTS] =
        "SELECT json_set(?2, '$.results', json(coalesce((SELECT"
        " json_group_object(CAST(job_id AS TEXT), json(result))"
        " FROM batch_jobs WHERE batch_id = ?1 AND result IS NOT NULL),"
        " '{}')))",
    [S_FLOW_BATCH_FIRED] =
        "UPDATE batches SET complete_job = ?2, success_job = ?3 WHERE id = ?1",
    [S_FLOW_BATCH_ROW] =
        "SELECT id, on_complete, on_success, payload, queue, results, total,"
        " pending, completed, dead, cancelled, created_at, finished_at,"
        " complete_job, success_job FROM batches WHERE id = ?1",
    [S_FLOW_MEMBERS] =
        "SELECT m.job_id, coalesce(m.state, j.state, 'gone')"
        " FROM batch_jobs m LEFT JOIN jobs j ON j.id = m.job_id"
        " WHERE m.batch_id = ?1 ORDER BY m.job_id",
    [S_FLOW_MEMBER_TRACE] = "SELECT trace FROM jobs WHERE id = ?1",
};

static sqlite3_stmt *
stmt(jr_backend *b, int which, jr_err *err)
{
    return jr_sqlite_stmt(b, &sql_text[which], err);
}

/* The trace context of job id (docs/tracing.md), or NULL: its row's,
 * or when its success deleted it, what complete.c kept of it */
static char *
member_trace(jr_backend *b, int64_t id, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_FLOW_MEMBER_TRACE, err);
    char *t = NULL;
    int rc;

    if (s == NULL)
        return NULL;
    sqlite3_bind_int64(s, 1, id);
    if ((rc = sqlite3_step(s)) == SQLITE_ROW && col_text(s, 0) != NULL)
        t = strdup(col_text(s, 0));
    sqlite3_reset(s);
    if (rc == SQLITE_DONE && b->gone_id == id && b->gone_trace[0] != '\0')
        t = strdup(b->gone_trace);
    return t;
}

/* Pushes a finished batch's callbacks, once: only the transaction that
 * took pending to 0 gets here, at the end of member mid. The callbacks
 * carry mid's trace context, so they join its trace. */
static int
batch_fire(jr_backend *b, int64_t bid, int64_t mid, double now,
           jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_FLOW_BATCH_PAYLOAD, err);
    char *name[2] = {NULL, NULL}, *queue = NULL, *pay = NULL, *trace;
    jr_push p[2];
    int64_t ids[2] = {0, 0};
    int rc, i, n = 0, results = 0;

    if (s == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, bid);
    if ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        for (i = 0; i < 2; i++)
            name[i] = col_text(s, i) ? strdup(col_text(s, i)) : NULL;
        queue = strdup(col_text(s, 2));
        pay = strdup(col_text(s, 3));
        results = sqlite3_column_int(s, 4);
    }
    sqlite3_reset(s);
    rc = rc == SQLITE_ROW ? 0 : jr_sqlite_fail(b, err, "firing a batch");
    if (rc == 0 && results && (s = stmt(b, S_FLOW_BATCH_RESULTS, err))) {
        sqlite3_bind_int64(s, 1, bid);
        bind_text(s, 2, pay);
        if (sqlite3_step(s) == SQLITE_ROW) {
            free(pay);
            pay = strdup(col_text(s, 0));
        }
        sqlite3_reset(s);
    }
    memset(p, 0, sizeof p);
    trace = rc == 0 ? member_trace(b, mid, err) : NULL;
    for (i = 0; i < 2; i++)
        if (name[i] != NULL) {
            p[n].name = name[i];
            p[n].payload = pay;
            p[n].queue = queue;
            p[n].traceparent = trace;   /* stored form: as it is */
            p[n++].max_retries = -1;
        }
    if (rc == 0 && (queue == NULL || pay == NULL))
        rc = jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
    if (rc == 0)
        rc = jr_sqlite_insert_fired(b, p, n, ids, now, err);
    if (rc == 0 && (s = stmt(b, S_FLOW_BATCH_FIRED, err)) != NULL) {
        sqlite3_bind_int64(s, 1, bid);
        for (i = 0, n = 0; i < 2; i++) {
            if (name[i] != NULL && ids[n] != 0)
                sqlite3_bind_int64(s, 2 + i, ids[n++]);
        }
        rc = run(b, s, err, "firing a batch") < 0 ? -1 : 0;
    }
    free(name[0]);
    free(name[1]);
    free(queue);
    free(pay);
    free(trace);
    return rc;
}

/* A member's end (state st) reaches its batch, if it is in one. */
int
jr_sqlite_batch_end(jr_backend *b, int64_t id, const char *st,
                    const char *result, double now, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_FLOW_MEMBER_END, err);
    int64_t bid = 0, pending = -1;
    int rc;

    if (s == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, id);
    bind_text(s, 2, st);
    bind_text(s, 3, result);
    if ((rc = jr_sqlite_step_one(b, s, NULL, 0, &bid, err,
                                 "ending a batch member")) <= 0)
        return rc;
    if ((s = stmt(b, S_FLOW_BATCH_DEC, err)) == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, bid);
    bind_text(s, 2, st);
    sqlite3_bind_double(s, 3, now);
    if ((rc = jr_sqlite_step_one(b, s, NULL, 0, &pending, err,
                                 "ending a batch member")) <= 0)
        return rc;
    return pending == 0 ? batch_fire(b, bid, id, now, err) : 0;
}

/* ---- link: the pushed job's batch ---- */

/* Makes the batch spec stands for, once a push call (spec->id 0 until
 * then: the caller zeroes it). */
int
jr_sqlite_batch_make(jr_backend *b, jr_batch_spec *spec, double now,
                     jr_err *err)
{
    sqlite3_stmt *s;

    if (spec->id != 0)
        return 0;
    if ((s = stmt(b, S_FLOW_BATCH_NEW, err)) == NULL)
        return -1;
    bind_text(s, 1, spec->on_complete);
    bind_text(s, 2, spec->on_success);
    bind_text(s, 3, spec->payload);
    bind_text(s, 4, spec->queue);
    sqlite3_bind_int(s, 5, spec->results != 0);
    sqlite3_bind_double(s, 6, now);
    if (run(b, s, err, "making a batch") < 0)
        return -1;
    spec->id = sqlite3_last_insert_rowid(b->db);
    return 0;
}

/* Job id (p) joins batch bid. */
int
jr_sqlite_batch_join(jr_backend *b, const jr_push *p, int64_t id,
                     int64_t bid, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_FLOW_BATCH_JOIN, err);
    int rc;

    if (s == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, bid);
    if ((rc = run(b, s, err, "joining a batch")) < 0)
        return -1;
    if (rc == 0) {
        if ((s = stmt(b, S_FLOW_BATCH_EXISTS, err)) == NULL)
            return -1;
        sqlite3_bind_int64(s, 1, bid);
        if ((rc = jr_sqlite_step_one(b, s, NULL, 0, NULL, err,
                                     "joining a batch")) < 0)
            return -1;
        return jr_fail(err, JR_EINPUT, "job '%s': batch %lld %s", p->name,
                       (long long)bid, rc ? "is finished" : "does not exist");
    }
    if ((s = stmt(b, S_FLOW_MEMBER_ADD, err)) == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, bid);
    sqlite3_bind_int64(s, 2, id);
    if (run(b, s, err, "joining a batch") < 0 ||
        (s = stmt(b, S_FLOW_JOB_BATCH, err)) == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_int64(s, 2, bid);
    return run(b, s, err, "joining a batch") < 0 ? -1 : 0;
}

/* ---- the read: a batch ---- */

/* The batch row of s (S_FLOW_BATCH_ROW's columns). */
static void
batch_row(sqlite3_stmt *s, jr_batch_row *r)
{
    r->id = sqlite3_column_int64(s, 0);
    r->on_complete = col_text(s, 1);
    r->on_success = col_text(s, 2);
    r->payload = col_text(s, 3);
    r->queue = col_text(s, 4);
    r->results = sqlite3_column_int(s, 5);
    r->total = sqlite3_column_int64(s, 6);
    r->pending = sqlite3_column_int64(s, 7);
    r->completed = sqlite3_column_int64(s, 8);
    r->dead = sqlite3_column_int64(s, 9);
    r->cancelled = sqlite3_column_int64(s, 10);
    r->created_at = sqlite3_column_double(s, 11);
    r->finished_at = sqlite3_column_double(s, 12);
    r->complete_job = sqlite3_column_int64(s, 13);
    r->success_job = sqlite3_column_int64(s, 14);
}

int
jr_sqlite_batch_show(jr_backend *b, int64_t id, jr_batch_cb bcb,
                     jr_link_cb mcb, void *arg, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_FLOW_BATCH_ROW, err);
    jr_batch_row row;
    int rc, stop = 0;

    if (s == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, id);
    if ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        batch_row(s, &row);
        stop = bcb(&row, arg);
    }
    sqlite3_reset(s);
    if (rc == SQLITE_DONE)
        return jr_fail(err, JR_ENOTFOUND, "no batch %lld", (long long)id);
    if (rc != SQLITE_ROW)
        return jr_sqlite_fail(b, err, "reading a batch");
    if (stop || (s = stmt(b, S_FLOW_MEMBERS, err)) == NULL)
        return stop ? 0 : -1;
    sqlite3_bind_int64(s, 1, id);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW)
        if (mcb('m', sqlite3_column_int64(s, 0), col_text(s, 1), arg) != 0)
            break;
    sqlite3_reset(s);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 :
           jr_sqlite_fail(b, err, "reading a batch");
}
