/* wexec.c - jobrunner.exec(argv, { stdin =, timeout =, env = }) in
 * handlers: a child process without a shell (fork and execvp), in a
 * process group of its own, its stdin, stdout and stderr pipes on the
 * worker's loop and its exit through a pidfd; the calling task waits
 * (task.c). On its timeout, or when the job ends first (its timeout, a
 * cancel), the whole group is killed. Owns the children in flight; the
 * checks of its arguments are wexecarg.c's. Uses worker_int.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <event2/event.h>
#include <lauxlib.h>
#include <lua.h>

#include "worker/worker_int.h"

#define EXEC_MAX_OUT  (64L << 20)       /* bytes kept of stdout, of stderr */
#define KIDS_MAX      4096
#define EXEC_TIMEOUT_MAX 1e9            /* s; past it none (a timeval's) */

extern char **environ;

typedef struct child {
    jr_task       *t;
    pid_t          pid;
    int            fd[3];           /* stdin (ours to write), out, err */
    struct event  *ev[3];
    int            pidfd;
    struct event  *ev_exit;         /* pidfd readable, or a poll timer */
    struct event  *ev_timeout;
    jr_buf         in, out, err;
    size_t         in_at;
    int            status;          /* waitpid's, once exited */
    int            exited;
    int            timed_out;
    double         timeout;
    char           name[128];       /* argv[0], for messages */
} child;

static volatile pid_t kids[KIDS_MAX];   /* groups to kill on the way out */
static jr_share *page;          /* the master's copy of the first ones */
static lua_State *build;        /* a thread of our own for the results */

/* Lists (on) or forgets the group of child pid, here and, for the master
 * to kill if this worker dies, in the shared page. */
static void
kid_track(pid_t pid, int on)
{
    int i;

    for (i = 0; i < KIDS_MAX; i++)
        if (on ? kids[i] == 0 : kids[i] == pid) {
            kids[i] = on ? pid : 0;
            if (page != NULL && i < JR_SHARE_KIDS)
                __atomic_store_n(&page->kids[i], on ? (int32_t)pid : 0,
                                 __ATOMIC_RELEASE);
            return;
        }
}

void
jr_wexec_killall(void)
{
    int i;

    for (i = 0; i < KIDS_MAX; i++)
        if (kids[i] > 0)
            kill(-kids[i], SIGKILL);
}

static void
close_fd(child *c, int i)
{
    if (c->ev[i] != NULL)
        event_free(c->ev[i]);
    c->ev[i] = NULL;
    if (c->fd[i] >= 0)
        close(c->fd[i]);
    c->fd[i] = -1;
}

