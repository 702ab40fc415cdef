/* jsontext.c - JSON text without Lua: the payload check every push passes
 * (one rule for SQLite and PostgreSQL: what jsonb refuses, SQLite's
 * json_valid() would store), UTF-8 sequences, and the writer of stored
 * JSON text as valid UTF-8. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/jsontext.h"

size_t
jr_jsontext_utf8_len(const unsigned char *s, size_t n)
{
    size_t len, i;
    unsigned long cp;

    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        len = 2, cp = s[0] & 0x1f;
    else if (s[0] >= 0xe0 && s[0] <= 0xef)
        len = 3, cp = s[0] & 0x0f;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4)
        len = 4, cp = s[0] & 0x07;
    else
        return 0;
    if (n < len)
        return 0;
    for (i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    return len;
}

/* --- the check: a recursive descent over the text ---------------------- */

typedef struct scan {
    const unsigned char *s;
    size_t               n, i;  /* length, position */
    int                  depth;
    char                *why;
    size_t               size;
} scan;

static int value(scan *c);

/* PostgreSQL's numeric, which jsonb keeps numbers in: its digits before
 * and after the decimal point at most. */
#define NUM_INT_MAX  131072
#define NUM_FRAC_MAX 16383

static int bad(scan *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* "byte N: what" into c->why (N counts from 1); returns -1. */
static int
bad(scan *c, const char *fmt, ...)
{
    char what[160];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(c->why, c->size, "byte %zu: %s", c->i + 1, what);
    return -1;
}

static void
blanks(scan *c)
{
    while (c->i < c->n && (c->s[c->i] == ' ' || c->s[c->i] == '\t' ||
                           c->s[c->i] == '\n' || c->s[c->i] == '\r'))
        c->i++;
}

/* The 4 hex digits after "\u" at c->i; -1 if they are not. */
static long
hex4(scan *c)
{
    long v = 0;
    int k;

    if (c->n - c->i < 4)
        return -1;
    for (k = 0; k < 4; k++) {
        unsigned char h = c->s[c->i + k];
        v = v * 16 + (h >= '0' && h <= '9' ? h - '0' :
                      h >= 'a' && h <= 'f' ? h - 'a' + 10 :
                      h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1000000);
    }
    return v < 0 ? -1 : v;
}

/* A \u escape, c->i on the 'u': no NUL, surrogates in pairs. */
static int
uescape(scan *c)
{
    size_t at = c->i - 1;       /* the backslash, for the message */
    long v, lo = -1;

    c->i++;
    if ((v = hex4(c)) < 0)
        return c->i = at, bad(c, "\\u needs 4 hex digits");
    if (v == 0)
        return c->i = at, bad(c, "\\u0000 in a string: no backend stores "
                              "a NUL character");
    if (v >= 0xdc00 && v <= 0xdfff)
        return c->i = at, bad(c, "\\u%04lx: a low surrogate without a "
                              "high one", v);
    c->i += 4;
    if (v < 0xd800 || v > 0xdbff)
        return 0;
    if (c->n - c->i >= 6 && c->s[c->i] == '\\' && c->s[c->i + 1] == 'u') {
        c->i += 2;
        lo = hex4(c);
    }
    if (lo < 0xdc00 || lo > 0xdfff)
        return c->i = at, bad(c, "\\u%04lx: a high surrogate without a "
                              "low one", v);
    c->i += 4;
    return 0;
}

static int
string(scan *c)
{
    size_t k;

    for (c->i++; c->i < c->n; ) {
        unsigned char ch = c->s[c->i];
        if (ch == '"') {
            c->i++;
            return 0;
        }
        if (ch < 0x20)
            return bad(c, "control character 0x%02x in a string (escape "
                       "it)", ch);
        if (ch == '\\') {
            if (++c->i >= c->n)
                break;
            if (c->s[c->i] == 'u') {
                if (uescape(c) < 0)
                    return -1;
            } else if (strchr("\"\\/bfnrt", c->s[c->i]) != NULL &&
                       c->s[c->i] != '\0') {
                c->i++;
            } else if (c->s[c->i] > 0x20 && c->s[c->i] < 0x7f) {
                c->i--;
                return bad(c, "invalid escape '\\%c'", c->s[c->i + 1]);
            } else {
                c->i--;
                return bad(c, "invalid escape (byte 0x%02x after '\\')",
                           c->s[c->i + 1]);
            }
            continue;
        }
        if ((k = jr_jsontext_utf8_len(c->s + c->i, c->n - c->i)) == 0)
            return bad(c, "not valid UTF-8 (JSON text must be UTF-8)");
        c->i += k;
    }
    return bad(c, "unterminated string");
}

static size_t
digits(scan *c)
{
    size_t from = c->i;

    while (c->i < c->n && c->s[c->i] >= '0' && c->s[c->i] <= '9')
        c->i++;
    return c->i - from;
}

/* The exponent's digits at c->i, saturated: its sign is the caller's. */
static long
exponent(scan *c)
{
    long e = 0;

    for (; c->i < c->n && c->s[c->i] >= '0' && c->s[c->i] <= '9'; c->i++)
        if (e < 100000000)
            e = e * 10 + (c->s[c->i] - '0');
    return e;
}

/* A number; one that PostgreSQL's numeric cannot hold (jsonb keeps
 * numbers as numeric) is refused, as SQLite would store it. */
static int
number(scan *c)
{
    size_t from = c->i, ni, nf = 0, at;
    long e = 0, neg = 0;

    if (c->s[c->i] == '-')
        c->i++;
    at = c->i;
    if (c->i < c->n && c->s[c->i] == '0')
        c->i++, ni = 1;
    else if ((ni = digits(c)) == 0)
        return c->i = from, bad(c, "expected a value");
    if (c->i < c->n && c->s[c->i] == '.' && (c->i++, (nf = digits(c)) == 0))
        return bad(c, "expected a digit after '.'");
    if (c->i < c->n && (c->s[c->i] == 'e' || c->s[c->i] == 'E')) {
        c->i++;
        if (c->i < c->n && (c->s[c->i] == '+' || c->s[c->i] == '-'))
            neg = c->s[c->i++] == '-';
        if (c->i >= c->n || c->s[c->i] < '0' || c->s[c->i] > '9')
            return bad(c, "expected a digit in the exponent");
        e = exponent(c);
    }
    if ((long)ni + (neg ? -e : e) > NUM_INT_MAX ||
        (long)nf + (neg ? e : -e) > NUM_FRAC_MAX)
        return c->i = at, bad(c, "number out of range (at most %d digits "
                              "before the point and %d after)", NUM_INT_MAX,
                              NUM_FRAC_MAX);
    return 0;
}

/* An array or an object, c->i on its '[' or '{'. */
static int
container(scan *c)
{
    unsigned char close = c->s[c->i] == '[' ? ']' : '}';

    if (++c->depth > JR_JSONTEXT_DEPTH)
        return bad(c, "nested deeper than %d", JR_JSONTEXT_DEPTH);
    c->i++;
    blanks(c);
    if (c->i < c->n && c->s[c->i] == close) {
        c->i++;
        c->depth--;
        return 0;
    }
    for (;;) {
        if (close == '}') {
            if (c->i >= c->n || c->s[c->i] != '"')
                return bad(c, "expected a string key");
            if (string(c) < 0)
                return -1;
            blanks(c);
            if (c->i >= c->n || c->s[c->i] != ':')
                return bad(c, "expected ':'");
            c->i++;
        }
        if (value(c) < 0)
            return -1;
        blanks(c);
        if (c->i < c->n && c->s[c->i] == ',') {
            c->i++;
            blanks(c);
            continue;
        }
        if (c->i < c->n && c->s[c->i] == close)
            break;
        return bad(c, "expected ',' or '%c'", close);
    }
    c->i++;
    c->depth--;
    return 0;
}

static int
literal(scan *c, const char *word)
{
    size_t len = strlen(word);

    if (c->n - c->i < len || memcmp(c->s + c->i, word, len) != 0)
        return bad(c, "expected a value");
    c->i += len;
    return 0;
}

static int
value(scan *c)
{
    blanks(c);
    if (c->i >= c->n)
        return bad(c, "unexpected end of text (expected a value)");
    switch (c->s[c->i]) {
    case '{': case '[': return container(c);
    case '"':           return string(c);
    case 't':           return literal(c, "true");
    case 'f':           return literal(c, "false");
    case 'n':           return literal(c, "null");
    default:            return number(c);
    }
}

int
jr_jsontext_check(const char *text, size_t len, char *why, size_t size)
{
    scan c = {(const unsigned char *)text, len, 0, 0, why, size};

    if (value(&c) < 0)
        return -1;
    blanks(&c);
    if (c.i < c.n)
        return bad(&c, c.s[c.i] == '\0' ? "a NUL byte after the value" :
                   "text after the JSON value");
    return 0;
}

void
jr_jsontext_write(FILE *f, const char *s)
{
    size_t n, k;

    if (s == NULL) {
        fputs("null", f);
        return;
    }
    for (n = strlen(s); n > 0; s += k, n -= k) {
        for (k = 0; k < n && (unsigned char)s[k] < 0x7f; k++)
            ;
        if (k > 0) {
            fwrite(s, 1, k, f);
            continue;
        }
        if ((k = jr_jsontext_utf8_len((const unsigned char *)s, n)) == 0) {
            fputs("\\ufffd", f);
            k = 1;
        } else if (k == 1 || (k == 2 && (unsigned char)s[1] < 0xa0 &&
                              (unsigned char)s[0] == 0xc2)) {
            /* DEL, a C1 control: only in a string, where a terminal
             * would act on it raw */
            fprintf(f, "\\u%04x", k == 1 ? 0x7f : (unsigned char)s[1]);
        } else {
            fwrite(s, 1, k, f);
        }
    }
}

size_t
jr_jsontext_escape_char(const char *s, size_t n, char out[6], size_t *used)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char c = (unsigned char)s[0];
    size_t k;

    *used = 1;
    out[0] = '\\';
    if (c == '"' || c == '\\') {
        out[1] = (char)c;
        return 2;
    }
    if (c == '\n' || c == '\t' || c == '\r' || c == '\b' || c == '\f') {
        out[1] = c == '\n' ? 'n' : c == '\t' ? 't' : c == '\r' ? 'r' :
                 c == '\b' ? 'b' : 'f';
        return 2;
    }
    if (c < 0x20 || c == 0x7f) {
        memcpy(out + 1, "u00", 3);
        out[4] = hex[c >> 4];
        out[5] = hex[c & 15];
        return 6;
    }
    if ((k = jr_jsontext_utf8_len((const unsigned char *)s, n)) == 0)
        return 0;
    memcpy(out, s, k);
    *used = k;
    return k;
}
