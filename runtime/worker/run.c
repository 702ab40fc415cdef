/* run.c - one job in a worker's handler: decodes its payload, calls the
 * handler in a protected call under its deadline, looks for a cancel and
 * sends progress while it runs (the count hook's check and jrlib's
 * hooks), and turns how the call ended into the result: done, a signal
 * (snooze, discard), or a failure that the retry policy makes a retry or
 * a death (retry.c: the handler's part here, the config's backoff in the
 * master). Uses worker_int.h, frame.h, jrlib.h, json.h, luabridge.h,
 * retry.h, script.h, config.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <lua.h>

#include "config/config.h"
#include "lua/json.h"
#include "lua/jsondec.h"
#include "lua/jrloglazy.h"
#include "base/jsontext.h"
#include "base/retry.h"
#include "worker/worker_int.h"

#define PROGRESS_EVERY 1.0      /* seconds between progress sends, at least */

/* SIGUSR1: the master sent a CANCEL frame. The handler sets the flag and
 * makes the running call's count hook look at once (jr_luabridge_interrupt);
 * the hook reads the frame (cancel_check). */
static volatile sig_atomic_t cancel_signal;
static lua_State *volatile   running_L;     /* set while a handler runs */

/* The job id the key at k is (a string of digits), into *id; -1 if
 * none. [-0, +0, -] */
static int
parent_id(lua_State *L, int k, lua_Integer *id)
{
    const char *s;
    char *end;

    if (lua_type(L, k) != LUA_TSTRING)
        return -1;
    s = lua_tostring(L, k);
    errno = 0;
    *id = (lua_Integer)strtoll(s, &end, 10);
    return *s >= '1' && *s <= '9' && *end == '\0' && errno == 0 ? 0 : -1;
}

/* Decodes job.parents: the JSON object of the parents' ends, its keys
 * (the parents' ids) made integers. [-0, +0, -] */
static int
set_parents(worker *w, const jr_job *j)
{
    lua_State *L = w->L;                             /* job */
    char why[200];

    if (jr_json_decode_safe(L, j->parents, strlen(j->parents), why,
                            sizeof why) < 0) {       /* job */
        snprintf(w->err, sizeof w->err, "job.parents cannot be decoded: %s",
                 why);
        return -1;
    }                                                /* job t */
    if (!lua_istable(L, -1)) {
        snprintf(w->err, sizeof w->err, "job.parents cannot be decoded: "
                 "not an object");
        lua_pop(L, 1);                               /* job */
        return -1;
    }
    lua_newtable(L);                                 /* job t p */
    lua_pushnil(L);                                  /* job t p nil */
    while (lua_next(L, -3) != 0) {                   /* job t p k v */
        lua_Integer id;
        if (parent_id(L, -2, &id) < 0) {
            /* a parents column plain SQL filled: an array's keys are no
             * strings, and lua_tostring on one would break lua_next */
            if (lua_type(L, -2) == LUA_TSTRING)
                snprintf(w->err, sizeof w->err, "job.parents cannot be "
                         "decoded: key '%.40s' is not a job id",
                         lua_tostring(L, -2));
            else                /* an array's */
                snprintf(w->err, sizeof w->err, "job.parents cannot be "
                         "decoded: key %lld is not a job id",
                         (long long)lua_tointeger(L, -2));
            lua_pop(L, 4);                           /* job */
            return -1;
        }
        lua_pushinteger(L, id);                      /* job t p k v id */
        lua_insert(L, -2);                           /* job t p k id v */
        lua_rawset(L, -4);                           /* job t p k */
    }                                                /* job t p */
    lua_setfield(L, -3, "parents");                  /* job t */
    lua_pop(L, 1);                                   /* job */
    return 0;
}

/* Decodes the payload into job.payload; on failure leaves a message in
 * w->err and returns -1. [-0, +0, -] */
static int
set_payload(worker *w, const jr_job *j)
{
    lua_State *L = w->L;                             /* job */
    char why[200];

    if (jr_json_decode_safe(L, j->payload, j->payload_len, why,
                            sizeof why) < 0) {       /* job */
        snprintf(w->err, sizeof w->err, "payload cannot be decoded: %s",
                 why);
        return -1;
    }                                                /* job payload */
    lua_setfield(L, -2, "payload");                  /* job */
    if (j->batch != 0) {
        lua_pushinteger(L, (lua_Integer)j->batch);   /* job batch */
        lua_setfield(L, -2, "batch");                /* job */
    }
    return j->parents != NULL ? set_parents(w, j) : 0;
}

