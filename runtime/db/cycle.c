/* cycle.c - the steps of a database cycle (dbthread.h's jr_cycle_step):
 * attaching them in the loop, running them on the database thread in
 * their order, and freeing what they left; the cycle's first error. The
 * steps themselves are their services' (services/). Uses cycle.h,
 * dbthread.h, log.h. */
#include "db/cycle.h"
#include "db/dbthread.h"
#include "base/log.h"

void
jr_cycle_err(jr_cycle *c, const jr_err *e)
{
    if (c->err.code == 0)
        c->err = *e;
}

int
jr_cycle_attach(jr_cycle *c, const jr_cycle_step *s, void *io)
{
    if (c->nsteps >= JR_CYCLE_STEPS) {
        jr_log(JR_LOG_ERROR, "internal: cycle step '%s': no room in the "
               "cycle (%d steps)", s->name, JR_CYCLE_STEPS);
        return -1;
    }
    c->steps[c->nsteps].step = s;
    c->steps[c->nsteps++].io = io;
    return 0;
}

void *
jr_cycle_io(const jr_cycle *c, const jr_cycle_step *s)
{
    int i;

    for (i = 0; i < c->nsteps; i++)
        if (c->steps[i].step == s)
            return c->steps[i].io;
    return NULL;
}

void
jr_cycle_steps(jr_db *db, const char *token, jr_cycle *c, int when)
{
    const jr_cycle_att *a;
    jr_err e;
    int i;

    for (i = 0; i < c->nsteps && c->err.code == 0; i++) {
        a = &c->steps[i];
        if (a->step->when == when &&
            a->step->run(db, token, c, a->io, &e) < 0)
            jr_cycle_err(c, &e);
    }
}

void
jr_cycle_free_out(jr_cycle *c)
{
    int i;

    for (i = 0; i < c->nsteps; i++)
        if (c->steps[i].step->clear != NULL)
            c->steps[i].step->clear(c->steps[i].io);
}
