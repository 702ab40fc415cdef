/* claimcyc.c - the master's database cycle, once per pass of work
 * (jr_claimq_work): the pending results sent to be recorded, the claim
 * sized by the local queue (claimq.c's jr_claimq_capacity), lease
 * renewals and rescues, the services' inputs; and what comes back
 * (jr_claimq_cycle_done): results recorded, jobs queued and handed out,
 * the database's health (an outage retried with backoff) and the wake
 * descriptor watched again. Apart from claimq.c, which owns the queue
 * and its dispatch to workers, because the cycle is the master's one
 * round trip to the database thread. Uses master_int.h, service.h, lane.h
 * and the database thread. */
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "base/log.h"
#include "master/master_int.h"
#include "master/lane.h"
#include "master/service.h"

#define RECHECKS      48        /* re-looks after a wake-up: 20 ms in all, */
#define RECHECKS_FAST 10        /* the first ones RECHECK_FAST_US apart */
#define RECHECK_FAST_US 100     /* (a commit shows an fsync after its write) */
#define RECHECK_US    500

static void
db_trouble(master *m, const char *what)
{
    struct timeval tv;

    if (m->db_backoff == 0)     /* once per outage, not per retry */
        jr_log(JR_LOG_ERROR, "database: %s; results are kept and the "
               "database is retried with backoff", what);
    m->db_backoff = m->db_backoff ? m->db_backoff * 2 : 0.1;
    if (m->db_backoff > JR_DB_RETRY_MAX)
        m->db_backoff = JR_DB_RETRY_MAX;
    m->db_retry_at = jr_mono() + m->db_backoff;
    tv.tv_sec = (long)m->db_backoff;
    tv.tv_usec = (long)((m->db_backoff - (double)tv.tv_sec) * 1e6);
    event_add(m->ev_work, &tv);
}

/* The wake descriptor is readable: let the next cycle consume it (on the
 * database thread) and claim. Re-armed when that cycle is done. */
void
jr_claimq_wake(evutil_socket_t fd, short what, void *arg)
{
    master *m = arg;

    (void)what;
    if (fd >= 0)
        m->rechecks = 0;        /* a fresh write, not our re-check timer */
    m->wake_due = 1;
    jr_master_kick(m);
}

/* Watches the backend's wake descriptor, which may change when it
 * reconnects. Not while a cycle is out (jr_claimq_work): the cycle reads
 * it, and the loop woken by a wake-up the cycle then consumed would run
 * a cycle that finds nothing. */
void
jr_claimq_watch_wake(master *m, int fd)
{
    if (fd != m->wake_fd && m->ev_wake != NULL) {
        event_free(m->ev_wake);
        m->ev_wake = NULL;
    }
    m->wake_fd = fd;
    if (fd < 0)
        return;
    if (m->ev_wake == NULL)
        m->ev_wake = event_new(m->base, fd, EV_READ, jr_claimq_wake, m);
    if (m->ev_wake != NULL && !event_pending(m->ev_wake, EV_READ, NULL))
        event_add(m->ev_wake, NULL);
}

/* What cycle c says about the database: an outage (retry with backoff)
 * or its end, and a wake-up that found nothing yet (look again soon). */
static void
note_health(master *m, const jr_cycle *c)
{
    if (c->unchanged && m->rechecks < RECHECKS) {
        /* a producer's WAL write wakes us an fsync before its commit is
         * visible: look again shortly instead of at the next poll */
        struct timeval tv = {0, m->rechecks < RECHECKS_FAST ?
                                RECHECK_FAST_US : RECHECK_US};
        m->rechecks++;
        event_add(m->ev_recheck, &tv);
    } else if (!c->unchanged) {
        m->rechecks = 0;
    }
    if (c->err.code != 0) {
        m->want_claim = 1;      /* look again once it is back */
        db_trouble(m, c->err.msg);
    } else if (m->db_backoff > 0) {
        jr_log(JR_LOG_INFO, "database: back after an outage");
        m->db_backoff = 0;
        m->db_retry_at = 0;
    }
}

/* Cycle c came back: its results recorded (or put back), the services
 * read it, its jobs queued and handed out. */
