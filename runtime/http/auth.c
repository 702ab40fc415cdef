/* auth.c - who may ask the HTTP server what: without a token only this
 * server's own names are served as Host (DNS rebinding); with one (the
 * write token http.token, or any of the scoped http.tokens), every
 * request under /api/ and /metrics carries one; a write needs a token of
 * the right scope, the JSON content type and no other site's Origin.
 * Replies the refusal itself. Uses auth.h, http.h, log.h; libevent's
 * evhttp. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "http/auth.h"
#include "http/http.h"
#include "base/log.h"

/* Compares without an early exit, so that timing tells nothing. */
static int
same_secret(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b), i;
    unsigned char d = n != m;

    for (i = 0; i < n; i++)
        d |= (unsigned char)(a[i] ^ b[i < m ? i : 0]);
    return d == 0 && m > 0;
}

int
jr_auth_any(const jr_auth *a)
{
    return a->legacy.secret != NULL || a->ntokens > 0;
}

/* The token req carries as Authorization: Bearer, or NULL. Every secret
 * is compared in full, the match or not: the time taken tells nothing
 * of which token, if any, matched. */
static const jr_token *
bearer(const jr_auth *a, struct evhttp_request *req)
{
    const char *v = evhttp_find_header(evhttp_request_get_input_headers(req),
                                       "Authorization");
    const jr_token *found = NULL;
    int i;

    if (v == NULL || strncasecmp(v, "Bearer ", 7) != 0)
        return NULL;
    if (a->legacy.secret != NULL && same_secret(v + 7, a->legacy.secret))
        found = &a->legacy;
    for (i = 0; i < a->ntokens; i++)
        if (same_secret(v + 7, a->tokens[i].secret))
            found = &a->tokens[i];
    return found;
}

/* 1 when req has more than one Authorization header: which one counts
 * would be a guess, and a proxy in front may have read the other. */
static int
twice(struct evhttp_request *req)
{
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    struct evkeyval *h;
    int n = 0;

    for (h = in->tqh_first; h != NULL; h = h->next.tqe_next)
        n += strcasecmp(h->key, "Authorization") == 0;
    return n > 1;
}

const char *
jr_auth_scope(int scope)
{
    return scope == JR_TOKEN_WRITE ? "write" : scope == JR_TOKEN_PUSH ?
           "push" : "read";
}

void
jr_auth_describe(const jr_token *t, char *buf, size_t size)
{
    size_t n;
    int i;

    if (t == NULL) {
        snprintf(buf, size, "no token is set: reads are open, write "
                 "actions are off");
    } else if (t->scope == JR_TOKEN_WRITE) {
        snprintf(buf, size, "token '%s' (scope write) may do everything",
                 t->name);
    } else if (t->scope == JR_TOKEN_READ) {
        snprintf(buf, size, "token '%s' (scope read) may only read: GET "
                 "under /api/ and /metrics", t->name);
    } else {
        n = (size_t)snprintf(buf, size, "token '%s' (scope push) may read "
                             "and push (POST /api/jobs, /api/flows) to "
                             "queue", t->name);
        for (i = 0; i < t->nqueues && n < size; i++)
            n += (size_t)snprintf(buf + n, size - n, "%s'%s'", i ? ", " :
                                  t->nqueues > 1 ? "s " : " ", t->queues[i]);
        if (n < size)
            snprintf(buf + n, size - n, " only");
    }
}

int
jr_auth_may(const jr_token *t, int need, struct evhttp_request *req,
            const char *fmt, ...)
{
    char asked[300], may[300];
    va_list ap;

    if ((t == NULL ? JR_TOKEN_READ : t->scope) >= need)
        return 1;
    va_start(ap, fmt);
    vsnprintf(asked, sizeof asked, fmt, ap);
    va_end(ap);
    jr_auth_describe(t, may, sizeof may);
    jr_log(JR_LOG_WARN, "http: refused: %s: %s", asked, may);
    jr_http_error(req, 403, "%s needs a %s token: %s", asked,
                  jr_auth_scope(need), may);
    return 0;
}

