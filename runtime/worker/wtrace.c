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
 * the same), decided from the one word of the trace id the rule reads:
 * an unsampled attempt makes its ids only when a push or a request
 * reads them (jr_jobtrace_parent). The spans go as one record
 * (spanrec.h): the master queues it, the export thread alone encodes
 * it. Uses worker_int.h, spanrec.h, trace.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/worker_int.h"
#include "base/log.h"
#include "base/spanrec.h"
#include "base/trace.h"

void
jr_wtrace_begin(worker *w, jr_jobctx *ctx, const jr_job *j)
{
    jr_jobtrace *t;
    jr_tctx c;
    uint8_t trace1[16], span1[8];

    if (!w->set.tracing)
        return;
    if (ctx->trace == NULL && (ctx->trace = calloc(1, sizeof *t)) == NULL)
        return;                 /* no span for it; the job runs */
    t = ctx->trace;
    t->job_id = j->id;
    t->attempt = j->attempt;
    memcpy(&t->created, &j->created_at, sizeof t->created);
    t->ids = 0;
    t->active = 1;
    if (jr_trace_parse(j->trace, &c) == 0) {
        t->parent = 1;
        memcpy(t->ptrace, c.trace, 16);
        memcpy(t->pspan, c.span, 8);
        t->sampled = c.sampled;
        t->state = c.state;
    } else {
        t->parent = 0;
        t->sampled = jr_trace_derived_sampled((uint64_t)j->id, t->created,
                                              JR_TRACE_OWN,
                                              w->set.trace_sample);
        t->state = NULL;
    }
    if (!t->sampled)            /* no clock, no span; ids when read */
        return;
    jr_span_reset(&t->run);
    jr_buf_reset(&t->done);
    t->ndone = 0;
    t->nopen = 0;
    jr_jobtrace_ids(t);
    memcpy(t->run.trace, t->trace, 16);
    memcpy(t->run.id, t->cur, 8);
    if (j->attempt <= 1 && t->parent) {
        memcpy(t->run.parent, t->pspan, 8);
        t->run.has_parent = 1;
    } else if (j->attempt > 1) {
        jr_jobtrace_first(t, trace1, span1);
        jr_span_link(&t->run, trace1, span1);
    }
    t->run.kind = JR_SPAN_CONSUMER;
    t->run.start = jr_now();
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