void
jr_claimq_cycle_done(jr_cycle *c, void *arg)
{
    master *m = arg;

    free(c->results);
    c->results = NULL;
    free(c->held);
    c->held = NULL;
    jr_gen_unref(m->cycle_gen);
    m->cycle_gen = NULL;
    if (c->applied < 0) {
        jr_claimq_back(m);
    } else {
        jr_claimq_recorded(m, m->inflight, m->ninflight, c->applied);
        m->ninflight = 0;
    }
    jr_service_read(m, c);
    m->cycle_want = 0;
    jr_claimq_take_more(m, c->claimed, c->nclaimed, c->want);
    m->fair_changed |= c->changed_after;
    if (m->flow_want || c->changed_after) {
        /* after take, which judges its own claim: jobs may wait */
        m->want_claim = 1;
        m->flow_want = 0;
    }
    if (c->rescued > 0) {
        jr_log(JR_LOG_WARN, "requeued %d job%s whose runner's lease expired",
               c->rescued, c->rescued == 1 ? "" : "s");
        m->want_claim = 1;
    }
    jr_service_taken(m, c);
    jr_cycle_free_out(c);
    jr_claimq_watch_wake(m, c->wake_fd);
    note_health(m, c);
    jr_claimq_dispatch(m);
    if (m->solo && c->want > 0) {
        /* start-up: the first worker's claim is in; the others start
         * now (loading, they would have kept this claim from the CPU) */
        struct timeval now = {0, 0};
        m->solo = 0;
        event_add(m->ev_spawn, &now);
    }
    jr_master_kick(m);
}

/* The pending results go in flight: cycle c records a copy of them.
 * -1 when out of memory (they stay pending). */
static int
send_results(master *m, jr_cycle *c)
{
    pending *swap = m->inflight;
    int cap = m->capinflight, i;
    jr_result *r;

    m->inflight = m->res;
    m->capinflight = m->capres;
    m->ninflight = m->nres;
    m->res = swap;
    m->capres = cap;
    m->nres = 0;
    c->results = NULL;
    if (m->ninflight == 0)
        return 0;
    if ((r = malloc((size_t)m->ninflight * sizeof *r)) == NULL) {
        jr_claimq_back(m);
        return -1;
    }
    for (i = 0; i < m->ninflight; i++)
        r[i] = m->inflight[i].r;
    c->results = r;
    c->nresults = m->ninflight;
    return 0;
}

/* The ids of the jobs this runner holds, for a renewal: claimed and
 * queued here, out at a worker, or finished with the result not yet
 * recorded. Only these leases are renewed: a row that bears our token
 * without being one of them was put back by a database crash that undid
 * its completion (or its claim's answer never came): it must expire and
 * be rescued, not be kept running for ever. NULL with *n = 0 when none
 * (or out of memory: no renewal this time, the next one comes soon). */
static int64_t *
held_ids(master *m, int *n)
{
    size_t cap = m->qlen + (size_t)m->nres + (size_t)m->ninflight, i;
    int64_t *ids;
    wk *w;
    int k = 0, s;

    for (w = m->workers; w != NULL; w = w->next)
        cap += (size_t)w->njobs;
    *n = 0;
    if (cap == 0 || (ids = malloc(cap * sizeof *ids)) == NULL)
        return NULL;
    for (i = 0; i < m->qlen; i++)
        ids[k++] = m->queue[(m->qhead + i) % m->qcap]->id;
    for (w = m->workers; w != NULL; w = w->next)
        for (s = 0; s < w->njobs; s++)
            ids[k++] = w->jobs[s]->id;
    for (s = 0; s < m->nres; s++)
        ids[k++] = m->res[s].r.id;
    for (s = 0; s < m->ninflight; s++)
        ids[k++] = m->inflight[s].r.id;
    *n = k;
    return ids;
}

/* Fills cycle c's inputs for a claim of want jobs (not woken: only if a
 * wake-up comes while the cycle runs): the core's, then each service's. */
static void
fill(master *m, jr_cycle *c, int want, int woken)
{
    c->want = want > 0 ? want : 0;
    c->claim_if_woken = !woken && c->want > 0;
    c->consume_wake = m->wake_due;
    c->claim_always = m->want_claim;
    if (m->gen != NULL) {
        m->cycle_gen = jr_gen_ref(m->gen);
        c->names = m->gen->names;
        c->nnames = m->gen->n;
        if (m->claim_co) {
            c->claim_names = m->gen->co_names;
            c->nclaim_names = m->gen->nco;
        }
    }
    c->renew = m->renew_due;
    if (c->renew)
        c->held = held_ids(m, &c->nheld);
    c->rescue = m->rescue_due;
    c->claimed = m->claimed;
    m->wake_due = m->renew_due = m->rescue_due = 0;
    jr_service_fill(m, c);
}
/* A fair queue's small claim (capacity's fair_peek) with nothing to
 * claim it for: it is for another's push, so it waits for the database
 * to change (seen by a cycle or a wake-up), not for each job's end. */
