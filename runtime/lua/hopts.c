/* hopts.c - a handler table's options checked as a handler file returns
 * it (docs/handlers.md): its keys known, handle a function, max_retries,
 * timeout, backoff and durable_steps, inflight, output, sequence and
 * fair, each in range (ranges.h), with a message naming the option when
 * one is not. Apart from script.c, which walks the scripts directory and
 * runs each file, because these only read the table on top of the stack.
 * Uses ranges.h, hfair.h (fair's table form). */
#include <stdio.h>
#include <string.h>

#include <lua.h>

#include "base/ranges.h"
#include "lua/hfair.h"
#include "lua/hopts.h"

#define JR_STR_(x) #x
#define JR_STR(x) JR_STR_(x)

/* A key of the handler table on top that is not a handler option, as a
 * message (static), or NULL.  [-0, +0, -] */
static const char *
unknown_key(lua_State *L)                          /* t */
{
    static char msg[256];
    static const char *const known[] = {"handle", "max_retries", "timeout",
                                        "backoff", "inflight",
                                        "durable_steps", "output", "sequence",
                                        "fair", NULL};
    int i;

    lua_pushnil(L);                              /* t nil */
    while (lua_next(L, -2)) {                    /* t k v */
        const char *k = lua_type(L, -2) == LUA_TSTRING ?
                        lua_tostring(L, -2) : "?";
        for (i = 0; known[i] && strcmp(known[i], k) != 0; i++)
            ;
        lua_pop(L, 1);                           /* t k */
        if (known[i] == NULL) {
            lua_pop(L, 1);                       /* t */
            snprintf(msg, sizeof msg, "unknown handler option '%.64s' "
                     "(valid: handle, max_retries, timeout, backoff, "
                     "inflight, durable_steps, output, sequence, fair)",
                     k);
            return msg;
        }
    }                                            /* t */
    return NULL;
}

/* The handler table on top: its keys known, handle a function, the
 * options in range (read into *max_retries, *timeout, *backoff). NULL, or
 * what is wrong.  [-0, +0, -] */
const char *
jr_hopts_table(lua_State *L, int *max_retries, double *timeout,
               double *backoff)
{
    const char *bad = unknown_key(L);
    int i;

    if (bad != NULL)
        return bad;
    if (lua_getfield(L, -1, "handle") != LUA_TFUNCTION) {
        lua_pop(L, 1);
        return "handler table has no 'handle' function";
    }
    lua_pop(L, 1);
    if (lua_getfield(L, -1, "max_retries") != LUA_TNIL) {
        if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 0 ||
            lua_tointeger(L, -1) > JR_RANGE_RETRIES_MAX) {
            lua_pop(L, 1);
            return "'max_retries' must be a whole number in range (0 to "
                   JR_STR(JR_RANGE_RETRIES_MAX) ")";
        }
        *max_retries = (int)lua_tointeger(L, -1);
    }
    lua_pop(L, 1);
    if (lua_getfield(L, -1, "timeout") != LUA_TNIL) {
        double t = lua_tonumber(L, -1);
        if (lua_type(L, -1) != LUA_TNUMBER ||
            !(t >= JR_RANGE_TIMEOUT_MIN && t <= JR_RANGE_TIMEOUT_MAX)) {
            lua_pop(L, 1);
            return "'timeout' must be a number of seconds in range (0.001 "
                   "to 604800)";
        }
        *timeout = t;
    }
    lua_pop(L, 1);
    i = lua_getfield(L, -1, "backoff");
    if (i == LUA_TNUMBER) {
        double b = lua_tonumber(L, -1);
        if (!(b >= 0 && b <= JR_RANGE_BACKOFF_MAX)) {
            lua_pop(L, 1);
            return "'backoff' must be a number of seconds in range (0 to "
                   "604800) or a function";
        }
        *backoff = b;
    }
    lua_pop(L, 1);
    if (i != LUA_TNIL && i != LUA_TNUMBER && i != LUA_TFUNCTION)
        return "'backoff' must be a number of seconds or a function";
    i = lua_getfield(L, -1, "durable_steps");
    lua_pop(L, 1);
    if (i != LUA_TNIL && i != LUA_TBOOLEAN)
        return "'durable_steps' must be true or false";
    return NULL;
}

