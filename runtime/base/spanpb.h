/* spanpb.h - an attempt's spans as OTLP/protobuf (docs/tracing.md,
 * tracing.protocol = "protobuf"): the records the workers send
 * (spanrec.h) written as the Span messages of a ScopeSpans, for the
 * export thread. The same spans as jr_spanrec_json writes, field for
 * field, as opentelemetry-proto's trace.proto defines them: ids as raw
 * bytes, times as fixed64. Uses spanrec.h, util.h. */
#ifndef JR_SPANPB_H
#define JR_SPANPB_H

#include <stddef.h>
#include <stdint.h>

#include "base/util.h"

/* Appends the spans of the records in recs (len bytes, records as put)
 * to out, each as a ScopeSpans's field 2 (a length-delimited Span).
 * Returns the records read, or -1 when one is malformed (what went
 * before it stays in out). */
int  jr_spanpb_recs(const char *recs, size_t len, jr_buf *out);

/* Appends the OTLP/JSON Span objects in json (comma-separated, as
 * jr_spanrec_json and jr_span_encode write them) to out the same way.
 * 0, or -1 when the text is not such a list or names a field that is
 * not the proto's (what went before stays in out). */
int  jr_spanpb_json(const char *json, size_t len, jr_buf *out);

/* protobuf's base-128 varint of v at p; the byte after it */
char *jr_spanpb_varint(char *p, uint64_t v);
/* the bytes of v's varint */
size_t jr_spanpb_vlen(uint64_t v);

#endif
