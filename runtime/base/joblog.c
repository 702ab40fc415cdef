/* joblog.c - one run's logs within their cap: lines encoded as JSON
 * objects when they come, the oldest dropped past the cap (the tail is
 * kept), compacted when the dropped ones take more room than the cap. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/joblog.h"
#include "base/jsondom.h"
#include "base/jsontext.h"

/* Makes room for n more bytes in b: 0, or -1 and b->oom set. */
static int
reserve(jr_buf *b, size_t n)
{
    size_t cap;
    char *p;

    if (b->oom)
        return -1;
    if (b->len + n <= b->cap)
        return 0;
    for (cap = b->cap ? b->cap : 256; cap < b->len + n; cap *= 2)
        ;
    if ((p = realloc(b->p, cap)) == NULL) {
        b->oom = 1;
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

/* 1 for a byte a JSON string holds as it is: printable ASCII but '"'
 * (0x22) and '\\' (0x5c). */
static const unsigned char plain[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
};
#define PLAIN(c) plain[(unsigned char)(c)]

/* How many bytes s[0..n) begins with that PLAIN holds as they are:
 * eight at a time while none of them is a control byte, DEL, '"', '\\'
 * or past ASCII (a line is mostly such text), then one at a time. */
static size_t
plain_run(const char *s, size_t n)
{
    const uint64_t ones = 0x0101010101010101ULL, highs = ones * 0x80;
    size_t used = 0;
    uint64_t v;

    for (; used + 8 <= n; used += 8) {
        memcpy(&v, s + used, 8);
        /* a high bit set in: v itself (past ASCII); for ASCII bytes
         * (no borrow or carry from a byte that is not a hit) v - 0x20..
         * (a control byte), v + 1.. (DEL), (v ^ '"') - 1.. and
         * (v ^ '\\') - 1.. (the two) */
        if (((v | (v - ones * 0x20) | (v + ones) |
              ((v ^ ones * 0x22) - ones) | ((v ^ ones * 0x5c) - ones)) &
             highs) != 0)
            break;
    }
    while (used < n && PLAIN(s[used]))
        used++;
    return used;
}

/* Writes s[0..n) as a JSON string's contents at o (room for 6 bytes a
 * byte): NUL and bytes that are not UTF-8 as U+FFFD (PostgreSQL's jsonb
 * refuses \u0000). Returns the bytes written. */
static size_t
put_escaped(char *o, const char *s, size_t n)
{
    char *start = o;
    size_t k, used;

    while (n > 0) {
        used = plain_run(s, n);
        memcpy(o, s, used);     /* plain ASCII, as it is */
        o += used;
        s += used;
        n -= used;
        if (n == 0)
            break;
        if (*s == '\0' ||
            (k = jr_jsontext_escape_char(s, n, o, &used)) == 0) {
            used = 1;
            memcpy(o, JR_JSONTEXT_BADBYTE, 6);
            k = 6;
        }
        o += k;
        s += used;
        n -= used;
    }
    return (size_t)(o - start);
}

/* Drops the first kept line. */
static void
drop_first(jr_joblog *l)
{
    const char *p = memchr(l->buf.p + l->start, '\n', l->buf.len - l->start);
    size_t end = p ? (size_t)(p - l->buf.p) + 1 : l->buf.len;

    l->dropped_lines++;
    l->dropped_bytes += (long long)(end - l->start);
    l->start = end;
}

/* Writes v's digits at out (24 bytes). Returns how many. */
static size_t
put_uint(char *out, unsigned long long v)
{
    char tmp[24];
    size_t k = 0, n = 0;

    do {
        tmp[k++] = (char)('0' + v % 10);
        v /= 10;
    } while (v > 0);
    while (k > 0)
        out[n++] = tmp[--k];
    return n;
}

/* Writes epoch seconds t with 3 decimals at out (32 bytes) without
 * printf's floating point, a line's cost; the whole seconds' digits are
 * l's from its last line when the second is the same. Returns the
 * length. */
static size_t
put_secs(jr_joblog *l, char *out, double t)
{
    long long ms = (long long)(t * 1000 + 0.5);
    size_t n;
    int frac;

    if (ms < 0)
        ms = 0;
    frac = (int)(ms % 1000);
    if (ms / 1000 != l->sec || l->sec_len == 0) {
        l->sec = ms / 1000;
        l->sec_len = (unsigned char)put_uint(l->sec_text,
                                             (unsigned long long)l->sec);
    }
    memcpy(out, l->sec_text, l->sec_len);
    n = l->sec_len;
    out[n++] = '.';
    out[n++] = (char)('0' + frac / 100);
    out[n++] = (char)('0' + frac / 10 % 10);
    out[n++] = (char)('0' + frac % 10);
    return n;
}

/* The start of s[0..n) cut at most at cut bytes, at a character's
 * start if one is within 3 bytes. */
static size_t
char_cut(const char *s, size_t n, size_t cut)
{
    size_t k;

    if (cut >= n)
        return n;
    for (k = cut; k > 0 && cut - k < 3 && (s[k] & 0xC0) == 0x80; k--)
        ;
    return k > 0 && (s[k] & 0xC0) != 0x80 ? k : cut;
}

/* Appends the line of level (len bytes), its text s[0..cut) of n ("[line
 * cut]" after it when cut < n), at time now: room made once, written in
 * place. */
static void
encode(jr_joblog *l, double now, const char *level, size_t len,
       const char *s, size_t cut, size_t n)
{
    jr_buf *b = &l->buf;
    char *o;

    if (reserve(b, 64 + len + 6 * cut + 16) < 0)
        return;
    o = b->p + b->len;
    memcpy(o, "{\"at\":", 6);
    o += 6;
    o += put_secs(l, o, now);
    memcpy(o, ",\"level\":\"", 10);
    o += 10;
    memcpy(o, level, len);
    o += len;
    memcpy(o, "\",\"msg\":\"", 9);
    o += 9;
    o += put_escaped(o, s, cut);
    if (cut < n) {
        memcpy(o, " [line cut]", 11);
        o += 11;
    }
    memcpy(o, "\"}\n", 3);
    b->len = (size_t)(o + 3 - b->p);
}

void
jr_joblog_add(jr_joblog *l, const char *level, const char *s, size_t n,
              size_t max)
{
    size_t from = l->buf.len, cut = char_cut(s, n, JR_JOBLOG_LINE), len;
    size_t whole = 0, next, llen = strlen(level);
    double now = jr_now();

    if (l->lines++ == 0)
        l->at = now;
    /* a line over the cap alone keeps the start of it that fits, cut:
     * shorter in proportion until it does */
    for (;;) {
        encode(l, now, level, llen, s, cut, n);
        len = l->buf.len - from;
        if (whole == 0)
            whole = len;
        if (l->buf.oom || len <= max)
            break;
        l->buf.len = from;
        if (cut == 0)           /* not even an empty line fits */
            break;
        next = (size_t)((double)cut * (double)max / (double)len);
        if (next >= cut)
            next = cut - 1;
        if (next == 0)
            break;
        cut = char_cut(s, n, next);
    }
    if (l->buf.oom || l->buf.len == from) {
        l->dropped_lines++;
        l->dropped_bytes += (long long)whole;
        l->buf.len = from;
        l->buf.oom = 0;
        return;
    }
    while (l->buf.len - l->start > max)
        drop_first(l);
    if (l->start > max) {       /* the dropped ones take more than kept */
        memmove(l->buf.p, l->buf.p + l->start, l->buf.len - l->start);
        l->buf.len -= l->start;
        l->start = 0;
    }
}

/* How many bytes at the end of s[0..n) begin a UTF-8 character that
 * does not end there (0 to 3). */
static size_t
open_char(const char *s, size_t n)
{
    size_t k;
    unsigned char c;

    for (k = 1; k <= 3 && k <= n; k++) {
        c = (unsigned char)s[n - k];
        if ((c & 0xC0) != 0x80)
            return c >= 0xC0 && (c >= 0xF0 ? 4u : c >= 0xE0 ? 3u : 2u) > k ?
                   k : 0;
    }
    return 0;
}

void
jr_joblog_write(jr_joblog *l, int stream, const char *s, size_t n,
                size_t max)
{
    jr_buf *p = &l->part[stream];
    const char *level = stream == JR_JOBLOG_STDERR ? "stderr" : "stdout";
    size_t room, open;

    while (n > 0) {
        const char *nl = memchr(s, '\n', n);
        size_t take = nl ? (size_t)(nl - s) : n;

        room = JR_JOBLOG_LINE - p->len;
        if (take > room || (take == room && nl == NULL)) {
            /* a long line goes in pieces, a character not cut: its
             * first bytes begin the next piece */
            jr_buf_put(p, s, room);
            open = open_char(p->p, p->len);
            jr_joblog_add(l, level, p->p, p->len - open, max);
            if (open > 0)
                memmove(p->p, p->p + p->len - open, open);
            p->len = open;
            s += room;
            n -= room;
            continue;
        }
        jr_buf_put(p, s, take);
        s += take;
        n -= take;
        if (nl == NULL)
            break;
        jr_joblog_add(l, level, p->p ? p->p : "", p->len, max);
        p->len = 0;
        s++;
        n--;
    }
}

const char *
jr_joblog_entry(jr_joblog *l, int attempt, size_t max)
{
    jr_buf *e = &l->entry;
    size_t body;
    char *o, *nl, *end;
    int k;

    for (k = 0; k < 2; k++)
        if (l->part[k].len > 0) {
            jr_joblog_add(l, k ? "stderr" : "stdout", l->part[k].p,
                          l->part[k].len, max);
            l->part[k].len = 0;
        }
    if (l->lines == 0)
        return NULL;
    jr_buf_reset(e);
    body = l->buf.len - l->start;
    if (reserve(e, body + 160) < 0)
        return NULL;
    /* the kept lines as they are, each one's '\n' the next one's ',' */
    o = e->p;
    memcpy(o, "{\"attempt\":", 11);
    o += 11;
    if (attempt < 0) {
        *o++ = '-';
        attempt = -attempt;
    }
    o += put_uint(o, (unsigned long long)attempt);
    memcpy(o, ",\"at\":", 6);
    o += 6;
    o += put_secs(l, o, l->at);
    memcpy(o, ",\"lines\":[", 10);
    o += 10;
    memcpy(o, l->buf.p + l->start, body);
    for (nl = o, end = o + body; (nl = memchr(nl, '\n', (size_t)(end - nl)));
         nl++)
        *nl = ',';
    o += body > 0 ? body - 1 : 0;      /* the last ',' goes */
    memcpy(o, "],\"dropped_lines\":", 18);
    o += 18;
    o += put_uint(o, (unsigned long long)l->dropped_lines);
    memcpy(o, ",\"dropped_bytes\":", 17);
    o += 17;
    o += put_uint(o, (unsigned long long)l->dropped_bytes);
    memcpy(o, "}", 2);                  /* and its NUL */
    e->len = (size_t)(o + 1 - e->p);
    return e->p;
}

/* What a run's buffers keep for the next run: a context kept idle (a
 * coroutine job's, many at once) holds no more than this each. */
#define KEEP_CAP 16384

static void
reset(jr_buf *b)
{
    if (b->cap > KEEP_CAP)
        jr_buf_free(b);
    jr_buf_reset(b);
}

void
jr_joblog_clear(jr_joblog *l)
{
    reset(&l->buf);
    reset(&l->part[0]);
    reset(&l->part[1]);
    reset(&l->entry);
    l->start = 0;
    l->lines = l->dropped_lines = 0;
    l->dropped_bytes = 0;
    l->at = 0;
    l->sec_len = 0;
}

void
jr_joblog_free(jr_joblog *l)
{
    jr_buf_free(&l->buf);
    jr_buf_free(&l->part[0]);
    jr_buf_free(&l->part[1]);
    jr_buf_free(&l->entry);
    memset(l, 0, sizeof *l);
}

int
jr_joblog_select(const char *logs, int attempt, jr_buf *out, jr_err *err)
{
    jr_jdoc doc = {0};
    int k, a, n = 0;

    jr_buf_reset(out);
    jr_buf_put(out, "[", 1);
    if (logs != NULL && jr_jdoc_parse(&doc, logs, strlen(logs), "logs",
                                      err) < 0)
        return -1;
    if (logs != NULL && doc.n[0].type != JR_JSON_ARRAY) {
        jr_jdoc_free(&doc);
        return jr_fail(err, JR_EINPUT, "logs: not an array");
    }
    for (k = logs ? doc.n[0].first : -1; k >= 0; k = doc.n[k].next) {
        if (doc.n[k].type != JR_JSON_OBJECT ||
            (a = jr_jdoc_get(&doc, k, "attempt")) < 0)
            continue;
        if (attempt > 0 && atoi(doc.n[a].at) != attempt)
            continue;
        if (n++ > 0)
            jr_buf_put(out, ",", 1);
        jr_buf_put(out, doc.n[k].at, doc.n[k].len);
    }
    jr_jdoc_free(&doc);
    jr_buf_put(out, "]", 2);    /* and its NUL */
    out->len--;
    if (out->oom)
        return jr_fail(err, JR_ENOMEM, "logs: out of memory");
    return n;
}
