/* spanpb.c - the records of the workers' spans as OTLP/protobuf
 * (spanpb.h). The common record (strings that need no escaping and no
 * cut, no events, no links, as a job's queue, name and outcome are) is
 * written straight from its bytes, with one check of the buffer's room:
 * ids copied, times as fixed64, the attributes every attempt's span has
 * the same one constant. Any other record is written as OTLP/JSON
 * (spanrec.c) and that text read into protobuf by the schema of the
 * messages it uses (Span, Event, Link, KeyValue, AnyValue, Status), so
 * both give the same bytes (spec/c/test_spanpb.c). Fields go in
 * ascending order with minimal varints: what protobuf's own encoders
 * write. Uses spanrec.h, trace.h, util.h. */
#include <stdlib.h>
#include <string.h>

#include "base/spanpb.h"
#include "base/spanrec.h"
#include "base/trace.h"

char *
jr_spanpb_varint(char *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (char)(v | 0x80);
        v >>= 7;
    }
    *p++ = (char)v;
    return p;
}

size_t
jr_spanpb_vlen(uint64_t v)
{
    size_t n = 1;

    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* v's 8 bytes, least significant first */
static char *
fixed64(char *p, uint64_t v)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(p, &v, 8);
    return p + 8;
#else
    int i;

    for (i = 0; i < 8; i++, v >>= 8)
        *p++ = (char)(v & 0xff);
    return p;
#endif
}

/* jr_spanpb_varint and jr_spanpb_vlen, a small value's in line */
static inline char *
vint(char *p, uint64_t v)
{
    if (v < 0x80) {
        *p = (char)v;
        return p + 1;
    }
    return jr_spanpb_varint(p, v);
}

static inline size_t
vlen(uint64_t v)
{
    return v < 0x80 ? 1 : jr_spanpb_vlen(v);
}

/* ---- OTLP/JSON read into protobuf, by the proto's schema ---- */

enum { F_HEX, F_STR, F_I32, F_U32, F_FIX64, F_I64, F_DBL, F_BOOL, F_MSG };
enum { M_SPAN, M_EVENT, M_LINK, M_KV, M_ANY, M_STATUS, M_ARRAY, M_KVLIST };

typedef struct fld {
    const char *name;
    uint8_t     num, type, msg;
} fld;

static const fld SPAN[] = {
    {"traceId", 1, F_HEX, 0}, {"spanId", 2, F_HEX, 0},
    {"traceState", 3, F_STR, 0}, {"parentSpanId", 4, F_HEX, 0},
    {"name", 5, F_STR, 0}, {"kind", 6, F_I32, 0},
    {"startTimeUnixNano", 7, F_FIX64, 0}, {"endTimeUnixNano", 8, F_FIX64, 0},
    {"attributes", 9, F_MSG, M_KV}, {"droppedAttributesCount", 10, F_U32, 0},
    {"events", 11, F_MSG, M_EVENT}, {"droppedEventsCount", 12, F_U32, 0},
    {"links", 13, F_MSG, M_LINK}, {"droppedLinksCount", 14, F_U32, 0},
    {"status", 15, F_MSG, M_STATUS}, {NULL, 0, 0, 0}};
static const fld EVENT[] = {
    {"timeUnixNano", 1, F_FIX64, 0}, {"name", 2, F_STR, 0},
    {"attributes", 3, F_MSG, M_KV}, {"droppedAttributesCount", 4, F_U32, 0},
    {NULL, 0, 0, 0}};
static const fld LINK[] = {
    {"traceId", 1, F_HEX, 0}, {"spanId", 2, F_HEX, 0},
    {"traceState", 3, F_STR, 0}, {"attributes", 4, F_MSG, M_KV},
    {"droppedAttributesCount", 5, F_U32, 0}, {NULL, 0, 0, 0}};
static const fld KV[] = {
    {"key", 1, F_STR, 0}, {"value", 2, F_MSG, M_ANY}, {NULL, 0, 0, 0}};
static const fld ANY[] = {
    {"stringValue", 1, F_STR, 0}, {"boolValue", 2, F_BOOL, 0},
    {"intValue", 3, F_I64, 0}, {"doubleValue", 4, F_DBL, 0},
    {"arrayValue", 5, F_MSG, M_ARRAY}, {"kvlistValue", 6, F_MSG, M_KVLIST},
    {NULL, 0, 0, 0}};
