/* http.h - the runner's HTTP server (config `http`, `run --http`):
 * libevent's evhttp on the master's loop serves /metrics, the dashboard
 * at / and the JSON API under /api/ (api.c). Every database read or
 * action goes to the database thread (jr_http_ask) and is answered when
 * it comes back; nothing here waits. What it knows of the runner comes
 * through host.h. Uses host.h, api.h. */
#ifndef JR_HTTP_H
#define JR_HTTP_H

#include <stddef.h>

#include "http/api.h"
#include "http/host.h"
#include "base/err.h"

#define JR_HTTP_BODY_MAX   65536   /* request bodies past this: 413 */
#define JR_HTTP_HEADER_MAX 16384   /* request headers past this: refused */
#define JR_HTTP_TIMEOUT    10      /* seconds a request may take to arrive
                                      whole (from the connection or the
                                      previous reply); a reply being read
                                      may pause this long */
/* the `http` settings' default and ranges are config.h's */

struct evhttp_request;
typedef struct jr_http jr_http;

/* Starts serving host's http.listen on host's loop; *out is the server,
 * or NULL when http.listen is not set. host is copied; what it points to
 * must outlive the server. Refuses an invalid address, one in use, and a
 * non-loopback one without a token. Returns 0, or -1 with err set. */
int  jr_http_start(const jr_httphost *host, jr_http **out, jr_err *err);
/* The runner is stopping (SIGTERM): the long polls held are answered now
 * with their jobs as they stand, and those to come are answered at once,
 * not held. NULL is a no-op. */
void jr_http_stopping(jr_http *h);
/* Stops serving: long polls still held are answered as their jobs stand,
 * reads whose answer from the database is still to come get a 503,
 * and what was answered is written out (for up to JR_HTTP_FLUSH seconds)
 * before the connections close. NULL is a no-op. */
void jr_http_stop(jr_http *h);
#define JR_HTTP_FLUSH 2.0

/* Replies to req with status and body (len bytes, borrowed) of type. */
void jr_http_reply(struct evhttp_request *req, int status, const char *type,
                   const void *body, size_t len);
/* Replies {"error": "..."} with status. */
void jr_http_error(struct evhttp_request *req, int status, const char *fmt,
                   ...) __attribute__((format(printf, 3, 4)));
/* Sends q to the database thread; its answer (status and JSON body) goes
 * to req. Takes q (allocated with malloc). */
void jr_http_ask(jr_http *h, struct evhttp_request *req, jr_apireq *q);

/* This runner recorded the end of some jobs: the long polls waiting on
 * jobs (GET /api/jobs/ID?wait=S) look at once whether theirs ended.
 * NULL is a no-op. */
void jr_http_jobs_ended(jr_http *h);

/* api.c: answers a request under /api/ (path without the prefix) of
 * server h, whose runner is host; post: the method is POST and passed the
 * write checks (token, origin, type); who: the token it carries (NULL:
 * the server has none), whose scope the route and its operation check. */
struct jr_token;
void jr_api_handle(jr_http *h, const jr_httphost *host,
                   struct evhttp_request *req, const char *path,
                   const char *query, int post, const struct jr_token *who);
/* 1 if path (under /api/) names a write action (POST only), 0 a read
 * (GET), -1 no route; post: the method is POST (a path may have both,
 * as /api/jobs). */
int  jr_api_is_write(const char *path, int post);

/* dash.c (generated from runtime/http/dash/ at build time): the dashboard's
 * files. Returns the file at path ("/", "/app.js"...) or NULL. */
typedef struct jr_dash_file {
    const char          *path;
    const char          *type;
    const unsigned char *data;
    size_t               len;
} jr_dash_file;
const jr_dash_file *jr_dash_find(const char *path);

#endif
