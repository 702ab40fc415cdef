/* apidb.c - the database half of the HTTP API: runs one jr_apireq on the
 * database thread (jr_dbthread_request) through the storage interface and
 * writes the reply's JSON: jobs, queues, dead jobs, stats, pushes and
 * outcomes, with apidbrows.c's writers of the rows; the schedules, limits
 * and bulk actions are apidbsched.c's, the workflows apidbflow.c's. The
 * table of the operations (api.h's jr_apiop_*) is at its end. Never runs
 * in the loop. Uses api.h, apidb.h, backend.h, json.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/api.h"
#include "http/apidb.h"
#include "backend.h"
#include "base/flow.h"
#include "config/schedules.h"
#include "lua/json.h"

typedef jr_apiwalk walk;
typedef jr_apitotals totals;

static int
gauges(jr_db *db, jr_apireq *q, jr_err *e)
{
    jr_buf *b = &q->body, two[2] = {{0}, {0}};
    int rc;

    jr_api_printf(b, "# HELP jobrunner_jobs Jobs in the database by job "
                  "name and state (the whole database: the same from every "
                  "runner).\n# TYPE jobrunner_jobs gauge\n");
    if (db->ops->stats(db->b, jr_apidb_gauge_name, q, e) < 0)
        return -1;
    jr_api_printf(b, "# HELP jobrunner_queue_jobs Jobs in the database by "
                  "queue and state (the whole database).\n"
                  "# TYPE jobrunner_queue_jobs gauge\n");
    two[0] = *b;                /* the body grows in two[0] */
    jr_api_printf(&two[1], "# HELP jobrunner_queue_paused 1 while the queue "
                  "is paused.\n# TYPE jobrunner_queue_paused gauge\n");
    rc = db->ops->queue_list(db->b, jr_apidb_gauge_queue, two, e);
    *b = two[0];
    if (rc == 0)
        jr_buf_put(b, two[1].p, two[1].len);
    jr_buf_free(&two[1]);
    return rc < 0 ? -1 : 0;
}

static int
stats(jr_db *db, jr_apireq *q, jr_err *e)
{
    totals t = {{q, 0, NULL}, {0}};
    jr_buf *b = &q->body;
    jr_buf names = {0};

    jr_buf_put(b, "{\"names\":{", 10);
    if (db->ops->stats(db->b, jr_apidb_stat_row, &t, e) < 0)
        return -1;
    jr_buf_put(b, "},", 2);
    jr_apidb_counts(b, t.n, JR_ST_NAME);
    jr_buf_put(b, ",\"queues\":[", 11);
    t.w.n = 0;
    if (db->ops->queue_list(db->b, jr_apidb_queue_row, &t.w, e) < 0)
        return -1;
    jr_buf_put(b, "]}", 2);
    jr_buf_free(&names);
    return 0;
}

static int
outcome_list(jr_db *db, jr_apireq *q, jr_err *e)
{
    static const char *const word[] = {"", "cancelled", "cancel_requested",
                                       "finished", "not_found"};
    int out[JR_API_IDS_MAX];

    if (db->ops->cancel(db->b, q->ids, q->nids, out, e) < 0)
        return -1;
    jr_buf_put(&q->body, "{\"jobs\":[", 9);
    for (int i = 0; i < q->nids; i++)
        jr_api_printf(&q->body, "%s{\"id\":%lld,\"outcome\":\"%s\"}",
                      i ? "," : "", (long long)q->ids[i],
                      out[i] >= 1 && out[i] <= 4 ? word[out[i]] : "");
    jr_buf_put(&q->body, "]}", 2);
    return 0;
}

