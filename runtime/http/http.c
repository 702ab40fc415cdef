/* http.c - the HTTP server: listening (address, loopback and token
 * rules), routing (the token and cross-site checks are auth.c's), static
 * files, and the answers that come back from the database thread (the
 * long polls they start are httpwait.c's). /metrics is the runner's
 * counters (metrics.c) plus the database's gauges, read at most every
 * 5 s whatever the scrape rate (less often when a read is slow). An
 * operation that only reads (its row's reader, api.h) runs on a
 * connection and thread of its own, so that a scan of the jobs table
 * never waits in front of a claim; writes go through the runner's
 * database thread. Uses http.h, http_int.h, host.h, auth.h, httpconn.h,
 * api.h, log.h; libevent's evhttp. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "http/auth.h"
#include "http/http.h"
#include "http/http_int.h"
#include "http/httpconn.h"
#include "db/dbends.h"
#include "base/log.h"

#define GAUGES_MAX_AGE 5.0      /* seconds the database gauges are kept, */
#define GAUGES_COST_X  10.0     /* or this many times their read's time */
#define GAUGES_AGE_CAP 60.0     /* but never longer */

void
jr_http_reply(struct evhttp_request *req, int status, const char *type,
              const void *body, size_t len)
{
    struct evkeyvalq *out = evhttp_request_get_output_headers(req);
    struct evbuffer *buf = evbuffer_new();

    evhttp_add_header(out, "Content-Type", type);
    evhttp_add_header(out, "Cache-Control", "no-store");
    evhttp_add_header(out, "X-Content-Type-Options", "nosniff");
    evhttp_add_header(out, "X-Frame-Options", "DENY");
    evhttp_add_header(out, "Content-Security-Policy", "default-src 'none'; "
                      "script-src 'self'; style-src 'self'; connect-src "
                      "'self'; img-src 'self' data:; base-uri 'none'; "
                      "form-action 'none'; frame-ancestors 'none'");
    if (buf != NULL)
        evbuffer_add(buf, body, len);
    evhttp_send_reply(req, status, NULL, buf);
    if (buf != NULL)
        evbuffer_free(buf);
}

void
jr_http_error(struct evhttp_request *req, int status, const char *fmt, ...)
{
    char msg[600];
    jr_buf b = {0};
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    jr_buf_put(&b, "{\"error\":", 9);
    jr_api_str(&b, msg);
    jr_buf_put(&b, "}\n", 2);
    jr_http_reply(req, status, "application/json", b.p, b.len);
    jr_buf_free(&b);
}

awaited *
jr_http_await(jr_http *h, int kind, struct evhttp_request *req,
              jr_apireq *q)
{
    awaited *p = calloc(1, sizeof *p);

    if (p == NULL)
        return NULL;
    p->kind = kind;
    p->req = req;
    p->q = q;
    p->h = h;
    p->asked = jr_mono();
    p->next = h->waiting;
    h->waiting = p;
    return p;
}

void
jr_http_unawait(jr_http *h, awaited *p)
{
    awaited **pp;

    for (pp = &h->waiting; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            return;
        }
}

void
jr_http_awaited_free(awaited *p)
{
    jr_apireq_free(p->q);
    free(p);
}

void
jr_http_run(jr_db *db, void *arg)
{
    jr_apidb_run(db, ((awaited *)arg)->q);
}

static void scrape_reply(jr_http *h, struct evhttp_request *req);

