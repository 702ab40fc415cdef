/* claimres.c - the master's results on their way to the database: the
 * pending buffer that jobs' ends fill (a long job's success may wait a
 * little for company), what happens once a cycle recorded them (durable
 * steps told, jobs that may have become ready looked for), and the
 * buffers' moves between the loop and the database thread. The cycle
 * that sends them is claimcyc.c's. Uses master_int.h. */
#include <stdlib.h>
#include <string.h>

#include <event2/bufferevent.h>
#include <event2/event.h>

#include "base/log.h"
#include "master/master_int.h"

#define FLUSH_WAIT    2.0       /* seconds the last recording of results
                                   runs before a handler's statement in it
                                   is interrupted */
#define LONG_RESULT   1.0       /* seconds: a success after this long */
#define RESULT_WAIT   0.05      /* may wait this long for another reason
                                 * to run a cycle */

/* Queues a result for the next flush; takes mem. */
void
jr_claimq_result(master *m, const jr_result *r, void *mem)
{
    if (m->nres == m->capres) {
        int cap = m->capres ? m->capres * 2 : 64;
        pending *p = realloc(m->res, (size_t)cap * sizeof *p);
        if (p == NULL) {
            /* the lease will bring the job back */
            jr_log(JR_LOG_ERROR, "job %lld: out of memory keeping its "
                   "result; its lease will requeue it", (long long)r->id);
            free(mem);
            return;
        }
        m->res = p;
        m->capres = cap;
    }
    m->res[m->nres].r = *r;
    m->res[m->nres].mem = mem;
    m->res[m->nres].flow = m->flow_ended;
    m->res[m->nres].job = NULL;
    m->res[m->nres].secs = 0;
    /* a plain success of a long job may wait a little for company: a
     * push's claim, another's end. Anything else pending goes at once. */
    if (r->kind == JR_DONE && r->secs >= LONG_RESULT && !m->flow_ended &&
        r->npushes == 0 && r->nsql == 0)
        m->res_hold_until = m->nres == 0 ? jr_mono() + RESULT_WAIT :
                            m->res_hold_until;
    else
        m->res_hold_until = 0;
    m->flow_ended = 0;
    m->nres++;
}

/* 1 if the pending results wait for company (jr_claimq_result): then a
 * pass with nothing else to do runs no cycle for them, and ev_work's
 * timer brings the pass that sends them at the end of the wait. A cycle
 * a job's end was half the cycles of long jobs fed one at a time (each
 * push's claim its own cycle), a transaction and two hand-offs between
 * the loop and the database thread each; a long job's end recorded 50 ms
 * later is the same to its producer. */
int
jr_claimq_results_wait(master *m)
{
    double left = m->res_hold_until - jr_mono();
    struct timeval tv;

    if (m->nres == 0 || left <= 0 || m->qlen > 0 || m->stopping)
        return 0;
    if (!event_pending(m->ev_work, EV_TIMEOUT, NULL)) {
        tv.tv_sec = 0;
        tv.tv_usec = (long)(left * 1e6) + 1;
        event_add(m->ev_work, &tv);
    }
    return 1;
}

void
jr_claimq_release(master *m, jr_job *j)
{
    jr_result r = {.id = j->id, .kind = JR_RELEASE};

    jr_claimq_result(m, &r, NULL);
    free(j);
}

/* A durable step's record of job id, number seq, is committed: the
 * worker that holds the job hears it (JR_F_STEPOK). */
static void
step_committed(master *m, int64_t id, int seq)
{
    wk *w;

    for (w = m->workers; w != NULL; w = w->next)
        if (w->bev != NULL && jr_pool_index(w, id) >= 0) {
            jr_buf_reset(&m->out);
            jr_frame_put_stepok(&m->out, id, seq);
            if (!m->out.oom)
                bufferevent_write(w->bev, m->out.p, m->out.len);
            return;
        }
}

/* After results were recorded: look again for jobs if some may have
 * become ready (our own commits wake no one), tell durable steps, free
 * them. */
