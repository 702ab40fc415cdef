/* apidbrows.c - the JSON the HTTP API's database reader writes: the
 * text helpers (api.h's jr_api_printf, jr_api_str, jr_api_time) and the
 * rows of the storage interface's walks as the API shows them: a job
 * (its attempt history too), a dead job, a name's and a queue's counts,
 * and the Prometheus gauges. Runs on the database thread. Uses api.h,
 * apidb.h, backend.h, jsontext.h. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/api.h"
#include "http/apidb.h"
#include "backend.h"
#include "base/jsontext.h"
#include "base/steprec.h"

typedef jr_apiwalk walk;
typedef jr_apitotals totals;

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

/* What a caller that may not decrypt sees of an encrypted value. */
#define ENCRYPTED "<encrypted>"

/* One job as the API shows it: show adds the payload and the attempt
 * history ("attempts"; a list's "attempts" is the count, as "attempt"
 * is in both). */
int
jr_apidb_job_row(const jr_job_row *r, void *arg)
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
                     strcmp(r->state, "cancelled") == 0 ||
                     strcmp(r->state, "expired") == 0;
    if (r->payload != NULL) {
        char *own[4];
        const char *payload = jr_api_opened(w->q, r->queue, r->payload, &own[0]);
        const char *result = jr_api_opened(w->q, r->queue, r->result, &own[1]);
        const char *waits = jr_api_opened(w->q, r->queue, r->waits, &own[2]);
        const char *steps = jr_api_opened(w->q, r->queue, r->steps, &own[3]);

        /* valid JSON: the database checks it at insert; given as text
         * too, so that a client shows it exactly as pushed */
        jr_buf_put(b, ",\"payload\":", 11);
        jr_api_str(b, payload != NULL ? payload : ENCRYPTED);
        /* the handler's return value as a JSON value: the worker checked
         * it as every payload is (jsontext.h) */
        jr_buf_put(b, ",\"result\":", 10);
        if (r->result != NULL && result == NULL)
            jr_api_str(b, ENCRYPTED);
        else if (result != NULL)
            jr_buf_put(b, result, strlen(result));
        else
            jr_buf_put(b, "null", 4);
        jr_buf_put(b, ",\"wait_on\":", 11);
        jr_api_str(b, r->wait_on);
        jr_buf_put(b, ",\"wake_at\":", 11);
        jr_api_time(b, r->wake_at);
        jr_buf_put(b, ",\"waits\":", 9);
        if (r->waits != NULL && waits == NULL)
            jr_api_str(b, ENCRYPTED);
        else if (waits != NULL)
            jr_buf_put(b, waits, strlen(waits));
        else
            jr_buf_put(b, "null", 4);
        if (r->sql_statements > 0)
            jr_api_printf(b, ",\"sql_statements\":%d", r->sql_statements);
        else
            jr_buf_put(b, ",\"sql_statements\":null", 22);
        jr_buf_put(b, ",\"expires_at\":", 14);
        jr_api_time(b, r->expires_at);
        num_or_null(b, "deadline", r->deadline > 0 ? r->deadline : NAN);
        jr_buf_put(b, ",\"deadline_at\":", 15);
        jr_api_time(b, r->deadline_at);
        if (r->cost > 0)
            jr_api_printf(b, ",\"cost\":%ld", r->cost);
        else
            jr_buf_put(b, ",\"cost\":null", 12);
        history(b, r);
        jr_buf_put(b, ",\"steps\":", 9);
        if (r->steps != NULL && steps == NULL)
            jr_api_str(b, ENCRYPTED);
        else
            jr_steprec_json(b, steps);
        for (int i = 0; i < 4; i++)
            free(own[i]);
    }
    jr_buf_put(b, "}", 1);
    return 0;
}

int
jr_apidb_dead_row(const jr_dead_row *r, void *arg)
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

/* "state":n[s],... of the states whose flags hold all of flags, in the
 * list's order. */
void
jr_apidb_counts(jr_buf *b, const long *n, int flags)
{
    const char *sep = "";

    for (int s = 0; s < JR_NSTATES; s++)
        if ((jr_state_flags(s) & flags) == flags) {
            jr_api_printf(b, "%s\"%s\":%ld", sep, jr_state_name(s), n[s]);
            sep = ",";
        }
}

int
jr_apidb_stat_row(const jr_stat_row *r, void *arg)
{
    totals *t = arg;
    jr_buf *b = &t->w.q->body;

    comma(&t->w);
    jr_api_str(b, r->name);
    jr_buf_put(b, ":{", 2);
    jr_apidb_counts(b, r->n, JR_ST_NAME);
    jr_buf_put(b, "}", 1);
    for (int s = 0; s < JR_NSTATES; s++)
        t->n[s] += r->n[s];
    return 0;
}

int
jr_apidb_queue_row(const jr_queue_row *r, void *arg)
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
    jr_apidb_counts(b, r->n, 0);
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

int
jr_apidb_gauge_name(const jr_stat_row *r, void *arg)
{
    gauge_states(&((jr_apireq *)arg)->body, "jobrunner_jobs{name=\"",
                 r->name, r->n, JR_ST_NAME);
    return 0;
}

/* One queue's state gauges into the body, its paused gauge into the
 * second buffer (one read of the queues for both families). */
int
jr_apidb_gauge_queue(const jr_queue_row *r, void *arg)
{
    jr_buf *two = arg;

    gauge_states(&two[0], "jobrunner_queue_jobs{queue=\"", r->name, r->n, 0);
    jr_buf_put(&two[1], "jobrunner_queue_paused{queue=\"", 30);
    label(&two[1], r->name);
    jr_api_printf(&two[1], "\"} %d\n", r->paused ? 1 : 0);
    jr_buf_put(&two[2], "jobrunner_queue_oldest_ready_seconds{queue=\"", 44);
    label(&two[2], r->name);
    jr_api_printf(&two[2], "\"} %.3f\n", r->oldest_ready > 0 ?
                  fmax(jr_now() - r->oldest_ready, 0) : 0);
    return 0;
}
