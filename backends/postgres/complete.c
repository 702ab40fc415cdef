/* complete.c - results: done (deleted, or kept completed), retried, dead,
 * snoozed, released, expired and cancelled jobs, waits, follow-up pushes
 * in the same transaction, a completion with the next claim; what jobs
 * report while they run is recorded by reports.c in that transaction.
 * Owns their statements. Uses conn.c, push.c, claim.c, reports.c,
 * sqlrun.c, arrays.h. */

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/joblog.h"
#include "postgres/pg_int.h"
#include "postgres/arrays.h"
#include "sqlres.h"

/* a job pushed or waited on with result_ttl is kept (st_keep), and so is
 * one with a flow bit: its end is a change of state, which the schema's
 * jobs_end trigger settles (migration 13); the table has no DELETE
 * trigger for a plain success to pay. RUNNING is 'running' in another
 * collation, the same test, which no partial index's predicate is proved
 * by: the planner, which prices jobs_lease at the few rows running, took
 * it and read every entry (each a heap fetch) to find the ids, and under
 * a held snapshot those are all the jobs claimed since (docs/storage.md);
 * the ids are found by the primary key so. */
#define RUNNING "'running' COLLATE \"C\""

static const pg_stmt st_done = {"jr_done", 2,
    "DELETE FROM {{schema}}.jobs WHERE id = ANY(" JR_PG_IDS("$2") ")"
    " AND state = " RUNNING " AND locked_by = $1::text"
    " AND result_ttl IS NULL AND flow = 0 RETURNING id"};
/* DONE with a result, with keep_completed, with a result_ttl or a flow
 * bit: the row stays, completed; $5 the runner's result_ttl, $6
 * keep_completed, $7 why a return value was not stored, $8 its
 * jobrunner.sql statements (NULL: none), $9 its run's logs (NULL: none;
 * a success deleted writes none). A job with a
 * result or a result_ttl of its own stays until keep_until; one kept only
 * for its flow bit goes at the next prune (or as retention.completed
 * says). */
static const pg_stmt st_keep = {"jr_keep", 9,
    "UPDATE {{schema}}.jobs j SET state = 'completed', sql_statements = u.nsql,"
    " logs = CASE WHEN u.lg IS NULL THEN j.logs ELSE " JR_PG_LOGS_APPEND("u.lg")
    "  END,"
    " finished_at = now(), generation = coalesce(u.gen, j.generation),"
    " locked_by = NULL, locked_until = NULL, cancel_requested = false,"
    " updated_at = now(), result = u.res::jsonb,"
    " last_error = coalesce(u.err, j.last_error),"
    " keep_until = CASE WHEN u.res IS NOT NULL OR j.result_ttl IS NOT NULL"
    "  THEN now() + greatest(coalesce(j.result_ttl, $5::float8),"
    "  $6::float8) * interval '1 second'"
    "  WHEN j.flow <> 0 AND $6::float8 <= 0 THEN now() END"
    " FROM unnest($2::bigint[], $3::text[], $4::text[], $7::text[],"
    "  $8::int[], $9::text[]) AS u(id, gen, res, err, nsql, lg)"
    " WHERE j.id = u.id AND j.state = " RUNNING
    " AND j.locked_by = $1::text RETURNING j.id"};

/* Runs st (st_done or st_keep) on the DONE results of r[0..n) that go
 * to it (kept: with a result or keep_completed); appends the ids it
 * matched to done[*nd..]. Returns how many it was given, or -1. */
