/* cfgtokens.c - the config's scoped HTTP tokens: http.tokens = { { name =
 * "grafana", scope = "read", token_file = "/etc/jobrunner/tokens/grafana"
 * }, { name = "ci", scope = "push", queues = { "deploys" }, token_env =
 * "CI_TOKEN" } }. Each secret comes from a file or the environment
 * (cfghttp.c's readers), never from the config's text; names and secrets
 * are unique; every error names its key (http.tokens[2].scope) and never
 * a secret. Uses config.h, cfghttp.h, job.h. */
#include <lauxlib.h>
#include <lua.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/cfghttp.h"
#include "config/config.h"
#include "base/job.h"

#define NAME_MAX_LEN 64

static const char *const scopes[] = {"read", "push", "write", NULL};

void
jr_tokens_free(jr_token *t, int n)
{
    int i, k;

    for (i = 0; t != NULL && i < n; i++) {
        if (t[i].secret != NULL)
            memset(t[i].secret, 0, strlen(t[i].secret));
        free(t[i].secret);
        free(t[i].name);
        for (k = 0; k < t[i].nqueues; k++)
            free(t[i].queues[k]);
        free(t[i].queues);
    }
    free(t);
}

/* The entry's field f as a string into *out (NULL when absent): -1 with
 * key and what set when it is not one. */
static int
field(lua_State *L, int i, const char *f, const char **out, char *key,
      size_t keysize, char *what, size_t whatsize)
{
    *out = NULL;
    lua_getfield(L, -1, f);                          /* e v */
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);                               /* e */
        return 0;
    }
    snprintf(key, keysize, "http.tokens[%d].%s", i, f);
    if (lua_type(L, -1) != LUA_TSTRING ||
        strlen(lua_tostring(L, -1)) != lua_rawlen(L, -1)) {
        snprintf(what, whatsize, "must be a string without NUL bytes, "
                 "got %s", luaL_typename(L, -1));
        lua_pop(L, 1);                               /* e */
        return -1;
    }
    *out = lua_tostring(L, -1);     /* the entry keeps it alive */
    lua_pop(L, 1);                                   /* e */
    return 0;
}

/* -1 with what set unless every key of the entry on top is one of a
 * token's; the secret in the config's text is refused by name. */
static int
known_keys(lua_State *L, int i, char *key, size_t keysize, char *what,
           size_t whatsize)
{
    static const char *const keys[] = {"name", "scope", "queues",
                                       "token_file", "token_env",
                                       "decrypt", NULL};
    const char *k;
    int j, ok;

    lua_pushnil(L);                                  /* e k */
    while (lua_next(L, -2) != 0) {                   /* e k v */
        k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
        for (ok = 0, j = 0; keys[j] != NULL && !ok; j++)
            ok = strcmp(k, keys[j]) == 0;
        lua_pop(L, 1);                               /* e k */
        if (ok)
            continue;
        lua_pop(L, 1);                               /* e */
        snprintf(key, keysize, "http.tokens[%d].%.30s", i, k);
        if (strcmp(k, "token") == 0)
            snprintf(what, whatsize, "is refused: a scoped token's secret "
                     "never sits in the config's text; put it in a file "
                     "(token_file, mode 0640 or 0600) or the environment "
                     "(token_env)");
        else
            snprintf(what, whatsize, "is not a key of a token (name, "
                     "scope, queues, token_file, token_env, decrypt)");
        return -1;
    }
    return 0;
}

/* -1 with what set unless name is [A-Za-z0-9_-], 1 to NAME_MAX_LEN
 * characters (never "http.token", the name logs give that one). */
static int
name_why(const char *name, char *what, size_t whatsize)
{
    size_t n = strlen(name);

    if (n == 0 || n > NAME_MAX_LEN ||
        strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
               "0123456789_-") != n)
        return snprintf(what, whatsize, "must be 1 to %d letters, digits, "
                        "'_' or '-', got '%.80s'", NAME_MAX_LEN, name), -1;
    return 0;
}

/* The entry's queues (a list of queue names) into t: push tokens need
 * them, the others may not have them. */
