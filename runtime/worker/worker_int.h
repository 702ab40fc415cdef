/* worker_int.h - what the worker's files share, private to them: the
 * worker (its fields visible on purpose) and the calls between them.
 *   worker.c  the process: settings, set-up, the frame loop, result
 *             batching and the page shared with the master
 *   run.c     one job in its handler: payload, deadline, cancel and
 *             progress while it runs, the outcome and the retry decision
 *   co.c      jobs that run many at once (inflight > 1), each in a
 *             coroutine on the worker's libevent loop: their resumes
 *   coend.c   a coroutine job's end: its outcome, its result frame, the
 *             ended jobs kept for the next ones
 *   task.c    a job's tasks (its threads) and the waits they yield on
 *   coall.c   jobrunner.sleep and jobrunner.all
 *   coown.c   the handler's own coroutines: their waits pass through
 *   coplain.c the waits of a plain job (inflight 1), on the loop
 *   block.c   the warning of a blocking call between two yields
 *   whttp.c   jobrunner.http: libcurl's multi-socket interface on the loop
 *   whttpreq.c  a request's table checked and set on its easy handle
 *   wexec.c   jobrunner.exec: a child process, its pipes on the loop
 *   wexecarg.c  jobrunner.exec's arguments read and checked
 *   wcrypt.c  encrypted values: a job's opened, its result and steps sealed
 *   wtrace.c  a job's spans: ids, sampling, events, sent before its result
 *   wcapture.c  descriptors 1 and 2 kept with a plain job's attempt
 * Uses frame.h, script.h, jrlib.h, luabridge.h, worker.h, util.h. */
#ifndef JR_WORKER_INT_H
#define JR_WORKER_INT_H

#include <stddef.h>
#include <stdint.h>

#include <lua.h>
#include <signal.h>

#include "worker/frame.h"
#include "lua/jrlib.h"
#include "lua/luabridge.h"
#include "lua/script.h"
#include "base/util.h"
#include "worker/worker.h"

#define FLUSH_DELAY 0.002       /* seconds a result may wait for company */
#define CO_KICK     32          /* coroutine jobs started between two looks
                                 * at the loop, while more wait to start */

typedef struct worker {
    int         fd;
    lua_State  *L;
    jr_settings set;            /* from the master's settings frame */
    jr_scripts  scripts;
    jr_handler *info;           /* the running job's handler */
    int         h;              /* stack index of its handler table */
    jr_jobctx   ctx;
    jr_buf      out;            /* frames to write */
    jr_buf      result;         /* the last job's result as JSON text */
    jr_memlimit mem;            /* the Lua state's allocations */
    int         recycle;        /* exit after this job's result */
    double      unflushed_since;/* mono time of the oldest unsent result */
    jr_buf      in;             /* frames read from the master */
    size_t      used;           /* bytes of in already handled */
    double      progress_sent;  /* mono time of the job's last progress */
    char        cancel_msg[64]; /* what the cancel raises */
    char        err[2048];      /* last failure message */
    char        wait_on[129];   /* the last wait's signal name */
    jr_share   *share;          /* shared with the master, or NULL */
    struct event_base *base;    /* the loop of coroutines and waits */
    struct event *ev_fd;        /* w->fd readable, while coroutines run */
    int         fd_ready;       /* it fired */
    int         co_started;     /* coroutine jobs started since a kick */
    double      sync_deadline;  /* the plain job's deadline (mono), or 0 */
    double      sync_timeout;   /* and its timeout, seconds */
    int         sync_late;      /* a wait of it saw its deadline pass */
    struct jr_co   *co;         /* co.c's */
    struct jr_http *http;       /* whttp.c's */
    int         handback;       /* the master asked jobs back (steps.c) */
    struct jr_keyring *keys;    /* the key file's, NULL: no encryption */
    jr_buf      sealed;         /* the last result sealed (wcrypt.c) */
    jr_buf      sealed_push;    /* the last success's pushes' payloads */
    int         cancel_frames;  /* a CANCEL frame may be among those read
                                 * (run.c: jr_run_cancel_listed) */
    int         stop_asked;     /* a STOP came while lines were held for
                                   the master (wlines.c): exit once none */
} worker;

/* wlines.c: the master's JR_F_LINES frame in r: the lines of each
 * success whose row stayed sent as its result (held 2), the others
 * dropped. 1 when the worker may stop now (stop_asked, none held), 0,
 * or -1 for a malformed frame. */
int jr_wlines_frame(worker *w, jr_reader *r);

/* A Lua thread of a job that waits on the loop: a coroutine job's own
 * thread, a branch of its jobrunner.all, or the plain job (inflight 1),
 * which waits by running the loop until its wait ends. */
typedef struct jr_task jr_task;
typedef struct cojob cojob;
#define JR_TASKS_KEPT 256       /* finished threads and jobs kept for new
                                 * ones, at least (else the largest
                                 * inflight: jr_co_kept) */
