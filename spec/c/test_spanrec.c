/* test_spanrec.c - an attempt's spans as the export thread writes them
 * (spanrec.h): records put as a worker puts them, read back and written
 * as OTLP/JSON, compared byte for byte with the text the encoder wrote
 * before its common case was written straight into the buffer: plain
 * strings, a child's retry with a link, a key and a jobrunner.span's
 * text, text to escape, a snooze with an event, no queue and the largest
 * numbers; then the five in one buffer, comma-separated; and ids derived
 * (trace.h) as before, the sampling decision from one word of them, and
 * an unsampled attempt's ids made when read. Prints "N passed, N failed". */
#include <stdio.h>
#include <string.h>

#include "base/spanrec.h"
#include "base/trace.h"
#include "check.h"
#include "spancase.h"

/* case i's record, appended to recs: span_case's; the child's (1) with
 * a link and a jobrunner.span's text done */
static void
make_case(int i, jr_buf *recs)
{
    jr_span s = {0};
    jr_spanrec r = {0};

    span_case(i, &s, &r);
    if (i == 1) {
        jr_span_link(&s, link_trace, link_span);
        r.done = "{\"traceId\":\"x\"}";
        r.done_len = strlen(r.done);
    }
    jr_spanrec_put(recs, &r);
    jr_span_free(&s);
}
#define NCASES 5

