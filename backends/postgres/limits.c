/* limits.c - limits per key: the claim under limits (an advisory lock per
 * schema, running counts and token buckets read, passes of candidates that
 * limitpick.c takes or skips, buckets saved, in one transaction). Owns the
 * claim's limit statements (limituse.c has the key paths and a limit's
 * use). Uses claim.c's row helpers, limitpick.h, conn.c, arrays.h. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "limitpick.h"
#include "postgres/pg_int.h"
#include "postgres/arrays.h"

/* the buckets of scopes $1 and keys $2 (pairs) that have a row */
static const pg_stmt st_lim_buckets = {"jr_lim_buckets", 2,
    "SELECT lb.scope, lb.key, lb.tokens, lb.updated_at"
    " FROM unnest($1::text[], $2::text[]) AS u(scope, key)"
    " JOIN {{schema}}.limit_buckets lb"
    "  ON lb.scope = u.scope AND lb.key = u.key"};

/* Reads the buckets of the (scope, key) pairs in the array literals
 * being built in sk[0], sk[1] into p (no row: a full bucket), then empties
 * them. */
static int
lim_read(jr_backend *b, jr_lpick *p, jr_buf *sk, jr_err *err)
{
    const char *params[2];
    PGresult *res;
    int r, bad = 0;

    if (sk[0].len == 0)
        return 0;
    params[0] = sb_array(&sk[0]);
    params[1] = sb_array(&sk[1]);
    if (sk[0].oom || sk[1].oom)
        return jr_fail(err, JR_ENOMEM, "postgres: out of memory");
    if ((res = jr_pg_run(b, &st_lim_buckets, params, "reading limits",
                      err)) == NULL)
        return -1;
    for (r = 0; r < PQntuples(res); r++)
        bad |= jr_lpick_bucket(p, PQgetvalue(res, r, 0),
                               PQgetvalue(res, r, 1),
                               strtod(PQgetvalue(res, r, 2), NULL),
                               strtod(PQgetvalue(res, r, 3), NULL)) < 0;
    PQclear(res);
    jr_buf_reset(&sk[0]);
    jr_buf_reset(&sk[1]);
    return bad ? jr_fail(err, JR_ENOMEM, "postgres: out of memory") : 0;
}

/* A bucket to read: its scope and key into the arrays at arg. */
static int
lim_need(const char *scope, const char *key, void *arg)
{
    jr_buf *sk = arg;

    sb_elem(&sk[0], scope);
    sb_elem(&sk[1], key);
    return 0;
}

/* Claims under limits serialize on one advisory lock per schema ($1),
 * taken in the claim's transaction. */
static const pg_stmt st_lim_lock = {"jr_lim_lock", 1,
    "SELECT pg_advisory_xact_lock(hashtext($1::text)),"
    " extract(epoch FROM now())::float8"};

/* the running jobs' slots: a job's cost, 1 without one */
static const pg_stmt st_lim_running = {"jr_lim_running", 0,
    "SELECT name, queue, limit_key, sum(coalesce(cost, 1))"
    " FROM {{schema}}.jobs"
    " WHERE state = 'running' GROUP BY name, queue, limit_key"};

/* Takes the limits' lock and reads the running jobs and the scopes' own
 * buckets into a new pick, at the database's now (the keys' buckets are
 * read as the claim meets their jobs). */
