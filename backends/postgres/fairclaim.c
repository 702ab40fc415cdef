/* fairclaim.c - a fair queue claimed alone (fair.c's jr_pg_fair_alone:
 * its one limit, no cap, rate, key or aging, every queue served
 * uncapped) in one statement, as claim.c's st_claim_one claims a plain
 * queue, from the place its last full batch ended while that holds; the
 * claim under limits (limits.c) when another queue has work. Owns the
 * fair-alone claim statements. Uses pg_int.h (the claims' columns;
 * claim.c's rows and names' hash; fair.c's tags), conn.c. */

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "postgres/pg_int.h"
#include "base/limit.h"

/* Whether queue q has no say now, as one row (busy, untagged): busy when
 * another queue has a queued job (the claim under limits takes turns
 * between queues), untagged, unless t (its jobs were just tagged), when q
 * has an untagged job due (jobs_fairnew: back to queued, pushed waiting,
 * due since pushed to run later; its tags are given under the limits' lock
 * first). Each is one probe of an index, ordered with LIMIT 1 (what min()
 * is planned as), so that no plan reads the range whole: an EXISTS or a
 * count was planned on a generic plan's guess of a third of the table as
 * a scan of all of it, at every claim while no other queue had work
 * (200,000 queued jobs: 117 ms a claim), and was, on some statistics, on a
 * custom plan too. Bounded by q on both sides: the first queue of
 * jobs_claim, when that is q itself, was found past the entries of q's
 * jobs claimed since the last vacuum (200 heap fetches a claim in a
 * drain). */
#define FAIR_WHY(q, t) \
    "SELECT (SELECT queue FROM {{schema}}.jobs" \
    "  WHERE state = 'queued' AND queue < " q "::text" \
    "  ORDER BY queue LIMIT 1) IS NOT NULL" \
    "  OR (SELECT queue FROM {{schema}}.jobs" \
    "  WHERE state = 'queued' AND queue > " q "::text" \
    "  ORDER BY queue DESC LIMIT 1) IS NOT NULL AS busy," \
    "  NOT (SELECT " t "::bool) AND coalesce((SELECT run_at" \
    "  FROM {{schema}}.jobs WHERE queue = " q "::text" \
    "  AND state = 'queued' AND fair_key IS NOT NULL AND fair_tag IS NULL" \
    "  ORDER BY run_at LIMIT 1) <= now(), false) AS untagged"

/* A fair queue's claim alone (fair.c's jr_pg_fair_alone: its one limit,
 * nothing capped) in one statement, as st_claim_one's: its first $4 ready
 * jobs by (priority, start tag, id), one range of jobs_fairtag ($5 the
 * queue), their tags spent, the queue's clock moved to the highest one
 * taken, each row with its tag (the rank's, fair_claim puts the rows in
 * it) and its weight (the one it was tagged with, $6 the config's
 * default). Nothing while FAIR_WHY ($5, $7) says no: no row, and
 * fair_claim asks st_fair_why why. The clock is moved only when its row
 * is free: while another claim holds it (the runner's second connection's,
 * another runner's), that one moves it, to its own batch's tags, and the
 * next claim to these (the clock only says where a key new or back starts:
 * a batch behind at most, for a claim). The wait for that row was most of
 * a claim's time with two claims at once (10 ms of 27 in one of 161
 * jobs); nor is it locked or written when it is at that tag already (a
 * drain over many keys moves it a few times). The update finds its rows
 * by id (the ids of p in an array), not by a join with p: the planner took
 * p for one row and hashed the whole table beside it (100 ms a claim), or,
 * with statistics of a table last analyzed empty, scanned it for each.
 * The tag a row had, which RETURNING cannot see (it is spent), is p's, by
 * a binary search of p's ids in id order (width_bucket): array_position
 * read half the array a row, 25,000 compares a claim of 160.
 * The update is the statement itself, not a WITH of a SELECT: that one's
 * rows were written to a tuplestore and read back (about 5% of the
 * claim's instructions, as much as the clock's reads of them). The
 * parameters a plan is priced by (the queue, names, batch and place) are
 * read through InitPlans, so that a custom plan is priced as the generic
 * one and the plan cache keeps that after five runs: the queue's value
 * priced a custom plan lower, and the statement was planned again at
 * every claim (0.6 ms of the server's, against a plain claim's 0.3).
 * Fewer InitPlans would do for the plan; all are there so that no value
 * tips it. */
