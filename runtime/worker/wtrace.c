/* wtrace.c - a job's spans, made in the worker that runs it
 * (docs/tracing.md): at its start the attempt's ids and whether it is
 * sampled; while it runs the events (progress, steps); at its end the
 * attempt's span ("process QUEUE", the messaging conventions' consumer
 * span), its wait in the queue before it (a child span), and those of
 * jobrunner.span, sent to the master in one JR_F_SPANS frame before the
 * result. With tracing off (w->set.tracing 0) each call returns at once:
 * no clock read, no allocation.
 *
 * Ids: attempt 1 of a job pushed with a context is a child of the
 * producer's span, in its trace; a later attempt starts a trace of its
 * own with a link to attempt 1's span. Those ids are derived from the
 * job (its id, its producer's trace, or its creation time when it has
 * none), so that any worker running attempt N finds attempt 1's span
 * without a record of it. Sampling: the producer's sampled flag, else
 * tracing.sample over the job's first trace id (every attempt of a job
 * the same). The spans go as one record (spanrec.h): the master
 * queues it, the export thread alone writes the JSON. Uses
 * worker_int.h, spanrec.h, trace.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/worker_int.h"
#include "base/log.h"
#include "base/spanrec.h"
#include "base/trace.h"

/* Attempt 1's trace and span of job j: the producer's trace (c), else
 * one of the job's own. */
static void
first_ids(const jr_job *j, const jr_tctx *c, uint8_t trace[16],
          uint8_t span[8])
{
    uint64_t created;

    if (c != NULL) {
        memcpy(trace, c->trace, 16);
    } else {
        memcpy(&created, &j->created_at, sizeof created);
        jr_trace_derive(trace, 16, (uint64_t)j->id, created, 0x7472616365ull);
    }
    jr_trace_derive(span, 8, jr_trace_word(trace),
                    jr_trace_word(trace + 8) ^ (uint64_t)j->id, 1);
}

void
jr_wtrace_begin(worker *w, jr_jobctx *ctx, const jr_job *j)
{
    jr_jobtrace *t;
    jr_tctx c;
    uint8_t trace1[16], span1[8];
    int parent;

    if (!w->set.tracing)
        return;
    if (ctx->trace == NULL && (ctx->trace = calloc(1, sizeof *t)) == NULL)
        return;                 /* no span for it; the job runs */
    t = ctx->trace;
    parent = jr_trace_parse(j->trace, &c) == 0;
    first_ids(j, parent ? &c : NULL, trace1, span1);
    t->sampled = parent ? c.sampled
                        : jr_trace_sampled(trace1, w->set.trace_sample);
    t->state = parent ? c.state : NULL;
    if (t->sampled) {           /* unsampled: the span is never read */
        jr_span_reset(&t->run);
        jr_buf_reset(&t->done);
        t->ndone = 0;
        t->nopen = 0;
    }
    if (j->attempt <= 1) {
        memcpy(t->run.trace, trace1, 16);
        memcpy(t->run.id, span1, 8);
        if (parent) {
            memcpy(t->run.parent, c.span, 8);
            t->run.has_parent = 1;
        }
    } else {
        jr_trace_derive(t->run.trace, 16, jr_trace_word(trace1),
                        jr_trace_word(trace1 + 8),
                        (uint64_t)j->attempt << 32 ^ (uint64_t)j->id);
        jr_trace_derive(t->run.id, 8, jr_trace_word(t->run.trace),
                        (uint64_t)j->id, (uint64_t)j->attempt);
        if (t->sampled)
            jr_span_link(&t->run, trace1, span1);
    }
    memcpy(t->trace, t->run.trace, 16);
    memcpy(t->cur, t->run.id, 8);
    t->run.kind = JR_SPAN_CONSUMER;
    if (t->sampled)             /* unsampled: the ids to pass on, no more */
        t->run.start = jr_now();
    t->active = 1;
}

void
jr_wtrace_progress(jr_jobctx *ctx)
{
    jr_jobtrace *t = ctx->trace;

    if (t == NULL || !t->active || !t->sampled)
        return;
    jr_span_event(&t->run, "progress", jr_now(), "jobrunner.progress.note",
                  ctx->progress_has_note ? ctx->progress_note : NULL,
                  "jobrunner.progress.done", ctx->progress_done);
}

void
jr_wtrace_steps(jr_jobctx *ctx, double records)
{
    jr_jobtrace *t = ctx->trace;

    if (t == NULL || !t->active || !t->sampled)
        return;
    jr_span_event(&t->run, "steps", jr_now(), NULL, NULL,
                  "jobrunner.steps.records", records);
}

static const char *
outcome_name(int kind)
{
    switch (kind) {
    case JR_DONE: return "completed";
    case JR_RETRY: return "retry";
    case JR_DEAD: return "dead";
    case JR_SNOOZE: return "snoozed";
    case JR_RELEASE: return "released";
    case JR_CANCELLED: return "cancelled";
    case JR_WAIT: return "waiting";
    default: return "unknown";
    }
}

/* The jobrunner.span calls whose fn never returned (a coroutine job
 * timed out or cancelled while it waited in one, or a coroutine of the
 * handler's own left suspended in one), innermost first: they end now,
 * failed with the attempt's error when it failed or was cancelled. */
static void
open_spans(jr_jobtrace *t, const jr_result *res)
{
    jr_span s = {0};
    int i;

    for (i = t->nopen - 1; i >= 0; i--) {
        jr_span_reset(&s);
        memcpy(s.trace, t->trace, 16);
        memcpy(s.id, t->open[i].id, 8);
        memcpy(s.parent, t->open[i].parent, 8);
        s.has_parent = 1;
        s.kind = JR_SPAN_INTERNAL;
        s.start = t->open[i].start;
        s.end = t->run.end;
        s.error = res->kind == JR_RETRY || res->kind == JR_DEAD ||
                  res->kind == JR_CANCELLED;
        if (jr_span_encode(&s, t->open[i].name, !s.error ? NULL :
                           res->error ? res->error : outcome_name(res->kind),
                           &t->done) == 0)
            t->ndone++;
    }
    jr_span_free(&s);
    t->nopen = 0;
}

void
jr_wtrace_end(worker *w, jr_jobctx *ctx, const jr_job *j,
              const jr_result *res)
{
    static jr_buf out;          /* kept for the next job's record */
    jr_jobtrace *t = ctx->trace;
    jr_spanrec r;

    if (t == NULL || !t->active)
        return;
    t->active = 0;
    if (!t->sampled)
        return;
    t->run.end = jr_now();
    if (t->nopen > 0)
        open_spans(t, res);
    t->run.error = res->kind == JR_RETRY || res->kind == JR_DEAD;
    r = (jr_spanrec){
        .run = &t->run, .job_id = j->id, .attempt = j->attempt,
        .run_at = j->run_at, .delay = res->kind == JR_SNOOZE ? res->delay : 0,
        .queue = j->queue, .name = j->name, .key = j->key,
        .generation = res->generation, .outcome = outcome_name(res->kind),
        .error = t->run.error ? res->error : NULL,
        .done = t->done.p, .done_len = t->done.len,
    };
    jr_buf_reset(&out);
    jr_spanrec_put(&out, &r);
    if (out.oom)
        jr_log(JR_LOG_WARN, "job %lld (%s): its spans are dropped: out of "
               "memory", (long long)j->id, j->name);
    else
        jr_frame_put_spans(&w->out, out.p, out.len, 2 + t->ndone);
    if (out.oom || out.cap > (1u << 20))    /* a big one is not kept */
        jr_buf_free(&out);
}
