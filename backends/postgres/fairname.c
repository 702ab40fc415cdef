/* fairname.c - fair share keyed by a job name on PostgreSQL
 * (docs/queues.md, "Fair share"): the runner's handlers' fair paths, and
 * the table form's weights and default, written to fair_names
 * (migrations 32, 34), which jobs_queue_known reads to key a job of the
 * name pushed into a fair queue by its own path over the queue's, so
 * every producer's push (the library's, SQL's push(), a COPY) is keyed.
 * A name with weights of its own keys its jobs in its scope (NAME,
 * chr(31), value) and makes fair a queue it is pushed into (path '{}').
 * A new or changed path keys the name's jobs not ended in fair queues
 * again; a name that loses its path gets its queue's keys back. The
 * weight of a key in a name's scope (fair set --name, fair_name_keys),
 * which the tags read (fair_name_w, migration 34); a change of it, or of
 * the name's path or weights, tags the name's queued jobs again (fair.c).
 * Owns the statements of fair_names and fair_name_keys; uses pg_int.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "postgres/pg_int.h"

#define NOT_ENDED " state IN ('queued', 'running', 'waiting')"

static const pg_stmt st_fn_put = {"jr_fn_put", 4,
    "INSERT INTO {{schema}}.fair_names (name, path, weights, dflt)"
    " VALUES ($1::text, $2::text[], $3::jsonb, $4::float8)"
    " ON CONFLICT (name) DO UPDATE SET path = excluded.path,"
    " weights = excluded.weights, dflt = excluded.dflt"
    " WHERE {{schema}}.fair_names.path <> excluded.path"
    " OR {{schema}}.fair_names.weights IS DISTINCT FROM excluded.weights"
    " OR {{schema}}.fair_names.dflt IS DISTINCT FROM excluded.dflt"
    " RETURNING 1"};
static const pg_stmt st_fn_drop = {"jr_fn_drop", 1,
    "DELETE FROM {{schema}}.fair_names WHERE name = $1::text RETURNING 1"};
/* the keys of name $1's jobs not ended in fair queues: at its path $2
 * (in its scope when $3: it has weights), or with no path ($2 NULL) at
 * their queue's */
static const pg_stmt st_fn_rekey = {"jr_fn_rekey4", 3,
    "UPDATE {{schema}}.jobs j SET fair_key = "
    JR_PG_FAIR_KEY("j.name", "j.payload", "f.path", "$2::text[]",
                   "CASE WHEN $3::bool THEN '{}'::jsonb END")
    " FROM {{schema}}.fair_paths f"
    " WHERE f.queue = j.queue AND j.name = $1::text AND j." NOT_ENDED};
/* the queues name $1 (with weights) has jobs not ended in, made fair */
static const pg_stmt st_fn_make_all = {"jr_fn_make_all", 1,
    "INSERT INTO {{schema}}.fair_paths (queue, path)"
    " SELECT DISTINCT queue, '{}'::text[] FROM {{schema}}.jobs"
    " WHERE name = $1::text AND" NOT_ENDED " ON CONFLICT DO NOTHING"};
/* the keys of the other jobs of queues made fair by a name */
static const pg_stmt st_fn_fill_all = {"jr_fn_fill_all3", 0,
    "UPDATE {{schema}}.jobs j SET fair_key = coalesce((SELECT "
    JR_PG_FAIR_KEY("j.name", "j.payload", "'{}'::text[]", "fn.path",
                   "fn.weights")
    " FROM {{schema}}.fair_names fn WHERE fn.name = j.name), '')"
    " FROM {{schema}}.fair_paths f WHERE f.queue = j.queue"
    " AND cardinality(f.path) = 0 AND j.fair_key IS NULL AND j." NOT_ENDED};
/* name $1's queued jobs (of key $2 in its scope, NULL: all) untagged,
 * its keys started again from their queues' clocks; their queues (each
 * tagged again by jr_pg_fair_tag_queue) */
