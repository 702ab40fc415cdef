/* slowhttp.c - a loopback HTTP server that answers every request after a
 * delay, for the I/O-bound bench and specs: it counts requests and keeps
 * the peak of requests it held at once. Uses libevent's evhttp only.
 *
 *   slowhttp DELAY_MS [PORT]
 *
 *   slowhttp load PORT CONNS N [each]
 *
 * Listens on 127.0.0.1:PORT (0 or none: any free port) and prints
 * "port N" on stdout once it listens. Every request waits DELAY_MS, then
 * gets 200 and "ok\n", except:
 *   GET /peak    the most requests held at once since the start or /reset
 *   GET /count   the requests answered since the start or /reset
 *   GET /accepts the connections accepted since the start or /reset
 *   GET /busy    the requests held on average (time-weighted) from the
 *                first request after /reset to the last answer
 *   GET /ramp?n=N  milliseconds from the first request after /reset to
 *                the N-th (N up to RAMP_MAX; -1 if fewer came)
 *   GET /reset   sets them all to 0
 *   any path with ?status=N answers N (after the delay); ?bytes=N answers
 *   N bytes of 'x'; ?delay=MS overrides the delay for that request.
 * These answer at once and are not counted.
 *
 * "load" is the lean client that measures what the server does alone
 * (load below): CONNS kept-alive connections, each with one GET in
 * flight at a time, until N are answered; prints "secs=S rate=R". It
 * opens them all before it sends the first request; with "each", the
 * loop runs once after each connect, so that a connection's request goes
 * out as soon as it is open, as a worker's do: the connects fall between
 * the first request and the last. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <strings.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

static long held, peak, count, accepts;
static double delay_ms;
static double area, t_first, t_change, t_last;  /* held x seconds, times */
#define RAMP_MAX 8192
static double arrived[RAMP_MAX];                /* the first requests' */

