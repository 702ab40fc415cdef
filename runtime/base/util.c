/* util.c - durations, times, JSON quoting, walks of a directory tree. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/esc.h"
#include "base/jsontext.h"
#include "base/util.h"

/* What a refusal quotes of the text it refused: escaped (a control byte
 * of a careless argument never reaches the terminal raw), cut short. */
#define SHOWN 160
static const char *
shown(char *buf, const char *s)
{
    char cut[SHOWN / 4 + 1];

    snprintf(cut, sizeof cut, "%s", s);
    return jr_esc_str(buf, SHOWN, cut);
}

/* 1 if s starts as a decimal number does (a digit, or a point before
 * one): strtod also takes hex (0x10), blanks before, inf and nan. */
static int
decimal_start(const char *s)
{
    return (s[0] >= '0' && s[0] <= '9') ||
           (s[0] == '.' && s[1] >= '0' && s[1] <= '9');
}

int
jr_parse_duration(const char *s, const char *what, double *out, jr_err *err)
{
    static const struct { const char *unit; double secs; } units[] = {
        {"", 1}, {"s", 1}, {"ms", 0.001}, {"m", 60}, {"h", 3600},
        {"d", 86400}, {"w", 604800}};
    char *end, b[SHOWN];
    double v;
    size_t i;

    errno = 0;
    if (!decimal_start(s) || strpbrk(s, "xX") != NULL)
        goto bad;
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
                   "such as 30s, 250ms, 5m, 2h or 1d", what, shown(b, s));
}

int
jr_parse_time(const char *s, const char *what, double *out, jr_err *err)
{
    struct tm tm, want;
    const char *end;
    char *frac, b[SHOWN];
    double sub = 0;
    time_t t;

    if (s[0] == '@') {
        if (!decimal_start(s + 1) || strpbrk(s, "xX") != NULL)
            goto bad;
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
                       "time", what, shown(b, s));
    *out = (double)t + sub;
    return 0;
bad:
    return jr_fail(err, JR_EUSAGE, "invalid %s '%s': expected a UTC time "
                   "such as 2026-11-22T10:00:00Z or @EPOCH", what, shown(b, s));
}

int
jr_parse_int(const char *s, const char *what, long lo, long hi, long *out,
             jr_err *err)
{
    char *end, b[SHOWN];
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    /* strtol takes blanks and a sign before the digits */
    if (!((s[0] >= '0' && s[0] <= '9') ||
          (s[0] == '-' && s[1] >= '0' && s[1] <= '9')) ||
        end == s || *end != '\0' || errno != 0 || v < lo || v > hi)
        return jr_fail(err, JR_EUSAGE, "invalid %s '%s': expected a whole "
                       "number from %ld to %ld", what, shown(b, s), lo, hi);
    *out = v;
    return 0;
}

void
jr_json_str(FILE *f, const char *s)
{
    size_t n, k, used;
    char out[6];

    if (s == NULL) {
        fputs("null", f);
        return;
    }
    putc('"', f);
    for (n = strlen(s); n > 0; s += used, n -= used) {
        if ((k = jr_jsontext_escape_char(s, n, out, &used)) == 0)
            fputs(JR_JSONTEXT_BADBYTE, f);
        else
            fwrite(out, 1, k, f);
    }
    putc('"', f);
}

/* To the microsecond first, then the millisecond shown (truncated): an
 * instant PostgreSQL holds in microseconds reads back as a double a hair
 * below its millisecond (.363999999 for .364) where SQLite's own double
 * was above it, and the two engines showed one job 1 ms apart. */
/* An instant no date can show (PostgreSQL's infinity, a plain INSERT's
 * year 50000) is written as it is: infinity, -infinity, or @EPOCH (the
 * CLI's own spelling of an instant), never read from a struct tm that
 * gmtime_r left unset. */
const char *
jr_time_iso(double t, char *buf, size_t size)
{
    double us, whole;
    time_t secs;
    struct tm tm;
    int ms;

    if (isnan(t) || isinf(t)) {
        snprintf(buf, size, "%s", isnan(t) ? "nan" :
                 t > 0 ? "infinity" : "-infinity");
        return buf;
    }
    us = floor(t * 1e6 + 0.5);
    whole = floor(us / 1e6);
    ms = (int)((us - whole * 1e6) / 1000);
    /* years 1 to 9999: what the format's four digits hold */
    if (whole < -62135596800.0 || whole > 253402300799.0) {
        snprintf(buf, size, "@%.0f", whole);
        return buf;
    }
    secs = (time_t)whole;
    if (gmtime_r(&secs, &tm) == NULL) {
        snprintf(buf, size, "@%.0f", whole);
        return buf;
    }
    snprintf(buf, size, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
             tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
             tm.tm_min, tm.tm_sec, ms);
    return buf;
}

