/* whttp.c - jobrunner.http(request) in handlers: an HTTP request with
 * libcurl's multi-socket interface on the worker's libevent loop (one
 * multi handle per worker; its sockets and its timer are events of the
 * loop, no thread, no shell). The calling task waits (task.c) until the
 * transfer ends. Owns the multi handle and the transfers in flight. Uses
 * worker_int.h and plain Lua reads of the request table. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <curl/curl.h>
#include <event2/event.h>
#include <lauxlib.h>
#include <lua.h>

#include "worker/worker_int.h"

#define HTTP_TIMEOUT  30.0              /* seconds, when none is given */
#define HTTP_MAX_SIZE (16L << 20)       /* response bytes, when none */
#define EASY_KEPT     512               /* easy handles kept for reuse */
#define HTTP_MAX_HEAD 1000000           /* url and headers; libcurl's 1 MiB
                                         * head holds its own lines too */

typedef struct jr_http {
    CURLM              *multi;
    struct event_base  *base;
    struct event       *timer;
    CURL               *easy[EASY_KEPT];/* reset, for the next requests */
    int                 neasy;
    lua_State          *build;          /* a thread of our own (complete) */
} jr_http;

typedef struct xfer {                   /* one request in flight */
    jr_http            *h;
    jr_task            *t;
    CURL               *easy;
    struct curl_slist  *headers;
    char               *body;           /* the request body, owned */
    jr_buf              resp;           /* the response body */
    jr_buf              head;           /* the last response's headers */
    long                max_size;
    int                 too_big;
    int                 sock_errno;     /* socket()'s failure, or 0 */
    char                url[256];       /* for messages */
    char                errbuf[CURL_ERROR_SIZE];
} xfer;

typedef struct sock {                   /* one socket curl watches */
    struct event       *ev;
    jr_http            *h;
} sock;

static void check_done(jr_http *h);

static void
on_socket(evutil_socket_t fd, short what, void *arg)
{
    jr_http *h = ((sock *)arg)->h;     /* the action may free the sock */
    int running, flags = (what & EV_READ ? CURL_CSELECT_IN : 0) |
                         (what & EV_WRITE ? CURL_CSELECT_OUT : 0);

    curl_multi_socket_action(h->multi, fd, flags, &running);
    check_done(h);
}

static void
on_timer(evutil_socket_t fd, short what, void *arg)
{
    jr_http *h = arg;
    int running;

    (void)fd;
    (void)what;
    curl_multi_socket_action(h->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    check_done(h);
}

/* CURLMOPT_SOCKETFUNCTION: watch s for what curl wants. */
static int
socket_cb(CURL *e, curl_socket_t fd, int what, void *userp, void *socketp)
{
    jr_http *h = userp;
    sock *s = socketp;
    short ev = (short)((what & CURL_POLL_IN ? EV_READ : 0) |
                       (what & CURL_POLL_OUT ? EV_WRITE : 0) | EV_PERSIST);

    (void)e;
    if (what == CURL_POLL_REMOVE) {
        if (s != NULL) {
            event_free(s->ev);
            free(s);
        }
        curl_multi_assign(h->multi, fd, NULL);
        return 0;
    }
    if (s == NULL) {
        if ((s = calloc(1, sizeof *s)) == NULL)
            return -1;
        s->h = h;
        curl_multi_assign(h->multi, fd, s);
    } else {
        event_free(s->ev);
    }
    s->ev = event_new(h->base, fd, ev, on_socket, s);
    return s->ev != NULL ? event_add(s->ev, NULL) : -1;
}

/* CURLMOPT_TIMERFUNCTION: curl's one timeout. */
static int
timer_cb(CURLM *multi, long ms, void *userp)
{
    jr_http *h = userp;
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};

    (void)multi;
    if (ms < 0)
        return evtimer_del(h->timer);
    return evtimer_add(h->timer, &tv);
}

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
    return fd;
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

static void
xfer_free(xfer *x)
{
    jr_http *h = x->h;

    curl_multi_remove_handle(h->multi, x->easy);
    if (h->neasy < EASY_KEPT) {
        curl_easy_reset(x->easy);
        h->easy[h->neasy++] = x->easy;
    } else {
        curl_easy_cleanup(x->easy);
    }
    curl_slist_free_all(x->headers);
    free(x->body);
    jr_buf_free(&x->resp);
    jr_buf_free(&x->head);
    free(x);
}