#define FAIR_CLAIM(from) \
    "WITH o AS (" FAIR_WHY("$5", "$7") ")," \
    " p AS (SELECT array_agg(l.id ORDER BY l.id) AS ids," \
    "  array_agg(l.fair_tag ORDER BY l.id) AS tags," \
    "  max(l.fair_tag) AS top" \
    "  FROM (SELECT id, fair_tag FROM {{schema}}.jobs" \
    "   WHERE state = 'queued' AND queue = (SELECT $5::text)" \
    "   AND fair_tag IS NOT NULL AND run_at <= now()" from \
    JR_PG_UNEXPIRED \
    "   AND name = ANY((SELECT $3::text[])::text[])" \
    "   AND NOT (SELECT busy OR untagged FROM o)" \
    "   AND NOT EXISTS (SELECT 1 FROM {{schema}}.queues q" \
    "    WHERE q.name = $5::text AND q.paused)" \
    "   ORDER BY priority, fair_tag, id LIMIT (SELECT $4::int)" \
    "   FOR UPDATE SKIP LOCKED) l)," \
    " c AS (SELECT queue FROM {{schema}}.fair_clocks" \
    "  WHERE queue = $5::text AND clock < (SELECT top FROM p)" \
    "  FOR UPDATE SKIP LOCKED)," \
    " t AS (UPDATE {{schema}}.fair_clocks f" \
    "  SET clock = greatest(f.clock, (SELECT top FROM p))" \
    "  WHERE f.queue = $5::text AND EXISTS (SELECT 1 FROM c))," \
    " i AS (INSERT INTO {{schema}}.fair_clocks (queue, clock)" \
    "  SELECT $5::text, top FROM p WHERE top IS NOT NULL" \
    "  AND NOT EXISTS (SELECT 1 FROM {{schema}}.fair_clocks" \
    "   WHERE queue = $5::text)" \
    "  ON CONFLICT (queue) DO NOTHING)" \
    " UPDATE {{schema}}.jobs j SET " CLAIM_SET ", fair_tag = NULL" \
    " WHERE j.id = ANY((SELECT ids FROM p)::bigint[])" \
    " RETURNING " CLAIM_COLUMNS ", 0::bigint AS ord," \
    " coalesce(j.fair_w, $6::float8) AS fair_w," \
    " (SELECT tags FROM p)[width_bucket(j.id, (SELECT ids FROM p))]" \
    " AS tag" CLAIM_STEPS
static const pg_stmt st_fair_claim = {"jr_fair_claim1", 7, FAIR_CLAIM("")};

/* st_fair_claim from a place in its queue, not from the front of
 * jobs_fairtag: the jobs after (priority, tag, id) ($8, $9, $10), as
 * st_claim_from's in a plain queue (whose comment says why). A tag is
 * given at a push or at a claim's tags (st_fair_claim's $7), never below
 * the queue's clock when given, and both forget the place: a push by its
 * wake-up, the tags by the claim that gives them. */
static const pg_stmt st_fair_claim_from = {"jr_fair_claim_from", 10,
    FAIR_CLAIM("   AND (priority, fair_tag, id) > ((SELECT $8::int),"
               " (SELECT $9::float8), (SELECT $10::bigint))")};

/* Why a fair claim took nothing: FAIR_WHY of queue $1, $2 as its $7. */
static const pg_stmt st_fair_why = {"jr_fair_why", 2,
    FAIR_WHY("$1", "$2")};

/* A claimed row's rank key: (priority, tag, id) as the claim ordered
 * them, the tag as its float8 (PostgreSQL writes the shortest text that
 * reads back to the same value, extra_float_digits 1 by default: the
 * same order), NaN last as PostgreSQL sorts it. */