static jr_lpick *
lim_load(jr_backend *b, const jr_claim_spec *spec, jr_err *err)
{
    char lock[128];
    const char *params[1] = {lock};
    jr_buf sk[2];
    PGresult *res;
    jr_lpick *p;
    int r, bad = 0;
    double now;

    snprintf(lock, sizeof lock, "jobrunner.limits:%s", b->schema);
    if ((res = jr_pg_run(b, &st_lim_lock, params, "locking limits", err)) == NULL)
        return NULL;
    now = strtod(PQgetvalue(res, 0, 1), NULL);
    PQclear(res);
    if ((p = jr_lpick_new(spec->limits, spec->nlimits, now)) == NULL) {
        jr_fail(err, JR_ENOMEM, "postgres: claiming jobs: out of memory");
        return NULL;
    }
    /* no cap: the running jobs' counts go unused */
    if (!jr_lpick_caps_running(spec->limits, spec->nlimits))
        res = NULL;
    else if ((res = jr_pg_run(b, &st_lim_running, NULL, "reading limits",
                              err)) == NULL)
        goto fail;
    for (r = 0; res != NULL && r < PQntuples(res); r++)
        bad |= jr_lpick_running(p, PQgetvalue(res, r, 0),
                                PQgetvalue(res, r, 1),
                                PQgetisnull(res, r, 2) ? NULL :
                                PQgetvalue(res, r, 2),
                                atol(PQgetvalue(res, r, 3))) < 0;
    PQclear(res);
    memset(sk, 0, sizeof sk);
    for (r = 0; r < spec->nlimits; r++)
        if (spec->limits[r].all.rate > 0)
            lim_need(spec->limits[r].scope, "", sk);
    if (!bad && lim_read(b, p, sk, err) == 0) {
        jr_buf_free(&sk[0]);
        jr_buf_free(&sk[1]);
        return p;
    }
    jr_buf_free(&sk[0]);
    jr_buf_free(&sk[1]);
fail:
    if (bad)
        jr_fail(err, JR_ENOMEM, "postgres: claiming jobs: out of memory");
    jr_lpick_free(p);
    return NULL;
}

typedef struct lim_arrays {
    jr_buf scope, key, tokens;
    double now;
} lim_arrays;

static int
lim_bucket_elem(const char *scope, const char *key, double tokens,
                double now, void *arg)
{
    lim_arrays *a = arg;
    char num[32];

    sb_elem(&a->scope, scope);
    sb_elem(&a->key, key);
    snprintf(num, sizeof num, "%.17g", tokens);
    sb_num(&a->tokens, num);
    a->now = now;
    return 0;
}

static const pg_stmt st_lim_bucket_set = {
    "jr_lim_bucket_set", 4,
    "INSERT INTO {{schema}}.limit_buckets AS lb"
    " (scope, key, tokens, updated_at)"
    " SELECT u.scope, u.key, u.tokens, $4::float8"
    " FROM unnest($1::text[], $2::text[], $3::float8[])"
    "  AS u(scope, key, tokens)"
    " ON CONFLICT (scope, key) DO UPDATE"
    " SET tokens = excluded.tokens, updated_at = excluded.updated_at"};

/* buckets of scope $1 full again by now $2 at rate $3, burst $4 */
static const pg_stmt st_lim_prune = {"jr_lim_prune", 4,
    "DELETE FROM {{schema}}.limit_buckets WHERE scope = $1::text"
    " AND tokens + ($2::float8 - updated_at) * $3::float8 >= $4::float8"};

/* Writes back the buckets the claim took from; every 64th claim also
 * forgets buckets that are full again (a missing row is full). */
static int
lim_save(jr_backend *b, const jr_claim_spec *spec, const jr_lpick *p,
         jr_err *err)
{
    lim_arrays a;
    const char *params[4];
    char now[32], rate[32], burst[32];
    PGresult *res = NULL;
    int i, k, rc = 0;

    memset(&a, 0, sizeof a);
    jr_lpick_dirty(p, lim_bucket_elem, &a);
    if (a.scope.len > 0) {
        snprintf(now, sizeof now, "%.17g", a.now);
        params[0] = sb_array(&a.scope);
        params[1] = sb_array(&a.key);
        params[2] = sb_array(&a.tokens);
        params[3] = now;
        if (a.scope.oom || a.key.oom || a.tokens.oom)
            rc = jr_fail(err, JR_ENOMEM, "postgres: out of memory");
        else if ((res = jr_pg_run(b, &st_lim_bucket_set, params, "saving token "
                               "buckets", err)) == NULL)
            rc = -1;
        PQclear(res);
    }
    free(a.scope.p);
    free(a.key.p);
    free(a.tokens.p);
    if (rc < 0 || b->rotate % 64 != 0 || a.scope.len == 0)
        return rc;
    for (i = 0; i < spec->nlimits; i++)
        for (k = 0; k < 2; k++) {
            const jr_limit_set *set = k ? &spec->limits[i].per_key :
                                      &spec->limits[i].all;
            if (set->rate <= 0)
                continue;
            snprintf(rate, sizeof rate, "%.17g", set->rate);
            snprintf(burst, sizeof burst, "%.17g", set->burst);
            params[0] = spec->limits[i].scope;
            params[1] = now;
            params[2] = rate;
            params[3] = burst;
            if ((res = jr_pg_run(b, &st_lim_prune, params, "forgetting full "
                              "buckets", err)) == NULL)
                return -1;
            PQclear(res);
        }
    return 0;
}