static const char *const want[NCASES] = {
     "{\"traceId\":\"10171e252c333a41484f565d646b7279\",\"spanId\":\"a0a"
     "1a2a3a4a5a6a7\",\"name\":\"process default\",\"kind\":5,\"startTim"
     "eUnixNano\":\"1764420000124999936\",\"endTimeUnixNano\":\"17644200"
     "00249999872\",\"attributes\":[{\"key\":\"messaging.system\",\"valu"
     "e\":{\"stringValue\":\"jobrunner\"}},{\"key\":\"messaging.operatio"
     "n.type\",\"value\":{\"stringValue\":\"process\"}},{\"key\":\"messa"
     "ging.operation.name\",\"value\":{\"stringValue\":\"process\"}},{\""
     "key\":\"messaging.destination.name\",\"value\":{\"stringValue\":\""
     "default\"}},{\"key\":\"messaging.message.id\",\"value\":{\"stringV"
     "alue\":\"1234567\"}},{\"key\":\"jobrunner.job.name\",\"value\":{\""
     "stringValue\":\"noop\"}},{\"key\":\"jobrunner.job.attempt\",\"valu"
     "e\":{\"intValue\":\"1\"}},{\"key\":\"jobrunner.queue.wait_us\",\"v"
     "alue\":{\"intValue\":\"124999\"}},{\"key\":\"jobrunner.job.outcome"
     "\",\"value\":{\"stringValue\":\"completed\"}}]},{\"traceId\":\"101"
     "71e252c333a41484f565d646b7279\",\"spanId\":\"e78be60be548b727\",\""
     "parentSpanId\":\"a0a1a2a3a4a5a6a7\",\"name\":\"wait default\",\"ki"
     "nd\":1,\"startTimeUnixNano\":\"1764420000000000000\",\"endTimeUnix"
     "Nano\":\"1764420000124999936\",\"attributes\":[{\"key\":\"messagin"
     "g.destination.name\",\"value\":{\"stringValue\":\"default\"}}]}",
     ",{\"traceId\":\"10171e252c333a41484f565d646b7279\",\"spanId\":\"a0"
     "a1a2a3a4a5a6a7\",\"parentSpanId\":\"505356595c5f6265\",\"name\":\""
     "process default\",\"kind\":5,\"startTimeUnixNano\":\"1764420000124"
     "999936\",\"endTimeUnixNano\":\"1764420000249999872\",\"attributes"
     "\":[{\"key\":\"messaging.system\",\"value\":{\"stringValue\":\"job"
     "runner\"}},{\"key\":\"messaging.operation.type\",\"value\":{\"stri"
     "ngValue\":\"process\"}},{\"key\":\"messaging.operation.name\",\"va"
     "lue\":{\"stringValue\":\"process\"}},{\"key\":\"messaging.destinat"
     "ion.name\",\"value\":{\"stringValue\":\"default\"}},{\"key\":\"mes"
     "saging.message.id\",\"value\":{\"stringValue\":\"1234567\"}},{\"ke"
     "y\":\"jobrunner.job.name\",\"value\":{\"stringValue\":\"noop\"}},{"
     "\"key\":\"jobrunner.job.key\",\"value\":{\"stringValue\":\"tenant-"
     "7\"}},{\"key\":\"jobrunner.job.attempt\",\"value\":{\"intValue\":"
     "\"3\"}},{\"key\":\"jobrunner.queue.wait_us\",\"value\":{\"intValue"
     "\":\"124999\"}},{\"key\":\"jobrunner.job.generation\",\"value\":{"
     "\"stringValue\":\"g12\"}},{\"key\":\"jobrunner.job.outcome\",\"val"
     "ue\":{\"stringValue\":\"retry\"}},{\"key\":\"error.type\",\"value"
     "\":{\"stringValue\":\"retry\"}}],\"links\":[{\"traceId\":\"ab01020"
     "30405060708090a0b0c0d0e0f\",\"spanId\":\"cd01020304050607\"}],\"st"
     "atus\":{\"code\":2,\"message\":\"boom: no rows at step 2\"}},{\"tr"
     "aceId\":\"10171e252c333a41484f565d646b7279\",\"spanId\":\"4d15ad7a"
     "803e52ec\",\"parentSpanId\":\"a0a1a2a3a4a5a6a7\",\"name\":\"wait d"
     "efault\",\"kind\":1,\"startTimeUnixNano\":\"1764420000000000000\","
     "\"endTimeUnixNano\":\"1764420000124999936\",\"attributes\":[{\"key"
     "\":\"messaging.destination.name\",\"value\":{\"stringValue\":\"def"
     "ault\"}}]},{\"traceId\":\"x\"}",
     "{\"traceId\":\"10171e252c333a41484f565d646b7279\",\"spanId\":\"a0a"
     "1a2a3a4a5a6a7\",\"name\":\"process q\\\"1\",\"kind\":5,\"startTime"
     "UnixNano\":\"1764420000124999936\",\"endTimeUnixNano\":\"176442000"
     "0249999872\",\"attributes\":[{\"key\":\"messaging.system\",\"value"
     "\":{\"stringValue\":\"jobrunner\"}},{\"key\":\"messaging.operation"
     ".type\",\"value\":{\"stringValue\":\"process\"}},{\"key\":\"messag"
     "ing.operation.name\",\"value\":{\"stringValue\":\"process\"}},{\"k"
     "ey\":\"messaging.destination.name\",\"value\":{\"stringValue\":\"q"
     "\\\"1\"}},{\"key\":\"messaging.message.id\",\"value\":{\"stringVal"
     "ue\":\"1234567\"}},{\"key\":\"jobrunner.job.name\",\"value\":{\"st"
     "ringValue\":\"caf\xc3\xa9\"}},{\"key\":\"jobrunner.job.attempt\","
     "\"value\":{\"intValue\":\"1\"}},{\"key\":\"jobrunner.queue.wait_us"
     "\",\"value\":{\"intValue\":\"124999\"}},{\"key\":\"jobrunner.job.o"
     "utcome\",\"value\":{\"stringValue\":\"dead\"}},{\"key\":\"error.ty"
     "pe\",\"value\":{\"stringValue\":\"dead\"}}],\"status\":{\"code\":2"
     ",\"message\":\"line 1\\u000aline 2 \\\\ end\"}},{\"traceId\":\"101"
     "71e252c333a41484f565d646b7279\",\"spanId\":\"e78be60be548b727\",\""
     "parentSpanId\":\"a0a1a2a3a4a5a6a7\",\"name\":\"wait q\\\"1\",\"kin"
     "d\":1,\"startTimeUnixNano\":\"1764420000000000000\",\"endTimeUnixN"
     "ano\":\"1764420000124999936\",\"attributes\":[{\"key\":\"messaging"
     ".destination.name\",\"value\":{\"stringValue\":\"q\\\"1\"}}]}",
     ",{\"traceId\":\"10171e252c333a41484f565d646b7279\",\"spanId\":\"a0"
     "a1a2a3a4a5a6a7\",\"name\":\"process default\",\"kind\":5,\"startTi"
     "meUnixNano\":\"1764420000124999936\",\"endTimeUnixNano\":\"1764420"
     "000249999872\",\"attributes\":[{\"key\":\"messaging.system\",\"val"
     "ue\":{\"stringValue\":\"jobrunner\"}},{\"key\":\"messaging.operati"
     "on.type\",\"value\":{\"stringValue\":\"process\"}},{\"key\":\"mess"
     "aging.operation.name\",\"value\":{\"stringValue\":\"process\"}},{"
     "\"key\":\"messaging.destination.name\",\"value\":{\"stringValue\":"
     "\"default\"}},{\"key\":\"messaging.message.id\",\"value\":{\"strin"
     "gValue\":\"1234567\"}},{\"key\":\"jobrunner.job.name\",\"value\":{"
     "\"stringValue\":\"noop\"}},{\"key\":\"jobrunner.job.attempt\",\"va"
     "lue\":{\"intValue\":\"1\"}},{\"key\":\"jobrunner.job.outcome\",\"v"
     "alue\":{\"stringValue\":\"snoozed\"}}],\"events\":[{\"timeUnixNano"
     "\":\"1764420000124999936\",\"name\":\"progress\",\"attributes\":[{"
     "\"key\":\"jobrunner.progress.note\",\"value\":{\"stringValue\":\"h"
     "alf\"}},{\"key\":\"jobrunner.progress.done\",\"value\":{\"doubleVa"
     "lue\":0.5}}]},{\"timeUnixNano\":\"1764420000249999872\",\"name\":"
     "\"snooze\",\"attributes\":[{\"key\":\"jobrunner.delay\",\"value\":"
     "{\"doubleValue\":30}}]}]},{\"traceId\":\"10171e252c333a41484f565d6"
     "46b7279\",\"spanId\":\"e78be60be548b727\",\"parentSpanId\":\"a0a1a"
     "2a3a4a5a6a7\",\"name\":\"wait default\",\"kind\":1,\"startTimeUnix"
     "Nano\":\"1764420000124999936\",\"endTimeUnixNano\":\"1764420000124"
     "999936\",\"attributes\":[{\"key\":\"messaging.destination.name\","
     "\"value\":{\"stringValue\":\"default\"}}]}",
     "{\"traceId\":\"10171e252c333a41484f565d646b7279\",\"spanId\":\"a0a"
     "1a2a3a4a5a6a7\",\"name\":\"process \",\"kind\":255,\"startTimeUnix"
     "Nano\":\"1764420000124999936\",\"endTimeUnixNano\":\"1764420000249"
     "999872\",\"attributes\":[{\"key\":\"messaging.system\",\"value\":{"
     "\"stringValue\":\"jobrunner\"}},{\"key\":\"messaging.operation.typ"
     "e\",\"value\":{\"stringValue\":\"process\"}},{\"key\":\"messaging."
     "operation.name\",\"value\":{\"stringValue\":\"process\"}},{\"key\""
     ":\"messaging.destination.name\",\"value\":{\"stringValue\":\"\"}},"
     "{\"key\":\"messaging.message.id\",\"value\":{\"stringValue\":\"922"
     "3372036854775807\"}},{\"key\":\"jobrunner.job.name\",\"value\":{\""
     "stringValue\":\"noop\"}},{\"key\":\"jobrunner.job.attempt\",\"valu"
     "e\":{\"intValue\":\"2147483647\"}},{\"key\":\"jobrunner.queue.wait"
     "_us\",\"value\":{\"intValue\":\"124999\"}},{\"key\":\"jobrunner.jo"
     "b.outcome\",\"value\":{\"stringValue\":\"completed\"}}]},{\"traceI"
     "d\":\"10171e252c333a41484f565d646b7279\",\"spanId\":\"5aeb9b56229a"
     "fb80\",\"parentSpanId\":\"a0a1a2a3a4a5a6a7\",\"name\":\"wait \",\""
     "kind\":1,\"startTimeUnixNano\":\"1764420000000000000\",\"endTimeUn"
     "ixNano\":\"1764420000124999936\",\"attributes\":[{\"key\":\"messag"
     "ing.destination.name\",\"value\":{\"stringValue\":\"\"}}]}"
};

