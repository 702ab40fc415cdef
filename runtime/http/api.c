/* api.c - the JSON API under /api/, in the loop: parses the path, the
 * query (apiquery.c) and the JSON body (apibody.c), checks them (400
 * with the reason), and asks the database an operation (a row of
 * apidb.c's table, api.h) through jr_http_ask. What the runner knows itself
 * (workers, throughput) it answers at once, through its host (host.h).
 * Routes are a table, documented route by route in docs/http.md ("The
 * JSON API").
 * Uses http.h, host.h, api.h, apibody.h, job.h. */
#define _GNU_SOURCE
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "http/http.h"
#include "http/apibody.h"
#include "base/flow.h"
#include "base/job.h"
#include "config/config.h"
#include "config/schedules.h"

typedef jr_apibody body;

/* --- routes ---------------------------------------------------------- */

typedef struct call {           /* one request being routed */
    jr_http                *h;
    const jr_httphost      *host;
    struct evhttp_request  *req;
    const char             *path;
    const char             *query;
    char                    arg[160];   /* the path's ID or NAME */
} call;

static jr_apireq *
new_req(call *c, const jr_apiop *op)
{
    jr_apireq *q = calloc(1, sizeof *q);

    if (q == NULL)
        jr_http_error(c->req, 503, "out of memory");
    else
        q->op = op;
    return q;
}

static void
ask(call *c, jr_apireq *q)
{
    jr_http_ask(c->h, c->req, q);
}

static void
get_list(call *c, const jr_apiop *op)
{
    jr_apireq *q = new_req(c, op);

    if (q != NULL && jr_api_filters(c->req, c->query, q) < 0) {
        free(q);
        return;
    }
    if (q != NULL)
        ask(c, q);
}

static void r_stats(call *c) { jr_apireq *q = new_req(c, &jr_apiop_stats);
                               if (q) ask(c, q); }
static void r_queues(call *c) { jr_apireq *q = new_req(c, &jr_apiop_queues);
                                if (q) ask(c, q); }
static void r_jobs(call *c) { get_list(c, &jr_apiop_jobs); }
static void r_dead(call *c) { get_list(c, &jr_apiop_dead); }

static void
r_job(call *c)
{
    jr_apireq *q;
    int64_t id;
    double wait;

    if (jr_api_job_id(c->req, c->arg, &id) == 0 &&
        (wait = jr_api_wait(c->req, c->query)) >= 0 &&
        (q = new_req(c, &jr_apiop_job)) != NULL) {
        q->ids[0] = id;
        q->nids = 1;
        q->wait = wait;
        q->keep = wait > 0 ? c->host->cfg->result_ttl : 0;
        ask(c, q);
    }
}

/* POST /api/jobs: one job object, or an array pushed all or none. */
static void
r_push(call *c)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(c->req);
    size_t n = evbuffer_get_length(in);
    const char *text = (const char *)evbuffer_pullup(in, -1);
    jr_apireq *q = new_req(c, &jr_apiop_push);
    char why[400];

    if (q == NULL)
        return;
    if (n == 0 || text == NULL)
        snprintf(why, sizeof why, "give a job {\"name\": ...} or an array "
                 "of them");
    if (n == 0 || text == NULL ||
        jr_apipush_parse(text, n, c->host->cfg->max_payload, q, why,
                         sizeof why) < 0) {
        jr_http_error(c->req, 400, "%s", why);
        jr_apireq_free(q);
        return;
    }
    ask(c, q);
}

/* POST /api/flows: a flow (docs/workflows.md), read here, pushed in one
 * transaction; a refused flow is a 400 naming the job and why. */
static void
r_flow(call *c)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(c->req);
    size_t n = evbuffer_get_length(in);
    const char *text = (const char *)evbuffer_pullup(in, -1);
    jr_apireq *q = new_req(c, &jr_apiop_flow);
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
    ask(c, q);
}

/* GET /api/batches/ID */
static void
r_batch(call *c)
{
    jr_apireq *q;
    int64_t id;

    if (jr_api_job_id(c->req, c->arg, &id) == 0 &&
        (q = new_req(c, &jr_apiop_batch)) != NULL) {
        q->ids[0] = id;
        q->nids = 1;
        ask(c, q);
    }
}

/* POST with a body: ids, all, older_than as the route allows. */
static jr_apireq *
with_body(call *c, const jr_apiop *op, body *b)
{
    jr_apireq *q = new_req(c, op);

    if (q != NULL && jr_apibody_parse(c->req, b, q) < 0) {
        jr_http_error(c->req, 400, "%s", b->why);
        free(q);
        return NULL;
    }
    return q;
}

static void
r_job_action(call *c, const jr_apiop *op)
{
    jr_apireq *q;
    body b;
    int64_t id;

    if (jr_api_job_id(c->req, c->arg, &id) < 0 ||
        (q = with_body(c, op, &b)) == NULL)
        return;
    q->ids[0] = id;
    q->nids = 1;
    ask(c, q);
}

static void r_job_cancel(call *c) { r_job_action(c, &jr_apiop_cancel); }
static void r_job_purge(call *c) { r_job_action(c, &jr_apiop_purge); }
static void r_job_retry(call *c) { r_job_action(c, &jr_apiop_retry); }