/* A new array literal of the elements in b so far (sb_elem, sb_num), b
 * left open for more; NULL when out of memory. */
static char *
lit_copy(const jr_buf *b)
{
    char *s;

    if (b->oom)
        return NULL;
    if (b->len == 0)
        return strdup("{}");
    if ((s = malloc(b->len + 2)) == NULL)
        return NULL;
    memcpy(s, b->p, b->len);
    s[b->len] = '}';
    s[b->len + 1] = '\0';
    return s;
}

/* A scope with a per-key rate into the arrays a[0] (scopes), a[1]
 * (rates). */
static int
lim_rate_elem(const char *scope, double rate, void *arg)
{
    jr_buf *a = arg;
    char num[32];

    snprintf(num, sizeof num, "%.17g", rate);
    sb_elem(&a[0], scope);
    sb_num(&a[1], num);
    return 0;
}

/* st_claim's fair candidates, not claimed, without names blocked whole
 * ($7), names or queues blocked for a key ($8: "n<name>\x1f<key>",
 * "q<queue>\x1f<key>"), queues blocked ($9), each queue's cap less
 * what earlier passes took ($10/$11), keys whose stored bucket in a
 * scope $12 of per-key rate $13 is short of a token at $14 (one
 * look-up by primary key per job passed over: the cost follows the
 * keys with jobs, not the buckets; the pairs by NOT IN a subquery, which
 * PostgreSQL hashes once, where <> ALL of the array compared each job
 * passed over with every pair: 200,000 jobs of 1,000 blocked keys took
 * 1.6 s a claim); fair and aging queues ($15) are
 * fair.c's and aging.c's; a job whose cost is over the room left in a
 * scope of its own ($16, jr_lpick_rooms) is skipped */
static const pg_stmt st_lim_candidates = {
    "jr_lim_candidates", 16,
    WORK_QUEUES
    " q AS (SELECT qq.name, least(coalesce(w.cap, $5::int), $2::int)"
    "  - coalesce(t.taken, 0) AS cap FROM qq"
    "  LEFT JOIN (SELECT queue, min(cap) AS cap"
    "   FROM unnest($3::text[], $4::int[]) AS u(queue, cap)"
    "   GROUP BY queue) w ON w.queue = qq.name"
    /* $10/$11 hold a queue once per job taken: summed, one row a
     * queue (joined as they came, each queue's row was repeated per job
     * taken, its cap less 1, and its jobs read once per repeat: a pass
     * after 236 jobs taken walked the backlog 236 times) */
    "  LEFT JOIN (SELECT queue, sum(taken)::int AS taken"
    "   FROM unnest($10::text[], $11::int[]) AS u(queue, taken)"
    "   GROUP BY queue) t ON t.queue = qq.name"
    "  WHERE NOT qq.paused AND qq.name <> ALL($9::text[])"
    "  AND qq.name <> ALL($15::text[])"
    "  AND least(coalesce(w.cap, $5::int), $2::int)"
    "   - coalesce(t.taken, 0) > 0),"
    " c0 AS (SELECT r.id, r.rn, q.name AS qname, r.priority, r.run_at,"
    "  r.jname, r.limit_key, r.cost FROM q"
    "  CROSS JOIN LATERAL (SELECT s.id, s.priority, s.run_at,"
    "   s.name AS jname, s.limit_key, s.cost,"
    "   row_number() OVER (ORDER BY s.priority, s.run_at, s.id) AS rn"
    "   FROM (SELECT id, priority, run_at, name, limit_key,"
    "    coalesce(cost, 1) AS cost"
    "    FROM {{schema}}.jobs"
    "    WHERE state = 'queued' AND queue = q.name AND run_at <= now()"
    JR_PG_UNEXPIRED
    "    AND name = ANY($1::text[]) AND name <> ALL($7::text[])"
    "    AND (limit_key IS NULL"
    "     OR (('n' || name || chr(31) || limit_key) NOT IN"
    "      (SELECT unnest($8::text[]))"
    "     AND ('q' || queue || chr(31) || limit_key) NOT IN"
    "      (SELECT unnest($8::text[]))"
    "     AND NOT EXISTS (SELECT 1"
    "      FROM unnest($12::text[], $13::float8[]) AS r(scope, rate)"
    "      JOIN {{schema}}.limit_buckets lb ON lb.scope = r.scope"
    "      AND lb.key = limit_key"
    "      WHERE r.scope IN (name, 'queue:' || queue)"
    "      AND lb.tokens + ($14::float8 - lb.updated_at) * r.rate < 1)))"
    "    AND (cost IS NULL OR cost <= coalesce((SELECT min(rm.value::bigint)"
    "     FROM jsonb_each_text($16::jsonb) AS rm"
    "     WHERE rm.key IN (name, 'queue:' || queue)), cost))"
    "    ORDER BY priority, run_at, id LIMIT q.cap"
    "    FOR UPDATE SKIP LOCKED) s) r),"
    " c1 AS (SELECT c0.*, dense_rank() OVER (ORDER BY qname) AS qi"
    "  FROM c0),"
    " c AS (SELECT c1.*, (qi + $6::bigint) % max(qi) OVER () AS turn"
    "  FROM c1)"
    " SELECT id, jname, qname, limit_key, rn, cost FROM c"
    " ORDER BY rn, turn, priority, run_at, id"};