static int
check_each(void)
{
    jr_buf recs = {0}, out = {0};
    int i;

    for (i = 0; i < NCASES; i++) {
        jr_buf_reset(&recs);
        jr_buf_reset(&out);
        make_case(i, &recs);
        CHECK(jr_spanrec_json(recs.p, recs.len, &out, i & 1) == 1);
        if (out.len != strlen(want[i]) || memcmp(out.p, want[i], out.len)) {
            fprintf(stderr, "case %d: got\n%.*s\nwant\n%s\n", i,
                    (int)out.len, out.p, want[i]);
            failed = 1;
        }
    }
    jr_buf_free(&recs);
    jr_buf_free(&out);
    return 0;
}

static int
check_all(void)
{
    jr_buf recs = {0}, out = {0}, exp = {0};
    int i;

    for (i = 0; i < NCASES; i++) {
        make_case(i, &recs);
        if (i > 0)
            jr_buf_put(&exp, ",", 1);
        jr_buf_put(&exp, want[i] + (want[i][0] == ','),
                   strlen(want[i]) - (want[i][0] == ','));
    }
    CHECK(jr_spanrec_json(recs.p, recs.len, &out, 0) == NCASES);
    CHECK(out.len == exp.len && memcmp(out.p, exp.p, out.len) == 0);
    /* a record cut short is malformed: what went before stays */
    jr_buf_reset(&out);
    CHECK(jr_spanrec_json(recs.p, recs.len - 1, &out, 0) == -1);
    jr_buf_free(&recs);
    jr_buf_free(&out);
    jr_buf_free(&exp);
    return 0;
}

