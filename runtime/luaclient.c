/* luaclient.c - require "jobrunner" outside the runner: the producer
 * library (jobrunner.h) as a Lua 5.4 C module, built as build/jobrunner.so
 * without liblua (the interpreter provides it). Owns a jobrunner.client
 * box per handle and the JSON encoder for payload tables. Inside handlers
 * the runner installs its own "jobrunner" module (jrlib.c) instead.
 *
 *   local jr = require "jobrunner"
 *   local q = assert(jr.open("sqlite:jobs.db"))
 *   local id = assert(q:push("send_email", { to = "a@b" }, { run_in = 60 }))
 *
 * Payload encoding (lua-cjson's conventions, with exact integers):
 *   - nil is {}; a table with no keys is {} (wrap it in jr.array() for []);
 *   - keys 1..n are an array (holes become null, as cjson, unless the array
 *     is excessively sparse); string keys are an object, keys sorted;
 *   - integers are written exactly (math.maxinteger stays
 *     9223372036854775807), floats with the fewest digits that read back
 *     the same; NaN and infinities are errors;
 *   - jr.null (the same light userdata as cjson.null) is null;
 *   - functions, userdata, threads, cyclic tables, keys that are neither
 *     strings nor array indexes, a table mixing both, and strings that are
 *     not UTF-8 are errors: nil, "payload.path: what is wrong".
 * Tables are read raw: metamethods (__index, __pairs) are not consulted. */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "jobrunner.h"

#define JR_CLIENT_MT "jobrunner.client"
#define JR_ARRAY_MT  "jobrunner.array"  /* marks a table as a JSON array */
#define JR_BUF_MT    "jobrunner.buffer" /* a C buffer the GC frees */
#define MAX_DEPTH    1000               /* as cjson's encode_max_depth */
#define SPARSE_RATIO 2                  /* as cjson's encode_sparse_array */
#define SPARSE_SAFE  10

LUAMOD_API int luaopen_jobrunner(lua_State *L);

/* --- C buffers owned by the Lua GC ------------------------------------ */

/* Growable bytes in a userdata whose __gc frees them, so that an error
 * raised while one is on the stack leaks nothing. */
typedef struct lbuf {
    char   *p;                  /* malloc'd, or NULL */
    size_t  n;                  /* bytes used */
    size_t  cap;                /* bytes allocated */
} lbuf;

static int
lbuf_gc(lua_State *L)
{
    lbuf *b = luaL_checkudata(L, 1, JR_BUF_MT);

    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
    return 0;
}

/* Pushes a new empty buffer.  [-0, +1, m] */
static lbuf *
lbuf_new(lua_State *L)
{
    lbuf *b = lua_newuserdatauv(L, sizeof *b, 0);    /* b */

    memset(b, 0, sizeof *b);
    luaL_setmetatable(L, JR_BUF_MT);                 /* b */
    return b;
}

