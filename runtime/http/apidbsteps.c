/* apidbsteps.c - a job's steps over HTTP: POST /api/jobs/ID/rerun runs a
 * completed, dead, cancelled or queued job again (backend.h's rerun:
 * its steps from ?from_step=NAME on cleared, all without it; a body, when
 * there is one, is its new payload). GET /api/jobs/ID lists the steps
 * (apidbrows.c). Uses apiroute.h, backend.h, jsontext.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "http/apiroute.h"
#include "backend.h"
#include "base/jsontext.h"
#include "config/config.h"

/* q->ids[0] runs again; q->name is the step ("" for all), q->mem the
 * payload or NULL. */
static int
rerun(jr_db *db, jr_apireq *q, jr_err *e)
{
    int rc = db->ops->rerun(db->b, q->ids[0], q->name[0] ? q->name : NULL,
                            q->mem, e);

    if (rc < 0)
        return -1;
    /* waiting: a job of a sequence, at its end behind the job holding it */
    jr_api_printf(&q->body, "{\"id\":%lld,\"state\":\"%s\"}",
                  (long long)q->ids[0], rc > 0 ? "waiting" : "queued");
    return 0;
}

static const jr_apiop op_rerun = {"rerun", 0, JR_SCOPE_WRITE, rerun, 0};

/* ?from_step=NAME into q->name; replies 400 on a bad query. */
static int
from_step(jr_apicall *c, jr_apireq *q)
{
    struct evkeyvalq kv = {0};
    struct evkeyval *e;
    jr_err err;
    int rc = 0;

    if (c->query == NULL)
        return 0;
    if (evhttp_parse_query_str(c->query, &kv) < 0 ||
        strstr(c->query, "%00") != NULL) {
        jr_http_error(c->req, 400, "malformed query string");
        return -1;
    }
    for (e = kv.tqh_first; e != NULL && rc == 0; e = e->next.tqe_next) {
        if (strcmp(e->key, "from_step") != 0)
            rc = jr_fail(&err, JR_EINPUT, "unknown parameter '%s' (rerun "
                         "takes from_step)", e->key);
        else if (jr_name_check(e->value, "step name", &err) == 0)
            snprintf(q->name, sizeof q->name, "%s", e->value);
        else
            rc = -1;
    }
    evhttp_clear_headers(&kv);
    if (rc < 0)
        jr_http_error(c->req, 400, "%s", err.msg);
    return rc;
}

/* The body, when there is one: the new payload, checked as a push's. */
static int
payload(jr_apicall *c, jr_apireq *q)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(c->req);
    size_t n = evbuffer_get_length(in), max = c->host->cfg->max_payload;
    const char *text = n > 0 ? (const char *)evbuffer_pullup(in, -1) : NULL;
    char why[200];

    if (n == 0)
        return 0;
    if (text == NULL || (q->mem = malloc(n + 1)) == NULL) {
        jr_http_error(c->req, 503, "out of memory");
        return -1;
    }
    memcpy(q->mem, text, n);
    ((char *)q->mem)[n] = '\0';
    if (max > 0 && n > max)
        snprintf(why, sizeof why, "payload of %zu bytes is over "
                 "max_payload (%zu)", n, max);
    else if (jr_jsontext_check(q->mem, n, why, sizeof why) == 0) {
        if (jr_api_seal_text(c, &q->mem, why, sizeof why) == 0)
            return 0;
        jr_http_error(c->req, 503, "%s", why);
        return -1;
    }
    jr_http_error(c->req, 400, "invalid JSON payload: %s", why);
    return -1;
}

static void
r_rerun(jr_apicall *c)
{
    jr_apireq *q;
    int64_t id;

    if (jr_api_job_id(c->req, c->arg, &id) < 0 ||
        (q = jr_api_req(c, &op_rerun)) == NULL)
        return;
    q->ids[0] = id;
    q->nids = 1;
    if (from_step(c, q) < 0 || payload(c, q) < 0) {
        jr_apireq_free(q);
        return;
    }
    jr_api_ask(c, q);
}

const jr_apiroute jr_apiroutes_steps[] = {
    {"jobs/*/rerun", 1, r_rerun},
    {NULL, 0, NULL}
};
