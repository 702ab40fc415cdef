/* util.c - durations, times, JSON quoting. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util.h"

int
jr_parse_duration(const char *s, const char *what, double *out, jr_err *err)
{
    static const struct { const char *unit; double secs; } units[] = {
        {"", 1}, {"s", 1}, {"ms", 0.001}, {"m", 60}, {"h", 3600},
        {"d", 86400}, {"w", 604800}};
    char *end;
    double v;
    size_t i;

    errno = 0;
    v = strtod(s, &end);
    if (end == s || errno != 0 || !isfinite(v) || v < 0)
        goto bad;
    for (i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcmp(end, units[i].unit) == 0) {
            *out = v * units[i].secs;
            return 0;
        }
bad:
    return jr_fail(err, JR_EUSAGE, "invalid %s '%s': expected a duration "
                   "such as 30s, 250ms, 5m, 2h or 1d", what, s);
}

int
jr_parse_time(const char *s, const char *what, double *out, jr_err *err)
{
    struct tm tm, want;
    const char *end;
    char *frac;
    double sub = 0;
    time_t t;

    if (s[0] == '@') {
        *out = strtod(s + 1, &frac);
        if (frac != s + 1 && *frac == '\0' && isfinite(*out) && *out >= 0)
            return 0;
        goto bad;
    }
    memset(&tm, 0, sizeof tm);
    end = strptime(s, "%Y-%m-%d", &tm);
    if (end == NULL)
        goto bad;
    if (*end == 'T' || *end == ' ') {
        end = strptime(end + 1, "%H:%M:%S", &tm);
        if (end == NULL)
            goto bad;
        if (*end == '.') {
            sub = strtod(end, &frac);
            end = frac;
        }
    }
    if (*end == 'Z')
        end++;
    if (*end != '\0')
        goto bad;
    want = tm;
    t = timegm(&tm);
    /* timegm carries 2026-02-30 into March: a date that does not come
     * back the same does not exist */
    if (t == (time_t)-1 || gmtime_r(&t, &tm) == NULL ||
        tm.tm_year != want.tm_year || tm.tm_mon != want.tm_mon ||
        tm.tm_mday != want.tm_mday || tm.tm_hour != want.tm_hour ||
        tm.tm_min != want.tm_min || tm.tm_sec != want.tm_sec)
        return jr_fail(err, JR_EUSAGE, "invalid %s '%s': no such date or "
                       "time", what, s);
    *out = (double)t + sub;
    return 0;
bad:
    return jr_fail(err, JR_EUSAGE, "invalid %s '%s': expected a UTC time "
                   "such as 2026-11-22T10:00:00Z or @EPOCH", what, s);
}

int
jr_parse_int(const char *s, const char *what, long lo, long hi, long *out,
             jr_err *err)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || errno != 0 || v < lo || v > hi)
        return jr_fail(err, JR_EUSAGE, "invalid %s '%s': expected a whole "
                       "number from %ld to %ld", what, s, lo, hi);
    *out = v;
    return 0;
}

void
jr_json_str(FILE *f, const char *s)
{
    if (s == NULL) {
        fputs("null", f);
        return;
    }
    putc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c == '\t')
            fputs("\\t", f);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            putc(c, f);
    }
    putc('"', f);
}

const char *
jr_time_iso(double t, char *buf, size_t size)
{
    time_t secs = (time_t)floor(t);
    struct tm tm;
    int ms = (int)((t - floor(t)) * 1000);

    gmtime_r(&secs, &tm);
    snprintf(buf, size, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
             tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
             tm.tm_min, tm.tm_sec, ms);
    return buf;
}

double
jr_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double
jr_backoff_default(int attempt)
{
    double a = attempt, d;

    d = a * a * a * a + 15 + (double)(rand() % 10) * (a + 1);
    return d > 7 * 86400.0 ? 7 * 86400.0 : d;
}
