/* keyread.c - reading the config's keys by keys.c's rows: the line of a
 * key in the file's text, the error naming file:line and key, the readers
 * of a number, a whole number, a string, a period and a word, the walk of
 * a table by its rows (a plain key read by its row's type), and the check
 * that the config's tables are plain. Uses config.h, keys.h, json.h,
 * luaopts.h, util.h. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "config/config.h"
#include "config/keys.h"
#include "lua/json.h"
#include "lua/luaopts.h"
#include "base/util.h"

/* The line where key is first assigned in the file, or 0. */
int
jr_key_line(const cfg_ctx *x, const char *key)
{
    const char *p = x->text;
    size_t n = strlen(key);

    while (p && (p = strstr(p, key)) != NULL) {
        const char *q = p + n;
        int word_start = p == x->text || !(p[-1] == '_' ||
                         (p[-1] >= 'a' && p[-1] <= 'z') ||
                         (p[-1] >= 'A' && p[-1] <= 'Z'));
        while (*q == ' ' || *q == '\t')
            q++;
        if (word_start && *q == '=' && q[1] != '=') {
            int line = 1;
            const char *s;
            for (s = x->text; s < p; s++)
                line += *s == '\n';
            return line;
        }
        p += n;
    }
    return 0;
}

/* The line of a dotted key: its last part's, else its first part's (a
 * list item, "http.?" or "schedules[2]", has no line of its own), or 0. */
static int
path_line(const cfg_ctx *x, const char *key)
{
    char first[64];
    const char *dot = strrchr(key, '.');
    int line = jr_key_line(x, dot ? dot + 1 : key);

    if (line > 0)
        return line;
    snprintf(first, sizeof first, "%.*s", (int)strcspn(key, ".["), key);
    return jr_key_line(x, first);
}

