/* coend.c - the end of a coroutine job (co.c): its outcome (the result,
 * a failure through the retry policy, a timeout, a cancel, the memory
 * limit) into its result frame and the page shared with the master, its
 * last progress, and what it held freed, or kept for the next job (its
 * timer and push arrays: jr_co_kept of them). Apart from co.c, which
 * starts and resumes the jobs, because a job's end reads everything it
 * did and none of it is needed to run one. Uses worker_int.h, jrlib.h
 * (the job's context), frame.h (its result). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <lua.h>

#include "worker/worker_int.h"

/* Queues the job's latest progress as a JR_PROGRESS result. */
void
jr_co_put_progress(cojob *cj)
{
    jr_result p = {.id = cj->j->id, .kind = JR_PROGRESS};

    p.done = cj->ctx.progress_done;
    p.total = cj->ctx.progress_total;
    p.note = cj->ctx.progress_has_note ? cj->ctx.progress_note : NULL;
    jr_frame_put_result(&cj->w->out, &p);
    jr_wtrace_progress(&cj->ctx);
    cj->ctx.progress_dirty = 0;
    cj->progress_sent = jr_mono();
}

/* A failure whose message is in w->err: the retry policy, with the
 * handler's table on the main stack for its backoff. */
static void
co_failed(cojob *cj, jr_result *res)
{
    worker *w = cj->w;
    int top = lua_gettop(w->L);

    jr_scripts_push(w->L, &w->scripts, cj->j->name); /* t */
    w->h = lua_gettop(w->L);
    w->info = cj->info;
    jr_run_failed(w, cj->j, res);
    lua_settop(w->L, top);
}

/* Fills res from how the job ended: rc LUA_OK, or an error whose value is
 * on top of w->L (moved there), or -1 (its timeout or a cancel). */
static void
outcome(cojob *cj, int rc, jr_result *res)
{
    worker *w = cj->w;
    int err = rc != LUA_OK && rc != -1;

    res->id = cj->j->id;
    res->generation = w->scripts.generation;
    if (cj->ctx.cancelled || (cj->ctx.decided && err) ||
        (err && !jr_memlimit_failed(&w->mem) &&
         jr_jrlib_signal(w->L, -1) == NULL && cj->late)) {
        if (err)
            lua_pop(w->L, 1);
        err = 0;
    }
    if (cj->ctx.cancelled) {
        snprintf(w->err, sizeof w->err, "%s", "cancelled while running");
        res->kind = JR_CANCELLED;
        res->error = w->err;
    } else if (cj->ctx.decided) {
        jr_run_signal_result(w, &cj->ctx.decision, res);
    } else if (jr_memlimit_failed(&w->mem)) {
        if (err)
            lua_pop(w->L, 1);
        snprintf(w->err, sizeof w->err, "memory limit of %zu MiB exceeded",
                 w->set.memory_limit >> 20);
        co_failed(cj, res);
        w->recycle = 1;
    } else if (cj->late || (rc == LUA_OK && jr_mono() > cj->lim.deadline)) {
        snprintf(w->err, sizeof w->err, "timed out after %gs", cj->timeout);
        co_failed(cj, res);
    } else if (rc == LUA_OK) {
        res->kind = JR_DONE;
        res->pushes = cj->ctx.pushes;
        res->npushes = cj->ctx.npushes;
        res->sql = cj->ctx.sql.p;
        res->sql_len = cj->ctx.sql.len;
        res->nsql = cj->ctx.nsql;
        if (w->keys != NULL && jr_wcrypt_pushes(w, &cj->ctx) < 0)
            co_failed(cj, res);
        else if (cj->returned) {
            cj->returned = 0;
            if (jr_run_take_result(w, cj->j, res) < 0)
                co_failed(cj, res);
        }
    } else if (!jr_run_take_error(w, res)) {
        co_failed(cj, res);
    }
    if (cj->returned) {         /* not a success: the value goes */
        cj->returned = 0;
        lua_pop(w->L, 1);
    }
}

/* Frees what job cj holds, and keeps cj (its timer and push arrays) for
 * a next job while fewer than jr_co_kept are kept. */
