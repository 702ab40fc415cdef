/* apidb.c - the database half of the HTTP API: runs one jr_apireq on the
 * database thread (jr_dbthread_request) through the storage interface and
 * writes the reply's JSON: jobs (a job's attempt history too), queues,
 * dead jobs, stats, pushes and outcomes; the schedules, limits and bulk
 * actions are apidbsched.c's, the workflows apidbflow.c's. The table of
 * the operations (api.h's jr_apiop_*) is at its end. Never runs in the
 * loop. Uses api.h, apidb.h, backend.h, json.h. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/api.h"
#include "http/apidb.h"
#include "backend.h"
#include "base/flow.h"
#include "base/jsontext.h"
#include "config/schedules.h"
#include "lua/json.h"

void
jr_api_printf(jr_buf *b, const char *fmt, ...)
{
    char small[256], *big;
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof small) {
        jr_buf_put(b, small, (size_t)n);
        return;
    }
    if ((big = malloc((size_t)n + 1)) == NULL) {
        b->oom = 1;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    jr_buf_put(b, big, (size_t)n);
    free(big);
}

void
jr_api_str(jr_buf *b, const char *s)
{
    size_t n, k, used;
    char out[6];

    if (s == NULL) {
        jr_buf_put(b, "null", 4);
        return;
    }
    jr_buf_put(b, "\"", 1);
    for (n = strlen(s); n > 0; s += used, n -= used) {
        if (*s == '<' || *s == '>' || *s == '&') {
            jr_api_printf(b, "\\u%04x", (unsigned)*s);
            used = 1;
        } else if ((k = jr_jsontext_escape_char(s, n, out, &used)) == 0) {
            jr_buf_put(b, JR_JSONTEXT_BADBYTE, strlen(JR_JSONTEXT_BADBYTE));
            used = 1;
        } else {
            jr_buf_put(b, out, k);
        }
    }
    jr_buf_put(b, "\"", 1);
}

void
jr_api_time(jr_buf *b, double t)
{
    if (t == 0 || !isfinite(t))
        jr_buf_put(b, "null", 4);
    else
        jr_api_printf(b, "%.3f", t);
}

typedef struct walk {           /* a JSON array being written */
    jr_apireq  *q;
    int         n;              /* elements so far */
    size_t     *at;             /* NULL, or where each element starts */
} walk;

static void
comma(walk *w)
{
    if (w->n > 0)
        jr_buf_put(&w->q->body, ",", 1);
    if (w->at != NULL)
        w->at[w->n] = w->q->body.len;
    w->n++;
}

static void
num_or_null(jr_buf *b, const char *key, double v)
{
    jr_api_printf(b, ",\"%s\":", key);
    if (isnan(v))
        jr_buf_put(b, "null", 4);
    else
        jr_api_printf(b, "%.17g", v);
}

/* GET /api/jobs/ID's "attempts": the failed attempts, oldest first,
 * times in epoch seconds as the API's other times. */
static void
history(jr_buf *b, const jr_job_row *r)
{
    int i;

    jr_buf_put(b, ",\"attempts\":[", 13);
    for (i = 0; i < r->nhistory; i++) {
        const jr_attempt_row *a = &r->history[i];
        jr_api_printf(b, "%s{\"attempt\":%d,\"error\":", i ? "," : "",
                      a->attempt);
        jr_api_str(b, a->error);
        jr_buf_put(b, ",\"at\":", 6);
        jr_api_time(b, a->at);
        num_or_null(b, "duration", a->duration);
        jr_buf_put(b, ",\"runner\":", 10);
        jr_api_str(b, a->runner);
        if (a->worker > 0)
            jr_api_printf(b, ",\"worker\":%d", a->worker);
        else
            jr_buf_put(b, ",\"worker\":null", 14);
        jr_buf_put(b, ",\"generation\":", 14);
        jr_api_str(b, a->generation);
        jr_buf_put(b, "}", 1);
    }
    jr_buf_put(b, "]", 1);
}

/* One job as the API shows it: show adds the payload and the attempt
 * history ("attempts"; a list's "attempts" is the count, as "attempt"
 * is in both). */
