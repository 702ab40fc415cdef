/* limitslua.c - limits from the hooks' Lua: the module "jobrunner.limits"
 * (also the `limits` field of "jobrunner" when a hook loaded the producer
 * module) in the master's config state, with get and set over the
 * master's live limits (limitsrun.c, limits.h). A change reaches the
 * next claim; limits hold in this runner until it stops (the config's
 * come back at the next start). Uses svc.h, limits.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "base/log.h"
#include "master/svc.h"
#include "services/limits.h"

/* The master, the upvalue of every function here.  [-0, +0, -] */
static master *
self(lua_State *L)
{
    return lua_touserdata(L, lua_upvalueindex(1));
}

/* The limits service's state. */
static jr_limitsrun *
lims(master *m)
{
    return jr_service_state(m, &jr_limits_service);
}

/* Pushes one set as { concurrency, rate, per_second, burst }.
 * [-0, +1, m] */
static void
push_set(lua_State *L, const jr_limit_set *s)
{
    lua_createtable(L, 0, 4);                        /* t */
    lua_pushinteger(L, s->concurrency);              /* t n */
    lua_setfield(L, -2, "concurrency");              /* t */
    if (s->rate > 0) {
        lua_pushstring(L, s->rate_text);             /* t s */
        lua_setfield(L, -2, "rate");                 /* t */
    }
    lua_pushnumber(L, s->rate);                      /* t n */
    lua_setfield(L, -2, "per_second");               /* t */
    lua_pushnumber(L, s->burst);                     /* t n */
    lua_setfield(L, -2, "burst");                    /* t */
}

/* Pushes limit l as a table; per_key holds the per-key set.
 * [-0, +1, m] */
static void
push_limit(lua_State *L, const jr_limit *l)
{
    push_set(L, &l->all);                            /* t */
    push_set(L, &l->per_key);                        /* t pk */
    lua_setfield(L, -2, "per_key");                  /* t */
    if (l->key_path) {
        lua_pushfstring(L, "payload.%s", l->key_path); /* t path */
        lua_setfield(L, -2, "key");                  /* t */
    }
    if (l->fair_path) {
        lua_createtable(L, 0, 3);                    /* t f */
        lua_pushfstring(L, "payload.%s", l->fair_path); /* t f path */
        lua_setfield(L, -2, "key");                  /* t f */
        lua_pushnumber(L, l->fair_default);          /* t f d */
        lua_setfield(L, -2, "default");              /* t f */
        lua_pushstring(L, l->fair_weights ? l->fair_weights : "{}");
        lua_setfield(L, -2, "weights");              /* t f (JSON text) */
        lua_setfield(L, -2, "fair");                 /* t */
    }
    if (l->aging > 0) {
        lua_pushnumber(L, l->aging);                 /* t s */
        lua_setfield(L, -2, "priority_aging");       /* t */
    }
}

/* Whether copy, read over limit l (NULL: new), names a fair key that l
 * has not: the key is the config's. */
static int
fair_key_moved(const jr_limit *l, const jr_limit *copy)
{
    if (copy->fair_path == NULL)
        return 0;
    return l == NULL || l->fair_path == NULL ||
           strcmp(l->fair_path, copy->fair_path) != 0;
}

/* limits.get(name): the limit of a job name or "queue:NAME", or nil;
 * limits.get(): every limit, by name.  [-0, +1, m] */
static int
limits_get(lua_State *L)
{
    master *m = self(L);
    const jr_limit *l;
    int i;

    if (lua_isnoneornil(L, 1)) {
        lua_createtable(L, 0, lims(m)->live.n);          /* all */
        for (i = 0; i < lims(m)->live.n; i++) {
            push_limit(L, &lims(m)->live.l[i]);          /* all t */
            lua_setfield(L, -2, lims(m)->live.l[i].scope); /* all */
        }
        return 1;
    }
    l = jr_limits_find(&lims(m)->live, luaL_checkstring(L, 1));
    if (l == NULL)
        lua_pushnil(L);                              /* nil */
    else
        push_limit(L, l);                            /* t */
    return 1;
}

