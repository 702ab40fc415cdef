/* claimq.c - the master's jobs between the database and the workers: the
 * local queue of claimed jobs, dispatch to free worker slots, and how
 * many jobs there is capacity for (jr_claimq_capacity), which the
 * database cycle (claimcyc.c) claims once per pass of work; the services
 * (service.h) fill the rest of the cycle and read it back. Named for the
 * claim queue at its centre. Uses master_int.h, service.h, lane.h. */
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
int
jr_claimq_capacity(master *m)
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
    /* short jobs: the local queue topped up once half empty, or when a
     * slot is free (not for the jobs ahead of coroutine slots, which it
     * holds: counted, every round claimed what a few jobs' ends left
     * room for, 137 jobs a claim where plain workers' took 325) */
    if (m->avg > 0 && m->avg < SHORT_JOB &&
        (plain + co > 0 || m->qlen <= LOCAL_QUEUE / 2)) {
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

/* A claim, small or not, that came back full with a key new here last:
 * more new keys may wait behind it (a burst of tenants pushed at once).
 * A full claim asks for the next anyway, but with the local queue full
 * that is a small one, which waits for a change: this is one. A loaded
 * machine's claims of a job or two as jobs end dealt a burst's first
 * keys, and the rest waited a local queue's length. */
void
jr_claimq_take_more(master *m, jr_job **jobs, int n, int want)
{
    int more = jr_fairq_more(m, jobs, n, want);     /* fairq.c */

    jr_claimq_take(m, jobs, n, want);
    if (more && m->fair_deep)
        m->fair_changed = m->want_claim = 1;
}
