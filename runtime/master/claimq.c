/* claimq.c - the master's jobs between the database and the workers: the
 * local queue of claimed jobs, dispatch to free worker slots, and the
 * database cycle that records the results and claims as
 * many jobs as there is capacity for, once per pass of work; the services
 * (service.h) fill the rest of the cycle and read it back. Named for the
 * claim queue at its centre. Uses master_int.h, service.h and the database
 * thread. */
#include <stdlib.h>
#include <string.h>

#include <event2/bufferevent.h>
#include <event2/event.h>

#include "base/log.h"
#include "master/master_int.h"
#include "caps.h"
#include "master/lane.h"
#include "master/service.h"

#define LOCAL_QUEUE   512       /* claimed ahead while jobs are short */
#define SHORT_JOB     0.005     /* seconds: below this, claim ahead */
#define SKIP_MAX      128       /* queued jobs a free worker looks past */
#define PREFETCH_TIME 0.002     /* seconds of work a worker may have queued */
#define CO_AHEAD      8         /* a coroutine worker's inflight / CO_AHEAD
                                 * jobs claimed ahead for it */
#define RECHECKS      48        /* re-looks after a wake-up: 20 ms in all, */
#define RECHECKS_FAST 10        /* the first ones RECHECK_FAST_US apart */
#define RECHECK_FAST_US 100     /* (a commit shows an fsync after its write) */
#define RECHECK_US    500

int
jr_claimq_push(master *m, jr_job *j, int front)
{
    if (m->qlen == m->qcap) {
        size_t cap = m->qcap ? m->qcap * 2 : 64, i;
        jr_job **q = malloc(cap * sizeof *q);
        if (q == NULL)
            return -1;
        for (i = 0; i < m->qlen; i++)
            q[i] = m->queue[(m->qhead + i) % m->qcap];
        free(m->queue);
        m->queue = q;
        m->qcap = cap;
        m->qhead = 0;
    }
    if (front) {
        m->qhead = (m->qhead + m->qcap - 1) % m->qcap;
        m->queue[m->qhead] = j;
    } else {
        m->queue[(m->qhead + m->qlen) % m->qcap] = j;
    }
    m->qlen++;
    return 0;
}

jr_job *
jr_claimq_pop(master *m)
{
    jr_job *j;

    if (m->qlen == 0)
        return NULL;
    j = m->queue[m->qhead];
    m->qhead = (m->qhead + 1) % m->qcap;
    m->qlen--;
    return j;
}

/* A claimed job whose retries are used up before it starts: its last
 * attempt was lost with its runner's lease (the rescue requeues it with
 * that attempt counted) or the handler now allows fewer. The runner that
 * claims it knows the handler, so it decides here, with the same rule as
 * a failure (retry.c): dead, not run, this claim not counted.
 * Returns 1 and takes j if so. */
static int
expire_job(master *m, jr_job *j)
{
    jr_result r = {.id = j->id, .kind = JR_EXPIRED}, seen;
    jr_job last;                /* as the hooks see it: the lost attempt */
    jr_retry_in in;
    int max;

    jr_pool_retry_in(m, m->gen, j, NULL, &in);
    if (!jr_retry_expired(&in))
        return 0;
    max = jr_retry_max(j, in.handler_max, in.config_max);
    jr_log(JR_LOG_WARN, "job %lld (%s) dead: no retries left after %d "
           "attempt%s (max_retries %d); the last one was lost (its "
           "runner's lease expired)", (long long)j->id, j->name,
           j->attempt - 1, j->attempt == 2 ? "" : "s", max);
    m->dead++;
    seen = r;                   /* the row keeps its last_error */
    seen.error = "no retries left (lease expired: runner lost)";
    last = *j;                  /* strings stay in j until it is freed */
    last.attempt--;
    jr_service_job_end(m, &last, &seen, 0);
    jr_claimq_result(m, &r, NULL);
    free(j);
    return 1;
}

