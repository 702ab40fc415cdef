/* prune.c - housekeeping off the claim path, one runner at a time: finished
 * jobs and expired unique keys pruned in small batches, idle queue rows
 * deleted, vacuum. Owns their statements. Uses conn.c, arrays.h. */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "postgres/pg_int.h"
#include "postgres/arrays.h"

/* A queue row q that queue_prune may delete: not paused, not changed
 * for $1 seconds, with no queued job (jobs_claim), running or dead one
 * (their partial indexes, read once). The queued job is one probe of
 * jobs_claim per queue row, as a scalar subquery: as NOT EXISTS it was
 * an anti join, merged along jobs_claim across every queue's backlog
 * (200,000 queued: 22-30 ms a prune, in a generic plan and in the
 * runner's). */
#define QUEUE_IDLE \
    " NOT q.paused AND q.updated_at < now() - $1::float8 * interval '1 s'" \
    " AND (SELECT 1 FROM {{schema}}.jobs j" \
    "  WHERE j.state = 'queued' AND j.queue = q.name LIMIT 1) IS NULL" \
    " AND q.name NOT IN (SELECT queue FROM {{schema}}.jobs" \
    "  WHERE state = 'running')" \
    " AND q.name NOT IN (SELECT queue FROM {{schema}}.jobs" \
    "  WHERE state = 'dead')"

/* Deletes up to limit rows of one finished state older than age seconds
 * (age < 0: none), in the open transaction. */
static int
prune_state(jr_backend *b, const pg_stmt *which, double age, int limit,
            jr_err *err)
{
    char sage[32], slimit[16];
    const char *params[2] = {sage, slimit};

    if (age < 0 || !isfinite(age) || limit <= 0)
        return 0;
    snprintf(sage, sizeof sage, "%.17g", age);
    snprintf(slimit, sizeof slimit, "%d", limit);
    return jr_pg_run_count(b, which, params, "pruning finished jobs", err);
}

/* The prunes below delete the rows their subquery locked, found by id
 * (by ctid in the tables keyed by two columns) in an array of them:
 * written as "IN (SELECT ... LIMIT $2)", a prepared statement's generic
 * plan cannot tell the LIMIT, takes the subquery for a tenth of its
 * rows and joined them with a hash of the whole table (200,000
 * completed jobs: a Seq Scan of jobs, 56 ms to prune 500; all of
 * job_deps walked for 500 edges). An array is a probe per row in every
 * plan. */
static const pg_stmt st_prune_unique = {"jr_prune_unique", 2,
    "DELETE FROM {{schema}}.unique_keys WHERE ctid = ANY(ARRAY("
    " SELECT ctid FROM {{schema}}.unique_keys"
    " WHERE held_until < now() - $1::float8 * interval '1 second'"
    " LIMIT $2::int FOR UPDATE SKIP LOCKED))"};

/* One runner at a time, small batches, never waiting on a row. */
static const pg_stmt st_prune_lock = {"jr_prune_lock", 1,
    "SELECT pg_try_advisory_xact_lock(hashtext($1::text))"};

static const pg_stmt st_prune_completed = {
    "jr_prune_completed", 2,
    "DELETE FROM {{schema}}.jobs WHERE id = ANY(ARRAY(SELECT id"
    " FROM {{schema}}.jobs WHERE state = 'completed'"
    " AND finished_at < now() - $1::float8 * interval '1 second'"
    " AND keep_until IS NULL LIMIT $2::int FOR UPDATE SKIP LOCKED))"};

/* kept for their result (complete.c's st_keep) until keep_until */
static const pg_stmt st_prune_kept = {
    "jr_prune_kept", 2,
    "DELETE FROM {{schema}}.jobs WHERE id = ANY(ARRAY(SELECT id"
    " FROM {{schema}}.jobs WHERE state = 'completed'"
    " AND keep_until < now() - $1::float8 * interval '1 second'"
    " LIMIT $2::int FOR UPDATE SKIP LOCKED))"};

static const pg_stmt st_prune_cancelled = {
    "jr_prune_cancelled", 2,
    "DELETE FROM {{schema}}.jobs WHERE id = ANY(ARRAY(SELECT id"
    " FROM {{schema}}.jobs WHERE state = 'cancelled'"
    " AND finished_at < now() - $1::float8 * interval '1 second'"
    " LIMIT $2::int FOR UPDATE SKIP LOCKED))"};