/* PUSH: pushes[0..npushes) in one transaction; 201 with their ids. */
static int
push(jr_db *db, jr_apireq *q, jr_err *e)
{
    static const char *const said[] = {"new", "duplicate", "replaced"};
    int i, o;

    if (db->ops->push(db->b, q->pushes, q->npushes, q->ids, e) < 0)
        return -1;
    q->nids = q->npushes;
    q->status = 201;
    jr_buf_put(&q->body, q->many ? "{\"ids\":[" : "{\"id\":",
               q->many ? 8 : 6);
    for (i = 0; i < q->npushes; i++)
        jr_api_printf(&q->body, "%s%lld", i ? "," : "", (long long)q->ids[i]);
    jr_buf_put(&q->body, q->many ? "],\"outcomes\":[" : ",\"outcome\":",
               q->many ? 14 : 11);
    for (i = 0; i < q->npushes; i++) {
        o = q->outcomes[i];
        jr_api_printf(&q->body, "%s\"%s\"", i ? "," : "",
                      said[o == JR_PUSH_DUPLICATE ? 1 :
                           o == JR_PUSH_REPLACED ? 2 : 0]);
    }
    jr_buf_put(&q->body, q->many ? "]}" : "}", q->many ? 2 : 1);
    return 0;
}

/* JOB: the job; a long poll (wait) first marks it to be kept after
 * success (result_ttl), as `jobrunner wait` does, and notes whether it
 * ended. */
static int
show(jr_db *db, jr_apireq *q, jr_err *e)
{
    walk w = {q, 0, NULL};
    jr_outcome o;
    int64_t last;

    if (q->wait > 0 && q->keep > 0) {
        if (db->ops->outcomes(db->b, q->ids, 1, q->keep, &o, &last, e) < 0)
            return -1;
        free(o.result);
        free(o.error);
        q->keep = 0;            /* once */
    }
    if (db->ops->show(db->b, q->ids[0], jr_apidb_job_row, &w, e) < 0)
        return -1;
    return jr_apiflow_links(db, q, e);
}

/* OUTCOMES: which of ids[0..nids) have ended (gone: a plain success, or
 * pruned); the body stays empty. */
static int
ended(jr_db *db, jr_apireq *q, jr_err *e)
{
    jr_outcome *o = calloc((size_t)q->nids + 1, sizeof *o);
    int64_t last;
    int i, st;

    if (o == NULL)
        return jr_fail(e, JR_ENOMEM, "out of memory");
    if (db->ops->outcomes(db->b, q->ids, q->nids, 0, o, &last, e) < 0) {
        free(o);
        return -1;
    }
    for (i = 0; i < q->nids; i++) {
        st = o[i].state;
        q->ended[i] = st < 0 || st == JR_STATE_COMPLETED ||
                      st == JR_STATE_DEAD || st == JR_STATE_CANCELLED;
        free(o[i].result);
        free(o[i].error);
    }
    free(o);
    return 0;
}


static const char *
opt(const char *s)
{
    return s[0] ? s : NULL;
}

/* q's list filter; "" matches any. */
static jr_list_filter
list_filter(const jr_apireq *q)
{
    jr_list_filter f = {opt(q->state), opt(q->name), opt(q->queue),
                        q->limit, opt(q->where), q->before_id, q->after_id};

    return f;
}

/* JOBS: a page of the job list; a page back (after_id) comes oldest
 * first from the database and is turned round here, newest first as
 * always. */
static int
jobs(jr_db *db, jr_apireq *q, jr_err *e)
{
    jr_list_filter f = list_filter(q);
    size_t at[JR_API_LIST_MAX + 1];
    walk w = {q, 0, f.after_id > 0 ? at : NULL};
    jr_buf out = {0};
    int i;

    jr_buf_put(&q->body, "[", 1);
    if (db->ops->list(db->b, &f, jr_apidb_job_row, &w, e) < 0)
        return -1;
    if (w.at == NULL || w.n < 2) {
        jr_buf_put(&q->body, "]", 1);
        return 0;
    }
    at[w.n] = q->body.len + 1;          /* as if a comma followed */
    jr_buf_put(&out, "[", 1);
    for (i = w.n - 1; i >= 0; i--) {
        jr_buf_put(&out, q->body.p + at[i], at[i + 1] - 1 - at[i]);
        jr_buf_put(&out, i ? "," : "]", 1);
    }
    if (out.oom) {
        jr_buf_free(&out);
        q->body.oom = 1;
        return 0;
    }
    jr_buf_free(&q->body);
    q->body = out;
    return 0;
}