typedef struct {
    int     priority;
    double  tag;
    int64_t id;
    int     row;
} fair_rank;

static int
fair_rank_cmp(const void *pa, const void *pb)
{
    const fair_rank *a = pa, *b = pb;
    int na = isnan(a->tag), nb = isnan(b->tag);

    if (a->priority != b->priority)
        return a->priority < b->priority ? -1 : 1;
    if (na || nb) {
        if (na != nb)
            return na - nb;
    } else if (a->tag != b->tag)
        return a->tag < b->tag ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* Puts out[0..n) (row i of res is out[i]) in the claim's order, (priority,
 * tag, id); *last the row of its last job, or -1. Out of memory leaves
 * them as they came, and *last -1 (no place). */
static void
fair_rank_rows(const PGresult *res, jr_job **out, int n, int *last)
{
    fair_rank *k;
    jr_job **tmp;
    int i;

    *last = -1;
    if (n < 1 || (k = calloc((size_t)n, sizeof *k)) == NULL)
        return;
    if ((tmp = calloc((size_t)n, sizeof *tmp)) == NULL) {
        free(k);
        return;
    }
    for (i = 0; i < n; i++) {
        k[i].priority = out[i]->priority;
        k[i].tag = PQgetisnull(res, i, 15) ? NAN :
                   strtod(PQgetvalue(res, i, 15), NULL);
        k[i].id = out[i]->id;
        k[i].row = i;
    }
    qsort(k, (size_t)n, sizeof *k, fair_rank_cmp);
    for (i = 0; i < n; i++)
        tmp[i] = out[k[i].row];
    memcpy(out, tmp, (size_t)n * sizeof *out);
    *last = k[n - 1].row;
    free(tmp);
    free(k);
}

/* Remembers where a full batch of st_fair_claim (res) ended: its last job
 * in (priority, tag, id) order, row r, with the tag as the server wrote
 * it, for names (jr_pg_names_hash of the names and the queue). The time is
 * that of the last claim from the front (from is 0). */
static void
fplace_set(jr_backend *b, const PGresult *res, int r, uint64_t names,
           int from)
{
    b->fplace_on = 0;
    if (r < 0 || PQgetisnull(res, r, 15) ||
        (size_t)PQgetlength(res, r, 15) >= sizeof b->fplace_tag)
        return;
    strcpy(b->fplace_tag, PQgetvalue(res, r, 15));
    b->fplace_priority = atoi(PQgetvalue(res, r, 6));
    b->fplace_id = strtoll(PQgetvalue(res, r, 0), NULL, 10);
    b->fplace_names = names;
    b->fplace_on = 1;
    if (!from)
        b->fplace_set = jr_mono();
}

/* Whether the fair place holds for a claim of names (its hash): set by
 * the last claim, within fplace_secs of the last claim from the front,
 * and no wake-up since (a push, a job back to queued). */
static int
fplace_holds(jr_backend *b, uint64_t names)
{
    if (!b->fplace_on || b->fplace_names != names ||
        jr_mono() - b->fplace_set > b->fplace_secs || jr_pg_woken(b))
        b->fplace_on = 0;
    return b->fplace_on;
}

/* Why st_fair_claim (p its parameters) took nothing: -2 when another
 * queue had work (or, its jobs just tagged, it still took nothing), 1
 * when the queue has untagged jobs, 0 when neither (it has no job to
 * take now), -1 with err set. */
static int
fair_why(jr_backend *b, const char *const *p, jr_err *err)
{
    const char *q[2] = {p[4], p[6]};
    PGresult *res;
    int rc;

    if ((res = jr_pg_run(b, &st_fair_why, q, "claiming jobs of a fair queue",
                         err)) == NULL)
        return -1;
    if (PQntuples(res) != 1)
        rc = 0;
    else if (PQgetvalue(res, 0, 0)[0] == 't')
        rc = -2;
    else
        rc = PQgetvalue(res, 0, 1)[0] == 't';
    PQclear(res);
    return rc;
}

