/* backend.c - what both engines share: choosing one from a URL, masking
 * passwords (with libpq's own parser), name and payload checks, the job
 * allocation. */
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <libpq-fe.h>

#include "backend.h"

static int
has_prefix(const char *s, const char *p)
{
    return strncmp(s, p, strlen(p)) == 0;
}

static int
ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* A PostgreSQL URI or a libpq conninfo ("host=... dbname=..."). */
static int
is_postgres(const char *url)
{
    return has_prefix(url, "postgres://") ||
           has_prefix(url, "postgresql://") || strchr(url, '=') != NULL;
}

const jr_backend_ops *
jr_url_parse(const char *url, const char **arg, jr_err *err)
{
    *arg = url;
    if (url == NULL || *url == '\0') {
        jr_fail(err, JR_EUSAGE, "empty backend URL");
        return NULL;
    }
    if (is_postgres(url))
        return &jr_postgres_ops;
    if (has_prefix(url, "sqlite:")) {
        *arg = url + strlen("sqlite:");
        if (has_prefix(*arg, "//"))
            *arg += 2;
        return &jr_sqlite_ops;
    }
    if (ends_with(url, ".db") || ends_with(url, ".sqlite") ||
        ends_with(url, ".sqlite3"))
        return &jr_sqlite_ops;
    if (err != NULL) {
        char masked[512];
        jr_url_mask(url, masked, sizeof masked);
        jr_fail(err, JR_EUSAGE, "unknown backend URL '%s' (expected "
                "sqlite:PATH or postgresql://...)", masked);
    }
    return NULL;
}

int
jr_db_open(jr_db *db, const char *url, const jr_backend_opts *o, jr_err *err)
{
    static const jr_backend_opts none;
    const char *arg;

    memset(db, 0, sizeof *db);
    if (o == NULL)
        o = &none;
    if ((db->ops = jr_url_parse(url, &arg, err)) == NULL)
        return -1;
    db->b = db->ops->open(arg, o, err);
    return db->b == NULL ? -1 : 0;
}

void
jr_db_close(jr_db *db)
{
    if (db == NULL || db->ops == NULL)
        return;
    db->ops->close(db->b);
    db->ops = NULL;
    db->b = NULL;
}

/* Masks "scheme://user:PASS@host" in a URL that is not PostgreSQL's. */
static void
mask_userinfo(const char *url, char *out, size_t size)
{
    const char *scheme = strstr(url, "://"), *at, *colon;

    at = scheme ? strchr(scheme + 3, '@') : NULL;
    colon = scheme ? strchr(scheme + 3, ':') : NULL;
    if (at != NULL && colon != NULL && colon < at)
        snprintf(out, size, "%.*s****%s", (int)(colon - url) + 1, url, at);
    else
        snprintf(out, size, "%s", url);
}

/* Does s contain "password" in any case? */
static int
mentions_password(const char *s)
{
    static const char w[] = "password";
    size_t i;

    for (; *s; s++) {
        for (i = 0; w[i] && (s[i] | 0x20) == w[i]; i++)
            ;
        if (w[i] == '\0')
            return 1;
    }
    return 0;
}

/* Appends "key=value" to out (conninfo quoting), within size. */
static size_t
put_option(char *out, size_t size, size_t n, const char *key,
           const char *val)
{
    int quote = *val == '\0' || strpbrk(val, " \t\n\r'\\") != NULL;

    if (n + 1 >= size)
        return n;
    n += (size_t)snprintf(out + n, size - n, "%s%s=%s", n ? " " : "", key,
                          quote ? "'" : "");
    for (; *val && n + 3 < size; val++) {
        if (quote && (*val == '\'' || *val == '\\'))
            out[n++] = '\\';
        out[n++] = *val;
    }
    if (quote && n + 1 < size)
        out[n++] = '\'';
    out[n < size ? n : size - 1] = '\0';
    return n < size ? n : size - 1;
}

/* Is word (len bytes) a libpq connection keyword, in any case? */
static int
libpq_keyword(const char *word, size_t len)
{
    char *e = NULL;
    PQconninfoOption *all = PQconninfoParse("", &e), *o;
    int found = 0;

    PQfreemem(e);
    for (o = all; o && o->keyword && !found; o++)
        found = strlen(o->keyword) == len &&
                strncasecmp(o->keyword, word, len) == 0;
    PQconninfoFree(all);
    return found;
}

/* libpq's parse error on one line, with every quoted token that is not a
 * keyword replaced by ****: libpq quotes pieces of the string it could not
 * parse, and those may be pieces of the password. */
static void
mask_parse_error(const char *msg, char *out, size_t size)
{
    size_t n = 0;
    const char *q;

    for (; *msg && n + 8 < size; msg++) {
        if (*msg == '"' && (q = strchr(msg + 1, '"')) != NULL) {
            size_t len = (size_t)(q - msg - 1);
            /* a separator ("=", "]") or an option name is safe to show */
            if ((len == 1 && strchr("=]:/@&?", msg[1]) != NULL) ||
                libpq_keyword(msg + 1, len))
                n += (size_t)snprintf(out + n, size - n, "\"%.*s\"",
                                      (int)len, msg + 1);
            else
                n += (size_t)snprintf(out + n, size - n, "\"****\"");
            if (n >= size)
                n = size - 1;
            msg = q;
        } else {
            out[n++] = *msg == '\n' || *msg == '\r' ? ' ' : *msg;
        }
    }
    while (n > 0 && out[n - 1] == ' ')
        n--;
    out[n] = '\0';
}

