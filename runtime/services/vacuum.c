/* vacuum.c - PostgreSQL's jobs table, vacuumed by the runner. A claim or a
 * finished job leaves the old row's entries in the claim index until a
 * vacuum, and every claim walks past them from the index's start; stock
 * autovacuum looks at a table once a minute, and between two of its runs
 * a fast drain slows down several times (a 1,000,000-job drain took twice
 * as long). So after every `vacuum_every` jobs it finished, or a 20th of
 * that when a big claim took long (the sign of a table full of dead
 * entries: a runner started on one should not wait a whole round), the
 * runner asks for `VACUUM (ANALYZE, SKIP_LOCKED) jobs` (the statistics
 * too: a table filled since its last analyze can plan a claim badly) on a
 * connection and thread of their own, opened at the first, so that claims
 * never wait on it; one at a time. Its own count misses the dead rows
 * other sessions left (runners that stopped before vacuum_every, a bulk
 * delete): at its start and every CHECK_SECS after, the runner also asks
 * the server's count of the table's dead rows, on the same thread, and
 * vacuums when that reaches vacuum_every and twice the live rows
 * (vacuum_due: a backlog of the same order is left to its own count). SQLite needs none
 * (its backend has no vacuum op). A service (service.h): owns its
 * connection and thread.
 * Uses service.h, svc.h, dbthread.h, dbcalls.h, log.h. */
#include <stdlib.h>

#include "db/dbcalls.h"
#include "db/dbthread.h"
#include "base/log.h"
#include "base/util.h"
#include "master/service.h"
#include "master/svc.h"

#define SLOW_N    100           /* a claim of this many jobs taking */
#define SLOW_SECS 0.1           /* this long asks for a vacuum early */
#define CHECK_SECS 10.0         /* the server's dead rows asked this often */

typedef struct jr_vacuum jr_vacuum;

struct jr_vacuum {
    jr_db       *db;            /* its connection, NULL until the first */
    jr_dbthread *t;             /* and thread */
    long         count;         /* jobs finished since the last one asked */
    int          started;       /* one was asked already */
    int          stopped;       /* the runner stops: no more */
    int          busy;          /* one is on its way */
    int          due;           /* it is vacuum_due's, not a vacuum */
    double       checked;       /* the last vacuum_due asked (mono), or 0 */
    int          rc;            /* its result (set on the thread) */
    long         every;         /* vacuum_due's dead rows, vacuum_every */
    double       at;            /* when it was asked (mono) */
    jr_err       err;
};

static void
run(jr_db *db, void *arg)
{
    jr_vacuum *v = arg;

    v->rc = v->due ? jr_dbcall_vacuum_due(db, v->every, &v->err)
                   : jr_dbcall_vacuum(db, &v->err);
}

static void
done(void *arg, int ran)
{
    jr_vacuum *v = arg;

    v->busy = 0;
    if (ran && v->rc < 0)
        jr_log(JR_LOG_WARN, "vacuum of the jobs table failed (claims go on,"
               " slower): %s", v->err.msg);
    else if (ran && (!v->due || v->rc > 0))
        jr_log(JR_LOG_DEBUG, "vacuumed the jobs table in %.3fs%s",
               jr_mono() - v->at, v->due ? " (dead rows other sessions "
               "left)" : "");
    else if (ran)
        jr_log(JR_LOG_DEBUG, "the jobs table's dead rows need no vacuum "
               "yet (under vacuum_every, or under twice its live rows)");
}

/* Its connection and thread; 0, or -1 (logged) when the database refused
 * them: the runner then leaves vacuums to autovacuum. */
static int
open_thread(master *m, jr_vacuum *v)
{
    jr_err e = {0};

    if ((v->t = jr_dbthread_side(jr_svc_config(m), jr_svc_token(m),
                                 jr_svc_base(m), 0, &v->db, &e)) != NULL)
        return 0;
    jr_log(JR_LOG_WARN, "vacuum: no connection of its own (%s): the jobs "
           "table is left to autovacuum", e.msg);
    return -1;
}

/* Asks the thread for a vacuum (due 0) or vacuum_due of every dead rows
 * (due 1). */
static void
ask(jr_vacuum *v, int due, long every)
{
    v->at = jr_mono();
    v->due = due;
    v->every = every;
    if (jr_dbthread_request(v->t, run, done, v) == 0)
        v->busy = 1;
}

/* n more jobs were recorded finished, and the cycle was slow (a big claim
 * that took long) or not: asks for a vacuum when it is time. */
static void
note(master *m, jr_vacuum *v, long n, int slow)
{
    long every = jr_svc_config(m)->vacuum_every;

    if (every <= 0 || v == NULL || v->stopped ||
        !jr_dbcall_can_vacuum(jr_svc_db(m)))
        return;
    v->count += n > 0 ? n : 0;
    if (v->busy || v->count < (slow ? every / 20 : every) ||
        (v->started && v->t == NULL))
        return;                 /* not yet, or no connection for it */
    v->count = 0;
    v->started = 1;
    if (v->t == NULL && open_thread(m, v) < 0)
        return;
    ask(v, 0, every);
}

/* Each tick: the server's count of dead rows asked at the start and every
 * CHECK_SECS after, when no vacuum is on its way; a vacuum when it is
 * vacuum_every or more (a count of this runner's is not reset: its
 * vacuum comes as before). */
static void
tick(master *m, void *st, double now)
{
    jr_vacuum *v = st;
    long every = jr_svc_config(m)->vacuum_every;

    if (every <= 0 || v == NULL || v->stopped || v->busy ||
        (v->checked > 0 && now - v->checked < CHECK_SECS) ||
        (v->started && v->t == NULL) ||
        !jr_dbcall_can_vacuum(jr_svc_db(m)))
        return;
    v->checked = now;
    v->started = 1;
    if (v->t == NULL && open_thread(m, v) < 0)
        return;
    ask(v, 1, every);
}

static int
init(master *m, void **st)
{
    (void)m;
    return (*st = calloc(1, sizeof(jr_vacuum))) == NULL ? -1 : 0;
}

/* Waits for a vacuum on its way (it skips when locked, so not long),
 * closes the connection; asks for none after. */
static void
stop(master *m, void *st)
{
    jr_vacuum *v = st;

    (void)m;
    if (v == NULL)
        return;
    jr_dbthread_free(v->t);     /* a request not run hears ran = 0 */
    jr_dbthread_close(v->db);
    v->t = NULL;
    v->db = NULL;
    v->stopped = 1;
}

static void
free_vacuum(master *m, void *st)
{
    stop(m, st);
    free(st);
}

/* The second connection's round recorded n jobs. */
static void
recorded(master *m, void *st, long n)
{
    note(m, st, n, 0);
}

/* Cycle c recorded its results: they count, and a big claim that took
 * long (dead index entries, likely) asks for a vacuum early. */
static void
read_cycle(master *m, void *st, jr_cycle *c)
{
    if (c->applied >= 0)
        note(m, st, c->applied, c->nclaimed >= SLOW_N &&
                       jr_mono() - jr_svc_cycle_at(m) >= SLOW_SECS);
}

const jr_service jr_vacuum_service = {
    .name = "vacuum", .init = init, .read = read_cycle,
    .recorded = recorded, .tick = tick, .stop = stop, .free = free_vacuum,
};