static const pg_stmt st_fn_untag = {"jr_fn_untag", 2,
    "WITH l AS (SELECT queue, key FROM {{schema}}.fair_keys"
    "  WHERE left(key, length($1::text) + 1) = $1::text || chr(31)"
    "  AND ($2::text IS NULL OR key = $1::text || chr(31) || $2::text)"
    "  ORDER BY queue, key FOR UPDATE),"
    " r AS (UPDATE {{schema}}.fair_keys k SET pass = 0 FROM l"
    "  WHERE k.queue = l.queue AND k.key = l.key RETURNING 1),"
    " u AS (UPDATE {{schema}}.jobs SET fair_tag = NULL WHERE id IN"
    "  (SELECT id FROM {{schema}}.jobs"
    "  WHERE name = $1::text AND state = 'queued' AND fair_tag IS NOT NULL"
    "  AND ($2::text IS NULL OR fair_key = $1::text || chr(31) || $2::text)"
    "  FOR UPDATE SKIP LOCKED)"
    "  RETURNING queue)"
    " SELECT DISTINCT queue FROM u"};
static const pg_stmt st_fn_set = {"jr_fn_set", 3,
    "INSERT INTO {{schema}}.fair_name_keys (name, key, weight)"
    " VALUES ($1::text, $2::text, $3::float8)"
    " ON CONFLICT (name, key) DO UPDATE SET weight = excluded.weight"};
static const pg_stmt st_fn_queues = {"jr_fn_queues", 0,
    "SELECT queue FROM {{schema}}.fair_paths WHERE cardinality(path) = 0"
    " ORDER BY queue COLLATE \"C\""};
static const pg_stmt st_fn_names = {"jr_fn_names", 0,
    "SELECT name FROM {{schema}}.fair_names WHERE weights IS NOT NULL"
    " ORDER BY name COLLATE \"C\""};
/* each key in name $1's scope with jobs queued or running: ready,
 * running, weight as fair_name_w's (migration 34) */
static const pg_stmt st_fn_use = {"jr_fn_use", 1,
    "SELECT x.k, count(*) FILTER (WHERE x.state = 'queued'"
    "  AND x.run_at <= now()) AS w,"
    " count(*) FILTER (WHERE x.state = 'running'),"
    " coalesce(fk.weight, (n.weights ->> x.k)::float8, n.dflt, 1)"
    " FROM (SELECT substr(fair_key, length($1::text) + 2) AS k, state,"
    "  run_at FROM {{schema}}.jobs WHERE name = $1::text"
    "  AND state IN ('queued', 'running') AND fair_key IS NOT NULL"
    "  AND left(fair_key, length($1::text) + 1) = $1::text || chr(31)) x"
    " LEFT JOIN {{schema}}.fair_names n ON n.name = $1::text"
    " LEFT JOIN {{schema}}.fair_name_keys fk ON fk.name = $1::text"
    " AND fk.key = x.k"
    " GROUP BY x.k, fk.weight, n.weights, n.dflt"
    " ORDER BY w DESC, x.k COLLATE \"C\""};

/* Runs st with params, discarding its rows: 1 if it returned some, 0
 * if none, -1 with err set. */
static int
exec(jr_backend *b, const pg_stmt *st, const char *const *params,
     const char *what, jr_err *err)
{
    PGresult *res = jr_pg_run(b, st, params, what, err);
    int rows;

    if (res == NULL)
        return -1;
    rows = PQntuples(res) > 0;
    PQclear(res);
    return rows;
}

/* Tags name's queued jobs (of key in its scope; NULL: all) again, by
 * its weights now, in the open transaction. */
static int
retag(jr_backend *b, const char *name, const char *key, jr_err *err)
{
    const char *params[2] = {name, key};
    PGresult *res = jr_pg_run(b, &st_fn_untag, params, "tagging a fair "
                              "name's jobs again", err);
    int i, rc = 0;

    if (res == NULL)
        return -1;
    for (i = 0; rc == 0 && i < PQntuples(res); i++)
        rc = jr_pg_fair_tag_queue(b, PQgetvalue(res, i, 0), err);
    PQclear(res);
    return rc;
}

