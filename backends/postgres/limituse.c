/* limituse.c - a limit's names and use: the key paths of the names'
 * limits recorded, and a limit's use (running and waiting jobs, the
 * busiest keys, the tokens in its buckets) for `limits`. Owns those
 * statements. Uses conn.c, limitpick.h (the limit types). */

#include <stdlib.h>
#include <string.h>

#include "limitpick.h"
#include "postgres/pg_int.h"
#include "postgres/arrays.h"

static const pg_stmt st_lim_path_set = {"jr_lim_path_set", 2,
    "INSERT INTO {{schema}}.limit_paths (name, path)"
    " VALUES ($1::text, $2::text)"
    " ON CONFLICT (name) DO UPDATE SET path = excluded.path"};

/* the most a job may cost under each limit (push.c reads them): the
 * config's replace what was there */
static const pg_stmt st_lim_sizes = {"jr_lim_sizes", 3,
    "WITH d AS (DELETE FROM {{schema}}.limit_sizes"
    "  WHERE scope <> ALL($1::text[]))"
    " INSERT INTO {{schema}}.limit_sizes (scope, size, what)"
    " SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[])"
    " ON CONFLICT (scope) DO UPDATE SET size = excluded.size,"
    " what = excluded.what"};

/* Replaces limit_sizes with the sizes of l[0..n), in one statement. */
static int
limit_sizes(jr_backend *b, const jr_limit *l, int n, jr_err *err)
{
    jr_buf a[3] = {{0}, {0}, {0}};
    const char *params[3];
    char what[120], num[24];
    PGresult *res;
    long size;
    int i, rc = -1;

    for (i = 0; i < n; i++) {
        if ((size = jr_limit_size(&l[i], what, sizeof what)) <= 0)
            continue;
        snprintf(num, sizeof num, "%ld", size);
        sb_elem(&a[0], l[i].scope);
        sb_num(&a[1], num);
        sb_elem(&a[2], what);
    }
    for (i = 0; i < 3; i++)
        params[i] = sb_array(&a[i]);
    if (a[0].oom || a[1].oom || a[2].oom)
        jr_fail(err, JR_ENOMEM, "postgres: out of memory");
    else if ((res = jr_pg_run(b, &st_lim_sizes, params, "recording the "
                              "limits' sizes", err)) != NULL) {
        PQclear(res);
        rc = 0;
    }
    for (i = 0; i < 3; i++)
        free(a[i].p);
    return rc;
}

int
jr_pg_limit_paths(jr_backend *b, const jr_limit *l, int n, jr_err *err)
{
    const char *params[2];
    PGresult *res;
    int i;

    if (jr_pg_ready(b, err) < 0 || limit_sizes(b, l, n, err) < 0 ||
        jr_pg_fair_paths(b, l, n, err) < 0)
        return -1;
    for (i = 0; i < n; i++) {
        if (l[i].key_path == NULL ||
            strncmp(l[i].scope, JR_LIMIT_QPREFIX, 6) == 0)
            continue;
        params[0] = l[i].scope;
        params[1] = l[i].key_path;
        if ((res = jr_pg_run(b, &st_lim_path_set, params, "recording a limit key "
                          "path", err)) == NULL)
            return -1;
        PQclear(res);
    }
    return 0;
}

/* the limits that jobs not started cost more than */
static const pg_stmt st_cost_over = {"jr_cost_over_sizes", 0,
    "SELECT l.scope, l.size, l.what, count(*), min(j.id), max(j.cost)"
    " FROM {{schema}}.jobs j JOIN {{schema}}.limit_sizes l"
    " ON l.scope IN (j.name, 'queue:' || j.queue)"
    " WHERE j.cost IS NOT NULL AND j.state IN ('queued', 'waiting')"
    " AND j.cost > l.size AND EXISTS (SELECT 1 FROM {{schema}}.limit_sizes)"
    " GROUP BY l.scope, l.size, l.what"
    " ORDER BY l.scope"};

int
jr_pg_cost_over(jr_backend *b, jr_cost_over_cb cb, void *arg, jr_err *err)
{
    PGresult *res;
    int i;

    if (jr_pg_ready(b, err) < 0 ||
        (res = jr_pg_run(b, &st_cost_over, NULL, "reading the jobs over a "
                         "limit's size", err)) == NULL)
        return -1;
    for (i = 0; i < PQntuples(res); i++)
        if (cb(PQgetvalue(res, i, 0), strtol(PQgetvalue(res, i, 1), NULL, 10),
               PQgetvalue(res, i, 2), strtol(PQgetvalue(res, i, 3), NULL, 10),
               strtoll(PQgetvalue(res, i, 4), NULL, 10),
               strtol(PQgetvalue(res, i, 5), NULL, 10), arg))
            break;
    PQclear(res);
    return 0;
}

