/* fair.c - fair share inside a queue on SQLite (docs/queues.md, "Fair
 * share"): each queued job of a fair queue has a start tag, given when it
 * is pushed (or by the next claim, when it came back to queued or when
 * it is due, pushed to run later), and a fair queue's candidates in a
 * claim under limits are its first ready jobs by (priority, tag, id),
 * one range of jobs_claim (its tagged jobs by tag: JR_SQLITE_CLAIM_ORDER);
 * the claim moves the queue's clock to the tags it took (fairsave.c);
 * the keys' paths and weights recorded for pushes; `jobrunner fair set`.
 * Uses sqlite_int.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqlite/sqlite_int.h"
#include "base/util.h"

/* The file's statements: slots of sql_text[] (sqlite_int.h). */
enum { S_FAIR_TAKE, S_FAIR_FIN_Q, S_FAIR_TAG_Q, S_FAIR_FIN_R, S_FAIR_TAG_R,
       S_FAIR_SET, S_FAIR_USE, S_FAIR_PATH, S_FAIR_BACKFILL, S_FAIR_STAMP,
       S_FAIR_IS, S_FAIR_CW_RESET, S_FAIR_CW_SET, S_FAIR_UNTAG,
       S_FAIR_FIN_N, S_FAIR_TAG_N, S_COUNT };

/* A fair key's weight, the one place it is looked up: a key in a job
 * name's scope (NAME, char(31), value: JR_SQLITE_FAIR_NW) has its name's;
 * else fk its row of fair_keys (`fair set`'s weight, else the config's,
 * cweight), fp its queue's row of fair_paths (the config's default); 1
 * without them. */
#define FAIR_W "coalesce(" JR_SQLITE_FAIR_NW("j.fair_key") \
    ", fk.weight, fk.cweight, fp.wdefault, 1)"

/* The jobs to tag: queued in a fair queue (a key) without a tag, and due
 * (run_at by ?3): a job not yet due takes no turn of its key, and is
 * tagged by the first claim of its queue after it is due, from the
 * queue's clock then (docs/queues.md, "Fair share"). */
#define UNTAGGED " j.run_at <= ?3 AND j.state = 'queued'" \
    " AND j.fair_key IS NOT NULL AND j.fair_tag IS NULL"
#define BY_QUEUE " j.queue = ?1 AND" UNTAGGED       /* jobs_fairnew */
#define BY_IDS " j.id BETWEEN ?1 AND ?2 AND" UNTAGGED
#define BY_NAME " j.name = ?1 AND" UNTAGGED

/* Tagging (docs/queues.md, "Fair share"): first each key's finish moves
 * on by its new jobs' count over its weight, from its base while it is
 * ahead of the queue's clock, else from the clock (excluded.base: it
 * starts there again); then its jobs, in id order, take the tags from
 * where it was up to the new finish, 1/weight apart: its n-th job since
 * its base is base + n / tw, one formula for a push alone, a batch and a
 * claim's tagging, and PostgreSQL's (migration 39), so the same jobs get
 * the same tags bit for bit. */
#define FAIR_AHEAD " pass > excluded.base AND base IS NOT NULL"
#define FAIR_FIN(set) \
    "INSERT INTO fair_keys (queue, key, pass, base, n, tw)" \
    " SELECT queue, key, clock + cnt * 1.0 / w, clock, cnt, w FROM (SELECT" \
    " j.queue AS queue, j.fair_key AS key, coalesce(fc.clock, 0) AS clock," \
    " count(*) AS cnt, " FAIR_W " AS w" \
    " FROM jobs j LEFT JOIN fair_keys fk ON fk.queue = j.queue" \
    "  AND fk.key = j.fair_key LEFT JOIN fair_paths fp ON fp.queue = j.queue" \
    "  LEFT JOIN fair_clocks fc ON fc.queue = j.queue" \
    " WHERE" set " GROUP BY j.queue, j.fair_key) WHERE true" \
    " ON CONFLICT (queue, key) DO UPDATE SET" \
    " base = CASE WHEN" FAIR_AHEAD " THEN base ELSE excluded.base END," \
    " n = CASE WHEN" FAIR_AHEAD " THEN n + excluded.n ELSE excluded.n END," \
    " pass = CASE WHEN" FAIR_AHEAD \
    "  THEN base + (n + excluded.n) * 1.0 / excluded.tw" \
    "  ELSE excluded.pass END, tw = excluded.tw"