/* Appends n bytes; -1 when out of memory. Never raises. */
static int
lbuf_put(lbuf *b, const void *s, size_t n)
{
    if (b->cap - b->n < n) {
        size_t cap = b->cap ? b->cap : 256;
        char *p;
        while (cap - b->n < n)
            cap *= 2;
        if ((p = realloc(b->p, cap)) == NULL)
            return -1;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    return 0;
}

/* --- the JSON encoder ---------------------------------------------------- */

/* One encoding. Functions return -1 with msg set instead of raising, so
 * the caller can return nil, msg. */
typedef struct enc {
    lbuf   *b;                  /* output, on the Lua stack */
    int     seen;               /* stack index: tables being encoded */
    int     depth;              /* nesting of the table being encoded */
    char    path[256];          /* where we are: payload.items[2].id */
    size_t  plen;               /* strlen(path) */
    char    msg[400];           /* the failure */
} enc;

static int enc_value(lua_State *L, enc *e, int idx);

static int enc_fail(enc *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Writes "path: message" into e->msg; returns -1. */
static int
enc_fail(enc *e, const char *fmt, ...)
{
    char what[300];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(e->msg, sizeof e->msg, "%.120s: %.270s", e->path, what);
    return -1;
}

static int
enc_put(enc *e, const char *s, size_t n)
{
    if (lbuf_put(e->b, s, n) < 0)
        return enc_fail(e, "out of memory");
    return 0;
}

#define enc_lit(e, s) enc_put((e), (s), sizeof(s) - 1)

/* Appends ".key" or "[i]" to the path (truncated past its size); returns
 * the old length, to restore. */
static size_t
path_push(enc *e, const char *key, long long index)
{
    size_t old = e->plen;
    int n;

    if (key != NULL)
        n = snprintf(e->path + old, sizeof e->path - old, ".%.64s", key);
    else
        n = snprintf(e->path + old, sizeof e->path - old, "[%lld]", index);
    if (n > 0)
        e->plen = strlen(e->path);
    return old;
}

static void
path_pop(enc *e, size_t old)
{
    e->path[old] = '\0';
    e->plen = old;
}

/* Length of the UTF-8 sequence at s (n bytes left), or 0 if invalid:
 * overlong forms, surrogates and code points past U+10FFFF included. */
static size_t
utf8_len(const unsigned char *s, size_t n)
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

/* Appends s as a JSON string literal. */
static int
enc_string(enc *e, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t i = 0, k;

    if (enc_lit(e, "\"") < 0)
        return -1;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
        if (c == '"' || c == '\\') {
            esc[1] = (char)c;
            k = 2;
        } else if (c == '\n' || c == '\t' || c == '\r' || c == '\b' ||
                   c == '\f') {
            esc[1] = c == '\n' ? 'n' : c == '\t' ? 't' : c == '\r' ? 'r' :
                     c == '\b' ? 'b' : 'f';
            k = 2;
        } else if (c < 0x20 || c == 0x7f) {
            k = 6;
        } else if ((k = utf8_len((const unsigned char *)s + i, n - i)) == 0) {
            return enc_fail(e, "string is not valid UTF-8 (byte %zu); "
                            "JSON text must be UTF-8", i + 1);
        } else {
            if (enc_put(e, s + i, k) < 0)
                return -1;
            i += k;
            continue;
        }
        if (enc_put(e, esc, k) < 0)
            return -1;
        i++;
    }
    return enc_lit(e, "\"");
}

/* Appends the number at idx: integers exactly, floats with the fewest of
 * 15..17 significant digits that read back the same. */
static int
enc_number(lua_State *L, enc *e, int idx)
{
    char s[64];
    int n, prec;

    if (lua_isinteger(L, idx)) {
        n = snprintf(s, sizeof s, LUA_INTEGER_FMT, lua_tointeger(L, idx));
    } else {
        double d = (double)lua_tonumber(L, idx);
        if (!isfinite(d))
            return enc_fail(e, "cannot encode %s: JSON has no NaN or "
                            "infinity", d != d ? "NaN" : "an infinity");
        for (prec = 15; prec < 17; prec++) {
            snprintf(s, sizeof s, "%.*g", prec, d);
            if (strtod(s, NULL) == d)
                break;
        }
        n = snprintf(s, sizeof s, "%.*g", prec, d);
    }
    return enc_put(e, s, (size_t)n);
}

/* What keys the table at idx has. */
typedef struct shape {
    lua_Integer count;          /* keys */
    lua_Integer max;            /* largest positive integer key */
    lua_Integer nint;           /* positive integer keys */
    lua_Integer nstr;           /* string keys */
    const char *strkey;         /* one of them, for messages */
} shape;

/* Classifies the keys of the table at idx; a key that is neither a string
 * nor a positive integer is an error.  [-0, +0, m] */
static int
table_shape(lua_State *L, enc *e, int idx, shape *s)
{
    int top = lua_gettop(L);

    memset(s, 0, sizeof *s);
    lua_pushnil(L);                                  /* nil */
    while (lua_next(L, idx)) {                       /* k v */
        lua_pop(L, 1);                               /* k */
        s->count++;
        if (lua_type(L, -1) == LUA_TSTRING) {
            s->nstr++;
            s->strkey = lua_tostring(L, -1);         /* anchored by t */
        } else if (lua_isinteger(L, -1) && lua_tointeger(L, -1) > 0) {
            s->nint++;
            if (lua_tointeger(L, -1) > s->max)
                s->max = lua_tointeger(L, -1);
        } else {
            int plain = lua_type(L, -1) == LUA_TNUMBER ||
                        lua_type(L, -1) == LUA_TBOOLEAN;
            const char *what = plain ? luaL_tolstring(L, -1, NULL) :
                               luaL_typename(L, -1);  /* k what? */
            enc_fail(e, "cannot encode key %s%s: keys must be strings (an "
                     "object) or 1..n (an array)", plain ? "" : "of type ",
                     what);
            lua_settop(L, top);                      /* (nothing) */
            return -1;
        }
    }                                                /* (nothing) */
    if (s->nstr > 0 && s->nint > 0)
        return enc_fail(e, "table mixes string keys and array indexes "
                        "('%.32s' and %lld): JSON needs an object or an "
                        "array", s->strkey, (long long)s->max);
    return 0;
}

/* Appends the array t[1..max], holes as null.  [-0, +0, m] */
static int
enc_array(lua_State *L, enc *e, int idx, lua_Integer max)
{
    lua_Integer i;
    size_t old;
    int rc = 0;

    if (enc_lit(e, "[") < 0)
        return -1;
    for (i = 1; i <= max && rc == 0; i++) {
        if (i > 1 && enc_lit(e, ",") < 0)
            return -1;
        lua_rawgeti(L, idx, i);                      /* v */
        old = path_push(e, NULL, (long long)i);
        rc = enc_value(L, e, lua_gettop(L));
        path_pop(e, old);
        lua_pop(L, 1);                               /* (nothing) */
    }
    return rc < 0 ? -1 : enc_lit(e, "]");
}

typedef struct skey {
    const char *s;              /* anchored by the table being encoded */
    size_t      n;
} skey;

static int
skey_cmp(const void *a, const void *b)
{
    const skey *x = a, *y = b;
    int c = memcmp(x->s, y->s, x->n < y->n ? x->n : y->n);

    return c ? c : (x->n > y->n) - (x->n < y->n);
}

/* Appends the object of the table at idx (all keys strings), keys sorted
 * so that equal tables give equal text.  [-0, +0, m] */
static int
enc_object(lua_State *L, enc *e, int idx, lua_Integer count)
{
    skey *keys = lua_newuserdatauv(L, (size_t)count * sizeof *keys, 0);
    lua_Integer i = 0;                               /* keys */
    size_t old;
    int rc = 0;

    lua_pushnil(L);                                  /* keys nil */
    while (lua_next(L, idx)) {                       /* keys k v */
        lua_pop(L, 1);                               /* keys k */
        keys[i].s = lua_tolstring(L, -1, &keys[i].n);
        i++;
    }                                                /* keys */
    qsort(keys, (size_t)count, sizeof *keys, skey_cmp);
    if (enc_lit(e, "{") < 0)
        rc = -1;
    for (i = 0; i < count && rc == 0; i++) {
        if ((i > 0 && enc_lit(e, ",") < 0) ||
            enc_string(e, keys[i].s, keys[i].n) < 0 || enc_lit(e, ":") < 0) {
            rc = -1;
            break;
        }
        lua_pushlstring(L, keys[i].s, keys[i].n);    /* keys k */
        lua_rawget(L, idx);                          /* keys v */
        old = path_push(e, keys[i].s, 0);
        rc = enc_value(L, e, lua_gettop(L));
        path_pop(e, old);
        lua_pop(L, 1);                               /* keys */
    }
    lua_pop(L, 1);                                   /* (nothing) */
    return rc < 0 ? -1 : enc_lit(e, "}");
}

/* Whether the table at idx was marked by jr.array().  [-0, +0, -] */
static int
is_marked_array(lua_State *L, int idx)
{
    int marked;

    if (!lua_getmetatable(L, idx))                   /* mt? */
        return 0;
    luaL_getmetatable(L, JR_ARRAY_MT);               /* mt amt */
    marked = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);                                   /* (nothing) */
    return marked;
}

