/* joblog.c - one run's logs within their cap: lines encoded as JSON
 * objects when they come, the oldest dropped past the cap (the tail is
 * kept), compacted when the dropped ones take more room than the cap. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/joblog.h"
#include "base/jsondom.h"
#include "base/jsontext.h"

/* Appends s[0..n) as a JSON string's contents: NUL and bytes that are
 * not UTF-8 as U+FFFD (PostgreSQL's jsonb refuses \u0000). */
static void
put_escaped(jr_buf *b, const char *s, size_t n)
{
    char out[6];
    size_t k, used;

    for (; n > 0; s += used, n -= used) {
        for (used = 0; used < n && (unsigned char)s[used] >= 0x20 &&
             (unsigned char)s[used] < 0x7f && s[used] != '"' &&
             s[used] != '\\'; used++)
            ;
        if (used > 0) {         /* plain ASCII, as it is */
            jr_buf_put(b, s, used);
            continue;
        }
        if (*s == '\0') {
            used = 1;
            jr_buf_put(b, JR_JSONTEXT_BADBYTE, 6);
        } else if ((k = jr_jsontext_escape_char(s, n, out, &used)) == 0) {
            used = 1;
            jr_buf_put(b, JR_JSONTEXT_BADBYTE, 6);
        } else {
            jr_buf_put(b, out, k);
        }
    }
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

/* Writes epoch seconds t with 3 decimals into out (32 bytes) without
 * printf's floating point, a line's cost. Returns the length. */
static size_t
put_secs(char *out, double t)
{
    long long ms = (long long)(t * 1000 + 0.5);
    char tmp[24];
    size_t n = 0, k = 0;

    if (ms < 0)
        ms = 0;
    do {
        tmp[k++] = (char)('0' + ms % 10);
        ms /= 10;
        if (k == 3)
            tmp[k++] = '.';
    } while (ms > 0 || k < 5);
    while (k > 0)
        out[n++] = tmp[--k];
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

/* Appends the line of level, its text s[0..cut) of n ("[line cut]"
 * after it when cut < n), at time now. */
static void
encode(jr_buf *b, double now, const char *level, const char *s, size_t cut,
       size_t n)
{
    char head[96];
    size_t k;

    memcpy(head, "{\"at\":", 6);
    k = 6 + put_secs(head + 6, now);
    memcpy(head + k, ",\"level\":\"", 10);
    k += 10;
    memcpy(head + k, level, strlen(level));     /* a literal, < 8 bytes */
    k += strlen(level);
    memcpy(head + k, "\",\"msg\":\"", 9);
    k += 9;
    jr_buf_put(b, head, k);
    put_escaped(b, s, cut);
    if (cut < n)
        jr_buf_put(b, " [line cut]", 11);
    jr_buf_put(b, "\"}\n", 3);
}

void
jr_joblog_add(jr_joblog *l, const char *level, const char *s, size_t n,
              size_t max)
{
    size_t from = l->buf.len, cut = char_cut(s, n, JR_JOBLOG_LINE), len;
    size_t whole = 0, next;
    double now = jr_now();

    if (l->lines++ == 0)
        l->at = now;
    /* a line over the cap alone keeps the start of it that fits, cut:
     * shorter in proportion until it does */
    for (;;) {
        encode(&l->buf, now, level, s, cut, n);
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
    char num[160];
    size_t i;
    int k, first = 1;

    for (k = 0; k < 2; k++)
        if (l->part[k].len > 0) {
            jr_joblog_add(l, k ? "stderr" : "stdout", l->part[k].p,
                          l->part[k].len, max);
            l->part[k].len = 0;
        }
    if (l->lines == 0)
        return NULL;
    jr_buf_reset(e);
    k = snprintf(num, sizeof num, "{\"attempt\":%d,\"at\":%.3f,\"lines\":[",
                 attempt, l->at);
    jr_buf_put(e, num, (size_t)k);
    for (i = l->start; i < l->buf.len; i++) {
        const char *nl = memchr(l->buf.p + i, '\n', l->buf.len - i);
        size_t end = nl ? (size_t)(nl - l->buf.p) : l->buf.len;
        if (!first)
            jr_buf_put(e, ",", 1);
        first = 0;
        jr_buf_put(e, l->buf.p + i, end - i);
        i = end;
    }
    k = snprintf(num, sizeof num, "],\"dropped_lines\":%ld,"
                 "\"dropped_bytes\":%lld}", l->dropped_lines,
                 l->dropped_bytes);
    jr_buf_put(e, num, (size_t)k + 1);  /* and its NUL */
    return e->oom ? NULL : e->p;
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