/* Records handler h's fair option; when it changed, keys its jobs. */
static int
name_put(jr_backend *b, const jr_handler *h, jr_err *err)
{
    const char *params[4];
    char path[220], def[32], *p;
    int changed, weighted = h->fair && h->fair_weights;

    params[0] = h->name;
    params[1] = params[2] = params[3] = NULL;
    if (h->fair != NULL) {
        snprintf(path, sizeof path, "{%s}", h->fair);
        for (p = path; *p; p++)
            if (*p == '.')
                *p = ',';
        params[1] = path;
    }
    if (weighted) {
        snprintf(def, sizeof def, "%.17g", h->fair_default);
        params[2] = h->fair_weights;
        params[3] = def;
    }
    if ((changed = exec(b, h->fair ? &st_fn_put : &st_fn_drop, params,
                        "writing the handlers' fair keys", err)) <= 0)
        return changed;
    if (weighted && exec(b, &st_fn_make_all, params, "making fair a "
                         "name's queues", err) < 0)
        return -1;
    params[2] = weighted ? "t" : "f";
    if (exec(b, &st_fn_rekey, params, "keying a name's jobs in fair "
             "queues", err) < 0)
        return -1;
    if (weighted && exec(b, &st_fn_fill_all, NULL, "keying the jobs of a "
                         "name's queues", err) < 0)
        return -1;
    return retag(b, h->name, NULL, err);
}

int
jr_pg_fair_names(jr_backend *b, const jr_handler *h, int n, jr_err *err)
{
    int i;

    if (jr_pg_ready(b, err) < 0 ||
        jr_pg_run_plain(b, "BEGIN", "writing the handlers' fair keys",
                        err) < 0)
        return -1;
    for (i = 0; i < n; i++)
        if (name_put(b, &h[i], err) < 0)
            break;
    if (i < n || jr_pg_run_plain(b, "COMMIT", "writing the handlers' "
                                 "fair keys", err) < 0) {
        jr_pg_rollback(b);
        return -1;
    }
    return 0;
}

/* fair set --name, once (jr_pg_fair_name_set runs a deadlock's victim
 * again, as fair.c's fair set) */
static int
name_set_once(jr_backend *b, const char *name, const char *key,
              double weight, jr_err *err)
{
    char w[32];
    const char *params[3] = {name, key, w};

    snprintf(w, sizeof w, "%.17g", weight);
    if (jr_pg_run_plain(b, "BEGIN", "setting a name's fair weight", err) < 0)
        return -1;
    /* under the limits' lock, as a claim's tags are given (fair.c) */
    if (jr_pg_fair_lock(b, err) < 0 || exec(b, &st_fn_set, params, "setting a name's fair weight",
             err) < 0 || retag(b, name, key, err) < 0 ||
        jr_pg_run_plain(b, "COMMIT", "setting a name's fair weight",
                        err) < 0) {
        jr_pg_rollback(b);
        return -1;
    }
    return 0;
}

int
jr_pg_fair_name_set(jr_backend *b, const char *name, const char *key,
                    double weight, jr_err *err)
{
    return jr_pg_fair_weight_tx(b, name_set_once, name, key, weight, err);
}

int
jr_pg_fair_name_list(jr_backend *b, int names, jr_fair_queue_cb cb,
                     void *arg, jr_err *err)
{
    PGresult *res;
    int i;

    if (jr_pg_ready(b, err) < 0 ||
        (res = jr_pg_run(b, names ? &st_fn_names : &st_fn_queues, NULL,
                         "reading the names with fair weights", err)) == NULL)
        return -1;
    for (i = 0; i < PQntuples(res); i++)
        if (cb(PQgetvalue(res, i, 0), arg) != 0)
            break;
    PQclear(res);
    return 0;
}

int
jr_pg_fair_name_use(jr_backend *b, const char *name, jr_fair_use_cb cb,
                    void *arg, jr_err *err)
{
    const char *params[1] = {name};
    PGresult *res;

    if (jr_pg_ready(b, err) < 0 ||
        (res = jr_pg_run(b, &st_fn_use, params, "reading a fair name's "
                         "keys", err)) == NULL)
        return -1;
    jr_pg_fair_use_rows(res, cb, arg);
    return 0;
}
