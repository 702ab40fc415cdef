/* cfgtrace.c - the config's `tracing` table (docs/tracing.md):
 * { endpoint = "http://collector:4318", sample = 0.1,
 *   headers = { ["x-api-key"] = "..." }, queue = 4096,
 *   protocol = "protobuf" }. Checked here: the keys, the
 * endpoint's scheme, the sample's range, the protocol's name, each header's name (an HTTP
 * token) and value (no control character); a bad one names its key.
 * Header values are never logged. Uses config.h. */
#include <lauxlib.h>
#include <lua.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "lua/luaopts.h"

/* 1 if c may be in an HTTP header's name (RFC 9110's tchar) */
static int
tchar(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* URL as an error may show it: at most 200 bytes, a user:password in
 * its authority masked (a config error goes to the terminal and logs) */
static const char *
shown(const char *url, char *buf, size_t size)
{
    const char *a = strstr(url, "://"), *at = NULL, *p;
    size_t end;

    a = a ? a + 3 : url;
    end = strcspn(a, "/");
    for (p = a; (p = memchr(p, '@', end - (size_t)(p - a))) != NULL; p++)
        at = p;
    if (at == NULL)
        snprintf(buf, size, "%.200s", url);
    else
        snprintf(buf, size, "%.*s***%.200s", (int)(a - url), url, at);
    return buf;
}

/* 0 if URL (its scheme checked) names a host and, when it has one, a
 * port from 1 to 65535; else -1, with what says */
static int
endpoint_authority(const char *url, char *what, size_t whatsize)
{
    const char *a = strstr(url, "://") + 3;
    const char *end = a + strcspn(a, "/");
    const char *at, *p, *port = NULL;
    char buf[256];
    long v = 0;

    for (at = a; (p = memchr(at, '@', (size_t)(end - at))) != NULL; at = p + 1)
        ;
    if (*at == '[') {
        p = memchr(at, ']', (size_t)(end - at));
        port = p && p + 1 < end && p[1] == ':' ? p + 1 : NULL;
        if (p == NULL || (p + 1 < end && p[1] != ':'))
            at = end;                   /* a bad IPv6 literal: no host */
    } else {
        port = memchr(at, ':', (size_t)(end - at));
    }
    if (at == end || at == port)
        return snprintf(what, whatsize, "'%s' names no host",
                        shown(url, buf, sizeof buf)), -1;
    if (port == NULL)
        return 0;
    for (p = port + 1; p < end && *p >= '0' && *p <= '9' && v <= 65535; p++)
        v = v * 10 + (*p - '0');
    if (p != end || p == port + 1 || v < 1 || v > 65535)
        return snprintf(what, whatsize, "'%s' has a port that is not a "
                        "number from 1 to 65535", shown(url, buf, sizeof buf)), -1;
    return 0;
}

static int
endpoint_key(lua_State *L, jr_config *c, char *what, size_t whatsize)
{
    const char *v;
    char buf[256];
    size_t len;

    if (lua_type(L, -1) != LUA_TSTRING)
        return snprintf(what, whatsize, "must be a string such as "
                        "\"http://collector:4318\", got %s",
                        luaL_typename(L, -1)), -1;
    v = lua_tolstring(L, -1, &len);
    if (strlen(v) != len || len > 2000)
        return snprintf(what, whatsize, "must be a URL of at most 2000 "
                        "bytes with no NUL"), -1;
    if ((strncmp(v, "http://", 7) != 0 && strncmp(v, "https://", 8) != 0) ||
        v[v[4] == 's' ? 8 : 7] == '\0' || strpbrk(v, " \t\r\n?#") != NULL)
        return snprintf(what, whatsize, "'%s' is not an http:// or "
                        "https:// URL (the collector's base: spans go to its "
                        "/v1/traces)", shown(v, buf, sizeof buf)), -1;
    if (endpoint_authority(v, what, whatsize) < 0)
        return -1;
    free(c->trace_endpoint);
    if ((c->trace_endpoint = strdup(v)) == NULL)
        return snprintf(what, whatsize, "out of memory"), -1;
    return 0;
}

static int
sample_key(lua_State *L, jr_config *c, char *what, size_t whatsize)
{
    double v;

    if (lua_type(L, -1) != LUA_TNUMBER ||
        !((v = lua_tonumber(L, -1)) >= 0 && v <= 1))
        return snprintf(what, whatsize, "must be a number from 0 to 1 (the "
                        "share of traces recorded), got %s",
                        lua_type(L, -1) == LUA_TNUMBER ? lua_tostring(L, -1)
                        : luaL_typename(L, -1)), -1;
    c->trace_sample = v;
    return 0;
}

static int
queue_key(lua_State *L, jr_config *c, char *what, size_t whatsize)
{
    long long v = 0;

    if (jr_luaopts_whole(L, 1, JR_TRACE_QUEUE_MAX, 0, &v) != JR_WHOLE_OK)
        return snprintf(what, whatsize, "must be a whole number of spans "
                        "from 1 to %d, got %s", JR_TRACE_QUEUE_MAX,
                        lua_type(L, -1) == LUA_TNUMBER ? lua_tostring(L, -1)
                        : luaL_typename(L, -1)), -1;
    c->trace_queue = (int)v;
    return 0;
}

static int
protocol_key(lua_State *L, jr_config *c, char *what, size_t whatsize)
{
    const char *v = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1)
                                                   : NULL;

    if (v != NULL && strcmp(v, "protobuf") == 0)
        c->trace_protocol = JR_OTLP_PROTOBUF;
    else if (v != NULL && strcmp(v, "json") == 0)
        c->trace_protocol = JR_OTLP_JSON;
    else if (v != NULL)
        return snprintf(what, whatsize, "must be \"protobuf\" or \"json\" "
                        "(OTLP/HTTP's encodings), got \"%.100s\"", v), -1;
    else
        return snprintf(what, whatsize, "must be \"protobuf\" or \"json\" "
                        "(OTLP/HTTP's encodings), got %s",
                        luaL_typename(L, -1)), -1;
    return 0;
}

