/* apidbfair.c - fair queues in the HTTP API (docs/queues.md, "Fair
 * share"): each fair queue's keys with most ready jobs, their weights and
 * shares, in GET /api/stats ("fair"; a job name's with weights of its
 * own in "fair_names") and as gauges of /metrics (at most
 * JR_FAIR_TOP keys a queue: bounded cardinality). On the database
 * thread. Uses apidb.h, fairpick.h. */
#include <stdio.h>
#include <string.h>

#include "http/apidb.h"
#include "base/limit.h"
#include "fairpick.h"

/* The top keys of fair limit f into t. */
static int
top_of(jr_db *db, const jr_limit *f, jr_fair_top *t, jr_err *e)
{
    memset(t, 0, sizeof *t);
    if (db->ops->fair_use(db->b, f, jr_fair_top_add, t, e) < 0)
        return -1;
    jr_fair_top_done(t);
    return 0;
}

static int
is_fair(const jr_limit *l)
{
    return l->fair_path != NULL &&
           strncmp(l->scope, JR_LIMIT_QPREFIX, 6) == 0;
}

/* The top keys of t as a JSON array into b. */
static void
top_json(jr_buf *b, const jr_fair_top *t)
{
    int k;

    jr_api_printf(b, ":{\"keys\":%ld,\"top\":[", t->keys);
    for (k = 0; k < t->n; k++) {
        jr_api_printf(b, "%s{\"key\":", k ? "," : "");
        jr_api_str(b, t->top[k].key);
        jr_api_printf(b, ",\"waiting\":%ld,\"running\":%ld,"
                      "\"weight\":%g,\"share\":%.4f}", t->top[k].waiting,
                      t->top[k].running, t->top[k].weight,
                      t->top[k].share);
    }
    jr_buf_put(b, "]}", 2);
}

/* ,"fair_names":{NAME:{keys, top}}: the job names with fair weights of
 * their own (docs/queues.md, "A name's own weights"). */
static int
names_json(jr_db *db, jr_buf *b, jr_err *e)
{
    jr_fair_names names = {0};
    jr_fair_top t;
    int i;

    if (db->ops->fair_name_list(db->b, 1, jr_fair_names_add, &names, e) < 0)
        return -1;
    jr_buf_put(b, ",\"fair_names\":{", 15);
    for (i = 0; i < names.n; i++) {
        memset(&t, 0, sizeof t);
        if (db->ops->fair_name_use(db->b, names.name[i], jr_fair_top_add,
                                   &t, e) < 0)
            return -1;
        jr_fair_top_done(&t);
        if (i > 0)
            jr_buf_put(b, ",", 1);
        jr_api_str(b, names.name[i]);
        top_json(b, &t);
    }
    jr_buf_put(b, "}", 1);
    return 0;
}

int
jr_apidb_fair_json(jr_db *db, jr_buf *b, const jr_limit *l, int n,
                   jr_err *e)
{
    jr_fair_top t;
    int i, first = 1;

    jr_buf_put(b, "\"fair\":{", 8);
    for (i = 0; i < n; i++) {
        if (!is_fair(&l[i]))
            continue;
        if (top_of(db, &l[i], &t, e) < 0)
            return -1;
        if (!first)
            jr_buf_put(b, ",", 1);
        first = 0;
        jr_api_str(b, l[i].scope + 6);
        top_json(b, &t);
    }
    jr_buf_put(b, "}", 1);
    return names_json(db, b, e);
}

/* Prometheus label values: backslash, quote and newline escaped. */
static void
label(jr_buf *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\' || *s == '"')
            jr_buf_put(b, "\\", 1);
        if (*s == '\n')
            jr_buf_put(b, "\\n", 2);
        else
            jr_buf_put(b, s, 1);
    }
}

int
jr_apidb_fair_gauges(jr_db *db, jr_buf *b, const jr_limit *l, int n,
                     jr_err *e)
{
    jr_fair_top t;
    jr_buf w = {0};
    int i, k, any = 0;

    for (i = 0; i < n; i++) {
        if (!is_fair(&l[i]))
            continue;
        if (top_of(db, &l[i], &t, e) < 0) {
            jr_buf_free(&w);
            return -1;
        }
        if (!any++)
            jr_api_printf(b, "# HELP jobrunner_fair_keys Keys of a fair "
                          "queue with ready jobs.\n"
                          "# TYPE jobrunner_fair_keys gauge\n");
        jr_buf_put(b, "jobrunner_fair_keys{queue=\"", 27);
        label(b, l[i].scope + 6);
        jr_api_printf(b, "\"} %ld\n", t.keys);
        for (k = 0; k < t.n; k++) {
            jr_buf_put(&w, "jobrunner_fair_waiting{queue=\"", 30);
            label(&w, l[i].scope + 6);
            jr_buf_put(&w, "\",key=\"", 7);
            label(&w, t.top[k].key);
            jr_api_printf(&w, "\"} %ld\n", t.top[k].waiting);
        }
    }
    if (any) {
        jr_api_printf(b, "# HELP jobrunner_fair_waiting Ready jobs of the "
                      "keys of a fair queue with most (at most %d keys a "
                      "queue).\n# TYPE jobrunner_fair_waiting gauge\n",
                      JR_FAIR_TOP);
        if (w.len > 0)
            jr_buf_put(b, w.p, w.len);
    }
    jr_buf_free(&w);
    return 0;
}
