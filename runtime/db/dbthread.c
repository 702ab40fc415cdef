/* dbthread.c - runs cycles against the backend on a thread of its own. A
 * cycle is handed over under a mutex; completion comes back as one byte on
 * a pipe that the event loop watches, so the done callback runs on the
 * loop's thread and nothing else is shared. Its connections are opened by
 * dbopen.c; the services' steps a cycle runs are cycle.c's to run; results
 * recorded outside a cycle, and the stop's bounded waits, are
 * dbrecord.c's. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <event2/event.h>

#include "backend.h"
#include "db/cycle.h"
#include "db/dbthread.h"
#include "base/log.h"
#include "base/util.h"


struct jr_dbthread {
    jr_db           *db;
    char             token[96];
    double           lease;
    pthread_t        thread;
    pthread_mutex_t  mu;
    pthread_cond_t   cv;
    jr_cycle        *next;          /* handed over, not yet taken */
    int              busy;          /* a cycle is submitted and not done */
    int              quit;
    int              pipe[2];       /* thread writes, loop reads */
    unsigned         reconnects;    /* the backend's count, last seen */
    struct event    *ev;
    jr_cycle        *done_cycle;    /* finished, for the loop */
    jr_cycle_done    done;
    void            *arg;
    jr_dbreq        *reqs;          /* requests waiting, oldest first */
    jr_dbreq        *reqs_done;     /* run, for the loop */
};

/* Microseconds a cycle waits for another's commit on its way (changed()
 * 2), and the first of them looked at more often. */
#define AWAIT_US      20000
#define AWAIT_FAST_US 1000
#define DB_TRIM_BYTES (256 << 10)  /* free arena top kept (mallopt) */

struct jr_dbreq {               /* one request off the claim path */
    jr_dbreq_run     run;
    jr_dbreq_done    done;
    void            *arg;
    jr_dbreq        *next;
};

/* The claim's queue caps as the backend takes them, into a new array. */
static jr_queue_want *
queue_wants(const jr_cycle *c)
{
    jr_queue_want *w = calloc((size_t)c->nqueues + 1, sizeof *w);
    int i;

    for (i = 0; w != NULL && i < c->nqueues; i++) {
        w[i].queue = c->qnames[i];
        w[i].max = c->qmax[i];
    }
    return w;
}

/* Whether the backend opened its connection again since the last look:
 * what it committed asynchronously before may be gone, or another server
 * answers now. */
static int
reconnected(jr_dbthread *t)
{
    unsigned n;

    if (t->db->ops->reconnects == NULL)
        return 0;
    n = t->db->ops->reconnects(t->db->b);
    if (n == t->reconnects)
        return 0;
    t->reconnects = n;
    return 1;
}

/* A cycle's outputs, emptied before it runs. */
static void
cycle_reset(jr_cycle *c)
{
    memset(&c->err, 0, sizeof c->err);
    c->applied = c->nclaimed = c->rescued = c->renewed = c->wrote = 0;
}

/* The claim's queues (wants, or none), caps and limits for want jobs. */
static void
fill_spec(jr_cycle *c, jr_claim_spec *spec, jr_queue_want *wants, int want)
{
    spec->queues = wants;
    spec->nqueues = wants ? c->nqueues : 0;
    spec->others = c->others < want ? c->others : want;
    spec->max = want;
    spec->limits = c->limits;
    spec->nlimits = c->nlimits;
    spec->limit_next = &c->limit_next;
    c->limit_next = 0;
}

/* 1 if a wake-up came while cycle c ran (its descriptor is readable and
 * changed() says so), consumed as a consume_wake cycle does. An engine
 * whose every commit wakes (SQLite's WAL) is never asked: the cycle's own
 * writes would wake it. */
static int
late_wake(jr_dbthread *t, jr_cycle *c)
{
    const jr_backend_ops *ops = t->db->ops;
    struct pollfd p = {.fd = ops->wake_fd(t->db->b), .events = POLLIN};
    jr_err e;
    int changed;

    if (ops->caps.wakes_every_commit || c->err.code != 0 || p.fd < 0 ||
        poll(&p, 1, 0) != 1)
        return 0;
    if ((changed = ops->changed(t->db->b, &e)) < 0) {
        jr_cycle_err(c, &e);
        return 0;
    }
    if (changed == 1) {
        c->consume_wake = 1;    /* for jr_cycle_reads */
        c->unchanged = 0;
    }
    return changed == 1;
}

