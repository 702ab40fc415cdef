/* master_int.h - what the master's files share, private to them: the
 * master, its workers, generations and pending results (the
 * structs are visible on purpose: each file works on the fields of its
 * concern), and the functions one file calls in another. The files, by
 * concern:
 *   master.c   the loop, signals and timers; start, finish, cleanup; the
 *              list of services
 *   claimq.c   the local queue of claimed jobs, dispatch to workers, how
 *              many jobs to claim; claimres.c the result buffers;
 *              claimcyc.c the database cycle that records and claims
 *   pool.c     the worker processes: spawn, frames, results;
 *              output.c reads their output (handler_output)
 *   poolsize.c how many workers: counts, the target fitted, scaling
 *   death.c    worker deaths (what becomes of their jobs) and the kills
 *              at a deadline
 *   gen.c      generations of handler code: hello, probe, reload
 *   service.c  the core's calls into the services (service.h)
 *   svc.c      what the services may do to the master (svc.h)
 *   otlp.c     the export of the workers' spans: a bounded queue and a
 *              thread posting OTLP/HTTP JSON
 * A feature beside the claim is a service in services/ (service.h): it
 * keeps its state in its own struct, held for it at its place in the
 * list (jr_service_state); the core calls it through the list and never
 * by name, and it sees none of this file, only svc.h. Uses config.h,
 * dbthread.h (the database, which only it sees), frame.h, hooks.h,
 * reload.h, script.h, service.h, svc.h, util.h. */
#ifndef JR_MASTER_INT_H
#define JR_MASTER_INT_H

#include <stdint.h>
#include <sys/types.h>

#include <event2/event.h>

#include "config/config.h"
#include "db/dbthread.h"
#include "worker/frame.h"
#include "lua/hooks.h"
#include "master/reload.h"
#include "master/service.h"
#include "master/svc.h"
#include "base/retry.h"
#include "lua/script.h"
#include "base/util.h"

#define SLOTS_MAX     32        /* jobs outstanding per worker at most */
#define CLAIM_MAX     512       /* jobs per claim statement */
#define CLAIM_CO_MAX  4096      /* the same, for coroutine workers' slots
                                 * and the jobs claimed ahead for them */
#define OUT_LINE      1024      /* bytes of one line of handler output logged */
/* SIGTERM SIGINT SIGCHLD SIGHUP SIGTTIN SIGTTOU: master.c's signals[] */
#define NSIGNALS      6

enum { OUT_LOG, OUT_INHERIT, OUT_FILE };       /* handler_output */

typedef struct gen {            /* one generation of handler code */
    int          id;            /* 1, 2, ... */
    char         hash[17];      /* content hash of the scripts */
    jr_handler  *h;
    int          n;
    const char **names;         /* h[i].name, for claims */
    int          refs;          /* the master, workers, a running cycle */
    int          co_any;        /* a handler sets inflight > 1; -1: not
                                   looked yet */
    const char **co_names;      /* the names of handlers that run jobs at
                                   once (inflight > 1), in names' block */
    int          nco;
} gen;

