/* lane.c - PostgreSQL: a second database round in flight. The runner's
 * connection records results and claims one round at a time, and while a
 * round is out (a commit and a claim of a few hundred rows: milliseconds
 * of server work) the server works for nobody else of ours. The lane is a
 * second connection and thread that records the pending results and
 * claims the next batch while the first round is still out, so the server
 * runs two rounds at once, on two cores (two runners of one worker each
 * drained 40% faster than one of two; docs/performance.md). Each round
 * then claims half a batch, so that the two take turns.
 *
 * Only plain rounds take the lane: no service shapes the claim (limits,
 * capped or served-only queues: jr_service_shapes), or the one limit is
 * a fair queue's with no cap, rate, key or aging (fair_alone: the
 * engine claims it in one statement too, its jobs by start tag, and the
 * lane's claim carries a copy of the limit), and no progress
 * report pending or in the first round's flight (a job's progress must
 * never land after its end). Everything else
 * (renewals, rescues, cancels, schedules, counts, retries after an
 * outage) stays on the first connection. SQLite has one writer: no lane.
 * Opened at the first round that wants it; if the database refuses the
 * connection, the runner logs it and uses the one. Uses lane.h,
 * master_int.h, dbthread.h, dbcalls.h, caps.h, log.h. */
#include <stdlib.h>
#include <string.h>

#include "db/dbcalls.h"
#include "db/dbthread.h"
#include "master/lane.h"
#include "base/limit.h"
#include "base/log.h"
#include "master/master_int.h"
#include "caps.h"

#define LANE_MIN     64         /* jobs: a smaller claim waits for the first
                                   connection's round */
#define LANE_ROUND   (CLAIM_MAX / 2)     /* jobs a round claims at most */
#define LANE_PAUSE   5.0        /* seconds without the lane after it failed */
#define STOP_WAIT_LANE 2.0      /* seconds its round has at a stop before
                                   its statement is interrupted */

struct jr_lane {
    master      *m;
    jr_db       *db;            /* its connection, NULL until the first */
    jr_dbthread *t;             /* and thread */
    int          rounds;        /* the engine's claim rounds (caps.h) */
    int          opened;        /* tried: t NULL means refused */
    int          busy;          /* a round is out */
    double       off_until;     /* mono: paused after a failure */
    gen         *gen;           /* the handler names its claim borrows */
    jr_limits    limits;        /* its claim's: a fair queue's alone */
    pending     *inflight;      /* its results, kept for recorded() */
    int          ninflight, capinflight;
    jr_result   *results;       /* copies for the thread */
    jr_job      *claimed[CLAIM_MAX];
    int          want, nclaimed, applied;
    double       lease;
    jr_err       err;
};

/* On the lane's thread: the results and a claim in one transaction. */
static void
run(jr_db *db, void *arg)
{
    jr_lane *l = arg;

    l->applied = 0;
    memset(&l->err, 0, sizeof l->err);
    l->nclaimed = jr_dbcall_complete_claim(db, l->m->token, l->results,
                                          l->ninflight, &l->applied,
                                          l->lease, l->gen->names,
                                          l->gen->n, l->want,
                                          l->limits.l, l->limits.n,
                                          l->claimed, &l->err);
}

static void
done(void *arg, int ran)
{
    jr_lane *l = arg;
    master *m = l->m;

    l->busy = 0;
    m->lane_want = 0;
    free(l->results);
    l->results = NULL;
    jr_gen_unref(l->gen);
    l->gen = NULL;
    if (!ran || l->nclaimed < 0) {
        /* nothing was recorded: the results go back for the next round */
        if (ran) {
            jr_log(JR_LOG_WARN, "database, second connection: %s; rounds "
                   "go on the first for %.0f s", l->err.msg, LANE_PAUSE);
            l->off_until = jr_mono() + LANE_PAUSE;
        }
        if (jr_claimq_unsend(m, l->inflight, l->ninflight) < 0)
            jr_claimq_lost(l->inflight, l->ninflight);
        l->ninflight = 0;
        m->want_claim = 1;
    } else {
        jr_log(JR_LOG_DEBUG, "second connection: %d results, %d jobs "
               "claimed", l->ninflight, l->nclaimed);
        jr_claimq_recorded(m, l->inflight, l->ninflight, l->applied);
        if (!m->stopping)
            jr_service_recorded(m, l->applied);
        l->ninflight = 0;
        jr_claimq_take_more(m, l->claimed, l->nclaimed, l->want);
    }
    if (!m->stopping) {
        jr_claimq_dispatch(m);
        jr_master_kick(m);
    }
}

/* 1 if pending p[0..n) holds a progress report. */
static int
has_progress(const pending *p, int n)
{
    for (int i = 0; i < n; i++)
        if (JR_RESULT_RUNS_ON(p[i].r.kind))
            return 1;
    return 0;
}

/* The lane's state, made at the first call (NULL when out of memory). */
static jr_lane *
lane_of(master *m)
{
    jr_lane *l = m->lane;

    if (l == NULL && (l = m->lane = calloc(1, sizeof *l)) != NULL) {
        l->m = m;
        l->rounds = jr_url_caps(m->cfg->backend)->rounds;
    }
    return l;
}

