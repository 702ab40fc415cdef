/* cfghttp.c - the config's `http` table: { listen = "127.0.0.1:8089",
 * token = "...", max_connections = 256 }. The address itself is checked when the server starts
 * (http.c); here only the types, the keys and the token's length. The
 * token is never logged. Uses config.h. */
#include <ctype.h>
#include <lauxlib.h>
#include <lua.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"

static int
string_key(lua_State *L, const char *k, char **slot, char *key,
           size_t keysize, char *what, size_t whatsize)
{
    jr_err err;
    int rc = 0;

    lua_getfield(L, -1, k);                          /* t v */
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        return 0;
    }
    snprintf(key, keysize, "http.%s", k);
    if (lua_type(L, -1) != LUA_TSTRING) {
        snprintf(what, whatsize, "must be a string, got %s",
                 luaL_typename(L, -1));
        rc = -1;
    } else if (strlen(lua_tostring(L, -1)) != lua_rawlen(L, -1)) {
        snprintf(what, whatsize, "must not contain a NUL byte");
        rc = -1;
    } else if (jr_config_set(slot, lua_tostring(L, -1), &err) < 0) {
        snprintf(what, whatsize, "%s", err.msg);
        rc = -1;
    }
    lua_pop(L, 1);                                   /* t */
    return rc;
}

/* http.max_connections: a whole number from 1 to JR_HTTP_CONNS_MAX. */
static int
conns_key(lua_State *L, int *slot, char *key, size_t keysize, char *what,
          size_t whatsize)
{
    lua_Integer v = 0;
    int ok;

    lua_getfield(L, -1, "max_connections");          /* t v */
    ok = lua_isnil(L, -1) || (lua_isinteger(L, -1) &&
         (v = lua_tointeger(L, -1)) >= 1 && v <= JR_HTTP_CONNS_MAX);
    if (!ok) {
        snprintf(key, keysize, "http.max_connections");
        snprintf(what, whatsize, "must be a whole number from 1 to %d, "
                 "got %s", JR_HTTP_CONNS_MAX, lua_type(L, -1) == LUA_TNUMBER ?
                 lua_tostring(L, -1) : luaL_typename(L, -1));
    } else if (v > 0) {
        *slot = (int)v;
    }
    lua_pop(L, 1);                                   /* t */
    return ok ? 0 : -1;
}

/* -1 with what set when listen is not HOST:PORT with a port of digits
 * from 0 to 65535 ("127.0.0.1:8080.5" passed `check` and stopped `run`;
 * the host itself is resolved when the server starts, http.c). */
static int
listen_why(const char *addr, char *what, size_t whatsize)
{
    const char *colon = strrchr(addr, ':');
    size_t n = colon ? strspn(colon + 1, "0123456789") : 0;

    if (colon == NULL || colon == addr || n == 0 || n > 5 ||
        colon[1 + n] != '\0' || atol(colon + 1) > 65535)
        return snprintf(what, whatsize, "'%.200s' is not HOST:PORT with a "
                        "port from 0 to 65535, such as \"127.0.0.1:8089\"",
                        addr), -1;
    return 0;
}

/* -1 with what set when token cannot be sent as a Bearer token or is
 * too easy to guess. */
static int
token_why(const char *token, char *what, size_t whatsize)
{
    size_t n = strlen(token), blank = 0, i;

    for (i = 0; i < n; i++)
        if (isspace((unsigned char)token[i]))
            blank++;
    if (blank == n)
        return snprintf(what, whatsize, "is blank"), -1;
    if (n < JR_HTTP_TOKEN_MIN)
        return snprintf(what, whatsize, "is too short: at least %d "
                        "characters", JR_HTTP_TOKEN_MIN), -1;
    if (n > JR_HTTP_TOKEN_MAX)
        return snprintf(what, whatsize, "is too long: at most %d "
                        "characters", JR_HTTP_TOKEN_MAX), -1;
    for (i = 0; i < n; i++)
        if ((unsigned char)token[i] <= ' ' || token[i] == 0x7f)
            return snprintf(what, whatsize, "has a space or a control "
                            "character (character %zu): a Bearer token "
                            "cannot carry it", i + 1), -1;
    return 0;
}

int
jr_config_http(lua_State *L, jr_config *c, char *key, size_t keysize,
               char *what, size_t whatsize)
{
    const char *k;

    if (lua_type(L, -1) != LUA_TTABLE) {
        snprintf(what, whatsize, "must be a table { listen = "
                 "\"127.0.0.1:8089\", token = \"...\" }, got %s",
                 luaL_typename(L, -1));
        return -1;
    }
    lua_pushnil(L);                                  /* t k */
    while (lua_next(L, -2) != 0) {                   /* t k v */
        k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
        if (strcmp(k, "listen") != 0 && strcmp(k, "token") != 0 &&
            strcmp(k, "max_connections") != 0) {
            snprintf(key, keysize, "http.%.40s", k);
            snprintf(what, whatsize, "is not a key of http (listen, "
                     "token, max_connections)");
            lua_pop(L, 2);                           /* t */
            return -1;
        }
        lua_pop(L, 1);                               /* t k */
    }                                                /* t */
    if (string_key(L, "listen", &c->http_listen, key, keysize, what,
                   whatsize) < 0 ||
        string_key(L, "token", &c->http_token, key, keysize, what,
                   whatsize) < 0 ||
        conns_key(L, &c->http_max_conns, key, keysize, what, whatsize) < 0)
        return -1;
    if (c->http_listen != NULL && listen_why(c->http_listen, what,
                                             whatsize) < 0) {
        snprintf(key, keysize, "http.listen");
        return -1;
    }
    if (c->http_token != NULL && token_why(c->http_token, what,
                                           whatsize) < 0) {
        snprintf(key, keysize, "http.token");
        return -1;
    }
    return 0;
}