/* Appends the table at idx, refusing cycles.  [-0, +0, m] */
static int
enc_table(lua_State *L, enc *e, int idx)
{
    shape s;
    int rc;

    if (e->depth >= MAX_DEPTH)
        return enc_fail(e, "tables nested more than %d deep", MAX_DEPTH);
    if (!lua_checkstack(L, 8))
        return enc_fail(e, "out of Lua stack space");
    lua_pushvalue(L, idx);                           /* t */
    if (lua_rawget(L, e->seen) != LUA_TNIL) {        /* seen[t] */
        lua_pop(L, 1);                               /* (nothing) */
        return enc_fail(e, "cyclic table: it contains itself, JSON cannot "
                        "express a cycle");
    }
    lua_pop(L, 1);                                   /* (nothing) */
    if (table_shape(L, e, idx, &s) < 0)
        return -1;
    if (s.nstr > 0 && is_marked_array(L, idx))
        return enc_fail(e, "table marked by jobrunner.array() has string "
                        "key '%.32s'", s.strkey);
    if (s.count == 0)
        return is_marked_array(L, idx) ? enc_lit(e, "[]") : enc_lit(e, "{}");
    if (s.nint > 0 && s.max > SPARSE_SAFE && s.max > s.nint * SPARSE_RATIO)
        return enc_fail(e, "excessively sparse array: index %lld with only "
                        "%lld element%s", (long long)s.max, (long long)s.nint,
                        s.nint == 1 ? "" : "s");
    lua_pushvalue(L, idx);                           /* t */
    lua_pushboolean(L, 1);                           /* t true */
    lua_rawset(L, e->seen);                          /* (nothing) */
    e->depth++;
    rc = s.nint > 0 ? enc_array(L, e, idx, s.max) :
                      enc_object(L, e, idx, s.count);
    e->depth--;
    lua_pushvalue(L, idx);                           /* t */
    lua_pushnil(L);                                  /* t nil */
    lua_rawset(L, e->seen);                          /* (nothing) */
    return rc;
}