/* One pass's candidates: the fair order of st_claim without what the
 * pick blocks and what earlier passes took (tq/tn). */
static PGresult *
lim_candidates(jr_backend *b, const jr_claim_spec *spec, int max,
               const jr_lpick *p, jr_buf *tq, jr_buf *tn,
               jr_pg_fair_rows *fr, jr_err *err)
{
    char smax[16], sothers[16], srot[16], snow[32];
    const char *params[16], *lists[7];
    jr_buf fq = {0};
    char *bn = jr_lpick_list(p, 'n', 0), *bp = jr_lpick_list(p, 'p', 0);
    char *bq = jr_lpick_list(p, 'q', 0), *tql = NULL, *tnl = NULL;
    char *rooms = jr_lpick_rooms(p);
    jr_buf a[5];
    PGresult *res = NULL;
    int i, ok;

    memset(a, 0, sizeof a);
    jr_lpick_key_rates(p, lim_rate_elem, &a[3]);
    params[11] = sb_array(&a[3]);
    params[12] = sb_array(&a[4]);
    snprintf(snow, sizeof snow, "%.17g", jr_lpick_now(p));
    params[13] = snow;
    params[15] = rooms;
    ok = bn && bp && bq && rooms && !a[3].oom && !a[4].oom;
    if (ok && jr_pg_claim_arrays(spec, a, err) == 0) {
        snprintf(smax, sizeof smax, "%d", max);
        snprintf(sothers, sizeof sothers, "%d", spec->others);
        snprintf(srot, sizeof srot, "%u", b->rotate % 1000000u);
        params[0] = a[0].p;
        params[1] = smax;
        params[2] = a[1].p;
        params[3] = a[2].p;
        params[4] = sothers;
        params[5] = srot;
        params[6] = bn;
        params[7] = bp;
        params[8] = bq;
        params[9] = tql = lit_copy(tq);
        params[10] = tnl = lit_copy(tn);
        for (i = 0; i < spec->nlimits; i++)
            if ((spec->limits[i].fair_path || spec->limits[i].aging > 0)
                && strncmp(spec->limits[i].scope, JR_LIMIT_QPREFIX, 6) == 0)
                sb_elem(&fq, spec->limits[i].scope + 6);
        params[14] = sb_array(&fq);
        lists[0] = a[0].p;
        lists[1] = bn;
        lists[2] = bp;
        lists[3] = a[3].p;
        lists[4] = a[4].p;
        lists[5] = snow;
        lists[6] = params[15];
        if (tql && tnl && !fq.oom)
            res = jr_pg_run(b, &st_lim_candidates, params, "claiming jobs", err);
        else
            jr_fail(err, JR_ENOMEM, "postgres: claiming jobs: out of memory");
        if (res && ((jr_pg_fair_of(spec, NULL) != NULL &&
                     jr_pg_fair_read(b, spec, max, lists, fr, err) < 0) ||
                    (jr_pg_aging_any(spec) &&
                     jr_pg_aging_read(b, spec, max, lists, fr, err) < 0))) {
            PQclear(res);
            res = NULL;
        }
        if (res != NULL)        /* the queues' rows in turn, by rank */
            jr_pg_fair_rows_order(fr);
    } else if (!ok) {
        jr_fail(err, JR_ENOMEM, "postgres: claiming jobs: out of memory");
    }
    for (i = 0; i < 5; i++)
        free(a[i].p);
    free(bn);
    free(bp);
    free(bq);
    free(rooms);
    free(tql);
    free(tnl);
    jr_buf_free(&fq);
    return res;
}

