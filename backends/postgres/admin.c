/* admin.c - commands on jobs and queues: dead jobs listed, retried
 * (those of sequences gone on past them by seqretry.c), deleted and
 * purged; cancel, and the cancels a runner polls for; queues paused,
 * resumed, and the paused list. Owns their statements. Uses conn.c,
 * arrays.h, seqretry.c. */

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "postgres/pg_int.h"
#include "postgres/arrays.h"

/* A dead job retried keeps its unique key only if no queued or running
 * job holds it and no newer dead job has it; else it runs as a plain job
 * (the unique index would refuse the retry). A job without a key looks
 * for nothing, one with a key in jobs_key (migration 14): a bulk retry
 * read the table once per job. */
#define RETRY_KEY \
    " unique_key = CASE WHEN unique_key IS NOT NULL AND EXISTS (SELECT 1" \
    "  FROM {{schema}}.jobs o WHERE o.name = jobs.name" \
    "  AND o.unique_key = jobs.unique_key AND o.unique_key IS NOT NULL" \
    "  AND (o.state IN ('queued', 'running')" \
    "  OR (o.state = 'dead' AND o.id > jobs.id)))" \
    "  THEN NULL ELSE unique_key END"

static const pg_stmt st_dead_list = {"jr_dead_list", 1,
    "SELECT id, name, queue, attempts, coalesce(last_error, ''),"
    " generation, extract(epoch FROM died_at)::float8,"
    " extract(epoch FROM created_at)::float8"
    " FROM {{schema}}.jobs WHERE state = 'dead'"
    " ORDER BY died_at DESC, id DESC LIMIT $1::bigint"};

