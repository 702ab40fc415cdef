/* prune.c - retention: every few seconds a step of the database cycle
 * deletes one batch of finished jobs past their keep_* time (and now and
 * then the rows of idle queues past keep_queues), on the database thread
 * after the claim, so that it never delays one (the backend lets one
 * runner at a time prune); a full batch asks for another at once. A
 * service (service.h): owns its timer and its cycle step. Uses
 * service.h, svc.h, dbcalls.h. */
#include <stdlib.h>

#include "db/dbcalls.h"
#include "base/log.h"
#include "base/util.h"
#include "master/service.h"
#include "master/svc.h"

#define PRUNE_EVERY 5.0         /* seconds between prunes */
#define PRUNE_BATCH 500         /* finished jobs deleted per cycle */
/* Seconds between two prunes of idle queues at most: each may read the
 * running and dead jobs' queues once. */
#define QUEUE_PRUNE_EVERY 60.0

typedef struct prune_io {       /* its cycle step's in/out */
    double      keep_completed; /* seconds each state stays */
    double      keep_cancelled;
    double      keep_dead;      /* < 0: forever */
    double      keep_queues;    /* seconds an idle queue not among the
                                   claim's keeps its row */
    int         pruned;         /* out: jobs pruned, or -1 */
    double      queues_at;      /* jr_mono() of the last queue prune */
} prune_io;

typedef struct prune {          /* the service's state */
    int         due;            /* prune a batch of finished jobs */
    jr_flag_timer tick;         /* sets due every PRUNE_EVERY */
    prune_io    io;             /* the cycle's while it runs */
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

/* On the database thread, after the claim: one batch of finished jobs,
 * and at most every QUEUE_PRUNE_EVERY seconds (or keep_queues) the rows
 * of idle queues (the claim's queues keep theirs). */
static int
run(jr_db *db, const char *token, jr_cycle *c, void *arg, jr_err *err)
{
    prune_io *io = arg;
    double every = io->keep_queues < QUEUE_PRUNE_EVERY ? io->keep_queues :
                   QUEUE_PRUNE_EVERY;

    (void)token;
    if ((io->pruned = jr_dbcall_prune(db, io->keep_completed,
                                      io->keep_cancelled, io->keep_dead,
                                      PRUNE_BATCH, err)) < 0)
        return -1;
    c->wrote |= io->pruned > 0;
    if (jr_mono() - io->queues_at < every)
        return 0;
    io->queues_at = jr_mono();
    return jr_dbcall_queue_prune(db, io->keep_queues, c->qnames, c->nqueues,
                                 PRUNE_BATCH, err) < 0 ? -1 : 0;
}

static const jr_cycle_step prune_step = {
    .name = "prune", .when = JR_STEP_AFTER, .run = run,
};

static void
fill(master *m, void *st, jr_cycle *c)
{
    prune *p = st;

    p->io.pruned = 0;
    if (p->due) {
        const jr_config *cfg = jr_svc_config(m);

        p->io.keep_completed = cfg->keep_completed;
        p->io.keep_cancelled = cfg->keep_cancelled;
        p->io.keep_dead = cfg->keep_dead;
        p->io.keep_queues = cfg->keep_queues;
        jr_cycle_attach(c, &prune_step, &p->io);
    }
    p->due = 0;
}

static void
taken(master *m, void *st, jr_cycle *c)
{
    prune *p = st;

    (void)m;
    (void)c;
    if (p->io.pruned > 0)
        jr_log(JR_LOG_DEBUG, "pruned %d finished jobs", p->io.pruned);
    p->due = p->due || p->io.pruned == PRUNE_BATCH;
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
