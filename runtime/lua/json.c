/* json.c - the payload encoder both "jobrunner" modules share: Lua values
 * to JSON text in GC-owned C buffers, errors returned as a message naming
 * the path (payload.items[2].id), never raised.
 *
 * Encoding (lua-cjson's conventions, with exact integers):
 *   - nil is {}; a table with no keys is {} (wrap it in jobrunner.array()
 *     for []);
 *   - keys 1..n are an array (holes become null, as cjson, unless the array
 *     is excessively sparse); string keys are an object, keys sorted;
 *   - integers are written exactly (math.maxinteger stays
 *     9223372036854775807), floats with the fewest digits that read back
 *     the same; NaN and infinities are errors;
 *   - jobrunner.null (the same light userdata as cjson.null) is null;
 *   - functions, userdata, threads, cyclic tables, keys that are neither
 *     strings nor array indexes, a table mixing both, and strings that are
 *     not UTF-8 or hold a NUL byte are errors: "payload.path: what is
 *     wrong".
 * Tables are read raw: metamethods (__index, __pairs) are not consulted. */
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "lua/json.h"
#include "lua/jsondec.h"
#include "base/jsontext.h"

#define MAX_DEPTH    1000               /* as cjson's encode_max_depth */
#define SPARSE_RATIO 2                  /* as cjson's encode_sparse_array */
#define SPARSE_SAFE  10

/* --- C buffers owned by the Lua GC ------------------------------------ */

static int
buf_gc(lua_State *L)                                 /* b */
{
    jr_buf_free(luaL_checkudata(L, 1, JR_JSON_BUF_MT));
    return 0;
}

/* The metatable is made on first use, so that neither module needs a
 * set-up step before its first buffer. */
jr_buf *
jr_json_buf_new(lua_State *L)
{
    jr_buf *b = lua_newuserdatauv(L, sizeof *b, 0);  /* b */

    memset(b, 0, sizeof *b);
    if (luaL_newmetatable(L, JR_JSON_BUF_MT)) {      /* b mt */
        lua_pushcfunction(L, buf_gc);                /* b mt gc */
        lua_setfield(L, -2, "__gc");                 /* b mt */
    }
    lua_setmetatable(L, -2);                         /* b */
    return b;
}

/* --- the JSON encoder ---------------------------------------------------- */

/* One encoding. Functions return -1 with msg set instead of raising, so
 * the caller can return nil, msg. */