static const pg_stmt st_prune_dead = {"jr_prune_dead", 2,
    "DELETE FROM {{schema}}.jobs WHERE id = ANY(ARRAY(SELECT id"
    " FROM {{schema}}.jobs WHERE state = 'dead'"
    " AND died_at < now() - $1::float8 * interval '1 second'"
    " LIMIT $2::int FOR UPDATE SKIP LOCKED))"};

/* expired jobs (docs/queues.md, "Expiry and deadlines") are kept as long
 * as dead ones, from their end */
static const pg_stmt st_prune_expired = {"jr_prune_expired", 2,
    "DELETE FROM {{schema}}.jobs WHERE id = ANY(ARRAY(SELECT id"
    " FROM {{schema}}.jobs WHERE state = 'expired'"
    " AND finished_at < now() - $1::float8 * interval '1 second'"
    " LIMIT $2::int FOR UPDATE SKIP LOCKED))"};

/* workflows: edges whose child is gone; batches finished more than $1
 * seconds ago, their members first (kept as long as cancelled jobs) */
static const pg_stmt st_prune_deps = {"jr_prune_deps", 2,
    "DELETE FROM {{schema}}.job_deps WHERE ctid = ANY(ARRAY("
    " SELECT d.ctid FROM {{schema}}.job_deps d"
    " WHERE $1::float8 IS NOT NULL AND NOT EXISTS (SELECT 1"
    " FROM {{schema}}.jobs j WHERE j.id = d.child_id)"
    " LIMIT $2::int FOR UPDATE SKIP LOCKED))"};

static const pg_stmt st_prune_members = {
    "jr_prune_members", 2,
    "DELETE FROM {{schema}}.batch_jobs WHERE batch_id = ANY(ARRAY(SELECT id"
    " FROM {{schema}}.batches"
    " WHERE finished_at < now() - $1::float8 * interval '1 second'"
    " LIMIT $2::int))"};

static const pg_stmt st_prune_batches = {
    "jr_prune_batches", 2,
    "DELETE FROM {{schema}}.batches WHERE id = ANY(ARRAY(SELECT id"
    " FROM {{schema}}.batches b"
    " WHERE finished_at < now() - $1::float8 * interval '1 second'"
    " AND NOT EXISTS (SELECT 1 FROM {{schema}}.batch_jobs m"
    " WHERE m.batch_id = b.id) LIMIT $2::int FOR UPDATE SKIP LOCKED))"};

/* Workflow rows: prune_state's for each (older_cancelled < 0: batches
 * kept). */
static int
prune_flow(jr_backend *b, double older_cancelled, int limit, jr_err *err)
{
    int n, rc;

    if ((n = prune_state(b, &st_prune_deps, 0, limit, err)) < 0 ||
        (rc = prune_state(b, &st_prune_members, older_cancelled, limit - n,
                          err)) < 0 ||
        (rc = prune_state(b, &st_prune_batches, older_cancelled, limit - n,
                          err)) < 0)
        return -1;
    return n + rc;
}

/* The prune transaction's body: 0 when another runner holds the prune
 * lock. */
static int
prune_tx(jr_backend *b, const double *age, int limit, jr_err *err)
{
    static const pg_stmt *const which[6] = {
        &st_prune_completed, &st_prune_cancelled, &st_prune_dead,
        &st_prune_unique, &st_prune_kept, &st_prune_expired};
    char key[96];
    const char *params[1] = {key};
    PGresult *res;
    int n = 0, rc, i, locked;

    snprintf(key, sizeof key, "jobrunner.prune.%s", b->schema);
    if ((res = jr_pg_run(b, &st_prune_lock, params, "pruning finished jobs",
                      err)) == NULL)
        return -1;
    locked = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    for (i = 0; i < 6 && locked; i++) {
        /* the windows of unique keys and the kept jobs end at held_until
         * and keep_until: age 0; expired jobs are kept as dead ones */
        if ((rc = prune_state(b, which[i], i < 3 ? age[i] : i == 5 ? age[2]
                              : 0, limit - n, err)) < 0)
            return -1;
        n += rc;
    }
    if (locked && (rc = prune_flow(b, age[1], limit - n, err)) < 0)
        return -1;
    return locked ? n + rc : n;
}

int
jr_pg_prune(jr_backend *b, double older_completed, double older_cancelled,
         double older_dead, int limit, jr_err *err)
{
    const double age[3] = {older_completed, older_cancelled, older_dead};
    int n;

    if (limit <= 0)
        return 0;
    if (jr_pg_ready(b, err) < 0 ||
        jr_pg_run_plain(b, "BEGIN", "pruning finished jobs", err) < 0)
        return -1;
    if ((n = prune_tx(b, age, limit, err)) < 0 ||
        jr_pg_run_plain(b, "COMMIT", "pruning finished jobs", err) < 0) {
        jr_pg_rollback(b);
        return -1;
    }
    return n;
}

