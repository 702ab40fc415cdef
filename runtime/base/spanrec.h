/* spanrec.h - an attempt's spans as one compact record (docs/tracing.md):
 * what the worker sends the master in a JR_F_SPANS frame, the master
 * queues as it came, and the export thread alone turns into OTLP/JSON.
 * Ids are raw bytes, times integer nanoseconds, strings counted; the
 * attributes every attempt's span has the same are the encoder's, not
 * the record's, and the queue wait's span is derived from the attempt's
 * start and the job's due time. The worker and the master are the same
 * binary on one host: numbers go in its own byte order. Uses trace.h. */
#ifndef JR_SPANREC_H
#define JR_SPANREC_H

#include <stddef.h>
#include <stdint.h>

#include "base/trace.h"

/* An attempt's span as the worker ends it. Strings may be NULL (key,
 * generation, error); done is OTLP/JSON text already (the attempt's
 * other spans: jobrunner.span's, comma-separated), usually empty. */
typedef struct jr_spanrec {
    const jr_span *run;         /* ids, parent, kind, times, error, and
                                   its events and links (OTLP/JSON text,
                                   usually empty) */
    int64_t        job_id;
    int            attempt;
    double         run_at;      /* when the job became due; 0: unknown */
    double         delay;       /* a snooze's seconds */
    const char    *queue, *name, *key, *generation, *outcome, *error;
    const char    *done;        /* the attempt's other spans, or NULL */
    size_t         done_len;
} jr_spanrec;

/* Appends r as one record to out (no separator: a record carries its
 * length). */
void jr_spanrec_put(jr_buf *out, const jr_spanrec *r);

/* Appends the spans of the records in recs (len bytes, records as put)
 * to out as OTLP/JSON Span objects, comma-separated (a comma first when
 * comma is set: out's list has spans already). Returns the records read,
 * or -1 when one is malformed (what went before it stays in out). */
int  jr_spanrec_json(const char *recs, size_t len, jr_buf *out, int comma);

#endif