/* The database thread answered p (ran 0: it stopped first). */
void
jr_http_answered(void *arg, int ran)
{
    awaited *p = arg, *w, *next;
    jr_http *h = p->h;

    if (h == NULL) {            /* the server stopped meanwhile */
        jr_http_awaited_free(p);
        return;
    }
    jr_http_unawait(h, p);
    if (p->kind == SWEEP) {
        jr_httpwait_looked(h, p->q, ran);
        jr_http_awaited_free(p);
        return;
    }
    if (p->kind == ASK && ran && p->q->op == &jr_apiop_job &&
        p->q->wait > 0 && p->q->status == 200 && !p->q->ended[0] &&
        h->sweep != NULL && !h->stopping) {
        jr_httpwait_park(h, p);        /* answered when the job ends */
        return;
    }
    if (p->kind == ASK && !ran)
        jr_http_error(p->req, 503, "the runner is stopping");
    else if (p->kind == ASK)
        jr_http_reply(p->req, p->q->status, "application/json",
                      p->q->body.p, p->q->body.len);
    if (p->kind == GAUGES) {
        h->gauges_asked = 0;
        jr_buf_reset(&h->gauges);
        if (ran && p->q->status == 200) {
            jr_buf_put(&h->gauges, p->q->body.p, p->q->body.len);
            h->gauges_at = jr_mono();
            /* a slow read (a big or bloated table) is made less often:
             * reads take at most a tenth of the reader's time */
            h->gauges_keep = GAUGES_COST_X * (h->gauges_at - h->asked_at);
            if (h->gauges_keep < GAUGES_MAX_AGE)
                h->gauges_keep = GAUGES_MAX_AGE;
            if (h->gauges_keep > GAUGES_AGE_CAP)
                h->gauges_keep = GAUGES_AGE_CAP;
        } else {
            jr_log(JR_LOG_WARN, "http: /metrics: cannot read the database's "
                   "counts: %.*s", (int)p->q->body.len, p->q->body.p);
        }
        for (w = h->waiting; w; w = next) {
            next = w->next;
            if (w->kind == SCRAPE) {
                jr_http_unawait(h, w);
                scrape_reply(h, w->req);
                jr_http_awaited_free(w);
            }
        }
    }
    jr_http_awaited_free(p);
}

/* The thread that runs operation op: the reader's when op reads only
 * and there is one. */
jr_dbthread *
jr_http_thread(jr_http *h, const jr_apiop *op)
{
    return op->reader && h->rdt != NULL ? h->rdt : h->host.dbt;
}

void
jr_http_ask(jr_http *h, struct evhttp_request *req, jr_apireq *q)
{
    awaited *p = jr_http_await(h, ASK, req, q);

    /* a long poll's first read marks its job (a write): the runner's */
    if (p == NULL ||
        jr_dbthread_request(q->keep > 0 ? h->host.dbt :
                            jr_http_thread(h, q->op), jr_http_run,
                            jr_http_answered, p) < 0) {
        if (p != NULL) {
            jr_http_unawait(h, p);
            p->q = NULL;
            free(p);
        }
        jr_apireq_free(q);
        jr_http_error(req, 503, "out of memory");
    }
}

/* The runner's series, then the database's gauges as last read. */
static void
scrape_reply(jr_http *h, struct evhttp_request *req)
{
    jr_buf b = {0};

    h->host.metrics_text(&h->host, &b);
    jr_api_printf(&b, "# HELP jobrunner_http_connections HTTP connections "
                  "open now (this scrape's included).\n# TYPE "
                  "jobrunner_http_connections gauge\n"
                  "jobrunner_http_connections %d\n",
                  jr_httpconn_count(h->conns));
    if (h->gauges_at > 0) {
        jr_buf_put(&b, h->gauges.p, h->gauges.len);
        jr_api_printf(&b, "# HELP jobrunner_db_gauges_age_seconds How old "
                      "the database's counts above are.\n# TYPE "
                      "jobrunner_db_gauges_age_seconds gauge\n"
                      "jobrunner_db_gauges_age_seconds %.3f\n",
                      jr_mono() - h->gauges_at);
    }
    if (b.oom)
        jr_http_error(req, 500, "out of memory");
    else
        jr_http_reply(req, 200, "text/plain; version=0.0.4; charset=utf-8",
                      b.p, b.len);
    jr_buf_free(&b);
}

