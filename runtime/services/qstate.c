/* qstate.c - named queues in the master: for each queue the config caps
 * (`queues`) or the runner serves (`serve_queues`, --queues), how many of
 * its jobs this runner holds (claimed in the local queue, or in workers),
 * so that each claim asks at most its target less that; which queues are
 * paused, so that jobs of a paused queue claimed ahead are given back
 * instead of started; and the per-queue figures and targets of on_tick.
 * Fairness between queues is the claim's (backend.h). A service
 * (service.h): owns the queues, the paused set, its timer, a claim's
 * caps and the cycle's read of the paused queues (paused_step); /metrics
 * reads the queues through its host callback. Uses service.h, svc.h,
 * host.h, dbcalls.h, counts.h. */
#include <stdlib.h>
#include <string.h>

#include "db/dbcalls.h"
#include "base/log.h"
#include "http/host.h"
#include "master/service.h"
#include "master/svc.h"
#include "services/qstate.h"
#include "services/counts.h"

extern const jr_service jr_qstate_service;   /* below */

typedef struct qstate {         /* one queue this runner caps or names */
    const char *name;           /* the config's */
    int         capped;         /* listed in `queues`: min..max apply */
    int         min, max;
    int         target;         /* its cap now: max, or on_tick's choice */
    int         held;           /* claimed here: local queue + workers */
    int         running;        /* of them, in workers */
    int         asked;          /* the last claim's cap for it */
    int         more;           /* it may have more ready: claim again
                                   when one of its jobs ends */
} qstate;

typedef struct paused_io {      /* its cycle step's in/out */
    int          poll;          /* read the paused queues */
    int          ahead;         /* jobs are claimed ahead: read them also
                                   when woken by a change */
    char       **paused;        /* out: paused queue names */
    int          npaused;       /* or -1: not read */
} paused_io;

typedef struct qsvc {           /* the service's state */
    qstate      *qs;            /* queues capped or served, by name */
    int          nqs;
    int          serve_all;     /* no serve list: every queue */
    const char **qnames;        /* a claim's caps, for the cycle */
    int         *qmax;
    char       **paused;        /* paused queues, last read */
    int          npaused;
    int          paused_due;    /* read the paused queues */
    jr_flag_timer tick;         /* sets paused_due each second */
    paused_io    io;            /* the cycle's while it runs */
} qsvc;

static qsvc *
qv(const master *m)
{
    return jr_service_state(m, &jr_qstate_service);
}

static qstate *
find(qsvc *v, const char *queue)
{
    int i;

    for (i = 0; i < v->nqs; i++)
        if (strcmp(v->qs[i].name, queue) == 0)
            return &v->qs[i];
    return NULL;
}

/* Adds queue to v->qs (room is there) unless it is in already. */
static qstate *
add(qsvc *v, const char *queue)
{
    qstate *q = find(v, queue);

    if (q != NULL)
        return q;
    q = &v->qs[v->nqs++];
    memset(q, 0, sizeof *q);
    q->name = queue;
    return q;
}

/* Logs which queues this runner serves, when not all. */
static void
log_served(const jr_queues *cq)
{
    char list[512];
    size_t n = 0;
    int i;

    if (cq->nserve == 0)
        return;
    list[0] = '\0';
    for (i = 0; i < cq->nserve && n < sizeof list; i++)
        n += (size_t)snprintf(list + n, sizeof list - n, "%s%s",
                              i ? ", " : "", cq->serve[i]);
    jr_log(JR_LOG_INFO, "serving queues: %s (no other)", list);
}

