/* apitoken.c - what the token of a request may do in the JSON API, in
 * the loop: the scope a route needs (a GET: read; a POST: write, but for
 * the push routes, which a push token may use to its queues), the scope
 * of the operation a route asks (api.h's jr_apiop.scope, checked again
 * at jr_api_ask, with every queue a push names, and none of a push
 * token's jobs tied to what is there: no unique key, sequence or existing
 * batch), the log line of each
 * write (the token's name, never its secret; the route; the target), and
 * GET /api/whoami, which tells the dashboard what its token may do. Uses
 * apiroute.h, auth.h, api.h, log.h. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <event2/http.h>

#include "http/apiroute.h"
#include "http/auth.h"
#include "base/flow.h"
#include "base/log.h"

/* The POST routes a push token may use (their operations' scope is
 * JR_SCOPE_PUSH: each job's queue is checked at jr_api_ask). Any other
 * POST route, one added later too, needs a write token. */
static const char *const push_routes[] = {"jobs", "flows", NULL};

/* The request's method, as the logs and refusals name it. */
static const char *
method(const jr_apicall *c)
{
    switch (evhttp_request_get_command(c->req)) {
    case EVHTTP_REQ_GET:    return "GET";
    case EVHTTP_REQ_HEAD:   return "HEAD";
    case EVHTTP_REQ_POST:   return "POST";
    case EVHTTP_REQ_PUT:    return "PUT";
    case EVHTTP_REQ_DELETE: return "DELETE";
    case EVHTTP_REQ_PATCH:  return "PATCH";
    default:                return "?";
    }
}

int
jr_apitoken_route(jr_apicall *c, const jr_apiroute *r)
{
    int need = r->post ? JR_TOKEN_WRITE : JR_TOKEN_READ, i;

    for (i = 0; r->post == 1 && push_routes[i] != NULL; i++)
        if (strcmp(r->pattern, push_routes[i]) == 0)
            need = JR_TOKEN_PUSH;
    return jr_auth_may(c->tok, need, c->req, "%s /api/%.200s", method(c),
                       c->path);
}

/* The token scope operation op needs. */
static int
op_needs(const jr_apiop *op)
{
    return op->scope == JR_SCOPE_WRITE ? JR_TOKEN_WRITE :
           op->scope == JR_SCOPE_PUSH ? JR_TOKEN_PUSH : JR_TOKEN_READ;
}

/* A queue, NULL for "default". */
static const char *
queue_of(const char *queue)
{
    return queue != NULL ? queue : "default";
}

/* The first queue of q's pushes (or flow, or its batch's callbacks) the
 * call's token may not push to, with the job's index in *at (-1: the
 * batch's callbacks); NULL when it may push every one. */
static const char *
foreign_queue(const jr_apicall *c, const jr_apireq *q, int *at)
{
    const jr_flow *f = q->flow;
    int n = q->pushes != NULL ? q->npushes : f != NULL ? f->n : 0;
    const jr_push *jobs = q->pushes != NULL ? q->pushes :
                          f != NULL ? f->jobs : NULL;

    for (*at = 0; *at < n; (*at)++)
        if (!jr_auth_queue(c->tok, jobs[*at].queue))
            return queue_of(jobs[*at].queue);
    *at = -1;
    if (f != NULL && f->has_batch && !jr_auth_queue(c->tok, f->batch.queue))
        return queue_of(f->batch.queue);
    return NULL;
}

/* The first option of q's pushes that ties a job to what is already in
 * the database, which may be another queue's, with the job's index in
 * *at; NULL when none does. A push token may use none: a unique key is
 * held by a job of any queue (a duplicate is dropped, a replace changes
 * the holder's payload and run_at), a sequence runs the jobs of every
 * queue behind its head, and a batch's callbacks wait for every member. */
static const char *
reaches_out(const jr_apireq *q, int *at)
{
    for (*at = 0; q->pushes != NULL && *at < q->npushes; (*at)++) {
        if (q->pushes[*at].unique_key != NULL)
            return "unique_key: a unique key is shared by every queue, and "
                   "the job could hold or replace another queue's";
        if (q->pushes[*at].sequence != NULL)
            return "sequence: a sequence is shared by every queue, and the "
                   "job could hold up another queue's";
        if (q->pushes[*at].batch > 0)
            return "batch: the job would join an existing batch, which may "
                   "be another queue's";
    }
    return NULL;
}

/* Appends printf-style text to the log line in b (n used of size);
 * returns the new n. */