/* The most jobs w may run at once: its jobs' handlers' inflight, or the
 * largest of its generation for an idle worker. */
static int
co_cap(const wk *w)
{
    int i, k = w->inflight;

    for (i = 0; i < w->gen->n; i++)
        if (w->gen->h[i].inflight > k)
            k = w->gen->h[i].inflight;
    if (w->njobs > 0)
        k = jr_pool_inflight(w, w->jobs[0]);
    return k;
}

/* 1 if w may be given jobs: started, current and not on its way out */
static int
open_for_jobs(const wk *w)
{
    return w->ready && w->bev != NULL && !w->kill_reason[0] &&
           !w->retiring && !w->stopping && w->gen == w->m->gen && !w->alone;
}

static int
slots(const wk *w)
{
    int n;

    if (!open_for_jobs(w))
        return 0;
    /* jobs that run at once: as many as the handler's inflight (a worker
     * with none yet may take its generation's largest) */
    if (w->gen->co_any < 0)
        jr_pool_inflight(w, NULL);      /* looks once per generation */
    if (w->co || (w->njobs == 0 && w->gen->co_any > 0))
        return co_cap(w) - w->njobs;
    /* about PREFETCH_TIME of work queued in a worker: many no-op jobs,
     * one or two 1 ms jobs, one long one */
    n = w->avg > 0 ? (int)(PREFETCH_TIME / w->avg) : 1;
    n = n < 1 ? 1 : n > SLOTS_MAX ? SLOTS_MAX : n;
    return n - w->njobs;
}

/* 1 if w may take job j now: a job of a coroutine handler goes to an idle
 * worker or one running such jobs below the handler's inflight; another
 * one to a worker with no coroutine jobs, as before. */
static int
fits(const wk *w, const jr_job *j)
{
    int k = jr_pool_inflight(w, j);

    if (w->m->nsuspects > 0 && jr_death_suspect(w->m, j->id))
        return w->njobs == 0;   /* alone: a death then is its own */

    if (k > 1)
        return w->njobs == 0 || (w->co && w->njobs < k);
    return !w->co;
}

/* The place in the local queue (0: its head) of the first job w may take
 * now, or -1 when none of the first SKIP_MAX. A job no free worker can
 * take (a plain one while the free slots are coroutine workers', or the
 * other way round) waits there without holding back the jobs behind it. */
static long
first_fit(const master *m, const wk *w)
{
    size_t i, n = m->qlen < SKIP_MAX ? m->qlen : SKIP_MAX;

    for (i = 0; i < n; i++)
        if (fits(w, m->queue[(m->qhead + i) % m->qcap]))
            return (long)i;
    return -1;
}

/* Takes the job at place i of the local queue out of it; the ones before
 * it keep their order. */
static jr_job *
take_at(master *m, size_t i)
{
    jr_job *j = m->queue[(m->qhead + i) % m->qcap];

    for (; i > 0; i--)
        m->queue[(m->qhead + i) % m->qcap] =
            m->queue[(m->qhead + i - 1) % m->qcap];
    m->qhead = (m->qhead + 1) % m->qcap;
    m->qlen--;
    return j;
}

/* The jobs idle worker w can surely start at once, whatever the claim
 * brings: one while its generation has a plain handler, else the
 * smallest inflight of its handlers. */
static int
idle_cap(const wk *w)
{
    const gen *g = w->gen;
    int i, k, least = 0;

    for (i = 0; g->co_any > 0 && i < g->n; i++) {
        k = g->h[i].inflight > 0 ? g->h[i].inflight : w->inflight;
        if (least == 0 || k < least)
            least = k;
    }
    return least > 1 ? least : 1;
}

