/* spanrec.c - an attempt's spans as one compact record, and the record
 * as OTLP/JSON (spanrec.h). A record:
 *   u32 its length, u8 version, u8 flags (1 a parent, 2 an error),
 *   u8 the span's kind, u8 0, trace[16], span[8], parent[8],
 *   i64 start, end and due time (ns), i64 job id, i32 attempt,
 *   f64 snooze delay, then counted strings (u32 length, ~0 for none):
 *   queue, name, key, generation, outcome, error, events, links, done.
 * Both sides write through one check of the buffer's room, not one a
 * piece: a record in the worker, and the JSON of the common record (its
 * strings need no escaping, no events) in the export thread; any
 * other goes through encode(), and both write the same text
 * (spec/c/test_spanrec.c).
 * Uses trace.h, util.h. */
#include <stdlib.h>
#include <string.h>

#include "base/spanrec.h"

#define VERSION 1
#define NSTR    JR_SPANREC_NSTR
#define NONE    0xffffffffu
enum { QUEUE = JR_SR_QUEUE, NAME, KEY, GEN, OUTCOME, ERROR, EVENTS, LINKS,
       DONE };

static int64_t
ns(double t)
{
    return t > 0 && t < 1.8e10 ? (int64_t)(t * 1e9) : 0;
}

/* a counted string at p: its length (~0 for none) and its bytes */
static char *
put_str(char *p, const char *s, size_t n)
{
    uint32_t len = s == NULL ? NONE : (uint32_t)n;

    memcpy(p, &len, sizeof len);
    p += sizeof len;
    if (s != NULL && n > 0)
        memcpy(p, s, n);
    return p + (s != NULL ? n : 0);
}

void
jr_spanrec_put(jr_buf *out, const jr_spanrec *r)
{
    const jr_span *s = r->run;
    const char *str[6] = {r->queue, r->name, r->key, r->generation,
                          r->outcome, r->error};
    size_t slen[6], need = 4 + 4 + 32 + 32 + 4 + 8 + NSTR * 4;
    uint32_t len;
    uint8_t head[4] = {VERSION, (uint8_t)((s->has_parent ? 1 : 0) |
                                          (s->error ? 2 : 0)),
                       (uint8_t)s->kind, 0};
    int64_t num[4] = {ns(s->start), ns(s->end), ns(r->run_at), r->job_id};
    int32_t attempt = r->attempt;
    char *p, *at;
    int i;

    for (i = 0; i < 6; i++)
        need += slen[i] = str[i] != NULL ? strlen(str[i]) : 0;
    need += s->events.len + s->links.len + r->done_len;
    if ((p = at = jr_buf_room(out, need)) == NULL)
        return;                 /* out of memory: out says so */
    len = (uint32_t)need;
    memcpy(p, &len, sizeof len);
    memcpy(p + 4, head, sizeof head);
    memcpy(p + 8, s->trace, 16);
    memcpy(p + 24, s->id, 8);
    memcpy(p + 32, s->parent, 8);
    memcpy(p + 40, num, sizeof num);
    memcpy(p + 72, &attempt, sizeof attempt);
    memcpy(p + 76, &r->delay, sizeof r->delay);
    p += 84;
    for (i = 0; i < 6; i++)
        p = put_str(p, str[i], slen[i]);
    p = put_str(p, s->events.len ? s->events.p : NULL, s->events.len);
    p = put_str(p, s->links.len ? s->links.p : NULL, s->links.len);
    p = put_str(p, r->done_len ? r->done : NULL, r->done_len);
    out->len += (size_t)(p - at);
}

/* ---- the export thread's side ---- */

typedef jr_spanrd rec;

size_t
jr_spanrec_get(const char *p, size_t n, jr_spanrd *r)
{
    uint32_t total, len;
    const char *q, *end;
    int i;

    if (n < 4)
        return 0;
    memcpy(&total, p, 4);
    if (total > n || total < 4 + 4 + 32 + 32 + 4 + 8 + NSTR * 4 ||
        (uint8_t)p[4] != VERSION)
        return 0;
    end = p + total;
    r->flags = (uint8_t)p[5];
    r->kind = (uint8_t)p[6];
    q = p + 8;
    memcpy(r->trace, q, 16), q += 16;
    memcpy(r->id, q, 8), q += 8;
    memcpy(r->parent, q, 8), q += 8;
    memcpy(&r->start, q, 8), q += 8;
    memcpy(&r->end, q, 8), q += 8;
    memcpy(&r->run_at, q, 8), q += 8;
    memcpy(&r->job_id, q, 8), q += 8;
    memcpy(&r->attempt, q, 4), q += 4;
    memcpy(&r->delay, q, 8), q += 8;
    for (i = 0; i < NSTR; i++) {
        if ((size_t)(end - q) < 4)
            return 0;
        memcpy(&len, q, 4), q += 4;
        if (len == NONE) {
            r->str[i] = NULL;
            r->len[i] = 0;
            continue;
        }
        if ((size_t)(end - q) < len)
            return 0;
        r->str[i] = q;
        r->len[i] = len;
        q += len;
    }
    return q == end ? total : 0;
}

