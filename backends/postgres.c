/* postgres.c - the PostgreSQL engine: jr_postgres_ops over libpq. Owns one
 * connection for queries (statements prepared lazily, once per connection)
 * and, opened on demand, a second one that LISTENs for wake-ups. Objects live
 * in their own schema, made by the migrations of postgres.sql (compiled in
 * as build/postgres_sql.c).
 * Batches travel as array parameters expanded with unnest (a push's in
 * binary), or by COPY. Uses backend.c. */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "backend.h"
#include "limitpick.h"
#include "base/util.h"

extern const char jr_postgres_sql[];    /* postgres.sql, made by the Makefile */

#define MAX_MIGRATIONS 64

struct jr_backend {
    PGconn     *conn;           /* queries; never NULL once open */
    PGconn     *listen;         /* LISTEN connection, NULL until needed */
    char       *url;            /* as given, to open the LISTEN connection */
    char        masked[512];    /* url with the password hidden, for messages */
    char        schema[64];     /* validated schema name */
    char        qschema[68];    /* the same, double-quoted for SQL */
    char        channel[72];    /* NOTIFY channel: schema_jobs, cut to 63 */
    size_t      max_payload;    /* bytes; 0: no limit */
    unsigned long long prepared; /* bit per stmts[] entry prepared on conn */
    char        sqlstate[6];    /* SQLSTATE of the last failed statement */
    int         insert_failed;  /* the last insert_jobs failed in the db */
    int         copy_skip;      /* batches left that skip push_copy (a
                                   job of the last tried needed
                                   limit_key_of) */
    char        pgmsg[400];     /* its message and detail */
    int         must_exist;     /* migrate creates no schema */
    int         async_commit;   /* synchronous_commit = off on conn */
    unsigned    reconnects;     /* connections opened again after a loss */
    int         claims;         /* no seq or bitmap scans on conn */
    int         own_timeouts;   /* session timeouts set by session_setup */
    int         set_up;         /* session_setup done on conn since its
                                   last (re)connect */
    double      keep_completed; /* seconds; 0: delete at success */
    unsigned    rotate;         /* claims so far: which queue leads */
    unsigned    fair_only;      /* claims left before S_CLAIM_ONE is tried
                                   again (it found several queues) */
    PGresult   *lim_top;        /* limit_use's top keys, kept till next */
};

/* A dead job retried keeps its unique key only if no queued or running
 * job holds it and no newer dead job has it; else it runs as a plain job
 * (the unique index would refuse the retry). */
#define RETRY_KEY \
    " unique_key = CASE WHEN EXISTS (SELECT 1 FROM {{schema}}.jobs o" \
    "  WHERE o.name = jobs.name AND o.unique_key = jobs.unique_key" \
    "  AND (o.state IN ('queued', 'running')" \
    "  OR (o.state = 'dead' AND o.id > jobs.id)))" \
    "  THEN NULL ELSE unique_key END"

/* Statements, prepared on first use. {{schema}} becomes the quoted schema. */
enum {
    S_CLAIM, S_UNCLAIM, S_DONE, S_KEEP, S_FINISH, S_PROGRESS, S_PUSH,
    S_PAYLOAD_ERROR, S_RENEW,
    S_RESCUE, S_STATS, S_DEAD_LIST, S_DEAD_RETRY_IDS, S_DEAD_RETRY_ALL,
    S_DEAD_PURGE, S_PRUNE_LOCK, S_PRUNE_COMPLETED, S_PRUNE_CANCELLED,
    S_PRUNE_DEAD, S_CANCEL, S_CANCEL_POLL, S_PAUSE, S_RESUME, S_QUEUE_LIST,
    S_SHOW, S_LIST, S_PAUSED, S_READY_BY_QUEUE,
    S_PUSH_UNIQUE, S_PRUNE_UNIQUE,
    S_DEAD_DELETE_IDS,
    S_LIM_LOCK, S_LIM_RUNNING, S_LIM_BUCKETS, S_LIM_CANDIDATES, S_LIM_CLAIM,
    S_LIM_BUCKET_SET, S_LIM_PRUNE, S_LIM_PATH_SET, S_LIM_USE,
    S_LIM_USE_TOP, S_LIM_TOKENS, S_CLAIM_ONE, S_PUSH_ONE, S_PUSH_NOIDS,
    S_QUEUE_IDLE, S_QUEUE_PRUNE,
    S_COUNT
};

/* A queue row q that queue_prune may delete: not paused, not changed
 * for $1 seconds, with no queued job (jobs_claim), running or dead one
 * (their partial indexes, read once). */
#define QUEUE_IDLE \
    " NOT q.paused AND q.updated_at < now() - $1::float8 * interval '1 s'" \
    " AND NOT EXISTS (SELECT 1 FROM {{schema}}.jobs j" \
    "  WHERE j.state = 'queued' AND j.queue = q.name)" \
    " AND q.name NOT IN (SELECT queue FROM {{schema}}.jobs" \
    "  WHERE state = 'running')" \
    " AND q.name NOT IN (SELECT queue FROM {{schema}}.jobs" \
    "  WHERE state = 'dead')"

/* The claims' queues qq (name, paused): those with a queued job, found
 * by a skip scan of jobs_claim (one seek per such queue), less the
 * paused ones, so a claim's cost follows the queues with work, not the
 * rows of the queues table. Opens the statement's WITH list. */
#define WORK_QUEUES \
    "WITH RECURSIVE wq(name) AS (SELECT (SELECT min(queue)" \
    "  FROM {{schema}}.jobs WHERE state = 'queued')" \
    " UNION ALL SELECT (SELECT min(queue) FROM {{schema}}.jobs" \
    "  WHERE state = 'queued' AND queue > wq.name)" \
    " FROM wq WHERE wq.name IS NOT NULL)," \
    " qq AS (SELECT wq.name, false AS paused FROM wq" \
    "  WHERE wq.name IS NOT NULL AND NOT EXISTS (SELECT 1" \
    "  FROM {{schema}}.queues p WHERE p.name = wq.name AND p.paused)),"

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

/* What a claim sets on its rows, and returns (row_job's columns). */
#define CLAIM_SET \
    "state = 'running', attempts = j.attempts + 1, locked_by = $1::text," \
    " locked_until = now() + $2::float8 * interval '1 second'," \
    " updated_at = now(), started_at = now(), progress_done = NULL," \
    " progress_total = NULL, progress_note = NULL"
#define CLAIM_COLUMNS \
    "j.id, j.name, j.queue, j.payload::text, j.attempts," \
    " coalesce(j.max_retries, -1), j.priority," \
    " extract(epoch FROM j.run_at)::float8," \
    " extract(epoch FROM j.created_at)::float8"

/* A batch of plain jobs, in the batch's order (ids increase along it).
 * No join: a hashed subplan tells the names with a limit path, so the
 * unnest feeds the insert directly and, ordered by its ordinality, needs no
 * sort (a LEFT JOIN on limit_paths hashed the batch and sorted it back,
 * about a tenth of the statement). limit_key_of only for a name with a
 * path: a SQL function with a subquery is not inlined, and its call per
 * row cost about half of the statement (README "Batch push"). */
#define PUSH_SQL \
    "INSERT INTO {{schema}}.jobs" \
    " (name, payload, queue, priority, max_retries, run_at, limit_key)" \
    " SELECT u.name, u.payload::jsonb, u.queue, u.priority," \
    "  u.max_retries, coalesce(to_timestamp(u.run_at)," \
    "  now() + u.run_in * interval '1 second')," \
    "  CASE WHEN u.key IS NOT NULL THEN u.key WHEN u.name IN" \
    "  (SELECT lp.name FROM {{schema}}.limit_paths lp)" \
    "  THEN {{schema}}.limit_key_of(u.name, u.payload::jsonb, NULL) END" \
    " FROM unnest($1::text[], $2::text[], $3::text[], $4::int[]," \
    "  $5::int[], $6::float8[], $7::float8[], $8::text[]) WITH ORDINALITY" \
    "  AS u(name, payload, queue, priority, max_retries, run_at," \
    "  run_in, key, ord)" \
    " ORDER BY u.ord"

