/* poolsize.c - how many workers: counting them (active, processes,
 * alive, busy), fitting their number to the target (backlog, idle,
 * on_tick's answer, signals; spawning a few per pass of the loop), and
 * the local queue given back while no worker can be started. Uses
 * master_int.h, service.h; pool.c spawns and stops the workers. */
#include <event2/event.h>

#include "base/log.h"
#include "master/master_int.h"

#define SPAWN_BATCH     4       /* workers forked per pass of the loop */

/* Workers that count toward the target: not leaving, not a probe. */
int
jr_pool_active(master *m)
{
    int n = 0;
    wk *w;

    for (w = m->workers; w; w = w->next)
        n += !w->stopping && !w->retiring && !w->probe;
    return n;
}

/* Worker processes but the probe, leaving ones included: each runs until
 * it is reaped, and concurrency.max bounds them all (a reload's loader
 * comes on top: max + 1). */
int
jr_pool_procs(master *m)
{
    int n = 0;
    wk *w;

    for (w = m->workers; w; w = w->next)
        n += !w->probe;
    return n;
}

int
jr_pool_alive(master *m)
{
    int n = 0;
    wk *w;

    for (w = m->workers; w; w = w->next)
        n += jr_pool_is_alive(w);
    return n;
}

/* While spawns fail and no worker is alive, the jobs of the local queue
 * wait for nothing here, their leases renewed: after a lease of it they go
 * back to the database, for another runner (claimq.c claims none ahead
 * meanwhile). */
void
jr_pool_starved(master *m, double now)
{
    jr_job *j;
    int n = 0;

    if (m->spawn_fails == 0 || m->stopping || jr_pool_alive(m) > 0) {
        m->starved_since = 0;
        return;
    }
    if (m->starved_since == 0)
        m->starved_since = now;
    if (now - m->starved_since < m->cfg->lease || m->qlen == 0)
        return;
    while ((j = jr_claimq_pop(m)) != NULL) {
        jr_claimq_release(m, j);
        n++;
    }
    jr_log(JR_LOG_WARN, "no worker could be started for %gs: %d job%s "
           "given back to the queue", m->cfg->lease, n, n == 1 ? "" : "s");
    jr_master_kick(m);
}

int
jr_pool_busy(master *m)
{
    int n = 0;
    wk *w;

    for (w = m->workers; w; w = w->next)
        n += w->njobs > 0;
    return n;
}

/* Starts or stops workers until the active ones match the target: idle
 * ones stop now, busy ones after their job. A replacement waits until
 * the worker it replaces has exited (jr_death_reap fits again), so the
 * processes stay within concurrency.max. */
void
jr_pool_fit(master *m)
{
    struct timeval now = {0, 0};
    wk *w;
    int n = jr_pool_active(m), procs = jr_pool_procs(m), k = 0;

    if (m->stopping)
        return;
    /* at start-up one first: 64 loading at once on 2 cores each got a
     * 64th of them, and the first claim waited for the last hello. And a
     * few per pass of the loop: 64 forks in a row held it 0.1 s */
    for (; n < m->target && procs < m->cfg->conc_max &&
         !(m->solo && procs > 0); n++, procs++, k++) {
        if (k == SPAWN_BATCH) {
            event_add(m->ev_spawn, &now);   /* the rest after a pass */
            break;
        }
        if (jr_pool_spawn(m) == NULL)
            break;              /* spawn_failed tries again later */
    }
    if (n >= m->target && m->spawn_fails > 0) {
        m->spawn_fails = 0;     /* none missing (the target came down) */
        m->spawn_backoff = 0;
        m->spawn_cause[0] = '\0';
    }
    for (w = m->workers; w && n > m->target; w = w->next)
        if (!w->stopping && !w->retiring && !w->probe && w->njobs == 0) {
            jr_pool_stop(m, w);
            n--;
        }
    for (w = m->workers; w && n > m->target; w = w->next)
        if (!w->stopping && !w->retiring && !w->probe) {
            w->retiring = 1;
            jr_pool_handback(m, w);
            n--;
        }
}

/* Sets the target, clamped to min..max, and acts on it. */
void
jr_pool_set_target(master *m, int target, const char *reason)
{
    int from = m->target;

    if (target < m->cfg->conc_min)
        target = m->cfg->conc_min;
    if (target > m->cfg->conc_max)
        target = m->cfg->conc_max;
    if (target == from)
        return;
    m->target = target;
    jr_service_scaled(m, from, target, reason);
    jr_pool_fit(m);
}

/* Adds a worker when every worker is busy and jobs are waiting. */
void
jr_pool_scale_up(master *m)
{
    wk *w;

    if (m->stopping || m->target >= m->cfg->conc_max || m->gen == NULL ||
        !(m->qlen > 0 || m->full_batch))
        return;
    for (w = m->workers; w; w = w->next)
        if (!w->stopping && !w->retiring && !w->probe &&
            (!w->ready || w->njobs == 0))
            return;         /* one is idle or still starting */
    jr_pool_set_target(m, m->target + 1, "backlog");
}

/* Retires one worker idle for idle_timeout while above the minimum. */
void
jr_pool_idle(master *m, double now)
{
    wk *w;

    if (m->stopping || m->target <= m->cfg->conc_min)
        return;
    for (w = m->workers; w; w = w->next)
        if (w->ready && !w->stopping && !w->retiring && !w->probe &&
            w->njobs == 0 && now - w->idle_since > m->cfg->idle_timeout) {
            jr_pool_set_target(m, m->target - 1, "idle");
            break;
        }
}
