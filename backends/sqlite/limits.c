/* limits.c - the SQL side of limits per key: a claim's pick read from
 * the running jobs and the token buckets (limitpick.c decides), the
 * buckets written back and forgotten when full again; the key paths a
 * runner declares for its job names (push.c reads them); a limit's use
 * (`jobrunner limits`, the runner's metrics). claim.c runs the claim's
 * passes. Uses sqlite_int.h, limitpick.h and util.h's buffer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqlite/sqlite_int.h"
#include "base/util.h"

/* The file's statements: slots of sql_text[] (sqlite_int.h). */
enum { S_LIM_RUNNING, S_LIM_BUCKET, S_LIM_BUCKET_SET, S_LIM_PRUNE,
       S_LIM_PATH_SET, S_LIM_USE, S_LIM_USE_TOP, S_LIM_TOKENS,
       S_LIM_SIZES_CLEAR, S_LIM_SIZE_SET, S_COST_OVER, S_SIZES_ANY,
       S_COUNT };

static const char *const sql_text[S_COUNT] = {
    /* the running jobs' slots: a job's cost, 1 without one */
    [S_LIM_RUNNING] =
        "SELECT name, queue, limit_key, sum(coalesce(cost, 1)) FROM jobs"
        " WHERE state = 'running' GROUP BY name, queue, limit_key",
    [S_LIM_BUCKET] =
        "SELECT tokens, updated_at FROM limit_buckets"
        " WHERE scope = ?1 AND key = ?2",
    [S_LIM_BUCKET_SET] =
        "INSERT INTO limit_buckets (scope, key, tokens, updated_at)"
        " VALUES (?1, ?2, ?3, ?4) ON CONFLICT (scope, key) DO UPDATE"
        " SET tokens = excluded.tokens, updated_at = excluded.updated_at",
    /* buckets of scope ?1 full again by now ?2 at rate ?3, burst ?4 */
    [S_LIM_PRUNE] =
        "DELETE FROM limit_buckets WHERE scope = ?1"
        " AND tokens + (?2 - updated_at) * ?3 >= ?4",
    /* a limit's use: ?1 its job name or ?2 its queue (the other NULL),
     * ?3 now */
    [S_LIM_USE] =
        "SELECT coalesce(sum(state = 'running'), 0),"
        " coalesce(sum(state = 'queued' AND run_at <= ?3), 0) FROM jobs"
        " WHERE state IN ('running', 'queued')"
        " AND (?1 IS NULL OR name = ?1) AND (?2 IS NULL OR queue = ?2)",
    [S_LIM_USE_TOP] =
        "SELECT limit_key, sum(state = 'queued' AND run_at <= ?3) AS w,"
        " sum(state = 'running') FROM jobs"
        " WHERE state IN ('running', 'queued') AND limit_key IS NOT NULL"
        " AND (?1 IS NULL OR name = ?1) AND (?2 IS NULL OR queue = ?2)"
        " GROUP BY limit_key ORDER BY w DESC, limit_key LIMIT ?4",
    [S_LIM_TOKENS] =
        "SELECT tokens, updated_at FROM limit_buckets"
        " WHERE scope = ?1 AND key = ?2",
    [S_LIM_PATH_SET] =
        "INSERT OR REPLACE INTO limit_paths (name, path) VALUES (?1, ?2)",
    /* the most a job may cost under each limit (push.c reads them) */
    [S_LIM_SIZES_CLEAR] = "DELETE FROM limit_sizes",
    [S_LIM_SIZE_SET] =
        "INSERT OR REPLACE INTO limit_sizes (scope, size, what)"
        " VALUES (?1, ?2, ?3)",
    /* the limits that jobs not started cost more than (limit_sizes is
     * keyed by scope: its size and what are one a group) */
    [S_COST_OVER] =
        "SELECT l.scope, l.size, l.what, count(*), min(j.id), max(j.cost)"
        " FROM jobs j JOIN limit_sizes l"
        " ON l.scope IN (j.name, 'queue:' || j.queue)"
        " WHERE j.cost IS NOT NULL AND j.state IN ('queued', 'waiting')"
        " AND j.cost > l.size GROUP BY l.scope ORDER BY l.scope",
    /* whether any limit has a size: S_COST_OVER reads every job (the
     * planner scans jobs first whatever limit_sizes holds), which at a
     * runner's start delayed its first claim by a scan of the table */
    [S_SIZES_ANY] = "SELECT 1 FROM limit_sizes LIMIT 1",
    /* the schema's triggers (see triggers_check) */
};

