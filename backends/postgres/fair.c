/* fair.c - fair share inside a queue on PostgreSQL (docs/queues.md,
 * "Fair share"): in a claim under limits (limits.c), each fair queue's
 * first ready jobs per key ranked by whose turn it is (fairpick.c), the
 * picked rows locked (FOR UPDATE SKIP LOCKED), and the passes of the keys
 * that started jobs written back in the claim's transaction; `jobrunner
 * fair set`. Uses pg_int.h, arrays.h, fairpick.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "postgres/pg_int.h"
#include "postgres/arrays.h"
#include "base/limit.h"
#include "fairpick.h"

/* A key's jobs in jobs_fair: as a range (and ordered by fair_key first),
 * not fair_key = K, which left the planner free to read jobs_claim in
 * claim order filtering on the key (the same cost for it before the
 * table's first ANALYZE, e.g. just after a big push): a scan of the
 * queue's jobs up to the key's first, a key. */
#define FAIR_KEY_IS(k) " fair_key >= " k " AND fair_key <= " k

/* The first queued job of the first key of queue $1 AFTER (a test of
 * fair_key), in jobs_fair's order: its key, and whether it is ready. */
#define FAIR_FIRST(after) \
    " (SELECT fair_key AS k, run_at <= now()" JR_PG_UNEXPIRED " AS r" \
    "  FROM {{schema}}.jobs WHERE state = 'queued' AND queue = $1::text" \
    "  AND fair_key IS NOT NULL AND fair_key " after \
    "  ORDER BY fair_key, priority, run_at, id LIMIT 1) f"

/* The next $3 keys of queue $1 with queued jobs after key $2 (FIRST's
 * test), one seek each in jobs_fair for the key's first queued job (a
 * key without queued jobs is not there). Each with its weight (set at
 * run time, else the config's $4, else $5), its pass, and whether it has
 * a job ready now: its first one is, or (only then, CASE) a seek for the
 * first ready one (FAIR_KEY_IS), not an EXISTS, which the planner made a
 * hashed subplan reading every queued job of the queue each statement.
 * Half the pages of a seek for the next key and another for its first
 * ready job. */
#define FAIR_NEXT(first) \
    "WITH RECURSIVE w(k, r, n) AS (SELECT f.k, f.r, 1 FROM" \
    FAIR_FIRST(first " $2::text") \
    " UNION ALL SELECT f.k, f.r, w.n + 1 FROM w CROSS JOIN LATERAL" \
    FAIR_FIRST("> w.k") " WHERE w.n < $3::int)" \
    " SELECT w.k, coalesce(fk.weight, ($4::jsonb ->> w.k)::float8," \
    "  $5::float8), coalesce(fk.pass, 0), CASE WHEN w.r THEN true" \
    "  ELSE (SELECT 1 FROM {{schema}}.jobs WHERE state = 'queued'" \
    "  AND queue = $1::text AND fair_key IS NOT NULL AND" \
    FAIR_KEY_IS("w.k") " AND run_at <= now()" JR_PG_UNEXPIRED \
    "  ORDER BY fair_key, priority, run_at, id LIMIT 1) IS NOT NULL END" \
    " FROM w LEFT JOIN LATERAL (SELECT weight, pass" \
    "  FROM {{schema}}.fair_keys WHERE queue = $1::text AND key = w.k) fk" \
    "  ON true ORDER BY w.n"

static const pg_stmt st_fair_after = {"jr_fair_after", 5, FAIR_NEXT(">")};
static const pg_stmt st_fair_from = {"jr_fair_from", 5, FAIR_NEXT(">=")};

/* the first $9[i] ready jobs of each fair key $3[i] of queue $2
 * (jobs_fair, FAIR_KEY_IS), with the filters of limits.c's
 * st_lim_candidates (JR_PG_PICK_FILTER), locked (not those another claim holds), by key */