static int
init(master *m, void **st)
{
    const jr_queues *cq = &jr_svc_config(m)->queues;
    int i, n = cq->n + cq->nserve;
    qsvc *v = calloc(1, sizeof *v);
    qstate *q;

    if ((*st = v) == NULL)
        return -1;
    jr_svc_flag(m, &v->tick, 1.0, &v->paused_due);
    v->serve_all = cq->nserve == 0;
    if (n == 0)
        return 0;
    v->qs = calloc((size_t)n, sizeof *v->qs);
    v->qnames = calloc((size_t)n, sizeof *v->qnames);
    v->qmax = calloc((size_t)n, sizeof *v->qmax);
    if (v->qs == NULL || v->qnames == NULL || v->qmax == NULL)
        return -1;
    for (i = 0; i < cq->n; i++) {
        if (!v->serve_all && !jr_queues_served(cq, cq->q[i].name))
            continue;           /* not served: never claimed, no cap */
        q = add(v, cq->q[i].name);
        q->capped = 1;
        q->min = cq->q[i].min;
        q->max = q->target = cq->q[i].max;
    }
    for (i = 0; i < cq->nserve; i++)
        add(v, cq->serve[i]);
    log_served(cq);
    return 0;
}

static void
free_qstate(master *m, void *st)
{
    qsvc *v = st;
    int i;

    (void)m;
    if (v == NULL)
        return;
    jr_svc_unflag(&v->tick);
    free(v->qs);
    for (i = 0; i < v->npaused; i++)
        free(v->paused[i]);
    free(v->paused);
    free(v->qnames);
    free(v->qmax);
    free(v);
}

/* Counts what each queue holds here: the local queue and the workers. */
static void
count_held(master *m, qsvc *v)
{
    jr_svc_iter it = {0};
    const jr_job *j;
    qstate *q;
    size_t i;
    int k;

    for (k = 0; k < v->nqs; k++)
        v->qs[k].held = v->qs[k].running = 0;
    for (i = 0; i < jr_svc_queued(m); i++)
        if ((q = find(v, jr_svc_queue_at(m, i)->queue)))
            q->held++;
    while ((j = jr_svc_held(m, &it)) != NULL)
        if ((q = find(v, j->queue))) {
            q->held++;
            q->running++;
        }
}

/* Jobs of a paused queue are held here: read the paused set. */
static int
due(master *m, void *st)
{
    return ((qsvc *)st)->paused_due && jr_svc_queued(m) > 0;
}

static void
paused_clear(void *arg)
{
    paused_io *io = arg;
    int i;

    for (i = 0; i < io->npaused; i++)
        free(io->paused[i]);
    free(io->paused);
    io->paused = NULL;
    io->npaused = -1;
}

static int
add_paused(const char *queue, void *arg)
{
    paused_io *io = arg;
    char **more = realloc(io->paused, (size_t)(io->npaused + 1) *
                          sizeof *more);

    if (more == NULL)
        return 1;
    io->paused = more;
    if ((more[io->npaused] = strdup(queue)) == NULL)
        return 1;
    io->npaused++;
    return 0;
}

/* On the database thread, last in the cycle: the paused queues, when
 * asked or when jobs are claimed ahead and a change woke the cycle. */
static int
paused_run(jr_db *db, const char *token, jr_cycle *c, void *arg,
           jr_err *err)
{
    paused_io *io = arg;

    (void)token;
    if (!io->poll && !(io->ahead && c->consume_wake && c->changed == 1))
        return 0;
    io->npaused = 0;
    if (jr_dbcall_paused(db, add_paused, io, err) < 0) {
        paused_clear(io);
        return -1;
    }
    return 0;
}

static const jr_cycle_step paused_step = {
    .name = "paused queues", .when = JR_STEP_LAST, .run = paused_run,
    .clear = paused_clear,
};

/* Fills c's queue caps (each queue's target less what it holds here) for
 * its claim of up to c->want jobs, and attaches the read of the paused
 * queues. */
