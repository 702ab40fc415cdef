/* dbthread.h - the master's database thread and its connection. The
 * event loop never waits on the database: it hands one cycle at a time
 * (record results, claim, renew, rescue, and the steps the services
 * attach: jr_cycle_step) to this thread, which alone uses the backend
 * connection while the loop runs, and is told through a pipe when the
 * cycle is done. Owns the runner's backend connection: it is the
 * master's only way to the storage interface (backend.h), which the rest
 * of the master never sees. Uses config.h, job.h; libevent for the
 * pipe. */
#ifndef JR_DBTHREAD_H
#define JR_DBTHREAD_H

#include <pthread.h>
#include <stdint.h>

#include "config/config.h"
#include "base/err.h"
#include "base/job.h"

#define JR_DB_RETRY_MAX 5.0     /* seconds between retries when it fails */

struct event_base;
typedef struct jr_db jr_db;     /* opaque here: a connection (backend.h) */

/* Opens and migrates cfg's database for the runner, retrying one that
 * cannot be reached (not a bad URL) for wait_for_db seconds (< 0:
 * forever). Returns a new connection, close with jr_dbthread_close(), or
 * NULL with err set. */
jr_db *jr_dbthread_open(const jr_config *cfg, jr_err *err);
/* Logs a warning for each limit that jobs not started cost more than
 * (docs/limits.md, "Limits by cost"): at start and migrate, after the
 * limits' sizes are recorded. */
void jr_db_cost_warn(const jr_db *db);
void   jr_dbthread_close(jr_db *db);    /* NULL is a no-op */
/* The descriptor that becomes readable when another process may have
 * added work, or -1; wake-ups pending so far are consumed (start from
 * now). Before the thread starts. */
int    jr_dbthread_wake_fd(jr_db *db);
/* Requeues jobs whose lease expired, once, before the thread starts:
 * returns how many, or -1 with err set. */
int    jr_dbthread_rescue(jr_db *db, jr_err *err);

typedef struct jr_cycle jr_cycle;

/* Where a step runs in its cycle (jr_cycle_step's when). */
enum {
    JR_STEP_BEFORE,             /* before the results and the claim (after
                                   the wake-up is consumed): may set the
                                   claim's inputs */
    JR_STEP_AFTER,              /* after the claim, the renewal and the
                                   rescue: writes and reads that must see
                                   the claim done */
    JR_STEP_LAST                /* after those: the reads that describe
                                   where the cycle leaves the database */
};

/* A service's database work in a cycle: the service defines its step
 * (one static const each) and an in/out struct of its own, and attaches
 * both to each cycle that has work for it (jr_cycle_attach, in its fill
 * callback); the database thread runs the attached steps, in the order
 * of when and then of attachment, over the cycle's connection, each
 * through db/dbcalls.h. A step runs only while the cycle has no error
 * (the first error is the cycle's and the loop retries): its service
 * sets io's outputs to "not run" before attaching it. Between fill and
 * the service's read the io is the database thread's. */
typedef struct jr_cycle_step {
    const char *name;           /* for messages: "cancels" */
    int         when;           /* JR_STEP_* */
    /* On the database thread: does what io asks for and leaves its
     * outputs in io. token is the runner's (its leases). Reads c's claim
     * fields (names, queues, limits, what it claimed); a JR_STEP_BEFORE
     * step may set the claim's inputs. Returns 0, or -1 with err set
     * (the cycle's error unless it has one already). */
    int  (*run)(jr_db *db, const char *token, jr_cycle *c, void *io,
                jr_err *err);
    /* In the loop, once the services read the cycle (or dropped it):
     * frees what run left in io that its service did not take. NULL:
     * nothing to free. */
    void (*clear)(void *io);
} jr_cycle_step;

#define JR_CYCLE_STEPS 16       /* steps attached to one cycle at most */

typedef struct jr_cycle_att {   /* a step attached to a cycle */
    const jr_cycle_step *step;
    void                *io;    /* the service's (borrowed) */
} jr_cycle_att;

/* One unit of work: the claim's (results, claim, renewal, rescue) and
 * the steps the services attached. The master fills the inputs, must
 * not touch the cycle while it runs, and reads the outputs in its done
 * callback. */
struct jr_cycle {
    /* inputs */
    jr_result          *results;        /* the master's (it frees them);
                                           recorded first */
    int                 nresults;
    int                 want;           /* claim up to this many; 0: none */
    int                 consume_wake;   /* call changed() first */
    int                 claim_always;   /* claim even if changed() says 0 */
    int                 claim_if_woken; /* claim want only if a wake-up
                                           comes while the cycle runs
                                           (never on an engine whose every
                                           commit wakes); want is 0 after
                                           if none came. Any cycle that
                                           claimed nothing claims too if
                                           one came */
    const char *const  *names;          /* borrowed handler names */
    int                 nnames;
    const char *const  *claim_names;    /* the claim's names when only
                                           some of names (borrowed), or
                                           NULL: names */
    int                 nclaim_names;
    int                 renew;          /* renew the leases of held[] */
    int64_t            *held;           /* the jobs this runner holds
                                           (the master's: it frees them) */
    int                 nheld;
    int                 rescue;         /* requeue expired leases */
    const char *const  *qnames;         /* claim at most qmax[i] jobs of */
    const int          *qmax;           /* queue qnames[i]; borrowed */
    int                 nqueues;
    int                 others;         /* at most this many from each
                                           queue not listed (0: none) */
    const struct jr_limit *limits;      /* borrowed; see jr_claim_spec */
    int                 nlimits;
    jr_cycle_att        steps[JR_CYCLE_STEPS];  /* jr_cycle_attach's */
    int                 nsteps;
    /* outputs */
    double              limit_next;     /* a refused rate's next token,
                                           epoch seconds, or 0 */
    int                 applied;        /* results recorded, or -1 */
    jr_job            **claimed;        /* want slots, filled; caller owns */
    int                 nclaimed;       /* or -1 */
    int                 rescued;        /* or -1 */
    int                 renewed;        /* or -1 */
    int                 changed;        /* changed()'s answer (1 when the
                                           cycle consumed no wake-up) */
    int                 wrote;          /* a step wrote (set by it) */
    int                 unchanged;      /* woken, but nothing new yet */
    int                 changed_after;  /* the engine wakes at every commit
                                           (caps.h): after the cycle's own
                                           writes, their wake-ups consumed
                                           and another's commit seen */
    int                 wake_fd;        /* the backend's wake descriptor */
    int                 reconnected;    /* the connection was opened again
                                           since the last cycle */
    jr_err              err;            /* the first error, if any */
};