/* Appends the value at idx (absolute).  [-0, +0, m] */
static int
enc_value(lua_State *L, enc *e, int idx)
{
    size_t n;
    const char *s;

    switch (lua_type(L, idx)) {
    case LUA_TNIL:
        return enc_lit(e, "null");
    case LUA_TBOOLEAN:
        return lua_toboolean(L, idx) ? enc_lit(e, "true") :
                                       enc_lit(e, "false");
    case LUA_TNUMBER:
        return enc_number(L, e, idx);
    case LUA_TSTRING:
        s = lua_tolstring(L, idx, &n);
        return enc_string(e, s, n);
    case LUA_TTABLE:
        return enc_table(L, e, idx);
    case LUA_TLIGHTUSERDATA:
        if (lua_touserdata(L, idx) == NULL)
            return enc_lit(e, "null");
        /* fall through */
    default:
        return enc_fail(e, "cannot encode a %s (JSON has tables, strings, "
                        "numbers, booleans and jobrunner.null)",
                        luaL_typename(L, idx));
    }
}

/* Encodes the payload at idx into b as JSON text and a NUL. A payload
 * must be nil ({}) or a table. Returns 0, or -1 with msg (size 400) set.
 * [-0, +0, m] */
static int
encode_payload(lua_State *L, int idx, lbuf *b, char *msg)
{
    enc e;
    int rc;

    memset(&e, 0, sizeof e);
    e.b = b;
    snprintf(e.path, sizeof e.path, "payload");
    e.plen = strlen(e.path);
    if (lua_isnoneornil(L, idx))
        rc = enc_lit(&e, "{}");
    else if (lua_type(L, idx) != LUA_TTABLE)
        rc = enc_fail(&e, "must be a table or nil, got %s",
                      luaL_typename(L, idx));
    else {
        lua_newtable(L);                             /* seen */
        e.seen = lua_gettop(L);
        rc = enc_table(L, &e, idx);
        lua_pop(L, 1);                               /* (nothing) */
    }
    if (rc == 0 && lbuf_put(b, "", 1) < 0)
        rc = enc_fail(&e, "out of memory");
    if (rc < 0)
        memcpy(msg, e.msg, sizeof e.msg);
    return rc;
}

/* --- options ------------------------------------------------------------- */

