/* tzfile.c - a zone read from its TZif file (RFC 8536): version 1 data
 * (32-bit times) or, from version 2 on, the 64-bit data and the footer's
 * POSIX TZ rule ("CET-1CEST,M3.5.0,M10.5.0/3"), which governs the instants
 * after the last transition. Reads TZDIR (else /usr/share/zoneinfo) and
 * nothing else of the environment; writes none of it. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/tzfile.h"

#define FILE_MAX (1 << 20)      /* a TZif file is a few KiB */
#define NAME_MAX_ 16            /* an abbreviation in a footer */

typedef struct ttype {          /* a local time type */
    long off;                   /* seconds east of UTC */
    int  abbr;                  /* index into chars */
} ttype;

typedef struct prule {          /* one end of a footer's DST period */
    int  kind;                  /* 'M' month.week.day, 'J' 1-365 without
                                   29 Feb, 'N' 0-365 */
    int  m, w, d, n;
    long time;                  /* local seconds after midnight */
} prule;

typedef struct posix {          /* a footer's TZ rule */
    char  std[NAME_MAX_], dst[NAME_MAX_];
    long  std_off, dst_off;     /* seconds east */
    int   has_dst;
    prule start, end;
} posix;

struct jr_tzfile {
    int64_t       *at;          /* transition instants, ascending */
    unsigned char *idx;         /* the type from each */
    int            n;
    ttype         *type;
    int            ntype;
    char          *chars;       /* abbreviations, NUL-terminated each */
    int            nchars;
    int            has_rule;    /* the footer holds a rule */
    posix          rule;
};

/* ---- the civil calendar ---- */

