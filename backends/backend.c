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
    /* a conninfo has an '='; a sqlite: URL's path may too (a=b.db) */
    return has_prefix(url, "postgres://") ||
           has_prefix(url, "postgresql://") ||
           (!has_prefix(url, "sqlite:") && strchr(url, '=') != NULL);
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

/* Where the userinfo of a text that may be a URL starts: after its first
 * ':' (the scheme's, or the user name's when the scheme is misspelled) and
 * the '/' or '\\' that follow it. NULL without a ':'. */
static const char *
userinfo_start(const char *url)
{
    const char *p = strchr(url, ':');

    if (p == NULL)
        return NULL;
    for (p++; *p == '/' || *p == '\\'; p++)
        ;
    return p;
}

/* Masks the password of any text that may be a URL with userinfo, however
 * misspelled ("scheme:user:PASS@host", "scheme//user:PASS@host", a '/' or
 * '@' in PASS): everything between the scheme separator and the LAST '@'
 * is taken as userinfo, and all of it after its first ':' (all of it
 * without one) is shown as ****. Text without '@' is copied. */
static void
mask_userinfo(const char *url, char *out, size_t size)
{
    const char *at = strrchr(url, '@'), *start = userinfo_start(url), *c;

    if (at == NULL || start == NULL || start > at) {
        snprintf(out, size, "%s", url);
        return;
    }
    c = memchr(start, ':', (size_t)(at - start));
    snprintf(out, size, "%.*s****%s", (int)((c ? c + 1 : start) - url), url,
             at);
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

/* Is the len bytes at s a plain parameter name (letters, digits, '_')? */
static int
plain_name(const char *s, size_t len)
{
    size_t i;

    for (i = 0; i < len; i++)
        if (!((s[i] | 0x20) >= 'a' && (s[i] | 0x20) <= 'z') &&
            !(s[i] >= '0' && s[i] <= '9') && s[i] != '_')
            return 0;
    return len > 0 && len < 64;
}

/* libpq's parse error on one line, with every quoted token that is not a
 * keyword replaced by ****: libpq quotes pieces of the string it could not
 * parse, and those may be pieces of the password. With names set (a URI
 * whose query has no password and no %-escape, so that no piece of a
 * password can be taken for a parameter), the unknown parameter name of
 * "invalid URI query parameter" is shown: a name is not a secret. */
static void
mask_parse_error(const char *msg, int names, char *out, size_t size)
{
    static const char param[] = "invalid URI query parameter: ";
    const char *start = msg, *q;
    size_t n = 0;

    for (; *msg && n + 8 < size; msg++) {
        if (*msg == '"' && (q = strchr(msg + 1, '"')) != NULL) {
            size_t len = (size_t)(q - msg - 1);
            /* a separator ("=", "]") or an option name is safe to show */
            if ((len == 1 && strchr("=]:/@&?", msg[1]) != NULL) ||
                libpq_keyword(msg + 1, len) ||
                (names && plain_name(msg + 1, len) &&
                 (size_t)(msg - start) >= sizeof param - 1 &&
                 strncmp(msg - (sizeof param - 1), param,
                         sizeof param - 1) == 0))
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

/* Is url a PostgreSQL URI that libpq would split elsewhere than its
 * author meant, so that pieces of a password land in fields messages
 * show? libpq ends the userinfo at the first '@', or sees none when a '/'
 * comes first: a '/' or '@' (or a '?' before one) in a password puts the
 * rest of it in the host, port, database or parameters. Refused: an '@'
 * in the host or the path, and an '@' in the query when a ':' (a
 * password's, or one libpq takes for a port's) comes before the query. */
static int
uri_ambiguous(const char *url)
{
    const char *rest, *s, *h, *e, *q;

    if (has_prefix(url, "postgresql://"))
        rest = url + strlen("postgresql://");
    else if (has_prefix(url, "postgres://"))
        rest = url + strlen("postgres://");
    else
        return 0;
    s = strpbrk(rest, "@/");
    h = s != NULL && *s == '@' ? s + 1 : rest;      /* the host(s) */
    e = h + strcspn(h, "/?");
    if (memchr(h, '@', (size_t)(e - h)) != NULL)
        return 1;
    q = e + strcspn(e, "?");                        /* the path: e..q */
    if (memchr(e, '@', (size_t)(q - e)) != NULL)
        return 1;
    return *q == '?' && strchr(q, '@') != NULL &&
           memchr(rest, ':', (size_t)(q - rest)) != NULL;
}

/* A PostgreSQL URL or conninfo as libpq parses it, re-written as conninfo
 * with every password field (and any value mentioning a password) shown
 * as ****, and any value that looks like a URL with userinfo masked as
 * one; what libpq cannot parse is never echoed. A URI libpq would split
 * elsewhere than meant (uri_ambiguous) is not parsed: it is refused,
 * shown masked as any URL is. */
static int
mask_conninfo(const char *url, char *out, size_t size)
{
    char *e = NULL, why[400], val[512];
    PQconninfoOption *opts, *o;
    const char *query = strchr(url, '?');
    size_t n = 0;

    if (uri_ambiguous(url)) {
        mask_userinfo(url, val, sizeof val);
        snprintf(out, size, "<ambiguous URL '%s': a '/', '@' or ':' in its "
                 "user name or password, or an '@' after its host, must be "
                 "percent-encoded (%%2F, %%40, %%3A)>", val);
        return -1;
    }
    if ((opts = PQconninfoParse(url, &e)) == NULL) {
        mask_parse_error(e ? e : "out of memory",
                         query != NULL && (has_prefix(url, "postgres://") ||
                                           has_prefix(url, "postgresql://")) &&
                         !mentions_password(query) &&
                         strchr(query, '%') == NULL, why, sizeof why);
        PQfreemem(e);
        snprintf(out, size, "<unparsable connection string: %s>", why);
        return -1;
    }
    out[0] = '\0';
    for (o = opts; o->keyword; o++) {
        if (o->val == NULL)
            continue;
        if (strchr(o->dispchar, '*') != NULL || mentions_password(o->val))
            snprintf(val, sizeof val, "****");
        else
            mask_userinfo(o->val, val, sizeof val);
        n = put_option(out, size, n, o->keyword, val);
    }
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
