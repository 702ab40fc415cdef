/* trace.h - W3C trace context (traceparent, tracestate) and the spans of
 * an attempt as OTLP/JSON text (docs/tracing.md). Owns the format checks
 * every producer passes, the ids (random, or derived from a job so that
 * each attempt finds the first one's), the sampling rule and a span's
 * encoding; not the export (the master's) nor when spans start (the
 * worker's). Uses err.h, util.h. */
#ifndef JR_TRACE_H
#define JR_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/util.h"

#define JR_TRACEPARENT_LEN 55   /* "00-" 32 hex "-" 16 hex "-" 2 hex */
#define JR_TRACESTATE_MAX  512  /* bytes of a tracestate kept */

/* Checks a producer's context: traceparent the W3C format, version 00,
 * lowercase hex, ids not all zero; tracestate (may be NULL) printable
 * ASCII list members of at most JR_TRACESTATE_MAX bytes, and only with a
 * traceparent. what names the job for the message ("job 'x'"). */
int  jr_trace_check(const char *traceparent, const char *tracestate,
                    const char *what, jr_err *err);

/* A parsed context. The stored form of a job's (jobs.trace) is the
 * traceparent, then, with a tracestate, one space and the tracestate. */
typedef struct jr_tctx {
    uint8_t     trace[16];
    uint8_t     span[8];
    int         sampled;        /* the flags' sampled bit */
    const char *state;          /* the tracestate in the text parsed, or
                                   NULL */
} jr_tctx;

/* Parses a stored context (or a bare traceparent). 0, or -1 when it is
 * not one (then nothing is traced from it). */
int  jr_trace_parse(const char *stored, jr_tctx *out);

/* Writes "00-<trace>-<span>-<flags>" into out (JR_TRACEPARENT_LEN + 1
 * bytes). */
void jr_trace_format(const uint8_t trace[16], const uint8_t span[8],
                     int sampled, char *out);

/* Ids. jr_trace_random fills n bytes from the process's generator
 * (seeded once from getrandom), never all zero. jr_trace_derive fills n
 * bytes from the words given (the same words, the same bytes). */
void jr_trace_random(uint8_t *out, size_t n);
void jr_trace_derive(uint8_t *out, size_t n, uint64_t a, uint64_t b,
                     uint64_t c);
/* The word ids are derived from: 8 bytes at b, big-endian. */
static inline uint64_t
jr_trace_word(const uint8_t *b)
{
    uint64_t v = 0;
    int i;

    for (i = 0; i < 8; i++)
        v = v << 8 | b[i];
    return v;
}
/* The sampling rule for a trace with no parent: its id's last 8 bytes
 * under ratio (0 to 1), as OpenTelemetry's TraceIdRatioBased. */
int  jr_trace_sampled(const uint8_t trace[16], double ratio);
/* The same rule over the id jr_trace_derive(id, 16, a, b, c) makes,
 * from the one word of it the rule reads: the id itself is not made. */
int  jr_trace_derived_sampled(uint64_t a, uint64_t b, uint64_t c,
                              double ratio);
/* The third word of a job's own trace id (one pushed without a
 * context): "trace" */
#define JR_TRACE_OWN 0x7472616365ull

/* One span, built then encoded as an OTLP/JSON Span object. Attributes
 * and events are added as they come; strings are escaped here. */
typedef struct jr_span {
    uint8_t  trace[16];
    uint8_t  id[8];
    uint8_t  parent[8];
    int      has_parent;
    int      kind;              /* JR_SPAN_* (OTLP's SpanKind) */
    double   start, end;        /* epoch seconds */
    jr_buf   attrs;             /* ",{...}" each */
    jr_buf   events;
    jr_buf   links;
    int      error;             /* status ERROR */
    int      nevents;           /* events kept (JR_SPAN_EVENTS at most) */
} jr_span;

#define JR_SPAN_EVENTS   128    /* events a span keeps; later ones dropped */
#define JR_SPAN_TEXT_MAX 2048   /* bytes of a status message or string
                                   attribute kept */

