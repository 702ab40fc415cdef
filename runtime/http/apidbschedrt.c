/* apidbschedrt.c - the HTTP API's schedules managed at run time
 * (docs/http.md, "Schedules managed at run time"): POST
 * /api/schedules/NAME adds one (the body: its fields as the config
 * writes them), PUT changes the fields its body names (null removes
 * one), DELETE removes it, POST /api/schedules/NAME/backfill {"from",
 * "to"} pushes the missed fires of a window once. The config's
 * schedules are read-only here (400). Each route (checked in the loop),
 * its operation and the run function on the database thread, through
 * schedput.h as the CLI and the library. Uses apiroute.h, apidb.h,
 * backend.h, schedput.h, jsondom.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>

#include "http/apiroute.h"
#include "http/apidb.h"
#include "backend.h"
#include "base/jsondom.h"
#include "base/util.h"
#include "config/config.h"
#include "db/schedput.h"

/* ---- on the database thread ---- */

static jr_schedput_cfg
put_cfg(const jr_apireq *q)
{
    jr_schedput_cfg pc = {q->schedules, q->schedules ?
                          q->schedules->timezone : NULL, q->max_payload};
    return pc;
}

static int
def_put(jr_db *db, jr_apireq *q, jr_err *e)
{
    jr_schedput_cfg pc = put_cfg(q);
    char *out = NULL;

    if (jr_schedput(db->ops, db->b, &pc, q->what, q->name, q->mem, &out,
                    e) < 0)
        return -1;
    q->status = q->what == JR_SCHEDPUT_ADD ? 201 : 200;
    jr_buf_put(&q->body, "{\"name\":", 8);
    jr_api_str(&q->body, q->name);
    if (out != NULL) {
        jr_buf_put(&q->body, ",\"definition\":", 14);
        jr_buf_put(&q->body, out, strlen(out));
    } else {
        jr_buf_put(&q->body, ",\"removed\":true", 15);
    }
    jr_buf_put(&q->body, "}", 1);
    free(out);
    return 0;
}

static int
backfill(jr_db *db, jr_apireq *q, jr_err *e)
{
    jr_schedput_cfg pc = put_cfg(q);
    const jr_schedule *s;
    jr_schedules own;
    long n;

    if (jr_schedput_find(db->ops, db->b, &pc, q->name, &own, &s, e) < 0)
        return -1;
    n = jr_schedput_backfill(db->ops, db->b, s, q->from, q->to, e);
    jr_schedules_free(&own);
    if (n < 0)
        return -1;
    jr_buf_put(&q->body, "{\"name\":", 8);
    jr_api_str(&q->body, q->name);
    jr_api_printf(&q->body, ",\"pushed\":%ld}", n);
    return 0;
}

/* The operations (api.h): the writes of a schedule (JR_EINPUT: 400,
 * JR_ENOTFOUND: 404). */
static const jr_apiop op_sched_def = {"schedule_def", 0, JR_SCOPE_WRITE,
                                      def_put, 0};
static const jr_apiop op_backfill = {"schedule_backfill", 0, JR_SCOPE_WRITE,
                                     backfill, 0};

/* ---- the routes, in the loop ---- */

/* A request for schedule c->arg with a copy of the schedules the runner
 * follows, its config's as last reloaded among them (a reload may
 * replace them while it runs); NULL: replied. */
static jr_apireq *
sched_req(jr_apicall *c, const jr_apiop *op)
{
    jr_apireq *q;
    jr_err err;

    if (jr_name_check(c->arg, "schedule name", &err) < 0) {
        jr_http_error(c->req, 400, "%s", err.msg);
        return NULL;
    }
    if ((q = jr_api_req(c, op)) == NULL)
        return NULL;
    if ((q->schedules = calloc(1, sizeof *q->schedules)) == NULL ||
        jr_schedules_copy(q->schedules,
                          c->host->schedules(c->host->runner)) < 0) {
        jr_http_error(c->req, 503, "out of memory");
        jr_apireq_free(q);
        return NULL;
    }
    memcpy(q->name, c->arg, strlen(c->arg) + 1);    /* <= 128: a name */
    q->max_payload = c->host->cfg->max_payload;
    return q;
}

