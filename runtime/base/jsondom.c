/* jsondom.c - the JSON reader of jsondom.h: a recursive descent over the
 * text into a growable array of nodes. Owns the nodes; uses err.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsondom.h"
#include "base/jsontext.h"

/* A flow's payloads nest as deep as a push's, below the flow object, its
 * jobs array and a job (64 refused what every producer pushes). */
#define JR_JDOC_DEPTH (JR_JSONTEXT_DEPTH + 3)

typedef struct parser {
    jr_jdoc    *doc;
    const char *s, *p, *end;
    const char *what;
    jr_err     *err;
} parser;

static int
fail(parser *ps, const char *why)
{
    return jr_fail(ps->err, JR_EINPUT, "%s: invalid JSON at byte %zu: %s",
                   ps->what, (size_t)(ps->p - ps->s), why);
}

static void
skip_ws(parser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' ||
                               *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static int
node_new(parser *ps, int type)
{
    jr_jdoc *d = ps->doc;
    jr_jnode *grown;

    if (d->count == d->cap) {
        int cap = d->cap ? d->cap * 2 : 64;
        if ((grown = realloc(d->n, (size_t)cap * sizeof *grown)) == NULL)
            return jr_fail(ps->err, JR_ENOMEM, "%s: out of memory",
                           ps->what);
        d->n = grown;
        d->cap = cap;
    }
    d->n[d->count] = (jr_jnode){type, ps->p, 0, -1, -1, 0};
    return d->count++;
}

static int
scan_string(parser *ps)
{
    ps->p++;                                /* the opening quote */
    while (ps->p < ps->end && *ps->p != '"') {
        if ((unsigned char)*ps->p < 0x20)
            return fail(ps, "control character in a string");
        if (*ps->p == '\\' && ++ps->p >= ps->end)
            break;
        ps->p++;
    }
    if (ps->p >= ps->end)
        return fail(ps, "unterminated string");
    ps->p++;
    return 0;
}

static const char *
skip_digits(const char *s, const char *end)
{
    while (s < end && *s >= '0' && *s <= '9')
        s++;
    return s;
}

/* The length of the JSON number at p, by the grammar alone (its range is
 * the push check's), or 0: strtod on a 63-byte copy cut longer numbers
 * and took what JSON has not (0x10, 1., 01, -inf). */
static size_t
number_len(const char *p, const char *end)
{
    const char *s = p + (*p == '-');

    if (s < end && *s == '0')
        s++;
    else if (s < end && *s >= '1' && *s <= '9')
        s = skip_digits(s, end);
    else
        return 0;
    if (s < end && *s == '.') {
        if (++s >= end || *s < '0' || *s > '9')
            return 0;
        s = skip_digits(s, end);
    }
    if (s < end && (*s == 'e' || *s == 'E')) {
        if (++s < end && (*s == '+' || *s == '-'))
            s++;
        if (s >= end || *s < '0' || *s > '9')
            return 0;
        s = skip_digits(s, end);
    }
    return (size_t)(s - p);
}

static int
scan_literal(parser *ps, int *type)
{
    static const struct { const char *w; int t; } lit[] = {
        {"null", JR_JSON_NULL}, {"false", JR_JSON_FALSE},
        {"true", JR_JSON_TRUE}};
    size_t i, n;

    for (i = 0; i < 3; i++) {
        n = strlen(lit[i].w);
        if ((size_t)(ps->end - ps->p) >= n && !memcmp(ps->p, lit[i].w, n)) {
            ps->p += n;
            *type = lit[i].t;
            return 0;
        }
    }
    if (*ps->p == '-' || (*ps->p >= '0' && *ps->p <= '9')) {
        if ((n = number_len(ps->p, ps->end)) == 0)
            return fail(ps, "not a number");
        ps->p += n;
        *type = JR_JSON_NUMBER;
        return 0;
    }
    return fail(ps, "unexpected character");
}

static int value(parser *ps, int depth);

/* The children of an array or object node at, up to close. */
static int
members(parser *ps, int at, char close, int depth)
{
    int prev = -1, k, obj = close == '}';

    ps->p++;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        return 0;
    }
    for (;;) {
        skip_ws(ps);
        if (obj && ps->doc->n[at].count % 2 == 0 &&
            (ps->p >= ps->end || *ps->p != '"'))
            return fail(ps, "expected a key");
        if ((k = value(ps, depth + 1)) < 0)
            return -1;
        if (prev < 0)
            ps->doc->n[at].first = k;
        else
            ps->doc->n[prev].next = k;
        prev = k;
        ps->doc->n[at].count++;
        skip_ws(ps);
        if (obj && ps->doc->n[at].count % 2 == 1) {
            if (ps->p >= ps->end || *ps->p != ':')
                return fail(ps, "expected ':'");
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == close) {
            ps->p++;
            return 0;
        }
        return fail(ps, obj ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static int
value(parser *ps, int depth)
{
    int at, type = JR_JSON_NULL, rc;

    skip_ws(ps);
    if (ps->p >= ps->end)
        return fail(ps, "unexpected end");
    if (depth > JR_JDOC_DEPTH) {
        char why[48];
        snprintf(why, sizeof why, "nested deeper than %d", JR_JDOC_DEPTH);
        return fail(ps, why);
    }
    if (*ps->p == '{' || *ps->p == '[')
        type = *ps->p == '{' ? JR_JSON_OBJECT : JR_JSON_ARRAY;
    else if (*ps->p == '"')
        type = JR_JSON_STRING;
    if ((at = node_new(ps, type)) < 0)
        return -1;
    if (type == JR_JSON_OBJECT || type == JR_JSON_ARRAY)
        rc = members(ps, at, type == JR_JSON_OBJECT ? '}' : ']', depth);
    else if (type == JR_JSON_STRING)
        rc = scan_string(ps);
    else
        rc = scan_literal(ps, &ps->doc->n[at].type);
    if (rc < 0)
        return -1;
    ps->doc->n[at].len = (size_t)(ps->p - ps->doc->n[at].at);
    return at;
}

int
jr_jdoc_parse(jr_jdoc *doc, const char *text, size_t len, const char *what,
              jr_err *err)
{
    parser ps = {doc, text, text, text + len, what, err};

    memset(doc, 0, sizeof *doc);
    if (value(&ps, 0) < 0) {
        jr_jdoc_free(doc);
        return -1;
    }
    skip_ws(&ps);
    if (ps.p != ps.end) {
        jr_jdoc_free(doc);
        return fail(&ps, "text after the document");
    }
    return 0;
}

void
jr_jdoc_free(jr_jdoc *doc)
{
    free(doc->n);
    memset(doc, 0, sizeof *doc);
}

int
jr_jdoc_is(const jr_jdoc *doc, int s, const char *key)
{
    char *t = jr_jdoc_str(doc, s);
    int same = t != NULL && strcmp(t, key) == 0;

    free(t);
    return same;
}

int
jr_jdoc_get(const jr_jdoc *doc, int o, const char *key)
{
    int k;

    if (o < 0 || doc->n[o].type != JR_JSON_OBJECT)
        return -1;
    for (k = doc->n[o].first; k >= 0 && doc->n[k].next >= 0;
         k = doc->n[doc->n[k].next].next)
        if (jr_jdoc_is(doc, k, key))
            return doc->n[k].next;
    return -1;
}

/* Appends code point c as UTF-8 at *o. */
static void
put_utf8(char **o, unsigned c)
{
    char *p = *o;

    if (c < 0x80) {
        *p++ = (char)c;
    } else if (c < 0x800) {
        *p++ = (char)(0xC0 | (c >> 6));
        *p++ = (char)(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
        *p++ = (char)(0xE0 | (c >> 12));
        *p++ = (char)(0x80 | ((c >> 6) & 0x3F));
        *p++ = (char)(0x80 | (c & 0x3F));
    } else {
        *p++ = (char)(0xF0 | (c >> 18));
        *p++ = (char)(0x80 | ((c >> 12) & 0x3F));
        *p++ = (char)(0x80 | ((c >> 6) & 0x3F));
        *p++ = (char)(0x80 | (c & 0x3F));
    }
    *o = p;
}

char *
jr_jdoc_str(const jr_jdoc *doc, int s)
{
    const jr_jnode *n = &doc->n[s];
    const char *p = n->at + 1, *end = n->at + n->len - 1;
    char *out, *o;
    unsigned c;

    if (n->type != JR_JSON_STRING || (out = malloc(n->len + 4)) == NULL)
        return NULL;
    for (o = out; p < end; p++) {
        if (*p != '\\') {
            *o++ = *p;
            continue;
        }
        switch (*++p) {
        case 'n': *o++ = '\n'; break;
        case 't': *o++ = '\t'; break;
        case 'r': *o++ = '\r'; break;
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'u':
            c = end - p > 4 ? (unsigned)strtoul((char[5]){p[1], p[2], p[3],
                                                p[4], 0}, NULL, 16) : '?';
            p += end - p > 4 ? 4 : 0;
            put_utf8(&o, c);
            break;
        default: *o++ = *p; break;
        }
    }
    *o = '\0';
    return out;
}