typedef struct wk {             /* one worker process */
    master             *m;
    pid_t               pid;
    int                 id;             /* 1, 2, ... for log lines */
    struct bufferevent *bev;            /* NULL once the socket closed */
    int                 ready;          /* its hello arrived */
    gen                *gen;            /* code it loaded, once ready */
    int                 probe;          /* started to try a reload */
    int                 retiring;       /* exits after its current job */
    int                 stopping;       /* told to exit */
    double              idle_since;     /* mono time it last went idle */
    long                jobs_run;       /* results received */
    jr_job            **jobs;           /* outstanding, oldest first */
    double             *since;          /* when each started (co), or 0 */
    int                 njobs, capjobs;
    int                 co;             /* its jobs run at once, each in a
                                           coroutine (a handler's inflight
                                           > 1): every one has started */
    int                 inflight;       /* the defaults.inflight it got */
    double              started;        /* mono time jobs[0] started */
    double              avg;            /* moving average job seconds */
    int                 alone;          /* runs a suspect job (death.c):
                                           takes no other until it ends */
    int                 nostart;        /* it could not start (logged as
                                           the runner's nostart) */
    int                 held_back;      /* stopped after its hello (other
                                           code): replaced with backoff */
    char                kill_reason[64];/* why we killed it, or "" */
    int64_t             kill_job;       /* the job killed for, or 0 */
    double              spawned;        /* mono time of spawn */
    struct jr_share    *share;          /* the page it shares, or NULL */
    int                 out_fd;         /* its stdout+stderr pipe, or -1 */
    struct event       *ev_out;         /* readable out_fd */
    char                oline[OUT_LINE];/* the output line being read */
    size_t              olen;
    int                 ocut;           /* that line is longer: cut */
    int64_t             ojob;           /* job the output counts for */
    size_t              obytes;         /* bytes logged for that job */
    int                 olines;         /* lines logged for that job */
    struct wk          *next;
} wk;

typedef struct pending {        /* a result waiting for the next flush */
    jr_result  r;
    void      *mem;             /* what r's strings live in */
    int        flow;            /* the job had children or a batch */
    jr_job    *job;             /* a success with statements: its job,
                                   owned, whose end is counted and told
                                   (jr_pool_outcome) once it is recorded;
                                   else NULL */
    double     secs;            /* that job's seconds in its handler */
} pending;

typedef struct snoozed {        /* a job that snoozed under this runner */
    int64_t     id;
    int         n;              /* snoozes in a row */
} snoozed;

