/* apidbaging.c - aging queues in the HTTP API (docs/queues.md, "Priority
 * aging"): each queue with priority_aging, its period and its ready jobs
 * by effective priority (the next to run first, at most JR_AGING_TOP), in
 * GET /api/stats ("aging"), as `stats --json` has them. On the database
 * thread. Uses apidb.h. */
#include <stdio.h>
#include <string.h>

#include "http/apidb.h"
#include "base/limit.h"

#define JR_AGING_TOP 10         /* as runtime/cli/agestats.c */

typedef struct lv {
    jr_buf *b;
    int     n;
} lv;

static int
level(long long eff, long jobs, int lowest, void *arg)
{
    lv *v = arg;

    jr_api_printf(v->b, "%s{\"effective_priority\":%lld,\"jobs\":%ld,"
                  "\"lowest_priority\":%d}", v->n++ ? "," : "", eff, jobs,
                  lowest);
    return 0;
}

int
jr_apidb_aging_json(jr_db *db, jr_buf *b, const jr_limit *l, int n,
                    jr_err *e)
{
    int i, first = 1;
    lv v;

    jr_buf_put(b, "\"aging\":{", 9);
    for (i = 0; i < n; i++) {
        if (!(l[i].aging > 0) ||
            strncmp(l[i].scope, JR_LIMIT_QPREFIX, 6) != 0)
            continue;
        if (!first)
            jr_buf_put(b, ",", 1);
        first = 0;
        jr_api_str(b, l[i].scope + 6);
        jr_api_printf(b, ":{\"every\":%g,\"levels\":[", l[i].aging);
        v.b = b;
        v.n = 0;
        if (db->ops->aging_use(db->b, l[i].scope + 6, l[i].aging,
                               JR_AGING_TOP, level, &v, e) < 0)
            return -1;
        jr_buf_put(b, "]}", 2);
    }
    jr_buf_put(b, "}", 1);
    return 0;
}