/* a record's string i, NUL-terminated, in buf (cap bytes: longer ones are
 * cut, as the span's text is cut at JR_SPAN_TEXT_MAX anyway); NULL when
 * the record has none */
static const char *
str(const rec *r, int i, char *buf, size_t cap)
{
    size_t n = r->len[i] < cap - 1 ? r->len[i] : cap - 1;

    if (r->str[i] == NULL)
        return NULL;
    memcpy(buf, r->str[i], n);
    buf[n] = '\0';
    return buf;
}

#define PUT(b, lit)  jr_buf_put(b, lit, sizeof lit - 1)
#define PUT1(b, lit) jr_buf_put(b, &(lit)[1], sizeof lit - 2)   /* no comma */

/* the attributes every attempt's span has the same */
#define ATTR(k, v) ",{\"key\":\"" k "\",\"value\":{\"stringValue\":\"" v "\"}}"
static const char FIXED_ATTRS[] =
    ATTR("messaging.system", "jobrunner")
    ATTR("messaging.operation.type", "process")
    ATTR("messaging.operation.name", "process");

/* the opening of an attribute of key k (a constant, no escaping) */
#define KEY(k, type) ",{\"key\":\"" k "\",\"value\":{\"" type "\":"

static void
hex(jr_buf *b, const uint8_t *v, size_t n)
{
    static const char digit[] = "0123456789abcdef";
    char t[33];
    size_t i;

    for (i = 0; i < n; i++) {
        t[2 * i] = digit[v[i] >> 4];
        t[2 * i + 1] = digit[v[i] & 15];
    }
    jr_buf_put(b, t, 2 * n);
}

/* v's decimal digits, quoted when q */
static void
num(jr_buf *b, int64_t v, int q)
{
    char d[32], *p = d + sizeof d;
    uint64_t u = v < 0 ? 0 : (uint64_t)v;

    if (q)
        *--p = '"';
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u > 0);
    if (q)
        *--p = '"';
    jr_buf_put(b, p, (size_t)(d + sizeof d - p));
}

/* the head of a span: ids, name (prefix and the queue q), kind, times */
static void
head(jr_buf *out, const uint8_t trace[16], const uint8_t id[8],
     const uint8_t *parent, const char *prefix, const char *q, int kind,
     int64_t start, int64_t end)
{
    char name[160];             /* as the worker named it: cut there */
    size_t p = strlen(prefix), n = strnlen(q, sizeof name - 1 - p);

    PUT(out, "{\"traceId\":\"");
    hex(out, trace, 16);
    PUT(out, "\",\"spanId\":\"");
    hex(out, id, 8);
    if (parent != NULL) {
        PUT(out, "\",\"parentSpanId\":\"");
        hex(out, parent, 8);
    }
    memcpy(name, prefix, p);    /* no printf a span */
    memcpy(name + p, q, n);
    name[p + n] = '\0';
    PUT(out, "\",\"name\":");
    jr_span_jstr(out, name);
    PUT(out, ",\"kind\":");
    num(out, kind, 0);
    PUT(out, ",\"startTimeUnixNano\":");
    num(out, start, 1);
    PUT(out, ",\"endTimeUnixNano\":");
    num(out, end > start ? end : start, 1);
}

#define TEXT (JR_SPAN_TEXT_MAX + 8)

/* r's spans, written straight into out: the attempt's, the queue wait's,
 * then the others */
