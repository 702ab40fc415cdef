/* trace.c - W3C trace context checked and parsed, trace and span ids, the
 * sampling rule, and a span as OTLP/JSON (the protobuf JSON mapping the
 * OTLP spec gives: ids in hex, times as decimal strings of nanoseconds,
 * enums as numbers). Uses trace.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "base/trace.h"
#include "base/jsontext.h"

static int
hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;                  /* uppercase is refused (W3C: lowercase) */
}

/* n bytes from 2n lowercase hex digits at s; 1 if they are not all zero,
 * 0 if they are, -1 if a digit is not one. */
static int
unhex(const char *s, uint8_t *out, size_t n)
{
    size_t i;
    int any = 0, hi, lo;

    for (i = 0; i < n; i++) {
        if ((hi = hexval((unsigned char)s[2 * i])) < 0 ||
            (lo = hexval((unsigned char)s[2 * i + 1])) < 0)
            return -1;
        out[i] = (uint8_t)(hi << 4 | lo);
        any |= out[i];
    }
    return any != 0;
}

/* 0 if tp is a traceparent we take, else -1 with why set. */
static int
parent_ok(const char *tp, jr_tctx *c, const char **why)
{
    uint8_t flags;

    if (strlen(tp) < JR_TRACEPARENT_LEN ||
        (tp[JR_TRACEPARENT_LEN] != '\0' && tp[JR_TRACEPARENT_LEN] != ' ')) {
        *why = "is not 55 characters (00-<32 hex>-<16 hex>-<2 hex>)";
        return -1;
    }
    if (tp[0] != '0' || tp[1] != '0' || tp[2] != '-') {
        *why = "is not version 00";
        return -1;
    }
    if (tp[35] != '-' || tp[52] != '-') {
        *why = "is not 00-<32 hex>-<16 hex>-<2 hex>";
        return -1;
    }
    switch (unhex(tp + 3, c->trace, 16)) {
    case -1: *why = "has a trace id that is not 32 lowercase hex digits";
        return -1;
    case 0: *why = "has an all-zero trace id";
        return -1;
    }
    switch (unhex(tp + 36, c->span, 8)) {
    case -1: *why = "has a parent id that is not 16 lowercase hex digits";
        return -1;
    case 0: *why = "has an all-zero parent id";
        return -1;
    }
    if (unhex(tp + 53, &flags, 1) < 0) {
        *why = "has flags that are not 2 lowercase hex digits";
        return -1;
    }
    c->sampled = flags & 1;
    return 0;
}

