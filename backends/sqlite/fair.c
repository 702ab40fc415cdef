/* fair.c - fair share inside a queue on SQLite (docs/queues.md, "Fair
 * share"): a fair queue's candidates in a claim under limits, each key's
 * first ready jobs ranked by whose turn it is (fairpick.c decides; the
 * passes of the keys that started jobs are written back by fairsave.c);
 * `jobrunner fair set`. Uses sqlite_int.h, fairpick.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqlite/sqlite_int.h"
#include "fairpick.h"
#include "base/jsondom.h"
#include "base/util.h"

/* The file's statements: slots of sql_text[] (sqlite_int.h). */
enum { S_FAIR_AFTER, S_FAIR_FROM, S_FAIR_JOBS, S_FAIR_CLOCK,
       S_FAIR_SET, S_FAIR_USE, S_FAIR_CURSOR, S_FAIR_PATH,
       S_FAIR_BACKFILL, S_FAIR_STAMP, S_FAIR_IS,
       S_COUNT };

/* The next ?4 keys of queue ?1 with queued jobs after key ?8 (FIRST's
 * test), each one seek in jobs_fair: a key without queued jobs is not
 * there. Each with its weight set at run time (NULL: the config's,
 * looked up in C: a json_each of the config's weights for each key cost
 * a parse of them all a key), its pass, whether it has a job ready by ?2,
 * and the first of those the limits let by (S_FAIR_JOBS's filter; NULL:
 * none), so a key whose turn gives it one job costs no read of its own. */
#define FAIR_NEXT(first) \
    "WITH RECURSIVE w(k, n) AS (SELECT (SELECT fair_key FROM jobs" \
    "  WHERE state = 'queued' AND queue = ?1 AND fair_key IS NOT NULL" \
    "  AND fair_key " first " ?8 ORDER BY fair_key LIMIT 1), 1" \
    " UNION ALL SELECT (SELECT fair_key FROM jobs" \
    "  WHERE state = 'queued' AND queue = ?1 AND fair_key IS NOT NULL" \
    "  AND fair_key > w.k ORDER BY fair_key LIMIT 1), w.n + 1" \
    " FROM w WHERE w.k IS NOT NULL AND w.n < ?4)," \
    " f(k, n, id) AS (SELECT w.k, w.n, (SELECT id FROM jobs" \
    "  WHERE state = 'queued' AND queue = ?1 AND fair_key IS NOT NULL" \
    "  AND fair_key = w.k AND run_at <= ?2" JR_SQLITE_UNEXPIRED \
    JR_SQLITE_LIM_FILTER \
    "  ORDER BY priority, run_at, id LIMIT 1) FROM w WHERE w.k IS NOT NULL)" \
    " SELECT f.k, fk.weight, coalesce(fk.pass, 0), EXISTS (SELECT 1" \
    "  FROM jobs WHERE state = 'queued' AND queue = ?1" \
    "  AND fair_key IS NOT NULL AND fair_key = f.k AND run_at <= ?2" \
    JR_SQLITE_UNEXPIRED "), j.id, j.priority," \
    " j.run_at, j.name, j.limit_key, coalesce(j.cost, 1)" \
    " FROM f LEFT JOIN fair_keys fk ON fk.queue = ?1 AND fk.key = f.k" \
    " LEFT JOIN jobs j ON j.id = f.id ORDER BY f.n"