static void
encode(const rec *r, jr_span *s, jr_buf *out, int comma)
{
    char queue[TEXT], text[TEXT], oc[32];
    const char *q = str(r, QUEUE, queue, sizeof queue);
    const char *v, *outcome = str(r, OUTCOME, oc, sizeof oc);
    uint8_t wait[8];
    int snooze;

    if (q == NULL)
        q = "";
    if (comma)
        PUT(out, ",");
    head(out, r->trace, r->id, (r->flags & 1) ? r->parent : NULL,
         "process ", q, r->kind, r->start, r->end);
    PUT(out, ",\"attributes\":[");
    PUT1(out, FIXED_ATTRS);
    PUT(out, KEY("messaging.destination.name", "stringValue"));
    jr_span_jstr(out, q);
    PUT(out, "}}" KEY("messaging.message.id", "stringValue"));
    num(out, r->job_id, 1);
    if ((v = str(r, NAME, text, sizeof text)) != NULL) {
        PUT(out, "}}" KEY("jobrunner.job.name", "stringValue"));
        jr_span_jstr(out, v);
    }
    if ((v = str(r, KEY, text, sizeof text)) != NULL) {
        PUT(out, "}}" KEY("jobrunner.job.key", "stringValue"));
        jr_span_jstr(out, v);
    }
    PUT(out, "}}" KEY("jobrunner.job.attempt", "intValue"));
    num(out, r->attempt, 1);
    if (r->run_at > 0) {
        PUT(out, "}}" KEY("jobrunner.queue.wait_us", "intValue"));
        num(out, r->start > r->run_at ? (r->start - r->run_at) / 1000 : 0, 1);
    }
    if ((v = str(r, GEN, text, sizeof text)) != NULL) {
        PUT(out, "}}" KEY("jobrunner.job.generation", "stringValue"));
        jr_span_jstr(out, v);
    }
    if (outcome == NULL)
        outcome = "unknown";
    PUT(out, "}}" KEY("jobrunner.job.outcome", "stringValue"));
    jr_span_jstr(out, outcome);
    if (r->flags & 2) {
        PUT(out, "}}" KEY("error.type", "stringValue"));
        if (strcmp(outcome, "retry") == 0)
            PUT(out, "\"retry\"");
        else
            PUT(out, "\"dead\"");
    }
    PUT(out, "}}]");
    snooze = strcmp(outcome, "snoozed") == 0;
    if (r->str[EVENTS] != NULL || snooze) {
        jr_span_reset(s);       /* the events, the snooze's last */
        if (r->str[EVENTS] != NULL)
            jr_buf_put(&s->events, r->str[EVENTS], r->len[EVENTS]);
        if (snooze)
            jr_span_event(s, "snooze", (double)r->end / 1e9, NULL, NULL,
                          "jobrunner.delay", r->delay);
        PUT(out, ",\"events\":[");
        jr_buf_put(out, s->events.p + 1, s->events.len - 1);
        PUT(out, "]");
    }
    if (r->len[LINKS] > 1) {
        PUT(out, ",\"links\":[");
        jr_buf_put(out, r->str[LINKS] + 1, r->len[LINKS] - 1);
        PUT(out, "]");
    }
    if (r->flags & 2) {
        PUT(out, ",\"status\":{\"code\":2");
        if ((v = str(r, ERROR, text, sizeof text)) != NULL) {
            PUT(out, ",\"message\":");
            jr_span_jstr(out, v);
        }
        PUT(out, "}");
    }
    PUT(out, "}");

    /* the wait in the queue before the attempt: from the time it became
     * due to its start, a child of the attempt's span */
    jr_trace_derive(wait, 8, jr_trace_word(r->id), (uint64_t)r->job_id,
                    (uint64_t)r->attempt << 32 | 0x77u);
    PUT(out, ",");
    head(out, r->trace, wait, r->id, "wait ", q, JR_SPAN_INTERNAL,
         r->run_at > 0 && r->run_at < r->start ? r->run_at : r->start,
         r->start);
    PUT(out, ",\"attributes\":[");
    PUT1(out, KEY("messaging.destination.name", "stringValue"));
    jr_span_jstr(out, q);
    PUT(out, "}}]}");
    if (r->len[DONE] > 0) {
        PUT(out, ",");
        jr_buf_put(out, r->str[DONE], r->len[DONE]);
    }
}

/* ---- the common case, written straight into out's memory ----
 * A record whose strings need no escaping and no cut (as a job's queue,
 * name and outcome are), and no events: the same text encode() writes,
 * with one check of out's room for it instead of one a piece. */

/* each byte's two hex digits, each number under 100's two decimal ones */
static const char HEX2[] =
    "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
    "202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f"
    "404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f"
    "606162636465666768696a6b6c6d6e6f707172737475767778797a7b7c7d7e7f"
    "808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f"
    "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf"
    "c0c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4d5d6d7d8d9dadbdcdddedf"
    "e0e1e2e3e4e5e6e7e8e9eaebecedeeeff0f1f2f3f4f5f6f7f8f9fafbfcfdfeff";
static const char DEC2[] =
    "00010203040506070809101112131415161718192021222324"
    "25262728293031323334353637383940414243444546474849"
    "50515253545556575859606162636465666768697071727374"
    "75767778798081828384858687888990919293949596979899";

