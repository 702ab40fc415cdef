/* apidbsignal.c - the HTTP API's signals: POST /api/jobs/ID/signal with
 * {"name": NAME, "payload": JSON} sends a signal to the job's
 * wait_signal (docs/handlers.md, "Signals and durable sleep"). The
 * route (checked in the loop), the operation it asks and the
 * operation's run function on the database thread. Uses apiroute.h,
 * apidb.h, backend.h, job.h, jsondom.h. */
#define _GNU_SOURCE             /* memmem */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>

#include "http/apiroute.h"
#include "http/apidb.h"
#include "backend.h"
#include "base/job.h"
#include "base/jsondom.h"
#include "config/config.h"

/* ---- on the database thread ---- */

static int
job_signal(jr_db *db, jr_apireq *q, jr_err *e)
{
    char state[16];
    int woken;

    if ((woken = db->ops->signal(db->b, q->ids[0], q->name, q->mem, state,
                                 sizeof state, e)) < 0)
        return -1;
    jr_api_printf(&q->body, "{\"id\":%lld,\"signal\":",
                  (long long)q->ids[0]);
    jr_api_str(&q->body, q->name);
    jr_api_printf(&q->body, ",\"outcome\":\"%s\",\"state\":",
                  woken ? "ready" : "kept");
    jr_api_str(&q->body, state);
    jr_buf_put(&q->body, "}", 1);
    return 0;
}

/* The operation (api.h): name, reader, scope, run, and a refusal (a
 * finished job, a signal sent already or timed out) is a conflict. */
static const jr_apiop op_signal = {"signal", 0, JR_SCOPE_WRITE, job_signal,
                                   409};

/* ---- the route, in the loop ---- */

/* Reads {"name": ..., "payload": ...} (text, n bytes) into q: the name
 * into q->name, the payload's text into q->mem (NULL: {}). Returns 0, or
 * -1 with why set. */
static int
read_body(const char *text, size_t n, size_t max_payload, jr_apireq *q,
          char *why, size_t size)
{
    jr_jdoc doc = {0};
    jr_err err;
    char *name = NULL;
    int k, v, rc = -1;

    if (jr_jdoc_parse(&doc, text, n, "signal", &err) < 0) {
        snprintf(why, size, "%s", err.msg);
        return -1;
    }
    if (doc.n[0].type != JR_JSON_OBJECT) {
        snprintf(why, size, "give {\"name\": \"approved\", \"payload\": "
                 "{...}}");
        goto done;
    }
    for (k = doc.n[0].first; k >= 0; k = doc.n[v].next) {
        v = doc.n[k].next;
        if (!jr_jdoc_is(&doc, k, "name") && !jr_jdoc_is(&doc, k, "payload")) {
            char *key = jr_jdoc_str(&doc, k);
            snprintf(why, size, "signal: unknown key '%.40s' (name and "
                     "payload are known)", key ? key : "?");
            free(key);
            goto done;
        }
    }
    k = jr_jdoc_get(&doc, 0, "name");
    if (k < 0 || doc.n[k].type != JR_JSON_STRING ||
        (name = jr_jdoc_str(&doc, k)) == NULL || strlen(name) > 128) {
        snprintf(why, size, "signal: give its name, a string: {\"name\": "
                 "\"approved\"}");
        goto done;
    }
    /* a \u0000 would end the decoded name early: "a\u0000zz" is not "a" */
    if (memmem(doc.n[k].at, doc.n[k].len, "\\u0000", 6) != NULL) {
        snprintf(why, size, "invalid signal name: it holds a NUL "
                 "(\\u0000), not one of [A-Za-z0-9_.:-]");
        goto done;
    }
    memcpy(q->name, name, strlen(name) + 1);
    if ((v = jr_jdoc_get(&doc, 0, "payload")) >= 0) {
        if ((q->mem = malloc(doc.n[v].len + 1)) == NULL) {
            snprintf(why, size, "signal: out of memory");
            goto done;
        }
        memcpy(q->mem, doc.n[v].at, doc.n[v].len);
        ((char *)q->mem)[doc.n[v].len] = '\0';
    }
    if (jr_signal_check(q->name, q->mem, max_payload, &err) < 0) {
        snprintf(why, size, "%s", err.msg);
        goto done;
    }
    rc = 0;
done:
    free(name);
    jr_jdoc_free(&doc);
    return rc;
}

/* POST /api/jobs/ID/signal */
static void
r_signal(jr_apicall *c)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(c->req);
    size_t n = evbuffer_get_length(in);
    const char *text = (const char *)evbuffer_pullup(in, -1);
    jr_apireq *q;
    char why[600];
    int64_t id;

    if (jr_api_job_id(c->req, c->arg, &id) < 0 ||
        (q = jr_api_req(c, &op_signal)) == NULL)
        return;
    q->ids[0] = id;
    q->nids = 1;
    if (n == 0 || text == NULL)
        snprintf(why, sizeof why, "give {\"name\": \"approved\", "
                 "\"payload\": {...}}");
    if (n == 0 || text == NULL ||
        read_body(text, n, c->host->cfg->max_payload, q, why,
                  sizeof why) < 0 ||
        jr_api_seal_text(c, &q->mem, why, sizeof why) < 0) {
        jr_http_error(c->req, 400, "%s", why);
        jr_apireq_free(q);
        return;
    }
    jr_api_ask(c, q);
}

const jr_apiroute jr_apiroutes_signal[] = {
    {"jobs/*/signal", 1, r_signal},
    {NULL, 0, NULL}
};
