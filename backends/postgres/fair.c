/* fair.c - fair share inside a queue on PostgreSQL (docs/queues.md,
 * "Fair share"): in a claim under limits (limits.c), each fair queue's
 * first ready jobs by (priority, start tag, id), one range of
 * jobs_fairtag, the picked rows locked (FOR UPDATE SKIP LOCKED), the
 * queue's untagged jobs tagged first and its clock moved to the tags
 * taken, in the claim's transaction; the keys' paths and weights
 * recorded for inserts (jobs_queue_known tags them); the re-tagging
 * `fair set` (fairset.c) asks for. Uses pg_int.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "postgres/pg_int.h"
#include "base/limit.h"

/* The weight of fair key k, the one place the claim looks it up (the
 * tags of an insert statement: jobs_queue_known, schema.sql's migration
 * 34): a key in a job name's scope (NAME, chr(31), value) has its
 * name's (fair_name_w: fair set --name's, its handler's weights', its
 * default; called for such keys only, the function is not inlined: a
 * call a row); else fk its row of fair_keys (`fair set`'s weight, else the
 * config's, cweight), fp its queue's row of fair_paths (the config's
 * default); 1 without them. */
#define FAIR_W(k) "coalesce(CASE WHEN strpos(" k ", chr(31)) > 1" \
    " THEN {{schema}}.fair_name_w(" k ") END, fk.weight, fk.cweight," \
    " fp.wdefault, 1)"

/* The queued jobs of queue $1 without a tag and due (jobs_fairnew, by
 * run_at: claimed and back to queued, pushed waiting or to run later, or
 * keyed by a path recorded after their push) tagged in id order: a job not
 * yet due takes no turn of its key, and is tagged from the queue's clock
 * once due; each key's finish moves on by their count over its weight, from
 * the queue's clock when it was behind it (one upsert a key, keys in
 * order), then its jobs take the tags up to it, 1/weight apart (two
 * statements: the second reads the finishes the first wrote; one, with the
 * upsert's rows joined to the jobs, was planned as a nested loop over both,
 * on estimates of one row). What jobs_queue_known does for an insert.
 * fair_key is COLLATE "C", fair_keys.key not: the key compared in the
 * latter's collation, or fair_keys_pkey cannot be used for it. */
#define UNTAGGED(cols) \
    " SELECT " cols " FROM {{schema}}.jobs WHERE queue = $1::text" \
    " AND run_at <= now() AND state = 'queued' AND fair_key IS NOT NULL" \
    " AND fair_tag IS NULL"
/* A key's finish moved on by excluded.n jobs, in an upsert of fair_keys
 * k: from its base while it is ahead of the queue's clock (excluded.base),
 * else from the clock; its n-th job since its base is tagged base +
 * n / tw (jobs_queue_known, fair_stamp: migration 39), one formula for a
 * push alone, a batch and this, so their tags agree bit for bit. */
#define FAIR_AHEAD "k.pass > excluded.base AND k.base IS NOT NULL"
#define FAIR_UPSERT \
    " ON CONFLICT (queue, key) DO UPDATE SET" \
    " base = CASE WHEN " FAIR_AHEAD " THEN k.base ELSE excluded.base END," \
    " n = CASE WHEN " FAIR_AHEAD " THEN k.n + excluded.n" \
    "  ELSE excluded.n END," \
    " pass = CASE WHEN " FAIR_AHEAD \
    "  THEN k.base + (k.n + excluded.n) / excluded.tw ELSE excluded.pass END," \
    " tw = excluded.tw"
static const pg_stmt st_fair_fin = {"jr_fair_fin2", 1,
    "INSERT INTO {{schema}}.fair_keys AS k (queue, key, pass, base, n, tw)"
    " SELECT $1::text, c.key, coalesce(fc.clock, 0) + c.cnt / w.w,"
    " coalesce(fc.clock, 0), c.cnt, w.w"
    " FROM (" UNTAGGED("fair_key COLLATE \"default\" AS key,"
                       " count(*) AS cnt") " GROUP BY 1) c"
    " LEFT JOIN {{schema}}.fair_keys fk ON fk.queue = $1::text"
    "  AND fk.key = c.key"
    " LEFT JOIN {{schema}}.fair_paths fp ON fp.queue = $1::text"
    " LEFT JOIN {{schema}}.fair_clocks fc ON fc.queue = $1::text"
    " CROSS JOIN LATERAL (SELECT " FAIR_W("c.key") " AS w) w"
    " ORDER BY c.key"
    FAIR_UPSERT};