enum { JR_SPAN_INTERNAL = 1, JR_SPAN_SERVER, JR_SPAN_CLIENT,
       JR_SPAN_PRODUCER, JR_SPAN_CONSUMER };

/* Empties s (keeping its buffers' memory) for a new span. */
void jr_span_reset(jr_span *s);
void jr_span_free(jr_span *s);             /* its buffers; s itself not */
void jr_span_str(jr_span *s, const char *key, const char *v);
void jr_span_int(jr_span *s, const char *key, long long v);
/* Appends attributes already encoded (",{...}" each: a constant set). */
void jr_span_raw(jr_span *s, const char *text, size_t len);
void jr_span_num(jr_span *s, const char *key, double v);
/* An event at epoch seconds at with up to two attributes (NULL keys are
 * left out): a string one and a number one. */
void jr_span_event(jr_span *s, const char *name, double at,
                   const char *skey, const char *sval,
                   const char *nkey, double nval);
void jr_span_link(jr_span *s, const uint8_t trace[16],
                  const uint8_t span[8]);
/* Appends s named name as one JSON object to out, after a comma when
 * out is not empty; status ERROR with message msg when s->error. 0, or -1
 * when out ran out of memory. */
int  jr_span_encode(const jr_span *s, const char *name, const char *msg,
                    jr_buf *out);

/* s as a JSON string (cut at JR_SPAN_TEXT_MAX bytes, bytes that are not
 * UTF-8 as '?'), for an encoder of its own (spanrec.c). */
void jr_span_jstr(jr_buf *b, const char *s);

/* A jobrunner.span still open: the attempt's end closes those whose fn
 * never returned (a coroutine job timed out or cancelled while it
 * waited), as failed. */
#define JR_OPEN_SPANS 32        /* open at once an attempt tracks */
typedef struct jr_openspan {
    uint8_t id[8];
    uint8_t parent[8];
    double  start;
    char    name[129];
} jr_openspan;

/* A job's trace while its attempt runs (the worker's, one per job
 * context, kept for the next job): its context to propagate, and, when
 * sampled, the attempt's span being built and the spans finished under
 * it. */
typedef struct jr_jobtrace {
    int         active;         /* a job runs with it (tracing is on) */
    int         sampled;        /* spans are recorded and sent */
    uint8_t     trace[16];
    uint8_t     cur[8];         /* the span work started now is a child
                                   of: the attempt's, or jobrunner.span's */
    const char *state;          /* the job's tracestate, or NULL */
    jr_span     run;            /* the attempt's span */
    jr_buf      done;           /* spans finished under it, encoded */
    int         ndone;
    jr_openspan open[JR_OPEN_SPANS];    /* jobrunner.span's open now */
    int         nopen;
    /* What the ids are made from. An unsampled attempt makes them only
     * when one is read (jr_jobtrace_parent): ids 0 until then. */
    int         ids;            /* trace and cur are made */
    long long   job_id;
    int         attempt;
    uint64_t    created;        /* the job's created_at, its bits */
    int         parent;         /* pushed with a context: ptrace, pspan */
    uint8_t     ptrace[16];
    uint8_t     pspan[8];
} jr_jobtrace;

void jr_jobtrace_free(jr_jobtrace *t);     /* NULL is a no-op */

/* Attempt 1's trace and span ids of t's job: the producer's trace (a
 * span of the job's in it), else a trace of the job's own; every
 * attempt's ids are derived from the job, so that a worker running
 * attempt N finds attempt 1's span without a record of it. */
void jr_jobtrace_first(const jr_jobtrace *t, uint8_t trace[16],
                       uint8_t span[8]);
/* Makes t->trace and t->cur, the attempt's ids, and sets t->ids. */
void jr_jobtrace_ids(jr_jobtrace *t);

/* The context a push or a request made now carries: t's when active
 * (its ids made first if they are not yet), else the job's stored one
 * (job_trace, may be NULL) passed on as it is. Writes the traceparent
 * into tp (JR_TRACEPARENT_LEN + 1 bytes) and points *state at the
 * tracestate or NULL; 1, or 0 when there is none. */
int  jr_jobtrace_parent(jr_jobtrace *t, const char *job_trace,
                        char *tp, const char **state);

#endif