int
jr_trace_check(const char *traceparent, const char *tracestate,
               const char *what, jr_err *err)
{
    jr_tctx c;
    const char *why, *s;

    if (traceparent == NULL) {
        if (tracestate != NULL)
            return jr_fail(err, JR_EINPUT, "%s: a tracestate needs a "
                           "traceparent", what);
        return 0;
    }
    if (strlen(traceparent) != JR_TRACEPARENT_LEN) {
        return jr_fail(err, JR_EINPUT, "%s: traceparent '%.80s' is not 55 "
                       "characters (00-<32 hex>-<16 hex>-<2 hex>)", what,
                       traceparent);
    }
    if (parent_ok(traceparent, &c, &why) < 0)
        return jr_fail(err, JR_EINPUT, "%s: traceparent '%s' %s", what,
                       traceparent, why);
    if (tracestate == NULL)
        return 0;
    if (strlen(tracestate) > JR_TRACESTATE_MAX)
        return jr_fail(err, JR_EINPUT, "%s: tracestate of %zu bytes (at "
                       "most %d)", what, strlen(tracestate),
                       JR_TRACESTATE_MAX);
    for (s = tracestate; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
            return jr_fail(err, JR_EINPUT, "%s: tracestate holds a byte "
                           "0x%02x (printable ASCII only)", what,
                           (unsigned char)*s);
    if (strchr(tracestate, '=') == NULL)
        return jr_fail(err, JR_EINPUT, "%s: tracestate '%.80s' is not a "
                       "list of key=value", what, tracestate);
    return 0;
}

int
jr_trace_parse(const char *stored, jr_tctx *out)
{
    const char *why;

    if (stored == NULL || parent_ok(stored, out, &why) < 0)
        return -1;
    out->state = stored[JR_TRACEPARENT_LEN] == ' ' ?
                 stored + JR_TRACEPARENT_LEN + 1 : NULL;
    return 0;
}

static void
hex(const uint8_t *b, size_t n, char *out)
{
    static const char d[] = "0123456789abcdef";
    size_t i;

    for (i = 0; i < n; i++) {
        out[2 * i] = d[b[i] >> 4];
        out[2 * i + 1] = d[b[i] & 15];
    }
    out[2 * n] = '\0';
}

void
jr_trace_format(const uint8_t trace[16], const uint8_t span[8], int sampled,
                char *out)
{
    memcpy(out, "00-", 3);
    hex(trace, 16, out + 3);
    out[35] = '-';
    hex(span, 8, out + 36);
    out[52] = '-';
    out[53] = '0';
    out[54] = sampled ? '1' : '0';
    out[55] = '\0';
}

/* splitmix64: the ids' mixer, and the random generator's step */
static uint64_t
mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* n bytes of next's words, each word's low byte first; again while all
 * are zero (an id may not be). Inlined with its next: one call an id. */
static inline void
fill(uint8_t *out, size_t n, uint64_t (*next)(void *), void *arg)
{
    size_t i, k;
    uint64_t v, any;

    do {
        for (i = 0, any = 0; i + 8 <= n; i += 8) {
            v = next(arg);      /* one store where the host allows */
            out[i] = (uint8_t)v;
            out[i + 1] = (uint8_t)(v >> 8);
            out[i + 2] = (uint8_t)(v >> 16);
            out[i + 3] = (uint8_t)(v >> 24);
            out[i + 4] = (uint8_t)(v >> 32);
            out[i + 5] = (uint8_t)(v >> 40);
            out[i + 6] = (uint8_t)(v >> 48);
            out[i + 7] = (uint8_t)(v >> 56);
            any |= v;
        }
        if (i < n) {
            v = next(arg);
            for (k = 0; i + k < n; k++)
                out[i + k] = (uint8_t)(v >> (8 * k));
            any |= v & ((1ull << (8 * (n - i))) - 1);
        }
    } while (any == 0);
}

/* The generator's state, seeded at its first use in a process (workers
 * are exec'd: none inherits a used state; a getpid() a call cost a
 * system call a span). Only the worker's thread and the client's caller
 * use it. */
static uint64_t rng_state;
static int      rng_seeded;

static uint64_t
rng_next(void *arg)
{
    (void)arg;
    if (!rng_seeded) {
        uint64_t seed = 0;
        if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) != sizeof seed)
            seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
        rng_state ^= seed;
        rng_seeded = 1;
    }
    rng_state += 0x9e3779b97f4a7c15ull;
    return mix(rng_state);
}

void
jr_trace_random(uint8_t *out, size_t n)
{
    fill(out, n, rng_next, NULL);
}

typedef struct { uint64_t w[3]; uint64_t k; } derive_st;

static inline uint64_t
derive_next(void *arg)
{
    derive_st *d = arg;

    d->k++;
    return mix(mix(mix(d->w[0] ^ d->k) ^ d->w[1]) ^ d->w[2]);
}

void
jr_trace_derive(uint8_t *out, size_t n, uint64_t a, uint64_t b, uint64_t c)
{
    derive_st d = {{a, b, c}, 0};

    fill(out, n, derive_next, &d);
}

/* The rule over the word of the id's last 8 bytes, read big-endian */
static int
word_sampled(uint64_t v, double ratio)
{
    return (double)(v >> 11) < ratio * (double)(1ull << 53);
}

