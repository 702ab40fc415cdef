/* co.c - jobs that run many at once in one worker (a handler's inflight
 * > 1): each job runs in a Lua coroutine of the worker's state, with its
 * own job context (push, progress, snooze, discard, cancelled), its own
 * deadline (its limit bound to the coroutine, which luabridge's timer
 * signal interrupts while it runs; a timer of the worker's libevent loop
 * while it waits), and ends with one result
 * frame, batched like the plain path's. The C functions that wait
 * (jobrunner.sleep, jobrunner.all here; jobrunner.http in whttp.c,
 * jobrunner.exec in wexec.c) yield the coroutine with lua_yieldk and are
 * resumed from the loop; in a plain job (inflight 1) they run the loop
 * until their wait ends instead (coplain.c). Owns the coroutine jobs,
 * their resumes and the loop; their tasks' threads are task.c's, their
 * end (outcome, result frame, the ended ones kept) coend.c's. Uses
 * worker_int.h, jrlib.h, luabridge.h, json.h, retry.h. */
#define _GNU_SOURCE
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <event2/event.h>
#include <lauxlib.h>
#include <lua.h>

#include "base/log.h"
#include "base/retry.h"
#include "lua/json.h"
#include "worker/worker_int.h"

/* --- tasks: their resume ----------------------------------------------- */

static void resume(jr_task *t, int nargs);
static void resumed(jr_task *t, int rc, int nres);

void
jr_task_run(jr_task *t, int nargs)
{
    resume(t, nargs);
}

void
jr_task_end_job(jr_task *t)
{
    jr_co_finish(t->job, -1);
}

void
jr_task_wake(jr_task *t, int nres)
{
    t->cancel = NULL;
    t->op = NULL;
    t->woken = 1;
    t->nres = nres;
    if (t->job != NULL)
        resume(t, nres);
}

/* The job waits (a yield in jr_task_wait): its deadline, a timer of the
 * loop, from now on. A job that ends before its first wait never sets
 * it: while it runs, the count hook holds its deadline (cj->lim), and a
 * timer added and deleted for every such job was a third of what the
 * coroutine path cost a no-op job over the plain one. */
static void
arm(cojob *cj)
{
    double left = cj->lim.deadline - jr_mono();
    struct timeval tv;

    if (cj->armed)
        return;
    if (left < 0)
        left = 0;
    tv.tv_sec = (long)left;
    tv.tv_usec = (long)((left - (double)tv.tv_sec) * 1e6);
    evtimer_add(cj->timer, &tv);
    cj->armed = 1;
}

/* Links cj first among the running jobs. */
static void
link_job(jr_co *co, cojob *cj)
{
    cj->prev = NULL;
    cj->next = co->jobs;
    if (co->jobs != NULL)
        co->jobs->prev = cj;
    co->jobs = cj;
    co->n++;
}

/* --- resuming ----------------------------------------------------------- */

const char *
jr_co_check(worker *w, void *owner, lua_State *L)
{
    cojob *cj = owner;

    jr_block_check(cj, L);
    if (!cj->ctx.cancelled && jr_run_cancel_listed(w, cj->j->id))
        cj->ctx.cancelled = 1;
    if (!cj->ctx.cancelled)
        return NULL;
    snprintf(cj->cancel_msg, sizeof cj->cancel_msg, "job %lld cancelled",
             (long long)cj->j->id);
    return cj->cancel_msg;
}

/* Names the job in the handler in the shared page (the master's kill for
 * a job stuck in C blames it), around one resume. */
static void
share_running(worker *w, int64_t id, double started)
{
    if (w->share == NULL)
        return;
    if (id != 0)
        w->share->started = started;
    __atomic_store_n(&w->share->running, id, __ATOMIC_RELEASE);
}

