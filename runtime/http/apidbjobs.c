/* apidbjobs.c - the HTTP API's jobs and their counts: GET /api/stats,
 * /api/queues, /api/jobs (a page of the list), /api/jobs/ID (show, or a
 * long poll with ?wait=), /api/dead, and POST /api/jobs (a push); also the
 * database's gauges of /metrics and the long polls' outcomes (http.c,
 * httpwait.c ask those). Each route (checked in the loop), the operation
 * it asks and the operation's run function on the database thread, with
 * apidbrows.c's writers of the rows. Uses apiroute.h, apidb.h, backend.h,
 * config.h, job.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/util.h>

#include "http/apiroute.h"
#include "http/apidb.h"
#include "backend.h"
#include "base/job.h"
#include "base/log.h"
#include "base/trace.h"
#include "config/config.h"

typedef jr_apiwalk walk;
typedef jr_apitotals totals;

/* ---- on the database thread ---- */

/* The jobs waiting for a signal and for a date (a sleep). */
static int
waiting_gauges(jr_db *db, jr_buf *b, jr_err *e)
{
    long on_signal, on_date;

    if (db->ops->wait_counts(db->b, &on_signal, &on_date, e) < 0)
        return -1;
    jr_api_printf(b, "# HELP jobrunner_jobs_waiting Jobs waiting in "
                  "wait_signal or a durable sleep, by what they wait on "
                  "(the whole database).\n"
                  "# TYPE jobrunner_jobs_waiting gauge\n"
                  "jobrunner_jobs_waiting{on=\"signal\"} %ld\n"
                  "jobrunner_jobs_waiting{on=\"date\"} %ld\n",
                  on_signal, on_date);
    return 0;
}

/* counts the sequences held, n[0], and the blocked ones, n[1] */
static int
seq_count(const jr_seq_row *r, void *arg)
{
    long *n = arg;

    n[0]++;
    n[1] += r->blocked != 0;
    return 0;
}

/* The sequences' two gauges (docs/queues.md, "Sequences"): one number
 * each, whatever the keys. */
static int
seq_gauges(jr_db *db, jr_buf *b, jr_err *e)
{
    long n[2] = {0, 0};

    if (db->ops->sequences(db->b, 0, 0, seq_count, n, e) < 0)
        return -1;
    jr_api_printf(b, "# HELP jobrunner_sequences Sequences with jobs not "
                  "ended or a dead job blocking them.\n"
                  "# TYPE jobrunner_sequences gauge\njobrunner_sequences %ld\n"
                  "# HELP jobrunner_sequences_blocked Sequences held by a "
                  "dead job (on_failure block) until skip or unblock.\n"
                  "# TYPE jobrunner_sequences_blocked gauge\n"
                  "jobrunner_sequences_blocked %ld\n", n[0], n[1]);
    return 0;
}

static int
gauges(jr_db *db, jr_apireq *q, jr_err *e)
{
    jr_buf *b = &q->body, two[3] = {{0}, {0}, {0}};
    int rc;

    jr_api_printf(b, "# HELP jobrunner_jobs Jobs in the database by job "
                  "name and state (the whole database: the same from every "
                  "runner).\n# TYPE jobrunner_jobs gauge\n");
    if (db->ops->stats(db->b, jr_apidb_gauge_name, q, e) < 0)
        return -1;
    jr_api_printf(b, "# HELP jobrunner_queue_jobs Jobs in the database by "
                  "queue and state (the whole database).\n"
                  "# TYPE jobrunner_queue_jobs gauge\n");
    two[0] = *b;                /* the body grows in two[0] */
    jr_api_printf(&two[1], "# HELP jobrunner_queue_paused 1 while the queue "
                  "is paused.\n# TYPE jobrunner_queue_paused gauge\n");
    jr_api_printf(&two[2], "# HELP jobrunner_queue_oldest_ready_seconds "
                  "How long the queue's oldest ready job has been due (0: "
                  "none ready; the whole database).\n"
                  "# TYPE jobrunner_queue_oldest_ready_seconds gauge\n");
    rc = db->ops->queue_list(db->b, jr_apidb_gauge_queue, two, e);
    *b = two[0];
    if (rc == 0) {
        jr_buf_put(b, two[1].p, two[1].len);
        jr_buf_put(b, two[2].p, two[2].len);
    }
    jr_buf_free(&two[1]);
    jr_buf_free(&two[2]);
    return rc < 0 || waiting_gauges(db, b, e) < 0 ||
           seq_gauges(db, b, e) < 0 ||
           jr_apidb_fair_gauges(db, b, q->limits, q->nlimits, e) < 0 ? -1 : 0;
}

