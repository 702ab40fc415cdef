/* flow.c - workflows on PostgreSQL (docs/workflows.md): the parents and
 * batch of the jobs a push inserts (the schema's link(), in the push's
 * transaction), the batches a push makes, and the reads of show and
 * batch show. What a job's end decides (children made ready, cancelled
 * or dead, batch callbacks pushed once) is the schema's: flow_settle,
 * migration 11, run by the trigger jobs_end, migration 13. Owns the flow
 * statements; uses conn.c and push.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "postgres/pg_int.h"
#include "postgres/arrays.h"
#include "base/seqkey.h"

static const pg_stmt st_batch_new = {"jr_flow_batch_new",
    5,
    "INSERT INTO {{schema}}.batches (on_complete, on_success, payload,"
    " queue, results) VALUES ($1::text, $2::text,"
    " coalesce($3::jsonb, '{}'), coalesce($4::text, 'default'),"
    " $5::boolean) RETURNING id"};

#define LINK "{{schema}}.link($1::bigint, $2::bigint[], $3::text," \
    " $4::bigint)"
static const pg_stmt st_link = {"jr_flow_link", 4, "SELECT " LINK};

/* A job with parents, put to wait by link(), takes no turn of its fair
 * key while it waits (docs/queues.md, "Fair share": a job not ready
 * takes none): its push's turn given back after the link (migration
 * 42's fair_seq_give: when its tag is its key's last, as a batch's jobs
 * are given back last first before their links), in the link's round
 * trip; once queued, the next claim of its queue tags it (flow_edge
 * leaves it untagged). A job in no fair queue pays one look-up of its
 * row. */
static const pg_stmt st_link_give = {"jr_flow_link_give", 4,
    "SELECT {{schema}}.fair_seq_give(ARRAY[" LINK "])"};

/* 1 if p uses a workflow option or a sequence. */
static int
flow_push(const jr_push *p)
{
    return p->nafter > 0 || p->nafter_local > 0 || p->batch != 0 ||
           p->batch_new != NULL || p->sequence != NULL;
}

/* 1 if p has parents: link() puts it to wait. */
static int
has_after(const jr_push *p)
{
    return p->nafter > 0 || p->nafter_local > 0;
}

/* 1 if p may wait once linked: it goes to the end of a sequence
 * (on_conflict keep: a job that replaces none), or has parents. */
static int
may_wait(const jr_push *p)
{
    return (p->sequence != NULL && p->on_conflict == JR_CONFLICT_KEEP) ||
           has_after(p);
}

int
jr_pg_flow_any(const jr_push *const *pp, int n)
{
    int i;

    for (i = 0; i < n; i++)
        if (flow_push(pp[i]))
            return 1;
    return 0;
}

/* Makes the batch spec stands for, once a push call. */
static int
batch_make(jr_backend *b, jr_batch_spec *spec, jr_err *err)
{
    const char *params[5];
    PGresult *res;

    if (spec->id != 0)
        return 0;
    params[0] = spec->on_complete;
    params[1] = spec->on_success;
    params[2] = spec->payload;
    params[3] = spec->queue;
    params[4] = spec->results ? "true" : "false";
    if ((res = jr_pg_run(b, &st_batch_new, params, "making a batch", err))
        == NULL)
        return -1;
    spec->id = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    return 0;
}

/* The parent ids of pp[i] as an array literal into a (ids: the call's). */
static int
parents_of(const jr_push *const *pp, int i, const int64_t *ids, jr_buf *a,
           jr_err *err)
{
    const jr_push *p = pp[i];
    char num[24];
    int k, at;

    for (k = 0; k < p->nafter; k++) {
        snprintf(num, sizeof num, "%lld", (long long)p->after[k]);
        sb_num(a, num);
    }
    for (k = 0; k < p->nafter_local; k++) {
        if ((at = p->after_local[k]) < 0 || at >= i)
            return jr_fail(err, JR_EINPUT, "job '%s': after: %d is not an "
                           "earlier job of the push", p->name, at);
        snprintf(num, sizeof num, "%lld", (long long)ids[at]);
        sb_num(a, num);
    }
    return 0;
}

