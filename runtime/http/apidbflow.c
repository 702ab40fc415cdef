/* apidbflow.c - the HTTP API's workflows: a job's parents, children and
 * batch (for GET /api/jobs/ID), GET /api/batches/ID (counts and members)
 * and POST /api/flows (a graph pushed in one transaction). Each route
 * (checked in the loop), the operation it asks and the operation's run
 * function on the database thread. Uses apiroute.h, backend.h, flow.h,
 * config.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>

#include "http/apiroute.h"
#include "backend.h"
#include "base/flow.h"
#include "config/config.h"

/* ---- workflows: a job's links, GET /api/batches/ID, POST /api/flows ---- */

typedef struct links {
    jr_buf *b;
    int     np, nc;
    int64_t batch;
    jr_buf  kids;
} links;

static int
link_row(int kind, int64_t id, const char *state, void *arg)
{
    links *l = arg;
    jr_buf *to = kind == 'p' ? l->b : &l->kids;
    int n = kind == 'p' ? l->np++ : l->nc++;

    if (kind == 'b') {
        l->batch = id;
        return 0;
    }
    jr_api_printf(to, "%s{\"id\":%lld,\"state\":", n ? "," : "",
                  (long long)id);
    jr_api_str(to, state);
    jr_buf_put(to, "}", 1);
    return 0;
}

int
jr_apiflow_links(jr_db *db, jr_apireq *q, jr_err *e)
{
    links l = {&q->body, 0, 0, 0, {0}};
    int rc;

    if (q->body.len == 0 || q->body.p[q->body.len - 1] != '}')
        return 0;
    q->body.len--;              /* the job object opens again */
    jr_buf_put(&q->body, ",\"parents\":[", 12);
    rc = db->ops->links(db->b, q->ids[0], link_row, &l, e);
    jr_buf_put(&q->body, "],\"children\":[", 14);
    if (l.kids.len > 0)
        jr_buf_put(&q->body, l.kids.p, l.kids.len);
    jr_buf_free(&l.kids);
    if (l.batch != 0)
        jr_api_printf(&q->body, "],\"batch\":%lld}", (long long)l.batch);
    else
        jr_buf_put(&q->body, "],\"batch\":null}", 15);
    return rc;
}

static int
batch_row(const jr_batch_row *r, void *arg)
{
    jr_buf *b = arg;

    jr_api_printf(b, "{\"id\":%lld,\"counts\":{\"pending\":%ld,"
                  "\"completed\":%ld,\"dead\":%ld,\"cancelled\":%ld},"
                  "\"total\":%ld,\"on_complete\":", (long long)r->id,
                  r->pending, r->completed, r->dead, r->cancelled, r->total);
    jr_api_str(b, r->on_complete);
    jr_buf_put(b, ",\"on_success\":", 14);
    jr_api_str(b, r->on_success);
    jr_api_printf(b, ",\"done\":%s,\"finished_at\":",
                  r->finished_at > 0 ? "true" : "false");
    jr_api_time(b, r->finished_at);
    jr_buf_put(b, ",\"members\":[", 12);
    return 0;
}

static int
member_row(int kind, int64_t id, const char *state, void *arg)
{
    jr_buf *b = arg;

    (void)kind;
    jr_api_printf(b, "%s{\"id\":%lld,\"state\":",
                  b->p[b->len - 1] == '[' ? "" : ",", (long long)id);
    jr_api_str(b, state);
    jr_buf_put(b, "}", 1);
    return 0;
}

static int
batch(jr_db *db, jr_apireq *q, jr_err *e)
{
    if (db->ops->batch_show(db->b, q->ids[0], batch_row, member_row,
                            &q->body, e) < 0) {
        if (e->code == JR_ENOTFOUND)
            q->status = 404;
        return -1;
    }
    jr_buf_put(&q->body, "]}", 2);
    return 0;
}

static int
flow_push(jr_db *db, jr_apireq *q, jr_err *e)
{
    jr_flow *f = q->flow;
    int64_t *ids = calloc((size_t)f->n, sizeof *ids);
    int i;

    if (ids == NULL)
        return jr_fail(e, JR_ENOMEM, "out of memory");
    if (db->ops->push(db->b, f->jobs, f->n, ids, e) < 0) {
        free(ids);
        return -1;
    }
    q->status = 201;
    jr_buf_put(&q->body, "{\"ids\":{", 8);
    for (i = 0; i < f->n; i++) {
        jr_api_printf(&q->body, "%s", i ? "," : "");
        jr_api_str(&q->body, f->refs[i]);
        jr_api_printf(&q->body, ":%lld", (long long)ids[i]);
    }
    if (f->has_batch)
        jr_api_printf(&q->body, "},\"batch\":%lld}", (long long)f->batch.id);
    else
        jr_buf_put(&q->body, "},\"batch\":null}", 15);
    free(ids);
    return 0;
}

/* The operations (api.h): name, reader (a batch reads on the runner's
 * connection), scope, run. */
static const jr_apiop op_batch = {"batch", 0, JR_SCOPE_READ, batch, 0};
static const jr_apiop op_flow  = {"flow",  0, JR_SCOPE_PUSH, flow_push, 0};

/* ---- the routes, in the loop ---- */

/* POST /api/flows: a flow (docs/workflows.md), read here, pushed in one
 * transaction; a refused flow is a 400 naming the job and why. */
static void
r_flow(jr_apicall *c)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(c->req);
    size_t n = evbuffer_get_length(in);
    const char *text = (const char *)evbuffer_pullup(in, -1);
    jr_apireq *q = jr_api_req(c, &op_flow);
    jr_err err;
    int i;

    if (q == NULL)
        return;
    if ((q->flow = calloc(1, sizeof *q->flow)) == NULL ||
        jr_flow_parse(q->flow, text ? text : "", text ? n : 0, &err) < 0) {
        jr_http_error(c->req, q->flow ? 400 : 500, "%s", q->flow ?
                      err.msg : "out of memory");
        free(q->flow);
        q->flow = NULL;
        jr_apireq_free(q);
        return;
    }
    for (i = 0; i < q->flow->n; i++)
        if (jr_push_check(&q->flow->jobs[i], c->host->cfg->max_payload,
                          &err) < 0) {
            jr_http_error(c->req, 400, "flow: job '%s': %s",
                          q->flow->refs[i], err.msg);
            jr_apireq_free(q);
            return;
        }
    if ((i = jr_api_seal_pushes(c, q, q->flow->jobs, q->flow->n, err.msg,
                                sizeof err.msg)) < 0) {
        jr_http_error(c->req, i == -2 ? 400 : 503, "flow: %s", err.msg);
        jr_apireq_free(q);
        return;
    }
    jr_api_push_trace(c, q, q->flow->jobs, q->flow->n, "POST /api/flows");
    jr_api_ask(c, q);
}

/* GET /api/batches/ID */
static void
r_batch(jr_apicall *c)
{
    jr_apireq *q;
    int64_t id;

    if (jr_api_job_id(c->req, c->arg, &id) == 0 &&
        (q = jr_api_req(c, &op_batch)) != NULL) {
        q->ids[0] = id;
        q->nids = 1;
        jr_api_ask(c, q);
    }
}

const jr_apiroute jr_apiroutes_flow[] = {
    {"flows", 1, r_flow},
    {"batches/*", 0, r_batch},
    {NULL, 0, NULL}
};
