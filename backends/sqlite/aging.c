/* aging.c - priority aging on SQLite (docs/queues.md, "Priority aging"):
 * an aging queue's candidates in a claim under limits, ordered by their
 * effective priority (the priority less a level per period waited since
 * run_at). Within one priority the oldest job is the most aged, so the
 * first cap jobs of each priority (the jobs_claim index, one range a
 * priority found by a seek) hold the first cap of the queue: the cost
 * follows the priorities with ready jobs, not the backlog. Uses
 * sqlite_int.h, base/limit.h. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sqlite/sqlite_int.h"
#include "base/limit.h"

/* The file's statements: slots of sql_text[] (sqlite_int.h). */
enum { S_AGE_LEVEL, S_AGE_JOBS, S_COUNT };

static const char *const sql_text[S_COUNT] = {
    /* the next priority after ?2 with a queued job in queue ?1 */
    [S_AGE_LEVEL] =
        "SELECT min(priority) FROM jobs WHERE state = 'queued'"
        " AND queue = ?1 AND priority > ?2",
    /* the first ?4 ready jobs of priority ?8 in queue ?1, oldest first,
     * with the filters of candidates.c's S_LIM_CANDIDATES */
    [S_AGE_JOBS] =
        "SELECT id, priority, run_at, name, limit_key, coalesce(cost, 1)"
        " FROM jobs"
        " WHERE state = 'queued' AND queue = ?1 AND priority = ?8"
        " AND run_at <= ?2" JR_SQLITE_UNEXPIRED JR_SQLITE_LIM_FILTER
        " ORDER BY " JR_SQLITE_CLAIM_ORDER ", id LIMIT ?4",
};

static sqlite3_stmt *
stmt(jr_backend *b, int which, jr_err *err)
{
    return jr_sqlite_stmt(b, &sql_text[which], err);
}

double
jr_sqlite_aging_of(const jr_claim_spec *spec, const char *queue)
{
    int i;

    for (i = 0; spec && i < spec->nlimits; i++)
        if (spec->limits[i].aging > 0 &&
            strncmp(spec->limits[i].scope, JR_LIMIT_QPREFIX, 6) == 0 &&
            strcmp(spec->limits[i].scope + 6, queue) == 0)
            return spec->limits[i].aging;
    return 0;
}

typedef struct aged {
    candidate c;
    long long eff;
} aged;

static int
aged_order(const void *a, const void *b)
{
    const aged *x = a, *y = b;

    if (x->eff != y->eff)
        return x->eff < y->eff ? -1 : 1;
    if (x->c.run_at != y->c.run_at)
        return x->c.run_at < y->c.run_at ? -1 : 1;
    return (x->c.id > y->c.id) - (x->c.id < y->c.id);
}

static void
aged_free(aged *r, int nr)
{
    int i;

    for (i = 0; r && i < nr; i++) {
        free(r[i].c.name);
        free(r[i].c.queue);
        free(r[i].c.key);
    }
    free(r);
}

/* Appends the first cap jobs of priority level to r (grown). 0, 1 when
 * out of memory, -1 on a database failure. */
static int
level_jobs(sqlite3_stmt *s, const char *queue, int level,
           double now, double aging, aged **r, int *nr, int *rcap)
{
    const char *key;
    aged *bigger, *a;
    int rc;

    sqlite3_bind_int(s, 8, level);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (*nr == *rcap) {
            *rcap = *rcap ? *rcap * 2 : 64;
            if ((bigger = realloc(*r, (size_t)*rcap * sizeof **r)) == NULL)
                break;
            *r = bigger;
        }
        a = &(*r)[(*nr)++];
        memset(a, 0, sizeof *a);
        a->c.id = sqlite3_column_int64(s, 0);
        a->c.priority = sqlite3_column_int(s, 1);
        a->c.run_at = sqlite3_column_double(s, 2);
        a->c.cost = (long)sqlite3_column_int64(s, 5);
        a->eff = jr_aged_priority(a->c.priority, a->c.run_at, now, aging);
        key = (const char *)sqlite3_column_text(s, 4);
        a->c.name = strdup((const char *)sqlite3_column_text(s, 3));
        a->c.queue = strdup(queue);
        a->c.key = key ? strdup(key) : NULL;
        if (!a->c.name || !a->c.queue || (key && !a->c.key))
            break;
    }
    sqlite3_reset(s);
    return rc == SQLITE_DONE ? 0 : rc == SQLITE_ROW ? 1 : -1;
}

int
jr_sqlite_aged_candidates(jr_backend *b, double aging, const char *queue,
                          int cap, const char *json, double now,
                          candidate *c, int *n, const limq *lim, jr_err *err)
{
    sqlite3_stmt *lv = stmt(b, S_AGE_LEVEL, err), *s;
    aged *r = NULL;
    int nr = 0, rcap = 0, rc = 0, i, level;
    sqlite3_int64 after = INT64_MIN;

    if (lv == NULL || (s = stmt(b, S_AGE_JOBS, err)) == NULL)
        return -1;
    bind_text(s, 1, queue);
    sqlite3_bind_double(s, 2, now);
    bind_text(s, 3, json);
    sqlite3_bind_int(s, 4, cap);
    bind_text(s, 5, lim->names);
    bind_text(s, 6, lim->pairs);
    bind_text(s, 7, lim->rates);
    bind_text(s, 10, lim->rooms);
    for (;;) {
        bind_text(lv, 1, queue);
        sqlite3_bind_int64(lv, 2, after);
        if ((rc = sqlite3_step(lv)) != SQLITE_ROW ||
            sqlite3_column_type(lv, 0) == SQLITE_NULL) {
            sqlite3_reset(lv);
            rc = rc == SQLITE_ROW ? 0 : -1;
            break;
        }
        level = sqlite3_column_int(lv, 0);
        sqlite3_reset(lv);
        after = level;
        if ((rc = level_jobs(s, queue, level, now, aging, &r, &nr,
                             &rcap)) != 0)
            break;
    }
    if (rc != 0) {
        aged_free(r, nr);
        return rc > 0 ? jr_fail(err, JR_ENOMEM, "sqlite: out of memory") :
               jr_sqlite_fail(b, err, "claiming jobs of an aging queue");
    }
    if (nr > 0)
        qsort(r, (size_t)nr, sizeof *r, aged_order);
    for (i = 0; i < nr && i < cap; i++) {
        c[*n] = r[i].c;
        memset(&r[i].c, 0, sizeof r[i].c);  /* its strings move to c */
        c[*n].rank = i;
        (*n)++;
    }
    aged_free(r, nr);
    return 0;
}