/* Attaches step s with its in/out struct io (borrowed until the cycle is
 * read) to c, in a fill callback. Returns 0, or -1 (logged) when c has
 * JR_CYCLE_STEPS already: the step does not run. */
int   jr_cycle_attach(jr_cycle *c, const jr_cycle_step *s, void *io);
/* The io attached to c for step s, or NULL when s is not attached. */
void *jr_cycle_io(const jr_cycle *c, const jr_cycle_step *s);
/* Frees what c's steps left in their io (each step's clear): after the
 * services read the cycle, or when it is dropped. */
void  jr_cycle_free_out(jr_cycle *c);

typedef struct jr_dbthread jr_dbthread;
typedef void (*jr_cycle_done)(jr_cycle *c, void *arg);

/* Starts the thread over db (borrowed: the thread alone uses it until
 * jr_dbthread_free). done runs in the loop of base after each cycle (NULL
 * for a thread that only runs requests: the HTTP reads, vacuums).
 * Returns NULL with err set on failure. */
jr_dbthread *jr_dbthread_new(jr_db *db, const char *token, double lease,
                             struct event_base *base, jr_cycle_done done,
                             void *arg, jr_err *err);
/* Records r[0..n) as db's complete does. When the database refuses the
 * batch for the input of some result (JR_EINPUT: a follow-up push it will
 * not take), records them one by one so that only the refused ones fail:
 * each becomes a death saying why. Returns how many were applied, or -1
 * with err set when the database itself is in trouble (retry later). For
 * the thread, and for the master once the thread is gone. */
int  jr_dbthread_complete(jr_db *db, const char *token, const jr_result *r,
                          int n, jr_err *err);
/* jr_dbthread_complete at a stop, with no database thread: after secs
 * the handler's statement it runs, if any, is interrupted as
 * jr_dbthread_settle does, so that the runner's last recording of
 * results does not wait on one that does not end. */
int  jr_dbthread_complete_within(jr_db *db, const char *token,
                                 const jr_result *r, int n, double secs,
                                 jr_err *err);
/* Starts c; returns -1 if a cycle is still running. */
int  jr_dbthread_submit(jr_dbthread *t, jr_cycle *c);
int  jr_dbthread_busy(const jr_dbthread *t);
/* Waits for the running cycle, if any, and returns it (its done callback
 * will not run), or NULL when none was running. */
jr_cycle *jr_dbthread_wait(jr_dbthread *t);
/* At a stop: waits up to secs for the running cycle, if any, then
 * interrupts the handler's statement it runs (one that does not end)
 * until the cycle is done: no handler's statement runs on the thread's
 * connection after that (backend.h's interrupt). Then jr_dbthread_wait
 * or jr_dbthread_free. Returns 1 when it interrupted, else 0. */
int  jr_dbthread_settle(jr_dbthread *t, double secs);
/* At a stop, after another connection's round was interrupted: no
 * handler's statement runs on db any more (the last recording of results
 * that round gave back must not wait on one). */
void jr_dbthread_cut(jr_db *db);
/* Inside runtime/db (dbrecord.c, for dbthread.c's settle): with mu held,
 * waits on cv while out(arg), for secs, then interrupts db's handler's
 * statement every 0.2 s until out(arg) is 0. Returns 1 when it
 * interrupted. */
int  jr_db_wait_or_cut(pthread_mutex_t *mu, pthread_cond_t *cv,
                       int (*out)(void *), void *arg, jr_db *db, double secs);
/* A request off the claim path (the HTTP server's reads and actions):
 * run(db, arg) runs on the thread, between cycles (a waiting cycle goes
 * first), over the connection (backend.h); then done(arg, 1) runs in the
 * loop. A request not run when the thread stops gets done(arg, 0) from
 * jr_dbthread_free. Returns 0, or -1 when out of memory (nothing
 * queued). */
typedef struct jr_dbreq jr_dbreq;
typedef void (*jr_dbreq_run)(jr_db *db, void *arg);
typedef void (*jr_dbreq_done)(void *arg, int ran);
int  jr_dbthread_request(jr_dbthread *t, jr_dbreq_run run,
                         jr_dbreq_done done, void *arg);
/* Stops the thread after the running cycle (whose done callback will not
 * run: call jr_dbthread_wait first). NULL is a no-op. */
void jr_dbthread_free(jr_dbthread *t);
/* A thread for requests only, over a second connection to cfg's database
 * (no migration, no waiting): the HTTP reads, vacuums, and with claims
 * set the second round in flight (lane.c), whose connection claims.
 * Sets *db (free the thread, then jr_dbthread_close it); NULL and err
 * when the database refused the connection. */
jr_dbthread *jr_dbthread_side(const jr_config *cfg, const char *token,
                              struct event_base *base, int claims,
                              jr_db **db, jr_err *err);

#endif
