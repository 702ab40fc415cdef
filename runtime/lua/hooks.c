/* hooks.c - lifecycle hooks. Each defined hook is a registry ref taken once
 * at start; firing pushes the function, builds the event table in place,
 * and calls it through jr_luabridge_run under JR_LUA_BUDGET instructions.
 * A failure is logged with its traceback and never reaches the runner. */
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "lua/hooks.h"
#include "base/log.h"
#include "lua/luabridge.h"

static const char *const hook_names[JR_HOOK_COUNT] = {
    "on_start", "on_stop", "on_reload", "on_job_start", "on_job_success",
    "on_job_retry", "on_job_dead", "on_scale", "on_tick"};

struct jr_hooks {
    lua_State *L;
    int        ref[JR_HOOK_COUNT];  /* LUA_NOREF when absent */
    int        which;               /* hook being built */
    int        top;                 /* stack top before begin */
};

static int
hook_index(const char *name)
{
    int i;

    for (i = 0; i < JR_HOOK_COUNT; i++)
        if (strcmp(hook_names[i], name) == 0)
            return i;
    return -1;
}

int
jr_hooks_check(lua_State *L, const char *file, jr_err *err)
{
    lua_pushnil(L);                                  /* hooks nil */
    while (lua_next(L, -2)) {                        /* hooks k v */
        const char *k = lua_type(L, -2) == LUA_TSTRING ?
                        lua_tostring(L, -2) : "?";
        int known = hook_index(k) >= 0, fn = lua_isfunction(L, -1);
        lua_pop(L, 1);                               /* hooks k */
        if (!known || !fn) {
            lua_pop(L, 1);                           /* hooks */
            if (!known)
                return jr_fail(err, JR_ECONFIG, "%s: unknown hook "
                               "'hooks.%s' (valid: on_start, on_stop, "
                               "on_reload, on_job_start, on_job_success, "
                               "on_job_retry, on_job_dead, on_scale, "
                               "on_tick)", file, k);
            return jr_fail(err, JR_ECONFIG, "%s: 'hooks.%s' must be a "
                           "function", file, k);
        }
    }                                                /* hooks */
    return 0;
}

jr_hooks *
jr_hooks_new(lua_State *L, int cfg_ref)
{
    jr_hooks *h;
    int i, any = 0;

    if (L == NULL || cfg_ref == LUA_NOREF || cfg_ref == LUA_REFNIL)
        return NULL;
    if ((h = calloc(1, sizeof *h)) == NULL)
        return NULL;
    h->L = L;
    lua_rawgeti(L, LUA_REGISTRYINDEX, cfg_ref);      /* cfg */
    lua_getfield(L, -1, "hooks");                    /* cfg hooks */
    for (i = 0; i < JR_HOOK_COUNT; i++) {
        h->ref[i] = LUA_NOREF;
        if (!lua_istable(L, -1))
            continue;
        if (lua_getfield(L, -1, hook_names[i]) == LUA_TFUNCTION) {
            h->ref[i] = luaL_ref(L, LUA_REGISTRYINDEX);  /* cfg hooks */
            any = 1;
        } else {                                     /* cfg hooks v */
            lua_pop(L, 1);                           /* cfg hooks */
        }
    }
    lua_pop(L, 2);                                   /* (nothing) */
    if (!any) {
        free(h);
        return NULL;
    }
    return h;
}

void
jr_hooks_free(jr_hooks *h)
{
    free(h);                    /* the refs die with the state */
}

int
jr_hooks_has(const jr_hooks *h, int which)
{
    return h != NULL && h->ref[which] != LUA_NOREF;
}

int
jr_hook_begin(jr_hooks *h, int which)
{
    if (!jr_hooks_has(h, which))
        return 0;
    h->which = which;
    h->top = lua_gettop(h->L);
    lua_rawgeti(h->L, LUA_REGISTRYINDEX, h->ref[which]); /* f */
    lua_newtable(h->L);                              /* f ev */
    lua_pushstring(h->L, hook_names[which] + 3);     /* f ev name */
    lua_setfield(h->L, -2, "event");                 /* f ev */
    return 1;
}

void
jr_hook_int(jr_hooks *h, const char *key, long long v)
{
    lua_pushinteger(h->L, (lua_Integer)v);
    lua_setfield(h->L, -2, key);
}

void
jr_hook_num(jr_hooks *h, const char *key, double v)
{
    lua_pushnumber(h->L, v);
    lua_setfield(h->L, -2, key);
}

void
jr_hook_str(jr_hooks *h, const char *key, const char *v)
{
    if (v == NULL)
        return;
    lua_pushstring(h->L, v);
    lua_setfield(h->L, -2, key);
}

void
jr_hook_bool(jr_hooks *h, const char *key, int v)
{
    lua_pushboolean(h->L, v);
    lua_setfield(h->L, -2, key);
}

void
jr_hook_open(jr_hooks *h, const char *key)
{
    lua_pushstring(h->L, key);                       /* .. t key */
    lua_newtable(h->L);                              /* .. t key sub */
}

void
jr_hook_close(jr_hooks *h)
{
    lua_settable(h->L, -3);                          /* .. t */
}

/* The targets in the table r on top: workers, queues = {name = n}.
 * [-0, +0, -] */
static int
read_targets(lua_State *L, double *result, jr_hook_target_fn fn, void *arg)
{
    int rc = 0;

    if (lua_getfield(L, -1, "workers") == LUA_TNUMBER) {  /* r w */
        *result = lua_tonumber(L, -1);
        rc = 1;
    }
    lua_pop(L, 1);                                   /* r */
    if (lua_getfield(L, -1, "queues") == LUA_TTABLE) {    /* r qs */
        lua_pushnil(L);                              /* r qs nil */
        while (lua_next(L, -2)) {                    /* r qs k v */
            if (lua_type(L, -2) == LUA_TSTRING &&
                lua_type(L, -1) == LUA_TNUMBER)
                fn(lua_tostring(L, -2), lua_tonumber(L, -1), arg);
            lua_pop(L, 1);                           /* r qs k */
        }                                            /* r qs */
    }
    lua_pop(L, 1);                                   /* r */
    return rc;
}

int
jr_hook_fire_targets(jr_hooks *h, double *result, jr_hook_target_fn fn,
                     void *arg)
{
    lua_State *L = h->L;
    jr_err err;
    int rc = 0;

    if (jr_luabridge_run(L, 1, 1, JR_LUA_BUDGET, &err) < 0) { /* (nothing) */
        jr_log(JR_LOG_ERROR, "hook %s failed (jobs go on): %s",
               hook_names[h->which], err.msg);
        lua_settop(L, h->top);
        return -1;
    }                                                /* r */
    if (result != NULL && lua_type(L, -1) == LUA_TNUMBER) {
        *result = lua_tonumber(L, -1);
        rc = 1;
    } else if (result != NULL && fn != NULL &&
               lua_type(L, -1) == LUA_TTABLE) {
        rc = read_targets(L, result, fn, arg);
    }
    lua_settop(L, h->top);
    return rc;
}

int
jr_hook_fire(jr_hooks *h, double *result)
{
    return jr_hook_fire_targets(h, result, NULL, NULL);
}
