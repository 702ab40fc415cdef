/* fair.c - fair share inside a queue on SQLite (docs/queues.md, "Fair
 * share"): a fair queue's candidates in a claim under limits, each key's
 * first ready jobs ranked by whose turn it is (fairpick.c decides), and
 * the passes of the keys that started jobs written back in the claim's
 * transaction; `jobrunner fair set`. Uses sqlite_int.h, fairpick.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqlite/sqlite_int.h"
#include "fairpick.h"
#include "base/util.h"

/* The file's statements: slots of sql_text[] (sqlite_int.h). */
enum { S_FAIR_JOBS, S_FAIR_KEY, S_FAIR_CLOCK, S_FAIR_PASS, S_FAIR_TICK,
       S_FAIR_SET, S_FAIR_USE, S_COUNT };

static const char *const sql_text[S_COUNT] = {
    /* the first ?4 ready jobs of each fair key (?8 its JSON path; none:
     * key '') of queue ?1, by key, with the filters of claim.c's
     * S_LIM_CANDIDATES */
    [S_FAIR_JOBS] =
        "SELECT id, priority, run_at, name, limit_key, k, cost FROM"
        " (SELECT id, priority, run_at, name, limit_key, k, cost,"
        "   row_number()"
        "   OVER (PARTITION BY k ORDER BY priority, run_at, id) AS r FROM"
        "  (SELECT id, priority, run_at, name, limit_key,"
        "    coalesce(cost, 1) AS cost,"
        "    coalesce(CAST(json_extract(payload, ?8) AS TEXT), '') AS k"
        "   FROM jobs"
        "   WHERE state = 'queued' AND queue = ?1 AND run_at <= ?2"
        JR_SQLITE_UNEXPIRED
        JR_SQLITE_LIM_FILTER "))"
        " WHERE r <= ?4 ORDER BY k, r",
    /* key ?2 of queue ?1: its weight (set at run time, else the config's
     * ?3 {key: weight}, else ?4) and its pass */
    [S_FAIR_KEY] =
        "SELECT coalesce((SELECT weight FROM fair_keys"
        "  WHERE queue = ?1 AND key = ?2),"
        " (SELECT value FROM json_each(?3) WHERE key = ?2), ?4),"
        " coalesce((SELECT pass FROM fair_keys"
        "  WHERE queue = ?1 AND key = ?2), 0)",
    [S_FAIR_CLOCK] = "SELECT clock FROM fair_clocks WHERE queue = ?1",
    /* a start of key ?2 of queue ?1 at clock ?3, weight ?4 */
    [S_FAIR_PASS] =
        "INSERT INTO fair_keys (queue, key, pass) VALUES (?1, ?2, ?3 + ?4)"
        " ON CONFLICT (queue, key) DO UPDATE"
        " SET pass = max(pass, ?3) + ?4",
    [S_FAIR_TICK] =
        "INSERT INTO fair_clocks (queue, clock) VALUES (?1, ?2)"
        " ON CONFLICT (queue) DO UPDATE"
        " SET clock = max(clock, excluded.clock)",
    [S_FAIR_SET] =
        "INSERT INTO fair_keys (queue, key, weight)"
        " VALUES (?1, ?2, ?3) ON CONFLICT (queue, key) DO UPDATE"
        " SET weight = excluded.weight",
    /* each key (path ?2) of queue ?1 with jobs queued or running: ready
     * by ?3, running, weight as S_FAIR_KEY's (?4, ?5) */
    [S_FAIR_USE] =
        "SELECT k, sum(state = 'queued' AND run_at <= ?3) AS w,"
        " sum(state = 'running'),"
        " coalesce((SELECT weight FROM fair_keys fk"
        "  WHERE fk.queue = ?1 AND fk.key = k),"
        "  (SELECT value FROM json_each(?4) WHERE key = k), ?5)"
        " FROM (SELECT coalesce(CAST(json_extract(payload, ?2) AS TEXT),"
        "  '') AS k, state, run_at FROM jobs"
        "  WHERE queue = ?1 AND state IN ('queued', 'running'))"
        " GROUP BY k ORDER BY w DESC, k",
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

/* Reads the weight and pass of each key of r[0..nr) into k. */
static int
key_state(jr_backend *b, const jr_limit *f, const char *queue,
          candidate *r, int nr, jr_fair_key *k, int *nk, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_FAIR_KEY, err);
    int i, rc;

    *nk = 0;
    if (s == NULL)
        return -1;
    for (i = 0; i < nr; i++) {
        if (i > 0 && strcmp(r[i].fkey, r[i - 1].fkey) == 0) {
            k[*nk - 1].njobs++;
            continue;
        }
        memset(&k[*nk], 0, sizeof k[*nk]);
        bind_text(s, 1, queue);
        bind_text(s, 2, r[i].fkey);
        bind_text(s, 3, f->fair_weights ? f->fair_weights : "{}");
        sqlite3_bind_double(s, 4, f->fair_default);
        if ((rc = sqlite3_step(s)) == SQLITE_ROW) {
            k[*nk].weight = sqlite3_column_double(s, 0);
            k[*nk].pass = sqlite3_column_double(s, 1);
        }
        sqlite3_reset(s);
        if (rc != SQLITE_ROW)
            return jr_sqlite_fail(b, err, "reading a fair key");
        if (!(k[*nk].weight > 0))
            k[*nk].weight = 1;
        k[*nk].njobs = 1;
        k[*nk].priority = r[i].priority;
        k[*nk].run_at = r[i].run_at;
        k[*nk].id = r[i].id;
        (*nk)++;
    }
    return 0;
}

