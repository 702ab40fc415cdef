/* httpconn.c - the HTTP server's connections: how many, how long a
 * request may take to arrive, and accept() when descriptors run out.
 * evhttp makes each connection's bufferevent with our callback (bevcb);
 * once evhttp has wrapped it in its connection (on the loop's next turn:
 * we hold a reference until then), our record hears of the connection's
 * end through its close callback. We close an idle connection with
 * evhttp_connection_free, as evhttp does. Uses httpconn.h, log.h,
 * util.h; libevent. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>

#include "http/api.h"
#include "http/http.h"
#include "http/httpconn.h"
#include "base/log.h"
#include "base/util.h"

typedef struct every {          /* a condition logged at most once per */
    double  last;               /* JR_HTTPCONN_LOG_EVERY: last logged */
    long    n;                  /* times since */
} every;

typedef struct conn {
    jr_httpconn              *o;        /* NULL once the server stopped */
    struct bufferevent       *bev;      /* the socket's */
    struct evhttp_connection *evcon;    /* NULL until init_cb */
    struct event             *init;     /* init_cb, once */
    struct event             *deadline; /* the request must be in by then */
    struct evbuffer_cb_entry *incb;     /* arrived() */
    struct evbuffer_cb_entry *outcb;    /* sent() */
    int                       busy;     /* a request is being answered */
    int                       closing;  /* closed by us */
    int                       started;  /* bytes of the next request came */
    struct conn              *prev, *next;  /* the oldest idle first */
} conn;

struct jr_httpconn {
    struct event_base      *base;
    struct evconnlistener  *lev;
    struct event           *watch;  /* the listening socket, while full */
    struct event           *resume; /* accept() again after a failure */
    struct event           *relax;  /* limit back to max after a while */
    struct timeval          timeout;
    int                     max;    /* http.max_connections */
    int                     limit;  /* max, or less while descriptors
                                       ran out */
    int                     count, closing, backoff, full;
    conn                   *head, *tail;
    every                   log_full, log_evict, log_slow, log_accept;
    jr_httpconn            *next_owner;
};

/* The listener's error callback gets only the evhttp: it finds its
 * owner here (a process has one server; a list costs nothing). */
static jr_httpconn *owners;

/* Counts one more; returns how many to report when a line is due (at
 * most once per JR_HTTPCONN_LOG_EVERY), else 0. */
static long
tick(every *t)
{
    double now = jr_mono();
    long n;

    t->n++;
    if (t->last > 0 && now - t->last < JR_HTTPCONN_LOG_EVERY)
        return 0;
    n = t->n;
    t->n = 0;
    t->last = now;
    return n;
}

static void
unlink_conn(jr_httpconn *o, conn *c)
{
    *(c->prev ? &c->prev->next : &o->head) = c->next;
    *(c->next ? &c->next->prev : &o->tail) = c->prev;
    c->prev = c->next = NULL;
}

static void
append(jr_httpconn *o, conn *c)
{
    c->prev = o->tail;
    *(o->tail ? &o->tail->next : &o->head) = c;
    o->tail = c;
}

static conn *
oldest_idle(jr_httpconn *o)
{
    conn *c;

    for (c = o->head; c && (c->busy || c->closing || !c->evcon);
         c = c->next)
        ;
    return c;
}

/* Closes c (idle) as evhttp closes its own; c is gone on return. */
static void
close_conn(conn *c)
{
    c->closing = 1;
    c->o->closing++;
    evhttp_connection_free(c->evcon);
}

/* Accepts while there is room; at the cap, watches for a connection
 * waiting, which takes the place of the oldest idle one. */
static void
adjust(jr_httpconn *o)
{
    int full = o->count >= o->limit;
    long n;

    if (full && !o->full && (n = tick(&o->log_full)) > 0)
        jr_log(JR_LOG_WARN, "http: %d connections open, the most %s: a "
               "new one waits, or takes the place of the oldest idle one "
               "(reached %ld time%s since the last such line)", o->count,
               o->limit < o->max ? "while descriptors are short" :
               "http.max_connections allows", n, n > 1 ? "s" : "");
    o->full = full;
    if (o->backoff || full)
        evconnlistener_disable(o->lev);
    else
        evconnlistener_enable(o->lev);
    if (!o->backoff && full && o->closing == 0 && oldest_idle(o) != NULL)
        event_add(o->watch, NULL);
    else
        event_del(o->watch);
}

