/* luabridge.c - every entry from C into Lua: new states (the standard
 * libraries, package.path, an optional allocation limit), protected calls
 * with a traceback, the count hook that enforces instruction budgets and
 * the wall-clock timeouts a timer signal interrupts for (no count hook
 * slows a handler that has only a timeout); also the plain job table a
 * handler sees.
 * Used by the config, the hooks, the loader and the workers. Its
 * functions are jr_luabridge_*, named for this file. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "lua/json.h"
#include "lua/luabridge.h"
#include "base/util.h"

const char *
jr_luabridge_errstr(lua_State *L)                   /* [-1, +1, m] */
{
    const char *what = NULL;

    if (lua_type(L, -1) == LUA_TSTRING)
        return lua_tostring(L, -1);
    if (luaL_callmeta(L, -1, "__tostring")) {    /* e s */
        if (lua_type(L, -1) == LUA_TSTRING) {
            lua_remove(L, -2);                   /* s */
            return lua_tostring(L, -1);
        }
        what = luaL_typename(L, -1);             /* a literal: stays valid */
        lua_pop(L, 1);                           /* e */
    }
    if (what == NULL && lua_type(L, -1) == LUA_TTABLE) {
        /* a table raised as it is (error({code = 5})): its JSON text,
         * when it has one (jobrunner.json's rules) */
        jr_buf b = {0};
        char msg[128];

        if (jr_json_encode_value(L, -1, &b, msg, sizeof msg) == 0 &&
            !b.oom && b.p != NULL) {
            lua_pushstring(L, b.p);              /* e s */
            jr_buf_free(&b);
            lua_remove(L, -2);                   /* s */
            return lua_tostring(L, -1);
        }
        jr_buf_free(&b);
    }
    if (what != NULL)
        lua_pushfstring(L, "error object is a %s value whose __tostring "
                        "returned a %s, not a string", luaL_typename(L, -1),
                        what);                   /* e s */
    else
        lua_pushfstring(L, "error object is a %s value",
                        luaL_typename(L, -1));   /* e s */
    lua_remove(L, -2);                           /* s */
    return lua_tostring(L, -1);
}

/* Message handler: adds a traceback; jobrunner signals pass unchanged. */
static int
add_traceback(lua_State *L)                      /* e */
{
    if (luaL_testudata(L, 1, JR_SIGNAL_MT) != NULL)
        return 1;
    jr_luabridge_errstr(L);                         /* s */
    luaL_traceback(L, L, lua_tostring(L, -1), 1);/* s tb */
    return 1;
}

int
jr_luabridge_xpcall(lua_State *L, int nargs, int nres)
{
    int fn = lua_gettop(L) - nargs;              /* f a1..an */
    int rc;

    lua_pushcfunction(L, add_traceback);         /* f a1..an h */
    lua_insert(L, fn);                           /* h f a1..an */
    rc = lua_pcall(L, nargs, nres, fn);          /* h r1..rn | h e */
    lua_remove(L, fn);                           /* r1..rn | e */
    return rc;
}

/* --- budgets: one count hook for every entry into Lua ---------------- */

#define BUDGET_STEP 10000       /* instructions between hook calls */

/* What the running call may still use. One per jr_luabridge_run level, on
 * its C stack: running points at the innermost, and nested runs restore
 * the outer one when they return. A thread's extra space holds only the
 * limit jr_luabridge_bind gave it (a job's, which outlives its runs), else
 * NULL: lua_newthread copies the main thread's extra space into every
 * thread, also into a coroutine made while a run's limit was there, which
 * would keep it past the run. A thread bound to none (the main thread, a
 * coroutine the Lua code made) runs under the limit of the run or the
 * bound coroutine's resume in progress, which is what resumed it. */
typedef jr_luabridge_limit limit;

static __thread limit *running;         /* the innermost run's, or NULL */

/* "1s", "0.5s": the way %g prints, which lua_pushfstring lacks. */
static const char *
secs_str(double secs)
{
    static char buf[32];

    snprintf(buf, sizeof buf, "%gs", secs);
    return buf;
}

