/* auth.c - who may ask the HTTP server what: without a token only this
 * server's own names are served as Host (DNS rebinding); with one, every
 * request under /api/ and /metrics carries it; a write needs the token,
 * the JSON content type and no other site's Origin. Replies the refusal
 * itself. Uses auth.h, http.h; libevent's evhttp. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "http/auth.h"
#include "http/http.h"

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

/* 1 when the request carries the token as Authorization: Bearer. */
static int
has_token(const jr_auth *a, struct evhttp_request *req)
{
    const char *v = evhttp_find_header(evhttp_request_get_input_headers(req),
                                       "Authorization");

    if (v == NULL || strncasecmp(v, "Bearer ", 7) != 0)
        return 0;
    return same_secret(v + 7, a->token);
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

    if (a->token[0] || (host != NULL && host_is(host, a->host, a->port)))
        return 0;
    for (i = 0; host != NULL && i < sizeof names / sizeof names[0]; i++)
        if (host_is(host, names[i], a->port))
            return 0;
    jr_http_error(req, 403, "Host '%.100s' is not this server: without "
                  "http.token only localhost, 127.0.0.1, [::1] or %s, with "
                  "port %d, are served", host ? host : "", a->host, a->port);
    return -1;
}

/* Runs the checks of a request under /api/ or /metrics; replies and
 * returns -1 when one fails. */
int
jr_auth_check(const jr_auth *a, struct evhttp_request *req,
              const char *path, int post)
{
    const char *why;

    if (a->token[0] && !has_token(a, req)) {
        evhttp_add_header(evhttp_request_get_output_headers(req),
                          "WWW-Authenticate", "Bearer realm=\"jobrunner\"");
        jr_http_error(req, 401, "this needs the token: Authorization: Bearer "
                      "<http.token>");
        return -1;
    }
    if (!post)
        return 0;
    if (!a->token[0]) {
        jr_http_error(req, 403, "write actions are off: set http.token in "
                      "the config to allow %s", path);
        return -1;
    }
    if ((why = cross_site(req)) != NULL) {
        jr_http_error(req, 403, "%s", why);
        return -1;
    }
    return 0;
}