typedef void (*jr_task_cancel_fn)(void *op);
/* A branch task's end: its thread returned (rc LUA_OK, nres values on
 * it) or failed (the error on it). */
typedef void (*jr_task_end_fn)(jr_task *t, int rc, int nres);

struct jr_task {                /* visible: task.c, co.c, coall.c, block.c */
    lua_State         *L;       /* the thread */
    int                ref;     /* registry ref of L; LUA_NOREF: plain */
    cojob             *job;     /* NULL: the plain job */
    jr_task_end_fn     on_end;  /* a branch's (jr_task_branch), or NULL */
    void              *end_arg;
    int                slot;
    jr_task_cancel_fn  cancel;  /* the wait in progress, or NULL */
    void              *op;
    int                waiting; /* it yielded in jr_task_wait */
    int                woken;   /* plain: the wait ended */
    int                nres;
    jr_task           *next;    /* the job's tasks */
};

struct cojob {                  /* a job in a coroutine (co.c) */
    worker          *w;
    jr_job          *j;         /* owned */
    jr_handler      *info;
    jr_jobctx        ctx;
    jr_luabridge_limit  lim;       /* owner: this */
    jr_task         *tasks;     /* the job's own thread first */
    struct event    *timer;     /* its timeout */
    double           started;
    double           timeout;
    double           progress_sent;
    int              late;      /* its timeout fired */
    int              over;      /* finished: its result is out */
    int              returned;  /* its return value is on top of w->L */
    char             cancel_msg[64];
    cojob           *next;      /* the running jobs (co->jobs), or the
                                 * dead or kept ones */
    cojob           *prev;      /* the running jobs: unlinked in O(1) */
    int              armed;     /* its timer is set (its first wait) */
};

typedef struct jr_co {           /* co.c's and task.c's state, w->co */
    cojob        *jobs;
    cojob        *dead;         /* ended, freed by reap */
    int           n;
    jr_task       plain;        /* the plain job's waits */
    struct event *wake;         /* the plain wait's deadline */
    int           depth;        /* resumes in progress */
    cojob        *current;      /* the job being resumed, or NULL */
    jr_task      *task;         /* and its task */
    jr_task     **pool;         /* tasks whose thread may run again */
    int           npool;
    int           kept_max;     /* of them and of kept: jr_co_kept; 0:
                                 * not known yet */
    cojob        *kept;         /* ended jobs kept for the next ones */
    int           nkept;
    char          warned[64][64];/* handlers warned of blocking */
    int           nwarned;
    int           any;          /* a handler runs > 1 at once; -1: unknown */
} jr_co;


/* worker.c: writes the frames in w->out; 0, or -1 when the write failed. */
int  jr_worker_flush(worker *w);

/* run.c: runs job j and fills res (strings borrowed from w until the
 * next job). */
void jr_run_job(worker *w, const jr_job *j, jr_result *res);
/* 1 if a CANCEL frame for job id waits among the frames read. */
int  jr_run_cancel_listed(worker *w, int64_t id);
/* Sets the running handler's cancel check and its jobrunner.cancelled()
 * and jobrunner.progress() hooks, before the libraries open. */
void jr_run_hooks(worker *w);
/* For a coroutine job: pushes job j's handle function and job table
 * (with its payload, batch and parents, as a plain job's) on w->L, or fills why and returns -1. The other:
 * queues the result of a job that cannot start (kind, why); takes j. */
int  jr_run_push_call(worker *w, const jr_job *j, const jr_handler *info,
                      char *why, size_t size);
void jr_run_refuse(worker *w, jr_job *j, int kind, const char *why);
/* Reads what the master sent meanwhile into w->in, without blocking. */
void jr_run_read(worker *w);
/* SIGUSR1's handler: a CANCEL frame is on its way or there. */
void jr_run_cancel_signal(int sig);
/* Fills res after a failure whose message is in w->err, for the job of
 * handler w->info whose table is at w->h of w->L (the retry policy). */
void jr_run_failed(worker *w, const jr_job *j, jr_result *res);
/* Turns the error value on top of w->L into w->err, or fills res from a
 * signal. Returns 1 if it was a signal. [-1, +0, -] */
int  jr_run_take_error(worker *w, jr_result *res);
/* Fills res from signal s (a snooze, a discard or a wait); its strings are
 * copied into w, valid until the next result. */
void jr_run_signal_result(worker *w, const jr_signal *s, jr_result *res);
/* Turns the handler's return value on top of w->L (not nil) into
 * res->result (JSON text in w->result, valid until the next call): 0; or
 * 1 when the value has no JSON: a success with no result, res->error
 * saying why; or -1 with w->err saying why the attempt fails (too large,
 * out of memory). [-1, +0, -] */