/* A PostgreSQL URL or conninfo as libpq parses it, re-written as conninfo
 * with every password field (and any value mentioning a password) shown
 * as ****; what libpq cannot parse is never echoed. */
static int
mask_conninfo(const char *url, char *out, size_t size)
{
    char *e = NULL, why[400];
    PQconninfoOption *opts = PQconninfoParse(url, &e), *o;
    size_t n = 0;

    if (opts == NULL) {
        mask_parse_error(e ? e : "out of memory", why, sizeof why);
        PQfreemem(e);
        snprintf(out, size, "<unparsable connection string: %s>", why);
        return -1;
    }
    out[0] = '\0';
    for (o = opts; o->keyword; o++)
        if (o->val != NULL)
            n = put_option(out, size, n, o->keyword,
                           strchr(o->dispchar, '*') != NULL ||
                           mentions_password(o->val) ? "****" : o->val);
    PQconninfoFree(opts);
    return 0;
}

int
jr_url_mask(const char *url, char *out, size_t size)
{
    if (size == 0)
        return 0;
    if (url == NULL)
        url = "";
    if (is_postgres(url))
        return mask_conninfo(url, out, size);
    mask_userinfo(url, out, size);
    return 0;
}

int
jr_name_check(const char *name, const char *what, jr_err *err)
{
    return jr_name_check_len(name, name ? strlen(name) : 0, what, err);
}

int
jr_name_check_len(const char *name, size_t len, const char *what,
                  jr_err *err)
{
    size_t n;

    if (name == NULL || len == 0)
        return jr_fail(err, JR_EINPUT, "empty %s", what);
    for (n = 0; n < len; n++) {
        unsigned char c = (unsigned char)name[n];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '_' || c == '.' || c == ':' ||
              c == '-'))
            return jr_fail(err, JR_EINPUT, "invalid %s '%.64s': character "
                           "%zu is not one of [A-Za-z0-9_.:-]", what, name,
                           n + 1);
    }
    if (n > 128)
        return jr_fail(err, JR_EINPUT, "invalid %s '%.32s...': %zu "
                       "characters, at most 128", what, name, n);
    return 0;
}

/* The rules every push follows, whichever way it comes (CLI, C library,
 * Lua module, handler push, backend): checked here, once, before anything
 * reaches a database. */
int
jr_push_check(const jr_push *p, size_t max_payload, jr_err *err)
{
    if (jr_name_check(p->name, "job name", err) < 0)
        return -1;
    if (p->queue && jr_name_check(p->queue, "queue name", err) < 0)
        return -1;
    if (max_payload && p->payload && strlen(p->payload) > max_payload)
        return jr_fail(err, JR_EINPUT, "job '%s': payload of %zu bytes is "
                       "over the limit of %zu (max_payload)", p->name,
                       strlen(p->payload), max_payload);
    if (p->max_retries < -1)
        return jr_fail(err, JR_EINPUT, "job '%s': max_retries %d is "
                       "negative", p->name, p->max_retries);
    if (!isfinite(p->run_at) || p->run_at < 0 || p->run_at > JR_TIME_MAX)
        return jr_fail(err, JR_EINPUT, "job '%s': run_at %g is not a time "
                       "(epoch seconds from 0 to %.0f, 9999-12-31)", p->name,
                       p->run_at, JR_TIME_MAX);
    if (!isfinite(p->run_in) || fabs(p->run_in) > JR_DELAY_MAX)
        return jr_fail(err, JR_EINPUT, "job '%s': run_in %g is not a delay "
                       "(seconds, finite, at most %.0f either way: 100 "
                       "years)", p->name, p->run_in, JR_DELAY_MAX);
    if (p->run_at != 0 && p->run_in != 0)
        return jr_fail(err, JR_EINPUT, "job '%s': give run_at or run_in, "
                       "not both", p->name);
    return 0;
}

jr_job *
jr_job_new(int64_t id, const char *name, const char *queue,
           const char *payload, size_t payload_len)
{
    size_t ln = strlen(name) + 1, lq = strlen(queue) + 1;
    jr_job *j = malloc(sizeof *j + ln + lq + payload_len + 1);
    char *p;

    if (j == NULL)
        return NULL;
    memset(j, 0, sizeof *j);
    p = (char *)(j + 1);
    j->id = id;
    j->max_retries = -1;
    j->name = memcpy(p, name, ln);
    p += ln;
    j->queue = memcpy(p, queue, lq);
    p += lq;
    memcpy(p, payload, payload_len);
    p[payload_len] = '\0';
    j->payload = p;
    j->payload_len = payload_len;
    return j;
}

int
jr_max_retries(const jr_job *j, int handler, int dflt)
{
    return j->max_retries >= 0 ? j->max_retries : handler >= 0 ? handler :
           dflt;
}

double
jr_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}
