/* worker.c - the worker process. Reads its settings, then job frames from
 * the master on a blocking descriptor, runs each handler in a protected
 * call under a deadline, decides retry or death by the retry policy
 * (retry.c: the handler's part here, the config's backoff in the master),
 * and writes one result frame per job. It never reads jobrunner.lua. It
 * exits when the master closes the socket or dies. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <lauxlib.h>
#include <lua.h>

#include "config/config.h"
#include "worker/frame.h"
#include "lua/jrlib.h"
#include "lua/json.h"
#include "base/log.h"
#include "lua/luabridge.h"
#include "base/retry.h"
#include "lua/script.h"
#include "base/util.h"
#include "worker/worker.h"

#define FLUSH_DELAY 0.002       /* seconds a result may wait for company */
#define PROGRESS_EVERY 1.0      /* seconds between progress sends, at least */

/* SIGUSR1: the master sent a CANCEL frame. The handler sets the flag and
 * makes the running call's count hook look at once (jr_script_interrupt);
 * the hook reads the frame (cancel_check). */
static volatile sig_atomic_t cancel_signal;
static lua_State *volatile   running_L;     /* set while a handler runs */

typedef struct worker {
    int         fd;
    lua_State  *L;
    jr_settings set;            /* from the master's settings frame */
    jr_scripts  scripts;
    jr_handler *info;           /* the running job's handler */
    int         h;              /* stack index of its handler table */
    jr_jobctx   ctx;
    int         decode_ref;     /* cjson.decode */
    jr_buf      out;            /* frames to write */
    jr_memlimit mem;            /* the Lua state's allocations */
    int         recycle;        /* exit after this job's result */
    double      unflushed_since;/* mono time of the oldest unsent result */
    jr_buf      in;             /* frames read from the master */
    size_t      used;           /* bytes of in already handled */
    double      progress_sent;  /* mono time of the job's last progress */
    char        cancel_msg[64]; /* what the cancel raises */
    char        err[2048];      /* last failure message */
    jr_share   *share;          /* shared with the master, or NULL */
} worker;

static int
write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int
flush(worker *w)
{
    int rc = w->out.oom ? -1 : write_all(w->fd, w->out.p, w->out.len);
    jr_buf_reset(&w->out);
    if (w->share != NULL)
        w->share->len = 0;      /* written: nothing for the master to read */
    return rc;
}

/* Copies the frames appended to out since byte from into the shared page,
 * for the master to read if this worker dies before it writes them; what
 * does not fit is written now. Returns 0 or -1 (a failed write). */
static int
share_results(worker *w, size_t from)
{
    jr_share *sh = w->share;
    size_t n = w->out.len - from;

    if (sh == NULL || w->out.oom)
        return 0;
    if (n > sizeof sh->buf - sh->len)
        return flush(w);
    memcpy(sh->buf + sh->len, w->out.p + from, n);
    sh->len += (uint32_t)n;
    return 0;
}

/* Says what loaded; setup_error (may be NULL) tells the master that the
 * worker could not even start loading, so it must not take the empty
 * handler list for a generation. */
static int
send_hello(worker *w, const char *setup_error)
{
    jr_frame_put_hello(&w->out, &w->scripts, setup_error);
    return flush(w);
}

/* Decodes the payload into job.payload; on failure leaves a message in
 * w->err and returns -1. [-0, +0, -] */