static int
by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* headers = { NAME = "value", ... }: on a failure, key names the entry */
static int
headers_key(lua_State *L, jr_config *c, char *key, size_t keysize,
            char *what, size_t whatsize)
{
    const char *name, *val, *p;
    size_t nlen, vlen;
    char **h;
    int n = 0;

    if (lua_type(L, -1) != LUA_TTABLE)
        return snprintf(what, whatsize, "must be a table of NAME = "
                        "\"value\", got %s", luaL_typename(L, -1)), -1;
    lua_pushnil(L);                                  /* t h nil */
    while (lua_next(L, -2)) {                        /* t h k v */
        if (lua_type(L, -2) != LUA_TSTRING) {
            lua_pop(L, 2);
            return snprintf(what, whatsize, "has a key that is not a "
                            "string (a header's name)"), -1;
        }
        name = lua_tolstring(L, -2, &nlen);
        snprintf(key, keysize, "tracing.headers.%.100s", name);
        for (p = name; *p && tchar((unsigned char)*p); p++)
            ;
        if (nlen == 0 || nlen > 100 || *p != '\0' || (size_t)(p - name) != nlen) {
            lua_pop(L, 2);
            return snprintf(what, whatsize, "is not an HTTP header name "
                            "(letters, digits and !#$%%&'*+-.^_`|~, 1 to 100)"),
                   -1;
        }
        if (lua_type(L, -1) != LUA_TSTRING) {
            snprintf(what, whatsize, "must be a string, got %s",
                     luaL_typename(L, -1));
            lua_pop(L, 2);
            return -1;
        }
        val = lua_tolstring(L, -1, &vlen);
        for (p = val; p < val + vlen; p++)
            if ((unsigned char)*p < 0x20 && *p != '\t')
                break;
        if (p < val + vlen || vlen > 4096 || (unsigned char)val[0] == 0x7f) {
            lua_pop(L, 2);
            return snprintf(what, whatsize, "must be a value of at most 4096 "
                            "bytes with no control character"), -1;
        }
        if (n == JR_TRACE_HEADERS_MAX) {
            lua_pop(L, 2);
            return snprintf(what, whatsize, "is one header too many (at most "
                            "%d)", JR_TRACE_HEADERS_MAX), -1;
        }
        if ((h = realloc(c->trace_headers, (size_t)(n + 1) * sizeof *h))
            == NULL || (c->trace_headers = h,
                        (h[n] = malloc(nlen + vlen + 3)) == NULL)) {
            lua_pop(L, 2);
            return snprintf(what, whatsize, "out of memory"), -1;
        }
        snprintf(h[n], nlen + vlen + 3, "%s: %s", name, val);
        c->trace_nheaders = ++n;
        lua_pop(L, 1);                               /* t h k */
    }                                                /* t h */
    if (n > 1)
        qsort(c->trace_headers, (size_t)n, sizeof *c->trace_headers, by_name);
    return 0;
}

int
jr_config_tracing(lua_State *L, jr_config *c, char *key, size_t keysize,
                  char *what, size_t whatsize)
{
    static const char *const known[] = {"endpoint", "sample", "headers",
                                        "queue", "protocol", NULL};
    int i, rc = 0;

    if (lua_type(L, -1) != LUA_TTABLE)
        return snprintf(what, whatsize, "must be a table { endpoint = URL, "
                        "sample = 0..1, headers = {...} }, got %s",
                        luaL_typename(L, -1)), -1;
    lua_pushnil(L);                                  /* t nil */
    while (lua_next(L, -2)) {                        /* t k v */
        const char *k = lua_type(L, -2) == LUA_TSTRING ?
                        lua_tostring(L, -2) : NULL;
        for (i = 0; k && known[i] && strcmp(k, known[i]) != 0; i++)
            ;
        if (k == NULL || known[i] == NULL) {
            snprintf(key, keysize, "tracing.%.100s", k ? k : "?");
            snprintf(what, whatsize, "is not a key of tracing (endpoint, "
                     "sample, headers, queue, protocol)");
            lua_pop(L, 2);
            return -1;
        }
        snprintf(key, keysize, "tracing.%s", k);
        rc = i == 0 ? endpoint_key(L, c, what, whatsize)
             : i == 1 ? sample_key(L, c, what, whatsize)
             : i == 3 ? queue_key(L, c, what, whatsize)
             : i == 4 ? protocol_key(L, c, what, whatsize)
             : headers_key(L, c, key, keysize, what, whatsize);
        if (rc < 0) {
            lua_pop(L, 2);
            return -1;
        }
        lua_pop(L, 1);                               /* t k */
    }                                                /* t */
    if (c->trace_endpoint == NULL) {
        snprintf(key, keysize, "tracing.endpoint");
        return snprintf(what, whatsize, "is missing: the collector's URL, "
                        "such as \"http://collector:4318\""), -1;
    }
    return 0;
}