/* The task's end before the transfer's: a timeout, a cancel. */
static void
xfer_cancel(void *op)
{
    xfer_free(op);
}

/* Pushes the headers as a table of lowercase names. [-0, +1, m] */
static void
push_headers(lua_State *L, const jr_buf *b)
{
    const char *p = b->p, *end = b->p + b->len;

    lua_newtable(L);
    while (p != NULL && p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        const char *colon = memchr(p, ':', (size_t)((eol ? eol : end) - p));
        const char *v, *ve = eol ? eol : end;
        if (colon != NULL && colon > p) {
            luaL_Buffer nb;
            luaL_buffinit(L, &nb);
            for (const char *c = p; c < colon; c++)
                luaL_addchar(&nb, (char)tolower((unsigned char)*c));
            luaL_pushresult(&nb);
            for (v = colon + 1; v < ve && (*v == ' ' || *v == '\t'); v++)
                ;
            while (ve > v && (ve[-1] == '\r' || ve[-1] == ' '))
                ve--;
            lua_pushlstring(L, v, (size_t)(ve - v));
            lua_settable(L, -3);
        }
        p = eol ? eol + 1 : end;
    }
}

/* The outcome of x, ended with rc, on L: the response, or nil and the
 * error. Allocates: run protected (done_p). */
static int
push_outcome(lua_State *L, xfer *x, CURLcode rc)
{
    long status = 0;

    if (rc == CURLE_OK) {
        curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
        lua_createtable(L, 0, 3);
        lua_pushinteger(L, status);
        lua_setfield(L, -2, "status");
        push_headers(L, &x->head);
        lua_setfield(L, -2, "headers");
        lua_pushlstring(L, x->resp.p ? x->resp.p : "", x->resp.len);
        lua_setfield(L, -2, "body");
        return 1;
    }
    lua_pushnil(L);
    if (x->sock_errno != 0)
        lua_pushfstring(L, "jobrunner.http: %s: cannot open a socket: %s",
                        x->url, strerror(x->sock_errno));
    else if (x->too_big)
        lua_pushfstring(L, "jobrunner.http: %s: response larger than "
                        "max_size (%d bytes)", x->url, (int)x->max_size);
    else
        lua_pushfstring(L, "jobrunner.http: %s: %s", x->url,
                        x->errbuf[0] ? x->errbuf : curl_easy_strerror(rc));
    return 2;
}

static int
done_p(lua_State *L)
{
    return push_outcome(L, lua_touserdata(L, 1),
                        (CURLcode)lua_tointeger(L, 2));
}

/* The message of a response that did not fit in memory. */
static int
nomem_p(lua_State *L)
{
    const xfer *x = lua_touserdata(L, 1);

    lua_pushnil(L);
    lua_pushfstring(L, "jobrunner.http: %s: not enough memory for the "
                    "response (%d bytes)", x->url, (int)x->resp.len);
    return 2;
}

/* The transfer ended with rc: the response or nil and the error for the
 * task, which resumes. They are built on the thread h->build under a
 * protected call, then moved to the task's: this runs in the loop's
 * callback, where a memory error (memory_limit) must not jump out through
 * libevent, and the task's thread may be a suspended coroutine, where no
 * call can run. The job's memory_limit holds meanwhile, as while the job
 * runs: a response over it fails the call, then the job. */
static void
complete(xfer *x, CURLcode rc)
{
    lua_State *B = x->h->build;
    jr_task *t = x->t;
    jr_memlimit *ml = t->job != NULL ? &t->job->w->mem : NULL;
    int n, enforce = ml != NULL ? ml->enforce : 0;

    if (ml != NULL)
        ml->enforce = 1;
    lua_pushcfunction(B, done_p);
    lua_pushlightuserdata(B, x);
    lua_pushinteger(B, rc);
    if (lua_pcall(B, 2, LUA_MULTRET, 0) != LUA_OK) {
        lua_pushcfunction(B, nomem_p);
        lua_pushlightuserdata(B, x);
        if (lua_pcall(B, 1, 2, 0) != LUA_OK) {
            lua_pushnil(B);                          /* err nil */
            lua_insert(B, -2);                       /* nil err */
        }
        lua_remove(B, 1);                            /* the first error */
    }
    if (ml != NULL)
        ml->enforce = enforce;
    n = lua_gettop(B);
    lua_xmove(B, jr_task_thread(t), n);
    xfer_free(x);
    jr_task_wake(t, n);
}