static const struct stmt {
    const char *name;
    int         nparams;
    const char *sql;
} stmts[S_COUNT] = {
    /* Fair: per queue not paused, its first cap ready jobs (a LATERAL
     * LIMIT over the jobs_claim index, so a backlog costs no scan), ranked
     * within it; then round robin over the ranks, the queue that leads
     * each round rotating ($8) over the queues with jobs. $5/$6 list caps,
     * $7 is the cap of the others; $4 the total. */
    [S_CLAIM] = {"jr_claim", 8,
        WORK_QUEUES
        " q AS (SELECT qq.name, least(coalesce(w.cap, $7::int), $4::int)"
        "  AS cap FROM qq"
        "  LEFT JOIN (SELECT queue, min(cap) AS cap"
        "   FROM unnest($5::text[], $6::int[]) AS u(queue, cap)"
        "   GROUP BY queue) w ON w.queue = qq.name"
        "  WHERE NOT qq.paused"
        "  AND least(coalesce(w.cap, $7::int), $4::int) > 0),"
        " c0 AS (SELECT r.id, r.rn, q.name AS qname, r.priority, r.run_at"
        "  FROM q"
        "  CROSS JOIN LATERAL (SELECT s.id, s.priority, s.run_at,"
        "   row_number() OVER (ORDER BY s.priority, s.run_at, s.id) AS rn"
        "   FROM (SELECT id, priority, run_at FROM {{schema}}.jobs"
        "    WHERE state = 'queued' AND queue = q.name AND run_at <= now()"
        "    AND name = ANY($3::text[])"
        "    ORDER BY priority, run_at, id LIMIT q.cap"
        "    FOR UPDATE SKIP LOCKED) s) r),"
        /* the leading queue rotates over the queues with jobs: $8 */
        " c1 AS (SELECT c0.*, dense_rank() OVER (ORDER BY qname) AS qi"
        "  FROM c0),"
        " c AS (SELECT c1.*, (qi + $8::bigint) % max(qi) OVER () AS turn"
        "  FROM c1),"
        " pick AS (SELECT id, row_number() OVER"
        "  (ORDER BY rn, turn, priority, run_at, id) AS ord FROM c"
        "  ORDER BY rn, turn, priority, run_at, id LIMIT $4::int)"
        " UPDATE {{schema}}.jobs j SET " CLAIM_SET
        " FROM pick WHERE j.id = pick.id"
        " RETURNING " CLAIM_COLUMNS ", pick.ord"},
    /* S_CLAIM's common case, when every queue is served uncapped and one
     * queue only not paused has queued jobs (one probe of jobs_claim a
     * queue, two at most: empty queues do not count, and a queue of jobs
     * due later does): the fair order is then that queue's own
     * (priority, run_at, id), read straight off the jobs_claim index
     * without the per-queue ranking, and the rows found by id (half the
     * work of S_CLAIM for 512 jobs). Rows come in no order (claim_one
     * sorts them). Claims nothing with several queues and returns one
     * row of NULLs: the caller then runs S_CLAIM. */
    [S_CLAIM_ONE] = {"jr_claim_one", 4,
        /* qq holds the queues with queued jobs already (WORK_QUEUES'
         * seeks): the first two will do */
        WORK_QUEUES
        " one AS (SELECT min(name) AS name, count(*) AS n"
        "  FROM (SELECT qq.name FROM qq LIMIT 2) qs),"
        " u AS (UPDATE {{schema}}.jobs j SET " CLAIM_SET
        "  WHERE j.id = ANY(ARRAY(SELECT id FROM {{schema}}.jobs"
        "   WHERE state = 'queued' AND run_at <= now()"
        "   AND queue = (SELECT name FROM one WHERE n = 1)"
        "   AND name = ANY($3::text[])"
        "   ORDER BY priority, run_at, id LIMIT $4::int"
        "   FOR UPDATE SKIP LOCKED))"
        "  RETURNING " CLAIM_COLUMNS ", 0::bigint)"
        " SELECT * FROM u UNION ALL SELECT NULL, NULL, NULL, NULL, NULL,"
        " NULL, NULL, NULL, NULL, NULL FROM one WHERE n > 1"},
    /* Undoes a claim the caller could not take (out of memory). */
    [S_UNCLAIM] = {"jr_unclaim", 2,
        "UPDATE {{schema}}.jobs SET state = 'queued',"
        " attempts = attempts - 1, locked_by = NULL, locked_until = NULL,"
        " updated_at = now()"
        " WHERE id = ANY($2::bigint[]) AND state = 'running'"
        " AND locked_by = $1::text"},
    [S_DONE] = {"jr_done", 2,
        "DELETE FROM {{schema}}.jobs WHERE id = ANY($2::bigint[])"
        " AND state = 'running' AND locked_by = $1::text RETURNING id"},
    /* DONE with keep_completed: the row stays, completed */
    [S_KEEP] = {"jr_keep", 3,
        "UPDATE {{schema}}.jobs j SET state = 'completed',"
        " finished_at = now(), generation = coalesce(u.gen, j.generation),"
        " locked_by = NULL, locked_until = NULL, cancel_requested = false,"
        " updated_at = now()"
        " FROM unnest($2::bigint[], $3::text[]) AS u(id, gen)"
        " WHERE j.id = u.id AND j.state = 'running'"
        " AND j.locked_by = $1::text RETURNING j.id"},
    /* RETRY, DEAD, SNOOZE, RELEASE, EXPIRED and CANCELLED in one
     * statement; kinds are the JR_ values of job.h (2 retry, 3 dead, 4
     * snooze, 5 release, 6 expired, 7 cancelled). A requeue of a job
     * whose cancel was requested ends it cancelled. */
    [S_FINISH] = {"jr_finish", 6,
        "UPDATE {{schema}}.jobs j SET"
        " state = CASE WHEN u.kind IN (3, 6) THEN 'dead'"
        "  WHEN u.kind = 7 OR j.cancel_requested THEN 'cancelled'"
        "  ELSE 'queued' END,"
        " finished_at = CASE WHEN u.kind IN (3, 6, 7) OR j.cancel_requested"
        "  THEN now() ELSE j.finished_at END,"
        " run_at = CASE WHEN u.kind IN (2, 4)"
        "  THEN now() + u.delay * interval '1 second' ELSE j.run_at END,"
        " attempts = CASE WHEN u.kind IN (4, 5, 6)"
        "  THEN j.attempts - 1 ELSE j.attempts END,"
        " last_error = CASE WHEN u.kind IN (2, 3)"
        "  THEN u.err WHEN u.kind = 7 THEN coalesce(u.err, 'cancelled')"
        "  ELSE coalesce(CASE WHEN u.kind = 6 THEN u.err END,"
        "  j.last_error) END,"
        " generation = CASE WHEN u.kind IN (5, 6)"
        "  THEN j.generation ELSE coalesce(u.gen, j.generation) END,"
        " died_at = CASE WHEN u.kind IN (3, 6) THEN now() END,"
        " locked_by = NULL, locked_until = NULL, updated_at = now()"
        " FROM unnest($2::bigint[], $3::int[], $4::float8[], $5::text[],"
        "  $6::text[]) AS u(id, kind, delay, err, gen)"
        " WHERE j.id = u.id AND j.state = 'running'"
        " AND j.locked_by = $1::text"},
    [S_PROGRESS] = {"jr_progress", 5,
        "UPDATE {{schema}}.jobs j SET progress_done = u.done,"
        " progress_total = u.total, progress_note = u.note"
        " FROM unnest($2::bigint[], $3::float8[], $4::float8[], $5::text[])"
        "  AS u(id, done, total, note)"
        " WHERE j.id = u.id AND j.state = 'running'"
        " AND j.locked_by = $1::text"},
    [S_PUSH] = {"jr_push", 8, PUSH_SQL " RETURNING id"},
    [S_PUSH_NOIDS] = {"jr_push_noids", 8, PUSH_SQL},
    /* S_PUSH for one job, with scalar parameters: S_PUSH, planned for
     * arrays of unknown length, was planned anew at every call (0.2 ms of
     * an idle push's 0.4 ms on the server, before the runner could hear
     * of the job), where this plan is made once and kept */
    [S_PUSH_ONE] = {"jr_push_one", 8,
        "INSERT INTO {{schema}}.jobs"
        " (name, payload, queue, priority, max_retries, run_at, limit_key)"
        " VALUES ($1::text, $2::text::jsonb, $3::text, $4::int, $5::int,"
        "  coalesce(to_timestamp($6::float8),"
        "  now() + $7::float8 * interval '1 second'),"
        "  CASE WHEN $8::text IS NOT NULL THEN $8::text"
        "  WHEN EXISTS (SELECT 1 FROM {{schema}}.limit_paths lp"
        "   WHERE lp.name = $1::text)"
        "  THEN {{schema}}.limit_key_of($1::text, $2::text::jsonb, $8::text)"
        "  END)"
        " RETURNING id"},
    /* a batch with a unique key: each push through the SQL function,
     * the one rule (README "Unique jobs"), in the batch's order */
    [S_PUSH_UNIQUE] = {"jr_push_unique", 11,
        "SELECT u.ord, r.id, r.outcome"
        " FROM unnest($1::text[], $2::text[], $3::text[], $4::int[],"
        "  $5::int[], $6::float8[], $7::float8[], $8::text[], $9::text[],"
        "  $10::float8[], $11::text[]) WITH ORDINALITY"
        "  AS u(name, payload, queue, priority, max_retries, run_at,"
        "  run_in, key, ukey, ufor, conflict, ord)"
        " CROSS JOIN LATERAL {{schema}}.push_keyed(u.name,"
        "  u.payload::jsonb, coalesce(to_timestamp(u.run_at),"
        "  now() + u.run_in * interval '1 second'), u.priority, u.queue,"
        "  u.max_retries, u.ukey, CASE WHEN u.ufor > 0"
        "  THEN u.ufor * interval '1 second' END, u.conflict, u.key) AS r"
        " ORDER BY u.ord"},
    [S_PRUNE_UNIQUE] = {"jr_prune_unique", 2,
        "DELETE FROM {{schema}}.unique_keys WHERE (name, unique_key) IN"
        " (SELECT name, unique_key FROM {{schema}}.unique_keys"
        " WHERE held_until < now() - $1::float8 * interval '1 second'"
        " LIMIT $2::int FOR UPDATE SKIP LOCKED)"},
    [S_PAYLOAD_ERROR] = {"jr_payload_error", 1,
        "SELECT u.ord FROM unnest($1::text[]) WITH ORDINALITY AS u(p, ord)"
        " WHERE {{schema}}.payload_error(u.p) IS NOT NULL"
        " ORDER BY u.ord LIMIT 1"},
    [S_RENEW] = {"jr_renew", 2,
        "UPDATE {{schema}}.jobs"
        " SET locked_until = now() + $2::float8 * interval '1 second'"
        " WHERE state = 'running' AND locked_by = $1::text"},
    [S_RESCUE] = {"jr_rescue", 0,
        "UPDATE {{schema}}.jobs SET"
        " state = CASE WHEN cancel_requested THEN 'cancelled'"
        "  ELSE 'queued' END,"
        " finished_at = CASE WHEN cancel_requested THEN now() END,"
        " last_error = CASE WHEN cancel_requested"
        "  THEN 'cancelled: lease expired: runner lost'"
        "  ELSE 'lease expired: runner lost' END,"
        " locked_by = NULL, locked_until = NULL, updated_at = now()"
        " WHERE state = 'running' AND locked_until < now()"},
    [S_STATS] = {"jr_stats", 0,
        "SELECT name,"
        " count(*) FILTER (WHERE state = 'queued' AND run_at <= now()),"
        " count(*) FILTER (WHERE state = 'queued' AND run_at > now()),"
        " count(*) FILTER (WHERE state = 'running'),"
        " count(*) FILTER (WHERE state = 'dead')"
        " FROM {{schema}}.jobs GROUP BY name ORDER BY name COLLATE \"C\""},
    [S_DEAD_LIST] = {"jr_dead_list", 1,
        "SELECT id, name, queue, attempts, coalesce(last_error, ''),"
        " generation, extract(epoch FROM died_at)::float8,"
        " extract(epoch FROM created_at)::float8"
        " FROM {{schema}}.jobs WHERE state = 'dead'"
        " ORDER BY died_at DESC, id DESC LIMIT $1::bigint"},
    [S_DEAD_RETRY_IDS] = {"jr_dead_retry_ids", 1,
        "UPDATE {{schema}}.jobs SET state = 'queued', attempts = 0,"
        " run_at = now(), died_at = NULL, finished_at = NULL,"
        " cancel_requested = false, updated_at = now()," RETRY_KEY
        " WHERE state = 'dead' AND id = ANY($1::bigint[])"},
    [S_DEAD_RETRY_ALL] = {"jr_dead_retry_all", 0,
        "UPDATE {{schema}}.jobs SET state = 'queued', attempts = 0,"
        " run_at = now(), died_at = NULL, finished_at = NULL,"
        " cancel_requested = false, updated_at = now()," RETRY_KEY
        " WHERE state = 'dead'"},
    [S_DEAD_PURGE] = {"jr_dead_purge", 1,
        "DELETE FROM {{schema}}.jobs WHERE state = 'dead'"
        " AND ($1::float8 <= 0"
        "  OR died_at < now() - $1::float8 * interval '1 second')"},
    [S_DEAD_DELETE_IDS] = {"jr_dead_delete_ids", 1,
        "DELETE FROM {{schema}}.jobs"
        " WHERE state = 'dead' AND id = ANY($1::bigint[])"},
    /* prune: one runner at a time, small batches, never waiting on a row */
    /* idle queues: $1 seconds, $2 names kept, $3 at most */
    [S_QUEUE_IDLE] = {"jr_queue_idle", 3,
        "SELECT q.name FROM {{schema}}.queues q WHERE" QUEUE_IDLE
        " AND q.name <> ALL($2::text[]) ORDER BY q.name LIMIT $3::int"},
    /* the same again for names $2, under the SHARE lock on jobs */
    [S_QUEUE_PRUNE] = {"jr_queue_prune", 2,
        "DELETE FROM {{schema}}.queues q WHERE q.name = ANY($2::text[])"
        " AND" QUEUE_IDLE},
    [S_PRUNE_LOCK] = {"jr_prune_lock", 1,
        "SELECT pg_try_advisory_xact_lock(hashtext($1::text))"},
    [S_PRUNE_COMPLETED] = {"jr_prune_completed", 2,
        "DELETE FROM {{schema}}.jobs WHERE id IN (SELECT id"
        " FROM {{schema}}.jobs WHERE state = 'completed'"
        " AND finished_at < now() - $1::float8 * interval '1 second'"
        " LIMIT $2::int FOR UPDATE SKIP LOCKED)"},
    [S_PRUNE_CANCELLED] = {"jr_prune_cancelled", 2,
        "DELETE FROM {{schema}}.jobs WHERE id IN (SELECT id"
        " FROM {{schema}}.jobs WHERE state = 'cancelled'"
        " AND finished_at < now() - $1::float8 * interval '1 second'"
        " LIMIT $2::int FOR UPDATE SKIP LOCKED)"},
    [S_PRUNE_DEAD] = {"jr_prune_dead", 2,
        "DELETE FROM {{schema}}.jobs WHERE id IN (SELECT id"
        " FROM {{schema}}.jobs WHERE state = 'dead'"
        " AND died_at < now() - $1::float8 * interval '1 second'"
        " LIMIT $2::int FOR UPDATE SKIP LOCKED)"},
    /* the SQL function is the one rule; one call per id, in order */
    [S_CANCEL] = {"jr_cancel", 1,
        "SELECT u.ord, {{schema}}.cancel(u.id)"
        " FROM unnest($1::bigint[]) WITH ORDINALITY AS u(id, ord)"
        " ORDER BY u.ord"},
    [S_CANCEL_POLL] = {"jr_cancel_poll", 2,
        "SELECT id FROM {{schema}}.jobs WHERE state = 'running'"
        " AND cancel_requested AND locked_by = $1::text"
        " ORDER BY id LIMIT $2::int"},
    [S_PAUSE] = {"jr_pause", 1, "SELECT {{schema}}.pause($1::text)"},
    [S_RESUME] = {"jr_resume", 1, "SELECT {{schema}}.resume($1::text)"},
    [S_QUEUE_LIST] = {"jr_queue_list", 0,
        "WITH c AS (SELECT queue,"
        "  count(*) FILTER (WHERE state = 'queued' AND run_at <= now()) r,"
        "  count(*) FILTER (WHERE state = 'queued' AND run_at > now()) s,"
        "  count(*) FILTER (WHERE state = 'running') u,"
        "  count(*) FILTER (WHERE state = 'dead') d,"
        "  count(*) FILTER (WHERE state = 'cancelled') x,"
        "  count(*) FILTER (WHERE state = 'completed') f"
        "  FROM {{schema}}.jobs GROUP BY queue),"
        " n AS (SELECT name FROM {{schema}}.queues UNION SELECT queue FROM c)"
        " SELECT n.name, coalesce(q.paused, false),"
        " extract(epoch FROM q.paused_at)::float8,"
        " coalesce(c.r, 0), coalesce(c.s, 0), coalesce(c.u, 0),"
        " coalesce(c.d, 0), coalesce(c.x, 0), coalesce(c.f, 0)"
        " FROM n LEFT JOIN {{schema}}.queues q ON q.name = n.name"
        " LEFT JOIN c ON c.queue = n.name ORDER BY n.name COLLATE \"C\""},
    [S_PAUSED] = {"jr_paused", 0,
        "SELECT name FROM {{schema}}.queues WHERE paused"
        " ORDER BY name COLLATE \"C\""},
    [S_READY_BY_QUEUE] = {"jr_ready_by_queue", 2,
        "SELECT queue, count(*) FROM (SELECT queue FROM {{schema}}.jobs"
        " WHERE state = 'queued' AND run_at <= now()"
        " AND name = ANY($1::text[]) AND queue NOT IN"
        " (SELECT name FROM {{schema}}.queues WHERE paused)"
        " LIMIT $2::bigint) t GROUP BY queue ORDER BY queue COLLATE \"C\""},
    [S_SHOW] = {"jr_show", 1,
        "SELECT " JOB_COLUMNS ", payload::text, unique_key"
        " FROM {{schema}}.jobs"
        " WHERE id = $1::bigint"},
    /* $1 state (or scheduled, ready), $2 name, $3 queue: NULL any; $4
     * limit, NULL: all */
    [S_LIST] = {"jr_list", 4,
        "SELECT " JOB_COLUMNS " FROM {{schema}}.jobs"
        " WHERE ($1::text IS NULL OR state = $1::text"
        "  OR ($1::text = 'scheduled' AND state = 'queued'"
        "   AND run_at > now())"
        "  OR ($1::text = 'ready' AND state = 'queued' AND run_at <= now()))"
        " AND ($2::text IS NULL OR name = $2::text)"
        " AND ($3::text IS NULL OR queue = $3::text)"
        " ORDER BY id DESC LIMIT $4::bigint"},
    /* ---- limits per key: claims under limits serialize on one advisory
     * lock per schema ($1), taken in the claim's transaction ---- */
    [S_LIM_LOCK] = {"jr_lim_lock", 1,
        "SELECT pg_advisory_xact_lock(hashtext($1::text)),"
        " extract(epoch FROM now())::float8"},
    [S_LIM_RUNNING] = {"jr_lim_running", 0,
        "SELECT name, queue, limit_key, count(*) FROM {{schema}}.jobs"
        " WHERE state = 'running' GROUP BY name, queue, limit_key"},
    /* the buckets of scopes $1 and keys $2 (pairs) that have a row */
    [S_LIM_BUCKETS] = {"jr_lim_buckets", 2,
        "SELECT lb.scope, lb.key, lb.tokens, lb.updated_at"
        " FROM unnest($1::text[], $2::text[]) AS u(scope, key)"
        " JOIN {{schema}}.limit_buckets lb"
        "  ON lb.scope = u.scope AND lb.key = u.key"},
    /* S_CLAIM's fair candidates, not claimed, without names blocked whole
     * ($7), names or queues blocked for a key ($8: "n<name>\x1f<key>",
     * "q<queue>\x1f<key>"), queues blocked ($9), each queue's cap less
     * what earlier passes took ($10/$11), keys whose stored bucket in a
     * scope $12 of per-key rate $13 is short of a token at $14 (one
     * look-up by primary key per job passed over: the cost follows the
     * keys with jobs, not the buckets) */
    [S_LIM_CANDIDATES] = {"jr_lim_candidates", 14,
        WORK_QUEUES
        " q AS (SELECT qq.name, least(coalesce(w.cap, $5::int), $2::int)"
        "  - coalesce(t.taken, 0) AS cap FROM qq"
        "  LEFT JOIN (SELECT queue, min(cap) AS cap"
        "   FROM unnest($3::text[], $4::int[]) AS u(queue, cap)"
        "   GROUP BY queue) w ON w.queue = qq.name"
        "  LEFT JOIN unnest($10::text[], $11::int[]) AS t(queue, taken)"
        "   ON t.queue = qq.name"
        "  WHERE NOT qq.paused AND qq.name <> ALL($9::text[])"
        "  AND least(coalesce(w.cap, $5::int), $2::int)"
        "   - coalesce(t.taken, 0) > 0),"
        " c0 AS (SELECT r.id, r.rn, q.name AS qname, r.priority, r.run_at,"
        "  r.jname, r.limit_key FROM q"
        "  CROSS JOIN LATERAL (SELECT s.id, s.priority, s.run_at,"
        "   s.name AS jname, s.limit_key,"
        "   row_number() OVER (ORDER BY s.priority, s.run_at, s.id) AS rn"
        "   FROM (SELECT id, priority, run_at, name, limit_key"
        "    FROM {{schema}}.jobs"
        "    WHERE state = 'queued' AND queue = q.name AND run_at <= now()"
        "    AND name = ANY($1::text[]) AND name <> ALL($7::text[])"
        "    AND (limit_key IS NULL"
        "     OR (('n' || name || chr(31) || limit_key) <> ALL($8::text[])"
        "     AND ('q' || queue || chr(31) || limit_key) <> ALL($8::text[])"
        "     AND NOT EXISTS (SELECT 1"
        "      FROM unnest($12::text[], $13::float8[]) AS r(scope, rate)"
        "      JOIN {{schema}}.limit_buckets lb ON lb.scope = r.scope"
        "      AND lb.key = limit_key"
        "      WHERE r.scope IN (name, 'queue:' || queue)"
        "      AND lb.tokens + ($14::float8 - lb.updated_at) * r.rate < 1)))"
        "    ORDER BY priority, run_at, id LIMIT q.cap"
        "    FOR UPDATE SKIP LOCKED) s) r),"
        " c1 AS (SELECT c0.*, dense_rank() OVER (ORDER BY qname) AS qi"
        "  FROM c0),"
        " c AS (SELECT c1.*, (qi + $6::bigint) % max(qi) OVER () AS turn"
        "  FROM c1)"
        " SELECT id, jname, qname, limit_key FROM c"
        " ORDER BY rn, turn, priority, run_at, id"},
    [S_LIM_CLAIM] = {"jr_lim_claim", 3,
        "UPDATE {{schema}}.jobs j SET state = 'running',"
        " attempts = j.attempts + 1, locked_by = $1::text,"
        " locked_until = now() + $2::float8 * interval '1 second',"
        " updated_at = now(), started_at = now(), progress_done = NULL,"
        " progress_total = NULL, progress_note = NULL"
        /* no state test: S_LIM_CANDIDATES locked these queued rows in
         * this transaction. With one, a plan that walks the whole
         * jobs_claim index and filters it by id was open to the planner,
         * and stale statistics chose it: 48,000 entries per claim. */
        " WHERE j.id = ANY($3::bigint[])"
        " RETURNING j.id, j.name, j.queue, j.payload::text, j.attempts,"
        " coalesce(j.max_retries, -1), j.priority,"
        " extract(epoch FROM j.run_at)::float8,"
        " extract(epoch FROM j.created_at)::float8,"
        " array_position($3::bigint[], j.id)"},
    [S_LIM_BUCKET_SET] = {"jr_lim_bucket_set", 4,
        "INSERT INTO {{schema}}.limit_buckets AS lb"
        " (scope, key, tokens, updated_at)"
        " SELECT u.scope, u.key, u.tokens, $4::float8"
        " FROM unnest($1::text[], $2::text[], $3::float8[])"
        "  AS u(scope, key, tokens)"
        " ON CONFLICT (scope, key) DO UPDATE"
        " SET tokens = excluded.tokens, updated_at = excluded.updated_at"},
    /* buckets of scope $1 full again by now $2 at rate $3, burst $4 */
    [S_LIM_PRUNE] = {"jr_lim_prune", 4,
        "DELETE FROM {{schema}}.limit_buckets WHERE scope = $1::text"
        " AND tokens + ($2::float8 - updated_at) * $3::float8 >= $4::float8"},
    [S_LIM_PATH_SET] = {"jr_lim_path_set", 2,
        "INSERT INTO {{schema}}.limit_paths (name, path)"
        " VALUES ($1::text, $2::text)"
        " ON CONFLICT (name) DO UPDATE SET path = excluded.path"},
    /* a limit's use: $1 its job name or $2 its queue (the other NULL) */
    [S_LIM_USE] = {"jr_lim_use", 2,
        "SELECT count(*) FILTER (WHERE state = 'running'),"
        " count(*) FILTER (WHERE state = 'queued' AND run_at <= now())"
        " FROM {{schema}}.jobs WHERE state IN ('running', 'queued')"
        " AND ($1::text IS NULL OR name = $1::text)"
        " AND ($2::text IS NULL OR queue = $2::text)"},
    [S_LIM_USE_TOP] = {"jr_lim_use_top", 3,
        "SELECT limit_key, count(*) FILTER (WHERE state = 'queued'"
        " AND run_at <= now()) AS w, count(*) FILTER (WHERE"
        " state = 'running') FROM {{schema}}.jobs"
        " WHERE state IN ('running', 'queued') AND limit_key IS NOT NULL"
        " AND ($1::text IS NULL OR name = $1::text)"
        " AND ($2::text IS NULL OR queue = $2::text)"
        " GROUP BY limit_key ORDER BY w DESC, limit_key LIMIT $3::int"},
    [S_LIM_TOKENS] = {"jr_lim_tokens", 1,
        "SELECT tokens, updated_at, extract(epoch FROM now())::float8"
        " FROM {{schema}}.limit_buckets WHERE scope = $1::text"
        " AND key = ''"},
};

