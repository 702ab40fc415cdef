/* svc.c - the master's side of svc.h: the few operations its services
 * use, over the fields of struct master they must not see. Uses svc.h,
 * master_int.h. */
#include <signal.h>

#include <event2/bufferevent.h>
#include <event2/event.h>

#include "base/log.h"
#include "master/master_int.h"
#include "master/svc.h"

/* ---- the loop ---- */

void
jr_svc_kick(master *m)
{
    jr_master_kick(m);
}

void
jr_svc_want_claim(master *m)
{
    m->want_claim = 1;
}

void
jr_svc_flag(master *m, jr_flag_timer *t, double secs, int *flag)
{
    jr_master_flag(m, t, secs, flag);
}

void
jr_svc_unflag(jr_flag_timer *t)
{
    if (t->ev != NULL)
        event_free(t->ev);
    t->ev = NULL;
}

/* ---- the local queue ---- */

size_t
jr_svc_queued(const master *m)
{
    return m->qlen;
}

const jr_job *
jr_svc_queue_at(const master *m, size_t i)
{
    return m->queue[(m->qhead + i) % m->qcap];
}

jr_job *
jr_svc_queue_take(master *m, size_t i)
{
    jr_job *j = m->queue[(m->qhead + i) % m->qcap];
    size_t k;

    for (k = i; k + 1 < m->qlen; k++)
        m->queue[(m->qhead + k) % m->qcap] =
            m->queue[(m->qhead + k + 1) % m->qcap];
    m->qlen--;
    return j;
}

void
jr_svc_release(master *m, jr_job *j)
{
    jr_claimq_release(m, j);
}

/* ---- the workers' jobs ---- */

const jr_job *
jr_svc_held(master *m, jr_svc_iter *it)
{
    if (!it->started) {
        it->started = 1;
        it->w = m->workers;
        it->k = 0;
    } else if (it->w != NULL) {
        it->k++;
    }
    while (it->w != NULL && it->k >= it->w->njobs) {
        it->w = it->w->next;
        it->k = 0;
    }
    return it->w != NULL ? it->w->jobs[it->k] : NULL;
}

const jr_job *
jr_svc_running(master *m, jr_svc_iter *it, double *since)
{
    const jr_job *j;

    it->w = !it->started ? m->workers : it->w != NULL ? it->w->next : NULL;
    it->started = 1;
    for (; it->w != NULL; it->w = it->w->next)
        if (!it->w->kill_reason[0] &&
            (j = jr_death_running(it->w, since)) != NULL)
            return j;
    return NULL;
}

int
jr_svc_worker(const jr_svc_iter *it)
{
    return it->w->id;
}

void
jr_svc_kill_for(const jr_svc_iter *it, const jr_job *j, const char *why)
{
    jr_death_kill_for(it->w, j, why);
}

int
jr_svc_cancel(master *m, int64_t id)
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

void
jr_svc_end(master *m, const jr_job *j, const jr_result *r, void *mem)
{
    switch (r->kind) {
    case JR_DONE:
        m->done++;
        break;
    case JR_RETRY:
        m->failed++;
        break;
    case JR_DEAD:
    case JR_EXPIRED:
        m->dead++;
        break;
    case JR_CANCELLED:
        m->cancelled++;
        break;
    }
    jr_service_job_end(m, j, r, 0);
    jr_claimq_result(m, r, mem);
}

/* ---- the pool ---- */

void
jr_svc_count(master *m, jr_svc_counts *out)
{
    out->done = m->done;
    out->failed = m->failed;
    out->dead = m->dead;
    out->busy = jr_pool_busy(m);
    out->active = jr_pool_active(m);
    out->target = m->target;
}

void
jr_svc_set_target(master *m, int target, const char *reason)
{
    jr_pool_set_target(m, target, reason);
}

/* ---- the environment ---- */

const jr_config *
jr_svc_config(const master *m)
{
    return m->cfg;
}

const char *
jr_svc_token(const master *m)
{
    return m->token;
}

const char *
jr_svc_url(const master *m)
{
    return m->url;
}

struct event_base *
jr_svc_base(const master *m)
{
    return m->base;
}

jr_hooks *
jr_svc_hooks(const master *m)
{
    return m->hooks;
}

jr_db *
jr_svc_db(const master *m)
{
    return m->db;
}

jr_dbthread *
jr_svc_dbthread(const master *m)
{
    return m->dbt;
}

struct jr_http *
jr_svc_http(const master *m)
{
    return m->http;
}

int
jr_svc_stopping(const master *m)
{
    return m->stopping != 0;
}

double
jr_svc_cycle_at(const master *m)
{
    return m->cycle_at;
}

int
jr_svc_gen(const master *m, const char **hash)
{
    if (hash != NULL)
        *hash = m->gen != NULL ? m->gen->hash : NULL;
    return m->gen != NULL ? m->gen->id : 0;
}

int
jr_svc_handles(const master *m, const char *name)
{
    return jr_gen_handler(m->gen, name) != NULL;
}

const jr_handler *
jr_svc_handlers(const master *m, int *n)
{
    *n = m->gen != NULL ? m->gen->n : 0;
    return m->gen != NULL ? m->gen->h : NULL;
}