/* A connection waits while all places are taken. */
static void
watch_cb(evutil_socket_t fd, short what, void *arg)
{
    jr_httpconn *o = arg;
    conn *c = oldest_idle(o);
    long n;

    (void)fd;
    (void)what;
    event_del(o->watch);
    if (c == NULL)
        return;
    if ((n = tick(&o->log_evict)) > 0)
        jr_log(JR_LOG_INFO, "http: closed the oldest idle connection to "
               "make room for a new one (%ld time%s since the last such "
               "line)", n, n > 1 ? "s" : "");
    close_conn(c);
}

static void
deadline_cb(evutil_socket_t fd, short what, void *arg)
{
    conn *c = arg;
    long n;

    (void)fd;
    (void)what;
    if (c->busy || c->closing)
        return;
    if (c->started && (n = tick(&c->o->log_slow)) > 0)
        jr_log(JR_LOG_WARN, "http: a request did not arrive whole within "
               "%d s: its connection was closed (%ld time%s since the last "
               "such line)", (int)c->o->timeout.tv_sec, n, n > 1 ? "s" : "");
    close_conn(c);
}

/* Bytes came on c's socket. */
static void
arrived(struct evbuffer *buf, const struct evbuffer_cb_info *info,
        void *arg)
{
    (void)buf;
    if (info->n_added > 0)
        ((conn *)arg)->started = 1;
}

/* Appends to b the JSON reply for evhttp's reply head (NUL-terminated,
 * status line first) of status code. */
static void
json_reply(jr_buf *b, const char *head, int code)
{
    char line[128], msg[256];
    const char *reason;
    size_t n = strcspn(head, "\r");

    snprintf(line, sizeof line, "%.*s", (int)n, head);
    reason = strchr(line, ' ') ? strchr(strchr(line, ' ') + 1, ' ') : NULL;
    reason = reason ? reason + 1 : "error";
    if (code == 413)
        snprintf(msg, sizeof msg, "request body too large: at most %d "
                 "bytes", JR_HTTP_BODY_MAX);
    else if (code == 400)
        snprintf(msg, sizeof msg, "malformed request, or headers over %d "
                 "bytes", JR_HTTP_HEADER_MAX);
    else if (code == 501)
        snprintf(msg, sizeof msg, "unknown method");
    else
        snprintf(msg, sizeof msg, "%s", reason);
    jr_api_printf(b, "%s\r\nContent-Type: application/json\r\n"
                  "Cache-Control: no-store\r\nX-Content-Type-Options: "
                  "nosniff\r\n%sContent-Length: %zu\r\n\r\n", line,
                  strcasestr(head, "\r\nConnection: close") ?
                  "Connection: close\r\n" : "", strlen(msg) + 13);
    jr_api_printf(b, "{\"error\":\"%s\"}\n", msg);
}

/* Where the reply at p (n bytes) ends, once it is all there: its head
 * in head (NUL-terminated), *code its status. 0: not whole yet. */
static size_t
reply_end(const char *p, size_t n, char *head, size_t size, int *code)
{
    const char *hend = memmem(p, n, "\r\n\r\n", 4), *cl;
    size_t hlen = hend ? (size_t)(hend - p) + 4 : 0, body = 0;

    if (hend == NULL || hlen >= size)
        return 0;
    memcpy(head, p, hlen);
    head[hlen] = '\0';
    if (sscanf(head, "HTTP/%*d.%*d %d", code) != 1)
        return 0;
    if ((cl = strcasestr(head, "\r\nContent-Length:")) != NULL)
        body = strtoul(cl + 17, NULL, 10);
    return hlen + body <= n ? hlen + body : 0;
}

/* evhttp's own replies (to a request it refused before route(), a body
 * too large: 413) are HTML. Each is put in c's output whole before any
 * of it is written: once whole, it is swapped for a JSON one. Interim
 * replies (100 Continue) pass. */
static void
sent(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
    conn *c = arg;
    size_t len = evbuffer_get_length(buf), at = 0, end;
    const char *p;
    char head[2048];
    jr_buf b = {0};
    int code = 0;

    if (c->busy || info->n_added == 0 || len > 8192)
        return;
    p = (const char *)evbuffer_pullup(buf, -1);
    while ((end = reply_end(p + at, len - at, head, sizeof head, &code)) >
           0 && code < 200)
        at += end;
    if (end == 0 || code < 400)
        return;
    jr_buf_put(&b, p, at);
    json_reply(&b, head, code);
    jr_buf_put(&b, p + at + end, len - at - end);
    if (!b.oom) {
        evbuffer_cb_clear_flags(buf, c->outcb, EVBUFFER_CB_ENABLED);
        evbuffer_drain(buf, len);
        evbuffer_add(buf, b.p, b.len);
        evbuffer_cb_set_flags(buf, c->outcb, EVBUFFER_CB_ENABLED);
    }
    jr_buf_free(&b);
}