int  jr_run_take_result(worker *w, const jr_job *j, jr_result *res);

/* worker.c: copies the frames appended to w->out since byte from into the
 * shared page. 0 or -1 (a failed write). */
int  jr_worker_share(worker *w, size_t from);

/* wcrypt.c. The keys of the settings' key file into w->keys (none: 0 and
 * NULL). -1 with err set when the file is refused. */
int     jr_wcrypt_start(worker *w, jr_err *err);
void    jr_wcrypt_close(worker *w);
/* Job j with its encrypted values opened (a new job, j freed; j itself
 * when it has none), or NULL with why set (j kept). w->keys not NULL. */
jr_job *jr_wcrypt_open_job(worker *w, jr_job *j, char *why, size_t size);
/* With no key file (w->keys NULL): 1 with why set when job j's payload
 * is sealed (an object with "$jr_enc" alone, looked at in O(1) unless it
 * starts so) or its steps, signal payloads or parents' results hold a
 * sealed value: it is not run with them as they are. Else 0. */
int     jr_wcrypt_sealed_unkeyed(const jr_job *j, char *why, size_t size);
/* Ends job j (freed) as a failed attempt for why (the retry rule). */
void    jr_wcrypt_refuse(worker *w, jr_job *j, const char *why);
/* Seals res->result in place (into w->sealed): 0, or -1 with w->err. */
int     jr_wcrypt_seal(worker *w, jr_result *res);
/* Seals the payloads of the pushes of ctx in place (into w->sealed_push,
 * valid until the next success): 0, or -1 with w->err. */
int     jr_wcrypt_pushes(worker *w, jr_jobctx *ctx);

/* co.c: jobs that run many at once */
int  jr_co_open(worker *w, jr_err *err);    /* the loop, the functions */
void jr_co_close(worker *w);
/* The number of jobs of j's handler a worker runs at once (1: plain). */
int  jr_co_inflight(const worker *w, const jr_job *j);
void jr_co_start(worker *w, jr_job *j);     /* takes j */
int  jr_co_count(const worker *w);          /* coroutine jobs running */
/* The jobs a worker may run at once, as far as it knows: the largest
 * inflight of its handlers, JR_TASKS_KEPT at least. What it keeps for
 * its next jobs is sized by it: threads, jobs, easy handles, connections
 * (a job that makes more at once with jobrunner.all does not keep them). */
int  jr_co_kept(worker *w);
/* Runs the loop once, w->fd watched; 1 if w->fd became readable. */
int  jr_co_loop(worker *w);
/* Runs what is ready on the loop without waiting: the waits the jobs
 * just started began (their requests go out, their connections open)
 * while more of the jobs read wait to start. */
void jr_co_kick(worker *w);
void jr_co_cancel(worker *w, int64_t id);   /* a coroutine job's cancel */
/* The count hook's check for a coroutine job (owner). */
const char *jr_co_check(worker *w, void *owner, lua_State *L);

/* coend.c: a coroutine job's end. jr_co_finish ends cj (rc LUA_OK, or an
 * error whose value is on top of w->L, or -1: its timeout or a cancel):
 * its waits cancelled, its result frame; it joins co->dead, freed by
 * jr_co_reap between resumes. jr_co_job_alloc is a zeroed cojob (a kept
 * one's timer and push arrays), NULL when out of memory; jr_co_job_free
 * frees what cj holds and keeps cj or frees it. */
void   jr_co_finish(cojob *cj, int rc);
void   jr_co_reap(jr_co *co);
cojob *jr_co_job_alloc(worker *w);
void   jr_co_job_free(cojob *cj);
/* Queues cj's latest progress as a JR_PROGRESS result. */
void   jr_co_put_progress(cojob *cj);

/* task.c: a job's tasks. jr_task_open keeps w and makes the registry's
 * table of threads; jr_task_new makes a task of cj (NULL when out of
 * memory), jr_task_free ends its wait and keeps or frees its thread;
 * jr_task_lookup is the task whose thread L is, or NULL. */
void     jr_task_open(worker *w);
jr_task *jr_task_new(cojob *cj);
void     jr_task_free(lua_State *L, jr_task *t);
jr_task *jr_task_lookup(lua_State *L);
/* The task L runs in (for a coroutine the handler made, the task being
 * resumed, which resumed it), or raises "jobrunner.<fn>: ..." when L is
 * no job's. [-0, +0, v] */
jr_task *jr_task_of(lua_State *L, const char *fn);
struct event_base *jr_task_base(const jr_task *t);
/* Waits: returns what the C function on L returns (it yields, or for the
 * plain job runs the loop until jr_task_wake). cancel(op) frees the wait
 * if the task ends first (timeout, cancel); NULL: nothing to free (the
 * job ended: the task yields for good). [-0, +n, v] */
