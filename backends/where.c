/* where.c - parses and checks the payload filter of a job list
 * (where.h) into the path and literal each engine binds. Uses where.h,
 * jsontext.h. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "where.h"
#include "base/jsontext.h"

static int
fail_at(jr_err *err, const char *text, const char *p, const char *what)
{
    return jr_fail(err, JR_EINPUT, "payload filter '%.80s', byte %d: %s "
                   "(want payload.KEY[.KEY] = VALUE, e.g. payload.user_id "
                   "= 42)", text, (int)(p - text) + 1, what);
}

/* The path after "payload": keys into both forms; *pp moves past it. */
static int
path(const char *text, const char **pp, jr_where *w, jr_err *err)
{
    const char *p = *pp;
    size_t sl = 1, pl = 1, n;
    int depth = 0;

    strcpy(w->sqlite_path, "$");
    strcpy(w->pg_path, "{");
    while (*p == '.') {
        p++;
        if (!(isalpha((unsigned char)*p) || *p == '_'))
            return fail_at(err, text, p, "a key starts with a letter or "
                           "'_'");
        for (n = 0; isalnum((unsigned char)p[n]) || p[n] == '_'; n++)
            ;
        if (n > JR_WHERE_KEY)
            return fail_at(err, text, p, "a key is at most 64 bytes");
        if (++depth > JR_WHERE_DEPTH)
            return fail_at(err, text, p, "a path has at most 8 keys");
        sl += (size_t)sprintf(w->sqlite_path + sl, ".%.*s", (int)n, p);
        pl += (size_t)sprintf(w->pg_path + pl, "%s%.*s", depth > 1 ? "," :
                              "", (int)n, p);
        p += n;
    }
    if (depth == 0)
        return fail_at(err, text, p, "expected '.KEY' after 'payload'");
    strcpy(w->pg_path + pl, "}");
    *pp = p;
    return 0;
}

static int
bare_char(char c)
{
    return isalnum((unsigned char)c) || strchr("_-.@:", c) != NULL;
}

/* The value: a JSON scalar, or a bare word as a string. */
static int
value(const char *text, const char *p, jr_where *w, jr_err *err)
{
    char why[128];
    size_t n = strlen(p);

    while (n > 0 && isspace((unsigned char)p[n - 1]))
        n--;
    if (n == 0)
        return fail_at(err, text, p, "expected a value after '='");
    if (n > JR_WHERE_VALUE)
        return fail_at(err, text, p, "the value is longer than 256 bytes");
    if (*p == '"' || *p == '-' || isdigit((unsigned char)*p) ||
        (n == 4 && (memcmp(p, "true", 4) == 0 || memcmp(p, "null", 4) == 0))
        || (n == 5 && memcmp(p, "false", 5) == 0)) {
        if (jr_jsontext_check(p, n, why, sizeof why) < 0)
            return fail_at(err, text, p, why);
        memcpy(w->literal, p, n);
        w->literal[n] = '\0';
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        if (!bare_char(p[i]))
            return fail_at(err, text, p + i, "quote a value holding this "
                           "character: \"...\"");
    snprintf(w->literal, sizeof w->literal, "\"%.*s\"", (int)n, p);
    return 0;
}

int
jr_where_parse(const char *text, jr_where *w, jr_err *err)
{
    const char *p = text;

    while (isspace((unsigned char)*p))
        p++;
    if (strncmp(p, "payload", 7) != 0)
        return fail_at(err, text, p, "the path starts with 'payload'");
    p += 7;
    if (path(text, &p, w, err) < 0)
        return -1;
    while (isspace((unsigned char)*p))
        p++;
    if (*p != '=')
        return fail_at(err, text, p, "expected '=' after the path (the "
                       "only operator)");
    p++;
    while (isspace((unsigned char)*p))
        p++;
    return value(text, p, w, err);
}