/* a limit's use: $1 its job name or $2 its queue (the other NULL) */
static const pg_stmt st_lim_use = {"jr_lim_use", 2,
    "SELECT count(*) FILTER (WHERE state = 'running'),"
    " count(*) FILTER (WHERE state = 'queued' AND run_at <= now())"
    " FROM {{schema}}.jobs WHERE state IN ('running', 'queued')"
    " AND ($1::text IS NULL OR name = $1::text)"
    " AND ($2::text IS NULL OR queue = $2::text)"};

static const pg_stmt st_lim_use_top = {"jr_lim_use_top", 3,
    "SELECT limit_key, count(*) FILTER (WHERE state = 'queued'"
    " AND run_at <= now()) AS w, count(*) FILTER (WHERE"
    " state = 'running') FROM {{schema}}.jobs"
    " WHERE state IN ('running', 'queued') AND limit_key IS NOT NULL"
    " AND ($1::text IS NULL OR name = $1::text)"
    " AND ($2::text IS NULL OR queue = $2::text)"
    " GROUP BY limit_key ORDER BY w DESC, limit_key LIMIT $3::int"};

static const pg_stmt st_lim_tokens = {"jr_lim_tokens", 2,
    "SELECT tokens, updated_at, extract(epoch FROM now())::float8"
    " FROM {{schema}}.limit_buckets WHERE scope = $1::text"
    " AND key = $2::text"};

/* The tokens in scope's bucket of key ("": the scope's own) at rate and
 * burst of set now: a bucket with no row is full. */
static int
bucket_tokens(jr_backend *b, const char *scope, const char *key,
              const jr_limit_set *set, double *tokens, jr_err *err)
{
    const char *params[2] = {scope, key};
    PGresult *res;
    double at, now;

    *tokens = set->burst;
    if ((res = jr_pg_run(b, &st_lim_tokens, params, "reading a limit's use",
                      err)) == NULL)
        return -1;
    if (PQntuples(res) == 1) {
        at = strtod(PQgetvalue(res, 0, 1), NULL);
        now = strtod(PQgetvalue(res, 0, 2), NULL);
        *tokens = strtod(PQgetvalue(res, 0, 0), NULL) +
                  (now > at ? now - at : 0) * set->rate;
        if (*tokens > set->burst)
            *tokens = set->burst;
    }
    PQclear(res);
    return 0;
}

int
jr_pg_limit_use(jr_backend *b, const jr_limit *l, jr_limit_use *u,
             jr_err *err)
{
    int q = strncmp(l->scope, JR_LIMIT_QPREFIX, 6) == 0, r;
    const char *params[3] = {q ? NULL : l->scope, q ? l->scope + 6 : NULL,
                             "5"};
    PGresult *res;
    int want = u->top;

    memset(u, 0, sizeof *u);
    PQclear(b->lim_top);
    b->lim_top = NULL;
    if (jr_pg_ready(b, err) < 0 ||
        (res = jr_pg_run(b, &st_lim_use, params, "reading a limit's use", err)) ==
        NULL)
        return -1;
    u->running = atol(PQgetvalue(res, 0, 0));
    u->waiting = atol(PQgetvalue(res, 0, 1));
    PQclear(res);
    u->tokens = -1;
    if (want > 0 &&
        (b->lim_top = jr_pg_run(b, &st_lim_use_top, params,
                                "reading a limit's use", err)) == NULL)
        return -1;
    for (r = 0; b->lim_top != NULL && r < PQntuples(b->lim_top) &&
         r < want && r < JR_LIMIT_TOP; r++) {
        u->top_key[r] = PQgetvalue(b->lim_top, r, 0);
        u->top_waiting[r] = atol(PQgetvalue(b->lim_top, r, 1));
        u->top_running[r] = atol(PQgetvalue(b->lim_top, r, 2));
    }
    u->ntop = r;
    for (r = 0; r < u->ntop; r++) {
        u->top_tokens[r] = -1;
        if (l->per_key.rate > 0 &&
            bucket_tokens(b, l->scope, u->top_key[r], &l->per_key,
                          &u->top_tokens[r], err) < 0)
            return -1;
    }
    return l->all.rate > 0 ?
           bucket_tokens(b, l->scope, "", &l->all, &u->tokens, err) : 0;
}