#define LIT(p, lit)  (memcpy(p, lit, sizeof lit - 1), (p) += sizeof lit - 1)
#define LIT1(p, lit) (memcpy(p, &(lit)[1], sizeof lit - 2), \
                      (p) += sizeof lit - 2)    /* no comma */

static char *
hex_to(char *p, const uint8_t *v, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++, p += 2)
        memcpy(p, &HEX2[2 * v[i]], 2);
    return p;
}

/* v's 8 decimal digits, leading zeros and all */
static char *
dec8_to(char *p, uint32_t v)
{
    uint32_t a = v / 10000, b = v % 10000;

    memcpy(p, &DEC2[2 * (a / 100)], 2);
    memcpy(p + 2, &DEC2[2 * (a % 100)], 2);
    memcpy(p + 4, &DEC2[2 * (b / 100)], 2);
    memcpy(p + 6, &DEC2[2 * (b % 100)], 2);
    return p + 8;
}

/* u's decimal digits: 8 at a time in 32 bits (times in ns have 19) */
static char *
dec_to(char *p, uint64_t u)
{
    uint32_t v;
    size_t n;
    char *end;

    if (u >= 100000000u) {
        p = dec_to(p, u / 100000000u);
        return dec8_to(p, (uint32_t)(u % 100000000u));
    }
    v = (uint32_t)u;
    n = v < 10 ? 1 : v < 100 ? 2 : v < 1000 ? 3 : v < 10000 ? 4 :
        v < 100000 ? 5 : v < 1000000 ? 6 : v < 10000000 ? 7 : 8;
    end = p + n;
    p = end;
    while (v >= 100) {
        p -= 2;
        memcpy(p, &DEC2[2 * (v % 100)], 2);
        v /= 100;
    }
    if (v >= 10)
        memcpy(p - 2, &DEC2[2 * v], 2);
    else
        p[-1] = (char)('0' + v);
    return end;
}

/* v's decimal digits (0 for a negative), quoted when q */
static char *
num_to(char *p, int64_t v, int q)
{
    if (q)
        *p++ = '"';
    p = dec_to(p, v < 0 ? 0 : (uint64_t)v);
    if (q)
        *p++ = '"';
    return p;
}

/* string i of r (plain), quoted; "" when it has none */
static char *
str_to(char *p, const rec *r, int i)
{
    *p++ = '"';
    if (r->str[i] != NULL) {
        memcpy(p, r->str[i], r->len[i]);
        p += r->len[i];
    }
    *p++ = '"';
    return p;
}

static char *
head_to(char *p, const uint8_t trace[16], const uint8_t id[8],
        const uint8_t *parent, const char *prefix, size_t plen,
        const rec *r, int kind, int64_t start, int64_t end)
{
    LIT(p, "{\"traceId\":\"");
    p = hex_to(p, trace, 16);
    LIT(p, "\",\"spanId\":\"");
    p = hex_to(p, id, 8);
    if (parent != NULL) {
        LIT(p, "\",\"parentSpanId\":\"");
        p = hex_to(p, parent, 8);
    }
    LIT(p, "\",\"name\":\"");
    memcpy(p, prefix, plen);
    p += plen;
    if (r->str[QUEUE] != NULL) {
        memcpy(p, r->str[QUEUE], r->len[QUEUE]);
        p += r->len[QUEUE];
    }
    LIT(p, "\",\"kind\":");
    p = num_to(p, kind, 0);
    LIT(p, ",\"startTimeUnixNano\":");
    p = num_to(p, start, 1);
    LIT(p, ",\"endTimeUnixNano\":");
    return num_to(p, end > start ? end : start, 1);
}

#define FIXED_BYTES 2048        /* encode_fast's text but the strings:
                                   about 1,500 */

/* r's spans as encode() writes them, when r is the common case: 1, else
 * 0 and nothing written */
