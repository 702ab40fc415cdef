/* claim.c - the fair claim across queues (st_claim; st_claim_one when a
 * single queue has work) and the rows it returns as jobs, in the fair order;
 * the undo of a claim the caller could not take. A claim under limits per
 * key goes to limits.c, a fair queue's claimed alone to fairclaim.c. Owns
 * the claim statements. Uses conn.c, arrays.h. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "postgres/pg_int.h"
#include "postgres/arrays.h"

/* The places of a claim's last three columns (CLAIM_STEPS) in res, by
 * place when they end it (PQfnumber folds and copies the name it looks
 * up), else steps by name and no trace or limit key: -1 for none. Once
 * a result, not once a row. */
typedef struct {
    int st, tr, lk;
} step_cols;

static step_cols
steps_at(const PGresult *res)
{
    int nf = PQnfields(res);
    int last = nf >= 3 && strcmp(PQfname(res, nf - 1), "limit_key") == 0 &&
               strcmp(PQfname(res, nf - 2), "trace") == 0 &&
               strcmp(PQfname(res, nf - 3), "steps") == 0;
    step_cols c;

    c.st = last ? nf - 3 : PQfnumber(res, "steps");
    c.tr = last ? nf - 2 : -1;
    c.lk = last ? nf - 1 : -1;
    return c;
}

/* A float8 as the server writes it: strtod's value. The claim's two
 * epoch times ("1764512345.123456": digits, a point, at most 22 more)
 * take the exact fast path (Clinger's: an integer below 2^53 divided by
 * a power of ten that a double holds exactly rounds once, as strtod
 * does), a thousand instructions a job fewer; anything else is
 * strtod's. */