/* limits.set(name, { concurrency =, rate =, burst =, per_key = {...} }):
 * changes the fields given (rate = false removes the rate; concurrency
 * = 0 the cap) of name's limit, made if new. Returns true, or nil and a
 * message naming the key; a non-string name raises.  [-0, +1|2, m] */
static int
limits_set(lua_State *L)
{
    master *m = self(L);
    const char *name = luaL_checkstring(L, 1);
    char key[200], what[300];
    jr_limit *l, copy;

    luaL_checktype(L, 2, LUA_TTABLE);
    lua_settop(L, 2);                                /* name t */
    l = jr_limits_find(&lims(m)->live, name);
    memset(&copy, 0, sizeof copy);
    if (l != NULL) {
        copy = *l;
        copy.key_path = NULL;                        /* not set here */
        /* a fair queue's weights and default change here, its key not */
        copy.fair_path = l->fair_path ? strdup(l->fair_path) : NULL;
        copy.fair_weights = l->fair_weights ? strdup(l->fair_weights) :
                            NULL;
    }
    if (jr_limit_read(L, name, &copy, key, sizeof key, what,
                      sizeof what) < 0 || copy.key_path != NULL ||
        fair_key_moved(l, &copy)) {
        if (copy.key_path != NULL)
            snprintf(what, sizeof what, "is set in the config only (a "
                     "producer's push reads it from the database)");
        else if (fair_key_moved(l, &copy))
            snprintf(what, sizeof what, "is set in the config only: a "
                     "fair queue's key (its weights and default change "
                     "here, or with jobrunner fair set)");
        free(copy.key_path);
        free(copy.fair_path);
        free(copy.fair_weights);
        lua_pushnil(L);                              /* name t nil */
        lua_pushfstring(L, "jobrunner.limits.set: '%s' %s", key, what);
        return 2;
    }
    if (l == NULL && (lims(m)->live.n >= JR_LIMIT_MAX ||
                      (l = jr_limits_add(&lims(m)->live, name)) == NULL)) {
        lua_pushnil(L);
        lua_pushfstring(L, "jobrunner.limits.set: '%s': %s", name,
                        lims(m)->live.n >= JR_LIMIT_MAX ? "too many limits" :
                        "out of memory");
        return 2;
    }
    l->all = copy.all;
    l->per_key = copy.per_key;
    l->aging = copy.aging;
    if (copy.fair_path != NULL) {   /* the same key: new weights */
        free(l->fair_weights);
        l->fair_weights = copy.fair_weights;
        l->fair_default = copy.fair_default;
        copy.fair_weights = NULL;
    }
    free(copy.fair_path);
    free(copy.fair_weights);
    jr_log(JR_LOG_INFO, "limit %s: concurrency %d, rate %s; per key "
           "concurrency %d, rate %s (hook)", name, l->all.concurrency,
           l->all.rate > 0 ? l->all.rate_text : "none",
           l->per_key.concurrency,
           l->per_key.rate > 0 ? l->per_key.rate_text : "none");
    lims(m)->changed = 1;
    jr_svc_want_claim(m);       /* a higher cap may let jobs through now */
    jr_svc_kick(m);
    lua_pushboolean(L, 1);                           /* name t true */
    return 1;
}

static const luaL_Reg limits_fns[] = {
    {"get", limits_get}, {"set", limits_set}, {NULL, NULL}};

void
jr_limitslua_open(master *m)
{
    lua_State *L = jr_svc_config(m)->L;

    if (L == NULL)
        return;
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE); /* loaded */
    lua_createtable(L, 0, 2);                        /* loaded lib */
    lua_pushlightuserdata(L, m);                     /* loaded lib m */
    luaL_setfuncs(L, limits_fns, 1);                 /* loaded lib */
    lua_pushvalue(L, -1);                            /* loaded lib lib */
    lua_setfield(L, -3, "jobrunner.limits");         /* loaded lib */
    if (lua_getfield(L, -2, "jobrunner") == LUA_TTABLE) { /* loaded lib jr */
        lua_pushvalue(L, -2);                        /* loaded lib jr lib */
        lua_setfield(L, -2, "limits");               /* loaded lib jr */
    }
    lua_pop(L, 3);                                   /* (nothing) */
}
