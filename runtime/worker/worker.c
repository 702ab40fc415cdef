/* worker.c - the worker process. Reads its settings, loads the handlers,
 * then reads job frames from the master on a blocking descriptor, has
 * each run (run.c), and writes one result frame per job, in batches
 * while more jobs wait, with a copy in the page shared with the master.
 * It never reads jobrunner.lua. It exits when the master closes the
 * socket or dies. Uses worker_int.h, frame.h, jrlib.h, script.h, log.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
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

#include "worker/frame.h"
#include "lua/jrlib.h"
#include "base/log.h"
#include "lua/script.h"
#include "base/util.h"
#include "lua/jrloglazy.h"
#include "worker/worker_int.h"

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

int
jr_worker_flush(worker *w)
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
int
jr_worker_share(worker *w, size_t from)
{
    jr_share *sh = w->share;
    size_t n = w->out.len - from;

    if (sh == NULL || w->out.oom)
        return 0;
    if (n > sizeof sh->buf - sh->len)
        return jr_worker_flush(w);
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
    return jr_worker_flush(w);
}

/* Starts job j (taken) in a coroutine when its handler runs many at once
 * (1), or waits until no coroutine job runs and returns 0 for the plain
 * path (the master sends none meanwhile); -1 when a write failed. */
static int
to_coroutine(worker *w, jr_job *j)
{
    if (jr_co_inflight(w, j) > 1) {
        jr_co_start(w, j);      /* runs until its first wait */
        /* a thousand jobs read at once: the first ones' requests go out
         * while the last ones start, not after them all */
        if (++w->co_started >= CO_KICK) {
            w->co_started = 0;
            jr_co_kick(w);
        }
        return 1;
    }
    while (jr_co_count(w) > 0) {
        jr_co_loop(w);
        if (w->out.len > 0 && jr_worker_flush(w) < 0)
            return -1;
    }
    jr_block_arm(0);
    return 0;
}

/* While coroutine jobs run: the loop once, then their results written.
 * Returns 1 when the master's socket is readable, 0 to look again, or
 * sets *rc and returns -1 (a failed write, a recycle). */
static int
co_wait(worker *w, int *rc)
{
    int readable = jr_co_loop(w);

    if (w->out.len > 0 && jr_worker_flush(w) < 0)
        return *rc = -1, -1;
    if (w->recycle)
        return *rc = 2, -1;
    return readable;
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

    if (type == JR_F_STOP) {    /* held lines wait for the master's word */
        w->stop_asked = jr_jrlog_lazy_held() > 0;
        return !w->stop_asked;
    }
    if (type == JR_F_LINES)
        return jr_wlines_frame(w, &r);
    if (type == JR_F_STEPOK || type == JR_F_HANDBACK)
        return jr_wsteps_frame(w, type, &r);
    if (type == JR_F_CANCEL) {  /* a coroutine job's, or one that ended */
        int64_t id = jr_frame_get_cancel(&r, &err);
        if (id > 0)
            jr_co_cancel(w, id);
        return 0;
    }
    if (type != JR_F_JOB) {
        jr_log(JR_LOG_ERROR, "unexpected frame type %d from master", type);
        return -1;
    }
    if ((j = jr_frame_get_job(&r, &err)) == NULL) {
        jr_log(JR_LOG_ERROR, "%s", err.msg);
        return -1;
    }
    if (w->keys != NULL) {
        jr_job *o = jr_wcrypt_open_job(w, j, w->err, sizeof w->err);

        if (o == NULL) {
            jr_wcrypt_refuse(w, j, w->err);
            return jr_worker_flush(w) < 0 ? -1 : 0;
        }
        j = o;
    } else if (jr_wcrypt_sealed_unkeyed(j, w->err, sizeof w->err)) {
        jr_wcrypt_refuse(w, j, w->err);
        return jr_worker_flush(w) < 0 ? -1 : 0;
    }
    if (w->out.len == 0)
        w->unflushed_since = jr_mono();
    if ((type = to_coroutine(w, j)) != 0)
        return type < 0 ? -1 : 0;
    if (w->share != NULL) {
        w->share->started = jr_mono();
        __atomic_store_n(&w->share->running, j->id, __ATOMIC_RELEASE);
    }
    if (jr_run_cancel_listed(w, j->id)) {
        memset(&res, 0, sizeof res);
        res.id = j->id;
        res.kind = JR_CANCELLED;
        res.error = "cancelled before it started";
    } else {
        jr_wtrace_begin(w, &w->ctx, j);
        jr_run_job(w, j, &res);
        jr_wtrace_end(w, &w->ctx, j, &res);
    }
    fflush(stdout);             /* the job's output goes before its result */
    fflush(stderr);
    from = w->out.len;
    jr_frame_put_result(&w->out, &res);
    jr_jobctx_clear(&w->ctx);
    free(j);
    if (jr_worker_share(w, from) < 0)
        return -1;
    if (w->share != NULL)
        w->share->running = 0;  /* its result is where the master finds it */
    /* results wait for the next ones while more jobs are already here,
     * for at most FLUSH_DELAY: fewer writes, same order */
    if ((!more || w->recycle ||
         jr_mono() - w->unflushed_since > FLUSH_DELAY) &&
        jr_worker_flush(w) < 0)
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
        if (w->out.len > 0 && jr_worker_flush(w) < 0) {
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
        if (jr_co_count(w) > 0 && (n = co_wait(w, &rc)) <= 0) {
            if (n < 0)
                goto out;
            continue;
        }
        if (jr_co_count(w) == 0)
            jr_block_arm(0);    /* idle, or a plain job may come */
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

    if ((L = w->L = jr_luabridge_state_limited(scripts, &w->mem, err)) == NULL)
        return -1;
    w->mem.limit = w->set.memory_limit;
    w->ctx.max_payload = w->set.max_payload;
    if (jr_wcrypt_start(w, err) < 0)
        return -1;
    jr_run_hooks(w);
    if (jr_jrlib_open(L, &w->ctx, err) < 0 || jr_co_open(w, err) < 0)
        return -1;
    lua_getglobal(L, "os");                          /* os */
    lua_pushcfunction(L, no_exit);                   /* os f */
    lua_setfield(L, -2, "exit");                     /* os */
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
    jr_wexec_killall();         /* jobrunner.exec's, in groups of their own */
    if (getpgrp() == getpid())
        kill(0, SIGKILL);
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
    jr_co_close(w);
    jr_jobctx_free(&w->ctx);
    jr_scripts_free(&w->scripts);
    jr_buf_free(&w->out);
    jr_buf_free(&w->in);
    jr_settings_free(&w->set);
    jr_wcrypt_close(w);
    if (w->L != NULL)
        lua_close(w->L);
    jr_jrsql_close();
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
    sa.sa_handler = jr_run_cancel_signal;
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
    jr_jrlog_setup(w.set.log_attempt_max, w.set.log_echo);
    if (jr_jrsql_setup(w.set.db_url, w.set.attach, w.set.handler_role) < 0)
        jr_log(JR_LOG_ERROR, "worker: jobrunner.query: out of memory");
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
