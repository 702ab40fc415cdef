/* coall.c - jobrunner.sleep(seconds) and jobrunner.all{ f1, f2, ... } in
 * handlers: a timer of the worker's loop, and branches of the job, each a
 * task of its own (task.c) whose outcomes are collected in order. Owns the
 * sleeps and the all() waits in progress. Uses worker_int.h, jrlib.h,
 * luabridge.h. */
#include <math.h>
#include <stdlib.h>

#include <event2/event.h>
#include <lauxlib.h>
#include <lua.h>

#include "worker/worker_int.h"

typedef struct allop {          /* a jobrunner.all waiting for branches */
    jr_task   *t;
    lua_State *main;            /* the state's main thread */
    int        left;
    int        ref;             /* registry: the results table */
} allop;

/* --- jobrunner.sleep ---------------------------------------------------- */

typedef struct sleepop {
    jr_task      *t;
    struct event *ev;
} sleepop;

static void
sleep_cancel(void *op)
{
    sleepop *s = op;

    event_free(s->ev);
    free(s);
}

static void
sleep_done(evutil_socket_t fd, short what, void *arg)
{
    sleepop *s = arg;
    jr_task *t = s->t;

    (void)fd;
    (void)what;
    sleep_cancel(s);
    jr_task_wake(t, 0);
}

/* jobrunner.sleep(seconds): waits; other jobs of the worker run. */
static int
co_sleep(lua_State *L)
{
    double secs = luaL_checknumber(L, 1);
    jr_task *t;
    sleepop *s;
    struct timeval tv;

    luaL_argcheck(L, isfinite(secs) && secs >= 0, 1,
                  "must be a finite number of seconds >= 0");
    t = jr_task_of(L, "sleep");
    if ((s = calloc(1, sizeof *s)) == NULL ||
        (s->ev = evtimer_new(jr_task_base(t), sleep_done, s)) == NULL) {
        free(s);
        return luaL_error(L, "jobrunner.sleep: out of memory");
    }
    s->t = t;
    tv.tv_sec = (long)secs;
    tv.tv_usec = (long)((secs - (double)tv.tv_sec) * 1e6);
    evtimer_add(s->ev, &tv);
    return jr_task_wait(L, t, sleep_cancel, s);
}

/* --- jobrunner.all -------------------------------------------------------- */

static void
all_cancel(void *op)
{
    allop *a = op;

    luaL_unref(a->main, LUA_REGISTRYINDEX, a->ref);
    free(a);
}

/* Stores the outcome of a branch as results[slot] on L: { ok = true, ...
 * its values } or { ok = false, error = message }. The values or the
 * error are on top of from. */
static void
store_branch(lua_State *L, int ref, int slot, lua_State *from, int ok,
             int nres)
{
    int i;

    lua_rawgeti(L, LUA_REGISTRYINDEX, ref);          /* R */
    lua_createtable(L, ok ? nres : 0, 2);            /* R r */
    lua_pushboolean(L, ok);
    lua_setfield(L, -2, "ok");
    if (!ok) {
        jr_luabridge_errstr(from);
        lua_xmove(from, L, 1);                       /* R r e */
        lua_setfield(L, -2, "error");                /* R r */
    } else {
        lua_xmove(from, L, nres);                    /* R r v1..vn */
        for (i = nres; i >= 1; i--)
            lua_rawseti(L, -1 - i, i);
    }
    lua_rawseti(L, -2, slot);                        /* R */
    lua_pop(L, 1);
}

static void
branch_done(jr_task *t, int rc, int nres)
{
    allop *a = t->end_arg;
    lua_State *L = t->L;
    const jr_jobctx *ctx = &t->job->ctx;
    jr_task *parent = a->t;

    if (rc != LUA_OK && (jr_jrlib_signal(L, -1) != NULL ||
                         ctx->decided || ctx->cancelled)) {
        lua_pop(L, 1);          /* snooze, discard, cancel: the job ends */
        jr_task_end_job(t);
        return;
    }
    store_branch(a->main, a->ref, t->slot, L, rc == LUA_OK, nres);
    if (--a->left > 0 || !parent->waiting)
        return;                 /* the others, or all() has not yielded */
    lua_rawgeti(parent->L, LUA_REGISTRYINDEX, a->ref);
    all_cancel(a);
    jr_task_wake(parent, 1);
}

