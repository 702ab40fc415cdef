/* limitcfg.c - the config's `limits` table: per job name or queue, a global
 * and a per-key concurrency cap and rate, and the payload path a job's
 * limit key comes from. Reading and checking only: the claim enforces
 * them (backends/limitpick.c), the master keeps them (limitsrun.c). Uses
 * hfair.h for a fair table's path and weights, checked as a handler's. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "base/job.h"
#include "config/limitcfg.h"
#include "lua/hfair.h"
#include "lua/luaopts.h"
#include "base/util.h"

#define QPLEN (sizeof JR_LIMIT_QPREFIX - 1)

int
jr_limit_parse_rate(const char *s, double *per_sec, double *count,
                    char *what, size_t whatsz)
{
    const char *slash = strchr(s, '/');
    char period[32], *end;
    double n, secs;
    jr_err e;

    if (slash == NULL || slash == s) {
        snprintf(what, whatsz, "must be a rate \"N/PERIOD\" such as "
                 "\"100/1m\" or \"10/1s\", got \"%.40s\"", s);
        return -1;
    }
    n = strtod(s, &end);
    if (end != slash || !isfinite(n) || n <= 0 || n > 1e9) {
        snprintf(what, whatsz, "must have a count above 0 (at most 1e9) "
                 "before the '/', got \"%.40s\"", s);
        return -1;
    }
    /* a bare unit ("100/m") is one of it */
    snprintf(period, sizeof period, "%s%s",
             isalpha((unsigned char)slash[1]) ? "1" : "", slash + 1);
    if (strlen(slash + 1) >= sizeof period - 1 ||
        jr_parse_duration(period, "period", &secs, &e) < 0 ||
        !(secs >= 0.001 && secs <= 31536000)) {
        snprintf(what, whatsz, "has an invalid period after the '/' in "
                 "\"%.40s\" (a duration from 1ms to 365d such as 1s, 1m, "
                 "1h, 1d)", s);
        return -1;
    }
    *per_sec = n / secs;
    *count = n;
    return 0;
}

/* The whole number at the top of L in 0..JR_LIMIT_CAP_MAX. */
static int
cap_value(lua_State *L, int *out, char *what, size_t whatsz)
{
    long long v;

    switch (jr_luaopts_whole(L, 0, JR_LIMIT_CAP_MAX, 0, &v)) {
    case JR_WHOLE_OK:
        *out = (int)v;
        return 0;
    case JR_WHOLE_TYPE:
        snprintf(what, whatsz, "must be a whole number, got %s",
                 luaL_typename(L, -1));
        return -1;
    default:
        snprintf(what, whatsz, "must be a whole number from 0 to %d "
                 "(0: no cap)", JR_LIMIT_CAP_MAX);
        return -1;
    }
}

/* The rate string at the top of L into set (burst: its count, at least
 * 1, unless a burst was given: a job takes a whole token, so a bucket of
 * 0.5 would never start one).  [-0, +0, -] */
static int
rate_value(lua_State *L, jr_limit_set *set, int burst_given, char *what,
           size_t whatsz)
{
    double count;

    if (lua_type(L, -1) == LUA_TBOOLEAN && !lua_toboolean(L, -1)) {
        set->rate = set->burst = 0;                  /* rate = false */
        set->rate_text[0] = '\0';
        return 0;
    }
    if (lua_type(L, -1) != LUA_TSTRING) {
        snprintf(what, whatsz, "must be a rate string such as \"100/1m\", "
                 "got %s", luaL_typename(L, -1));
        return -1;
    }
    if (jr_limit_parse_rate(lua_tostring(L, -1), &set->rate, &count, what,
                            whatsz) < 0)
        return -1;
    snprintf(set->rate_text, sizeof set->rate_text, "%s",
             lua_tostring(L, -1));
    if (!burst_given)
        set->burst = count < 1 ? 1 : count;
    return 0;
}

/* "payload.a.b" at the top of L into a new "a.b" in *out. */
static int
path_value(lua_State *L, char **out, char *what, size_t whatsz)
{
    size_t n = 0;
    const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1,
                    &n) : NULL;

    if (!jr_hfair_path_ok(s, n)) {
        snprintf(what, whatsz, "must be a payload path such as "
                 "\"payload.account_id\" (fields of letters, digits, _ and "
                 "-, joined by dots; 200 bytes at most)");
        return -1;
    }
    free(*out);
    return (*out = strdup(s + 8)) ? 0 : -1;
}

/* The weights table at the top of L ({ key = weight }) as a JSON object
 * into a new *out (hfair.c's jr_hfair_weights, as a handler's).
 * [-0, +0, m] */