static int
stats(jr_db *db, jr_apireq *q, jr_err *e)
{
    totals t = {{q, 0, NULL}, {0}};
    jr_buf *b = &q->body;
    jr_buf names = {0};
    long seqs[2] = {0, 0};

    jr_buf_put(b, "{\"names\":{", 10);
    if (db->ops->stats(db->b, jr_apidb_stat_row, &t, e) < 0)
        return -1;
    jr_buf_put(b, "},", 2);
    jr_apidb_counts(b, t.n, JR_ST_NAME);
    jr_buf_put(b, ",\"queues\":[", 11);
    t.w.n = 0;
    if (db->ops->queue_list(db->b, jr_apidb_queue_row, &t.w, e) < 0 ||
        db->ops->sequences(db->b, 0, 0, seq_count, seqs, e) < 0)
        return -1;
    jr_api_printf(b, "],\"sequences\":{\"held\":%ld,\"blocked\":%ld},",
                  seqs[0], seqs[1]);
    if (jr_apidb_fair_json(db, b, q->limits, q->nlimits, e) < 0)
        return -1;
    jr_buf_put(b, ",", 1);
    if (jr_apidb_aging_json(db, b, q->limits, q->nlimits, e) < 0)
        return -1;
    jr_buf_put(b, "}", 1);
    jr_buf_free(&names);
    return 0;
}

/* PUSH: pushes[0..npushes) in one transaction; 201 with their ids. */
static int
push(jr_db *db, jr_apireq *q, jr_err *e)
{
    int i;

    if (db->ops->push(db->b, q->pushes, q->npushes, q->ids, e) < 0)
        return -1;
    q->nids = q->npushes;
    q->status = 201;
    jr_buf_put(&q->body, q->many ? "{\"ids\":[" : "{\"id\":",
               q->many ? 8 : 6);
    for (i = 0; i < q->npushes; i++)
        jr_api_printf(&q->body, "%s%lld", i ? "," : "", (long long)q->ids[i]);
    jr_buf_put(&q->body, q->many ? "],\"outcomes\":[" : ",\"outcome\":",
               q->many ? 14 : 11);
    for (i = 0; i < q->npushes; i++)
        jr_api_printf(&q->body, "%s\"%s\"", i ? "," : "",
                      jr_outcome_name(q->outcomes[i]));
    jr_buf_put(&q->body, q->many ? "]}" : "}", q->many ? 2 : 1);
    return 0;
}

/* JOB: the job; a long poll (wait) first marks it to be kept after
 * success (result_ttl), as `jobrunner wait` does, and notes whether it
 * ended. */
static int
show(jr_db *db, jr_apireq *q, jr_err *e)
{
    walk w = {q, 0, NULL};
    jr_outcome o;
    int64_t last;

    if (q->wait > 0 && q->keep > 0) {
        if (db->ops->outcomes(db->b, q->ids, 1, q->keep, &o, &last, e) < 0)
            return -1;
        free(o.result);
        free(o.error);
        q->keep = 0;            /* once */
    }
    if (db->ops->show(db->b, q->ids[0], jr_apidb_job_row, &w, e) < 0)
        return -1;
    return jr_apiflow_links(db, q, e);
}

/* OUTCOMES: which of ids[0..nids) have ended (gone: a plain success, or
 * pruned); the body stays empty. */
static int
ended(jr_db *db, jr_apireq *q, jr_err *e)
{
    jr_outcome *o = calloc((size_t)q->nids + 1, sizeof *o);
    int64_t last;
    int i, st;

    if (o == NULL)
        return jr_fail(e, JR_ENOMEM, "out of memory");
    if (db->ops->outcomes(db->b, q->ids, q->nids, 0, o, &last, e) < 0) {
        free(o);
        return -1;
    }
    for (i = 0; i < q->nids; i++) {
        st = o[i].state;
        q->ended[i] = st < 0 || st == JR_STATE_COMPLETED ||
                      st == JR_STATE_DEAD || st == JR_STATE_CANCELLED;
        free(o[i].result);
        free(o[i].error);
    }
    free(o);
    return 0;
}