int
jr_pg_dead_list(jr_backend *b, int limit, jr_dead_cb cb, void *arg,
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
    if (jr_pg_ready(b, err) < 0 ||
        (res = jr_pg_run(b, &st_dead_list, params, "listing dead jobs",
                      err)) == NULL)
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
 * retried job runs as a plain one (docs/schedules.md, "Unique jobs": a
 * retry never fails on the unique index). Each round lost means another
 * push of one of the keys committed; DEAD_RETRY_ROUNDS bounds them all
 * the same. */
#define DEAD_RETRY_ROUNDS 20

static int
dead_retry_run(jr_backend *b, const pg_stmt *s, const char *const *params,
               jr_err *err)
{
    int round, rc = -1;

    for (round = 0; round < DEAD_RETRY_ROUNDS; round++) {
        rc = jr_pg_run_count(b, s, params, "retrying dead jobs", err);
        if (rc >= 0 || strcmp(b->sqlstate, "23505") != 0 ||
            jr_pg_ready(b, err) < 0)
            break;
    }
    return rc;
}

static const pg_stmt st_dead_retry_ids = {
    "jr_dead_retry_ids", 1,
    "UPDATE {{schema}}.jobs SET state = 'queued', attempts = 0,"
    " run_at = now(), died_at = NULL, finished_at = NULL,"
    " cancel_requested = false, updated_at = now()," RETRY_KEY ","
    " expires_at = NULL, deadline_at = NULL"
    " WHERE state IN ('dead', 'expired') AND id = ANY($1::bigint[])"
    " AND NOT " JR_PG_SEQ_PAST};

static const pg_stmt st_dead_retry_all = {
    "jr_dead_retry_all", 1,
    "UPDATE {{schema}}.jobs SET state = 'queued', attempts = 0,"
    " run_at = now(), died_at = NULL, finished_at = NULL,"
    " cancel_requested = false, updated_at = now()," RETRY_KEY ","
    " deadline_at = NULL"
    " WHERE state = 'dead' AND id IN (SELECT id FROM {{schema}}.jobs"
    "  WHERE state = 'dead' AND NOT " JR_PG_SEQ_PAST " LIMIT $1::int)"};

/* Runs statement st ($1 JR_BULK_ROWS, then the params after) until it
 * changes fewer rows than that, each run a transaction of its own.
 * Returns how many it changed, or -1 (the runs before stay done). */
static int
bulk_run(jr_backend *b, const pg_stmt *st, const char *arg,
         const char *what, jr_err *err)
{
    char rows[16];
    const char *params[2] = {rows, arg};
    int total = 0, rc;

    snprintf(rows, sizeof rows, "%d", JR_BULK_ROWS);
    do {
        if ((rc = st == &st_dead_retry_all ?
             dead_retry_run(b, st, params, err) :
             jr_pg_run_count(b, st, params, what, err)) < 0)
            return -1;
        total += rc;
    } while (rc == JR_BULK_ROWS);
    return total;
}

int
jr_pg_dead_retry(jr_backend *b, const int64_t *ids, int n, jr_err *err)
{
    const char *params[1];
    char num[24];
    jr_buf s = {0};
    int i, k, rc, page, total = 0;

    if (n == 0)
        return 0;
    if (jr_pg_ready(b, err) < 0)
        return -1;
    /* the jobs of sequences gone on past them go to their ends first
     * (seqretry.c); the statements here leave them */
    if (n < 0) {
        if ((total = jr_pg_seq_retry_dead(b, err)) < 0 ||
            (rc = bulk_run(b, &st_dead_retry_all, NULL, "retrying dead "
                           "jobs", err)) < 0)
            return -1;
        return total + rc;
    }
    for (i = 0; i < n; i += JR_BULK_ROWS) {     /* a statement each */
        s.len = 0;
        for (k = i; k < n && k < i + JR_BULK_ROWS; k++) {
            snprintf(num, sizeof num, "%lld", (long long)ids[k]);
            sb_num(&s, num);
        }
        params[0] = sb_array(&s);
        if (s.oom) {
            rc = jr_fail(err, JR_ENOMEM, "postgres: retrying dead jobs: "
                         "out of memory");
            break;
        }
        if ((rc = jr_pg_seq_retry_ids(b, params[0], err)) < 0)
            break;
        page = rc;
        if ((rc = dead_retry_run(b, &st_dead_retry_ids, params, err)) < 0)
            break;
        page += rc;
        /* short: a job the first left as its sequence's head may have
         * been skipped meanwhile (sequences skip), and the second left
         * it as one its sequence went on past: the first again */
        if (page < k - i && (rc = jr_pg_seq_retry_ids(b, params[0],
                                                      err)) < 0)
            break;
        total += page + (page < k - i ? rc : 0);
    }
    free(s.p);
    return rc < 0 ? -1 : total;
}

static const pg_stmt st_dead_delete_ids = {
    "jr_dead_delete_ids", 1,
    "DELETE FROM {{schema}}.jobs"
    " WHERE state = 'dead' AND id = ANY($1::bigint[])"};

int
jr_pg_dead_delete(jr_backend *b, const int64_t *ids, int n, jr_err *err)
{
    const char *params[1];
    char num[24];
    jr_buf s = {0};
    int i, rc;

    if (n <= 0)
        return 0;
    if (jr_pg_ready(b, err) < 0)
        return -1;
    for (i = 0; i < n; i++) {
        snprintf(num, sizeof num, "%lld", (long long)ids[i]);
        sb_num(&s, num);
    }
    params[0] = sb_array(&s);
    rc = s.oom ? jr_fail(err, JR_ENOMEM, "postgres: deleting dead jobs: "
                         "out of memory")
         : jr_pg_run_count(b, &st_dead_delete_ids, params,
                        "deleting dead jobs", err);
    free(s.p);
    return rc;
}

static const pg_stmt st_dead_purge = {"jr_dead_purge", 2,
    "DELETE FROM {{schema}}.jobs WHERE state = 'dead'"
    " AND id IN (SELECT id FROM {{schema}}.jobs WHERE state = 'dead'"
    " AND ($2::float8 <= 0"
    "  OR died_at < now() - $2::float8 * interval '1 second')"
    " LIMIT $1::int)"};

int
jr_pg_dead_purge(jr_backend *b, double older_than, jr_err *err)
{
    char sage[32];

    snprintf(sage, sizeof sage, "%.17g", isfinite(older_than) ? older_than
             : 0.0);
    if (jr_pg_ready(b, err) < 0)
        return -1;
    return bulk_run(b, &st_dead_purge, sage, "purging dead jobs", err);
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

/* the SQL function is the one rule; one call per id, in order */
static const pg_stmt st_cancel = {"jr_cancel", 1,
    "SELECT u.ord, {{schema}}.cancel(u.id)"
    " FROM unnest($1::bigint[]) WITH ORDINALITY AS u(id, ord)"
    " ORDER BY u.ord"};

int
jr_pg_cancel(jr_backend *b, const int64_t *ids, int n, int *outcome,
          jr_err *err)
{
    const char *params[1];
    char num[24];
    jr_buf s = {0};
    PGresult *res;
    int i, k;

    if (n <= 0)
        return 0;
    if (jr_pg_ready(b, err) < 0)
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
    res = jr_pg_run(b, &st_cancel, params, "cancelling jobs", err);
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

static const pg_stmt st_cancel_poll = {"jr_cancel_poll", 2,
    "SELECT id FROM {{schema}}.jobs WHERE state = 'running'"
    " AND cancel_requested AND locked_by = $1::text"
    " ORDER BY id LIMIT $2::int"};

int
jr_pg_cancelled(jr_backend *b, const char *token, int64_t *ids, int max,
             jr_err *err)
{
    char smax[16];
    const char *params[2] = {token, smax};
    PGresult *res;
    int i, n;

    if (max <= 0)
        return 0;
    snprintf(smax, sizeof smax, "%d", max);
    if (jr_pg_ready(b, err) < 0 || (res = jr_pg_run(b, &st_cancel_poll, params,
                                              "reading cancel requests",
                                              err)) == NULL)
        return -1;
    n = PQntuples(res);
    for (i = 0; i < n && i < max; i++)
        ids[i] = strtoll(PQgetvalue(res, i, 0), NULL, 10);
    PQclear(res);
    return i;
}

static const pg_stmt st_pause = {"jr_pause", 1,
    "SELECT {{schema}}.pause($1::text)"};

static int
set_paused(jr_backend *b, const pg_stmt *which, const char *queue,
           jr_err *err)
{
    const char *params[1] = {queue};
    PGresult *res;

    if (jr_name_check(queue, "queue name", err) < 0 || jr_pg_ready(b, err) < 0)
        return -1;
    res = jr_pg_run(b, which, params, which == &st_pause ? "pausing a queue" :
                 "resuming a queue", err);
    PQclear(res);
    return res == NULL ? -1 : 0;
}

int
jr_pg_pause(jr_backend *b, const char *queue, jr_err *err)
{
    return set_paused(b, &st_pause, queue, err);
}

static const pg_stmt st_resume = {"jr_resume", 1,
    "SELECT {{schema}}.resume($1::text)"};

int
jr_pg_resume(jr_backend *b, const char *queue, jr_err *err)
{
    return set_paused(b, &st_resume, queue, err);
}

static const pg_stmt st_paused = {"jr_paused", 0,
    "SELECT name FROM {{schema}}.queues WHERE paused"
    " ORDER BY name COLLATE \"C\""};

int
jr_pg_paused(jr_backend *b, jr_name_cb cb, void *arg, jr_err *err)
{
    PGresult *res;
    int i;

    if (jr_pg_ready(b, err) < 0 ||
        (res = jr_pg_run(b, &st_paused, NULL, "reading the paused queues",
                      err)) == NULL)
        return -1;
    for (i = 0; i < PQntuples(res); i++)
        if (cb(PQgetvalue(res, i, 0), arg) != 0)
            break;
    PQclear(res);
    return 0;
}
