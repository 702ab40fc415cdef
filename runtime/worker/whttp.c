/* whttp.c - jobrunner.http(request) in handlers: an HTTP request with
 * libcurl's multi-socket interface on the worker's libevent loop (one
 * multi handle per worker; its sockets and its timer are events of the
 * loop, no thread, no shell). The calling task waits (task.c) until the
 * transfer ends. Owns the multi handle and the transfers in flight; a
 * request's setup from its table is whttpreq.c's. Uses worker_int.h and
 * whttp.h. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <curl/curl.h>
#include <event2/event.h>
#include <event2/event_struct.h>
#include <lauxlib.h>
#include <lua.h>

#include "base/log.h"
#include "worker/worker_int.h"
#include "worker/whttp.h"

typedef struct sock {                   /* one socket curl watches */
    struct event        ev;             /* set while what != 0 */
    short               what;           /* EV_READ, EV_WRITE it waits for */
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

/* CURLMOPT_SOCKETFUNCTION: watch s for what curl wants. Its event is
 * set again only when that changes (a request's socket is watched for
 * writing while it connects, then for reading). */
static int
socket_cb(CURL *e, curl_socket_t fd, int what, void *userp, void *socketp)
{
    jr_http *h = userp;
    sock *s = socketp;
    short ev = (short)((what & CURL_POLL_IN ? EV_READ : 0) |
                       (what & CURL_POLL_OUT ? EV_WRITE : 0));

    (void)e;
    if (what == CURL_POLL_REMOVE) {
        if (s != NULL) {
            if (s->what != 0)
                event_del(&s->ev);
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
    } else if (s->what == ev) {
        return 0;
    } else if (s->what != 0) {
        event_del(&s->ev);
    }
    s->what = ev;
    if (ev == 0)
        return 0;
    if (event_assign(&s->ev, h->base, fd, (short)(ev | EV_PERSIST),
                     on_socket, s) < 0)
        return s->what = 0, -1;
    return event_add(&s->ev, NULL);
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

static void
xfer_free(xfer *x)
{
    jr_http *h = x->h;

    curl_multi_remove_handle(h->multi, x->easy);
    h->added -= x->added;
    if (h->neasy < h->kept) {
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

/* The connections h's cache keeps: h->kept, unless the open files limit
 * is below it and HTTP_NOFILE_SPARE: idle connections hold open files,
 * and after a wave they would take all of them, every exec and io.open
 * of the worker's jobs failing until it restarts. Says so once. */
static int
max_conns(const jr_http *h)
{
    struct rlimit rl;
    int n;

    if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY ||
        (rlim_t)h->kept + HTTP_NOFILE_SPARE <= rl.rlim_cur)
        return h->kept;
    n = rl.rlim_cur > 2 * HTTP_NOFILE_SPARE ?
        (int)(rl.rlim_cur - HTTP_NOFILE_SPARE) : (int)(rl.rlim_cur / 2);
    jr_log(JR_LOG_WARN, "jobrunner.http: this worker keeps %d idle "
           "connections at most, not %d: its open files limit is %llu "
           "(ulimit -n); a request beyond it fails with 'Too many open "
           "files'", n, h->kept, (unsigned long long)rl.rlim_cur);
    return n > 0 ? n : 1;
}

/* libcurl and the multi handle, at the first request: a worker whose
 * handlers make none pays nothing for them. Its connection cache and
 * its pool of easy handles hold as many as the worker runs at once, so
 * that a dip in the requests in flight closes no connection (libcurl's
 * own cache is 4 times the handles in flight at the moment one ends).
 * -1 when they cannot start. */
static int
start(jr_http *h)
{
    if (h->multi != NULL)
        return 0;
    if ((h->kept = jr_co_kept(h->w)) <= 0 ||
        curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK ||
        (h->easy == NULL &&
         (h->easy = calloc((size_t)h->kept, sizeof *h->easy)) == NULL) ||
        (h->multi = curl_multi_init()) == NULL)
        return -1;
    curl_multi_setopt(h->multi, CURLMOPT_MAXCONNECTS, (long)max_conns(h));
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
    jr_whttp_setup(L, lua_touserdata(L, 2));
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
    x->added = 1;
    h->added++;
    return jr_task_wait(L, t, xfer_cancel, x);
}

int
jr_whttp_open(worker *w, lua_State *L, jr_err *err)
{
    jr_http *h;

    if ((h = calloc(1, sizeof *h)) == NULL)
        return jr_fail(err, JR_ENOMEM, "worker: out of memory");
    h->base = w->base;
    h->w = w;
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
    free(h->easy);
    if (h->multi != NULL)
        curl_multi_cleanup(h->multi);
    if (h->timer != NULL)
        event_free(h->timer);
    free(h);
    w->http = NULL;
}
