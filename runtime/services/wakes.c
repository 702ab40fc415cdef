/* wakes.c - the waiting jobs whose date came (docs/handlers.md, "Signals
 * and durable sleep"): a step of the database cycle, after the claim, at
 * most every WAKE_EVERY seconds, makes ready the jobs whose sleep ended
 * and those whose wait for a signal timed out (the timeout recorded for
 * their next run), in one transaction of the backend's wake op; a full
 * batch asks for another at once, and jobs woken ask the next pass to
 * claim. It rides on the cycles that run anyway (an idle runner's poll,
 * every poll_interval), and asks for one of its own only every
 * WAKE_BACKSTOP seconds: a runner at rest wakes no more often for it.
 * Every runner runs it: the backend's statement decides each row once. A
 * service (service.h): owns its timer and its cycle step. Uses
 * service.h, svc.h, dbcalls.h, util.h. */
#include <stdlib.h>

#include "db/dbcalls.h"
#include "base/log.h"
#include "base/util.h"
#include "master/service.h"
#include "master/svc.h"

#define WAKE_EVERY 1.0          /* seconds between looks at least */
#define WAKE_BACKSTOP 10.0      /* a cycle of its own at least this often */
#define WAKE_BATCH 500          /* jobs woken per cycle at most */

typedef struct wake_io {        /* its cycle step's in/out */
    int         woken;          /* out: jobs made ready, or -1 */
} wake_io;

typedef struct wakes {          /* the service's state */
    int         due;            /* look now, in a cycle of its own */
    double      last;           /* jr_mono() of the last look */
    jr_flag_timer tick;         /* sets due every WAKE_BACKSTOP */
    wake_io     io;             /* the cycle's while it runs */
} wakes;

static int
init(master *m, void **st)
{
    wakes *w = calloc(1, sizeof *w);

    if ((*st = w) == NULL)
        return -1;
    w->due = 1;
    jr_svc_flag(m, &w->tick, WAKE_BACKSTOP, &w->due);
    return 0;
}

static int
due(master *m, void *st)
{
    (void)m;
    return ((wakes *)st)->due;
}

/* On the database thread, after the claim: one batch of wake-ups. */
static int
run(jr_db *db, const char *token, jr_cycle *c, void *arg, jr_err *err)
{
    wake_io *io = arg;

    (void)token;
    if ((io->woken = jr_dbcall_wake(db, WAKE_BATCH, err)) < 0)
        return -1;
    c->wrote |= io->woken > 0;
    return 0;
}

static const jr_cycle_step wake_step = {
    .name = "wake-ups", .when = JR_STEP_AFTER, .run = run,
};

static void
fill(master *m, void *st, jr_cycle *c)
{
    wakes *w = st;

    (void)m;
    w->io.woken = 0;
    if (w->due || jr_mono() - w->last >= WAKE_EVERY) {
        jr_cycle_attach(c, &wake_step, &w->io);
        w->last = jr_mono();
    }
    w->due = 0;
}

static void
taken(master *m, void *st, jr_cycle *c)
{
    wakes *w = st;

    (void)c;
    if (w->io.woken <= 0)
        return;
    jr_log(JR_LOG_DEBUG, "woke %d waiting jobs", w->io.woken);
    w->due = w->io.woken == WAKE_BATCH;
    jr_svc_want_claim(m);
    jr_svc_kick(m);
}

static void
free_wakes(master *m, void *st)
{
    wakes *w = st;

    (void)m;
    if (w != NULL)
        jr_svc_unflag(&w->tick);
    free(w);
}

const jr_service jr_wakes_service = {
    .name = "wakes", .init = init, .due = due,
    .fill = fill, .taken = taken, .free = free_wakes,
};