/* The workflow options of pp[i], just inserted as ids[i]. */
static int
link_one(jr_backend *b, const jr_push *const *pp, int i, int64_t *ids,
         jr_err *err)
{
    const jr_push *p = pp[i];
    const char *params[4];
    char id[24], bid[24];
    jr_buf a = {0};
    PGresult *res;
    int rc;

    if (p->batch_new != NULL && batch_make(b, p->batch_new, err) < 0)
        return -1;
    if (p->sequence != NULL && p->batch == 0 && p->batch_new == NULL)
        return jr_pg_seq_link(b, p, &ids[i], err);  /* none of link()'s */
    if (parents_of(pp, i, ids, &a, err) < 0) {
        free(a.p);
        return -1;
    }
    snprintf(id, sizeof id, "%lld", (long long)ids[i]);
    snprintf(bid, sizeof bid, "%lld", (long long)(p->batch_new != NULL ?
                                                   p->batch_new->id :
                                                   p->batch));
    params[0] = id;
    params[1] = sb_array(&a);
    params[2] = jr_opf_name(p->on_parent_failure ? p->on_parent_failure :
                            b->opf);
    params[3] = strcmp(bid, "0") != 0 ? bid : NULL;
    if (a.oom) {
        free(a.p);
        return jr_fail(err, JR_ENOMEM, "postgres: linking a job: out of "
                       "memory");
    }
    res = jr_pg_run(b, has_after(p) ? &st_link_give : &st_link, params,
                    "linking a job", err);
    free(a.p);
    if (res == NULL) {
        /* link() names the ids; the job's name goes in front, instead of
         * the id of a row that is rolled back */
        if (strcmp(b->sqlstate, "22023") == 0) {
            const char *m = b->pgmsg;
            if (strncmp(m, "jobrunner.link: ", 16) == 0)
                m += 16;
            if (strncmp(m, "job ", 4) == 0 && strstr(m, ": ") != NULL)
                m = strstr(m, ": ") + 2;
            jr_fail(err, JR_EINPUT, "job '%s': %s", p->name, m);
        }
        return -1;
    }
    rc = PQntuples(res) == 1 ? 0 : jr_fail(err, JR_EDB, "postgres: linking "
                                           "a job: no answer");
    PQclear(res);
    if (rc == 0 && p->sequence != NULL)
        rc = jr_pg_seq_link(b, p, &ids[i], err);
    return rc;
}

/* When one of pp[0..n) may wait once linked (may_wait): the ids of
 * all, in push order, into *out (malloc'd; NULL when none). Returns how
 * many (0: no such job), or -1 with err set. */
static int
seq_ids(const jr_push *const *pp, int n, const int64_t *ids, int64_t **out,
        jr_err *err)
{
    int i, any = 0;

    *out = NULL;
    for (i = 0; i < n && !any; i++)
        any = may_wait(pp[i]);
    if (!any)
        return 0;
    if ((*out = malloc((size_t)n * sizeof **out)) == NULL)
        return jr_fail(err, JR_ENOMEM, "postgres: out of memory");
    memcpy(*out, ids, (size_t)n * sizeof **out);
    return n;
}

int
jr_pg_flow_link(jr_backend *b, const jr_push *const *pp, int n,
             int64_t *ids, jr_err *err)
{
    int64_t *seq = NULL;
    int i, k = 0;

    for (i = 0; i < n; i++)
        if (pp[i]->batch_new != NULL)
            pp[i]->batch_new->id = 0;
    /* a batch's jobs hold the tags of their push, given in push order,
     * and a job put to wait behind its sequence or for its parents gives
     * its turn back only when it was its key's last (sequence_put,
     * st_link_give): a batch with jobs that may wait gives its jobs'
     * turns back first, the last first, so that one waiting leaves no
     * hole in its key's tags; the ones still queued after the links are tagged again, in
     * push order, as if tagged once linked (the ids copied: a replace
     * changes ids[i] to the job replaced) */
    if (n > 1 && (k = seq_ids(pp, n, ids, &seq, err)) < 0)
        return -1;
    if (k > 0 && jr_pg_seq_turns(b, seq, k, 0, err) < 0)
        goto fail;
    for (i = 0; i < n; i++)
        if (flow_push(pp[i]) && link_one(b, pp, i, ids, err) < 0)
            goto fail;
    if (k > 0 && jr_pg_seq_turns(b, seq, k, 1, err) < 0)
        goto fail;
    free(seq);
    return 0;
fail:
    free(seq);
    return -1;
}

int
jr_pg_insert_linked(jr_backend *b, const jr_push *const *pp, int n,
                 int64_t *ids, jr_err *err)
{
    int64_t *own = NULL;
    const jr_push **qpp = NULL;
    jr_push *q = NULL;
    jr_pg_costed ct;
    int rc;

    if ((rc = jr_pg_seq_defaults_pp(b, pp, n, &q, &qpp, err)) < 0)
        return -1;
    if (rc > 0) {               /* their handlers' sequences */
        rc = jr_pg_insert_linked(b, qpp, n, ids, err);
        free(qpp);
        jr_seq_apply_free(q, n);
        return rc;
    }
    if (!jr_pg_flow_any(pp, n))
        return jr_pg_insert_all(b, pp, n, ids, err);
    if (ids == NULL &&
        (ids = own = calloc((size_t)n, sizeof *ids)) == NULL)
        return jr_fail(err, JR_ENOMEM, "postgres: out of memory");
    if (jr_pg_cost_track(pp, n, &ct, err) < 0) {
        free(own);
        return -1;
    }
    rc = jr_pg_insert_all(b, ct.pp, n, ids, err);
    if (rc == 0)
        rc = jr_pg_flow_link(b, ct.pp, n, ids, err);
    if (rc == 0)
        rc = jr_pg_set_costs(b, ct.pp, n, ids, ct.oc, err);
    jr_pg_cost_done(pp, n, &ct, rc);
    free(own);
    return rc;
}

/* jr_pg_push for pushes with workflow options: the rows and their links in
 * one transaction. */