static sqlite3_stmt *
stmt(jr_backend *b, int which, jr_err *err)
{
    return jr_sqlite_stmt(b, &sql_text[which], err);
}

/* Reads scope's bucket of key ("": the scope's own) into p; no row is a
 * full bucket. */
static int
lim_read_bucket(const char *scope, const char *key, void *arg)
{
    jr_backend *b = ((void **)arg)[0];
    jr_err *err = ((void **)arg)[1];
    jr_lpick *p = ((void **)arg)[2];
    sqlite3_stmt *s = stmt(b, S_LIM_BUCKET, err);
    int rc;

    if (s == NULL)
        return -1;
    bind_text(s, 1, scope);
    bind_text(s, 2, key);
    if ((rc = sqlite3_step(s)) == SQLITE_ROW &&
        jr_lpick_bucket(p, scope, key, sqlite3_column_double(s, 0),
                        sqlite3_column_double(s, 1)) < 0)
        rc = SQLITE_NOMEM;
    sqlite3_reset(s);
    if (rc == SQLITE_ROW || rc == SQLITE_DONE)
        return 0;
    return rc == SQLITE_NOMEM ? jr_fail(err, JR_ENOMEM, "sqlite: out of "
                                        "memory") :
           jr_sqlite_fail(b, err, "reading a token bucket");
}

/* Reads the running jobs and the scopes' own buckets into a new pick
 * (the keys' buckets are read as the claim meets their jobs). */
static jr_lpick *
read_pick(jr_backend *b, const jr_claim_spec *spec, double now, jr_err *err)
{
    jr_lpick *p = jr_lpick_new(spec->limits, spec->nlimits, now);
    void *arg[3] = {b, err, p};
    sqlite3_stmt *s;
    int rc = SQLITE_NOMEM, bad = p == NULL, i;

    if (!bad && !jr_lpick_caps_running(spec->limits, spec->nlimits))
        rc = SQLITE_DONE;               /* no cap: the counts go unused */
    else if (!bad && (s = stmt(b, S_LIM_RUNNING, err)) != NULL) {
        while ((rc = sqlite3_step(s)) == SQLITE_ROW)
            bad |= jr_lpick_running(p, (const char *)sqlite3_column_text(s, 0),
                                    (const char *)sqlite3_column_text(s, 1),
                                    (const char *)sqlite3_column_text(s, 2),
                                    sqlite3_column_int64(s, 3)) < 0;
        sqlite3_reset(s);
    }
    if (!bad && rc == SQLITE_DONE) {
        for (i = 0; i < spec->nlimits; i++)
            if (spec->limits[i].all.rate > 0 &&
                lim_read_bucket(spec->limits[i].scope, "", arg) < 0) {
                jr_lpick_free(p);
                return NULL;
            }
        return p;
    }
    if (bad)
        jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
    else if (rc != SQLITE_NOMEM)
        jr_sqlite_fail(b, err, "reading limits");
    jr_lpick_free(p);
    return NULL;
}

static int
rate_elem(const char *scope, double rate, void *arg)
{
    jr_buf *j = arg;
    char num[40];

    snprintf(num, sizeof num, "\":%.17g", rate);
    jr_buf_put(j, j->len > 1 ? ",\"" : "\"", j->len > 1 ? 2 : 1);
    jr_buf_put(j, scope, strlen(scope));
    return jr_buf_put(j, num, strlen(num));
}