/* all() in a plain job: the branches one after another. [-0, +1, -] */
static int
all_plain(lua_State *L, int n)
{
    int i, top;

    lua_createtable(L, n, 0);                        /* R */
    for (i = 1; i <= n; i++) {
        lua_geti(L, 1, i);                           /* R f */
        top = lua_gettop(L) - 1;
        int ok = jr_luabridge_xpcall(L, 0, LUA_MULTRET) == LUA_OK;
        if (!ok && jr_jrlib_signal(L, -1) != NULL)
            return lua_error(L);                     /* snooze, discard */
        lua_createtable(L, 0, 2);                    /* R v.. r */
        lua_insert(L, top + 1);                      /* R r v.. */
        lua_pushboolean(L, ok);
        lua_setfield(L, top + 1, "ok");
        if (!ok) {
            jr_luabridge_errstr(L);
            lua_setfield(L, top + 1, "error");
        } else {
            for (int k = lua_gettop(L) - top - 1; k >= 1; k--)
                lua_rawseti(L, top + 1, k);
        }
        lua_rawseti(L, top, i);                      /* R */
    }
    return 1;
}

/* jobrunner.all{ f1, f2, ... }: runs the functions as branches of the job
 * at once and returns their outcomes in order: { ok = true, ... } with
 * what each returned, or { ok = false, error = message }. */
static int
co_all(lua_State *L)
{
    jr_task *t = jr_task_of(L, "all"), **bs;
    allop *a;
    int n, i, ref;

    luaL_checktype(L, 1, LUA_TTABLE);
    n = (int)luaL_len(L, 1);
    for (i = 1; i <= n; i++) {
        luaL_argcheck(L, lua_geti(L, 1, i) == LUA_TFUNCTION, 1,
                      "must be a list of functions");
        lua_pop(L, 1);
    }
    if (t->job == NULL || !lua_isyieldable(L) || !lua_isyieldable(t->L))
        return all_plain(L, n); /* (the last two: its waits will say) */
    /* everything that may fail (a Lua allocation raises) before the first
     * branch starts: a started branch uses a until it ends; an unstarted
     * one is an idle thread of the job until the job ends */
    bs = lua_newuserdatauv(L, (size_t)n * sizeof *bs + 1, 0);
    for (i = 1; i <= n; i++) {
        if ((bs[i - 1] = jr_task_branch(t, branch_done, NULL, i)) == NULL)
            return luaL_error(L, "jobrunner.all: out of memory");
        lua_geti(L, 1, i);
        lua_xmove(L, bs[i - 1]->L, 1);
    }
    lua_createtable(L, n, 0);
    ref = luaL_ref(L, LUA_REGISTRYINDEX);
    if ((a = calloc(1, sizeof *a)) == NULL) {
        luaL_unref(L, LUA_REGISTRYINDEX, ref);
        return luaL_error(L, "jobrunner.all: out of memory");
    }
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
    a->main = lua_tothread(L, -1);
    lua_pop(L, 1);
    a->t = t;
    a->left = n;
    a->ref = ref;
    for (i = 1; i <= n && !t->job->over; i++) {
        bs[i - 1]->end_arg = a;
        jr_task_run(bs[i - 1], 0);
    }
    if (t->job->over) {         /* a branch ended the job */
        all_cancel(a);
        return jr_task_wait(L, t, NULL, NULL);  /* for good */
    }
    if (a->left == 0) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, a->ref);
        all_cancel(a);
        return 1;
    }
    return jr_task_wait(L, t, all_cancel, a);
}


void
jr_coall_open(lua_State *L)
{
    lua_pushcfunction(L, co_sleep);
    lua_setfield(L, -2, "sleep");
    lua_pushcfunction(L, co_all);
    lua_setfield(L, -2, "all");
}
