/* signal.c - signals and durable sleeps (schema.sql, migration 16): a
 * signal sent to a job through the schema's jobrunner.signal() (the one
 * rule for the runtime and plain SQL: kept in jobs.waits, and a job
 * waiting for it made ready in the same statement), the wake-up of the
 * jobs whose wait's date came (a sleep ends, a signal's wait times out),
 * and the counts of waiting jobs. A signal and a wake-up meet at the
 * row's lock: the wake-up skips a row a signal holds, and a signal that
 * waited for a wake-up's commit reads the row again and finds the wait
 * timed out. Uses conn.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "postgres/pg_int.h"

/* $1 the job, $2 the signal, $3 its payload: 'ready' when it made the
 * job ready, else the job's state */
static const pg_stmt st_signal = {"jr_signal", 3,
    "SELECT {{schema}}.signal($1::bigint, $2::text, $3::jsonb)"};

int
jr_pg_signal(jr_backend *b, int64_t id, const char *name,
             const char *payload, char *state, size_t size, jr_err *err)
{
    static const char prefix[] = "jobrunner.signal: ";
    char sid[32];
    const char *params[3] = {sid, name, payload != NULL ? payload : "{}"};
    const char *m;
    PGresult *res;
    int woken;

    if (jr_signal_check(name, payload, b->max_payload, err) < 0)
        return -1;
    snprintf(sid, sizeof sid, "%lld", (long long)id);
    if ((res = jr_pg_run(b, &st_signal, params, "sending a signal", err))
        == NULL) {
        /* the function's refusals, in jr_signal_refused's words */
        int notfound = strcmp(b->sqlstate, "P0002") == 0;
        if (!notfound && strcmp(b->sqlstate, "22023") != 0)
            return -1;
        m = strncmp(b->pgmsg, prefix, sizeof prefix - 1) == 0 ?
            b->pgmsg + sizeof prefix - 1 : b->pgmsg;
        return jr_fail(err, notfound ? JR_ENOTFOUND : JR_EINPUT, "%s", m);
    }
    woken = strcmp(PQgetvalue(res, 0, 0), "ready") == 0;
    snprintf(state, size, "%s", woken ? "queued" : PQgetvalue(res, 0, 0));
    PQclear(res);
    return woken;
}

/* (A waiting job holds no unique key: woken while another job took it,
 * or with another job of its key, it runs on as a plain job, as a dead
 * job retried does.)
 * the first $1 jobs whose wait's date came: a sleep ends, a signal's
 * wait times out (recorded for the later attempts, with its deadline as
 * the wait recorded it: wake_at holds microseconds); a row a signal holds
 * is skipped (it decides); a row left with a date by a cancel only loses
 * it. This sweep and the next update the rows they locked by id, in an
 * array: joined with their subquery, a generic plan (which cannot tell
 * its LIMIT) hashed the jobs table beside it (200,000 jobs expired at
 * once: all of jobs_claim walked, 69 ms a sweep of 500, not 1 ms). */
static const pg_stmt st_wake = {"jr_wake", 1,
    "UPDATE {{schema}}.jobs j SET"
    " state = CASE WHEN j.state = 'waiting' THEN 'queued' ELSE j.state END,"
    " run_at = CASE WHEN j.state = 'waiting' THEN now() ELSE j.run_at END,"
    " waits = CASE WHEN j.state = 'waiting' AND j.wait_on IS NOT NULL"
    "  THEN jsonb_set(coalesce(j.waits, '{}'), '{timeouts}',"
    "  coalesce(j.waits->'timeouts', '{}') || jsonb_build_object(j.wait_on,"
    "  coalesce(j.waits->'deadlines'->j.wait_on,"
    "  to_jsonb(extract(epoch FROM j.wake_at)::float8)))) ELSE j.waits END,"
    " unique_key = CASE WHEN j.state = 'waiting' AND EXISTS (SELECT 1"
    "  FROM {{schema}}.jobs o WHERE o.name = j.name"
    "  AND o.unique_key = j.unique_key AND o.id <> j.id"
    "  AND (o.state IN ('queued', 'running')"
    "  OR (o.state = 'waiting' AND o.wake_at <= now())))"
    "  THEN NULL ELSE j.unique_key END,"
    " wait_on = NULL, wake_at = NULL, updated_at = now()"
    " WHERE j.id = ANY(ARRAY(SELECT id FROM {{schema}}.jobs"
    "  WHERE wake_at <= now()"
    "  ORDER BY wake_at LIMIT $1::int FOR UPDATE SKIP LOCKED))"
    " AND j.wake_at <= now()"};

/* The sweep of expired jobs (schema.sql, migration 21; docs/queues.md,
 * "Expiry and deadlines"): the first $1 queued jobs never started whose
 * expires_at passed end expired (the jobs_expiry index: a job without an
 * expiry is not in it); jobs_end settles the flows of those with a flow
 * bit. A row a claim or a cancel holds is skipped: the claim passes an
 * expired job over (JR_PG_UNEXPIRED), so it starts none meanwhile. */
static const pg_stmt st_expire = {"jr_expire", 1,
    "UPDATE {{schema}}.jobs j SET state = 'expired', finished_at = now(),"
    " updated_at = now(),"
    " last_error = 'expired: not started by its expires_at'"
    " WHERE j.id = ANY(ARRAY(SELECT id FROM {{schema}}.jobs"
    "  WHERE expires_at <= now()"
    "  AND expires_at IS NOT NULL AND state = 'queued' AND attempts = 0"
    "  AND generation IS NULL"
    "  ORDER BY expires_at LIMIT $1::int FOR UPDATE SKIP LOCKED))"
    " AND j.state = 'queued'"};

int
jr_pg_wake(jr_backend *b, int max, jr_err *err)
{
    char smax[16];
    const char *params[1] = {smax};
    int expired, woken;

    if (max <= 0)
        return 0;
    snprintf(smax, sizeof smax, "%d", max);
    if ((expired = jr_pg_run_count(b, &st_expire, params, "expiring jobs",
                                   err)) < 0 ||
        (woken = jr_pg_run_count(b, &st_wake, params, "waking waiting jobs",
                                 err)) < 0)
        return -1;
    return expired + woken;
}

/* waiting jobs: for a signal, for a date */
static const pg_stmt st_wait_counts = {"jr_wait_counts", 0,
    "SELECT (SELECT count(*) FROM {{schema}}.jobs WHERE wait_on IS NOT NULL"
    "  AND state = 'waiting'),"
    " (SELECT count(*) FROM {{schema}}.jobs WHERE wake_at IS NOT NULL"
    "  AND wait_on IS NULL AND state = 'waiting')"};

int
jr_pg_wait_counts(jr_backend *b, long *on_signal, long *on_date,
                  jr_err *err)
{
    PGresult *res;

    if ((res = jr_pg_run(b, &st_wait_counts, NULL, "counting waiting jobs",
                         err)) == NULL)
        return -1;
    *on_signal = atol(PQgetvalue(res, 0, 0));
    *on_date = atol(PQgetvalue(res, 0, 1));
    PQclear(res);
    return 0;
}
