/* fairclaim.c - a fair queue claimed alone (fair.c's jr_pg_fair_alone:
 * its one limit, no cap, rate, key or aging, every queue served
 * uncapped) in one statement, as claim.c's st_claim_one claims a plain
 * queue, from the place its last full batch ended while that holds; the
 * claim under limits (limits.c) when another queue has work. Owns the
 * fair-alone claim statements. Uses pg_int.h (the claims' columns;
 * claim.c's rows and names' hash; fair.c's tags), conn.c. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "postgres/pg_int.h"
#include "base/limit.h"

/* A fair queue's claim alone (fair.c's jr_pg_fair_alone: its one limit,
 * nothing capped) in one statement, as st_claim_one's: its first $4 ready
 * jobs by (priority, start tag, id), one range of jobs_fairtag ($5 the
 * queue), their tags spent, the queue's clock moved to the highest one
 * taken, each row's weight (the one it was tagged with, $6 the config's
 * default) after its rank. The clock is moved only when its row is free:
 * while another claim holds it (the runner's second connection's, another
 * runner's), that one moves it, to its own batch's tags, and the next claim
 * to these (the clock only says where a key new or back starts: a batch
 * behind at most, for a claim). The wait for that row was most of a claim's
 * time with two claims at once (10 ms of 27 in one of 161 jobs). Claims
 * nothing while another queue has a queued job (the claim under limits
 * takes turns between queues) and returns one row of NULLs; nor, unless $7
 * (they were just tagged), while the queue has untagged jobs (jobs_fairnew:
 * back to queued, pushed waiting, due since pushed to run later; one range
 * of it however many are not yet due), whose tags are given under the
 * limits' lock first: one row of NULLs but its name, 'untagged'. The
 * look-up and the lock were two more round trips a claim, run whatever they
 * found. The limited claim's read, then update by id, the other queues'
 * candidates and the clock's statement were 21 us a job on the server
 * beside a plain claim's 16.5. Whether another queue has a
 * queued job is asked as the first and last queue of jobs_claim (min and
 * max, one index probe each), not as EXISTS (queue < $5): a prepared
 * statement's generic plan cannot tell that range's size and scanned the
 * whole table for it, at every claim while no other queue had work
 * (200,000 queued jobs: 117 ms a claim). And the update finds its rows by
 * id (the ids of p in an array), not by a join with p: the planner took p
 * for one row and hashed the whole table beside it (100 ms a claim), or,
 * with statistics of a table last analyzed empty, scanned it for each. */
