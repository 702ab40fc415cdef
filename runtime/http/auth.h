/* auth.h - the HTTP server's checks of who asks (auth.c): the Host
 * header when there is no token, the bearer token (http.token, a write
 * token, and the scoped tokens of http.tokens), what each scope may do,
 * and a write's cross-site checks. Each replies its refusal (401 or 403)
 * itself. Uses config.h's tokens and libevent's request type. */
#ifndef JR_AUTH_H
#define JR_AUTH_H

#include "config/config.h"

struct evhttp_request;

#define JR_AUTH_LEGACY "http.token"     /* the name http.token goes by */

typedef struct jr_auth {
    const jr_token *tokens;     /* http.tokens, the config's (borrowed) */
    int             ntokens;
    jr_token        legacy;     /* http.token as a write token named
                                   JR_AUTH_LEGACY; secret NULL: none */
    char            legacy_name[sizeof JR_AUTH_LEGACY]; /* its name */
    char            host[64];   /* the listen address's host, and */
    int             port;       /* its port, for Host checks */
} jr_auth;

/* 1 when a has a token of any kind: then every request under /api/ and
 * /metrics carries one. */
int jr_auth_any(const jr_auth *a);
/* Without a token, only the names of this server are accepted as Host.
 * Replies 403 and returns -1 otherwise; 0 when req may go on. */
int jr_auth_host(const jr_auth *a, struct evhttp_request *req);
/* The checks of a request for path under /api/ or /metrics (post: a
 * write): the token, and for a write the content type and Origin.
 * Replies and returns -1 when one fails (401: no or unknown token); 0
 * when req may go on, with the token it carries in *who (borrowed; NULL
 * when a has none). What the token's scope allows is jr_auth_may's. */
int jr_auth_check(const jr_auth *a, struct evhttp_request *req,
                  const char *path, int post, const jr_token **who);
/* 1 when token t (NULL: the server has none, reads are open) has scope
 * need (JR_TOKEN_*) or more; else replies 403 naming the token, what it
 * may do and what was asked (printf-style), logs the refusal and
 * returns 0. */
int jr_auth_may(const jr_token *t, int need, struct evhttp_request *req,
                const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* 1 when token t may push to queue (NULL: "default"): a write token to
 * any, a push token to its own. */
int jr_auth_queue(const jr_token *t, const char *queue);
/* "read", "push" or "write". */
const char *jr_auth_scope(int scope);
/* What t may do, in words, into buf ("may only read: every GET ..."). */
void jr_auth_describe(const jr_token *t, char *buf, size_t size);

#endif