/* Builders of SQL array literals ("{...}") over util.h's jr_buf. */

static void
sb_adds(jr_buf *s, const char *x)
{
    jr_buf_put(s, x, strlen(x));
}

/* Appends one element to an array literal being built: "{" on the first,
 * "," before the others; str NULL is an SQL NULL, else it is quoted. */
static void
sb_elem(jr_buf *s, const char *str)
{
    const char *run;

    jr_buf_put(s, s->len == 0 ? "{" : ",", 1);
    if (str == NULL) {
        sb_adds(s, "NULL");
        return;
    }
    jr_buf_put(s, "\"", 1);
    for (run = str; *str; str++) {
        if (*str == '"' || *str == '\\') {
            jr_buf_put(s, run, (size_t)(str - run));
            jr_buf_put(s, "\\", 1);
            run = str;
        }
    }
    jr_buf_put(s, run, (size_t)(str - run));
    jr_buf_put(s, "\"", 1);
}

/* Appends an unquoted element (a number or NULL). */
static void
sb_num(jr_buf *s, const char *num)
{
    jr_buf_put(s, s->len == 0 ? "{" : ",", 1);
    sb_adds(s, num);
}

/* Closes an array literal; an empty one is "{}". */
static const char *
sb_array(jr_buf *s)
{
    if (s->len == 0)
        jr_buf_put(s, "{}", 3);
    else
        jr_buf_put(s, "}", 2);
    return s->p;
}

static void
quiet(void *arg, const char *message)
{
    (void)arg;
    (void)message;              /* notices ("already exists, skipping") */
}

/* Copies src into dst on one line: runs of white space (libpq's messages
 * span lines) become one space; no trailing space. */
static void
oneline(char *dst, size_t size, const char *src)
{
    size_t n = 0;

    if (size == 0)
        return;
    for (; src != NULL && *src && n + 1 < size; src++) {
        if (isspace((unsigned char)*src)) {
            if (n > 0 && dst[n - 1] != ' ')
                dst[n++] = ' ';
        } else {
            dst[n++] = *src;
        }
    }
    while (n > 0 && dst[n - 1] == ' ')
        n--;
    dst[n] = '\0';
}

/* Returns a new string: tmpl[0..len) with every {{schema}} replaced by the
 * quoted schema; NULL when out of memory. */
static char *
expand_n(const jr_backend *b, const char *tmpl, size_t len)
{
    static const char mark[] = "{{schema}}";
    const char *end = tmpl + len, *p;
    jr_buf s = {0};

    while ((p = strstr(tmpl, mark)) != NULL && p < end) {
        jr_buf_put(&s, tmpl, (size_t)(p - tmpl));
        sb_adds(&s, b->qschema);
        tmpl = p + strlen(mark);
    }
    jr_buf_put(&s, tmpl, (size_t)(end - tmpl));
    jr_buf_put(&s, "", 1);
    if (s.oom) {
        free(s.p);
        return NULL;
    }
    return s.p;
}

static char *
expand(const jr_backend *b, const char *tmpl)
{
    return expand_n(b, tmpl, strlen(tmpl));
}

/* Fills err for a failed statement (res may be NULL): what failed, then
 * "connection lost" if so, then the server's message and detail. */
static int
db_fail(jr_backend *b, const PGresult *res, const char *what, jr_err *err)
{
    const char *primary = NULL, *detail = NULL, *state = NULL;
    char msg[400], det[300], tag[24] = "";

    if (res != NULL) {
        primary = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
        detail = PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL);
        state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    }
    snprintf(b->sqlstate, sizeof b->sqlstate, "%s", state ? state : "");
    oneline(msg, sizeof msg, primary ? primary : PQerrorMessage(b->conn));
    oneline(det, sizeof det, detail);
    /* class 57 (operator intervention): a statement_timeout or a cancel
     * (57014), a shutdown; the code tells them apart in a log */
    if (strncmp(b->sqlstate, "57", 2) == 0)
        snprintf(tag, sizeof tag, " [SQLSTATE %s]", b->sqlstate);
    snprintf(b->pgmsg, sizeof b->pgmsg, "%.250s%s%.120s%s%s", msg,
             *det ? " (" : "", det, *det ? ")" : "", tag);
    if (PQstatus(b->conn) != CONNECTION_OK)
        return jr_fail(err, JR_EDB, "postgres: %s: connection to '%s' lost "
                       "(%s); will reconnect on the next call", what,
                       b->masked, b->pgmsg);
    /* class 22 (data exception) and 23 (integrity constraint): the rows
     * were refused and would be again; the rest (08 connection, 53
     * resources, 57 operator intervention...) is the database's trouble */
    return jr_fail(err, strncmp(b->sqlstate, "22", 2) == 0 ||
                   strncmp(b->sqlstate, "23", 2) == 0 ? JR_EINPUT : JR_EDB,
                   "postgres: %s: %s", what, b->pgmsg);
}

/* Runs sql (no parameters) and checks it worked. */
static int
run_plain(jr_backend *b, const char *sql, const char *what, jr_err *err)
{
    PGresult *res = PQexec(b->conn, sql);
    ExecStatusType st = PQresultStatus(res);
    int rc = 0;

    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
        rc = db_fail(b, res, what, err);
    PQclear(res);
    return rc;
}

static void
rollback(jr_backend *b)
{
    if (PQstatus(b->conn) == CONNECTION_OK &&
        PQtransactionStatus(b->conn) != PQTRANS_IDLE)
        PQclear(PQexec(b->conn, "ROLLBACK"));
}

/* The session's settings, on a new connection and after a reconnect. No
 * JIT: with a deep backlog the planner's row estimates pass
 * jit_above_cost and every claim compiled for a second (1M jobs: 300
 * jobs/s); our statements are short and gain nothing from it. With
 * async_commit (the runner's own connection: claims, results, renewals)
 * a commit does not wait for its WAL flush: a crash can only undo the
 * last few of them, and an undone claim or result makes its job run
 * again, which at-least-once allows; the flush is a third of an idle
 * claim's round (README "Performance"). A connection that claims plans
 * no sequential or bitmap scan: every statement it runs walks an index
 * in order by design, and on the statistics of a table analyzed empty
 * (after a drain) the planner priced a claim's sequential scan, or its
 * bitmap scan, and a sort at one row: a plan that then read every queued
 * job at every claim of a backlog filled since. */
static void
session_setup(const jr_backend *b, PGconn *conn)
{
    char sql[128];

    snprintf(sql, sizeof sql, "SET jit = off%s%s",
             b->async_commit ? "; SET synchronous_commit = off" : "",
             b->claims ? "; SET enable_seqscan = off;"
                         " SET enable_bitmapscan = off" : "");
    PQclear(PQexec(conn, sql));
}

/* The runner's connections (own_timeouts) set their own timeouts, first
 * thing: a statement_timeout, lock_timeout or idle timeout set on the role
 * or the database is meant for the application's sessions, and inherited
 * it cancelled the runner's claims, or closed its idle connections, and
 * kept doing so after it was reset (a session keeps what it started
 * with). None (0) for each: the runner's statements are short by design,
 * the waits it makes are meant (the migration lock, a row a producer's
 * transaction holds), a vacuum or a migration may take minutes, and its
 * connections idle between rounds and LISTEN for wake-ups (README
 * "PostgreSQL"). This runs under the role's timeouts: if it fails, the
 * error says why and the next call tries again. */
static int
session_timeouts(const jr_backend *b, PGconn *conn, jr_err *err)
{
    char sql[192], msg[300];
    const char *state, *primary;
    PGresult *res;

    if (!b->own_timeouts)
        return 0;
    snprintf(sql, sizeof sql, "SET statement_timeout = 0; SET lock_timeout "
             "= 0; SET idle_in_transaction_session_timeout = 0%s%s",
             PQserverVersion(conn) >= 140000 ?
             "; SET idle_session_timeout = 0" : "",
             PQserverVersion(conn) >= 170000 ?
             "; SET transaction_timeout = 0" : "");
    res = PQexec(conn, sql);
    if (PQresultStatus(res) == PGRES_COMMAND_OK) {
        PQclear(res);
        return 0;
    }
    state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    primary = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
    oneline(msg, sizeof msg, primary ? primary : PQerrorMessage(conn));
    jr_fail(err, JR_EDB, "postgres: setting the session's own timeouts "
            "(statement_timeout, lock_timeout, idle timeouts: 0) on '%s' "
            "failed: %s [SQLSTATE %s]; tried again at the next call",
            b->masked, msg, state ? state : "none");
    PQclear(res);
    return -1;
}

/* Called first by every op: reconnects once if the connection went bad,
 * ends any transaction a failure left open, and sets the session up if
 * that has not worked yet. */
static int
ready(jr_backend *b, jr_err *err)
{
    if (PQstatus(b->conn) != CONNECTION_OK) {
        PQreset(b->conn);
        b->prepared = 0;
        b->set_up = 0;
        if (PQstatus(b->conn) == CONNECTION_OK)
            b->reconnects++;
        if (PQstatus(b->conn) != CONNECTION_OK) {
            char msg[300];
            oneline(msg, sizeof msg, PQerrorMessage(b->conn));
            return jr_fail(err, JR_EDB, "postgres: connection to '%s' lost "
                           "and reconnecting failed: %s", b->masked, msg);
        }
    }
    rollback(b);
    if (!b->set_up) {
        if (session_timeouts(b, b->conn, err) < 0)
            return -1;
        session_setup(b, b->conn);
        b->set_up = 1;
    }
    return 0;
}

/* Runs statement s with params, preparing it first if this connection has
 * not; lens NULL: params are text, else all binary, of those lengths.
 * Returns its result (caller PQclears) or NULL with err set. */
static PGresult *
run_params(jr_backend *b, int s, const char *const *params, const int *lens,
           const char *what, jr_err *err)
{
    static const int binary[16] = {1, 1, 1, 1, 1, 1, 1, 1,
                                   1, 1, 1, 1, 1, 1, 1, 1};
    PGresult *res;
    ExecStatusType st;

    if (!(b->prepared & (1ull << s))) {
        char *sql = expand(b, stmts[s].sql);
        if (sql == NULL) {
            jr_fail(err, JR_ENOMEM, "postgres: %s: out of memory", what);
            return NULL;
        }
        res = PQprepare(b->conn, stmts[s].name, sql, stmts[s].nparams,
                        NULL);
        free(sql);
        if (PQresultStatus(res) != PGRES_COMMAND_OK) {
            db_fail(b, res, what, err);
            PQclear(res);
            return NULL;
        }
        PQclear(res);
        b->prepared |= 1ull << s;
    }
    assert(lens == NULL || stmts[s].nparams <= 16);
    res = PQexecPrepared(b->conn, stmts[s].name, stmts[s].nparams, params,
                         lens, lens != NULL ? binary : NULL, 0);
    st = PQresultStatus(res);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
        db_fail(b, res, what, err);
        PQclear(res);
        return NULL;
    }
    return res;
}

/* run_params with text parameters. */
static PGresult *
run(jr_backend *b, int s, const char *const *params, const char *what,
    jr_err *err)
{
    return run_params(b, s, params, NULL, what, err);
}

/* Runs a statement for its row count; -1 with err set on failure. */
static int
run_count(jr_backend *b, int s, const char *const *params, const char *what,
          jr_err *err)
{
    PGresult *res = run(b, s, params, what, err);
    int n;

    if (res == NULL)
        return -1;
    n = atoi(PQcmdTuples(res));
    PQclear(res);
    return n;
}

static int
schema_check(const char *s, jr_err *err)
{
    size_t n;

    for (n = 0; s[n]; n++) {
        unsigned char c = (unsigned char)s[n];
        if (!(c == '_' || (c >= 'a' && c <= 'z') ||
              (n > 0 && c >= '0' && c <= '9')))
            break;
    }
    if (n == 0 || s[n] != '\0' || n > 63)
        return jr_fail(err, JR_EINPUT, "invalid PostgreSQL schema name "
                       "'%.80s': must match ^[a-z_][a-z0-9_]{0,62}$", s);
    if (strncmp(s, "pg_", 3) == 0)
        return jr_fail(err, JR_EINPUT, "invalid PostgreSQL schema name "
                       "'%s': the prefix pg_ is reserved for system "
                       "schemas", s);
    return 0;
}

/* Opens a connection to b->url; NULL with err set on failure. */
static PGconn *
connect_db(jr_backend *b, jr_err *err)
{
    static const char *const keys[] = {"dbname", "fallback_application_name",
                                       NULL};
    const char *vals[] = {b->url, "jobrunner", NULL};
    PGconn *conn = PQconnectdbParams(keys, vals, 1);
    char msg[300];

    if (conn == NULL) {
        jr_fail(err, JR_ENOMEM, "cannot connect to PostgreSQL at '%s': out "
                "of memory", b->masked);
        return NULL;
    }
    PQsetNoticeProcessor(conn, quiet, NULL);
    if (PQstatus(conn) != CONNECTION_OK) {
        oneline(msg, sizeof msg, PQerrorMessage(conn));
        jr_fail(err, JR_EDB, "cannot connect to PostgreSQL at '%s': %s",
                b->masked, msg);
        PQfinish(conn);
        return NULL;
    }
    if (session_timeouts(b, conn, err) < 0) {
        PQfinish(conn);
        return NULL;
    }
    session_setup(b, conn);
    return conn;
}

static void
pg_close(jr_backend *b)
{
    if (b == NULL)
        return;
    PQclear(b->lim_top);
    PQfinish(b->listen);
    PQfinish(b->conn);
    free(b->url);
    free(b);
}

static jr_backend *
pg_open(const char *url, const jr_backend_opts *o, jr_err *err)
{
    const char *schema = o && o->schema ? o->schema : "jobrunner";
    jr_backend *b;

    if (schema_check(schema, err) < 0)
        return NULL;
    if ((b = calloc(1, sizeof *b)) == NULL ||
        (b->url = strdup(url)) == NULL) {
        free(b);
        jr_fail(err, JR_ENOMEM, "cannot open PostgreSQL: out of memory");
        return NULL;
    }
    if (jr_url_mask(url, b->masked, sizeof b->masked) < 0) {
        /* never handed to libpq, whose errors would quote pieces of it */
        jr_fail(err, JR_EUSAGE, "cannot connect to PostgreSQL: %s",
                b->masked);
        pg_close(b);
        return NULL;
    }
    snprintf(b->schema, sizeof b->schema, "%s", schema);
    snprintf(b->qschema, sizeof b->qschema, "\"%s\"", schema);
    snprintf(b->channel, sizeof b->channel, "%s_jobs", schema);
    b->channel[63] = '\0';     /* left(schema || '_jobs', 63) in SQL */
    b->max_payload = o ? o->max_payload : 0;
    b->must_exist = o ? o->must_exist : 0;
    b->async_commit = o ? o->async_commit : 0;
    b->claims = o ? o->claims : 0;
    b->own_timeouts = o ? o->own_timeouts : 0;
    b->keep_completed = o ? o->keep_completed : 0;
    if ((b->conn = connect_db(b, err)) == NULL) {
        pg_close(b);
        return NULL;
    }
    b->set_up = 1;
    return b;
}

/* ---- migrations ---- */

typedef struct block {
    int         version;
    const char *sql;            /* into jr_postgres_sql, not terminated */
    size_t      len;
} block;

/* Splits jr_postgres_sql at its "-- migration N" lines. Returns how many
 * blocks, or -1 if their numbers do not increase (a bug); gaps are fine
 * (a block applies when its number is above the schema's version). */
static int
split_migrations(block *out, int max, jr_err *err)
{
    static const char mark[] = "-- migration ";
    const char *p = jr_postgres_sql;
    int n = 0;

    while (*p) {
        const char *eol = strchr(p, '\n');
        const char *next = eol ? eol + 1 : p + strlen(p);
        if (strncmp(p, mark, strlen(mark)) == 0) {
            int v = atoi(p + strlen(mark));
            if (n == max || v <= (n > 0 ? out[n - 1].version : 0))
                return jr_fail(err, JR_EDB, "postgres.sql: migration "
                               "'%.20s' is out of sequence (after %d)",
                               p + strlen(mark), n > 0 ? out[n - 1].version :
                               0);
            out[n].version = v;
            out[n].sql = next;
            n++;
        } else if (n > 0) {
            out[n - 1].len = (size_t)(next - out[n - 1].sql);
        }
        p = next;
    }
    return n;
}

/* The version recorded in the schema, 0 if it has no migrations table,
 * or -1 with err set. */