static int
queues(lua_State *L, int i, jr_token *t, char *key, size_t keysize,
       char *what, size_t whatsize)
{
    jr_err err;
    size_t n, k;
    int rc = 0;

    lua_getfield(L, -1, "queues");                   /* e qs */
    snprintf(key, keysize, "http.tokens[%d].queues", i);
    if (lua_isnil(L, -1) != (t->scope != JR_TOKEN_PUSH)) {
        snprintf(what, whatsize, t->scope == JR_TOKEN_PUSH ? "is missing: "
                 "a push token names the queues it may push to, such as "
                 "queues = { \"deploys\" }" : "is only for a push token "
                 "(a %s token is not bound to queues)", scopes[t->scope]);
        lua_pop(L, 1);
        return -1;
    }
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);                               /* e */
        return 0;
    }
    n = lua_type(L, -1) == LUA_TTABLE ? lua_rawlen(L, -1) : 0;
    if (n == 0 || n > 1000) {
        snprintf(what, whatsize, "must be a list of 1 to 1000 queue names, "
                 "such as { \"deploys\" }");
        lua_pop(L, 1);
        return -1;
    }
    if ((t->queues = calloc(n, sizeof *t->queues)) == NULL) {
        snprintf(what, whatsize, "out of memory");
        lua_pop(L, 1);
        return -1;
    }
    for (k = 1; k <= n && rc == 0; k++) {
        lua_rawgeti(L, -1, (lua_Integer)k);          /* e qs q */
        snprintf(key, keysize, "http.tokens[%d].queues[%zu]", i, k);
        if (lua_type(L, -1) != LUA_TSTRING ||
            jr_name_check_len(lua_tostring(L, -1), lua_rawlen(L, -1),
                              "queue name", &err) < 0) {
            snprintf(what, whatsize, "%s", lua_type(L, -1) == LUA_TSTRING ?
                     err.msg : "must be a queue name (a string)");
            rc = -1;
        } else if ((t->queues[t->nqueues] = strdup(lua_tostring(L, -1))) ==
                   NULL) {
            snprintf(what, whatsize, "out of memory");
            rc = -1;
        } else {
            t->nqueues++;
        }
        lua_pop(L, 1);                               /* e qs */
    }
    lua_pop(L, 1);                                   /* e */
    return rc;
}

/* The entry's decrypt (a boolean, false when absent) into t: a read or
 * push token granted the encrypted values decrypted; a write token sees
 * them always, and decrypt = false cannot hold for it. */
static int
decrypt(lua_State *L, int i, jr_token *t, char *key, size_t keysize,
        char *what, size_t whatsize)
{
    int rc = 0;

    lua_getfield(L, -1, "decrypt");                  /* e d */
    snprintf(key, keysize, "http.tokens[%d].decrypt", i);
    if (!lua_isnil(L, -1) && !lua_isboolean(L, -1)) {
        snprintf(what, whatsize, "must be true or false, got %s",
                 luaL_typename(L, -1));
        rc = -1;
    } else if (t->scope == JR_TOKEN_WRITE && lua_isboolean(L, -1) &&
               !lua_toboolean(L, -1)) {
        snprintf(what, whatsize, "cannot be false for a write token "
                 "('%s' sees encrypted values decrypted: give it scope "
                 "\"read\" or \"push\" instead)", t->name);
        rc = -1;
    } else {
        t->decrypt = t->scope == JR_TOKEN_WRITE || lua_toboolean(L, -1);
    }
    lua_pop(L, 1);                                   /* e */
    return rc;
}

/* The secret of entry i from its token_file or token_env (one of them)
 * into t, checked as http.token's. */
static int
secret(lua_State *L, int i, jr_token *t, char *key, size_t keysize,
       char *what, size_t whatsize)
{
    const char *file, *env;
    char why[160];

    if (field(L, i, "token_file", &file, key, keysize, what, whatsize) < 0 ||
        field(L, i, "token_env", &env, key, keysize, what, whatsize) < 0)
        return -1;
    if ((file != NULL) == (env != NULL)) {
        snprintf(key, keysize, "http.tokens[%d]", i);
        snprintf(what, whatsize, "('%s') %s", t->name, file ? "sets both "
                 "token_file and token_env: set one" : "needs its secret "
                 "in token_file (a file) or token_env (an environment "
                 "variable)");
        return -1;
    }
    snprintf(key, keysize, "http.tokens[%d].%s", i, file ? "token_file" :
             "token_env");
    if (file ? jr_cfghttp_token_file(file, &t->secret, what, whatsize) :
        jr_cfghttp_token_env(env, &t->secret, what, whatsize))
        return -1;
    if (jr_cfghttp_token_why(t->secret, why, sizeof why) < 0) {
        snprintf(what, whatsize, "gives a token that %s", why);
        return -1;
    }
    return 0;
}