static int
encode_fast(const rec *r, jr_buf *out, int comma)
{
    static const char PROCESS[] = "process ", WAIT[] = "wait ";
    size_t need, ql = r->str[QUEUE] != NULL ? r->len[QUEUE] : 0;
    int outcome, i;
    uint8_t wait[8];
    char *p, *at;

    /* the names "process QUEUE" and "wait QUEUE" uncut; the outcome as
     * encode() reads it, one of those the worker names, not a snooze */
    if (r->str[EVENTS] != NULL || r->str[OUTCOME] == NULL ||
        r->len[OUTCOME] > 31 || ql > 159 - (sizeof PROCESS - 1) ||
        !jr_spanrd_plain(r, QUEUE, ql) || !jr_spanrd_plain(r, OUTCOME, 31))
        return 0;
    if (r->len[OUTCOME] == 7 && memcmp(r->str[OUTCOME], "snoozed", 7) == 0)
        return 0;
    need = FIXED_BYTES + 4 * ql + r->len[LINKS] + r->len[DONE];
    for (i = NAME; i <= ERROR; i++) {
        if (i == OUTCOME)
            continue;
        if (!jr_spanrd_plain(r, i, JR_SPAN_TEXT_MAX))
            return 0;
        need += r->len[i];
    }
    outcome = r->len[OUTCOME] == 5 && memcmp(r->str[OUTCOME], "retry", 5) == 0;
    if ((p = at = jr_buf_room(out, need)) == NULL)
        return 1;               /* out of memory: out says so */
    if (comma)
        *p++ = ',';
    p = head_to(p, r->trace, r->id, (r->flags & 1) ? r->parent : NULL,
                PROCESS, sizeof PROCESS - 1, r, r->kind, r->start, r->end);
    LIT(p, ",\"attributes\":[");
    LIT1(p, FIXED_ATTRS);
    LIT(p, KEY("messaging.destination.name", "stringValue"));
    p = str_to(p, r, QUEUE);
    LIT(p, "}}" KEY("messaging.message.id", "stringValue"));
    p = num_to(p, r->job_id, 1);
    if (r->str[NAME] != NULL) {
        LIT(p, "}}" KEY("jobrunner.job.name", "stringValue"));
        p = str_to(p, r, NAME);
    }
    if (r->str[KEY] != NULL) {
        LIT(p, "}}" KEY("jobrunner.job.key", "stringValue"));
        p = str_to(p, r, KEY);
    }
    LIT(p, "}}" KEY("jobrunner.job.attempt", "intValue"));
    p = num_to(p, r->attempt, 1);
    if (r->run_at > 0) {
        LIT(p, "}}" KEY("jobrunner.queue.wait_us", "intValue"));
        p = num_to(p, r->start > r->run_at ? (r->start - r->run_at) / 1000
                                           : 0, 1);
    }
    if (r->str[GEN] != NULL) {
        LIT(p, "}}" KEY("jobrunner.job.generation", "stringValue"));
        p = str_to(p, r, GEN);
    }
    LIT(p, "}}" KEY("jobrunner.job.outcome", "stringValue"));
    p = str_to(p, r, OUTCOME);
    if (r->flags & 2) {
        LIT(p, "}}" KEY("error.type", "stringValue"));
        if (outcome)
            LIT(p, "\"retry\"");
        else
            LIT(p, "\"dead\"");
    }
    LIT(p, "}}]");
    if (r->len[LINKS] > 1) {
        LIT(p, ",\"links\":[");
        memcpy(p, r->str[LINKS] + 1, r->len[LINKS] - 1);
        p += r->len[LINKS] - 1;
        LIT(p, "]");
    }
    if (r->flags & 2) {
        LIT(p, ",\"status\":{\"code\":2");
        if (r->str[ERROR] != NULL) {
            LIT(p, ",\"message\":");
            p = str_to(p, r, ERROR);
        }
        LIT(p, "}");
    }
    LIT(p, "}");

    /* the wait in the queue, as encode() writes it */
    jr_trace_derive(wait, 8, jr_trace_word(r->id), (uint64_t)r->job_id,
                    (uint64_t)r->attempt << 32 | 0x77u);
    LIT(p, ",");
    p = head_to(p, r->trace, wait, r->id, WAIT, sizeof WAIT - 1, r,
                JR_SPAN_INTERNAL,
                r->run_at > 0 && r->run_at < r->start ? r->run_at : r->start,
                r->start);
    LIT(p, ",\"attributes\":[");
    LIT1(p, KEY("messaging.destination.name", "stringValue"));
    p = str_to(p, r, QUEUE);
    LIT(p, "}}]}");
    if (r->len[DONE] > 0) {
        LIT(p, ",");
        memcpy(p, r->str[DONE], r->len[DONE]);
        p += r->len[DONE];
    }
    out->len += (size_t)(p - at);
    return 1;
}

int
jr_spanrec_json(const char *recs, size_t len, jr_buf *out, int comma)
{
    jr_span s = {0};
    rec r;
    size_t k, at = 0;
    int n = 0;

    while (at < len) {
        if ((k = jr_spanrec_get(recs + at, len - at, &r)) == 0) {
            n = -1;
            break;
        }
        if (!encode_fast(&r, out, comma || n > 0))
            encode(&r, &s, out, comma || n > 0);
        at += k;
        n++;
    }
    jr_span_free(&s);
    return n;
}