static int
schema_version(jr_backend *b, jr_err *err)
{
    char table[96], *sql;
    const char *params[1] = {table};
    PGresult *res;
    int v = 0;

    snprintf(table, sizeof table, "%s.migrations", b->qschema);
    res = PQexecParams(b->conn, "SELECT to_regclass($1::text) IS NOT NULL",
                       1, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        db_fail(b, res, "reading the schema version", err);
        PQclear(res);
        return -1;
    }
    if (strcmp(PQgetvalue(res, 0, 0), "t") != 0) {
        PQclear(res);
        return 0;
    }
    PQclear(res);
    sql = expand(b, "SELECT coalesce(max(version), 0) FROM "
                 "{{schema}}.migrations");
    if (sql == NULL)
        return jr_fail(err, JR_ENOMEM, "postgres: migrate: out of memory");
    res = PQexec(b->conn, sql);
    free(sql);
    if (PQresultStatus(res) != PGRES_TUPLES_OK)
        v = db_fail(b, res, "reading the schema version", err);
    else
        v = atoi(PQgetvalue(res, 0, 0));
    PQclear(res);
    return v;
}

/* Runs migration blk and records it; inside the migrate transaction. */
static int
apply(jr_backend *b, const block *blk, jr_err *err)
{
    char what[112], ver[16], *sql;
    const char *params[1] = {ver};
    PGresult *res;
    int rc;

    snprintf(what, sizeof what, "schema '%s' migration %d", b->schema,
             blk->version);
    if ((sql = expand_n(b, blk->sql, blk->len)) == NULL)
        return jr_fail(err, JR_ENOMEM, "postgres: %s: out of memory", what);
    rc = run_plain(b, sql, what, err);
    free(sql);
    if (rc < 0)
        return -1;
    if ((sql = expand(b, "INSERT INTO {{schema}}.migrations (version) "
                      "VALUES ($1::int)")) == NULL)
        return jr_fail(err, JR_ENOMEM, "postgres: %s: out of memory", what);
    snprintf(ver, sizeof ver, "%d", blk->version);
    res = PQexecParams(b->conn, sql, 1, NULL, params, NULL, NULL, 0);
    free(sql);
    rc = PQresultStatus(res) == PGRES_COMMAND_OK ? 0
         : db_fail(b, res, what, err);
    PQclear(res);
    return rc;
}

/* Fills err if row 0 of res (schema_create's query) says this role may
 * not create what a migration does; 1 if the schema is missing, else 0. */
static int
create_rights(const jr_backend *b, const PGresult *res, jr_err *err)
{
    const char *role = PQgetvalue(res, 0, 3), *db = PQgetvalue(res, 0, 4);

    if (*PQgetvalue(res, 0, 0) == 't')
        return *PQgetvalue(res, 0, 1) == 't' ? 0 :
            jr_fail(err, JR_EDB, "postgres: migrate: role '%s' may not "
                    "create objects in schema '%s': it needs CREATE on the "
                    "schema (GRANT CREATE ON SCHEMA %s TO %s, or make the "
                    "role its owner)", role, b->schema, b->schema, role);
    if (*PQgetvalue(res, 0, 2) != 't')
        return jr_fail(err, JR_EDB, "postgres: migrate: schema '%s' does "
                       "not exist and role '%s' may not create it: it needs "
                       "CREATE on database '%s' (GRANT CREATE ON DATABASE %s "
                       "TO %s), or an owner creates the schema for it "
                       "(CREATE SCHEMA %s AUTHORIZATION %s)", b->schema, role,
                       db, db, role, b->schema, role);
    return 1;
}

/* Makes sure the schema exists and this role may create in it. CREATE
 * SCHEMA IF NOT EXISTS wants CREATE on the database even when the schema
 * exists, which a role given its schema by an owner (CREATE SCHEMA ...
 * AUTHORIZATION runner) lacks: so it runs only for a missing schema, and a
 * missing privilege is named with what grants it. */