#define FAIR_TAG(set) \
    "UPDATE jobs SET fair_tag = t.tag, fair_w = t.w FROM (SELECT" \
    " j.id AS id, fk.base + (fk.n - count(*) OVER k + row_number() OVER k" \
    " - 1) * 1.0 / fk.tw AS tag, fk.tw AS w FROM jobs j JOIN fair_keys fk" \
    "  ON fk.queue = j.queue AND fk.key = j.fair_key" \
    " WHERE" set " WINDOW k AS (PARTITION BY j.queue, j.fair_key" \
    "  ORDER BY j.id ROWS BETWEEN UNBOUNDED PRECEDING" \
    "  AND UNBOUNDED FOLLOWING)) t WHERE jobs.id = t.id"

static const char *const sql_text[S_COUNT] = {
    /* the first ?4 ready jobs of fair queue ?1 by (priority, tag, id),
     * one range of jobs_claim, with the filters of candidates.c's
     * S_LIM_CANDIDATES; each with its key, tag and the weight it was
     * tagged with */
    [S_FAIR_TAKE] =
        "SELECT id, priority, run_at, name, limit_key, coalesce(cost, 1),"
        " fair_key, fair_tag, coalesce(fair_w, 1) FROM jobs"
        " WHERE state = 'queued' AND queue = ?1"
        " AND fair_tag IS NOT NULL AND run_at <= ?2"
        JR_SQLITE_UNEXPIRED
        JR_SQLITE_LIM_FILTER
        " ORDER BY priority, " JR_SQLITE_CLAIM_ORDER ", id LIMIT ?4",
    [S_FAIR_FIN_Q] = FAIR_FIN(BY_QUEUE),
    [S_FAIR_TAG_Q] = FAIR_TAG(BY_QUEUE),
    [S_FAIR_FIN_R] = FAIR_FIN(BY_IDS),
    [S_FAIR_TAG_R] = FAIR_TAG(BY_IDS),
    [S_FAIR_FIN_N] = FAIR_FIN(BY_NAME),
    [S_FAIR_TAG_N] = FAIR_TAG(BY_NAME),
    [S_FAIR_SET] =
        "INSERT INTO fair_keys (queue, key, weight)"
        " VALUES (?1, " JR_SQLITE_FAIR_QK("?2") ", ?3)"
        " ON CONFLICT (queue, key) DO UPDATE"
        " SET weight = excluded.weight",
    /* each key (path ?2) of queue ?1 with jobs queued or running: ready
     * by ?3, running, weight (?4 the config's weights, ?5 its default);
     * a name's with fair weights of its own are its (fairname.c's
     * S_FN_USE) */
    [S_FAIR_USE] =
        "SELECT k, sum(state = 'queued' AND run_at <= ?3) AS w,"
        " sum(state = 'running'),"
        " coalesce((SELECT weight FROM fair_keys fk"
        "  WHERE fk.queue = ?1 AND fk.key = " JR_SQLITE_FAIR_QK("k") "),"
        "  (SELECT value FROM json_each(?4) WHERE key = k), ?5)"
        " FROM (SELECT " JR_SQLITE_FAIR_VAL("payload", "?2")
        " AS k, state, run_at FROM jobs"
        "  WHERE queue = ?1 AND state IN ('queued', 'running')"
        "  AND name NOT IN (SELECT name FROM fair_names"
        "  WHERE weights IS NOT NULL))"
        " GROUP BY k ORDER BY w DESC, k",
    /* fair queue ?1's key path ?2, weights ?3 and default ?4; no change:
     * no row changed */
    [S_FAIR_PATH] =
        "INSERT INTO fair_paths (queue, path, weights, wdefault)"
        " VALUES (?1, ?2, ?3, ?4) ON CONFLICT (queue) DO UPDATE"
        " SET path = excluded.path, weights = excluded.weights,"
        " wdefault = excluded.wdefault WHERE path <> excluded.path"
        " OR weights IS NOT excluded.weights"
        " OR wdefault IS NOT excluded.wdefault",
    /* the key of each job of queue ?1 not ended, at its name's path
     * (fair_names; with weights, in the name's scope: JR_SQLITE_FAIR_NKEY)
     * or else ?2 */
    [S_FAIR_BACKFILL] =
        "UPDATE jobs SET fair_key = CASE WHEN json_valid(payload)"
        " THEN coalesce(" JR_SQLITE_FAIR_NKEY ", CASE WHEN ?2 = '' THEN ''"
        " ELSE " JR_SQLITE_FAIR_QKEY("payload", "?2") " END)"
        " ELSE '' END WHERE queue = ?1"
        " AND state NOT IN ('completed', 'dead', 'cancelled', 'expired')",
    /* what the trigger jobs_fair_key does, for the jobs of ids ?2 to ?3
     * just pushed into queue ?1 */
    [S_FAIR_STAMP] =
        "UPDATE jobs SET fair_key = (SELECT CASE WHEN json_valid(payload)"
        " AND f.path <> ''"
        " THEN " JR_SQLITE_FAIR_QKEY("payload", "f.path")
        " ELSE '' END FROM fair_paths f WHERE f.queue = ?1)"
        " WHERE id BETWEEN ?2 AND ?3 AND queue = ?1 AND fair_key IS NULL",
    /* is queue ?1 fair; has a name weights of its own (fairname.c) */
    [S_FAIR_IS] =
        "SELECT EXISTS (SELECT 1 FROM fair_paths WHERE queue = ?1),"
        " EXISTS (SELECT 1 FROM fair_names"
        " WHERE weights IS NOT NULL)",
    /* queue ?1's keys start again from its clock, without config weights
     * when ?2 */
    [S_FAIR_CW_RESET] =
        "UPDATE fair_keys SET cweight = CASE WHEN ?2 THEN NULL"
        " ELSE cweight END, pass = 0 WHERE queue = ?1",
    /* the config's weights ?2 ({key: weight}) of queue ?1's keys */
    [S_FAIR_CW_SET] =
        "INSERT INTO fair_keys (queue, key, cweight)"
        " SELECT ?1, key, value FROM json_each(?2) WHERE true"
        " ON CONFLICT (queue, key) DO UPDATE SET cweight = excluded.cweight",
    /* the queued jobs of queue ?1 are to be tagged again */
    [S_FAIR_UNTAG] =
        "UPDATE jobs SET fair_tag = NULL WHERE queue = ?1"
        " AND state = 'queued' AND fair_tag IS NOT NULL",
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

static int
candidate_id(const void *a, const void *b)
{
    const candidate *x = a, *y = b;

    return (x->id > y->id) - (x->id < y->id);
}

/* Tags the untagged queued jobs due by now of queue (or of ids lo to hi
 * when queue is NULL): FAIR_FIN then FAIR_TAG, when the first met any (a
 * key's row a key with untagged jobs: none, there is no job to tag, as
 * at nearly every claim). 0, or -1 with err set. */
static int
tag_jobs(jr_backend *b, const char *queue, int64_t lo, int64_t hi,
         double now, jr_err *err)
{
    sqlite3_stmt *s;
    int i, n = 1;

    for (i = 0; i < 2 && n > 0; i++) {
        s = stmt(b, queue ? (i ? S_FAIR_TAG_Q : S_FAIR_FIN_Q) :
                 (i ? S_FAIR_TAG_R : S_FAIR_FIN_R), err);
        if (s == NULL)
            return -1;
        if (queue != NULL)
            bind_text(s, 1, queue);
        else {
            sqlite3_bind_int64(s, 1, lo);
            sqlite3_bind_int64(s, 2, hi);
        }
        sqlite3_bind_double(s, 3, now);
        if ((n = run(b, s, err, "tagging the jobs of a fair queue")) < 0)
            return -1;
    }
    return 0;
}

/* The keys of queue start again from its clock (their config weights
 * ?2 when weights, else none: all when cw) and its queued jobs are
 * tagged again, by the weights now. */
static int
retag(jr_backend *b, const char *queue, int cw, const char *weights,
      jr_err *err)
{
    sqlite3_stmt *s;

    if ((s = stmt(b, S_FAIR_CW_RESET, err)) == NULL)
        return -1;
    bind_text(s, 1, queue);
    sqlite3_bind_int(s, 2, cw);
    if (run(b, s, err, "resetting a fair queue's weights") < 0)
        return -1;
    if (cw && weights != NULL) {
        if ((s = stmt(b, S_FAIR_CW_SET, err)) == NULL)
            return -1;
        bind_text(s, 1, queue);
        bind_text(s, 2, weights);
        if (run(b, s, err, "recording a fair queue's weights") < 0)
            return -1;
    }
    if ((s = stmt(b, S_FAIR_UNTAG, err)) == NULL)
        return -1;
    bind_text(s, 1, queue);
    if (run(b, s, err, "tagging a fair queue's jobs again") < 0)
        return -1;
    return tag_jobs(b, queue, 0, 0, jr_now(), err);
}

int
jr_sqlite_fair_tag(jr_backend *b, int64_t lo, int64_t hi, double now,
                   jr_err *err)
{
    return tag_jobs(b, NULL, lo, hi, now, err);
}

int
jr_sqlite_fair_tag_name(jr_backend *b, const char *name, jr_err *err)
{
    sqlite3_stmt *s;
    int i;

    for (i = 0; i < 2; i++) {
        if ((s = stmt(b, i ? S_FAIR_TAG_N : S_FAIR_FIN_N, err)) == NULL)
            return -1;
        bind_text(s, 1, name);
        sqlite3_bind_double(s, 3, jr_now());
        if (run(b, s, err, "tagging the jobs of a fair name") < 0)
            return -1;
    }
    return 0;
}

/* Records f's path, weights and default (jr_sqlite_fair_paths) once a
 * connection and again when they change (jobrunner.limits.set from a
 * hook): pushes and tags read them from fair_paths and fair_keys. */
static int
weights_seen(jr_backend *b, const jr_limit *f, jr_err *err)
{
    uint64_t h = jr_fair_limit_hash(f);

    if (jr_fair_seen_has(&b->fair_wseen, h))
        return 0;
    if (jr_sqlite_fair_paths(b, f, 1, err) < 0)
        return -1;
    jr_fair_seen_add(&b->fair_wseen, h);
    return 0;
}

int
jr_sqlite_fair_ready(jr_backend *b, const jr_limit *f, const char *queue,
                     double now, jr_err *err)
{
    return weights_seen(b, f, err) < 0 ? -1 :
           tag_jobs(b, queue, 0, 0, now, err);
}

int
jr_sqlite_fair_candidates(jr_backend *b, const jr_limit *f,
                          const char *queue, int cap, const char *json,
                          double now, candidate *c, int *n, const limq *lim,
                          jr_err *err)
{
    sqlite3_stmt *s;
    const char *lk;
    candidate *r;
    int rc, rank = 0;

    /* weights set from a hook; the jobs that came back to queued, or
     * another program pushed, or are due since their push */
    if (weights_seen(b, f, err) < 0 ||
        tag_jobs(b, queue, 0, 0, now, err) < 0 ||
        (s = stmt(b, S_FAIR_TAKE, err)) == NULL)
        return -1;
    bind_text(s, 1, queue);
    sqlite3_bind_double(s, 2, now);
    bind_text(s, 3, json);
    sqlite3_bind_int(s, 4, cap);
    bind_text(s, 5, lim->names);
    bind_text(s, 6, lim->pairs);
    bind_text(s, 7, lim->rates);
    bind_text(s, 10, lim->rooms);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        r = &c[(*n)++];
        memset(r, 0, sizeof *r);
        r->id = sqlite3_column_int64(s, 0);
        r->priority = sqlite3_column_int(s, 1);
        r->run_at = sqlite3_column_double(s, 2);
        r->rank = rank++;
        lk = (const char *)sqlite3_column_text(s, 4);
        r->name = strdup(col_text(s, 3));
        r->queue = strdup(queue);
        r->key = lk ? strdup(lk) : NULL;
        r->cost = (long)sqlite3_column_int64(s, 5);
        r->fkey = strdup(col_text(s, 6));
        r->fpass = r->fclock = sqlite3_column_double(s, 7);
        r->fweight = sqlite3_column_double(s, 8);
        if (!(r->fweight > 0))
            r->fweight = 1;
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

void
jr_sqlite_fair_mark(const candidate *c, int k, jr_job **out, int n)
{
    const candidate *at;
    candidate key;
    int i;

    for (i = 0; i < n; i++) {
        key.id = out[i]->id;
        at = bsearch(&key, c, (size_t)k, sizeof *c, candidate_id);
        if (at != NULL && at->fkey != NULL) {
            out[i]->fair_weight = at->fweight;
            out[i]->fair_hash = jr_sqlite_fair_hash(at->fkey);
        }
    }
}

/* The master deals its local queue by this (master/fairq.c), which it
 * would otherwise hash from the payload's value at the queue's path: a
 * parse of the payload a job, a fifth of the master's loop a job in a
 * drain over 10,000 keys. The stored key is the one the tags were given
 * by, so the local queue is dealt by the database's keys. */
uint64_t
jr_sqlite_fair_hash(const char *key)
{
    uint64_t h = 1469598103934665603ULL;        /* FNV-1a, as fairq.c's */

    while (key != NULL && *key)
        h = (h ^ (unsigned char)*key++) * 1099511628211ULL;
    return h | 1;
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
    if (run(b, s, err, "setting a fair weight") < 0 ||
        retag(b, queue, 0, NULL, err) < 0) {
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
        if (l[i].fair_path == NULL || l[i].fair_path[0] == '\0' ||
            strncmp(l[i].scope, JR_LIMIT_QPREFIX, 6) != 0)
            continue;                   /* '': made fair by a name */
        snprintf(path, sizeof path, "$.%s", l[i].fair_path);
        if ((s = stmt(b, S_FAIR_PATH, err)) == NULL)
            return -1;
        bind_text(s, 1, l[i].scope + 6);
        bind_text(s, 2, path);
        bind_text(s, 3, l[i].fair_weights);
        sqlite3_bind_double(s, 4, l[i].fair_default > 0 ?
                            l[i].fair_default : 1);
        if ((changed = run(b, s, err, "recording a fair key path")) < 0)
            return -1;
        if (changed == 0)
            continue;
        /* new or another path or weights: the keys of the jobs already
         * there, and their tags */
        if ((s = stmt(b, S_FAIR_BACKFILL, err)) == NULL)
            return -1;
        bind_text(s, 1, l[i].scope + 6);
        bind_text(s, 2, path);
        if (run(b, s, err, "reading the fair keys of a queue's jobs") < 0 ||
            retag(b, l[i].scope + 6, 1, l[i].fair_weights, err) < 0)
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