static const pg_stmt st_fair_tag = {"jr_fair_tag2", 1,
    "UPDATE {{schema}}.jobs j SET (fair_tag, fair_w) = (SELECT fk.base"
    "  + (fk.n - x.cnt + x.rn - 1) / fk.tw, fk.tw"
    "  FROM {{schema}}.fair_keys fk"
    "  WHERE fk.queue = $1::text AND fk.key = x.key)"
    " FROM (SELECT t.id, t.key,"
    "  row_number() OVER (PARTITION BY t.key ORDER BY t.id) AS rn,"
    "  count(*) OVER (PARTITION BY t.key) AS cnt FROM ("
    UNTAGGED("id, fair_key COLLATE \"default\" AS key")
    /* a row another transaction holds (a runner's retry, back to
     * queued in its results' transaction) is tagged by the next tagging
     * after it: waited for here, under the limits' lock that runner may
     * be waiting for, it was a deadlock */
    "  ORDER BY id FOR UPDATE SKIP LOCKED) t) x"
    " WHERE j.id = x.id"};

/* the first $3 ready jobs of fair queue $2 by (priority, tag, id), one
 * range of jobs_fairtag, with the filters of limits.c's
 * st_lim_candidates (JR_PG_PICK_FILTER), locked (not those another claim
 * holds); each with its key, tag and the weight it was tagged with ($9:
 * the config's default) */
static const pg_stmt st_fair_take = {"jr_fair_take", 10,
    "SELECT id, name, queue, limit_key, fair_key, coalesce(cost, 1),"
    " fair_tag, coalesce(fair_w, $9::float8) FROM {{schema}}.jobs"
    " WHERE state = 'queued' AND queue = $2::text"
    " AND fair_tag IS NOT NULL AND run_at <= now()"
    JR_PG_UNEXPIRED
    JR_PG_PICK_FILTER
    " ORDER BY priority, fair_tag, id LIMIT $3::int"
    " FOR UPDATE SKIP LOCKED"};

/* The planner's choice for st_fair_take, which wants the ordered scan
 * of jobs_fairtag: on statistics older than the queue's jobs (taken when
 * another queue's filled the table, or before they had tags) it expects
 * one row and reads the queue's every ready job through a bitmap and
 * sorts them (20,000 rows, 13 ms a claim), the scan reading 400. So the
 * take runs with bitmap scans off, the setting as it was put back after
 * it, each in the claim's transaction. */
static const pg_stmt st_fair_nobitmap = {"jr_fair_nobitmap", 0,
    "SELECT current_setting('enable_bitmapscan'),"
    " set_config('enable_bitmapscan', 'off', true)"};
static const pg_stmt st_fair_bitmap = {"jr_fair_bitmap", 1,
    "SELECT set_config('enable_bitmapscan', $1::text, true)"};

/* queue $1's clock: the highest start tag a claim took ($2) */
static const pg_stmt st_fair_tick = {"jr_fair_tick", 2,
    "INSERT INTO {{schema}}.fair_clocks (queue, clock)"
    " VALUES ($1::text, $2::float8) ON CONFLICT (queue) DO UPDATE"
    " SET clock = greatest({{schema}}.fair_clocks.clock, $2::float8)"};

/* fair queue $1's key path $2, weights $3 and default $4 and, when one
 * of them is new or changed, the key of each job of the queue not ended,
 * at its name's path (fair_names; with weights, in the name's scope:
 * NAME, chr(31), value) or else $2: one statement, so a failing key (or
 * a runner killed between the two) leaves no path recorded over jobs it
 * did not key, whose queue's claim would skip them for good. 1 when they
 * changed (the caller tags the queue again). */
