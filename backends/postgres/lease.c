/* lease.c - the leases of the jobs a runner holds: their renewal, and
 * the rescue of jobs whose lease expired (their runner gone), each lost
 * attempt joining the job's history. Owns their statements. Uses
 * pg_int.h. */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "postgres/pg_int.h"

static const pg_stmt st_renew = {"jr_renew", 3,
    "UPDATE {{schema}}.jobs"
    " SET locked_until = now() + $2::float8 * interval '1 second'"
    " WHERE state = 'running' AND locked_by = $1::text"
    " AND id = ANY($3::bigint[])"};

/* The ids as a PostgreSQL array literal (malloc'd; NULL: no memory). */
static char *
ids_array(const int64_t *ids, int n)
{
    char *t = malloc((size_t)n * 21 + 3), *p = t;
    int i;

    if (t == NULL)
        return NULL;
    *p++ = '{';
    for (i = 0; i < n; i++)
        p += sprintf(p, i ? ",%lld" : "%lld", (long long)ids[i]);
    strcpy(p, "}");
    return t;
}

int
jr_pg_renew(jr_backend *b, const char *token, double lease, const int64_t *ids,
         int n, jr_err *err)
{
    char slease[32], *list;
    const char *params[3] = {token, slease, NULL};
    int rc;

    if (n <= 0)
        return 0;
    snprintf(slease, sizeof slease, "%.17g", lease);
    if (jr_pg_ready(b, err) < 0)
        return -1;
    if ((list = ids_array(ids, n)) == NULL)
        return jr_fail(err, JR_ENOMEM, "postgres: renewing leases: out of memory");
    params[2] = list;
    rc = jr_pg_run_count(b, &st_renew, params, "renewing leases", err);
    free(list);
    return rc;
}

/* The lost attempt joins the history: its runner was the lease's, its
 * worker and generation are not known. A running row with no lease at
 * all (a plain INSERT's state = 'running') is one no runner holds. */
static const pg_stmt st_rescue = {"jr_rescue", 0,
    "UPDATE {{schema}}.jobs j SET attempt_log = "
    JR_PG_ATTEMPT_LOG("CASE WHEN j.cancel_requested"
                " THEN 'cancelled: lease expired: runner lost'"
                " ELSE 'lease expired: runner lost' END",
                "extract(epoch FROM now() - j.started_at)::float8",
                "j.locked_by", "NULL::int", "NULL::text") ","
    " state = CASE WHEN cancel_requested THEN 'cancelled'"
    "  ELSE 'queued' END,"
    " finished_at = CASE WHEN cancel_requested THEN now() END,"
    " last_error = CASE WHEN cancel_requested"
    "  THEN 'cancelled: lease expired: runner lost'"
    "  ELSE 'lease expired: runner lost' END,"
    " locked_by = NULL, locked_until = NULL, updated_at = now()"
    " WHERE state = 'running'"
    " AND (locked_until < now() OR locked_until IS NULL)"};

int
jr_pg_rescue(jr_backend *b, jr_err *err)
{
    if (jr_pg_ready(b, err) < 0)
        return -1;
    return jr_pg_run_count(b, &st_rescue, NULL, "rescuing expired leases", err);
}