static void
r_cancel(call *c)
{
    body b;
    jr_apireq *q = with_body(c, &jr_apiop_cancel, &b);

    if (q != NULL && (!b.has_ids || q->nids == 0)) {
        jr_http_error(c->req, 400, "give the jobs to cancel: {\"ids\": "
                      "[1, 2]}");
        free(q);
    } else if (q != NULL) {
        ask(c, q);
    }
}

static void
r_dead_retry(call *c)
{
    body b;
    jr_apireq *q = with_body(c, &jr_apiop_retry, &b);

    if (q != NULL && b.has_ids == b.all) {
        jr_http_error(c->req, 400, "give either {\"ids\": [1, 2]} or "
                      "{\"all\": true}");
        free(q);
    } else if (q != NULL) {
        if (b.all)
            q->nids = -1;
        ask(c, q);
    }
}

static void
r_dead_purge(call *c)
{
    body b;
    jr_apireq *q = with_body(c, &jr_apiop_purge, &b);

    if (q != NULL && (b.has_ids + b.all + (b.older_than >= 0) != 1 ||
                      (b.has_ids && q->nids == 0))) {
        jr_http_error(c->req, 400, "give one of {\"ids\": [1, 2]}, "
                      "{\"all\": true} or {\"older_than\": SECONDS}");
        free(q);
    } else if (q != NULL) {
        q->older_than = b.all ? 0 : b.older_than;
        ask(c, q);
    }
}

static void
r_queue(call *c, const jr_apiop *op)
{
    jr_apireq *q;
    body b;
    jr_err err;

    if (jr_name_check(c->arg, "queue name", &err) < 0) {
        jr_http_error(c->req, 400, "%s", err.msg);
        return;
    }
    if ((q = with_body(c, op, &b)) != NULL) {
        memcpy(q->queue, c->arg, strlen(c->arg) + 1);  /* checked: <= 128 */
        ask(c, q);
    }
}

/* POST /api/bulk/ACTION?FILTER: the list's filter, at least one part. */
static void
r_bulk(call *c, const jr_apiop *op)
{
    jr_apireq *q = new_req(c, op);
    body b;

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
    ask(c, q);
}

static void r_bulk_cancel(call *c) { r_bulk(c, &jr_apiop_bulk_cancel); }
static void r_bulk_retry(call *c) { r_bulk(c, &jr_apiop_bulk_retry); }
static void r_bulk_purge(call *c) { r_bulk(c, &jr_apiop_bulk_purge); }

static void
r_limits(call *c)
{
    jr_apireq *q = new_req(c, &jr_apiop_limits);

    if (q != NULL) {
        q->limits = c->host->cfg->limits.l;
        q->nlimits = c->host->cfg->limits.n;
        ask(c, q);
    }
}

static void r_pause(call *c) { r_queue(c, &jr_apiop_pause); }
static void r_resume(call *c) { r_queue(c, &jr_apiop_resume); }

static void
r_schedules(call *c)
{
    jr_apireq *q = new_req(c, &jr_apiop_schedules);

    if (q == NULL)
        return;
    /* a copy: a reload may replace the runner's while the read runs */
    if ((q->schedules = calloc(1, sizeof *q->schedules)) == NULL ||
        jr_schedules_copy(q->schedules,
                          c->host->schedules(c->host->runner)) < 0) {
        jr_http_error(c->req, 503, "out of memory");
        jr_apireq_free(q);
        return;
    }
    ask(c, q);
}

/* POST /api/schedules/NAME/{pause,resume,fire}: a schedule of the
 * runner's config (404 otherwise); fire takes {"at": epoch seconds}. */
static void
r_sched(call *c, int what)
{
    const jr_schedules *ss = c->host->schedules(c->host->runner);
    jr_apireq *q;
    body b;
    int i;

    for (i = 0; i < ss->n && strcmp(ss->s[i].name, c->arg) != 0; i++)
        ;
    if (i == ss->n) {
        jr_http_error(c->req, 404, "no schedule '%.128s' in the runner's "
                      "config", c->arg);
        return;
    }
    if ((q = with_body(c, &jr_apiop_sched_ctl, &b)) == NULL)
        return;
    if ((what != JR_API_SCHED_FIRE && b.at > 0) ||
        (b.at > 0 && fabs(b.at - jr_now()) > 60)) {
        jr_http_error(c->req, 400, what != JR_API_SCHED_FIRE ? "'at' is for "
                      "fire only" : "'at' must be within 60 s of now");
        free(q);
        return;
    }
    memcpy(q->name, c->arg, strlen(c->arg) + 1);    /* <= 128: a name */
    q->what = what;
    q->at = b.at;
    ask(c, q);
}

static void r_sched_pause(call *c) { r_sched(c, JR_API_SCHED_PAUSE); }
static void r_sched_resume(call *c) { r_sched(c, JR_API_SCHED_RESUME); }
static void r_sched_fire(call *c) { r_sched(c, JR_API_SCHED_FIRE); }