int
jr_auth_queue(const jr_token *t, const char *queue)
{
    int i;

    if (queue == NULL)
        queue = "default";
    if (t != NULL && t->scope == JR_TOKEN_WRITE)
        return 1;
    for (i = 0; t != NULL && t->scope == JR_TOKEN_PUSH && i < t->nqueues;
         i++)
        if (strcmp(t->queues[i], queue) == 0)
            return 1;
    return 0;
}

/* A write must not come from another site's page: a browser sends Origin
 * with a cross-site POST; it must be this server's own. The JSON content
 * type and the Authorization header already need a CORS preflight, which
 * this server never grants. Returns the refusal, or NULL. */
static const char *
cross_site(struct evhttp_request *req)
{
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    const char *origin = evhttp_find_header(in, "Origin");
    const char *host = evhttp_find_header(in, "Host");
    const char *type = evhttp_find_header(in, "Content-Type");
    const char *rest;

    if (type == NULL || strncasecmp(type, "application/json", 16) != 0 ||
        (type[16] != '\0' && type[16] != ';'))
        return "a write needs Content-Type: application/json";
    if (origin == NULL)
        return NULL;
    if (strncmp(origin, "http://", 7) == 0)
        rest = origin + 7;
    else if (strncmp(origin, "https://", 8) == 0)
        rest = origin + 8;
    else
        return "cross-site request refused (Origin does not match Host)";
    if (host == NULL || strcmp(rest, host) != 0)
        return "cross-site request refused (Origin does not match Host)";
    return NULL;
}

/* 1 when host (a Host header) is name[:port]; the port may be left out
 * when it is 80. */
static int
host_is(const char *host, const char *name, int port)
{
    size_t n = strlen(name);

    if (strncasecmp(host, name, n) != 0)
        return 0;
    if (host[n] == '\0')
        return port == 80;
    return host[n] == ':' && atoi(host + n + 1) == port &&
           strspn(host + n + 1, "0123456789") == strlen(host + n + 1);
}

/* Without a token, a web page whose name was made to resolve to this
 * machine (DNS rebinding) could read everything: only the names of this
 * server are accepted as Host. Replies 403 and returns -1 otherwise. */
int
jr_auth_host(const jr_auth *a, struct evhttp_request *req)
{
    const char *host = evhttp_find_header(evhttp_request_get_input_headers(
                                          req), "Host");
    static const char *const names[] = {"localhost", "127.0.0.1", "[::1]"};
    size_t i;

    if (jr_auth_any(a) || (host != NULL && host_is(host, a->host, a->port)))
        return 0;
    for (i = 0; host != NULL && i < sizeof names / sizeof names[0]; i++)
        if (host_is(host, names[i], a->port))
            return 0;
    jr_http_error(req, 403, "Host '%.100s' is not this server: without "
                  "http.token only localhost, 127.0.0.1, [::1] or %s, with "
                  "port %d, are served", host ? host : "", a->host, a->port);
    return -1;
}

int
jr_auth_check(const jr_auth *a, struct evhttp_request *req,
              const char *path, int post, const jr_token **who)
{
    const char *why;

    *who = NULL;
    if (jr_auth_any(a) && twice(req)) {
        jr_http_error(req, 400, "more than one Authorization header: send "
                      "one");
        return -1;
    }
    if (jr_auth_any(a) && (*who = bearer(a, req)) == NULL) {
        evhttp_add_header(evhttp_request_get_output_headers(req),
                          "WWW-Authenticate", "Bearer realm=\"jobrunner\"");
        jr_http_error(req, 401, "this needs a token: Authorization: Bearer "
                      "<the secret of http.token or of one of "
                      "http.tokens>");
        return -1;
    }
    if (!post)
        return 0;
    if (!jr_auth_any(a)) {
        jr_http_error(req, 403, "write actions are off: set http.token or "
                      "http.tokens in the config to allow %s", path);
        return -1;
    }
    if ((why = cross_site(req)) != NULL) {
        jr_http_error(req, 403, "%s", why);
        return -1;
    }
    return 0;
}
