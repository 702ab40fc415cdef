/* spanrec.h - an attempt's spans as one compact record (docs/tracing.md):
 * what the worker sends the master in a JR_F_SPANS frame, the master
 * queues as it came, and the export thread alone turns into OTLP/JSON
 * (here) or OTLP/protobuf (spanpb.h).
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

/* A record read back (jr_spanrec_get): its strings point into it, not
 * NUL-terminated (the lengths say); NULL when the record has none. */
#define JR_SPANREC_NSTR 9
enum { JR_SR_QUEUE, JR_SR_NAME, JR_SR_KEY, JR_SR_GEN, JR_SR_OUTCOME,
       JR_SR_ERROR, JR_SR_EVENTS, JR_SR_LINKS, JR_SR_DONE };
typedef struct jr_spanrd {
    uint8_t     flags, kind;    /* flags: 1 a parent, 2 an error */
    uint8_t     trace[16], id[8], parent[8];
    int64_t     start, end, run_at, job_id;     /* times in ns */
    int32_t     attempt;
    double      delay;
    const char *str[JR_SPANREC_NSTR];
    size_t      len[JR_SPANREC_NSTR];
} jr_spanrd;

/* Reads the record at p (n bytes left) into r; its length, or 0 if it is
 * malformed. */
size_t jr_spanrec_get(const char *p, size_t n, jr_spanrd *r);

/* String i of r needs no escaping in JSON (printable ASCII, no quote, no
 * backslash, no NUL) and no cut at max bytes: its JSON is its bytes. */
static inline int
jr_spanrd_plain(const jr_spanrd *r, int i, size_t max)
{
    const unsigned char *p = (const unsigned char *)r->str[i];
    size_t k;

    if (p == NULL)
        return 1;
    if (r->len[i] > max)
        return 0;
    for (k = 0; k < r->len[i]; k++)
        if (p[k] < 0x20 || p[k] >= 0x80 || p[k] == '"' || p[k] == '\\')
            return 0;
    return 1;
}

/* Appends the spans of the records in recs (len bytes, records as put)
 * to out as OTLP/JSON Span objects, comma-separated (a comma first when
 * comma is set: out's list has spans already). Returns the records read,
 * or -1 when one is malformed (what went before it stays in out). */
int  jr_spanrec_json(const char *recs, size_t len, jr_buf *out, int comma);

#endif