static const pg_stmt st_fair_take = {"jr_fair_take", 10,
    "SELECT j.id, j.name, j.queue, j.limit_key, u.k, u.i,"
    " coalesce(j.cost, 1)"
    " FROM unnest($3::text[], $9::int[]) WITH ORDINALITY AS u(k, c, i)"
    " CROSS JOIN LATERAL (SELECT id, name, queue, limit_key, priority,"
    "  run_at, cost FROM {{schema}}.jobs"
    "  WHERE state = 'queued' AND queue = $2::text"
    "  AND fair_key IS NOT NULL AND" FAIR_KEY_IS("u.k")
    "  AND run_at <= now()"
    JR_PG_UNEXPIRED
    JR_PG_PICK_FILTER
    "  ORDER BY fair_key, priority, run_at, id LIMIT u.c"
    "  FOR UPDATE SKIP LOCKED) j"
    " ORDER BY u.i, j.priority, j.run_at, j.id"};

static const pg_stmt st_fair_clock = {"jr_fair_clock", 1,
    "SELECT clock, cursor FROM {{schema}}.fair_clocks"
    " WHERE queue = $1::text"};

/* where the walk of queue $1's keys goes on from ($3), and its clock */
static const pg_stmt st_fair_cursor = {"jr_fair_cursor", 3,
    "INSERT INTO {{schema}}.fair_clocks (queue, clock, cursor)"
    " VALUES ($1::text, $2::float8, $3::text) ON CONFLICT (queue) DO UPDATE"
    " SET clock = greatest({{schema}}.fair_clocks.clock, $2::float8),"
    " cursor = excluded.cursor"};

/* fair queue $1's key path $2 and, when it is new or changed, the key of
 * each job of the queue not ended, at its name's path (fair_names) or
 * else $2: one statement, so a failing key (or a runner killed between
 * the two) leaves no path recorded over jobs it did not key, whose
 * queue's claim would skip them for good */
static const pg_stmt st_fair_path = {"jr_fair_path_keys2", 2,
    "WITH p AS (INSERT INTO {{schema}}.fair_paths (queue, path)"
    " VALUES ($1::text, $2::text[]) ON CONFLICT (queue) DO UPDATE"
    " SET path = excluded.path"
    " WHERE {{schema}}.fair_paths.path <> excluded.path RETURNING 1)"
    " UPDATE {{schema}}.jobs j SET fair_key = coalesce((SELECT"
    " CASE WHEN fn.weights IS NOT NULL THEN j.name || chr(31) ELSE '' END"
    " || coalesce(j.payload #>> fn.path, '') FROM {{schema}}.fair_names fn"
    " WHERE fn.name = j.name), j.payload #>> $2::text[], '')"
    " WHERE EXISTS (SELECT 1 FROM p) AND j.queue = $1::text"
    " AND j.state IN ('queued', 'running', 'waiting')"};

/* the starts of a claim in fair queue $1 at clock $2: $4[i] starts of
 * key $3[i], each of 1/weight $5[i] (its pass from the clock, or on from
 * where it is when that is past the clock: greatest(pass, clock) + d) */
static const pg_stmt st_fair_pass = {"jr_fair_pass", 5,
    "WITH p AS (INSERT INTO {{schema}}.fair_keys (queue, key, pass)"
    " SELECT $1::text, u.k, $2::float8 + u.n * u.inc"
    " FROM unnest($3::text[], $4::int[], $5::float8[]) AS u(k, n, inc)"
    " ON CONFLICT (queue, key) DO UPDATE SET pass ="
    "  greatest({{schema}}.fair_keys.pass + excluded.pass - $2::float8,"
    "  excluded.pass) RETURNING 1)"
    " INSERT INTO {{schema}}.fair_clocks (queue, clock)"
    " VALUES ($1::text, $2::float8) ON CONFLICT (queue) DO UPDATE"
    " SET clock = greatest({{schema}}.fair_clocks.clock, $2::float8)"};

