/* cron.c - cron expressions and the next fire instant. Wall-clock search
 * in civil days (no time zone involved), then each matching wall time is
 * mapped to an instant with the zone's UTC offsets, read from the tz
 * database by tzfile.c (no TZ, no tzset: safe beside other threads). */
#define _GNU_SOURCE
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/cron.h"
#include "base/tzfile.h"

typedef struct field_def {
    const char *name;
    const char *nth;            /* "1st"... for messages */
    int         lo, hi;
    const char *const *names;   /* names for lo.., or NULL */
} field_def;

static const char *const month_names[] = {"jan", "feb", "mar", "apr", "may",
    "jun", "jul", "aug", "sep", "oct", "nov", "dec", NULL};
static const char *const day_names[] = {"sun", "mon", "tue", "wed", "thu",
    "fri", "sat", NULL};

static const field_def fields[5] = {
    {"minute", "1st", 0, 59, NULL},
    {"hour", "2nd", 0, 23, NULL},
    {"day-of-month", "3rd", 1, 31, NULL},
    {"month", "4th", 1, 12, month_names},
    {"day-of-week", "5th", 0, 7, day_names},
};

static const struct { const char *name, *expr; } macros[] = {
    {"@hourly", "0 * * * *"}, {"@daily", "0 0 * * *"},
    {"@midnight", "0 0 * * *"}, {"@weekly", "0 0 * * 0"},
    {"@monthly", "0 0 1 * *"}, {"@yearly", "0 0 1 1 *"},
    {"@annually", "0 0 1 1 *"}};

/* A number or (for month and day-of-week) a three-letter name at *p. */
static int
value(const field_def *f, const char **p, int *out)
{
    const char *s = *p;
    int i;

    if (isdigit((unsigned char)*s)) {
        long v = 0;
        while (isdigit((unsigned char)*s) && v < 1000)
            v = v * 10 + (*s++ - '0');
        *out = (int)v;
        *p = s;
        return 0;
    }
    for (i = 0; f->names != NULL && f->names[i] != NULL; i++)
        if (strncasecmp(s, f->names[i], 3) == 0 &&
            !isalpha((unsigned char)s[3])) {
            *out = f->lo + i;
            *p = s + 3;
            return 0;
        }
    return -1;
}

