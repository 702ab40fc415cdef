/* check.h - the assertions every C test uses. CHECK(cond) and
 * CHECK_OK(call, err) print file:line (and check_where, e.g. the engine,
 * when set) and mark the current test failed; the test goes on. main
 * clears `failed` before each test and counts. */
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

#endif
