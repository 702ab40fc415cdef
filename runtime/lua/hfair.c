/* hfair.c - a handler's `fair` option in its table form (docs/queues.md,
 * "Fair share", "A name's own weights"): its key (a payload path, as the
 * string form's), its weights by key and its default weight, checked as
 * the config's fair weights are (UTF-8 keys, integers 1 to 1000), the
 * weights made a JSON object for the database (fair_names.weights). Uses
 * jsontext.h, util.h (jr_buf). */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "base/jsontext.h"
#include "lua/hfair.h"
#include "base/util.h"

static char msg[400];

/* A weight or default: an integer from 1 to 1000. */
static int
weight_ok(lua_State *L, int idx)
{
    double w;

    if (!lua_isinteger(L, idx) &&
        !(lua_type(L, idx) == LUA_TNUMBER &&
          floor(lua_tonumber(L, idx)) == lua_tonumber(L, idx)))
        return 0;
    w = lua_tonumber(L, idx);
    return w >= 1 && w <= 1000;
}

/* Appends s (checked: UTF-8, no control byte) as a JSON string to b. */
static void
buf_str(jr_buf *b, const char *s)
{
    jr_buf_put(b, "\"", 1);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            jr_buf_put(b, "\\", 1);
        jr_buf_put(b, s, 1);
    }
    jr_buf_put(b, "\"", 1);
}

/* A weights key: UTF-8 of 1 to 256 bytes without control bytes (as a
 * payload holds it; PostgreSQL's text refuses anything else). */
static int
key_ok(const char *k, size_t kn)
{
    const char *p;
    size_t u = 1;

    for (p = k; u && p < k + kn && (unsigned char)*p >= 0x20; p += u)
        u = jr_jsontext_utf8_len((const unsigned char *)p,
                                 kn - (size_t)(p - k));
    return p == k + kn && kn > 0 && kn <= 256;
}

int
jr_hfair_weights(lua_State *L, int integers, char **out, const char **key)
{
    jr_buf b = {0};
    const char *k;
    char num[40];
    size_t kn = 0;
    int n = 0, bad = 0;

    *key = NULL;
    if (!lua_istable(L, -1))
        return JR_HFAIR_TABLE;
    jr_buf_put(&b, "{", 1);
    lua_pushnil(L);                                  /* w nil */
    while (lua_next(L, -2)) {                        /* w k v */
        k = lua_type(L, -2) == LUA_TSTRING ? lua_tolstring(L, -2, &kn) :
            NULL;
        if (k == NULL || !key_ok(k, kn)) {
            bad = JR_HFAIR_KEY;
            break;
        }
        *key = k;
        if (integers ? !weight_ok(L, -1) :
            !(lua_type(L, -1) == LUA_TNUMBER && lua_tonumber(L, -1) >= 1 &&
              lua_tonumber(L, -1) <= 1000)) {
            bad = JR_HFAIR_WEIGHT;
            break;
        }
        if (n++)
            jr_buf_put(&b, ",", 1);
        buf_str(&b, k);
        snprintf(num, sizeof num, ":%.17g", lua_tonumber(L, -1));
        jr_buf_put(&b, num, strlen(num));
        lua_pop(L, 1);                               /* w k */
    }
    if (bad) {
        lua_pop(L, 2);                               /* w */
        jr_buf_free(&b);
        return bad;
    }
    jr_buf_put(&b, "}", 2);                          /* and its NUL */
    if (b.oom) {
        jr_buf_free(&b);
        return JR_HFAIR_OOM;
    }
    *out = b.p;
    return 0;
}

/* The weights table on top as a JSON object into *out. NULL, or what is
 * wrong.  [-0, +0, m] */
static const char *
weights(lua_State *L, char **out)
{
    const char *k;

    switch (jr_hfair_weights(L, 1, out, &k)) {
    case 0:
        return NULL;
    case JR_HFAIR_TABLE:
        snprintf(msg, sizeof msg, "'fair.weights' must be a table such as "
                 "{ acme = 4 }, got %s", luaL_typename(L, -1));
        return msg;
    case JR_HFAIR_KEY:
        return "'fair.weights' keys must be UTF-8 strings of 1 to 256 bytes "
               "without control characters (a fair key as the payload "
               "holds it)";
    case JR_HFAIR_WEIGHT:
        snprintf(msg, sizeof msg, "'fair.weights.%.256s' must be an "
                 "integer from 1 to 1000", k);
        return msg;
    default:
        return "out of memory";
    }
}

int
jr_hfair_path_ok(const char *s, size_t n)
{
    const char *p;
    int ok = s && strncmp(s, "payload.", 8) == 0 && n <= 200 &&
             strlen(s) == n;                         /* no NUL inside */

    for (p = ok ? s + 8 : "", ok = ok && *p; ok && *p; p++)
        ok = isalnum((unsigned char)*p) || *p == '_' || *p == '-' ||
             (*p == '.' && p[1] != '.' && p[1] != '\0' && p[-1] != '.');
    return ok;
}

/* One field of the fair table: k's value on top. NULL, or what is
 * wrong.  [-0, +0, m] */
static const char *
field(lua_State *L, const char *k, const char **path, char **w, double *def)
{
    size_t n = 0;
    const char *s;

    if (strcmp(k, "key") == 0) {
        s = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &n) : NULL;
        if (!jr_hfair_path_ok(s, n))
            return "'fair.key' must be a payload path such as "
                   "\"payload.customer_id\" (fields of letters, digits, _ "
                   "and -, joined by dots; 200 bytes at most)";
        *path = s + 8;
    } else if (strcmp(k, "weights") == 0) {
        free(*w);
        *w = NULL;
        return weights(L, w);
    } else if (strcmp(k, "default") == 0) {
        if (!weight_ok(L, -1))
            return "'fair.default' must be an integer from 1 to 1000";
        *def = lua_tonumber(L, -1);
    } else {
        snprintf(msg, sizeof msg, "'fair.%.64s' is not a fair setting "
                 "(valid: key, weights, default)", k);
        return msg;
    }
    return NULL;
}

const char *
jr_hfair_table(lua_State *L, const char **path, char **w, double *def)
{
    const char *bad = NULL, *k;

    *path = NULL;
    *w = NULL;
    *def = 1;
    lua_pushnil(L);                                  /* f nil */
    while (bad == NULL && lua_next(L, -2)) {         /* f k v */
        k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
        bad = field(L, k, path, w, def);
        lua_pop(L, 1);                               /* f k */
    }
    if (bad != NULL)
        lua_pop(L, 1);                               /* f */
    else if (*path == NULL)
        bad = "'fair.key' is missing: the payload path of the name's fair "
              "key, such as \"payload.customer_id\"";
    else if (*w == NULL && (*w = strdup("{}")) == NULL)
        bad = "out of memory";
    if (bad != NULL) {
        free(*w);
        *w = NULL;
    }
    return bad;
}
