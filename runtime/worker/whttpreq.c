/* whttpreq.c - a jobrunner.http request's setup: the request table's
 * fields checked (the method and the headers' bytes, the url's, their
 * sizes) and set on the transfer's easy handle with the callbacks that
 * take the response. Uses whttp.h and plain Lua reads of the request
 * table. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <curl/curl.h>
#include <lauxlib.h>
#include <lua.h>

#include "worker/whttp.h"
#include "base/trace.h"
#include "lua/jrlib.h"

/* CURLOPT_OPENSOCKETFUNCTION: the socket, close-on-exec; socket()'s
 * errno kept (libcurl says "Couldn't connect to server" of EMFILE). */
static curl_socket_t
open_socket(void *arg, curlsocktype purpose, struct curl_sockaddr *a)
{
    xfer *x = arg;
    curl_socket_t fd;

    (void)purpose;
    if ((fd = socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol)) < 0)
        x->sock_errno = errno;
    else
        x->h->conns++;
    return fd;
}

/* CURLOPT_CLOSESOCKETFUNCTION: the count of sockets open follows. Its
 * data is the multi's (a connection outlives its first transfer). */
static int
close_socket(void *arg, curl_socket_t fd)
{
    jr_http *h = arg;

    h->conns--;
    return close(fd);
}

/* Whether x may skip libcurl's look for an idle connection to reuse: a
 * plain http url (one request a connection: HTTPS may multiplex many on
 * one), and no more sockets open than transfers in the multi, each of
 * which holds one or will take one. The look walks every connection to
 * the host, busy ones included: with a thousand in flight, a thousand
 * for each new request while the connections grow. An idle connection
 * that appears before the transfer starts stays for the next one. */
static int
fresh(const xfer *x, const char *url)
{
    return strncasecmp(url, "http://", 7) == 0 && x->h->conns <= x->h->added;
}

static size_t
on_body(char *p, size_t size, size_t n, void *arg)
{
    xfer *x = arg;

    n *= size;
    if ((long)(x->resp.len + n) > x->max_size) {
        x->too_big = 1;
        return 0;               /* curl fails the transfer */
    }
    jr_buf_put(&x->resp, p, n);
    return x->resp.oom ? 0 : n;
}

static size_t
on_header(char *p, size_t size, size_t n, void *arg)
{
    xfer *x = arg;

    (void)size;
    if (n >= 5 && memcmp(p, "HTTP/", 5) == 0)
        jr_buf_reset(&x->head); /* a redirect's: keep the last response's */
    else
        jr_buf_put(&x->head, p, n);
    return x->head.oom ? 0 : n;
}

/* Reads request field key of the table at 1 as a string, or NULL; its
 * length in *len unless len is NULL. Raises on another type.
 * [-0, +0, v] */
static const char *
opt_str(lua_State *L, const char *key, size_t *len)
{
    const char *s;

    lua_getfield(L, 1, key);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        return NULL;
    }
    if (lua_type(L, -1) != LUA_TSTRING)
        luaL_error(L, "jobrunner.http: '%s' must be a string, got %s", key,
                   luaL_typename(L, -1));
    s = lua_tolstring(L, -1, len);
    lua_pop(L, 1);              /* the request table keeps it alive */
    return s;
}

