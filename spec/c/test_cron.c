/* test_cron.c - cron expressions and next-fire times, table-driven: each
 * row is an expression, a zone, an instant and the next fire expected
 * (UTC), DST changes of Europe/Paris, America/New_York and the 30-minute
 * zones Australia/Adelaide and Australia/Lord_Howe included (the rule:
 * a skipped wall time fires once at the change, a repeated one once at
 * its first occurrence). Then parse errors naming the field, zones and
 * intervals. Prints "N passed, N failed". */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/cron.h"
#include "base/util.h"
#include "check.h"

typedef struct next_case {
    const char *expr;           /* "every N" for an interval */
    const char *tz;
    const char *after;          /* UTC */
    const char *want;           /* UTC; NULL: never fires */
} next_case;

static const next_case next_cases[] = {
    /* plain fields in UTC */
    {"* * * * *", "UTC", "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z"},
    {"* * * * *", "UTC", "2026-01-01T00:00:30Z", "2026-01-01T00:01:00Z"},
    {"0 * * * *", "UTC", "2026-01-01T00:00:00Z", "2026-01-01T01:00:00Z"},
    {"30 6 * * *", "UTC", "2026-01-01T07:00:00Z", "2026-01-02T06:30:00Z"},
    {"0 0 1 1 *", "UTC", "2026-06-01T00:00:00Z", "2027-01-01T00:00:00Z"},
    {"@yearly", "UTC", "2026-06-01T00:00:00Z", "2027-01-01T00:00:00Z"},
    {"@annually", "UTC", "2026-12-31T23:59:59Z", "2027-01-01T00:00:00Z"},
    {"@monthly", "UTC", "2026-01-31T12:00:00Z", "2026-02-01T00:00:00Z"},
    {"@weekly", "UTC", "2026-01-01T00:00:00Z", "2026-01-04T00:00:00Z"},
    {"@daily", "UTC", "2026-02-28T23:59:59Z", "2026-03-01T00:00:00Z"},
    {"@midnight", "UTC", "2026-02-28T00:00:00Z", "2026-03-01T00:00:00Z"},
    {"@hourly", "UTC", "2026-01-01T23:30:00Z", "2026-01-02T00:00:00Z"},
    {"0 0 29 2 *", "UTC", "2026-01-01T00:00:00Z", "2028-02-29T00:00:00Z"},
    {"*/15 * * * *", "UTC", "2026-01-01T00:14:59Z", "2026-01-01T00:15:00Z"},
    {"*/15 * * * *", "UTC", "2026-01-01T00:45:00Z", "2026-01-01T01:00:00Z"},
    {"5-10/2 * * * *", "UTC", "2026-01-01T00:06:00Z", "2026-01-01T00:07:00Z"},
    {"5-10/2 * * * *", "UTC", "2026-01-01T00:09:00Z", "2026-01-01T01:05:00Z"},
    {"1/20 * * * *", "UTC", "2026-01-01T00:21:00Z", "2026-01-01T00:41:00Z"},
    {"0 9-17 * * mon-fri", "UTC", "2026-01-02T17:30:00Z",
     "2026-01-05T09:00:00Z"},
    {"0 6 * * 1-5", "UTC", "2026-01-03T00:00:00Z", "2026-01-05T06:00:00Z"},
    {"0 0 * * 7", "UTC", "2026-01-01T00:00:00Z", "2026-01-04T00:00:00Z"},
    {"0 0 * * 6-7", "UTC", "2026-01-03T00:00:00Z", "2026-01-04T00:00:00Z"},
    {"0 0 1,15 * *", "UTC", "2026-01-02T00:00:00Z", "2026-01-15T00:00:00Z"},
    /* Vixie cron: both days restricted means either matches */
    {"0 0 13 * 5", "UTC", "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"},
    {"0 0 13 * 5", "UTC", "2026-01-10T00:00:00Z", "2026-01-13T00:00:00Z"},
    /* ... but a field starting with '*' means both must match */
    {"0 0 */2 * 5", "UTC", "2026-01-01T00:00:00Z", "2026-01-09T00:00:00Z"},
    {"0 0 * jan,jul *", "UTC", "2026-02-01T00:00:00Z", "2026-07-01T00:00:00Z"},
    {"0 12 * JUN sun", "UTC", "2026-01-01T00:00:00Z", "2026-06-07T12:00:00Z"},
    {"59 23 31 12 *", "UTC", "2026-12-31T23:59:00Z", "2027-12-31T23:59:00Z"},
    {"0 0 31 * *", "UTC", "2026-01-31T00:00:00Z", "2026-03-31T00:00:00Z"},
    {"0 0 1 */3 *", "UTC", "2026-02-01T00:00:00Z", "2026-04-01T00:00:00Z"},
    {"0 0 30 2 *", "UTC", "2026-01-01T00:00:00Z", NULL},
    {"0 0 31 4,6,9,11 *", "UTC", "2026-01-01T00:00:00Z", NULL},
    /* fixed intervals: multiples from the epoch, whatever the zone */
    {"every 1", "UTC", "@100.5", "@101"},
    {"every 900", "UTC", "2026-01-01T00:07:00Z", "2026-01-01T00:15:00Z"},
    {"every 900", "UTC", "2026-01-01T00:15:00Z", "2026-01-01T00:30:00Z"},
    {"every 86400", "Europe/Paris", "2026-03-29T00:00:00Z",
     "2026-03-30T00:00:00Z"},
    /* zones away from their changes */
    {"0 6 * * *", "Europe/Paris", "2026-01-15T00:00:00Z",
     "2026-01-15T05:00:00Z"},
    {"0 6 * * *", "Europe/Paris", "2026-07-15T00:00:00Z",
     "2026-07-15T04:00:00Z"},
    {"0 6 * * 1-5", "Europe/Paris", "2026-01-02T05:00:00Z",
     "2026-01-05T05:00:00Z"},
    {"0 0 * * *", "Asia/Kolkata", "2026-01-01T00:00:00Z",
     "2026-01-01T18:30:00Z"},
    {"0 0 * * *", "Asia/Kathmandu", "2026-01-01T00:00:00Z",
     "2026-01-01T18:15:00Z"},
    {"0 0 * * *", "Australia/Adelaide", "2026-01-01T00:00:00Z",
     "2026-01-01T13:30:00Z"},
    {"0 9 * * *", "America/New_York", "2026-01-10T00:00:00Z",
     "2026-01-10T14:00:00Z"},
    {"0 9 * * *", "America/New_York", "2026-07-10T00:00:00Z",
     "2026-07-10T13:00:00Z"},
    /* Europe/Paris, 2026-03-29: 02:00-02:59 does not exist */
    {"30 2 * * *", "Europe/Paris", "2026-03-28T12:00:00Z",
     "2026-03-29T01:00:00Z"},
    {"30 2 * * *", "Europe/Paris", "2026-03-29T01:00:00Z",
     "2026-03-30T00:30:00Z"},
    {"0 3 * * *", "Europe/Paris", "2026-03-28T12:00:00Z",
     "2026-03-29T01:00:00Z"},
    {"*/30 * * * *", "Europe/Paris", "2026-03-29T00:45:00Z",
     "2026-03-29T01:00:00Z"},
    {"*/30 * * * *", "Europe/Paris", "2026-03-29T01:00:00Z",
     "2026-03-29T01:30:00Z"},
    {"0 1 * * *", "Europe/Paris", "2026-03-28T12:00:00Z",
     "2026-03-29T00:00:00Z"},
    /* Europe/Paris, 2026-10-25: 02:00-02:59 comes twice */
    {"30 2 * * *", "Europe/Paris", "2026-10-24T12:00:00Z",
     "2026-10-25T00:30:00Z"},
    {"30 2 * * *", "Europe/Paris", "2026-10-25T00:30:00Z",
     "2026-10-26T01:30:00Z"},
    {"*/30 * * * *", "Europe/Paris", "2026-10-25T00:30:00Z",
     "2026-10-25T02:00:00Z"},
    {"0 * * * *", "Europe/Paris", "2026-10-25T00:00:00Z",
     "2026-10-25T02:00:00Z"},
    {"0 3 * * *", "Europe/Paris", "2026-10-24T12:00:00Z",
     "2026-10-25T02:00:00Z"},
    /* America/New_York, 2026-03-08: 02:00-02:59 does not exist */
    {"30 2 * * *", "America/New_York", "2026-03-07T12:00:00Z",
     "2026-03-08T07:00:00Z"},
    {"30 2 * * *", "America/New_York", "2026-03-08T07:00:00Z",
     "2026-03-09T06:30:00Z"},
    {"0 2 * * *", "America/New_York", "2026-03-07T12:00:00Z",
     "2026-03-08T07:00:00Z"},
    {"59 1 * * *", "America/New_York", "2026-03-07T12:00:00Z",
     "2026-03-08T06:59:00Z"},
    /* America/New_York, 2026-11-01: 01:00-01:59 comes twice */
    {"30 1 * * *", "America/New_York", "2026-10-31T12:00:00Z",
     "2026-11-01T05:30:00Z"},
    {"30 1 * * *", "America/New_York", "2026-11-01T05:30:00Z",
     "2026-11-02T06:30:00Z"},
    {"*/20 * * * *", "America/New_York", "2026-11-01T05:40:00Z",
     "2026-11-01T07:00:00Z"},
    {"30 1 * * *", "America/New_York", "2026-11-01T06:10:00Z",
     "2026-11-02T06:30:00Z"},
    /* Australia/Adelaide (+09:30/+10:30) */
    {"30 2 * * *", "Australia/Adelaide", "2026-10-03T00:00:00Z",
     "2026-10-03T16:30:00Z"},
    {"30 2 * * *", "Australia/Adelaide", "2026-10-03T16:30:00Z",
     "2026-10-04T16:00:00Z"},
    {"30 2 * * *", "Australia/Adelaide", "2026-04-04T00:00:00Z",
     "2026-04-04T16:00:00Z"},
    {"30 2 * * *", "Australia/Adelaide", "2026-04-04T16:00:00Z",
     "2026-04-05T17:00:00Z"},
    /* Australia/Lord_Howe: a 30-minute DST shift (+10:30/+11) */
    {"15 2 * * *", "Australia/Lord_Howe", "2026-10-03T00:00:00Z",
     "2026-10-03T15:30:00Z"},
    {"45 2 * * *", "Australia/Lord_Howe", "2026-10-03T00:00:00Z",
     "2026-10-03T15:45:00Z"},
    {"45 1 * * *", "Australia/Lord_Howe", "2026-04-04T00:00:00Z",
     "2026-04-04T14:45:00Z"},
    {"45 1 * * *", "Australia/Lord_Howe", "2026-04-04T14:45:00Z",
     "2026-04-05T15:15:00Z"},
};