static void
resume(jr_task *t, int nargs)
{
    cojob *cj = t->job;
    worker *w = cj->w;
    jr_co *co = w->co;
    int64_t outer = w->share ? w->share->running : 0;
    double outer_start = w->share ? w->share->started : 0;
    lua_State *outer_L = jr_block_resumed(t->L);
    cojob *outer_job = co->current;
    jr_task *outer_task = co->task;
    int rc, nres = 0, enforce = w->mem.enforce;

    /* a worker to be replaced (a job passed memory_limit) resumes no
     * other job: its state may still be at the limit, and the jobs it
     * holds go back unblamed when it exits */
    if (cj->over || w->recycle) {
        lua_pop(t->L, nargs);
        return;
    }
    t->waiting = 0;
    /* the loop's clock, which timers start from: a long run made it late */
    event_base_update_cache_time(w->base);
    share_running(w, cj->j->id, cj->started);
    if (co->depth++ == 0) {
        jr_block_arm(1);        /* a no-op while armed */
        jr_block_watch(cj, 1);
    }
    w->mem.enforce = 1;
    co->current = cj;
    co->task = t;
    rc = jr_luabridge_resume(t->L, w->L, nargs, &nres);
    co->current = outer_job;
    co->task = outer_task;
    /* what follows is the runtime's: unprotected, it must not meet the
     * limit (a refusal would abort the worker); a resume nested in a
     * handler's call gives the limit back when it returns */
    w->mem.enforce = 0;
    jr_block_resumed(outer_L);
    if (--co->depth == 0)
        jr_block_watch(cj, 0);
    share_running(w, outer, outer_start);
    resumed(t, rc, nres);
    w->mem.enforce = enforce;
}

/* After a resume of t that returned rc with nres values: waits, ends a
 * branch (its on_end), or ends the job. */
static void
resumed(jr_task *t, int rc, int nres)
{
    cojob *cj = t->job;
    worker *w = cj->w;
    int failed = jr_memlimit_failed(&w->mem);

    if (rc == LUA_YIELD) {
        lua_pop(t->L, nres);
        if (!cj->over && t->waiting && !failed)
            arm(cj);
        if (cj->over || (t->waiting && !failed))
            return;
        rc = failed ? LUA_ERRMEM : LUA_ERRRUN;
        lua_pushstring(t->L, failed ? "not enough memory" :
                       "coroutine.yield called outside a coroutine the "
                       "handler created");
        nres = 0;
    }
    if (t->on_end != NULL && !failed) {
        t->on_end(t, rc, nres);
        return;
    }
    if (rc == LUA_OK && nres > 0 && !lua_isnil(t->L, -nres)) {
        lua_pop(t->L, nres - 1);        /* the first is the job's result */
        lua_xmove(t->L, w->L, 1);
        cj->returned = 1;
    } else if (rc == LUA_OK) {
        lua_pop(t->L, nres);
    } else {
        lua_xmove(t->L, w->L, 1);
    }
    jr_co_finish(cj, rc);
    jr_memlimit_clear(&w->mem);
}

/* --- jobs ----------------------------------------------------------------- */

static jr_handler *
handler_of(const worker *w, const char *name)
{
    int i;

    for (i = 0; i < w->scripts.n; i++)
        if (strcmp(w->scripts.h[i].name, name) == 0)
            return &w->scripts.h[i];
    return NULL;
}

int
jr_co_inflight(const worker *w, const jr_job *j)
{
    const jr_handler *h;

    if (w->co == NULL)
        return 1;
    if (w->co->any < 0) {       /* once, after the handlers loaded */
        int i;
        w->co->any = w->set.inflight > 1;
        for (i = 0; i < w->scripts.n; i++)
            w->co->any |= w->scripts.h[i].inflight > 1;
    }
    if (!w->co->any)
        return 1;               /* the plain path pays one test */
    h = handler_of(w, j->name);
    if (h == NULL)
        return 1;
    return h->inflight > 0 ? h->inflight : w->set.inflight;
}

static void
on_timeout(evutil_socket_t fd, short what, void *arg)
{
    cojob *cj = arg;

    (void)fd;
    (void)what;
    cj->late = 1;
    jr_co_finish(cj, -1);
    jr_co_reap(cj->w->co);
}