/* Whether the claims' one limit, as the last cycle was given them, is a
 * fair queue's with no cap, rate, key or aging, and no queue is capped
 * or left out: a claim as plain as a plain one, in the engine's one
 * statement (backends/postgres/claim.c, st_fair_claim; any other claim
 * under limits runs as one there too, after the limits' lock). */
static int
fair_alone(const master *m)
{
    const jr_limit *f = m->cycle.limits;

    return m->cycle.nlimits == 1 && m->cfg->queues.n == 0 &&
           m->cfg->queues.nserve == 0 && f->fair_path != NULL &&
           strncmp(f->scope, JR_LIMIT_QPREFIX, 6) == 0 &&
           f->key_path == NULL && f->all.concurrency == 0 &&
           !(f->all.rate > 0) && f->per_key.concurrency == 0 &&
           !(f->per_key.rate > 0) && !(f->aging > 0);
}

/* Whether rounds may take the lane at all: an engine of two rounds in
 * flight (PostgreSQL), a connection not refused, and plain claims (no
 * service shapes them: no limits, no capped or served-only queues), or
 * a fair queue's alone. */
static int
lane_fits(master *m, const jr_lane *l)
{
    return l != NULL && l->rounds > 1 && !(l->opened && l->t == NULL) &&
           (!jr_service_shapes(m) || fair_alone(m));
}

/* The lane's copy of the one limit the running cycle borrows (a fair
 * queue's alone), or none: -1 when out of memory. */
static int
limits_take(master *m, jr_lane *l)
{
    jr_limit one;
    jr_limits src = {&one, 1};

    jr_limits_free(&l->limits);
    if (!jr_service_shapes(m))
        return 0;
    one = *m->cycle.limits;     /* fair_alone(): one (its strings copied) */
    return jr_limits_copy(&l->limits, &src);
}

/* Whether this round may take it now: big enough, the lane free, the
 * database well, no progress report that could land after its end. */
static int
round_fits(master *m, jr_lane *l, int want)
{
    return want >= LANE_MIN && !l->busy && !m->stopping &&
           m->gen != NULL && m->gen->n > 0 && m->db_backoff == 0 &&
           jr_mono() >= l->off_until &&
           !has_progress(m->res, m->nres) &&
           !has_progress(m->inflight, m->ninflight);
}

static int
open_lane(master *m, jr_lane *l)
{
    jr_err e = {0};

    l->opened = 1;
    if ((l->t = jr_dbthread_side(m->cfg, m->token, m->base, 1,
                                 &l->db, &e)) != NULL) {
        jr_log(JR_LOG_INFO, "database: a second connection records and "
               "claims while the first one's round is out");
        return 0;
    }
    jr_log(JR_LOG_WARN, "database: no second connection (%s): one round "
           "at a time", e.msg);
    return -1;
}

/* While the lane may be used, a round claims at most half of what one
 * claim may: the two connections take turns at the local queue instead
 * of the first taking all of it. Coroutine workers' slots are filled in
 * one round: they start all it brings at once. */
int
jr_lane_split(master *m, int want)
{
    if (!lane_fits(m, lane_of(m)) || (m->gen != NULL && m->gen->co_any > 0))
        return want;
    return want > LANE_ROUND ? LANE_ROUND : want;
}

int
jr_lane_round(master *m, int want)
{
    jr_lane *l = lane_of(m);
    int i;

    if (!lane_fits(m, l))
        return 0;
    if (want > LANE_ROUND)
        want = LANE_ROUND;
    if (!round_fits(m, l, want) ||
        (!l->opened && open_lane(m, l) < 0) || limits_take(m, l) < 0)
        return 0;
    /* the pending results go with it */
    l->results = malloc((size_t)(m->nres > 0 ? m->nres : 1) *
                        sizeof *l->results);
    if (l->results == NULL)
        return 0;
    for (i = 0; i < m->nres; i++)
        l->results[i] = m->res[i].r;
    jr_claimq_swap(&l->inflight, &l->capinflight, m);
    l->ninflight = i;
    l->want = want;
    l->lease = m->cfg->lease;
    l->gen = jr_gen_ref(m->gen);
    if (jr_dbthread_request(l->t, run, done, l) < 0) {
        if (jr_claimq_unsend(m, l->inflight, l->ninflight) < 0)
            jr_claimq_lost(l->inflight, l->ninflight);
        l->ninflight = 0;
        free(l->results);
        l->results = NULL;
        jr_gen_unref(l->gen);
        l->gen = NULL;
        return 0;
    }
    l->busy = 1;
    m->lane_want = want;
    return 1;
}

int
jr_lane_held(const master *m)
{
    return m->lane != NULL ? m->lane->ninflight : 0;
}

int
jr_lane_stop(master *m)
{
    jr_lane *l = m->lane;
    int cut = 0;

    if (l == NULL)
        return 0;
    if (l->t != NULL)
        cut = jr_dbthread_settle(l->t, STOP_WAIT_LANE);
    jr_dbthread_free(l->t);     /* its round ends; done() takes it in */
    jr_dbthread_close(l->db);
    jr_limits_free(&l->limits);
    for (int i = 0; i < l->ninflight; i++)
        jr_pending_free(&l->inflight[i]);
    free(l->inflight);
    free(l);
    m->lane = NULL;
    return cut;
}
