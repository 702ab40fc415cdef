/* cfgbackoff.c - the config's backoff, a Lua function or number in
 * jobrunner.lua, called for a retry in the config's state under the one
 * instruction budget (luabridge.h). Declared in config.h; the master's
 * retry path (pool.c, through retry.h's config_fn) and a worker's handler
 * function backoff (jr_config_backoff_call) use it. Uses config.h,
 * luabridge.h via script.h, log.h. */
#include <lauxlib.h>
#include <lua.h>

#include "config/config.h"
#include "base/log.h"
#include "lua/script.h"

double
jr_config_backoff_call(lua_State *L, int nargs, const jr_job *j)
{
    jr_err err;
    double d = -1;

    if (jr_luabridge_run(L, nargs, 1, JR_LUA_BUDGET, &err) < 0) { /* (nothing) */
        jr_log(JR_LOG_WARN, "job %lld (%s): backoff failed, using the "
               "default: %s", (long long)j->id, j->name, err.msg);
        return -1;
    }                                                /* d */
    if (lua_type(L, -1) == LUA_TNUMBER && lua_tonumber(L, -1) >= 0)
        d = lua_tonumber(L, -1);
    else
        jr_log(JR_LOG_WARN, "job %lld (%s): backoff returned %s, not a "
               "number >= 0; using the default", (long long)j->id, j->name,
               luaL_typename(L, -1));
    lua_pop(L, 1);                                   /* (nothing) */
    return d;
}

double
jr_config_backoff(const jr_config *c, const jr_job *j, int max_retries,
                  const char *error)
{
    lua_State *L = c->L;
    int top, t;
    double d = -1;

    if (L == NULL || c->ref == LUA_NOREF)
        return -1;
    top = lua_gettop(L);
    lua_rawgeti(L, LUA_REGISTRYINDEX, c->ref);       /* cfg */
    if (lua_getfield(L, -1, "backoff") == LUA_TFUNCTION) {  /* cfg f */
        jr_luabridge_push_job(L, j, max_retries);       /* cfg f job */
        lua_pushinteger(L, j->attempt);              /* cfg f job attempt */
        lua_pushstring(L, error);                    /* cfg f job a err */
        d = jr_config_backoff_call(L, 3, j);                   /* cfg */
    } else {                                         /* cfg v */
        lua_pop(L, 1);                               /* cfg */
        if (lua_getfield(L, -1, "defaults") == LUA_TTABLE) {  /* cfg d */
            t = lua_getfield(L, -1, "backoff");      /* cfg d b */
            if (t == LUA_TNUMBER) {
                d = lua_tonumber(L, -1);
            } else if (t == LUA_TFUNCTION) {
                lua_pushinteger(L, j->attempt);      /* cfg d b attempt */
                lua_pushstring(L, error);            /* cfg d b a err */
                d = jr_config_backoff_call(L, 2, j);           /* cfg d */
            }
        }
    }
    lua_settop(L, top);
    return d;
}