static const pg_stmt st_lim_claim = {"jr_lim_claim", 3,
    "UPDATE {{schema}}.jobs j SET state = 'running',"
    /* a fair job's tag is spent: back to queued, the next claim of its
     * queue tags it again (fair.c) */
    " fair_tag = NULL,"
    " attempts = " JR_PG_ATTEMPT_NEXT ", locked_by = $1::text,"
    " locked_until = now() + $2::float8 * interval '1 second',"
    " updated_at = now(), started_at = now(), progress_done = NULL,"
    " progress_total = NULL, progress_note = NULL," JR_PG_DEADLINE_SET
    /* no state test: &st_lim_candidates locked these queued rows in
     * this transaction. With one, a plan that walks the whole
     * jobs_claim index and filters it by id was open to the planner,
     * and stale statistics chose it: 48,000 entries per claim. */
    " WHERE j.id = ANY(" JR_PG_IDS("$3") ")"
    " RETURNING j.id, j.name, j.queue, " JR_PG_PAYLOAD("j.") ", j.attempts,"
    " coalesce(j.max_retries, -1), j.priority,"
    " extract(epoch FROM j.run_at)::float8,"
    " extract(epoch FROM j.created_at)::float8, j.parents::text,"
    " coalesce(j.batch_id, 0), j.flow, j.waits::text,"
    " array_position($3::bigint[], j.id), j.steps::text AS steps,"
    " j.trace AS trace, j.limit_key AS limit_key"};

/* Claims ids (a literal) into out[0..), in the order of ids. */
static int
lim_claim_ids(jr_backend *b, const char *token, double lease,
              const char *ids, jr_job **out, jr_err *err)
{
    char slease[32];
    const char *params[3] = {token, slease, ids};
    PGresult *res;
    int n;

    snprintf(slease, sizeof slease, "%.17g", lease);
    if ((res = jr_pg_run(b, &st_lim_claim, params, "claiming jobs", err)) == NULL)
        return -1;
    if ((n = jr_pg_row_jobs(res, out, err)) < 0) {
        PQclear(res);
        return -1;
    }
    jr_pg_fair_order(res, out, n);
    PQclear(res);
    return n;
}

/* Reads into p the buckets of the keys of a pass's candidates res that
 * were not read yet, in one statement; sk: two arrays to build in. */
static int
lim_read_keys(jr_backend *b, jr_lpick *p, const PGresult *res,
              const jr_pg_fair_rows *fr, jr_buf *sk, jr_err *err)
{
    int r, ok = 0;

    for (r = 0; r < PQntuples(res) && ok >= 0; r++)
        ok = jr_lpick_need(p, PQgetvalue(res, r, 1), PQgetvalue(res, r, 2),
                           PQgetisnull(res, r, 3) ? NULL :
                           PQgetvalue(res, r, 3), lim_need, sk);
    for (r = 0; r < fr->n && ok >= 0; r++)
        ok = jr_lpick_need(p, fr->row[r].name, fr->row[r].queue,
                           fr->row[r].key, lim_need, sk);
    if (ok < 0)
        return jr_fail(err, JR_ENOMEM, "postgres: out of memory");
    return lim_read(b, p, sk, err);
}

/* Takes the candidates res and fair rows fr the pick lets through, room
 * at most, merged by their rank in their queue's turn (res first on a
 * tie): their ids into ids, their queues into tq with a 1 each in tn (the
 * passes' counts), the fair rows taken into ftaken[*nf..]. Returns how
 * many; *rejected counts those refused. */