static int
set_payload(worker *w, const jr_job *j)
{
    lua_State *L = w->L;                             /* job */

    lua_rawgeti(L, LUA_REGISTRYINDEX, w->decode_ref);/* job dec */
    lua_pushlstring(L, j->payload, j->payload_len);  /* job dec s */
    if (lua_pcall(L, 1, 1, 0) != LUA_OK) {           /* job msg */
        snprintf(w->err, sizeof w->err, "payload cannot be decoded: %s",
                 lua_tostring(L, -1));
        lua_pop(L, 1);                               /* job */
        return -1;
    }                                                /* job payload */
    jr_json_integers(L, 0);
    lua_setfield(L, -2, "payload");                  /* job */
    return 0;
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
 * applies the config's). */
static void
failed(worker *w, const jr_job *j, jr_result *res)
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

/* Fills res from the snooze or discard the handler called. */
static void
decided(worker *w, jr_result *res)
{
    const jr_signal *s = &w->ctx.decision;

    res->kind = s->kind;
    res->delay = s->delay;
    snprintf(w->err, sizeof w->err, "%s", s->reason);
    res->error = s->kind == JR_DEAD ? w->err : NULL;
}

/* Turns the error value on top into w->err, or fills res from a signal.
 * Returns 1 if it was a signal. [-1, +0, -] */
static int
take_error(worker *w, jr_result *res)
{
    const jr_signal *s = jr_jrlib_signal(w->L, -1);

    if (s != NULL) {
        res->kind = s->kind;
        res->delay = s->delay;
        snprintf(w->err, sizeof w->err, "%s", s->reason);
        res->error = s->kind == JR_DEAD ? w->err : NULL;
        lua_pop(w->L, 1);
        return 1;
    }
    snprintf(w->err, sizeof w->err, "%s", jr_script_errstr(w->L));
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
static void
read_more(worker *w)
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
 * little later: the signal counts until a cancel frame was read. */
static int
cancel_listed(worker *w, int64_t id)
{
    int sig = cancel_signal, found, any;

    if (sig) {
        cancel_signal = 0;      /* before reading: a later one counts */
        read_more(w);
    }
    found = jr_frame_find_cancel(w->in.p + w->used, w->in.len - w->used, id,
                                 &any);
    if (sig && !any)
        cancel_signal = 1;      /* its frame is still on the way */
    return found;
}

/* The count hook's check (luabridge.h): raises once the running job's
 * cancel arrived. Cheap until a SIGUSR1 came. */
static const char *
cancel_check(void *arg)
{
    worker *w = arg;

    if (w->ctx.job == NULL)
        return NULL;
    if (!w->ctx.cancelled && cancel_signal &&
        cancel_listed(w, w->ctx.job->id))
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

    if (w->ctx.job != NULL && cancel_listed(w, w->ctx.job->id))
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
    flush(w);                   /* a failure shows at the result's */
}

/* Fills res from how the handler's call ended: rc from jr_script_xrun,
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
        if (w->mem.hit)
            w->recycle = 1;
    } else if (w->mem.hit) {
        /* a refused allocation may have left the handler's state half
         * made: fail the job and give the worker's place to a fresh one */
        if (rc != LUA_OK)
            lua_pop(L, 1);
        snprintf(w->err, sizeof w->err, "memory limit of %zu MiB exceeded",
                 w->set.memory_limit >> 20);
        failed(w, j, res);
        w->recycle = 1;
    } else if (rc == JR_SCRIPT_LATE) {
        snprintf(w->err, sizeof w->err, "timed out after %gs", timeout);
        failed(w, j, res);
    } else if (rc == LUA_OK) {
        res->kind = JR_DONE;
        res->pushes = w->ctx.pushes;
        res->npushes = w->ctx.npushes;
    } else if (!take_error(w, res)) {
        failed(w, j, res);
    }
}