int  jr_task_wait(lua_State *L, jr_task *t, jr_task_cancel_fn cancel,
                  void *op);
/* The wait ended: its nres results are pushed on jr_task_thread(t). */
void jr_task_wake(jr_task *t, int nres);        /* co.c */
lua_State *jr_task_thread(const jr_task *t);
/* A new task of t's job on a new thread (nothing on it), whose end calls
 * on_end instead of ending the job; arg and slot for it (jr_task_arg).
 * NULL when out of memory. */
jr_task *jr_task_branch(jr_task *t, jr_task_end_fn on_end, void *arg,
                        int slot);
void  jr_task_run(jr_task *t, int nargs);   /* co.c: resumes it, nargs */
void  jr_task_end_job(jr_task *t);          /* co.c: ends its job now */

/* block.c: a blocking call between two yields of a coroutine job, named
 * once per handler (file:line). */
#define JR_BLOCK_WARN 0.2       /* seconds between yields that warn */
/* Starts (on) or stops the timer that looks at resumes: on when a
 * coroutine job starts, off before the worker blocks idle or runs a plain
 * job (whose C calls it must not interrupt). A no-op when already so. */
void jr_block_arm(int on);
/* Notes the start of the resume of cj about to run (on), or its end. */
void jr_block_watch(const cojob *cj, int on);
/* Sets the thread being resumed (NULL: none); returns the one before. */
lua_State *jr_block_resumed(lua_State *L);
/* The count hook's part: logs where cj's thread L is if the watch fired. */
void jr_block_check(cojob *cj, lua_State *L);

/* coall.c: jobrunner.sleep and jobrunner.all into the module on top. */
void jr_coall_open(lua_State *L);

/* coplain.c: the plain job's wait of task t (jr_task_wait's part): runs
 * the loop until jr_task_wake, the job's deadline (w->sync_late set) or
 * its cancel; what the C function on L returns. [-0, +n, v] */
int  jr_wait_plain(worker *w, lua_State *L, jr_task *t, const char *fn);

/* coown.c: coroutine.resume and coroutine.wrap that pass a wait's mark
 * on (0, or -1 with err set); the mark, which a wait in a coroutine the
 * handler made yields, and which resumes it when a thread on the way
 * cannot yield (the wait then raises). */
int  jr_coown_open(lua_State *L, jr_err *err);
#define JR_JOB_THREADS_KEY "jobrunner.jobthreads" /* registry: weak set */
void jr_coown_push_mark(lua_State *L);
int  jr_coown_is_mark(lua_State *L, int idx);

/* steps.c: a job's steps. jr_wsteps_hooks sets ctx's (cj: the coroutine
 * job's, NULL: the plain job's); jr_wsteps_end sends the job's last list
 * before its result; jr_wsteps_frame takes a JR_F_STEPOK or
 * JR_F_HANDBACK frame from the frame loop (0, or -1: malformed). */
void jr_wsteps_hooks(worker *w, jr_jobctx *ctx, cojob *cj);
void jr_wsteps_end(worker *w, jr_jobctx *ctx);
int  jr_wsteps_frame(worker *w, int type, jr_reader *r);

/* whttp.c, wexec.c: their functions into the module table on top. */
int  jr_whttp_open(worker *w, lua_State *L, jr_err *err);
void jr_whttp_close(worker *w);
void jr_wexec_open(lua_State *L, jr_share *share);
void jr_wexec_killall(void);    /* async-signal-safe: kills the children */

/* wexecarg.c: jobrunner.exec's arguments, read from its argv table at 1
 * and options table at 2; each raises on a bad one. [-0, +1, v] for argv,
 * [-0, +(0|1), v] for env (NULL without one), [-0, +0, v] for the
 * timeout (0 without one). */
char   **jr_wexec_read_argv(lua_State *L);
char   **jr_wexec_read_env(lua_State *L);
double   jr_wexec_opt_timeout(lua_State *L);

/* wtrace.c: a job's spans (docs/tracing.md). begin before the handler
 * runs, end before its result is put in w->out (the spans go first);
 * progress and steps add events. Each returns at once when tracing is
 * off. */
void jr_wtrace_begin(worker *w, jr_jobctx *ctx, const jr_job *j);
void jr_wtrace_progress(jr_jobctx *ctx);
void jr_wtrace_steps(jr_jobctx *ctx, double records);
void jr_wtrace_end(worker *w, jr_jobctx *ctx, const jr_job *j,
                   const jr_result *res);

/* Handler output = "keep" (w->info->keep_output; a plain job's): makes
 * descriptors 1 and 2 files of the worker's until jr_capture_end, which
 * keeps what they got in w->ctx's run (before its entry is made) and
 * puts 1 and 2 back (wcapture.c). */
void jr_capture_begin(worker *w);
void jr_capture_end(worker *w);

#endif