/* Raises unless the value on top is a number.  [-0, +0, v] */
static double
opt_number(lua_State *L, const char *fn, const char *key)
{
    if (lua_type(L, -1) != LUA_TNUMBER)
        luaL_error(L, "%s: option '%s' must be a number, got %s", fn, key,
                   luaL_typename(L, -1));
    return (double)lua_tonumber(L, -1);
}

/* Raises unless the value on top is an integer in [lo, hi].
 * [-0, +0, v] */
static lua_Integer
opt_int(lua_State *L, const char *fn, const char *key, lua_Integer lo,
        lua_Integer hi)
{
    lua_Integer v;

    if (!lua_isinteger(L, -1))
        luaL_error(L, "%s: option '%s' must be an integer, got %s", fn, key,
                   lua_type(L, -1) == LUA_TNUMBER ? "a float" :
                   luaL_typename(L, -1));
    v = lua_tointeger(L, -1);
    if (v < lo || v > hi)
        luaL_error(L, "%s: option '%s' is out of range: " LUA_INTEGER_FMT,
                   fn, key, v);
    return v;
}

/* Reads the job options table at idx (none or nil: defaults) into o;
 * unknown keys and wrong types raise. Strings stay anchored by the table.
 * [-0, +0, v] */
static void
read_push_opts(lua_State *L, int idx, const char *fn, jr_client_opts *o)
{
    static const jr_client_opts defaults = JR_CLIENT_OPTS_INIT;

    *o = defaults;
    if (lua_isnoneornil(L, idx))
        return;
    luaL_checktype(L, idx, LUA_TTABLE);
    lua_pushnil(L);                                  /* nil */
    while (lua_next(L, idx)) {                       /* k v */
        const char *k = lua_type(L, -2) == LUA_TSTRING ?
                        lua_tostring(L, -2) : "(not a string)";
        if (strcmp(k, "run_in") == 0)
            o->run_in = opt_number(L, fn, k);
        else if (strcmp(k, "run_at") == 0)
            o->run_at = opt_number(L, fn, k);
        else if (strcmp(k, "priority") == 0)
            o->priority = (int)opt_int(L, fn, k, INT_MIN, INT_MAX);
        else if (strcmp(k, "max_retries") == 0)
            o->max_retries = (int)opt_int(L, fn, k, 0, INT_MAX);
        else if (strcmp(k, "queue") == 0) {
            if (lua_type(L, -1) != LUA_TSTRING)
                luaL_error(L, "%s: option 'queue' must be a string, got %s",
                           fn, luaL_typename(L, -1));
            o->queue = lua_tostring(L, -1);
        } else
            luaL_error(L, "%s: unknown option '%s' (valid: run_in, run_at, "
                       "priority, queue, max_retries)", fn, k);
        lua_pop(L, 1);                               /* k */
    }                                                /* (nothing) */
}

/* --- the client ------------------------------------------------------------ */

typedef struct client_box {
    jr_client *c;               /* NULL once closed */
} client_box;

/* The open client at argument 1, or raises.  [-0, +0, v] */
static jr_client *
check_client(lua_State *L)
{
    client_box *box = luaL_checkudata(L, 1, JR_CLIENT_MT);

    if (box->c == NULL)
        luaL_error(L, "client is closed");
    return box->c;
}

/* Returns nil, msg.  [-0, +2, m] */
static int
fail(lua_State *L, const char *msg)
{
    lua_pushnil(L);                                  /* nil */
    lua_pushstring(L, msg);                          /* nil msg */
    return 2;
}

/* q:push(name, payload?, opts?) -> id | nil, msg */
static int
client_push(lua_State *L)                            /* q name payload opts */
{
    jr_client *c = check_client(L);
    const char *name = luaL_checkstring(L, 2);
    jr_client_opts o;
    char msg[400];
    int64_t id;
    lbuf *b;

    read_push_opts(L, 4, "push", &o);
    lua_settop(L, 4);                                /* q name payload opts */
    b = lbuf_new(L);                                 /* .. b */
    if (encode_payload(L, 3, b, msg) < 0)
        return fail(L, lua_pushfstring(L, "job '%s': %s", name, msg));
    if (jr_client_push(c, name, b->p, &o, &id) != JR_CLIENT_OK)
        return fail(L, jr_client_errmsg(c));
    lua_pushinteger(L, (lua_Integer)id);             /* .. b id */
    return 1;
}