/* The handler table on top's inflight: a whole number of jobs a worker
 * runs at once (read into *inflight). NULL, or what is wrong.
 * [-0, +0, -] */
const char *
jr_hopts_inflight(lua_State *L, int *inflight)
{
    int t = lua_getfield(L, -1, "inflight");

    if (t != LUA_TNIL && (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1 ||
                          lua_tointeger(L, -1) > JR_RANGE_INFLIGHT_MAX)) {
        lua_pop(L, 1);
        return "'inflight' must be a whole number in range (1 to "
               JR_STR(JR_RANGE_INFLIGHT_MAX) ")";
    }
    if (t != LUA_TNIL)
        *inflight = (int)lua_tointeger(L, -1);
    lua_pop(L, 1);
    return NULL;
}

/* The handler table on top's output: "keep" (1 in *keep) or "log" (0),
 * "keep" only for a handler that runs one job at a time. NULL, or what
 * is wrong. [-0, +0, -] */
const char *
jr_hopts_output(lua_State *L, int inflight, int *keep)
{
    int t = lua_getfield(L, -1, "output");
    const char *v = t == LUA_TSTRING ? lua_tostring(L, -1) : NULL;

    *keep = v != NULL && strcmp(v, "keep") == 0;
    lua_pop(L, 1);
    if (t != LUA_TNIL && (v == NULL || (!*keep && strcmp(v, "log") != 0)))
        return "'output' must be \"keep\" or \"log\"";
    if (*keep && inflight > 1)
        return "'output' = \"keep\" needs inflight 1: the descriptors of "
               "jobs run at once are shared";
    return NULL;
}

/* The handler table on top's field, sequence (docs/queues.md,
 * "Sequences") or fair ("Fair share"): a payload path "payload.a.b"
 * (fields of letters, digits, _ and -, joined by dots), "a.b" into *seq
 * (borrowed from the table: valid while it is on the stack), or NULL
 * when not set. NULL, or what is wrong. [-0, +0, -] */
const char *
jr_hopts_path(lua_State *L, const char *field, const char **seq)
{
    static char msg[200];
    const char *s;
    size_t n = 0;
    int t = lua_getfield(L, -1, field);

    s = t == LUA_TSTRING ? lua_tolstring(L, -1, &n) : NULL;
    lua_pop(L, 1);
    *seq = NULL;
    if (t == LUA_TNIL)
        return NULL;
    if (!jr_hfair_path_ok(s, n)) {
        snprintf(msg, sizeof msg, "'%s' must be a payload path such as "
                 "\"payload.customer_id\" (fields of letters, digits, _ and "
                 "-, joined by dots; 200 bytes at most)", field);
        return msg;
    }
    *seq = s + 8;
    return NULL;
}

/* The handler table on top's fair option: the string form (a path into
 * *fair) or the table form (hfair.c: its key into *fair, its weights, a
 * new JSON object, into *w, its default into *def). NULL, or what is
 * wrong. [-0, +0, m] */
const char *
jr_hopts_fair(lua_State *L, const char **fair, char **w, double *def)
{
    const char *bad;

    *w = NULL;
    *def = 0;
    if (lua_getfield(L, -1, "fair") != LUA_TTABLE) {  /* t f */
        lua_pop(L, 1);                               /* t */
        return jr_hopts_path(L, "fair", fair);
    }
    bad = jr_hfair_table(L, fair, w, def);           /* t f */
    lua_pop(L, 1);                  /* t: *fair is t.fair's, still held */
    return bad;
}