static int
job_row(const jr_job_row *r, void *arg)
{
    walk *w = arg;
    jr_buf *b = &w->q->body;

    comma(w);
    jr_api_printf(b, "{\"id\":%lld,\"name\":", (long long)r->id);
    jr_api_str(b, r->name);
    jr_buf_put(b, ",\"queue\":", 9);
    jr_api_str(b, r->queue);
    jr_buf_put(b, ",\"state\":", 9);
    jr_api_str(b, r->state);
    jr_api_printf(b, ",\"attempt\":%d", r->attempts);
    if (r->payload == NULL)
        jr_api_printf(b, ",\"attempts\":%d", r->attempts);
    jr_buf_put(b, ",\"max_retries\":", 15);
    if (r->max_retries < 0)
        jr_buf_put(b, "null", 4);
    else
        jr_api_printf(b, "%d", r->max_retries);
    jr_api_printf(b, ",\"priority\":%d", r->priority);
    const struct { const char *k; double v; } times[] = {
        {"run_at", r->run_at}, {"created_at", r->created_at},
        {"updated_at", r->updated_at}, {"started_at", r->started_at},
        {"finished_at", r->finished_at}, {"locked_until", r->locked_until}};
    for (size_t i = 0; i < sizeof times / sizeof times[0]; i++) {
        jr_api_printf(b, ",\"%s\":", times[i].k);
        jr_api_time(b, times[i].v);
    }
    jr_buf_put(b, ",\"last_error\":", 14);
    jr_api_str(b, r->last_error);
    jr_buf_put(b, ",\"generation\":", 14);
    jr_api_str(b, r->generation);
    jr_buf_put(b, ",\"locked_by\":", 13);
    jr_api_str(b, r->locked_by);
    num_or_null(b, "progress_done", r->progress_done);
    num_or_null(b, "progress_total", r->progress_total);
    jr_buf_put(b, ",\"progress_note\":", 17);
    jr_api_str(b, r->progress_note);
    jr_api_printf(b, ",\"cancel_requested\":%s",
                  r->cancel_requested ? "true" : "false");
    w->q->ended[0] = strcmp(r->state, "completed") == 0 ||
                     strcmp(r->state, "dead") == 0 ||
                     strcmp(r->state, "cancelled") == 0;
    if (r->payload != NULL) {
        /* valid JSON: the database checks it at insert; given as text
         * too, so that a client shows it exactly as pushed */
        jr_buf_put(b, ",\"payload\":", 11);
        jr_api_str(b, r->payload);
        /* the handler's return value as a JSON value: the worker checked
         * it as every payload is (jsontext.h) */
        jr_buf_put(b, ",\"result\":", 10);
        if (r->result != NULL)
            jr_buf_put(b, r->result, strlen(r->result));
        else
            jr_buf_put(b, "null", 4);
        history(b, r);
    }
    jr_buf_put(b, "}", 1);
    return 0;
}

static int
dead_row(const jr_dead_row *r, void *arg)
{
    walk *w = arg;
    jr_buf *b = &w->q->body;

    comma(w);
    jr_api_printf(b, "{\"id\":%lld,\"name\":", (long long)r->id);
    jr_api_str(b, r->name);
    jr_buf_put(b, ",\"queue\":", 9);
    jr_api_str(b, r->queue);
    jr_api_printf(b, ",\"attempts\":%d,\"last_error\":", r->attempts);
    jr_api_str(b, r->last_error);
    jr_buf_put(b, ",\"generation\":", 14);
    jr_api_str(b, r->generation);
    jr_buf_put(b, ",\"died_at\":", 11);
    jr_api_time(b, r->died_at);
    jr_buf_put(b, ",\"created_at\":", 14);
    jr_api_time(b, r->created_at);
    jr_buf_put(b, "}", 1);
    return 0;
}

typedef struct totals {         /* a stats walk */
    walk    w;
    long    n[JR_NSTATES];      /* the names' counts summed */
} totals;

/* "state":n[s],... of the states whose flags hold all of flags, in the
 * list's order. */
static void
counts_json(jr_buf *b, const long *n, int flags)
{
    const char *sep = "";

    for (int s = 0; s < JR_NSTATES; s++)
        if ((jr_state_flags(s) & flags) == flags) {
            jr_api_printf(b, "%s\"%s\":%ld", sep, jr_state_name(s), n[s]);
            sep = ",";
        }
}

static int
stat_row(const jr_stat_row *r, void *arg)
{
    totals *t = arg;
    jr_buf *b = &t->w.q->body;

    comma(&t->w);
    jr_api_str(b, r->name);
    jr_buf_put(b, ":{", 2);
    counts_json(b, r->n, JR_ST_NAME);
    jr_buf_put(b, "}", 1);
    for (int s = 0; s < JR_NSTATES; s++)
        t->n[s] += r->n[s];
    return 0;
}

static int
queue_row(const jr_queue_row *r, void *arg)
{
    walk *w = arg;
    jr_buf *b = &w->q->body;

    comma(w);
    jr_buf_put(b, "{\"name\":", 8);
    jr_api_str(b, r->name);
    jr_api_printf(b, ",\"paused\":%s,\"paused_at\":",
                  r->paused ? "true" : "false");
    jr_api_time(b, r->paused_at);
    jr_buf_put(b, ",", 1);
    counts_json(b, r->n, 0);
    jr_buf_put(b, "}", 1);
    return 0;
}