static void
scrape(jr_http *h, struct evhttp_request *req)
{
    jr_apireq *q;
    awaited *p;

    if (h->gauges_at > 0 && jr_mono() - h->gauges_at < h->gauges_keep) {
        scrape_reply(h, req);
        return;
    }
    if (jr_http_await(h, SCRAPE, req, NULL) == NULL) {
        jr_http_error(req, 503, "out of memory");
        return;
    }
    if (h->gauges_asked)
        return;
    if ((q = calloc(1, sizeof *q)) == NULL ||
        (p = jr_http_await(h, GAUGES, NULL, q)) == NULL) {
        free(q);
        return;                 /* answered by the next scrape's read */
    }
    q->op = &jr_apiop_gauges;
    q->limits = h->host.cfg->limits.l;  /* its fair queues' gauges */
    q->nlimits = h->host.cfg->limits.n;
    if (jr_dbthread_request(jr_http_thread(h, q->op), jr_http_run,
                            jr_http_answered, p) < 0) {
        jr_http_unawait(h, p);
        jr_http_awaited_free(p);
        return;
    }
    h->gauges_asked = 1;
    h->asked_at = jr_mono();
}

/* 405 for a method path does not take: write is the route's method
 * (apiroute.h: 0 GET, 1 POST, 2 PUT, 3 DELETE). */
static void
not_allowed(struct evhttp_request *req, const char *path, int write)
{
    static const char *const allow[] = {"GET, HEAD", "POST", "PUT",
                                        "DELETE"};
    const char *a = allow[write >= 0 && write <= 3 ? write : 0];

    evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", a);
    jr_http_error(req, 405, "%.200s takes %s", path, write ? a : "GET");
}

static void
route_api(jr_http *h, struct evhttp_request *req, const char *path,
          const char *query, int post, int read)
{
    int write = jr_api_is_write(path + 5, post);
    const jr_token *who;

    if (write < 0)
        jr_http_error(req, 404, "no such API route: %.200s", path);
    else if ((!post && !read) || post != write)
        not_allowed(req, path, write);
    else if (jr_auth_check(&h->auth, req, path, post, &who) == 0)
        jr_api_handle(h, &h->host, req, path + 5, query, post, who);
}

static void
route(struct evhttp_request *req, void *arg)
{
    jr_http *h = arg;
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    const jr_dash_file *f;
    const jr_token *who;
    int post = cmd == EVHTTP_REQ_POST ? 1 : cmd == EVHTTP_REQ_PUT ? 2 :
               cmd == EVHTTP_REQ_DELETE ? 3 : 0,
        read = cmd == EVHTTP_REQ_GET || cmd == EVHTTP_REQ_HEAD;

    jr_httpconn_busy(h->conns, req);
    if (path == NULL || path[0] != '/') {
        jr_http_error(req, 400, "bad request path");
    } else if (jr_auth_host(&h->auth, req) < 0) {
        return;
    } else if (strncmp(path, "/api/", 5) == 0) {
        route_api(h, req, path, evhttp_uri_get_query(uri), post, read);
    } else if (!read) {
        not_allowed(req, path, 0);
    } else if (strcmp(path, "/metrics") == 0) {
        if (jr_auth_check(&h->auth, req, path, 0, &who) == 0)
            scrape(h, req);
    } else if ((f = jr_dash_find(path)) != NULL) {
        jr_http_reply(req, 200, f->type, f->data, f->len);
    } else {
        jr_http_error(req, 404, "no such page: %.200s", path);
    }
}

/* Splits "HOST:PORT" or "[V6]:PORT" and resolves it (numeric hosts and
 * localhost only: no name lookup blocks the loop). */
static int
resolve(const char *addr, struct addrinfo **ai, jr_err *err)
{
    char host[256], *end;
    const char *colon = strrchr(addr, ':'), *h = host;
    struct addrinfo hints = {0};
    size_t n;
    long port = colon ? strtol(colon + 1, &end, 10) : -1;
    int rc;

    if (colon == NULL || colon == addr || colon[1] < '0' || colon[1] > '9' ||
        *end ||
        port < 0 || port > 65535 || (size_t)(colon - addr) >= sizeof host)
        return jr_fail(err, JR_ECONFIG, "http.listen '%.200s': invalid "
                       "address, want HOST:PORT such as 127.0.0.1:8089",
                       addr);
    n = (size_t)(colon - addr);
    memcpy(host, addr, n);
    host[n] = '\0';
    if (host[0] == '[' && host[n - 1] == ']') {
        host[n - 1] = '\0';
        h = host + 1;
    }
    if (strcmp(h, "localhost") == 0)
        h = "127.0.0.1";
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE;
    if ((rc = getaddrinfo(h, colon + 1, &hints, ai)) != 0)
        return jr_fail(err, JR_ECONFIG, "http.listen '%.200s': invalid "
                       "address (%s), want HOST:PORT with a numeric host "
                       "or localhost, such as 127.0.0.1:8089", addr,
                       gai_strerror(rc));
    return 0;
}

