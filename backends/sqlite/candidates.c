/* candidates.c - what a claim may take: the queues not paused with
 * ready jobs (the one with work, for a claim of one queue), and the
 * first ready jobs of each within its cap, fairly ordered (round robin
 * between queues, then priority, run_at, id; the queue that leads
 * rotates; a fair or aging queue's own order from fair.c, aging.c).
 * claim.c takes them. Uses sqlite_int.h, limitpick.h. */
#include <stdlib.h>
#include <string.h>

#include "sqlite/sqlite_int.h"

/* The file's statements: slots of sql_text[] (sqlite_int.h). */
enum { S_CLAIM_QUEUES, S_QUEUE_READY, S_CLAIM_CANDIDATES, S_LIM_CANDIDATES,
       S_COUNT };

static const char *const sql_text[S_COUNT] = {
    /* the queues a claim may take from, by name: those with a queued job
     * (a skip scan of jobs_claim, one seek per such queue) and not paused,
     * so a claim's cost follows the queues with work, not the rows of
     * queues */
    [S_CLAIM_QUEUES] =
        "WITH RECURSIVE w(name) AS (SELECT min(queue) FROM jobs"
        "  WHERE state = 'queued'"
        " UNION ALL SELECT (SELECT min(queue) FROM jobs"
        "  WHERE state = 'queued' AND queue > w.name)"
        " FROM w WHERE w.name IS NOT NULL)"
        " SELECT name FROM w WHERE name IS NOT NULL"
        " AND NOT EXISTS (SELECT 1 FROM queues p WHERE p.name = w.name"
        "  AND p.paused = 1)",
    /* whether queue ?1 has a job of names ?3 ready by ?2 */
    [S_QUEUE_READY] =
        "SELECT 1 FROM jobs WHERE state = 'queued' AND queue = ?1"
        " AND run_at <= ?2"
        JR_SQLITE_UNEXPIRED
        " AND name IN (SELECT value FROM json_each(?3))"
        " LIMIT 1",
    /* the first ?4 ready jobs of one queue (the jobs_claim index) */
    [S_CLAIM_CANDIDATES] =
        "SELECT id, priority, run_at FROM jobs WHERE state = 'queued'"
        " AND queue = ?1 AND run_at <= ?2"
        JR_SQLITE_UNEXPIRED
        " AND name IN (SELECT value FROM json_each(?3))"
        " ORDER BY priority, " JR_SQLITE_CLAIM_ORDER ", id LIMIT ?4",
    /* limits per key: the first ?4 ready jobs of queue ?1 not of a name
     * blocked whole (?5) nor of a name or queue and key at its cap or out
     * of tokens in this claim (?6, "n<name>\x1f<key>" and
     * "q<queue>\x1f<key>"), nor of a key whose stored bucket in a scope
     * of ?7 ({scope: per-key rate}) is short of a token by now ?2: one
     * primary key look-up per job passed over, so the cost follows the
     * keys with jobs, not the buckets */
    [S_LIM_CANDIDATES] =
        "SELECT id, priority, run_at, name, limit_key, coalesce(cost, 1)"
        " FROM jobs WHERE state = 'queued' AND queue = ?1 AND run_at <= ?2"
        JR_SQLITE_UNEXPIRED
        JR_SQLITE_LIM_FILTER
        " ORDER BY priority, " JR_SQLITE_CLAIM_ORDER ", id LIMIT ?4",
};

static sqlite3_stmt *
stmt(jr_backend *b, int which, jr_err *err)
{
    return jr_sqlite_stmt(b, &sql_text[which], err);
}

/* Round robin between queues: rank first, then priority, run_at, id. */
static int
candidate_order(const void *a, const void *b)
{
    const candidate *x = a, *y = b;

    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    if (x->turn != y->turn)
        return x->turn < y->turn ? -1 : 1;
    return jr_claim_cmp(x->priority, x->run_at, x->id, y->priority,
                        y->run_at, y->id);
}

/* How many jobs spec lets one claim take from queue: its listed max (the
 * smallest, if listed twice), else others; never more than the total. */
static int
queue_cap(const jr_claim_spec *spec, const char *queue, const limq *lim)
{
    int i, cap = -1, taken = 0;

    for (i = 0; lim && i < lim->nq; i++)
        if (strcmp(lim->qname[i], queue) == 0)
            taken = lim->qtaken[i];     /* a limited claim's earlier pass */
    for (i = 0; i < spec->nqueues; i++)
        if (strcmp(spec->queues[i].queue, queue) == 0 &&
            (cap < 0 || spec->queues[i].max < cap))
            cap = spec->queues[i].max;
    if (cap < 0)
        cap = spec->others;
    cap -= taken;
    return cap < spec->max ? cap : spec->max;
}

/* A limited candidate's name, queue and key (from columns 3, 4). */
static int
candidate_strings(sqlite3_stmt *s, const char *queue, candidate *c)
{
    const char *key = (const char *)sqlite3_column_text(s, 4);

    c->name = strdup((const char *)sqlite3_column_text(s, 3));
    c->queue = strdup(queue);
    c->key = key ? strdup(key) : NULL;
    return c->name && c->queue && (key == NULL || c->key) ? 0 : -1;
}

/* Appends the first cap ready jobs of queue to c[*n..]; c has room. With
 * lim, skips the jobs its lists block and keeps their strings. */