static int
weights_value(lua_State *L, char **out, const char *sub, char *key,
              size_t keysz, char *what, size_t whatsz)
{
    const char *k;
    char *json = NULL;
    int rc = jr_hfair_weights(L, 0, &json, &k);

    snprintf(key, keysz, "%s.fair.weights", sub);
    if (k != NULL)
        snprintf(key, keysz, "%s.fair.weights.%s", sub, k);
    switch (rc) {
    case 0:
        free(*out);
        *out = json;
        return 0;
    case JR_HFAIR_TABLE:
        snprintf(what, whatsz, "must be a table such as { acme = 4 }, got "
                 "%s", luaL_typename(L, -1));
        return -1;
    case JR_HFAIR_KEY:
        snprintf(what, whatsz, "keys must be UTF-8 strings of 1 to 256 "
                 "bytes without control characters (a fair key as the "
                 "payload holds it)");
        return -1;
    case JR_HFAIR_WEIGHT:
        snprintf(what, whatsz, "must be a number from 1 to 1000");
        return -1;
    default:
        snprintf(what, whatsz, "out of memory");
        return -1;
    }
}

/* The fair table at the top of L ({ key = "payload.f", weights = {...},
 * default = 1 }) into l.  [-0, +0, m] */
static int
fair_value(lua_State *L, jr_limit *l, const char *sub, char *key,
           size_t keysz, char *what, size_t whatsz)
{
    const char *k;
    double d;
    int rc = 0;

    if (!lua_istable(L, -1)) {
        snprintf(key, keysz, "%s.fair", sub);
        snprintf(what, whatsz, "must be a table such as { key = "
                 "\"payload.tenant\", weights = { acme = 4 }, default = 1 "
                 "}, got %s", luaL_typename(L, -1));
        return -1;
    }
    l->fair_default = 1;
    lua_pushnil(L);                                  /* f nil */
    while (rc == 0 && lua_next(L, -2)) {             /* f k v */
        k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
        snprintf(key, keysz, "%s.fair.%s", sub, k);
        if (strcmp(k, "key") == 0)
            rc = path_value(L, &l->fair_path, what, whatsz);
        else if (strcmp(k, "weights") == 0)
            rc = weights_value(L, &l->fair_weights, sub, key, keysz, what,
                               whatsz);
        else if (strcmp(k, "default") == 0) {
            d = lua_type(L, -1) == LUA_TNUMBER ? lua_tonumber(L, -1) : -1;
            if (!(d >= 1 && d <= 1000)) {
                snprintf(what, whatsz, "must be a number from 1 to 1000");
                rc = -1;
            }
            l->fair_default = d;
        } else {
            snprintf(what, whatsz, "is not a fair setting (valid: key, "
                     "weights, default)");
            rc = -1;
        }
        lua_pop(L, rc == 0 ? 1 : 2);                 /* f k | f */
    }
    if (rc == 0 && l->fair_path == NULL) {
        snprintf(key, keysz, "%s.fair.key", sub);
        snprintf(what, whatsz, "is missing: the payload path of the fair "
                 "key, such as \"payload.tenant\"");
        rc = -1;
    }
    return rc;
}

/* The priority_aging at the top of L: seconds or a duration from 1ms to
 * 365d ("30s"). */
static int
aging_value(lua_State *L, double *out, char *what, size_t whatsz)
{
    double secs = -1;
    jr_err e;

    if (lua_type(L, -1) == LUA_TNUMBER)
        secs = lua_tonumber(L, -1);
    else if (lua_type(L, -1) == LUA_TSTRING &&
             jr_parse_duration(lua_tostring(L, -1), "priority_aging", &secs,
                               &e) < 0)
        secs = -1;
    if (!(secs >= 0.001 && secs <= 31536000)) {
        snprintf(what, whatsz, "must be seconds or a duration from 1ms to "
                 "365d such as \"30s\" (a level a period waited)");
        return -1;
    }
    *out = secs;
    return 0;
}

/* Reads one set (the limit's own, or per_key) from the table at the top
 * of L. sub is the key prefix for messages.  [-0, +0, m] */
static int
read_set(lua_State *L, jr_limit *l, jr_limit_set *set, int top,
         const char *sub, char *key, size_t keysz, char *what,
         size_t whatsz)
{
    char here[200];
    const char *k;
    int burst_given = 0, rc = 0;

    lua_getfield(L, -1, "burst");                    /* t burst */
    if (!lua_isnil(L, -1)) {
        double b = lua_tonumber(L, -1);
        snprintf(key, keysz, "%s.burst", sub);
        if (lua_type(L, -1) != LUA_TNUMBER || !(b >= 1 && b <= 1e9)) {
            snprintf(what, whatsz, "must be a number from 1 to 1e9");
            lua_pop(L, 1);
            return -1;
        }
        set->burst = b;
        burst_given = 1;
    }
    lua_pop(L, 1);                                   /* t */
    lua_pushnil(L);                                  /* t nil */
    while (rc == 0 && lua_next(L, -2)) {             /* t k v */
        k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
        snprintf(key, keysz, "%s.%s", sub, k);
        if (strcmp(k, "concurrency") == 0)
            rc = cap_value(L, &set->concurrency, what, whatsz);
        else if (strcmp(k, "rate") == 0)
            rc = rate_value(L, set, burst_given, what, whatsz);
        else if (strcmp(k, "burst") == 0)
            ;                                        /* read above */
        else if (top && strcmp(k, "key") == 0)
            rc = path_value(L, &l->key_path, what, whatsz);
        else if (top && strcmp(k, "fair") == 0)
            rc = fair_value(L, l, sub, key, keysz, what, whatsz);
        else if (top && strcmp(k, "priority_aging") == 0)
            rc = aging_value(L, &l->aging, what, whatsz);
        else if (top && strcmp(k, "per_key") == 0 && lua_istable(L, -1) &&
                 snprintf(here, sizeof here, "%s", key) > 0)
            rc = read_set(L, l, &l->per_key, 0, here, key, keysz, what,
                          whatsz);
        else if (top && strcmp(k, "per_key") == 0) {
            snprintf(what, whatsz, "must be a table such as { concurrency "
                     "= 1 }, got %s", luaL_typename(L, -1));
            rc = -1;
        } else {
            snprintf(what, whatsz, "is not a limit setting (valid: "
                     "concurrency, rate, burst%s)",
                     top ? ", key, per_key (a table), fair (a table), "
                     "priority_aging" : "");
            rc = -1;
        }
        lua_pop(L, rc == 0 ? 1 : 2);                 /* t k | t */
    }                                                /* t */
    return rc;
}