static int
schema_create(jr_backend *b, jr_err *err)
{
    const char *params[1] = {b->schema};
    PGresult *res;
    char *sql;
    int rc;

    res = PQexecParams(b->conn, "SELECT n.oid IS NOT NULL,"
        " coalesce(has_schema_privilege(n.oid, 'CREATE'), false),"
        " has_database_privilege(current_database(), 'CREATE'),"
        " current_user, current_database()"
        " FROM (SELECT 1) x LEFT JOIN pg_namespace n ON n.nspname = $1::text",
        1, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
        rc = db_fail(b, res, "migrate: looking for the schema", err);
    else
        rc = create_rights(b, res, err);
    PQclear(res);
    if (rc <= 0)
        return rc;
    if ((sql = expand(b, "CREATE SCHEMA IF NOT EXISTS {{schema}}")) == NULL)
        return jr_fail(err, JR_ENOMEM, "postgres: migrate: out of memory");
    rc = run_plain(b, sql, "migrate: creating the schema", err);
    free(sql);
    return rc;
}

/* Under the advisory lock: creates the schema and migrations table, then
 * applies what is missing. */
static int
migrate_locked(jr_backend *b, const block *blk, int nblk, jr_err *err)
{
    char key[96], *sql;
    const char *params[1] = {key};
    PGresult *res;
    int v, i, rc;

    snprintf(key, sizeof key, "jobrunner.migrate.%s", b->schema);
    res = PQexecParams(b->conn, "SELECT pg_advisory_xact_lock("
                       "hashtext($1::text))", 1, NULL, params, NULL, NULL, 0);
    rc = PQresultStatus(res) == PGRES_TUPLES_OK ? 0
         : db_fail(b, res, "migrate: taking the migration lock", err);
    PQclear(res);
    if (rc < 0)
        return -1;
    if (schema_create(b, err) < 0)
        return -1;
    sql = expand(b, "CREATE TABLE IF NOT EXISTS {{schema}}.migrations ("
                 "version int PRIMARY KEY, "
                 "applied_at timestamptz NOT NULL DEFAULT now())");
    if (sql == NULL)
        return jr_fail(err, JR_ENOMEM, "postgres: migrate: out of memory");
    rc = run_plain(b, sql, "migrate: creating the migrations table", err);
    free(sql);
    if (rc < 0 || (v = schema_version(b, err)) < 0)
        return -1;
    for (i = 0; i < nblk; i++)
        if (blk[i].version > v && apply(b, &blk[i], err) < 0)
            return -1;
    return 0;
}

static int
pg_migrate(jr_backend *b, jr_err *err)
{
    block blk[MAX_MIGRATIONS];
    int nblk, v, last;

    if ((nblk = split_migrations(blk, MAX_MIGRATIONS, err)) < 0 ||
        ready(b, err) < 0 || (v = schema_version(b, err)) < 0)
        return -1;
    last = nblk > 0 ? blk[nblk - 1].version : 0;
    if (v > last)
        return jr_fail(err, JR_EDB, "postgres: schema '%s' is at version %d "
                       "but this jobrunner knows only %d: upgrade jobrunner",
                       b->schema, v, last);
    if (v == last)              /* up to date: no lock, no CREATE needed */
        return 0;
    if (v == 0 && b->must_exist)
        return jr_fail(err, JR_ENOTFOUND, "postgres: the database does not "
                       "exist (schema '%s' has no jobrunner tables; 'jobrunner "
                       "migrate' creates them)", b->schema);
    if (run_plain(b, "BEGIN", "migrate", err) < 0)
        return -1;
    if (migrate_locked(b, blk, nblk, err) < 0 ||
        run_plain(b, "COMMIT", "migrate: commit", err) < 0) {
        rollback(b);
        return -1;
    }
    return 0;
}

/* ---- push ---- */

static int
cmp_id(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

#define PUSH_ARRAYS 11

/* Binary array parameters, in array_recv's format: a header (dimensions,
 * flags, element type, length, lower bound), then each element as its
 * length (-1: NULL) and its bytes, integers in network order. The server
 * takes them without parsing text arrays (quotes, escapes, numbers). */
#define OID_INT4 23
#define OID_TEXT 25
#define OID_FLOAT8 701
#define BA_HEADER 20

static void
ba_u32(jr_buf *a, uint32_t v)
{
    unsigned char x[4] = {v >> 24, v >> 16 & 0xff, v >> 8 & 0xff, v & 0xff};
    jr_buf_put(a, x, 4);
}

/* Appends a text element; str NULL is an SQL NULL. */
static void
ba_text(jr_buf *a, const char *str)
{
    size_t n = str != NULL ? strlen(str) : 0;

    ba_u32(a, str != NULL ? (uint32_t)n : UINT32_MAX);
    jr_buf_put(a, str, n);
}

static void
ba_int(jr_buf *a, int v)
{
    ba_u32(a, 4);
    ba_u32(a, (uint32_t)v);
}

static void
ba_null(jr_buf *a)
{
    ba_u32(a, UINT32_MAX);
}

static void
ba_float8(jr_buf *a, double v)
{
    uint64_t u;

    memcpy(&u, &v, sizeof u);
    ba_u32(a, 8);
    ba_u32(a, (uint32_t)(u >> 32));
    ba_u32(a, (uint32_t)u);
}

/* Writes the header of an array of n elements of type elem over the
 * BA_HEADER bytes reserved at its start. */
static void
ba_finish(jr_buf *a, uint32_t elem, int n)
{
    uint32_t h[5] = {1, 0, elem, (uint32_t)n, 1};
    unsigned char *p = (unsigned char *)a->p;
    int i;

    if (a->oom)
        return;
    for (i = 0; i < 5; i++) {
        p[4 * i] = (unsigned char)(h[i] >> 24);
        p[4 * i + 1] = (unsigned char)(h[i] >> 16);
        p[4 * i + 2] = (unsigned char)(h[i] >> 8);
        p[4 * i + 3] = (unsigned char)h[i];
    }
}

/* The element types of push_arrays' arrays, in order. */
static const uint32_t push_types[PUSH_ARRAYS] = {
    OID_TEXT, OID_TEXT, OID_TEXT, OID_INT4, OID_INT4, OID_FLOAT8,
    OID_FLOAT8, OID_TEXT, OID_TEXT, OID_FLOAT8, OID_TEXT};

/* Checks pp[0..n) and builds the binary array parameters of S_PUSH (the
 * first eight: the job and its limit key) and S_PUSH_UNIQUE (all eleven:
 * and its unique options) into a[]; -1 with err set on bad input or no
 * memory. */
static int
push_arrays(jr_backend *b, const jr_push *const *pp, int n, jr_buf *a,
            jr_err *err)
{
    static const char zero[BA_HEADER];
    int i;

    for (i = 0; i < PUSH_ARRAYS; i++)
        jr_buf_put(&a[i], zero, BA_HEADER);
    for (i = 0; i < n; i++) {
        const jr_push *p = pp[i];
        if (jr_push_check(p, b->max_payload, err) < 0)
            return -1;
        ba_text(&a[0], p->name);
        ba_text(&a[1], p->payload ? p->payload : "{}");
        ba_text(&a[2], p->queue ? p->queue : "default");
        ba_int(&a[3], p->priority);
        if (p->max_retries < 0)
            ba_null(&a[4]);
        else
            ba_int(&a[4], p->max_retries);
        if (p->run_at != 0)
            ba_float8(&a[5], p->run_at);
        else
            ba_null(&a[5]);
        ba_float8(&a[6], p->run_in);
        ba_text(&a[7], p->key);
        ba_text(&a[8], p->unique_key);
        ba_float8(&a[9], p->unique_for);
        ba_text(&a[10], p->on_conflict == JR_CONFLICT_REPLACE ? "replace" :
                "keep");
    }
    for (i = 0; i < PUSH_ARRAYS; i++) {
        if (a[i].oom || a[i].len > INT32_MAX)
            return jr_fail(err, JR_ENOMEM, "postgres: pushing %d jobs: out "
                           "of memory", n);
        ba_finish(&a[i], push_types[i], n);
    }
    return 0;
}

/* insert_jobs for a batch where some push has a unique key: one
 * statement, each row through the SQL function push_unique; ids (may be
 * NULL) and each push's outcome say what became of it. */
static int
push_unique(jr_backend *b, const jr_push *const *pp, int n, int64_t *ids,
            const char *const *params, const int *lens, const char *what,
            jr_err *err)
{
    PGresult *res;
    int i;

    res = run_params(b, S_PUSH_UNIQUE, params, lens, what, err);
    if (res == NULL) {
        b->insert_failed = 1;
        return -1;
    }
    if (PQntuples(res) != n) {
        i = PQntuples(res);
        PQclear(res);
        return jr_fail(err, JR_EDB, "postgres: %s: %d ids came back", what,
                       i);
    }
    for (i = 0; i < n; i++) {
        int k = atoi(PQgetvalue(res, i, 0)) - 1;
        const char *o = PQgetvalue(res, i, 2);
        if (k < 0 || k >= n)
            continue;
        if (ids != NULL)
            ids[k] = strtoll(PQgetvalue(res, i, 1), NULL, 10);
        if (pp[k]->outcome != NULL)
            *pp[k]->outcome = strcmp(o, "new") == 0 ? JR_PUSH_NEW :
                              strcmp(o, "replaced") == 0 ?
                              JR_PUSH_REPLACED : JR_PUSH_DUPLICATE;
    }
    PQclear(res);
    return 0;
}

/* Inserts pp[0..n) with one statement; ids (may be NULL) gets their ids in
 * order. On a database error, b->sqlstate and b->pgmsg say why. */
static int
insert_jobs(jr_backend *b, const jr_push *const *pp, int n, int64_t *ids,
            jr_err *err)
{
    jr_buf a[PUSH_ARRAYS];
    const char *params[PUSH_ARRAYS];
    int lens[PUSH_ARRAYS];
    PGresult *res = NULL;
    char what[64];
    int i, got, rc = -1, unique = 0;

    memset(a, 0, sizeof a);
    b->insert_failed = 0;
    if (push_arrays(b, pp, n, a, err) < 0)
        goto out;
    for (i = 0; i < PUSH_ARRAYS; i++) {
        params[i] = a[i].p;
        lens[i] = (int)a[i].len;
    }
    for (i = 0; i < n && !unique; i++)
        unique = pp[i]->unique_key != NULL;
    snprintf(what, sizeof what, "pushing %d job%s", n, n == 1 ? "" : "s");
    if (unique) {
        rc = push_unique(b, pp, n, ids, params, lens, what, err);
        goto out;
    }
    /* ids only when asked: 1000 rows back cost the server and us */
    res = run_params(b, ids != NULL ? S_PUSH : S_PUSH_NOIDS, params, lens,
                     what, err);
    if (res == NULL) {
        b->insert_failed = 1;
        goto out;
    }
    got = ids != NULL ? PQntuples(res) : atoi(PQcmdTuples(res));
    if (got != n) {
        jr_fail(err, JR_EDB, "postgres: %s: %d %s came back", what, got,
                ids != NULL ? "ids" : "rows");
        goto out;
    }
    for (i = 0; i < n; i++)
        if (pp[i]->outcome != NULL)
            *pp[i]->outcome = JR_PUSH_NEW;
    if (ids != NULL) {
        /* ids are increasing in insertion order, which is pp's order */
        for (i = 0; i < n; i++)
            ids[i] = strtoll(PQgetvalue(res, i, 0), NULL, 10);
        qsort(ids, (size_t)n, sizeof *ids, cmp_id);
    }
    rc = 0;
out:
    PQclear(res);
    for (i = 0; i < PUSH_ARRAYS; i++)
        free(a[i].p);
    return rc;
}

/* One plain job (no unique key) through S_PUSH_ONE. */
static int
insert_one(jr_backend *b, const jr_push *p, int64_t *ids, jr_err *err)
{
    char prio[16], retries[16], at[32], in[32];
    const char *params[8];
    PGresult *res;

    b->insert_failed = 0;
    if (jr_push_check(p, b->max_payload, err) < 0)
        return -1;
    snprintf(prio, sizeof prio, "%d", p->priority);
    snprintf(retries, sizeof retries, "%d", p->max_retries);
    snprintf(at, sizeof at, "%.17g", p->run_at);
    snprintf(in, sizeof in, "%.17g", p->run_in);
    params[0] = p->name;
    params[1] = p->payload ? p->payload : "{}";
    params[2] = p->queue ? p->queue : "default";
    params[3] = prio;
    params[4] = p->max_retries < 0 ? NULL : retries;
    params[5] = p->run_at != 0 ? at : NULL;
    params[6] = in;
    params[7] = p->key;
    if ((res = run(b, S_PUSH_ONE, params, "pushing 1 job", err)) == NULL) {
        b->insert_failed = 1;
        return -1;
    }
    if (PQntuples(res) != 1) {
        PQclear(res);
        return jr_fail(err, JR_EDB, "postgres: pushing 1 job: no id came "
                       "back");
    }
    if (p->outcome != NULL)
        *p->outcome = JR_PUSH_NEW;
    if (ids != NULL)
        ids[0] = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    return 0;
}

/* After insert_jobs failed with a data error and the transaction ended:
 * finds the first job whose payload the database refuses and names it. */
static void
explain_push_error(jr_backend *b, const jr_push *const *pp, int n,
                   jr_err *err)
{
    char pgmsg[sizeof b->pgmsg];
    const char *params[1];
    jr_buf s = {0};
    PGresult *res;
    jr_err ignored;
    int i;

    if (!b->insert_failed || strncmp(b->sqlstate, "22", 2) != 0 ||
        PQstatus(b->conn) != CONNECTION_OK)
        return;
    memcpy(pgmsg, b->pgmsg, sizeof pgmsg);
    for (i = 0; i < n; i++)
        sb_elem(&s, pp[i]->payload ? pp[i]->payload : "{}");
    params[0] = sb_array(&s);
    if (s.oom) {
        free(s.p);
        return;
    }
    res = run(b, S_PAYLOAD_ERROR, params, "checking payloads", &ignored);
    free(s.p);
    if (res != NULL && PQntuples(res) == 1) {
        i = atoi(PQgetvalue(res, 0, 0)) - 1;
        if (i >= 0 && i < n)
            jr_fail(err, JR_EINPUT, "job '%s': invalid JSON payload: %s",
                    pp[i]->name, pgmsg);
    } else if (n == 1) {
        jr_fail(err, JR_EINPUT, "job '%s': %s", pp[0]->name, pgmsg);
    }
    PQclear(res);
}

/* ---- push by COPY ---- */

/* A batch whose jobs are plain (no unique key), due now (no run_at or
 * run_in) and whose ids are not asked goes in by COPY: no unnest, and the
 * heap takes its rows a page at a time (README "Batch push"). The table's
 * CHECKs, its statement triggers (NOTIFY, queues) and defaults apply as
 * to any insert. One simple query lists the names with a limit path and
 * starts the COPY, in one transaction; if a job of the batch needs
 * limit_key_of, the COPY ends with no rows (an error would be logged by
 * the server) and the batch goes by insert_jobs, as do the next
 * COPY_SKIP. One job goes by S_PUSH_ONE, a round trip less. */
#define COPY_PATHS 200          /* COPY_SQL's LIMIT: more names, INSERT */
#define COPY_SKIP 100           /* batches by INSERT after a path hit */
#define COPY_SQL \
    "SELECT name FROM {{schema}}.limit_paths LIMIT 200;" \
    " COPY {{schema}}.jobs (name, payload, queue, priority, max_retries," \
    " limit_key) FROM STDIN (FORMAT binary)"

static int
copy_eligible(const jr_push *const *pp, int n, const int64_t *ids)
{
    int i;

    if (ids != NULL)
        return 0;
    for (i = 0; i < n; i++)
        if (pp[i]->unique_key != NULL || pp[i]->run_at != 0 ||
            pp[i]->run_in != 0)
            return 0;
    return 1;
}

/* Appends the COPY binary header, or one row of pp, or the trailer. */
static void
copy_header(jr_buf *d)
{
    static const char sig[11] = "PGCOPY\n\377\r\n";

    jr_buf_put(d, sig, sizeof sig);
    ba_u32(d, 0);                           /* flags */
    ba_u32(d, 0);                           /* header extension */
}

static void
copy_row(jr_buf *d, const jr_push *p)
{
    static const unsigned char fields[2] = {0, 6};
    const char *payload = p->payload ? p->payload : "{}";
    size_t n = strlen(payload);

    jr_buf_put(d, fields, 2);
    ba_text(d, p->name);
    ba_u32(d, (uint32_t)n + 1);             /* jsonb: version 1, text */
    jr_buf_put(d, "\1", 1);
    jr_buf_put(d, payload, n);
    ba_text(d, p->queue ? p->queue : "default");
    ba_int(d, p->priority);
    if (p->max_retries < 0)
        ba_null(d);
    else
        ba_int(d, p->max_retries);
    ba_text(d, p->key);
}

/* 1 if a job of pp without a key has a name in paths (limit_key_of would
 * give it one), or if paths may not list them all. */
static int
copy_needs_key(const PGresult *paths, const jr_push *const *pp, int n)
{
    int i, k, np = PQntuples(paths);

    if (np >= COPY_PATHS)
        return 1;
    for (i = 0; np > 0 && i < n; i++)
        for (k = 0; pp[i]->key == NULL && k < np; k++)
            if (strcmp(pp[i]->name, PQgetvalue(paths, k, 0)) == 0)
                return 1;
    return 0;
}

/* Reads the results of the query COPY_SQL until the COPY starts; *paths
 * gets the SELECT's (caller PQclears). -1 with err set on failure. */
static int
copy_start(jr_backend *b, PGresult **paths, const char *what, jr_err *err)
{
    PGresult *res;
    int rc = 0;

    *paths = NULL;
    while ((res = PQgetResult(b->conn)) != NULL) {
        ExecStatusType st = PQresultStatus(res);
        if (st == PGRES_COPY_IN) {
            PQclear(res);
            return rc;
        }
        if (st == PGRES_TUPLES_OK && *paths == NULL && rc == 0) {
            *paths = res;
            continue;
        }
        if (rc == 0)
            rc = db_fail(b, res, what, err);
        PQclear(res);
    }
    return rc < 0 ? rc : jr_fail(err, JR_EDB, "postgres: %s: the COPY did "
                                 "not start", what);
}

/* Sends the COPY's data (len bytes at data) and ends it; reads its
 * result: 0 if n rows went in, else -1 with err set. */
static int
copy_end(jr_backend *b, const char *data, size_t len, int n,
         const char *what, jr_err *err)
{
    PGresult *res;
    int rc = 0;

    if (PQputCopyData(b->conn, data, (int)len) != 1 ||
        PQputCopyEnd(b->conn, NULL) != 1)
        rc = db_fail(b, NULL, what, err);
    while ((res = PQgetResult(b->conn)) != NULL) {
        if (rc == 0) {
            if (PQresultStatus(res) != PGRES_COMMAND_OK) {
                b->insert_failed = 1;
                rc = db_fail(b, res, what, err);
            } else if (atoi(PQcmdTuples(res)) != n) {
                rc = jr_fail(err, JR_EDB, "postgres: %s: %s rows went in",
                             what, PQcmdTuples(res));
            }
        }
        PQclear(res);
    }
    return rc;
}

/* Pushes pp[0..n) by COPY if it can: 0 done, 1 not done (push it by
 * insert_jobs; nothing was written), -1 with err set. */
static int
push_copy(jr_backend *b, const jr_push *const *pp, int n,
          const int64_t *ids, jr_err *err)
{
    PGresult *paths = NULL;
    jr_buf d = {0};
    char what[64], *sql;
    int i, rc;

    b->insert_failed = 0;
    if (!copy_eligible(pp, n, ids))
        return 1;
    if (b->copy_skip > 0) {
        b->copy_skip--;
        return 1;
    }
    copy_header(&d);
    for (i = 0; i < n; i++) {
        if (jr_push_check(pp[i], b->max_payload, err) < 0) {
            free(d.p);
            return -1;
        }
        copy_row(&d, pp[i]);
    }
    jr_buf_put(&d, "\377\377", 2);          /* trailer: field count -1 */
    if (d.oom || d.len > INT32_MAX || (sql = expand(b, COPY_SQL)) == NULL) {
        free(d.p);
        return jr_fail(err, JR_ENOMEM, "postgres: pushing %d jobs: out of "
                       "memory", n);
    }
    snprintf(what, sizeof what, "pushing %d job%s", n, n == 1 ? "" : "s");
    rc = PQsendQuery(b->conn, sql) == 1 ? copy_start(b, &paths, what, err) :
         db_fail(b, NULL, what, err);
    free(sql);
    if (rc == 0 && paths != NULL && copy_needs_key(paths, pp, n)) {
        static const char none[] = "PGCOPY\n\377\r\n\0\0\0\0\0\0\0\0\0"
                                   "\377\377";
        b->copy_skip = COPY_SKIP;
        rc = copy_end(b, none, sizeof none - 1, 0, what, err);
        rc = rc < 0 ? rc : 1;
    } else if (rc == 0) {
        rc = copy_end(b, d.p, d.len, n, what, err);
    }
    PQclear(paths);
    free(d.p);
    for (i = 0; rc == 0 && i < n; i++)
        if (pp[i]->outcome != NULL)
            *pp[i]->outcome = JR_PUSH_NEW;
    return rc;
}

static int
pg_push(jr_backend *b, const jr_push *p, int n, int64_t *ids, jr_err *err)
{
    const jr_push **pp;
    int i, rc;

    if (n <= 0)
        return 0;
    if ((pp = malloc((size_t)n * sizeof *pp)) == NULL)
        return jr_fail(err, JR_ENOMEM, "postgres: pushing %d jobs: out of "
                       "memory", n);
    for (i = 0; i < n; i++)
        pp[i] = &p[i];
    /* one statement (or a COPY): atomic without BEGIN/COMMIT round trips;
     * one job by S_PUSH_ONE, a round trip less than the COPY */
    if ((rc = ready(b, err)) == 0) {
        if (n == 1 && p->unique_key == NULL)
            rc = insert_one(b, p, ids, err);
        else if ((rc = push_copy(b, pp, n, ids, err)) == 1)
            rc = insert_jobs(b, pp, n, ids, err);
        if (rc < 0)
            explain_push_error(b, pp, n, err);
    }
    free(pp);
    return rc;
}

/* ---- claim ---- */

static jr_job *
row_job(const PGresult *res, int r)
{
    jr_job *j = jr_job_new(strtoll(PQgetvalue(res, r, 0), NULL, 10),
                           PQgetvalue(res, r, 1), PQgetvalue(res, r, 2),
                           PQgetvalue(res, r, 3),
                           (size_t)PQgetlength(res, r, 3));

    if (j == NULL)
        return NULL;
    j->attempt = atoi(PQgetvalue(res, r, 4));
    j->max_retries = atoi(PQgetvalue(res, r, 5));
    j->priority = atoi(PQgetvalue(res, r, 6));
    j->run_at = strtod(PQgetvalue(res, r, 7), NULL);
    j->created_at = strtod(PQgetvalue(res, r, 8), NULL);
    return j;
}

/* Out of memory after a claim: gives the jobs back (best effort; if this
 * fails too, their leases expire and rescue requeues them). */
static void
unclaim(jr_backend *b, const char *token, const PGresult *res)
{
    const char *params[2];
    jr_buf s = {0};
    int r;

    for (r = 0; r < PQntuples(res); r++)
        sb_num(&s, PQgetvalue(res, r, 0));
    params[0] = token;
    params[1] = sb_array(&s);
    if (!s.oom)
        PQclear(run(b, S_UNCLAIM, params, "unclaim", NULL));
    free(s.p);
}

/* The claim spec's names and queue caps as the array parameters of
 * S_CLAIM, into a[0..3); -1 with err set when out of memory. */
static int
claim_arrays(const jr_claim_spec *spec, jr_buf *a, jr_err *err)
{
    char num[16];
    int i;

    for (i = 0; i < spec->nnames; i++)
        sb_elem(&a[0], spec->names[i]);
    for (i = 0; i < spec->nqueues; i++) {
        sb_elem(&a[1], spec->queues[i].queue);
        snprintf(num, sizeof num, "%d", spec->queues[i].max);
        sb_num(&a[2], num);
    }
    for (i = 0; i < 3; i++)
        if (sb_array(&a[i]), a[i].oom)
            return jr_fail(err, JR_ENOMEM, "postgres: claiming jobs: out "
                           "of memory");
    return 0;
}

/* Puts out[0..n) (row i of res is out[i]) in the fair order the
 * statement ranked them in, 1..n in column 9, which RETURNING does not
 * keep. Out of memory leaves them as they came. */
static void
fair_order(const PGresult *res, jr_job **out, int n)
{
    jr_job **tmp;
    long ord;
    int i;

    if (n < 2 || (tmp = calloc((size_t)n, sizeof *tmp)) == NULL)
        return;
    for (i = 0; i < n; i++) {
        ord = atol(PQgetvalue(res, i, 9));
        if (ord < 1 || ord > n || tmp[ord - 1] != NULL)
            break;              /* not a ranking: keep the order */
        tmp[ord - 1] = out[i];
    }
    if (i == n)
        memcpy(out, tmp, (size_t)n * sizeof *out);
    free(tmp);
}

/* ---- limits per key ---- */

/* Reads the buckets of the (scope, key) pairs in the array literals
 * being built in sk[0], sk[1] into p (no row: a full bucket), then empties
 * them. */
static int
lim_read(jr_backend *b, jr_lpick *p, jr_buf *sk, jr_err *err)
{
    const char *params[2];
    PGresult *res;
    int r, bad = 0;

    if (sk[0].len == 0)
        return 0;
    params[0] = sb_array(&sk[0]);
    params[1] = sb_array(&sk[1]);
    if (sk[0].oom || sk[1].oom)
        return jr_fail(err, JR_ENOMEM, "postgres: out of memory");
    if ((res = run(b, S_LIM_BUCKETS, params, "reading limits", err)) == NULL)
        return -1;
    for (r = 0; r < PQntuples(res); r++)
        bad |= jr_lpick_bucket(p, PQgetvalue(res, r, 0),
                               PQgetvalue(res, r, 1),
                               strtod(PQgetvalue(res, r, 2), NULL),
                               strtod(PQgetvalue(res, r, 3), NULL)) < 0;
    PQclear(res);
    jr_buf_reset(&sk[0]);
    jr_buf_reset(&sk[1]);
    return bad ? jr_fail(err, JR_ENOMEM, "postgres: out of memory") : 0;
}

/* A bucket to read: its scope and key into the arrays at arg. */
static int
lim_need(const char *scope, const char *key, void *arg)
{
    jr_buf *sk = arg;

    sb_elem(&sk[0], scope);
    sb_elem(&sk[1], key);
    return 0;
}

/* Takes the limits' lock and reads the running jobs and the scopes' own
 * buckets into a new pick, at the database's now (the keys' buckets are
 * read as the claim meets their jobs). */
static jr_lpick *
lim_load(jr_backend *b, const jr_claim_spec *spec, jr_err *err)
{
    char lock[128];
    const char *params[1] = {lock};
    jr_buf sk[2];
    PGresult *res;
    jr_lpick *p;
    int r, bad = 0;
    double now;

    snprintf(lock, sizeof lock, "jobrunner.limits:%s", b->schema);
    if ((res = run(b, S_LIM_LOCK, params, "locking limits", err)) == NULL)
        return NULL;
    now = strtod(PQgetvalue(res, 0, 1), NULL);
    PQclear(res);
    if ((p = jr_lpick_new(spec->limits, spec->nlimits, now)) == NULL) {
        jr_fail(err, JR_ENOMEM, "postgres: claiming jobs: out of memory");
        return NULL;
    }
    if ((res = run(b, S_LIM_RUNNING, NULL, "reading limits", err)) == NULL)
        goto fail;
    for (r = 0; r < PQntuples(res); r++)
        bad |= jr_lpick_running(p, PQgetvalue(res, r, 0),
                                PQgetvalue(res, r, 1),
                                PQgetisnull(res, r, 2) ? NULL :
                                PQgetvalue(res, r, 2),
                                atol(PQgetvalue(res, r, 3))) < 0;
    PQclear(res);
    memset(sk, 0, sizeof sk);
    for (r = 0; r < spec->nlimits; r++)
        if (spec->limits[r].all.rate > 0)
            lim_need(spec->limits[r].scope, "", sk);
    if (!bad && lim_read(b, p, sk, err) == 0) {
        jr_buf_free(&sk[0]);
        jr_buf_free(&sk[1]);
        return p;
    }
    jr_buf_free(&sk[0]);
    jr_buf_free(&sk[1]);
fail:
    if (bad)
        jr_fail(err, JR_ENOMEM, "postgres: claiming jobs: out of memory");
    jr_lpick_free(p);
    return NULL;
}

typedef struct lim_arrays {
    jr_buf scope, key, tokens;
    double now;
} lim_arrays;

static int
lim_bucket_elem(const char *scope, const char *key, double tokens,
                double now, void *arg)
{
    lim_arrays *a = arg;
    char num[32];

    sb_elem(&a->scope, scope);
    sb_elem(&a->key, key);
    snprintf(num, sizeof num, "%.17g", tokens);
    sb_num(&a->tokens, num);
    a->now = now;
    return 0;
}

/* Writes back the buckets the claim took from; every 64th claim also
 * forgets buckets that are full again (a missing row is full). */
static int
lim_save(jr_backend *b, const jr_claim_spec *spec, const jr_lpick *p,
         jr_err *err)
{
    lim_arrays a;
    const char *params[4];
    char now[32], rate[32], burst[32];
    PGresult *res = NULL;
    int i, k, rc = 0;

    memset(&a, 0, sizeof a);
    jr_lpick_dirty(p, lim_bucket_elem, &a);
    if (a.scope.len > 0) {
        snprintf(now, sizeof now, "%.17g", a.now);
        params[0] = sb_array(&a.scope);
        params[1] = sb_array(&a.key);
        params[2] = sb_array(&a.tokens);
        params[3] = now;
        if (a.scope.oom || a.key.oom || a.tokens.oom)
            rc = jr_fail(err, JR_ENOMEM, "postgres: out of memory");
        else if ((res = run(b, S_LIM_BUCKET_SET, params, "saving token "
                            "buckets", err)) == NULL)
            rc = -1;
        PQclear(res);
    }
    free(a.scope.p);
    free(a.key.p);
    free(a.tokens.p);
    if (rc < 0 || b->rotate % 64 != 0 || a.scope.len == 0)
        return rc;
    for (i = 0; i < spec->nlimits; i++)
        for (k = 0; k < 2; k++) {
            const jr_limit_set *set = k ? &spec->limits[i].per_key :
                                      &spec->limits[i].all;
            if (set->rate <= 0)
                continue;
            snprintf(rate, sizeof rate, "%.17g", set->rate);
            snprintf(burst, sizeof burst, "%.17g", set->burst);
            params[0] = spec->limits[i].scope;
            params[1] = now;
            params[2] = rate;
            params[3] = burst;
            if ((res = run(b, S_LIM_PRUNE, params, "forgetting full "
                           "buckets", err)) == NULL)
                return -1;
            PQclear(res);
        }
    return 0;
}

/* A new array literal of the elements in b so far (sb_elem, sb_num), b
 * left open for more; NULL when out of memory. */
static char *
lit_copy(const jr_buf *b)
{
    char *s;

    if (b->oom)
        return NULL;
    if (b->len == 0)
        return strdup("{}");
    if ((s = malloc(b->len + 2)) == NULL)
        return NULL;
    memcpy(s, b->p, b->len);
    s[b->len] = '}';
    s[b->len + 1] = '\0';
    return s;
}

/* A scope with a per-key rate into the arrays a[0] (scopes), a[1]
 * (rates). */
static int
lim_rate_elem(const char *scope, double rate, void *arg)
{
    jr_buf *a = arg;
    char num[32];

    snprintf(num, sizeof num, "%.17g", rate);
    sb_elem(&a[0], scope);
    sb_num(&a[1], num);
    return 0;
}

/* One pass's candidates: the fair order of S_CLAIM without what the
 * pick blocks and what earlier passes took (tq/tn). */
static PGresult *
lim_candidates(jr_backend *b, const jr_claim_spec *spec, int max,
               const jr_lpick *p, jr_buf *tq, jr_buf *tn, jr_err *err)
{
    char smax[16], sothers[16], srot[16], snow[32];
    const char *params[14];
    char *bn = jr_lpick_list(p, 'n', 0), *bp = jr_lpick_list(p, 'p', 0);
    char *bq = jr_lpick_list(p, 'q', 0), *tql = NULL, *tnl = NULL;
    jr_buf a[5];
    PGresult *res = NULL;
    int i, ok;

    memset(a, 0, sizeof a);
    jr_lpick_key_rates(p, lim_rate_elem, &a[3]);
    params[11] = sb_array(&a[3]);
    params[12] = sb_array(&a[4]);
    snprintf(snow, sizeof snow, "%.17g", jr_lpick_now(p));
    params[13] = snow;
    ok = bn && bp && bq && !a[3].oom && !a[4].oom;
    if (ok && claim_arrays(spec, a, err) == 0) {
        snprintf(smax, sizeof smax, "%d", max);
        snprintf(sothers, sizeof sothers, "%d", spec->others);
        snprintf(srot, sizeof srot, "%u", b->rotate % 1000000u);
        params[0] = a[0].p;
        params[1] = smax;
        params[2] = a[1].p;
        params[3] = a[2].p;
        params[4] = sothers;
        params[5] = srot;
        params[6] = bn;
        params[7] = bp;
        params[8] = bq;
        params[9] = tql = lit_copy(tq);
        params[10] = tnl = lit_copy(tn);
        if (tql && tnl)
            res = run(b, S_LIM_CANDIDATES, params, "claiming jobs", err);
        else
            jr_fail(err, JR_ENOMEM, "postgres: claiming jobs: out of memory");
    } else if (!ok) {
        jr_fail(err, JR_ENOMEM, "postgres: claiming jobs: out of memory");
    }
    for (i = 0; i < 5; i++)
        free(a[i].p);
    free(bn);
    free(bp);
    free(bq);
    free(tql);
    free(tnl);
    return res;
}

/* Claims ids (a literal) into out[0..), in the order of ids. */
static int
lim_claim_ids(jr_backend *b, const char *token, double lease,
              const char *ids, jr_job **out, jr_err *err)
{
    char slease[32];
    const char *params[3] = {token, slease, ids};
    PGresult *res;
    int i, n;

    snprintf(slease, sizeof slease, "%.17g", lease);
    if ((res = run(b, S_LIM_CLAIM, params, "claiming jobs", err)) == NULL)
        return -1;
    n = PQntuples(res);
    for (i = 0; i < n; i++)
        if ((out[i] = row_job(res, i)) == NULL) {
            while (i-- > 0)
                free(out[i]);
            PQclear(res);
            return jr_fail(err, JR_ENOMEM, "postgres: claiming %d jobs: "
                           "out of memory", n);
        }
    fair_order(res, out, n);
    PQclear(res);
    return n;
}

/* Reads into p the buckets of the keys of a pass's candidates res that
 * were not read yet, in one statement; sk: two arrays to build in. */
static int
lim_read_keys(jr_backend *b, jr_lpick *p, const PGresult *res, jr_buf *sk,
              jr_err *err)
{
    int r, ok = 0;

    for (r = 0; r < PQntuples(res) && ok >= 0; r++)
        ok = jr_lpick_need(p, PQgetvalue(res, r, 1), PQgetvalue(res, r, 2),
                           PQgetisnull(res, r, 3) ? NULL :
                           PQgetvalue(res, r, 3), lim_need, sk);
    if (ok < 0)
        return jr_fail(err, JR_ENOMEM, "postgres: out of memory");
    return lim_read(b, p, sk, err);
}

/* Takes the candidates res the pick lets through, room at most: their
 * ids into ids, their queues into tq with a 1 each in tn (the passes'
 * counts). Returns how many; *rejected counts those refused. */
static int
lim_take_rows(jr_lpick *p, const PGresult *res, int room, jr_buf *ids,
              jr_buf *tq, jr_buf *tn, int *rejected)
{
    int r, ok, k = 0;

    *rejected = 0;
    for (r = 0; r < PQntuples(res) && k < room; r++) {
        ok = jr_lpick_take(p, PQgetvalue(res, r, 1), PQgetvalue(res, r, 2),
                           PQgetisnull(res, r, 3) ? NULL :
                           PQgetvalue(res, r, 3));
        if (ok < 0)
            ids->oom = 1;
        *rejected += ok == 0;
        if (ok <= 0)
            continue;
        sb_num(ids, PQgetvalue(res, r, 0));
        sb_elem(tq, PQgetvalue(res, r, 2));
        sb_num(tn, "1");
        k++;
    }
    return k;
}

/* The claim under limits, in the open transaction: in passes, as
 * sqlite.c's claim_limited. Returns how many jobs it put in out[]. */
static int
claim_limited(jr_backend *b, const char *token, double lease,
              const jr_claim_spec *spec, jr_job **out, jr_err *err)
{
    jr_lpick *p = lim_load(b, spec, err);
    jr_buf tq = {0}, tn = {0}, ids, sk[2] = {{0}, {0}};
    PGresult *res;
    int total = 0, pass, k, n, rejected;

    if (p == NULL)
        return -1;
    b->rotate++;
    for (pass = 0; pass < 4 && total < spec->max; pass++) {
        if ((res = lim_candidates(b, spec, spec->max - total, p, &tq, &tn,
                                  err)) == NULL)
            goto fail;
        if (lim_read_keys(b, p, res, sk, err) < 0) {
            PQclear(res);
            goto fail;
        }
        memset(&ids, 0, sizeof ids);
        k = lim_take_rows(p, res, spec->max - total, &ids, &tq, &tn,
                          &rejected);
        n = PQntuples(res);
        PQclear(res);
        if (ids.oom || tq.oom || tn.oom) {
            free(ids.p);
            jr_fail(err, JR_ENOMEM, "postgres: claiming jobs: out of memory");
            goto fail;
        }
        k = k == 0 ? 0 : lim_claim_ids(b, token, lease, sb_array(&ids),
                                       out + total, err);
        free(ids.p);
        if (k < 0)
            goto fail;
        total += k;
        if (rejected == 0 || n == 0)
            break;
    }
    if (lim_save(b, spec, p, err) < 0)
        goto fail;
    if (spec->limit_next)
        *spec->limit_next = jr_lpick_next(p);
    goto done;
fail:
    while (total > 0)
        free(out[--total]);
    total = -1;
done:
    free(tq.p);
    free(tn.p);
    jr_buf_free(&sk[0]);
    jr_buf_free(&sk[1]);
    jr_lpick_free(p);
    return total;
}

/* S_CLAIM_ONE when the spec allows it (no queue capped or left out):
 * 1 with its result in *res, 0 if S_CLAIM is to run instead, -1 with
 * err set on failure. */
static int
claim_one(jr_backend *b, const jr_claim_spec *spec,
          const char *const *params, PGresult **res, jr_err *err)
{
    int n;

    *res = NULL;
    if (spec->nqueues > 0 || spec->others < spec->max)
        return 0;
    if (b->fair_only > 0) {
        b->fair_only--;
        return 0;
    }
    if ((*res = run(b, S_CLAIM_ONE, params, "claiming jobs", err)) == NULL)
        return -1;
    n = PQntuples(*res);
    if (n > 0 && PQgetisnull(*res, n - 1, 0)) {
        PQclear(*res);          /* several queues: nothing was claimed */
        *res = NULL;
        b->fair_only = 100;
        return 0;
    }
    return 1;
}

/* The claim statement, in whatever transaction is open. */
static int
claim_stmt(jr_backend *b, const char *token, double lease,
           const jr_claim_spec *spec, jr_job **out, jr_err *err)
{
    char slease[32], smax[16], sothers[16], srot[16];
    const char *params[8];
    jr_buf a[3];
    PGresult *res = NULL;
    int i, n, one;

    if (spec->nnames <= 0 || spec->max <= 0)
        return 0;
    if (spec->nlimits > 0)
        return claim_limited(b, token, lease, spec, out, err);
    memset(a, 0, sizeof a);
    if (claim_arrays(spec, a, err) < 0) {
        for (i = 0; i < 3; i++)
            free(a[i].p);
        return -1;
    }
    snprintf(slease, sizeof slease, "%.17g", lease);
    snprintf(smax, sizeof smax, "%d", spec->max);
    snprintf(sothers, sizeof sothers, "%d", spec->others);
    params[0] = token;
    params[1] = slease;
    params[2] = a[0].p;
    params[3] = smax;
    params[4] = a[1].p;
    params[5] = a[2].p;
    params[6] = sothers;
    snprintf(srot, sizeof srot, "%u", b->rotate++ % 1000000u);
    params[7] = srot;           /* the queue that leads the round */
    if ((one = claim_one(b, spec, params, &res, err)) == 0)
        res = run(b, S_CLAIM, params, "claiming jobs", err);
    for (i = 0; i < 3; i++)
        free(a[i].p);
    if (res == NULL)
        return -1;
    n = PQntuples(res);
    for (i = 0; i < n; i++) {
        if ((out[i] = row_job(res, i)) == NULL) {
            while (i-- > 0)
                free(out[i]);
            unclaim(b, token, res);
            PQclear(res);
            return jr_fail(err, JR_ENOMEM, "postgres: claiming %d jobs: "
                           "out of memory", n);
        }
    }
    if (one)
        qsort(out, (size_t)n, sizeof *out, jr_claimed_cmp);
    else
        fair_order(res, out, n);
    PQclear(res);
    return n;
}

static int
pg_claim(jr_backend *b, const char *token, double lease,
         const jr_claim_spec *spec, jr_job **out, jr_err *err)
{
    if (spec->nnames <= 0 || spec->max <= 0)
        return 0;
    if (ready(b, err) < 0)
        return -1;
    if (spec->nlimits > 0) {    /* several statements: one transaction */
        int n = -1;
        if (run_plain(b, "BEGIN", "claiming jobs", err) == 0 &&
            (n = claim_stmt(b, token, lease, spec, out, err)) >= 0 &&
            run_plain(b, "COMMIT", "claiming jobs", err) < 0) {
            while (n > 0)
                free(out[--n]);
            n = -1;
        }
        if (n < 0)
            rollback(b);
        return n;
    }
    return claim_stmt(b, token, lease, spec, out, err);
}

/* ---- complete ---- */

/* Deletes the DONE jobs of r[0..n), or with keep_completed makes them
 * completed; ids of those it matched go to done[0..return), sorted. */
static int
finish_done(jr_backend *b, const char *token, const jr_result *r, int n,
            int64_t *done, jr_err *err)
{
    const char *params[3];
    char num[24];
    jr_buf s = {0}, g = {0};
    PGresult *res;
    int i, m;

    for (i = 0; i < n; i++) {
        if (r[i].kind != JR_DONE)
            continue;
        snprintf(num, sizeof num, "%lld", (long long)r[i].id);
        sb_num(&s, num);
        sb_elem(&g, r[i].generation);
    }
    if (s.len == 0)
        return 0;
    params[0] = token;
    params[1] = sb_array(&s);
    params[2] = sb_array(&g);
    if (s.oom || g.oom) {
        free(s.p);
        free(g.p);
        return jr_fail(err, JR_ENOMEM, "postgres: completing jobs: out of "
                       "memory");
    }
    res = run(b, b->keep_completed > 0 ? S_KEEP : S_DONE, params,
              "completing jobs", err);
    free(s.p);
    free(g.p);
    if (res == NULL)
        return -1;
    m = PQntuples(res);
    for (i = 0; i < m; i++)
        done[i] = strtoll(PQgetvalue(res, i, 0), NULL, 10);
    PQclear(res);
    qsort(done, (size_t)m, sizeof *done, cmp_id);
    return m;
}

/* Records the PROGRESS results of r[0..n). */
static int
finish_progress(jr_backend *b, const char *token, const jr_result *r, int n,
                jr_err *err)
{
    const char *params[5];
    char num[32];
    jr_buf a[4];
    int i, k, rc, superseded = 0;

    memset(a, 0, sizeof a);
    for (i = 0; i < n; i++) {
        if (r[i].kind != JR_PROGRESS)
            continue;
        /* an UPDATE joined to two rows for one job applies either: only
         * the job's last report goes in */
        for (k = i + 1; k < n && !(r[k].kind == JR_PROGRESS &&
                                   r[k].id == r[i].id); k++)
            ;
        if (k < n) {
            superseded++;       /* counted as applied: the later one is */
            continue;
        }
        snprintf(num, sizeof num, "%lld", (long long)r[i].id);
        sb_num(&a[0], num);
        snprintf(num, sizeof num, "%.17g", r[i].done);
        sb_num(&a[1], isfinite(r[i].done) ? num : "NULL");
        snprintf(num, sizeof num, "%.17g", r[i].total);
        sb_num(&a[2], isfinite(r[i].total) ? num : "NULL");
        sb_elem(&a[3], r[i].note);
    }
    if (a[0].len == 0)
        return 0;
    params[0] = token;
    for (k = 0; k < 4; k++)
        params[k + 1] = sb_array(&a[k]);
    rc = a[0].oom || a[1].oom || a[2].oom || a[3].oom
         ? jr_fail(err, JR_ENOMEM, "postgres: recording progress: out of "
                   "memory")
         : run_count(b, S_PROGRESS, params, "recording progress", err);
    for (k = 0; k < 4; k++)
        free(a[k].p);
    return rc < 0 ? rc : rc + superseded;
}

/* Applies the RETRY, DEAD, SNOOZE, RELEASE, EXPIRED and CANCELLED results
 * of r[0..n). */
static int
finish_others(jr_backend *b, const char *token, const jr_result *r, int n,
              jr_err *err)
{
    const char *params[6];
    char num[32];
    jr_buf a[5];
    int i, k, rc;

    memset(a, 0, sizeof a);
    for (i = 0; i < n; i++) {
        if (r[i].kind == JR_DONE || r[i].kind == JR_PROGRESS)
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
    }
    if (a[0].len == 0)
        return 0;
    params[0] = token;
    for (k = 0; k < 5; k++)
        params[k + 1] = sb_array(&a[k]);
    rc = a[0].oom || a[1].oom || a[2].oom || a[3].oom || a[4].oom
         ? jr_fail(err, JR_ENOMEM, "postgres: completing jobs: out of memory")
         : run_count(b, S_FINISH, params, "completing jobs", err);
    for (k = 0; k < 5; k++)
        free(a[k].p);
    return rc;
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
            !bsearch(&r[i].id, done, (size_t)ndone, sizeof *done, cmp_id))
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
        if (r[i].kind < JR_DONE || r[i].kind > JR_PROGRESS)
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
complete_tx(jr_backend *b, const char *token, const jr_result *r, int n,
            int64_t *done, const jr_push ***pp, int *np, jr_err *err)
{
    int ndone, nother, nprogress;

    /* progress first: a job's last report comes in the same batch as its
     * end, and the end fences progress out (the row stops running) */
    if ((nprogress = finish_progress(b, token, r, n, err)) < 0 ||
        (ndone = finish_done(b, token, r, n, done, err)) < 0 ||
        (nother = finish_others(b, token, r, n, err)) < 0)
        return -1;
    if ((*pp = followups(r, n, done, ndone, np)) == NULL)
        return jr_fail(err, JR_ENOMEM, "postgres: completing jobs: out of "
                       "memory");
    if (*np > 0 && insert_jobs(b, *pp, *np, NULL, err) < 0)
        return -1;
    return ndone + nother + nprogress;
}

/* 1 if r[0..n) are all DONE without follow-ups: their one statement
 * needs no transaction around it (a round trip instead of three). */
static int
only_done(const jr_result *r, int n)
{
    int i;

    for (i = 0; i < n; i++)
        if (r[i].kind != JR_DONE || r[i].npushes > 0)
            return 0;
    return 1;
}

static int
pg_complete(jr_backend *b, const char *token, const jr_result *r, int n,
            jr_err *err)
{
    const jr_push **pp = NULL;
    int64_t *done;
    int np = 0, rc;

    if (n <= 0)
        return 0;
    if (check_followups(b, r, n, err) < 0 || ready(b, err) < 0)
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
    if ((rc = run_plain(b, "BEGIN", "completing jobs", err)) == 0) {
        rc = complete_tx(b, token, r, n, done, &pp, &np, err);
        if (rc >= 0 && run_plain(b, "COMMIT", "completing jobs", err) < 0)
            rc = -1;
        if (rc < 0) {
            rollback(b);
            if (np > 0)
                explain_push_error(b, pp, np, err);
        }
    }
    free(pp);
    free(done);
    return rc;
}

/* Records results and claims in one transaction: one commit (one WAL
 * flush) a round instead of two. */
static int
pg_complete_claim(jr_backend *b, const char *token, const jr_result *r,
                  int nr, int *applied, double lease,
                  const jr_claim_spec *spec, jr_job **out, jr_err *err)
{
    const jr_push **pp = NULL;
    int64_t *done;
    int np = 0, rc = -1, n = -1;

    *applied = 0;
    if (check_followups(b, r, nr, err) < 0 || ready(b, err) < 0)
        return -1;
    if ((done = malloc((size_t)(nr > 0 ? nr : 1) * sizeof *done)) == NULL)
        return jr_fail(err, JR_ENOMEM, "postgres: completing %d jobs: out "
                       "of memory", nr);
    b->insert_failed = 0;
    if (run_plain(b, "BEGIN", "completing jobs", err) == 0) {
        rc = nr > 0 ? complete_tx(b, token, r, nr, done, &pp, &np, err) : 0;
        if (rc >= 0)
            n = claim_stmt(b, token, lease, spec, out, err);
        if (n >= 0 && run_plain(b, "COMMIT", "claiming jobs", err) < 0) {
            while (n > 0)
                free(out[--n]);
            n = -1;
        }
        if (n < 0) {
            rollback(b);
            if (rc < 0 && np > 0)
                explain_push_error(b, pp, np, err);
        } else {
            *applied = rc;
        }
    }
    free(pp);
    free(done);
    return n;
}

/* ---- leases, stats, dead jobs ---- */

static int
pg_renew(jr_backend *b, const char *token, double lease, jr_err *err)
{
    char slease[32];
    const char *params[2] = {token, slease};

    snprintf(slease, sizeof slease, "%.17g", lease);
    if (ready(b, err) < 0)
        return -1;
    return run_count(b, S_RENEW, params, "renewing leases", err);
}

static int
pg_rescue(jr_backend *b, jr_err *err)
{
    if (ready(b, err) < 0)
        return -1;
    return run_count(b, S_RESCUE, NULL, "rescuing expired leases", err);
}

static int
pg_stats(jr_backend *b, jr_stat_cb cb, void *arg, jr_err *err)
{
    PGresult *res;
    jr_stat_row row;
    int i;

    if (ready(b, err) < 0 ||
        (res = run(b, S_STATS, NULL, "reading stats", err)) == NULL)
        return -1;
    for (i = 0; i < PQntuples(res); i++) {
        row.name = PQgetvalue(res, i, 0);
        row.ready = atol(PQgetvalue(res, i, 1));
        row.scheduled = atol(PQgetvalue(res, i, 2));
        row.running = atol(PQgetvalue(res, i, 3));
        row.dead = atol(PQgetvalue(res, i, 4));
        if (cb(&row, arg) != 0)
            break;
    }
    PQclear(res);
    return 0;
}

static int
pg_dead_list(jr_backend *b, int limit, jr_dead_cb cb, void *arg,
             jr_err *err)
{
    char slimit[16];
    const char *params[1] = {NULL};     /* NULL: no limit */
    PGresult *res;
    jr_dead_row row;
    int i;

    if (limit > 0) {
        snprintf(slimit, sizeof slimit, "%d", limit);
        params[0] = slimit;
    }
    if (ready(b, err) < 0 ||
        (res = run(b, S_DEAD_LIST, params, "listing dead jobs", err)) == NULL)
        return -1;
    for (i = 0; i < PQntuples(res); i++) {
        row.id = strtoll(PQgetvalue(res, i, 0), NULL, 10);
        row.name = PQgetvalue(res, i, 1);
        row.queue = PQgetvalue(res, i, 2);
        row.attempts = atoi(PQgetvalue(res, i, 3));
        row.last_error = PQgetvalue(res, i, 4);
        row.generation = PQgetisnull(res, i, 5) ? NULL
                         : PQgetvalue(res, i, 5);
        row.died_at = strtod(PQgetvalue(res, i, 6), NULL);
        row.created_at = strtod(PQgetvalue(res, i, 7), NULL);
        if (cb(&row, arg) != 0)
            break;
    }
    PQclear(res);
    return 0;
}

/* Runs a dead retry statement s. Its RETRY_KEY reads the holders of each
 * key in its snapshot; a push of the key in flight meanwhile is not in it,
 * and when it commits the retried row meets it in the unique index. The
 * statement then runs again: a new snapshot sees that holder and the
 * retried job runs as a plain one (README "Unique jobs": a retry never
 * fails on the unique index). Each round lost means another push of one
 * of the keys committed; DEAD_RETRY_ROUNDS bounds them all the same. */
#define DEAD_RETRY_ROUNDS 20

static int
dead_retry_run(jr_backend *b, int s, const char *const *params, jr_err *err)
{
    int round, rc = -1;

    for (round = 0; round < DEAD_RETRY_ROUNDS; round++) {
        rc = run_count(b, s, params, "retrying dead jobs", err);
        if (rc >= 0 || strcmp(b->sqlstate, "23505") != 0 ||
            ready(b, err) < 0)
            break;
    }
    return rc;
}

static int
pg_dead_retry(jr_backend *b, const int64_t *ids, int n, jr_err *err)
{
    const char *params[1];
    char num[24];
    jr_buf s = {0};
    int i, rc;

    if (n == 0)
        return 0;
    if (ready(b, err) < 0)
        return -1;
    if (n < 0)
        return dead_retry_run(b, S_DEAD_RETRY_ALL, NULL, err);
    for (i = 0; i < n; i++) {
        snprintf(num, sizeof num, "%lld", (long long)ids[i]);
        sb_num(&s, num);
    }
    params[0] = sb_array(&s);
    rc = s.oom ? jr_fail(err, JR_ENOMEM, "postgres: retrying dead jobs: "
                         "out of memory")
         : dead_retry_run(b, S_DEAD_RETRY_IDS, params, err);
    free(s.p);
    return rc;
}

static int
pg_dead_delete(jr_backend *b, const int64_t *ids, int n, jr_err *err)
{
    const char *params[1];
    char num[24];
    jr_buf s = {0};
    int i, rc;

    if (n <= 0)
        return 0;
    if (ready(b, err) < 0)
        return -1;
    for (i = 0; i < n; i++) {
        snprintf(num, sizeof num, "%lld", (long long)ids[i]);
        sb_num(&s, num);
    }
    params[0] = sb_array(&s);
    rc = s.oom ? jr_fail(err, JR_ENOMEM, "postgres: deleting dead jobs: "
                         "out of memory")
         : run_count(b, S_DEAD_DELETE_IDS, params, "deleting dead jobs", err);
    free(s.p);
    return rc;
}

static int
pg_dead_purge(jr_backend *b, double older_than, jr_err *err)
{
    char sage[32];
    const char *params[1] = {sage};

    snprintf(sage, sizeof sage, "%.17g", isfinite(older_than) ? older_than
             : 0.0);
    if (ready(b, err) < 0)
        return -1;
    return run_count(b, S_DEAD_PURGE, params, "purging dead jobs", err);
}

/* ---- queues and control ---- */

/* Deletes up to limit rows of one finished state older than age seconds
 * (age < 0: none), in the open transaction. */
static int
prune_state(jr_backend *b, int which, double age, int limit, jr_err *err)
{
    char sage[32], slimit[16];
    const char *params[2] = {sage, slimit};

    if (age < 0 || !isfinite(age) || limit <= 0)
        return 0;
    snprintf(sage, sizeof sage, "%.17g", age);
    snprintf(slimit, sizeof slimit, "%d", limit);
    return run_count(b, which, params, "pruning finished jobs", err);
}

/* The prune transaction's body: 0 when another runner holds the prune
 * lock. */
static int
prune_tx(jr_backend *b, const double *age, int limit, jr_err *err)
{
    static const int which[4] = {S_PRUNE_COMPLETED, S_PRUNE_CANCELLED,
                                 S_PRUNE_DEAD, S_PRUNE_UNIQUE};
    char key[96];
    const char *params[1] = {key};
    PGresult *res;
    int n = 0, rc, i, locked;

    snprintf(key, sizeof key, "jobrunner.prune.%s", b->schema);
    if ((res = run(b, S_PRUNE_LOCK, params, "pruning finished jobs",
                   err)) == NULL)
        return -1;
    locked = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    for (i = 0; i < 4 && locked; i++) {
        /* the windows of unique keys end at held_until: age 0 */
        if ((rc = prune_state(b, which[i], i < 3 ? age[i] : 0, limit - n,
                              err)) < 0)
            return -1;
        n += rc;
    }
    return n;
}

static int
pg_prune(jr_backend *b, double older_completed, double older_cancelled,
         double older_dead, int limit, jr_err *err)
{
    const double age[3] = {older_completed, older_cancelled, older_dead};
    int n;

    if (limit <= 0)
        return 0;
    if (ready(b, err) < 0 ||
        run_plain(b, "BEGIN", "pruning finished jobs", err) < 0)
        return -1;
    if ((n = prune_tx(b, age, limit, err)) < 0 ||
        run_plain(b, "COMMIT", "pruning finished jobs", err) < 0) {
        rollback(b);
        return -1;
    }
    return n;
}

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
    if ((res = run(b, S_PRUNE_LOCK, lock, "pruning idle queues", err)) ==
        NULL)
        return -1;
    n = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    if (!n || (res = run(b, S_QUEUE_IDLE, params, "pruning idle queues",
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
    else if (n > 0 && run_plain(b, sql, "pruning idle queues", err) < 0)
        n = -1;
    else if (n > 0)
        n = run_count(b, S_QUEUE_PRUNE, del, "pruning idle queues", err);
    jr_buf_free(&names);
    /* a lock not had in 200 ms (jobs, or a queue row being paused) is for
     * a later round, not an error */
    return n < 0 && strcmp(b->sqlstate, "55P03") == 0 ? 0 : n;
}

static int
pg_queue_prune(jr_backend *b, double idle, const char *const *keep,
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
    if (ready(b, err) < 0 ||
        run_plain(b, "BEGIN", "pruning idle queues", err) < 0) {
        jr_buf_free(&kept);
        return -1;
    }
    n = queue_prune_tx(b, params, err);
    jr_buf_free(&kept);
    if (n > 0 && run_plain(b, "COMMIT", "pruning idle queues", err) < 0)
        n = -1;
    rollback(b);                /* nothing deleted, or it failed */
    return n;
}

/* Deleted and claimed jobs leave their entries in jobs_claim until a
 * vacuum, and each claim walks past them from the index's start: between
 * two autovacuums (a minute apart by default) a fast drain slows several
 * times over. SKIP_LOCKED: another runner's vacuum, or autovacuum, is
 * as good. */
static int
pg_vacuum(jr_backend *b, jr_err *err)
{
    char sql[128];

    snprintf(sql, sizeof sql, "VACUUM (ANALYZE, SKIP_LOCKED) %s.jobs",
             b->qschema);
    if (ready(b, err) < 0)
        return -1;
    return run_plain(b, sql, "vacuuming the jobs table", err);
}

/* The JR_CANCEL_* value of jobrunner.cancel()'s text. */
static int
cancel_outcome(const char *text)
{
    if (strcmp(text, "cancelled") == 0)
        return JR_CANCEL_DONE;
    if (strcmp(text, "cancel requested") == 0)
        return JR_CANCEL_REQUESTED;
    if (strcmp(text, "already finished") == 0)
        return JR_CANCEL_FINISHED;
    return JR_CANCEL_NOTFOUND;
}

static int
pg_cancel(jr_backend *b, const int64_t *ids, int n, int *outcome,
          jr_err *err)
{
    const char *params[1];
    char num[24];
    jr_buf s = {0};
    PGresult *res;
    int i, k;

    if (n <= 0)
        return 0;
    if (ready(b, err) < 0)
        return -1;
    for (i = 0; i < n; i++) {
        snprintf(num, sizeof num, "%lld", (long long)ids[i]);
        sb_num(&s, num);
    }
    params[0] = sb_array(&s);
    if (s.oom) {
        free(s.p);
        return jr_fail(err, JR_ENOMEM, "postgres: cancelling jobs: out of "
                       "memory");
    }
    res = run(b, S_CANCEL, params, "cancelling jobs", err);
    free(s.p);
    if (res == NULL)
        return -1;
    for (i = 0; i < n; i++)
        outcome[i] = JR_CANCEL_NOTFOUND;
    for (i = 0; i < PQntuples(res); i++) {
        k = atoi(PQgetvalue(res, i, 0)) - 1;
        if (k >= 0 && k < n)
            outcome[k] = cancel_outcome(PQgetvalue(res, i, 1));
    }
    PQclear(res);
    return 0;
}

static int
pg_cancelled(jr_backend *b, const char *token, int64_t *ids, int max,
             jr_err *err)
{
    char smax[16];
    const char *params[2] = {token, smax};
    PGresult *res;
    int i, n;

    if (max <= 0)
        return 0;
    snprintf(smax, sizeof smax, "%d", max);
    if (ready(b, err) < 0 || (res = run(b, S_CANCEL_POLL, params,
                                        "reading cancel requests",
                                        err)) == NULL)
        return -1;
    n = PQntuples(res);
    for (i = 0; i < n && i < max; i++)
        ids[i] = strtoll(PQgetvalue(res, i, 0), NULL, 10);
    PQclear(res);
    return i;
}

static int
set_paused(jr_backend *b, int which, const char *queue, jr_err *err)
{
    const char *params[1] = {queue};
    PGresult *res;

    if (jr_name_check(queue, "queue name", err) < 0 || ready(b, err) < 0)
        return -1;
    res = run(b, which, params, which == S_PAUSE ? "pausing a queue" :
              "resuming a queue", err);
    PQclear(res);
    return res == NULL ? -1 : 0;
}

static int
pg_pause(jr_backend *b, const char *queue, jr_err *err)
{
    return set_paused(b, S_PAUSE, queue, err);
}

static int
pg_resume(jr_backend *b, const char *queue, jr_err *err)
{
    return set_paused(b, S_RESUME, queue, err);
}

static int
pg_queue_list(jr_backend *b, jr_queue_cb cb, void *arg, jr_err *err)
{
    PGresult *res;
    jr_queue_row row;
    int i;

    if (ready(b, err) < 0 ||
        (res = run(b, S_QUEUE_LIST, NULL, "listing queues", err)) == NULL)
        return -1;
    for (i = 0; i < PQntuples(res); i++) {
        row.name = PQgetvalue(res, i, 0);
        row.paused = strcmp(PQgetvalue(res, i, 1), "t") == 0;
        row.paused_at = strtod(PQgetvalue(res, i, 2), NULL);
        row.ready = atol(PQgetvalue(res, i, 3));
        row.scheduled = atol(PQgetvalue(res, i, 4));
        row.running = atol(PQgetvalue(res, i, 5));
        row.dead = atol(PQgetvalue(res, i, 6));
        row.cancelled = atol(PQgetvalue(res, i, 7));
        row.completed = atol(PQgetvalue(res, i, 8));
        if (cb(&row, arg) != 0)
            break;
    }
    PQclear(res);
    return 0;
}

static int
pg_paused(jr_backend *b, jr_name_cb cb, void *arg, jr_err *err)
{
    PGresult *res;
    int i;

    if (ready(b, err) < 0 || (res = run(b, S_PAUSED, NULL, "reading the "
                                        "paused queues", err)) == NULL)
        return -1;
    for (i = 0; i < PQntuples(res); i++)
        if (cb(PQgetvalue(res, i, 0), arg) != 0)
            break;
    PQclear(res);
    return 0;
}

static int
pg_ready_by_queue(jr_backend *b, const char *const *names, int nnames,
                  long limit, jr_count_cb cb, void *arg, jr_err *err)
{
    char slimit[24];
    const char *params[2];
    jr_buf s = {0};
    PGresult *res;
    int i;

    if (nnames <= 0)
        return 0;
    if (ready(b, err) < 0)
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
    res = run(b, S_READY_BY_QUEUE, params, "counting ready jobs", err);
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
}

static int
pg_show(jr_backend *b, int64_t id, jr_job_cb cb, void *arg, jr_err *err)
{
    char sid[24];
    const char *params[1] = {sid};
    PGresult *res;
    jr_job_row row;

    snprintf(sid, sizeof sid, "%lld", (long long)id);
    if (ready(b, err) < 0 ||
        (res = run(b, S_SHOW, params, "reading a job", err)) == NULL)
        return -1;
    if (PQntuples(res) == 0) {
        PQclear(res);
        return jr_fail(err, JR_ENOTFOUND, "job %lld: no such job",
                       (long long)id);
    }
    row_fields(res, 0, &row);
    row.payload = PQgetvalue(res, 0, 21);
    row.unique_key = PQgetisnull(res, 0, 22) ? NULL :
                     PQgetvalue(res, 0, 22);
    cb(&row, arg);
    PQclear(res);
    return 0;
}

static int
pg_list(jr_backend *b, const jr_list_filter *f, jr_job_cb cb, void *arg,
        jr_err *err)
{
    static const jr_list_filter all;
    char slimit[16];
    const char *params[4];
    PGresult *res;
    jr_job_row row;
    int i;

    if (f == NULL)
        f = &all;
    if (jr_list_filter_check(f, err) < 0 || ready(b, err) < 0)
        return -1;
    snprintf(slimit, sizeof slimit, "%d", f->limit);
    params[0] = f->state;
    params[1] = f->name;
    params[2] = f->queue;
    params[3] = f->limit > 0 ? slimit : NULL;
    if ((res = run(b, S_LIST, params, "listing jobs", err)) == NULL)
        return -1;
    for (i = 0; i < PQntuples(res); i++) {
        row_fields(res, i, &row);
        if (cb(&row, arg) != 0)
            break;
    }
    PQclear(res);
    return 0;
}

/* ---- wake-ups ---- */

/* Opens the LISTEN connection if there is none. */
static int
listen_open(jr_backend *b, jr_err *err)
{
    char sql[112], msg[300];
    PGresult *res;

    if (b->listen != NULL)
        return 0;
    if ((b->listen = connect_db(b, err)) == NULL)
        return -1;
    snprintf(sql, sizeof sql, "LISTEN \"%s\"", b->channel);
    res = PQexec(b->listen, sql);
    if (PQresultStatus(res) != PGRES_COMMAND_OK) {
        oneline(msg, sizeof msg, PQresultErrorMessage(res));
        PQclear(res);
        PQfinish(b->listen);
        b->listen = NULL;
        return jr_fail(err, JR_EDB, "postgres: LISTEN on '%s' failed: %s",
                       b->channel, msg);
    }
    PQclear(res);
    return 0;
}

static int
pg_wake_fd(jr_backend *b)
{
    if (b->listen == NULL && listen_open(b, NULL) < 0)
        return -1;
    return PQsocket(b->listen);
}

/* Reads what the server sent. A server that ends the session sends an
 * error and then closes; libpq sees the close only on a further read, so
 * read until the socket is drained. Returns 0, or -1 if the connection died. */
static int
listen_read(PGconn *c)
{
    struct pollfd p = {.fd = PQsocket(c), .events = POLLIN};
    int i;

    for (i = 0; i < 16; i++) {
        if (!PQconsumeInput(c) || PQstatus(c) != CONNECTION_OK)
            return -1;
        if (poll(&p, 1, 0) != 1)
            break;
    }
    return 0;
}

static int
pg_changed(jr_backend *b, jr_err *err)
{
    PGnotify *note;
    char msg[300];
    int any = 0;

    if (b->listen == NULL) {
        /* first call, or after a loss: wake-ups may have been missed */
        return listen_open(b, err) < 0 ? -1 : 1;
    }
    if (listen_read(b->listen) < 0) {
        oneline(msg, sizeof msg, PQerrorMessage(b->listen));
        PQfinish(b->listen);
        b->listen = NULL;
        return jr_fail(err, JR_EDB, "postgres: LISTEN connection to '%s' "
                       "lost (%s); will reconnect on the next call",
                       b->masked, msg);
    }
    while ((note = PQnotifies(b->listen)) != NULL) {
        any = 1;
        PQfreemem(note);
    }
    return any;
}

/* ---- schedules (migration 5): fires and their jobs ---- */

/* Runs sql ({{schema}} expanded) with $1 schedule, $2 at (epoch seconds)
 * and $3 n, unprepared (a fire is rare). Returns its result (caller
 * PQclears) or NULL with err set. */
static PGresult *
fire_sql(jr_backend *b, const char *tmpl, const char *schedule, double at,
         long long n, jr_err *err)
{
    char ats[40], ns[32], *sql = expand(b, tmpl);
    const char *params[3] = {schedule, ats, ns};
    PGresult *res;
    ExecStatusType st;

    if (sql == NULL) {
        jr_fail(err, JR_ENOMEM, "postgres: out of memory");
        return NULL;
    }
    snprintf(ats, sizeof ats, "%.17g", at);
    snprintf(ns, sizeof ns, "%lld", n);
    res = PQexecParams(b->conn, sql, 3, NULL, params, NULL, NULL, 0);
    free(sql);
    st = PQresultStatus(res);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
        db_fail(b, res, "recording a schedule's fire", err);
        PQclear(res);
        return NULL;
    }
    return res;
}

/* Runs fire_sql for its row count; -1 with err set. */
static int
fire_count(jr_backend *b, const char *tmpl, const char *schedule, double at,
           long long n, jr_err *err)
{
    PGresult *res = fire_sql(b, tmpl, schedule, at, n, err);
    int rows;

    if (res == NULL)
        return -1;
    rows = atoi(PQcmdTuples(res));
    PQclear(res);
    return rows;
}

static int
pg_fire_one(jr_backend *b, jr_fire *f, int keep, jr_err *err)
{
    const jr_push *pp = &f->job;
    int rc;

    f->inserted = 0;
    f->job.run_at = f->at;
    f->job.run_in = 0;
    if (jr_push_check(&f->job, b->max_payload, err) < 0 || ready(b, err) < 0 ||
        run_plain(b, "BEGIN", "beginning a transaction", err) < 0)
        return -1;
    /* nothing when this fire or a later one is recorded: another runner's
     * (a concurrent insert of the same fire waits, then does nothing) */
    rc = fire_count(b, "INSERT INTO {{schema}}.schedule_fires (schedule, "
                    "fire_at) SELECT $1, to_timestamp($2::float8) WHERE "
                    "$3::bigint = 0 AND NOT EXISTS (SELECT 1 FROM "
                    "{{schema}}.schedule_fires WHERE schedule = $1 AND "
                    "fire_at >= to_timestamp($2::float8)) "
                    "ON CONFLICT DO NOTHING", f->schedule, f->at, 0, err);
    if (rc <= 0) {
        rollback(b);
        return rc;
    }
    if (insert_jobs(b, &pp, 1, &f->id, err) < 0 ||
        fire_count(b, "UPDATE {{schema}}.schedule_fires SET job_id = $3 "
                   "WHERE schedule = $1 AND fire_at = "
                   "to_timestamp($2::float8)", f->schedule, f->at, f->id,
                   err) < 0 ||
        fire_count(b, "DELETE FROM {{schema}}.schedule_fires WHERE "
                   "schedule = $1 AND fire_at < (SELECT fire_at FROM "
                   "{{schema}}.schedule_fires WHERE schedule = $1 AND "
                   "$2::float8 IS NOT NULL ORDER BY fire_at DESC LIMIT 1 "
                   "OFFSET $3)", f->schedule, f->at, keep > 0 ? keep - 1 : 0,
                   err) < 0 ||
        run_plain(b, "COMMIT", "committing a schedule's fire", err) < 0) {
        rollback(b);
        return -1;
    }
    f->inserted = 1;
    return 1;
}

static int
pg_fire(jr_backend *b, jr_fire *f, int n, int keep, jr_err *err)
{
    int i, rc, count = 0;

    for (i = 0; i < n; i++) {
        if ((rc = pg_fire_one(b, &f[i], keep, err)) < 0)
            return -1;
        count += rc;
    }
    return count;
}

static int
pg_last_fires(jr_backend *b, jr_fire_cb cb, void *arg, jr_err *err)
{
    PGresult *res;
    int i;

    if (ready(b, err) < 0 ||
        (res = fire_sql(b, "SELECT DISTINCT ON (schedule) schedule, "
                        "extract(epoch FROM fire_at)::float8, "
                        "coalesce(job_id, 0) FROM {{schema}}.schedule_fires "
                        "WHERE $1::text IS NULL AND $2::float8 = 0 AND "
                        "$3::bigint = 0 ORDER BY schedule, fire_at DESC",
                        NULL, 0, 0, err)) == NULL)
        return -1;
    for (i = 0; i < PQntuples(res); i++)
        if (cb(PQgetvalue(res, i, 0), strtod(PQgetvalue(res, i, 1), NULL),
               strtoll(PQgetvalue(res, i, 2), NULL, 10), arg) != 0)
            break;
    PQclear(res);
    return 0;
}

static unsigned
pg_reconnects(jr_backend *b)
{
    return b->reconnects;
}

/* ---- actions that someone is told succeeded: durable ---- */

/* On a connection with async_commit (the runner's), the ops below commit
 * with synchronous_commit = on: a cancel, pause, resume, dead retry or
 * delete answered over HTTP, and a schedule's fire (it is recorded once,
 * never again), must survive a crash of the server as the same from the
 * command line do. Claims and results stay asynchronous. set_durable
 * switches the session's setting around the op (a reconnect in between
 * comes back with session_setup's); each op commits on its own. */
static void
set_durable(jr_backend *b, int on)
{
    if (b->async_commit && PQstatus(b->conn) == CONNECTION_OK)
        PQclear(PQexec(b->conn, on ? "SET synchronous_commit = on" :
                       "SET synchronous_commit = off"));
}

static int
durable_cancel(jr_backend *b, const int64_t *ids, int n, int *outcome,
               jr_err *err)
{
    int rc;

    if (n > 0 && ready(b, err) < 0)
        return -1;
    set_durable(b, 1);
    rc = pg_cancel(b, ids, n, outcome, err);
    set_durable(b, 0);
    return rc;
}

/* Runs op (pause, resume, the dead ones' retry, delete and purge, fire)
 * durably; which picks it, the arguments follow. */
enum { D_PAUSE, D_RESUME, D_RETRY, D_DELETE, D_PURGE, D_FIRE };

static int
durable(jr_backend *b, int which, const char *queue, const int64_t *ids,
        int n, double age, jr_fire *f, int keep, jr_err *err)
{
    int rc = -1;

    if (ready(b, err) < 0)
        return -1;
    set_durable(b, 1);
    switch (which) {
    case D_PAUSE:  rc = pg_pause(b, queue, err); break;
    case D_RESUME: rc = pg_resume(b, queue, err); break;
    case D_RETRY:  rc = pg_dead_retry(b, ids, n, err); break;
    case D_DELETE: rc = pg_dead_delete(b, ids, n, err); break;
    case D_PURGE:  rc = pg_dead_purge(b, age, err); break;
    case D_FIRE:   rc = pg_fire(b, f, n, keep, err); break;
    }
    set_durable(b, 0);
    return rc;
}

static int
durable_pause(jr_backend *b, const char *queue, jr_err *err)
{
    return durable(b, D_PAUSE, queue, NULL, 0, 0, NULL, 0, err);
}

static int
durable_resume(jr_backend *b, const char *queue, jr_err *err)
{
    return durable(b, D_RESUME, queue, NULL, 0, 0, NULL, 0, err);
}

static int
durable_dead_retry(jr_backend *b, const int64_t *ids, int n, jr_err *err)
{
    return durable(b, D_RETRY, NULL, ids, n, 0, NULL, 0, err);
}

static int
durable_dead_delete(jr_backend *b, const int64_t *ids, int n, jr_err *err)
{
    return durable(b, D_DELETE, NULL, ids, n, 0, NULL, 0, err);
}

static int
durable_dead_purge(jr_backend *b, double older_than, jr_err *err)
{
    return durable(b, D_PURGE, NULL, NULL, 0, older_than, NULL, 0, err);
}

static int
durable_fire(jr_backend *b, jr_fire *f, int n, int keep, jr_err *err)
{
    return durable(b, D_FIRE, NULL, NULL, n, 0, f, keep, err);
}

/* ---- limits per key: paths and use ---- */

static int
pg_limit_paths(jr_backend *b, const jr_limit *l, int n, jr_err *err)
{
    const char *params[2];
    PGresult *res;
    int i;

    if (ready(b, err) < 0)
        return -1;
    for (i = 0; i < n; i++) {
        if (l[i].key_path == NULL ||
            strncmp(l[i].scope, JR_LIMIT_QPREFIX, 6) == 0)
            continue;
        params[0] = l[i].scope;
        params[1] = l[i].key_path;
        if ((res = run(b, S_LIM_PATH_SET, params, "recording a limit key "
                       "path", err)) == NULL)
            return -1;
        PQclear(res);
    }
    return 0;
}

static int
pg_limit_use(jr_backend *b, const jr_limit *l, jr_limit_use *u,
             jr_err *err)
{
    int q = strncmp(l->scope, JR_LIMIT_QPREFIX, 6) == 0, r;
    const char *params[3] = {q ? NULL : l->scope, q ? l->scope + 6 : NULL,
                             "5"};
    PGresult *res;
    double at, now;

    memset(u, 0, sizeof *u);
    PQclear(b->lim_top);
    b->lim_top = NULL;
    if (ready(b, err) < 0 ||
        (res = run(b, S_LIM_USE, params, "reading a limit's use", err)) ==
        NULL)
        return -1;
    u->running = atol(PQgetvalue(res, 0, 0));
    u->waiting = atol(PQgetvalue(res, 0, 1));
    PQclear(res);
    if ((res = run(b, S_LIM_USE_TOP, params, "reading a limit's use",
                   err)) == NULL)
        return -1;
    for (r = 0; r < PQntuples(res) && r < JR_LIMIT_TOP; r++) {
        u->top_key[r] = PQgetvalue(res, r, 0);
        u->top_waiting[r] = atol(PQgetvalue(res, r, 1));
        u->top_running[r] = atol(PQgetvalue(res, r, 2));
    }
    u->ntop = r;
    b->lim_top = res;
    u->tokens = l->all.rate > 0 ? l->all.burst : -1;
    if (l->all.rate <= 0)
        return 0;
    params[0] = l->scope;
    if ((res = run(b, S_LIM_TOKENS, params, "reading a limit's use", err))
        == NULL)
        return -1;
    if (PQntuples(res) == 1) {
        at = strtod(PQgetvalue(res, 0, 1), NULL);
        now = strtod(PQgetvalue(res, 0, 2), NULL);
        u->tokens = strtod(PQgetvalue(res, 0, 0), NULL) +
                    (now > at ? now - at : 0) * l->all.rate;
        if (u->tokens > l->all.burst)
            u->tokens = l->all.burst;
    }
    PQclear(res);
    return 0;
}

const jr_backend_ops jr_postgres_ops = {
    .name = "postgres",
    .open = pg_open,
    .migrate = pg_migrate,
    .push = pg_push,
    .claim = pg_claim,
    .complete = pg_complete,
    .complete_claim = pg_complete_claim,
    .renew = pg_renew,
    .rescue = pg_rescue,
    .stats = pg_stats,
    .dead_list = pg_dead_list,
    .dead_retry = durable_dead_retry,
    .dead_purge = durable_dead_purge,
    .prune = pg_prune,
    .queue_prune = pg_queue_prune,
    .cancel = durable_cancel,
    .cancelled = pg_cancelled,
    .pause = durable_pause,
    .resume = durable_resume,
    .queue_list = pg_queue_list,
    .paused = pg_paused,
    .ready_by_queue = pg_ready_by_queue,
    .show = pg_show,
    .list = pg_list,
    .wake_fd = pg_wake_fd,
    .changed = pg_changed,
    .close = pg_close,
    .fire = durable_fire,
    .last_fires = pg_last_fires,
    .dead_delete = durable_dead_delete,
    .limit_paths = pg_limit_paths,
    .limit_use = pg_limit_use,
    .vacuum = pg_vacuum,
    .reconnects = pg_reconnects,
};