struct master {
    jr_config          *cfg;
    const char         *self;
    jr_db              *db;             /* dbthread.c's; opaque here */
    struct event_base  *base;
    char                token[96];
    char                url[512];       /* masked, for messages */
    wk                 *workers;
    int                 nworkers;
    int                 next_id;
    gen                *gen;            /* current code; NULL before hello */
    gen                *cycle_gen;      /* whose names a cycle borrows */
    int                 ngens;
    wk                 *probe;          /* loading a new generation */
    int                 reload_again;   /* a reload asked for meanwhile */
    char                failed_hash[17];/* the scripts whose reload failed
                                           to load ("": none), until a
                                           reload works: a worker that
                                           loads them and fails is not
                                           asked to reload again */
    int                 target;         /* workers wanted, min..max */
    jr_hooks           *hooks;
    jr_watch           *watch;
    char                pidfile[4096];
    int                 out_mode;       /* OUT_LOG, OUT_INHERIT, OUT_FILE */
    int                 out_file;       /* handler_output file, or -1 */
    jr_job            **queue;          /* claimed, not yet handed out */
    size_t              qhead, qlen, qcap;
    pending            *res;            /* waiting for the next cycle */
    int                 nres, capres;
    pending            *inflight;       /* being recorded by the cycle */
    int                 ninflight, capinflight;
    jr_dbthread        *dbt;
    jr_cycle            cycle;
    int                 cycle_want;     /* the claim of the cycle out */
    int                 claim_co;       /* capacity found only coroutine
                                           workers' slots: the claim takes
                                           their handlers' names alone */
    struct jr_lane     *lane;           /* a second round (lane.c) */
    int                 lane_want;      /* the claim of the lane's round */
    jr_job             *claimed[CLAIM_CO_MAX];
    int                 wake_fd;
    int                 renew_due, rescue_due, wake_due;
    jr_buf              out;
    struct event       *ev_work, *ev_tick;
    struct event       *ev_wake, *ev_spawn;
    struct event       *ev_sig[NSIGNALS];
    jr_flag_timer       poll;           /* sets want_claim */
    jr_flag_timer       renew;          /* sets renew_due */
    jr_flag_timer       rescue;         /* sets rescue_due */
    int                 want_claim;     /* jobs may be waiting */
    int                 flow_ended;     /* a job with children or a batch
                                           ended: look for jobs it readied */
    int                 flow_want;      /* recorded: a job with children or
                                           a batch ended (jobs it readied
                                           may wait: claim again) */
    int                 full_batch;     /* the last claim got all it asked */
    int                 stopping;       /* 1 graceful, 2 at once */
    double              stop_deadline;
    double              db_retry_at;    /* mono; 0 when the database is fine */
    double              db_backoff;
    int                 solo;           /* start-up: one worker until its
                                           first claim is in, SOLO_SECS at
                                           most (master.c): it loads and
                                           claims at full speed */
    double              spawn_delay;    /* grows while workers die at once */
    int                 spawn_fails;    /* spawns failed in a row */
    double              spawn_backoff;  /* seconds to the next try */
    char                spawn_cause[512];/* the failure last logged */
    char                nostart[1024];  /* why workers cannot start (set
                                           up, load), or "" while they do */
    double              starved_since;  /* mono time no worker was alive
                                           while spawns failed, or 0 */
    long                done, failed, dead;
    double              avg;            /* moving average job seconds */
    int                 rechecks;       /* wake-ups that saw nothing yet */
    struct event       *ev_recheck;
    int64_t            *suspects;       /* jobs in flight in a coroutine
                                           worker that died between
                                           resumes: each runs alone
                                           (death.c), oldest first */
    int                 nsuspects, capsuspects;
    snoozed            *snoozes;        /* jobs snoozed here, unordered */
    size_t              nsnoozes, capsnoozes;
    long                cancelled;      /* jobs recorded cancelled */
    struct jr_notify   *notify;         /* systemd's socket, or NULL */
    int                 held_max;       /* results held unrecorded at most
                                           (claimq.c); 0 until known */
    struct jr_http     *http;           /* the HTTP server (http.c), or
                                           NULL when off */
    double              cycle_at;       /* when the last cycle went */
    long                passes;         /* jr_claimq_work's, for /metrics */
    double              res_hold_until; /* mono: the pending results (a
                                           long job's success each) may
                                           wait for company until then;
                                           0: they go at the next pass */
    long                sql_failed;     /* successes whose statement failed
                                           when recorded, for /metrics */
    const jr_service *const *services;  /* the services, in the order the
                                           core calls them; NULL-ended */
    void              **svc;            /* each one's state, by its place
                                           in services (service.c) */
    struct jr_otlp     *otlp;           /* the span export (otlp.c), or
                                           NULL: tracing off */
    int                 fair_peek;      /* capacity() asked a fair queue's
                                           small claim (fairq.c) */
    int                 cycle_peek;     /* the cycle out asks one: its full
                                           batch asks no claim after it */
    int                 tick_slow;      /* on_tick at its idle pace */
    double              timer_epoch;    /* jr_mono() the periodic timers
                                           count their periods from
                                           (master.c), 0 before the first */
    int                 fair_changed;   /* a cycle saw another's commit
                                           after it (changed_after): a
                                           small claim is due */
    int                 fair_deep;      /* the last deal left a fair
                                           queue's job behind another of
                                           its key here (fairq.c) */
    struct jr_heldq    *held;           /* successes whose lines their
                                           worker holds (heldlines.c), or
                                           NULL: none yet */
};

/* heldlines.c: a success whose lines its worker holds (jr_result.held
 * 1) is recorded as the success statements' are, told once recorded;
 * jr_held_recorded stands for jr_pending_recorded then: the row deleted,
 * its end told and the worker told to drop them; the row left for its
 * lines (a wait's mark, jr_result.lines_wanted), the job kept and the
 * worker asked for them. jr_held_send sends the words queued, a frame a
 * worker (one gone: the success recorded without its lines).
 * jr_held_reply takes the lines a worker sent (held 2; takes mem): the
 * success recorded with them. jr_held_asked: how many successes whose
 * lines are held are not recorded yet or wait for their lines (a stop
 * waits for them as for a running job).
 * jr_held_abandon, at the end of a stop: those left are recorded without
 * their lines. jr_held_free at the master's end. */