/* Prometheus label values: backslash, quote and newline escaped. */
static void
label(jr_buf *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\' || *s == '"')
            jr_buf_put(b, "\\", 1);
        if (*s == '\n')
            jr_buf_put(b, "\\n", 2);
        else
            jr_buf_put(b, s, 1);
    }
}

/* One gauge line per stored state whose flags hold all of flags, in the
 * list's order: METRIC{LABEL="name",state="s"} n[s]. */
static void
gauge_states(jr_buf *b, const char *head, const char *name, const long *n,
             int flags)
{
    for (int s = 0; s < JR_NSTATES; s++) {
        int f = jr_state_flags(s);

        if ((f & JR_ST_SUM) || (f & flags) != flags)
            continue;
        jr_buf_put(b, head, strlen(head));
        label(b, name);
        jr_api_printf(b, "\",state=\"%s\"} %ld\n", jr_state_name(s), n[s]);
    }
}

static int
gauge_name(const jr_stat_row *r, void *arg)
{
    gauge_states(&((jr_apireq *)arg)->body, "jobrunner_jobs{name=\"",
                 r->name, r->n, JR_ST_NAME);
    return 0;
}

/* One queue's state gauges into the body, its paused gauge into the
 * second buffer (one read of the queues for both families). */
static int
gauge_queue(const jr_queue_row *r, void *arg)
{
    jr_buf *two = arg;

    gauge_states(&two[0], "jobrunner_queue_jobs{queue=\"", r->name, r->n, 0);
    jr_buf_put(&two[1], "jobrunner_queue_paused{queue=\"", 30);
    label(&two[1], r->name);
    jr_api_printf(&two[1], "\"} %d\n", r->paused ? 1 : 0);
    return 0;
}

static int
gauges(jr_db *db, jr_apireq *q, jr_err *e)
{
    jr_buf *b = &q->body, two[2] = {{0}, {0}};
    int rc;

    jr_api_printf(b, "# HELP jobrunner_jobs Jobs in the database by job "
                  "name and state (the whole database: the same from every "
                  "runner).\n# TYPE jobrunner_jobs gauge\n");
    if (db->ops->stats(db->b, gauge_name, q, e) < 0)
        return -1;
    jr_api_printf(b, "# HELP jobrunner_queue_jobs Jobs in the database by "
                  "queue and state (the whole database).\n"
                  "# TYPE jobrunner_queue_jobs gauge\n");
    two[0] = *b;                /* the body grows in two[0] */
    jr_api_printf(&two[1], "# HELP jobrunner_queue_paused 1 while the queue "
                  "is paused.\n# TYPE jobrunner_queue_paused gauge\n");
    rc = db->ops->queue_list(db->b, gauge_queue, two, e);
    *b = two[0];
    if (rc == 0)
        jr_buf_put(b, two[1].p, two[1].len);
    jr_buf_free(&two[1]);
    return rc < 0 ? -1 : 0;
}

static int
stats(jr_db *db, jr_apireq *q, jr_err *e)
{
    totals t = {{q, 0, NULL}, {0}};
    jr_buf *b = &q->body;
    jr_buf names = {0};

    jr_buf_put(b, "{\"names\":{", 10);
    if (db->ops->stats(db->b, stat_row, &t, e) < 0)
        return -1;
    jr_buf_put(b, "},", 2);
    counts_json(b, t.n, JR_ST_NAME);
    jr_buf_put(b, ",\"queues\":[", 11);
    t.w.n = 0;
    if (db->ops->queue_list(db->b, queue_row, &t.w, e) < 0)
        return -1;
    jr_buf_put(b, "]}", 2);
    jr_buf_free(&names);
    return 0;
}

static int
outcome_list(jr_db *db, jr_apireq *q, jr_err *e)
{
    static const char *const word[] = {"", "cancelled", "cancel_requested",
                                       "finished", "not_found"};
    int out[JR_API_IDS_MAX];

    if (db->ops->cancel(db->b, q->ids, q->nids, out, e) < 0)
        return -1;
    jr_buf_put(&q->body, "{\"jobs\":[", 9);
    for (int i = 0; i < q->nids; i++)
        jr_api_printf(&q->body, "%s{\"id\":%lld,\"outcome\":\"%s\"}",
                      i ? "," : "", (long long)q->ids[i],
                      out[i] >= 1 && out[i] <= 4 ? word[out[i]] : "");
    jr_buf_put(&q->body, "]}", 2);
    return 0;
}