static int field_fail(jr_err *err, const char *expr, const field_def *f,
                      const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static int
field_fail(jr_err *err, const char *expr, const field_def *f,
           const char *fmt, ...)
{
    char what[200];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return jr_fail(err, JR_EINPUT, "cron '%s': field '%s' (%s): %s", expr,
                   f->name, f->nth, what);
}

/* One comma-separated item: *, N, N-M, each with an optional /STEP. */
static int
item(const char *expr, const field_def *f, const char *it, uint64_t *bits,
     jr_err *err)
{
    const char *p = it;
    int a, b, step = 1, v;

    if (*p == '*') {
        a = f->lo;
        b = f->hi == 7 ? 6 : f->hi;
        p++;
    } else {
        if (value(f, &p, &a) < 0)
            return field_fail(err, expr, f, "'%s' is not a number, range "
                              "or step", it);
        b = a;
        if (*p == '-') {
            p++;
            if (value(f, &p, &b) < 0)
                return field_fail(err, expr, f, "'%s' is not a range", it);
        }
    }
    if (*p == '/') {
        p++;
        if (!isdigit((unsigned char)*p) || value(f, &p, &step) < 0 ||
            step < 1)
            return field_fail(err, expr, f, "'%s' has a bad step", it);
        if (it[0] != '*' && strchr(it, '-') == NULL)
            b = f->hi == 7 ? 6 : f->hi;         /* N/S: N to the end */
    }
    if (*p != '\0')
        return field_fail(err, expr, f, "'%s' is not a number, range or "
                          "step", it);
    if (a < f->lo || a > f->hi || b < f->lo || b > f->hi)
        return field_fail(err, expr, f, "%s is out of range %d-%d", it,
                          f->lo, f->hi);
    if (a > b)
        return field_fail(err, expr, f, "'%s' is a range backwards", it);
    for (v = a; v <= b; v += step)
        *bits |= (uint64_t)1 << (f->hi == 7 && v == 7 ? 0 : v);
    return 0;
}

static int
field(const char *expr, const field_def *f, char *text, uint64_t *bits,
      jr_err *err)
{
    char *save = NULL, *it;

    *bits = 0;
    if (*text == ',' || text[strlen(text) - 1] == ',' ||
        strstr(text, ",,") != NULL)
        return field_fail(err, expr, f, "'%s' has an empty list item", text);
    for (it = strtok_r(text, ",", &save); it != NULL;
         it = strtok_r(NULL, ",", &save))
        if (item(expr, f, it, bits, err) < 0)
            return -1;
    return 0;
}

int
jr_cron_parse(const char *expr, jr_cron *c, const char **fname, jr_err *err)
{
    char buf[256], *save = NULL, *tok[7];
    const char *text = expr;
    uint64_t bits[5];
    size_t i;
    int n = 0;

    memset(c, 0, sizeof *c);
    if (fname != NULL)
        *fname = "expression";
    for (i = 0; expr[0] == '@' && i < sizeof macros / sizeof macros[0]; i++)
        if (strcasecmp(expr, macros[i].name) == 0)
            text = macros[i].expr;
    if (expr[0] == '@' && text == expr)
        return jr_fail(err, JR_EINPUT, "cron '%s': unknown macro (expected "
                       "@hourly, @daily, @weekly, @monthly or @yearly)",
                       expr);
    if (strlen(text) >= sizeof buf)
        return jr_fail(err, JR_EINPUT, "cron expression too long (%zu "
                       "bytes, at most %zu)", strlen(text), sizeof buf - 1);
    memcpy(buf, text, strlen(text) + 1);
    for (tok[n] = strtok_r(buf, " \t", &save); tok[n] != NULL && n < 6;
         tok[n] = n < 6 ? strtok_r(NULL, " \t", &save) : NULL)
        n++;
    if (n != 5)
        return jr_fail(err, JR_EINPUT, "cron '%s': expected 5 fields "
                       "(minute hour day-of-month month day-of-week), got "
                       "%s%d", expr, n > 5 ? "more than " : "",
                       n > 5 ? 5 : n);
    for (i = 0; i < 5; i++) {
        if (fname != NULL)
            *fname = fields[i].name;
        if (field(expr, &fields[i], tok[i], &bits[i], err) < 0)
            return -1;
    }
    c->minute = bits[0];
    c->hour = (uint32_t)bits[1];
    c->mday = (uint32_t)bits[2];
    c->month = (uint32_t)bits[3];
    c->wday = (uint32_t)bits[4];
    c->dom_star = tok[2][0] == '*';
    c->dow_star = tok[4][0] == '*';
    if (fname != NULL)
        *fname = NULL;
    return 0;
}

int
jr_cron_every(double secs, jr_cron *c, jr_err *err)
{
    memset(c, 0, sizeof *c);
    if (!(secs >= 1 && secs <= JR_EVERY_MAX) || secs != floor(secs))
        return jr_fail(err, JR_EINPUT, "every %gs: must be whole seconds "
                       "from 1s to 366d", secs);
    c->every = secs;
    return 0;
}

int
jr_cron_zone_ok(const char *tz)
{
    jr_tzfile *z = jr_tzfile_open(tz);

    jr_tzfile_free(z);
    return z != NULL;
}

/* ---- civil time: days since 1970-01-01 (tzfile.h) ---- */

#define days_from_civil jr_tzfile_days
#define civil_from_days jr_tzfile_civil

static int64_t
floor_div(int64_t a, int64_t b)
{
    return a / b - (a % b != 0 && (a < 0) != (b < 0));
}

/* ---- the zone: offsets from the tz database ---- */

/* The UTC offset of zone z at instant t. */
static long
off(const jr_tzfile *z, int64_t t)
{
    return jr_tzfile_offset(z, t, NULL, 0);
}

/* The instant of wall-clock time g (seconds as if UTC): the first one
 * when the wall time repeats, the change itself when it is skipped. */
static int64_t
wall_instant(const jr_tzfile *z, int64_t g)
{
    int64_t best = 0, lo = 0, hi = 0, cand;
    long o[5];
    int i, j, found = 0, n = 0;

    for (i = -2; i <= 2; i++) {
        long x = off(z, g + i * 43200);
        for (j = 0; j < n && o[j] != x; j++)
            ;
        if (j == n)
            o[n++] = x;
    }
    for (i = 0; i < n; i++) {
        cand = g - o[i];
        if (i == 0 || cand < lo)
            lo = cand;
        if (i == 0 || cand > hi)
            hi = cand;
        if (off(z, cand) == o[i] && (!found || cand < best)) {
            best = cand;
            found = 1;
        }
    }
    if (found)
        return best;
    /* skipped: the first instant whose offset differs from lo's */
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        if (off(z, mid) == off(z, lo))
            lo = mid;
        else
            hi = mid;
    }
    return hi;
}