static double
read_clock(jr_backend *b, const char *queue, jr_err *err, int *ok)
{
    sqlite3_stmt *s = stmt(b, S_FAIR_CLOCK, err);
    double clock = 0;
    int rc;

    *ok = 0;
    if (s == NULL)
        return 0;
    bind_text(s, 1, queue);
    if ((rc = sqlite3_step(s)) == SQLITE_ROW)
        clock = sqlite3_column_double(s, 0);
    sqlite3_reset(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        jr_sqlite_fail(b, err, "reading a fair clock");
    else
        *ok = 1;
    return clock;
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
    sqlite3_stmt *s = stmt(b, S_FAIR_JOBS, err);
    candidate *r = NULL, *bigger;
    jr_fair_key *k = NULL;
    int *order = NULL, *first = NULL;
    int nr = 0, rcap = 0, nk = 0, rc, i, m, ok;
    double clock;
    char path[220];
    const char *key;

    if (s == NULL)
        return -1;
    snprintf(path, sizeof path, "$.%s", f->fair_path);
    bind_text(s, 1, queue);
    sqlite3_bind_double(s, 2, now);
    bind_text(s, 3, json);
    sqlite3_bind_int(s, 4, cap);
    bind_text(s, 5, lim->names);
    bind_text(s, 6, lim->pairs);
    bind_text(s, 7, lim->rates);
    bind_text(s, 10, lim->rooms);
    bind_text(s, 8, path);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (nr == rcap) {
            rcap = rcap ? rcap * 2 : 64;
            if ((bigger = realloc(r, (size_t)rcap * sizeof *r)) == NULL)
                break;
            r = bigger;
        }
        memset(&r[nr], 0, sizeof r[nr]);
        r[nr].id = sqlite3_column_int64(s, 0);
        r[nr].priority = sqlite3_column_int(s, 1);
        r[nr].run_at = sqlite3_column_double(s, 2);
        key = (const char *)sqlite3_column_text(s, 4);
        r[nr].name = strdup((const char *)sqlite3_column_text(s, 3));
        r[nr].queue = strdup(queue);
        r[nr].key = key ? strdup(key) : NULL;
        r[nr].fkey = strdup((const char *)sqlite3_column_text(s, 5));
        r[nr].cost = (long)sqlite3_column_int64(s, 6);
        nr++;
        if (!r[nr - 1].name || !r[nr - 1].queue || !r[nr - 1].fkey ||
            (key && !r[nr - 1].key))
            break;
    }
    sqlite3_reset(s);
    if (rc == SQLITE_ROW) {
        rows_free(r, nr);
        return jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
    }
    if (rc != SQLITE_DONE) {
        rows_free(r, nr);
        return jr_sqlite_fail(b, err, "claiming jobs of a fair queue");
    }
    if (nr == 0)
        return 0;
    k = calloc((size_t)nr, sizeof *k);
    first = calloc((size_t)nr, sizeof *first);
    order = calloc((size_t)cap, sizeof *order);
    if (k == NULL || first == NULL || order == NULL) {
        jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
        goto fail;
    }
    if (key_state(b, f, queue, r, nr, k, &nk, err) < 0)
        goto fail;
    clock = read_clock(b, queue, err, &ok);
    if (!ok)
        goto fail;
    clock = jr_fair_clock(k, nk, clock);
    for (i = 1; i < nk; i++)
        first[i] = first[i - 1] + k[i - 1].njobs;
    m = jr_fair_order(k, nk, clock, cap, order);
    for (i = 0; i < nk; i++)
        k[i].next = 0;
    for (i = 0; i < m; i++) {
        candidate *from = &r[first[order[i]] + k[order[i]].next++];
        c[*n] = *from;
        memset(from, 0, sizeof *from);      /* its strings move to c */
        c[*n].rank = i;
        c[*n].fweight = k[order[i]].weight;
        c[*n].fclock = clock;
        (*n)++;
    }
    rows_free(r, nr);
    free(k);
    free(first);
    free(order);
    return 0;
fail:
    rows_free(r, nr);
    free(k);
    free(first);
    free(order);
    return -1;
}

int
jr_sqlite_fair_save(jr_backend *b, const candidate *c, int n, jr_err *err)
{
    sqlite3_stmt *s;
    int i;

    for (i = 0; i < n; i++) {
        if (c[i].fkey == NULL)
            continue;
        if ((s = stmt(b, S_FAIR_PASS, err)) == NULL)
            return -1;
        bind_text(s, 1, c[i].queue);
        bind_text(s, 2, c[i].fkey);
        sqlite3_bind_double(s, 3, c[i].fclock);
        sqlite3_bind_double(s, 4, 1 / c[i].fweight);
        if (run(b, s, err, "counting a fair key's start") < 0)
            return -1;
        if ((s = stmt(b, S_FAIR_TICK, err)) == NULL)
            return -1;
        bind_text(s, 1, c[i].queue);
        sqlite3_bind_double(s, 2, c[i].fclock);
        if (run(b, s, err, "moving a fair queue's clock") < 0)
            return -1;
    }
    return 0;
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