static double
float8_value(const char *s)
{
    static const double pow10[] = {
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
        1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    const char *p = s + (*s == '-');
    uint64_t m = 0;
    int digits = 0, frac = -1;

    for (;; p++) {
        if (*p >= '0' && *p <= '9') {
            if (++digits > 16)
                return strtod(s, NULL);
            m = m * 10 + (uint64_t)(*p - '0');
            if (frac >= 0)
                frac++;
        } else if (*p == '.' && frac < 0) {
            frac = 0;
        } else {
            break;
        }
    }
    if (*p != '\0' || digits == 0 || m > (1ull << 53))
        return strtod(s, NULL);
    return (*s == '-' ? -1.0 : 1.0) * ((double)m / pow10[frac < 0 ? 0 :
                                                           frac]);
}

/* Row r of a claim's result as a new job (jr_pg_row_job). */
static jr_job *
row_job(const PGresult *res, int r, step_cols c)
{
    jr_job *j = jr_job_new_full(strtoll(PQgetvalue(res, r, 0), NULL, 10),
                                 PQgetvalue(res, r, 1),
                                 PQgetvalue(res, r, 2),
                                 PQgetvalue(res, r, 3),
                                 (size_t)PQgetlength(res, r, 3),
                                 PQgetisnull(res, r, 9) ? NULL :
                                 PQgetvalue(res, r, 9),
                                 c.st < 0 || PQgetisnull(res, r, c.st) ?
                                 NULL : PQgetvalue(res, r, c.st),
                                 PQgetisnull(res, r, 12) ? NULL :
                                 PQgetvalue(res, r, 12),
                                 c.tr < 0 || PQgetisnull(res, r, c.tr) ?
                                 NULL : PQgetvalue(res, r, c.tr),
                                 c.lk < 0 || PQgetisnull(res, r, c.lk) ?
                                 NULL : PQgetvalue(res, r, c.lk));

    if (j == NULL)
        return NULL;
    j->attempt = atoi(PQgetvalue(res, r, 4));
    j->max_retries = atoi(PQgetvalue(res, r, 5));
    j->priority = atoi(PQgetvalue(res, r, 6));
    j->run_at = float8_value(PQgetvalue(res, r, 7));
    j->created_at = float8_value(PQgetvalue(res, r, 8));
    j->batch = strtoll(PQgetvalue(res, r, 10), NULL, 10);
    j->flow = atoi(PQgetvalue(res, r, 11));
    return j;
}

/* Returns a new job from row r of a claim's result (columns CLAIM_COLUMNS),
 * freed with free(); NULL when out of memory. */
jr_job *
jr_pg_row_job(const PGresult *res, int r)
{
    return row_job(res, r, steps_at(res));
}

/* The claimed rows of res as new jobs into out (freed with free()): the
 * count, or -1 out of memory (none left in out). */
int
jr_pg_row_jobs(const PGresult *res, jr_job **out, jr_err *err)
{
    step_cols c = steps_at(res);
    int i, n = PQntuples(res);

    for (i = 0; i < n; i++)
        if ((out[i] = row_job(res, i, c)) == NULL) {
            while (i-- > 0)
                free(out[i]);
            return jr_fail(err, JR_ENOMEM, "postgres: claiming %d jobs: "
                           "out of memory", n);
        }
    return n;
}

/* Undoes a claim the caller could not take (out of memory). */
static const pg_stmt st_unclaim = {"jr_unclaim", 2,
    "UPDATE {{schema}}.jobs SET state = 'queued',"
    " attempts = attempts - 1, locked_by = NULL, locked_until = NULL,"
    " updated_at = now()"
    " WHERE id = ANY($2::bigint[]) AND state = 'running'"
    " AND locked_by = $1::text"};

/* Out of memory after a claim: gives the jobs back (best effort; if this
 * fails too, their leases expire and rescue requeues them). */
static void
jr_pg_unclaim(jr_backend *b, const char *token, const PGresult *res)
{
    const char *params[2];
    jr_buf s = {0};
    int r;

    for (r = 0; r < PQntuples(res); r++)
        sb_num(&s, PQgetvalue(res, r, 0));
    params[0] = token;
    params[1] = sb_array(&s);
    if (!s.oom)
        PQclear(jr_pg_run(b, &st_unclaim, params, "unclaim", NULL));
    free(s.p);
}

/* Fair: per queue not paused, its first cap ready jobs (a LATERAL
 * LIMIT over the jobs_claim index, so a backlog costs no scan), ranked
 * within it; then round robin over the ranks, the queue that leads
 * each round rotating ($8) over the queues with jobs. $5/$6 list caps,
 * $7 is the cap of the others; $4 the total. */
static const pg_stmt st_claim = {"jr_claim", 8,
    WORK_QUEUES
    " q AS (SELECT qq.name, least(coalesce(w.cap, $7::int), $4::int)"
    "  AS cap FROM qq"
    "  LEFT JOIN (SELECT queue, min(cap) AS cap"
    "   FROM unnest($5::text[], $6::int[]) AS u(queue, cap)"
    "   GROUP BY queue) w ON w.queue = qq.name"
    "  WHERE NOT qq.paused"
    "  AND least(coalesce(w.cap, $7::int), $4::int) > 0),"
    " c0 AS (SELECT r.id, r.rn, q.name AS qname, r.priority, r.run_at"
    "  FROM q"
    "  CROSS JOIN LATERAL (SELECT s.id, s.priority, s.run_at,"
    "   row_number() OVER (ORDER BY s.priority, s.run_at, s.id) AS rn"
    "   FROM (SELECT id, priority, run_at FROM {{schema}}.jobs"
    "    WHERE state = 'queued' AND queue = q.name AND run_at <= now()"
    JR_PG_UNEXPIRED
    "    AND name = ANY($3::text[])"
    "    ORDER BY priority, run_at, id LIMIT q.cap"
    "    FOR UPDATE SKIP LOCKED) s) r),"
    /* the leading queue rotates over the queues with jobs: $8 */
    " c1 AS (SELECT c0.*, dense_rank() OVER (ORDER BY qname) AS qi"
    "  FROM c0),"
    " c AS (SELECT c1.*, (qi + $8::bigint) % max(qi) OVER () AS turn"
    "  FROM c1),"
    " pick AS (SELECT id, row_number() OVER"
    "  (ORDER BY rn, turn, priority, run_at, id) AS ord FROM c"
    "  ORDER BY rn, turn, priority, run_at, id LIMIT $4::int)"
    " UPDATE {{schema}}.jobs j SET " CLAIM_SET
    " FROM pick WHERE j.id = pick.id"
    " RETURNING " CLAIM_COLUMNS ", pick.ord" CLAIM_STEPS};

/* The claim spec's names and queue caps as the array parameters of
 * st_claim, into a[0..3); -1 with err set when out of memory. */
int
jr_pg_claim_arrays(const jr_claim_spec *spec, jr_buf *a, jr_err *err)
{
    char num[16];
    int i;

    for (i = 0; i < spec->nnames; i++)
        sb_elem(&a[0], spec->names[i]);
    for (i = 0; i < spec->nqueues; i++) {
        sb_elem(&a[1], spec->queues[i].queue);
        snprintf(num, sizeof num, "%d", spec->queues[i].max);
        sb_num(&a[2], num);
    }
    for (i = 0; i < 3; i++)
        if (sb_array(&a[i]), a[i].oom)
            return jr_fail(err, JR_ENOMEM, "postgres: claiming jobs: out "
                           "of memory");
    return 0;
}

/* Puts out[0..n) (row i of res is out[i]) in the fair order the
 * statement ranked them in, 1..n in column 12, which RETURNING does not
 * keep. Out of memory leaves them as they came. */
void
jr_pg_fair_order(const PGresult *res, jr_job **out, int n)
{
    jr_job **tmp;
    long ord;
    int i;

    if (n < 2 || (tmp = calloc((size_t)n, sizeof *tmp)) == NULL)
        return;
    for (i = 0; i < n; i++) {
        ord = atol(PQgetvalue(res, i, 13));
        if (ord < 1 || ord > n || tmp[ord - 1] != NULL)
            break;              /* not a ranking: keep the order */
        tmp[ord - 1] = out[i];
    }
    if (i == n)
        memcpy(out, tmp, (size_t)n * sizeof *out);
    free(tmp);
}

/* st_claim's common case, when every queue is served uncapped and one
 * queue only not paused has queued jobs (one probe of jobs_claim a
 * queue, two at most: empty queues do not count, and a queue of jobs
 * due later does): the fair order is then that queue's own
 * (priority, run_at, id), read straight off the jobs_claim index
 * without the per-queue ranking, and the rows found by id (half the
 * work of st_claim for 512 jobs). Rows come in no order (claim_one
 * sorts them). Claims nothing with several queues and returns one
 * row of NULLs: the caller then runs st_claim. */
static const pg_stmt st_claim_one = {"jr_claim_one", 4,
    /* qq holds the queues with queued jobs already (WORK_QUEUES'
     * seeks): the first two will do */
    WORK_QUEUES
    " one AS (SELECT min(name) AS name, count(*) AS n"
    "  FROM (SELECT qq.name FROM qq LIMIT 2) qs),"
    " u AS (UPDATE {{schema}}.jobs j SET " CLAIM_SET
    "  WHERE j.id = ANY(ARRAY(SELECT id FROM {{schema}}.jobs"
    "   WHERE state = 'queued' AND run_at <= now()"
    JR_PG_UNEXPIRED
    "   AND queue = (SELECT name FROM one WHERE n = 1)"
    "   AND name = ANY($3::text[])"
    "   ORDER BY priority, run_at, id LIMIT $4::int"
    "   FOR UPDATE SKIP LOCKED))"
    "  RETURNING " CLAIM_COLUMNS ", 0::bigint, j.run_at::text"
    CLAIM_STEPS ")"
    " SELECT * FROM u UNION ALL SELECT NULL, NULL, NULL, NULL, NULL,"
    " NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,"
    " NULL, NULL FROM one"
    " WHERE n > 1"};

/* st_claim_one from a place in its queue ($5), not from the front of
 * jobs_claim: the jobs after (priority, run_at, id) ($6, $7, $8). A job
 * claimed leaves its entry in jobs_claim until vacuum removes it, and
 * while a snapshot older than the claim is open (an idle transaction, a
 * long report) vacuum cannot, nor can a scan mark it dead: a claim from
 * the front steps over every job claimed since, each one a heap fetch.
 * Rows come in no order (claim_one sorts them). */
static const pg_stmt st_claim_from = {"jr_claim_from", 8,
    "UPDATE {{schema}}.jobs j SET " CLAIM_SET
    " WHERE j.id = ANY(ARRAY(SELECT id FROM {{schema}}.jobs"
    "  WHERE state = 'queued' AND queue = $5::text"
    "  AND (priority, run_at, id) > ($6::int, $7::timestamptz, $8::bigint)"
    "  AND run_at <= now()"
    JR_PG_UNEXPIRED
    " AND name = ANY($3::text[])"
    "  AND NOT EXISTS (SELECT 1 FROM {{schema}}.queues p"
    "   WHERE p.name = $5::text AND p.paused)"
    "  ORDER BY priority, run_at, id LIMIT $4::int"
    "  FOR UPDATE SKIP LOCKED))"
    " RETURNING " CLAIM_COLUMNS ", 0::bigint, j.run_at::text"
    CLAIM_STEPS};

/* FNV-1a of the claim's names (the array parameter): a place holds for
 * the names it was found with only (a name left out then may have jobs
 * before it). */
uint64_t
jr_pg_names_hash(const char *s)
{
    uint64_t h = 14695981039346656037ull;

    while (*s)
        h = (h ^ (unsigned char)*s++) * 1099511628211ull;
    return h;
}

/* Remembers where a full batch of st_claim_one or st_claim_from (res)
 * ended: its last job in (priority, run_at, id) order, with run_at as
 * the server wrote it (column 14: a float8 of seconds would round it),
 * and the names claimed. The time it was set is that of the last claim
 * from the front (from is 0). */
static void
place_set(jr_backend *b, const PGresult *res, const jr_job *last,
          uint64_t names, int from)
{
    int r;

    for (r = 0; r < PQntuples(res); r++)
        if (strtoll(PQgetvalue(res, r, 0), NULL, 10) == last->id)
            break;
    if (r == PQntuples(res) || strlen(last->queue) >= sizeof b->place_queue
        || (size_t)PQgetlength(res, r, 14) >= sizeof b->place_run_at) {
        b->place_queue[0] = '\0';
        return;
    }
    strcpy(b->place_queue, last->queue);
    strcpy(b->place_run_at, PQgetvalue(res, r, 14));
    b->place_priority = last->priority;
    b->place_id = last->id;
    b->place_names = names;
    if (!from)
        b->place_set = jr_mono();
}

/* st_claim_from, when the last claim left a place that still holds: 1
 * with its result in *res, 0 if there is none, -1 with err set. */
static int
claim_from(jr_backend *b, const char *const *params, PGresult **res,
           jr_err *err)
{
    char prio[16], id[24];
    const char *p[8];

    if (b->place_queue[0] == '\0' ||
        b->place_names != jr_pg_names_hash(params[2]) ||
        jr_mono() - b->place_set > b->place_secs || jr_pg_woken(b)) {
        b->place_queue[0] = '\0';
        return 0;
    }
    snprintf(prio, sizeof prio, "%d", b->place_priority);
    snprintf(id, sizeof id, "%lld", (long long)b->place_id);
    memcpy(p, params, 4 * sizeof *p);
    p[4] = b->place_queue;
    p[5] = prio;
    p[6] = b->place_run_at;
    p[7] = id;
    if ((*res = jr_pg_run(b, &st_claim_from, p, "claiming jobs",
                          err)) == NULL)
        return -1;
    return 1;
}

/* st_claim_one when the spec allows it (no queue capped or left out),
 * from the place the last one left when it holds (claim_from): 1 with
 * its result in *res (2 when it claimed from the place), 0 if st_claim
 * is to run instead, -1 with err set on failure. */
static int
claim_one(jr_backend *b, const jr_claim_spec *spec,
          const char *const *params, PGresult **res, jr_err *err)
{
    double t;
    int n, from;

    *res = NULL;
    if (spec->nqueues > 0 || spec->others < spec->max) {
        b->place_queue[0] = '\0';
        return 0;
    }
    if (b->fair_only > 0) {
        b->fair_only--;
        return 0;
    }
    if ((from = claim_from(b, params, res, err)) < 0)
        return -1;
    if (!from) {
        t = jr_mono();
        if ((*res = jr_pg_run(b, &st_claim_one, params, "claiming jobs",
                              err)) == NULL)
            return -1;
        b->place_secs = JR_PG_PLACE_COST * (jr_mono() - t);
        if (b->place_secs < JR_PG_PLACE_SECS)
            b->place_secs = JR_PG_PLACE_SECS;
    }
    n = PQntuples(*res);
    if (n > 0 && PQgetisnull(*res, n - 1, 0)) {
        PQclear(*res);          /* several queues: nothing was claimed */
        *res = NULL;
        b->fair_only = 100;
        return 0;
    }
    if (n < spec->max)          /* the queue ran short: from the front */
        b->place_queue[0] = '\0';
    return 1 + from;
}

/* The claim statement, in whatever transaction is open. */
int
jr_pg_claim_stmt(jr_backend *b, const char *token, double lease,
              const jr_claim_spec *spec, jr_job **out, jr_err *err)
{
    char slease[32], smax[16], sothers[16], srot[16];
    const char *params[8];
    jr_buf a[3];
    PGresult *res = NULL;
    uint64_t names;
    int i, n, one;

    if (spec->nnames <= 0 || spec->max <= 0)
        return 0;
    if (spec->nlimits > 0 &&
        (n = jr_pg_fair_claim(b, token, lease, spec, out, err)) != -2)
        return n;
    if (spec->nlimits > 0)
        return jr_pg_claim_limited(b, token, lease, spec, out, err);
    memset(a, 0, sizeof a);
    if (jr_pg_claim_arrays(spec, a, err) < 0) {
        for (i = 0; i < 3; i++)
            free(a[i].p);
        return -1;
    }
    snprintf(slease, sizeof slease, "%.17g", lease);
    snprintf(smax, sizeof smax, "%d", spec->max);
    snprintf(sothers, sizeof sothers, "%d", spec->others);
    params[0] = token;
    params[1] = slease;
    params[2] = a[0].p;
    params[3] = smax;
    params[4] = a[1].p;
    params[5] = a[2].p;
    params[6] = sothers;
    snprintf(srot, sizeof srot, "%u", b->rotate++ % 1000000u);
    params[7] = srot;           /* the queue that leads the round */
    if ((one = claim_one(b, spec, params, &res, err)) == 0)
        res = jr_pg_run(b, &st_claim, params, "claiming jobs", err);
    names = jr_pg_names_hash(params[2]);
    for (i = 0; i < 3; i++)
        free(a[i].p);
    if (res == NULL)
        return -1;
    if ((n = jr_pg_row_jobs(res, out, err)) < 0) {
        jr_pg_unclaim(b, token, res);
        PQclear(res);
        return -1;
    }
    if (one) {
        qsort(out, (size_t)n, sizeof *out, jr_claimed_cmp);
        if (n == spec->max)
            place_set(b, res, out[n - 1], names, one == 2);
    } else
        jr_pg_fair_order(res, out, n);
    PQclear(res);
    return n;
}

int
jr_pg_claim(jr_backend *b, const char *token, double lease,
         const jr_claim_spec *spec, jr_job **out, jr_err *err)
{
    if (spec->nnames <= 0 || spec->max <= 0)
        return 0;
    if (jr_pg_ready(b, err) < 0)
        return -1;
    if (spec->nlimits > 0) {    /* several statements: one transaction */
        int n = -1;
        if (jr_pg_run_plain(b, "BEGIN", "claiming jobs", err) == 0 &&
            (n = jr_pg_claim_stmt(b, token, lease, spec, out, err)) >= 0 &&
            jr_pg_run_plain(b, "COMMIT", "claiming jobs", err) < 0) {
            while (n > 0)
                free(out[--n]);
            n = -1;
        }
        if (n < 0)
            jr_pg_rollback(b);
        return n;
    }
    return jr_pg_claim_stmt(b, token, lease, spec, out, err);
}
