/* wexecarg.c - jobrunner.exec's arguments read and checked before any
 * child starts: the argv list, the env table over the worker's own
 * environment, the timeout. Raises with what is wrong (never an env
 * value: it may be a secret). Uses worker_int.h. */
#define _GNU_SOURCE
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>

#include "worker/worker_int.h"

#define EXEC_MAX_ARGS (1 << 20)         /* execve takes fewer (ARG_MAX) */

extern char **environ;

/* The argv table at 1 as a NULL-ended array in a userdata left on the
 * stack. Its strings are anchored in the userdata's user value: a number
 * is converted on the stack only, and the collector would free its string
 * once popped, while argv still points at it. Raises on an element that is
 * not a string or a number, or that holds a NUL byte (execvp would cut the
 * rest). [-0, +1, v] */
char **
jr_wexec_read_argv(lua_State *L)
{
    lua_Integer count = luaL_len(L, 1); /* a __len may say anything */
    int n = (int)count, i;
    char **argv;

    luaL_argcheck(L, count >= 1, 1, "must be a non-empty list of strings");
    if (count > EXEC_MAX_ARGS)
        luaL_error(L, "jobrunner.exec: argv has %I elements, more than %d",
                   count, EXEC_MAX_ARGS);
    argv = lua_newuserdatauv(L, (size_t)(n + 1) * sizeof *argv, 1);
    lua_createtable(L, n, 0);                        /* .. u strs */
    for (i = 1; i <= n; i++) {
        int ty = lua_geti(L, 1, i);                  /* .. u strs v */
        size_t len;
        const char *s;

        if (ty != LUA_TSTRING && ty != LUA_TNUMBER)
            luaL_argerror(L, 1, "must be a non-empty list of strings");
        s = lua_tolstring(L, -1, &len);              /* .. u strs s */
        if (strlen(s) != len)
            luaL_error(L, "jobrunner.exec: argv[%d] contains a NUL byte", i);
        memcpy(&argv[i - 1], &s, sizeof s);          /* execvp's type */
        lua_rawseti(L, -2, i);                       /* .. u strs */
    }
    argv[n] = NULL;
    lua_setiuservalue(L, -2, 1);                     /* .. u */
    return argv;
}

/* Checks the env pair on the stack: a name and a value, both strings
 * without NUL bytes, the name not empty and without '='. Raises with the
 * name (never the value: it may be a secret). [-0, +0, v] */
static void
check_env_pair(lua_State *L)
{
    size_t nlen, vlen;
    const char *name;

    if (lua_type(L, -2) != LUA_TSTRING)              /* .. name value */
        luaL_error(L, "jobrunner.exec: env names must be strings, got %s",
                   luaL_typename(L, -2));
    name = lua_tolstring(L, -2, &nlen);
    if (lua_type(L, -1) != LUA_TSTRING)
        luaL_error(L, "jobrunner.exec: env '%s' must be a string, got %s",
                   name, luaL_typename(L, -1));
    if (nlen == 0)
        luaL_error(L, "jobrunner.exec: an env name is empty");
    if (strlen(name) != nlen)
        luaL_error(L, "jobrunner.exec: env name '%s' contains a NUL byte",
                   name);
    if (strchr(name, '=') != NULL)
        luaL_error(L, "jobrunner.exec: env name '%s' contains '='", name);
    if (strlen(lua_tolstring(L, -1, &vlen)) != vlen)
        luaL_error(L, "jobrunner.exec: env '%s' contains a NUL byte", name);
}

/* The options' env (names to strings) over the worker's environment, as a
 * NULL-ended array in a userdata left on the stack, its NAME=value strings
 * (the worker's own copied too) anchored in the userdata's user value; or
 * NULL and nothing pushed without one. Raises on a bad table (see
 * check_env_pair) before it pushes anything. [-0, +(0|1), v] */
char **
jr_wexec_read_env(lua_State *L)
{
    int n = 0, k = 0, e, i;
    char **envp;
    const char *s;

    if (lua_type(L, 2) != LUA_TTABLE)
        return NULL;
    if (lua_getfield(L, 2, "env") == LUA_TNIL)       /* .. env */
        return lua_pop(L, 1), NULL;
    luaL_argcheck(L, lua_istable(L, -1), 2, "'env' must be a table");
    for (lua_pushnil(L); lua_next(L, -2); lua_pop(L, 1), n++)
        check_env_pair(L);                           /* .. env name value */
    for (e = 0; environ[e] != NULL; e++)
        ;
    envp = lua_newuserdatauv(L, (size_t)(n + e + 1) * sizeof *envp, 1);
    lua_createtable(L, n + e, 0);                    /* .. env u strs */
    for (lua_pushnil(L); lua_next(L, -4); lua_pop(L, 1)) {
        s = lua_pushfstring(L, "%s=%s", lua_tostring(L, -2),
                            lua_tostring(L, -1));    /* .. strs name v s */
        memcpy(&envp[k], &s, sizeof s);
        lua_rawseti(L, -4, ++k);                     /* .. strs name v */
    }
    for (i = 0; i < e; i++) {                        /* .. env u strs */
        const char *eq = strchr(environ[i], '=');
        lua_pushlstring(L, environ[i], eq ? (size_t)(eq - environ[i]) : 0);
        if (lua_rawget(L, -4) == LUA_TNIL) {         /* .. strs v */
            s = lua_pushstring(L, environ[i]);       /* .. strs v s */
            memcpy(&envp[k], &s, sizeof s);
            lua_rawseti(L, -3, ++k);                 /* .. strs v */
        }
        lua_pop(L, 1);                               /* .. env u strs */
    }
    envp[k] = NULL;
    lua_setiuservalue(L, -2, 1);                     /* .. env u */
    lua_remove(L, -2);                               /* .. u */
    return envp;
}

double
jr_wexec_opt_timeout(lua_State *L)
{
    double t = 0;

    if (lua_type(L, 2) != LUA_TTABLE)
        return 0;
    if (lua_getfield(L, 2, "timeout") != LUA_TNIL) {
        t = lua_tonumber(L, -1);
        luaL_argcheck(L, lua_type(L, -1) == LUA_TNUMBER && isfinite(t) &&
                      t > 0, 2, "'timeout' must be a number of seconds > 0");
    }
    lua_pop(L, 1);
    return t;
}
