/* test_spanpb.c - an attempt's spans as OTLP/protobuf (spanpb.h): the
 * records of a common attempt (plain strings; a child's failure with a
 * key, a generation and a jobrunner.span; no queue and the largest
 * numbers; a failure with no message) written straight from the record
 * must be byte for byte what the OTLP/JSON of the same record read into
 * protobuf gives; the other records (text to escape, a snooze with an
 * event, a retry's link) go that way; all in one buffer too; and the
 * reading of the JSON by hand: ids as bytes, fields in their numbers'
 * order (a status's message before its code), a field not the proto's
 * refused. spec/tracing_spec.lua has a real receiver decode them. Prints
 * "N passed, N failed". */
#include <stdio.h>
#include <string.h>

#include "base/spanpb.h"
#include "base/spanrec.h"
#include "base/trace.h"
#include "check.h"
#include "spancase.h"

#define NCASES 7

/* case i's record, appended to recs: span_case's, and 5 a retry's
 * second attempt (a link), 6 a failure with no message */
static void
make_case(int i, jr_buf *recs)
{
    jr_span s = {0}, sub = {0};
    jr_buf done = {0};
    jr_spanrec r = {0};

    span_case(i, &s, &r);
    switch (i) {
    case 1:                     /* the child's jobrunner.span's span done */
        memcpy(sub.trace, s.trace, 16);
        memcpy(sub.id, link_span, 8);
        memcpy(sub.parent, s.id, 8);
        sub.has_parent = 1;
        sub.kind = JR_SPAN_INTERNAL;
        sub.start = s.start;
        sub.end = s.end;
        sub.error = 1;
        jr_span_int(&sub, "rows", -3);
        jr_span_num(&sub, "share", 0.25);
        jr_span_str(&sub, "who", "ada");
        CHECK(jr_span_encode(&sub, "fetch", "no \"rows\"", &done) == 0);
        r.done = done.p;
        r.done_len = done.len;
        break;
    case 5:                     /* a retry's second attempt: a link */
        r.attempt = 2;
        jr_span_link(&s, link_trace, link_span);
        break;
    case 6:                     /* a failure with no message, a long error
                                   type's outcome */
        s.error = 1;
        r.outcome = "dead";
        break;
    }
    jr_spanrec_put(recs, &r);
    jr_span_free(&s);
    jr_span_free(&sub);
    jr_buf_free(&done);
}

/* the OTLP/JSON of recs read into protobuf: what the record must give */
static void
via_json(const jr_buf *recs, int n, jr_buf *want)
{
    jr_buf json = {0};

    CHECK(jr_spanrec_json(recs->p, recs->len, &json, 0) == n);
    CHECK(jr_spanpb_json(json.p, json.len, want) == 0);
    jr_buf_free(&json);
}

static void
same(const char *what, int i, const jr_buf *got, const jr_buf *want)
{
    size_t k;

    if (got->len == want->len && memcmp(got->p, want->p, got->len) == 0)
        return;
    for (k = 0; k < got->len && k < want->len && got->p[k] == want->p[k];
         k++)
        ;
    fprintf(stderr, "%s %d: %zu bytes, %zu wanted, first difference at %zu\n",
            what, i, got->len, want->len, k);
    failed = 1;
}

static int
check_each(void)
{
    jr_buf recs = {0}, got = {0}, want = {0};
    int i;

    for (i = 0; i < NCASES; i++) {
        jr_buf_reset(&recs);
        jr_buf_reset(&got);
        jr_buf_reset(&want);
        make_case(i, &recs);
        CHECK(jr_spanpb_recs(recs.p, recs.len, &got) == 1);
        via_json(&recs, 1, &want);
        CHECK(want.len > 100);
        same("case", i, &got, &want);
    }
    jr_buf_free(&recs);
    jr_buf_free(&got);
    jr_buf_free(&want);
    return 0;
}

static int
check_all(void)
{
    jr_buf recs = {0}, got = {0}, want = {0};
    int i;

    for (i = 0; i < NCASES; i++)
        make_case(i, &recs);
    CHECK(jr_spanpb_recs(recs.p, recs.len, &got) == NCASES);
    via_json(&recs, NCASES, &want);
    same("all", NCASES, &got, &want);
    recs.p[recs.len - 1] ^= 1;  /* a record cut short */
    CHECK(jr_spanpb_recs(recs.p, recs.len - 3, &got) == -1);
    jr_buf_free(&recs);
    jr_buf_free(&got);
    jr_buf_free(&want);
    return 0;
}

static int
check_json(void)
{
    static const char span[] =
        "{\"traceId\":\"0102\",\"name\":\"a\\u000a\",\"kind\":1,"
        "\"startTimeUnixNano\":\"258\",\"status\":{\"code\":2,"
        "\"message\":\"m\"},\"attributes\":[{\"key\":\"k\",\"value\":"
        "{\"intValue\":\"-1\"}}]}";
    /* Span (ScopeSpans.spans, 2): trace_id 1, name 5, kind 6, start 7,
     * attributes 9 (KeyValue: key 1, value 2: AnyValue int 3, -1 as ten
     * bytes), status 15 (message 2 before code 3) */
    static const char want[] =
        "\x12\x2c"
        "\x0a\x02\x01\x02" "\x2a\x02" "a\n" "\x30\x01"
        "\x39\x02\x01\x00\x00\x00\x00\x00\x00"
        "\x4a\x10\x0a\x01k\x12\x0b\x18\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"
        "\x7a\x05\x12\x01m\x18\x02";
    jr_buf out = {0};

    CHECK(jr_spanpb_json(span, sizeof span - 1, &out) == 0);
    CHECK(out.len == sizeof want - 1 && memcmp(out.p, want, out.len) == 0);
    if (out.len != sizeof want - 1 || memcmp(out.p, want, out.len) != 0) {
        size_t k;
        for (k = 0; k < out.len; k++)
            fprintf(stderr, "%02x ", (unsigned char)out.p[k]);
        fprintf(stderr, "\n");
    }
    jr_buf_reset(&out);
    CHECK(jr_spanpb_json("{\"spanid\":\"01\"}", 15, &out) == -1);
    jr_buf_reset(&out);
    CHECK(jr_spanpb_json("{\"traceId\":\"0g\"}", 16, &out) == -1);
    jr_buf_reset(&out);
    CHECK(jr_spanpb_json("{\"name\":\"a\"", 11, &out) == -1);
    jr_buf_free(&out);
    return 0;
}

int
main(void)
{
    check_report("each record as its JSON read into protobuf", check_each());
    check_report("all records in one buffer", check_all());
    check_report("OTLP/JSON read by hand", check_json());
    return check_report(NULL, 0);
}