static const char *const sql_text[S_COUNT] = {
    [S_FAIR_AFTER] = FAIR_NEXT(">"),
    [S_FAIR_FROM] = FAIR_NEXT(">="),
    /* the first ?4 ready jobs of fair key ?8 of queue ?1 (jobs_fair),
     * with the filters of claim.c's S_LIM_CANDIDATES */
    [S_FAIR_JOBS] =
        "SELECT id, priority, run_at, name, limit_key, coalesce(cost, 1)"
        " FROM jobs WHERE state = 'queued' AND queue = ?1"
        " AND fair_key IS NOT NULL AND fair_key = ?8 AND run_at <= ?2"
        JR_SQLITE_UNEXPIRED
        JR_SQLITE_LIM_FILTER
        " ORDER BY priority, run_at, id LIMIT ?4",
    [S_FAIR_CLOCK] =
        "SELECT clock, cursor FROM fair_clocks WHERE queue = ?1",
    [S_FAIR_SET] =
        "INSERT INTO fair_keys (queue, key, weight)"
        " VALUES (?1, ?2, ?3) ON CONFLICT (queue, key) DO UPDATE"
        " SET weight = excluded.weight",
    /* each key (path ?2) of queue ?1 with jobs queued or running: ready
     * by ?3, running, weight as FAIR_NEXT's (?4, ?5); a name's with fair
     * weights of its own are its (fairname.c's S_FN_USE) */
    [S_FAIR_USE] =
        "SELECT k, sum(state = 'queued' AND run_at <= ?3) AS w,"
        " sum(state = 'running'),"
        " coalesce((SELECT weight FROM fair_keys fk"
        "  WHERE fk.queue = ?1 AND fk.key = k),"
        "  (SELECT value FROM json_each(?4) WHERE key = k), ?5)"
        " FROM (SELECT coalesce(CAST(json_extract(payload, ?2) AS TEXT),"
        "  '') AS k, state, run_at FROM jobs"
        "  WHERE queue = ?1 AND state IN ('queued', 'running')"
        "  AND name NOT IN (SELECT name FROM fair_names"
        "  WHERE weights IS NOT NULL))"
        " GROUP BY k ORDER BY w DESC, k",
    /* where the walk of queue ?1's keys goes on from (?3) and its clock */
    [S_FAIR_CURSOR] =
        "INSERT INTO fair_clocks (queue, clock, cursor) VALUES (?1, ?2, ?3)"
        " ON CONFLICT (queue) DO UPDATE"
        " SET clock = max(clock, excluded.clock), cursor = excluded.cursor",
    /* fair queue ?1's key path ?2; no change: no row changed */
    [S_FAIR_PATH] =
        "INSERT INTO fair_paths (queue, path) VALUES (?1, ?2)"
        " ON CONFLICT (queue) DO UPDATE SET path = excluded.path"
        " WHERE path <> excluded.path",
    /* the key of each job of queue ?1 not ended, at its name's path
     * (fair_names; with weights, in the name's scope: JR_SQLITE_FAIR_NKEY)
     * or else ?2 */
    [S_FAIR_BACKFILL] =
        "UPDATE jobs SET fair_key = CASE WHEN json_valid(payload)"
        " THEN coalesce(" JR_SQLITE_FAIR_NKEY ", CASE WHEN ?2 = '' THEN ''"
        " ELSE coalesce(CAST(json_extract(payload, ?2) AS TEXT), '') END)"
        " ELSE '' END WHERE queue = ?1"
        " AND state NOT IN ('completed', 'dead', 'cancelled', 'expired')",
    /* what the trigger jobs_fair_key does, for the jobs of ids ?2 to ?3
     * just pushed into queue ?1 */
    [S_FAIR_STAMP] =
        "UPDATE jobs SET fair_key = (SELECT CASE WHEN json_valid(payload)"
        " AND f.path <> ''"
        " THEN coalesce(CAST(json_extract(payload, f.path) AS TEXT), '')"
        " ELSE '' END FROM fair_paths f WHERE f.queue = ?1)"
        " WHERE id BETWEEN ?2 AND ?3 AND queue = ?1 AND fair_key IS NULL",
    /* is queue ?1 fair; has a name weights of its own (fairname.c) */
    [S_FAIR_IS] =
        "SELECT EXISTS (SELECT 1 FROM fair_paths WHERE queue = ?1),"
        " EXISTS (SELECT 1 FROM fair_names"
        " WHERE weights IS NOT NULL)",
};

static sqlite3_stmt *
stmt(jr_backend *b, int which, jr_err *err)
{
    return jr_sqlite_stmt(b, &sql_text[which], err);
}

const jr_limit *
jr_sqlite_fair_of(const jr_claim_spec *spec, const char *queue)
{
    int i;

    for (i = 0; spec && i < spec->nlimits; i++)
        if (spec->limits[i].fair_path &&
            strncmp(spec->limits[i].scope, JR_LIMIT_QPREFIX, 6) == 0 &&
            strcmp(spec->limits[i].scope + 6, queue) == 0)
            return &spec->limits[i];
    return NULL;
}

