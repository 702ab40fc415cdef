/* apidblogs.c - a job's logs over HTTP: GET /api/jobs/ID/logs, its runs
 * as the backend keeps them (docs/handlers.md, "Each attempt's logs"),
 * those of one attempt with ?attempt=N (joblog.c picks them). Uses
 * apiroute.h, backend.h, joblog.h, jsontext.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "http/apiroute.h"
#include "backend.h"
#include "base/joblog.h"
#include "base/jsontext.h"
#include "base/util.h"

/* q->ids[0]'s runs, those of attempt q->limit when above 0:
 * {"id", "attempt" (null: all), "runs": [...]}. */
static int
logs(jr_db *db, jr_apireq *q, jr_err *e)
{
    char *text = NULL, why[120];
    jr_buf sel = {0};
    int rc;

    if ((rc = db->ops->job_logs(db->b, q->ids[0], &text, e)) < 0)
        return -1;
    if (rc == 0)
        return jr_fail(e, JR_ENOTFOUND, "no job with id %lld (finished jobs "
                       "are kept only as long as the config's retention "
                       "says, their logs with them)", (long long)q->ids[0]);
    rc = jr_joblog_select(text, q->limit, &sel, e);
    free(text);
    if (rc >= 0 && jr_jsontext_check(sel.p, sel.len, why, sizeof why) < 0)
        rc = jr_fail(e, JR_EDB, "job %lld: its logs are not JSON the API "
                     "can send: %s", (long long)q->ids[0], why);
    if (rc >= 0) {
        jr_api_printf(&q->body, "{\"id\":%lld,\"attempt\":",
                      (long long)q->ids[0]);
        if (q->limit > 0)
            jr_api_printf(&q->body, "%d", q->limit);
        else
            jr_api_printf(&q->body, "null");
        jr_api_printf(&q->body, ",\"runs\":");
        jr_buf_put(&q->body, sel.p, sel.len);
        jr_api_printf(&q->body, "}");
    }
    jr_buf_free(&sel);
    return rc < 0 ? -1 : 0;
}

static const jr_apiop op_logs = {"logs", 1, JR_SCOPE_READ, logs, 0};

/* ?attempt=N into q->limit; replies 400 on a bad query. */
static int
attempt(jr_apicall *c, jr_apireq *q)
{
    struct evkeyvalq kv = {0};
    struct evkeyval *e;
    jr_err err;
    long v;
    int rc = 0;

    if (c->query == NULL)
        return 0;
    if (evhttp_parse_query_str(c->query, &kv) < 0 ||
        strstr(c->query, "%00") != NULL) {
        jr_http_error(c->req, 400, "malformed query string");
        return -1;
    }
    for (e = kv.tqh_first; e != NULL && rc == 0; e = e->next.tqe_next) {
        if (strcmp(e->key, "attempt") != 0)
            rc = jr_fail(&err, JR_EINPUT, "unknown parameter '%.100s' "
                         "(logs takes attempt)", e->key);
        else if ((rc = jr_parse_int(e->value, "attempt", 1, 1000000000L, &v,
                                    &err)) == 0)
            q->limit = (int)v;
    }
    evhttp_clear_headers(&kv);
    if (rc < 0)
        jr_http_error(c->req, 400, "%s", err.msg);
    return rc;
}

static void
r_logs(jr_apicall *c)
{
    jr_apireq *q;
    int64_t id;

    if (jr_api_job_id(c->req, c->arg, &id) < 0 ||
        (q = jr_api_req(c, &op_logs)) == NULL)
        return;
    q->ids[0] = id;
    q->nids = 1;
    if (attempt(c, q) < 0) {
        jr_apireq_free(q);
        return;
    }
    jr_api_ask(c, q);
}

const jr_apiroute jr_apiroutes_logs[] = {
    {"jobs/*/logs", 0, r_logs},
    {NULL, 0, NULL}
};