static void
fill(master *m, void *st, jr_cycle *c)
{
    int k, free_slots, want = c->want;
    qsvc *v = st;
    qstate *q;

    /* jobs claimed ahead must not start once their queue is paused;
     * on_tick shows whether each queue is (events attached its counts) */
    v->io.npaused = -1;
    v->io.poll = (v->paused_due && jr_svc_queued(m) > 0) ||
                 jr_cycle_io(c, &jr_counts_step) != NULL;
    v->io.ahead = jr_svc_queued(m) > 0;
    if (v->io.poll || v->io.ahead)
        jr_cycle_attach(c, &paused_step, &v->io);
    v->paused_due = 0;
    c->others = v->serve_all ? want : 0;
    c->nqueues = 0;
    if (v->nqs == 0)
        return;
    count_held(m, v);
    for (k = 0; k < v->nqs; k++) {
        q = &v->qs[k];
        free_slots = q->capped ? q->target - q->held : want;
        q->asked = free_slots > 0 ? free_slots : 0;
        v->qnames[k] = q->name;
        v->qmax[k] = q->asked;
    }
    c->qnames = v->qnames;
    c->qmax = v->qmax;
    c->nqueues = v->nqs;
}

/* Jobs of a paused queue claimed ahead go back to the database. */
static void
release_paused(master *m)
{
    const qsvc *v = qv(m);
    size_t i = 0;
    int k, gone = 0;

    while (i < jr_svc_queued(m)) {
        const jr_job *j = jr_svc_queue_at(m, i);
        for (k = 0; k < v->npaused; k++)
            if (strcmp(v->paused[k], j->queue) == 0)
                break;
        if (k < v->npaused) {
            jr_svc_release(m, jr_svc_queue_take(m, i));
            gone++;
        } else {
            i++;
        }
    }
    if (gone > 0)
        jr_log(JR_LOG_INFO, "gave back %d claimed job%s of paused queues",
               gone, gone == 1 ? "" : "s");
}

/* Takes the paused queues the cycle read. */
static void
take_paused(master *m, qsvc *v)
{
    int i;

    if (v->io.npaused < 0)
        return;
    for (i = 0; i < v->npaused; i++)
        free(v->paused[i]);
    free(v->paused);
    v->paused = v->io.paused;
    v->npaused = v->io.npaused;
    v->io.paused = NULL;
    v->io.npaused = -1;
    if (v->npaused > 0 && jr_svc_queued(m) > 0)
        release_paused(m);
}

/* After cycle c: notes which capped queues may have more ready, takes the
 * paused queues it read (releasing local jobs of paused queues). */
static void
taken(master *m, void *st, jr_cycle *c)
{
    int i, k, *got;
    qsvc *v = st;

    take_paused(m, v);
    if (v->nqs == 0 || c->want <= 0 || c->nclaimed < 0)
        return;
    if ((got = calloc((size_t)v->nqs, sizeof *got)) == NULL)
        return;
    for (i = 0; i < c->nclaimed; i++)
        for (k = 0; k < v->nqs; k++)
            if (strcmp(v->qs[k].name, c->claimed[i]->queue) == 0)
                got[k]++;
    /* a capped queue that gave all it was asked (or was full) may have
     * more: claim when one of its jobs ends, not at the next poll; and
     * now if some ended while this cycle ran */
    count_held(m, v);
    for (k = 0; k < v->nqs; k++) {
        v->qs[k].more = v->qs[k].capped && got[k] >= v->qs[k].asked;
        if (v->qs[k].more && v->qs[k].held < v->qs[k].target)
            jr_svc_want_claim(m);
    }
    free(got);
}

/* A job of its queue left its worker: claim again if its queue was
 * full. */
static void
job_left(master *m, void *st, const jr_job *j, int kind)
{
    qsvc *v = st;
    qstate *q;

    (void)kind;
    if (v->nqs > 0 && (q = find(v, j->queue)) != NULL && q->more) {
        q->more = 0;
        jr_svc_want_claim(m);
    }
}