/* JOBS: a page of the job list; a page back (after_id) comes oldest
 * first from the database and is turned round here, newest first as
 * always. */
static int
jobs(jr_db *db, jr_apireq *q, jr_err *e)
{
    jr_list_filter f = jr_apidb_filter(q);
    size_t at[JR_API_LIST_MAX + 1];
    walk w = {q, 0, f.after_id > 0 ? at : NULL};
    jr_buf out = {0};
    int i;

    jr_buf_put(&q->body, "[", 1);
    if (db->ops->list(db->b, &f, jr_apidb_job_row, &w, e) < 0)
        return -1;
    if (w.at == NULL || w.n < 2) {
        jr_buf_put(&q->body, "]", 1);
        return 0;
    }
    at[w.n] = q->body.len + 1;          /* as if a comma followed */
    jr_buf_put(&out, "[", 1);
    for (i = w.n - 1; i >= 0; i--) {
        jr_buf_put(&out, q->body.p + at[i], at[i + 1] - 1 - at[i]);
        jr_buf_put(&out, i ? "," : "]", 1);
    }
    if (out.oom) {
        jr_buf_free(&out);
        q->body.oom = 1;
        return 0;
    }
    jr_buf_free(&q->body);
    q->body = out;
    return 0;
}

/* DEAD and QUEUES: the whole list. */
static int
dead(jr_db *db, jr_apireq *q, jr_err *e)
{
    walk w = {q, 0, NULL};

    jr_buf_put(&q->body, "[", 1);
    if (db->ops->dead_list(db->b, q->limit, jr_apidb_dead_row, &w, e) < 0)
        return -1;
    jr_buf_put(&q->body, "]", 1);
    return 0;
}

static int
queues(jr_db *db, jr_apireq *q, jr_err *e)
{
    walk w = {q, 0, NULL};

    jr_buf_put(&q->body, "[", 1);
    if (db->ops->queue_list(db->b, jr_apidb_queue_row, &w, e) < 0)
        return -1;
    jr_buf_put(&q->body, "]", 1);
    return 0;
}

/* The operations: name; reader, 1 when it may run on the reads' own
 * connection; scope; run (api.h). */
#define R JR_SCOPE_READ
#define P JR_SCOPE_PUSH
static const jr_apiop op_stats   = {"stats",    1, R, stats, 0};
static const jr_apiop op_jobs    = {"jobs",     1, R, jobs, 0};
static const jr_apiop op_dead    = {"dead",     1, R, dead, 0};
static const jr_apiop op_queues  = {"queues",   1, R, queues, 0};
static const jr_apiop op_push    = {"push",     0, P, push, 0};
const jr_apiop jr_apiop_job      = {"job",      1, R, show, 0};
const jr_apiop jr_apiop_gauges   = {"gauges",   1, R, gauges, 0};
const jr_apiop jr_apiop_outcomes = {"outcomes", 1, R, ended, 0};
#undef R
#undef P

/* ---- the routes, in the loop ---- */

static void
get_list(jr_apicall *c, const jr_apiop *op)
{
    jr_apireq *q = jr_api_req(c, op);

    if (q != NULL && jr_api_filters(c->req, c->query, q) < 0) {
        free(q);
        return;
    }
    if (q != NULL && q->where[0] != '\0' && c->host->cfg->keys != NULL) {
        jr_http_error(c->req, 400, "where: payloads are encrypted "
                      "(encryption.key_file), a filter on their fields "
                      "cannot match");
        free(q);
        return;
    }
    if (q != NULL)
        jr_api_ask(c, q);
}

static void
r_stats(jr_apicall *c)
{
    jr_apireq *q = jr_api_req(c, &op_stats);

    if (q != NULL) {
        q->limits = c->host->cfg->limits.l;     /* its fair queues */
        q->nlimits = c->host->cfg->limits.n;
        jr_api_ask(c, q);
    }
}

static void
r_queues(jr_apicall *c)
{
    jr_apireq *q = jr_api_req(c, &op_queues);

    if (q != NULL)
        jr_api_ask(c, q);
}

static void r_jobs(jr_apicall *c) { get_list(c, &op_jobs); }
static void r_dead(jr_apicall *c) { get_list(c, &op_dead); }

