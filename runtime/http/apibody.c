/* apibody.c - the JSON body of the HTTP API's POST actions: one object
 * with the keys ids (an array of job ids, at most JR_API_IDS_MAX), all,
 * older_than (seconds or a duration) and at (an instant), read strictly:
 * an error names the byte and what was expected. Runs in the loop. Uses
 * apibody.h, api.h, libevent's evbuffer. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "http/apibody.h"
#include "base/job.h"
#include "config/config.h"

typedef jr_apibody body;

static int
bad(body *b, const char *what)
{
    snprintf(b->why, sizeof b->why, "invalid JSON body at byte %d: %s",
             (int)(b->p - b->s) + 1, what);
    return -1;
}

static void
ws(body *b)
{
    while (b->p < b->end && isspace((unsigned char)*b->p))
        b->p++;
}

static int
lit(body *b, char c)
{
    ws(b);
    if (b->p < b->end && *b->p == c) {
        b->p++;
        return 1;
    }
    return 0;
}

/* A key: plain ASCII letters and underscores only. */
static int
key(body *b, char *out, size_t size)
{
    size_t n = 0;

    if (!lit(b, '"'))
        return bad(b, "expected a key string");
    while (b->p < b->end && *b->p != '"') {
        if (n + 1 >= size || !(isalpha((unsigned char)*b->p) ||
                               *b->p == '_'))
            return bad(b, "unexpected character in key");
        out[n++] = *b->p++;
    }
    out[n] = '\0';
    if (b->p++ >= b->end)
        return bad(b, "unterminated string");
    return lit(b, ':') ? 0 : bad(b, "expected ':' after a key");
}

static int
number(body *b, double *v)
{
    char tmp[64], *end;
    size_t n = 0;

    ws(b);
    while (b->p + n < b->end && n < sizeof tmp - 1 &&
           strchr("0123456789+-.eE", b->p[n]) != NULL)
        n++;
    memcpy(tmp, b->p, n);
    tmp[n] = '\0';
    errno = 0;
    *v = strtod(tmp, &end);
    if (n == 0 || end != tmp + n || errno != 0 || !isfinite(*v))
        return bad(b, "expected a number");
    b->p += n;
    return 0;
}

static int
ids(body *b, jr_apireq *q)
{
    double v;

    if (!lit(b, '['))
        return bad(b, "'ids' must be an array of job ids");
    if (lit(b, ']'))
        return 0;
    do {
        if (number(b, &v) < 0)
            return -1;
        if (v < 1 || v > 9007199254740992.0 || v != floor(v))
            return bad(b, "a job id is a whole number >= 1");
        if (q->nids == JR_API_IDS_MAX)
            return bad(b, "more than 1000 ids");
        q->ids[q->nids++] = (int64_t)v;
    } while (lit(b, ','));
    return lit(b, ']') ? 0 : bad(b, "expected ',' or ']' in 'ids'");
}

static int
member(body *b, jr_apireq *q)
{
    char k[32];

    if (key(b, k, sizeof k) < 0)
        return -1;
    ws(b);
    if (strcmp(k, "ids") == 0) {
        b->has_ids = 1;
        return ids(b, q);
    }
    if (strcmp(k, "all") == 0) {
        if (b->end - b->p >= 4 && memcmp(b->p, "true", 4) == 0)
            return b->p += 4, b->all = 1, 0;
        if (b->end - b->p >= 5 && memcmp(b->p, "false", 5) == 0)
            return b->p += 5, 0;
        return bad(b, "'all' must be true or false");
    }
    if (strcmp(k, "older_than") == 0) {
        if (number(b, &b->older_than) < 0 || b->older_than < 0)
            return bad(b, "'older_than' must be seconds >= 0");
        return 0;
    }
    if (strcmp(k, "at") == 0) {
        if (number(b, &b->at) < 0 || b->at <= 0 || b->at > JR_TIME_MAX)
            return bad(b, "'at' must be epoch seconds");
        return 0;
    }
    snprintf(b->why, sizeof b->why, "unknown key '%s' in the body (ids, "
             "all, older_than, at)", k);
    return -1;
}

/* apibody.h. */
int
jr_apibody_parse(struct evhttp_request *req, body *b, jr_apireq *q)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t n = evbuffer_get_length(in);

    memset(b, 0, sizeof *b);
    b->older_than = -1;
    b->s = b->p = (const char *)evbuffer_pullup(in, -1);
    b->end = b->s + n;
    if (n == 0)
        return 0;
    if (!lit(b, '{'))
        return bad(b, "expected an object");
    if (!lit(b, '}')) {
        do {
            if (member(b, q) < 0)
                return -1;
        } while (lit(b, ','));
        if (!lit(b, '}'))
            return bad(b, "expected ',' or '}'");
    }
    ws(b);
    return b->p == b->end ? 0 : bad(b, "unexpected text after the object");
}
