/* pushafter.c - what a push writes after its insert, in its
 * transaction: a cost (and a limit's size checked first), an expiry and
 * deadline, a trace context, a result_ttl (jr_pg_insert_all); a push
 * with a result_ttl in a transaction of its own (jr_pg_push_kept). Few
 * pushes have any: push.c's plain batch writes none of these. Uses
 * arrays.h, conn.c. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "postgres/pg_int.h"
#include "postgres/arrays.h"

/* a push's result_ttl: set after its insert (few pushes have one) */
static const pg_stmt st_result_ttl = {"jr_result_ttl", 2,
    "UPDATE {{schema}}.jobs j SET result_ttl = u.ttl"
    " FROM unnest($1::bigint[], $2::float8[]) AS u(id, ttl)"
    " WHERE j.id = u.id"};

/* 1 if p's job may take the place of another's (on_conflict): its cost
 * then follows what became of it. */
static int
may_replace(const jr_push *p)
{
    return p->on_conflict != JR_CONFLICT_KEEP &&
           (p->unique_key != NULL || p->sequence != NULL);
}

/* 1 if a push of pp[0..n) has a cost, or may replace a job. */
static int
any_cost(const jr_push *const *pp, int n)
{
    int i;

    for (i = 0; i < n; i++)
        if (pp[i]->cost > 1 || may_replace(pp[i]))
            return 1;
    return 0;
}

/* 1 if a push of pp[0..n) has a result_ttl, an expiry, a deadline, a
 * trace context or a cost: what is set after the insert. */
int
jr_pg_any_ttl(const jr_push *const *pp, int n)
{
    int i;

    for (i = 0; i < n; i++)
        if (pp[i]->result_ttl > 0 || JR_PUSH_EXPIRY(pp[i]) ||
            pp[i]->traceparent != NULL)
            return 1;
    return any_cost(pp, n);
}

int
jr_pg_cost_track(const jr_push *const *pp, int n, jr_pg_costed *t,
                 jr_err *err)
{
    int i;

    memset(t, 0, sizeof *t);
    t->pp = pp;
    if (n <= 0 || !any_cost(pp, n))
        return 0;
    if ((t->q = malloc((size_t)n * sizeof *t->q)) == NULL ||
        (t->own = malloc((size_t)n * sizeof *t->own)) == NULL ||
        (t->oc = calloc((size_t)n, sizeof *t->oc)) == NULL) {
        jr_pg_cost_done(pp, n, t, -1);
        return jr_fail(err, JR_ENOMEM, "postgres: pushing: out of memory");
    }
    for (i = 0; i < n; i++) {
        t->q[i] = *pp[i];
        t->q[i].outcome = &t->oc[i];
        t->own[i] = &t->q[i];
    }
    t->pp = (const jr_push *const *)t->own;
    return 0;
}

void
jr_pg_cost_done(const jr_push *const *pp, int n, jr_pg_costed *t, int rc)
{
    int i;

    for (i = 0; rc == 0 && t->oc != NULL && i < n; i++)
        if (pp[i]->outcome != NULL)
            *pp[i]->outcome = t->oc[i];
    free(t->q);
    free(t->own);
    free(t->oc);
    memset(t, 0, sizeof *t);
}

/* its expiry and deadline, likewise: $2 epoch seconds, $3 seconds from
 * now, $4 the deadline, 0 for none */
static const pg_stmt st_expiry = {"jr_expiry", 4,
    "UPDATE {{schema}}.jobs j SET expires_at = CASE"
    "  WHEN u.at > 0 THEN to_timestamp(u.at)"
    "  WHEN u.inn > 0 THEN now() + u.inn * interval '1 second' END,"
    " deadline = CASE WHEN u.dl > 0 THEN u.dl END"
    " FROM unnest($1::bigint[], $2::float8[], $3::float8[], $4::float8[])"
    " AS u(id, at, inn, dl) WHERE j.id = u.id"};

/* a push's trace context (docs/tracing.md): set after its insert, as the
 * result_ttl (few pushes have one; the plain COPY and insert stay as
 * they are) */
static const pg_stmt st_trace = {"jr_push_trace", 2,
    "UPDATE {{schema}}.jobs j SET trace = u.t"
    " FROM unnest($1::bigint[], $2::text[]) AS u(id, t)"
    " WHERE j.id = u.id"};

/* Sets the expiry and deadline of the jobs of pp[0..n) that have one,
 * just inserted as ids[0..n) (not a duplicate's holder, which keeps its
 * own). */