static const pg_stmt st_fair_path = {"jr_fair_path_keys5", 4,
    "WITH p AS (INSERT INTO {{schema}}.fair_paths AS o"
    " (queue, path, weights, wdefault)"
    " VALUES ($1::text, $2::text[], $3::jsonb, $4::float8)"
    " ON CONFLICT (queue) DO UPDATE"
    " SET path = excluded.path, weights = excluded.weights,"
    " wdefault = excluded.wdefault"
    " WHERE o.path <> excluded.path"
    " OR o.weights IS DISTINCT FROM excluded.weights"
    " OR o.wdefault IS DISTINCT FROM excluded.wdefault RETURNING 1),"
    " u AS (UPDATE {{schema}}.jobs j SET fair_key = (SELECT "
    JR_PG_FAIR_KEY("j.name", "j.payload", "$2::text[]", "fn.path",
                   "fn.weights")
    " FROM (SELECT 1) o LEFT JOIN {{schema}}.fair_names fn"
    " ON fn.name = j.name)"
    " WHERE EXISTS (SELECT 1 FROM p) AND j.queue = $1::text"
    " AND j.state IN ('queued', 'running', 'waiting') RETURNING 1)"
    " SELECT count(*) FROM p"};

/* queue $1's keys start again from its clock (without config weights
 * when $2), their config weights $3 ({key: weight}, when $2), and its
 * queued jobs untagged (st_fair_tag tags them again). The keys' rows are
 * locked in key order first, as a push's upsert of its keys' finishes
 * takes them (in an order of their own, a batch pushed meanwhile and
 * this statement each held a key the other waited for: a deadlock); a
 * job another transaction holds (a claim's) keeps its tag. */
static const pg_stmt st_fair_untag = {"jr_fair_untag", 3,
    "WITH l AS (SELECT key FROM {{schema}}.fair_keys WHERE queue = $1::text"
    "  ORDER BY key FOR UPDATE),"
    " r AS (UPDATE {{schema}}.fair_keys SET cweight = CASE WHEN"
    "  $2::bool THEN NULL ELSE cweight END, pass = 0 WHERE queue = $1::text"
    "  AND key IN (SELECT key FROM l) RETURNING 1),"
    " c AS (INSERT INTO {{schema}}.fair_keys AS k (queue, key, cweight)"
    "  SELECT $1::text, w.key, w.value::float8"
    "  FROM jsonb_each_text(coalesce($3::jsonb, '{}')) w WHERE $2::bool"
    "  ORDER BY w.key"
    "  ON CONFLICT (queue, key) DO UPDATE SET cweight = excluded.cweight,"
    "  pass = 0 RETURNING 1)"
    " UPDATE {{schema}}.jobs SET fair_tag = NULL WHERE id IN (SELECT id"
    "  FROM {{schema}}.jobs WHERE queue = $1::text AND state = 'queued'"
    "  AND fair_tag IS NOT NULL FOR UPDATE SKIP LOCKED)"};

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

static int weights_seen(jr_backend *b, const jr_limit *f, jr_err *err);

/* Tags queue's untagged queued jobs due now: st_fair_fin, then st_fair_tag
 * when the first met any (a key's row a key with untagged jobs: none, the
 * queue has no untagged job, and st_fair_tag, whose plan reads
 * jobs_fairnew's entries of jobs tagged since, 2,700 buffers a claim in a
 * drain just pushed, is not run). */
int
jr_pg_fair_tag_queue(jr_backend *b, const char *queue, jr_err *err)
{
    const char *params[1] = {queue};
    PGresult *res;
    int i, none = 0;

    for (i = 0; i < 2 && !none; i++) {
        if ((res = jr_pg_run(b, i ? &st_fair_tag : &st_fair_fin, params,
                             "tagging the jobs of a fair queue", err)) ==
            NULL)
            return -1;
        none = i == 0 && strcmp(PQcmdTuples(res), "0") == 0;
        PQclear(res);
    }
    return 0;
}

/* Claims under limits serialize on one advisory lock per schema ($1,
 * limits.c's st_lim_lock's), taken in the claim's transaction; a fair
 * claim alone takes it too when its queue has untagged jobs, for the
 * tags it gives (jr_pg_fair_tag_alone), and sets bitmap scans off for
 * the rest of it (st_fair_nobitmap's reason). */
static const pg_stmt st_fair_lock = {"jr_fair_lock", 1,
    "SELECT pg_advisory_xact_lock(hashtext($1::text)),"
    " set_config('enable_bitmapscan', 'off', true)"};

int
jr_pg_fair_alone(jr_backend *b, const jr_claim_spec *spec, jr_err *err)
{
    const jr_limit *f = jr_fair_alone(spec);

    if (f == NULL)
        return 0;
    if (b->fair_busy > 0) {
        b->fair_busy--;
        return 0;
    }
    return weights_seen(b, f, err) < 0 ? -1 : 1;
}