void
jr_co_job_free(cojob *cj)
{
    jr_co *co = cj->w->co;
    jr_task *t;

    while ((t = cj->tasks) != NULL) {
        cj->tasks = t->next;
        jr_task_free(cj->w->L, t);
    }
    free(cj->j);
    cj->j = NULL;
    if (cj->timer != NULL && co->nkept < jr_co_kept(cj->w)) {
        if (cj->armed)
            evtimer_del(cj->timer);
        jr_jobctx_clear(&cj->ctx);
        cj->next = co->kept;
        co->kept = cj;
        co->nkept++;
        return;
    }
    if (cj->timer != NULL)
        event_free(cj->timer);
    jr_jobctx_free(&cj->ctx);
    free(cj);
}

/* A cojob with all fields zero but a kept one's timer and push arrays,
 * or NULL when out of memory. Only what is kept is copied aside (the
 * whole context, with its note's buffer, was a copy as large as the
 * memset, for every job). */
cojob *
jr_co_job_alloc(worker *w)
{
    jr_co *co = w->co;
    cojob *cj = co->kept;
    jr_push *pushes;
    char **mem;
    int cap;
    jr_buf sql;
    jr_joblog log;
    struct jr_jobtrace *trace;
    struct event *timer;

    if (cj == NULL)
        return calloc(1, sizeof *cj);
    co->kept = cj->next;
    co->nkept--;
    pushes = cj->ctx.pushes;
    mem = cj->ctx.mem;
    cap = cj->ctx.cap;
    sql = cj->ctx.sql;
    log = cj->ctx.log;
    trace = cj->ctx.trace;
    timer = cj->timer;
    memset(cj, 0, sizeof *cj);
    cj->ctx.pushes = pushes;
    cj->ctx.mem = mem;
    cj->ctx.cap = cap;
    cj->ctx.sql = sql;
    cj->ctx.log = log;
    cj->ctx.trace = trace;
    cj->timer = timer;
    return cj;
}

/* Takes cj out of the running jobs, whatever their number: a job's end
 * costs the same with a thousand in flight as with one. */
static void
unlink_job(jr_co *co, cojob *cj)
{
    if (cj->prev == NULL && co->jobs != cj)
        return;                 /* not among them */
    if (cj->prev != NULL)
        cj->prev->next = cj->next;
    else
        co->jobs = cj->next;
    if (cj->next != NULL)
        cj->next->prev = cj->prev;
    cj->next = cj->prev = NULL;
    co->n--;
}

/* The job ended (rc as outcome's): its waits cancelled, its result frame
 * and a copy in the shared page; it joins the dead, freed by reap (its
 * threads may be on the C stack now). */
void
jr_co_finish(cojob *cj, int rc)
{
    worker *w = cj->w;
    jr_co *co = w->co;
    jr_result res;
    size_t from;
    jr_task *t;

    if (cj->over)
        return;
    cj->over = 1;
    for (t = cj->tasks; t != NULL; t = t->next)
        if (t->cancel != NULL) {
            t->cancel(t->op);
            t->cancel = NULL;
        }
    unlink_job(co, cj);
    cj->next = co->dead;
    co->dead = cj;
    memset(&res, 0, sizeof res);
    outcome(cj, rc, &res);
    res.logs = jr_jrlog_entry(&cj->ctx, cj->j->attempt, &res.logs_len);
    if (cj->ctx.progress_dirty)
        jr_co_put_progress(cj);
    jr_wsteps_end(w, &cj->ctx);
    jr_wtrace_end(w, &cj->ctx, cj->j, &res);
    from = w->out.len;
    jr_frame_put_result(&w->out, &res);
    jr_worker_share(w, from);   /* a failed write shows at the flush */
    jr_jobctx_clear(&cj->ctx);  /* its pushes are in the frame now */
}

/* Frees the jobs that ended, between resumes. */
void
jr_co_reap(jr_co *co)
{
    cojob *cj;

    while (co->depth == 0 && (cj = co->dead) != NULL) {
        co->dead = cj->next;
        jr_co_job_free(cj);
    }
}