int
jr_key_fail(cfg_ctx *x, const char *key, const char *fmt, ...)
{
    char what[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return jr_fail(x->err, JR_ECONFIG, "%s:%d: '%s' %s", x->file,
                   path_line(x, key), key, what);
}

/* Value at the top of L as a number of seconds in [lo, hi]. */
int
jr_key_number(cfg_ctx *x, lua_State *L, const char *key, double lo,
              double hi, double *out)
{
    double v;

    if (lua_type(L, -1) != LUA_TNUMBER)
        return jr_key_fail(x, key, "must be a number, got %s",
                           luaL_typename(L, -1));
    v = lua_tonumber(L, -1);
    if (!(v >= lo && v <= hi))          /* NaN too */
        return jr_key_fail(x, key, "is out of range (%g to %g seconds), "
                           "got %g", lo, hi, v);
    *out = v;
    return 0;
}

int
jr_key_int(cfg_ctx *x, lua_State *L, const char *key, int lo, int hi,
           int *out)
{
    long long v;

    switch (jr_luaopts_whole(L, lo, hi, 0, &v)) {
    case JR_WHOLE_OK:
        *out = (int)v;
        return 0;
    case JR_WHOLE_RANGE:
        return jr_key_fail(x, key, "is out of range (%d to %d)", lo, hi);
    case JR_WHOLE_FRACTION:
        return jr_key_fail(x, key, "must be a whole number, got %s",
                           "a fraction");
    default:
        return jr_key_fail(x, key, "must be a whole number, got %s",
                           luaL_typename(L, -1));
    }
}

int
jr_key_string(cfg_ctx *x, lua_State *L, const char *key, char **out)
{
    if (lua_type(L, -1) != LUA_TSTRING)
        return jr_key_fail(x, key, "must be a string, got %s",
                           luaL_typename(L, -1));
    return jr_config_set(out, lua_tostring(L, -1), x->err);
}

static int k_plain(cfg_ctx *x, lua_State *L, const char *key);

/* Walks the table at the top of L, calling the row for each key; unknown
 * keys are errors listing the valid ones. prefix is "" or "defaults.". */
int
jr_key_walk(cfg_ctx *x, lua_State *L, const key_row *rows,
            const char *prefix)
{
    char key[128], valid[512], odd[120];
    const key_row *r;
    size_t n;

    if (jr_json_map(L, -1, odd, sizeof odd) < 0) {
        if (*prefix == '\0')
            return jr_fail(x->err, JR_ECONFIG, "%s: config keys must be "
                           "strings, found the key %s", x->file, odd);
        snprintf(key, sizeof key, "%.*s", (int)strlen(prefix) - 1, prefix);
        return jr_key_fail(x, key, "must be a table of named keys, found the "
                           "key %s", odd);
    }
    lua_pushnil(L);                                  /* t nil */
    while (lua_next(L, -2)) {                        /* t k v */
        snprintf(key, sizeof key, "%s%s", prefix, lua_tostring(L, -2));
        for (r = rows; r->key; r++)
            if (strcmp(r->key, lua_tostring(L, -2)) == 0)
                break;
        if (r->key == NULL) {
            for (n = 0, valid[0] = '\0', r = rows; r->key; r++)
                n += (size_t)snprintf(valid + n, sizeof valid - n, "%s%s",
                                      n ? ", " : "", r->key);
            lua_pop(L, 2);
            return jr_fail(x->err, JR_ECONFIG, "%s:%d: unknown key '%s' in "
                           "config (valid keys: %s)", x->file,
                           path_line(x, key), key, valid);
        }
        x->row = r;
        if ((r->fn ? r->fn : k_plain)(x, L, key) < 0) { /* t k v */
            lua_pop(L, 2);
            return -1;
        }
        lua_pop(L, 1);                               /* t k */
    }                                                /* t */
    return 0;
}

/* A period: seconds, or a duration string ("30s", "7d"), into *out. */
static int
get_period(cfg_ctx *x, lua_State *L, const char *key, double *out)
{
    jr_err e;

    if (lua_type(L, -1) != LUA_TSTRING)
        return jr_key_number(x, L, key, 0, JR_RANGE_RETENTION_MAX, out);
    if (jr_parse_duration(lua_tostring(L, -1), key, out, &e) < 0)
        return jr_key_fail(x, key, "must be seconds or a duration such as "
                           "\"30s\", \"15m\", \"7d\", got \"%.64s\"",
                           lua_tostring(L, -1));
    if (*out > JR_RANGE_RETENTION_MAX)
        return jr_key_fail(x, key, "is out of range (0 to %g seconds), got "
                           "%g", JR_RANGE_RETENTION_MAX, *out);
    return 0;
}

/* A plain key: read by its row's type into its field. */
static int
k_plain(cfg_ctx *x, lua_State *L, const char *key)
{
    const key_row *r = x->row;
    char *at = (char *)x->c + r->off;
    int n;

    switch (r->type) {
    case K_SECS:
        return jr_key_number(x, L, key, r->lo, r->hi, (double *)at);
    case K_PERIOD:
        return get_period(x, L, key, (double *)at);
    case K_STR:
        return jr_key_string(x, L, key, (char **)at);
    case K_BOOL:
        if (lua_type(L, -1) != LUA_TBOOLEAN)
            return jr_key_fail(x, key, "must be true or false, got %s",
                               luaL_typename(L, -1));
        *(int *)at = lua_toboolean(L, -1);
        return 0;
    default:
        break;
    }
    if (jr_key_int(x, L, key, (int)r->lo, (int)r->hi, &n) < 0)
        return -1;
    if (r->type == K_INT)
        *(int *)at = n;
    else if (r->type == K_SIZE)
        *(size_t *)at = (size_t)n;
    else if (r->type == K_MIB)
        *(size_t *)at = (size_t)n << 20;
    else
        *(long *)at = n;
    return 0;
}

/* A key of enum words: the index of the value in list (NULL-ended), or
 * the row's words as its error. */
int
jr_key_word(cfg_ctx *x, lua_State *L, const char *key,
            const char *const *list)
{
    const char *v = lua_tostring(L, -1);
    int i;

    for (i = 0; lua_type(L, -1) == LUA_TSTRING && list[i]; i++)
        if (strcmp(v, list[i]) == 0)
            return i;
    return jr_key_fail(x, key, "must be %s", x->row->words);
}

/* How deep jr_key_plain() looks: limits.NAME.per_key.rate is the
 * deepest key. */
#define PLAIN_DEPTH 4

/* The table at the top of L and the tables in it, PLAIN_DEPTH deep: no
 * metatable (its __index, __len or __tostring would run inside the
 * readers, outside any protected call and budget: a raise aborted the
 * runner, a loop hung it) and no string, value or key, holding a NUL
 * byte (C would read it cut short: "scripts\0x" was "scripts"). path
 * names the table ("" at the top).  [-0, +0, m] */
int
jr_key_plain(cfg_ctx *x, lua_State *L, const char *path, int depth)
{
    char sub[128];
    size_t n, nul;

    if (lua_getmetatable(L, -1)) {                   /* t mt */
        lua_pop(L, 1);                               /* t */
        return *path ? jr_key_fail(x, path, "has a metatable: the config's "
                                   "tables must be plain tables%s", "") :
               jr_fail(x->err, JR_ECONFIG, "%s: the table it returns has a "
                       "metatable: the config's tables must be plain "
                       "tables", x->file);
    }
    lua_pushnil(L);                                  /* t nil */
    while (lua_next(L, -2)) {                        /* t k v */
        if (lua_type(L, -2) == LUA_TSTRING) {
            const char *k = lua_tolstring(L, -2, &n);
            snprintf(sub, sizeof sub, "%s%s%s", path, *path ? "." : "", k);
            if (strlen(k) != n)
                return lua_pop(L, 2), jr_key_fail(x, path, "has a key holding "
                                                  "a NUL byte ('%s' then NUL)",
                                                  k);
        } else if (lua_isinteger(L, -2)) {
            snprintf(sub, sizeof sub, "%s[%lld]", path,
                     (long long)lua_tointeger(L, -2));
        } else {
            snprintf(sub, sizeof sub, "%s", path);   /* walk names it */
        }
        if (lua_type(L, -1) == LUA_TSTRING &&
            (nul = strlen(lua_tolstring(L, -1, &n))) != n)
            return lua_pop(L, 2), jr_key_fail(x, sub, "holds a NUL byte (byte "
                                              "%zu)", nul + 1);
        if (lua_type(L, -1) == LUA_TTABLE && depth < PLAIN_DEPTH &&
            jr_key_plain(x, L, sub, depth + 1) < 0)
            return lua_pop(L, 2), -1;
        lua_pop(L, 1);                               /* t k */
    }                                                /* t */
    return 0;
}