/* How many jobs to claim: what the workers can start now, and while jobs
 * are short a local queue of them too (graphile-worker's local queue), so
 * each database round feeds many jobs. The queue is refilled once it is
 * half empty, before it runs dry: the workers keep busy on its other half
 * while the claim runs. Long jobs are not claimed ahead: they would wait
 * behind others while another runner could run them. What can start: a
 * job per idle worker (a coroutine handler's inflight when every handler
 * has one, and the jobs it will have waiting here, so that they come in
 * the same claim, not in one of their own while its first jobs start),
 * the spare slots of workers running short plain jobs; and
 * when there are none, the free coroutine slots, with a claim of those
 * handlers' names alone (m->claim_co): a plain job claimed for them would
 * wait here until they drained. */
static int
capacity(master *m)
{
    int plain = 0, co = 0, ahead = 0, alive = 0, free_slots, n, k;
    wk *w;

    m->claim_co = 0;
    for (w = m->workers; w; w = w->next) {
        alive += jr_pool_is_alive(w);   /* jr_pool_alive's, one walk */
        if (w->co && open_for_jobs(w))
            ahead += co_cap(w) / CO_AHEAD;
        if ((n = slots(w)) <= 0)
            continue;
        if (w->co)
            co += n;
        else if (w->njobs == 0 && w->gen->co_any > 0 &&
                 (k = idle_cap(w) < n ? idle_cap(w) : n) > 1)
            plain += k + k / CO_AHEAD;  /* its jobs ahead with them */
        else if (w->njobs == 0 && w->gen->co_any > 0)
            plain += 1;
        else
            plain += n;
    }
    /* no worker (none can be started, or all are being replaced):
     * nothing would run them here, while another runner could */
    if (alive == 0)
        return 0;
    /* coroutine workers: a few jobs wait here for their slots, so that a
     * slot a job leaves takes the next at once, not after a database
     * round (their jobs end in waves as they started) */
    free_slots = plain > 0 ? plain : co + ahead;
    m->claim_co = plain == 0 && co + ahead > 0;
    if (m->avg > 0 && m->avg < SHORT_JOB &&
        (free_slots > 0 || m->qlen <= LOCAL_QUEUE / 2)) {
        free_slots += LOCAL_QUEUE;
        m->claim_co = 0;
    }
    /* less what claims on their way will bring */
    n = free_slots - (int)m->qlen - m->cycle_want - m->lane_want;
    m->fair_peek = 0;
    if (n <= 0 && m->cfg->limits.n > 0 && m->cycle_want == 0 &&
        m->qlen > 0)
        m->fair_peek = (n = jr_fairq_peek(m)) > 0;  /* fairq.c */
    return n;
}

/* Makes room for one more job in w's arrays; -1 when out of memory. */
static int
grow(wk *w)
{
    int cap = w->capjobs ? w->capjobs * 2 : SLOTS_MAX;
    jr_job **jobs;
    double *since;

    if (w->njobs < w->capjobs)
        return 0;
    if ((jobs = realloc(w->jobs, (size_t)cap * sizeof *jobs)) == NULL)
        return -1;
    w->jobs = jobs;
    if ((since = realloc(w->since, (size_t)cap * sizeof *since)) == NULL)
        return -1;
    w->since = since;
    w->capjobs = cap;
    return 0;
}

static void
send_job(master *m, wk *w, jr_job *j)
{
    int idle = w->njobs == 0;

    jr_buf_reset(&m->out);
    /* its success deleted unless a wait marks it: a plain handler's
     * lines may wait in the worker (heldlines.c) */
    j->deletable = m->cfg->keep_completed <= 0 && j->flow == 0;
    jr_frame_put_job(&m->out, j);
    if (idle) {
        w->co = jr_pool_inflight(w, j) > 1;
        w->alone = m->nsuspects > 0 && jr_death_suspect(m, j->id);
    }
    w->since[w->njobs] = w->co ? jr_mono() : 0;
    w->jobs[w->njobs++] = j;
    if (w->njobs == 1 || w->co) {
        w->started = jr_mono();
        jr_service_job_start(m, j, w->id);
    }
    if (m->out.oom || jr_pool_send(w, m->out.p, m->out.len, idle) < 0)
        jr_log(JR_LOG_ERROR, "worker %d: cannot send job %lld", w->id,
               (long long)j->id);
    jr_log(JR_LOG_DEBUG, "job %lld (%s) to worker %d, attempt %d",
           (long long)j->id, j->name, w->id, j->attempt);
}

