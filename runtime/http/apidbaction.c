/* apidbaction.c - the HTTP API's operator actions: a job's cancel,
 * retry and purge (POST /api/jobs/ID/...), POST /api/cancel, the dead
 * jobs' retry and purge, a queue's pause and resume, and the bulk actions
 * on what a job list's filter selects (cancel, retry, purge), counted.
 * Each route (checked in the loop), the operation it asks and the
 * operation's run function on the database thread. Uses apiroute.h,
 * apidb.h, backend.h, job.h. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http/apiroute.h"
#include "http/apidb.h"
#include "backend.h"
#include "base/job.h"

/* ---- on the database thread ---- */

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

static int
add_id(const jr_job_row *r, void *arg)
{
    jr_apireq *q = arg;

    q->ids[q->nids++] = r->id;
    return 0;
}

enum { B_CANCEL, B_RETRY, B_PURGE };   /* what a bulk action does */

/* A bulk action: the filter's jobs a page of JR_BULK_ROWS at a time
 * (newest first, by keyset; a retry oldest first, so that the jobs of a
 * sequence go back to its end in push order, as `dead retry --all`
 * puts them), each page acted on in one call, one
 * transaction; counted. After a page it waits as long as the page took
 * (0.2 s at most), so that the other writers get in (SQLite has one write
 * lock), and it ends there when the server stops (503, with the count so
 * far). Retry and purge touch dead jobs only: without a state they select
 * the dead ones. */
static int
bulk(jr_db *db, jr_apireq *q, int what, jr_err *e)
{
    static const char *const word[] = {"", "cancelled", "cancel_requested",
                                       "finished", "not_found"};
    long matched = 0, n[5] = {0};
    int out[JR_API_IDS_MAX], r;
    double t0, d;
    jr_list_filter filter = jr_apidb_filter(q), *f = &filter;

    if (what != B_CANCEL && f->state == NULL)
        f->state = "dead";
    f->limit = JR_BULK_ROWS;
    f->after_id = f->before_id = 0;
    f->oldest = what == B_RETRY;
    for (;;) {
        t0 = jr_mono();
        q->nids = 0;
        if (db->ops->list(db->b, f, add_id, q, e) < 0)
            return -1;
        if (q->nids == 0)
            break;
        matched += q->nids;
        if (f->oldest)
            f->after_id = q->ids[q->nids - 1];
        else
            f->before_id = q->ids[q->nids - 1];
        r = what == B_CANCEL ?
            db->ops->cancel(db->b, q->ids, q->nids, out, e) :
            what == B_RETRY ?
            db->ops->dead_retry(db->b, q->ids, q->nids, e) :
            db->ops->dead_delete(db->b, q->ids, q->nids, e);
        if (r < 0)
            return -1;
        for (int i = 0; what == B_CANCEL && i < q->nids; i++)
            n[out[i] >= 1 && out[i] <= 4 ? out[i] : 0]++;
        n[0] += what == B_CANCEL ? 0 : r;
        if (q->nids < JR_BULK_ROWS)
            break;
        if (atomic_load(&q->stop))
            return jr_fail(e, JR_EDB, "the runner is stopping: %ld jobs "
                           "matched so far, %ld %s", matched,
                           what == B_CANCEL ? n[1] + n[2] :
                           n[0], what == B_CANCEL ?
                           "cancelled or cancel requested" : what ==
                           B_RETRY ? "retried" : "purged");
        d = jr_mono() - t0;
        d = d > 0.2 ? 0.2 : d;
        nanosleep(&(struct timespec){0, (long)(d * 1e9)}, NULL);
    }
    jr_api_printf(&q->body, "{\"matched\":%ld", matched);
    if (what != B_CANCEL)
        jr_api_printf(&q->body, ",\"%s\":%ld}", what ==
                      B_RETRY ? "retried" : "purged", n[0]);
    for (int i = 1; what == B_CANCEL && i <= 4; i++)
        jr_api_printf(&q->body, ",\"%s\":%ld%s", word[i], n[i],
                      i == 4 ? "}" : "");
    return 0;
}

