/* seqretry.c - a job of a sequence run again by hand (dead retry, rerun;
 * docs/queues.md, "Sequences"): one the sequence has gone on past (it
 * ended, and is not the dead one that blocks the sequence) goes back to
 * the sequence's end, behind the job that holds it, through the
 * schema's sequence_put() as a push does, in the transaction that
 * queues it again; the dead job that blocks it is its head and keeps
 * its place (admin.c's retry alone). Owns these statements; uses
 * conn.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "postgres/pg_int.h"

/* The dead ones of the jobs m reads, queued again as admin.c's dead
 * retry does (no RETRY_KEY: a job of a sequence has no unique key) and
 * out of their sequences (st_clear's), each with its sequence,
 * on_failure and place, each sequence's in their order. All leave
 * before the first goes to its end: one still in its place, queued,
 * would hold the sequence, and the first would wait for it. */
#define RETRY_PAST(m) \
    "WITH m AS (" m " FOR UPDATE), u AS (UPDATE {{schema}}.jobs j" \
    " SET state = 'queued', attempts = 0, run_at = now(), died_at = NULL," \
    " finished_at = NULL, cancel_requested = false, updated_at = now()," \
    " expires_at = NULL, deadline_at = NULL, sequence_key = NULL," \
    " seq_no = NULL, parents_left = 0, parents = NULL FROM m" \
    " WHERE j.id = m.id RETURNING j.id, m.sequence_key, m.seq_fail," \
    " m.seq_no), d AS (DELETE FROM {{schema}}.job_deps" \
    " WHERE child_id IN (SELECT id FROM u))" \
    " SELECT id, sequence_key, seq_fail FROM u ORDER BY sequence_key, seq_no"

/* $1 the ids (an array), dead or expired */
static const pg_stmt st_past_ids = {"jr_seq_past_ids", 1,
    RETRY_PAST("SELECT id, sequence_key, seq_fail, seq_no"
               " FROM {{schema}}.jobs WHERE id = ANY($1::bigint[])"
               " AND state IN ('dead', 'expired') AND " JR_PG_SEQ_PAST)};

/* up to $1 dead jobs */
static const pg_stmt st_past_dead = {"jr_seq_past_dead", 1,
    RETRY_PAST("SELECT id, sequence_key, seq_fail, seq_no"
               " FROM {{schema}}.jobs WHERE state = 'dead'"
               " AND " JR_PG_SEQ_PAST " ORDER BY seq_no, id LIMIT $1::int")};

/* job $1, queued again, leaves its place (a job of no sequence, as a
 * push before it goes into one), and its waits for the jobs before it
 * there, ended long ago */
static const pg_stmt st_clear = {"jr_seq_clear", 1,
    "WITH c AS (UPDATE {{schema}}.jobs SET sequence_key = NULL,"
    " seq_no = NULL, parents_left = 0, parents = NULL"
    " WHERE id = $1::bigint AND state = 'queued' RETURNING id)"
    " DELETE FROM {{schema}}.job_deps WHERE child_id IN (SELECT id FROM c)"};

static const pg_stmt st_put = {"jr_seq_again_put", 3,
    "SELECT job_id FROM {{schema}}.sequence_put($1::bigint, $2::text,"
    " $3::text, 'keep')"};

/* whether job $1 waits (a statement of its own: sequence_put's changes
 * are not in the snapshot of the statement that calls it) */
static const pg_stmt st_waits = {"jr_seq_again_waits", 1,
    "SELECT state = 'waiting' FROM {{schema}}.jobs WHERE id = $1::bigint"};

/* Job id, out of its sequence, goes to the end of sequence key (fail:
 * its on_failure, NULL block). */
static int
put(jr_backend *b, const char *id, const char *key, const char *fail,
    jr_err *err)
{
    const char *params[3] = {id, key, fail != NULL ? fail : "block"};
    PGresult *res;

    if ((res = jr_pg_run(b, &st_put, params, "moving a job to its "
                         "sequence's end", err)) == NULL)
        return -1;
    PQclear(res);
    return 0;
}

int
jr_pg_seq_to_end(jr_backend *b, const char *id, const char *key,
                 const char *fail, int *waits, jr_err *err)
{
    const char *params[1] = {id};
    PGresult *res;

    if ((res = jr_pg_run(b, &st_clear, params, "moving a job to its "
                         "sequence's end", err)) == NULL)
        return -1;
    PQclear(res);
    if (put(b, id, key, fail, err) < 0)
        return -1;
    if (waits == NULL)
        return 0;
    if ((res = jr_pg_run(b, &st_waits, params, "reading a job", err)) == NULL)
        return -1;
    *waits = PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    return 0;
}

/* Two of these at once (two `dead retry --all`) took their locks in
 * orders of their own, the jobs' rows and the sequences' through
 * sequence_put: a deadlock. They take turns on an advisory lock of the
 * schema's, to their transactions' ends. */
static const pg_stmt st_past_lock = {"jr_seq_past_lock", 1,
    "SELECT pg_advisory_xact_lock(hashtext($1::text))"};

/* Runs st (params) in a transaction of its own, each job it queued again
 * sent to its sequence's end. Returns how many, or -1. */
static int
past_run(jr_backend *b, const pg_stmt *st, const char *const *params,
         jr_err *err)
{
    PGresult *res = NULL;
    char lock[128];
    const char *lp[1] = {lock};
    int i, n = -1;

    snprintf(lock, sizeof lock, "jobrunner.seqretry:%s", b->schema);
    if (jr_pg_run_plain(b, "BEGIN", "retrying dead jobs", err) < 0)
        return -1;
    if ((res = jr_pg_run(b, &st_past_lock, lp, "retrying dead jobs",
                         err)) == NULL)
        goto done;
    PQclear(res);
    if ((res = jr_pg_run(b, st, params, "retrying dead jobs", err)) == NULL)
        goto done;
    for (i = 0; i < PQntuples(res); i++)
        if (put(b, PQgetvalue(res, i, 0), PQgetvalue(res, i, 1),
                PQgetisnull(res, i, 2) ? NULL : PQgetvalue(res, i, 2),
                err) < 0)
            goto done;
    if (jr_pg_run_plain(b, "COMMIT", "retrying dead jobs", err) == 0)
        n = PQntuples(res);
done:
    PQclear(res);
    if (n < 0)
        jr_pg_rollback(b);
    return n;
}

int
jr_pg_seq_retry_ids(jr_backend *b, const char *ids, jr_err *err)
{
    const char *params[1] = {ids};

    return past_run(b, &st_past_ids, params, err);
}

int
jr_pg_seq_retry_dead(jr_backend *b, jr_err *err)
{
    char rows[16];
    const char *params[1] = {rows};
    int total = 0, n;

    snprintf(rows, sizeof rows, "%d", JR_BULK_ROWS);
    do {
        if ((n = past_run(b, &st_past_dead, params, err)) < 0)
            return -1;
        total += n;
    } while (n == JR_BULK_ROWS);
    return total;
}
