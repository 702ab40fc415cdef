/* httpconn.h - the HTTP server's connections, between the listening
 * socket and evhttp. At most max are open: when a new one waits, the
 * oldest idle one (no request being answered) is closed to make room;
 * with all of them busy, new ones wait in the listen backlog. A request
 * must arrive whole within timeout seconds of its connection opening or
 * of the previous reply, whatever its pace. When accept() fails (no
 * descriptor left), accepting stops for a second and the oldest idle
 * connection is closed. Each of these is logged at most once every
 * JR_HTTPCONN_LOG_EVERY seconds, with a count. Uses libevent's evhttp,
 * bufferevent and evconnlistener; log.h. */
#ifndef JR_HTTPCONN_H
#define JR_HTTPCONN_H

#include "base/err.h"

#define JR_HTTPCONN_LOG_EVERY 10.0  /* seconds between two lines alike */
#define JR_HTTPCONN_BACKOFF   1.0   /* seconds without accept() after a
                                       failure */

struct evhttp;
struct evhttp_bound_socket;
struct evhttp_request;
typedef struct jr_httpconn jr_httpconn;

/* Takes over http's connections on bound (its only listener): at most
 * max, each request within timeout seconds. NULL and err set on
 * failure. */
jr_httpconn *jr_httpconn_new(struct evhttp *http,
                             struct evhttp_bound_socket *bound, int max,
                             int timeout, jr_err *err);
/* Call before evhttp_free(http). NULL is a no-op. */
void jr_httpconn_free(jr_httpconn *c);
/* req arrived whole: its connection is busy until its reply is sent. */
void jr_httpconn_busy(jr_httpconn *c, struct evhttp_request *req);
/* Writes out what the connections have yet to send (replies made while
 * the loop no longer runs: the runner stops), waiting at most secs in
 * all for sockets to take it. NULL is a no-op. */
void jr_httpconn_flush(jr_httpconn *c, double secs);
/* Connections open now. */
int  jr_httpconn_count(const jr_httpconn *c);

#endif
