/* apidbflow.c - the HTTP API's workflows on the database thread: a job's
 * parents, children and batch (for GET /api/jobs/ID), GET /api/batches/ID
 * (counts and members) and POST /api/flows (a graph pushed in one
 * transaction). Part of apidb.c's database reader; never runs in the
 * loop. Uses backend.h, api.h, flow.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/api.h"
#include "backend.h"
#include "base/flow.h"

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

int
jr_apiflow_batch(jr_db *db, jr_apireq *q, jr_err *e)
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

int
jr_apiflow_push(jr_db *db, jr_apireq *q, jr_err *e)
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