/* Idle queues: $1 seconds, $2 names kept, $3 at most. */
static const pg_stmt st_queue_idle = {"jr_queue_idle", 3,
    "SELECT q.name FROM {{schema}}.queues q WHERE" QUEUE_IDLE
    " AND q.name <> ALL($2::text[]) ORDER BY q.name LIMIT $3::int"};

/* the same again for names $2, under the SHARE lock on jobs */
static const pg_stmt st_queue_prune = {"jr_queue_prune", 2,
    "DELETE FROM {{schema}}.queues q WHERE q.name = ANY($2::text[])"
    " AND" QUEUE_IDLE};

/* queue_prune's transaction body: finds the idle queues, then takes a
 * SHARE lock on jobs (a push in flight, whose trigger saw the queue's
 * row, commits first; the next waits for this delete and makes the row
 * again) and deletes those still idle. The lock waits 200 ms at most:
 * then it is for a later prune. 0 when another runner prunes. */
static int
queue_prune_tx(jr_backend *b, const char *const *params, jr_err *err)
{
    char key[96], sql[160];
    const char *lock[1] = {key}, *del[2] = {params[0], NULL};
    jr_buf names = {0};
    PGresult *res;
    int r, n;

    b->sqlstate[0] = '\0';
    snprintf(key, sizeof key, "jobrunner.queues.%s", b->schema);
    if ((res = jr_pg_run(b, &st_prune_lock, lock, "pruning idle queues", err)) ==
        NULL)
        return -1;
    n = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    if (!n || (res = jr_pg_run(b, &st_queue_idle, params, "pruning idle queues",
                            err)) == NULL)
        return n ? -1 : 0;
    for (r = 0; r < PQntuples(res); r++)
        sb_elem(&names, PQgetvalue(res, r, 0));
    n = PQntuples(res);
    PQclear(res);
    del[1] = sb_array(&names);
    snprintf(sql, sizeof sql, "SET LOCAL lock_timeout = '200ms'; LOCK TABLE"
             " %s.jobs IN SHARE MODE", b->qschema);
    if (n > 0 && names.oom)
        n = jr_fail(err, JR_ENOMEM, "postgres: out of memory");
    else if (n > 0 && jr_pg_run_plain(b, sql, "pruning idle queues", err) < 0)
        n = -1;
    else if (n > 0)
        n = jr_pg_run_count(b, &st_queue_prune, del, "pruning idle queues", err);
    jr_buf_free(&names);
    /* a lock not had in 200 ms (jobs, or a queue row being paused) is for
     * a later round, not an error */
    return n < 0 && strcmp(b->sqlstate, "55P03") == 0 ? 0 : n;
}

int
jr_pg_queue_prune(jr_backend *b, double idle, const char *const *keep,
               int nkeep, int limit, jr_err *err)
{
    char sidle[32], slimit[16];
    const char *params[3] = {sidle, NULL, slimit};
    jr_buf kept = {0};
    int i, n;

    if (limit <= 0)
        return 0;
    snprintf(sidle, sizeof sidle, "%.17g", idle);
    snprintf(slimit, sizeof slimit, "%d", limit);
    for (i = 0; i < nkeep; i++)
        sb_elem(&kept, keep[i]);
    params[1] = sb_array(&kept);
    if (kept.oom) {
        jr_buf_free(&kept);
        return jr_fail(err, JR_ENOMEM, "postgres: out of memory");
    }
    if (jr_pg_ready(b, err) < 0 ||
        jr_pg_run_plain(b, "BEGIN", "pruning idle queues", err) < 0) {
        jr_buf_free(&kept);
        return -1;
    }
    n = queue_prune_tx(b, params, err);
    jr_buf_free(&kept);
    if (n > 0 && jr_pg_run_plain(b, "COMMIT", "pruning idle queues", err) < 0)
        n = -1;
    jr_pg_rollback(b);                /* nothing deleted, or it failed */
    return n;
}

/* The oldest transaction id that holds back what vacuum may remove, as
 * far as this role can see (a session's snapshot or transaction in this
 * database, a replication slot, a prepared transaction); no row if none. */