int
jr_limit_read(lua_State *L, const char *scope, jr_limit *l, char *key,
              size_t keysz, char *what, size_t whatsz)
{
    char sub[160];
    jr_err e;

    snprintf(sub, sizeof sub, "limits.%s", scope);
    snprintf(key, keysz, "limits");
    if (jr_limit_scope_check(scope, &e) < 0) {
        snprintf(what, whatsz, "has a key that names no job or queue: %s",
                 e.msg);
        return -1;
    }
    snprintf(key, keysz, "%s", sub);
    if (!lua_istable(L, -1)) {
        snprintf(what, whatsz, "must be a table such as { concurrency = "
                 "2, rate = \"10/1s\" }, got %s", luaL_typename(L, -1));
        return -1;
    }
    luaL_checkstack(L, 8, "limits");
    if (read_set(L, l, &l->all, 1, sub, key, keysz, what, whatsz) < 0)
        return -1;
    if (l->key_path && strncmp(scope, JR_LIMIT_QPREFIX, QPLEN) == 0) {
        snprintf(key, keysz, "%s.key", sub);
        snprintf(what, whatsz, "is for limits on a job name: a queue's "
                 "jobs have many payload shapes (push them with a key)");
        return -1;
    }
    if (l->fair_path && strncmp(scope, JR_LIMIT_QPREFIX, QPLEN) != 0) {
        snprintf(key, keysz, "%s.fair", sub);
        snprintf(what, whatsz, "is for limits on a queue (\"queue:NAME\"): "
                 "fair share is between the keys of one queue's jobs");
        return -1;
    }
    if (l->aging > 0 && strncmp(scope, JR_LIMIT_QPREFIX, QPLEN) != 0) {
        snprintf(key, keysz, "%s.priority_aging", sub);
        snprintf(what, whatsz, "is for limits on a queue (\"queue:NAME\"): "
                 "priorities order the jobs of a queue");
        return -1;
    }
    if (l->aging > 0 && l->fair_path) {
        snprintf(key, keysz, "%s.priority_aging", sub);
        snprintf(what, whatsz, "cannot be on a fair queue: its turns "
                 "between keys come before priorities");
        return -1;
    }
    return 0;
}

static int
by_scope(const void *a, const void *b)
{
    return strcmp(((const jr_limit *)a)->scope, ((const jr_limit *)b)->scope);
}

int
jr_limits_read(lua_State *L, jr_limits *ls, char *key, size_t keysz,
               char *what, size_t whatsz)
{
    jr_limits fresh = {0};
    jr_limit *l;
    int rc = 0;

    snprintf(key, keysz, "limits");
    if (!lua_istable(L, -1)) {
        snprintf(what, whatsz, "must be a table of job names and "
                 "\"queue:NAME\"s, got %s", luaL_typename(L, -1));
        return -1;
    }
    lua_pushnil(L);                                  /* t nil */
    while (rc == 0 && lua_next(L, -2)) {             /* t k v */
        snprintf(key, keysz, "limits");  /* not the last limit read */
        if (lua_type(L, -2) != LUA_TSTRING) {
            snprintf(what, whatsz, "keys must be job names or "
                     "\"queue:NAME\", found a %s", luaL_typename(L, -2));
            rc = -1;
        } else if (fresh.n >= JR_LIMIT_MAX) {
            snprintf(what, whatsz, "has more than %d limits", JR_LIMIT_MAX);
            rc = -1;
        } else if ((l = jr_limits_add(&fresh, lua_tostring(L, -2))) ==
                   NULL) {
            snprintf(what, whatsz, "out of memory");
            rc = -1;
        } else {
            rc = jr_limit_read(L, l->scope, l, key, keysz, what, whatsz);
        }
        lua_pop(L, rc == 0 ? 1 : 2);                 /* t k | t */
    }                                                /* t */
    if (rc < 0) {
        jr_limits_free(&fresh);
        return -1;
    }
    qsort(fresh.l, (size_t)fresh.n, sizeof *fresh.l, by_scope);
    jr_limits_free(ls);
    *ls = fresh;
    return 0;
}
