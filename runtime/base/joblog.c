/* joblog.c - one run's logs within their cap: lines kept as records
 * (their text as it is) when they come, each one's size as JSON counted,
 * the oldest dropped past the cap (the tail is kept), compacted when the
 * dropped ones take more room than the cap; the entry's JSON written
 * where it is stored. */
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

/* A line as kept and sent: a record of REC bytes, then its text, or
 * (R_FIELDS) its pieces: u16 msg's length, u16 how many fields, msg,
 * then each field's u16 name length, u16 value length, name, value.
 * Native byte order: the worker and the master are one binary on one
 * machine. */
typedef struct rec {
    unsigned char level;        /* LEVELS' index */
    unsigned char flags;        /* R_CUT, R_FIELDS */
    uint16_t      len;          /* bytes after the record (its text: at
                                   most JR_JOBLOG_LINE) */
    uint32_t      enc;          /* bytes of its JSON object and '\n' */
    int64_t       ms;           /* epoch milliseconds */
} rec;
#define REC ((size_t)sizeof(rec))
#define R_CUT    1              /* " [line cut]" after the text */
#define R_FIELDS 2              /* its pieces, not its text */

static const char *const LEVELS[] = {"debug", "info", "warn", "error",
                                     "stdout", "stderr"};
static const unsigned char LEVEL_LEN[] = {5, 4, 4, 5, 6, 6};
#define NLEVELS 6

/* An entry's head, before its records. */
typedef struct head {
    uint32_t magic;             /* ENTRY_MAGIC */
    int32_t  attempt;
    int64_t  at;                /* epoch milliseconds of its first line */
    int64_t  dropped_lines;
    int64_t  dropped_bytes;
} head;
#define HEAD ((size_t)sizeof(head))
#define ENTRY_MAGIC 0x4c524a01u

/* The index of level in LEVELS ("debug" ... "stderr"), else info's. */
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

