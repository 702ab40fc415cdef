/* cancel.c - the master's side of cancelling running jobs. About once a
 * second, while this runner holds jobs, a step of the database cycle lists
 * the jobs it holds whose cancel was requested (cancel_step); here each
 * one still in the local queue is recorded cancelled without running, and
 * each one in a worker gets a CANCEL frame and SIGUSR1 (the worker raises
 * an error at the handler's next Lua instruction and answers
 * JR_CANCELLED). A worker stuck outside Lua is killed after CANCEL_GRACE
 * seconds, and its job is recorded cancelled (the core asks each
 * service's refuse). A cancel told is of that run alone: it is forgotten
 * when the run ends, however (job_end), and all are when the runner holds
 * no job, so that a rerun of the job, claimed again, runs. A service
 * (service.h): owns the cancels told, its poll timer and its cycle step. Uses service.h, svc.h, dbcalls.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/dbcalls.h"
#include "base/log.h"
#include "base/util.h"
#include "master/service.h"
#include "master/svc.h"

/* Seconds a cancelled job's worker has to stop before it is killed. */
#define CANCEL_GRACE 5.0
#define CANCEL_POLL  1.0        /* seconds between looks for cancels */
#define CANCEL_MAX   256        /* cancelled running jobs seen per cycle */

typedef struct cancelling {     /* a running job told to stop */
    int64_t     id;
    double      told;           /* mono time its worker was told */
} cancelling;

typedef struct cancel_io {      /* its cycle step's in/out */
    int64_t     ids[CANCEL_MAX];    /* running jobs of ours whose cancel
                                   was requested */
    int         n;              /* or -1: not looked */
} cancel_io;

typedef struct cancels {        /* the service's state */
    cancelling *v;              /* running jobs told to stop */
    int         n, cap;
    int         due;            /* look for cancels of our jobs */
    jr_flag_timer poll;         /* sets due every CANCEL_POLL */
    cancel_io   io;             /* the cycle's while it runs */
} cancels;

/* 1 if it holds any job. */
static int
holds(master *m)
{
    jr_svc_iter it = {0};

    return jr_svc_queued(m) > 0 || jr_svc_held(m, &it) != NULL;
}

static cancelling *
find(cancels *cs, int64_t id)
{
    int i;

    for (i = 0; i < cs->n; i++)
        if (cs->v[i].id == id)
            return &cs->v[i];
    return NULL;
}

/* Records job j cancelled (borrowed; why may be NULL). */
static void
record(master *m, const jr_job *j, const char *why)
{
    jr_result r = {.id = j->id, .kind = JR_CANCELLED};
    char *mem = why ? strdup(why) : NULL;  /* why may be the caller's */

    r.error = mem ? mem : "cancelled";
    jr_log(JR_LOG_INFO, "job %lld (%s) cancelled: %s", (long long)j->id,
           j->name, r.error);
    jr_svc_end(m, j, &r, mem);
}

/* Takes job id out of the local queue and records it cancelled. Returns
 * 1 if it was there. */
static int
from_queue(master *m, int64_t id)
{
    size_t i;
    jr_job *j;

    for (i = 0; i < jr_svc_queued(m); i++) {
        if (jr_svc_queue_at(m, i)->id != id)
            continue;
        j = jr_svc_queue_take(m, i);
        record(m, j, "cancelled before it started");
        free(j);
        return 1;
    }
    return 0;
}

/* Remembers id as being cancelled, told at mono time now. */
static void
remember(cancels *cs, int64_t id, double now)
{
    if (cs->n == cs->cap) {
        int cap = cs->cap ? cs->cap * 2 : 16;
        cancelling *p = realloc(cs->v, (size_t)cap * sizeof *p);
        if (p == NULL)
            return;             /* told again at the next poll */
        cs->v = p;
        cs->cap = cap;
    }
    cs->v[cs->n].id = id;
    cs->v[cs->n].told = now;
    cs->n++;
}

/* The cycle found ids[0..n): the running jobs of this runner whose cancel
 * was requested. Queued ones are recorded cancelled, running ones told. */
