/* cycle.c - the parts of a database cycle (dbthread.h's jr_cycle) that
 * serve the services beside the claim, run on the database thread: the
 * reads (the paused queues, the ready counts per queue and per limit for
 * on_tick) and the schedules' fires and last fires; and the freeing of
 * what they returned. Uses cycle.h, dbthread.h, backend.h. */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "db/cycle.h"
#include "db/dbthread.h"
#include "base/log.h"

void
jr_cycle_err(jr_cycle *c, const jr_err *e)
{
    if (c->err.code == 0)
        c->err = *e;
}

void
jr_cycle_free_out(jr_cycle *c)
{
    int i;

    for (i = 0; i < c->npaused; i++)
        free(c->paused[i]);
    free(c->paused);
    for (i = 0; i < c->nready_q; i++)
        free(c->ready_q[i].queue);
    free(c->ready_q);
    free(c->lim_waiting);
    c->lim_waiting = c->lim_running = NULL;
    c->paused = NULL;
    c->ready_q = NULL;
    c->npaused = -1;
    c->nready_q = 0;
}

static int
add_paused(const char *queue, void *arg)
{
    jr_cycle *c = arg;
    char **more = realloc(c->paused, (size_t)(c->npaused + 1) * sizeof *more);

    if (more == NULL)
        return 1;
    c->paused = more;
    if ((more[c->npaused] = strdup(queue)) == NULL)
        return 1;
    c->npaused++;
    return 0;
}

static int
add_ready(const char *queue, long n, void *arg)
{
    jr_cycle *c = arg;
    jr_queue_count *more = realloc(c->ready_q, (size_t)(c->nready_q + 1) *
                                   sizeof *more);

    if (more == NULL)
        return 1;
    c->ready_q = more;
    if ((more[c->nready_q].queue = strdup(queue)) == NULL)
        return 1;
    more[c->nready_q++].n = n;
    c->ready += n;
    return 0;
}

/* For on_tick: each limit's jobs ready and running, over all runners
 * (one limit_use each; none when out of memory). */
static void
limit_counts(jr_db *db, jr_cycle *c)
{
    jr_limit_use u;
    jr_err e;
    int i;

    c->lim_waiting = calloc(2 * (size_t)c->nlimits, sizeof *c->lim_waiting);
    if (c->lim_waiting == NULL)
        return;
    c->lim_running = c->lim_waiting + c->nlimits;
    for (i = 0; i < c->nlimits; i++) {
        if (db->ops->limit_use(db->b, &c->limits[i], &u, &e) < 0) {
            jr_cycle_err(c, &e);
            u.waiting = u.running = -1;
        }
        c->lim_waiting[i] = u.waiting;
        c->lim_running[i] = u.running;
    }
}

/* The reads a cycle may add: the paused queues and the ready counts. */
void
jr_cycle_reads(jr_db *db, jr_cycle *c, int changed)
{
    const jr_backend_ops *ops = db->ops;
    jr_err e;

    c->npaused = -1;
    if ((c->poll_paused || (c->ahead && c->consume_wake && changed == 1)) &&
        c->err.code == 0) {
        c->npaused = 0;
        if (ops->paused(db->b, add_paused, c, &e) < 0) {
            jr_cycle_err(c, &e);
            jr_cycle_free_out(c);
        }
    }
    c->ready = -1;
    if (c->count_ready && c->err.code == 0) {
        c->ready = 0;
        if (ops->ready_by_queue(db->b, c->names, c->nnames, 1000000,
                                add_ready, c, &e) < 0) {
            jr_cycle_err(c, &e);
            c->ready = -1;
        }
    }
    if (c->count_ready && c->nlimits > 0 && c->err.code == 0)
        limit_counts(db, c);
}

/* ---- schedules: fires and the last fire of each ---- */

void
jr_cycle_free_fires(jr_cycle *c)
{
    int i;

    for (i = 0; i < c->nlast_fires; i++)
        free(c->last_fires[i].schedule);
    free(c->last_fires);
    c->last_fires = NULL;
    c->nlast_fires = -1;
    for (i = 0; i < c->nsched_ctl; i++)
        free(c->sched_ctl[i].schedule);
    free(c->sched_ctl);
    c->sched_ctl = NULL;
    c->nsched_ctl = -1;
}

static int
add_ctl(const char *schedule, int paused, double paused_at, double fire_at,
        void *arg)
{
    jr_cycle *c = arg;
    jr_sched_ctl *more = realloc(c->sched_ctl, (size_t)(c->nsched_ctl + 1)
                                 * sizeof *more);

    (void)paused_at;
    if (more == NULL)
        return 1;
    c->sched_ctl = more;
    if ((more[c->nsched_ctl].schedule = strdup(schedule)) == NULL)
        return 1;
    more[c->nsched_ctl].paused = paused;
    more[c->nsched_ctl++].fire_at = fire_at;
    return 0;
}

static int
add_last_fire(const char *schedule, double at, int64_t id, void *arg)
{
    jr_cycle *c = arg;
    jr_last_fire *more = realloc(c->last_fires, (size_t)(c->nlast_fires + 1)
                                 * sizeof *more);

    if (more == NULL)
        return 1;
    c->last_fires = more;
    if ((more[c->nlast_fires].schedule = strdup(schedule)) == NULL)
        return 1;
    more[c->nlast_fires].at = at;
    more[c->nlast_fires++].id = id;
    return 0;
}

/* Records the cycle's fires one by one: one the database refuses for its
 * input is marked -1 (the others go on); trouble with the database stops
 * here (the fires not tried keep inserted 0 and err says why). */
void
jr_cycle_fires(jr_db *db, jr_cycle *c)
{
    const jr_backend_ops *ops = db->ops;
    jr_err e;
    int i;

    c->nsched_ctl = -1;
    if (c->read_ctl) {          /* before the fires: those asked by hand */
        c->nsched_ctl = 0;
        if (ops->sched_states(db->b, add_ctl, c, &e) < 0) {
            for (i = 0; i < c->nsched_ctl; i++)
                free(c->sched_ctl[i].schedule);
            free(c->sched_ctl);
            c->sched_ctl = NULL;
            c->nsched_ctl = -1;
            jr_cycle_err(c, &e);
        }
    }
    if (c->read_fires) {
        c->nlast_fires = 0;
        if (ops->last_fires(db->b, add_last_fire, c, &e) < 0) {
            jr_cycle_err(c, &e);
            jr_cycle_free_fires(c);
        }
    }
    for (i = 0; i < c->nfires && c->err.code == 0; i++)
        if (ops->fire(db->b, &c->fires[i], 1, c->fires_keep, &e) < 0) {
            if (e.code != JR_EINPUT) {
                jr_cycle_err(c, &e);
                break;
            }
            jr_log(JR_LOG_ERROR, "schedule '%s': fire refused by the "
                   "database: %s", c->fires[i].schedule, e.msg);
            c->fires[i].inserted = -1;
        }
    c->nfires_done = i;
}