void
jr_buf_free(jr_buf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

void
jr_buf_reset(jr_buf *b)
{
    b->len = 0;
    b->oom = 0;
}

int
jr_buf_put(jr_buf *b, const void *v, size_t n)
{
    size_t cap;
    char *p;

    if (b->oom)
        return -1;
    if (b->len + n > b->cap) {
        cap = b->cap ? b->cap : 256;
        while (cap < b->len + n)
            cap *= 2;
        if ((p = realloc(b->p, cap)) == NULL) {
            b->oom = 1;
            return -1;
        }
        b->p = p;
        b->cap = cap;
    }
    if (n > 0)
        memcpy(b->p + b->len, v, n);
    b->len += n;
    return 0;
}

char *
jr_buf_room(jr_buf *b, size_t n)
{
    size_t cap;
    char *p;

    if (b->oom)
        return NULL;
    if (b->cap - b->len < n) {
        cap = b->cap ? b->cap : 256;
        while (cap - b->len < n)
            cap *= 2;
        if ((p = realloc(b->p, cap)) == NULL) {
            b->oom = 1;
            return NULL;
        }
        b->p = p;
        b->cap = cap;
    }
    return b->p + b->len;
}

double
jr_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double
jr_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int
jr_dirset_init(jr_dirset *s, const char *root, jr_err *err)
{
    char why[256];

    memset(s, 0, sizeof *s);
    if ((s->root = realpath(root, NULL)) == NULL)
        return jr_fail_errno(err, JR_ENOTFOUND, errno, "directory '%s'",
                             root);
    if (jr_dirset_enter(s, root, why, sizeof why) != 1) {
        jr_dirset_free(s);
        return jr_fail(err, JR_ENOTFOUND, "directory '%s': %s", root, why);
    }
    return 0;
}

int
jr_dirset_enter(jr_dirset *s, const char *path, char *why, size_t size)
{
    size_t n = strlen(s->root);
    struct jr_dirid *t;
    struct stat st;
    char *real;
    int i;

    if ((real = realpath(path, NULL)) == NULL) {
        snprintf(why, size, "cannot resolve it: %s", strerror(errno));
        return 0;
    }
    if (strcmp(s->root, "/") != 0 && strcmp(real, s->root) != 0 &&
        (strncmp(real, s->root, n) != 0 || real[n] != '/')) {
        snprintf(why, size, "it leads to '%s', outside '%s'", real,
                 s->root);
        free(real);
        return 0;
    }
    if (stat(real, &st) < 0 || !S_ISDIR(st.st_mode)) {
        snprintf(why, size, "'%s' is not a directory", real);
        free(real);
        return 0;
    }
    for (i = 0; i < s->n; i++)
        if (s->v[i].dev == (unsigned long long)st.st_dev &&
            s->v[i].ino == (unsigned long long)st.st_ino) {
            snprintf(why, size, "it leads to '%s', already walked (a "
                     "cycle or a second name)", real);
            free(real);
            return 0;
        }
    free(real);
    if (s->n == s->cap) {
        int cap = s->cap ? s->cap * 2 : 16;
        if ((t = realloc(s->v, (size_t)cap * sizeof *t)) == NULL) {
            snprintf(why, size, "out of memory");
            return 0;
        }
        s->v = t;
        s->cap = cap;
    }
    s->v[s->n].dev = (unsigned long long)st.st_dev;
    s->v[s->n].ino = (unsigned long long)st.st_ino;
    s->n++;
    return 1;
}

void
jr_dirset_free(jr_dirset *s)
{
    free(s->root);
    free(s->v);
    memset(s, 0, sizeof *s);
}

char *
jr_read_file(const char *file)
{
    FILE *f = fopen(file, "rb");
    char *s = NULL;
    struct stat st;
    long n;

    if (f == NULL)
        return NULL;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);              /* its size is no length: ENOMEM was said */
        errno = EISDIR;
        return NULL;
    }
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 &&
        fseek(f, 0, SEEK_SET) == 0 && (s = malloc((size_t)n + 1)) != NULL) {
        n = (long)fread(s, 1, (size_t)n, f);
        s[n] = '\0';
    }
    fclose(f);
    return s;
}