typedef struct listing {        /* /api/runner's "running" list */
    jr_buf     *b;
    int         n;              /* jobs in it so far */
} listing;

/* One job of the "running" list (arg: the listing). */
static void
put_running(void *arg, const jr_httprun *r)
{
    listing *l = arg;
    jr_buf *b = l->b;

    jr_api_printf(b, "%s{\"id\":%lld,\"name\":", l->n++ ? "," : "",
                  (long long)r->id);
    jr_api_str(b, r->name);
    jr_buf_put(b, ",\"queue\":", 9);
    jr_api_str(b, r->queue);
    jr_api_printf(b, ",\"attempt\":%d,\"worker\":%d,\"pid\":%d,"
                  "\"generation\":", r->attempt, r->worker, r->pid);
    jr_api_str(b, r->generation);
    jr_api_printf(b, ",\"seconds\":%.3f}", r->seconds);
}

/* The runner's own view: workers, their jobs, the generation. */
static void
r_runner(call *c)
{
    const jr_httphost *host = c->host;
    jr_httpgauges g;
    jr_buf b = {0};
    listing l = {&b, 0};
    char first[512];

    host->gauges(host->runner, &g);
    jr_api_printf(&b, "{\"pid\":%d,\"workers\":{\"busy\":%d,\"total\":%d,"
                  "\"target\":%d,\"min\":%d,\"max\":%d},\"generation\":",
                  (int)getpid(), g.busy, g.active, g.target, g.min, g.max);
    jr_api_str(&b, g.generation);
    jr_api_printf(&b, ",\"done\":%ld,\"failed\":%ld,\"dead\":%ld,"
                  "\"cancelled\":%ld,\"local_queue\":%zu,\"stopping\":%s,"
                  "\"running\":[", g.done, g.failed, g.dead, g.cancelled,
                  g.local, g.stopping ? "true" : "false");
    host->running(host->runner, put_running, &l);
    jr_buf_put(&b, "],\"workers_cannot_start\":", 25);
    if (g.nostart != NULL)      /* its first line: a traceback may follow */
        snprintf(first, sizeof first, "%.*s",
                 (int)strcspn(g.nostart, "\n"), g.nostart);
    jr_api_str(&b, g.nostart != NULL ? first : NULL);
    jr_buf_put(&b, ",\"throughput\":", 14);
    host->throughput(host, &b);
    host->unhandled_json(host->runner, &b);
    jr_buf_put(&b, "}", 1);
    jr_http_reply(c->req, 200, "application/json", b.p, b.len);
    jr_buf_free(&b);
}

typedef struct route {
    const char *pattern;        /* '*' stands for one path segment */
    int         post;
    void      (*fn)(call *c);
} route;

static const route routes[] = {
    {"stats", 0, r_stats},
    {"runner", 0, r_runner},
    {"queues", 0, r_queues},
    {"jobs", 0, r_jobs},
    {"jobs", 1, r_push},
    {"limits", 0, r_limits},
    {"jobs/*", 0, r_job},
    {"flows", 1, r_flow},
    {"batches/*", 0, r_batch},
    {"dead", 0, r_dead},
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
    {"schedules", 0, r_schedules},
    {"schedules/*/pause", 1, r_sched_pause},
    {"schedules/*/resume", 1, r_sched_resume},
    {"schedules/*/fire", 1, r_sched_fire},
    {NULL, 0, NULL}
};

/* 1 if path matches pattern; the '*' segment goes to arg. */
static int
match(const char *pattern, const char *path, char *arg, size_t size)
{
    size_t n;

    for (; *pattern; pattern++) {
        if (*pattern != '*') {
            if (*path++ != *pattern)
                return 0;
            continue;
        }
        n = strcspn(path, "/");
        if (n == 0 || n >= size)
            return 0;
        memcpy(arg, path, n);
        arg[n] = '\0';
        path += n;
    }
    return *path == '\0';
}

/* The route of path for the method (post), else the first of path. */
static const route *
find(const char *path, int post, char *arg, size_t size)
{
    const route *first = NULL;

    for (const route *r = routes; r->pattern; r++)
        if (match(r->pattern, path, arg, size)) {
            if (r->post == post)
                return r;
            if (first == NULL)
                first = r;
        }
    if (first != NULL)
        match(first->pattern, path, arg, size);
    return first;
}

int
jr_api_is_write(const char *path, int post)
{
    char arg[160];
    const route *r = find(path, post, arg, sizeof arg);

    return r == NULL ? -1 : r->post;
}

void
jr_api_handle(jr_http *h, const jr_httphost *host,
              struct evhttp_request *req, const char *path,
              const char *query, int post)
{
    call c = {h, host, req, path, query, ""};
    const route *r = find(path, post, c.arg, sizeof c.arg);
    char raw[sizeof c.arg];

    memcpy(raw, c.arg, sizeof raw);
    if (r == NULL)
        jr_http_error(req, 404, "no such API route: /api/%.200s", path);
    else if (jr_api_unescape(c.arg) < 0)
        jr_http_error(req, 400, "invalid percent-encoding in '%.64s' (a "
                      "bad %%XX or a NUL byte)", raw);
    else
        r->fn(&c);
}
