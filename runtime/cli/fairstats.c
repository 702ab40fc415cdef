/* fairstats.c - the fair queues in `jobrunner stats` (docs/queues.md,
 * "Fair share"): per fair queue of the config, and per job name with
 * fair weights of its own ("A name's own weights"), how many keys have
 * ready jobs and the JR_FAIR_TOP with most, each with its jobs ready and
 * running, its weight and its share of the starts. Uses commands.h,
 * backend.h, fairpick.h. */
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "cli/commands.h"
#include "base/esc.h"
#include "base/util.h"
#include "fairpick.h"

static int
is_fair(const jr_limit *l)
{
    return l->fair_path != NULL &&
           strncmp(l->scope, JR_LIMIT_QPREFIX, 6) == 0;
}

static void
print_top(const char *queue, const jr_fair_top *t, int json, int first,
          const char *what)
{
    char k[300];
    int i;

    if (json) {
        printf("%s", first ? "" : ",");
        jr_json_str(stdout, queue);
        printf(":{\"keys\":%ld,\"top\":[", t->keys);
        for (i = 0; i < t->n; i++) {
            printf("%s{\"key\":", i ? "," : "");
            jr_json_str(stdout, t->top[i].key);
            printf(",\"waiting\":%ld,\"running\":%ld,\"weight\":%g,"
                   "\"share\":%.4f}", t->top[i].waiting, t->top[i].running,
                   t->top[i].weight, t->top[i].share);
        }
        printf("]}");
        return;
    }
    printf("fair %s %s: %ld key%s with ready jobs\n", what,
           jr_esc_str(k, sizeof k, queue), t->keys, t->keys == 1 ? "" : "s");
    for (i = 0; i < t->n; i++)
        printf("  %-24s ready %-7ld running %-5ld weight %-6g share %.1f%%\n",
               t->top[i].key[0] ? jr_esc_str(k, sizeof k, t->top[i].key) :
               "\"\"", t->top[i].waiting,
               t->top[i].running, t->top[i].weight, 100 * t->top[i].share);
}

/* The job names with fair weights of their own, each as a fair queue
 * is shown (",\"fair_names\":{...}" with json). */
static int
stats_names(jr_db *db, int json)
{
    jr_fair_names names = {0};
    jr_fair_top t;
    jr_err err;
    int i;

    if (db->ops->fair_name_list(db->b, 1, jr_fair_names_add, &names,
                                &err) < 0)
        return jr_cmd_die(JR_EXIT_FAIL, err.msg);
    if (json)
        printf(",\"fair_names\":{");
    for (i = 0; i < names.n; i++) {
        memset(&t, 0, sizeof t);
        if (db->ops->fair_name_use(db->b, names.name[i], jr_fair_top_add,
                                   &t, &err) < 0)
            return jr_cmd_die(JR_EXIT_FAIL, err.msg);
        jr_fair_top_done(&t);
        print_top(names.name[i], &t, json, i == 0, "name");
    }
    if (json)
        printf("}");
    return 0;
}

int
jr_cmd_stats_fair(const jr_config *c, int json)
{
    jr_db db = {0};
    jr_fair_top t;
    jr_err err;
    int i, first = 1, rc = 0;

    if ((rc = jr_cmd_open_reader(c, &db, 0)) != 0)
        return rc;
    if (json)
        printf(",\"fair\":{");
    for (i = 0; i < c->limits.n && rc == 0; i++) {
        if (!is_fair(&c->limits.l[i]))
            continue;
        memset(&t, 0, sizeof t);
        if (db.ops->fair_use(db.b, &c->limits.l[i], jr_fair_top_add, &t,
                             &err) < 0) {
            rc = jr_cmd_die(JR_EXIT_FAIL, err.msg);
            break;
        }
        jr_fair_top_done(&t);
        print_top(c->limits.l[i].scope + 6, &t, json, first, "queue");
        first = 0;
    }
    if (json)
        printf("}");
    if (rc == 0)
        rc = stats_names(&db, json);
    jr_db_close(&db);
    return rc;
}
