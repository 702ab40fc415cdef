/* luaopts.c - options tables read from Lua: the one reader of push options
 * for the producer module and for handler pushes, and its typed checks.
 * A wrong type is misuse and raises; a value out of the rules is reported
 * through jr_push_check's message, the rule every producer follows. */
#include <limits.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "lua/json.h"
#include "lua/luaopts.h"

double
jr_luaopts_number(lua_State *L, const char *fn, const char *key)
{
    if (lua_type(L, -1) != LUA_TNUMBER)
        luaL_error(L, "%s: option '%s' must be a number, got %s", fn, key,
                   luaL_typename(L, -1));
    return (double)lua_tonumber(L, -1);
}

long long
jr_luaopts_int(lua_State *L, const char *fn, const char *key, long long lo,
               long long hi)
{
    long long v = 0;

    switch (jr_luaopts_whole(L, lo, hi, 1, &v)) {
    case JR_WHOLE_OK:
        break;
    case JR_WHOLE_RANGE:
        luaL_error(L, "%s: option '%s' is out of range: %I (from %I to %I)",
                   fn, key, (lua_Integer)v, (lua_Integer)lo, (lua_Integer)hi);
        break;
    default:
        luaL_error(L, "%s: option '%s' must be an integer, got %s", fn, key,
                   lua_type(L, -1) == LUA_TNUMBER ? "a float" :
                   luaL_typename(L, -1));
    }
    return v;
}

/* The queue option on top: a string (a number is not one), whose NUL
 * bytes C would cut, so it is checked with its length.  [-0, +0, v] */
static int
read_queue(lua_State *L, const char *fn, jr_push *p, jr_err *err)
{
    size_t len;

    if (lua_type(L, -1) != LUA_TSTRING)
        luaL_error(L, "%s: option 'queue' must be a string, got %s", fn,
                   luaL_typename(L, -1));
    p->queue = lua_tolstring(L, -1, &len);
    return jr_name_check_len(p->queue, len, "queue name", err);
}

/* The unique_key option on top: a string, checked with its length (a
 * NUL byte is refused, not cut).  [-0, +0, v] */
static int
read_unique_key(lua_State *L, const char *fn, jr_push *p, jr_err *err)
{
    size_t len;

    if (lua_type(L, -1) != LUA_TSTRING)
        luaL_error(L, "%s: option 'unique_key' must be a string, got %s", fn,
                   luaL_typename(L, -1));
    p->unique_key = lua_tolstring(L, -1, &len);
    return jr_unique_key_check(p->name ? p->name : "?", p->unique_key, len,
                               err);
}

/* The on_conflict option on top: "keep", "replace" or
 * "cancel_running".  [-0, +0, v] */
static int
read_on_conflict(lua_State *L, const char *fn)
{
    const char *v = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) :
                    NULL;
    int c = jr_conflict_parse(v);

    if (c >= 0)
        return c;
    return luaL_error(L, "%s: option 'on_conflict' must be \"keep\", "
                      "\"replace\" or \"cancel_running\", got %s", fn,
                      v ? v : luaL_typename(L, -1));
}

/* The after option's ids: this thread's, until its next call. */
static _Thread_local int64_t after_ids[JR_AFTER_MAX];

/* The after option on top: an array of job ids (integers), or one id.
 * [-0, +0, v] */
static int
read_after(lua_State *L, const char *fn, jr_push *p)
{
    lua_Integer n, k;
    char odd[120];

    p->after = after_ids;
    p->nafter = 0;
    if (lua_isinteger(L, -1)) {
        after_ids[p->nafter++] = jr_luaopts_int(L, fn, "after", 1,
                                                INT64_MAX);
        return 0;
    }
    if (!lua_istable(L, -1))
        return luaL_error(L, "%s: option 'after' must be a job id or an "
                          "array of job ids, got %s", fn,
                          luaL_typename(L, -1));
    if ((n = (lua_Integer)jr_json_list(L, -1, odd, sizeof odd)) < 0)
        return luaL_error(L, "%s: option 'after' must be an array of job "
                          "ids, found the key %s", fn, odd);
    if (n > JR_AFTER_MAX)
        return luaL_error(L, "%s: option 'after': %d ids, at most %d", fn,
                          (int)n, JR_AFTER_MAX);
    for (k = 1; k <= n; k++) {
        lua_rawgeti(L, -1, k);                       /* .. t id */
        after_ids[p->nafter++] = jr_luaopts_int(L, fn, "after", 1,
                                                INT64_MAX);
        lua_pop(L, 1);                               /* .. t */
    }
    return 0;
}