/* jobrunner.cancelled() asks: look for this job's cancel now. */
static void
co_on_cancelled(void *arg)
{
    cojob *cj = arg;

    if (jr_run_cancel_listed(cj->w, cj->j->id))
        cj->ctx.cancelled = 1;
}

/* jobrunner.progress(): sent at most once a second, the last with the
 * result. */
static void
co_on_progress(void *arg)
{
    cojob *cj = arg;

    if (cj->progress_sent > 0 && jr_mono() - cj->progress_sent < 1.0)
        return;
    jr_co_put_progress(cj);
}

static cojob *
job_new(worker *w, jr_job *j, jr_handler *info)
{
    cojob *cj = jr_co_job_alloc(w);

    if (cj == NULL)
        return NULL;
    cj->w = w;
    cj->j = j;
    cj->info = info;
    cj->ctx.job = j;
    cj->ctx.max_payload = w->set.max_payload;
    cj->ctx.durable_steps = info->durable_steps >= 0 ?
                            info->durable_steps : w->set.durable_steps;
    cj->ctx.on_cancelled = co_on_cancelled;
    cj->ctx.on_progress = co_on_progress;
    cj->ctx.hook_arg = cj;
    jr_wsteps_hooks(w, &cj->ctx, cj);
    jr_wtrace_begin(w, &cj->ctx, j);
    cj->started = jr_mono();
    cj->timeout = info->timeout > 0 ? info->timeout : w->set.timeout;
    cj->lim.deadline = cj->started + cj->timeout;
    cj->lim.secs = cj->timeout;
    cj->lim.owner = cj;
    if (cj->timer == NULL)      /* a kept one's calls on_timeout(cj) */
        cj->timer = evtimer_new(w->base, on_timeout, cj);
    if (cj->timer == NULL || jr_task_new(cj) == NULL) {
        jr_co_job_free(cj);
        return NULL;
    }
    return cj;                  /* its timer is set at its first wait */
}

void
jr_co_start(worker *w, jr_job *j)
{
    jr_handler *info = handler_of(w, j->name);
    char why[2048];
    cojob *cj;

    if (info == NULL) {
        snprintf(why, sizeof why, "no handler for '%s' in this worker",
                 j->name);
        jr_run_refuse(w, j, JR_RETRY, why);
        return;
    }
    if (jr_run_push_call(w, j, info, why, sizeof why) < 0) {
        jr_run_refuse(w, j, JR_DEAD, why);     /* retrying won't help */
        return;
    }                                                /* f job */
    if ((cj = job_new(w, j, info)) == NULL) {
        lua_pop(w->L, 2);
        jr_run_refuse(w, j, JR_RETRY, "out of memory");
        return;
    }
    lua_xmove(w->L, cj->tasks->L, 2);
    link_job(w->co, cj);
    resume(cj->tasks, 1);
    jr_co_reap(w->co);
}

int
jr_co_kept(worker *w)
{
    jr_co *co = w->co;
    jr_task **pool;
    int i, k = w->set.inflight;

    if (co->kept_max > 0)
        return co->kept_max;
    for (i = 0; i < w->scripts.n; i++)
        if (w->scripts.h[i].inflight > k)
            k = w->scripts.h[i].inflight;
    if (k < JR_TASKS_KEPT)
        k = JR_TASKS_KEPT;
    if ((pool = calloc((size_t)k, sizeof *pool)) == NULL)
        return 0;               /* keeps none; asks again */
    co->pool = pool;
    return co->kept_max = k;
}

int
jr_co_count(const worker *w)
{
    return w->co != NULL ? w->co->n : 0;
}

void
jr_co_cancel(worker *w, int64_t id)
{
    cojob *cj;

    for (cj = w->co ? w->co->jobs : NULL; cj != NULL; cj = cj->next)
        if (cj->j->id == id) {
            cj->ctx.cancelled = 1;
            jr_co_finish(cj, -1);
            break;
        }
    if (w->co != NULL)
        jr_co_reap(w->co);
}

