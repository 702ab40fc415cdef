/* apidbseq.c - the HTTP API's sequences (docs/queues.md, "Sequences"):
 * GET /api/sequences (each sequence with jobs not ended or blocked;
 * ?blocked=1, ?limit=N), POST /api/sequences/skip?key=K and
 * /api/sequences/unblock?key=K (an operator's action on a blocked one).
 * The key goes in the query: a path segment is shorter than a key may
 * be. Each route (checked in the loop), the operation it asks and the
 * operation's run function on the database thread. Uses apiroute.h,
 * backend.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "http/apiroute.h"
#include "backend.h"
#include "base/job.h"
#include "base/util.h"

/* ---- the operations, on a database thread ---- */

static int
seq_row(const jr_seq_row *r, void *arg)
{
    jr_buf *b = arg;

    jr_api_printf(b, "%s{\"key\":", b->p[b->len - 1] == '[' ? "" : ",");
    jr_api_str(b, r->key);
    jr_api_printf(b, ",\"head\":%lld,\"state\":", (long long)r->head);
    jr_api_str(b, r->state);
    jr_api_printf(b, ",\"jobs\":%ld,\"blocked\":%s}", r->jobs,
                  r->blocked ? "true" : "false");
    return 0;
}

static int
seq_list(jr_db *db, jr_apireq *q, jr_err *e)
{
    jr_buf_put(&q->body, "[", 1);
    if (db->ops->sequences(db->b, q->what, q->limit, seq_row, &q->body,
                           e) < 0)
        return -1;
    jr_buf_put(&q->body, "]", 1);
    return 0;
}

/* q->what: JR_SEQ_ACT_*, q->where: the key */
static int
seq_act(jr_db *db, jr_apireq *q, jr_err *e)
{
    int n = db->ops->seq_act(db->b, q->where, q->what, e);

    if (n < 0)
        return -1;
    if (n == 0) {
        q->status = 404;
        return jr_fail(e, JR_ENOTFOUND, "sequence '%.300s' is not blocked",
                       q->where);
    }
    jr_buf_put(&q->body, "{\"key\":", 7);
    jr_api_str(&q->body, q->where);
    jr_api_printf(&q->body, ",\"%s\":%d}", q->what == JR_SEQ_ACT_SKIP ?
                  "skipped" : "queued", n);
    return 0;
}

/* The operations (api.h): name, reader, scope, run. */
static const jr_apiop op_sequences = {"sequences", 1, JR_SCOPE_READ,
                                      seq_list, 0};
static const jr_apiop op_seq_act = {"seq_act", 0, JR_SCOPE_WRITE, seq_act,
                                    0};

/* ---- the routes, in the loop ---- */

/* Reads the query's parameters into q: blocked and limit for the list
 * (act 0), key for an action. Replies 400 and returns -1 on a bad one. */
static int
seq_query(jr_apicall *c, jr_apireq *q, int act)
{
    struct evkeyvalq kv = {0};
    struct evkeyval *e;
    jr_err err;
    long v;
    int rc = 0;

    q->limit = 1000;
    if (c->query != NULL && (strstr(c->query, "%00") != NULL ||
                             evhttp_parse_query_str(c->query, &kv) < 0)) {
        evhttp_clear_headers(&kv);
        jr_http_error(c->req, 400, "malformed query string");
        return -1;
    }
    for (e = kv.tqh_first; e && rc == 0; e = e->next.tqe_next) {
        if (act && strcmp(e->key, "key") == 0) {
            if (e->value[0] == '\0' || strlen(e->value) > JR_SEQ_KEY_MAX)
                rc = jr_fail(&err, JR_EINPUT, "key must have 1 to %d bytes",
                             JR_SEQ_KEY_MAX);
            else
                snprintf(q->where, sizeof q->where, "%s", e->value);
        } else if (!act && strcmp(e->key, "blocked") == 0) {
            if ((rc = jr_parse_int(e->value, "blocked", 0, 1, &v, &err)) == 0)
                q->what = (int)v;
        } else if (!act && strcmp(e->key, "limit") == 0) {
            if ((rc = jr_parse_int(e->value, "limit", 0, 100000, &v,
                                   &err)) == 0)
                q->limit = (int)v;
        } else {
            rc = jr_fail(&err, JR_EINPUT, "unknown parameter '%.64s' (%s)",
                         e->key, act ? "key" : "blocked, limit");
        }
    }
    evhttp_clear_headers(&kv);
    if (rc == 0 && act && q->where[0] == '\0')
        rc = jr_fail(&err, JR_EINPUT, "give the sequence's key: ?key=K");
    if (rc < 0)
        jr_http_error(c->req, 400, "%s", err.msg);
    return rc;
}

/* GET /api/sequences */
static void
r_sequences(jr_apicall *c)
{
    jr_apireq *q = jr_api_req(c, &op_sequences);

    if (q == NULL)
        return;
    if (seq_query(c, q, 0) < 0) {
        jr_apireq_free(q);
        return;
    }
    jr_api_ask(c, q);
}

static void
r_seq_act(jr_apicall *c, int what)
{
    jr_apireq *q = jr_api_req(c, &op_seq_act);

    if (q == NULL)
        return;
    q->what = what;
    if (seq_query(c, q, 1) < 0) {
        jr_apireq_free(q);
        return;
    }
    jr_api_ask(c, q);
}

static void r_seq_skip(jr_apicall *c) { r_seq_act(c, JR_SEQ_ACT_SKIP); }
static void r_seq_unblock(jr_apicall *c) { r_seq_act(c, JR_SEQ_ACT_UNBLOCK); }

const jr_apiroute jr_apiroutes_seq[] = {
    {"sequences", 0, r_sequences},
    {"sequences/skip", 1, r_seq_skip},
    {"sequences/unblock", 1, r_seq_unblock},
    {NULL, 0, NULL}
};