/* The claim walks a fair queue's keys with queued jobs (jobs_fair, one
 * seek a key) from the key it last started, FAIR_BATCH a statement at
 * most, and no more than the keys it still needs (FAIR_FEW at least):
 * the statement reads every key it asks for (ORDER BY). */
#define FAIR_BATCH 64
#define FAIR_FEW 16

/* A key the walk met with a ready job, and that job. */
typedef struct walked {
    char     *key;
    double    weight, pass;
    candidate first;            /* its strings move to the claim's */
} walked;

/* The config's weights of a fair queue, by key, for bsearch. */
typedef struct cfgw {
    char   *key;
    double  weight;
} cfgw;

typedef struct walk {
    walked *w;
    int     n, cap;
    cfgw   *cw;                 /* the config's weights, sorted */
    int     ncw;
    double  def;                /* the config's default weight */
    int     atclock;            /* of w: keys at the clock (or below) */
    int     round;              /* 1: every key was met (the walk went
                                 * round), not only cap at the clock */
} walk;

static int
candidate_id(const void *a, const void *b)
{
    const candidate *x = a, *y = b;

    return (x->id > y->id) - (x->id < y->id);
}

static void
walk_free(walk *wk)
{
    int i;

    for (i = 0; i < wk->n; i++) {
        free(wk->w[i].key);
        free(wk->w[i].first.name);
        free(wk->w[i].first.queue);
        free(wk->w[i].first.key);
        free(wk->w[i].first.fkey);
    }
    free(wk->w);
    for (i = 0; i < wk->ncw; i++)
        free(wk->cw[i].key);
    free(wk->cw);
}

static int
cfgw_cmp(const void *a, const void *b)
{
    return strcmp(((const cfgw *)a)->key, ((const cfgw *)b)->key);
}

/* Reads f's config weights ({key: weight}, checked by the config) into
 * wk, sorted. 0, or -1 with err set. */
static int
config_weights(const jr_limit *f, walk *wk, jr_err *err)
{
    jr_jdoc doc;
    jr_err e;
    int k;

    wk->def = f->fair_default > 0 ? f->fair_default : 1;
    if (f->fair_weights == NULL ||
        jr_jdoc_parse(&doc, f->fair_weights, strlen(f->fair_weights),
                      "fair weights", &e) < 0)
        return 0;               /* none (the config checked them) */
    if (doc.n[0].type == JR_JSON_OBJECT && doc.n[0].count > 0 &&
        (wk->cw = calloc((size_t)doc.n[0].count, sizeof *wk->cw)) == NULL) {
        jr_jdoc_free(&doc);
        return jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
    }
    for (k = doc.n[0].type == JR_JSON_OBJECT ? doc.n[0].first : -1;
         k >= 0 && doc.n[k].next >= 0; k = doc.n[doc.n[k].next].next) {
        if ((wk->cw[wk->ncw].key = jr_jdoc_str(&doc, k)) == NULL) {
            jr_jdoc_free(&doc);
            return jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
        }
        wk->cw[wk->ncw++].weight = strtod(doc.n[doc.n[k].next].at, NULL);
    }
    jr_jdoc_free(&doc);
    qsort(wk->cw, (size_t)wk->ncw, sizeof *wk->cw, cfgw_cmp);
    return 0;
}

static int
key_cmp(const void *key, const void *b)
{
    return strcmp(key, ((const cfgw *)b)->key);
}

/* The config's weight of key (its default when not listed). */
static double
config_weight(const walk *wk, const char *key)
{
    const cfgw *at = wk->ncw > 0 ? bsearch(key, wk->cw, (size_t)wk->ncw,
                                           sizeof *wk->cw, key_cmp) : NULL;

    return at != NULL ? at->weight : wk->def;
}

/* Fills c from the walk's row s: the key's first ready job the limits
 * let by (columns 4 to 9; NULL: none, c stays zero). -1: out of memory. */