/* How many bytes s[0..n) takes escaped as put_escaped writes it. */
static size_t
escaped_len(const char *s, size_t n)
{
    size_t out = 0, k, used;
    char tmp[6];

    while (n > 0) {
        used = plain_run(s, n);
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
    return 6 + l->sec_len + 4 + 10 + LEVEL_LEN[level] + 9 +
           escaped_len(s, n) + (cut ? 11 : 0) + 3;
}

/* Drops the first kept line. */
static void
drop_first(jr_joblog *l)
{
    rec r;

    memcpy(&r, l->buf.p + l->start, REC);
    l->dropped_lines++;
    l->dropped_bytes += (long long)r.enc;
    l->kept -= r.enc;
    l->start += REC + r.len;
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

/* Writes epoch milliseconds ms as seconds with 3 decimals at out (32
 * bytes), without printf's floating point. Returns the length. */
static size_t
put_ms(char *out, long long ms)
{
    size_t n;
    int frac;

    if (ms < 0)
        ms = 0;
    frac = (int)(ms % 1000);
    n = put_uint(out, (unsigned long long)(ms / 1000));
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
    long long ms = now_ms();
    int lv = level_index(level);
    rec r;
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
    l->buf.len += REC + cut;
    l->kept += len;
    while (l->kept > max)
        drop_first(l);
    if (l->start > max) {       /* the dropped ones take more than kept */
        memmove(l->buf.p, l->buf.p + l->start, l->buf.len - l->start);
        l->buf.len -= l->start;
        l->start = 0;
    }
}

/* 1 if a plain value is quoted in its line: empty, or a space or '='
 * in it (jrlog.c's rule for any value). */
static int
quoted(const char *v, size_t n)
{
    return n == 0 || memchr(v, ' ', n) != NULL || memchr(v, '=', n) != NULL;
}

/* 1 for the bytes that make a value quoted: ' ' and '='. */
static const unsigned char quote_at[256] = {[' '] = 1, ['='] = 1};

/* 1 if s[0..n) is all bytes PLAIN holds as they are; *q set when it
 * must be quoted as a value (quoted()). A piece of a line is short:
 * one pass, a byte at a time, both told at once. */
static inline int
plain_piece(const char *s, size_t n, int *q)
{
    const unsigned char *u = (const unsigned char *)s;
    unsigned all = 1, eq = 0;
    size_t i;

    if (n > 32) {
        *q = quoted(s, n);
        return plain_run(s, n) == n;
    }
    for (i = 0; i < n; i++) {
        all &= plain[u[i]];
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

static size_t
get16(const char *p)
{
    uint16_t x;

    memcpy(&x, p, 2);
    return x;
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
    rec r;
    char *o;

    if (text < 0)
        return -1;
    for (i = 0; i < nf; i++)
        body += 4 + f[i].kn + f[i].vn;
    if (body > 65535)
        return -1;
    ms = now_ms();
    /* the text's bytes, each '"' escaped: as the text alone would be */
    if (ms / 1000 != l->sec || l->sec_len == 0) {
        l->sec = ms < 0 ? 0 : ms / 1000;
        l->sec_len = (unsigned char)digits((unsigned long long)l->sec);
    }
    len = 6 + l->sec_len + 4 + 10 + LEVEL_LEN[lv] + 9 + 3 + (size_t)text +
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
    l->buf.len += REC + body;
    l->kept += len;
    while (l->kept > max)
        drop_first(l);
    if (l->start > max) {       /* the dropped ones take more than kept */
        memmove(l->buf.p, l->buf.p + l->start, l->buf.len - l->start);
        l->buf.len -= l->start;
        l->start = 0;
    }
    return 0;
}

/* By name, bytes compared (a name may hold a NUL). */
static int
field_cmp(const void *a, const void *b)
{
    const jr_joblog_field *x = a, *y = b;
    int c = memcmp(x->k, y->k, x->kn < y->kn ? x->kn : y->kn);

    return c != 0 ? c : (x->kn > y->kn) - (x->kn < y->kn);
}

/* The pieces of a R_FIELDS record's body p[0..n): msg, *nf fields in f
 * (JR_JOBLOG_FIELDS), or -1 when they do not add up to n. */
static int
get_fields(const char *p, size_t n, const char **msg, size_t *mn,
           jr_joblog_field *f, int *nf)
{
    size_t at = 4;
    int i;

    if (n < 4)
        return -1;
    *mn = get16(p);
    *nf = (int)get16(p + 2);
    if (*nf > JR_JOBLOG_FIELDS || n - at < *mn)
        return -1;
    *msg = p + at;
    at += *mn;
    for (i = 0; i < *nf; i++) {
        if (n - at < 4)
            return -1;
        f[i].kn = get16(p + at);
        f[i].vn = get16(p + at + 2);
        at += 4;
        if (n - at < f[i].kn || n - at - f[i].kn < f[i].vn)
            return -1;
        f[i].k = p + at;
        f[i].v = p + at + f[i].kn;
        at += f[i].kn + f[i].vn;
    }
    return at == n ? 0 : -1;
}

/* Writes at o the text of a R_FIELDS record's line: msg, then " k=v"
 * for each field by name, a value quoted as quoted() says. Returns its
 * length: plain_line's (the worker's), and whatever the pieces are, at
 * most the record's body less 4 (a field's 4 bytes of lengths pay for
 * its ' ', '=' and quotes). */
static size_t
fields_text(char *o, const char *msg, size_t mn, jr_joblog_field *f, int nf)
{
    char *start = o;
    int i;

    qsort(f, (size_t)nf, sizeof *f, field_cmp);
    memcpy(o, msg, mn);
    o += mn;
    for (i = 0; i < nf; i++) {
        *o++ = ' ';
        memcpy(o, f[i].k, f[i].kn);
        o += f[i].kn;
        *o++ = '=';
        if (!quoted(f[i].v, f[i].vn)) {
            memcpy(o, f[i].v, f[i].vn);
            o += f[i].vn;
            continue;
        }
        *o++ = '"';
        memcpy(o, f[i].v, f[i].vn);
        o += f[i].vn;
        *o++ = '"';
    }
    return (size_t)(o - start);
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
    head h;
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
    if (reserve(e, HEAD + body) < 0)
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

int
jr_joblog_check(const char *e, size_t n)
{
    head h;
    rec r;
    size_t at = HEAD;

    if (e == NULL || n < HEAD)
        return -1;
    memcpy(&h, e, HEAD);
    if (h.magic != ENTRY_MAGIC || h.dropped_lines < 0 || h.dropped_bytes < 0)
        return -1;
    while (at < n) {
        if (n - at < REC)
            return -1;
        memcpy(&r, e + at, REC);
        if (r.level >= NLEVELS || r.flags > R_FIELDS ||
            (!(r.flags & R_FIELDS) && r.len > JR_JOBLOG_LINE) ||
            n - at - REC < r.len)
            return -1;
        at += REC + r.len;
    }
    return 0;
}

const char *
jr_joblog_json(const char *e, size_t n, jr_buf *out)
{
    jr_joblog_field f[JR_JOBLOG_FIELDS];
    const char *msg, *text;
    head h;
    rec r;
    size_t at = HEAD, mn, tn;
    char *o, *line = NULL;
    int first = 1, nf;

    jr_buf_reset(out);
    if (e == NULL)
        return NULL;
    if (n == 0 || e[0] == '{') {        /* JSON text already */
        if (n == 0)
            n = strlen(e);
        return jr_buf_put(out, e, n) < 0 || jr_buf_put(out, "", 1) < 0 ?
               NULL : out->p;
    }
    if (jr_joblog_check(e, n) < 0)
        return NULL;
    memcpy(&h, e, HEAD);
    if (reserve(out, 160) < 0)
        return NULL;
    o = out->p;
    memcpy(o, "{\"attempt\":", 11);
    o += 11;
    if (h.attempt < 0) {
        *o++ = '-';
        o += put_uint(o, 0ULL - (unsigned long long)(long long)h.attempt);
    } else {
        o += put_uint(o, (unsigned long long)h.attempt);
    }
    memcpy(o, ",\"at\":", 6);
    o += 6;
    o += put_ms(o, h.at);
    memcpy(o, ",\"lines\":[", 10);
    o += 10;
    out->len = (size_t)(o - out->p);
    while (at < n) {
        memcpy(&r, e + at, REC);
        text = e + at + REC;
        tn = r.len;
        if (r.flags & R_FIELDS) {       /* its text made now */
            if (get_fields(text, r.len, &msg, &mn, f, &nf) < 0 ||
                (line == NULL && (line = malloc(65536)) == NULL)) {
                free(line);
                return NULL;
            }
            tn = fields_text(line, msg, mn, f, nf);
            text = line;
        }
        if (reserve(out, 64 + 6 * tn + 16) < 0) {
            free(line);
            return NULL;
        }
        o = out->p + out->len;
        if (!first)
            *o++ = ',';
        first = 0;
        memcpy(o, "{\"at\":", 6);
        o += 6;
        o += put_ms(o, r.ms);
        memcpy(o, ",\"level\":\"", 10);
        o += 10;
        memcpy(o, LEVELS[r.level], LEVEL_LEN[r.level]);
        o += LEVEL_LEN[r.level];
        memcpy(o, "\",\"msg\":\"", 9);
        o += 9;
        o += put_escaped(o, text, tn);
        if (r.flags & R_CUT) {
            memcpy(o, " [line cut]", 11);
            o += 11;
        }
        memcpy(o, "\"}", 2);
        o += 2;
        out->len = (size_t)(o - out->p);
        at += REC + r.len;
    }
    free(line);
    if (reserve(out, 80) < 0)
        return NULL;
    o = out->p + out->len;
    memcpy(o, "],\"dropped_lines\":", 18);
    o += 18;
    o += put_uint(o, (unsigned long long)h.dropped_lines);
    memcpy(o, ",\"dropped_bytes\":", 17);
    o += 17;
    o += put_uint(o, (unsigned long long)h.dropped_bytes);
    memcpy(o, "}", 2);                  /* and its NUL */
    out->len = (size_t)(o + 1 - out->p);
    return out->p;
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