/* Forgets c; its connection is being freed. */
static void
drop(conn *c)
{
    jr_httpconn *o = c->o;

    evbuffer_remove_cb_entry(bufferevent_get_input(c->bev), c->incb);
    evbuffer_remove_cb_entry(bufferevent_get_output(c->bev), c->outcb);
    if (o != NULL) {
        unlink_conn(o, c);
        event_free(c->deadline);
        event_free(c->init);
        o->count--;
        o->closing -= c->closing;
        adjust(o);
    }
    free(c);
}

static void
conn_closed(struct evhttp_connection *evcon, void *arg)
{
    (void)evcon;
    drop(arg);
}

/* The loop's turn after evhttp took c's bufferevent: evhttp's connection
 * is its event callback's argument. */
static void
init_cb(evutil_socket_t fd, short what, void *arg)
{
    conn *c = arg;
    bufferevent_event_cb ev = NULL;
    void *evcon = NULL;

    (void)fd;
    (void)what;
    bufferevent_getcb(c->bev, NULL, NULL, &ev, &evcon);
    if (ev == NULL || evcon == NULL ||
        evhttp_connection_get_bufferevent(evcon) != c->bev) {
        struct bufferevent *bev = c->bev;   /* evhttp freed it already */
        drop(c);
        bufferevent_decref(bev);
        return;
    }
    c->evcon = evcon;
    evhttp_connection_set_closecb(evcon, conn_closed, c);
    bufferevent_decref(c->bev);
    /* c can be closed for a waiting one now: at the cap reached by a
     * burst of accepts (none of them wrapped yet), no watch was set, and
     * a connection waiting would wait for an idle one's deadline */
    if (c->o != NULL)
        adjust(c->o);
}

/* evhttp's new connection. */
static struct bufferevent *
new_conn(struct event_base *base, void *arg)
{
    jr_httpconn *o = arg;
    conn *c = calloc(1, sizeof *c);

    if (c == NULL ||
        (c->deadline = evtimer_new(base, deadline_cb, c)) == NULL ||
        (c->init = event_new(base, -1, 0, init_cb, c)) == NULL ||
        (c->bev = bufferevent_socket_new(base, -1,
                                         BEV_OPT_CLOSE_ON_FREE)) == NULL ||
        (c->incb = evbuffer_add_cb(bufferevent_get_input(c->bev), arrived,
                                   c)) == NULL ||
        (c->outcb = evbuffer_add_cb(bufferevent_get_output(c->bev), sent,
                                    c)) == NULL) {
        if (c != NULL && c->bev != NULL)
            bufferevent_free(c->bev);
        if (c != NULL && c->init != NULL)
            event_free(c->init);
        if (c != NULL && c->deadline != NULL)
            event_free(c->deadline);
        free(c);
        return NULL;            /* evhttp makes its own */
    }
    bufferevent_incref(c->bev);
    event_active(c->init, EV_TIMEOUT, 1);
    c->o = o;
    append(o, c);
    o->count++;
    evtimer_add(c->deadline, &o->timeout);
    adjust(o);
    return c->bev;
}

/* The reply of c's request is sent: c is idle, waiting for the next. */
static void
replied(struct evhttp_request *req, void *arg)
{
    conn *c = arg;
    jr_httpconn *o = c->o;

    (void)req;
    if (o == NULL)
        return;
    c->busy = 0;
    c->started = 0;
    unlink_conn(o, c);
    append(o, c);
    evtimer_add(c->deadline, &o->timeout);
    adjust(o);
}

static void
resume_cb(evutil_socket_t fd, short what, void *arg)
{
    jr_httpconn *o = arg;

    (void)fd;
    (void)what;
    o->backoff = 0;
    adjust(o);
}

static void
relax_cb(evutil_socket_t fd, short what, void *arg)
{
    jr_httpconn *o = arg;

    (void)fd;
    (void)what;
    o->limit = o->max;
    adjust(o);
}

/* accept() failed (no descriptor left, most often): stop accepting for a
 * while and close the oldest idle connection. */