static int
lim_take_rows(jr_lpick *p, const PGresult *res, const jr_pg_fair_rows *fr,
              int room, jr_buf *ids, jr_buf *tq, jr_buf *tn,
              const jr_pg_fair_row **ftaken, int *nf, int *rejected)
{
    int r = 0, f = 0, ok, k = 0, fair;
    const char *id, *name, *queue, *key;
    long cost;

    *rejected = 0;
    while ((r < PQntuples(res) || f < fr->n) && k < room) {
        fair = r == PQntuples(res) ||
               (f < fr->n && fr->row[f].rank < atol(PQgetvalue(res, r, 4)));
        if (fair) {
            id = fr->row[f].id;
            name = fr->row[f].name;
            queue = fr->row[f].queue;
            key = fr->row[f].key;
            cost = fr->row[f].cost;
        } else {
            id = PQgetvalue(res, r, 0);
            name = PQgetvalue(res, r, 1);
            queue = PQgetvalue(res, r, 2);
            key = PQgetisnull(res, r, 3) ? NULL : PQgetvalue(res, r, 3);
            cost = atol(PQgetvalue(res, r, 5));
        }
        ok = jr_lpick_take_cost(p, name, queue, key, cost);
        if (ok < 0)
            ids->oom = 1;
        *rejected += ok == 0;
        if (ok > 0) {
            sb_num(ids, id);
            sb_elem(tq, queue);
            sb_num(tn, "1");
            if (fair)
                ftaken[(*nf)++] = &fr->row[f];
            k++;
        }
        if (fair)
            f++;
        else
            r++;
    }
    return k;
}

/* The claim under limits, in the open transaction: in passes, as
 * sqlite/claim.c's claim_limited. Returns how many jobs it put in out[]. */
int
jr_pg_claim_limited(jr_backend *b, const char *token, double lease,
                 const jr_claim_spec *spec, jr_job **out, jr_err *err)
{
    jr_lpick *p = lim_load(b, spec, err);
    jr_buf tq = {0}, tn = {0}, ids, sk[2] = {{0}, {0}};
    jr_pg_fair_rows fr = {0};
    const jr_pg_fair_row **ftaken = NULL;
    PGresult *res;
    int total = 0, pass, k = 0, n, rejected = 0, nf;

    if (p == NULL)
        return -1;
    b->rotate++;
    for (pass = 0; pass < 4 && total < spec->max; pass++) {
        jr_pg_fair_rows_clear(&fr);
        if ((res = lim_candidates(b, spec, spec->max - total, p, &tq, &tn,
                                  &fr, err)) == NULL)
            goto fail;
        if (lim_read_keys(b, p, res, &fr, sk, err) < 0) {
            PQclear(res);
            goto fail;
        }
        memset(&ids, 0, sizeof ids);
        free(ftaken);
        nf = 0;
        if ((ftaken = calloc((size_t)fr.n + 1, sizeof *ftaken)) == NULL)
            ids.oom = 1;
        else
            k = lim_take_rows(p, res, &fr, spec->max - total, &ids, &tq,
                              &tn, ftaken, &nf, &rejected);
        n = PQntuples(res) + fr.n;
        PQclear(res);
        if (ids.oom || tq.oom || tn.oom) {
            free(ids.p);
            jr_fail(err, JR_ENOMEM, "postgres: claiming jobs: out of memory");
            goto fail;
        }
        k = k == 0 ? 0 : lim_claim_ids(b, token, lease, sb_array(&ids),
                                       out + total, err);
        free(ids.p);
        if (k < 0)
            goto fail;
        if (nf > 0 && k > 0)
            jr_pg_fair_mark(ftaken, nf, out + total, k);
        if (nf > 0 && jr_pg_fair_save(b, ftaken, nf, err) < 0) {
            total += k;
            goto fail;
        }
        total += k;
        if (rejected == 0 || n == 0)
            break;
    }
    if (lim_save(b, spec, p, err) < 0)
        goto fail;
    if (spec->limit_next)
        *spec->limit_next = jr_lpick_next(p);
    goto done;
fail:
    while (total > 0)
        free(out[--total]);
    total = -1;
done:
    jr_pg_fair_rows_clear(&fr);
    free(ftaken);
    free(tq.p);
    free(tn.p);
    jr_buf_free(&sk[0]);
    jr_buf_free(&sk[1]);
    jr_lpick_free(p);
    return total;
}