int
jr_trace_sampled(const uint8_t trace[16], double ratio)
{
    if (ratio >= 1)
        return 1;
    if (!(ratio > 0))
        return 0;
    return word_sampled(jr_trace_word(trace + 8), ratio);
}

int
jr_trace_derived_sampled(uint64_t a, uint64_t b, uint64_t c, double ratio)
{
    uint8_t id[16];
    uint64_t v;

    if (ratio >= 1)
        return 1;
    if (!(ratio > 0))
        return 0;
    v = mix(mix(mix(a ^ 2) ^ b) ^ c);  /* derive_next's second word: the
                                           id's bytes 8 to 15 */
    if (v == 0) {               /* the first may be too: derived again */
        jr_trace_derive(id, 16, a, b, c);
        return jr_trace_sampled(id, ratio);
    }
    /* fill stores it low byte first; the rule reads it big-endian */
#if defined(__GNUC__)
    v = __builtin_bswap64(v);
#else
    v = (v >> 56) | (v >> 40 & 0xff00) | (v >> 24 & 0xff0000) |
        (v >> 8 & 0xff000000) | (v << 8 & 0xff00000000ull) |
        (v << 24 & 0xff0000000000ull) | (v << 40 & 0xff000000000000ull) |
        v << 56;
#endif
    return word_sampled(v, ratio);
}

/* ---- spans ---- */

void
jr_span_reset(jr_span *s)
{
    jr_buf a = s->attrs, e = s->events, l = s->links;

    jr_buf_reset(&a);
    jr_buf_reset(&e);
    jr_buf_reset(&l);
    memset(s, 0, sizeof *s);
    s->attrs = a;
    s->events = e;
    s->links = l;
}

void
jr_span_free(jr_span *s)
{
    jr_buf_free(&s->attrs);
    jr_buf_free(&s->events);
    jr_buf_free(&s->links);
}

static void
puts_(jr_buf *b, const char *s)
{
    jr_buf_put(b, s, strlen(s));
}

/* s as a JSON string; bytes that are not UTF-8 become '?', so that a
 * collector never refuses the batch for a handler's error text. Runs of
 * plain characters go in one put. */
void
jr_span_jstr(jr_buf *b, const char *s)
{
    const unsigned char *p = (const unsigned char *)s, *run;
    size_t len = strnlen(s, JR_SPAN_TEXT_MAX + 1);
    const unsigned char *cut = p + (len > JR_SPAN_TEXT_MAX ?
                                    JR_SPAN_TEXT_MAX : len + 1);
    char esc[8];

    jr_buf_put(b, "\"", 1);
    for (;;) {
        for (run = p; *p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\' &&
             p < cut; p++)
            ;
        if (p > run)
            jr_buf_put(b, run, (size_t)(p - run));
        if (*p == '\0')
            break;
        if (p >= cut && len > JR_SPAN_TEXT_MAX) {  /* the rest is left out */
            jr_buf_put(b, "...", 3);
            break;
        }
        /* strict, as a protobuf decoder is: no overlong form, surrogate
           or code point past U+10FFFF (a NUL ends a short sequence) */
        size_t n = jr_jsontext_utf8_len(p, 4);
        if (n == 0) {
            jr_buf_put(b, "?", 1);
            p++;
        } else if (n > 1) {
            jr_buf_put(b, p, n);
            p += n;
        } else if (*p == '"' || *p == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*p++;
            jr_buf_put(b, esc, 2);
        } else {
            snprintf(esc, sizeof esc, "\\u%04x", *p++);
            jr_buf_put(b, esc, 6);
        }
    }
    jr_buf_put(b, "\"", 1);
}

static void
key_open(jr_buf *b, const char *key)
{
    jr_buf_put(b, ",{\"key\":", 8);
    jr_span_jstr(b, key);
    puts_(b, ",\"value\":{");
}