int jr_held_asked(const master *m);
void jr_held_abandon(master *m);
void jr_held_recorded(master *m, pending *p);
void jr_held_send(master *m);
void jr_held_reply(master *m, wk *w, jr_result *res, void *mem);
void jr_held_free(master *m);

/* otlp.c: the span export. jr_otlp_new returns NULL when c sets no
 * tracing.endpoint (err untouched) or, err set, when it cannot start.
 * jr_otlp_add queues n spans (recs: a worker's records, spanrec.h, as
 * they came: encoded on the export thread) or counts them dropped; it
 * never waits on the collector. jr_otlp_metrics
 * appends the counters' Prometheus text (x may be NULL: zeros).
 * jr_otlp_free sends what is queued (one last try) and stops. */
typedef struct jr_otlp jr_otlp;
jr_otlp *jr_otlp_new(const jr_config *c, jr_err *err);
void     jr_otlp_add(jr_otlp *x, const char *recs, size_t len, int n);
void     jr_otlp_metrics(const jr_otlp *x, jr_buf *b);
void     jr_otlp_free(jr_otlp *x);

/* master.c: the loop */

/* Asks the loop for one pass of work (jr_claimq_work) soon. */
static inline void
jr_master_kick(master *m)
{
    event_active(m->ev_work, EV_WRITE, 0);
}
/* A job goes to a worker: on_tick back to its busy pace (deadlines) if
 * it was at its idle one. */
void jr_master_tick_busy(master *m);

/* Arms t to set *flag and kick every secs seconds (t->ev NULL when out of
 * memory; event_free it). */
void jr_master_flag(master *m, jr_flag_timer *t, double secs, int *flag);

/* claimq.c: the local queue (claimres.c: the results) */

/* Queues a claimed job, at the front or the back; takes j. -1 when out of
 * memory (j is still the caller's). */
int     jr_claimq_push(master *m, jr_job *j, int front);
jr_job *jr_claimq_pop(master *m);       /* NULL when empty; caller owns */
/* Queues a result for the next flush; takes mem. */
void    jr_claimq_result(master *m, const jr_result *r, void *mem);
/* pending.c: queues a success with statements as jr_claimq_result does,
 * with its job j and secs, whose end is counted and told
 * (jr_pool_outcome) by jr_pending_recorded once it is recorded, as the
 * success or the failure it became. Takes mem; returns 1 when it took j
 * too, 0 when out of memory (j still the caller's). */
int     jr_pending_job(master *m, const jr_result *r, void *mem, jr_job *j,
                       double secs);
void    jr_pending_recorded(master *m, pending *p);
/* Frees what a pending result owns (its strings, its job). */
void    jr_pending_free(pending *p);
/* Gives job j back to the queue in the database; takes j. */
void    jr_claimq_release(master *m, jr_job *j);
/* claimres.c: 1 while the pending results wait for company (a long job's
 * success): the pass runs no cycle for them; its timer is set. */
int     jr_claimq_results_wait(master *m);
/* The results p[0..n) were recorded (applied of them): frees them. */
void    jr_claimq_recorded(master *m, pending *p, int n, int applied);
/* Puts the in-flight results back in front of the pending ones. */
void    jr_claimq_back(master *m);
/* The same for results p[0..n) sent elsewhere (the lane); -1 when out of
 * memory, p untouched; jr_claimq_lost then frees them (leases requeue). */
int     jr_claimq_unsend(master *m, const pending *p, int n);
void    jr_claimq_lost(pending *p, int n);
/* Moves the pending results to *p (capacity *cap), p's old array empty
 * in their place. */
void    jr_claimq_swap(pending **p, int *cap, master *m);
/* Queues jobs[0..n) of a claim of want (or releases them when stopping). */
void    jr_claimq_take(master *m, jr_job **jobs, int n, int want);
/* fairq.c: deals the places of each fair queue's jobs in the local queue
 * out again round robin between their keys (after a claim). */
void    jr_fairq_deal(master *m);
/* How many jobs to claim when the local queue is full, for a key's job
 * pushed meanwhile (0: none, no fair queue). */
