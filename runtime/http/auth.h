/* auth.h - the HTTP server's checks of who asks (auth.c): the Host
 * header when there is no token, the bearer token, and a write's
 * cross-site checks. Each replies its refusal (401 or 403) itself. Uses
 * nothing but libevent's request type. */
#ifndef JR_AUTH_H
#define JR_AUTH_H

struct evhttp_request;

typedef struct jr_auth {
    const char *token;          /* http.token, "" when none */
    char        host[64];       /* the listen address's host, and */
    int         port;           /* its port, for Host checks */
} jr_auth;

/* Without a token, only the names of this server are accepted as Host.
 * Replies 403 and returns -1 otherwise; 0 when req may go on. */
int jr_auth_host(const jr_auth *a, struct evhttp_request *req);
/* The checks of a request for path under /api/ or /metrics (post: a
 * write): the token, and for a write the content type and Origin.
 * Replies and returns -1 when one fails; 0 when req may go on. */
int jr_auth_check(const jr_auth *a, struct evhttp_request *req,
                  const char *path, int post);

#endif
