/* sequence.c - sequences on PostgreSQL (docs/queues.md, "Sequences"): a
 * job pushed into a sequence goes to its end through the schema's
 * sequence_put() (migrations 18, 23) in the push's transaction, which takes a
 * lock per key, the next place, and makes the job wait for the one
 * pushed into the sequence before it; the list of sequences and an
 * operator's skip and unblock (the schema's sequence_skip and
 * sequence_unblock). Owns the sequence statements; uses conn.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "postgres/pg_int.h"
#include "postgres/arrays.h"

static const pg_stmt st_seq_link = {"jr_seq_link", 4,
    "SELECT job_id, outcome FROM {{schema}}.sequence_put($1::bigint,"
    " $2::text, $3::text, $4::text)"};

/* A replace gives the last job the push's payload (sequence_put copies
 * the jsonb only): its bytes beside, else the stub of the push, the same
 * text as the job's own stub under one key, opened the job's old value. */
static const pg_stmt st_seq_sealed = {"jr_seq_sealed", 2,
    "UPDATE {{schema}}.jobs SET sealed = " JR_PG_BYTES("$2::text")
    " WHERE id = $1::bigint"};

int
jr_pg_seq_link(jr_backend *b, const jr_push *p, int64_t *id, jr_err *err)
{
    const char *params[4], *o;
    char sid[24];
    PGresult *res;
    int replaced;

    snprintf(sid, sizeof sid, "%lld", (long long)*id);
    params[0] = sid;
    params[1] = p->sequence;
    params[2] = jr_seq_fail_name(p->seq_fail);
    params[3] = jr_conflict_name(p->on_conflict);
    if ((res = jr_pg_run(b, &st_seq_link, params, "putting a job in a "
                         "sequence", err)) == NULL) {
        const char *m = b->pgmsg;
        if (strncmp(m, "jobrunner.sequence: ", 20) == 0)
            m += 20;
        if (strcmp(b->sqlstate, "22023") == 0)
            jr_fail(err, JR_EINPUT, "job '%s': %s", p->name, m);
        return -1;
    }
    if (PQntuples(res) != 1) {
        PQclear(res);
        return jr_fail(err, JR_EDB, "postgres: putting a job in a "
                       "sequence: no answer");
    }
    *id = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    o = PQgetvalue(res, 0, 1);
    replaced = strcmp(o, "replaced") == 0;
    if (p->outcome != NULL)
        *p->outcome = replaced ? JR_PUSH_REPLACED :
                      strcmp(o, "superseded") == 0 ? JR_PUSH_SUPERSEDED :
                      JR_PUSH_NEW;
    PQclear(res);
    if (!replaced)
        return 0;
    snprintf(sid, sizeof sid, "%lld", (long long)*id);
    params[0] = sid;
    params[1] = p->payload != NULL ? p->payload : "{}";
    if ((res = jr_pg_run(b, &st_seq_sealed, params, "replacing a job of a "
                         "sequence", err)) == NULL)
        return -1;
    PQclear(res);
    return 0;
}

/* A batch's jobs, some of them of sequences (ids $1, in the order to
 * take), around the batch's links (flow.c): their turns given back, each whose tag is
 * then its key's last, before; those queued untagged tagged again after
 * (migration 42's fair_seq_give and fair_seq_tag). */
static const pg_stmt st_seq_give = {"jr_seq_give", 1,
    "SELECT {{schema}}.fair_seq_give($1::bigint[])"};
static const pg_stmt st_seq_tag = {"jr_seq_tag", 1,
    "SELECT {{schema}}.fair_seq_tag($1::bigint[])"};

int
jr_pg_seq_turns(jr_backend *b, const int64_t *ids, int n, int again,
                jr_err *err)
{
    const char *params[1];
    char num[24];
    jr_buf s = {0};
    PGresult *res;
    int i;

    for (i = 0; i < n; i++) {
        snprintf(num, sizeof num, "%lld",
                 (long long)ids[again ? i : n - 1 - i]);
        sb_num(&s, num);
    }
    params[0] = sb_array(&s);
    if (s.oom) {
        jr_buf_free(&s);
        return jr_fail(err, JR_ENOMEM, "postgres: putting jobs in "
                       "sequences: out of memory");
    }
    res = jr_pg_run(b, again ? &st_seq_tag : &st_seq_give, params,
                    "putting jobs in sequences", err);
    jr_buf_free(&s);
    if (res == NULL)
        return -1;
    PQclear(res);
    return 0;
}

/* each sequence held (a job not ended, or dead with on_failure block),
 * its head the job of its lowest place */