int
jr_pg_fair_lock(jr_backend *b, jr_err *err)
{
    const char *params[1];
    char lock[128];
    PGresult *res;

    snprintf(lock, sizeof lock, "jobrunner.limits:%s", b->schema);
    params[0] = lock;
    if ((res = jr_pg_run(b, &st_fair_lock, params, "locking limits",
                         err)) == NULL)
        return -1;
    PQclear(res);
    return 0;
}

int
jr_pg_fair_tag_alone(jr_backend *b, const char *queue, jr_err *err)
{
    return jr_pg_fair_lock(b, err) < 0 ? -1 :
           jr_pg_fair_tag_queue(b, queue, err);
}

/* Tags queue's untagged queued jobs again, from its clock: with cw, its
 * config weights become weights (a JSON object, or NULL: none). */
int
jr_pg_fair_retag(jr_backend *b, const char *queue, int cw,
                 const char *weights, jr_err *err)
{
    const char *params[3] = {queue, cw ? "t" : "f", weights};
    PGresult *res;

    if ((res = jr_pg_run(b, &st_fair_untag, params, "tagging a fair "
                         "queue's jobs again", err)) == NULL)
        return -1;
    PQclear(res);
    return jr_pg_fair_tag_queue(b, queue, err);
}

/* Records f's path, weights and default (jr_pg_fair_paths) once a
 * connection and again when they change (jobrunner.limits.set from a
 * hook): inserts and tags read them from fair_paths and fair_keys. */
static int
weights_seen(jr_backend *b, const jr_limit *f, jr_err *err)
{
    uint64_t h = jr_fair_limit_hash(f);

    if (jr_fair_seen_has(&b->fair_wseen, h))
        return 0;
    if (jr_pg_fair_paths(b, f, 1, err) < 0)
        return -1;
    jr_fair_seen_add(&b->fair_wseen, h);
    return 0;
}

/* The first ready jobs of fair queue (limit f) by (priority, tag, id),
 * at most cap, appended to fr, locked; the queue's untagged jobs tagged
 * first. */
static int
queue_read(jr_backend *b, const jr_limit *f, const char *queue, int cap,
           const char *const *lists, jr_pg_fair_rows *fr, jr_err *err)
{
    jr_pg_fair_row *grown;
    const char *params[10];
    char scap[16], sdef[32], was[8];
    PGresult *res, *back = NULL;
    int i, n;

    if (weights_seen(b, f, err) < 0 || jr_pg_fair_tag_queue(b, queue, err) < 0)
        return -1;
    snprintf(scap, sizeof scap, "%d", cap);
    snprintf(sdef, sizeof sdef, "%.17g", f->fair_default > 0 ?
             f->fair_default : 1);
    params[0] = lists[0];
    params[1] = queue;
    params[2] = scap;
    params[3] = lists[1];
    params[4] = lists[2];
    params[5] = lists[3];
    params[6] = lists[4];
    params[7] = lists[5];
    params[8] = sdef;
    params[9] = lists[6];
    if ((res = jr_pg_run(b, &st_fair_nobitmap, params, "claiming jobs of "
                         "a fair queue", err)) == NULL)
        return -1;
    snprintf(was, sizeof was, "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    res = jr_pg_run(b, &st_fair_take, params, "claiming jobs of a fair "
                    "queue", err);
    params[0] = was;
    if (res != NULL &&
        (back = jr_pg_run(b, &st_fair_bitmap, params, "claiming jobs of a "
                          "fair queue", err)) == NULL) {
        PQclear(res);
        res = NULL;
    }
    PQclear(back);
    if (res == NULL)
        return -1;
    n = PQntuples(res);
    if (fr->n + n > fr->cap) {
        int ncap = (fr->n + n) * 2;
        if ((grown = realloc(fr->row, (size_t)ncap * sizeof *grown)) == NULL) {
            PQclear(res);
            return jr_fail(err, JR_ENOMEM, "postgres: claiming jobs: out of "
                           "memory");
        }
        fr->row = grown;
        fr->cap = ncap;
    }
    for (i = 0; i < n; i++) {
        jr_pg_fair_row *row = &fr->row[fr->n++];

        row->id = PQgetvalue(res, i, 0);
        row->name = PQgetvalue(res, i, 1);
        row->queue = PQgetvalue(res, i, 2);
        row->key = PQgetisnull(res, i, 3) ? NULL : PQgetvalue(res, i, 3);
        row->fkey = PQgetvalue(res, i, 4);
        row->cost = atol(PQgetvalue(res, i, 5));
        row->clock = strtod(PQgetvalue(res, i, 6), NULL);   /* its tag */
        row->weight = strtod(PQgetvalue(res, i, 7), NULL);
        if (!(row->weight > 0))
            row->weight = 1;
        row->rank = i + 1;
    }
    fr->res[fr->nres++] = res;          /* the rows point into it */
    return 0;
}

