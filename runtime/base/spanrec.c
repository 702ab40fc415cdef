/* spanrec.c - an attempt's spans as one compact record, and the record
 * as OTLP/JSON (spanrec.h). A record:
 *   u32 its length, u8 version, u8 flags (1 a parent, 2 an error),
 *   u8 the span's kind, u8 0, trace[16], span[8], parent[8],
 *   i64 start, end and due time (ns), i64 job id, i32 attempt,
 *   f64 snooze delay, then counted strings (u32 length, ~0 for none):
 *   queue, name, key, generation, outcome, error, events, links, done.
 * Uses trace.h, util.h. */
#include <stdlib.h>
#include <string.h>

#include "base/spanrec.h"

#define VERSION 1
#define NSTR    9
#define NONE    0xffffffffu
enum { QUEUE, NAME, KEY, GEN, OUTCOME, ERROR, EVENTS, LINKS, DONE };

static int64_t
ns(double t)
{
    return t > 0 && t < 1.8e10 ? (int64_t)(t * 1e9) : 0;
}

static void
put_str(jr_buf *b, const char *s, size_t n)
{
    uint32_t len = s == NULL ? NONE : (uint32_t)n;

    jr_buf_put(b, &len, sizeof len);
    if (s != NULL && n > 0)
        jr_buf_put(b, s, n);
}

static void
put_cstr(jr_buf *b, const char *s)
{
    put_str(b, s, s == NULL ? 0 : strlen(s));
}

void
jr_spanrec_put(jr_buf *out, const jr_spanrec *r)
{
    const jr_span *s = r->run;
    size_t at = out->len;
    uint32_t len = 0;
    uint8_t head[4] = {VERSION, (uint8_t)((s->has_parent ? 1 : 0) |
                                          (s->error ? 2 : 0)),
                       (uint8_t)s->kind, 0};
    int64_t num[5] = {ns(s->start), ns(s->end), ns(r->run_at), r->job_id,
                      0};
    int32_t attempt = r->attempt;

    jr_buf_put(out, &len, sizeof len);
    jr_buf_put(out, head, sizeof head);
    jr_buf_put(out, s->trace, 16);
    jr_buf_put(out, s->id, 8);
    jr_buf_put(out, s->parent, 8);
    jr_buf_put(out, num, 4 * sizeof num[0]);
    jr_buf_put(out, &attempt, sizeof attempt);
    jr_buf_put(out, &r->delay, sizeof r->delay);
    put_cstr(out, r->queue);
    put_cstr(out, r->name);
    put_cstr(out, r->key);
    put_cstr(out, r->generation);
    put_cstr(out, r->outcome);
    put_cstr(out, r->error);
    put_str(out, s->events.len ? s->events.p : NULL, s->events.len);
    put_str(out, s->links.len ? s->links.p : NULL, s->links.len);
    put_str(out, r->done_len ? r->done : NULL, r->done_len);
    if (!out->oom) {
        len = (uint32_t)(out->len - at);
        memcpy(out->p + at, &len, sizeof len);
    }
}

/* ---- the export thread's side ---- */

/* A record read back: its strings point into it (not NUL-terminated:
 * the lengths say) */
typedef struct rec {
    uint8_t     flags, kind;
    uint8_t     trace[16], id[8], parent[8];
    int64_t     start, end, run_at, job_id;
    int32_t     attempt;
    double      delay;
    const char *str[NSTR];
    size_t      len[NSTR];
} rec;

/* Reads the record at p (n bytes left); its length, or 0 if malformed */
static size_t
get(const char *p, size_t n, rec *r)
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

/* the words ids are derived from */
static uint64_t
word(const uint8_t *b)
{
    uint64_t v = 0;
    int i;

    for (i = 0; i < 8; i++)
        v = v << 8 | b[i];
    return v;
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
    jr_trace_derive(wait, 8, word(r->id), (uint64_t)r->job_id,
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

int
jr_spanrec_json(const char *recs, size_t len, jr_buf *out, int comma)
{
    jr_span s = {0};
    rec r;
    size_t k, at = 0;
    int n = 0;

    while (at < len) {
        if ((k = get(recs + at, len - at, &r)) == 0) {
            n = -1;
            break;
        }
        encode(&r, &s, out, comma || n > 0);
        at += k;
        n++;
    }
    jr_span_free(&s);
    return n;
}