typedef struct bad_case {
    const char *expr;
    const char *field;          /* the field the error names */
    const char *text;           /* a part of the message */
} bad_case;

static const bad_case bad_cases[] = {
    {"61 * * * *", "minute", "field 'minute' (1st): 61 is out of range 0-59"},
    {"* * *", "expression", "expected 5 fields"},
    {"0 6 * * 8", "day-of-week", "field 'day-of-week' (5th): 8 is out of "
     "range 0-7"},
    {"* 24 * * *", "hour", "field 'hour' (2nd)"},
    {"* * 0 * *", "day-of-month", "0 is out of range 1-31"},
    {"* * * 13 *", "month", "13 is out of range 1-12"},
    {"*/0 * * * *", "minute", "bad step"},
    {"5-1 * * * *", "minute", "backwards"},
    {"a * * * *", "minute", "'a' is not a number"},
    {"* * * foo *", "month", "'foo' is not a number"},
    {"1,,2 * * * *", "minute", "empty list item"},
    {"@every", "expression", "unknown macro"},
    {"* * * * * *", "expression", "more than 5"},
    {"", "expression", "got 0"},
    {"1-2-3 * * * *", "minute", "not a number, range or step"},
};

static double
at(const char *s)
{
    double t = 0;
    jr_err err;

    if (jr_parse_time(s, "time", &t, &err) < 0) {
        fprintf(stderr, "bad time in the table: %s\n", s);
        failed = 1;
    }
    return t;
}