typedef struct enc {
    jr_buf *b;                  /* output, on the Lua stack */
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
    if (jr_buf_put(e->b, s, n) < 0)
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

/* Appends s as a JSON string literal. */
static int
enc_string(enc *e, const char *s, size_t n)
{
    size_t i = 0, k, used;
    char out[6];

    if (enc_lit(e, "\"") < 0)
        return -1;
    while (i < n) {
        if (s[i] == '\0')      /* jsontext.h: no backend stores \u0000 */
            return enc_fail(e, "string holds a NUL byte (byte %zu): no "
                            "backend stores one", i + 1);
        if ((k = jr_jsontext_escape_char(s + i, n - i, out, &used)) == 0)
            return enc_fail(e, "string is not valid UTF-8 (byte %zu); "
                            "JSON text must be UTF-8", i + 1);
        if (enc_put(e, out, k) < 0)
            return -1;
        i += used;
    }
    return enc_lit(e, "\"");
}

/* Appends the number at idx: integers exactly, floats with the fewest of
 * 15..17 significant digits that read back the same, with a '.' whatever
 * LC_NUMERIC a handler set (printf writes the locale's point: 1.5 was
 * "1,5", and [1.5] the valid [1,5]). */
static int
enc_number(lua_State *L, enc *e, int idx)
{
    char s[64], point = localeconv()->decimal_point[0], *dot;
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
        if (point != '.' && (dot = strchr(s, point)) != NULL)
            *dot = '.';
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
    const char *s;              /* anchored by enc_object's list */
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
 * so that equal tables give equal text. The keys are taken at most count
 * and anchored in a list of their own: a finalizer run by the collector
 * between two steps may add keys to the table or remove some (a removed
 * key's string is not kept alive by the table).  [-0, +0, m] */
static int
enc_object(lua_State *L, enc *e, int idx, lua_Integer count)
{
    skey *keys = lua_newuserdatauv(L, (size_t)count * sizeof *keys, 0);
    lua_Integer i = 0;                               /* keys */
    size_t old;
    int rc = 0, top;

    lua_createtable(L, (int)count, 0);               /* keys list */
    top = lua_gettop(L);
    lua_pushnil(L);                                  /* keys list nil */
    while (i < count && lua_next(L, idx)) {          /* keys list k v */
        lua_pop(L, 1);                               /* keys list k */
        keys[i].s = lua_tolstring(L, -1, &keys[i].n);
        lua_pushvalue(L, -1);                        /* keys list k k */
        lua_rawseti(L, -3, ++i);                     /* keys list k */
    }                                                /* keys list [k] */
    lua_settop(L, top);                              /* keys list */
    count = i;
    qsort(keys, (size_t)count, sizeof *keys, skey_cmp);
    if (enc_lit(e, "{") < 0)
        rc = -1;
    for (i = 0; i < count && rc == 0; i++) {
        if ((i > 0 && enc_lit(e, ",") < 0) ||
            enc_string(e, keys[i].s, keys[i].n) < 0 || enc_lit(e, ":") < 0) {
            rc = -1;
            break;
        }
        lua_pushlstring(L, keys[i].s, keys[i].n);    /* keys list k */
        lua_rawget(L, idx);                          /* keys list v */
        old = path_push(e, keys[i].s, 0);
        rc = enc_value(L, e, lua_gettop(L));
        path_pop(e, old);
        lua_pop(L, 1);                               /* keys list */
    }
    lua_pop(L, 2);                                   /* (nothing) */
    return rc < 0 ? -1 : enc_lit(e, "}");
}

/* Whether the table at idx was marked by jobrunner.array().  [-0, +0, -] */
static int
is_marked_array(lua_State *L, int idx)
{
    int marked;

    if (!lua_getmetatable(L, idx))                   /* mt? */
        return 0;
    luaL_getmetatable(L, JR_JSON_ARRAY_MT);          /* mt amt */
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

/* --- the module's entry points ------------------------------------------ */

/* The encoder's message stays in e until the end, so that msg may be as
 * small as the caller likes. */
static int
encode_root(lua_State *L, int idx, jr_buf *b, const char *root, int payload,
            char *msg, size_t msgsize)
{
    enc e;
    int rc;

    idx = lua_absindex(L, idx);
    memset(&e, 0, sizeof e);
    e.b = b;
    snprintf(e.path, sizeof e.path, "%s", root);
    e.plen = strlen(e.path);
    if (payload && lua_isnoneornil(L, idx))
        rc = enc_lit(&e, "{}");
    else if (payload && lua_type(L, idx) != LUA_TTABLE)
        rc = enc_fail(&e, "must be a table or nil, got %s",
                      luaL_typename(L, idx));
    else {
        lua_newtable(L);                             /* seen */
        e.seen = lua_gettop(L);
        rc = enc_value(L, &e, idx);
        lua_pop(L, 1);                               /* (nothing) */
    }
    if (rc == 0 && jr_buf_put(b, "", 1) < 0)
        rc = enc_fail(&e, "out of memory");
    if (rc < 0 && msgsize > 0)
        snprintf(msg, msgsize, "%s", e.msg);
    return rc;
}

/* A payload: a table, or nil as {}. */
int
jr_json_encode(lua_State *L, int idx, jr_buf *b, char *msg,
               size_t msgsize)
{
    return encode_root(L, idx, b, "payload", 1, msg, msgsize);
}

/* A result: any value. */
int
jr_json_encode_value(lua_State *L, int idx, jr_buf *b, char *msg,
                     size_t msgsize)
{
    return encode_root(L, idx, b, "result", 0, msg, msgsize);
}

/* Names the key below the value on top, for jr_json_list and jr_json_map. */
static void
key_name(lua_State *L, char *odd, size_t size)
{
    if (lua_type(L, -2) == LUA_TSTRING)
        snprintf(odd, size, "'%.100s'", lua_tostring(L, -2));
    else if (lua_isinteger(L, -2))
        snprintf(odd, size, "[%lld]", (long long)lua_tointeger(L, -2));
    else if (lua_type(L, -2) == LUA_TNUMBER)
        snprintf(odd, size, "[%g]", lua_tonumber(L, -2));
    else
        snprintf(odd, size, "a %s key", luaL_typename(L, -2));
}

long long
jr_json_list(lua_State *L, int idx, char *odd, size_t size)
{
    lua_Integer n, k;

    idx = lua_absindex(L, idx);
    n = (lua_Integer)lua_rawlen(L, idx);
    lua_pushnil(L);                                  /* nil */
    while (lua_next(L, idx)) {                       /* k v */
        k = lua_isinteger(L, -2) ? lua_tointeger(L, -2) : 0;
        if (k < 1 || k > n) {
            key_name(L, odd, size);
            lua_pop(L, 2);                           /* (nothing) */
            return -1;
        }
        lua_pop(L, 1);                               /* k */
    }                                                /* (nothing) */
    return n;
}

int
jr_json_map(lua_State *L, int idx, char *odd, size_t size)
{
    idx = lua_absindex(L, idx);
    lua_pushnil(L);                                  /* nil */
    while (lua_next(L, idx)) {                       /* k v */
        if (lua_type(L, -2) != LUA_TSTRING) {
            key_name(L, odd, size);
            lua_pop(L, 2);                           /* (nothing) */
            return -1;
        }
        lua_pop(L, 1);                               /* k */
    }                                                /* (nothing) */
    return 0;
}

/* jobrunner.array(t?) -> t, marked to encode as a JSON array even when
 * empty. */
static int
json_array(lua_State *L)                             /* t? */
{
    if (lua_isnoneornil(L, 1)) {
        lua_settop(L, 0);                            /* (nothing) */
        lua_newtable(L);                             /* t */
    }
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);                                /* t */
    luaL_newmetatable(L, JR_JSON_ARRAY_MT);          /* t amt */
    lua_setmetatable(L, 1);                          /* t */
    return 1;
}

/* jobrunner.json.encode(v) -> the JSON text of v (a table, string,
 * number, boolean, nil or jobrunner.null), or nil, message. */
static int
json_encode(lua_State *L)                            /* v */
{
    jr_buf *b;
    char msg[400];

    lua_settop(L, 1);                                /* v */
    b = jr_json_buf_new(L);                          /* v b */
    if (encode_root(L, 1, b, "value", 0, msg, sizeof msg) < 0 || b->oom) {
        lua_pushnil(L);                              /* v b nil */
        lua_pushstring(L, b->oom ? "value: out of memory" : msg);
        return 2;                                    /* nil msg */
    }
    lua_pushlstring(L, b->p, b->len - 1);            /* v b s */
    return 1;
}

/* jobrunner.json.decode(s) -> the value of the JSON text s, with the
 * payloads' conventions (jsondec.h), or nil, message. */
static int
json_decode(lua_State *L)                            /* s */
{
    size_t n;
    const char *s = luaL_checklstring(L, 1, &n);
    char msg[200];

    if (jr_json_decode(L, s, n, msg, sizeof msg) == 0)
        return 1;                                    /* s v */
    lua_pushnil(L);                                  /* s nil */
    lua_pushstring(L, msg);                          /* s nil msg */
    return 2;
}

static const luaL_Reg json_funcs[] = {
    {"encode", json_encode}, {"decode", json_decode}, {NULL, NULL}};

void
jr_json_set_markers(lua_State *L)                    /* M */
{
    luaL_newmetatable(L, JR_JSON_ARRAY_MT);          /* M amt */
    lua_pop(L, 1);                                   /* M */
    lua_pushcfunction(L, json_array);                /* M array */
    lua_setfield(L, -2, "array");                    /* M */
    lua_pushlightuserdata(L, NULL);                  /* M null */
    lua_setfield(L, -2, "null");                     /* M */
    luaL_newlib(L, json_funcs);                      /* M json */
    lua_setfield(L, -2, "json");                     /* M */
}
