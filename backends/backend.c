/* backend.c - what both engines share: choosing one from a URL, masking
 * passwords, name and payload checks, the job allocation. */
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

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

const jr_backend_ops *
jr_url_parse(const char *url, const char **arg, jr_err *err)
{
    *arg = url;
    if (url == NULL || *url == '\0') {
        jr_fail(err, JR_EUSAGE, "empty backend URL");
        return NULL;
    }
    if (has_prefix(url, "postgres://") || has_prefix(url, "postgresql://") ||
        strchr(url, '=') != NULL)
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

/* Masks "scheme://user:PASS@host" and "password=PASS" (conninfo). */
void
jr_url_mask(const char *url, char *out, size_t size)
{
    const char *scheme, *at, *colon, *pw;
    size_t n;

    if (size == 0)
        return;
    snprintf(out, size, "%s", url ? url : "");
    scheme = strstr(out, "://");
    if (scheme != NULL) {
        at = strchr(scheme + 3, '@');
        colon = strchr(scheme + 3, ':');
        if (at != NULL && colon != NULL && colon < at) {
            char rest[512];
            snprintf(rest, sizeof rest, "%s", at);
            n = (size_t)(colon - out) + 1;
            snprintf(out + n, size - n, "****%s", rest);
        }
    }
    /* password=... in conninfo or URL query strings */
    for (pw = strstr(out, "password="); pw != NULL;
         pw = strstr(pw + 1, "password=")) {
        char *v = (char *)pw + strlen("password=");
        char *end = v;
        char rest[512];
        while (*end && *end != ' ' && *end != '&')
            end++;
        snprintf(rest, sizeof rest, "%s", end);
        n = (size_t)(v - out);
        snprintf(v, size - n, "****%s", rest);
    }
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