#define FAIR_CLAIM(from) \
    "WITH o AS (SELECT coalesce((SELECT min(queue) FROM {{schema}}.jobs" \
    "  WHERE state = 'queued') < $5::text" \
    "  OR (SELECT max(queue) FROM {{schema}}.jobs" \
    "  WHERE state = 'queued') > $5::text, false) AS busy," \
    "  NOT $7::bool AND EXISTS (SELECT 1 FROM {{schema}}.jobs" \
    "  WHERE queue = $5::text AND run_at <= now() AND state = 'queued'" \
    "  AND fair_key IS NOT NULL AND fair_tag IS NULL) AS untagged)," \
    " p AS (SELECT array_agg(s.id ORDER BY s.priority, s.fair_tag, s.id)" \
    "  AS ids, array_agg(s.fair_tag ORDER BY s.priority, s.fair_tag, s.id)" \
    "  AS tags" \
    "  FROM (SELECT id, priority, fair_tag FROM {{schema}}.jobs" \
    "   WHERE state = 'queued' AND queue = $5::text" \
    "   AND fair_tag IS NOT NULL AND run_at <= now()" from \
    JR_PG_UNEXPIRED \
    "   AND name = ANY($3::text[])" \
    "   AND NOT (SELECT busy OR untagged FROM o)" \
    "   AND NOT EXISTS (SELECT 1 FROM {{schema}}.queues q" \
    "    WHERE q.name = $5::text AND q.paused)" \
    "   ORDER BY priority, fair_tag, id LIMIT $4::int" \
    "   FOR UPDATE SKIP LOCKED) s)," \
    " u AS (UPDATE {{schema}}.jobs j SET " CLAIM_SET ", fair_tag = NULL" \
    "  FROM p WHERE j.id = ANY(p.ids)" \
    "  RETURNING " CLAIM_COLUMNS "," \
    "  array_position(p.ids, j.id)::bigint AS ord," \
    "  coalesce(j.fair_w, $6::float8) AS fair_w," \
    "  p.tags[array_position(p.ids, j.id)] AS tag" \
    CLAIM_STEPS ")," \
    " c AS (SELECT queue FROM {{schema}}.fair_clocks" \
    "  WHERE queue = $5::text FOR UPDATE SKIP LOCKED)," \
    " t AS (UPDATE {{schema}}.fair_clocks f" \
    "  SET clock = greatest(f.clock, m.tag)" \
    "  FROM (SELECT max(tag) AS tag FROM u) m" \
    "  WHERE f.queue = $5::text AND m.tag IS NOT NULL" \
    "  AND EXISTS (SELECT 1 FROM c))," \
    " i AS (INSERT INTO {{schema}}.fair_clocks (queue, clock)" \
    "  SELECT $5::text, max(tag) FROM u HAVING count(*) > 0" \
    "  AND NOT EXISTS (SELECT 1 FROM {{schema}}.fair_clocks" \
    "   WHERE queue = $5::text)" \
    "  ON CONFLICT (queue) DO NOTHING)" \
    " SELECT * FROM u UNION ALL SELECT NULL, CASE WHEN NOT busy" \
    " THEN 'untagged' END, NULL, NULL, NULL," \
    " NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL," \
    " NULL, NULL, NULL FROM o WHERE busy OR untagged"
static const pg_stmt st_fair_claim = {"jr_fair_claim1", 7, FAIR_CLAIM("")};

/* st_fair_claim from a place in its queue, not from the front of
 * jobs_fairtag: the jobs after (priority, tag, id) ($8, $9, $10), as
 * st_claim_from's in a plain queue (whose comment says why). A tag is
 * given at a push or at a claim's tags (st_fair_claim's $7), never below
 * the queue's clock when given, and both forget the place: a push by its
 * wake-up, the tags by the claim that gives them. */
static const pg_stmt st_fair_claim_from = {"jr_fair_claim_from", 10,
    FAIR_CLAIM("   AND (priority, fair_tag, id) >"
               " ($8::int, $9::float8, $10::bigint)")};

/* Remembers where a full batch of st_fair_claim (res, n rows) ended:
 * its last job in (priority, tag, id) order (the highest rank), with the
 * tag as the server wrote it, for names (jr_pg_names_hash of the names
 * and the queue). The time is that of the last claim from the front
 * (from is 0). */
static void
fplace_set(jr_backend *b, const PGresult *res, int n, uint64_t names,
           int from)
{
    long ord, best = -1;
    int i, r = -1;

    for (i = 0; i < n; i++)
        if ((ord = strtol(PQgetvalue(res, i, 13), NULL, 10)) > best) {
            best = ord;
            r = i;
        }
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
    int i, n, from = fplace_holds(b, names);

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
        n = PQntuples(res);
        if (n == 0 || !PQgetisnull(res, n - 1, 0))
            break;
        b->fplace_on = from = 0;
        if (PQgetisnull(res, n - 1, 1) || p[6][0] == 't') {
            PQclear(res);
            b->fair_busy = 100;
            return -2;
        }
        PQclear(res);           /* untagged jobs: tags first */
        if (jr_pg_fair_tag_alone(b, p[4], err) < 0)
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
    if (n == atoi(params[3]))
        fplace_set(b, res, n, names, from);
    else
        b->fplace_on = 0;       /* the queue ran short: from the front */
    for (i = 0; i < n; i++) {
        out[i]->fair_weight = strtod(PQgetvalue(res, i, 14), NULL);
        if (!(out[i]->fair_weight > 0))
            out[i]->fair_weight = 1;
    }
    jr_pg_fair_order(res, out, n);
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