static int
first_job(sqlite3_stmt *s, const char *queue, const char *key, candidate *c)
{
    const char *lk = (const char *)sqlite3_column_text(s, 8);

    if (sqlite3_column_type(s, 4) == SQLITE_NULL)
        return 0;
    c->id = sqlite3_column_int64(s, 4);
    c->priority = sqlite3_column_int(s, 5);
    c->run_at = sqlite3_column_double(s, 6);
    c->cost = (long)sqlite3_column_int64(s, 9);
    c->name = strdup(col_text(s, 7));
    c->queue = strdup(queue);
    c->key = lk ? strdup(lk) : NULL;
    c->fkey = strdup(key);
    return c->name && c->queue && c->fkey && (lk == NULL || c->key) ? 0 : -1;
}

/* One statement of the walk: keys after *pos (from: from "" on), up to
 * stop (NULL: the end) included. Sets *pos to the last key read; *end
 * when the keys ran out or passed stop. 0, or -1 with err set. */
static int
walk_step(jr_backend *b, const char *queue, double now, const char *json,
          const limq *lim, double clock, int from, char **pos,
          const char *stop, int cap, walk *wk, int *end, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, from ? S_FAIR_FROM : S_FAIR_AFTER, err);
    walked *bigger, *w;
    const char *k;
    int rc, rows = 0, batch = cap - wk->atclock;

    if (s == NULL)
        return -1;
    batch = batch < FAIR_FEW ? FAIR_FEW : batch > FAIR_BATCH ? FAIR_BATCH :
            batch;
    bind_text(s, 1, queue);
    sqlite3_bind_double(s, 2, now);
    bind_text(s, 3, json);
    sqlite3_bind_int(s, 4, batch);
    bind_text(s, 5, lim->names);
    bind_text(s, 6, lim->pairs);
    bind_text(s, 7, lim->rates);
    bind_text(s, 8, from ? "" : *pos);
    bind_text(s, 10, lim->rooms);
    *end = 0;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        k = col_text(s, 0);
        rows++;
        if (stop != NULL && strcmp(k, stop) > 0) {
            *end = 1;
            break;
        }
        free(*pos);
        if ((*pos = strdup(k)) == NULL) {
            rc = SQLITE_NOMEM;
            break;
        }
        if (sqlite3_column_int(s, 3) == 0)
            continue;                   /* none ready yet */
        if (wk->n == wk->cap) {
            wk->cap = wk->cap ? wk->cap * 2 : 64;
            if ((bigger = realloc(wk->w, (size_t)wk->cap * sizeof *bigger))
                == NULL) {
                rc = SQLITE_NOMEM;
                break;
            }
            wk->w = bigger;
        }
        w = &wk->w[wk->n];
        memset(w, 0, sizeof *w);
        wk->n++;                        /* walk_free frees what it has */
        if ((w->key = strdup(k)) == NULL ||
            first_job(s, queue, k, &w->first) < 0) {
            rc = SQLITE_NOMEM;
            break;
        }
        w->weight = sqlite3_column_type(s, 1) == SQLITE_NULL ?
                    config_weight(wk, k) : sqlite3_column_double(s, 1);
        if (jr_sqlite_fair_name_weight(b, k, &w->weight, err) < 0) {
            rc = SQLITE_ABORT;          /* a key in a name's scope */
            break;
        }
        if (!(w->weight > 0))
            w->weight = 1;
        w->pass = sqlite3_column_double(s, 2);
        wk->atclock += w->pass <= clock;
        if (wk->atclock >= cap)
            break;
    }
    sqlite3_reset(s);
    if (rc == SQLITE_NOMEM)
        return jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
    if (rc == SQLITE_ABORT)
        return -1;                      /* err says why */
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return jr_sqlite_fail(b, err, "walking a fair queue's keys");
    if (rc == SQLITE_DONE && rows < batch)
        *end = 1;
    return 0;
}

/* Walks the keys of queue with ready jobs from cursor round, until cap
 * of them are at the clock (their turn comes first, in walk order) or
 * every key was met (wk->round: the turns are then by pass). */