/* {"scope": per-key rate, ...} of the limits with one, in a new string
 * (scopes are names: nothing to escape). NULL when out of memory. */
static char *
lim_rates(const jr_lpick *p)
{
    jr_buf j = {0};

    jr_buf_put(&j, "{", 1);
    jr_lpick_key_rates(p, rate_elem, &j);
    if (jr_buf_put(&j, "}", 2) < 0) {       /* and the NUL */
        jr_buf_free(&j);
        return NULL;
    }
    return j.p;
}

/* The claim's pick, lim->pick, and its per-key rates, lim->rates. */
int
jr_sqlite_lim_load(jr_backend *b, const jr_claim_spec *spec, double now,
                   limq *lim, jr_err *err)
{
    if ((lim->pick = read_pick(b, spec, now, err)) == NULL)
        return -1;
    if ((lim->rates = lim_rates(lim->pick)) == NULL)
        return jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
    return 0;
}

static int
lim_save_one(const char *scope, const char *key, double tokens, double now,
             void *arg)
{
    jr_backend *b = ((void **)arg)[0];
    jr_err *err = ((void **)arg)[1];
    sqlite3_stmt *s = stmt(b, S_LIM_BUCKET_SET, err);

    if (s == NULL)
        return -1;
    bind_text(s, 1, scope);
    bind_text(s, 2, key);
    sqlite3_bind_double(s, 3, tokens);
    sqlite3_bind_double(s, 4, now);
    return run(b, s, err, "saving a token bucket") < 0 ? -1 : 0;
}

/* Writes back the buckets the claim took from; every 64th claim also
 * forgets buckets that are full again (a missing row is full). */
int
jr_sqlite_lim_save(jr_backend *b, const jr_claim_spec *spec,
                   const jr_lpick *p, double now, jr_err *err)
{
    void *arg[2] = {b, err};
    sqlite3_stmt *s;
    int i, k;

    if (jr_lpick_dirty(p, lim_save_one, arg) < 0)
        return -1;
    if (b->rotate % 64 != 0)
        return 0;
    for (i = 0; i < spec->nlimits; i++)
        for (k = 0; k < 2; k++) {
            const jr_limit_set *set = k ? &spec->limits[i].per_key :
                                      &spec->limits[i].all;
            if (set->rate <= 0 || (s = stmt(b, S_LIM_PRUNE, err)) == NULL)
                continue;
            bind_text(s, 1, spec->limits[i].scope);
            sqlite3_bind_double(s, 2, now);
            sqlite3_bind_double(s, 3, set->rate);
            sqlite3_bind_double(s, 4, set->burst);
            if (run(b, s, err, "forgetting full buckets") < 0)
                return -1;
        }
    return 0;
}

/* Counts one more job taken from queue in lim. */
static int
lim_taken(limq *lim, const char *queue)
{
    char **qn;
    int *qt, i;

    for (i = 0; i < lim->nq; i++)
        if (strcmp(lim->qname[i], queue) == 0) {
            lim->qtaken[i]++;
            return 0;
        }
    if ((qn = realloc(lim->qname, (size_t)(lim->nq + 1) * sizeof *qn)))
        lim->qname = qn;
    if ((qt = realloc(lim->qtaken, (size_t)(lim->nq + 1) * sizeof *qt)))
        lim->qtaken = qt;
    if (qn == NULL || qt == NULL ||
        (lim->qname[lim->nq] = strdup(queue)) == NULL)
        return -1;
    lim->qtaken[lim->nq++] = 1;
    return 0;
}

/* Keeps the candidates c[0..nc) (fair order) the limits let through, at
 * most max, at the front of c; *rejected counts the others. Reads the
 * buckets of the keys it meets. Returns how many, or -1 with err set. */