/* A wake-up that came while cycle c recorded its results or claimed, when
 * it claimed nothing (or asked nothing: claim_if_woken): claims now, with
 * the same spec, not after a round through the loop and a cycle of its
 * own. Returns 1 if it consumed one. */
static int
late_claim(jr_dbthread *t, jr_cycle *c, jr_claim_spec *spec,
           jr_queue_want **wants)
{
    jr_err e;

    if (c->want <= 0 || c->nclaimed != 0 || !late_wake(t, c))
        return 0;
    if (c->nqueues > 0 && *wants == NULL &&
        (*wants = queue_wants(c)) == NULL)
        return 1;               /* out of memory: claim next time */
    fill_spec(c, spec, *wants, c->want);
    if ((c->nclaimed = t->db->ops->claim(t->db->b, t->token, t->lease, spec,
                                         c->claimed, &e)) < 0)
        jr_cycle_err(c, &e);
    return 1;
}

/* changed() said 2: another's commit is on its way (SQLite: its WAL
 * write woke us, its fsync is still running). It is waited for here, a
 * look every 0.1 ms for 1 ms and then every 0.5 ms, 20 ms at most (then
 * the loop looks again later): each look costs a lock probe, where a
 * re-check from the loop cost a pass of it and a cycle. Our own writes
 * would wait for that writer's lock anyway. Returns changed()'s answer. */
static int
await_commit(jr_dbthread *t, jr_err *e, jr_cycle *c)
{
    struct timespec ts;
    long waited = 0, step;
    int changed = 2;

    while (changed == 2 && waited < AWAIT_US) {
        step = waited < AWAIT_FAST_US ? 100 : 500;
        ts.tv_sec = 0;
        ts.tv_nsec = step * 1000;
        nanosleep(&ts, NULL);
        waited += step;
        if ((changed = t->db->ops->changed(t->db->b, e)) < 0)
            jr_cycle_err(c, e);
    }
    return changed;
}

/* An engine that wakes at every commit (SQLite's inotify on the WAL)
 * wakes us for our own writes too, and each such wake-up cost the loop a
 * cycle that found nothing. After a cycle that wrote, its wake-ups are
 * consumed here, as changed() does at the next one: another's commit seen
 * on the way sets changed_after (claim again), one still on its way
 * unchanged (look again soon). */
static void
own_wakes(jr_dbthread *t, jr_cycle *c)
{
    const jr_backend_ops *ops = t->db->ops;
    jr_err e;
    int rc;

    c->changed_after = 0;
    if (!ops->caps.wakes_every_commit || c->err.code != 0 ||
        (c->applied <= 0 && c->nclaimed <= 0 && c->rescued <= 0 &&
         c->renewed <= 0 && !c->wrote))
        return;
    if ((rc = ops->changed(t->db->b, &e)) < 0)
        jr_cycle_err(c, &e);
    c->changed_after = rc == 1;
    if (rc == 2)
        c->unchanged = 1;
}

