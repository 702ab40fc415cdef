/* apiroute.h - a route of the JSON API and the request it is routing, in
 * the loop: each topic file (apidbjobs.c, apidbaction.c, apidbflow.c,
 * apidbsched.c; api.c's runner) keeps its routes' table, their
 * functions and the operations (jr_apiop) they ask, and api.c's
 * jr_api_handle matches a path against the topics' tables, listed once
 * there. A new route in a topic is a row, its function and its operation
 * in that topic's file. apitoken.c checks the token's scope. Uses
 * http.h, apibody.h, auth.h. */
#ifndef JR_APIROUTE_H
#define JR_APIROUTE_H

#include "http/http.h"
#include "http/apibody.h"
#include "http/auth.h"

typedef struct jr_apicall {     /* one request being routed */
    jr_http                *h;
    const jr_httphost      *host;
    struct evhttp_request  *req;
    const char             *path;
    const char             *query;
    char                    arg[160];   /* the path's ID or NAME */
    const jr_token         *tok;        /* the token it carries (auth.h);
                                           NULL: the server has none */
} jr_apicall;

/* One route: its path under /api/ ('*' stands for one segment, which
 * goes to the call's arg), its method and its function, which checks the
 * path, query and body (400 with the reason) and asks its operation
 * (jr_api_ask) or answers. A topic's table ends with a NULL pattern. */
typedef struct jr_apiroute {
    const char *pattern;
    int         post;           /* 1: POST, 0: GET (and HEAD), 2: PUT,
                                   3: DELETE (the writes: not 0) */
    void      (*fn)(jr_apicall *c);
} jr_apiroute;

/* A new request asking op, or NULL (503 replied: out of memory). */
jr_apireq *jr_api_req(jr_apicall *c, const jr_apiop *op);
/* Sends q to the database thread; its answer goes to the call's request.
 * The one way to the database: q's operation's scope is checked against
 * the call's token first (and a push's queues), a refusal replied (403)
 * and q freed; a write is logged with the token's name, the route and
 * its target. */
void       jr_api_ask(jr_apicall *c, jr_apireq *q);
/* A new request asking op, with the POST body read into b (ids, all,
 * older_than, at as the route allows), or NULL (400 or 503 replied). */
jr_apireq *jr_api_with_body(jr_apicall *c, const jr_apiop *op,
                            jr_apibody *b);

/* apitoken.c: 1 when the call's token has the scope route r needs (a
 * GET: read; a POST: write, push for the push routes); else replies 403
 * and returns 0. */
int        jr_apitoken_route(jr_apicall *c, const jr_apiroute *r);
/* 0 when the call's token may ask q (its operation's scope, and for a
 * push every job's queue), the write logged; else -1, 403 replied. */
int        jr_apitoken_ask(jr_apicall *c, const jr_apireq *q);

#endif