static void
seen(master *m, cancels *cs, const int64_t *ids, int n)
{
    cancelling *keep = cs->v;
    double now = jr_mono();
    int i, k, kept = 0;

    /* forget the cancels no longer listed: those jobs have ended */
    for (k = 0; k < cs->n; k++) {
        for (i = 0; i < n && ids[i] != cs->v[k].id; i++)
            ;
        if (i < n)
            keep[kept++] = cs->v[k];
    }
    cs->n = kept;
    /* one told before may be back in the queue (its worker gave it back
     * unstarted): recorded there too */
    for (i = 0; i < n; i++)
        if (!from_queue(m, ids[i]) && find(cs, ids[i]) == NULL &&
            jr_svc_cancel(m, ids[i]))
            remember(cs, ids[i], now);
    if (n > 0)
        jr_svc_kick(m);
}

/* Kills workers still running a cancelled job after the grace period. */
static void
tick(master *m, void *st, double now)
{
    cancels *cs = st;
    jr_svc_iter it = {0};
    const jr_job *j;
    cancelling *c;
    double since;
    char why[64];

    /* the job in the handler: jobs[0] may have ended already, its result
     * still in the worker's page, and the one running is not cancelled */
    while ((j = jr_svc_running(m, &it, &since)) != NULL) {
        if ((c = find(cs, j->id)) == NULL || now - c->told <= CANCEL_GRACE)
            continue;
        jr_log(JR_LOG_WARN, "job %lld (%s): cancelled, but still running "
               "%gs later (stuck outside Lua?); killing worker %d",
               (long long)j->id, j->name, CANCEL_GRACE, jr_svc_worker(&it));
        snprintf(why, sizeof why, "cancelled (worker killed: still running "
                 "%gs after the cancel)", CANCEL_GRACE);
        jr_svc_kill_for(&it, j, why);
    }
}

static int
init(master *m, void **st)
{
    cancels *cs = calloc(1, sizeof *cs);

    if ((*st = cs) == NULL)
        return -1;
    jr_svc_flag(m, &cs->poll, CANCEL_POLL, &cs->due);
    return 0;
}

static int
due(master *m, void *st)
{
    cancels *cs = st;

    if (cs->n > 0 && !holds(m))
        cs->n = 0;              /* their runs ended: none is held */
    if (cs->due && !holds(m))
        cs->due = 0;            /* nothing of ours to cancel */
    return cs->due;
}

/* On the database thread, after the claim: the cancels of the jobs this
 * runner holds. */
static int
run(jr_db *db, const char *token, jr_cycle *c, void *arg, jr_err *err)
{
    cancel_io *io = arg;

    (void)c;
    io->n = jr_dbcall_cancelled(db, token, io->ids, CANCEL_MAX, err);
    return io->n < 0 ? -1 : 0;
}

static const jr_cycle_step cancel_step = {
    .name = "cancels", .when = JR_STEP_AFTER, .run = run,
};

static void
fill(master *m, void *st, jr_cycle *c)
{
    cancels *cs = st;

    (void)m;
    cs->io.n = -1;
    if (cs->due)
        jr_cycle_attach(c, &cancel_step, &cs->io);
    cs->due = 0;
}

static void
taken(master *m, void *st, jr_cycle *c)
{
    cancels *cs = st;

    (void)c;
    if (cs->io.n >= 0)
        seen(m, st, cs->io.ids, cs->io.n);
}

/* Job j's run ended (any outcome: the cancel's own record, a result, a
 * death): the cancel told for it is of that run only. A rerun of the job
 * claimed later is a new run, and runs unless cancelled again (the row's
 * cancel_requested, polled). */
static void
job_end(master *m, void *st, const jr_job *j, const jr_result *r,
        double secs)
{
    cancels *cs = st;
    cancelling *c;

    (void)m;
    (void)r;
    (void)secs;
    if (cs->n == 0 || (c = find(cs, j->id)) == NULL)
        return;
    *c = cs->v[--cs->n];
}

/* A job told to stop ends as a cancel, however it ends: unstarted (its
 * worker gave it back) or its worker dead. */
static int
refuse(master *m, void *st, const jr_job *j, const char *why)
{
    cancels *cs = st;

    if (cs->n == 0 || find(cs, j->id) == NULL)
        return 0;
    record(m, j, why);
    return 1;
}

static void
free_cancels(master *m, void *st)
{
    cancels *cs = st;

    (void)m;
    if (cs == NULL)
        return;
    jr_svc_unflag(&cs->poll);
    free(cs->v);
    free(cs);
}

const jr_service jr_cancel_service = {
    .name = "cancel", .init = init, .due = due,
    .fill = fill, .taken = taken, .job_end = job_end, .refuse = refuse,
    .tick = tick,
    .free = free_cancels,
};
