/* fairset.c - a fair queue's operator side on PostgreSQL (docs/queues.md,
 * "Fair share"): `jobrunner fair set QUEUE KEY WEIGHT`, one transaction
 * run again when the server ends it as a deadlock's victim (also for
 * fairname.c's `fair set --name`), and each key's use for `stats` and
 * /metrics. Uses pg_int.h (fair.c's lock and re-tagging). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "postgres/pg_int.h"
#include "base/limit.h"

static const pg_stmt st_fair_keys_lock = {"jr_fair_keys_lock", 1,
    "SELECT 1 FROM {{schema}}.fair_keys WHERE queue = $1::text"
    " ORDER BY key FOR UPDATE"};

/* KEY as a job's key in the queue's scope is stored (fair_qkey) */
static const pg_stmt st_fair_set = {"jr_fair_set2", 3,
    "INSERT INTO {{schema}}.fair_keys (queue, key, weight)"
    " VALUES ($1::text, {{schema}}.fair_qkey($2::text), $3::float8)"
    " ON CONFLICT (queue, key) DO UPDATE SET weight = excluded.weight"};

/* fair set, once: a transaction that the server may end as a
 * deadlock's victim (jr_pg_fair_set runs it again) */
static int
fair_set_once(jr_backend *b, const char *queue, const char *key,
              double weight, jr_err *err)
{
    char w[32];
    const char *params[3] = {queue, key, w};
    PGresult *res;

    snprintf(w, sizeof w, "%.17g", weight);
    if (jr_pg_run_plain(b, "BEGIN", "setting a fair weight", err) < 0)
        return -1;
    /* under the limits' lock, as a claim's tags are given; the queue's
     * keys locked in key order before this one is written */
    if (jr_pg_fair_lock(b, err) < 0 ||
        (res = jr_pg_run(b, &st_fair_keys_lock, params, "setting a fair "
                         "weight", err)) == NULL)
        goto fail;
    PQclear(res);
    if ((res = jr_pg_run(b, &st_fair_set, params, "setting a fair weight",
                         err)) == NULL)
        goto fail;
    PQclear(res);
    /* the queue's queued jobs tagged by the weights now */
    if (jr_pg_fair_retag(b, queue, 0, NULL, err) < 0 ||
        jr_pg_run_plain(b, "COMMIT", "setting a fair weight", err) < 0)
        goto fail;
    return 0;
fail:
    jr_pg_rollback(b);
    return -1;
}

int
jr_pg_fair_weight_tx(jr_backend *b, jr_pg_weight_fn once, const char *scope,
                     const char *key, double weight, jr_err *err)
{
    int rc, own, tries = 0;

    if (jr_pg_ready(b, err) < 0)
        return -1;
    own = jr_pg_idle(b);
    do
        rc = once(b, scope, key, weight, err);
    while (rc < 0 && jr_pg_retry(b, own, &tries));
    return rc;
}

int
jr_pg_fair_set(jr_backend *b, const char *queue, const char *key,
               double weight, jr_err *err)
{
    return jr_pg_fair_weight_tx(b, fair_set_once, queue, key, weight, err);
}

/* each key (path $2) of queue $1 with jobs queued or running: ready,
 * running, weight as st_fair_keys' ($3, $4); a name's with fair weights
 * of its own are its (fairname.c's st_fn_use) */
static const pg_stmt st_fair_use = {"jr_fair_use3", 4,
    "SELECT x.k, count(*) FILTER (WHERE x.state = 'queued'"
    "  AND x.run_at <= now()) AS w,"
    " count(*) FILTER (WHERE x.state = 'running'),"
    " coalesce(fk.weight, ($3::jsonb ->> x.k)::float8, $4::float8)"
    " FROM (SELECT " JR_PG_FAIR_VAL("payload", "$2::text[]")
    " AS k, state, run_at"
    "  FROM {{schema}}.jobs WHERE queue = $1::text"
    "  AND state IN ('queued', 'running') AND name NOT IN (SELECT name"
    "  FROM {{schema}}.fair_names WHERE weights IS NOT NULL)) x"
    " LEFT JOIN {{schema}}.fair_keys fk ON fk.queue = $1::text"
    " AND fk.key = {{schema}}.fair_qkey(x.k)"
    " GROUP BY x.k, fk.weight ORDER BY w DESC, x.k COLLATE \"C\""};

int
jr_pg_fair_use(jr_backend *b, const jr_limit *f, jr_fair_use_cb cb,
               void *arg, jr_err *err)
{
    char path[220], sdef[32], *p;
    const char *params[4];
    PGresult *res;

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
    jr_pg_fair_use_rows(res, cb, arg);
    return 0;
}

void
jr_pg_fair_use_rows(PGresult *res, jr_fair_use_cb cb, void *arg)
{
    int i;

    for (i = 0; i < PQntuples(res); i++)
        if (cb(PQgetvalue(res, i, 0), atol(PQgetvalue(res, i, 1)),
               atol(PQgetvalue(res, i, 2)), strtod(PQgetvalue(res, i, 3),
                                                   NULL), arg) != 0)
            break;
    PQclear(res);
}