static int
bulk_cancel(jr_db *db, jr_apireq *q, jr_err *e)
{
    return bulk(db, q, B_CANCEL, e);
}

static int
bulk_retry(jr_db *db, jr_apireq *q, jr_err *e)
{
    return bulk(db, q, B_RETRY, e);
}

static int
bulk_purge(jr_db *db, jr_apireq *q, jr_err *e)
{
    return bulk(db, q, B_PURGE, e);
}

/* --- a queue's pause and resume, a dead job's retry and purge --- */

static int
pause_queue(jr_db *db, jr_apireq *q, int paused, jr_err *e)
{
    if ((paused ? db->ops->pause : db->ops->resume)(db->b, q->queue, e) < 0)
        return -1;
    jr_buf_put(&q->body, "{\"queue\":", 9);
    jr_api_str(&q->body, q->queue);
    jr_api_printf(&q->body, ",\"paused\":%s}", paused ? "true" : "false");
    return 0;
}

static int
queue_pause(jr_db *db, jr_apireq *q, jr_err *e)
{
    return pause_queue(db, q, 1, e);
}

static int
queue_resume(jr_db *db, jr_apireq *q, jr_err *e)
{
    return pause_queue(db, q, 0, e);
}

static int
dead_retry(jr_db *db, jr_apireq *q, jr_err *e)
{
    int n = db->ops->dead_retry(db->b, q->ids, q->nids, e);

    if (n < 0)
        return -1;
    jr_api_printf(&q->body, "{\"retried\":%d}", n);
    return 0;
}

static int
dead_purge(jr_db *db, jr_apireq *q, jr_err *e)
{
    int n = q->nids > 0 ? db->ops->dead_delete(db->b, q->ids, q->nids, e) :
            db->ops->dead_purge(db->b, q->older_than, e);

    if (n < 0)
        return -1;
    jr_api_printf(&q->body, "{\"purged\":%d}", n);
    return 0;
}

/* The operations (api.h): name, reader, scope, run. */
#define W JR_SCOPE_WRITE
static const jr_apiop op_cancel      = {"cancel",      0, W, outcome_list, 0};
static const jr_apiop op_retry       = {"retry",       0, W, dead_retry, 0};
static const jr_apiop op_purge       = {"purge",       0, W, dead_purge, 0};
static const jr_apiop op_pause       = {"pause",       0, W, queue_pause, 0};
static const jr_apiop op_resume      = {"resume",      0, W, queue_resume, 0};
static const jr_apiop op_bulk_cancel = {"bulk_cancel", 0, W, bulk_cancel, 0};
static const jr_apiop op_bulk_retry  = {"bulk_retry",  0, W, bulk_retry, 0};
static const jr_apiop op_bulk_purge  = {"bulk_purge",  0, W, bulk_purge, 0};
#undef W

/* ---- the routes, in the loop ---- */

static void
r_job_action(jr_apicall *c, const jr_apiop *op)
{
    jr_apireq *q;
    jr_apibody b;
    int64_t id;

    if (jr_api_job_id(c->req, c->arg, &id) < 0 ||
        (q = jr_api_with_body(c, op, &b)) == NULL)
        return;
    q->ids[0] = id;
    q->nids = 1;
    jr_api_ask(c, q);
}

static void r_job_cancel(jr_apicall *c) { r_job_action(c, &op_cancel); }
static void r_job_purge(jr_apicall *c) { r_job_action(c, &op_purge); }
static void r_job_retry(jr_apicall *c) { r_job_action(c, &op_retry); }

static void
r_cancel(jr_apicall *c)
{
    jr_apibody b;
    jr_apireq *q = jr_api_with_body(c, &op_cancel, &b);

    if (q != NULL && (!b.has_ids || q->nids == 0)) {
        jr_http_error(c->req, 400, "give the jobs to cancel: {\"ids\": "
                      "[1, 2]}");
        free(q);
    } else if (q != NULL) {
        jr_api_ask(c, q);
    }
}