void
jr_span_str(jr_span *s, const char *key, const char *v)
{
    key_open(&s->attrs, key);
    puts_(&s->attrs, "\"stringValue\":");
    jr_span_jstr(&s->attrs, v);
    puts_(&s->attrs, "}}");
}

void
jr_span_raw(jr_span *s, const char *text, size_t len)
{
    jr_buf_put(&s->attrs, text, len);
}

/* v's decimal digits, ending at end (not NUL-terminated); the start */
static char *
digits(char *end, long long v)
{
    unsigned long long u = v < 0 ? 0ull - (unsigned long long)v :
                           (unsigned long long)v;

    do {
        *--end = (char)('0' + u % 10);
        u /= 10;
    } while (u > 0);
    if (v < 0)
        *--end = '-';
    return end;
}

void
jr_span_int(jr_span *s, const char *key, long long v)
{
    char num[48], *p;

    key_open(&s->attrs, key);
    puts_(&s->attrs, "\"intValue\":\"");
    p = digits(num + sizeof num, v);
    jr_buf_put(&s->attrs, p, (size_t)(num + sizeof num - p));
    puts_(&s->attrs, "\"}}");
}

void
jr_span_num(jr_span *s, const char *key, double v)
{
    char num[64];

    key_open(&s->attrs, key);
    if (isfinite(v))
        snprintf(num, sizeof num, "\"doubleValue\":%.17g}}", v);
    else
        snprintf(num, sizeof num, "\"stringValue\":\"%s\"}}",
                 isnan(v) ? "NaN" : v > 0 ? "Infinity" : "-Infinity");
    puts_(&s->attrs, num);
}

/* epoch seconds as the decimal string of nanoseconds (integer digits:
 * printf's %.0f of a double cost a job's span more than the rest of its
 * encoding) */
static void
nanos(jr_buf *b, double t)
{
    char num[32], *p = num + sizeof num;
    uint64_t v = t > 0 && t < 1.8e10 ? (uint64_t)(t * 1e9) : 0;

    *--p = '"';
    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v > 0);
    *--p = '"';
    jr_buf_put(b, p, (size_t)(num + sizeof num - p));
}

void
jr_span_event(jr_span *s, const char *name, double at, const char *skey,
              const char *sval, const char *nkey, double nval)
{
    jr_buf *b = &s->events;
    char num[64];

    if (s->nevents >= JR_SPAN_EVENTS)
        return;
    s->nevents++;
    puts_(b, ",{\"timeUnixNano\":");
    nanos(b, at);
    puts_(b, ",\"name\":");
    jr_span_jstr(b, name);
    puts_(b, ",\"attributes\":[");
    if (skey != NULL && sval != NULL) {
        puts_(b, "{\"key\":");
        jr_span_jstr(b, skey);
        puts_(b, ",\"value\":{\"stringValue\":");
        jr_span_jstr(b, sval);
        puts_(b, "}}");
    }
    if (nkey != NULL && isfinite(nval)) {
        if (skey != NULL && sval != NULL)
            puts_(b, ",");
        puts_(b, "{\"key\":");
        jr_span_jstr(b, nkey);
        snprintf(num, sizeof num, ",\"value\":{\"doubleValue\":%.17g}}",
                 nval);
        puts_(b, num);
    }
    puts_(b, "]}");
}

void
jr_span_link(jr_span *s, const uint8_t trace[16], const uint8_t span[8])
{
    char t[33], i[17];

    hex(trace, 16, t);
    hex(span, 8, i);
    puts_(&s->links, ",{\"traceId\":\"");
    puts_(&s->links, t);
    puts_(&s->links, "\",\"spanId\":\"");
    puts_(&s->links, i);
    puts_(&s->links, "\"}");
}

