/* apidb.c - the database half of the HTTP API: runs one jr_apireq on the
 * database thread (jr_dbthread_request) through its operation's run
 * function, which writes the reply's JSON, and turns a failure into the
 * HTTP status and {"error": ...}. The operations and their routes live in
 * the file of their topic (apidbjobs.c, apidbaction.c, apidbflow.c,
 * apidbsched.c), writing rows with apidbrows.c. Never runs in the loop.
 * Uses api.h, apidb.h, backend.h, flow.h, schedules.h. */
#include <stdlib.h>

#include "http/api.h"
#include "http/apidb.h"
#include "backend.h"
#include "base/flow.h"
#include "config/schedules.h"

static const char *
opt(const char *s)
{
    return s[0] ? s : NULL;
}

jr_list_filter
jr_apidb_filter(const jr_apireq *q)
{
    jr_list_filter f = {opt(q->state), opt(q->name), opt(q->queue),
                        q->limit, opt(q->where), q->before_id, q->after_id, 0};

    return f;
}

void
jr_apireq_free(jr_apireq *q)
{
    if (q == NULL)
        return;
    jr_buf_free(&q->body);
    jr_buf_free(&q->sealed);
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
                (q->op->einput ? q->op->einput : 400) :
                e.code == 0 ? 500 : 503;
    jr_buf_put(&q->body, "{\"error\":", 9);
    jr_api_str(&q->body, e.code ? e.msg : "out of memory");
    jr_buf_put(&q->body, "}", 1);
}
