/* api.c - the JSON API under /api/, in the loop: matches the path and
 * method against the routes of each topic (apidbjobs.c, apidbaction.c,
 * apidbflow.c, apidbsched.c; the runner's own view here), listed once in
 * TOPICS below, and runs the route's function, which checks the path, the
 * query (apiquery.c) and the JSON body (apibody.c), replies 400 with the
 * reason, and asks the database its operation (a jr_apiop of its file)
 * through jr_http_ask. What the runner knows itself (workers, throughput)
 * it answers at once, through its host (host.h). Routes are documented
 * route by route in docs/http.md ("The JSON API"). Uses apiroute.h,
 * http.h, host.h, api.h, apibody.h. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/http.h>

#include "http/apiroute.h"

/* The topics whose tables the routes are, in the order they are
 * matched: each file defines its jr_apiroutes_<topic>[]. */
#define TOPICS(X) X(jobs) X(action) X(flow) X(sched) X(steps) X(seq) \
    X(runner) X(signal) X(token) X(schedrt) X(logs)

#define TOPIC_DECLARE(t) extern const jr_apiroute jr_apiroutes_##t[];
TOPICS(TOPIC_DECLARE)

/* --- what the routes share -------------------------------------------- */

jr_apireq *
jr_api_req(jr_apicall *c, const jr_apiop *op)
{
    jr_apireq *q = calloc(1, sizeof *q);

    if (q == NULL)
        jr_http_error(c->req, 503, "out of memory");
    else
        q->op = op;
    return q;
}

void
jr_api_ask(jr_apicall *c, jr_apireq *q)
{
    if (jr_apitoken_ask(c, q) < 0)
        jr_apireq_free(q);
    else
        jr_http_ask(c->h, c->req, q);
}

jr_apireq *
jr_api_with_body(jr_apicall *c, const jr_apiop *op, jr_apibody *b)
{
    jr_apireq *q = jr_api_req(c, op);

    if (q != NULL && jr_apibody_parse(c->req, b, q) < 0) {
        jr_http_error(c->req, 400, "%s", b->why);
        free(q);
        return NULL;
    }
    return q;
}

/* --- the runner's own view: GET /api/runner ---------------------------- */

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
r_runner(jr_apicall *c)
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

const jr_apiroute jr_apiroutes_runner[] = {
    {"runner", 0, r_runner},
    {NULL, 0, NULL}
};

/* --- matching ---------------------------------------------------------- */

#define TOPIC_TABLE(t) jr_apiroutes_##t,
static const jr_apiroute *const topics[] = {TOPICS(TOPIC_TABLE)};

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
static const jr_apiroute *
find(const char *path, int post, char *arg, size_t size)
{
    const jr_apiroute *first = NULL;
    size_t t;

    for (t = 0; t < sizeof topics / sizeof topics[0]; t++)
        for (const jr_apiroute *r = topics[t]; r->pattern; r++)
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
    const jr_apiroute *r = find(path, post, arg, sizeof arg);

    return r == NULL ? -1 : r->post;
}

void
jr_api_handle(jr_http *h, const jr_httphost *host,
              struct evhttp_request *req, const char *path,
              const char *query, int post, const jr_token *who)
{
    jr_apicall c = {h, host, req, path, query, "", who};
    const jr_apiroute *r = find(path, post, c.arg, sizeof c.arg);
    char raw[sizeof c.arg];

    memcpy(raw, c.arg, sizeof raw);
    if (r == NULL)
        jr_http_error(req, 404, "no such API route: /api/%.200s", path);
    else if (!jr_apitoken_route(&c, r))
        return;
    else if (jr_api_unescape(c.arg) < 0)
        jr_http_error(req, 400, "invalid percent-encoding in '%.64s' (a "
                      "bad %%XX or a NUL byte)", raw);
    else
        r->fn(&c);
}