/* the list in b, its leading comma left out */
static void
list(jr_buf *out, const char *key, const jr_buf *b)
{
    if (b->len == 0)
        return;
    puts_(out, ",\"");
    puts_(out, key);
    puts_(out, "\":[");
    jr_buf_put(out, b->p + 1, b->len - 1);
    puts_(out, "]");
}

int
jr_span_encode(const jr_span *s, const char *name, const char *msg,
               jr_buf *out)
{
    char t[33], i[17], p[17], kind[16];

    hex(s->trace, 16, t);
    hex(s->id, 8, i);
    if (out->len > 0)
        puts_(out, ",");
    puts_(out, "{\"traceId\":\"");
    puts_(out, t);
    puts_(out, "\",\"spanId\":\"");
    puts_(out, i);
    puts_(out, "\"");
    if (s->has_parent) {
        hex(s->parent, 8, p);
        puts_(out, ",\"parentSpanId\":\"");
        puts_(out, p);
        puts_(out, "\"");
    }
    puts_(out, ",\"name\":");
    jr_span_jstr(out, name);
    snprintf(kind, sizeof kind, ",\"kind\":%d", s->kind);
    puts_(out, kind);
    puts_(out, ",\"startTimeUnixNano\":");
    nanos(out, s->start);
    puts_(out, ",\"endTimeUnixNano\":");
    nanos(out, s->end > s->start ? s->end : s->start);
    list(out, "attributes", &s->attrs);
    list(out, "events", &s->events);
    list(out, "links", &s->links);
    if (s->error) {
        puts_(out, ",\"status\":{\"code\":2");
        if (msg != NULL) {
            puts_(out, ",\"message\":");
            jr_span_jstr(out, msg);
        }
        puts_(out, "}");
    }
    puts_(out, "}");
    return out->oom || s->attrs.oom || s->events.oom || s->links.oom ? -1 : 0;
}

/* ---- a job's trace ---- */

void
jr_jobtrace_free(jr_jobtrace *t)
{
    if (t == NULL)
        return;
    jr_span_free(&t->run);
    jr_buf_free(&t->done);
    free(t);
}

void
jr_jobtrace_first(const jr_jobtrace *t, uint8_t trace[16], uint8_t span[8])
{
    if (t->parent)
        memcpy(trace, t->ptrace, 16);
    else
        jr_trace_derive(trace, 16, (uint64_t)t->job_id, t->created,
                        JR_TRACE_OWN);
    jr_trace_derive(span, 8, jr_trace_word(trace),
                    jr_trace_word(trace + 8) ^ (uint64_t)t->job_id, 1);
}

void
jr_jobtrace_ids(jr_jobtrace *t)
{
    uint8_t trace1[16], span1[8];

    jr_jobtrace_first(t, trace1, span1);
    if (t->attempt <= 1) {
        memcpy(t->trace, trace1, 16);
        memcpy(t->cur, span1, 8);
    } else {
        jr_trace_derive(t->trace, 16, jr_trace_word(trace1),
                        jr_trace_word(trace1 + 8),
                        (uint64_t)t->attempt << 32 ^ (uint64_t)t->job_id);
        jr_trace_derive(t->cur, 8, jr_trace_word(t->trace),
                        (uint64_t)t->job_id, (uint64_t)t->attempt);
    }
    t->ids = 1;
}

int
jr_jobtrace_parent(jr_jobtrace *t, const char *job_trace, char *tp,
                   const char **state)
{
    jr_tctx c;

    if (t != NULL && t->active) {
        if (!t->ids)            /* an unsampled attempt's, made now */
            jr_jobtrace_ids(t);
        jr_trace_format(t->trace, t->cur, t->sampled, tp);
        *state = t->state;
        return 1;
    }
    if (jr_trace_parse(job_trace, &c) < 0)
        return 0;
    memcpy(tp, job_trace, JR_TRACEPARENT_LEN);
    tp[JR_TRACEPARENT_LEN] = '\0';
    *state = c.state;
    return 1;
}