static void
r_dead_retry(jr_apicall *c)
{
    jr_apibody b;
    jr_apireq *q = jr_api_with_body(c, &op_retry, &b);

    if (q != NULL && b.has_ids == b.all) {
        jr_http_error(c->req, 400, "give either {\"ids\": [1, 2]} or "
                      "{\"all\": true}");
        free(q);
    } else if (q != NULL) {
        if (b.all)
            q->nids = -1;
        jr_api_ask(c, q);
    }
}

static void
r_dead_purge(jr_apicall *c)
{
    jr_apibody b;
    jr_apireq *q = jr_api_with_body(c, &op_purge, &b);

    if (q != NULL && (b.has_ids + b.all + (b.older_than >= 0) != 1 ||
                      (b.has_ids && q->nids == 0))) {
        jr_http_error(c->req, 400, "give one of {\"ids\": [1, 2]}, "
                      "{\"all\": true} or {\"older_than\": SECONDS}");
        free(q);
    } else if (q != NULL) {
        q->older_than = b.all ? 0 : b.older_than;
        jr_api_ask(c, q);
    }
}

static void
r_queue(jr_apicall *c, const jr_apiop *op)
{
    jr_apireq *q;
    jr_apibody b;
    jr_err err;

    if (jr_name_check(c->arg, "queue name", &err) < 0) {
        jr_http_error(c->req, 400, "%s", err.msg);
        return;
    }
    if ((q = jr_api_with_body(c, op, &b)) != NULL) {
        memcpy(q->queue, c->arg, strlen(c->arg) + 1);  /* checked: <= 128 */
        jr_api_ask(c, q);
    }
}

static void r_pause(jr_apicall *c) { r_queue(c, &op_pause); }
static void r_resume(jr_apicall *c) { r_queue(c, &op_resume); }

/* POST /api/bulk/ACTION?FILTER: the list's filter, at least one part. */
static void
r_bulk(jr_apicall *c, const jr_apiop *op)
{
    jr_apireq *q = jr_api_req(c, op);
    jr_apibody b;

    if (q == NULL)
        return;
    if (jr_api_filters(c->req, c->query, q) < 0) {
        free(q);
        return;
    }
    if (jr_apibody_parse(c->req, &b, q) < 0 || b.has_ids || b.all ||
        b.older_than >= 0) {
        jr_http_error(c->req, 400, "%s", b.why[0] ? b.why : "a bulk action "
                      "takes the list's filter in the query, and no body");
        free(q);
        return;
    }
    if (!q->state[0] && !q->name[0] && !q->queue[0] && !q->where[0]) {
        jr_http_error(c->req, 400, "give a filter (state, name, queue or "
                      "where) in the query: a bulk action never takes "
                      "every job");
        free(q);
        return;
    }
    jr_api_ask(c, q);
}

static void r_bulk_cancel(jr_apicall *c) { r_bulk(c, &op_bulk_cancel); }
static void r_bulk_retry(jr_apicall *c) { r_bulk(c, &op_bulk_retry); }
static void r_bulk_purge(jr_apicall *c) { r_bulk(c, &op_bulk_purge); }

const jr_apiroute jr_apiroutes_action[] = {
    {"jobs/*/cancel", 1, r_job_cancel},
    {"jobs/*/retry", 1, r_job_retry},
    {"jobs/*/purge", 1, r_job_purge},
    {"cancel", 1, r_cancel},
    {"dead/retry", 1, r_dead_retry},
    {"dead/purge", 1, r_dead_purge},
    {"queues/*/pause", 1, r_pause},
    {"queues/*/resume", 1, r_resume},
    {"bulk/cancel", 1, r_bulk_cancel},
    {"bulk/retry", 1, r_bulk_retry},
    {"bulk/purge", 1, r_bulk_purge},
    {NULL, 0, NULL}
};
