/* prune.c - retention: every few seconds the database cycle deletes one
 * batch of finished jobs past their keep_* time (and now and then the
 * rows of idle queues past keep_queues), on the database thread after the
 * claim, so that it never delays one; a full batch asks for another at
 * once. A service (service.h): owns its timer. Uses service.h, svc.h. */
#include <stdlib.h>

#include "base/log.h"
#include "master/service.h"
#include "master/svc.h"

#define PRUNE_EVERY 5.0         /* seconds between prunes */

typedef struct prune {          /* the service's state */
    int         due;            /* prune a batch of finished jobs */
    jr_flag_timer tick;         /* sets due every PRUNE_EVERY */
} prune;

static int
init(master *m, void **st)
{
    prune *p = calloc(1, sizeof *p);

    if ((*st = p) == NULL)
        return -1;
    jr_svc_flag(m, &p->tick, PRUNE_EVERY, &p->due);
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
    c->keep_completed = jr_svc_config(m)->keep_completed;
    c->keep_cancelled = jr_svc_config(m)->keep_cancelled;
    c->keep_dead = jr_svc_config(m)->keep_dead;
    c->keep_queues = jr_svc_config(m)->keep_queues;
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
    if (p != NULL)
        jr_svc_unflag(&p->tick);
    free(p);
}

const jr_service jr_prune_service = {
    .name = "prune", .init = init, .due = due,
    .fill = fill, .taken = taken, .free = free_prune,
};