/* A row's rank in its queue and its place in fr, for a stable order. */
typedef struct rank_at {
    long rank;
    int  at;
} rank_at;

static int
rank_at_cmp(const void *a, const void *b)
{
    const rank_at *x = a, *y = b;

    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    return (x->at > y->at) - (x->at < y->at);
}

void
jr_pg_fair_rows_order(jr_pg_fair_rows *fr)
{
    jr_pg_fair_row *tmp;
    rank_at *v;
    int i;

    if (fr->n < 2 || (v = malloc((size_t)fr->n * sizeof *v)) == NULL)
        return;                 /* out of memory: queue after queue */
    if ((tmp = malloc((size_t)fr->n * sizeof *tmp)) == NULL) {
        free(v);
        return;
    }
    for (i = 0; i < fr->n; i++) {
        v[i].rank = fr->row[i].rank;
        v[i].at = i;
    }
    qsort(v, (size_t)fr->n, sizeof *v, rank_at_cmp);
    for (i = 0; i < fr->n; i++)
        tmp[i] = fr->row[v[i].at];
    memcpy(fr->row, tmp, (size_t)fr->n * sizeof *tmp);
    free(tmp);
    free(v);
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
    const char *params[4];
    char path[220], def[32];
    PGresult *res;
    int i, rc = 0, changed;

    for (i = 0; rc == 0 && i < n; i++) {
        if (l[i].fair_path == NULL || l[i].fair_path[0] == '\0' ||
            strncmp(l[i].scope, JR_LIMIT_QPREFIX, 6) != 0)
            continue;                   /* '': made fair by a name */
        path_array(&l[i], path, sizeof path);
        snprintf(def, sizeof def, "%.17g", l[i].fair_default > 0 ?
                 l[i].fair_default : 1);
        params[0] = l[i].scope + 6;
        params[1] = path;
        params[2] = l[i].fair_weights;
        params[3] = def;
        if ((res = jr_pg_run(b, &st_fair_path, params, "recording a fair "
                             "key path and keying its queue's jobs",
                             err)) == NULL) {
            rc = -1;
            break;
        }
        changed = PQntuples(res) == 1 && atoi(PQgetvalue(res, 0, 0)) > 0;
        PQclear(res);
        /* new or changed: its queued jobs tagged by the weights now */
        if (changed && jr_pg_fair_retag(b, l[i].scope + 6, 1,
                                        l[i].fair_weights, err) < 0)
            rc = -1;
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

/* Orders taken rows by queue. */
static int
by_queue(const void *a, const void *b)
{
    const jr_pg_fair_row *x = *(const jr_pg_fair_row *const *)a,
                         *y = *(const jr_pg_fair_row *const *)b;

    return strcmp(x->queue, y->queue);
}

/* Moves the clock of the queue of t[0..n) to the highest tag taken. */
static int
save_queue(jr_backend *b, const jr_pg_fair_row **t, int n, jr_err *err)
{
    const char *params[2];
    char sclock[32];
    double clock = t[0]->clock;
    PGresult *res;
    int i;

    for (i = 1; i < n; i++)
        if (t[i]->clock > clock)
            clock = t[i]->clock;
    snprintf(sclock, sizeof sclock, "%.17g", clock);
    params[0] = t[0]->queue;
    params[1] = sclock;
    if ((res = jr_pg_run(b, &st_fair_tick, params, "moving a fair queue's "
                         "clock", err)) == NULL)
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
    qsort(t, (size_t)m, sizeof *t, by_queue);
    for (i = 0; rc == 0 && i < m; i = j) {
        for (j = i + 1; j < m && strcmp(t[j]->queue, t[i]->queue) == 0; j++)
            ;
        rc = save_queue(b, t + i, j - i, err);
    }
    free(t);
    return rc;
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