static int
run_done(jr_backend *b, const char *token, const jr_result *r, int n,
         const pg_stmt *st, int kept, int64_t *done, int *nd, jr_err *err)
{
    const char *params[9];
    char num[24], ttl[32], keep[32], nsql[16];
    jr_buf s = {0}, g = {0}, v = {0}, e = {0}, q = {0}, lg = {0}, json = {0};
    PGresult *res;
    int i, m, given = 0;

    for (i = 0; i < n; i++) {
        if (r[i].kind != JR_DONE || (kept >= 0 &&
            (b->keep_completed > 0 || r[i].result != NULL) != kept) ||
            (st == &st_keep && r[i].held == 1))   /* kept with its lines */
            continue;
        num[jr_put_int64(num, r[i].id)] = '\0';
        sb_num(&s, num);
        if (st == &st_keep) {   /* st_done takes the ids only */
            sb_elem(&g, r[i].generation);
            sb_elem(&v, r[i].result);
            sb_elem(&e, r[i].error);
            snprintf(nsql, sizeof nsql, "%d", r[i].nsql);
            sb_elem(&q, r[i].nsql > 0 ? nsql : NULL);
            /* a run's logs become JSON only here, kept */
            sb_elem(&lg, jr_joblog_json(r[i].logs, r[i].logs_len, &json));
        }
        given++;
    }
    if (given == 0)
        return 0;
    snprintf(ttl, sizeof ttl, "%.17g", b->result_ttl);
    snprintf(keep, sizeof keep, "%.17g", b->keep_completed);
    params[0] = token;
    params[1] = sb_array(&s);
    params[2] = sb_array(&g);
    params[3] = sb_array(&v);
    params[4] = ttl;
    params[5] = keep;
    params[6] = sb_array(&e);
    params[7] = st == &st_keep ? sb_array(&q) : NULL;
    params[8] = st == &st_keep ? sb_array(&lg) : NULL;
    res = s.oom || g.oom || v.oom || e.oom || q.oom || lg.oom ? NULL :
          jr_pg_run(b, st, params, "completing jobs", err);
    if (res == NULL && (s.oom || g.oom || v.oom || e.oom || q.oom || lg.oom))
        jr_fail(err, JR_ENOMEM, "postgres: completing jobs: out of memory");
    free(s.p);
    free(g.p);
    free(v.p);
    free(e.p);
    free(q.p);
    free(lg.p);
    jr_buf_free(&json);
    if (res == NULL)
        return -1;
    m = PQntuples(res);
    for (i = 0; i < m; i++)
        done[(*nd)++] = strtoll(PQgetvalue(res, i, 0), NULL, 10);
    PQclear(res);
    return given;
}

/* The successes of r[0..n) whose lines their worker holds (jr_result
 * held 1) that the DELETE left (a wait's mark, a flow bit, another's
 * lease): left running, their lines asked for (lines_wanted), counted
 * among done[0..*nd) as matched; the master records them again with
 * their lines. */
static void
held_left(const jr_result *r, int n, int64_t *done, int *nd)
{
    int i, k, m = *nd;

    for (i = 0; i < n; i++) {
        if (r[i].kind != JR_DONE || r[i].held != 1 ||
            r[i].lines_wanted == NULL)
            continue;
        for (k = 0; k < m && done[k] != r[i].id; k++)
            ;
        if (k < m)
            continue;
        *r[i].lines_wanted = 1;
        done[(*nd)++] = r[i].id;
    }
}

/* Deletes the DONE jobs of r[0..n), or makes them completed (with a
 * result, with keep_completed, or with a result_ttl); ids of those it
 * matched go to done[0..return), sorted. The plain path is one DELETE;
 * a second statement only when it left some of its rows. */
static int
finish_done(jr_backend *b, const char *token, const jr_result *r, int n,
            int64_t *done, jr_err *err)
{
    int nd = 0, given;

    if (b->seq_seen) {          /* sequences lately: one DELETE for both */
        if ((given = jr_pg_seq_done_all(b, token, r, n, done, &nd,
                                        err)) < 0)
            return -1;
    } else {
        if ((given = run_done(b, token, r, n, &st_done, 0, done, &nd,
                              err)) < 0)
            return -1;
        /* jobs of a sequence with one behind them: deleted, the next
         * readied */
        if (nd < given && jr_pg_seq_done(b, token, r, n, done, &nd,
                                         err) < 0)
            return -1;
    }
    if (nd < given || b->keep_completed > 0)
        held_left(r, n, done, &nd);
    /* ours with a result_ttl (or not ours): every DONE once more, kept;
     * the rows already deleted or fenced off do not match */
    if (nd < given &&
        run_done(b, token, r, n, &st_keep, -1, done, &nd, err) < 0)
        return -1;
    if (run_done(b, token, r, n, &st_keep, 1, done, &nd, err) < 0)
        return -1;
    qsort(done, (size_t)nd, sizeof *done, jr_pg_cmp_id);
    return nd;
}