void
jr_claimq_recorded(master *m, pending *p, int n, int applied)
{
    int i;

    if (applied < n)
        jr_log(JR_LOG_WARN, "%d of %d results not recorded: the job was no "
               "longer held by this runner (its lease expired and it was "
               "requeued, or a database crash undid its claim)",
               n - applied, n);
    for (i = 0; i < n; i++) {
        if (p[i].r.kind == JR_STEP && p[i].r.durable > 0)
            step_committed(m, p[i].r.id, p[i].r.durable);
        /* a job with children or a batch: jobs may have become ready */
        m->flow_want |= p[i].flow;
        if (p[i].job != NULL && p[i].r.held == 1)
            jr_held_recorded(m, &p[i]);     /* its lines held */
        else if (p[i].job != NULL)
            jr_pending_recorded(m, &p[i]);
        if (p[i].r.npushes > 0 || p[i].r.kind == JR_RELEASE ||
            (p[i].r.kind != JR_DONE && p[i].r.kind != JR_DEAD &&
             p[i].r.kind != JR_EXPIRED && p[i].r.kind != JR_CANCELLED &&
             !JR_RESULT_RUNS_ON(p[i].r.kind) &&
             p[i].r.delay < m->cfg->poll_interval))
            m->want_claim = 1;
        jr_pending_free(&p[i]);
    }
    jr_held_send(m);
}

/* Puts results p[0..n) that were sent but not recorded back in front of
 * the pending ones, for the next try. -1 when out of memory (p is left
 * as it is). */
int
jr_claimq_unsend(master *m, const pending *p, int n)
{
    pending *all;

    if (n == 0)
        return 0;
    if ((all = malloc((size_t)(n + m->nres) * sizeof *all)) == NULL)
        return -1;
    memcpy(all, p, (size_t)n * sizeof *all);
    if (m->nres > 0)            /* m->res is NULL before the first result */
        memcpy(all + n, m->res, (size_t)m->nres * sizeof *all);
    free(m->res);
    m->res = all;
    m->nres = m->capres = n + m->nres;
    return 0;
}

/* Results that can be neither recorded nor kept: their leases bring the
 * jobs back (they run again). */
void
jr_claimq_lost(pending *p, int n)
{
    jr_log(JR_LOG_ERROR, "out of memory keeping %d results; their leases "
           "will requeue the jobs", n);
    for (int i = 0; i < n; i++)
        jr_pending_free(&p[i]);
}

/* Puts the in-flight results back in front of the pending ones. */
void
jr_claimq_back(master *m)
{
    if (jr_claimq_unsend(m, m->inflight, m->ninflight) == 0)
        m->ninflight = 0;       /* else kept in flight, tried again */
}

/* The pending results move to *p (capacity *cap); p's old array becomes
 * the pending one, emptied. */
void
jr_claimq_swap(pending **p, int *cap, master *m)
{
    pending *old = *p;
    int oldcap = *cap;

    *p = m->res;
    *cap = m->capres;
    m->res = old;
    m->capres = oldcap;
    m->nres = 0;
}

/* Records pending results synchronously (shutdown, with the thread gone),
 * interrupting a handler's statement that does not end (those of a
 * round that failed at the stop run again here). */
int
jr_claimq_flush(master *m)
{
    jr_result *batch;
    pending *p;
    jr_err err;
    int i, n = m->nres, applied;

    if (n == 0)
        return 0;
    if ((batch = malloc((size_t)n * sizeof *batch)) == NULL)
        return -1;
    for (i = 0; i < n; i++)
        batch[i] = m->res[i].r;
    applied = jr_dbthread_complete_within(m->db, m->token, batch, n,
                                          FLUSH_WAIT, &err);
    free(batch);
    if (applied < 0) {
        jr_log(JR_LOG_ERROR, "recording %d results failed: %s", n, err.msg);
        return -1;
    }
    /* recorded out of m->res: what that queues (heldlines.c) goes there */
    p = m->res;
    m->res = NULL;
    m->nres = m->capres = 0;
    jr_claimq_recorded(m, p, n, applied);
    free(p);
    return 0;
}
