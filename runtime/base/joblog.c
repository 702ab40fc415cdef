/* joblog.c - one run's logs within their cap: lines kept as records
 * (their text, or a plain line's pieces, as they are) when they come,
 * each one's size as JSON counted, the oldest dropped past the cap (the
 * tail is kept), compacted when the dropped ones take more room than the
 * cap; the run's entry made of them (joblogjson.c writes its JSON where
 * it is stored). Uses joblog_int.h, jsontext.h. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/joblog_int.h"
#include "base/jsontext.h"

int
jr_joblog_reserve(jr_buf *b, size_t n)
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

const char *const jr_joblog_levels[NLEVELS] = {"debug", "info", "warn",
                                               "error", "stdout", "stderr"};
const unsigned char jr_joblog_level_len[NLEVELS] = {5, 4, 4, 5, 6, 6};

const unsigned char jr_joblog_plain[256] = {
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
#define PLAIN(c) jr_joblog_plain[(unsigned char)(c)]

/* Eight bytes at a time while none of them is a control byte, DEL, '"',
 * '\\' or past ASCII (a line is mostly such text), then one at a time. */
size_t
jr_joblog_plain_run(const char *s, size_t n)
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

/* The index of level in jr_joblog_levels ("debug" ... "stderr"), else info's. */
static int
level_index(const char *level)
{
    switch (level[0]) {
    case 'd': return 0;
    case 'w': return 2;
    case 'e': return 3;
    case 's': return level[3] == 'e' ? 5 : 4;
    default:  return 1;
    }
}

/* The digits of v. */
static unsigned
digits(unsigned long long v)
{
    unsigned n = 1;

    while (v >= 10) {
        v /= 10;
        n++;
    }
    return n;
}

/* How many bytes s[0..n) takes escaped as joblogjson.c writes it. */
static size_t
escaped_len(const char *s, size_t n)
{
    size_t out = 0, k, used;
    char tmp[6];

    while (n > 0) {
        used = jr_joblog_plain_run(s, n);
        out += used;
        s += used;
        n -= used;
        if (n == 0)
            break;
        if (*s == '\0' ||
            (k = jr_jsontext_escape_char(s, n, tmp, &used)) == 0) {
            used = 1;
            k = 6;
        }
        out += k;
        s += used;
        n -= used;
    }
    return out;
}

/* The bytes of a line's JSON object and its '\n' (as encode writes it):
 * {"at":S.mmm,"level":"L","msg":"T"} with T escaped text, " [line cut]"
 * after it when cut. */
static size_t
line_len(jr_joblog *l, long long ms, int level, const char *s, size_t n,
         int cut)
{
    if (ms < 0)
        ms = 0;
    if (ms / 1000 != l->sec || l->sec_len == 0) {
        l->sec = ms / 1000;
        l->sec_len = (unsigned char)digits((unsigned long long)l->sec);
    }
    return 6 + l->sec_len + 4 + 10 + jr_joblog_level_len[level] + 9 +
           escaped_len(s, n) + (cut ? 11 : 0) + 3;
}

/* Drops the first kept line. */
static void
drop_first(jr_joblog *l)
{
    jr_joblog_rec r;

    memcpy(&r, l->buf.p + l->start, REC);
    l->dropped_lines++;
    l->dropped_bytes += (long long)r.enc;
    l->kept -= r.enc;
    l->start += REC + r.len;
}

/* Keeps the record just written at the end of l's buffer (bytes long, len
 * as JSON): drops the oldest while those kept take more than max, and
 * moves the kept ones to the start when the dropped ones take more. */