int
jr_sqlite_lim_filter(jr_backend *b, limq *lim, candidate *c, int nc, int max,
                     int *rejected, jr_err *err)
{
    void *arg[3] = {b, err, lim->pick};
    int i, k = 0, rc = 0, ok;

    *rejected = 0;
    for (i = 0; i < nc; i++) {
        ok = 0;
        if (k < max && rc == 0 &&
            (rc = jr_lpick_need(lim->pick, c[i].name, c[i].queue, c[i].key,
                                lim_read_bucket, arg)) == 0 &&
            (ok = jr_lpick_take_cost(lim->pick, c[i].name, c[i].queue,
                                     c[i].key, c[i].cost)) > 0 &&
            lim_taken(lim, c[i].queue) < 0)
            ok = -1;
        if (ok < 0)
            rc = -1;
        *rejected += ok == 0 && rc == 0 && k < max;
        free(c[i].name);
        free(c[i].key);
        c[i].name = c[i].key = NULL;
        if (c[i].fkey == NULL || ok <= 0) {     /* fair: kept to count */
            free(c[i].queue);
            free(c[i].fkey);
            c[i].queue = c[i].fkey = NULL;
        }
        if (ok > 0)
            c[k++] = c[i];
    }
    if (rc == -1)
        jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
    return rc < 0 ? -1 : k;
}

void
jr_sqlite_lim_clear(limq *lim)
{
    int i;

    jr_lpick_free(lim->pick);
    free(lim->names);
    free(lim->rooms);
    free(lim->pairs);
    free(lim->rates);
    for (i = 0; i < lim->nq; i++)
        free(lim->qname[i]);
    free(lim->qname);
    free(lim->qtaken);
}

/* ---- paths and use ---- */

/* Replaces limit_sizes with the sizes of l[0..n). */
static int
limit_sizes(jr_backend *b, const jr_limit *l, int n, jr_err *err)
{
    sqlite3_stmt *s;
    char what[120];
    long size;
    int i;

    if ((s = stmt(b, S_LIM_SIZES_CLEAR, err)) == NULL ||
        run(b, s, err, "recording the limits' sizes") < 0)
        return -1;
    for (i = 0; i < n; i++) {
        if ((size = jr_limit_size(&l[i], what, sizeof what)) <= 0)
            continue;
        if ((s = stmt(b, S_LIM_SIZE_SET, err)) == NULL)
            return -1;
        bind_text(s, 1, l[i].scope);
        sqlite3_bind_int64(s, 2, size);
        bind_text(s, 3, what);
        if (run(b, s, err, "recording the limits' sizes") < 0)
            return -1;
    }
    return 0;
}

int
jr_sqlite_limit_paths(jr_backend *b, const jr_limit *l, int n, jr_err *err)
{
    sqlite3_stmt *s;
    int i;

    if (jr_sqlite_begin(b, err) < 0)
        return -1;
    if (limit_sizes(b, l, n, err) < 0 ||
        jr_sqlite_fair_paths(b, l, n, err) < 0)
        goto fail;
    for (i = 0; i < n; i++) {
        if (l[i].key_path == NULL ||
            strncmp(l[i].scope, JR_LIMIT_QPREFIX, 6) == 0)
            continue;
        if ((s = stmt(b, S_LIM_PATH_SET, err)) == NULL)
            goto fail;
        bind_text(s, 1, l[i].scope);
        bind_text(s, 2, l[i].key_path);
        if (run(b, s, err, "recording a limit key path") < 0)
            goto fail;
    }
    return jr_sqlite_commit(b, err);
fail:
    jr_sqlite_rollback(b);
    return -1;
}

int
jr_sqlite_cost_over(jr_backend *b, jr_cost_over_cb cb, void *arg,
                    jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_SIZES_ANY, err);
    int rc = SQLITE_DONE, stop = 0;

    if (s == NULL)
        return -1;
    rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc != SQLITE_ROW)
        return rc == SQLITE_DONE ? 0 :
               jr_sqlite_fail(b, err, "reading the limits' sizes");
    if ((s = stmt(b, S_COST_OVER, err)) == NULL)
        return -1;
    rc = SQLITE_DONE;
    while (!stop && (rc = sqlite3_step(s)) == SQLITE_ROW)
        stop = cb((const char *)sqlite3_column_text(s, 0),
                  (long)sqlite3_column_int64(s, 1),
                  (const char *)sqlite3_column_text(s, 2),
                  (long)sqlite3_column_int64(s, 3), sqlite3_column_int64(s, 4),
                  (long)sqlite3_column_int64(s, 5), arg);
    sqlite3_reset(s);
    return stop || rc == SQLITE_DONE ? 0 :
           jr_sqlite_fail(b, err, "reading the jobs over a limit's size");
}