int64_t
jr_tzfile_days(int64_t y, int m, int d)
{
    int64_t era, yoe, doy, doe;

    y -= m <= 2;
    era = (y >= 0 ? y : y - 399) / 400;
    yoe = y - era * 400;
    doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

void
jr_tzfile_civil(int64_t z, int64_t *y, int *m, int *d)
{
    int64_t era, doe, yoe, doy, mp;

    z += 719468;
    era = (z >= 0 ? z : z - 146096) / 146097;
    doe = z - era * 146097;
    yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

static int64_t
floor_div(int64_t a, int64_t b)
{
    return a / b - (a % b != 0 && (a < 0) != (b < 0));
}

static int
leap(int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

/* ---- the footer: a POSIX TZ rule ---- */

static int
parse_name(const char **p, char *out)
{
    const char *s = *p, *e;

    if (*s == '<') {
        if ((e = strchr(s, '>')) == NULL)
            return -1;
        s++;
    } else {
        for (e = s; isalpha((unsigned char)*e); e++)
            ;
    }
    if (e == s || e - s >= NAME_MAX_)
        return -1;
    memcpy(out, s, (size_t)(e - s));
    out[e - s] = '\0';
    *p = *e == '>' ? e + 1 : e;
    return 0;
}

/* [+-]hh[:mm[:ss]] into seconds (hours up to 167, as POSIX allows). */
static int
parse_hms(const char **p, long *out)
{
    const char *s = *p;
    long sign = 1, part[3] = {0, 0, 0};
    int i;

    if (*s == '+' || *s == '-')
        sign = *s++ == '-' ? -1 : 1;
    for (i = 0; i < 3; i++) {
        if (!isdigit((unsigned char)*s))
            return -1;
        while (isdigit((unsigned char)*s) && part[i] < 1000)
            part[i] = part[i] * 10 + (*s++ - '0');
        if (*s != ':' || i == 2)
            break;
        s++;
    }
    if (part[0] > 167 || part[1] > 59 || part[2] > 59)
        return -1;
    *out = sign * (part[0] * 3600 + part[1] * 60 + part[2]);
    *p = s;
    return 0;
}

static int
parse_int(const char **p, int lo, int hi, int *out)
{
    long v = 0;

    if (!isdigit((unsigned char)**p))
        return -1;
    while (isdigit((unsigned char)**p) && v <= hi)
        v = v * 10 + (*(*p)++ - '0');
    if (v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

/* Mm.w.d, Jn or n, then an optional /time (default 02:00). */
static int
parse_date(const char **p, prule *r)
{
    memset(r, 0, sizeof *r);
    r->time = 7200;
    r->kind = **p == 'M' || **p == 'J' ? *(*p)++ : 'N';
    if (r->kind == 'M') {
        if (parse_int(p, 1, 12, &r->m) < 0 || *(*p)++ != '.' ||
            parse_int(p, 1, 5, &r->w) < 0 || *(*p)++ != '.' ||
            parse_int(p, 0, 6, &r->d) < 0)
            return -1;
    } else if (parse_int(p, r->kind == 'J' ? 1 : 0, 365, &r->n) < 0) {
        return -1;
    }
    if (**p == '/') {
        (*p)++;
        return parse_hms(p, &r->time);
    }
    return 0;
}

/* A footer such as "CET-1CEST,M3.5.0,M10.5.0/3" (offsets in POSIX are
 * west of UTC); a DST without a rule takes the US one, as glibc does. */
static int
parse_rule(const char *s, posix *r)
{
    const char *dflt = ",M3.2.0,M11.1.0";

    memset(r, 0, sizeof *r);
    if (parse_name(&s, r->std) < 0 || parse_hms(&s, &r->std_off) < 0)
        return -1;
    r->std_off = -r->std_off;
    if (*s == '\0')
        return 0;
    if (parse_name(&s, r->dst) < 0)
        return -1;
    r->has_dst = 1;
    r->dst_off = r->std_off + 3600;
    if (*s != ',' && *s != '\0') {
        if (parse_hms(&s, &r->dst_off) < 0)
            return -1;
        r->dst_off = -r->dst_off;
    }
    if (*s == '\0')
        s = dflt;
    if (*s++ != ',' || parse_date(&s, &r->start) < 0 || *s++ != ',' ||
        parse_date(&s, &r->end) < 0 || *s != '\0')
        return -1;
    return 0;
}

/* The local instant (seconds, as if UTC) where rule r falls in year y. */
static int64_t
rule_local(const prule *r, int64_t y)
{
    static const int mdays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31,
                                  30, 31};
    int64_t days, first;
    int wday, day, len;

    if (r->kind == 'J')
        days = jr_tzfile_days(y, 1, 1) + r->n - 1 + (leap(y) && r->n >= 60);
    else if (r->kind == 'N')
        days = jr_tzfile_days(y, 1, 1) + r->n;
    else {
        first = jr_tzfile_days(y, r->m, 1);
        wday = (int)((first % 7 + 11) % 7);     /* 1970-01-01: Thursday */
        len = mdays[r->m - 1] + (r->m == 2 && leap(y));
        day = 1 + (r->d - wday + 7) % 7 + (r->w - 1) * 7;
        while (day > len)
            day -= 7;
        days = first + day - 1;
    }
    return days * 86400 + r->time;
}

static long
rule_offset(const posix *r, int64_t t, const char **abbr)
{
    int64_t y, s, e;
    int m, d, dst;

    *abbr = r->std;
    if (!r->has_dst)
        return r->std_off;
    jr_tzfile_civil(floor_div(t + r->std_off, 86400), &y, &m, &d);
    s = rule_local(&r->start, y) - r->std_off;  /* given in standard time */
    e = rule_local(&r->end, y) - r->dst_off;    /* given in DST */
    dst = s < e ? t >= s && t < e : !(t >= e && t < s);
    if (dst)
        *abbr = r->dst;
    return dst ? r->dst_off : r->std_off;
}

/* ---- the file ---- */

static uint32_t
be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
           (uint32_t)p[2] << 8 | p[3];
}

static int64_t
be64(const unsigned char *p)
{
    return (int64_t)((uint64_t)be32(p) << 32 | be32(p + 4));
}

typedef struct counts {
    uint32_t isut, isstd, leap, time, type, chars;
} counts;

/* The header at p (end: the data's end): its counts, and the size of the
 * block that follows with times of tsize bytes; 0 when it is not TZif. */
static size_t
header(const unsigned char *p, const unsigned char *end, int tsize,
       counts *c)
{
    if (end - p < 44 || memcmp(p, "TZif", 4) != 0)
        return 0;
    c->isut = be32(p + 20);
    c->isstd = be32(p + 24);
    c->leap = be32(p + 28);
    c->time = be32(p + 32);
    c->type = be32(p + 36);
    c->chars = be32(p + 40);
    if (c->time > 100000 || c->type == 0 || c->type > 256 ||
        c->chars > 100000 || c->leap > 100000 || c->isut > 256 ||
        c->isstd > 256)
        return 0;
    return (size_t)c->time * ((size_t)tsize + 1) + (size_t)c->type * 6 +
           c->chars + (size_t)c->leap * ((size_t)tsize + 4) + c->isstd +
           c->isut;
}

/* Fills z from the data block at p (its counts c, times of tsize). */
static int
fill(jr_tzfile *z, const unsigned char *p, const counts *c, int tsize)
{
    uint32_t i;

    z->n = (int)c->time;
    z->ntype = (int)c->type;
    z->nchars = (int)c->chars;
    z->at = calloc(c->time + 1, sizeof *z->at);
    z->idx = calloc(c->time + 1, 1);
    z->type = calloc(c->type, sizeof *z->type);
    z->chars = calloc(c->chars + 1, 1);
    if (!z->at || !z->idx || !z->type || !z->chars)
        return -1;
    for (i = 0; i < c->time; i++, p += tsize)
        z->at[i] = tsize == 8 ? be64(p) : (int32_t)be32(p);
    for (i = 0; i < c->time; i++)
        if ((z->idx[i] = *p++) >= c->type)
            return -1;
    for (i = 0; i < c->type; i++, p += 6) {
        z->type[i].off = (int32_t)be32(p);
        if ((z->type[i].abbr = p[5]) >= (int)c->chars && c->chars > 0)
            return -1;
    }
    memcpy(z->chars, p, c->chars);
    return 0;
}

/* Parses a whole file's bytes into z. */
static int
parse(jr_tzfile *z, const unsigned char *buf, size_t len)
{
    const unsigned char *end = buf + len, *p = buf, *nl;
    counts c;
    size_t size = header(p, end, 4, &c);
    char foot[128];

    if (size == 0 || (size_t)(end - p) < 44 + size)
        return -1;
    if (buf[4] < '2')
        return fill(z, p + 44, &c, 4);
    p += 44 + size;
    if ((size = header(p, end, 8, &c)) == 0 ||
        (size_t)(end - p) < 44 + size || fill(z, p + 44, &c, 8) < 0)
        return -1;
    p += 44 + size;
    if (p < end && *p == '\n' &&
        (nl = memchr(p + 1, '\n', (size_t)(end - p - 1))) != NULL &&
        nl - p - 1 > 0 && nl - p - 1 < (long)sizeof foot) {
        memcpy(foot, p + 1, (size_t)(nl - p - 1));
        foot[nl - p - 1] = '\0';
        z->has_rule = parse_rule(foot, &z->rule) == 0;
    }
    return 0;
}

static unsigned char *
slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    unsigned char *buf;

    if (f == NULL)
        return NULL;
    if ((buf = malloc(FILE_MAX)) != NULL)
        *len = fread(buf, 1, FILE_MAX, f);
    fclose(f);
    if (buf != NULL && (*len == 0 || *len == FILE_MAX)) {
        free(buf);
        return NULL;
    }
    return buf;
}

static int
name_ok(const char *name)
{
    return name != NULL && *name != '\0' && *name != '/' &&
           strstr(name, "..") == NULL && strlen(name) <= 200;
}

jr_tzfile *
jr_tzfile_open(const char *name)
{
    const char *dir = getenv("TZDIR");
    jr_tzfile *z;
    unsigned char *buf = NULL;
    char path[512];
    size_t len = 0;

    if ((z = calloc(1, sizeof *z)) == NULL)
        return NULL;
    if (name == NULL || strcmp(name, "UTC") == 0) {
        z->has_rule = parse_rule("UTC0", &z->rule) == 0;
        return z;
    }
    snprintf(path, sizeof path, "%s/%s", dir && *dir ? dir :
             "/usr/share/zoneinfo", name_ok(name) ? name : "");
    if (!name_ok(name) || (buf = slurp(path, &len)) == NULL ||
        parse(z, buf, len) < 0) {
        free(buf);
        jr_tzfile_free(z);
        return NULL;
    }
    free(buf);
    return z;
}

void
jr_tzfile_free(jr_tzfile *z)
{
    if (z == NULL)
        return;
    free(z->at);
    free(z->idx);
    free(z->type);
    free(z->chars);
    free(z);
}

long
jr_tzfile_offset(const jr_tzfile *z, int64_t t, char *abbr, size_t abbrsz)
{
    const char *name = "";
    long off = 0;
    int lo = 0, hi = z->n - 1, mid, ty = 0;

    if ((z->n == 0 || t >= z->at[z->n - 1]) && z->has_rule) {
        off = rule_offset(&z->rule, t, &name);
    } else {
        if (z->n > 0 && t >= z->at[0]) {
            while (lo < hi) {   /* the last transition at or before t */
                mid = lo + (hi - lo + 1) / 2;
                if (z->at[mid] <= t)
                    lo = mid;
                else
                    hi = mid - 1;
            }
            ty = z->idx[lo];
        }
        if (z->ntype > 0) {
            off = z->type[ty].off;
            name = z->chars + z->type[ty].abbr;
        }
    }
    if (abbr != NULL && abbrsz > 0)
        snprintf(abbr, abbrsz, "%s", name);
    return off;
}