/* Frees c; a child still running is killed with its group and reaped. */
static void
child_free(child *c)
{
    int i;

    if (!c->exited && c->pid > 0) {
        kill(-c->pid, SIGKILL);
        while (waitpid(c->pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    if (c->pid > 0)
        kid_track(c->pid, 0);
    for (i = 0; i < 3; i++)
        close_fd(c, i);
    if (c->ev_exit != NULL)
        event_free(c->ev_exit);
    if (c->ev_timeout != NULL)
        event_free(c->ev_timeout);
    if (c->pidfd >= 0)
        close(c->pidfd);
    jr_buf_free(&c->in);
    jr_buf_free(&c->out);
    jr_buf_free(&c->err);
    free(c);
}

static void
child_cancel(void *op)
{
    child_free(op);
}

/* The result of c on L: { status, stdout, stderr, signal? }, or nil and
 * the timeout's message. Allocates: run protected (done_p). */
static int
push_result(lua_State *L, const child *c)
{
    if (c->timed_out) {
        lua_pushnil(L);
        lua_pushfstring(L, "jobrunner.exec: '%s' timed out after %fs (its "
                        "process group was killed)", c->name, c->timeout);
        return 2;
    }
    lua_createtable(L, 0, 4);
    lua_pushinteger(L, WIFEXITED(c->status) ? WEXITSTATUS(c->status) :
                    128 + WTERMSIG(c->status));
    lua_setfield(L, -2, "status");
    if (WIFSIGNALED(c->status)) {
        lua_pushinteger(L, WTERMSIG(c->status));
        lua_setfield(L, -2, "signal");
    }
    lua_pushlstring(L, c->out.p ? c->out.p : "", c->out.len);
    lua_setfield(L, -2, "stdout");
    lua_pushlstring(L, c->err.p ? c->err.p : "", c->err.len);
    lua_setfield(L, -2, "stderr");
    return 1;
}

static int
done_p(lua_State *L)
{
    return push_result(L, lua_touserdata(L, 1));
}

/* The message of a result that did not fit in memory. */
static int
nomem_p(lua_State *L)
{
    const child *c = lua_touserdata(L, 1);

    lua_pushnil(L);
    lua_pushfstring(L, "jobrunner.exec: '%s': not enough memory for its "
                    "output (%d bytes)", c->name,
                    (int)(c->out.len + c->err.len));
    return 2;
}

/* Done once it exited and both its output pipes reached their end. The
 * result is built on the thread `build` under a protected call, then
 * moved to the task's: this runs in the loop's callback, where a memory
 * error (memory_limit) must not jump out through libevent, and the task's
 * thread may be a suspended coroutine, where no call can run. The job's
 * memory_limit holds meanwhile, as while the job runs: an output over it
 * fails the call, then the job. */
static void
maybe_done(child *c)
{
    jr_task *t = c->t;
    jr_memlimit *ml = t->job != NULL ? &t->job->w->mem : NULL;
    int n, enforce = ml != NULL ? ml->enforce : 0;

    if (!c->exited || c->fd[1] >= 0 || c->fd[2] >= 0)
        return;
    if (ml != NULL)
        ml->enforce = 1;
    lua_pushcfunction(build, done_p);
    lua_pushlightuserdata(build, c);
    if (lua_pcall(build, 1, LUA_MULTRET, 0) != LUA_OK) {
        lua_pushcfunction(build, nomem_p);
        lua_pushlightuserdata(build, c);
        if (lua_pcall(build, 1, 2, 0) != LUA_OK) {
            lua_pushnil(build);                      /* err nil */
            lua_insert(build, -2);                   /* nil err */
        }
        lua_remove(build, 1);                        /* the first error */
    }
    if (ml != NULL)
        ml->enforce = enforce;
    n = lua_gettop(build);
    lua_xmove(build, jr_task_thread(t), n);
    child_free(c);
    jr_task_wake(t, n);
}

static void
on_output(evutil_socket_t fd, short what, void *arg)
{
    child *c = arg;
    int i = fd == c->fd[1] ? 1 : 2;
    jr_buf *b = i == 1 ? &c->out : &c->err;
    char buf[16384];
    ssize_t n;

    (void)what;
    n = read(fd, buf, sizeof buf);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        close_fd(c, i);
        maybe_done(c);
        return;
    }
    if (b->len + (size_t)n <= (size_t)EXEC_MAX_OUT)
        jr_buf_put(b, buf, (size_t)n);
}

/* After the exit: reads what is left in pipe i, then closes it. What
 * still holds it open left the group (setsid, a daemon) and is not
 * waited for: the call would last as long as it, past its timeout. */
static void
drain(child *c, int i)
{
    jr_buf *b = i == 1 ? &c->out : &c->err;
    char buf[16384];
    ssize_t n;
    int k;

    for (k = 0; k < EXEC_MAX_OUT / (long)sizeof buf && c->fd[i] >= 0; k++) {
        n = read(c->fd[i], buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        if (b->len + (size_t)n <= (size_t)EXEC_MAX_OUT)
            jr_buf_put(b, buf, (size_t)n);
    }
    close_fd(c, i);
}

static void
on_input(evutil_socket_t fd, short what, void *arg)
{
    child *c = arg;
    ssize_t n;

    (void)what;
    n = write(fd, c->in.p + c->in_at, c->in.len - c->in_at);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n > 0)
        c->in_at += (size_t)n;
    if (n < 0 || c->in_at >= c->in.len)
        close_fd(c, 0);         /* all written, or it stopped reading */
}

static void
on_exit_ev(evutil_socket_t fd, short what, void *arg)
{
    child *c = arg;
    pid_t r;

    (void)fd;
    (void)what;
    r = waitpid(c->pid, &c->status, WNOHANG);
    if (r == 0) {
        if (c->pidfd < 0) {     /* no pidfd: look again soon */
            struct timeval tv = {0, 20000};
            evtimer_add(c->ev_exit, &tv);
        }
        return;
    }
    c->exited = 1;
    kid_track(c->pid, 0);
    event_del(c->ev_exit);
    if (c->ev_timeout != NULL)
        event_del(c->ev_timeout);
    kill(-c->pid, SIGKILL);     /* what it left behind in its group */
    drain(c, 1);
    drain(c, 2);
    maybe_done(c);
}

static void
on_timeout(evutil_socket_t fd, short what, void *arg)
{
    child *c = arg;

    (void)fd;
    (void)what;
    c->timed_out = 1;
    kill(-c->pid, SIGKILL);
}

/* The child's side after fork: its own group, dies with the worker,
 * pipes on 0 1 2, then execvp. Async-signal-safe calls only. */
static void
in_child(char **argv, char **envp, const char *cwd, int p[3][2])
{
    sigset_t none;
    int i;

    setpgid(0, 0);
#ifdef __linux__
    prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    for (i = 1; i < NSIG; i++)
        signal(i, SIG_DFL);
    dup2(p[0][0], 0);
    dup2(p[1][1], 1);
    dup2(p[2][1], 2);
    /* nothing else of the worker's: its sockets (libcurl's, with requests
     * in flight) and a handler's open files are not marked close-on-exec */
#ifdef SYS_close_range
    if (syscall(SYS_close_range, 3U, ~0U, 0U) < 0)
#endif
        for (i = 3; i < 65536; i++)
            close(i);
    if (envp != NULL)
        environ = envp;
    if (cwd != NULL && chdir(cwd) < 0) {
        dprintf(2, "jobrunner.exec: cannot enter '%s': %s\n", cwd,
                strerror(errno));
        _exit(127);
    }
    execvp(argv[0], argv);
    dprintf(2, "jobrunner.exec: cannot run '%s': %s\n", argv[0],
            strerror(errno));
    _exit(127);
}

/* Starts argv with envp (NULL: the worker's); c's fds set. -1 with
 * errno set when it could not. */
static int
spawn(child *c, char **argv, char **envp, const char *cwd)
{
    int p[3][2] = {{-1, -1}, {-1, -1}, {-1, -1}}, i, e;

    for (i = 0; i < 3; i++)
        if (pipe2(p[i], O_CLOEXEC) < 0)
            goto fail;
    if ((c->pid = fork()) < 0)
        goto fail;
    if (c->pid == 0)
        in_child(argv, envp, cwd, p);
    setpgid(c->pid, c->pid);    /* before we may kill the group */
    kid_track(c->pid, 1);
    c->fd[0] = p[0][1];
    c->fd[1] = p[1][0];
    c->fd[2] = p[2][0];
    close(p[0][0]);
    close(p[1][1]);
    close(p[2][1]);
    for (i = 0; i < 3; i++)
        fcntl(c->fd[i], F_SETFL, fcntl(c->fd[i], F_GETFL) | O_NONBLOCK);
    return 0;
fail:
    e = errno;
    for (i = 0; i < 3; i++) {
        if (p[i][0] >= 0)
            close(p[i][0]);
        if (p[i][1] >= 0)
            close(p[i][1]);
    }
    errno = e;
    return -1;
}

/* Arms c's events: its pipes, its exit (pidfd, else a poll), its
 * timeout. -1 when out of memory. */
static int
arm(child *c, struct event_base *base)
{
    struct timeval tv = {0, 20000};
    int i;

    c->pidfd = (int)syscall(SYS_pidfd_open, c->pid, 0);
    c->ev_exit = c->pidfd >= 0 ?
        event_new(base, c->pidfd, EV_READ | EV_PERSIST, on_exit_ev, c) :
        evtimer_new(base, on_exit_ev, c);
    if (c->ev_exit == NULL)
        return -1;
    event_add(c->ev_exit, c->pidfd >= 0 ? NULL : &tv);
    for (i = 0; i < 3; i++) {
        if (i == 0 && c->in.len == 0) {
            close_fd(c, 0);
            continue;
        }
        c->ev[i] = event_new(base, c->fd[i], (short)((i ? EV_READ : EV_WRITE)
                             | EV_PERSIST), i ? on_output : on_input, c);
        if (c->ev[i] == NULL)
            return -1;
        event_add(c->ev[i], NULL);
    }
    if (c->timeout > 0 && c->timeout < EXEC_TIMEOUT_MAX) {
        tv.tv_sec = (long)c->timeout;
        tv.tv_usec = (long)((c->timeout - (double)tv.tv_sec) * 1e6);
        if ((c->ev_timeout = evtimer_new(base, on_timeout, c)) == NULL)
            return -1;
        evtimer_add(c->ev_timeout, &tv);
    }
    return 0;
}

/* jobrunner.exec(argv, { stdin =, timeout =, env =, cwd = }): runs argv[1]
 * with no shell; { status, stdout, stderr } (signal too when killed), or nil
 * and a message. The handler's coroutine waits meanwhile. */
static int
wexec_exec(lua_State *L)
{
    jr_task *t;
    char **argv, **envp;
    const char *in = NULL, *cwd = NULL;
    size_t inlen = 0, cwdlen = 0;
    double timeout;
    child *c;
    int e;

    luaL_checktype(L, 1, LUA_TTABLE);
    if (!lua_isnoneornil(L, 2))
        luaL_checktype(L, 2, LUA_TTABLE);
    t = jr_task_of(L, "exec");
    argv = jr_wexec_read_argv(L);                    /* .. argv */
    timeout = jr_wexec_opt_timeout(L);
    if (lua_type(L, 2) == LUA_TTABLE) {
        lua_getfield(L, 2, "stdin");
        luaL_argcheck(L, lua_isnil(L, -1) || lua_type(L, -1) == LUA_TSTRING,
                      2, "'stdin' must be a string");
        in = lua_tolstring(L, -1, &inlen);
        lua_getfield(L, 2, "cwd");
        luaL_argcheck(L, lua_isnil(L, -1) || lua_type(L, -1) == LUA_TSTRING,
                      2, "'cwd' must be a string");
        cwd = lua_tolstring(L, -1, &cwdlen);
        if (cwd != NULL && strlen(cwd) != cwdlen)
            luaL_error(L, "jobrunner.exec: 'cwd' contains a NUL byte");
        lua_pop(L, 2);          /* the options table keeps them */
    }
    envp = jr_wexec_read_env(L);                     /* .. argv [envp] */
    /* all read and checked: from here c is freed before anything raises,
     * until the task's wait owns it */
    if ((c = calloc(1, sizeof *c)) == NULL)
        return luaL_error(L, "jobrunner.exec: out of memory");
    c->fd[0] = c->fd[1] = c->fd[2] = c->pidfd = -1;
    c->t = t;
    c->timeout = timeout;
    snprintf(c->name, sizeof c->name, "%s", argv[0]);
    if ((in != NULL && jr_buf_put(&c->in, in, inlen) < 0) ||
        spawn(c, argv, envp, cwd) < 0) {
        e = c->in.oom ? ENOMEM : errno;
        child_free(c);
        lua_pushnil(L);
        lua_pushfstring(L, "jobrunner.exec: cannot run '%s': %s", argv[0],
                        strerror(e));
        return 2;
    }
    if (arm(c, jr_task_base(t)) < 0) {
        child_free(c);
        return luaL_error(L, "jobrunner.exec: out of memory");
    }
    return jr_task_wait(L, t, child_cancel, c);
}

void
jr_wexec_open(lua_State *L, jr_share *share)
{
    page = share;
    build = lua_newthread(L);
    luaL_ref(L, LUA_REGISTRYINDEX);     /* kept for the worker's life */
    lua_pushcfunction(L, wexec_exec);
    lua_setfield(L, -2, "exec");
}
