/* fair.c - fair share inside a queue on PostgreSQL (docs/queues.md,
 * "Fair share"): in a claim under limits (limits.c), each fair queue's
 * first ready jobs per key ranked by whose turn it is (fairpick.c), the
 * picked rows locked (FOR UPDATE SKIP LOCKED), and the passes of the keys
 * that started jobs written back in the claim's transaction; `jobrunner
 * fair set`. Uses pg_int.h, arrays.h, fairpick.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "postgres/pg_int.h"
#include "postgres/arrays.h"
#include "base/limit.h"
#include "fairpick.h"

/* the first $3 ready jobs of each fair key ($9: its path; none: '') of
 * queue $2, by key, with the filters of limits.c's st_lim_candidates
 * not paused ($4 names blocked, $5 names or queues and keys blocked,
 * $6/$7 per-key rates, $8 now); not locked: the picked ones are
 * (st_fair_lock) */
static const pg_stmt st_fair_jobs = {"jr_fair_jobs", 10,
    "SELECT id, name, queue, limit_key, k, priority,"
    " extract(epoch FROM run_at)::float8, coalesce(cost, 1) FROM"
    " (SELECT *, row_number() OVER"
    "   (PARTITION BY k ORDER BY priority, run_at, id) AS r FROM"
    "  (SELECT id, name, queue, limit_key, priority, run_at, cost,"
    "    coalesce(payload #>> $9::text[], '') AS k FROM {{schema}}.jobs"
    "   WHERE state = 'queued' AND queue = $2::text AND run_at <= now()"
    JR_PG_UNEXPIRED
    JR_PG_PICK_FILTER ")"
    "  x) y WHERE r <= $3::int ORDER BY k, r"};

/* keys $2 of queue $1: weight (set at run time, else the config's $3,
 * else $4), pass; and the queue's clock */
static const pg_stmt st_fair_keys = {"jr_fair_keys", 4,
    "SELECT coalesce(fk.weight, ($3::jsonb ->> u.k)::float8, $4::float8),"
    " coalesce(fk.pass, 0),"
    " coalesce((SELECT clock FROM {{schema}}.fair_clocks"
    "  WHERE queue = $1::text), 0)"
    " FROM unnest($2::text[]) WITH ORDINALITY AS u(k, i)"
    " LEFT JOIN {{schema}}.fair_keys fk ON fk.queue = $1::text"
    " AND fk.key = u.k ORDER BY u.i"};

static const pg_stmt st_fair_lock = {"jr_fair_lock", 1,
    "SELECT id FROM {{schema}}.jobs WHERE id = ANY($1::bigint[])"
    " AND state = 'queued' FOR UPDATE SKIP LOCKED"};

/* starts of key $2 of queue $1 ($4 of them at clock $3, $5 = 1/weight) */
static const pg_stmt st_fair_pass = {"jr_fair_pass", 5,
    "WITH p AS (INSERT INTO {{schema}}.fair_keys (queue, key, pass)"
    " VALUES ($1::text, $2::text, $3::float8 + $4::int * $5::float8)"
    " ON CONFLICT (queue, key) DO UPDATE SET pass ="
    "  greatest({{schema}}.fair_keys.pass, $3::float8)"
    "  + $4::int * $5::float8 RETURNING 1)"
    " INSERT INTO {{schema}}.fair_clocks (queue, clock)"
    " VALUES ($1::text, $3::float8) ON CONFLICT (queue) DO UPDATE"
    " SET clock = greatest({{schema}}.fair_clocks.clock, $3::float8)"};

static const pg_stmt st_fair_set = {"jr_fair_set", 3,
    "INSERT INTO {{schema}}.fair_keys (queue, key, weight)"
    " VALUES ($1::text, $2::text, $3::float8)"
    " ON CONFLICT (queue, key) DO UPDATE SET weight = excluded.weight"};

const jr_limit *
jr_pg_fair_of(const jr_claim_spec *spec, const char *queue)
{
    int i;

    for (i = 0; spec && i < spec->nlimits; i++)
        if (spec->limits[i].fair_path &&
            strncmp(spec->limits[i].scope, JR_LIMIT_QPREFIX, 6) == 0 &&
            (queue == NULL || strcmp(spec->limits[i].scope + 6, queue) == 0))
            return &spec->limits[i];
    return NULL;
}

/* How many jobs spec lets one claim take from queue. */
static int
queue_cap(const jr_claim_spec *spec, const char *queue, int max)
{
    int i, cap = -1;

    for (i = 0; i < spec->nqueues; i++)
        if (strcmp(spec->queues[i].queue, queue) == 0 &&
            (cap < 0 || spec->queues[i].max < cap))
            cap = spec->queues[i].max;
    if (cap < 0)
        cap = spec->others;
    return cap < max ? cap : max;
}

/* Ranks the rows of res (st_fair_jobs) of fair limit f: appends to fr
 * those picked, in turn, locked. */