static const pg_stmt st_horizon = {"jr_vacuum_horizon", 0,
    "SELECT x::text FROM (SELECT backend_xmin AS x FROM pg_stat_activity"
    "  WHERE datname = current_database() AND pid <> pg_backend_pid()"
    "  AND backend_xmin IS NOT NULL"
    " UNION ALL SELECT backend_xid FROM pg_stat_activity"
    "  WHERE datname = current_database() AND pid <> pg_backend_pid()"
    "  AND backend_xid IS NOT NULL"
    " UNION ALL SELECT xmin FROM pg_replication_slots WHERE xmin IS NOT NULL"
    " UNION ALL SELECT transaction FROM pg_prepared_xacts) s"
    " ORDER BY age(x) DESC LIMIT 1"};

/* Deleted and claimed jobs leave their entries in jobs_claim until a
 * vacuum, and each claim walks past them from the index's start: between
 * two autovacuums (a minute apart by default) a fast drain slows several
 * times over. SKIP_LOCKED: another runner's vacuum, or autovacuum, is
 * as good. When the oldest transaction that holds back removal is the
 * one of the last vacuum (a session holding a snapshot open all along),
 * a vacuum can remove nothing the last one did not, and would read the
 * whole table and its indexes for it: the statistics only are refreshed
 * (ANALYZE); for vacuum_due (due), nothing at all. 1 if it ran, 0 if
 * not, or -1. */
static int
vacuum(jr_backend *b, int due, jr_err *err)
{
    char sql[128];
    const char *x = "";
    PGresult *res;
    jr_err ignored;
    int held;

    if (jr_pg_ready(b, err) < 0)
        return -1;
    /* unreadable: vacuum as if nothing held it */
    res = jr_pg_run(b, &st_horizon, NULL, "vacuuming the jobs table",
                    &ignored);
    if (res != NULL && PQntuples(res) == 1)
        x = PQgetvalue(res, 0, 0);
    held = x[0] != '\0' && strcmp(x, b->vacuum_horizon) == 0;
    if (strlen(x) < sizeof b->vacuum_horizon)
        strcpy(b->vacuum_horizon, x);
    PQclear(res);
    if (due && held)
        return 0;
    snprintf(sql, sizeof sql, held ? "ANALYZE (SKIP_LOCKED) %s.jobs" :
             "VACUUM (ANALYZE, SKIP_LOCKED) %s.jobs", b->qschema);
    return jr_pg_run_plain(b, sql, "vacuuming the jobs table", err) < 0 ?
           -1 : 1;
}

int
jr_pg_vacuum(jr_backend *b, jr_err *err)
{
    return vacuum(b, 0, err) < 0 ? -1 : 0;
}

/* The jobs table's dead and live rows as the server's statistics count
 * them. */
static const pg_stmt st_dead = {"jr_vacuum_dead", 0,
    "SELECT pg_stat_get_dead_tuples('{{schema}}.jobs'::regclass),"
    " pg_stat_get_live_tuples('{{schema}}.jobs'::regclass)"};

/* The runner's own count of the jobs it finished (vacuum) misses the dead
 * rows other sessions left: runners that stopped before vacuum_every, a
 * bulk delete. Their entries in jobs_claim are walked by every claim (the
 * skip scan over the queues, a queue's own range) until a vacuum, and
 * autovacuum, a minute apart and throttled, may leave them for minutes:
 * measured, 480,000 of them after the fair cases of make bench, a claim
 * of one job in an empty table read 1,599 pages (4 ms). Only a table
 * mostly dead (DEAD_LIVE times as many dead rows as live ones) is
 * vacuumed for them: where a backlog of the same order waits, the
 * runner's own count vacuums within vacuum_every jobs, and a vacuum at
 * its start ran inside its drain (0.33 s of a 0.7 s drain measured, two
 * processes on the machine's two cores). */
#define DEAD_LIVE 2

int
jr_pg_vacuum_due(jr_backend *b, long dead, jr_err *err)
{
    PGresult *res;
    long n, live;

    if (jr_pg_ready(b, err) < 0)
        return -1;
    res = jr_pg_run(b, &st_dead, NULL, "counting the jobs table's dead rows",
                    err);
    if (res == NULL)
        return -1;
    n = PQntuples(res) == 1 ? atol(PQgetvalue(res, 0, 0)) : 0;
    live = PQntuples(res) == 1 ? atol(PQgetvalue(res, 0, 1)) : 0;
    PQclear(res);
    if (n < dead || n < DEAD_LIVE * live)
        return 0;
    return vacuum(b, 1, err);
}