static size_t put(char *b, size_t n, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static size_t
put(char *b, size_t n, size_t size, const char *fmt, ...)
{
    va_list ap;

    if (n >= size)
        return n;
    va_start(ap, fmt);
    n += (size_t)vsnprintf(b + n, size - n, fmt, ap);
    va_end(ap);
    return n;
}

/* The parameters of a write's query the log shows, those the API's
 * writes read; any other one is counted, never shown, for a careless
 * client may put a token's secret there (?access_token=...). */
static const char *const logged_params[] = {
    "state", "name", "queue", "where", "from_step", "key", NULL
};

/* query as the write log shows it, into b: "?" and the parameters of
 * logged_params as sent (still percent-encoded), then how many others
 * there were; "" without a query. */
static void
query_text(const char *query, char *b, size_t size)
{
    size_t n = 0, len, k;
    int others = 0, i, shown;

    b[0] = '\0';
    while (query != NULL && *query != '\0') {
        len = strcspn(query, "&");
        k = strcspn(query, "=&");
        for (i = 0, shown = 0; len > 0 && logged_params[i] != NULL; i++)
            if (strlen(logged_params[i]) == k &&
                strncmp(query, logged_params[i], k) == 0)
                shown = 1;
        if (shown)
            n = put(b, n, size, "%s%.*s", n ? "&" : "?", (int)(len > 200 ?
                    200 : len), query);
        else if (len > 0)
            others++;
        query += len + (query[len] == '&');
    }
    if (others > 0)
        put(b, n, size, " (%s%d parameter%s not shown)", n ? "and " : "",
            others, others > 1 ? "s" : "");
}

/* q's target in words: its jobs, queue, name, state, filter, pushes. */
static void
target(const jr_apicall *c, const jr_apireq *q, char *b, size_t size)
{
    size_t n = 0;
    int i;

    b[0] = '\0';
    if (q->nids < 0)
        n = put(b, n, size, ", all of them");
    for (i = 0; i < q->nids && i < 10; i++)
        n = put(b, n, size, "%s%lld", i ? "," : q->nids > 1 ? ", jobs " :
                ", job ", (long long)q->ids[i]);
    if (q->nids > 10)
        n = put(b, n, size, " and %d more", q->nids - 10);
    if (q->queue[0])
        n = put(b, n, size, ", queue '%s'", q->queue);
    if (q->name[0])
        n = put(b, n, size, ", name '%s'", q->name);
    if (q->state[0])
        n = put(b, n, size, ", state '%s'", q->state);
    if (q->where[0])
        n = put(b, n, size, ", where '%.100s'", q->where);
    for (i = 0; q->pushes != NULL && i < q->npushes && i < 10; i++)
        n = put(b, n, size, i ? ",%s" : ", to queue %s",
                queue_of(q->pushes[i].queue));
    if (q->flow != NULL)
        n = put(b, n, size, ", a flow of %d jobs", q->flow->n);
    if (c->arg[0] && q->nids <= 0 && !q->queue[0])
        put(b, n, size, ", '%.100s'", c->arg);
}

int
jr_apitoken_ask(jr_apicall *c, const jr_apireq *q)
{
    const char *queue, *why;
    char what[600], shown[300];
    int at = 0;

    if (!jr_auth_may(c->tok, op_needs(q->op), c->req, "%s /api/%.200s (%s)",
                     method(c), c->path, q->op->name))
        return -1;
    if (q->op->scope == JR_SCOPE_PUSH &&
        (queue = foreign_queue(c, q, &at)) != NULL) {
        jr_auth_describe(c->tok, what, sizeof what);
        jr_log(JR_LOG_WARN, "http: refused: a push to queue '%s': %s", queue,
               what);
        if (at < 0)
            jr_http_error(c->req, 403, "the flow's batch callbacks go to "
                          "queue '%s': %s", queue, what);
        else if (q->flow != NULL)
            jr_http_error(c->req, 403, "the flow's job '%s' goes to queue "
                          "'%s': %s", q->flow->refs[at], queue, what);
        else if (q->many)
            jr_http_error(c->req, 403, "jobs[%d] goes to queue '%s': %s",
                          at, queue, what);
        else
            jr_http_error(c->req, 403, "the job goes to queue '%s': %s",
                          queue, what);
        return -1;
    }
    if (q->op->scope == JR_SCOPE_PUSH && c->tok != NULL &&
        c->tok->scope == JR_TOKEN_PUSH &&
        (why = reaches_out(q, &at)) != NULL) {
        jr_auth_describe(c->tok, what, sizeof what);
        jr_log(JR_LOG_WARN, "http: refused: a push with %s: %s", why, what);
        if (q->many)
            jr_http_error(c->req, 403, "jobs[%d] has %s: %s", at, why, what);
        else
            jr_http_error(c->req, 403, "the job has %s: %s", why, what);
        return -1;
    }
    if (q->op->scope == JR_SCOPE_READ)
        return 0;
    target(c, q, what, sizeof what);
    query_text(c->query, shown, sizeof shown);
    jr_log(JR_LOG_INFO, "http: token '%s' (%s): %s /api/%.200s%s: %s%s",
           c->tok ? c->tok->name : "-", c->tok ?
           jr_auth_scope(c->tok->scope) : "-", method(c), c->path, shown,
           q->op->name, what);
    return 0;
}

/* ---- GET /api/whoami ---- */

static void
r_whoami(jr_apicall *c)
{
    const jr_token *t = c->tok;
    char may[600];
    jr_buf b = {0};
    int i;

    jr_auth_describe(t, may, sizeof may);
    jr_buf_put(&b, "{\"name\":", 8);
    jr_api_str(&b, t ? t->name : NULL);
    jr_buf_put(&b, ",\"scope\":", 9);
    jr_api_str(&b, jr_auth_scope(t ? t->scope : JR_TOKEN_READ));
    jr_buf_put(&b, ",\"queues\":", 10);
    if (t == NULL || t->scope != JR_TOKEN_PUSH)
        jr_buf_put(&b, "null", 4);
    for (i = 0; t != NULL && t->scope == JR_TOKEN_PUSH && i < t->nqueues;
         i++) {
        jr_buf_put(&b, i ? "," : "[", 1);
        jr_api_str(&b, t->queues[i]);
    }
    if (t != NULL && t->scope == JR_TOKEN_PUSH)
        jr_buf_put(&b, "]", 1);
    jr_api_printf(&b, ",\"write\":%s,\"decrypt\":%s,\"may\":",
                  t != NULL && t->scope == JR_TOKEN_WRITE ? "true" : "false",
                  jr_api_may_decrypt(c) ? "true" : "false");
    jr_api_str(&b, may);
    jr_buf_put(&b, "}", 1);
    if (b.oom)
        jr_http_error(c->req, 503, "out of memory");
    else
        jr_http_reply(c->req, 200, "application/json", b.p, b.len);
    jr_buf_free(&b);
}

const jr_apiroute jr_apiroutes_token[] = {
    {"whoami", 0, r_whoami},
    {NULL, 0, NULL}
};
