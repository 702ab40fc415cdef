/* apiroute.h - a route of the JSON API and the request it is routing, in
 * the loop: each topic file (apidbjobs.c, apidbaction.c, apidbflow.c,
 * apidbsched.c; api.c's runner) keeps its routes' table, their
 * functions and the operations (jr_apiop) they ask, and api.c's
 * jr_api_handle matches a path against the topics' tables, listed once
 * there. A new route in a topic is a row, its function and its operation
 * in that topic's file. Uses http.h, apibody.h. */
#ifndef JR_APIROUTE_H
#define JR_APIROUTE_H

#include "http/http.h"
#include "http/apibody.h"

typedef struct jr_apicall {     /* one request being routed */
    jr_http                *h;
    const jr_httphost      *host;
    struct evhttp_request  *req;
    const char             *path;
    const char             *query;
    char                    arg[160];   /* the path's ID or NAME */
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
/* Sends q to the database thread; its answer goes to the call's request. */
void       jr_api_ask(jr_apicall *c, jr_apireq *q);
/* A new request asking op, with the POST body read into b (ids, all,
 * older_than, at as the route allows), or NULL (400 or 503 replied). */
jr_apireq *jr_api_with_body(jr_apicall *c, const jr_apiop *op,
                            jr_apibody *b);

#endif
