/* dbthread.h - the master's database thread and its connection. The
 * event loop never waits on the database: it hands one cycle at a time
 * (record results, claim, renew, rescue) to this thread, which alone uses
 * the backend connection while the loop runs, and is told through a pipe
 * when the cycle is done. Owns the runner's backend connection: it is the
 * master's only way to the storage interface (backend.h), which the rest
 * of the master never sees. Uses config.h, job.h; libevent for the
 * pipe. */
#ifndef JR_DBTHREAD_H
#define JR_DBTHREAD_H

#include <stdint.h>

#include "config/config.h"
#include "base/err.h"
#include "base/job.h"

#define JR_DB_RETRY_MAX 5.0     /* seconds between retries when it fails */
#define JR_CANCEL_MAX   256     /* cancelled running jobs seen per cycle */
#define JR_PRUNE_BATCH  500     /* finished jobs deleted per cycle */

struct event_base;
typedef struct jr_db jr_db;     /* opaque here: a connection (backend.h) */

/* Opens and migrates cfg's database for the runner, retrying one that
 * cannot be reached (not a bad URL) for wait_for_db seconds (< 0:
 * forever). Returns a new connection, close with jr_dbthread_close(), or
 * NULL with err set. */
jr_db *jr_dbthread_open(const jr_config *cfg, jr_err *err);
void   jr_dbthread_close(jr_db *db);    /* NULL is a no-op */
/* The descriptor that becomes readable when another process may have
 * added work, or -1; wake-ups pending so far are consumed (start from
 * now). Before the thread starts. */
int    jr_dbthread_wake_fd(jr_db *db);
/* Requeues jobs whose lease expired, once, before the thread starts:
 * returns how many, or -1 with err set. */
int    jr_dbthread_rescue(jr_db *db, jr_err *err);

/* Ready jobs of one queue, as a tick's cycle counts them. */
typedef struct jr_queue_count {
    char *queue;                /* owned by the cycle's array */
    long  n;
} jr_queue_count;

/* A schedule's last fire, as a cycle reads them (read_fires). */
typedef struct jr_last_fire {
    char    *schedule;          /* owned by the cycle's array */
    double   at;
    int64_t  id;                /* its job, or 0 */
} jr_last_fire;

/* A schedule's controls, as a cycle reads them (read_ctl). */
typedef struct jr_sched_ctl {
    char    *schedule;          /* owned by the cycle's array */
    int      paused;
    double   fire_at;           /* the last fire asked for by hand, or 0 */
} jr_sched_ctl;

/* One unit of work. The master fills the inputs, must not touch the cycle
 * while it runs, and reads the outputs in its done callback. */
typedef struct jr_cycle {
    /* inputs */
    jr_result          *results;        /* the master's (it frees them);
                                           recorded first */
    int                 nresults;
    int                 want;           /* claim up to this many; 0: none */
    int                 consume_wake;   /* call changed() first */
    int                 claim_always;   /* claim even if changed() says 0 */
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
    int                 count_ready;    /* count ready jobs (up to 1e6),
                                           per queue too */
    const char *const  *qnames;         /* claim at most qmax[i] jobs of */
    const int          *qmax;           /* queue qnames[i]; borrowed */
    int                 nqueues;
    int                 others;         /* at most this many from each
                                           queue not listed (0: none) */
    int                 poll_paused;    /* read the paused queues */
    int                 ahead;          /* jobs are claimed ahead: read
                                           them also when woken by a
                                           change */
    int                 check_cancel;   /* look for cancels of our jobs */
    int                 prune;          /* delete one batch of old jobs */
    double              keep_completed; /* prune: seconds each state stays */
    double              keep_cancelled;
    double              keep_dead;      /* < 0: forever */
    double              keep_queues;    /* prune: seconds an idle queue
                                           not in qnames keeps its row */
    const struct jr_limit *limits;      /* borrowed; see jr_claim_spec */
    int                 nlimits;
    double              limit_next;     /* out: a refused rate's next
                                           token, epoch seconds, or 0 */
    long               *lim_waiting;    /* out (count_ready): per limit,
                                           jobs ready, or NULL; freed by
                                           jr_cycle_free_out */
    long               *lim_running;    /* the same: running, all runners
                                           (same allocation) */
    /* outputs */
    int                 applied;        /* results recorded, or -1 */
    jr_job            **claimed;        /* want slots, filled; caller owns */
    int                 nclaimed;       /* or -1 */
    int                 rescued;        /* or -1 */
    int                 renewed;        /* or -1 */
    long                ready;          /* ready jobs, or -1 */
    int64_t             cancel_ids[JR_CANCEL_MAX]; /* running jobs of ours
                                           whose cancel was requested */
    int                 ncancel;        /* or -1 */
    int                 pruned;         /* jobs pruned, or -1 */
    int                 unchanged;      /* woken, but nothing new yet */
    int                 changed_after;  /* the engine wakes at every commit
                                           (caps.h): after the cycle's own
                                           writes, their wake-ups consumed
                                           and another's commit seen */
    int                 wake_fd;        /* the backend's wake descriptor */
    char              **paused;         /* paused queue names (caller
                                           frees with jr_cycle_free_out) */
    int                 npaused;        /* or -1: not read */
    jr_queue_count     *ready_q;        /* ready jobs per queue (count_ready;
                                           jr_cycle_free_out frees them) */
    int                 nready_q;
    jr_err              err;            /* the first error, if any */
    /* schedules (sched.c): inputs, then outputs */
    jr_fire            *fires;          /* record these fires (each
                                           inserted: 1 yes, 0 another
                                           runner's, -1 refused, -2 the
                                           schedule is paused) */
    int                 nfires;
    int                 fires_keep;     /* fire rows kept per schedule */
    int                 read_fires;     /* read each schedule's last fire */
    jr_last_fire       *last_fires;     /* read_fires: caller frees with
                                           jr_cycle_free_fires */
    int                 nlast_fires;    /* or -1: not read */
    int                 nfires_done;    /* fires[0..this) have their
                                           outcome; the others were not
                                           recorded (trouble): retry */
    int                 reconnected;    /* the connection was opened again
                                           since the last cycle */
    int                 read_ctl;       /* read the schedule controls */
    jr_sched_ctl       *sched_ctl;      /* read_ctl: freed with
                                           jr_cycle_free_fires */
    int                 nsched_ctl;     /* or -1: not read */
} jr_cycle;

/* Frees what a cycle returned in last_fires and sched_ctl. */
void jr_cycle_free_fires(jr_cycle *c);

/* Frees what a cycle returned in paused and ready_q. */
void jr_cycle_free_out(jr_cycle *c);

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
/* Starts c; returns -1 if a cycle is still running. */
int  jr_dbthread_submit(jr_dbthread *t, jr_cycle *c);
int  jr_dbthread_busy(const jr_dbthread *t);
/* Waits for the running cycle, if any, and returns it (its done callback
 * will not run), or NULL when none was running. */
jr_cycle *jr_dbthread_wait(jr_dbthread *t);
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