static void
on_fd(evutil_socket_t fd, short what, void *arg)
{
    worker *w = arg;

    (void)fd;
    (void)what;
    w->fd_ready = 1;
}

int
jr_co_loop(worker *w)
{
    if (w->ev_fd == NULL &&
        (w->ev_fd = event_new(w->base, w->fd, EV_READ, on_fd, w)) == NULL)
        return 1;               /* out of memory: read, blocking */
    w->fd_ready = 0;
    event_add(w->ev_fd, NULL);
    event_base_loop(w->base, EVLOOP_ONCE);
    jr_co_reap(w->co);
    return w->fd_ready;
}

void
jr_co_kick(worker *w)
{
    event_base_loop(w->base, EVLOOP_NONBLOCK);
    jr_co_reap(w->co);
}

/* --- the module ------------------------------------------------------------ */

/* The context of the job L runs for: its task's, or (in a coroutine the
 * handler made) the job being resumed. */
static jr_jobctx *
ctx_of(void *arg, lua_State *L)
{
    jr_task *t = jr_task_lookup(L);
    worker *w = arg;

    if (t != NULL && t->job != NULL)
        return &t->job->ctx;
    return w->co->current != NULL ? &w->co->current->ctx : NULL;
}

static void
raise_files(void)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;  /* a socket per request in flight */
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* The worker's loop. Its changes to what a descriptor is watched for
 * wait for the next wait and go to the kernel as one (libevent's
 * changelist): a request's socket is watched for writing while it
 * connects, then for reading, and the master's socket is watched again
 * at every pass, each a delete and an add of its own otherwise, three
 * epoll_ctl calls a request. The changelist's one hazard, a descriptor
 * dup()ed while watched, is not met here: the worker dups none (exec's
 * dup2 runs in the child). */
static struct event_base *
make_base(void)
{
    struct event_config *cfg = event_config_new();
    struct event_base *base;

    if (cfg == NULL)
        return NULL;
    event_config_set_flag(cfg, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
    base = event_base_new_with_config(cfg);
    event_config_free(cfg);
    return base;
}

int
jr_co_open(worker *w, jr_err *err)
{
    lua_State *L = w->L;

    if ((w->co = calloc(1, sizeof *w->co)) == NULL ||
        (w->base = make_base()) == NULL)
        return jr_fail(err, JR_ENOMEM, "worker: cannot make its loop");
    w->co->plain.ref = LUA_NOREF;
    w->co->any = -1;
    raise_files();
    w->ctx.of_thread = ctx_of;
    jr_task_open(w);
    lua_getglobal(L, "package");                     /* p */
    lua_getfield(L, -1, "loaded");                   /* p loaded */
    lua_getfield(L, -1, "jobrunner");                /* p loaded M */
    jr_coall_open(L);
    jr_wexec_open(L, w->share);
    if (jr_whttp_open(w, L, err) < 0 || jr_coown_open(L, err) < 0) {
        lua_pop(L, 3);
        return -1;
    }
    lua_pop(L, 3);
    return 0;
}

void
jr_co_close(worker *w)
{
    cojob *cj;

    if (w->co == NULL)
        return;
    while ((cj = w->co->jobs) != NULL) {
        w->co->jobs = cj->next;
        cj->over = 1;
        jr_co_job_free(cj);
    }
    jr_co_reap(w->co);
    jr_whttp_close(w);
    if (w->co->wake != NULL)
        event_free(w->co->wake);
    if (w->ev_fd != NULL)
        event_free(w->ev_fd);
    if (w->base != NULL)
        event_base_free(w->base);
    while (w->co->npool > 0)
        free(w->co->pool[--w->co->npool]);
    free(w->co->pool);
    while ((cj = w->co->kept) != NULL) {
        w->co->kept = cj->next;
        event_free(cj->timer);
        jr_jobctx_free(&cj->ctx);
        free(cj);
    }
    free(w->co);
    w->co = NULL;
}