static void
accept_failed(struct evconnlistener *lev, void *ptr)
{
    int e = errno;
    jr_httpconn *o;
    conn *c;
    struct timeval tv = {(time_t)JR_HTTPCONN_BACKOFF, (suseconds_t)
                         ((JR_HTTPCONN_BACKOFF - (int)JR_HTTPCONN_BACKOFF) *
                          1e6)}, relax = {(time_t)JR_HTTPCONN_LOG_EVERY, 0};
    long n;

    (void)ptr;
    for (o = owners; o && o->lev != lev; o = o->next_owner)
        ;
    if (o == NULL)
        return;
    /* fewer places for a while: at the cap, a new connection takes the
     * place of the oldest idle one, leaving a descriptor free */
    o->limit = o->count > 1 ? o->count - 1 : 1;
    o->backoff = 1;
    evtimer_add(o->resume, &tv);
    evtimer_add(o->relax, &relax);
    adjust(o);
    c = oldest_idle(o);
    if ((n = tick(&o->log_accept)) > 0)
        jr_log(JR_LOG_WARN, "http: cannot accept a connection: %s (%ld "
               "time%s since the last such line): %d open, accepting again "
               "in %.1f s, at most %d for %.0f s%s", strerror(e), n,
               n > 1 ? "s" : "", o->count, JR_HTTPCONN_BACKOFF, o->limit,
               JR_HTTPCONN_LOG_EVERY, c ? ", the oldest idle one closed" :
               "");
    if (c != NULL)
        close_conn(c);
}

jr_httpconn *
jr_httpconn_new(struct evhttp *http, struct evhttp_bound_socket *bound,
                int max, int timeout, jr_err *err)
{
    struct evconnlistener *lev = evhttp_bound_socket_get_listener(bound);
    jr_httpconn *o = calloc(1, sizeof *o);

    if (o == NULL || (o->base = evconnlistener_get_base(lev)) == NULL ||
        (o->watch = event_new(o->base, evconnlistener_get_fd(lev),
                              EV_READ | EV_PERSIST, watch_cb, o)) == NULL ||
        (o->resume = evtimer_new(o->base, resume_cb, o)) == NULL ||
        (o->relax = evtimer_new(o->base, relax_cb, o)) == NULL) {
        if (o != NULL && o->resume != NULL)
            event_free(o->resume);
        if (o != NULL && o->watch != NULL)
            event_free(o->watch);
        free(o);
        return jr_fail(err, JR_ENOMEM, "http: out of memory"), NULL;
    }
    o->lev = lev;
    o->max = o->limit = max;
    o->timeout.tv_sec = timeout;
    o->next_owner = owners;
    owners = o;
    evconnlistener_set_error_cb(lev, accept_failed);
    evhttp_set_bevcb(http, new_conn, o);
    return o;
}

void
jr_httpconn_free(jr_httpconn *o)
{
    jr_httpconn **pp;
    conn *c, *next;

    if (o == NULL)
        return;
    for (pp = &owners; *pp; pp = &(*pp)->next_owner)
        if (*pp == o) {
            *pp = o->next_owner;
            break;
        }
    /* the records of evhttp's connections go with them (conn_closed);
     * those not yet known to evhttp's go now */
    for (c = o->head; c; c = next) {
        next = c->next;
        event_free(c->deadline);
        event_free(c->init);
        c->o = NULL;
        if (c->evcon == NULL) {
            struct bufferevent *bev = c->bev;
            drop(c);
            bufferevent_decref(bev);
        }
    }
    event_free(o->watch);
    event_free(o->resume);
    event_free(o->relax);
    free(o);
}

void
jr_httpconn_busy(jr_httpconn *o, struct evhttp_request *req)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    struct bufferevent *bev = evcon ?
        evhttp_connection_get_bufferevent(evcon) : NULL;
    conn *c;

    for (c = o->head; c && c->bev != bev; c = c->next)
        ;
    if (c == NULL)
        return;                 /* evhttp's own (out of memory) */
    c->busy = 1;
    evtimer_del(c->deadline);
    evhttp_request_set_on_complete_cb(req, replied, c);
    adjust(o);
}

/* Writes c's output to its socket until it is empty or until (mono). */
static void
flush_conn(conn *c, double until)
{
    struct evbuffer *out = bufferevent_get_output(c->bev);
    evutil_socket_t fd = bufferevent_getfd(c->bev);
    struct pollfd pfd = {fd, POLLOUT, 0};
    double left;

    while (fd >= 0 && evbuffer_get_length(out) > 0) {
        if (evbuffer_write(out, fd) >= 0)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return;             /* the peer is gone */
        if ((left = until - jr_mono()) <= 0)
            return;
        if (poll(&pfd, 1, (int)(left * 1000) + 1) < 0 && errno != EINTR)
            return;
    }
}

void
jr_httpconn_flush(jr_httpconn *o, double secs)
{
    double until = jr_mono() + secs;
    conn *c;

    for (c = o ? o->head : NULL; c; c = c->next)
        if (c->bev != NULL)
            flush_conn(c, until);
}

int
jr_httpconn_count(const jr_httpconn *o)
{
    return o ? o->count : 0;
}
