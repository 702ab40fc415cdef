/* agestats.c - what `stats` shows of an aging queue on PostgreSQL
 * (docs/queues.md, "Priority aging"): its ready jobs counted by
 * effective priority (the priority less a level per period waited since
 * run_at, as aging.c orders them). Uses pg_int.h. */
#include <stdio.h>
#include <stdlib.h>

#include "postgres/pg_int.h"

/* queue $1's ready jobs by effective priority ($2 seconds a level), the
 * first $3 (NULL: all) */
static const pg_stmt st_aging_use = {"jr_aging_use", 3,
    "SELECT e, count(*), min(priority) FROM (SELECT priority::bigint -"
    " greatest(0, floor(extract(epoch FROM now() - run_at)"
    "  / $2::float8))::bigint AS e, priority FROM {{schema}}.jobs"
    " WHERE state = 'queued' AND queue = $1::text AND run_at <= now()) x"
    " GROUP BY e ORDER BY e LIMIT $3::bigint"};

int
jr_pg_aging_use(jr_backend *b, const char *queue, double aging, int max,
                jr_aging_use_cb cb, void *arg, jr_err *err)
{
    char sa[32], smax[16];
    const char *params[3];
    PGresult *res;
    int i;

    if (!(aging > 0))
        return jr_fail(err, JR_EINPUT, "queue '%s' does not age", queue);
    snprintf(sa, sizeof sa, "%.17g", aging);
    snprintf(smax, sizeof smax, "%d", max);
    params[0] = queue;
    params[1] = sa;
    params[2] = max > 0 ? smax : NULL;
    if (jr_pg_ready(b, err) < 0 ||
        (res = jr_pg_run(b, &st_aging_use, params, "reading an aging queue",
                         err)) == NULL)
        return -1;
    for (i = 0; i < PQntuples(res); i++)
        if (cb(strtoll(PQgetvalue(res, i, 0), NULL, 10),
               atol(PQgetvalue(res, i, 1)), atoi(PQgetvalue(res, i, 2)),
               arg) != 0)
            break;
    PQclear(res);
    return 0;
}
