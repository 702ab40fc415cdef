/* test_tzfile.c - zone arithmetic without the environment: (1) tzfile.c's
 * offsets and abbreviations agree with glibc's localtime_r for every zone
 * of the system's tz database, at instants from 1900 to 2100 (the last
 * century through the footer's POSIX rule) and around each transition;
 * (2) cron's next fires computed on one thread while another reads TZ and
 * its local time: the environment is never written (the same TZ string,
 * the same environ) and that thread's local time never changes; with the
 * old setenv/tzset arithmetic both broke. Prints "N passed, N failed". */
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/cron.h"
#include "base/tzfile.h"
#include "check.h"

extern char **environ;

#define ZONEINFO "/usr/share/zoneinfo"

static int zones, mismatches;

/* glibc's offset and abbreviation of the zone TZ names at t. */
static long
libc_offset(int64_t t, char *abbr, size_t n)
{
    time_t tt = (time_t)t;
    struct tm tm;

    if (localtime_r(&tt, &tm) == NULL)
        return -99999;
    snprintf(abbr, n, "%s", tm.tm_zone ? tm.tm_zone : "");
    return tm.tm_gmtoff;
}

static void
compare_at(const char *name, const jr_tzfile *z, int64_t t)
{
    char a[32], b[32];
    long mine = jr_tzfile_offset(z, t, a, sizeof a);
    long libc = libc_offset(t, b, sizeof b);

    if (mine == libc && strcmp(a, b) == 0)
        return;
    if (mismatches++ < 10)
        fprintf(stderr, "%s at %lld: ours %ld %s, glibc %ld %s\n", name,
                (long long)t, mine, a, libc, b);
    failed = 1;
}

/* One zone against glibc: every 5 days from 1900 to 2100, and a second
 * before, at and after each change of offset glibc shows. */
static void
compare_zone(const char *name)
{
    jr_tzfile *z = jr_tzfile_open(name);
    int64_t t, from = -2208988800LL, to = 4102444800LL;
    char a[32];

    if (z == NULL)
        return;                 /* not a TZif file (zone.tab...) */
    zones++;
    setenv("TZ", name, 1);
    tzset();
    for (t = from; t < to; t += 5 * 86400 + 3607) {
        long o1 = libc_offset(t, a, sizeof a);
        long o2 = libc_offset(t + 5 * 86400 + 3607, a, sizeof a);
        compare_at(name, z, t);
        if (o1 != o2) {         /* a change in between: find it */
            int64_t lo = t, hi = t + 5 * 86400 + 3607;
            while (hi - lo > 1) {
                int64_t mid = lo + (hi - lo) / 2;
                if (libc_offset(mid, a, sizeof a) == o1)
                    lo = mid;
                else
                    hi = mid;
            }
            compare_at(name, z, lo);
            compare_at(name, z, hi);
            compare_at(name, z, hi + 1);
        }
    }
    jr_tzfile_free(z);
}

static void
walk(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[1024], name[512];
    struct stat st;

    if (d == NULL)
        return;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || strcmp(e->d_name, "posix") == 0 ||
            strcmp(e->d_name, "right") == 0 ||
            strcmp(e->d_name, "posixrules") == 0 ||
            strcmp(e->d_name, "localtime") == 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        snprintf(name, sizeof name, "%s%s", prefix, e->d_name);
        if (stat(path, &st) < 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            char sub[520];
            snprintf(sub, sizeof sub, "%s/", name);
            walk(path, sub);
        } else if (S_ISREG(st.st_mode)) {
            compare_zone(name);
        }
    }
    closedir(d);
}

static void
test_all_zones_agree_with_glibc(void)
{
    walk(ZONEINFO, "");
    unsetenv("TZ");
    tzset();
    fprintf(stderr, "%d zones compared, %d mismatches\n", zones, mismatches);
    CHECK(zones > 300);
}

static void
test_rules_and_names(void)
{
    jr_tzfile *z;
    char a[16];

    CHECK(jr_tzfile_open("Mars/Olympus") == NULL);
    CHECK(jr_tzfile_open("../../etc/passwd") == NULL);
    CHECK(jr_tzfile_open("zone.tab") == NULL);
    CHECK((z = jr_tzfile_open("UTC")) != NULL);
    CHECK(z && jr_tzfile_offset(z, 0, a, sizeof a) == 0 &&
          strcmp(a, "UTC") == 0);
    jr_tzfile_free(z);
    /* far past the file's transitions: the footer's rule */
    CHECK((z = jr_tzfile_open("Europe/Paris")) != NULL);
    CHECK(z && jr_tzfile_offset(z, 7258118400LL, a, sizeof a) == 3600);
    CHECK(z && jr_tzfile_offset(z, 7258118400LL + 200 * 86400, a,
                                sizeof a) == 7200 && strcmp(a, "CEST") == 0);
    jr_tzfile_free(z);
}

/* ---- threads ---- */

static volatile int stop;

static void *
cron_loop(void *arg)
{
    static const char *const zones_used[] = {"Europe/Paris",
        "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata", "UTC"};
    jr_cron c;
    jr_err err;
    double next, t = 1767225600;        /* 2026-01-01 */
    int i = 0;

    (void)arg;
    jr_cron_parse("30 2 * * *", &c, NULL, &err);
    while (!stop) {
        jr_cron_next(&c, zones_used[i++ % 5], t, &next);
        jr_cron_offset(zones_used[i % 5], t, NULL, 0);
        t += 3607;
    }
    return NULL;
}

/* While another thread computes fires in five zones, this one's TZ stays
 * the very same string in the very same environment, and its local time
 * (Asia/Tokyo, no DST) the same offset. */
static void
test_threads_see_no_environment_change(void)
{
    char **env0, *tz0, a[32];
    pthread_t th;
    int i, changed = 0, moved = 0;

    setenv("TZ", "Asia/Tokyo", 1);
    tzset();
    env0 = environ;
    tz0 = getenv("TZ");
    pthread_create(&th, NULL, cron_loop, NULL);
    for (i = 0; i < 200000; i++) {
        const char *tz = getenv("TZ");
        changed += environ != env0 || tz != tz0 ||
                   strcmp(tz ? tz : "", "Asia/Tokyo") != 0;
        if (i % 100 == 0) {
            tzset();
            moved += libc_offset(1767225600 + i, a, sizeof a) != 32400;
        }
    }
    stop = 1;
    pthread_join(th, NULL);
    fprintf(stderr, "environment changes seen: %d, local time moved: %d\n",
            changed, moved);
    CHECK(changed == 0);
    CHECK(moved == 0);
    unsetenv("TZ");
}

int
main(void)
{
    static void (*const tests[])(void) = {test_rules_and_names,
        test_all_zones_agree_with_glibc,
        test_threads_see_no_environment_change};
    int pass = 0, fail = 0;
    size_t i;

    for (i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        failed = 0;
        tests[i]();
        failed ? fail++ : pass++;
    }
    printf("%d passed, %d failed\n", pass, fail);
    return fail > 0;
}