/* Runs job j and fills res (strings borrowed from w until the next job). */
static void
run_job(worker *w, const jr_job *j, jr_result *res)
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
    jr_script_push_job(L, j, max_retries);           /* t f job */
    if (set_payload(w, j) < 0) {
        res->kind = JR_DEAD;                         /* retrying won't help */
        res->error = w->err;
        lua_settop(L, top);
        return;
    }
    w->ctx.job = j;
    w->progress_sent = 0;
    w->mem.hit = 0;
    w->mem.enforce = 1;
    /* results waiting for company go out before a job that may be long
     * (its handler has not run here yet, or takes FLUSH_DELAY or more):
     * they would wait for its end, and the runner would count the
     * finished jobs as running */
    if (w->out.len > 0 &&
        !(w->info->avg > 0 && w->info->avg < FLUSH_DELAY))
        flush(w);               /* a failure shows at the result's */
    running_L = L;
    if (cancel_signal)
        jr_script_interrupt(L); /* look at once */
    t0 = jr_mono();
    /* no instruction budget: the timeout is the handler's limit */
    rc = jr_script_xrun(L, 1, 0, 0, timeout);        /* t | t e */
    t0 = jr_mono() - t0;
    w->info->avg = w->info->avg > 0 ? 0.8 * w->info->avg + 0.2 * t0 : t0;
    running_L = NULL;
    w->mem.enforce = 0;
    if (w->ctx.progress_dirty)
        put_progress(w);        /* the last value is always recorded */
    w->ctx.job = NULL;
    outcome(w, j, rc, timeout, res);
    lua_settop(L, top);                              /* (nothing) */
}

static int
handle_frame(worker *w, const char *data, int more)
{
    jr_reader r;
    jr_result res;
    jr_job *j;
    jr_err err;
    size_t from;
    int type = jr_frame_open(&r, data);

    if (type == JR_F_STOP)
        return 1;
    if (type == JR_F_CANCEL)
        return 0;               /* its job ended, or was skipped */
    if (type != JR_F_JOB) {
        jr_log(JR_LOG_ERROR, "unexpected frame type %d from master", type);
        return -1;
    }
    if ((j = jr_frame_get_job(&r, &err)) == NULL) {
        jr_log(JR_LOG_ERROR, "%s", err.msg);
        return -1;
    }
    if (w->out.len == 0)
        w->unflushed_since = jr_mono();
    if (w->share != NULL) {
        w->share->started = jr_mono();
        __atomic_store_n(&w->share->running, j->id, __ATOMIC_RELEASE);
    }
    if (cancel_listed(w, j->id)) {
        memset(&res, 0, sizeof res);
        res.id = j->id;
        res.kind = JR_CANCELLED;
        res.error = "cancelled before it started";
    } else {
        run_job(w, j, &res);
    }
    fflush(stdout);             /* the job's output goes before its result */
    fflush(stderr);
    from = w->out.len;
    jr_frame_put_result(&w->out, &res);
    jr_jobctx_clear(&w->ctx);
    free(j);
    if (share_results(w, from) < 0)
        return -1;
    if (w->share != NULL)
        w->share->running = 0;  /* its result is where the master finds it */
    /* results wait for the next ones while more jobs are already here,
     * for at most FLUSH_DELAY: fewer writes, same order */
    if ((!more || w->recycle ||
         jr_mono() - w->unflushed_since > FLUSH_DELAY) && flush(w) < 0)
        return -1;
    return w->recycle ? 2 : 0;
}

/* Reads frames until the master closes the socket or says stop. The
 * buffer is the worker's: a running handler's cancel check reads into it
 * too (read_more). */