static void
keep(jr_joblog *l, size_t bytes, size_t len, size_t max)
{
    l->buf.len += bytes;
    l->kept += len;
    while (l->kept > max)
        drop_first(l);
    if (l->start > max) {       /* the dropped ones take more than kept */
        memmove(l->buf.p, l->buf.p + l->start, l->buf.len - l->start);
        l->buf.len -= l->start;
        l->start = 0;
    }
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

/* Now, in epoch milliseconds (rounded, as a line's "at" shows it). */
static long long
now_ms(void)
{
    return (long long)(jr_now() * 1000 + 0.5);
}

void
jr_joblog_add(jr_joblog *l, const char *level, const char *s, size_t n,
              size_t max)
{
    size_t cut = char_cut(s, n, JR_JOBLOG_LINE), len, whole = 0, next;
    long long ms = l->when > 0 ? l->when : now_ms();
    int lv = level_index(level);
    jr_joblog_rec r;
    char *o;

    if (l->lines++ == 0)
        l->at = ms;
    /* a line over the cap alone keeps the start of it that fits, cut:
     * shorter in proportion until it does */
    for (;;) {
        len = line_len(l, ms, lv, s, cut, cut < n);
        if (whole == 0)
            whole = len;
        if (len <= max)
            break;
        next = cut == 0 ? 0 : (size_t)((double)cut * (double)max /
                                       (double)len);
        if (next >= cut)
            next = cut - 1;
        if (cut == 0 || next == 0) {    /* not even an empty line fits */
            len = 0;
            break;
        }
        cut = char_cut(s, n, next);
    }
    if (len == 0 || (o = jr_buf_room(&l->buf, REC + cut)) == NULL) {
        l->dropped_lines++;
        l->dropped_bytes += (long long)whole;
        l->buf.oom = 0;
        return;
    }
    r.level = (unsigned char)lv;
    r.flags = cut < n ? R_CUT : 0;
    r.len = (uint16_t)cut;
    r.enc = (uint32_t)len;
    r.ms = ms;
    memcpy(o, &r, REC);
    memcpy(o + REC, s, cut);
    keep(l, REC + cut, len, max);
}

int
jr_joblog_quoted(const char *v, size_t n)
{
    return n == 0 || memchr(v, ' ', n) != NULL || memchr(v, '=', n) != NULL;
}

/* 1 for the bytes that make a value quoted: ' ' and '='. */
static const unsigned char quote_at[256] = {[' '] = 1, ['='] = 1};

/* 1 if s[0..n) is all bytes PLAIN holds as they are; *q set when it
 * must be quoted as a value (jr_joblog_quoted). A piece of a line is
 * short: one pass, a byte at a time, both told at once. */
static inline int
plain_piece(const char *s, size_t n, int *q)
{
    const unsigned char *u = (const unsigned char *)s;
    unsigned all = 1, eq = 0;
    size_t i;

    if (n > 32) {
        *q = jr_joblog_quoted(s, n);
        return jr_joblog_plain_run(s, n) == n;
    }
    for (i = 0; i < n; i++) {
        all &= jr_joblog_plain[u[i]];
        eq |= quote_at[u[i]];
    }
    *q = n == 0 || eq;
    return (int)all;
}

/* Copies a line's piece: a few bytes in place, the many by memcpy. */
static inline char *
put_piece(char *o, const char *s, size_t n)
{
    if (n > 16) {
        memcpy(o, s, n);
        return o + n;
    }
    while (n-- > 0)
        *o++ = *s++;
    return o;
}

static void
put16(char **o, size_t v)
{
    uint16_t x = (uint16_t)v;

    memcpy(*o, &x, 2);
    *o += 2;
}

/* The text's length of a line of msg[0..n) and fields f[0..nf), and in
 * *q how many of its values are quoted; -1 unless the line is plain:
 * every byte as PLAIN holds it, the text at most JR_JOBLOG_LINE. */
static long
plain_line(const char *msg, size_t n, const jr_joblog_field *f, int nf,
           size_t *q)
{
    size_t text = n;
    int i, vq, kq;

    *q = 0;
    if (nf > JR_JOBLOG_FIELDS || n > JR_JOBLOG_LINE ||
        !plain_piece(msg, n, &vq))
        return -1;
    for (i = 0; i < nf; i++) {
        if (f[i].kn > JR_JOBLOG_LINE || f[i].vn > JR_JOBLOG_LINE ||
            !plain_piece(f[i].k, f[i].kn, &kq) ||
            !plain_piece(f[i].v, f[i].vn, &vq))
            return -1;
        *q += (size_t)vq;
        text += 2 + f[i].kn + f[i].vn;
    }
    text += 2 * *q;             /* each quoted value's two '"' */
    return text > JR_JOBLOG_LINE ? -1 : (long)text;
}

int
jr_joblog_add_fields(jr_joblog *l, const char *level, const char *msg,
                     size_t n, const jr_joblog_field *f, int nf,
                     size_t max)
{
    size_t body = 4 + n, len, q;
    long text = plain_line(msg, n, f, nf, &q);
    long long ms;
    int lv = level_index(level), i;
    jr_joblog_rec r;
    char *o;

    if (text < 0)
        return -1;
    for (i = 0; i < nf; i++)
        body += 4 + f[i].kn + f[i].vn;
    if (body > 65535)
        return -1;
    ms = l->when > 0 ? l->when : now_ms();
    /* the text's bytes, each '"' escaped: as the text alone would be */
    if (ms / 1000 != l->sec || l->sec_len == 0) {
        l->sec = ms < 0 ? 0 : ms / 1000;
        l->sec_len = (unsigned char)digits((unsigned long long)l->sec);
    }
    len = 6 + l->sec_len + 4 + 10 + jr_joblog_level_len[lv] + 9 + 3 + (size_t)text +
          2 * q;
    if (len > max)
        return -1;
    if (l->lines++ == 0)
        l->at = ms;
    if ((o = jr_buf_room(&l->buf, REC + body)) == NULL) {
        l->dropped_lines++;
        l->dropped_bytes += (long long)len;
        l->buf.oom = 0;
        return 0;
    }
    r.level = (unsigned char)lv;
    r.flags = R_FIELDS;
    r.len = (uint16_t)body;
    r.enc = (uint32_t)len;
    r.ms = ms;
    memcpy(o, &r, REC);
    o += REC;
    put16(&o, n);
    put16(&o, (size_t)nf);
    o = put_piece(o, msg, n);
    for (i = 0; i < nf; i++) {
        put16(&o, f[i].kn);
        put16(&o, f[i].vn);
        o = put_piece(o, f[i].k, f[i].kn);
        o = put_piece(o, f[i].v, f[i].vn);
    }
    keep(l, REC + body, len, max);
    return 0;
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
jr_joblog_entry(jr_joblog *l, int attempt, size_t max, size_t *len)
{
    jr_buf *e = &l->entry;
    size_t body;
    jr_joblog_head h;
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
    if (jr_joblog_reserve(e, HEAD + body) < 0)
        return NULL;
    h.magic = ENTRY_MAGIC;
    h.attempt = attempt;
    h.at = l->at;
    h.dropped_lines = l->dropped_lines;
    h.dropped_bytes = l->dropped_bytes;
    memcpy(e->p, &h, HEAD);
    if (body > 0)
        memcpy(e->p + HEAD, l->buf.p + l->start, body);
    e->len = HEAD + body;
    *len = e->len;
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
    l->start = l->kept = 0;
    l->lines = l->dropped_lines = 0;
    l->dropped_bytes = 0;
    l->at = 0;
    l->sec_len = 0;
    l->when = 0;
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