static const fld STATUS[] = {
    {"message", 2, F_STR, 0}, {"code", 3, F_I32, 0}, {NULL, 0, 0, 0}};
static const fld ARRAY[] = {{"values", 1, F_MSG, M_ANY}, {NULL, 0, 0, 0}};
static const fld KVLIST[] = {{"values", 1, F_MSG, M_KV}, {NULL, 0, 0, 0}};
static const fld *const SCHEMA[] = {SPAN, EVENT, LINK, KV, ANY, STATUS,
                                    ARRAY, KVLIST};

typedef struct jp {
    const char *p, *end;
    jr_buf      s;              /* the last string read, unescaped */
} jp;

static void
ws(jp *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\n' ||
                             *j->p == '\t' || *j->p == '\r'))
        j->p++;
}

static int
eat(jp *j, char c)
{
    ws(j);
    if (j->p < j->end && *j->p == c) {
        j->p++;
        return 1;
    }
    return 0;
}

static int
hexval(int c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ?
           c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* a JSON string into j->s (unescaped, UTF-8); 0, or -1 */
static int
str(jp *j)
{
    char u[4];
    unsigned v;
    int k, d;

    jr_buf_reset(&j->s);
    if (!eat(j, '"'))
        return -1;
    while (j->p < j->end && *j->p != '"') {
        const char *run = j->p;
        while (j->p < j->end && *j->p != '"' && *j->p != '\\')
            j->p++;
        jr_buf_put(&j->s, run, (size_t)(j->p - run));
        if (j->p >= j->end || *j->p == '"')
            break;
        if (++j->p >= j->end)
            return -1;
        switch (*j->p++) {
        case '"': jr_buf_put(&j->s, "\"", 1); break;
        case '\\': jr_buf_put(&j->s, "\\", 1); break;
        case '/': jr_buf_put(&j->s, "/", 1); break;
        case 'b': jr_buf_put(&j->s, "\b", 1); break;
        case 'f': jr_buf_put(&j->s, "\f", 1); break;
        case 'n': jr_buf_put(&j->s, "\n", 1); break;
        case 'r': jr_buf_put(&j->s, "\r", 1); break;
        case 't': jr_buf_put(&j->s, "\t", 1); break;
        case 'u':
            if (j->end - j->p < 4)
                return -1;
            for (v = 0, k = 0; k < 4; k++) {
                if ((d = hexval(*j->p++)) < 0)
                    return -1;
                v = v << 4 | (unsigned)d;
            }
            if (v >= 0xd800 && v < 0xe000)      /* a surrogate: not ours */
                v = '?';
            if (v < 0x80) {
                u[0] = (char)v;
                jr_buf_put(&j->s, u, 1);
            } else if (v < 0x800) {
                u[0] = (char)(0xc0 | v >> 6);
                u[1] = (char)(0x80 | (v & 0x3f));
                jr_buf_put(&j->s, u, 2);
            } else {
                u[0] = (char)(0xe0 | v >> 12);
                u[1] = (char)(0x80 | (v >> 6 & 0x3f));
                u[2] = (char)(0x80 | (v & 0x3f));
                jr_buf_put(&j->s, u, 3);
            }
            break;
        default:
            return -1;
        }
    }
    if (!eat(j, '"'))
        return -1;
    return j->s.oom ? -1 : 0;
}

/* a JSON number's text, or a string's (64-bit integers are strings in
 * OTLP/JSON), into buf; 0, or -1 */
static int
numtext(jp *j, char *buf, size_t cap)
{
    size_t n;

    ws(j);
    if (j->p < j->end && *j->p == '"') {
        if (str(j) < 0 || j->s.len == 0 || j->s.len >= cap)
            return -1;
        memcpy(buf, j->s.p, j->s.len);
        buf[j->s.len] = '\0';
        return 0;
    }
    for (n = 0; j->p < j->end && strchr("+-.0123456789eE", *j->p) &&
         *j->p != '\0'; j->p++) {
        if (n + 1 >= cap)
            return -1;
        buf[n++] = *j->p;
    }
    buf[n] = '\0';
    return n > 0 ? 0 : -1;
}

/* an integer's text as a 64-bit value (two's complement when negative) */
static int
integer(jp *j, uint64_t *out)
{
    char buf[64], *e;

    if (numtext(j, buf, sizeof buf) < 0)
        return -1;
    if (buf[0] == '-')
        *out = (uint64_t)strtoll(buf, &e, 10);
    else
        *out = strtoull(buf, &e, 10);
    return *e == '\0' ? 0 : -1;
}

static int message(jp *j, int m, jr_buf *out);

/* tag and length before a message written into out from at: moves it
 * over for the length's bytes */
static int
delimit(jr_buf *out, size_t at, unsigned num)
{
    size_t n = out->len - at;
    size_t head = jr_spanpb_vlen((uint64_t)num << 3 | 2) + jr_spanpb_vlen(n);
    char *p;

    if (jr_buf_room(out, head) == NULL)
        return -1;
    memmove(out->p + at + head, out->p + at, n);
    p = jr_spanpb_varint(out->p + at, (uint64_t)num << 3 | 2);
    jr_spanpb_varint(p, n);
    out->len += head;
    return 0;
}

/* one value of field f into out */
static int
value(jp *j, const fld *f, jr_buf *out)
{
    char t[20], *p, num[64];
    uint64_t v;
    double d;
    size_t i, at;

    p = jr_spanpb_varint(t, (uint64_t)f->num << 3 |
                     (f->type == F_FIX64 || f->type == F_DBL ? 1 :
                      f->type <= F_STR || f->type == F_MSG ? 2 : 0));
    switch (f->type) {
    case F_HEX:
        if (str(j) < 0 || j->s.len % 2 != 0)
            return -1;
        for (i = 0; i < j->s.len; i += 2) {
            int hi = hexval(j->s.p[i]), lo = hexval(j->s.p[i + 1]);
            if (hi < 0 || lo < 0)
                return -1;
            j->s.p[i / 2] = (char)(hi << 4 | lo);
        }
        p = jr_spanpb_varint(p, j->s.len / 2);
        jr_buf_put(out, t, (size_t)(p - t));
        jr_buf_put(out, j->s.p, j->s.len / 2);
        return 0;
    case F_STR:
        if (str(j) < 0)
            return -1;
        p = jr_spanpb_varint(p, j->s.len);
        jr_buf_put(out, t, (size_t)(p - t));
        jr_buf_put(out, j->s.p, j->s.len);
        return 0;
    case F_I32: case F_U32: case F_I64:
        if (integer(j, &v) < 0)
            return -1;
        if (f->type == F_I32)   /* int32: a negative one sign-extended */
            v = (uint64_t)(int64_t)(int32_t)v;
        else if (f->type == F_U32)
            v = (uint32_t)v;
        p = jr_spanpb_varint(p, v);
        return jr_buf_put(out, t, (size_t)(p - t));
    case F_FIX64:
        if (integer(j, &v) < 0)
            return -1;
        p = fixed64(p, v);
        return jr_buf_put(out, t, (size_t)(p - t));
    case F_DBL:
        if (numtext(j, num, sizeof num) < 0)
            return -1;
        d = strtod(num, &p);
        if (*p != '\0')
            return -1;
        memcpy(&v, &d, sizeof v);
        p = fixed64(jr_spanpb_varint(t, (uint64_t)f->num << 3 | 1), v);
        return jr_buf_put(out, t, (size_t)(p - t));
    case F_BOOL:
        ws(j);
        if (j->end - j->p >= 4 && memcmp(j->p, "true", 4) == 0)
            j->p += 4, *p++ = 1;
        else if (j->end - j->p >= 5 && memcmp(j->p, "false", 5) == 0)
            j->p += 5, *p++ = 0;
        else
            return -1;
        return jr_buf_put(out, t, (size_t)(p - t));
    default:                    /* F_MSG */
        at = out->len;
        if (message(j, f->msg, out) < 0)
            return -1;
        return delimit(out, at, f->num);
    }
}

typedef struct seg {
    unsigned num;
    size_t   at, len;
} seg;

#define SEGS 32                 /* fields an object may have */

/* fields in the order of their numbers, as protobuf's encoders write
 * them (a repeated field's values keep theirs) */
static int
order(jr_buf *out, size_t at, seg *s, int n)
{
    jr_buf t = {0};
    int i, k, sorted = 1;
    seg x;

    for (i = 1; i < n; i++)
        sorted = sorted && s[i - 1].num <= s[i].num;
    if (sorted)
        return 0;
    for (i = 1; i < n; i++) {   /* insertion: stable, a few fields */
        x = s[i];
        for (k = i; k > 0 && s[k - 1].num > x.num; k--)
            s[k] = s[k - 1];
        s[k] = x;
    }
    for (i = 0; i < n; i++)
        jr_buf_put(&t, out->p + s[i].at, s[i].len);
    if (t.oom || t.len != out->len - at) {
        jr_buf_free(&t);
        return -1;
    }
    memcpy(out->p + at, t.p, t.len);
    jr_buf_free(&t);
    return 0;
}

/* a JSON object of message m into out (its fields, no tag) */
static int
message(jp *j, int m, jr_buf *out)
{
    const fld *f;
    seg s[SEGS];
    size_t at = out->len;
    int n = 0;

    if (!eat(j, '{'))
        return -1;
    if (eat(j, '}'))
        return 0;
    do {
        if (str(j) < 0 || !eat(j, ':') || n == SEGS)
            return -1;
        for (f = SCHEMA[m]; f->name != NULL; f++)
            if (strlen(f->name) == j->s.len &&
                memcmp(f->name, j->s.p, j->s.len) == 0)
                break;
        if (f->name == NULL)    /* not the proto's: a bug of ours */
            return -1;
        s[n].num = f->num;
        s[n].at = out->len;
        if (f->type == F_MSG && eat(j, '[')) {  /* repeated */
            if (!eat(j, ']')) {
                do {
                    if (value(j, f, out) < 0)
                        return -1;
                } while (eat(j, ','));
                if (!eat(j, ']'))
                    return -1;
            }
        } else if (value(j, f, out) < 0) {
            return -1;
        }
        s[n].len = out->len - s[n].at;
        n++;
    } while (eat(j, ','));
    if (!eat(j, '}') || out->oom)
        return -1;
    return order(out, at, s, n);
}

int
jr_spanpb_json(const char *json, size_t len, jr_buf *out)
{
    static const fld spans = {"spans", 2, F_MSG, M_SPAN};
    jp j = {json, json + len, {0}};
    int rc = 0;

    ws(&j);
    if (j.p < j.end) {
        do {
            if ((rc = value(&j, &spans, out)) < 0)
                break;
        } while (eat(&j, ','));
        ws(&j);
        if (rc == 0 && j.p != j.end)
            rc = -1;
    }
    jr_buf_free(&j.s);
    return rc < 0 || out->oom ? -1 : 0;
}

/* ---- the common record, written straight into out's memory ---- */

/* the attributes every attempt's span has the same, as spanrec.c's
 * FIXED_ATTRS: KeyValue fields (9) of a Span */
static const char FIXED[] =
    "\x4a\x1f" "\x0a\x10" "messaging.system" "\x12\x0b\x0a\x09" "jobrunner"
    "\x4a\x25" "\x0a\x18" "messaging.operation.type" "\x12\x09\x0a\x07"
    "process"
    "\x4a\x25" "\x0a\x18" "messaging.operation.name" "\x12\x09\x0a\x07"
    "process";

/* a string attribute k = s (n bytes) of a Span */
static inline char *
kv_str(char *p, const char *k, size_t kl, const char *s, size_t n)
{
    size_t any = 1 + vlen(n) + n;

    if (kl + n < 120) {         /* every length in one byte */
        p[0] = 0x4a;
        p[1] = (char)(6 + kl + n);
        p[2] = 0x0a;
        p[3] = (char)kl;
        memcpy(p + 4, k, kl);
        p += 4 + kl;
        p[0] = 0x12;
        p[1] = (char)(2 + n);
        p[2] = 0x0a;
        p[3] = (char)n;
        if (n > 0)
            memcpy(p + 4, s, n);
        return p + 4 + n;
    }
    *p++ = 0x4a;
    p = vint(p, 1 + vlen(kl) + kl + 1 + vlen(any) + any);
    *p++ = 0x0a;
    p = vint(p, kl);
    memcpy(p, k, kl);
    p += kl;
    *p++ = 0x12;
    p = vint(p, any);
    *p++ = 0x0a;
    p = vint(p, n);
    if (n > 0)
        memcpy(p, s, n);
    return p + n;
}
#define KV_STR(p, k, s, n) kv_str(p, k, sizeof k - 1, s, n)

/* an int attribute k = v of a Span (v >= 0, as the JSON's digits) */
static char *
kv_int(char *p, const char *k, size_t kl, int64_t v)
{
    uint64_t u = v < 0 ? 0 : (uint64_t)v;
    size_t any = 1 + vlen(u);

    *p++ = 0x4a;
    p = vint(p, 1 + vlen(kl) + kl + 1 + vlen(any) + any);
    *p++ = 0x0a;
    p = vint(p, kl);
    memcpy(p, k, kl);
    p += kl;
    *p++ = 0x12;
    p = vint(p, any);
    *p++ = 0x18;
    return vint(p, u);
}
#define KV_INT(p, k, v) kv_int(p, k, sizeof k - 1, v)

/* a length-delimited field opened at p: 2 bytes kept for its length */
#define OPEN(p, tag) (*(p)++ = (char)(tag), (p) += 2, (p))

/* closes the field whose body began at body (its length in the 2 bytes
 * before it; a shorter one moves back by one); the end */
static char *
close_(char *body, char *end)
{
    size_t n = (size_t)(end - body);

    if (n < 0x80) {
        body[-2] = (char)n;
        memmove(body - 1, body, n);
        return end - 1;
    }
    body[-2] = (char)(n | 0x80);
    body[-1] = (char)(n >> 7);
    return end;
}

static char *
head(char *p, const uint8_t trace[16], const uint8_t id[8],
     const uint8_t *parent, const char *prefix, size_t plen,
     const jr_spanrd *r, int kind, int64_t start, int64_t end)
{
    size_t ql = r->str[JR_SR_QUEUE] != NULL ? r->len[JR_SR_QUEUE] : 0;

    *p++ = 0x0a, *p++ = 16;
    memcpy(p, trace, 16), p += 16;
    *p++ = 0x12, *p++ = 8;
    memcpy(p, id, 8), p += 8;
    if (parent != NULL) {
        *p++ = 0x22, *p++ = 8;
        memcpy(p, parent, 8), p += 8;
    }
    *p++ = 0x2a;
    p = vint(p, plen + ql);
    memcpy(p, prefix, plen), p += plen;
    if (ql > 0)
        memcpy(p, r->str[JR_SR_QUEUE], ql), p += ql;
    *p++ = 0x30;
    p = vint(p, (uint64_t)kind);
    if (start < 0)
        start = 0;
    *p++ = 0x39;
    p = fixed64(p, (uint64_t)start);
    *p++ = 0x41;
    return fixed64(p, (uint64_t)(end > start ? end : start));
}

#define FIXED_BYTES 1024        /* fast()'s bytes but the strings: about
                                   400 */

/* r's spans as the JSON's, when r is the common case: 1, else 0 and
 * nothing written; -1 when out ran out of memory */
static int
fast(const jr_spanrd *r, jr_buf *out)
{
    static const char PROCESS[] = "process ", WAIT[] = "wait ";
    const char *const *s = r->str;
    const size_t *l = r->len;
    size_t need, ql = s[JR_SR_QUEUE] != NULL ? l[JR_SR_QUEUE] : 0;
    char id[24], *d, *p, *body;
    uint64_t u;
    uint8_t wait[8];
    int i;

    if (s[JR_SR_EVENTS] != NULL || (s[JR_SR_LINKS] != NULL &&
                                    l[JR_SR_LINKS] > 1) ||
        s[JR_SR_OUTCOME] == NULL || l[JR_SR_OUTCOME] > 31 ||
        ql > 159 - (sizeof PROCESS - 1) ||
        !jr_spanrd_plain(r, JR_SR_QUEUE, ql) ||
        !jr_spanrd_plain(r, JR_SR_OUTCOME, 31) ||
        (l[JR_SR_OUTCOME] == 7 && memcmp(s[JR_SR_OUTCOME], "snoozed", 7) == 0))
        return 0;
    need = FIXED_BYTES + 4 * ql;
    for (i = JR_SR_NAME; i <= JR_SR_ERROR; i++) {
        if (i == JR_SR_OUTCOME)
            continue;
        if (!jr_spanrd_plain(r, i, JR_SPAN_TEXT_MAX))
            return 0;
        need += l[i];
    }
    if (need > 16000)           /* a span's length in 2 bytes */
        return 0;
    if ((p = jr_buf_room(out, need)) == NULL)
        return -1;

    body = OPEN(p, 0x12);       /* the attempt's span */
    p = head(p, r->trace, r->id, (r->flags & 1) ? r->parent : NULL,
             PROCESS, sizeof PROCESS - 1, r, r->kind, r->start, r->end);
    memcpy(p, FIXED, sizeof FIXED - 1), p += sizeof FIXED - 1;
    p = KV_STR(p, "messaging.destination.name", s[JR_SR_QUEUE], ql);
    d = id + sizeof id;         /* the job's id as the JSON's digits */
    u = r->job_id < 0 ? 0 : (uint64_t)r->job_id;
    do {
        *--d = (char)('0' + u % 10);
        u /= 10;
    } while (u > 0);
    p = KV_STR(p, "messaging.message.id", d, (size_t)(id + sizeof id - d));
    if (s[JR_SR_NAME] != NULL)
        p = KV_STR(p, "jobrunner.job.name", s[JR_SR_NAME], l[JR_SR_NAME]);
    if (s[JR_SR_KEY] != NULL)
        p = KV_STR(p, "jobrunner.job.key", s[JR_SR_KEY], l[JR_SR_KEY]);
    p = KV_INT(p, "jobrunner.job.attempt", r->attempt);
    if (r->run_at > 0)
        p = KV_INT(p, "jobrunner.queue.wait_us", r->start > r->run_at ?
                   (r->start - r->run_at) / 1000 : 0);
    if (s[JR_SR_GEN] != NULL)
        p = KV_STR(p, "jobrunner.job.generation", s[JR_SR_GEN], l[JR_SR_GEN]);
    p = KV_STR(p, "jobrunner.job.outcome", s[JR_SR_OUTCOME], l[JR_SR_OUTCOME]);
    if (r->flags & 2) {
        if (l[JR_SR_OUTCOME] == 5 && memcmp(s[JR_SR_OUTCOME], "retry", 5) == 0)
            p = KV_STR(p, "error.type", "retry", 5);
        else
            p = KV_STR(p, "error.type", "dead", 4);
        *p++ = 0x7a;            /* status: its message, code ERROR */
        p = vint(p, 2 + (s[JR_SR_ERROR] == NULL ? 0 :
                                 1 + vlen(l[JR_SR_ERROR]) +
                                 l[JR_SR_ERROR]));
        if (s[JR_SR_ERROR] != NULL) {
            *p++ = 0x12;
            p = vint(p, l[JR_SR_ERROR]);
            memcpy(p, s[JR_SR_ERROR], l[JR_SR_ERROR]), p += l[JR_SR_ERROR];
        }
        *p++ = 0x18, *p++ = 2;
    }
    p = close_(body, p);

    /* the wait in the queue, a child of the attempt's span */
    jr_trace_derive(wait, 8, jr_trace_word(r->id), (uint64_t)r->job_id,
                    (uint64_t)r->attempt << 32 | 0x77u);
    body = OPEN(p, 0x12);
    p = head(p, r->trace, wait, r->id, WAIT, sizeof WAIT - 1, r,
             JR_SPAN_INTERNAL, r->run_at > 0 && r->run_at < r->start ?
             r->run_at : r->start, r->start);
    p = KV_STR(p, "messaging.destination.name", s[JR_SR_QUEUE], ql);
    p = close_(body, p);
    out->len = (size_t)(p - out->p);
    if (l[JR_SR_DONE] > 0 && jr_spanpb_json(s[JR_SR_DONE], l[JR_SR_DONE],
                                            out) < 0)
        return out->oom ? -1 : 2;
    return 1;
}

int
jr_spanpb_recs(const char *recs, size_t len, jr_buf *out)
{
    jr_buf json = {0};
    jr_spanrd r;
    size_t k, at = 0;
    int n = 0, rc;

    while (at < len) {
        if ((k = jr_spanrec_get(recs + at, len - at, &r)) == 0) {
            n = -1;
            break;
        }
        if ((rc = fast(&r, out)) < 0)
            break;              /* out says so */
        if (rc == 2) {          /* its jobrunner.span text is not OTLP's */
            n = -1;
            break;
        }
        if (rc == 0) {          /* the JSON's text, read into protobuf */
            jr_buf_reset(&json);
            if (jr_spanrec_json(recs + at, k, &json, 0) != 1 ||
                json.oom || jr_spanpb_json(json.p, json.len, out) < 0) {
                n = -1;
                break;
            }
        }
        at += k;
        n++;
    }
    jr_buf_free(&json);
    return n;
}