static void
run_cycle(jr_dbthread *t, jr_cycle *c)
{
    const jr_backend_ops *ops = t->db->ops;
    jr_backend *b = t->db->b;
    jr_claim_spec spec = {.names = c->names, .nnames = c->nnames};
    jr_queue_want *wants = NULL;

    if (c->claim_names != NULL) {
        spec.names = c->claim_names;
        spec.nnames = c->nclaim_names;
    }
    jr_err e;
    int changed = 1, want, nres;

    cycle_reset(c);
    if (c->consume_wake && (changed = ops->changed(b, &e)) < 0)
        jr_cycle_err(c, &e);
    if (changed == 2)
        changed = await_commit(t, &e, c);
    /* 2: nothing yet, but a commit is on its way (look again soon) */
    c->unchanged = c->consume_wake && changed == 2;
    c->changed = changed;
    jr_cycle_steps(t->db, t->token, c, JR_STEP_BEFORE);
    want = (changed != 1 && !c->claim_always) || c->claim_if_woken ? 0 :
           c->want;
    if (want > 0 && c->nqueues > 0 && (wants = queue_wants(c)) == NULL)
        want = 0;               /* out of memory: claim next time */
    fill_spec(c, &spec, wants, want);
    nres = c->nresults;
    if (nres > 0 && want > 0 && ops->complete_claim != NULL &&
        (c->nclaimed = ops->complete_claim(b, t->token, c->results, nres,
                                           &c->applied, t->lease, &spec,
                                           c->claimed, &e)) >= 0)
        nres = want = 0;        /* both done in one transaction */
    else
        c->nclaimed = 0;
    if (nres > 0)
        c->applied = jr_dbthread_complete(t->db, t->token, c->results, nres,
                                          &e);
    if (c->applied < 0) {
        jr_cycle_err(c, &e);
        want = 0;               /* the database is in trouble: stop here */
        c->renew = c->rescue = 0;
    }
    if (want > 0 &&
        (c->nclaimed = ops->claim(b, t->token, t->lease, &spec, c->claimed,
                                  &e)) < 0)
        jr_cycle_err(c, &e);
    if (late_claim(t, c, &spec, &wants))
        c->changed = 1;
    else if (c->claim_if_woken)
        c->want = 0;            /* none asked, none claimed */
    if (c->renew && (c->renewed = ops->renew(b, t->token, t->lease, c->held,
                                      c->nheld, &e)) < 0)
        jr_cycle_err(c, &e);
    if (c->rescue &&
        (c->rescued = ops->rescue(b, &e)) < 0)
        jr_cycle_err(c, &e);
    free(wants);
    jr_cycle_steps(t->db, t->token, c, JR_STEP_AFTER);
    jr_cycle_steps(t->db, t->token, c, JR_STEP_LAST);
    own_wakes(t, c);
    c->wake_fd = ops->wake_fd(b);
    c->reconnected = reconnected(t);
}

/* Runs the oldest request (the mutex held on entry and exit) and queues
 * it for the loop. */
static void
run_request(jr_dbthread *t)
{
    jr_dbreq *q = t->reqs, **tail;

    t->reqs = q->next;
    pthread_mutex_unlock(&t->mu);
    q->run(t->db, q->arg);
    pthread_mutex_lock(&t->mu);
    q->next = NULL;
    for (tail = &t->reqs_done; *tail; tail = &(*tail)->next)
        ;
    *tail = q;
}

