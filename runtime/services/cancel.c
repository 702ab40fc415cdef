/* cancel.c - the master's side of cancelling running jobs. About once a
 * second, while this runner holds jobs, the database cycle lists the jobs
 * it holds whose cancel was requested (jr_cycle's cancel_ids); here each
 * one still in the local queue is recorded cancelled without running, and
 * each one in a worker gets a CANCEL frame and SIGUSR1 (the worker raises
 * an error at the handler's next Lua instruction and answers
 * JR_CANCELLED). A worker stuck outside Lua is killed after CANCEL_GRACE
 * seconds, and its job is recorded cancelled (pool.c asks
 * jr_cancel_requested). Uses master_int.h. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/bufferevent.h>

#include "base/log.h"
#include "master/master_int.h"

/* Seconds a cancelled job's worker has to stop before it is killed. */
#define CANCEL_GRACE 5.0

int
jr_cancel_holds(const master *m)
{
    const wk *w;

    if (m->qlen > 0)
        return 1;
    for (w = m->workers; w; w = w->next)
        if (w->njobs > 0)
            return 1;
    return 0;
}

static cancelling *
find(master *m, int64_t id)
{
    int i;

    for (i = 0; i < m->ncancels; i++)
        if (m->cancels[i].id == id)
            return &m->cancels[i];
    return NULL;
}

int
jr_cancel_requested(master *m, int64_t id)
{
    return find(m, id) != NULL;
}

void
jr_cancel_record(master *m, const jr_job *j, const char *why)
{
    jr_result r = {.id = j->id, .kind = JR_CANCELLED};
    char *mem = why ? strdup(why) : NULL;  /* why may be the caller's */

    r.error = mem ? mem : "cancelled";
    jr_log(JR_LOG_INFO, "job %lld (%s) cancelled: %s", (long long)j->id,
           j->name, r.error);
    m->cancelled++;
    jr_event_job(m, j, &r, 0);
    jr_claimq_result(m, &r, mem);
}

/* Takes job id out of the local queue and records it cancelled. Returns
 * 1 if it was there. */
static int
from_queue(master *m, int64_t id)
{
    size_t i, k;
    jr_job *j;

    for (i = 0; i < m->qlen; i++) {
        j = m->queue[(m->qhead + i) % m->qcap];
        if (j->id != id)
            continue;
        for (k = i; k + 1 < m->qlen; k++)
            m->queue[(m->qhead + k) % m->qcap] =
                m->queue[(m->qhead + k + 1) % m->qcap];
        m->qlen--;
        jr_cancel_record(m, j, "cancelled before it started");
        free(j);
        return 1;
    }
    return 0;
}

/* Tells the worker holding job id to stop it. Returns 1 if one holds it. */
static int
to_worker(master *m, int64_t id)
{
    wk *w;
    int k;

    for (w = m->workers; w; w = w->next)
        for (k = 0; k < w->njobs; k++) {
            if (w->jobs[k]->id != id)
                continue;
            jr_buf_reset(&m->out);
            jr_frame_put_cancel(&m->out, id);
            if (w->bev != NULL && !m->out.oom)
                bufferevent_write(w->bev, m->out.p, m->out.len);
            kill(w->pid, SIGUSR1);  /* it reads the frame at once */
            jr_log(JR_LOG_INFO, "job %lld (%s): cancel requested; telling "
                   "worker %d", (long long)id, w->jobs[k]->name, w->id);
            return 1;
        }
    return 0;
}

/* Remembers id as being cancelled, told at mono time now. */
static void
remember(master *m, int64_t id, double now)
{
    if (m->ncancels == m->capcancels) {
        int cap = m->capcancels ? m->capcancels * 2 : 16;
        cancelling *p = realloc(m->cancels, (size_t)cap * sizeof *p);
        if (p == NULL)
            return;             /* told again at the next poll */
        m->cancels = p;
        m->capcancels = cap;
    }
    m->cancels[m->ncancels].id = id;
    m->cancels[m->ncancels].told = now;
    m->ncancels++;
}

void
jr_cancel_seen(master *m, const int64_t *ids, int n)
{
    cancelling *keep = m->cancels;
    double now = jr_mono();
    int i, k, kept = 0;

    /* forget the cancels no longer listed: those jobs have ended */
    for (k = 0; k < m->ncancels; k++) {
        for (i = 0; i < n && ids[i] != m->cancels[k].id; i++)
            ;
        if (i < n)
            keep[kept++] = m->cancels[k];
    }
    m->ncancels = kept;
    /* one told before may be back in the queue (its worker gave it back
     * unstarted): recorded there too */
    for (i = 0; i < n; i++)
        if (!from_queue(m, ids[i]) && find(m, ids[i]) == NULL &&
            to_worker(m, ids[i]))
            remember(m, ids[i], now);
    if (n > 0)
        jr_master_kick(m);
}

void
jr_cancel_deadlines(master *m, double now)
{
    const jr_job *j;
    cancelling *c;
    double since;
    char why[64];
    wk *w;

    /* the job in the handler: jobs[0] may have ended already, its result
     * still in the worker's page, and the one running is not cancelled */
    for (w = m->workers; w; w = w->next) {
        if (w->kill_reason[0] || (j = jr_pool_running(w, &since)) == NULL ||
            (c = find(m, j->id)) == NULL || now - c->told <= CANCEL_GRACE)
            continue;
        jr_log(JR_LOG_WARN, "job %lld (%s): cancelled, but still running "
               "%gs later (stuck outside Lua?); killing worker %d",
               (long long)j->id, j->name, CANCEL_GRACE, w->id);
        snprintf(why, sizeof why, "cancelled (worker killed: still running "
                 "%gs after the cancel)", CANCEL_GRACE);
        jr_pool_kill_for(w, j, why);
    }
}