int     jr_fairq_peek(const master *m);
/* After a claim of want (jobs[0..n), before they are queued):
 * 1 when it came back full and may have left new keys' jobs behind (its
 * last job is of a key with none in the local queue): another is to
 * follow at once (jr_claimq_take_more). */
int     jr_fairq_more(master *m, jr_job *const *jobs, int n, int want);
/* jr_claimq_take, and a full claim that may have left new keys of a fair
 * queue behind asks for another at once, a small one when the local
 * queue is full. */
void    jr_claimq_take_more(master *m, jr_job **jobs, int n, int want);
/* Hands queued jobs to free worker slots. */
void    jr_claimq_dispatch(master *m);
/* How many jobs to claim: what the workers can start now, and a local
 * queue of them while jobs are short, less what claims on their way will
 * bring; sets m->claim_co and m->fair_peek. */
int     jr_claimq_capacity(master *m);

/* Records pending results synchronously (shutdown, with the thread gone). */
int     jr_claimq_flush(master *m);

/* claimcyc.c: the database cycle */
/* Watches the backend's wake descriptor fd (-1: none). */
void    jr_claimq_watch_wake(master *m, int fd);
/* Callbacks: ev_work's pass of work, the database thread's cycle done, the
 * wake descriptor (and its re-check timer). arg is the master. */
void    jr_claimq_work(evutil_socket_t fd, short what, void *arg);
void    jr_claimq_cycle_done(jr_cycle *c, void *arg);
void    jr_claimq_wake(evutil_socket_t fd, short what, void *arg);

/* pool.c: the workers (poolsize.c: how many) */

/* Starts a worker; NULL when it cannot (logged once per cause while it
 * fails, and jr_pool_fit retried with backoff). */
wk  *jr_pool_spawn(master *m);
/* Worker processes but the probe, leaving ones too (not yet reaped). */
int  jr_pool_procs(master *m);
/* Workers that may take jobs: not leaving, not killed, not a probe. */
int  jr_pool_alive(master *m);
/* 1 if w counts for jr_pool_alive: not stopping, retiring, a probe or
 * being killed */
static inline int
jr_pool_is_alive(const wk *w)
{
    return !w->stopping && !w->retiring && !w->probe && !w->kill_reason[0];
}
/* While no worker can be started: after a lease without one, gives the
 * local queue back to the database. */
void jr_pool_starved(master *m, double now);

/* The jobs of j's handler w runs at once (1: one after another). */
int  jr_pool_inflight(const wk *w, const jr_job *j);
/* Frees w's record (the process is gone) and what it holds of its own. */
void jr_pool_free(wk *w);
/* The index of job id among w's jobs, or -1. */
int  jr_pool_index(const wk *w, int64_t id);

/* A worker process just started (spawn.c): the master's end of its socket,
 * the read end of its output pipe (or -1), its pid. */
typedef struct jr_spawned {
    int   mine;
    int   rd;
    pid_t pid;
    struct jr_share *share;     /* mapped here, or NULL (worker.h) */
} jr_spawned;
/* Starts `jobrunner __worker` with its socket and output. Returns 0, or -1
 * (err set, nothing left open). */
int  jr_spawn_worker(master *m, jr_spawned *out, jr_err *err);
void jr_spawn_unshare(wk *w);           /* unmaps w's shared page */
/* Worker w could not start, for why (borrowed): its set-up failed, or it
 * went before its hello. Logged once per reason, not at each respawn;
 * the reason is what /api/runner and `jobrunner stats` show (the state
 * file beside the pid file) until a worker starts (jr_spawn_started). */
void jr_spawn_cannot(master *m, wk *w, const char *why);
void jr_spawn_started(master *m);       /* a worker said a good hello */
void jr_pool_stop(master *m, wk *w);    /* asks w to exit */
/* Asks busy w to hand its jobs back at their next checkpoint (a stop, a
 * reload, fewer workers: JR_F_HANDBACK). */