/* held changes by d: the time it was held at its old value adds up */
static void
hold(struct event_base *base, long d)
{
    struct timeval tv;
    double now;

    event_base_gettimeofday_cached(base, &tv);
    now = (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
    if (t_first == 0)
        t_first = t_change = now;
    area += (double)held * (now - t_change);
    t_change = now;
    held += d;
    if (d < 0)
        t_last = now;
    else if (count + held - 1 < RAMP_MAX)
        arrived[count + held - 1] = now;
}

typedef struct pending {
    struct event_base     *base;
    struct evhttp_request *req;
    struct event          *ev;
    int                    status;
    long                   bytes;
} pending;

static void
answer(evutil_socket_t fd, short what, void *arg)
{
    pending *p = arg;
    struct evbuffer *b = evbuffer_new();

    (void)fd;
    (void)what;
    if (p->bytes > 0) {
        char chunk[4096];
        long left = p->bytes;
        memset(chunk, 'x', sizeof chunk);
        while (left > 0) {
            long n = left < (long)sizeof chunk ? left : (long)sizeof chunk;
            evbuffer_add(b, chunk, (size_t)n);
            left -= n;
        }
    } else {
        evbuffer_add_printf(b, "ok\n");
    }
    evhttp_send_reply(p->req, p->status, "OK", b);
    evbuffer_free(b);
    event_free(p->ev);
    hold(p->base, -1);
    free(p);
    count++;
}

static void
reply_number(struct evhttp_request *req, long n)
{
    struct evbuffer *b = evbuffer_new();

    evbuffer_add_printf(b, "%ld\n", n);
    evhttp_send_reply(req, 200, "OK", b);
    evbuffer_free(b);
}

/* the busy average: held over the time requests were held */
static void
reply_busy(struct evhttp_request *req)
{
    struct evbuffer *b = evbuffer_new();
    double span = t_last - t_first;

    evbuffer_add_printf(b, "%.1f\n", span > 0 ? area / span : 0.0);
    evhttp_send_reply(req, 200, "OK", b);
    evbuffer_free(b);
}

/* evhttp's bufferevent for a connection it accepted: counted */
static struct bufferevent *
on_accept(struct event_base *base, void *arg)
{
    (void)arg;
    accepts++;
    return bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
}

static void
on_request(struct evhttp_request *req, void *arg)
{
    struct event_base *base = arg;
    const char *path = evhttp_request_get_uri(req);
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *query = uri ? evhttp_uri_get_query(uri) : NULL;
    struct evkeyvalq q;
    double ms = delay_ms;
    pending *p;
    struct timeval tv;

    if (strcmp(path, "/peak") == 0)
        return reply_number(req, peak);
    if (strcmp(path, "/count") == 0)
        return reply_number(req, count);
    if (strcmp(path, "/accepts") == 0)
        return reply_number(req, accepts);
    if (strcmp(path, "/busy") == 0)
        return reply_busy(req);
    if (strncmp(path, "/ramp?n=", 8) == 0) {
        long n = atol(path + 8);
        return reply_number(req, n < 1 || n > RAMP_MAX || n > count + held ?
                            -1 : (long)((arrived[n - 1] - arrived[0]) * 1e3));
    }
    if (strcmp(path, "/reset") == 0) {
        peak = held;
        count = accepts = 0;
        area = t_first = t_change = t_last = 0;
        return reply_number(req, 0);
    }
    p = calloc(1, sizeof *p);
    p->base = base;
    p->req = req;
    p->status = 200;
    if (query != NULL && evhttp_parse_query_str(query, &q) == 0) {
        const char *v;
        if ((v = evhttp_find_header(&q, "status")) != NULL)
            p->status = atoi(v);
        if ((v = evhttp_find_header(&q, "bytes")) != NULL)
            p->bytes = atol(v);
        if ((v = evhttp_find_header(&q, "delay")) != NULL)
            ms = atof(v);
        evhttp_clear_headers(&q);
    }
    hold(base, 1);
    if (held > peak)
        peak = held;
    p->ev = evtimer_new(base, answer, p);
    tv.tv_sec = (long)(ms / 1000);
    tv.tv_usec = (long)((ms - (double)tv.tv_sec * 1000) * 1000);
    evtimer_add(p->ev, &tv);
}

/* --- load: the lean client ------------------------------------------------ */

static long sent, answered, wanted;
static int load_failed;

static void
ask(struct bufferevent *bev)
{
    if (sent >= wanted)
        return;
    sent++;
    bufferevent_write(bev, "GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 36);
}

/* answers read: each a head and its Content-Length of body */
static void
on_answer(struct bufferevent *bev, void *arg)
{
    struct evbuffer *in = bufferevent_get_input(bev);

    (void)arg;
    for (;;) {
        struct evbuffer_ptr end = evbuffer_search(in, "\r\n\r\n", 4, NULL);
        size_t head;
        char *h, *cl;
        long body = 0;

        if (end.pos < 0)
            return;
        head = (size_t)end.pos + 4;
        h = (char *)evbuffer_pullup(in, (ssize_t)head);
        for (cl = h; cl != NULL && cl < h + head; cl = strchr(cl, '\n'))
            if (strncasecmp(++cl, "content-length:", 15) == 0) {
                body = atol(cl + 15);
                break;
            }
        if (evbuffer_get_length(in) < head + (size_t)body)
            return;
        evbuffer_drain(in, head + (size_t)body);
        if (++answered == wanted)
            event_base_loopbreak(bufferevent_get_base(bev));
        ask(bev);
    }
}

static struct sockaddr_in load_to;
static long reconnects;

static void connect_one(struct event_base *base);

/* A connection that failed or was closed (a connect the listen queue
 * dropped, a reset) is opened again and its request asked again: the
 * ceiling counts answers, not connections. More than one failure a
 * connection, or one that cannot be opened, ends the run. */
static void
on_conn_event(struct bufferevent *bev, short what, void *arg)
{
    struct event_base *base = bufferevent_get_base(bev);
    int e = EVUTIL_SOCKET_ERROR();
    long conns = (long)(intptr_t)arg;

    if (what & BEV_EVENT_CONNECTED) {
        ask(bev);
        return;
    }
    bufferevent_free(bev);
    if (sent > answered)
        sent--;                 /* its request goes again */
    if (++reconnects <= conns) {
        connect_one(base);
        return;
    }
    if (!load_failed)
        fprintf(stderr, "slowhttp load: a connection %s after %ld answers"
                " (%ld reconnected): %s\n", what & BEV_EVENT_EOF ?
                "was closed" : "failed", answered, reconnects - 1,
                strerror(e));
    load_failed = 1;
    event_base_loopbreak(base);
}

static long load_conns;

static void
connect_one(struct event_base *base)
{
    struct bufferevent *bev =
        bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);

    bufferevent_setcb(bev, on_answer, NULL, on_conn_event,
                      (void *)(intptr_t)load_conns);
    bufferevent_enable(bev, EV_READ);
    if (bufferevent_socket_connect(bev, (struct sockaddr *)&load_to,
                                   sizeof load_to) < 0) {
        if (!load_failed)
            fprintf(stderr, "slowhttp load: cannot connect to port %d\n",
                    ntohs(load_to.sin_port));
        bufferevent_free(bev);
        load_failed = 1;
        event_base_loopbreak(base);
    }
}

static double
now_secs(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CONNS connections to 127.0.0.1:port, one GET in flight on each, until n
 * are answered: prints the time and the rate. */
static int
load(int port, int conns, long n, int each)
{
    struct event_base *base = event_base_new();
    double t0;
    int i;

    memset(&load_to, 0, sizeof load_to);
    load_to.sin_family = AF_INET;
    load_to.sin_port = htons((unsigned short)port);
    load_to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    wanted = n;
    load_conns = conns;
    t0 = now_secs();
    for (i = 0; i < conns && !load_failed; i++) {
        connect_one(base);
        if (each)
            event_base_loop(base, EVLOOP_NONBLOCK);
    }
    /* with each, the last answer may have come in a pass above: its
     * loopbreak ended that pass, and the dispatch would wait forever */
    if (!load_failed && answered < n)
        event_base_dispatch(base);
    if (load_failed || answered < n)
        return 1;
    t0 = now_secs() - t0;
    printf("secs=%.6f rate=%.1f reconnects=%ld\n", t0, (double)n / t0,
           reconnects);
    return 0;
}

/* A listening socket on 127.0.0.1:port with a queue for thousands of
 * connections at once (evhttp's own takes 128: the rest of a burst of
 * 2,000 connects waited for SYN retries), or -1. */
static int
listen_on(int port)
{
    struct sockaddr_in sin;
    int fd = socket(AF_INET, SOCK_STREAM, 0), on = 1;

    if (fd < 0)
        return -1;
    memset(&sin, 0, sizeof sin);
    sin.sin_family = AF_INET;
    sin.sin_port = htons((unsigned short)port);
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (bind(fd, (struct sockaddr *)&sin, sizeof sin) < 0 ||
        listen(fd, 4096) < 0 || evutil_make_socket_nonblocking(fd) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int
main(int argc, char **argv)
{
    struct event_base *base;
    struct evhttp *http;
    struct evhttp_bound_socket *sock;
    struct rlimit rl;
    int port = argc > 2 ? atoi(argv[2]) : 0, fd;

    if (argc < 2) {
        fprintf(stderr, "usage: slowhttp DELAY_MS [PORT] | "
                "slowhttp load PORT CONNS N [each]\n");
        return 2;
    }
    delay_ms = atof(argv[1]);
    signal(SIGPIPE, SIG_IGN);
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {   /* many connections */
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    if ((argc == 5 || argc == 6) && strcmp(argv[1], "load") == 0)
        return load(atoi(argv[2]), atoi(argv[3]), atol(argv[4]),
                    argc == 6 && strcmp(argv[5], "each") == 0);
    base = event_base_new();
    http = evhttp_new(base);
    evhttp_set_gencb(http, on_request, base);
    evhttp_set_bevcb(http, on_accept, NULL);
    fd = listen_on(port);
    sock = fd < 0 ? NULL : evhttp_accept_socket_with_handle(http, fd);
    if (sock == NULL) {
        fprintf(stderr, "slowhttp: cannot listen on 127.0.0.1:%d\n", port);
        return 1;
    }
    if (port == 0) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        getsockname(evhttp_bound_socket_get_fd(sock),
                    (struct sockaddr *)&ss, &len);
        port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    }
    printf("port %d\n", port);
    fflush(stdout);
    event_base_dispatch(base);
    evhttp_free(http);
    event_base_free(base);
    return 0;
}
