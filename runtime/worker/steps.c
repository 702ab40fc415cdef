/* steps.c - a job's steps on the worker's side (their records are
 * jrsteps.c's): when the list of its records goes to the master, a
 * durable step's wait for the master's word that its record is committed
 * (JR_F_STEPOK: a plain job waits on the socket, a coroutine job yields),
 * and the runner asking its jobs back (JR_F_HANDBACK), which a checkpoint
 * looks for. Uses worker_int.h, jrsteps.h, frame.h, keyring.h, log.h. */
#include <errno.h>
#include <poll.h>
#include <string.h>

#include <event2/event.h>
#include <lauxlib.h>
#include <lua.h>

#include "base/keyring.h"
#include "base/log.h"
#include "lua/jrsteps.h"
#include "worker/worker_int.h"

#define HANDBACK_LOOK 0.01      /* seconds between a plain job's looks */

/* Appends the job's list to w->out as a JR_STEP result (seq: the
 * durable record's number, or 0). */
static void
send_steps(worker *w, jr_jobctx *ctx, int seq)
{
    size_t len;
    const char *text = jr_steps_text(ctx, &len);
    jr_result r = {.id = ctx->job->id, .kind = JR_STEP, .result = text,
                   .durable = seq};

    jr_buf sealed = {0};
    jr_err err;

    if (text == NULL)
        return;
    if (w->keys != NULL) {      /* sealed as the result is */
        if (jr_keyring_seal(w->keys, text, len, &sealed, &err) < 0 ||
            jr_buf_put(&sealed, "", 1) < 0) {
            jr_log(JR_LOG_ERROR, "job %lld: its steps not recorded: %s",
                   (long long)ctx->job->id, err.msg);
            jr_buf_free(&sealed);
            return;
        }
        r.result = sealed.p;
    }
    r.done = jr_steps_made(ctx) - ctx->steps_told;
    ctx->steps_told = jr_steps_made(ctx);
    jr_frame_put_result(&w->out, &r);
    jr_buf_free(&sealed);
    jr_wtrace_steps(ctx, r.done);
    ctx->steps_dirty = 0;
    ctx->steps_sent = jr_mono();
}

/* The lists left waiting go when the worker's loop runs FLUSH_DELAY
 * later (a job that waits after a quick step: jobrunner.sleep, http). */
static struct event *flush_ev;

static void
on_flush(evutil_socket_t fd, short what, void *arg)
{
    worker *w = arg;
    cojob *cj;

    (void)fd;
    (void)what;
    if (w->ctx.job != NULL && w->ctx.steps_dirty)
        send_steps(w, &w->ctx, 0);
    for (cj = w->co != NULL ? w->co->jobs : NULL; cj != NULL; cj = cj->next)
        if (cj->ctx.steps_dirty)
            send_steps(w, &cj->ctx, 0);
    if (w->out.len > 0)
        jr_worker_flush(w);     /* a failure shows at the next result's */
}

static void
arm_flush(worker *w)
{
    struct timeval tv = {0, (long)(FLUSH_DELAY * 1e6)};

    if (flush_ev == NULL && w->base != NULL)
        flush_ev = evtimer_new(w->base, on_flush, w);
    if (flush_ev != NULL && !evtimer_pending(flush_ev, NULL))
        evtimer_add(flush_ev, &tv);
}

/* The list changed: it goes now when durable or when none went out
 * FLUSH_DELAY before (a job of quick steps sends it with its result),
 * else when the loop runs next past FLUSH_DELAY. Returns 1 when it went
 * into w->out. */
static int
note(worker *w, jr_jobctx *ctx, int seq)
{
    if (seq == 0 && jr_mono() - ctx->steps_sent < FLUSH_DELAY) {
        ctx->steps_dirty = 1;
        arm_flush(w);
        return 0;
    }
    send_steps(w, ctx, seq);
    return 1;
}

void
jr_wsteps_end(worker *w, jr_jobctx *ctx)
{
    if (ctx->steps_dirty)
        send_steps(w, ctx, 0);
}

/* A plain job's durable step: reads the master's frames until its
 * JR_F_STEPOK, the job's deadline or its cancel. */
