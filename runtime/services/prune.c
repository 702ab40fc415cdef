/* prune.c - retention: every few seconds the database cycle deletes one
 * batch of finished jobs past their keep_* time (and now and then the
 * rows of idle queues past keep_queues), on the database thread after the
 * claim, so that it never delays one; a full batch asks for another at
 * once. A service (service.h): owns its timer. Uses master_int.h. */
#include <stdlib.h>

#include "base/log.h"
#include "master/master_int.h"

#define PRUNE_EVERY 5.0         /* seconds between prunes */

typedef struct prune {          /* the service's state */
    int         due;            /* prune a batch of finished jobs */
    flag_timer  tick;           /* sets due every PRUNE_EVERY */
} prune;

static int
init(master *m, void **st)
{
    prune *p = calloc(1, sizeof *p);

    if ((*st = p) == NULL)
        return -1;
    jr_master_flag(m, &p->tick, PRUNE_EVERY, &p->due);
    return 0;
}

static int
due(master *m, void *st)
{
    (void)m;
    return ((prune *)st)->due;
}

static void
fill(master *m, void *st, jr_cycle *c)
{
    prune *p = st;

    c->prune = p->due;
    c->keep_completed = m->cfg->keep_completed;
    c->keep_cancelled = m->cfg->keep_cancelled;
    c->keep_dead = m->cfg->keep_dead;
    c->keep_queues = m->cfg->keep_queues;
    p->due = 0;
}

static void
taken(master *m, void *st, jr_cycle *c)
{
    prune *p = st;

    (void)m;
    if (c->pruned > 0)
        jr_log(JR_LOG_DEBUG, "pruned %d finished jobs", c->pruned);
    p->due = p->due || c->pruned == JR_PRUNE_BATCH;
}

static void
free_prune(master *m, void *st)
{
    prune *p = st;

    (void)m;
    if (p != NULL && p->tick.ev != NULL)
        event_free(p->tick.ev);
    free(p);
}

const jr_service jr_prune_service = {
    .name = "prune", .init = init, .due = due,
    .fill = fill, .taken = taken, .free = free_prune,
};
