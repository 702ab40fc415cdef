/* backend.c - what both engines share: choosing one from a URL, opening
 * and closing a connection, masking passwords (with libpq's own parser). */
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

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

const jr_backend_caps *
jr_url_caps(const char *url)
{
    const char *arg;
    const jr_backend_ops *ops = jr_url_parse(url, &arg, NULL);

    return ops != NULL ? &ops->caps : &jr_sqlite_ops.caps;
}

const char *
jr_url_file(const char *url)
{
    const char *arg;
    const jr_backend_ops *ops = jr_url_parse(url, &arg, NULL);

    return ops != NULL && ops->file != NULL ? ops->file(arg) : NULL;
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

static int
add_count(const char *queue, long n, void *arg)
{
    (void)queue;
    *(long *)arg += n;
    return 0;
}

long
jr_db_count_ready(const jr_db *db, const char *const *names, int nnames,
                  long limit, jr_err *err)
{
    long n = 0;

    if (db->ops->ready_by_queue(db->b, names, nnames, limit, add_count, &n,
                                err) < 0)
        return -1;
    return n < limit ? n : limit;
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
jr_list_filter_check(const jr_list_filter *f, jr_err *err)
{
    char all[128];

    if (f->state != NULL && jr_state_parse(f->state) < 0)
        return jr_fail(err, JR_EINPUT, "unknown job state '%.64s' (%s)",
                       f->state, jr_state_list(all, sizeof all, ", "));
    if (f->name != NULL && jr_name_check(f->name, "job name", err) < 0)
        return -1;
    if (f->queue != NULL && jr_name_check(f->queue, "queue name", err) < 0)
        return -1;
    if (f->limit < 0)
        return jr_fail(err, JR_EINPUT, "list limit %d is negative",
                       f->limit);
    if (f->before_id < 0 || f->after_id < 0 ||
        (f->before_id > 0 && f->after_id > 0))
        return jr_fail(err, JR_EINPUT, "give before_id or after_id (a job "
                       "id >= 1), not both");
    return 0;
}

void
jr_attempt_rows_clear(jr_attempt_row *a, int n)
{
    int i;

    for (i = 0; i < n; i++) {
        free(a[i].error);
        free(a[i].runner);
        free(a[i].generation);
    }
}