/* ids derived from a job are the same from one version to the next: a
 * runner running attempt 3 finds attempt 1's span made by another */
static int
check_derive(void)
{
    static const struct {
        size_t      n;
        uint64_t    a, b, c;
        const char *hex;
    } ids[] = {
        {16, 1234567, 0x1122334455667788ull, 0x7472616365ull,
         "78adb273ff29a85bbff564541046e6c8"},
        {8, 0xdeadbeefcafef00dull, 42, 1, "6738f537bd0cf271"},
        {11, 0, 0, 0, "c3868d6df4028ab195ec75"},
    };
    uint8_t id[16];
    char hex[33];
    size_t i, k;

    for (i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        jr_trace_derive(id, ids[i].n, ids[i].a, ids[i].b, ids[i].c);
        for (k = 0; k < ids[i].n; k++)
            snprintf(hex + 2 * k, 3, "%02x", id[k]);
        CHECK(strcmp(hex, ids[i].hex) == 0);
    }
    return 0;
}

/* The sampling decision from the one word of a derived trace id the
 * rule reads is the rule over the whole id, at every ratio */
static int
check_sampled(void)
{
    static const double ratios[] = {0, 1e-9, 0.01, 0.25, 0.5, 0.999, 1};
    uint8_t id[16];
    uint64_t a, b;
    size_t r;
    int n = 0;

    for (r = 0; r < sizeof ratios / sizeof ratios[0]; r++)
        for (a = 1; a <= 20000; a++) {
            b = a * 0x9e3779b97f4a7c15ull ^ (uint64_t)r;
            jr_trace_derive(id, 16, a, b, JR_TRACE_OWN);
            CHECK(jr_trace_derived_sampled(a, b, JR_TRACE_OWN, ratios[r]) ==
                  jr_trace_sampled(id, ratios[r]));
            n += ratios[r] == 0.01 && jr_trace_sampled(id, ratios[r]);
        }
    CHECK(n > 100 && n < 300);          /* about 1% of 20,000 */
    return 0;
}

/* An attempt's ids, made when first read (an unsampled attempt's), are
 * those derived as ever: attempt 1 of a job with no context a trace of
 * its own, a child of the producer's span with one; a later attempt a
 * trace of its own from attempt 1's */
static int
check_ids(void)
{
    static const char *const pinned[4] = {
        "00-78adb273ff29a85bbff564541046e6c8-3dc8061c3188b346-00",
        NULL, NULL, NULL,
    };
    jr_jobtrace t = {0};
    uint8_t trace1[16], span1[8], trace[16], span[8];
    char tp[JR_TRACEPARENT_LEN + 1], exp[JR_TRACEPARENT_LEN + 1];
    const char *state;
    int i;

    t.job_id = 1234567;
    t.created = 0x1122334455667788ull;
    t.active = 1;
    for (i = 0; i < 4; i++) {
        t.parent = i >= 2;
        t.attempt = i % 2 ? 3 : 1;
        t.ids = 0;
        memset(t.ptrace, 0xab, 16);
        memset(t.pspan, 0xcd, 8);
        if (t.parent)
            memcpy(trace1, t.ptrace, 16);
        else
            jr_trace_derive(trace1, 16, 1234567, 0x1122334455667788ull,
                            JR_TRACE_OWN);
        jr_trace_derive(span1, 8, jr_trace_word(trace1),
                        jr_trace_word(trace1 + 8) ^ 1234567, 1);
        if (t.attempt == 1) {
            memcpy(trace, trace1, 16);
            memcpy(span, span1, 8);
        } else {
            jr_trace_derive(trace, 16, jr_trace_word(trace1),
                            jr_trace_word(trace1 + 8),
                            (uint64_t)3 << 32 ^ 1234567);
            jr_trace_derive(span, 8, jr_trace_word(trace), 1234567, 3);
        }
        jr_trace_format(trace, span, 0, exp);
        CHECK(jr_jobtrace_parent(&t, NULL, tp, &state) == 1);
        CHECK(t.ids == 1);
        CHECK(strcmp(tp, exp) == 0);
        CHECK(pinned[i] == NULL || strcmp(tp, pinned[i]) == 0);
        jr_jobtrace_first(&t, trace, span);
        CHECK(memcmp(trace, trace1, 16) == 0 && memcmp(span, span1, 8) == 0);
    }
    return 0;
}

int
main(void)
{
    check_report("each record", check_each());
    check_report("records in one buffer", check_all());
    check_report("derived ids", check_derive());
    check_report("sampled from one word", check_sampled());
    check_report("ids made when read", check_ids());
    return check_report(NULL, 0);
}