static void
run_next_case(const next_case *c)
{
    char got[40], want[40];
    jr_cron cr;
    jr_err err;
    double next = 0;
    int rc;

    if (strncmp(c->expr, "every ", 6) == 0)
        CHECK_OK(jr_cron_every(atof(c->expr + 6), &cr, &err), err);
    else
        CHECK_OK(jr_cron_parse(c->expr, &cr, NULL, &err), err);
    rc = jr_cron_next(&cr, c->tz, at(c->after), &next);
    if (c->want == NULL) {
        CHECK(rc < 0);
        return;
    }
    CHECK(rc == 0);
    jr_time_iso(next, got, sizeof got);
    jr_time_iso(at(c->want), want, sizeof want);
    if (strcmp(got, want) != 0) {
        fprintf(stderr, "'%s' in %s after %s: got %s, want %s\n", c->expr,
                c->tz, c->after, got, want);
        failed = 1;
    }
}

static void
run_bad_case(const bad_case *c)
{
    const char *field = NULL;
    jr_cron cr;
    jr_err err = {0};

    CHECK(jr_cron_parse(c->expr, &cr, &field, &err) < 0);
    CHECK(err.code == JR_EINPUT);
    CHECK(field != NULL && strcmp(field, c->field) == 0);
    if (strstr(err.msg, c->text) == NULL) {
        fprintf(stderr, "'%s': message '%s' lacks '%s'\n", c->expr, err.msg,
                c->text);
        failed = 1;
    }
}