/* Reads list[i] = {name, payload?, opts?} into j; its payload goes into b
 * at *off (a NUL-terminated string). Misuse raises; a payload that cannot
 * be encoded returns -1 with msg set.  [-0, +0, v] */
static int
read_job(lua_State *L, lua_Integer i, lbuf *b, size_t *off,
         jr_client_job *j, char *msg)
{
    char why[400];
    int item;

    if (lua_rawgeti(L, 2, i) != LUA_TTABLE)          /* .. item */
        luaL_error(L, "push_many: item %d must be a table {name, payload, "
                   "opts}, got %s", (int)i, luaL_typename(L, -1));
    item = lua_gettop(L);
    lua_rawgeti(L, item, 1);                         /* .. item name */
    if (lua_type(L, -1) != LUA_TSTRING)
        luaL_error(L, "push_many: item %d: name (item[1]) must be a string, "
                   "got %s", (int)i, luaL_typename(L, -1));
    j->name = lua_tostring(L, -1);                   /* anchored by item */
    lua_rawgeti(L, item, 3);                         /* .. item name opts */
    read_push_opts(L, lua_gettop(L), "push_many", &j->opts);
    lua_rawgeti(L, item, 2);                         /* .. item name opts p */
    *off = b->n;
    if (encode_payload(L, lua_gettop(L), b, why) < 0) {
        snprintf(msg, 400, "job %d (%.100s): %.270s", (int)i, j->name,
                 why);
        lua_pop(L, 4);                               /* .. */
        return -1;
    }
    lua_pop(L, 4);                                   /* .. */
    return 0;
}

/* q:push_many{ {name, payload?, opts?}, ... } -> {id, ...} | nil, msg.
 * All in one transaction: all or none. */
static int
client_push_many(lua_State *L)                       /* q list */
{
    jr_client *c = check_client(L);
    lua_Integer i, n;
    jr_client_job *jobs;
    size_t *offs;
    int64_t *ids;
    char msg[400];
    lbuf *b;

    luaL_checktype(L, 2, LUA_TTABLE);
    lua_settop(L, 2);                                /* q list */
    n = (lua_Integer)lua_rawlen(L, 2);
    if ((size_t)n > (size_t)1 << 24)
        return luaL_error(L, "push_many: %d jobs is too many in one "
                          "transaction", (int)n);
    jobs = lua_newuserdatauv(L, (size_t)n * sizeof *jobs + 1, 0);
    offs = lua_newuserdatauv(L, (size_t)n * sizeof *offs + 1, 0);
    ids = lua_newuserdatauv(L, (size_t)n * sizeof *ids + 1, 0);
    b = lbuf_new(L);                                 /* q list jobs offs ids b */
    for (i = 1; i <= n; i++)
        if (read_job(L, i, b, &offs[i - 1], &jobs[i - 1], msg) < 0)
            return fail(L, msg);
    for (i = 0; i < n; i++)                          /* b no longer moves */
        jobs[i].payload = b->p + offs[i];
    if (jr_client_push_many(c, jobs, (size_t)n, ids) != JR_CLIENT_OK)
        return fail(L, jr_client_errmsg(c));
    lua_createtable(L, (int)n, 0);                   /* .. b out */
    for (i = 0; i < n; i++) {
        lua_pushinteger(L, (lua_Integer)ids[i]);     /* .. b out id */
        lua_rawseti(L, -2, i + 1);                   /* .. b out */
    }
    return 1;
}

/* One stats row as client_stats collects it in a buffer: the counts, the
 * name's length, then the name's bytes. */
typedef struct stat_rec {
    jr_client_counts n;
    size_t           len;
} stat_rec;

/* Runs inside the database call, so it must not raise: it only copies. */
static int
stats_collect(const char *name, const jr_client_counts *n, void *arg)
{
    lbuf *b = arg;
    stat_rec r;

    r.n = *n;
    r.len = strlen(name);
    if (lbuf_put(b, &r, sizeof r) < 0 || lbuf_put(b, name, r.len) < 0) {
        b->n = (size_t)-1;      /* marks the failure for client_stats */
        return 1;
    }
    return 0;
}