static int
walk_keys(jr_backend *b, const char *queue, double now, const char *json,
          const limq *lim, double clock, const char *cursor, int cap,
          walk *wk, jr_err *err)
{
    char *pos = cursor ? strdup(cursor) : NULL;
    int second = cursor == NULL, start = second, end = 0, rc = 0;

    if (cursor != NULL && pos == NULL)
        return jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
    /* after the cursor to the last key, then from the first to it */
    for (;;) {
        rc = walk_step(b, queue, now, json, lim, clock, start, &pos,
                       second ? cursor : NULL, cap, wk, &end, err);
        if (rc < 0 || wk->atclock >= cap)
            break;
        if (end && second) {
            wk->round = 1;              /* back where it started */
            break;
        }
        start = end;                    /* from the first key */
        second = second || end;
    }
    free(pos);
    return rc;
}

static double
read_clock(jr_backend *b, const char *queue, char **cursor, jr_err *err,
           int *ok)
{
    sqlite3_stmt *s = stmt(b, S_FAIR_CLOCK, err);
    double clock = 0;
    int rc;

    *ok = 0;
    *cursor = NULL;
    if (s == NULL)
        return 0;
    bind_text(s, 1, queue);
    if ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        clock = sqlite3_column_double(s, 0);
        if (sqlite3_column_type(s, 1) != SQLITE_NULL &&
            (*cursor = strdup(col_text(s, 1))) == NULL)
            rc = SQLITE_NOMEM;
    }
    sqlite3_reset(s);
    if (rc == SQLITE_NOMEM)
        jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
    else if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        jr_sqlite_fail(b, err, "reading a fair clock");
    else
        *ok = 1;
    return clock;
}

static int
save_cursor(jr_backend *b, const char *queue, double clock,
            const char *cursor, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_FAIR_CURSOR, err);

    if (s == NULL)
        return -1;
    bind_text(s, 1, queue);
    sqlite3_bind_double(s, 2, clock);
    bind_text(s, 3, cursor);
    return run(b, s, err, "moving a fair queue's cursor");
}

/* Reads up to want ready jobs of key (S_FAIR_JOBS) into c[*n..]. */
static int
key_jobs(jr_backend *b, const char *queue, const char *key, int want,
         const char *json, double now, const limq *lim, candidate *c,
         int *n, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_FAIR_JOBS, err);
    const char *lk;
    candidate *r;
    int rc;

    if (s == NULL)
        return -1;
    bind_text(s, 1, queue);
    sqlite3_bind_double(s, 2, now);
    bind_text(s, 3, json);
    sqlite3_bind_int(s, 4, want);
    bind_text(s, 5, lim->names);
    bind_text(s, 6, lim->pairs);
    bind_text(s, 7, lim->rates);
    bind_text(s, 8, key);
    bind_text(s, 10, lim->rooms);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        r = &c[(*n)++];
        memset(r, 0, sizeof *r);
        r->id = sqlite3_column_int64(s, 0);
        r->priority = sqlite3_column_int(s, 1);
        r->run_at = sqlite3_column_double(s, 2);
        lk = (const char *)sqlite3_column_text(s, 4);
        r->name = strdup(col_text(s, 3));
        r->queue = strdup(queue);
        r->key = lk ? strdup(lk) : NULL;
        r->fkey = strdup(key);
        r->cost = (long)sqlite3_column_int64(s, 5);
        if (!r->name || !r->queue || !r->fkey || (lk && !r->key)) {
            rc = SQLITE_NOMEM;
            break;
        }
    }
    sqlite3_reset(s);
    if (rc == SQLITE_NOMEM)
        return jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
    return rc == SQLITE_DONE ? 0 :
           jr_sqlite_fail(b, err, "claiming jobs of a fair queue");
}

static void
rows_free(candidate *r, int nr)
{
    int i;

    for (i = 0; r && i < nr; i++) {
        free(r[i].name);
        free(r[i].queue);
        free(r[i].key);
        free(r[i].fkey);
    }
    free(r);
}