/* The on_parent_failure option on top.  [-0, +0, v] */
static int
read_opf(lua_State *L, const char *fn)
{
    const char *v = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) :
                    NULL;
    int opf = jr_opf_parse(v);

    if (opf < 0)
        return luaL_error(L, "%s: option 'on_parent_failure' must be "
                          "\"cancel\", \"run\" or \"dead\", got %s", fn,
                          v ? v : luaL_typename(L, -1));
    return opf;
}

/* The limit key on top, a string kept in the table (the caller anchors
 * it), 1 to JR_KEY_MAX bytes with no NUL.  [-0, +0, v] */
static int
read_key(lua_State *L, const char *fn, jr_push *p, jr_err *err)
{
    size_t len;

    if (lua_type(L, -1) != LUA_TSTRING)
        luaL_error(L, "%s: option 'key' must be a string, got %s", fn,
                   luaL_typename(L, -1));
    p->key = lua_tolstring(L, -1, &len);
    if (len == 0 || len > JR_KEY_MAX || strlen(p->key) != len)
        return jr_fail(err, JR_EINPUT, "%s: option 'key': %zu bytes%s "
                       "(1 to %d, no NUL)", fn, len,
                       strlen(p->key) != len ? " with a NUL" : "",
                       JR_KEY_MAX);
    return 0;
}

/* The sequence key on top, a string kept in the table (the caller
 * anchors it); its length is jr_push_check's.  [-0, +0, v] */
static int
read_sequence(lua_State *L, const char *fn, jr_push *p, jr_err *err)
{
    size_t len;

    if (lua_type(L, -1) != LUA_TSTRING)
        luaL_error(L, "%s: option 'sequence' must be a string, got %s", fn,
                   luaL_typename(L, -1));
    p->sequence = lua_tolstring(L, -1, &len);
    if (strlen(p->sequence) != len)
        return jr_fail(err, JR_EINPUT, "%s: option 'sequence' holds a NUL",
                       fn);
    return 0;
}

/* The on_failure option on top.  [-0, +0, v] */
static int
read_seq_fail(lua_State *L, const char *fn)
{
    const char *v = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) :
                    NULL;
    int f = jr_seq_fail_parse(v);

    if (f < 0)
        return luaL_error(L, "%s: option 'on_failure' must be \"block\", "
                          "\"skip\" or \"dead\", got %s", fn,
                          v ? v : luaL_typename(L, -1));
    return f;
}

/* A trace context option on top (traceparent, tracestate), a string
 * kept in the table (the caller anchors it); its format is
 * jr_push_check's (trace.h).  [-0, +0, v] */
static int
read_trace(lua_State *L, const char *fn, const char *k, const char **out,
           jr_err *err)
{
    size_t len;

    if (lua_type(L, -1) != LUA_TSTRING)
        luaL_error(L, "%s: option '%s' must be a string, got %s", fn, k,
                   luaL_typename(L, -1));
    *out = lua_tolstring(L, -1, &len);
    if (strlen(*out) != len)
        return jr_fail(err, JR_EINPUT, "%s: option '%s' holds a NUL", fn,
                       k);
    return 0;
}