static jr_luabridge_check_fn check_fn;     /* jr_luabridge_set_check's */
static void              *check_arg;

void
jr_luabridge_set_check(jr_luabridge_check_fn fn, void *arg)
{
    check_fn = fn;
    check_arg = arg;
}

static limit **
limit_slot(lua_State *L)
{
    return (limit **)lua_getextraspace(L);
}

/* The threads that run Lua now, innermost first: a run's thread, then each
 * coroutine resumed from it (by jr_luabridge_resume, coroutine.resume,
 * coroutine.wrap's function), one node on each one's C stack. A signal
 * handler walks it to interrupt the thread that runs and the ones that
 * resumed it (an error a resume returns must not end the check). */
typedef struct thread_node {
    lua_State          *L;
    struct thread_node *outer;
} thread_node;

static __thread thread_node *volatile threads;

static void
threads_push(thread_node *n, lua_State *L)
{
    n->L = L;
    n->outer = threads;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);    /* n whole before seen */
    threads = n;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

static void
threads_pop(thread_node *n)
{
    threads = n->outer;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

static int deadline_watch(const limit *lim);

/* Raises "file:line: <what>" at the Lua line that was running, and again
 * at every later check: a pcall inside the code cannot swallow it for good
 * because the next instructions it runs raise once more. */
static void
limit_hook(lua_State *L, lua_Debug *ar)
{
    limit *lim = *limit_slot(L) != NULL ? *limit_slot(L) : running;
    char where[256] = "";
    const char *stop = NULL;

    if (lua_gethookcount(L) != BUDGET_STEP)     /* after an interrupt */
        lua_sethook(L, limit_hook, LUA_MASKCOUNT, BUDGET_STEP);
    if (lim == NULL)            /* Lua that C called outside any run; the
                                   hook stays for a coroutine's next run */
        return;
    if (lim->budget > 0)
        lim->left -= BUDGET_STEP;
    if (check_fn != NULL)
        stop = check_fn(check_arg, lim->owner, L);
    if (stop == NULL && (lim->budget <= 0 || lim->left > 0) &&
        (lim->deadline <= 0 || jr_mono() <= lim->deadline))
        return;
    if (lua_getinfo(L, "Sl", ar) && ar->currentline > 0)
        snprintf(where, sizeof where, "%s:%d: ", ar->short_src,
                 ar->currentline);
    if (stop != NULL)
        lua_pushfstring(L, "%s%s", where, stop);
    else if (lim->budget > 0 && lim->left <= 0)
        lua_pushfstring(L, "%sinterrupted: ran more than %d instructions (an "
                        "endless loop?)", where, (int)lim->budget);
    else
        lua_pushfstring(L, "%stimed out after %s", where,
                        secs_str(lim->secs));
    lua_error(L);               /* not luaL_error: we placed it ourselves */
}

int
jr_luabridge_xrun(lua_State *L, int nargs, int nres, long budget,
               double timeout)
{
    limit lim = {budget, budget, 0, timeout, NULL}, *outer = running;
    lua_Hook oldhook = lua_gethook(L);
    int oldmask = lua_gethookmask(L), oldcount = lua_gethookcount(L);
    thread_node n;
    int rc;

    if (timeout > 0)
        lim.deadline = jr_mono() + timeout;
    running = &lim;
    threads_push(&n, L);
    /* a budget counts instructions; a deadline is the timer's (a count
     * hook would trap every instruction); a hook an interrupt set before
     * the run (a cancel signal) stays, to look at once */
    if (budget > 0 || deadline_watch(&lim) < 0)
        lua_sethook(L, limit_hook, LUA_MASKCOUNT, BUDGET_STEP);
    else if (oldhook != limit_hook)
        lua_sethook(L, NULL, 0, 0);
    rc = jr_luabridge_xpcall(L, nargs, nres);      /* r1..rn | e */
    lua_sethook(L, oldhook, oldmask, oldcount);
    threads_pop(&n);
    running = outer;
    deadline_watch(outer);      /* a nested run's end: the outer's again */
    if (rc == LUA_OK && timeout > 0 && jr_mono() > lim.deadline)
        rc = JR_SCRIPT_LATE;    /* finished, but past its deadline */
    return rc;
}

void
jr_luabridge_bind(lua_State *co, jr_luabridge_limit *lim)
{
    *limit_slot(co) = lim;
    if (lim != NULL && lim->budget > 0)     /* a deadline: the timer's */
        lua_sethook(co, limit_hook, LUA_MASKCOUNT, BUDGET_STEP);
    else
        lua_sethook(co, NULL, 0, 0);
}

/* The error value and co (a light userdata): the value as a string with
 * co's traceback. */
static int
traceback_of(lua_State *L)                       /* e co */
{
    lua_State *co = lua_touserdata(L, 2);

    lua_settop(L, 1);                            /* e */
    jr_luabridge_errstr(L);                         /* s */
    luaL_traceback(L, co, lua_tostring(L, -1), 0);   /* s tb */
    return 1;
}

/* Makes the error value on top of co, which failed, a string with co's
 * traceback. Built on from in a protected call (a dead coroutine can run
 * none; an error object's __tostring may raise) with the memory limit
 * lifted: this is the runtime's allocation, and one refused outside a
 * protected call would abort the worker. [-1, +1, -] on co */
static void
resume_error(lua_State *co, lua_State *from)
{
    int enforce = jr_memlimit_lift(co);

    if (from != NULL && lua_checkstack(from, 3)) {
        lua_pushcfunction(from, traceback_of);   /* f */
        lua_xmove(co, from, 1);                  /* f e */
        lua_pushlightuserdata(from, co);         /* f e co */
        if (lua_pcall(from, 2, 1, 0) != LUA_OK &&
            lua_type(from, -1) != LUA_TSTRING) { /* tb | e2 */
            lua_pop(from, 1);
            lua_pushliteral(from, "error object whose __tostring "
                            "raised an error object that is not a "
                            "string");
        }
        lua_xmove(from, co, 1);                  /* co: .. tb */
    }
    jr_memlimit_restore(co, enforce);
}

int
jr_luabridge_resume(lua_State *co, lua_State *from, int nargs, int *nres)
{
    limit *outer = running;
    thread_node n;
    int rc;

    if (*limit_slot(co) != NULL)
        running = *limit_slot(co);  /* for the coroutines co resumes */
    threads_push(&n, co);
    if (running != outer && deadline_watch(running) < 0)
        lua_sethook(co, limit_hook, LUA_MASKCOUNT, BUDGET_STEP);
    rc = lua_resume(co, from, nargs, nres);
    threads_pop(&n);
    running = outer;
    deadline_watch(outer);

    if (rc != LUA_OK && rc != LUA_YIELD &&
        luaL_testudata(co, -1, JR_SIGNAL_MT) == NULL)
        resume_error(co, from);                  /* co: .. tb */
    return rc;
}

void
jr_luabridge_interrupt(lua_State *L)
{
    thread_node *n;

    /* the thread that runs looks at once; the ones waiting for it as
     * every thread did with a count hook on each: an error of the inner
     * one passes up through them as it is, and one a resume or a pcall
     * swallowed is raised again BUDGET_STEP instructions later */
    if (L != NULL)
        lua_sethook(L, limit_hook, LUA_MASKCOUNT, 1);
    if ((n = threads) == NULL)
        return;
    if (n->L != L)
        lua_sethook(n->L, limit_hook, LUA_MASKCOUNT, 1);
    for (n = n->outer; n != NULL; n = n->outer)
        if (n->L != L)
            lua_sethook(n->L, limit_hook, LUA_MASKCOUNT, BUDGET_STEP);
}

/* --- deadlines: one timer signal, no count hook ----------------------- */

/* One POSIX timer per process, a one-shot at the nearest deadline of the
 * call that runs: a call whose deadline comes no sooner than the armed
 * one arms nothing (a drain's jobs, each with the same timeout: no system
 * call), and at its expiry the signal handler interrupts the threads that
 * run if their call's deadline passed (the count hook then raises "timed
 * out" at the line), re-arms for the deadline of the call that runs now
 * if it is still to come, and else leaves the timer stopped: an idle
 * process is woken once at most. Sent to the thread that made it (the
 * one that runs Lua). SA_RESTART: a system call in progress goes on. */
#define DEADLINE_SIG SIGUSR2
#define DEADLINE_SLACK 0.001    /* past the deadline when the hook looks */

static timer_t                dl_timer;
static int                    dl_made;     /* 1 made, -1 failed */
static volatile sig_atomic_t  dl_armed;
static volatile double        dl_at;       /* its expiry, jr_mono() s */

static void
deadline_arm(double at)
{
    struct itimerspec its;

    memset(&its, 0, sizeof its);
    its.it_value.tv_sec = (time_t)at;
    its.it_value.tv_nsec = (long)((at - (double)(time_t)at) * 1e9);
    dl_at = at;
    dl_armed = 1;
    timer_settime(dl_timer, TIMER_ABSTIME, &its, NULL); /* signal-safe */
}

static void
on_deadline(int sig)
{
    const limit *lim = running;
    int saved = errno;

    (void)sig;
    dl_armed = 0;
    if (lim != NULL && lim->deadline > 0) {
        if (jr_mono() > lim->deadline)      /* clock_gettime: safe */
            jr_luabridge_interrupt(NULL);
        else
            deadline_arm(lim->deadline + DEADLINE_SLACK);
    }
    errno = saved;
}

static int
deadline_make(void)
{
    struct sigaction sa;
    struct sigevent sev;

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_deadline;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = DEADLINE_SIG;
    sev._sigev_un._tid = gettid();
    if (sigaction(DEADLINE_SIG, &sa, NULL) < 0 ||
        timer_create(CLOCK_MONOTONIC, &sev, &dl_timer) < 0)
        return -1;
    return 1;
}

/* Makes sure the timer fires by lim's deadline (none: nothing). Returns
 * -1 if no timer could be made (the caller counts instead). Called with
 * lim already running, so that an expiry in between re-arms for it. */
static int
deadline_watch(const limit *lim)
{
    if (lim == NULL || lim->deadline <= 0)
        return 0;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    if (dl_armed && dl_at <= lim->deadline + DEADLINE_SLACK)
        return 0;               /* the common case: no system call */
    if (dl_made == 0)
        dl_made = deadline_make();
    if (dl_made < 0)
        return -1;
    deadline_arm(lim->deadline + DEADLINE_SLACK);
    return 0;
}

int
jr_luabridge_run(lua_State *L, int nargs, int nres, long budget, jr_err *err)
{
    int rc = jr_luabridge_xrun(L, nargs, nres, budget, 0);

    if (rc == LUA_OK)
        return 0;
    if (lua_type(L, -1) == LUA_TSTRING)
        jr_fail(err, JR_ELUA, "%s", lua_tostring(L, -1));
    else
        jr_fail(err, JR_ELUA, "%s", jr_luabridge_errstr(L));
    lua_pop(L, 1);                               /* (nothing) */
    return -1;
}

int
jr_luabridge_pcall(lua_State *L, int nargs, int nres, jr_err *err)
{
    if (jr_luabridge_xpcall(L, nargs, nres) == LUA_OK)
        return 0;
    if (lua_type(L, -1) == LUA_TSTRING)
        jr_fail(err, JR_ELUA, "%s", lua_tostring(L, -1));
    else
        jr_fail(err, JR_ELUA, "(signal)");
    lua_pop(L, 1);                               /* (nothing) */
    return -1;
}

/* --- coroutine.resume and coroutine.wrap, on the threads' stack -------- */

/* lcorolib.c's, with the resumed thread on the stack of threads that run
 * (a timer signal must find the one that runs). [-(narg), +(n|1), -] */
static int
co_resume_on(lua_State *L, lua_State *co, int narg)
{
    thread_node n;
    int status, nres;

    if (!lua_checkstack(co, narg)) {
        lua_pushliteral(L, "too many arguments to resume");
        return -1;
    }
    lua_xmove(L, co, narg);
    threads_push(&n, co);
    status = lua_resume(co, L, narg, &nres);
    threads_pop(&n);
    if (status == LUA_OK || status == LUA_YIELD) {
        if (!lua_checkstack(L, nres + 1)) {
            lua_pop(co, nres);
            lua_pushliteral(L, "too many results to resume");
            return -1;
        }
        lua_xmove(co, L, nres);
        return nres;
    }
    lua_xmove(co, L, 1);                         /* the error */
    return -1;
}

static int
co_resume(lua_State *L)                          /* co a1..an */
{
    lua_State *co = lua_tothread(L, 1);
    int r;

    luaL_argexpected(L, co != NULL, 1, "coroutine");
    r = co_resume_on(L, co, lua_gettop(L) - 1);
    if (r < 0) {
        lua_pushboolean(L, 0);
        lua_insert(L, -2);
        return 2;                                /* false e */
    }
    lua_pushboolean(L, 1);
    lua_insert(L, -(r + 1));
    return r + 1;                                /* true r1..rn */
}

static int
co_wrapped(lua_State *L)                         /* a1..an */
{
    lua_State *co = lua_tothread(L, lua_upvalueindex(1));
    int r = co_resume_on(L, co, lua_gettop(L));

    if (r >= 0)
        return r;
    r = lua_status(co);
    if (r != LUA_OK && r != LUA_YIELD) {         /* an error in co */
        r = lua_resetthread(co);                 /* its tbc variables */
        lua_xmove(co, L, 1);
    }
    if (r != LUA_ERRMEM && lua_type(L, -1) == LUA_TSTRING) {
        luaL_where(L, 1);
        lua_insert(L, -2);
        lua_concat(L, 2);
    }
    return lua_error(L);
}

static int
co_wrap(lua_State *L)                            /* f */
{
    lua_State *co;

    luaL_checktype(L, 1, LUA_TFUNCTION);
    co = lua_newthread(L);                       /* f co */
    lua_pushvalue(L, 1);                         /* f co f */
    lua_xmove(L, co, 1);                         /* f co */
    lua_pushcclosure(L, co_wrapped, 1);          /* f w */
    return 1;
}

static int
pmain_open(lua_State *L)                         /* dir */
{
    const char *dir = lua_tostring(L, 1);

    luaL_openlibs(L);
    lua_getglobal(L, "coroutine");               /* dir co */
    lua_pushcfunction(L, co_resume);
    lua_setfield(L, -2, "resume");
    lua_pushcfunction(L, co_wrap);
    lua_setfield(L, -2, "wrap");
    lua_pop(L, 1);                               /* dir */
    if (dir != NULL) {
        lua_getglobal(L, "package");             /* dir package */
        lua_getfield(L, -1, "path");             /* dir package path */
        lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;%s", dir, dir,
                        lua_tostring(L, -1));    /* dir package path new */
        lua_setfield(L, -3, "path");             /* dir package path */
        lua_pop(L, 2);                           /* dir */
    }
    luaL_newmetatable(L, JR_SIGNAL_MT);             /* dir mt */
    lua_pop(L, 1);                               /* dir */
    return 0;
}

