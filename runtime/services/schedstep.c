/* schedstep.c - the schedules' step of the database cycle (sched.h's
 * jr_sched_step): on the database thread, after the claim, the
 * controls an operator set and each schedule's last fire when asked,
 * then the fires due, each with its job, once across runners (the fire
 * op). Uses sched.h, dbcalls.h, schedules.h, log.h. */
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "config/schedules.h"
#include "db/dbcalls.h"
#include "services/sched.h"

void
jr_sched_io_reset(jr_sched_io *io)
{
    memset(io, 0, sizeof *io);
    io->nlast_fires = io->nctl = io->ndefs = -1;
}

static void
free_defs(jr_sched_io *io)
{
    int i;

    for (i = 0; i < io->ndefs; i++) {
        free(io->defs[i].name);
        free(io->defs[i].def);
    }
    free(io->defs);
    io->defs = NULL;
    io->ndefs = -1;
}

void
jr_sched_io_free(jr_sched_io *io)
{
    int i;

    for (i = 0; i < io->nlast_fires; i++)
        free(io->last_fires[i].schedule);
    free(io->last_fires);
    io->last_fires = NULL;
    io->nlast_fires = -1;
    for (i = 0; i < io->nctl; i++)
        free(io->ctl[i].schedule);
    free(io->ctl);
    io->ctl = NULL;
    io->nctl = -1;
    free_defs(io);
}

static int
add_def(const char *name, const char *def, double created, double updated,
        void *arg)
{
    jr_sched_io *io = arg;
    jr_sched_def *more = realloc(io->defs, (size_t)(io->ndefs + 1) *
                                 sizeof *more);

    (void)created;
    (void)updated;
    if (more == NULL)
        return io->defs_oom = 1;
    io->defs = more;
    more[io->ndefs].name = strdup(name);
    more[io->ndefs].def = strdup(def);
    io->ndefs++;
    if (more[io->ndefs - 1].name == NULL || more[io->ndefs - 1].def == NULL)
        return io->defs_oom = 1;
    return 0;
}

static int
add_ctl(const char *schedule, int paused, double paused_at, double fire_at,
        void *arg)
{
    jr_sched_io *io = arg;
    jr_sched_ctl *more = realloc(io->ctl, (size_t)(io->nctl + 1) *
                                 sizeof *more);

    (void)paused_at;
    if (more == NULL)
        return 1;
    io->ctl = more;
    if ((more[io->nctl].schedule = strdup(schedule)) == NULL)
        return 1;
    more[io->nctl].paused = paused;
    more[io->nctl++].fire_at = fire_at;
    return 0;
}

static int
add_last_fire(const char *schedule, double at, int64_t id, void *arg)
{
    jr_sched_io *io = arg;
    jr_last_fire *more = realloc(io->last_fires, (size_t)(io->nlast_fires +
                                 1) * sizeof *more);

    if (more == NULL)
        return 1;
    io->last_fires = more;
    if ((more[io->nlast_fires].schedule = strdup(schedule)) == NULL)
        return 1;
    more[io->nlast_fires].at = at;
    more[io->nlast_fires++].id = id;
    return 0;
}

/* The reads asked for; the first error in *err, and -1. A read that
 * failed is left not read (-1). */
static int
reads(jr_db *db, jr_sched_io *io, jr_err *err)
{
    jr_err e;
    int i, rc = 0;

    if (io->read_ctl) {         /* before the fires: those asked by hand */
        io->nctl = 0;
        if (jr_dbcall_sched_states(db, add_ctl, io, &e) < 0) {
            for (i = 0; i < io->nctl; i++)
                free(io->ctl[i].schedule);
            free(io->ctl);
            io->ctl = NULL;
            io->nctl = -1;
            *err = e;
            rc = -1;
        }
    }
    if (io->read_defs) {        /* a change to follow: before the fires */
        int64_t rev = io->rev;
        io->ndefs = 0;
        i = jr_dbcall_sched_defs(db, &rev, add_def, io, &e);
        if (i <= 0 || io->defs_oom) {
            free_defs(io);      /* unchanged, or failed: not read */
            if (i < 0 && rc == 0)
                *err = e;
            rc = i < 0 ? -1 : rc;
        } else {
            io->rev = rev;
        }
    }
    if (io->read_fires) {
        io->nlast_fires = 0;
        if (jr_dbcall_last_fires(db, add_last_fire, io, &e) < 0) {
            if (rc == 0)
                *err = e;
            rc = -1;
            jr_sched_io_free(io);
        }
    }
    return rc;
}

/* Records the fires one by one: one the database refuses for its input
 * is marked -1 (the others go on); trouble with the database, or a read
 * that failed, stops here (nfires_done says how far it went). */
static int
run(jr_db *db, const char *token, jr_cycle *c, void *arg, jr_err *err)
{
    jr_sched_io *io = arg;
    jr_err e;
    int i, rc;

    (void)token;
    rc = reads(db, io, err);
    for (i = 0; i < io->nfires && rc == 0; i++)
        if (jr_dbcall_fire(db, &io->fires[i], JR_FIRES_KEEP, &e) < 0) {
            if (e.code != JR_EINPUT) {
                *err = e;
                rc = -1;
                break;
            }
            jr_log(JR_LOG_ERROR, "schedule '%s': fire refused by the "
                   "database: %s", io->fires[i].schedule, e.msg);
            io->fires[i].inserted = -1;
        }
    io->nfires_done = i;
    c->wrote |= i > 0;
    return rc;
}

const jr_cycle_step jr_sched_step = {
    .name = "schedules", .when = JR_STEP_AFTER, .run = run,
};
