/* whttp.h - what the two files of jobrunner.http share: the worker's
 * multi handle and one request in flight. whttp.c owns both and runs the
 * loop; whttpreq.c sets a request's easy handle from its table. Uses
 * worker_int.h for tasks and buffers. */
#ifndef JR_WHTTP_H
#define JR_WHTTP_H

#include <curl/curl.h>
#include <event2/event.h>
#include <lua.h>

#include "worker/worker_int.h"

#define HTTP_TIMEOUT  30.0              /* seconds, when none is given */
#define HTTP_MAX_SIZE (16L << 20)       /* response bytes, when none */
#define HTTP_NOFILE_SPARE 64            /* open files a worker keeps free of
                                         * idle connections (exec, io.open) */
#define HTTP_MAX_HEAD 1000000           /* url and headers; libcurl's 1 MiB
                                         * head holds its own lines too */

typedef struct jr_http {
    CURLM              *multi;
    struct event_base  *base;
    struct event       *timer;
    worker             *w;              /* its handlers' inflight */
    CURL              **easy;           /* reset, for the next requests */
    int                 neasy;
    int                 kept;           /* easy handles and connections
                                         * kept: jr_co_kept (connections:
                                         * fewer under a low ulimit -n) */
    int                 conns;          /* sockets open: libcurl's
                                         * connections, busy and idle */
    int                 added;          /* transfers in the multi handle */
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
    int                 added;          /* in the multi handle */
    char                url[256];       /* for messages */
    char                errbuf[CURL_ERROR_SIZE];
} xfer;

/* Sets x's easy handle from the request table at 1 (whttpreq.c).
 * [-0, +0, v] */
void jr_whttp_setup(lua_State *L, xfer *x);

#endif