/* The allocator of limited states: counts, and refuses growth past the
 * limit while a handler runs (outside, our own C code must not fail).
 * Lua answers a refusal with an emergency collection (frees only) and
 * then asks again for the same block: a refusal counts as a failure
 * (ml->hit) only if that retry is refused too, or if the next request is
 * another one (no retry came: Lua raised at once). */
static void *
limited_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    jr_memlimit *ml = ud;
    size_t old = ptr ? osize : 0;
    int again;
    void *p;

    if (nsize == 0) {
        free(ptr);
        ml->used -= old;
        return NULL;
    }
    again = ml->refused && ml->rptr == ptr && ml->rosize == osize &&
            ml->rnsize == nsize;
    if (ml->refused && !again)
        ml->hit = 1;
    ml->refused = 0;
    if (ml->enforce && ml->limit && nsize > old &&
        ml->used + (nsize - old) > ml->limit) {
        if (again)
            ml->hit = 1;
        else {
            ml->refused = 1;
            ml->rptr = ptr;
            ml->rosize = osize;
            ml->rnsize = nsize;
        }
        return NULL;
    }
    if ((p = realloc(ptr, nsize)) != NULL)
        ml->used = ml->used - old + nsize;
    else if (again)
        ml->hit = 1;
    return p;
}