static int
set_expiry(jr_backend *b, const jr_push *const *pp, int n,
           const int64_t *ids, jr_err *err)
{
    const char *params[4];
    char num[32];
    jr_buf a[4];
    int i, k, rc, any = 0;

    memset(a, 0, sizeof a);
    for (i = 0; i < n; i++) {
        const jr_push *p = pp[i];
        if (!JR_PUSH_EXPIRY(p) ||
            (p->outcome != NULL && *p->outcome != JR_PUSH_NEW))
            continue;
        any = 1;
        snprintf(num, sizeof num, "%lld", (long long)ids[i]);
        sb_num(&a[0], num);
        snprintf(num, sizeof num, "%.17g", p->expires_at);
        sb_num(&a[1], num);
        snprintf(num, sizeof num, "%.17g", p->expires_in);
        sb_num(&a[2], num);
        snprintf(num, sizeof num, "%.17g", p->deadline);
        sb_num(&a[3], num);
    }
    for (k = 0; k < 4; k++)
        params[k] = sb_array(&a[k]);
    rc = !any ? 0
         : a[0].oom || a[1].oom || a[2].oom || a[3].oom
         ? jr_fail(err, JR_ENOMEM, "postgres: pushing: out of memory")
         : jr_pg_run_count(b, &st_expiry, params, "setting an expiry",
                           err) < 0 ? -1 : 0;
    for (k = 0; k < 4; k++)
        free(a[k].p);
    return rc;
}

/* The trace contexts of the pushes of pp that have one, by ids. */
static int
set_traces(jr_backend *b, const jr_push *const *pp, int n,
           const int64_t *ids, jr_err *err)
{
    const char *params[2];
    char num[32];
    jr_buf s = {0}, t = {0}, v = {0};
    int i, rc = 0, any = 0;

    for (i = 0; i < n; i++) {
        if (pp[i]->traceparent == NULL || (pp[i]->outcome != NULL &&
            *pp[i]->outcome == JR_PUSH_DUPLICATE))  /* not its job */
            continue;
        any = 1;
        snprintf(num, sizeof num, "%lld", (long long)ids[i]);
        sb_num(&s, num);
        jr_buf_reset(&v);
        jr_buf_put(&v, pp[i]->traceparent, strlen(pp[i]->traceparent));
        if (pp[i]->tracestate != NULL) {
            jr_buf_put(&v, " ", 1);
            jr_buf_put(&v, pp[i]->tracestate, strlen(pp[i]->tracestate));
        }
        jr_buf_put(&v, "", 1);
        sb_elem(&t, v.oom ? "" : v.p);
    }
    if (any) {
        params[0] = sb_array(&s);
        params[1] = sb_array(&t);
        rc = s.oom || t.oom || v.oom ?
             jr_fail(err, JR_ENOMEM, "postgres: pushing: out of memory")
             : jr_pg_run_count(b, &st_trace, params, "setting the trace "
                               "context", err) < 0 ? -1 : 0;
    }
    free(s.p);
    free(t.p);
    free(v.p);
    return rc;
}

/* limits by cost: a limit of name $1 or queue $2 whose size is below
 * cost $3 (limit_sizes) */
static const pg_stmt st_cost_over = {"jr_cost_over", 3,
    "SELECT scope, size, what FROM {{schema}}.limit_sizes"
    " WHERE scope IN ($1::text, 'queue:' || $2::text) AND size < $3::bigint"
    " ORDER BY size LIMIT 1"};

/* the costs, set after the insert on the jobs that hold the pushes (few
 * pushes have one) */
static const pg_stmt st_cost_set = {"jr_cost_set", 2,
    "UPDATE {{schema}}.jobs j SET cost = u.cost"
    " FROM unnest($1::bigint[], $2::int[]) AS u(id, cost)"
    " WHERE j.id = u.id AND j.state IN ('queued', 'waiting')"};

/* Refuses a push of pp[0..n) whose cost is over a limit's size. */
static int
costs_check(jr_backend *b, const jr_push *const *pp, int n, jr_err *err)
{
    const char *params[3];
    char num[24];
    PGresult *res;
    int i;

    for (i = 0; i < n; i++) {
        if (!(pp[i]->cost > 1))
            continue;
        if (jr_push_check(pp[i], b->max_payload, err) < 0)
            return -1;
        snprintf(num, sizeof num, "%ld", pp[i]->cost);
        params[0] = pp[i]->name;
        params[1] = pp[i]->queue ? pp[i]->queue : "default";
        params[2] = num;
        if ((res = jr_pg_run(b, &st_cost_over, params, "reading the limits' "
                             "sizes", err)) == NULL)
            return -1;
        if (PQntuples(res) > 0) {
            jr_fail(err, JR_EINPUT, "job '%s': cost %ld is over limit '%s', "
                    "whose %s holds %s at most: it could never start",
                    pp[i]->name, pp[i]->cost, PQgetvalue(res, 0, 0),
                    PQgetvalue(res, 0, 2), PQgetvalue(res, 0, 1));
            PQclear(res);
            return -1;
        }
        PQclear(res);
    }
    return 0;
}