static int
loopback(const struct sockaddr *sa)
{
    const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;

    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >>
                24) == 127;
    if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr))
        return s6->sin6_addr.s6_addr[12] == 127;
    return IN6_IS_ADDR_LOOPBACK(&s6->sin6_addr);
}

/* A listening socket on listen; logs the address it got, sets *port. */
static int
open_listener(const char *addr, int token, int *port, jr_err *err)
{
    struct addrinfo *ai;
    struct sockaddr_storage got;
    socklen_t len = sizeof got;
    char host[INET6_ADDRSTRLEN] = "?";
    int fd, one = 1, e;

    if (resolve(addr, &ai, err) < 0)
        return -1;
    if (!loopback(ai->ai_addr) && !token) {
        freeaddrinfo(ai);
        return jr_fail(err, JR_ECONFIG, "http.listen '%.200s' is not a "
                       "loopback address: set http.token too (anyone who "
                       "can reach it could read jobs and act on them), or "
                       "listen on 127.0.0.1", addr);
    }
    fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        /* accepted sockets inherit it: a reply written in pieces (a job
         * list) goes at once, not 40 ms later (Nagle meeting the
         * client's delayed ACK on a kept-alive connection) */
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0 ||
        bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 128) < 0) {
        e = errno;
        if (fd >= 0)
            close(fd);
        freeaddrinfo(ai);
        return jr_fail_errno(err, JR_ECONFIG, e, "http.listen '%.200s': "
                             "cannot listen", addr);
    }
    freeaddrinfo(ai);
    getsockname(fd, (struct sockaddr *)&got, &len);
    if (got.ss_family == AF_INET)
        inet_ntop(AF_INET, &((struct sockaddr_in *)&got)->sin_addr, host,
                  sizeof host);
    else
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&got)->sin6_addr, host,
                  sizeof host);
    *port = ntohs(got.ss_family == AF_INET ?
                  ((struct sockaddr_in *)&got)->sin_port :
                  ((struct sockaddr_in6 *)&got)->sin6_port);
    jr_log(JR_LOG_INFO, "http: listening on http://%s%s%s:%d/ (%s)",
           got.ss_family == AF_INET6 ? "[" : "", host,
           got.ss_family == AF_INET6 ? "]" : "", *port,
           token ? "token required" : "no token: read only");
    return fd;
}

/* The reads' own connection and thread; without them (the database
 * refused a second connection) the reads share the runner's. */
static void
open_reader(jr_http *h)
{
    jr_err e = {0};

    if ((h->rdt = jr_dbthread_side(h->host.cfg, h->host.token,
                                   h->host.base, 0, &h->rdb, &e)) == NULL)
        jr_log(JR_LOG_WARN, "http: no connection of its own (%s): its reads "
               "share the runner's", e.msg);
}

/* http.max_connections, or the default; at most half the descriptors
 * this process may open (the rest are for workers and the database). */
static int
max_conns(const jr_config *c)
{
    struct rlimit rl;
    int want = c->http_max_conns > 0 ? c->http_max_conns : JR_HTTP_CONNS;
    long half;

    if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
        return want;
    half = (long)(rl.rlim_cur / 2) > 1 ? (long)(rl.rlim_cur / 2) : 1;
    if (want <= half)
        return want;
    jr_log(JR_LOG_WARN, "http: http.max_connections %d is more than half "
           "of the %ld descriptors this process may open (ulimit -n): at "
           "most %ld connections", want, (long)rl.rlim_cur, half);
    return (int)half;
}