/* Reads the value on top into p under key k, or raises.  [-0, +0, v] */
static int
read_one(lua_State *L, const char *fn, const char *k, jr_push *p,
         jr_err *err)
{
    if (strcmp(k, "run_in") == 0)
        p->run_in = jr_luaopts_number(L, fn, k);
    else if (strcmp(k, "run_at") == 0)
        p->run_at = jr_luaopts_number(L, fn, k);
    else if (strcmp(k, "priority") == 0)
        p->priority = (int)jr_luaopts_int(L, fn, k, INT_MIN, INT_MAX);
    else if (strcmp(k, "max_retries") == 0)
        p->max_retries = (int)jr_luaopts_int(L, fn, k, 0, INT_MAX);
    else if (strcmp(k, "queue") == 0)
        return read_queue(L, fn, p, err);
    else if (strcmp(k, "unique_key") == 0)
        return read_unique_key(L, fn, p, err);
    else if (strcmp(k, "unique_for") == 0)
        p->unique_for = jr_luaopts_number(L, fn, k);
    else if (strcmp(k, "on_conflict") == 0)
        p->on_conflict = read_on_conflict(L, fn);
    else if (strcmp(k, "key") == 0)
        return read_key(L, fn, p, err);
    else if (strcmp(k, "result_ttl") == 0)
        p->result_ttl = jr_luaopts_number(L, fn, k);
    else if (strcmp(k, "after") == 0)
        return read_after(L, fn, p);
    else if (strcmp(k, "on_parent_failure") == 0)
        p->on_parent_failure = read_opf(L, fn);
    else if (strcmp(k, "batch") == 0)
        p->batch = jr_luaopts_int(L, fn, k, 1, INT64_MAX);
    else if (strcmp(k, "sequence") == 0)
        return read_sequence(L, fn, p, err);
    else if (strcmp(k, "on_failure") == 0)
        p->seq_fail = read_seq_fail(L, fn);
    else if (strcmp(k, "expires_in") == 0)
        p->expires_in = jr_luaopts_number(L, fn, k);
    else if (strcmp(k, "expires_at") == 0)
        p->expires_at = jr_luaopts_number(L, fn, k);
    else if (strcmp(k, "deadline") == 0)
        p->deadline = jr_luaopts_number(L, fn, k);
    else if (strcmp(k, "traceparent") == 0)
        return read_trace(L, fn, k, &p->traceparent, err);
    else if (strcmp(k, "tracestate") == 0)
        return read_trace(L, fn, k, &p->tracestate, err);
    else if (strcmp(k, "cost") == 0)
        p->cost = (long)jr_luaopts_int(L, fn, k, 1, JR_COST_MAX);
    else
        luaL_error(L, "%s: unknown option '%s' (valid: run_in, run_at, "
                   "priority, queue, max_retries, unique_key, unique_for, "
                   "on_conflict, key, result_ttl, after, on_parent_failure, "
                   "batch, sequence, on_failure, expires_in, expires_at, "
                   "deadline, traceparent, tracestate, cost)", fn, k);
    return 0;
}

int
jr_luaopts_push(lua_State *L, int idx, const char *fn, jr_push *p,
                jr_err *err)
{
    int rc = 0;

    idx = lua_absindex(L, idx);
    p->run_in = p->run_at = 0;
    p->priority = 0;
    p->queue = NULL;
    p->max_retries = -1;
    p->unique_key = NULL;
    p->unique_for = 0;
    p->on_conflict = JR_CONFLICT_KEEP;
    p->key = NULL;
    p->result_ttl = 0;
    p->after = NULL;
    p->nafter = 0;
    p->on_parent_failure = JR_OPF_DEFAULT;
    p->batch = 0;
    p->sequence = NULL;
    p->seq_fail = JR_SEQ_BLOCK;
    p->expires_at = p->expires_in = p->deadline = 0;
    p->traceparent = NULL;
    p->tracestate = NULL;
    p->cost = 0;
    jr_err_clear(err);
    if (!lua_isnoneornil(L, idx)) {
        luaL_checktype(L, idx, LUA_TTABLE);
        lua_pushnil(L);                              /* nil */
        while (lua_next(L, idx)) {                   /* k v */
            const char *k = lua_type(L, -2) == LUA_TSTRING ?
                            lua_tostring(L, -2) : "(not a string)";
            if (rc == 0)    /* the first bad value is the one reported */
                rc = read_one(L, fn, k, p, err);
            else
                read_one(L, fn, k, p, NULL);
            lua_pop(L, 1);                           /* k */
        }                                            /* (nothing) */
    }
    if (rc < 0 || p->name == NULL)
        return rc;
    return jr_push_check(p, 0, err);
}