static int
serve(worker *w)
{
    jr_buf *in = &w->in;
    int rc = 0;

    for (;;) {
        long len;
        ssize_t n;
        jr_err err;

        while ((len = jr_frame_complete(in->p + w->used, in->len - w->used,
                                        &err)) > 0) {
            int more = jr_frame_complete(in->p + w->used + len,
                                         in->len - w->used - (size_t)len,
                                         NULL) > 0;
            if ((rc = handle_frame(w, in->p + w->used, more)) != 0)
                goto out;       /* 1: stop, 2: recycle, -1: error */
            w->used += (size_t)len;
        }
        if (w->out.len > 0 && flush(w) < 0) {
            rc = -1;
            goto out;
        }
        if (len < 0) {
            jr_log(JR_LOG_ERROR, "from master: %s", err.msg);
            rc = -1;
            goto out;
        }
        if (w->used > 0) {
            memmove(in->p, in->p + w->used, in->len - w->used);
            in->len -= w->used;
            w->used = 0;
        }
        if (in->cap - in->len < 65536) {
            size_t cap = in->cap ? in->cap * 2 : 65536;
            char *p = realloc(in->p, cap);
            if (p == NULL) {
                rc = -1;
                goto out;
            }
            in->p = p;
            in->cap = cap;
        }
        n = read(w->fd, in->p + in->len, in->cap - in->len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;              /* master gone: exit */
        in->len += (size_t)n;
    }
out:
    return rc < 0 ? 1 : rc == 2 ? JR_WORKER_RECYCLE : 0;
}

/* os.exit would take the worker down with the job; make it a failure. */
static int
no_exit(lua_State *L)
{
    return luaL_error(L, "os.exit(%s) called by the handler; the job fails "
                      "and the worker keeps running",
                      luaL_tolstring(L, 1, NULL));
}

/* Reads exactly n bytes; -1 when the master is gone or a read fails. */
static int
read_all(int fd, char *p, size_t n)
{
    while (n > 0) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

/* Reads the master's settings frame, the first it sends, into w->set.
 * Returns 0, or -1 with err set. */
static int
read_settings(worker *w, jr_err *err)
{
    char head[4];
    jr_reader r;
    char *frame;
    long len;
    int rc;

    if (read_all(w->fd, head, sizeof head) < 0)
        return jr_fail(err, JR_EPROTO, "no settings from the master");
    if ((len = jr_frame_complete(head, sizeof head, err)) < 0)
        return -1;
    len = (long)((unsigned char)head[0] | (unsigned char)head[1] << 8 |
                 (unsigned char)head[2] << 16 |
                 (unsigned long)(unsigned char)head[3] << 24) + 4;
    if ((frame = malloc((size_t)len)) == NULL)
        return jr_fail(err, JR_ENOMEM, "settings: out of memory");
    memcpy(frame, head, sizeof head);
    if (read_all(w->fd, frame + 4, (size_t)len - 4) < 0) {
        free(frame);
        return jr_fail(err, JR_EPROTO, "settings from the master cut short");
    }
    if (jr_frame_open(&r, frame) != JR_F_SETTINGS)
        rc = jr_fail(err, JR_EPROTO, "first frame from the master is not "
                     "its settings");
    else
        rc = jr_frame_get_settings(&r, &w->set, err);
    free(frame);
    return rc;
}

/* Loads the libraries and every handler, with the master's settings. */
static int
setup(worker *w, jr_err *err)
{
    const char *scripts = w->set.scripts;
    lua_State *L;
    int rc;

    if ((L = w->L = jr_script_state_limited(scripts, &w->mem, err)) == NULL)
        return -1;
    w->mem.limit = w->set.memory_limit;
    w->ctx.max_payload = w->set.max_payload;
    w->ctx.on_cancelled = on_cancelled;
    w->ctx.on_progress = on_progress;
    w->ctx.hook_arg = w;
    jr_script_set_check(cancel_check, w);
    if (jr_jrlib_open(L, &w->ctx, err) < 0)
        return -1;
    lua_getglobal(L, "os");                          /* os */
    lua_pushcfunction(L, no_exit);                   /* os f */
    lua_setfield(L, -2, "exit");                     /* os */
    lua_pop(L, 1);                                   /* (nothing) */
    lua_getglobal(L, "require");                     /* require */
    lua_pushliteral(L, "cjson");                     /* require "cjson" */
    if (jr_script_pcall(L, 1, 1, err) < 0)           /* cjson */
        return -1;
    lua_getfield(L, -1, "decode");                   /* cjson decode */
    w->decode_ref = luaL_ref(L, LUA_REGISTRYINDEX);  /* cjson */
    lua_pop(L, 1);                                   /* (nothing) */
    /* a file blocked outside Lua: exit naming it (the master's hello
     * deadline, a little later, is the backstop) */
    jr_scripts_watchdog(w->set.load_timeout, JR_WORKER_LOAD_STUCK);
    rc = jr_scripts_load(L, scripts, &w->scripts, err);
    jr_scripts_watchdog(0, 0);
    return rc;
}

/* Kills this worker's process group, which it leads: the subprocesses its
 * handlers started, and itself. Async-signal-safe. */
static void
kill_group(void)
{
    if (getpgrp() == getpid())
        kill(0, SIGKILL);
}

/* SIGUSR1: a CANCEL frame is on its way or there. */
static void
on_cancel_signal(int sig)
{
    lua_State *L = running_L;

    (void)sig;
    cancel_signal = 1;
    if (L != NULL)
        jr_script_interrupt(L);
}

/* SIGTERM: the master stops the worker, or died (PR_SET_PDEATHSIG). */
static void
on_term(int sig)
{
    (void)sig;
    kill_group();
    _exit(1);
}

int
jr_worker_output(int out)
{
    int log = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 5);

    if (log < 0 || dup2(out, STDOUT_FILENO) < 0 ||
        dup2(out, STDERR_FILENO) < 0)
        return -1;
    close(out);
    jr_log_fd(log);
    return 0;
}

/* Frees what the worker holds. */
static void
cleanup(worker *w)
{
    jr_jobctx_free(&w->ctx);
    jr_scripts_free(&w->scripts);
    jr_buf_free(&w->out);
    jr_buf_free(&w->in);
    jr_settings_free(&w->set);
    if (w->L != NULL)
        lua_close(w->L);
}

/* Maps the page shared with the master (worker.h); without it the worker
 * runs as before. */
static void
map_share(worker *w, int share_fd)
{
    void *p;

    if (share_fd < 0)
        return;
    p = mmap(NULL, sizeof *w->share, PROT_READ | PROT_WRITE, MAP_SHARED,
             share_fd, 0);
    close(share_fd);
    if (p != MAP_FAILED)
        w->share = p;
}

int
jr_worker_main(int fd, int share_fd)
{
    worker w;
    jr_err err;
    char who[32];
    int rc;
    pid_t parent = getppid();

    memset(&w, 0, sizeof w);
    w.fd = fd;
    /* the socket to the master is the worker's alone: a process that a
     * handler starts (os.execute, io.popen) must not hold it open */
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    map_share(&w, share_fd);
    struct sigaction sa;

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_cancel_signal;
    sa.sa_flags = SA_RESTART;   /* a handler's blocking calls go on */
    sigaction(SIGUSR1, &sa, NULL);
    signal(SIGTERM, on_term);
#ifdef __linux__
    prctl(PR_SET_PDEATHSIG, SIGTERM);   /* never outlive the master */
#endif
    if (parent == 1 || getppid() != parent)
        return 1;
    signal(SIGINT, SIG_IGN);            /* the master decides on Ctrl-C */
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);
    srand((unsigned)getpid() ^ (unsigned)(jr_mono() * 1e6));
    if (read_settings(&w, &err) < 0) {
        jr_log(JR_LOG_ERROR, "worker: %s", err.msg);
        cleanup(&w);
        return 1;
    }
    snprintf(who, sizeof who, "worker %d", (int)getpid());
    jr_log_setup(w.set.log_level, w.set.log_json, who);
    if (setup(&w, &err) < 0) {
        /* still say hello so the master hears why; it keeps what runs */
        jr_scripts_free(&w.scripts);
        rc = send_hello(&w, err.msg[0] ? err.msg : "worker set-up failed");
        cleanup(&w);
        return rc < 0 ? 1 : 0;
    }
    rc = send_hello(&w, NULL) < 0 ? 1 : serve(&w);
    if (getppid() != parent)
        kill_group();                   /* master gone: take ours along */
    cleanup(&w);
    return rc;
}