/* A byte of a token (RFC 9110's tchar): a method, a header's name. */
static int
tchar(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
           (c >= 'A' && c <= 'Z') ||
           (c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* A byte of a header's value: no control byte but tab (CR and LF would
 * end the header and start another, or a request). */
static int
vchar(unsigned char c)
{
    return c == '\t' || (c >= 0x20 && c != 0x7f);
}

/* A byte of the url as it goes to libcurl: no control byte, no space. */
static int
uchar(unsigned char c)
{
    return c > 0x20 && c != 0x7f;
}

/* Raises unless every byte of s (len bytes) passes ok. what names the part
 * of the request, kind what its bytes must be. [-0, +0, v] */
static void
check_bytes(lua_State *L, const char *s, size_t len, int (*ok)(unsigned char),
            const char *what, const char *kind)
{
    size_t i;

    for (i = 0; i < len; i++)
        if (!ok((unsigned char)s[i]))
            luaL_error(L, "jobrunner.http: %s has byte %d at position %d, "
                       "not allowed in %s", what, (int)(unsigned char)s[i],
                       (int)(i + 1), kind);
}

/* Raises unless name is a token and value a header's value. The message
 * names the header, or the part of its name before the byte refused;
 * never the value (it may be a secret). [-0, +0, v] */
static void
check_header(lua_State *L, const char *name, size_t nlen, const char *value,
             size_t vlen)
{
    size_t i;

    if (nlen == 0)
        luaL_error(L, "jobrunner.http: a header name is empty");
    for (i = 0; i < nlen && tchar((unsigned char)name[i]); i++)
        ;
    if (i < nlen) {
        lua_pushlstring(L, name, i);
        luaL_error(L, "jobrunner.http: header name '%s' has byte %d at "
                   "position %d, not allowed in a token", lua_tostring(L, -1),
                   (int)(unsigned char)name[i], (int)(i + 1));
    }
    lua_pushfstring(L, "header '%s' value", name);
    check_bytes(L, value, vlen, vchar, lua_tostring(L, -1), "a header value");
    lua_pop(L, 1);
}

static double
opt_num(lua_State *L, const char *key, double dflt, double lo, double hi)
{
    double v = dflt;

    lua_getfield(L, 1, key);
    if (!lua_isnil(L, -1)) {
        if (lua_type(L, -1) != LUA_TNUMBER ||
            !((v = lua_tonumber(L, -1)) >= lo && v <= hi))
            luaL_error(L, "jobrunner.http: '%s' must be a number from %f "
                       "to %f", key, lo, hi);
    }
    lua_pop(L, 1);
    return v;
}

/* The job's trace context (docs/tracing.md), unless the handler gave a
 * traceparent itself: the span running now as the callee's parent, and
 * the job's tracestate unless the handler gave one (own_state): a second
 * tracestate header would join the job's list to the handler's. [-0, +0, v] */
static void
trace_headers(lua_State *L, xfer *x, struct curl_slist *last, int own_state)
{
    jr_jobctx *ctx = jr_jrlib_job(L, "http");
    char tp[JR_TRACEPARENT_LEN + 1], line[JR_TRACESTATE_MAX + 16];
    const char *state;
    struct curl_slist *l;
    int i;

    if (!jr_jobtrace_parent(ctx->trace, ctx->job->trace, tp, &state))
        return;
    for (i = 0; i < 2; i++) {
        if (i == 1 && (state == NULL || own_state))
            break;
        snprintf(line, sizeof line, i == 0 ? "traceparent: %s" :
                 "tracestate: %s", i == 0 ? tp : state);
        if ((l = curl_slist_append(last, line)) == NULL)
            luaL_error(L, "jobrunner.http: out of memory");
        if (last == NULL)
            x->headers = last = l;
        else
            last = last->next;
    }
}

/* The headers table of the request: name = value pairs, appended at the
 * list's end (curl_slist_append walks it from the node it is given).
 * *head grows by each header's line. A Content-Length must be the body's
 * length, blen, and comes without a Transfer-Encoding: another would have
 * the server read the body's end as a request of its own. [-0, +0, v] */
static void
set_headers(lua_State *L, xfer *x, size_t blen, size_t *head)
{
    struct curl_slist *l, *last = NULL;
    const char *name, *value;
    size_t nlen, vlen;
    int cl = 0, te = 0, tp = 0, ts = 0;
    char len[32];

    snprintf(len, sizeof len, "%zu", blen);
    if (lua_getfield(L, 1, "headers") == LUA_TTABLE) {
        lua_pushnil(L);
        while (lua_next(L, -2)) {
            if (lua_type(L, -2) != LUA_TSTRING || !lua_isstring(L, -1))
                luaL_error(L, "jobrunner.http: headers must map names to "
                           "strings");
            name = lua_tolstring(L, -2, &nlen);      /* .. hs name value */
            value = lua_tolstring(L, -1, &vlen);     /* a number: a string */
            check_header(L, name, nlen, value, vlen);
            if (strcasecmp(name, "Content-Length") == 0) {
                if (strcmp(value, len) != 0)
                    luaL_error(L, "jobrunner.http: header '%s' is not the "
                               "body's length (%s bytes)", name, len);
                cl = 1;
            }
            te |= strcasecmp(name, "Transfer-Encoding") == 0;
            tp |= strcasecmp(name, "traceparent") == 0;
            ts |= strcasecmp(name, "tracestate") == 0;
            *head += nlen + vlen + 4;
            if (*head > HTTP_MAX_HEAD)
                luaL_error(L, "jobrunner.http: the url and headers take "
                           "over %d bytes, more than a request may send",
                           HTTP_MAX_HEAD);
            lua_pushfstring(L, "%s: %s", name, value);
            if ((l = curl_slist_append(last, lua_tostring(L, -1))) == NULL)
                luaL_error(L, "jobrunner.http: out of memory");
            if (last == NULL)   /* x->headers holds what was appended */
                x->headers = last = l;
            else
                last = last->next;
            lua_pop(L, 2);                           /* .. hs name */
        }
    } else if (!lua_isnil(L, -1)) {
        luaL_error(L, "jobrunner.http: 'headers' must be a table");
    }
    if (cl && te)
        luaL_error(L, "jobrunner.http: headers 'Content-Length' and "
                   "'Transfer-Encoding' together");
    lua_pop(L, 1);
    if (!tp)
        trace_headers(L, x, last, ts);
}

/* The url for messages, at most sizeof x->url: without the user and
 * password it may hold (scheme://user:password@host/...). */
static void
set_msg_url(xfer *x, const char *url)
{
    const char *sep = strstr(url, "://"), *auth = sep ? sep + 3 : url;
    const char *end = auth + strcspn(auth, "/?#"), *at = NULL, *p;

    for (p = auth; p < end; p++)
        if (*p == '@')
            at = p;
    if (at == NULL)
        snprintf(x->url, sizeof x->url, "%s", url);
    else
        snprintf(x->url, sizeof x->url, "%.*s***%s", (int)(auth - url), url,
                 at);
}

/* Sets e's certificate checks from the request table at 1: 'verify'
 * (false: none) and cainfo (NULL: libcurl's). [-0, +0, v] */
static void
set_tls(lua_State *L, CURL *e, const char *cainfo)
{
    if (lua_getfield(L, 1, "verify") != LUA_TNIL &&
        lua_type(L, -1) != LUA_TBOOLEAN)    /* "false" would verify */
        luaL_error(L, "jobrunner.http: 'verify' must be a boolean, got %s",
                   luaL_typename(L, -1));
    if (lua_type(L, -1) == LUA_TBOOLEAN && !lua_toboolean(L, -1)) {
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    lua_pop(L, 1);
    if (cainfo != NULL)
        curl_easy_setopt(e, CURLOPT_CAINFO, cainfo);
}

/* Sets x's easy handle from the request table at 1. [-0, +0, v] */
void
jr_whttp_setup(lua_State *L, xfer *x)
{
    size_t ulen = 0, mlen = 0;
    const char *url = opt_str(L, "url", &ulen);
    const char *method = opt_str(L, "method", &mlen);
    const char *cainfo = opt_str(L, "cainfo", NULL), *body;
    double timeout = opt_num(L, "timeout", HTTP_TIMEOUT, 0.001, 86400);
    long redirects = (long)opt_num(L, "redirects", 0, 0, 100);
    size_t blen = 0;
    CURL *e = x->easy;

    if (url == NULL)
        luaL_error(L, "jobrunner.http: the request has no 'url'");
    check_bytes(L, url, ulen, uchar, "the url", "a URL");
    if (method != NULL && mlen == 0)
        luaL_error(L, "jobrunner.http: the method is empty");
    if (method != NULL)
        check_bytes(L, method, mlen, tchar, "the method", "a token");
    if (ulen > HTTP_MAX_HEAD)
        luaL_error(L, "jobrunner.http: the url takes %d bytes, more than "
                   "%d a request may send", (int)ulen, HTTP_MAX_HEAD);
    set_msg_url(x, url);
    x->max_size = (long)opt_num(L, "max_size", (double)HTTP_MAX_SIZE, 0,
                                1 << 30);
    lua_getfield(L, 1, "body");
    body = lua_isnil(L, -1) ? NULL : lua_tolstring(L, -1, &blen);
    if (body == NULL && !lua_isnil(L, -1))
        luaL_error(L, "jobrunner.http: 'body' must be a string");
    if (body != NULL && (x->body = malloc(blen + 1)) == NULL)
        luaL_error(L, "jobrunner.http: out of memory");
    if (body != NULL)
        memcpy(x->body, body, blen + 1);
    lua_pop(L, 1);
    set_headers(L, x, blen, &ulen);
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)(timeout * 1000));
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, redirects > 0 ? 1L : 0L);
    curl_easy_setopt(e, CURLOPT_MAXREDIRS, redirects);
    set_tls(L, e, cainfo);
    if (method != NULL)
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
    if (method != NULL && strcmp(method, "HEAD") == 0)
        curl_easy_setopt(e, CURLOPT_NOBODY, 1L);    /* else it waits for one */
    if (x->body != NULL) {
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, x->body);
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)blen);
    }
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->headers);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->errbuf);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, open_socket);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, x);
    curl_easy_setopt(e, CURLOPT_CLOSESOCKETFUNCTION, close_socket);
    curl_easy_setopt(e, CURLOPT_CLOSESOCKETDATA, x->h);
    if (fresh(x, url))
        curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);
    curl_easy_setopt(e, CURLOPT_PRIVATE, x);
}