static int
rank_rows(jr_backend *b, const jr_limit *f, const char *queue, int cap,
          PGresult *res, jr_pg_fair_rows *fr, jr_err *err)
{
    int nr = PQntuples(res), nk = 0, i, m, at, *order = NULL, *first = NULL;
    jr_fair_key *k = NULL;
    jr_buf keys = {0}, ids = {0};
    char sdef[32];
    const char *params[4];
    PGresult *kr = NULL, *lr = NULL;
    double clock;
    jr_pg_fair_row *grown;
    int rc = -1;

    k = calloc((size_t)nr, sizeof *k);
    first = calloc((size_t)nr, sizeof *first);
    order = calloc((size_t)cap, sizeof *order);
    if (k == NULL || first == NULL || order == NULL)
        goto oom;
    for (i = 0; i < nr; i++) {
        if (i > 0 && strcmp(PQgetvalue(res, i, 4),
                            PQgetvalue(res, i - 1, 4)) == 0) {
            k[nk - 1].njobs++;
            continue;
        }
        first[nk] = i;
        k[nk].njobs = 1;
        k[nk].priority = atoi(PQgetvalue(res, i, 5));
        k[nk].run_at = strtod(PQgetvalue(res, i, 6), NULL);
        k[nk].id = strtoll(PQgetvalue(res, i, 0), NULL, 10);
        sb_elem(&keys, PQgetvalue(res, i, 4));
        nk++;
    }
    snprintf(sdef, sizeof sdef, "%.17g", f->fair_default);
    params[0] = queue;
    params[1] = sb_array(&keys);
    params[2] = f->fair_weights ? f->fair_weights : "{}";
    params[3] = sdef;
    if (keys.oom)
        goto oom;
    if ((kr = jr_pg_run(b, &st_fair_keys, params, "reading fair keys",
                        err)) == NULL)
        goto out;
    if (PQntuples(kr) != nk) {
        jr_fail(err, JR_EDB, "postgres: reading fair keys: %d rows for %d "
                "keys", PQntuples(kr), nk);
        goto out;
    }
    for (i = 0, clock = 0; i < nk; i++) {
        k[i].weight = strtod(PQgetvalue(kr, i, 0), NULL);
        if (!(k[i].weight > 0))
            k[i].weight = 1;
        k[i].pass = strtod(PQgetvalue(kr, i, 1), NULL);
        clock = strtod(PQgetvalue(kr, i, 2), NULL);
    }
    clock = jr_fair_clock(k, nk, clock);
    m = jr_fair_order(k, nk, clock, cap, order);
    for (i = 0; i < nk; i++)
        k[i].next = 0;
    if (fr->n + m > fr->cap) {
        int ncap = (fr->n + m) * 2;
        if ((grown = realloc(fr->row, (size_t)ncap * sizeof *grown)) == NULL)
            goto oom;
        fr->row = grown;
        fr->cap = ncap;
    }
    for (i = 0; i < m; i++) {
        at = first[order[i]] + k[order[i]].next++;
        sb_num(&ids, PQgetvalue(res, at, 0));
    }
    params[0] = sb_array(&ids);
    if (ids.oom)
        goto oom;
    if ((lr = jr_pg_run(b, &st_fair_lock, params, "locking fair jobs",
                        err)) == NULL)
        goto out;
    for (i = 0; i < nk; i++)
        k[i].next = 0;
    for (i = 0; i < m; i++) {
        int l, locked = 0;
        jr_pg_fair_row *row = &fr->row[fr->n];

        at = first[order[i]] + k[order[i]].next++;
        for (l = 0; l < PQntuples(lr) && !locked; l++)
            locked = strcmp(PQgetvalue(lr, l, 0), PQgetvalue(res, at, 0)) ==
                     0;
        if (!locked)
            continue;
        row->id = PQgetvalue(res, at, 0);
        row->name = PQgetvalue(res, at, 1);
        row->queue = PQgetvalue(res, at, 2);
        row->key = PQgetisnull(res, at, 3) ? NULL : PQgetvalue(res, at, 3);
        row->fkey = PQgetvalue(res, at, 4);
        row->cost = atol(PQgetvalue(res, at, 7));
        row->rank = i + 1;
        row->weight = k[order[i]].weight;
        row->clock = clock;
        fr->n++;
    }
    rc = 0;
    goto out;
oom:
    jr_fail(err, JR_ENOMEM, "postgres: claiming jobs: out of memory");
out:
    PQclear(kr);
    PQclear(lr);
    jr_buf_free(&keys);
    jr_buf_free(&ids);
    free(k);
    free(first);
    free(order);
    return rc;
}