static const pg_stmt st_fair_set = {"jr_fair_set", 3,
    "INSERT INTO {{schema}}.fair_keys (queue, key, weight)"
    " VALUES ($1::text, $2::text, $3::float8)"
    " ON CONFLICT (queue, key) DO UPDATE SET weight = excluded.weight"};

const jr_limit *
jr_pg_fair_of(const jr_claim_spec *spec, const char *queue)
{
    int i;

    for (i = 0; spec && i < spec->nlimits; i++)
        if (spec->limits[i].fair_path &&
            strncmp(spec->limits[i].scope, JR_LIMIT_QPREFIX, 6) == 0 &&
            (queue == NULL || strcmp(spec->limits[i].scope + 6, queue) == 0))
            return &spec->limits[i];
    return NULL;
}

/* How many jobs spec lets one claim take from queue. */
static int
queue_cap(const jr_claim_spec *spec, const char *queue, int max)
{
    int i, cap = -1;

    for (i = 0; i < spec->nqueues; i++)
        if (strcmp(spec->queues[i].queue, queue) == 0 &&
            (cap < 0 || spec->queues[i].max < cap))
            cap = spec->queues[i].max;
    if (cap < 0)
        cap = spec->others;
    return cap < max ? cap : max;
}

/* The claim walks a fair queue's keys with queued jobs (jobs_fair, one
 * seek a key) from the key it last started, FAIR_BATCH a statement at
 * most, and no more than the keys it still needs (FAIR_FEW at least):
 * the server reads every key a statement asks for, and a claim of 300
 * keys asked for 512 of them. */
#define FAIR_BATCH 256
#define FAIR_FEW 16

typedef struct walked {
    char   *key;
    double  weight, pass;
} walked;

typedef struct walk {
    walked *w;
    int     n, cap;
    int     atclock;            /* of w: keys at the clock (or below) */
    int     round;              /* 1: every key was met (the walk went
                                 * round), not only cap at the clock */
} walk;

static void
walk_free(walk *wk)
{
    int i;

    for (i = 0; i < wk->n; i++)
        free(wk->w[i].key);
    free(wk->w);
}

/* One statement of the walk: keys after *pos (start: from "" on), up to
 * stop (NULL: the end) included. Sets *pos to the last key read; *end
 * when the keys ran out or passed stop. 0, or -1 with err set. */
static int
walk_step(jr_backend *b, const jr_limit *f, const char *queue, double clock,
          int start, char **pos, const char *stop, int cap, walk *wk,
          int *end, jr_err *err)
{
    char sbatch[16], sdef[32];
    int batch = cap - wk->atclock;
    const char *params[5];
    const char *k;
    walked *bigger;
    PGresult *res;
    int i, rows;

    batch = batch < FAIR_FEW ? FAIR_FEW : batch > FAIR_BATCH ? FAIR_BATCH :
            batch;
    snprintf(sbatch, sizeof sbatch, "%d", batch);
    snprintf(sdef, sizeof sdef, "%.17g", f->fair_default);
    params[0] = queue;
    params[1] = start ? "" : *pos;
    params[2] = sbatch;
    params[3] = f->fair_weights ? f->fair_weights : "{}";
    params[4] = sdef;
    if ((res = jr_pg_run(b, start ? &st_fair_from : &st_fair_after, params,
                         "walking a fair queue's keys", err)) == NULL)
        return -1;
    rows = PQntuples(res);
    *end = rows < batch;
    for (i = 0; i < rows; i++) {
        k = PQgetvalue(res, i, 0);
        if (stop != NULL && strcmp(k, stop) > 0) {
            *end = 1;
            break;
        }
        free(*pos);
        if ((*pos = strdup(k)) == NULL)
            goto oom;
        if (strcmp(PQgetvalue(res, i, 3), "t") != 0)
            continue;                   /* none ready yet */
        if (wk->n == wk->cap) {
            wk->cap = wk->cap ? wk->cap * 2 : 64;
            if ((bigger = realloc(wk->w, (size_t)wk->cap * sizeof *bigger))
                == NULL)
                goto oom;
            wk->w = bigger;
        }
        if ((wk->w[wk->n].key = strdup(k)) == NULL)
            goto oom;
        wk->w[wk->n].weight = strtod(PQgetvalue(res, i, 1), NULL);
        if (!(wk->w[wk->n].weight > 0))
            wk->w[wk->n].weight = 1;
        if (jr_pg_fair_name_weight(b, k, &wk->w[wk->n].weight, err) < 0) {
            free(wk->w[wk->n].key);     /* a key in a name's scope */
            PQclear(res);
            return -1;
        }
        wk->w[wk->n].pass = strtod(PQgetvalue(res, i, 2), NULL);
        wk->atclock += wk->w[wk->n].pass <= clock;
        wk->n++;
        if (wk->atclock >= cap)
            break;
    }
    PQclear(res);
    return 0;
oom:
    PQclear(res);
    return jr_fail(err, JR_ENOMEM, "postgres: claiming jobs: out of memory");
}