/* The body as text, in q->mem; -1 when replied. */
static int
body_text(jr_apicall *c, jr_apireq *q)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(c->req);
    size_t n = evbuffer_get_length(in);

    if (n > JR_SCHEDDEF_MAX) {
        jr_http_error(c->req, 413, "the body is over %d bytes",
                      JR_SCHEDDEF_MAX);
        return -1;
    }
    if ((q->mem = malloc(n + 1)) == NULL) {
        jr_http_error(c->req, 503, "out of memory");
        return -1;
    }
    if (n > 0)
        memcpy(q->mem, evbuffer_pullup(in, -1), n);
    ((char *)q->mem)[n] = '\0';
    if (n == 0 || memchr(q->mem, '\0', n) != NULL) {
        jr_http_error(c->req, 400, "the body must be a JSON object of the "
                      "schedule's fields");
        return -1;
    }
    return 0;
}

static void
r_def(jr_apicall *c, int what)
{
    jr_apireq *q = sched_req(c, &op_sched_def);

    if (q == NULL)
        return;
    q->what = what;
    if (what != JR_SCHEDPUT_REMOVE && body_text(c, q) < 0) {
        jr_apireq_free(q);
        return;
    }
    jr_api_ask(c, q);
}

static void r_add(jr_apicall *c) { r_def(c, JR_SCHEDPUT_ADD); }
static void r_set(jr_apicall *c) { r_def(c, JR_SCHEDPUT_SET); }
static void r_remove(jr_apicall *c) { r_def(c, JR_SCHEDPUT_REMOVE); }

/* A window's end: epoch seconds, or a time text ("2026-11-22T10:00:00Z",
 * "@EPOCH"). -1 with why set. */
static int
when(const jr_jdoc *d, const char *key, double *out, char *why, size_t size)
{
    int v = jr_jdoc_get(d, 0, key);
    char *s, num[64];
    jr_err err;
    int rc;

    if (v < 0) {
        snprintf(why, size, "'%s' is missing", key);
        return -1;
    }
    if (d->n[v].type == JR_JSON_NUMBER && d->n[v].len < sizeof num) {
        memcpy(num, d->n[v].at, d->n[v].len);
        num[d->n[v].len] = '\0';
        *out = strtod(num, NULL);
        return 0;
    }
    if (d->n[v].type != JR_JSON_STRING || (s = jr_jdoc_str(d, v)) == NULL) {
        snprintf(why, size, "'%s' must be epoch seconds or a time such as "
                 "\"2026-11-22T10:00:00Z\"", key);
        return -1;
    }
    rc = jr_parse_time(s, key, out, &err);
    free(s);
    if (rc < 0)
        snprintf(why, size, "%.190s", err.msg);
    return rc;
}

static void
r_backfill(jr_apicall *c)
{
    jr_apireq *q = sched_req(c, &op_backfill);
    jr_jdoc d = {0};
    char why[200];
    jr_err err;

    if (q == NULL || body_text(c, q) < 0) {
        jr_apireq_free(q);
        return;
    }
    if (jr_jdoc_parse(&d, q->mem, strlen(q->mem), "body", &err) < 0 ||
        d.n[0].type != JR_JSON_OBJECT) {
        jr_http_error(c->req, 400, "%s", d.count ? "the body must be an "
                      "object {\"from\": ..., \"to\": ...}" : err.msg);
        jr_jdoc_free(&d);
        jr_apireq_free(q);
        return;
    }
    if (when(&d, "from", &q->from, why, sizeof why) < 0 ||
        when(&d, "to", &q->to, why, sizeof why) < 0) {
        jr_http_error(c->req, 400, "%s", why);
        jr_jdoc_free(&d);
        jr_apireq_free(q);
        return;
    }
    jr_jdoc_free(&d);
    jr_api_ask(c, q);
}

const jr_apiroute jr_apiroutes_schedrt[] = {
    {"schedules/*", 1, r_add},
    {"schedules/*", 2, r_set},
    {"schedules/*", 3, r_remove},
    {"schedules/*/backfill", 1, r_backfill},
    {NULL, 0, NULL}
};