static int
queue_candidates(jr_backend *b, const char *queue, int cap, const char *json,
                 double now, candidate *c, int *n, const limq *lim,
                 jr_err *err)
{
    const jr_limit *f = lim ? jr_sqlite_fair_of(lim->spec, queue) : NULL;
    double aging = lim ? jr_sqlite_aging_of(lim->spec, queue) : 0;
    sqlite3_stmt *s;
    int rank = 0, rc;

    if (f != NULL)
        return jr_sqlite_fair_candidates(b, f, queue, cap, json, now, c, n,
                                         lim, err);
    if (aging > 0)
        return jr_sqlite_aged_candidates(b, aging, queue, cap, json, now, c,
                                         n, lim, err);
    s = stmt(b, lim ? S_LIM_CANDIDATES : S_CLAIM_CANDIDATES, err);
    if (s == NULL)
        return -1;
    bind_text(s, 1, queue);
    sqlite3_bind_double(s, 2, now);
    bind_text(s, 3, json);
    sqlite3_bind_int(s, 4, cap);
    if (lim) {
        bind_text(s, 5, lim->names);
        bind_text(s, 6, lim->pairs);
        bind_text(s, 7, lim->rates);
        bind_text(s, 10, lim->rooms);
    }
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        c[*n].id = sqlite3_column_int64(s, 0);
        c[*n].priority = sqlite3_column_int(s, 1);
        c[*n].run_at = sqlite3_column_double(s, 2);
        c[*n].rank = rank++;
        c[*n].name = c[*n].queue = c[*n].key = c[*n].fkey = NULL;
        c[*n].cost = lim ? (long)sqlite3_column_int64(s, 5) : 1;
        (*n)++;
        if (lim && candidate_strings(s, queue, &c[*n - 1]) < 0) {
            sqlite3_reset(s);
            return jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
        }
    }
    sqlite3_reset(s);
    return rc == SQLITE_DONE ? 0 : jr_sqlite_fail(b, err, "claiming jobs");
}

void
jr_sqlite_candidates_free(candidate *c, int n)
{
    int i;

    for (i = 0; c && i < n; i++) {
        free(c[i].name);
        free(c[i].queue);
        free(c[i].key);
        free(c[i].fkey);
    }
    free(c);
}

candidate *
jr_sqlite_candidates(jr_backend *b, const jr_claim_spec *spec,
                     const char *json, double now, int *n, const limq *lim,
                     jr_err *err)
{
    sqlite3_stmt *q = stmt(b, S_CLAIM_QUEUES, err);
    candidate *c = NULL, *bigger;
    size_t cap = 0;
    int rc, k, i, from, nq = 0;

    *n = 0;
    if (q == NULL)
        return NULL;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        const char *queue = (const char *)sqlite3_column_text(q, 0);
        if ((k = queue_cap(spec, queue, lim)) <= 0 ||
            (lim && !jr_lpick_queue_open(lim->pick, queue)))
            continue;
        from = *n;
        if ((size_t)*n + (size_t)k > cap) {
            cap = ((size_t)*n + (size_t)k) * 2;
            if ((bigger = realloc(c, cap * sizeof *c)) == NULL) {
                jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
                goto fail;
            }
            c = bigger;
        }
        if (queue_candidates(b, queue, k, json, now, c, n, lim, err) < 0)
            goto fail;
        for (i = from; i < *n; i++)
            c[i].turn = nq;
        nq += *n > from;        /* the rotation is over queues with jobs */
    }
    sqlite3_reset(q);
    if (rc != SQLITE_DONE) {
        jr_sqlite_fail(b, err, "claiming jobs");
        jr_sqlite_candidates_free(c, *n);
        return NULL;
    }
    /* the queue that leads each round rotates from claim to claim */
    for (i = 0, from = nq ? (int)(b->rotate++ % (unsigned)nq) : 0; i < *n;
         i++)
        c[i].turn = (c[i].turn - from + nq) % nq;
    if (c == NULL && (c = malloc(sizeof *c)) == NULL)
        jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
    else
        qsort(c, (size_t)*n, sizeof *c, candidate_order);
    return c;
fail:
    sqlite3_reset(q);
    jr_sqlite_candidates_free(c, *n);
    return NULL;
}

int
jr_sqlite_ready_queue(jr_backend *b, const char *json, double now,
                      char **queue, jr_err *err)
{
    sqlite3_stmt *q = stmt(b, S_CLAIM_QUEUES, err), *p;
    int rc, found = 0;

    *queue = NULL;
    if (q == NULL || (p = stmt(b, S_QUEUE_READY, err)) == NULL) {
        if (q != NULL)
            sqlite3_reset(q);
        return -1;
    }
    while (found < 2 && (rc = sqlite3_step(q)) == SQLITE_ROW) {
        bind_text(p, 1, (const char *)sqlite3_column_text(q, 0));
        sqlite3_bind_double(p, 2, now);
        bind_text(p, 3, json);
        if ((rc = sqlite3_step(p)) == SQLITE_ROW && found++ == 0 &&
            (*queue = strdup((const char *)sqlite3_column_text(q, 0))) ==
            NULL)
            rc = SQLITE_NOMEM;
        sqlite3_reset(p);
        if (rc != SQLITE_ROW && rc != SQLITE_DONE)
            break;
    }
    sqlite3_reset(q);
    if (found < 2 && (rc == SQLITE_ROW || rc == SQLITE_DONE))
        return found;
    free(*queue);               /* several, or a failure: none to name */
    *queue = NULL;
    if (rc == SQLITE_ROW || rc == SQLITE_DONE)
        return found;
    return rc == SQLITE_NOMEM ? jr_fail(err, JR_ENOMEM, "sqlite: out of "
                                        "memory") :
           jr_sqlite_fail(b, err, "claiming jobs");
}