/* Walks the keys of queue with ready jobs from cursor round, until cap
 * of them are at the clock (their turn comes first, in walk order) or
 * every key was met (wk->round: the turns are then by pass). */
static int
walk_keys(jr_backend *b, const jr_limit *f, const char *queue, double clock,
          const char *cursor, int cap, walk *wk, jr_err *err)
{
    char *pos = cursor ? strdup(cursor) : NULL;
    int second = cursor == NULL, start = second, end = 0, rc = 0;

    if (cursor != NULL && pos == NULL)
        return jr_fail(err, JR_ENOMEM, "postgres: out of memory");
    /* after the cursor to the last key, then from the first to it */
    for (;;) {
        rc = walk_step(b, f, queue, clock, start, &pos,
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

/* The picked jobs of fair queue (limit f) at most cap, appended to fr in
 * turn, locked. */
static int
queue_read(jr_backend *b, const jr_limit *f, const char *queue, int cap,
           const char *const *lists, jr_pg_fair_rows *fr, jr_err *err)
{
    walk wk = {0};
    jr_fair_key *k = NULL;
    jr_buf keys = {0}, counts = {0};
    jr_pg_fair_row *grown;
    PGresult *res = NULL;
    const char *params[10];
    char *cursor = NULL, num[32];
    int *order = NULL, *first = NULL, *got = NULL, *map = NULL, *plan = NULL;
    int nk = 0, i, m, r, at, last = -1, rc = -1;
    double clock = 0;

    params[0] = queue;
    if ((res = jr_pg_run(b, &st_fair_clock, params, "reading a fair clock",
                         err)) == NULL)
        return -1;
    if (PQntuples(res) == 1) {
        clock = strtod(PQgetvalue(res, 0, 0), NULL);
        if (!PQgetisnull(res, 0, 1) &&
            (cursor = strdup(PQgetvalue(res, 0, 1))) == NULL) {
            PQclear(res);
            return jr_fail(err, JR_ENOMEM, "postgres: out of memory");
        }
    }
    PQclear(res);
    res = NULL;
    if (walk_keys(b, f, queue, clock, cursor, cap, &wk, err) < 0)
        goto out;
    rc = 0;
    if (wk.n == 0)
        goto out;
    rc = -1;
    k = calloc((size_t)wk.n, sizeof *k);
    map = calloc((size_t)wk.n, sizeof *map);
    first = calloc((size_t)wk.n + 1, sizeof *first);
    got = calloc((size_t)wk.n, sizeof *got);
    plan = calloc((size_t)wk.n, sizeof *plan);
    order = calloc((size_t)cap, sizeof *order);
    if (!k || !map || !first || !got || !plan || !order)
        goto oom;
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
    for (i = 0; i < nk; i++)
        if (k[i].next > 0) {
            sb_elem(&keys, wk.w[map[i]].key);
            snprintf(num, sizeof num, "%d", k[i].next);
            sb_num(&counts, num);
        }
    /* one statement reads and locks the jobs of every key picked */
    params[0] = lists[0];
    params[1] = queue;
    params[2] = sb_array(&keys);
    params[3] = lists[1];
    params[4] = lists[2];
    params[5] = lists[3];
    params[6] = lists[4];
    params[7] = lists[5];
    params[8] = sb_array(&counts);
    params[9] = lists[6];
    if (keys.oom || counts.oom)
        goto oom;
    if ((res = jr_pg_run(b, &st_fair_take, params, "claiming jobs of a "
                         "fair queue", err)) == NULL)
        goto out;
    /* its rows by key, in the order of the keys picked (u.i from 1) */
    for (i = 0, at = 0, r = 0; i < nk; i++) {
        first[i] = r;
        if (k[i].next > 0) {
            at++;
            while (r < PQntuples(res) && atoi(PQgetvalue(res, r, 5)) == at)
                r++;
        }
        got[i] = r - first[i];
        plan[i] = k[i].next;
        k[i].next = 0;
    }
    if (fr->n + m > fr->cap) {
        int ncap = (fr->n + m) * 2;
        if ((grown = realloc(fr->row, (size_t)ncap * sizeof *grown)) == NULL)
            goto oom;
        fr->row = grown;
        fr->cap = ncap;
    }
    for (i = 0, r = 0; i < m; i++) {
        jr_pg_fair_row *row = &fr->row[fr->n];
        int o = order[i];

        if (k[o].next >= got[o])
            continue;           /* fewer the limits let by, or locked */
        at = first[o] + k[o].next++;
        row->id = PQgetvalue(res, at, 0);
        row->name = PQgetvalue(res, at, 1);
        row->queue = PQgetvalue(res, at, 2);
        row->key = PQgetisnull(res, at, 3) ? NULL : PQgetvalue(res, at, 3);
        row->fkey = PQgetvalue(res, at, 4);
        row->cost = atol(PQgetvalue(res, at, 6));
        row->rank = ++r;
        row->weight = k[o].weight;
        row->clock = clock;
        fr->n++;
        if (map[o] > last)
            last = map[o];
    }
    fr->res[fr->nres++] = res;          /* the rows point into it */
    res = NULL;
    rc = 0;
    if (last >= 0) {
        snprintf(num, sizeof num, "%.17g", wk.round ?
                 jr_fair_after(k, nk, plan, clock) : clock);
        params[0] = queue;
        params[1] = num;
        params[2] = wk.w[last].key;
        if ((res = jr_pg_run(b, &st_fair_cursor, params, "moving a fair "
                             "queue's cursor", err)) == NULL)
            rc = -1;
    }
    goto out;
oom:
    jr_fail(err, JR_ENOMEM, "postgres: claiming jobs: out of memory");
out:
    PQclear(res);
    walk_free(&wk);
    jr_buf_free(&keys);
    jr_buf_free(&counts);
    free(cursor);
    free(k);
    free(map);
    free(first);
    free(got);
    free(plan);
    free(order);
    return rc;
}

int
jr_pg_fair_read(jr_backend *b, const jr_claim_spec *spec, int max,
                const char *const *lists, jr_pg_fair_rows *fr, jr_err *err)
{
    int i, cap;

    for (i = 0; i < spec->nlimits; i++) {
        const jr_limit *f = &spec->limits[i];
        if (f->fair_path == NULL ||
            strncmp(f->scope, JR_LIMIT_QPREFIX, 6) != 0 ||
            (cap = queue_cap(spec, f->scope + 6, max)) <= 0 ||
            fr->nres == (int)(sizeof fr->res / sizeof fr->res[0]))
            continue;
        if (queue_read(b, f, f->scope + 6, cap, lists, fr, err) < 0)
            return -1;
    }
    return 0;
}

/* The path of fair limit f as a text[] literal ("{a,b}"). */
static void
path_array(const jr_limit *f, char *path, size_t size)
{
    char *p;

    snprintf(path, size, "{%s}", f->fair_path);
    for (p = path; *p; p++)
        if (*p == '.')
            *p = ',';
}

int
jr_pg_fair_paths(jr_backend *b, const jr_limit *l, int n, jr_err *err)
{
    const char *params[2];
    char path[220];
    PGresult *res;
    int i, rc = 0;

    for (i = 0; rc == 0 && i < n; i++) {
        if (l[i].fair_path == NULL ||
            strncmp(l[i].scope, JR_LIMIT_QPREFIX, 6) != 0)
            continue;
        path_array(&l[i], path, sizeof path);
        params[0] = l[i].scope + 6;
        params[1] = path;
        if ((res = jr_pg_run(b, &st_fair_path, params, "recording a fair "
                             "key path and keying its queue's jobs",
                             err)) == NULL)
            rc = -1;
        else
            PQclear(res);
    }
    return rc;
}

void
jr_pg_fair_rows_clear(jr_pg_fair_rows *fr)
{
    int i;

    for (i = 0; i < fr->nres; i++)
        PQclear(fr->res[i]);
    free(fr->row);
    memset(fr, 0, sizeof *fr);
}

/* Orders taken rows by queue, then key. */
static int
by_queue_key(const void *a, const void *b)
{
    const jr_pg_fair_row *x = *(const jr_pg_fair_row *const *)a,
                         *y = *(const jr_pg_fair_row *const *)b;
    int c = strcmp(x->queue, y->queue);

    return c != 0 ? c : strcmp(x->fkey, y->fkey);
}

/* One statement for the starts t[0..n) of one queue, by key. */
static int
save_queue(jr_backend *b, const jr_pg_fair_row **t, int n, jr_err *err)
{
    jr_buf keys = {0}, counts = {0}, incs = {0};
    const char *params[5];
    char sclock[32], num[32];
    PGresult *res = NULL;
    int i, j;

    for (i = 0; i < n; i = j) {
        for (j = i + 1; j < n && strcmp(t[j]->fkey, t[i]->fkey) == 0; j++)
            ;
        sb_elem(&keys, t[i]->fkey);
        snprintf(num, sizeof num, "%d", j - i);
        sb_num(&counts, num);
        snprintf(num, sizeof num, "%.17g", 1 / t[i]->weight);
        sb_num(&incs, num);
    }
    snprintf(sclock, sizeof sclock, "%.17g", t[0]->clock);
    params[0] = t[0]->queue;
    params[1] = sclock;
    params[2] = sb_array(&keys);
    params[3] = sb_array(&counts);
    params[4] = sb_array(&incs);
    if (keys.oom || counts.oom || incs.oom)
        jr_fail(err, JR_ENOMEM, "postgres: out of memory");
    else
        res = jr_pg_run(b, &st_fair_pass, params, "counting a fair key's "
                        "starts", err);
    jr_buf_free(&keys);
    jr_buf_free(&counts);
    jr_buf_free(&incs);
    if (res == NULL)
        return -1;
    PQclear(res);
    return 0;
}

int
jr_pg_fair_save(jr_backend *b, const jr_pg_fair_row *const *taken, int n,
                jr_err *err)
{
    const jr_pg_fair_row **t = malloc((size_t)(n > 0 ? n : 1) * sizeof *t);
    int i, j, m = 0, rc = 0;

    if (t == NULL)
        return jr_fail(err, JR_ENOMEM, "postgres: out of memory");
    for (i = 0; i < n; i++)
        if (taken[i]->fkey != NULL)     /* else an aging queue's (aging.c) */
            t[m++] = taken[i];
    qsort(t, (size_t)m, sizeof *t, by_queue_key);
    for (i = 0; rc == 0 && i < m; i = j) {
        for (j = i + 1; j < m && strcmp(t[j]->queue, t[i]->queue) == 0; j++)
            ;
        rc = save_queue(b, t + i, j - i, err);
    }
    free(t);
    return rc;
}

int
jr_pg_fair_set(jr_backend *b, const char *queue, const char *key,
               double weight, jr_err *err)
{
    char w[32];
    const char *params[3] = {queue, key, w};
    PGresult *res;

    snprintf(w, sizeof w, "%.17g", weight);
    if (jr_pg_ready(b, err) < 0 ||
        (res = jr_pg_run(b, &st_fair_set, params, "setting a fair weight",
                         err)) == NULL)
        return -1;
    PQclear(res);
    return 0;
}

/* each key (path $2) of queue $1 with jobs queued or running: ready,
 * running, weight as st_fair_keys' ($3, $4); a name's with fair weights
 * of its own are its (fairname.c's st_fn_use) */
static const pg_stmt st_fair_use = {"jr_fair_use", 4,
    "SELECT x.k, count(*) FILTER (WHERE x.state = 'queued'"
    "  AND x.run_at <= now()) AS w,"
    " count(*) FILTER (WHERE x.state = 'running'),"
    " coalesce(fk.weight, ($3::jsonb ->> x.k)::float8, $4::float8)"
    " FROM (SELECT coalesce(payload #>> $2::text[], '') AS k, state, run_at"
    "  FROM {{schema}}.jobs WHERE queue = $1::text"
    "  AND state IN ('queued', 'running') AND name NOT IN (SELECT name"
    "  FROM {{schema}}.fair_names WHERE weights IS NOT NULL)) x"
    " LEFT JOIN {{schema}}.fair_keys fk ON fk.queue = $1::text"
    " AND fk.key = x.k"
    " GROUP BY x.k, fk.weight ORDER BY w DESC, x.k COLLATE \"C\""};

int
jr_pg_fair_use(jr_backend *b, const jr_limit *f, jr_fair_use_cb cb,
               void *arg, jr_err *err)
{
    char path[220], sdef[32], *p;
    const char *params[4];
    PGresult *res;
    int i;

    if (f->fair_path == NULL || strncmp(f->scope, JR_LIMIT_QPREFIX, 6) != 0)
        return 0;
    snprintf(path, sizeof path, "{%s}", f->fair_path);
    for (p = path; *p; p++)
        if (*p == '.')
            *p = ',';
    snprintf(sdef, sizeof sdef, "%.17g", f->fair_default);
    params[0] = f->scope + 6;
    params[1] = path;
    params[2] = f->fair_weights ? f->fair_weights : "{}";
    params[3] = sdef;
    if (jr_pg_ready(b, err) < 0 ||
        (res = jr_pg_run(b, &st_fair_use, params, "reading a fair queue's "
                         "keys", err)) == NULL)
        return -1;
    for (i = 0; i < PQntuples(res); i++)
        if (cb(PQgetvalue(res, i, 0), atol(PQgetvalue(res, i, 1)),
               atol(PQgetvalue(res, i, 2)), strtod(PQgetvalue(res, i, 3),
                                                   NULL), arg) != 0)
            break;
    PQclear(res);
    return 0;
}

typedef struct idw {
    int64_t id;
    double  weight;
} idw;

static int
idw_cmp(const void *a, const void *b)
{
    const idw *x = a, *y = b;

    return (x->id > y->id) - (x->id < y->id);
}

void
jr_pg_fair_mark(const jr_pg_fair_row *const *taken, int n, jr_job **out,
                int k)
{
    idw *v, key, *at;
    int i, m = 0;

    if (n <= 0 || (v = malloc((size_t)n * sizeof *v)) == NULL)
        return;                 /* the master deals them unweighted */
    for (i = 0; i < n; i++)
        if (taken[i]->fkey != NULL) {
            v[m].id = strtoll(taken[i]->id, NULL, 10);
            v[m++].weight = taken[i]->weight;
        }
    qsort(v, (size_t)m, sizeof *v, idw_cmp);
    for (i = 0; i < k; i++) {
        key.id = out[i]->id;
        if ((at = bsearch(&key, v, (size_t)m, sizeof *v, idw_cmp)) != NULL)
            out[i]->fair_weight = at->weight;
    }
    free(v);
}
