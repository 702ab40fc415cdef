/* test_metrics.c - the dashboard's throughput by minute over the last
 * hour: a job counts in its minute, and after an hour or more with no
 * job every minute is empty again. The wall clock is this file's own
 * (clock_gettime below stands in for the C library's), so an hour passes
 * at once. Prints "N passed, N failed". */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/job.h"
#include "services/metrics.h"
#include "check.h"

static double fake_now = 1800000000.0;  /* epoch seconds, on a minute */

int
clock_gettime(clockid_t id, struct timespec *ts)
{
    if (id != CLOCK_REALTIME)
        return (int)syscall(SYS_clock_gettime, id, ts);
    ts->tv_sec = (time_t)fake_now;
    ts->tv_nsec = (long)((fake_now - (double)ts->tv_sec) * 1e9);
    return 0;
}

/* The sum of "done" over the minutes of x's throughput. */
static long
done_in_hour(jr_metrics *x)
{
    jr_buf b = {0};
    const char *p;
    long sum = 0;

    jr_metrics_throughput(x, &b);
    jr_buf_put(&b, "", 1);
    for (p = b.p; (p = strstr(p, "\"done\":")) != NULL; p += 7)
        sum += atol(p + 7);
    jr_buf_free(&b);
    return sum;
}

static void
finish_one(jr_metrics *x)
{
    jr_job j = {.id = 1, .name = "a", .queue = "default"};
    jr_result r = {.id = 1, .kind = JR_DONE};

    jr_metrics_job(x, &j, &r, 0.01);
}

static void
test_counts_in_its_minute(void)
{
    jr_metrics *x = jr_metrics_new();

    finish_one(x);
    fake_now += 60;
    finish_one(x);
    CHECK(done_in_hour(x) == 2);
    fake_now += 59 * 60;        /* the first one is an hour old now */
    CHECK(done_in_hour(x) == 1);
    jr_metrics_free(x);
}

/* A busy hour (a job every minute), then k minutes with none. */
static void
test_empty_after_an_idle_hour(void)
{
    int k, i;

    for (k = 60; k <= 180; k++) {
        jr_metrics *x = jr_metrics_new();
        for (i = 0; i < 60; i++) {
            finish_one(x);
            fake_now += 60;
        }
        CHECK(done_in_hour(x) == 59);
        fake_now += (k - 1) * 60;
        if (done_in_hour(x) != 0) {
            fprintf(stderr, "after %d minutes idle: %ld jobs shown\n", k,
                    done_in_hour(x));
            failed = 1;
        }
        finish_one(x);
        CHECK(done_in_hour(x) == 1);
        jr_metrics_free(x);
    }
}

int
main(void)
{
    static const struct {
        const char *name;
        void      (*fn)(void);
    } tests[] = {
        {"counts_in_its_minute", test_counts_in_its_minute},
        {"empty_after_an_idle_hour", test_empty_after_an_idle_hour},
    };
    int passed = 0, nfailed = 0;
    size_t i;

    for (i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        failed = 0;
        tests[i].fn();
        if (failed) {
            fprintf(stderr, "FAIL %s\n", tests[i].name);
            nfailed++;
        } else {
            passed++;
        }
    }
    printf("%d passed, %d failed\n", passed, nfailed);
    return nfailed > 0;
}
