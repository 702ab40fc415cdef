/* joblogjson.c - a run's entry where it is stored: its framing checked
 * (the master's look at a worker's), its JSON written (the backends', in
 * the statement that stores it: a line's text made from its pieces, each
 * byte escaped), and the runs of a job's stored logs picked by attempt.
 * Uses joblog_int.h, jsondom.h, jsontext.h. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/joblog_int.h"
#include "base/jsondom.h"
#include "base/jsontext.h"

/* Writes s[0..n) as a JSON string's contents at o (room for 6 bytes a
 * byte): NUL and bytes that are not UTF-8 as U+FFFD (PostgreSQL's jsonb
 * refuses \u0000). Returns the bytes written. */
static size_t
put_escaped(char *o, const char *s, size_t n)
{
    char *start = o;
    size_t k, used;

    while (n > 0) {
        used = jr_joblog_plain_run(s, n);
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
    *mn = jr_joblog_get16(p);
    *nf = (int)jr_joblog_get16(p + 2);
    if (*nf > JR_JOBLOG_FIELDS || n - at < *mn)
        return -1;
    *msg = p + at;
    at += *mn;
    for (i = 0; i < *nf; i++) {
        if (n - at < 4)
            return -1;
        f[i].kn = jr_joblog_get16(p + at);
        f[i].vn = jr_joblog_get16(p + at + 2);
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
 * for each field by name, a value quoted as jr_joblog_quoted() says. Returns its
 * length: plain_line's (the worker's), and whatever the pieces are, at
 * most the record's body less 4 (a field's 4 bytes of lengths pay for
 * its ' ', '=' and quotes). */
static size_t
fields_text(char *o, const char *msg, size_t mn, jr_joblog_field *f, int nf)
{
    char *start = o;
    int i;

    qsort(f, (size_t)nf, sizeof *f, jr_joblog_field_cmp);
    memcpy(o, msg, mn);
    o += mn;
    for (i = 0; i < nf; i++) {
        *o++ = ' ';
        memcpy(o, f[i].k, f[i].kn);
        o += f[i].kn;
        *o++ = '=';
        if (!jr_joblog_quoted(f[i].v, f[i].vn)) {
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

int
jr_joblog_check(const char *e, size_t n)
{
    jr_joblog_head h;
    jr_joblog_rec r;
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
    jr_joblog_head h;
    jr_joblog_rec r;
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
    if (jr_joblog_reserve(out, 160) < 0)
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
        if (jr_joblog_reserve(out, 64 + 6 * tn + 16) < 0) {
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
        memcpy(o, jr_joblog_levels[r.level], jr_joblog_level_len[r.level]);
        o += jr_joblog_level_len[r.level];
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
    if (jr_joblog_reserve(out, 80) < 0)
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