static void *
thread_main(void *arg)
{
    jr_dbthread *t = arg;
    jr_cycle *c;
    char one = 1;

#ifdef __linux__
    /* await_commit's 0.1 ms naps, not the default 50 us more */
    prctl(PR_SET_TIMERSLACK, 1000UL);
#endif
#ifdef __GLIBC__
    /* a SQLite claim frees its sorter's pages (60 to 90 KiB) at its end,
     * and glibc gave them back to the system at once (its trim threshold
     * is 128 KiB of free memory at the arena's top): two madvise calls and
     * 14 page faults a job with the workers on long jobs. Above this, the
     * free top goes back as before */
    mallopt(M_TRIM_THRESHOLD, DB_TRIM_BYTES);
#endif
    pthread_mutex_lock(&t->mu);
    for (;;) {
        while (t->next == NULL && t->reqs == NULL && !t->quit)
            pthread_cond_wait(&t->cv, &t->mu);
        if (t->next == NULL && t->reqs != NULL && !t->quit) {
            run_request(t);     /* a cycle, when one waits, goes first */
            while (write(t->pipe[1], &one, 1) < 0 && errno == EINTR)
                ;
            continue;
        }
        if (t->next == NULL)
            break;
        c = t->next;
        t->next = NULL;
        pthread_mutex_unlock(&t->mu);
        run_cycle(t, c);
        pthread_mutex_lock(&t->mu);
        t->done_cycle = c;
        pthread_cond_broadcast(&t->cv);
        while (write(t->pipe[1], &one, 1) < 0 && errno == EINTR)
            ;
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

static void
on_pipe(evutil_socket_t fd, short what, void *arg)
{
    jr_dbthread *t = arg;
    jr_cycle *c;
    jr_dbreq *q, *next;
    char buf[64];

    (void)what;
    while (read(fd, buf, sizeof buf) > 0)
        ;
    pthread_mutex_lock(&t->mu);
    c = t->done_cycle;
    t->done_cycle = NULL;
    if (c != NULL)
        t->busy = 0;
    q = t->reqs_done;
    t->reqs_done = NULL;
    pthread_mutex_unlock(&t->mu);
    for (; q != NULL; q = next) {
        next = q->next;
        q->done(q->arg, 1);
        free(q);
    }
    if (c != NULL)
        t->done(c, t->arg);
}

int
jr_dbthread_request(jr_dbthread *t, jr_dbreq_run run, jr_dbreq_done done,
                    void *arg)
{
    jr_dbreq *q = calloc(1, sizeof *q), **tail;

    if (q == NULL)
        return -1;
    q->run = run;
    q->done = done;
    q->arg = arg;
    pthread_mutex_lock(&t->mu);
    for (tail = &t->reqs; *tail; tail = &(*tail)->next)
        ;
    *tail = q;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
    return 0;
}

/* After the thread stopped: the requests it did not run, or whose done
 * the loop has not called, hear it (ran 0 or 1). */
static void
drop_requests(jr_dbthread *t)
{
    jr_dbreq *lists[2] = {t->reqs_done, t->reqs}, *q, *next;

    for (int i = 0; i < 2; i++)
        for (q = lists[i]; q != NULL; q = next) {
            next = q->next;
            q->done(q->arg, i == 0);
            free(q);
        }
    t->reqs = t->reqs_done = NULL;
}

jr_dbthread *
jr_dbthread_new(jr_db *db, const char *token, double lease,
                struct event_base *base, jr_cycle_done done, void *arg,
                jr_err *err)
{
    jr_dbthread *t = calloc(1, sizeof *t);
    sigset_t all, old;
    int rc;

    if (t == NULL) {
        jr_fail(err, JR_ENOMEM, "out of memory");
        return NULL;
    }
    t->db = db;
    snprintf(t->token, sizeof t->token, "%s", token);
    t->lease = lease;
    t->done = done;
    t->arg = arg;
    if (pipe2(t->pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
        jr_fail_errno(err, JR_ESYS, errno, "database thread: pipe");
        free(t);
        return NULL;
    }
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    t->ev = event_new(base, t->pipe[0], EV_READ | EV_PERSIST, on_pipe, t);
    event_add(t->ev, NULL);
    /* signals belong to the loop's thread */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    rc = pthread_create(&t->thread, NULL, thread_main, t);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        jr_fail_errno(err, JR_ESYS, rc, "database thread: cannot start");
        event_free(t->ev);
        close(t->pipe[0]);
        close(t->pipe[1]);
        free(t);
        return NULL;
    }
    return t;
}

int
jr_dbthread_submit(jr_dbthread *t, jr_cycle *c)
{
    pthread_mutex_lock(&t->mu);
    if (t->busy) {
        pthread_mutex_unlock(&t->mu);
        return -1;
    }
    t->busy = 1;
    t->next = c;
    /* signalled once unlocked: signalled under the lock, the thread woke
     * only to wait for it (two more futex calls and a switch a cycle) */
    pthread_mutex_unlock(&t->mu);
    pthread_cond_signal(&t->cv);
    return 0;
}

jr_cycle *
jr_dbthread_wait(jr_dbthread *t)
{
    jr_cycle *c;

    pthread_mutex_lock(&t->mu);
    while (t->busy && t->done_cycle == NULL)
        pthread_cond_wait(&t->cv, &t->mu);
    c = t->done_cycle;
    t->done_cycle = NULL;
    t->busy = 0;
    pthread_mutex_unlock(&t->mu);
    return c;
}

static int
cycle_out(void *arg)
{
    const jr_dbthread *t = arg;

    return t->busy && t->done_cycle == NULL;
}

int
jr_dbthread_settle(jr_dbthread *t, double secs)
{
    int told;

    pthread_mutex_lock(&t->mu);
    told = jr_db_wait_or_cut(&t->mu, &t->cv, cycle_out, t, t->db, secs);
    pthread_mutex_unlock(&t->mu);
    return told;
}

int
jr_dbthread_busy(const jr_dbthread *t)
{
    return t->busy;
}

void
jr_dbthread_free(jr_dbthread *t)
{
    if (t == NULL)
        return;
    pthread_mutex_lock(&t->mu);
    t->quit = 1;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    pthread_join(t->thread, NULL);
    drop_requests(t);
    event_free(t->ev);
    close(t->pipe[0]);
    close(t->pipe[1]);
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
    free(t);
}