int
jr_pg_push_linked(jr_backend *b, const jr_push *const *pp, int n, int64_t *ids,
               jr_err *err)
{
    int rc;

    if (jr_pg_run_plain(b, "BEGIN", "pushing jobs", err) < 0)
        return -1;
    rc = jr_pg_insert_linked(b, pp, n, ids, err);
    if (rc == 0 && jr_pg_run_plain(b, "COMMIT", "pushing jobs", err) < 0)
        rc = -1;
    if (rc < 0)
        jr_pg_rollback(b);
    return rc;
}

/* ---- the reads: a job's links, a batch ---- */

static const pg_stmt st_links = {"jr_flow_links", 1,
    "SELECT 'p', d.parent_id, coalesce(d.parent_state, j.state, 'gone')"
    " FROM {{schema}}.job_deps d LEFT JOIN {{schema}}.jobs j"
    " ON j.id = d.parent_id WHERE d.child_id = $1::bigint"
    " UNION ALL SELECT 'c', d.child_id, coalesce(j.state, 'gone')"
    " FROM {{schema}}.job_deps d LEFT JOIN {{schema}}.jobs j"
    " ON j.id = d.child_id WHERE d.parent_id = $1::bigint"
    " UNION ALL SELECT 'b', m.batch_id, NULL FROM {{schema}}.batch_jobs m"
    " WHERE m.job_id = $1::bigint ORDER BY 1 DESC, 2"};

int
jr_pg_links(jr_backend *b, int64_t id, jr_link_cb cb, void *arg, jr_err *err)
{
    char sid[24];
    const char *params[1] = {sid};
    PGresult *res;
    int i, n;

    snprintf(sid, sizeof sid, "%lld", (long long)id);
    if (jr_pg_ready(b, err) < 0 ||
        (res = jr_pg_run(b, &st_links, params, "reading a job's links", err))
        == NULL)
        return -1;
    n = PQntuples(res);
    for (i = 0; i < n; i++)
        if (cb(PQgetvalue(res, i, 0)[0],
               strtoll(PQgetvalue(res, i, 1), NULL, 10),
               PQgetisnull(res, i, 2) ? NULL : PQgetvalue(res, i, 2),
               arg) != 0)
            break;
    PQclear(res);
    return 0;
}

static const pg_stmt st_batch_row = {"jr_flow_batch_row",
    1,
    "SELECT id, on_complete, on_success, payload::text, queue,"
    " results::int, total, pending, completed, dead, cancelled,"
    " extract(epoch FROM created_at)::float8,"
    " coalesce(extract(epoch FROM finished_at)::float8, 0),"
    " coalesce(complete_job, 0), coalesce(success_job, 0)"
    " FROM {{schema}}.batches WHERE id = $1::bigint"};

static const pg_stmt st_members = {"jr_flow_members", 1,
    "SELECT m.job_id, coalesce(m.state, j.state, 'gone')"
    " FROM {{schema}}.batch_jobs m LEFT JOIN {{schema}}.jobs j"
    " ON j.id = m.job_id WHERE m.batch_id = $1::bigint ORDER BY m.job_id"};

/* Column c of row 0 of res: NULL when null. */
static const char *
col(const PGresult *res, int c)
{
    return PQgetisnull(res, 0, c) ? NULL : PQgetvalue(res, 0, c);
}

int
jr_pg_batch_show(jr_backend *b, int64_t id, jr_batch_cb bcb, jr_link_cb mcb,
              void *arg, jr_err *err)
{
    char sid[24];
    const char *params[1] = {sid};
    jr_batch_row r;
    PGresult *res;
    int i, n, stop;

    snprintf(sid, sizeof sid, "%lld", (long long)id);
    if (jr_pg_ready(b, err) < 0 ||
        (res = jr_pg_run(b, &st_batch_row, params, "reading a batch", err))
        == NULL)
        return -1;
    if (PQntuples(res) == 0) {
        PQclear(res);
        return jr_fail(err, JR_ENOTFOUND, "no batch %lld", (long long)id);
    }
    r.id = strtoll(col(res, 0), NULL, 10);
    r.on_complete = col(res, 1);
    r.on_success = col(res, 2);
    r.payload = col(res, 3);
    r.queue = col(res, 4);
    r.results = atoi(col(res, 5));
    r.total = atol(col(res, 6));
    r.pending = atol(col(res, 7));
    r.completed = atol(col(res, 8));
    r.dead = atol(col(res, 9));
    r.cancelled = atol(col(res, 10));
    r.created_at = strtod(col(res, 11), NULL);
    r.finished_at = strtod(col(res, 12), NULL);
    r.complete_job = strtoll(col(res, 13), NULL, 10);
    r.success_job = strtoll(col(res, 14), NULL, 10);
    stop = bcb(&r, arg);
    PQclear(res);
    if (stop || (res = jr_pg_run(b, &st_members, params, "reading a batch",
                              err)) == NULL)
        return stop ? 0 : -1;
    n = PQntuples(res);
    for (i = 0; i < n; i++)
        if (mcb('m', strtoll(PQgetvalue(res, i, 0), NULL, 10),
                PQgetvalue(res, i, 1), arg) != 0)
            break;
    PQclear(res);
    return 0;
}