/* DEAD and QUEUES: the whole list. */
static int
dead(jr_db *db, jr_apireq *q, jr_err *e)
{
    walk w = {q, 0, NULL};

    jr_buf_put(&q->body, "[", 1);
    if (db->ops->dead_list(db->b, q->limit, jr_apidb_dead_row, &w, e) < 0)
        return -1;
    jr_buf_put(&q->body, "]", 1);
    return 0;
}

static int
queues(jr_db *db, jr_apireq *q, jr_err *e)
{
    walk w = {q, 0, NULL};

    jr_buf_put(&q->body, "[", 1);
    if (db->ops->queue_list(db->b, jr_apidb_queue_row, &w, e) < 0)
        return -1;
    jr_buf_put(&q->body, "]", 1);
    return 0;
}

static int
bulk(jr_db *db, jr_apireq *q, jr_err *e)
{
    jr_list_filter f = list_filter(q);

    return jr_apidb_bulk(db, q, &f, e);
}

/* The operations (api.h): name; reader, 1 when it may run on the reads'
 * own connection (batch, schedules and limits only read too, but on the
 * runner's); scope; run. */
#define R JR_SCOPE_READ
#define W JR_SCOPE_WRITE
#define P JR_SCOPE_PUSH
const jr_apiop jr_apiop_stats       = {"stats",       1, R, stats};
const jr_apiop jr_apiop_jobs        = {"jobs",        1, R, jobs};
const jr_apiop jr_apiop_job         = {"job",         1, R, show};
const jr_apiop jr_apiop_dead        = {"dead",        1, R, dead};
const jr_apiop jr_apiop_queues      = {"queues",      1, R, queues};
const jr_apiop jr_apiop_gauges      = {"gauges",      1, R, gauges};
const jr_apiop jr_apiop_outcomes    = {"outcomes",    1, R, ended};
const jr_apiop jr_apiop_batch       = {"batch",       0, R, jr_apiflow_batch};
const jr_apiop jr_apiop_schedules   = {"schedules",   0, R, jr_apidb_schedule};
const jr_apiop jr_apiop_limits      = {"limits",      0, R, jr_apidb_limits};
const jr_apiop jr_apiop_push        = {"push",        0, P, push};
const jr_apiop jr_apiop_flow        = {"flow",        0, P, jr_apiflow_push};
const jr_apiop jr_apiop_cancel      = {"cancel",      0, W, outcome_list};
const jr_apiop jr_apiop_retry       = {"retry",       0, W, jr_apidb_retry};
const jr_apiop jr_apiop_purge       = {"purge",       0, W, jr_apidb_purge};
const jr_apiop jr_apiop_pause       = {"pause",       0, W, jr_apidb_pause};
const jr_apiop jr_apiop_resume      = {"resume",      0, W, jr_apidb_resume};
const jr_apiop jr_apiop_sched_ctl   = {"sched_ctl",   0, W, jr_apidb_schedule};
const jr_apiop jr_apiop_bulk_cancel = {"bulk_cancel", 0, W, bulk};
const jr_apiop jr_apiop_bulk_retry  = {"bulk_retry",  0, W, bulk};
const jr_apiop jr_apiop_bulk_purge  = {"bulk_purge",  0, W, bulk};
#undef R
#undef W
#undef P

void
jr_apireq_free(jr_apireq *q)
{
    if (q == NULL)
        return;
    jr_buf_free(&q->body);
    free(q->mem);
    if (q->flow != NULL) {
        jr_flow_free(q->flow);
        free(q->flow);
    }
    if (q->schedules != NULL) {
        jr_schedules_free(q->schedules);
        free(q->schedules);
    }
    free(q);
}

void
jr_apidb_run(jr_db *db, void *arg)
{
    jr_apireq *q = arg;
    jr_err e = {0};

    q->status = 200;
    if (q->op->run(db, q, &e) == 0 && !q->body.oom)
        return;
    jr_buf_reset(&q->body);
    q->body.oom = 0;
    q->status = e.code == JR_ENOTFOUND ? 404 : e.code == JR_EINPUT ?
                (q->op == &jr_apiop_sched_ctl ? 409 : 400) :
                e.code == 0 ? 500 : 503;
    jr_buf_put(&q->body, "{\"error\":", 9);
    jr_api_str(&q->body, e.code ? e.msg : "out of memory");
    jr_buf_put(&q->body, "}", 1);
}