/* A retry (kind 2) due at or past the job's deadline (schema.sql,
 * migration 21; NULL, so false, for a job without one): not scheduled,
 * the job ends dead, 'deadline passed' (its attempt's own error in its
 * history). */
#define PAST_DEADLINE "(u.kind = 2 AND j.deadline_at" \
    " <= now() + u.delay * interval '1 second')"

/* RETRY, DEAD, SNOOZE, RELEASE, EXPIRED and CANCELLED in one
 * statement; kinds are the JR_ values of job.h (2 retry, 3 dead, 4
 * snooze, 5 release, 6 expired, 7 cancelled). A requeue of a job
 * whose cancel was requested ends it cancelled. */
static const pg_stmt st_finish = {"jr_finish", 8,
    "UPDATE {{schema}}.jobs j SET"
    " attempt_log = CASE WHEN u.kind IN (2, 3) THEN "
    JR_PG_ATTEMPT_LOG("u.err", "u.secs", "$1::text", "u.worker", "u.gen")
    "  ELSE j.attempt_log END,"
    " state = CASE WHEN u.kind IN (3, 6) THEN 'dead'"
    "  WHEN u.kind = 7 OR j.cancel_requested THEN 'cancelled'"
    "  WHEN " PAST_DEADLINE " THEN 'dead'"
    "  ELSE 'queued' END,"
    " finished_at = CASE WHEN u.kind IN (3, 6, 7) OR j.cancel_requested"
    "  OR " PAST_DEADLINE " THEN now() ELSE j.finished_at END,"
    " run_at = CASE WHEN u.kind IN (2, 4)"
    "  THEN now() + u.delay * interval '1 second' ELSE j.run_at END,"
    " attempts = CASE WHEN u.kind IN (4, 5, 6)"
    "  THEN j.attempts - 1 ELSE j.attempts END,"
    " last_error = CASE WHEN " PAST_DEADLINE " AND NOT j.cancel_requested"
    "  THEN 'deadline passed' WHEN u.kind IN (2, 3)"
    "  THEN u.err WHEN u.kind = 7 THEN coalesce(u.err, 'cancelled')"
    "  ELSE coalesce(CASE WHEN u.kind = 6 THEN u.err END,"
    "  j.last_error) END,"
    " generation = CASE WHEN u.kind = 6"
    "  THEN j.generation ELSE coalesce(u.gen, j.generation) END,"
    " died_at = CASE WHEN u.kind IN (3, 6) OR (" PAST_DEADLINE
    "  AND NOT j.cancel_requested) THEN now() END,"
    " locked_by = NULL, locked_until = NULL, updated_at = now()"
    " FROM unnest($2::bigint[], $3::int[], $4::float8[], $5::text[],"
    "  $6::text[], $7::float8[], $8::int[])"
    "  AS u(id, kind, delay, err, gen, secs, worker)"
    " WHERE j.id = u.id AND j.state = 'running'"
    " AND j.locked_by = $1::text"};

/* Applies the RETRY, DEAD, SNOOZE, RELEASE, EXPIRED and CANCELLED results
 * of r[0..n). */