static void
check_done(jr_http *h)
{
    CURLMsg *msg;
    int left;
    xfer *x;

    while ((msg = curl_multi_info_read(h->multi, &left)) != NULL)
        if (msg->msg == CURLMSG_DONE) {
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &x);
            complete(x, msg->data.result);
        }
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
    int cl = 0, te = 0;
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
static void
setup(lua_State *L, xfer *x)
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
    curl_easy_setopt(e, CURLOPT_PRIVATE, x);
}

/* libcurl and the multi handle, at the first request: a worker whose
 * handlers make none pays nothing for them. -1 when they cannot start. */
static int
start(jr_http *h)
{
    if (h->multi != NULL)
        return 0;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK ||
        (h->multi = curl_multi_init()) == NULL)
        return -1;
    curl_multi_setopt(h->multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
    curl_multi_setopt(h->multi, CURLMOPT_SOCKETDATA, h);
    curl_multi_setopt(h->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
    curl_multi_setopt(h->multi, CURLMOPT_TIMERDATA, h);
    return 0;
}

/* setup under a protected call: (request, x). */
static int
setup_p(lua_State *L)
{
    setup(L, lua_touserdata(L, 2));
    return 0;
}

/* jobrunner.http{ url =, method =, headers =, body =, timeout =,
 * redirects =, max_size =, verify =, cainfo = }: { status, headers, body }
 * or nil and a message. The handler's coroutine waits meanwhile. */
static int
whttp_http(lua_State *L)
{
    jr_task *t;
    jr_http *h;
    xfer *x;

    luaL_checktype(L, 1, LUA_TTABLE);
    t = jr_task_of(L, "http");
    h = lua_touserdata(L, lua_upvalueindex(1));
    if (start(h) < 0)
        return luaL_error(L, "jobrunner.http: cannot start libcurl");
    if ((x = calloc(1, sizeof *x)) == NULL ||
        (x->easy = h->neasy > 0 ? h->easy[--h->neasy] :
                   curl_easy_init()) == NULL) {
        free(x);
        return luaL_error(L, "jobrunner.http: out of memory");
    }
    x->h = h;
    x->t = t;
    /* a bad field raises: x is freed first */
    lua_pushcfunction(L, setup_p);
    lua_pushvalue(L, 1);
    lua_pushlightuserdata(L, x);
    if (lua_pcall(L, 2, 0, 0) != LUA_OK) {
        xfer_free(x);
        return lua_error(L);
    }
    if (curl_multi_add_handle(h->multi, x->easy) != CURLM_OK) {
        xfer_free(x);
        return luaL_error(L, "jobrunner.http: cannot start the request");
    }
    return jr_task_wait(L, t, xfer_cancel, x);
}

int
jr_whttp_open(worker *w, lua_State *L, jr_err *err)
{
    jr_http *h;

    if ((h = calloc(1, sizeof *h)) == NULL)
        return jr_fail(err, JR_ENOMEM, "worker: out of memory");
    h->base = w->base;
    w->http = h;
    if ((h->timer = evtimer_new(w->base, on_timer, h)) == NULL)
        return jr_fail(err, JR_ENOMEM, "worker: out of memory");
    h->build = lua_newthread(L);                     /* M th */
    luaL_ref(L, LUA_REGISTRYINDEX);     /* kept for the worker's life */
    lua_pushlightuserdata(L, h);                     /* M h */
    lua_pushcclosure(L, whttp_http, 1);              /* M f */
    lua_setfield(L, -2, "http");                     /* M */
    return 0;
}

void
jr_whttp_close(worker *w)
{
    jr_http *h = w->http;

    if (h == NULL)
        return;
    while (h->neasy > 0)
        curl_easy_cleanup(h->easy[--h->neasy]);
    if (h->multi != NULL)
        curl_multi_cleanup(h->multi);
    if (h->timer != NULL)
        event_free(h->timer);
    free(h);
    w->http = NULL;
}
