/* jrwait.c - durable waits in handlers: jobrunner.wait_signal(name,
 * {timeout}), sleep_until(t) and sleep_for(seconds). Each answers from
 * job.waits, the records of the job's signals and sleeps that the claim
 * read with the job (jobs.waits, NULL for a job that never waited nor
 * was signalled): a delivered signal's payload, a timeout, a deadline or
 * a wake date recorded by an earlier attempt. A wait that cannot return
 * now unwinds the handler with a jobrunner.signal of kind JR_WAIT, as
 * snooze() does: the attempt ends without counting, and the database
 * makes the job waiting (or ready at once when the signal came while it
 * ran), holding no worker, lease or connection. Uses jrlib.h for the
 * job's context and the unwinding, jsondec.h to read the records, util.h
 * for durations and the clock. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "base/job.h"
#include "base/util.h"
#include "lua/jrlib.h"
#include "lua/jrwait.h"
#include "lua/jsondec.h"

/* Pushes job.waits[section][key] and returns 1, or pushes nothing and
 * returns 0 when the job has no such record. Records the runner could
 * not read raise naming the job. [-0, +(1|0), v] */
static int
record(lua_State *L, const jr_jobctx *ctx, const char *section,
       const char *key)
{
    const char *w = ctx->job->waits;
    char why[200];

    if (w == NULL)
        return 0;
    if (jr_json_decode_safe(L, w, strlen(w), why, sizeof why) < 0)
        return luaL_error(L, "job %I: its waits record cannot be decoded: "
                          "%s", (lua_Integer)ctx->job->id, why);
    if (!lua_istable(L, -1)) {                       /* W */
        lua_pop(L, 1);
        return 0;
    }
    if (lua_getfield(L, -1, section) != LUA_TTABLE) {   /* W S */
        lua_pop(L, 2);
        return 0;
    }
    if (lua_getfield(L, -1, key) == LUA_TNIL) {      /* W S v */
        lua_pop(L, 3);
        return 0;
    }
    lua_replace(L, -3);                              /* v S */
    lua_pop(L, 1);                                   /* v */
    return 1;
}

/* The timeout option of wait_signal at idx: seconds (a number or a
 * duration such as "3d"), or 0 when not given. [-0, +0, v] */
static double
opt_timeout(lua_State *L, int idx)
{
    double t = 0;
    jr_err err;

    if (lua_isnoneornil(L, idx))
        return 0;
    luaL_checktype(L, idx, LUA_TTABLE);
    switch (lua_getfield(L, idx, "timeout")) {       /* .. t */
    case LUA_TNIL:
        lua_pop(L, 1);                               /* .. */
        return 0;
    case LUA_TNUMBER:
        t = lua_tonumber(L, -1);
        break;
    case LUA_TSTRING:
        if (jr_parse_duration(lua_tostring(L, -1), "timeout", &t, &err) < 0)
            luaL_error(L, "jobrunner.wait_signal: %s", err.msg);
        break;
    default:
        luaL_error(L, "jobrunner.wait_signal: timeout must be seconds or a "
                   "duration such as \"3d\", not a %s", luaL_typename(L, -1));
    }
    lua_pop(L, 1);                                   /* .. */
    if (!isfinite(t) || t <= 0 || t > JR_DELAY_MAX)
        luaL_error(L, "jobrunner.wait_signal: timeout must be above 0 "
                   "seconds, at most 100 years");
    return t;
}

/* jobrunner.wait_signal(name [, {timeout = secs|"3d"}]): the payload of
 * the signal name sent to this job (now, or before, or on a later run),
 * or nil, "timeout" once its deadline passed without it. The deadline is
 * set by the first attempt that waits and kept by the later ones.
 * [-0, +(1|2), v] */
static int
jrwait_wait_signal(lua_State *L)
{
    size_t len;
    const char *name = luaL_checklstring(L, 1, &len);
    double timeout;
    jr_jobctx *ctx;
    jr_signal s;
    jr_err err;

    if (jr_name_check_len(name, len, "signal name", &err) < 0)
        return luaL_error(L, "jobrunner.wait_signal: %s", err.msg);
    timeout = opt_timeout(L, 2);
    ctx = jr_jrlib_job(L, "wait_signal");
    if (record(L, ctx, "signals", name)) {           /* .. rec */
        if (lua_istable(L, -1))
            lua_getfield(L, -1, "payload");          /* .. rec payload */
        else
            lua_pushnil(L);
        return 1;
    }
    if (record(L, ctx, "timeouts", name)) {          /* .. t */
        lua_pushnil(L);                              /* .. t nil */
        lua_pushliteral(L, "timeout");               /* .. t nil "timeout" */
        return 2;
    }
    memset(&s, 0, sizeof s);
    s.kind = JR_WAIT;
    snprintf(s.wait_on, sizeof s.wait_on, "%s", name);
    s.wake_at = timeout > 0 ? jr_now() + timeout : INFINITY;
    if (record(L, ctx, "deadlines", name)) {         /* .. d */
        if (lua_isnumber(L, -1))
            s.wake_at = lua_tonumber(L, -1);
        lua_pop(L, 1);                               /* .. */
    }
    return jr_jrlib_raise(L, ctx, &s);
}

/* The next sleep of the attempt, until wake unless an earlier attempt
 * recorded its date: returns at once when that date has come, else ends
 * the attempt until then. [-0, +0, v] */
static int
sleep_to(lua_State *L, const char *fn, double wake, int relative)
{
    jr_jobctx *ctx = jr_jrlib_job(L, fn);
    int n = ++ctx->nsleeps;
    char key[16];
    jr_signal s;

    snprintf(key, sizeof key, "%d", n);
    if (record(L, ctx, "sleeps", key)) {             /* .. t */
        if (lua_isnumber(L, -1))
            wake = lua_tonumber(L, -1);
        lua_pop(L, 1);                               /* .. */
    } else if (relative) {
        wake += jr_now();
    }
    if (jr_now() >= wake)
        return 0;
    memset(&s, 0, sizeof s);
    s.kind = JR_WAIT;
    s.wake_at = wake;
    s.sleep_n = n;
    return jr_jrlib_raise(L, ctx, &s);
}

/* jobrunner.sleep_until(t): returns once the Unix time t has come; the
 * job waits meanwhile without a worker. [-0, +0, v] */
static int
jrwait_sleep_until(lua_State *L)
{
    double t = luaL_checknumber(L, 1);

    luaL_argcheck(L, isfinite(t) && fabs(t) <= JR_TIME_MAX, 1,
                  "must be epoch seconds, at most 253402300799");
    return sleep_to(L, "sleep_until", t, 0);
}

/* jobrunner.sleep_for(seconds): the same, seconds after the first
 * attempt that reached it (a later attempt keeps that date). */
static int
jrwait_sleep_for(lua_State *L)
{
    double secs = luaL_checknumber(L, 1);

    luaL_argcheck(L, isfinite(secs) && secs >= 0 && secs <= JR_DELAY_MAX, 1,
                  "must be seconds from 0 to 3155760000");
    return sleep_to(L, "sleep_for", secs, 1);
}

static const luaL_Reg jrwait_funcs[] = {
    {"wait_signal", jrwait_wait_signal},
    {"sleep_until", jrwait_sleep_until},
    {"sleep_for", jrwait_sleep_for},
    {NULL, NULL}
};

void
jr_jrwait_register(lua_State *L)                     /* M */
{
    luaL_setfuncs(L, jrwait_funcs, 0);               /* M */
}