/* Sets the five counts of n as fields of the table on top.  [-0, +0, m] */
static void
set_counts(lua_State *L, const jr_client_counts *n)
{
    lua_pushinteger(L, n->queued);                   /* t v */
    lua_setfield(L, -2, "queued");                   /* t */
    lua_pushinteger(L, n->ready);                    /* t v */
    lua_setfield(L, -2, "ready");                    /* t */
    lua_pushinteger(L, n->scheduled);                /* t v */
    lua_setfield(L, -2, "scheduled");                /* t */
    lua_pushinteger(L, n->running);                  /* t v */
    lua_setfield(L, -2, "running");                  /* t */
    lua_pushinteger(L, n->dead);                     /* t v */
    lua_setfield(L, -2, "dead");                     /* t */
}

/* q:stats() -> {queued, ready, scheduled, running, dead,
 *               names = {[name] = {queued, ready, ...}}} | nil, msg */
static int
client_stats(lua_State *L)                           /* q */
{
    jr_client *c = check_client(L);
    jr_client_counts total;
    size_t at = 0;
    lbuf *b = lbuf_new(L);                           /* q b */

    if (jr_client_stats(c, &total, stats_collect, b) != JR_CLIENT_OK)
        return fail(L, jr_client_errmsg(c));
    if (b->n == (size_t)-1)
        return fail(L, "stats: out of memory");
    lua_createtable(L, 0, 6);                        /* q b s */
    set_counts(L, &total);
    lua_newtable(L);                                 /* q b s names */
    while (at < b->n) {
        stat_rec r;
        memcpy(&r, b->p + at, sizeof r);
        at += sizeof r;
        lua_pushlstring(L, b->p + at, r.len);        /* q b s names name */
        at += r.len;
        lua_createtable(L, 0, 5);                    /* q b s names name t */
        set_counts(L, &r.n);
        lua_rawset(L, -3);                           /* q b s names */
    }
    lua_setfield(L, -2, "names");                    /* q b s */
    return 1;
}

/* q:close() -> true. Closing twice is harmless. */
static int
client_close(lua_State *L)                           /* q */
{
    client_box *box = luaL_checkudata(L, 1, JR_CLIENT_MT);

    jr_client_close(box->c);
    box->c = NULL;
    lua_pushboolean(L, 1);                           /* q true */
    return 1;
}

/* __gc and __close: closes unless already closed; never raises. */
static int
client_gc(lua_State *L)                              /* q */
{
    client_box *box = luaL_checkudata(L, 1, JR_CLIENT_MT);

    jr_client_close(box->c);
    box->c = NULL;
    return 0;
}

static int
client_tostring(lua_State *L)                        /* q */
{
    client_box *box = luaL_checkudata(L, 1, JR_CLIENT_MT);

    if (box->c == NULL)
        lua_pushliteral(L, "jobrunner.client (closed)");
    else
        lua_pushfstring(L, "jobrunner.client (%p)", (void *)box->c);
    return 1;                                        /* q s */
}

static const luaL_Reg client_methods[] = {
    {"push", client_push},
    {"push_many", client_push_many},
    {"stats", client_stats},
    {"close", client_close},
    {NULL, NULL}
};

static const luaL_Reg client_meta[] = {
    {"__gc", client_gc},
    {"__close", client_gc},
    {"__tostring", client_tostring},
    {NULL, NULL}
};

/* Creates the metatables: the client's, the array marker's and the
 * buffer's.  [-0, +0, m] */
static void
client_register(lua_State *L)
{
    luaL_newmetatable(L, JR_CLIENT_MT);              /* mt */
    luaL_setfuncs(L, client_meta, 0);                /* mt */
    luaL_newlib(L, client_methods);                  /* mt methods */
    lua_setfield(L, -2, "__index");                  /* mt */
    lua_pop(L, 1);                                   /* (nothing) */
    luaL_newmetatable(L, JR_ARRAY_MT);               /* amt */
    lua_pop(L, 1);                                   /* (nothing) */
    luaL_newmetatable(L, JR_BUF_MT);                 /* bmt */
    lua_pushcfunction(L, lbuf_gc);                   /* bmt gc */
    lua_setfield(L, -2, "__gc");                     /* bmt */
    lua_pop(L, 1);                                   /* (nothing) */
}