/* Sends job j (taken) to w, unless a service ends it first (a cancel
 * told to a worker that gave it back unstarted: it died or recycled).
 * Returns 1 if sent. */
static int
send_or_cancel(master *m, wk *w, jr_job *j)
{
    if (jr_service_refuse(m, j, "cancelled before it started")) {
        free(j);
        return 0;
    }
    if (grow(w) < 0) {          /* try again at the next pass */
        if (jr_claimq_push(m, j, 1) < 0)
            jr_claimq_release(m, j);
        return 0;
    }
    send_job(m, w, j);
    return 1;
}

/* 1 while the engine's held jobs (caps.h) are out at the workers (out)
 * or wait to be recorded (their results pending or in flight, the lane's
 * too): jobs stay queued here until the running cycle commits some
 * (jr_claimq_cycle_done dispatches), so what a kill -9 makes run again is
 * at most that. The workers' jobs count as well as the results. */
static int
held_full(master *m, int out)
{
    if (m->held_max == 0)
        m->held_max = jr_url_caps(m->cfg->backend)->held;
    return out + m->nres + m->ninflight + jr_lane_held(m) >= m->held_max;
}

/* Hands queued jobs out: idle workers first, then spare slots of workers
 * that run short jobs. */
void
jr_claimq_dispatch(master *m)
{
    int pass, out = 0;
    long at;
    wk *w;

    if (m->qlen == 0)
        return;
    jr_master_tick_busy(m);     /* their deadlines: on_tick at its pace */
    /* jobs running in coroutines are not counted, nor held back: they run
     * anyway, as a worker's one job does, and a cap on them (or on the
     * results they make) would cap the inflight */
    for (w = m->workers; w; w = w->next)
        out += w->co ? 0 : w->njobs;
    for (pass = 0; pass < 2 && m->qlen > 0; pass++)
        for (w = m->workers; w && m->qlen > 0; w = w->next)
            while (m->qlen > 0 && slots(w) > 0 && (pass || w->njobs == 0) &&
                   (w->co || !held_full(m, out)) &&
                   (at = first_fit(m, w)) >= 0)
                out += send_or_cancel(m, w, take_at(m, (size_t)at)) &&
                       !w->co;
}

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

/* Queues the jobs[0..n) a claim of want jobs got (or gives them back
 * when stopping, or records those out of retries dead). */
void
jr_claimq_take(master *m, jr_job **jobs, int n, int want)
{
    int i;

    for (i = 0; i < n; i++)
        if (m->stopping || (!expire_job(m, jobs[i]) &&
                            jr_claimq_push(m, jobs[i], 0) < 0))
            jr_claimq_release(m, jobs[i]);
    if (n > 0 && m->cfg->limits.n > 0)
        jr_fairq_deal(m);       /* fair queues' keys round robin */
    if (want > 0 && n >= 0)
        m->want_claim = m->full_batch = n == want && !m->cycle_peek;
    if (n > 0)
        jr_log(JR_LOG_DEBUG, "claimed %d jobs", n);
}

void
jr_claimq_take_more(master *m, jr_job **jobs, int n, int want, int peek)
{
    int more = peek && jr_fairq_more(m, jobs, n, want);     /* fairq.c */

    jr_claimq_take(m, jobs, n, want);
    if (more)
        m->fair_changed = m->want_claim = 1;
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
    jr_claimq_take_more(m, c->claimed, c->nclaimed, c->want, m->cycle_peek);
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
            (want = capacity(m)) > 0 &&
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
    want = jr_lane_split(m, capacity(m));
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