/* PUSH: pushes[0..npushes) in one transaction; 201 with their ids. */
static int
push(jr_db *db, jr_apireq *q, jr_err *e)
{
    static const char *const said[] = {"new", "duplicate", "replaced"};
    int i, o;

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
    for (i = 0; i < q->npushes; i++) {
        o = q->outcomes[i];
        jr_api_printf(&q->body, "%s\"%s\"", i ? "," : "",
                      said[o == JR_PUSH_DUPLICATE ? 1 :
                           o == JR_PUSH_REPLACED ? 2 : 0]);
    }
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
    if (db->ops->show(db->b, q->ids[0], job_row, &w, e) < 0)
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


static const char *
opt(const char *s)
{
    return s[0] ? s : NULL;
}

/* q's list filter; "" matches any. */
static jr_list_filter
list_filter(const jr_apireq *q)
{
    jr_list_filter f = {opt(q->state), opt(q->name), opt(q->queue),
                        q->limit, opt(q->where), q->before_id, q->after_id};

    return f;
}

/* JOBS: a page of the job list; a page back (after_id) comes oldest
 * first from the database and is turned round here, newest first as
 * always. */
static int
jobs(jr_db *db, jr_apireq *q, jr_err *e)
{
    jr_list_filter f = list_filter(q);
    size_t at[JR_API_LIST_MAX + 1];
    walk w = {q, 0, f.after_id > 0 ? at : NULL};
    jr_buf out = {0};
    int i;

    jr_buf_put(&q->body, "[", 1);
    if (db->ops->list(db->b, &f, job_row, &w, e) < 0)
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
    if (db->ops->dead_list(db->b, q->limit, dead_row, &w, e) < 0)
        return -1;
    jr_buf_put(&q->body, "]", 1);
    return 0;
}

static int
queues(jr_db *db, jr_apireq *q, jr_err *e)
{
    walk w = {q, 0, NULL};

    jr_buf_put(&q->body, "[", 1);
    if (db->ops->queue_list(db->b, queue_row, &w, e) < 0)
        return -1;
    jr_buf_put(&q->body, "]", 1);
    return 0;
}

static int
bulk(jr_db *db, jr_apireq *q, jr_err *e)
{
    jr_list_filter f = list_filter(q);

    return jr_apidb_bulk(db, q, &f, e);
}

/* The operations (api.h): name; reader, 1 when it may run on the reads'
 * own connection (batch, schedules and limits only read too, but on the
 * runner's); scope; run. */
#define R JR_SCOPE_READ
#define W JR_SCOPE_WRITE
#define P JR_SCOPE_PUSH
const jr_apiop jr_apiop_stats       = {"stats",       1, R, stats};
const jr_apiop jr_apiop_jobs        = {"jobs",        1, R, jobs};
const jr_apiop jr_apiop_job         = {"job",         1, R, show};
const jr_apiop jr_apiop_dead        = {"dead",        1, R, dead};
const jr_apiop jr_apiop_queues      = {"queues",      1, R, queues};
const jr_apiop jr_apiop_gauges      = {"gauges",      1, R, gauges};
const jr_apiop jr_apiop_outcomes    = {"outcomes",    1, R, ended};
const jr_apiop jr_apiop_batch       = {"batch",       0, R, jr_apiflow_batch};
const jr_apiop jr_apiop_schedules   = {"schedules",   0, R, jr_apidb_schedule};
const jr_apiop jr_apiop_limits      = {"limits",      0, R, jr_apidb_limits};
const jr_apiop jr_apiop_push        = {"push",        0, P, push};
const jr_apiop jr_apiop_flow        = {"flow",        0, P, jr_apiflow_push};
const jr_apiop jr_apiop_cancel      = {"cancel",      0, W, outcome_list};
const jr_apiop jr_apiop_retry       = {"retry",       0, W, jr_apidb_retry};
const jr_apiop jr_apiop_purge       = {"purge",       0, W, jr_apidb_purge};
const jr_apiop jr_apiop_pause       = {"pause",       0, W, jr_apidb_pause};
const jr_apiop jr_apiop_resume      = {"resume",      0, W, jr_apidb_resume};
const jr_apiop jr_apiop_sched_ctl   = {"sched_ctl",   0, W, jr_apidb_schedule};
const jr_apiop jr_apiop_bulk_cancel = {"bulk_cancel", 0, W, bulk};
const jr_apiop jr_apiop_bulk_retry  = {"bulk_retry",  0, W, bulk};
const jr_apiop jr_apiop_bulk_purge  = {"bulk_purge",  0, W, bulk};
#undef R
#undef W
#undef P

void
jr_apireq_free(jr_apireq *q)
{
    if (q == NULL)
        return;
    jr_buf_free(&q->body);
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
                (q->op == &jr_apiop_sched_ctl ? 409 : 400) :
                e.code == 0 ? 500 : 503;
    jr_buf_put(&q->body, "{\"error\":", 9);
    jr_api_str(&q->body, e.code ? e.msg : "out of memory");
    jr_buf_put(&q->body, "}", 1);
}