static int
plain_wait(worker *w, lua_State *L, int64_t id, int seq)
{
    struct pollfd pfd = {.fd = w->fd, .events = POLLIN};
    double left;

    for (;;) {
        if (jr_frame_find_step(w->in.p + w->used, w->in.len - w->used,
                               JR_F_STEPOK, id, seq))
            return 0;
        left = w->sync_deadline - jr_mono();
        if (w->ctx.cancelled || jr_run_cancel_listed(w, id)) {
            w->ctx.cancelled = 1;
            return luaL_error(L, "job %I cancelled", (lua_Integer)id);
        }
        if (left <= 0) {
            w->sync_late = 1;
            return luaL_error(L, "jobrunner.step: timed out waiting for "
                              "the step's record to commit");
        }
        if (poll(&pfd, 1, (int)(left * 1000) + 1) < 0 && errno != EINTR)
            return luaL_error(L, "jobrunner.step: poll: %s",
                              strerror(errno));
        if (pfd.revents & (POLLHUP | POLLERR))
            return luaL_error(L, "jobrunner.step: the runner went away");
        jr_run_read(w);
    }
}

static int
plain_step(void *arg, lua_State *L, int seq)
{
    worker *w = arg;

    if (note(w, &w->ctx, seq) && jr_worker_flush(w) < 0 && seq > 0)
        return luaL_error(L, "jobrunner.step: the runner went away");
    return seq > 0 ? plain_wait(w, L, w->ctx.job->id, seq) : 0;
}

/* A checkpoint: has the master asked its jobs back? It reads what came
 * at most every HANDBACK_LOOK seconds (a coroutine job's loop of
 * checkpoints that never yields lets the frame loop read nothing). */
static int
look_handback(worker *w)
{
    static double looked;
    double now = jr_mono();

    if (w->handback)
        return 1;
    if (now - looked >= HANDBACK_LOOK) {
        looked = now;
        jr_run_read(w);
    }
    return w->handback = jr_frame_find_step(w->in.p + w->used,
                                            w->in.len - w->used,
                                            JR_F_HANDBACK, 0, 0);
}

/* A coroutine job's wait ended first (its timeout, its cancel). */
static void
co_unwait(void *op)
{
    jr_jobctx *ctx = op;

    ctx->steps_task = NULL;
}

static int
co_step(void *arg, lua_State *L, int seq)
{
    cojob *cj = arg;
    jr_task *t;

    note(cj->w, &cj->ctx, seq);     /* the loop flushes w->out */
    if (seq == 0)
        return 0;
    t = jr_task_of(L, "step");
    cj->ctx.steps_task = t;
    cj->ctx.steps_wait = seq;
    return jr_task_wait(L, t, co_unwait, &cj->ctx);
}

static int
plain_handback(void *arg)
{
    return look_handback(arg);
}

static int
co_handback(void *arg)
{
    cojob *cj = arg;

    return look_handback(cj->w);
}

void
jr_wsteps_hooks(worker *w, jr_jobctx *ctx, cojob *cj)
{
    ctx->max_result = w->set.max_result;
    ctx->on_step = cj != NULL ? co_step : plain_step;
    ctx->handback = cj != NULL ? co_handback : plain_handback;
}

int
jr_wsteps_frame(worker *w, int type, jr_reader *r)
{
    jr_err err;
    int64_t id;
    int seq;
    cojob *cj;
    jr_task *t;

    if (type == JR_F_HANDBACK) {
        w->handback = 1;
        return 0;
    }
    if ((id = jr_frame_get_stepok(r, &seq, &err)) < 0)
        return -1;
    for (cj = w->co != NULL ? w->co->jobs : NULL; cj != NULL; cj = cj->next)
        if (cj->j->id == id && cj->ctx.steps_task != NULL &&
            seq == cj->ctx.steps_wait) {
            t = cj->ctx.steps_task;
            cj->ctx.steps_task = NULL;
            t->cancel = NULL;
            jr_task_wake(t, 0);
            break;
        }
    return 0;               /* a plain job's was read where it waited */
}