/* Binds a limit's scope as ?1 (job name) or ?2 (queue), ?3 now. */
static void
bind_scope(sqlite3_stmt *s, const jr_limit *l, double now)
{
    int q = strncmp(l->scope, JR_LIMIT_QPREFIX, 6) == 0;

    bind_text(s, q ? 2 : 1, q ? l->scope + 6 : l->scope);
    sqlite3_bind_double(s, 3, now);
}

/* The tokens in scope's bucket of key ("": the scope's own) at rate and
 * burst of set at now: a bucket with no row is full. */
static int
bucket_tokens(jr_backend *b, const char *scope, const char *key,
              const jr_limit_set *set, double now, double *tokens,
              jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_LIM_TOKENS, err);
    double at;

    *tokens = set->burst;
    if (s == NULL)
        return -1;
    bind_text(s, 1, scope);
    bind_text(s, 2, key);
    if (sqlite3_step(s) == SQLITE_ROW) {
        at = sqlite3_column_double(s, 1);
        *tokens = sqlite3_column_double(s, 0) +
                  (now > at ? now - at : 0) * set->rate;
        if (*tokens > set->burst)
            *tokens = set->burst;
    }
    sqlite3_reset(s);
    return 0;
}

int
jr_sqlite_limit_use(jr_backend *b, const jr_limit *l, jr_limit_use *u,
                    jr_err *err)
{
    double now = jr_now();
    sqlite3_stmt *s;
    int rc, i, want = u->top;

    memset(u, 0, sizeof *u);
    for (i = 0; i < JR_LIMIT_TOP; i++) {
        free(b->lim_keys[i]);
        b->lim_keys[i] = NULL;
    }
    if ((s = stmt(b, S_LIM_USE, err)) == NULL)
        return -1;
    bind_scope(s, l, now);
    if ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        u->running = (long)sqlite3_column_int64(s, 0);
        u->waiting = (long)sqlite3_column_int64(s, 1);
    }
    sqlite3_reset(s);
    if (rc != SQLITE_ROW)
        return jr_sqlite_fail(b, err, "reading a limit's use");
    if (want > JR_LIMIT_TOP)
        want = JR_LIMIT_TOP;
    if (want > 0) {
        if ((s = stmt(b, S_LIM_USE_TOP, err)) == NULL)
            return -1;
        bind_scope(s, l, now);
        sqlite3_bind_int(s, 4, want);
    }
    while (want > 0 && u->ntop < want &&
           (rc = sqlite3_step(s)) == SQLITE_ROW) {
        b->lim_keys[u->ntop] = strdup((const char *)
                                      sqlite3_column_text(s, 0));
        u->top_key[u->ntop] = b->lim_keys[u->ntop] ? b->lim_keys[u->ntop] :
                              "?";
        u->top_waiting[u->ntop] = (long)sqlite3_column_int64(s, 1);
        u->top_running[u->ntop++] = (long)sqlite3_column_int64(s, 2);
    }
    sqlite3_reset(s);
    for (i = 0; i < u->ntop; i++) {
        u->top_tokens[i] = -1;
        if (l->per_key.rate > 0 &&
            bucket_tokens(b, l->scope, u->top_key[i], &l->per_key, now,
                          &u->top_tokens[i], err) < 0)
            return -1;
    }
    u->tokens = -1;
    return l->all.rate > 0 ?
           bucket_tokens(b, l->scope, "", &l->all, now, &u->tokens, err) : 0;
}