static int
day_ok(const jr_cron *c, int64_t days, int d)
{
    int w = (int)((days % 7 + 11) % 7);        /* 1970-01-01: Thursday */
    int dom = (c->mday >> d) & 1, dow = (c->wday >> w) & 1;

    if (c->dom_star || c->dow_star)
        return dom && dow;
    return dom || dow;                          /* Vixie cron's rule */
}

typedef struct search {
    const jr_cron   *c;
    const jr_tzfile *z;
    double           after;
    double           next;
} search;

static int
search_next(search *s)
{
    const jr_cron *c = s->c;
    int64_t a = (int64_t)floor(s->after), g, limit, days, sod, y, t;
    int m, d, h, mi;

    g = floor_div(a + off(s->z, a), 60) * 60 + 60;
    limit = g + (int64_t)JR_CRON_YEARS * 366 * 86400;
    while (g < limit) {
        days = floor_div(g, 86400);
        sod = g - days * 86400;
        civil_from_days(days, &y, &m, &d);
        h = (int)(sod / 3600);
        mi = (int)(sod % 3600 / 60);
        if (!((c->month >> m) & 1)) {
            g = days_from_civil(m == 12 ? y + 1 : y, m == 12 ? 1 : m + 1,
                                1) * 86400;
        } else if (!day_ok(c, days, d)) {
            g = (days + 1) * 86400;
        } else if (!((c->hour >> h) & 1)) {
            g = days * 86400 + (h + 1) * 3600;
        } else if (!((c->minute >> mi) & 1)) {
            g += 60;
        } else if ((t = wall_instant(s->z, g)) > s->after) {
            s->next = (double)t;
            return 0;
        } else {
            g += 60;
        }
    }
    return -1;
}

int
jr_cron_next(const jr_cron *c, const char *tz, double after, double *next)
{
    search s = {0};
    jr_tzfile *z;
    int rc;

    if (c->every > 0) {
        *next = (floor(after / c->every) + 1) * c->every;
        return 0;
    }
    if (!isfinite(after) || (z = jr_tzfile_open(tz)) == NULL)
        return -1;
    s.c = c;
    s.z = z;
    s.after = after;
    rc = search_next(&s);
    jr_tzfile_free(z);
    if (rc == 0)
        *next = s.next;
    return rc;
}

long
jr_cron_offset(const char *tz, double t, char *abbr, size_t abbrsz)
{
    jr_tzfile *z;
    long o;

    if (abbr != NULL && abbrsz > 0)
        abbr[0] = '\0';
    if (!isfinite(t) || (z = jr_tzfile_open(tz)) == NULL)
        return 0;
    o = jr_tzfile_offset(z, (int64_t)floor(t), abbr, abbrsz);
    jr_tzfile_free(z);
    return o;
}