static int
finish_others(jr_backend *b, const char *token, const jr_result *r, int n,
              jr_err *err)
{
    const char *params[8];
    char num[32];
    jr_buf a[7];
    int i, k, rc, oom = 0;

    memset(a, 0, sizeof a);
    for (i = 0; i < n; i++) {
        if (r[i].kind == JR_DONE || JR_RESULT_RUNS_ON(r[i].kind) ||
            r[i].kind == JR_WAIT)
            continue;
        snprintf(num, sizeof num, "%lld", (long long)r[i].id);
        sb_num(&a[0], num);
        snprintf(num, sizeof num, "%d", r[i].kind);
        sb_num(&a[1], num);
        snprintf(num, sizeof num, "%.17g",
                 isfinite(r[i].delay) ? r[i].delay : 0.0);
        sb_num(&a[2], num);
        sb_elem(&a[3], r[i].error);
        sb_elem(&a[4], r[i].generation);
        snprintf(num, sizeof num, "%.17g", r[i].secs);  /* the history's */
        sb_num(&a[5], r[i].secs > 0 && isfinite(r[i].secs) ? num : "NULL");
        snprintf(num, sizeof num, "%d", r[i].worker);
        sb_num(&a[6], r[i].worker > 0 ? num : "NULL");
    }
    if (a[0].len == 0)
        return 0;
    params[0] = token;
    for (k = 0; k < 7; k++) {
        params[k + 1] = sb_array(&a[k]);
        oom |= a[k].oom;
    }
    rc = oom ? jr_fail(err, JR_ENOMEM, "postgres: completing jobs: out of "
                       "memory")
         : jr_pg_run_count(b, &st_finish, params, "completing jobs", err);
    for (k = 0; k < 7; k++)
        free(a[k].p);
    return rc;
}

/* A wait (schema.sql, migration 16): waiting until signal $3 or date $4
 * (NULL: none), the attempt not counted, or ready at once when the signal
 * came while it ran; the record a later attempt reads (its deadline or
 * wake, $5 the section, $6 the key) joins jobs.waits. $7 the generation. */
#define SIGNALLED "coalesce(j.waits->'signals' ? $3::text, false)"
static const pg_stmt st_wait = {"jr_wait", 7,
    "UPDATE {{schema}}.jobs j SET"
    " state = CASE WHEN j.cancel_requested THEN 'cancelled'"
    "  WHEN " SIGNALLED " THEN 'queued' ELSE 'waiting' END,"
    " finished_at = CASE WHEN j.cancel_requested THEN now()"
    "  ELSE j.finished_at END,"
    " run_at = CASE WHEN " SIGNALLED " THEN now() ELSE j.run_at END,"
    " wait_on = CASE WHEN j.cancel_requested OR " SIGNALLED " THEN NULL"
    "  ELSE $3::text END,"
    " wake_at = CASE WHEN j.cancel_requested OR " SIGNALLED " THEN NULL"
    "  ELSE to_timestamp($4::float8) END,"
    " waits = CASE WHEN $4::float8 IS NULL THEN j.waits"
    "  ELSE jsonb_set(coalesce(j.waits, '{}'), ARRAY[$5::text],"
    "  coalesce(j.waits->$5::text, '{}')"
    "  || jsonb_build_object($6::text, $4::float8)) END,"
    " attempts = j.attempts - 1, generation = coalesce($7::text,"
    "  j.generation), locked_by = NULL, locked_until = NULL,"
    " updated_at = now()"
    " WHERE j.id = $2::bigint AND j.state = 'running'"
    " AND j.locked_by = $1::text"};

/* Applies the WAIT results of r[0..n), one statement each (a wait is
 * rare: a job waits once in many runs of others). */
static int
finish_waits(jr_backend *b, const char *token, const jr_result *r, int n,
             jr_err *err)
{
    const char *params[7];
    char id[32], wake[32], key[16];
    int i, rc, applied = 0;

    for (i = 0; i < n; i++) {
        if (r[i].kind != JR_WAIT)
            continue;
        snprintf(id, sizeof id, "%lld", (long long)r[i].id);
        snprintf(wake, sizeof wake, "%.17g", r[i].wake_at);
        snprintf(key, sizeof key, "%d", r[i].sleep_n);
        params[0] = token;
        params[1] = id;
        params[2] = r[i].wait_on;
        params[3] = isfinite(r[i].wake_at) ? wake : NULL;
        params[4] = r[i].wait_on != NULL ? "deadlines" : "sleeps";
        params[5] = r[i].wait_on != NULL ? r[i].wait_on : key;
        params[6] = r[i].generation;
        if ((rc = jr_pg_run_count(b, &st_wait, params, "recording a wait",
                                  err)) < 0)
            return -1;
        applied += rc;
    }
    return applied;
}