/* st_fair_claim into out[0..) in its fair order, each job's weight set:
 * how many, -1 with err set, -2 when another queue had work (the claim
 * under limits is to run, and runs instead for the next 100 claims).
 * When the queue has untagged jobs, they are tagged (the limits' lock
 * taken) and the statement runs again, from the front. A full batch
 * leaves a place that the next claim starts from while it holds
 * (fplace_holds). */
static int
fair_claim(jr_backend *b, const char *const *params, const jr_limit *f,
           jr_job **out, jr_err *err)
{
    const char *p[10];
    char sdef[32], prio[16], id[24];
    uint64_t names = jr_pg_names_hash(params[2]) ^
                     (jr_pg_names_hash(f->scope) * 1099511628211ull);
    PGresult *res;
    double t = 0;
    int i, n, why, last, from = fplace_holds(b, names);

    snprintf(sdef, sizeof sdef, "%.17g", f->fair_default > 0 ?
             f->fair_default : 1);
    memcpy(p, params, 4 * sizeof *p);
    p[4] = f->scope + 6;
    p[5] = sdef;
    p[6] = "f";
    for (;;) {
        if (from) {
            snprintf(prio, sizeof prio, "%d", b->fplace_priority);
            snprintf(id, sizeof id, "%lld", (long long)b->fplace_id);
            p[7] = prio;
            p[8] = b->fplace_tag;
            p[9] = id;
        } else
            t = jr_mono();
        if ((res = jr_pg_run(b, from ? &st_fair_claim_from : &st_fair_claim,
                             p, "claiming jobs of a fair queue", err)) ==
            NULL)
            return -1;
        if ((n = PQntuples(res)) > 0)
            break;
        PQclear(res);
        b->fplace_on = from = 0;
        if ((why = fair_why(b, p, err)) < 0 && why != -2)
            return -1;
        if (why == 0)
            return 0;           /* nothing ready */
        if (why == -2 || p[6][0] == 't') {
            b->fair_busy = 100;
            return -2;
        }
        if (jr_pg_fair_tag_alone(b, p[4], err) < 0)   /* tags first */
            return -1;
        p[6] = "t";
    }
    if (jr_pg_row_jobs(res, out, err) < 0) {
        PQclear(res);
        return -1;
    }
    if (!from) {
        b->fplace_secs = JR_PG_PLACE_COST * (jr_mono() - t);
        if (b->fplace_secs < JR_PG_PLACE_SECS)
            b->fplace_secs = JR_PG_PLACE_SECS;
    }
    for (i = 0; i < n; i++) {
        out[i]->fair_weight = strtod(PQgetvalue(res, i, 14), NULL);
        if (!(out[i]->fair_weight > 0))
            out[i]->fair_weight = 1;
    }
    fair_rank_rows(res, out, n, &last);
    if (n == atoi(params[3]))
        fplace_set(b, res, last, names, from);
    else
        b->fplace_on = 0;       /* the queue ran short: from the front */
    PQclear(res);
    return n;
}

int
jr_pg_fair_claim(jr_backend *b, const char *token, double lease,
                 const jr_claim_spec *spec, jr_job **out, jr_err *err)
{
    char slease[32], smax[16];
    const char *params[4];
    jr_buf a[3];
    int i, n, one;

    if ((one = jr_pg_fair_alone(b, spec, err)) <= 0)
        return one < 0 ? -1 : -2;
    memset(a, 0, sizeof a);
    n = -1;
    if (jr_pg_claim_arrays(spec, a, err) == 0) {
        snprintf(slease, sizeof slease, "%.17g", lease);
        snprintf(smax, sizeof smax, "%d", spec->max);
        params[0] = token;
        params[1] = slease;
        params[2] = a[0].p;
        params[3] = smax;
        n = fair_claim(b, params, spec->limits, out, err);
    }
    for (i = 0; i < 3; i++)
        free(a[i].p);
    if (n >= 0 && spec->limit_next)
        *spec->limit_next = 0;
    return n;
}
