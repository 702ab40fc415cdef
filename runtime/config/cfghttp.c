/* cfghttp.c - the config's `http` table: { listen = "127.0.0.1:8089",
 * token = "...", max_connections = 256 }, the token given in the file
 * itself, in a file of its own (token_file, read here) or in the
 * environment (token_env); the scoped tokens of http.tokens are
 * cfgtokens.c's, with these readers of a secret. The address itself is checked when the server
 * starts (http.c); here only the types, the keys and the token's length.
 * The token is never logged. Uses config.h, cfghttp.h. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <lauxlib.h>
#include <lua.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/cfghttp.h"
#include "config/config.h"
#include "lua/luaopts.h"

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
    long long v = 0;
    int ok;

    lua_getfield(L, -1, "max_connections");          /* t v */
    ok = lua_isnil(L, -1) ||
         jr_luaopts_whole(L, 1, JR_HTTP_CONNS_MAX, 1, &v) == JR_WHOLE_OK;
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

int
jr_cfghttp_token_why(const char *token, char *what, size_t whatsize)
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
    /* a browser sends a header's non-ASCII text as Latin-1, not as the
     * UTF-8 of the file: the dashboard could never match such a token */
    for (i = 0; i < n; i++)
        if ((unsigned char)token[i] <= ' ' || (unsigned char)token[i] >= 0x7f)
            return snprintf(what, whatsize, "has a space, a control "
                            "character or a non-ASCII byte (character %zu): "
                            "a Bearer token cannot carry it", i + 1), -1;
    return 0;
}

int
jr_cfghttp_token_file(const char *path, char **slot, char *what,
                      size_t whatsize)
{
    char buf[JR_HTTP_TOKEN_MAX + 64];
    struct stat st;
    size_t len = 0;
    ssize_t n = 1;
    int fd, e, rc = -1;
    jr_err err;

    /* O_NONBLOCK: a FIFO named here must not hang the start */
    fd = open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        e = errno;
        snprintf(what, whatsize, "names '%s', which cannot be read: %s",
                 path, strerror(e));
        return -1;
    }
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        snprintf(what, whatsize, "names '%s', which is not a regular file",
                 path);
        goto done;
    }
    if (st.st_mode & (S_IROTH | S_IWOTH)) {
        snprintf(what, whatsize, "names '%s', which others may read or "
                 "write (mode %04o): chmod o-rw it", path,
                 (unsigned)(st.st_mode & 07777));
        goto done;
    }
    while (len < sizeof buf - 1 &&
           (n = read(fd, buf + len, sizeof buf - 1 - len)) != 0) {
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            e = errno;
            snprintf(what, whatsize, "names '%s', which cannot be read: %s",
                     path, strerror(e));
            goto done;
        }
        len += (size_t)n;
    }
    if (len == sizeof buf - 1) {    /* more than a token and its blanks */
        snprintf(what, whatsize, "names '%s', which is too long to hold "
                 "a token (at most %zu bytes)", path, sizeof buf - 2);
        goto done;
    }
    while (len > 0 && isspace((unsigned char)buf[len - 1]))
        len--;
    buf[len] = '\0';
    if (memchr(buf, '\0', len) != NULL)
        snprintf(what, whatsize, "names '%s', which holds a NUL byte", path);
    else if (jr_config_set(slot, buf, &err) < 0)
        snprintf(what, whatsize, "%s", err.msg);
    else
        rc = 0;
done:
    memset(buf, 0, sizeof buf);
    close(fd);
    return rc;
}

int
jr_cfghttp_token_env(const char *name, char **slot, char *what,
                     size_t whatsize)
{
    const char *v = getenv(name);
    jr_err err;

    if (name[0] == '\0' || strchr(name, '=') != NULL) {
        snprintf(what, whatsize, "must name an environment variable (no "
                 "'=' in the name, not empty), got '%s'", name);
        return -1;
    }
    if (v == NULL || v[0] == '\0') {
        snprintf(what, whatsize, "names the environment variable '%s', "
                 "which is %s", name, v == NULL ? "not set" : "empty");
        return -1;
    }
    if (jr_config_set(slot, v, &err) < 0) {
        snprintf(what, whatsize, "%s", err.msg);
        return -1;
    }
    return 0;
}

/* http.token, http.token_file or http.token_env (one at most) into
 * c->http_token, checked by token_why. -1 with key and what set. */
static int
token_keys(lua_State *L, jr_config *c, char *key, size_t keysize,
           char *what, size_t whatsize)
{
    char *file = NULL, *env = NULL, why[160];
    int rc = -1;

    if (string_key(L, "token", &c->http_token, key, keysize, what,
                   whatsize) < 0 ||
        string_key(L, "token_file", &file, key, keysize, what,
                   whatsize) < 0 ||
        string_key(L, "token_env", &env, key, keysize, what, whatsize) < 0)
        goto done;
    if ((c->http_token != NULL) + (file != NULL) + (env != NULL) > 1) {
        snprintf(key, keysize, "http.%s", file && env ? "token_env" :
                 "token");
        snprintf(what, whatsize, "is set with another of http.token, "
                 "http.token_file and http.token_env: set one");
        goto done;
    }
    snprintf(key, keysize, "http.%s", file ? "token_file" : env ?
             "token_env" : "token");
    if ((file && jr_cfghttp_token_file(file, &c->http_token, what,
                                       whatsize) < 0) ||
        (env && jr_cfghttp_token_env(env, &c->http_token, what,
                                     whatsize) < 0))
        goto done;
    if (c->http_token != NULL && jr_cfghttp_token_why(c->http_token, why,
                                                      sizeof why) < 0) {
        if (file || env)
            snprintf(what, whatsize, "gives a token that %s", why);
        else
            snprintf(what, whatsize, "%s", why);
        goto done;
    }
    rc = 0;
done:
    free(file);
    free(env);
    return rc;
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
            strcmp(k, "token_file") != 0 && strcmp(k, "token_env") != 0 &&
            strcmp(k, "max_connections") != 0 && strcmp(k, "tokens") != 0) {
            snprintf(key, keysize, "http.%.40s", k);
            snprintf(what, whatsize, "is not a key of http (listen, "
                     "token, token_file, token_env, tokens, "
                     "max_connections)");
            lua_pop(L, 2);                           /* t */
            return -1;
        }
        lua_pop(L, 1);                               /* t k */
    }                                                /* t */
    if (string_key(L, "listen", &c->http_listen, key, keysize, what,
                   whatsize) < 0 ||
        token_keys(L, c, key, keysize, what, whatsize) < 0 ||
        jr_cfgtokens_read(L, c, key, keysize, what, whatsize) < 0 ||
        conns_key(L, &c->http_max_conns, key, keysize, what, whatsize) < 0)
        return -1;
    if (c->http_listen != NULL && listen_why(c->http_listen, what,
                                             whatsize) < 0) {
        snprintf(key, keysize, "http.listen");
        return -1;
    }
    return 0;
}