/* The follow-up jobs of the DONE results whose delete matched (ids in
 * done[0..ndone), sorted), into a new array; *np gets how many. */
static const jr_push **
followups(const jr_result *r, int n, const int64_t *done, int ndone,
          int *np)
{
    const jr_push **pp;
    int i, k, total = 0;

    for (i = 0; i < n; i++)
        if (r[i].kind == JR_DONE && r[i].npushes > 0)
            total += r[i].npushes;
    *np = 0;
    if ((pp = malloc(((size_t)total + 1) * sizeof *pp)) == NULL)
        return NULL;
    for (i = 0; i < n; i++) {
        if (r[i].kind != JR_DONE || r[i].npushes <= 0 ||
            !bsearch(&r[i].id, done, (size_t)ndone, sizeof *done, jr_pg_cmp_id))
            continue;
        for (k = 0; k < r[i].npushes; k++)
            pp[(*np)++] = &r[i].pushes[k];
    }
    return pp;
}

/* Checks every follow-up push before the transaction starts. */
static int
check_followups(const jr_backend *b, const jr_result *r, int n, jr_err *err)
{
    char msg[sizeof err->msg];
    int i, k;

    for (i = 0; i < n; i++) {
        if (r[i].kind < JR_DONE || r[i].kind > JR_WAIT)
            return jr_fail(err, JR_EINPUT, "job %lld: unknown result kind "
                           "%d", (long long)r[i].id, r[i].kind);
        for (k = 0; r[i].kind == JR_DONE && k < r[i].npushes; k++) {
            if (jr_push_check(&r[i].pushes[k], b->max_payload, err) < 0) {
                memcpy(msg, err->msg, sizeof msg);
                return jr_fail(err, err->code, "job %lld: follow-up %s",
                               (long long)r[i].id, msg);
            }
        }
    }
    return 0;
}

/* The body of the complete transaction. */
static int
complete_rows(jr_backend *b, const char *token, const jr_result *r, int n,
              int64_t *done, int *nd, const jr_push ***pp, int *np,
              jr_err *err)
{
    int ndone, nother, nprogress, nsteps, nwait;

    /* progress and steps first: a job's last report comes in the same
     * batch as its end, and the end fences them out (the row stops
     * running) */
    if (jr_pg_finish_logs(b, token, r, n, err) < 0 ||
        (nsteps = jr_pg_finish_steps(b, token, r, n, err)) < 0 ||
        (nprogress = jr_pg_finish_progress(b, token, r, n, err)) < 0 ||
        (ndone = finish_done(b, token, r, n, done, err)) < 0 ||
        (nother = finish_others(b, token, r, n, err)) < 0 ||
        (nwait = finish_waits(b, token, r, n, err)) < 0)
        return -1;
    *nd = ndone;
    if ((*pp = followups(r, n, done, ndone, np)) == NULL)
        return jr_fail(err, JR_ENOMEM, "postgres: completing jobs: out of "
                       "memory");
    if (*np > 0 && jr_pg_insert_linked(b, *pp, *np, NULL, err) < 0)
        return -1;
    return ndone + nother + nprogress + nsteps + nwait;
}

/* complete_rows with the successes' statements (sqlrun.c); results
 * without statements pay one loop. First as if every statement passes,
 * with no savepoint (the transaction holds nothing else yet: the caller
 * has just begun it): the completion's own fenced writes tell which jobs
 * are still this runner's (and lock their rows), and their statements
 * follow in one pipeline. When one fails, the transaction is rolled back
 * and begun again, and all of it done again: the jobs still ours locked
 * first, each job's statements in a savepoint, on a copy of the results
 * in which a success whose statement failed is a failed attempt. *own
 * gets the copy (free it after the transaction: the follow-ups point
 * into it). */