int
jr_memlimit_failed(const jr_memlimit *ml)
{
    /* a refusal still waiting for its retry is final once Lua returned */
    return ml->hit || ml->refused;
}

void
jr_memlimit_clear(jr_memlimit *ml)
{
    ml->hit = 0;
    ml->refused = 0;
}

int
jr_memlimit_lift(lua_State *L)
{
    void *ud;
    jr_memlimit *ml;
    int enforce;

    if (lua_getallocf(L, &ud) != limited_alloc)
        return 0;
    ml = ud;
    enforce = ml->enforce;
    ml->enforce = 0;
    return enforce;
}

void
jr_memlimit_restore(lua_State *L, int enforce)
{
    void *ud;

    if (lua_getallocf(L, &ud) == limited_alloc)
        ((jr_memlimit *)ud)->enforce = enforce;
}


static lua_State *
new_state(lua_State *L, const char *scripts_dir, jr_err *err);

lua_State *
jr_luabridge_state_limited(const char *scripts_dir, jr_memlimit *ml,
                        jr_err *err)
{
    return new_state(lua_newstate(limited_alloc, ml), scripts_dir, err);
}

lua_State *
jr_luabridge_state(const char *scripts_dir, jr_err *err)
{
    return new_state(luaL_newstate(), scripts_dir, err);
}