static void
r_job(jr_apicall *c)
{
    jr_apireq *q;
    int64_t id;
    double wait;

    if (jr_api_job_id(c->req, c->arg, &id) == 0 &&
        (wait = jr_api_wait(c->req, c->query)) >= 0 &&
        (q = jr_api_req(c, &jr_apiop_job)) != NULL) {
        q->ids[0] = id;
        q->nids = 1;
        q->wait = wait;
        q->keep = wait > 0 ? c->host->cfg->result_ttl : 0;
        q->keys = c->host->cfg->keys;
        q->decrypt = jr_api_may_decrypt(c);
        if (c->tok != NULL && c->tok->scope == JR_TOKEN_PUSH)
            q->dtok = c->tok;
        jr_api_ask(c, q);
    }
}

/* POST /api/jobs: one job object, or an array pushed all or none. */
/* The request's own trace context (docs/tracing.md): its traceparent
 * and tracestate headers, given to every job of the push (api.h) that
 * has none of its own. Several
 * tracestate headers are one list, joined by commas (RFC 9110). A
 * malformed one is the HTTP client's tracing, not the jobs: it is
 * ignored with a warning, as W3C Trace Context asks of a receiver: a bad
 * traceparent drops both, a bad tracestate only itself (its failure must
 * not affect the traceparent). */
void
jr_api_push_trace(const jr_apicall *c, jr_apireq *q, jr_push *p, int np,
                  const char *what)
{
    struct evkeyvalq *h = evhttp_request_get_input_headers(c->req);
    const char *tp = evhttp_find_header(h, "traceparent");
    char *state = q->trace + JR_API_TRACE_MAX;
    const char *ts = NULL;
    struct evkeyval *kv;
    size_t n = 0, len;
    jr_err err;
    int i, bad = 0;

    if (tp == NULL)
        return;
    if (jr_trace_check(tp, NULL, what, &err) < 0) {
        jr_log(JR_LOG_WARN, "%s; the jobs are pushed without it", err.msg);
        return;
    }
    for (kv = h->tqh_first; kv != NULL && !bad; kv = kv->next.tqe_next) {
        if (evutil_ascii_strcasecmp(kv->key, "tracestate") != 0 ||
            *kv->value == '\0')
            continue;
        len = strlen(kv->value);
        if (n + 1 + len >= JR_API_TRACE_MAX) {
            snprintf(err.msg, sizeof err.msg, "%s: tracestate of more than "
                     "%d bytes", what, JR_TRACESTATE_MAX);
            bad = 1;
            break;
        }
        if (n > 0)
            state[n++] = ',';
        memcpy(state + n, kv->value, len + 1);
        n += len;
    }
    if (n > 0 && !bad)
        ts = state;
    if (ts != NULL && jr_trace_check(tp, ts, what, &err) < 0)
        bad = 1;
    if (bad) {
        jr_log(JR_LOG_WARN, "%s; the jobs are pushed with the traceparent "
               "alone", err.msg);
        ts = NULL;
    }
    snprintf(q->trace, JR_API_TRACE_MAX, "%s", tp);
    for (i = 0; i < np; i++)
        if (p[i].traceparent == NULL) {
            p[i].traceparent = q->trace;
            p[i].tracestate = ts;
        }
}

static void
r_push(jr_apicall *c)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(c->req);
    size_t n = evbuffer_get_length(in);
    const char *text = (const char *)evbuffer_pullup(in, -1);
    jr_apireq *q = jr_api_req(c, &op_push);
    char why[400];

    if (q == NULL)
        return;
    if (n == 0 || text == NULL)
        snprintf(why, sizeof why, "give a job {\"name\": ...} or an array "
                 "of them");
    if (n == 0 || text == NULL ||
        jr_apipush_parse(text, n, c->host->cfg->max_payload, q, why,
                         sizeof why) < 0 ||
        jr_api_seal_pushes(c, q, q->pushes, q->npushes, why,
                           sizeof why) < 0) {
        jr_http_error(c->req, 400, "%s", why);
        jr_apireq_free(q);
        return;
    }
    jr_api_push_trace(c, q, q->pushes, q->npushes, "POST /api/jobs");
    jr_api_ask(c, q);
}

const jr_apiroute jr_apiroutes_jobs[] = {
    {"stats", 0, r_stats},
    {"queues", 0, r_queues},
    {"jobs", 0, r_jobs},
    {"jobs", 1, r_push},
    {"jobs/*", 0, r_job},
    {"dead", 0, r_dead},
    {NULL, 0, NULL}
};