static const pg_stmt st_seq_list = {"jr_seq_list", 2,
    "SELECT sequence_key, (array_agg(id ORDER BY seq_no))[1],"
    " (array_agg(state ORDER BY seq_no))[1],"
    " count(*) FILTER (WHERE state IN ('queued', 'running', 'waiting')),"
    " bool_or(state = 'dead' AND seq_fail = 'block')"
    " FROM {{schema}}.jobs WHERE sequence_key IS NOT NULL"
    " AND (state IN ('queued', 'running', 'waiting')"
    "  OR (state = 'dead' AND seq_fail = 'block'))"
    " GROUP BY sequence_key"
    " HAVING NOT $1::boolean OR bool_or(state = 'dead' AND seq_fail = 'block')"
    " ORDER BY sequence_key COLLATE \"C\" LIMIT $2::bigint"};

int
jr_pg_sequences(jr_backend *b, int blocked, int limit, jr_seq_cb cb,
                void *arg, jr_err *err)
{
    const char *params[2];
    char slimit[16];
    jr_seq_row r;
    PGresult *res;
    int i;

    snprintf(slimit, sizeof slimit, "%d", limit);
    params[0] = blocked ? "true" : "false";
    params[1] = limit > 0 ? slimit : NULL;      /* NULL: no limit */
    if (jr_pg_ready(b, err) < 0 ||
        (res = jr_pg_run(b, &st_seq_list, params, "reading the sequences",
                         err)) == NULL)
        return -1;
    for (i = 0; i < PQntuples(res); i++) {
        r.key = PQgetvalue(res, i, 0);
        r.head = strtoll(PQgetvalue(res, i, 1), NULL, 10);
        r.state = PQgetvalue(res, i, 2);
        r.jobs = strtol(PQgetvalue(res, i, 3), NULL, 10);
        r.blocked = strcmp(PQgetvalue(res, i, 4), "t") == 0;
        if (cb(&r, arg) != 0)
            break;
    }
    PQclear(res);
    return 0;
}

static const pg_stmt st_seq_skip = {"jr_seq_skip", 1,
    "SELECT {{schema}}.sequence_skip($1::text)"};
static const pg_stmt st_seq_unblock = {"jr_seq_unblock", 1,
    "SELECT {{schema}}.sequence_unblock($1::text)"};

int
jr_pg_seq_act(jr_backend *b, const char *key, int what, jr_err *err)
{
    const char *params[1] = {key};
    PGresult *res;
    int n;

    if (what != JR_SEQ_ACT_SKIP && what != JR_SEQ_ACT_UNBLOCK)
        return jr_fail(err, JR_EINPUT, "sequence '%s': unknown action %d",
                       key, what);
    if (jr_pg_ready(b, err) < 0 ||
        (res = jr_pg_run(b, what == JR_SEQ_ACT_SKIP ? &st_seq_skip :
                         &st_seq_unblock, params, what == JR_SEQ_ACT_SKIP ?
                         "skipping a sequence" : "unblocking a sequence",
                         err)) == NULL)
        return -1;
    n = PQntuples(res) == 1 ? atoi(PQgetvalue(res, 0, 0)) : 0;
    PQclear(res);
    return n;
}

/* ---- a success of a job of a sequence with a job behind it ---- */

/* The successes $2 of jobs of a sequence with a job behind them (flow
 * bit 1 alone: children, no batch), deleted as a plain success is (the
 * schema's jobs_end, a trigger on a change of state, is not run). */
static const pg_stmt st_seq_done = {"jr_seq_done", 2,
    "DELETE FROM {{schema}}.jobs WHERE id = ANY(" JR_PG_IDS("$2") ")"
    " AND state = 'running' COLLATE \"C\" AND locked_by = $1::text"
    " AND result_ttl IS NULL AND flow = 1 AND sequence_key IS NOT NULL"
    " RETURNING id"};

/* What their end does to the jobs behind them, as the schema's
 * flow_settle and flow_edge for a success: each edge settled, each child
 * readied when it was its last parent, with job.parents. A statement of
 * its own after the DELETE, so that its snapshot sees an edge a push
 * added while the DELETE waited for the row. */
static const pg_stmt st_seq_next = {"jr_seq_next", 1,
    "WITH e AS (UPDATE {{schema}}.job_deps d SET parent_state = 'completed',"
    "  parent_result = NULL"
    "  WHERE d.parent_id = ANY(" JR_PG_IDS("$1") ") AND d.parent_state IS NULL"
    "  RETURNING d.child_id, d.parent_id),"
    " n AS (SELECT e.child_id, count(*)::int AS k,"
    "  jsonb_object_agg(e.parent_id::text, '{\"state\": \"completed\"}'::jsonb)"
    "  AS done FROM e GROUP BY e.child_id)"
    " UPDATE {{schema}}.jobs j SET parents_left = j.parents_left - n.k,"
    " state = CASE WHEN j.parents_left <= n.k THEN 'queued'"
    "  ELSE 'waiting' END,"
    " parents = CASE WHEN j.parents_left <= n.k THEN coalesce((SELECT"
    "  jsonb_object_agg(x.parent_id::text,"
    "  jsonb_build_object('state', x.parent_state)"
    "  || CASE WHEN x.parent_result IS NULL THEN '{}'::jsonb"
    "  ELSE jsonb_build_object('result', x.parent_result) END)"
    "  FROM {{schema}}.job_deps x WHERE x.child_id = j.id"
    "  AND x.parent_state IS NOT NULL), '{}'::jsonb) || n.done"
    "  ELSE j.parents END,"
    " updated_at = now()"
    " FROM n WHERE j.id = n.child_id AND j.state = 'waiting'"};