int
jr_sqlite_fair_candidates(jr_backend *b, const jr_limit *f,
                          const char *queue, int cap, const char *json,
                          double now, candidate *c, int *n, const limq *lim,
                          jr_err *err)
{
    walk wk = {0};
    jr_fair_key *k = NULL;
    candidate *r = NULL;
    int *order = NULL, *first = NULL, *got = NULL, *map = NULL, *plan = NULL;
    int nk = 0, nr = 0, i, m, ok, last = -1, rank = 0, rc = -1;
    char *cursor = NULL;
    double clock;

    clock = read_clock(b, queue, &cursor, err, &ok);
    if (!ok || config_weights(f, &wk, err) < 0 ||
        walk_keys(b, queue, now, json, lim, clock, cursor, cap, &wk,
                  err) < 0)
        goto out;
    rc = 0;
    if (wk.n == 0)
        goto out;
    rc = -1;
    k = calloc((size_t)wk.n, sizeof *k);
    map = calloc((size_t)wk.n, sizeof *map);
    first = calloc((size_t)wk.n, sizeof *first);
    got = calloc((size_t)wk.n, sizeof *got);
    plan = calloc((size_t)wk.n, sizeof *plan);
    order = calloc((size_t)cap, sizeof *order);
    r = calloc((size_t)cap, sizeof *r);
    if (!k || !map || !first || !got || !plan || !order || !r) {
        jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
        goto out;
    }
    /* the keys whose turn may come: all met when the walk went round,
     * else those at the clock; ties go in walk order */
    for (i = 0; i < wk.n; i++) {
        if (!wk.round && wk.w[i].pass > clock)
            continue;
        k[nk].weight = wk.w[i].weight;
        k[nk].pass = wk.w[i].pass;
        k[nk].njobs = cap;
        k[nk].id = i;
        map[nk++] = i;
    }
    if (wk.round)
        clock = jr_fair_clock(k, nk, clock);
    m = jr_fair_order(k, nk, clock, cap, order);
    for (i = 0; i < nk; i++) {
        first[i] = nr;
        if (k[i].next == 1) {           /* the job the walk read */
            if (wk.w[map[i]].first.id != 0) {
                r[nr] = wk.w[map[i]].first;
                memset(&wk.w[map[i]].first, 0, sizeof r[nr]);
                nr++;
            }
        } else if (k[i].next > 1 &&
                   key_jobs(b, queue, wk.w[map[i]].key, k[i].next, json,
                            now, lim, r, &nr, err) < 0)
            goto out;
        got[i] = nr - first[i];
        plan[i] = k[i].next;
        k[i].next = 0;
    }
    for (i = 0; i < m; i++) {
        int at = order[i];
        candidate *from;

        if (k[at].next >= got[at])
            continue;           /* the key had fewer the limits let by */
        from = &r[first[at] + k[at].next++];
        c[*n] = *from;
        memset(from, 0, sizeof *from);      /* its strings move to c */
        c[*n].rank = rank++;
        c[*n].fweight = k[at].weight;
        c[*n].fclock = clock;
        c[*n].fpass = wk.w[map[at]].pass;
        (*n)++;
        if (map[at] > last)
            last = map[at];
    }
    rc = last < 0 ? 0 : save_cursor(b, queue, wk.round ?
                                    jr_fair_after(k, nk, plan, clock) :
                                    clock, wk.w[last].key, err);
out:
    rows_free(r, nr);
    walk_free(&wk);
    free(cursor);
    free(k);
    free(map);
    free(first);
    free(got);
    free(plan);
    free(order);
    return rc;
}

void
jr_sqlite_fair_mark(const candidate *c, int k, jr_job **out, int n)
{
    const candidate *at;
    candidate key;
    int i;

    for (i = 0; i < n; i++) {
        key.id = out[i]->id;
        at = bsearch(&key, c, (size_t)k, sizeof *c, candidate_id);
        if (at != NULL && at->fkey != NULL)
            out[i]->fair_weight = at->fweight;
    }
}

int
jr_sqlite_fair_set(jr_backend *b, const char *queue, const char *key,
                   double weight, jr_err *err)
{
    sqlite3_stmt *s;

    if (jr_sqlite_begin(b, err) < 0)
        return -1;
    if ((s = stmt(b, S_FAIR_SET, err)) == NULL) {
        jr_sqlite_rollback(b);
        return -1;
    }
    bind_text(s, 1, queue);
    bind_text(s, 2, key);
    sqlite3_bind_double(s, 3, weight);
    if (run(b, s, err, "setting a fair weight") < 0) {
        jr_sqlite_rollback(b);
        return -1;
    }
    return jr_sqlite_commit(b, err);
}

