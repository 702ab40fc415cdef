/* apiquery.c - what the HTTP API reads of a request's path and query
 * string, in the loop: a job id, a list's filters and keyset cursors, a
 * long poll's ?wait=, a path segment's percent-encoding; a bad one is
 * answered 400 with the reason. Uses http.h, api.h, job.h, libevent's
 * evhttp. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "http/http.h"
#include "base/job.h"

int
jr_api_job_id(struct evhttp_request *req, const char *arg, int64_t *id)
{
    char *end;
    long long v;

    errno = 0;
    v = strtoll(arg, &end, 10);
    if (!isdigit((unsigned char)arg[0]) || *end || errno || v < 1) {
        jr_http_error(req, 400, "invalid job id '%.64s': want a whole "
                      "number >= 1", arg);
        return -1;
    }
    *id = v;
    return 0;
}

/* A keyset cursor: a job id >= 1 into *id. */
static int
cursor(const char *v, const char *what, int64_t *id, jr_err *err)
{
    char *end;
    long long n;

    errno = 0;
    n = strtoll(v, &end, 10);
    if (!isdigit((unsigned char)v[0]) || *end || errno || n < 1)
        return jr_fail(err, JR_EINPUT, "%s '%.64s': want a job id >= 1",
                       what, v);
    *id = n;
    return 0;
}

/* One query parameter into q's filter. */
static int
filter(jr_apireq *q, const char *k, const char *v, jr_err *err)
{
    char *slot = strcmp(k, "state") == 0 ? q->state :
                 strcmp(k, "name") == 0 ? q->name :
                 strcmp(k, "queue") == 0 ? q->queue :
                 strcmp(k, "where") == 0 ? q->where : NULL;
    size_t size = slot == q->state ? sizeof q->state :
                  slot == q->where ? sizeof q->where : sizeof q->name;
    long n;
    int rc;

    if (v[0] == '\0')
        return 0;               /* an empty filter matches any */
    if (strcmp(k, "limit") == 0) {
        rc = jr_parse_int(v, "limit", 1, JR_API_LIST_MAX, &n, err);
        q->limit = (int)n;
        return rc;
    }
    if (strcmp(k, "before_id") == 0)
        return cursor(v, k, &q->before_id, err);
    if (strcmp(k, "after_id") == 0)
        return cursor(v, k, &q->after_id, err);
    if (slot == NULL)
        return jr_fail(err, JR_EINPUT, "unknown parameter '%.64s' (state, "
                       "name, queue, where, limit, before_id, after_id)", k);
    if (strlen(v) >= size)
        return jr_fail(err, JR_EINPUT, "%s is too long (%zu bytes at most)",
                       k, size - 1);
    strcpy(slot, v);
    if (slot == q->name || slot == q->queue)
        return jr_name_check(slot, slot == q->name ? "job name" :
                             "queue name", err);
    return 0;
}

/* Reads the query string's filters into q; replies 400 on a bad one. */
int
jr_api_filters(struct evhttp_request *req, const char *query, jr_apireq *q)
{
    struct evkeyvalq kv = {0};
    struct evkeyval *e;
    jr_err err;
    int rc = 0;

    q->limit = 100;
    if (query != NULL && evhttp_parse_query_str(query, &kv) < 0) {
        jr_http_error(req, 400, "malformed query string");
        return -1;
    }
    /* a decoded NUL would cut a value short: "%00x" would read as "" */
    if (query != NULL && strstr(query, "%00") != NULL) {
        evhttp_clear_headers(&kv);
        jr_http_error(req, 400, "the query string has a NUL byte (%%00)");
        return -1;
    }
    for (e = kv.tqh_first; e && rc == 0; e = e->next.tqe_next)
        rc = filter(q, e->key, e->value, &err);
    evhttp_clear_headers(&kv);
    if (rc < 0)
        jr_http_error(req, 400, "%s", err.msg);
    return rc;
}

/* ?wait=S of GET /api/jobs/ID: 0 when not given; -1 after a 400. */
double
jr_api_wait(struct evhttp_request *req, const char *query)
{
    struct evkeyvalq kv = {0};
    struct evkeyval *e;
    double w = 0;
    jr_err err;
    int rc = 0;

    if (query == NULL)
        return 0;
    if (strstr(query, "%00") != NULL) {   /* "1%00x" read as 1 */
        jr_http_error(req, 400, "the query string has a NUL byte (%%00)");
        return -1;
    }
    if (evhttp_parse_query_str(query, &kv) < 0) {
        jr_http_error(req, 400, "malformed query string");
        return -1;
    }
    for (e = kv.tqh_first; e && rc == 0; e = e->next.tqe_next) {
        if (strcmp(e->key, "wait") != 0)
            rc = jr_fail(&err, JR_EINPUT, "unknown parameter '%.64s' "
                         "(wait)", e->key);
        else if (jr_parse_duration(e->value, "wait", &w, &err) < 0 ||
                 w > JR_API_WAIT_MAX)
            rc = jr_fail(&err, JR_EINPUT, "wait must be seconds from 0 to "
                         "%d, got '%.64s'", JR_API_WAIT_MAX, e->value);
    }
    evhttp_clear_headers(&kv);
    if (rc < 0)
        jr_http_error(req, 400, "%s", err.msg);
    return rc < 0 ? -1 : w;
}

static int
hex(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ?
           c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Decodes a path segment's %XX in place, once. -1 on a bad escape or a
 * NUL byte. */
int
jr_api_unescape(char *s)
{
    char *out = s;

    for (; *s; s++) {
        if (*s != '%') {
            *out++ = *s;
            continue;
        }
        if (hex(s[1]) < 0 || hex(s[2]) < 0 || (s[1] == '0' && s[2] == '0'))
            return -1;
        *out++ = (char)(hex(s[1]) * 16 + hex(s[2]));
        s += 2;
    }
    *out = '\0';
    return 0;
}
