/* fairname.c - fair share keyed by a job name on PostgreSQL
 * (docs/queues.md, "Fair share"): the runner's handlers' fair paths
 * written to fair_names (migration 32), which jobs_queue_known reads to
 * key a job of the name pushed into a fair queue by its own path over
 * the queue's, so every producer's push (the library's, SQL's push(), a
 * COPY) is keyed. A new or changed path keys the name's jobs not ended
 * in fair queues again; a name that loses its path gets its queue's
 * keys back. Owns the statements of fair_names; uses pg_int.h. */
#include <stdio.h>
#include <string.h>

#include "postgres/pg_int.h"

static const pg_stmt st_fn_put = {"jr_fn_put", 2,
    "INSERT INTO {{schema}}.fair_names (name, path)"
    " VALUES ($1::text, $2::text[]) ON CONFLICT (name) DO UPDATE"
    " SET path = excluded.path"
    " WHERE {{schema}}.fair_names.path <> excluded.path RETURNING 1"};
static const pg_stmt st_fn_drop = {"jr_fn_drop", 1,
    "DELETE FROM {{schema}}.fair_names WHERE name = $1::text RETURNING 1"};
/* the keys of name $1's jobs not ended in fair queues: at its path $2,
 * or with no path ($2 NULL) at their queue's */
static const pg_stmt st_fn_rekey = {"jr_fn_rekey", 2,
    "UPDATE {{schema}}.jobs j SET fair_key ="
    " coalesce(j.payload #>> coalesce($2::text[], f.path), '')"
    " FROM {{schema}}.fair_paths f"
    " WHERE f.queue = j.queue AND j.name = $1::text"
    " AND j.state IN ('queued', 'running', 'waiting')"};

int
jr_pg_fair_names(jr_backend *b, const jr_handler *h, int n, jr_err *err)
{
    const char *params[2];
    char path[220], *p;
    PGresult *res;
    int i, changed;

    if (jr_pg_ready(b, err) < 0 ||
        jr_pg_run_plain(b, "BEGIN", "writing the handlers' fair keys",
                        err) < 0)
        return -1;
    for (i = 0; i < n; i++) {
        params[0] = h[i].name;
        params[1] = NULL;
        if (h[i].fair != NULL) {
            snprintf(path, sizeof path, "{%s}", h[i].fair);
            for (p = path; *p; p++)
                if (*p == '.')
                    *p = ',';
            params[1] = path;
        }
        if ((res = jr_pg_run(b, h[i].fair ? &st_fn_put : &st_fn_drop,
                             params, "writing the handlers' fair keys",
                             err)) == NULL)
            break;
        changed = PQntuples(res) > 0;
        PQclear(res);
        if (changed &&
            (res = jr_pg_run(b, &st_fn_rekey, params, "keying a name's "
                             "jobs in fair queues", err)) == NULL)
            break;
        if (changed)
            PQclear(res);
    }
    if (i < n || jr_pg_run_plain(b, "COMMIT", "writing the handlers' "
                                 "fair keys", err) < 0) {
        jr_pg_rollback(b);
        return -1;
    }
    return 0;
}