void jr_pool_handback(master *m, wk *w);
void jr_pool_kill(wk *w, int sig);      /* w and its process group */
/* A failure the master decides for job j (borrowed) that worker w ran
 * (since w->started): a retry or dead by the retry policy, its result
 * queued with w's generation, id and the attempt's duration. */
void jr_pool_fail(master *m, const wk *w, const jr_job *j,
                  const char *reason);
/* w's socket is readable: reads its frames (hello, results). */
void jr_pool_read(struct bufferevent *bev, void *arg);
/* Sends len bytes to worker w: written now when now is set and nothing
 * waits before them (a job to an idle worker: the loop's pass to write
 * it and the two epoll changes around it saved), the rest by its
 * bufferevent, which gathers a burst's frames into a few writes. -1 when
 * they cannot be queued. */
int  jr_pool_send(wk *w, const char *p, size_t len, int now);
/* A result frame r from w. */
void jr_pool_result(master *m, wk *w, jr_reader *r);
/* Job j ended with r after secs in its handler: logs it, counts it
 * (done, failed, dead) and tells the services (jr_service_job_end). */
void jr_pool_outcome(master *m, const jr_job *j, const jr_result *r,
                     double secs);
int  jr_pool_active(master *m);         /* workers counting to the target */
int  jr_pool_busy(master *m);           /* workers running a job */
/* Starts or stops workers until the active ones match the target. */
void jr_pool_fit(master *m);
/* Sets the target, clamped to min..max, and acts on it. */
void jr_pool_set_target(master *m, int target, const char *reason);
/* Adds a worker when every worker is busy and jobs are waiting. */
void jr_pool_scale_up(master *m);
/* death.c: worker deaths and the kills that cause them */

/* Reaps exited workers (SIGCHLD): fails or requeues what they held. */
void jr_death_reap(master *m);
/* Kills workers past a deadline: hello (load_timeout), job timeout. */
void jr_death_deadlines(master *m, double now);
/* Kills w (SIGKILL) for job j, in its handler: its death is j's alone,
 * with why as the reason; what else it held goes back unblamed. */
void jr_death_kill_for(wk *w, const jr_job *j, const char *why);
/* The job in w's handler, or NULL between jobs; *since is when it
 * started (mono time). Borrowed: valid while w holds it. */
const jr_job *jr_death_running(const wk *w, double *since);
/* 1 if job id was in flight in a coroutine worker that died between
 * resumes, blaming none: it runs alone in a worker (claimq.c), so that a
 * death then is its own. jr_death_cleared forgets it once it ended. */
int   jr_death_suspect(const master *m, int64_t id);
void  jr_death_cleared(master *m, int64_t id);

/* pool.c: the workers (continued; poolsize.c: how many) */

/* Retires a worker idle past idle_timeout while above the minimum. */
void jr_pool_idle(master *m, double now);
/* Fills in the retry inputs (retry.h) the master knows for job j after
 * error: g's handler options and the config's backoff. Borrows all. */
void jr_pool_retry_in(master *m, const gen *g, const jr_job *j,
                      const char *error, jr_retry_in *in);

/* output.c: handler output */

int  jr_output_open(master *m, jr_err *err);    /* -1 with err set */
/* The worker's output descriptor (read end in *rd, or -1), -1 to inherit
 * the runner's, -2 on failure (err set). */
int  jr_output_fd(master *m, int *rd, jr_err *err);
void jr_output_readable(evutil_socket_t fd, short what, void *arg);
void jr_output_done(wk *w);             /* logs what is left of a job's */
void jr_output_close(wk *w);

/* gen.c: generations */

gen  *jr_gen_ref(gen *g);               /* NULL is a no-op; returns g */
void  jr_gen_unref(gen *g);             /* frees g with its last ref */
/* The handler called name in g, or NULL. */
const jr_handler *jr_gen_handler(const gen *g, const char *name);
/* Starts a probe worker loading the scripts again (SIGHUP, the watcher). */
void  jr_gen_reload(master *m);
/* A worker's hello frame in r. */
void  jr_gen_hello(master *m, wk *w, jr_reader *r);

#endif