int
jr_pg_set_costs(jr_backend *b, const jr_push *const *pp, int n,
                const int64_t *ids, const int *oc, jr_err *err)
{
    const char *params[2];
    char num[24];
    jr_buf s = {0}, t = {0};
    int i, rc;

    for (i = 0; i < n; i++) {
        /* a duplicate's holder keeps its own; a replaced job takes the
         * push's, 1 (NULL) included */
        if ((oc != NULL && oc[i] == JR_PUSH_DUPLICATE) ||
            (!(pp[i]->cost > 1) &&
             (oc == NULL || oc[i] != JR_PUSH_REPLACED)))
            continue;
        snprintf(num, sizeof num, "%lld", (long long)ids[i]);
        sb_num(&s, num);
        snprintf(num, sizeof num, "%ld", pp[i]->cost);
        sb_num(&t, pp[i]->cost > 1 ? num : "NULL");
    }
    if (s.len == 0)
        return 0;
    params[0] = sb_array(&s);
    params[1] = sb_array(&t);
    rc = s.oom || t.oom ? jr_fail(err, JR_ENOMEM, "postgres: pushing: out "
                                  "of memory")
         : jr_pg_run_count(b, &st_cost_set, params, "setting costs", err) <
           0 ? -1 : 0;
    free(s.p);
    free(t.p);
    return rc;
}

int
jr_pg_insert_all(jr_backend *b, const jr_push *const *pp, int n, int64_t *ids,
              jr_err *err)
{
    const char *params[2];
    char num[32];
    jr_buf s = {0}, t = {0};
    int64_t *own = NULL;
    jr_pg_costed ct;
    const jr_push *const *orig = pp;
    int i, k, rc;

    if (n <= 0 || !jr_pg_any_ttl(pp, n))
        return jr_pg_insert_jobs(b, pp, n, ids, err);
    if (costs_check(b, pp, n, err) < 0)
        return -1;
    if (ids == NULL &&
        (ids = own = malloc((size_t)n * sizeof *ids)) == NULL)
        return jr_fail(err, JR_ENOMEM, "postgres: pushing %d jobs: out of "
                       "memory", n);
    if (jr_pg_cost_track(pp, n, &ct, err) < 0) {
        free(own);
        return -1;
    }
    pp = ct.pp;
    if ((rc = jr_pg_insert_jobs(b, pp, n, ids, err)) == 0 &&
        !jr_pg_flow_any(pp, n))         /* else insert_linked, after */
        rc = jr_pg_set_costs(b, pp, n, ids, ct.oc, err);
    if (rc == 0)                /* by the outcomes: a duplicate's holder */
        rc = set_expiry(b, pp, n, ids, err);    /* keeps its own */
    if (rc == 0)
        rc = set_traces(b, pp, n, ids, err);
    jr_pg_cost_done(orig, n, &ct, rc);
    pp = orig;
    if (rc == 0) {
        for (i = 0; i < n; i++) {
            if (!(pp[i]->result_ttl > 0))
                continue;
            snprintf(num, sizeof num, "%lld", (long long)ids[i]);
            sb_num(&s, num);
            snprintf(num, sizeof num, "%.17g", pp[i]->result_ttl);
            sb_num(&t, num);
        }
        k = (int)s.len;
        params[0] = sb_array(&s);
        params[1] = sb_array(&t);
        rc = s.oom || t.oom ? jr_fail(err, JR_ENOMEM, "postgres: pushing: "
                                      "out of memory")
             : k == 0 ? 0      /* costs only */
             : jr_pg_run_count(b, &st_result_ttl, params, "setting result_ttl",
                            err) < 0 ? -1 : 0;
    }
    free(s.p);
    free(t.p);
    free(own);
    return rc;
}

/* Pushes with a result_ttl: the insert and the ttl in one transaction. */
int
jr_pg_push_kept(jr_backend *b, const jr_push *const *pp, int n,
                int64_t *ids, jr_err *err)
{
    int rc;

    if (jr_pg_run_plain(b, "BEGIN", "pushing jobs", err) < 0)
        return -1;
    rc = jr_pg_insert_all(b, pp, n, ids, err);
    if (rc == 0 && jr_pg_run_plain(b, "COMMIT", "pushing jobs", err) < 0)
        rc = -1;
    if (rc < 0)
        jr_pg_rollback(b);
    return rc;
}