static int
complete_tx(jr_backend *b, const char *token, const jr_result *r, int n,
            int64_t *done, const jr_push ***pp, int *np, jr_result **own,
            jr_err *err)
{
    int nd = 0, rc, failed;

    if (!jr_sqlres_any(r, n))
        return complete_rows(b, token, r, n, done, &nd, pp, np, err);
    jr_sqlres_clear(r, n);
    if ((rc = complete_rows(b, token, r, n, done, &nd, pp, np, err)) < 0 ||
        (failed = jr_pg_sql_try(b, r, n, done, nd, err)) < 0)
        return -1;
    if (!failed)
        return rc;
    free(*pp);
    *pp = NULL;
    *np = 0;
    if (jr_pg_run_plain(b, "ROLLBACK; BEGIN", "completing jobs", err) < 0)
        return -1;
    if ((*own = jr_sqlres_copy(r, n)) == NULL)
        return jr_fail(err, JR_ENOMEM, "postgres: completing jobs: out of "
                       "memory");
    if (jr_pg_sql_run(b, token, *own, n, err) < 0)
        return -1;
    return complete_rows(b, token, *own, n, done, &nd, pp, np, err);
}

/* 1 if r[0..n) are all DONE without follow-ups: their one statement
 * needs no transaction around it (a round trip instead of three). */
static int
only_done(const jr_result *r, int n)
{
    int i;

    for (i = 0; i < n; i++)
        if (r[i].kind != JR_DONE || r[i].npushes > 0 || r[i].nsql > 0)
            return 0;
    return 1;
}

int
jr_pg_complete(jr_backend *b, const char *token, const jr_result *r, int n,
            jr_err *err)
{
    const jr_push **pp = NULL;
    jr_result *own = NULL;
    int64_t *done;
    int np = 0, rc;

    if (n <= 0)
        return 0;
    if (check_followups(b, r, n, err) < 0 || jr_pg_ready(b, err) < 0)
        return -1;
    if ((done = malloc((size_t)n * sizeof *done)) == NULL)
        return jr_fail(err, JR_ENOMEM, "postgres: completing %d jobs: out "
                       "of memory", n);
    b->insert_failed = 0;
    if (only_done(r, n)) {
        rc = finish_done(b, token, r, n, done, err);    /* one statement */
        free(done);
        return rc;
    }
    if ((rc = jr_pg_run_plain(b, "BEGIN", "completing jobs", err)) == 0) {
        rc = complete_tx(b, token, r, n, done, &pp, &np, &own, err);
        if (rc >= 0 && jr_pg_run_plain(b, "COMMIT", "completing jobs", err) < 0)
            rc = -1;
        if (rc < 0) {
            jr_pg_rollback(b);
            if (np > 0)
                jr_pg_explain_push_error(b, pp, np, err);
        }
    }
    free(pp);
    free(own);
    free(done);
    return rc;
}

/* Records results and claims in one transaction: one commit (one WAL
 * flush) a round instead of two. */
int
jr_pg_complete_claim(jr_backend *b, const char *token, const jr_result *r,
                  int nr, int *applied, double lease,
                  const jr_claim_spec *spec, jr_job **out, jr_err *err)
{
    const jr_push **pp = NULL;
    jr_result *own = NULL;
    int64_t *done;
    int np = 0, rc = -1, n = -1;

    *applied = 0;
    if (check_followups(b, r, nr, err) < 0 || jr_pg_ready(b, err) < 0)
        return -1;
    if ((done = malloc((size_t)(nr > 0 ? nr : 1) * sizeof *done)) == NULL)
        return jr_fail(err, JR_ENOMEM, "postgres: completing %d jobs: out "
                       "of memory", nr);
    b->insert_failed = 0;
    if (jr_pg_run_plain(b, "BEGIN", "completing jobs", err) == 0) {
        rc = nr > 0 ? complete_tx(b, token, r, nr, done, &pp, &np, &own,
                                  err) : 0;
        if (rc >= 0)
            n = jr_pg_claim_stmt(b, token, lease, spec, out, err);
        if (n >= 0 && jr_pg_run_plain(b, "COMMIT", "claiming jobs", err) < 0) {
            while (n > 0)
                free(out[--n]);
            n = -1;
        }
        if (n < 0) {
            jr_pg_rollback(b);
            if (rc < 0 && np > 0)
                jr_pg_explain_push_error(b, pp, np, err);
        } else {
            *applied = rc;
        }
    }
    free(pp);
    free(own);
    free(done);
    return n;
}
