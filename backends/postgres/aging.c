/* aging.c - priority aging on PostgreSQL (docs/queues.md, "Priority
 * aging"): in a claim under limits (limits.c), an aging queue's first
 * ready jobs by their effective priority (the priority less a level per
 * period waited since run_at), locked (FOR UPDATE SKIP LOCKED). Within
 * one priority the oldest job is the most aged, so the first cap jobs of
 * each priority (a seek of jobs_claim per priority, then its range) hold
 * the first cap of the queue: the cost follows the priorities with ready
 * jobs, not the backlog. The rows join fair.c's (jr_pg_fair_rows), with
 * no fair key. Uses pg_int.h, base/limit.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "postgres/pg_int.h"
#include "base/limit.h"

/* the first $3 ready jobs of queue $2 aging a level per $9 seconds, by
 * effective priority, run_at, id, with the filters of limits.c's
 * st_lim_candidates ($1 names, $4 names blocked, $5 names or queues and
 * keys blocked, $6/$7 per-key rates, $8 now) */
static const pg_stmt st_aged_jobs = {"jr_aged_jobs", 10,
    "WITH RECURSIVE lv(p) AS ("
    "  SELECT min(priority) FROM {{schema}}.jobs"
    "  WHERE state = 'queued' AND queue = $2::text"
    " UNION ALL SELECT (SELECT min(priority) FROM {{schema}}.jobs"
    "  WHERE state = 'queued' AND queue = $2::text AND priority > lv.p)"
    "  FROM lv WHERE lv.p IS NOT NULL)"
    " SELECT s.id, s.name, s.queue, s.limit_key, coalesce(s.cost, 1)"
    " FROM lv CROSS JOIN LATERAL (SELECT id, name, queue, limit_key,"
    "  priority, run_at, cost FROM {{schema}}.jobs"
    "  WHERE state = 'queued' AND queue = $2::text AND priority = lv.p"
    "  AND run_at <= now()"
    JR_PG_UNEXPIRED
    JR_PG_PICK_FILTER
    "  ORDER BY run_at, id LIMIT $3::int FOR UPDATE SKIP LOCKED) s"
    " WHERE lv.p IS NOT NULL"
    " ORDER BY s.priority::float8 - greatest(0, floor(extract(epoch FROM"
    "  now() - s.run_at) / $9::float8)), s.run_at, s.id LIMIT $3::int"};

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

int
jr_pg_aging_any(const jr_claim_spec *spec)
{
    int i;

    for (i = 0; spec && i < spec->nlimits; i++)
        if (spec->limits[i].aging > 0 &&
            strncmp(spec->limits[i].scope, JR_LIMIT_QPREFIX, 6) == 0)
            return 1;
    return 0;
}

int
jr_pg_aging_read(jr_backend *b, const jr_claim_spec *spec, int max,
                 const char *const *lists, jr_pg_fair_rows *fr, jr_err *err)
{
    const char *params[10];
    char scap[16], sage[32];
    jr_pg_fair_row *grown;
    PGresult *res;
    int i, r, nr, cap;

    for (i = 0; i < spec->nlimits; i++) {
        const jr_limit *l = &spec->limits[i];
        if (!(l->aging > 0) || strncmp(l->scope, JR_LIMIT_QPREFIX, 6) != 0 ||
            (cap = queue_cap(spec, l->scope + 6, max)) <= 0 ||
            fr->nres == (int)(sizeof fr->res / sizeof fr->res[0]))
            continue;
        snprintf(scap, sizeof scap, "%d", cap);
        snprintf(sage, sizeof sage, "%.17g", l->aging);
        params[0] = lists[0];
        params[1] = l->scope + 6;
        params[2] = scap;
        params[3] = lists[1];
        params[4] = lists[2];
        params[5] = lists[3];
        params[6] = lists[4];
        params[7] = lists[5];
        params[8] = sage;
        params[9] = lists[6];
        if ((res = jr_pg_run(b, &st_aged_jobs, params, "claiming jobs of "
                             "an aging queue", err)) == NULL)
            return -1;
        fr->res[fr->nres++] = res;
        nr = PQntuples(res);
        if (fr->n + nr > fr->cap) {
            int ncap = (fr->n + nr) * 2;
            if ((grown = realloc(fr->row, (size_t)ncap * sizeof *grown)) ==
                NULL)
                return jr_fail(err, JR_ENOMEM, "postgres: claiming jobs: "
                               "out of memory");
            fr->row = grown;
            fr->cap = ncap;
        }
        for (r = 0; r < nr; r++) {
            jr_pg_fair_row *row = &fr->row[fr->n++];
            memset(row, 0, sizeof *row);
            row->id = PQgetvalue(res, r, 0);
            row->name = PQgetvalue(res, r, 1);
            row->queue = PQgetvalue(res, r, 2);
            row->key = PQgetisnull(res, r, 3) ? NULL : PQgetvalue(res, r, 3);
            row->cost = atol(PQgetvalue(res, r, 4));
            row->rank = r + 1;
        }
    }
    return 0;
}
