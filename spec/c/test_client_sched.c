/* test_client_sched.c - the producer library's schedules managed at run
 * time (jobrunner.h): add, set, remove and backfill through the public
 * API only, against SQLite (a temp file) and, when a URL is given,
 * PostgreSQL (a schema of its own, dropped after). Usage:
 * test_client_sched [POSTGRES_URL]; spec/run passes the throwaway
 * cluster's. Prints "N passed, N failed". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engines.h"
#include "client/jobrunner.h"

static jr_client *
open_client(void)
{
    jr_client_config cfg = {.schema = schema[0] ? schema : NULL};
    jr_client *c;

    if (jr_client_open(&c, url, &cfg) != JR_CLIENT_OK) {
        fprintf(stderr, "%s: open: %s\n", engine, jr_client_errmsg(c));
        exit(2);
    }
    return c;
}

/* add, a second add refused, set, a bad set refused (naming the field),
 * remove, a second remove not found */
static void
test_add_set_remove(void)
{
    jr_client *c = open_client();

    CHECK(jr_client_schedule_add(c, "c.rt", "{\"every\": \"1h\", \"job\": "
                                 "\"c.job\", \"overlap\": \"skip\"}") ==
          JR_CLIENT_OK);
    CHECK(jr_client_schedule_add(c, "c.rt", "{\"every\": \"1h\"}") ==
          JR_CLIENT_EINPUT);
    CHECK(strstr(jr_client_errmsg(c), "schedule 'c.rt' exists") != NULL);
    CHECK(jr_client_schedule_set(c, "c.rt", "{\"jitter\": \"10s\"}") ==
          JR_CLIENT_OK);
    CHECK(jr_client_schedule_set(c, "c.rt", "{\"cron\": \"99 * * * *\"}") ==
          JR_CLIENT_EINPUT);
    CHECK(strstr(jr_client_errmsg(c), "'cron' is invalid") != NULL);
    CHECK(jr_client_schedule_set(c, "c.none", "{\"every\": \"1h\"}") ==
          JR_CLIENT_ENOTFOUND);
    CHECK(jr_client_schedule_add(c, "bad name", "{\"every\": \"1h\"}") ==
          JR_CLIENT_EINPUT);
    CHECK(jr_client_schedule_add(c, "c.x", "[1, 2]") == JR_CLIENT_EINPUT);
    CHECK(jr_client_schedule_add(c, "c.x", NULL) == JR_CLIENT_EUSAGE);
    CHECK(jr_client_schedule_remove(c, "c.rt") == JR_CLIENT_OK);
    CHECK(jr_client_schedule_remove(c, "c.rt") == JR_CLIENT_ENOTFOUND);
    jr_client_close(c);
}

/* backfill of a window: its instants once, a second call nothing */
static void
test_backfill(void)
{
    jr_client *c = open_client();
    double to = floor((double)time(NULL) / 60) * 60 - 60;
    long n = -1;

    CHECK(jr_client_schedule_add(c, "c.bf", "{\"every\": \"1m\"}") ==
          JR_CLIENT_OK);
    CHECK(jr_client_schedule_backfill(c, "c.bf", to - 240, to, &n) ==
          JR_CLIENT_OK);
    CHECK(n == 5);
    CHECK(jr_client_schedule_backfill(c, "c.bf", to - 240, to, &n) ==
          JR_CLIENT_OK);
    CHECK(n == 0);
    CHECK(jr_client_schedule_backfill(c, "c.bf", to, to + 86400, &n) ==
          JR_CLIENT_EINPUT);
    CHECK(jr_client_schedule_backfill(c, "c.none", to - 60, to, &n) ==
          JR_CLIENT_ENOTFOUND);
    jr_client_close(c);
}

static const check_test tests[] = {
    {"schedule add, set, remove", test_add_set_remove},
    {"schedule backfill", test_backfill},
};

int
main(int argc, char **argv)
{
    return check_engines(argc, argv, tests, sizeof tests / sizeof tests[0],
                         "jrclisched");
}
