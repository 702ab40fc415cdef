/* agestats.c - the aging queues in `jobrunner stats` (docs/queues.md,
 * "Priority aging"): per queue of the config with priority_aging, its
 * period, its ready jobs and how many have each effective priority, the
 * JR_AGING_TOP lowest (next to run) first. Uses commands.h, backend.h. */
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "cli/commands.h"
#include "base/esc.h"
#include "base/limit.h"
#include "base/util.h"

#define JR_AGING_TOP 10         /* effective priorities listed a queue */

typedef struct level {
    long long eff;
    long      jobs;
    int       lowest;
} level;

typedef struct levels {
    level v[JR_AGING_TOP];
    int   n;
} levels;

static int
is_aging(const jr_limit *l)
{
    return l->aging > 0 && strncmp(l->scope, JR_LIMIT_QPREFIX, 6) == 0;
}

static int
add_level(long long eff, long jobs, int lowest, void *arg)
{
    levels *t = arg;

    if (t->n == JR_AGING_TOP)
        return 1;
    t->v[t->n].eff = eff;
    t->v[t->n].jobs = jobs;
    t->v[t->n].lowest = lowest;
    t->n++;
    return 0;
}

static void
print_levels(const char *queue, double every, const levels *t, int json,
             int first)
{
    char q[300];
    int i;

    if (json) {
        printf("%s", first ? "" : ",");
        jr_json_str(stdout, queue);
        printf(":{\"every\":%g,\"levels\":[", every);
        for (i = 0; i < t->n; i++)
            printf("%s{\"effective_priority\":%lld,\"jobs\":%ld,"
                   "\"lowest_priority\":%d}", i ? "," : "", t->v[i].eff,
                   t->v[i].jobs, t->v[i].lowest);
        printf("]}");
        return;
    }
    printf("aging queue %s: a level every %gs waited%s\n",
           jr_esc_str(q, sizeof q, queue), every,
           t->n == 0 ? ", no job ready" : "");
    for (i = 0; i < t->n; i++)
        printf("  effective priority %-6lld ready %-7ld lowest stored "
               "priority %d\n", t->v[i].eff, t->v[i].jobs, t->v[i].lowest);
}

int
jr_cmd_stats_aging(const jr_config *c, int json)
{
    jr_db db = {0};
    levels t;
    jr_err err;
    int i, first = 1, rc = 0;

    for (i = 0; i < c->limits.n && !is_aging(&c->limits.l[i]); i++)
        ;
    if (i == c->limits.n) {
        if (json)
            printf(",\"aging\":{}");
        return 0;
    }
    if ((rc = jr_cmd_open_reader(c, &db, 0)) != 0)
        return rc;
    if (json)
        printf(",\"aging\":{");
    for (i = 0; i < c->limits.n && rc == 0; i++) {
        const jr_limit *l = &c->limits.l[i];
        if (!is_aging(l))
            continue;
        t.n = 0;
        if (db.ops->aging_use(db.b, l->scope + 6, l->aging, JR_AGING_TOP,
                              add_level, &t, &err) < 0) {
            rc = jr_cmd_die(JR_EXIT_FAIL, err.msg);
            break;
        }
        print_levels(l->scope + 6, l->aging, &t, json, first);
        first = 0;
    }
    if (json)
        printf("}");
    jr_db_close(&db);
    return rc;
}