/* The same DELETE with the plain successes (complete.c's st_done),
 * when the last batch had jobs of a sequence: one statement for both. */
static const pg_stmt st_seq_done_all = {"jr_seq_done_all", 2,
    "DELETE FROM {{schema}}.jobs WHERE id = ANY(" JR_PG_IDS("$2") ")"
    " AND state = 'running' COLLATE \"C\" AND locked_by = $1::text"
    " AND result_ttl IS NULL"
    " AND (flow = 0 OR (flow = 1 AND sequence_key IS NOT NULL))"
    " RETURNING id, flow"};

/* Readies the jobs behind the deleted ones of ids d (an array literal),
 * after the DELETE, in its transaction. */
static int
seq_next(jr_backend *b, const char *d, jr_err *err)
{
    const char *params[1] = {d};
    PGresult *res = jr_pg_run(b, &st_seq_next, params, "readying jobs of "
                              "a sequence", err);

    if (res == NULL)
        return -1;
    PQclear(res);
    return 0;
}

/* The DELETE st of r[0..n)'s successes (st_seq_done or st_seq_done_all)
 * and what follows it, in a transaction (complete.c runs a batch of
 * successes alone without one: a runner killed between the two
 * statements left the job behind waiting for ever). */
static int
seq_delete(jr_backend *b, const pg_stmt *st, const char *token,
           const jr_result *r, int n, int64_t *done, int *nd, jr_err *err)
{
    const char *params[2];
    jr_buf s = {0}, d = {0};
    PGresult *res;
    char num[24];
    int i, m, given = 0, behind = 0;

    for (i = 0; i < n; i++) {
        if (r[i].kind != JR_DONE || r[i].result != NULL ||
            b->keep_completed > 0)
            continue;
        snprintf(num, sizeof num, "%lld", (long long)r[i].id);
        sb_num(&s, num);
        given++;
    }
    if (given == 0)
        return 0;
    params[0] = token;
    params[1] = sb_array(&s);
    res = s.oom ? NULL : jr_pg_run(b, st, params, "completing jobs", err);
    if (res == NULL && s.oom)
        jr_fail(err, JR_ENOMEM, "postgres: completing jobs: out of memory");
    free(s.p);
    if (res == NULL)
        return -1;
    m = PQntuples(res);
    for (i = 0; i < m; i++) {
        done[(*nd)++] = strtoll(PQgetvalue(res, i, 0), NULL, 10);
        if (st == &st_seq_done || strcmp(PQgetvalue(res, i, 1), "1") == 0) {
            sb_num(&d, PQgetvalue(res, i, 0));
            behind++;
        }
    }
    PQclear(res);
    b->seq_seen = behind > 0;
    if (behind > 0 && !d.oom && seq_next(b, sb_array(&d), err) < 0)
        given = -1;
    else if (d.oom)
        given = jr_fail(err, JR_ENOMEM, "postgres: completing jobs: out of "
                        "memory");
    free(d.p);
    return given;
}

/* seq_delete in a transaction of its own when none is open. */
static int
seq_delete_tx(jr_backend *b, const pg_stmt *st, const char *token,
              const jr_result *r, int n, int64_t *done, int *nd, jr_err *err)
{
    int own = PQtransactionStatus(b->conn) == PQTRANS_IDLE, rc, nd0 = *nd;

    if (own && jr_pg_run_plain(b, "BEGIN", "completing jobs", err) < 0)
        return -1;
    rc = seq_delete(b, st, token, r, n, done, nd, err);
    if (own && rc >= 0 &&
        jr_pg_run_plain(b, "COMMIT", "completing jobs", err) < 0)
        rc = -1;
    if (own && rc < 0) {
        jr_pg_rollback(b);
        *nd = nd0;
    }
    return rc;
}

int
jr_pg_seq_done(jr_backend *b, const char *token, const jr_result *r, int n,
               int64_t *done, int *nd, jr_err *err)
{
    int nd0 = *nd;

    if (seq_delete_tx(b, &st_seq_done, token, r, n, done, nd, err) < 0)
        return -1;
    return *nd - nd0;
}

int
jr_pg_seq_done_all(jr_backend *b, const char *token, const jr_result *r,
                   int n, int64_t *done, int *nd, jr_err *err)
{
    return seq_delete_tx(b, &st_seq_done_all, token, r, n, done, nd, err);
}