void
jr_qstate_target(master *m, const char *queue, double target)
{
    qstate *q = find(qv(m), queue);
    int t;

    if (q == NULL || !q->capped || target != target) {
        jr_log(JR_LOG_WARN, "on_tick: no target for queue '%s': %s", queue,
               q == NULL || !q->capped ? "it is not in the config's "
               "'queues'" : "not a number");
        return;
    }
    t = target < q->min ? q->min : target > q->max ? q->max :
        (int)(target + 0.5);
    if (t == q->target)
        return;
    jr_log(JR_LOG_INFO, "queue %s: concurrency %d -> %d (tick)", q->name,
           q->target, t);
    if (t > q->target)
        q->more = 1;
    q->target = t;
    jr_svc_want_claim(m);
}

static int
is_paused(const master *m, const char *queue)
{
    int i;

    for (i = 0; i < qv(m)->npaused; i++)
        if (strcmp(qv(m)->paused[i], queue) == 0)
            return 1;
    return 0;
}

/* Jobs of queue in this runner's workers. */
static int
running_of(master *m, const char *queue)
{
    jr_svc_iter it = {0};
    const jr_job *j;
    int n = 0;

    while ((j = jr_svc_held(m, &it)) != NULL)
        n += strcmp(j->queue, queue) == 0;
    return n;
}

/* One queue's table in on_tick's `queues`; q NULL: not capped here. */
static void
tick_queue(master *m, const char *name, long ready, const qstate *q)
{
    jr_hooks *h = jr_svc_hooks(m);

    jr_hook_open(h, name);
    jr_hook_int(h, "ready", ready);
    jr_hook_int(h, "running", running_of(m, name));
    jr_hook_bool(h, "paused", is_paused(m, name));
    if (q != NULL && q->capped) {
        jr_hook_int(h, "cap", q->target);
        jr_hook_int(h, "min", q->min);
        jr_hook_int(h, "max", q->max);
    }
    jr_hook_close(h);
}

/* Adds the per-queue figures to the on_tick event being built. */
static void
figures(master *m, void *st, const jr_cycle *c)
{
    static const jr_counts none = {.ready = -1};
    const jr_counts *n = jr_cycle_io(c, &jr_counts_step);
    qsvc *v = st;
    long ready;
    int i, k;

    if (n == NULL)
        n = &none;
    jr_hook_open(jr_svc_hooks(m), "queues");
    for (k = 0; k < v->nqs; k++) {
        for (ready = 0, i = 0; i < n->nq; i++)
            if (strcmp(n->q[i].queue, v->qs[k].name) == 0)
                ready = n->q[i].n;
        tick_queue(m, v->qs[k].name, ready, &v->qs[k]);
    }
    for (i = 0; i < n->nq; i++)
        if (find(v, n->q[i].queue) == NULL)
            tick_queue(m, n->q[i].queue, n->q[i].n, NULL);
    jr_hook_close(jr_svc_hooks(m));
}

/* Capped queues, or a serve list, shape claims. */
static int
shapes(master *m, void *st)
{
    qsvc *v = st;

    (void)m;
    return v->nqs > 0 || !v->serve_all;
}

/* The HTTP host's queues: each queue capped or served, as counted last
 * (a claim's fill or after a cycle). */
static void
host_queues(void *runner, void (*each)(void *arg, const jr_httpqueue *q),
            void *arg)
{
    const qsvc *v = qv(runner);
    jr_httpqueue q;

    for (int k = 0; v != NULL && k < v->nqs; k++) {
        q.name = v->qs[k].name;
        q.running = v->qs[k].running;
        q.local = v->qs[k].held - v->qs[k].running;
        q.capped = v->qs[k].capped;
        q.target = v->qs[k].target;
        each(arg, &q);
    }
}

static int
host(master *m, jr_httphost *h)
{
    (void)m;
    h->queues = host_queues;
    return 0;
}

const jr_service jr_qstate_service = {
    .name = "queues", .host = host, .init = init, .due = due,
    .fill = fill, .taken = taken, .job_left = job_left, .shapes = shapes,
    .figures = figures, .free = free_qstate,
};
