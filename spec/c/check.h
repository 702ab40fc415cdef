/* check.h - the assertions every C test uses. CHECK(cond) and
 * CHECK_OK(call, err) print file:line (and check_where, e.g. the engine,
 * when set) and mark the current test failed; the test goes on. main
 * clears `failed` before each test and counts (check_report). */
#ifndef JR_SPEC_CHECK_H
#define JR_SPEC_CHECK_H

#include <stdio.h>

static int failed;              /* the current test failed */
static const char *check_where = "";

#define CHECK(c) do {                                                    \
        if (!(c)) {                                                      \
            fprintf(stderr, "%s:%d: %s%scheck failed: %s\n", __FILE__,   \
                    __LINE__, check_where, *check_where ? ": " : "", #c);\
            failed = 1;                                                  \
        }                                                                \
    } while (0)
#define CHECK_OK(c, e) do {                                              \
        if ((c) < 0) {                                                   \
            fprintf(stderr, "%s:%d: %s%s%s failed: %s\n", __FILE__,      \
                    __LINE__, check_where, *check_where ? ": " : "", #c, \
                    (e).msg);                                            \
            failed = 1;                                                  \
        }                                                                \
    } while (0)

/* Counts test name's outcome (failed when rc < 0 or a CHECK failed in
 * it), prints it and clears `failed` for the next; with name NULL prints
 * the totals and returns 1 when any test failed, else 0 (main's exit). */
static inline int
check_report(const char *name, int rc)
{
    static int passed, nfailed;

    if (name == NULL) {
        printf("%d passed, %d failed\n", passed, nfailed);
        return nfailed != 0;
    }
    if (rc < 0)
        failed = 1;
    printf("%s %s\n", failed ? "FAIL" : "ok  ", name);
    failed ? nfailed++ : passed++;
    failed = 0;
    return 0;
}

#endif