static void
test_good_expressions_parse(void)
{
    static const char *const good[] = {"0 0 * * SUN", "0 0 1 JAN *",
        "0,30 8-18/2 1-7 * 1-5", "*/5 * * * *", "0 0 * * 0,7"};
    jr_cron cr;
    jr_err err;
    size_t i;

    for (i = 0; i < sizeof good / sizeof good[0]; i++)
        CHECK_OK(jr_cron_parse(good[i], &cr, NULL, &err), err);
}

static void
test_zones(void)
{
    char abbr[16];

    CHECK(jr_cron_zone_ok("UTC"));
    CHECK(jr_cron_zone_ok("Europe/Paris"));
    CHECK(jr_cron_zone_ok("Australia/Lord_Howe"));
    CHECK(!jr_cron_zone_ok("Mars/Olympus"));
    CHECK(!jr_cron_zone_ok("../../etc/passwd"));
    CHECK(!jr_cron_zone_ok("/etc/localtime"));
    CHECK(!jr_cron_zone_ok(""));
    CHECK(jr_cron_offset("Europe/Paris", at("2026-07-01T00:00:00Z"), abbr,
                         sizeof abbr) == 7200);
    CHECK(strcmp(abbr, "CEST") == 0);
    CHECK(jr_cron_offset("Asia/Kolkata", 0, NULL, 0) == 19800);
}

static void
test_intervals(void)
{
    jr_cron cr;
    jr_err err;

    CHECK(jr_cron_every(0, &cr, &err) < 0);
    CHECK(jr_cron_every(0.5, &cr, &err) < 0);
    CHECK(jr_cron_every(1.5, &cr, &err) < 0);
    CHECK(jr_cron_every(JR_EVERY_MAX + 1, &cr, &err) < 0);
    CHECK_OK(jr_cron_every(1, &cr, &err), err);
}

/* TZ is what it was after each call. */
static void
test_tz_restored(void)
{
    jr_cron cr;
    jr_err err;
    double next;

    setenv("TZ", "America/New_York", 1);
    CHECK_OK(jr_cron_parse("0 6 * * *", &cr, NULL, &err), err);
    CHECK(jr_cron_next(&cr, "Europe/Paris", 0, &next) == 0);
    CHECK(getenv("TZ") != NULL &&
          strcmp(getenv("TZ"), "America/New_York") == 0);
    unsetenv("TZ");
    CHECK(jr_cron_next(&cr, "Europe/Paris", 0, &next) == 0);
    CHECK(getenv("TZ") == NULL);
}

/* The instants the cases above print, and the ones no date shows: a
 * PostgreSQL infinity, a year past 9999 (a plain INSERT's run_at). */
static void
test_time_iso_edges(void)
{
    char b[400];

    CHECK(strcmp(jr_time_iso(1796077169.783, b, sizeof b),
                 "2026-11-30T22:19:29.783Z") == 0);
    CHECK(strcmp(jr_time_iso(0, b, sizeof b), "1970-01-01T00:00:00.000Z") == 0);
    CHECK(strcmp(jr_time_iso(253402300799.0, b, sizeof b),
                 "9999-12-31T23:59:59.000Z") == 0);
    CHECK(strcmp(jr_time_iso(INFINITY, b, sizeof b), "infinity") == 0);
    CHECK(strcmp(jr_time_iso(-INFINITY, b, sizeof b), "-infinity") == 0);
    CHECK(strcmp(jr_time_iso(1515646080000.0, b, sizeof b),
                 "@1515646080000") == 0);
    jr_time_iso(-1e300, b, sizeof b);
    CHECK(b[0] == '@' && b[1] == '-');
}

int
main(void)
{
    int pass = 0, fail = 0;
    size_t i;

    for (i = 0; i < sizeof next_cases / sizeof next_cases[0]; i++) {
        failed = 0;
        run_next_case(&next_cases[i]);
        failed ? fail++ : pass++;
    }
    for (i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        failed = 0;
        run_bad_case(&bad_cases[i]);
        failed ? fail++ : pass++;
    }
    {
        static void (*const tests[])(void) = {test_good_expressions_parse,
            test_zones, test_intervals, test_tz_restored,
            test_time_iso_edges};
        for (i = 0; i < sizeof tests / sizeof tests[0]; i++) {
            failed = 0;
            tests[i]();
            failed ? fail++ : pass++;
        }
    }
    printf("%d passed, %d failed\n", pass, fail);
    return fail > 0;
}