/* The handler's backoff function for the retry policy (arg: the worker;
 * the running job's handler table at w->h): seconds, or -1 when it has
 * none or it failed. [-0, +0, -] */
static double
handler_backoff(void *arg, const jr_job *j, int max_retries,
                const char *error)
{
    worker *w = arg;
    lua_State *L = w->L;

    (void)max_retries;
    if (lua_getfield(L, w->h, "backoff") != LUA_TFUNCTION) { /* b */
        lua_pop(L, 1);                               /* (nothing) */
        return -1;
    }
    lua_pushinteger(L, j->attempt);                  /* b attempt */
    lua_pushstring(L, error);                        /* b attempt error */
    return jr_config_backoff_call(L, 2, j);          /* (nothing) */
}

/* Fills res after a failure whose message is in w->err: dead, or a retry
 * whose delay is the handler's, else JR_RETRY_UNRESOLVED (the master
 * applies the config's). worker_int.h. */
void
jr_run_failed(worker *w, const jr_job *j, jr_result *res)
{
    jr_retry_in in = {
        .job = j, .error = w->err,
        .handler_max = w->info->max_retries,
        .config_max = w->set.max_retries,
        .handler_backoff = w->info->backoff,
        .handler_fn = handler_backoff, .handler_arg = w,
    };

    res->error = w->err;
    jr_retry_decide(&in, res);
}

void
jr_run_signal_result(worker *w, const jr_signal *s, jr_result *res)
{
    res->kind = s->kind;
    res->delay = s->delay;
    snprintf(w->err, sizeof w->err, "%s", s->reason);
    res->error = s->kind == JR_DEAD ? w->err : NULL;
    if (s->kind == JR_WAIT) {
        snprintf(w->wait_on, sizeof w->wait_on, "%s", s->wait_on);
        res->wait_on = w->wait_on[0] != '\0' ? w->wait_on : NULL;
        res->wake_at = s->wake_at;
        res->sleep_n = s->sleep_n;
    }
}

/* Fills res from the snooze, discard or wait the handler called. */
static void
decided(worker *w, jr_result *res)
{
    jr_run_signal_result(w, &w->ctx.decision, res);
}

/* Turns the error value on top into w->err, or fills res from a signal.
 * Returns 1 if it was a signal. [-1, +0, -] */
int
jr_run_take_error(worker *w, jr_result *res)
{
    const jr_signal *s = jr_jrlib_signal(w->L, -1);

    if (s != NULL) {
        jr_run_signal_result(w, s, res);
        lua_pop(w->L, 1);
        return 1;
    }
    snprintf(w->err, sizeof w->err, "%s", jr_luabridge_errstr(w->L));
    lua_pop(w->L, 1);
    return 0;
}

/* Pushes job j's handler table and sets w->info and w->h; else fills res
 * (a retry soon: another worker may have it) and returns -1.
 * [-0, +(1|0), -] */
static int
find_handler(worker *w, const jr_job *j, jr_result *res)
{
    int i;

    w->info = NULL;
    for (i = 0; i < w->scripts.n; i++)
        if (strcmp(w->scripts.h[i].name, j->name) == 0)
            w->info = &w->scripts.h[i];
    jr_scripts_push(w->L, &w->scripts, j->name);     /* t */
    w->h = lua_gettop(w->L);
    if (w->info != NULL && lua_istable(w->L, w->h))
        return 0;
    lua_pop(w->L, 1);                                /* (nothing) */
    snprintf(w->err, sizeof w->err, "no handler for '%s' in this worker",
             j->name);
    res->kind = JR_RETRY;
    res->error = w->err;
    res->delay = 1;
    return -1;
}