/* --- the module -------------------------------------------------------------- */

/* Reads jr.open's options table at idx into cfg.  [-0, +0, v] */
static void
read_open_opts(lua_State *L, int idx, jr_client_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    if (lua_isnoneornil(L, idx))
        return;
    luaL_checktype(L, idx, LUA_TTABLE);
    lua_pushnil(L);                                  /* nil */
    while (lua_next(L, idx)) {                       /* k v */
        const char *k = lua_type(L, -2) == LUA_TSTRING ?
                        lua_tostring(L, -2) : "(not a string)";
        if (strcmp(k, "schema") == 0) {
            if (lua_type(L, -1) != LUA_TSTRING)
                luaL_error(L, "open: option 'schema' must be a string, "
                           "got %s", luaL_typename(L, -1));
            cfg->schema = lua_tostring(L, -1);       /* anchored by opts */
        } else if (strcmp(k, "busy_timeout") == 0) {
            cfg->busy_timeout = opt_number(L, "open", k);
        } else if (strcmp(k, "max_payload") == 0) {
            cfg->max_payload = (size_t)opt_int(L, "open", k, 1,
                                               LUA_MAXINTEGER);
        } else {
            luaL_error(L, "open: unknown option '%s' (valid: schema, "
                       "busy_timeout, max_payload)", k);
        }
        lua_pop(L, 1);                               /* k */
    }                                                /* (nothing) */
}

/* jr.open(target?, opts?) -> client | nil, msg. target is a backend URL
 * or a config file ending in .lua; none: ./jobrunner.lua or
 * sqlite:jobrunner.db, as the jobrunner command. */
static int
jobrunner_open(lua_State *L)                         /* target opts */
{
    const char *target = luaL_optstring(L, 1, NULL);
    jr_client_config cfg;
    client_box *box;
    jr_client *c;

    read_open_opts(L, 2, &cfg);
    box = lua_newuserdatauv(L, sizeof *box, 0);      /* .. box */
    box->c = NULL;
    luaL_setmetatable(L, JR_CLIENT_MT);
    if (jr_client_open(&c, target, &cfg) != JR_CLIENT_OK) {
        lua_pushnil(L);                              /* .. box nil */
        lua_pushstring(L, jr_client_errmsg(c));      /* .. box nil msg */
        jr_client_close(c);
        return 2;
    }
    box->c = c;                                      /* the GC closes it */
    return 1;                                        /* .. box */
}

/* jr.array(t?) -> t, marked to encode as a JSON array even when empty. */
static int
jobrunner_array(lua_State *L)                        /* t? */
{
    if (lua_isnoneornil(L, 1)) {
        lua_settop(L, 0);                            /* (nothing) */
        lua_newtable(L);                             /* t */
    }
    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_setmetatable(L, JR_ARRAY_MT);               /* t */
    lua_settop(L, 1);
    return 1;
}

/* jr.encode(value) -> json | nil, msg: the payload encoder by itself, to
 * see what a push would store. */
static int
jobrunner_encode(lua_State *L)                       /* v */
{
    char msg[400];
    lbuf *b;

    lua_settop(L, 1);
    b = lbuf_new(L);                                 /* v b */
    if (encode_payload(L, 1, b, msg) < 0)
        return fail(L, msg);
    lua_pushlstring(L, b->p, b->n - 1);              /* v b json */
    return 1;
}

static const luaL_Reg jobrunner_funcs[] = {
    {"open", jobrunner_open},
    {"array", jobrunner_array},
    {"encode", jobrunner_encode},
    {NULL, NULL}
};

LUAMOD_API int
luaopen_jobrunner(lua_State *L)
{
    luaL_checkversion(L);
    client_register(L);
    luaL_newlib(L, jobrunner_funcs);                 /* M */
    lua_pushlightuserdata(L, NULL);                  /* M null */
    lua_setfield(L, -2, "null");                     /* M */
    lua_pushliteral(L, JR_CLIENT_VERSION);           /* M v */
    lua_setfield(L, -2, "_VERSION");                 /* M */
    return 1;
}