int
jr_sqlite_fair_use(jr_backend *b, const jr_limit *f, jr_fair_use_cb cb,
                   void *arg, jr_err *err)
{
    sqlite3_stmt *s;
    char path[220];
    int rc;

    if (f->fair_path == NULL || strncmp(f->scope, JR_LIMIT_QPREFIX, 6) != 0)
        return 0;
    if ((s = stmt(b, S_FAIR_USE, err)) == NULL)
        return -1;
    snprintf(path, sizeof path, "$.%s", f->fair_path);
    bind_text(s, 1, f->scope + 6);
    bind_text(s, 2, path);
    sqlite3_bind_double(s, 3, jr_now());
    bind_text(s, 4, f->fair_weights ? f->fair_weights : "{}");
    sqlite3_bind_double(s, 5, f->fair_default);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW)
        if (cb(col_text(s, 0), (long)sqlite3_column_int64(s, 1),
               (long)sqlite3_column_int64(s, 2), sqlite3_column_double(s, 3),
               arg) != 0)
            break;
    sqlite3_reset(s);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 :
           jr_sqlite_fail(b, err, "reading a fair queue's keys");
}

/* ---- the keys' paths, and stamping a push's key ---- */

int
jr_sqlite_fair_paths(jr_backend *b, const jr_limit *l, int n, jr_err *err)
{
    sqlite3_stmt *s;
    char path[220];
    int i, changed;

    for (i = 0; i < n; i++) {
        if (l[i].fair_path == NULL ||
            strncmp(l[i].scope, JR_LIMIT_QPREFIX, 6) != 0)
            continue;
        snprintf(path, sizeof path, "$.%s", l[i].fair_path);
        if ((s = stmt(b, S_FAIR_PATH, err)) == NULL)
            return -1;
        bind_text(s, 1, l[i].scope + 6);
        bind_text(s, 2, path);
        if ((changed = run(b, s, err, "recording a fair key path")) < 0)
            return -1;
        if (changed == 0)
            continue;
        /* new or another path: the keys of the jobs already there */
        if ((s = stmt(b, S_FAIR_BACKFILL, err)) == NULL)
            return -1;
        bind_text(s, 1, l[i].scope + 6);
        bind_text(s, 2, path);
        if (run(b, s, err, "reading the fair keys of a queue's jobs") < 0)
            return -1;
    }
    return 0;
}

int
jr_sqlite_fair_stamp(jr_backend *b, const char *queue, int64_t lo,
                     int64_t hi, jr_err *err)
{
    sqlite3_stmt *s;
    size_t len;
    int rc;

    if (queue == NULL)
        queue = "default";
    if (strcmp(queue, b->fair_seen) != 0) {
        /* once a queue a transaction: is it fair? */
        if ((s = stmt(b, S_FAIR_IS, err)) == NULL)
            return -1;
        bind_text(s, 1, queue);
        rc = sqlite3_step(s);
        b->fair_is = rc == SQLITE_ROW && sqlite3_column_int(s, 0);
        b->fair_named = rc == SQLITE_ROW && sqlite3_column_int(s, 1);
        sqlite3_reset(s);
        if (rc != SQLITE_ROW)
            return jr_sqlite_fail(b, err, "looking up a fair queue");
        b->fair_hi = 0;
        if ((len = strlen(queue)) < sizeof b->fair_seen)
            memcpy(b->fair_seen, queue, len + 1);
    }
    /* a name with weights of its own makes the queue fair (fairname.c) */
    if (!b->fair_is && b->fair_named &&
        (rc = jr_sqlite_fair_name_queue(b, queue, lo, hi, err)) != 0) {
        if (rc < 0)
            return -1;
        b->fair_is = 1;
        b->fair_hi = hi;        /* its jobs keyed, these among them */
        return 0;
    }
    if (!b->fair_is || hi <= b->fair_hi)
        return 0;
    if ((s = stmt(b, S_FAIR_STAMP, err)) == NULL)
        return -1;
    bind_text(s, 1, queue);
    sqlite3_bind_int64(s, 2, lo);
    sqlite3_bind_int64(s, 3, hi);
    if (run(b, s, err, "stamping the fair key of a push") < 0)
        return -1;
    b->fair_hi = hi;
    return 0;
}
