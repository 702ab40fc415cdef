/* slowhttp.c - a loopback HTTP server that answers every request after a
 * delay, for the I/O-bound bench and specs: it counts requests and keeps
 * the peak of requests it held at once. Uses libevent's evhttp only.
 *
 *   slowhttp DELAY_MS [PORT]
 *
 * Listens on 127.0.0.1:PORT (0 or none: any free port) and prints
 * "port N" on stdout once it listens. Every request waits DELAY_MS, then
 * gets 200 and "ok\n", except:
 *   GET /peak    the most requests held at once since the start or /reset
 *   GET /count   the requests answered since the start or /reset
 *   GET /reset   sets both to 0
 *   any path with ?status=N answers N (after the delay); ?bytes=N answers
 *   N bytes of 'x'; ?delay=MS overrides the delay for that request.
 * These answer at once and are not counted. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

static long held, peak, count;
static double delay_ms;

typedef struct pending {
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
    free(p);
    held--;
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
    if (strcmp(path, "/reset") == 0) {
        peak = held;
        count = 0;
        return reply_number(req, 0);
    }
    p = calloc(1, sizeof *p);
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
    if (++held > peak)
        peak = held;
    p->ev = evtimer_new(base, answer, p);
    tv.tv_sec = (long)(ms / 1000);
    tv.tv_usec = (long)((ms - (double)tv.tv_sec * 1000) * 1000);
    evtimer_add(p->ev, &tv);
}

int
main(int argc, char **argv)
{
    struct event_base *base;
    struct evhttp *http;
    struct evhttp_bound_socket *sock;
    struct rlimit rl;
    int port = argc > 2 ? atoi(argv[2]) : 0;

    if (argc < 2) {
        fprintf(stderr, "usage: slowhttp DELAY_MS [PORT]\n");
        return 2;
    }
    delay_ms = atof(argv[1]);
    signal(SIGPIPE, SIG_IGN);
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {   /* many connections */
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    base = event_base_new();
    http = evhttp_new(base);
    evhttp_set_gencb(http, on_request, base);
    sock = evhttp_bind_socket_with_handle(http, "127.0.0.1",
                                          (unsigned short)port);
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