/* Reads what the master sent meanwhile, without blocking. */
void
jr_run_read(worker *w)
{
    ssize_t n;

    for (;;) {
        if (w->in.cap - w->in.len < 4096) {
            size_t cap = w->in.cap ? w->in.cap * 2 : 65536;
            char *p = realloc(w->in.p, cap);
            if (p == NULL)
                return;
            w->in.p = p;
            w->in.cap = cap;
        }
        n = recv(w->fd, w->in.p + w->in.len, w->in.cap - w->in.len,
                 MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;             /* nothing more now, or the master left */
        w->in.len += (size_t)n;
    }
}

/* 1 if a CANCEL frame for job id waits among the frames read. The master
 * signals right after it queues the frame, which may reach the socket a
 * little later: the signal counts until a cancel frame was read. With no
 * signal since the last look found no cancel frame among those read, none
 * is there: no walk of the frames read (a look at every job's start
 * walked all the jobs queued behind it, each job's frame again and again,
 * for cancels a plain drain never sends). */
int
jr_run_cancel_listed(worker *w, int64_t id)
{
    int sig = cancel_signal, found, any;

    if (!sig && !w->cancel_frames)
        return 0;
    if (sig) {
        cancel_signal = 0;      /* before reading: a later one counts */
        jr_run_read(w);
    }
    found = jr_frame_find_cancel(w->in.p + w->used, w->in.len - w->used, id,
                                 &any);
    if (sig && !any)
        cancel_signal = 1;      /* its frame is still on the way */
    w->cancel_frames = any;
    return found;
}

/* The count hook's check (luabridge.h): raises once the running job's
 * cancel arrived. Cheap until a SIGUSR1 came. */
static const char *
cancel_check(void *arg, void *owner, lua_State *L)
{
    worker *w = arg;

    if (owner != NULL)
        return jr_co_check(w, owner, L);
    if (w->ctx.job == NULL)
        return NULL;
    if (!w->ctx.cancelled && cancel_signal &&
        jr_run_cancel_listed(w, w->ctx.job->id))
        w->ctx.cancelled = 1;
    if (!w->ctx.cancelled)
        return NULL;
    snprintf(w->cancel_msg, sizeof w->cancel_msg, "job %lld cancelled",
             (long long)w->ctx.job->id);
    return w->cancel_msg;
}

/* jobrunner.cancelled() asks: look for a cancel now. */
static void
on_cancelled(void *arg)
{
    worker *w = arg;

    if (w->ctx.job != NULL && jr_run_cancel_listed(w, w->ctx.job->id))
        w->ctx.cancelled = 1;
}

/* Queues the job's latest progress as a JR_PROGRESS result. */
static void
put_progress(worker *w)
{
    jr_result p = {.id = w->ctx.job->id, .kind = JR_PROGRESS};

    p.done = w->ctx.progress_done;
    p.total = w->ctx.progress_total;
    p.note = w->ctx.progress_has_note ? w->ctx.progress_note : NULL;
    jr_frame_put_result(&w->out, &p);
    jr_wtrace_progress(&w->ctx);
    w->ctx.progress_dirty = 0;
    w->progress_sent = jr_mono();
}

/* jobrunner.progress() stored a value: send it unless one went out less
 * than PROGRESS_EVERY ago (the last one goes with the result). */
static void
on_progress(void *arg)
{
    worker *w = arg;

    if (w->ctx.job == NULL ||
        (w->progress_sent > 0 && jr_mono() - w->progress_sent <
         PROGRESS_EVERY))
        return;
    put_progress(w);
    jr_worker_flush(w);         /* a failure shows at the result's */
}

/* Encodes the value at 1 into the jr_buf at upvalue 1 (a protected call:
 * the encoder may raise on memory). Returns "" or the reason. */
static int
encode_result(lua_State *L)                          /* v */
{
    jr_buf *b = lua_touserdata(L, lua_upvalueindex(1));
    char msg[300];

    if (jr_json_encode_value(L, 1, b, msg, sizeof msg) < 0)
        lua_pushstring(L, msg);
    else
        lua_pushliteral(L, "");
    return 1;
}

/* The handler returned the value on top (not nil): res->result is its
 * JSON text (0); or the value has no JSON (a function, a table mixing
 * keys, a string that is not UTF-8): the job's work is done and doing it
 * again would give the same, so it stays a success without a result,
 * res->error saying why (1); or -1 with w->err saying why the attempt
 * fails (too large, out of memory). worker_int.h. [-1, +0, -] */
int
jr_run_take_result(worker *w, const jr_job *j, jr_result *res)
{
    lua_State *L = w->L;
    const char *why;
    char bad[200];

    jr_buf_reset(&w->result);
    lua_pushlightuserdata(L, &w->result);            /* v b */
    lua_pushcclosure(L, encode_result, 1);           /* v f */
    lua_insert(L, -2);                               /* f v */
    why = lua_pcall(L, 1, 1, 0) == LUA_OK ? lua_tostring(L, -1) : NULL;
    res->result = NULL;
    if (why != NULL && *why == '\0' && !w->result.oom) {
        if (jr_jsontext_check(w->result.p, w->result.len - 1, bad,
                              sizeof bad) < 0)
            why = bad;          /* what one backend would refuse */
        else if (w->result.len - 1 <= w->set.max_result)
            res->result = w->result.p;
        if (res->result != NULL && w->keys != NULL &&
            jr_wcrypt_seal(w, res) < 0) {
            res->result = NULL;
            lua_pop(L, 1);
            res->pushes = NULL;
            res->npushes = 0;
            res->sql = NULL;
            res->sql_len = 0;
            res->nsql = 0;
            return -1;
        }
    }
    if (res->result != NULL || (why != NULL && *why != '\0')) {
        if (res->result == NULL)
            snprintf(w->err, sizeof w->err, "result not stored: %s", why);
        res->error = res->result == NULL ? w->err : NULL;
        lua_pop(L, 1);          /* "" or the reason */
        return res->result != NULL ? 0 : 1;
    }
    if (w->result.oom || why == NULL)
        snprintf(w->err, sizeof w->err, "job %lld: result: out of memory",
                 (long long)j->id);
    else
        snprintf(w->err, sizeof w->err, "job %lld: result of %zu bytes is "
                 "over max_result (%zu)", (long long)j->id,
                 w->result.len - 1, w->set.max_result);
    lua_pop(L, 1);
    res->pushes = NULL;         /* follow-ups go with a success only */
    res->npushes = 0;
    res->sql = NULL;            /* and so do statements */
    res->sql_len = 0;
    res->nsql = 0;
    return -1;
}

/* Fills res from how the handler's call ended: rc from jr_luabridge_xrun,
 * with its error value on top unless LUA_OK or late. [-(1|0), +0, -] */
static void
outcome(worker *w, const jr_job *j, int rc, double timeout, jr_result *res)
{
    lua_State *L = w->L;

    if (w->ctx.cancelled) {
        /* however it ended: the cancel stands, never retried */
        if (rc != LUA_OK && rc != JR_SCRIPT_LATE)
            lua_pop(L, 1);
        snprintf(w->err, sizeof w->err, "%s", "cancelled while running");
        res->kind = JR_CANCELLED;
        res->error = w->err;
    } else if (w->ctx.decided) {
        /* snooze or discard was called: it stands, even if a pcall in the
         * handler caught its signal and the handler went on */
        if (rc != LUA_OK && rc != JR_SCRIPT_LATE)
            lua_pop(L, 1);
        decided(w, res);
        if (jr_memlimit_failed(&w->mem))
            w->recycle = 1;
    } else if (jr_memlimit_failed(&w->mem)) {
        /* a refused allocation may have left the handler's state half
         * made: fail the job and give the worker's place to a fresh one */
        if (rc != LUA_OK)
            lua_pop(L, 1);
        snprintf(w->err, sizeof w->err, "memory limit of %zu MiB exceeded",
                 w->set.memory_limit >> 20);
        jr_run_failed(w, j, res);
        w->recycle = 1;
    } else if (rc == JR_SCRIPT_LATE ||
               (w->sync_late && rc != LUA_OK &&
                jr_jrlib_signal(L, -1) == NULL)) {
        /* also a wait's timeout, however the handler took its error */
        if (rc != JR_SCRIPT_LATE)
            lua_pop(L, 1);
        snprintf(w->err, sizeof w->err, "timed out after %gs", timeout);
        jr_run_failed(w, j, res);
    } else if (rc == LUA_OK) {
        res->kind = JR_DONE;
        res->pushes = w->ctx.pushes;
        res->npushes = w->ctx.npushes;
        res->sql = w->ctx.sql.p;
        res->sql_len = w->ctx.sql.len;
        res->nsql = w->ctx.nsql;
        if (w->keys != NULL && jr_wcrypt_pushes(w, &w->ctx) < 0) {
            lua_pop(L, 1);
            jr_run_failed(w, j, res);
        } else if (lua_isnil(L, -1))
            lua_pop(L, 1);
        else if (jr_run_take_result(w, j, res) < 0)
            jr_run_failed(w, j, res);   /* the attempt fails */
    } else if (!jr_run_take_error(w, res)) {
        jr_run_failed(w, j, res);
    }
}

void
jr_run_job(worker *w, const jr_job *j, jr_result *res)
{
    lua_State *L = w->L;
    int top = lua_gettop(L), max_retries, rc;
    double timeout, t0;

    memset(res, 0, sizeof *res);
    res->id = j->id;
    res->generation = w->scripts.generation;
    if (find_handler(w, j, res) < 0)                 /* t */
        return;
    max_retries = jr_retry_max(j, w->info->max_retries, w->set.max_retries);
    timeout = w->info->timeout > 0 ? w->info->timeout : w->set.timeout;
    lua_getfield(L, w->h, "handle");                 /* t f */
    jr_luabridge_push_job(L, j, max_retries);           /* t f job */
    if (set_payload(w, j) < 0) {
        res->kind = JR_DEAD;                         /* retrying won't help */
        res->error = w->err;
        lua_settop(L, top);
        return;
    }
    w->ctx.job = j;
    w->ctx.durable_steps = w->info->durable_steps >= 0 ?
                           w->info->durable_steps : w->set.durable_steps;
    w->progress_sent = 0;
    if (!w->info->keep_output)  /* its lines wait as their arguments */
        jr_jrlog_lazy_begin(&w->ctx, L);
    jr_memlimit_clear(&w->mem);
    w->mem.enforce = 1;
    /* results waiting for company go out before a job that may be long
     * (its handler has not run here yet, or takes FLUSH_DELAY or more):
     * they would wait for its end, and the runner would count the
     * finished jobs as running */
    if (w->out.len > 0 &&
        !(w->info->avg > 0 && w->info->avg < FLUSH_DELAY))
        jr_worker_flush(w);     /* a failure shows at the result's */
    running_L = L;
    if (cancel_signal)
        jr_luabridge_interrupt(L); /* look at once */
    t0 = jr_mono();
    w->sync_deadline = t0 + timeout;
    w->sync_timeout = timeout;
    w->sync_late = 0;
    if (w->info->keep_output)
        jr_capture_begin(w);
    /* no instruction budget: the timeout is the handler's limit */
    rc = jr_luabridge_xrun(L, 1, 1, 0, timeout);        /* t r | t e */
    t0 = jr_mono() - t0;
    w->info->avg = w->info->avg > 0 ? 0.8 * w->info->avg + 0.2 * t0 : t0;
    running_L = NULL;
    w->mem.enforce = 0;
    if (w->ctx.progress_dirty)
        put_progress(w);        /* the last value is always recorded */
    jr_wsteps_end(w, &w->ctx);  /* so is the steps' list */
    w->ctx.job = NULL;
    if (rc == LUA_OK && jr_jrlog_lazy_check(w->err, sizeof w->err) < 0) {
        lua_pop(L, 1);          /* a line's bad field fails the attempt */
        lua_pushstring(L, w->err);
        rc = LUA_ERRRUN;
    }
    outcome(w, j, rc, timeout, res);
    if (w->info->keep_output)
        jr_capture_end(w);
    /* a success the master deletes holds its lines until it says whether
     * the row stayed (jrloglazy.c) */
    res->held = jr_jrlog_lazy_end(&w->ctx, j->id, j->attempt,
                                  j->deletable && res->kind == JR_DONE &&
                                  res->result == NULL &&
                                  res->error == NULL &&
                                  res->npushes == 0 && res->nsql == 0 &&
                                  !w->recycle);
    res->logs = jr_jrlog_entry(&w->ctx, j->attempt, &res->logs_len);
    lua_settop(L, top);                              /* (nothing) */
}

/* The plain result for a job that cannot start: no handler here, or a
 * payload that does not decode. */
void
jr_run_refuse(worker *w, jr_job *j, int kind, const char *why)
{
    jr_result res;
    size_t from = w->out.len;

    memset(&res, 0, sizeof res);
    res.id = j->id;
    res.generation = w->scripts.generation;
    res.kind = kind;
    res.delay = 1;
    snprintf(w->err, sizeof w->err, "%s", why);
    res.error = w->err;
    jr_frame_put_result(&w->out, &res);
    jr_worker_share(w, from);
    free(j);
}

/* Pushes job j's handle function and job table (with its payload, batch
 * and parents) on w->L, or fills *why and returns -1. [-0, +(2|0), -] */
int
jr_run_push_call(worker *w, const jr_job *j, const jr_handler *info,
                 char *why, size_t size)
{
    lua_State *L = w->L;
    int top = lua_gettop(L);

    jr_scripts_push(L, &w->scripts, j->name);        /* t */
    lua_getfield(L, -1, "handle");                   /* t f */
    lua_remove(L, -2);                               /* f */
    jr_luabridge_push_job(L, j, jr_retry_max(j, info->max_retries,
                                          w->set.max_retries)); /* f job */
    if (set_payload(w, j) < 0) {    /* and job.batch, job.parents */
        snprintf(why, size, "%s", w->err);
        lua_settop(L, top);
        return -1;
    }
    return 0;
}

void
jr_run_hooks(worker *w)
{
    w->ctx.on_cancelled = on_cancelled;
    w->ctx.on_progress = on_progress;
    w->ctx.hook_arg = w;
    jr_wsteps_hooks(w, &w->ctx, NULL);
    jr_luabridge_set_check(cancel_check, w);
}

void
jr_run_cancel_signal(int sig)
{
    lua_State *L = running_L;

    (void)sig;
    cancel_signal = 1;
    if (L != NULL)
        jr_luabridge_interrupt(L);
}