/* Entry i (1-based, on top of L) into t. */
static int
one(lua_State *L, int i, jr_token *t, char *key, size_t keysize,
    char *what, size_t whatsize)
{
    const char *name, *scope;
    int s;

    snprintf(key, keysize, "http.tokens[%d]", i);
    if (lua_type(L, -1) != LUA_TTABLE) {
        snprintf(what, whatsize, "must be a table { name = \"grafana\", "
                 "scope = \"read\", token_file = \"...\" }, got %s",
                 luaL_typename(L, -1));
        return -1;
    }
    if (known_keys(L, i, key, keysize, what, whatsize) < 0 ||
        field(L, i, "name", &name, key, keysize, what, whatsize) < 0 ||
        field(L, i, "scope", &scope, key, keysize, what, whatsize) < 0)
        return -1;
    snprintf(key, keysize, "http.tokens[%d].name", i);
    if (name == NULL)
        return snprintf(what, whatsize, "is missing: each token has a "
                        "name, which logs and the dashboard show"), -1;
    if (name_why(name, what, whatsize) < 0)
        return -1;
    snprintf(key, keysize, "http.tokens[%d].scope", i);
    for (s = 0; scope != NULL && scopes[s] != NULL; s++)
        if (strcmp(scope, scopes[s]) == 0)
            break;
    if (scope == NULL || scopes[s] == NULL)
        return snprintf(what, whatsize, "must be \"read\", \"push\" or "
                        "\"write\", got %s%.40s%s", scope ? "'" : "",
                        scope ? scope : "nothing", scope ? "'" : ""), -1;
    t->scope = s;
    if ((t->name = strdup(name)) == NULL)
        return snprintf(what, whatsize, "out of memory"), -1;
    if (queues(L, i, t, key, keysize, what, whatsize) < 0 ||
        decrypt(L, i, t, key, keysize, what, whatsize) < 0)
        return -1;
    return secret(L, i, t, key, keysize, what, whatsize);
}

/* -1 with what set when token i (0-based) repeats the name or the secret
 * of one before it, or http.token's secret. */
static int
unique(const jr_config *c, const jr_token *t, int i, char *key,
       size_t keysize, char *what, size_t whatsize)
{
    int k;

    for (k = 0; k < i; k++)
        if (strcmp(t[k].name, t[i].name) == 0) {
            snprintf(key, keysize, "http.tokens[%d].name", i + 1);
            return snprintf(what, whatsize, "'%s' is the name of "
                            "http.tokens[%d] too: names are unique",
                            t[i].name, k + 1), -1;
        }
    for (k = 0; k <= i; k++) {
        const char *other = k < i ? t[k].secret : c->http_token;

        if (other == NULL || strcmp(other, t[i].secret) != 0)
            continue;
        snprintf(key, keysize, "http.tokens[%d]", i + 1);
        if (k < i)
            return snprintf(what, whatsize, "('%s') has the secret of "
                            "http.tokens[%d] ('%s'): each token needs its "
                            "own", t[i].name, k + 1, t[k].name), -1;
        return snprintf(what, whatsize, "('%s') has the secret of "
                        "http.token: each token needs its own",
                        t[i].name), -1;
    }
    return 0;
}

/* 1 when the table on top holds keys 1..n only.  [-0, +0, -] */
static int
is_list(lua_State *L, int n)
{
    int count = 0;

    lua_pushnil(L);                                  /* t nil */
    while (lua_next(L, -2) != 0) {                   /* t k v */
        lua_pop(L, 1);                               /* t k */
        if (!lua_isinteger(L, -1)) {
            lua_pop(L, 1);                           /* t */
            return 0;
        }
        count++;
    }                                                /* t */
    return count == n;
}

int
jr_cfgtokens_read(lua_State *L, jr_config *c, char *key, size_t keysize,
                  char *what, size_t whatsize)
{
    jr_token *t = NULL;
    int n, i, rc = -1;

    lua_getfield(L, -1, "tokens");                   /* h ts */
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);                               /* h */
        return 0;
    }
    snprintf(key, keysize, "http.tokens");
    n = lua_type(L, -1) == LUA_TTABLE ? (int)lua_rawlen(L, -1) : -1;
    if (n < 1 || n > JR_HTTP_TOKENS_MAX || !is_list(L, n)) {
        lua_pop(L, 1);                               /* h */
        snprintf(what, whatsize, "must be a list of 1 to %d tokens { name "
                 "= ..., scope = \"read\" | \"push\" | \"write\", "
                 "token_file = ... }", JR_HTTP_TOKENS_MAX);
        return -1;
    }
    if ((t = calloc((size_t)n, sizeof *t)) == NULL) {
        snprintf(what, whatsize, "out of memory");
        goto done;
    }
    for (i = 0; i < n; i++) {
        lua_rawgeti(L, -1, i + 1);                   /* h ts e */
        rc = one(L, i + 1, &t[i], key, keysize, what, whatsize);
        lua_pop(L, 1);                               /* h ts */
        if (rc < 0 || (rc = unique(c, t, i, key, keysize, what,
                                   whatsize)) < 0)
            goto done;
    }
    jr_tokens_free(c->http_tokens, c->http_ntokens);
    c->http_tokens = t;
    c->http_ntokens = n;
    t = NULL;
    rc = 0;
done:
    jr_tokens_free(t, n);
    lua_pop(L, 1);                                   /* h */
    return rc;
}