/* Makes h->http serve the listening socket fd; takes fd. */
static int
serve(jr_http *h, int fd, jr_err *err)
{
    const jr_config *c = h->host.cfg;
    struct evhttp_bound_socket *bound;
    int max = max_conns(c);

    if ((h->http = evhttp_new(h->host.base)) == NULL ||
        (bound = evhttp_accept_socket_with_handle(h->http, fd)) == NULL) {
        close(fd);
        return jr_fail(err, JR_ENOMEM, "http: cannot start the server");
    }
    if ((h->conns = jr_httpconn_new(h->http, bound, max, JR_HTTP_TIMEOUT,
                                    err)) == NULL)
        return -1;
    /* a silent or slow client holds only its own connection, and not
     * for long; a big body is refused before it is read */
    evhttp_set_timeout(h->http, JR_HTTP_TIMEOUT);
    evhttp_set_max_body_size(h->http, JR_HTTP_BODY_MAX);
    evhttp_set_max_headers_size(h->http, JR_HTTP_HEADER_MAX);
    /* every method reaches route(): the others get a JSON 405 */
    evhttp_set_allowed_methods(h->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD |
                               EVHTTP_REQ_POST | EVHTTP_REQ_PUT |
                               EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS |
                               EVHTTP_REQ_TRACE | EVHTTP_REQ_CONNECT |
                               EVHTTP_REQ_PATCH);
    evhttp_set_flags(h->http, EVHTTP_SERVER_LINGERING_CLOSE);
    evhttp_set_gencb(h->http, route, h);
    jr_log(JR_LOG_INFO, "http: at most %d connections, %d s for a request "
           "to arrive", max, JR_HTTP_TIMEOUT);
    return 0;
}

int
jr_http_start(const jr_httphost *host, jr_http **out, jr_err *err)
{
    const jr_config *c = host->cfg;
    jr_http *h;
    int fd, port = 0;

    *out = NULL;
    if (c->http_listen == NULL)
        return 0;
    if ((fd = open_listener(c->http_listen, c->http_token != NULL ||
                            c->http_ntokens > 0, &port, err)) < 0)
        return -1;
    if ((h = calloc(1, sizeof *h)) == NULL) {
        close(fd);
        return jr_fail(err, JR_ENOMEM, "http: cannot start the server");
    }
    h->host = *host;
    if (serve(h, fd, err) < 0) {
        if (h->http != NULL)
            evhttp_free(h->http);
        free(h);
        return -1;
    }
    /* the config outlives h */
    memcpy(h->auth.legacy_name, JR_AUTH_LEGACY, sizeof JR_AUTH_LEGACY);
    h->auth.legacy.name = h->auth.legacy_name;
    h->auth.legacy.secret = c->http_token;
    h->auth.legacy.scope = JR_TOKEN_WRITE;
    h->auth.tokens = c->http_tokens;
    h->auth.ntokens = c->http_ntokens;
    h->auth.port = port;
    snprintf(h->auth.host, sizeof h->auth.host, "%.*s",
             (int)(strrchr(c->http_listen, ':') - c->http_listen),
             c->http_listen);
    *out = h;
    open_reader(h);
    jr_httpwait_start(h);       /* after: its watch reads there */
    return 0;
}

void
jr_http_stop(jr_http *h)
{
    awaited *p, *next;

    if (h == NULL)
        return;
    jr_httpwait_stop(h);        /* the runner stops: as their jobs stand */
    /* answers still to come find no server: they only free themselves;
     * the requests they were for go with their connections */
    for (p = h->waiting; p; p = next) {
        next = p->next;
        /* a read's answer would find no server: a 503 says so; a write
         * may be done or not (one running now ends): no answer */
        if (p->req != NULL && p->q != NULL && p->q->op->reader)
            jr_http_error(p->req, 503, "the runner is stopping");
        p->h = NULL;
        p->req = NULL;
        if (p->q != NULL)       /* a bulk action ends after its page */
            atomic_store(&p->q->stop, 1);
        if (p->kind == SCRAPE)
            jr_http_awaited_free(p);
    }
    jr_httpconn_flush(h->conns, JR_HTTP_FLUSH);
    jr_dbthread_free(h->rdt);   /* its answers find no server */
    jr_dbends_free(h->ends);    /* after: its reopen runs there */
    jr_dbthread_close(h->rdb);
    jr_httpconn_free(h->conns);
    evhttp_free(h->http);
    jr_buf_free(&h->gauges);
    free(h);
}
