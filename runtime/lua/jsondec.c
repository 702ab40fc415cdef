/* jsondec.c - the JSON decoder: one recursive descent over the text that
 * pushes each value as it reads it (no tree in between), errors returned
 * as "byte N: what is wrong" with the stack back as it was. It reads what
 * json.c writes: integers exact, null as the light userdata NULL, arrays
 * as plain 1..n tables (jsondec.h has the rules). */
#include <locale.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "lua/jsondec.h"
#include "base/jsontext.h"

#define EXACT_MAX 9007199254740992.0    /* 2^53: floats exact up to here */
#define NUM_BUF   64                    /* a number's text on the C stack */

typedef struct dec {
    lua_State           *L;
    const unsigned char *s;
    size_t               n, i;          /* length, position */
    int                  depth, max;        /* nesting, its limit */
    char                *msg;
    size_t               size;
} dec;

static int value(dec *d);

static int fail(dec *d, size_t at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* "byte N: what" into d->msg, N counting from 1 at at; returns -1. */
static int
fail(dec *d, size_t at, const char *fmt, ...)
{
    char what[160];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(d->msg, d->size, "byte %zu: %s", at + 1, what);
    return -1;
}

static void
blanks(dec *d)
{
    while (d->i < d->n && (d->s[d->i] == ' ' || d->s[d->i] == '\n' ||
                           d->s[d->i] == '\r' || d->s[d->i] == '\t'))
        d->i++;
}

/* --- strings ------------------------------------------------------------ */

/* The 4 hex digits at p (4 bytes there at least), or -1. */
static long
hex4(const unsigned char *p)
{
    long v = 0;
    int k;

    for (k = 0; k < 4; k++) {
        unsigned char h = p[k];
        v = v * 16 + (h >= '0' && h <= '9' ? h - '0' :
                      h >= 'a' && h <= 'f' ? h - 'a' + 10 :
                      h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1000000);
    }
    return v < 0 ? -1 : v;
}

/* Writes code point cp as UTF-8 at out; returns its length. */
static size_t
put_utf8(unsigned long cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* The \u escape at d->s[at] (its backslash; 'u' checked) into out: the
 * code point, a surrogate pair as one. *used gets the text it took (6 or
 * 12); returns the bytes written, or -1. */
static int
uescape(dec *d, size_t at, char *out, size_t *used)
{
    const unsigned char *p = d->s + at;
    long v, lo = -1;

    if (d->n - at < 6 || (v = hex4(p + 2)) < 0)
        return fail(d, at, "\\u needs 4 hex digits");
    *used = 6;
    if (v >= 0xdc00 && v <= 0xdfff)
        return fail(d, at, "\\u%04lx: a low surrogate without a high one", v);
    if (v < 0xd800 || v > 0xdbff)
        return (int)put_utf8((unsigned long)v, out);
    if (d->n - at >= 12 && p[6] == '\\' && p[7] == 'u')
        lo = hex4(p + 8);
    if (lo < 0xdc00 || lo > 0xdfff)
        return fail(d, at, "\\u%04lx: a high surrogate without a low one", v);
    *used = 12;
    return (int)put_utf8(0x10000 + (((unsigned long)v - 0xd800) << 10) +
                         ((unsigned long)lo - 0xdc00), out);
}

/* Decodes the escaped string text d->s[from..to) (to: its closing quote)
 * into a new string on top.  [-0, +(1|0), m] */
static int
unescape(dec *d, size_t from, size_t to)
{
    static const char plain[] = "\"\\/bfnrt", real[] = "\"\\/\b\f\n\r\t";
    luaL_Buffer b;
    char *out = luaL_buffinitsize(d->L, &b, to - from);  /* box? */
    size_t i = from, k = 0, used = 0;
    const char *e;
    int len;

    while (i < to) {
        if (d->s[i] != '\\') {
            out[k++] = (char)d->s[i++];
            continue;
        }
        if (d->s[i + 1] == 'u') {
            if ((len = uescape(d, i, out + k, &used)) < 0)
                return -1;
            k += (size_t)len;
            i += used;
        } else {                /* string() checked it is one of them */
            e = strchr(plain, d->s[i + 1]);
            out[k++] = real[e - plain];
            i += 2;
        }
    }
    luaL_pushresultsize(&b, k);                      /* s */
    return 0;
}

/* A string, d->i on its opening quote: pushed as it is when it has no
 * escape (the common case: one pass, one copy), else unescaped. The
 * first pass checks UTF-8 and control characters and finds the end.
 * [-0, +(1|0), m] */
static int
string(dec *d)
{
    const unsigned char *s = d->s;
    size_t from = ++d->i, i = from, n = d->n, k;
    int escaped = 0;

    while (i < n && s[i] != '"') {
        if (s[i] == '\\') {
            escaped = 1;
            if (i + 1 < n && (s[i + 1] == '\0' ||
                              strchr("\"\\/bfnrtu", s[i + 1]) == NULL))
                return fail(d, i, s[i + 1] > 0x20 && s[i + 1] < 0x7f ?
                            "invalid escape '\\%c'" : "invalid escape "
                            "(byte 0x%02x after '\\')", s[i + 1]);
            i += 2;                     /* \u's digits: unescape's */
        } else if (s[i] < 0x20) {
            return fail(d, i, "control character 0x%02x in a string "
                        "(escape it)", s[i]);
        } else if (s[i] < 0x80) {
            i++;
        } else if ((k = jr_jsontext_utf8_len(s + i, n - i)) == 0) {
            return fail(d, i, "not valid UTF-8 (JSON text must be UTF-8)");
        } else {
            i += k;
        }
    }
    if (i >= n)
        return fail(d, from - 1, "unterminated string");
    d->i = i + 1;
    if (!escaped) {
        lua_pushlstring(d->L, (const char *)s + from, i - from);   /* s */
        return 0;
    }
    return unescape(d, from, i);
}

/* --- numbers ------------------------------------------------------------ */

/* The float of the number text t[0..len) (checked JSON): strtod on a
 * NUL-terminated copy, with the locale's decimal point as Lua's own
 * reader does, in case a handler set LC_NUMERIC.  [-0, +0, m] */
static double
to_double(lua_State *L, const unsigned char *t, size_t len)
{
    char small[NUM_BUF], *p = small, point = localeconv()->decimal_point[0];
    char *dot;
    double v;

    if (len >= sizeof small)
        p = lua_newuserdatauv(L, len + 1, 0);        /* u */
    memcpy(p, t, len);
    p[len] = '\0';
    if (point != '.' && (dot = strchr(p, '.')) != NULL)
        *dot = point;
    v = strtod(p, NULL);
    if (p != small)
        lua_pop(L, 1);                               /* (nothing) */
    return v;
}

/* A number, d->i on its first byte: an integer literal within int64 is
 * pushed as the integer, beyond it as a float; one with a fraction or an
 * exponent as a float, or the integer when whole within +-2^53.
 * [-0, +(1|0), m] */
static int
number(dec *d)
{
    const unsigned char *s = d->s;
    size_t from = d->i, i = from, n = d->n;
    uint64_t u = 0;
    int neg = 0, over = 0, frac = 0;
    lua_Integer k;
    double v;

    if (s[i] == '-')
        neg = 1, i++;
    if (i < n && s[i] == '0') {
        i++;
    } else if (i < n && s[i] >= '1' && s[i] <= '9') {
        for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
            unsigned dg = s[i] - '0';
            if (u > (UINT64_MAX - dg) / 10)
                over = 1;
            else
                u = u * 10 + dg;
        }
    } else {
        return fail(d, from, "expected a value");
    }
    if (i < n && s[i] == '.') {
        frac = 1;
        if (++i >= n || s[i] < '0' || s[i] > '9')
            return fail(d, i, "expected a digit after '.'");
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        frac = 1;
        if (++i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        if (i >= n || s[i] < '0' || s[i] > '9')
            return fail(d, i, "expected a digit in the exponent");
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
    }
    d->i = i;
    if (!frac && !over && u <= (uint64_t)LUA_MAXINTEGER + neg) {
        /* -2^63's magnitude has no positive int64: written as such */
        k = u == (uint64_t)LUA_MAXINTEGER + 1 ? LUA_MININTEGER :
            neg ? -(lua_Integer)u : (lua_Integer)u;
        lua_pushinteger(d->L, k);                    /* k */
        return 0;
    }
    v = to_double(d->L, s + from, i - from);
    if (frac && v >= -EXACT_MAX && v <= EXACT_MAX &&
        lua_numbertointeger(v, &k) && (double)k == v)
        lua_pushinteger(d->L, k);                    /* k */
    else
        lua_pushnumber(d->L, v);                     /* v */
    return 0;
}

/* --- arrays, objects, values -------------------------------------------- */

/* An array or an object, d->i on its '[' or '{': a new table on top.
 * [-0, +(1|0), m] */
static int
container(dec *d)
{
    lua_State *L = d->L;
    unsigned char close = d->s[d->i] == '[' ? ']' : '}';
    lua_Integer next = 1;

    if (++d->depth > d->max)
        return fail(d, d->i, "nested deeper than %d", d->max);
    if (!lua_checkstack(L, 4))
        return fail(d, d->i, "nested too deep for the Lua stack");
    d->i++;
    lua_newtable(L);                                 /* t */
    blanks(d);
    if (d->i < d->n && d->s[d->i] == close) {
        d->i++;
        d->depth--;
        return 0;
    }
    for (;;) {
        if (close == '}') {
            if (d->i >= d->n || d->s[d->i] != '"')
                return fail(d, d->i, "expected a string key");
            if (string(d) < 0)                       /* t k */
                return -1;
            blanks(d);
            if (d->i >= d->n || d->s[d->i] != ':')
                return fail(d, d->i, "expected ':'");
            d->i++;
        }
        if (value(d) < 0)                            /* t [k] v */
            return -1;
        if (close == '}')
            lua_rawset(L, -3);                       /* t */
        else
            lua_rawseti(L, -2, next++);              /* t */
        blanks(d);
        if (d->i < d->n && d->s[d->i] == ',') {
            d->i++;
            blanks(d);
            continue;
        }
        if (d->i < d->n && d->s[d->i] == close)
            break;
        return fail(d, d->i, d->i < d->n ? "expected ',' or '%c'" :
                    "unexpected end of text (expected ',' or '%c')", close);
    }
    d->i++;
    d->depth--;
    return 0;
}

/* true, false or null, d->i on its first letter.  [-0, +(1|0), -] */
static int
literal(dec *d)
{
    static const char *const words[] = {"true", "false", "null"};
    int k = d->s[d->i] == 't' ? 0 : d->s[d->i] == 'f' ? 1 : 2;
    size_t len = strlen(words[k]);

    if (d->n - d->i < len || memcmp(d->s + d->i, words[k], len) != 0)
        return fail(d, d->i, "expected a value");
    d->i += len;
    if (k == 2)
        lua_pushlightuserdata(d->L, NULL);           /* null */
    else
        lua_pushboolean(d->L, k == 0);               /* b */
    return 0;
}

/* [-0, +(1|0), m] */
static int
value(dec *d)
{
    blanks(d);
    if (d->i >= d->n)
        return fail(d, d->i, "unexpected end of text (expected a value)");
    switch (d->s[d->i]) {
    case '{': case '[':     return container(d);
    case '"':               return string(d);
    case 't': case 'f':
    case 'n':               return literal(d);
    default:                return number(d);
    }
}

/* jr_json_decode with max as the nesting limit. */
static int
decode(lua_State *L, const char *s, size_t n, int max, char *msg,
       size_t size)
{
    dec d = {L, (const unsigned char *)s, n, 0, 0, max, msg, size};
    int top = lua_gettop(L);

    if (value(&d) == 0) {                            /* v */
        blanks(&d);
        if (d.i >= d.n)
            return 0;
        fail(&d, d.i, d.s[d.i] == '\0' ? "a NUL byte after the value" :
             "text after the JSON value");
    }
    lua_settop(L, top);                              /* (nothing) */
    return -1;
}

int
jr_json_decode(lua_State *L, const char *s, size_t n, char *msg,
               size_t size)
{
    return decode(L, s, n, JR_JSONTEXT_DEPTH, msg, size);
}

/* What jr_json_decode_safe passes to its protected call. */
typedef struct call {
    const char *s;
    size_t      n;
    char       *msg;
    size_t      size;
    int         rc;
} call;

/* jr_json_decode_safe's protected part: its call as a light userdata.
 * [-1, +(1|0), m] */
static int
decode_call(lua_State *L)                            /* c */
{
    call *c = lua_touserdata(L, 1);

    lua_pop(L, 1);                                   /* (nothing) */
    c->rc = decode(L, c->s, c->n, JR_JSONDEC_RUNNER_DEPTH, c->msg, c->size);
    return c->rc == 0;                               /* v? */
}

int
jr_json_decode_safe(lua_State *L, const char *s, size_t n, char *msg,
                    size_t size)
{
    call c = {s, n, msg, size, -1};

    if (!lua_checkstack(L, 3)) {
        snprintf(msg, size, "out of memory");
        return -1;
    }
    lua_pushcfunction(L, decode_call);               /* f */
    lua_pushlightuserdata(L, &c);                    /* f c */
    if (lua_pcall(L, 1, 1, 0) != LUA_OK) {           /* e */
        snprintf(msg, size, "%s", lua_type(L, -1) == LUA_TSTRING ?
                 lua_tostring(L, -1) : "out of memory");
        lua_pop(L, 1);                               /* (nothing) */
        return -1;
    }                                                /* v|nil */
    if (c.rc < 0)
        lua_pop(L, 1);                               /* (nothing) */
    return c.rc;
}