static int
peek_idle(const master *m)
{
    return m->fair_peek && !m->wake_due && !m->fair_changed;
}

/* The loop's one pass of work: hand out what is queued, and start a
 * database cycle if one is needed and none is running. */
void
jr_claimq_work(evutil_socket_t fd, short what, void *arg)
{
    master *m = arg;
    jr_cycle *c = &m->cycle;
    int want, due, woken, most, hold;

    (void)fd;
    (void)what;
    m->passes++;
    jr_claimq_dispatch(m);
    jr_pool_scale_up(m);
    if (m->dbt == NULL || m->stopping == 2)
        return;
    /* the services are asked each pass, whatever the database does: the
     * schedules take a fire's instant on time even while cycles fail */
    due = jr_service_due(m);
    if (jr_dbthread_busy(m->dbt)) {
        /* a second round on the lane while this one is out (lane.c);
         * it claims every name, so a claim for coroutine slots takes it
         * when every handler is a coroutine one */
        if (m->want_claim && m->db_retry_at == 0 && m->gen != NULL &&
            (want = jr_claimq_capacity(m)) > 0 &&
            !peek_idle(m) &&
            (!m->claim_co || m->gen->nco == m->gen->n))
            jr_lane_round(m, want);     /* a small fair claim: as below */
        return;                 /* jr_claimq_cycle_done kicks again */
    }
    if (m->db_retry_at > 0 && jr_mono() < m->db_retry_at)
        return;                 /* a retry timer is armed */
    woken = m->want_claim || m->wake_due;
    if (!woken && !m->renew_due && !m->rescue_due && !due &&
        jr_claimq_results_wait(m))
        return;
    /* nothing to record, renew, rescue or fire and no wake-up: no cycle
     * (the test below), and no walk of the workers for their room */
    if (!woken && m->nres == 0 && !m->renew_due && !m->rescue_due && !due)
        return;
    want = jr_lane_split(m, jr_claimq_capacity(m));
    /* a fair queue's small claim (capacity's fair_peek) is for another's
     * push: it claims only if the database changed (seen by a cycle, or
     * by this wake-up or one that comes while the cycle runs), not at
     * each job's end (want_claim): that was a fair claim every few jobs,
     * most cycles, and a push's job waited behind them */
    if (peek_idle(m))
        woken = 0;
    /* a generation of coroutine handlers fills its workers' thousands of
     * slots in one round, not in four */
    most = m->gen != NULL && m->gen->co_any > 0 ? CLAIM_CO_MAX : CLAIM_MAX;
    if (want > most)
        want = most;
    if (m->stopping || m->gen == NULL || m->gen->n == 0)
        want = 0;
    /* not woken, a cycle claims only if a wake-up comes while it runs;
     * a wake-up with no slot to fill waits, unread, for one (a result or
     * a hello kicks): read now, it was a cycle per push for nothing, and
     * the change it saw was forgotten */
    hold = m->wake_due && want <= 0 && m->qlen == 0 && !m->stopping &&
           m->gen != NULL && m->gen->n > 0;
    if (m->nres == 0 && (want <= 0 || !woken) && !m->renew_due &&
        !m->rescue_due && !(m->wake_due && !hold) && !due)
        return;
    memset(c, 0, sizeof *c);
    if (send_results(m, c) < 0)
        return;
    m->wake_due &= !hold;
    fill(m, c, want, woken);
    if (m->fair_peek)
        c->claim_always = m->fair_changed;
    if (c->want > 0)
        m->fair_changed = 0;
    m->wake_due = hold;
    m->cycle_at = jr_mono();
    m->cycle_want = c->want;
    m->cycle_peek = m->fair_peek && c->want > 0;
    if (m->ev_wake != NULL)
        event_del(m->ev_wake);  /* until the cycle is back */
    if (jr_dbthread_submit(m->dbt, c) < 0) {
        jr_log(JR_LOG_ERROR, "internal: database thread busy");
        jr_claimq_watch_wake(m, m->wake_fd);
    }
}