/* An error outside any protected call: a bug. Say it before aborting. */
static int
panic(lua_State *L)
{
    const char *msg = lua_tostring(L, -1);

    fprintf(stderr, "jobrunner: unprotected Lua error: %s\n",
            msg ? msg : "(not a string)");
    return 0;                   /* Lua aborts */
}

static lua_State *
new_state(lua_State *L, const char *scripts_dir, jr_err *err)
{
    if (L != NULL) {
        lua_atpanic(L, panic);
        *limit_slot(L) = NULL;  /* copied into every new thread */
    }
    if (L == NULL) {
        jr_fail(err, JR_ENOMEM, "cannot create a Lua state: out of memory");
        return NULL;
    }
    lua_pushcfunction(L, pmain_open);            /* f */
    if (scripts_dir)
        lua_pushstring(L, scripts_dir);          /* f dir */
    else
        lua_pushnil(L);                          /* f nil */
    if (jr_luabridge_pcall(L, 1, 0, err) < 0) {
        lua_close(L);
        return NULL;
    }
    return L;
}

void
jr_luabridge_push_job(lua_State *L, const jr_job *j, int max_retries)
{
    lua_createtable(L, 0, 9);                        /* job */
    lua_pushinteger(L, j->id);
    lua_setfield(L, -2, "id");
    lua_pushstring(L, j->name);
    lua_setfield(L, -2, "name");
    lua_pushstring(L, j->queue);
    lua_setfield(L, -2, "queue");
    lua_pushinteger(L, j->attempt);
    lua_setfield(L, -2, "attempt");
    lua_pushinteger(L, max_retries);
    lua_setfield(L, -2, "max_retries");
    lua_pushinteger(L, j->priority);
    lua_setfield(L, -2, "priority");
    lua_pushnumber(L, j->run_at);
    lua_setfield(L, -2, "run_at");
    lua_pushnumber(L, j->created_at);
    lua_setfield(L, -2, "created_at");
}