int
jr_pg_fair_read(jr_backend *b, const jr_claim_spec *spec, int max,
                const char *const *lists, jr_pg_fair_rows *fr, jr_err *err)
{
    const char *params[10];
    char scap[16], path[220], *p;
    PGresult *res;
    int i, cap;

    for (i = 0; i < spec->nlimits; i++) {
        const jr_limit *f = &spec->limits[i];
        if (f->fair_path == NULL ||
            strncmp(f->scope, JR_LIMIT_QPREFIX, 6) != 0 ||
            (cap = queue_cap(spec, f->scope + 6, max)) <= 0 ||
            fr->nres == (int)(sizeof fr->res / sizeof fr->res[0]))
            continue;
        snprintf(path, sizeof path, "{%s}", f->fair_path);
        for (p = path; *p; p++)
            if (*p == '.')
                *p = ',';
        snprintf(scap, sizeof scap, "%d", cap);
        params[0] = lists[0];
        params[1] = f->scope + 6;
        params[2] = scap;
        params[3] = lists[1];
        params[4] = lists[2];
        params[5] = lists[3];
        params[6] = lists[4];
        params[7] = lists[5];
        params[8] = path;
        params[9] = lists[6];
        if ((res = jr_pg_run(b, &st_fair_jobs, params, "claiming jobs of a "
                             "fair queue", err)) == NULL)
            return -1;
        fr->res[fr->nres++] = res;
        if (PQntuples(res) > 0 &&
            rank_rows(b, f, f->scope + 6, cap, res, fr, err) < 0)
            return -1;
    }
    return 0;
}

void
jr_pg_fair_rows_clear(jr_pg_fair_rows *fr)
{
    int i;

    for (i = 0; i < fr->nres; i++)
        PQclear(fr->res[i]);
    free(fr->row);
    memset(fr, 0, sizeof *fr);
}

int
jr_pg_fair_save(jr_backend *b, const jr_pg_fair_row *const *taken, int n,
                jr_err *err)
{
    char sclock[32], sinc[32];
    const char *params[5];
    PGresult *res;
    int i;

    for (i = 0; i < n; i++) {
        if (taken[i]->fkey == NULL)
            continue;           /* an aging queue's (aging.c) */
        snprintf(sclock, sizeof sclock, "%.17g", taken[i]->clock);
        snprintf(sinc, sizeof sinc, "%.17g", 1 / taken[i]->weight);
        params[0] = taken[i]->queue;
        params[1] = taken[i]->fkey;
        params[2] = sclock;
        params[3] = "1";
        params[4] = sinc;
        if ((res = jr_pg_run(b, &st_fair_pass, params, "counting a fair "
                             "key's start", err)) == NULL)
            return -1;
        PQclear(res);
    }
    return 0;
}

int
jr_pg_fair_set(jr_backend *b, const char *queue, const char *key,
               double weight, jr_err *err)
{
    char w[32];
    const char *params[3] = {queue, key, w};
    PGresult *res;

    snprintf(w, sizeof w, "%.17g", weight);
    if (jr_pg_ready(b, err) < 0 ||
        (res = jr_pg_run(b, &st_fair_set, params, "setting a fair weight",
                         err)) == NULL)
        return -1;
    PQclear(res);
    return 0;
}

/* each key (path $2) of queue $1 with jobs queued or running: ready,
 * running, weight as st_fair_keys' ($3, $4) */
static const pg_stmt st_fair_use = {"jr_fair_use", 4,
    "SELECT x.k, count(*) FILTER (WHERE x.state = 'queued'"
    "  AND x.run_at <= now()) AS w,"
    " count(*) FILTER (WHERE x.state = 'running'),"
    " coalesce(fk.weight, ($3::jsonb ->> x.k)::float8, $4::float8)"
    " FROM (SELECT coalesce(payload #>> $2::text[], '') AS k, state, run_at"
    "  FROM {{schema}}.jobs WHERE queue = $1::text"
    "  AND state IN ('queued', 'running')) x"
    " LEFT JOIN {{schema}}.fair_keys fk ON fk.queue = $1::text"
    " AND fk.key = x.k"
    " GROUP BY x.k, fk.weight ORDER BY w DESC, x.k COLLATE \"C\""};

int
jr_pg_fair_use(jr_backend *b, const jr_limit *f, jr_fair_use_cb cb,
               void *arg, jr_err *err)
{
    char path[220], sdef[32], *p;
    const char *params[4];
    PGresult *res;
    int i;

    if (f->fair_path == NULL || strncmp(f->scope, JR_LIMIT_QPREFIX, 6) != 0)
        return 0;
    snprintf(path, sizeof path, "{%s}", f->fair_path);
    for (p = path; *p; p++)
        if (*p == '.')
            *p = ',';
    snprintf(sdef, sizeof sdef, "%.17g", f->fair_default);
    params[0] = f->scope + 6;
    params[1] = path;
    params[2] = f->fair_weights ? f->fair_weights : "{}";
    params[3] = sdef;
    if (jr_pg_ready(b, err) < 0 ||
        (res = jr_pg_run(b, &st_fair_use, params, "reading a fair queue's "
                         "keys", err)) == NULL)
        return -1;
    for (i = 0; i < PQntuples(res); i++)
        if (cb(PQgetvalue(res, i, 0), atol(PQgetvalue(res, i, 1)),
               atol(PQgetvalue(res, i, 2)), strtod(PQgetvalue(res, i, 3),
                                                   NULL), arg) != 0)
            break;
    PQclear(res);
    return 0;
}
