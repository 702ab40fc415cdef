/* task.c - a job's tasks: the Lua threads a coroutine job runs on (its
 * own, and one per branch of jobrunner.all), which thread is whose, the
 * threads kept for the next tasks, and the wait a task yields on (the
 * wake and the resume are co.c's). Owns the registry's table of threads.
 * Uses worker_int.h, luabridge.h. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "worker/worker_int.h"

#define THREADS_KEY "jobrunner.threads"  /* registry: thread -> task */
#define CANNOT_WAIT "jobrunner: cannot wait here (inside a metamethod or " \
                    "a C function's callback)"

static worker *the_worker;      /* one per process */

static void
task_register(lua_State *L, jr_task *t)
{
    lua_getfield(L, LUA_REGISTRYINDEX, THREADS_KEY); /* T */
    lua_rawgeti(L, LUA_REGISTRYINDEX, t->ref);       /* T th */
    lua_pushlightuserdata(L, t);                     /* T th t */
    lua_rawset(L, -3);                               /* T */
    lua_getfield(L, LUA_REGISTRYINDEX, JR_JOB_THREADS_KEY); /* T J */
    lua_rawgeti(L, LUA_REGISTRYINDEX, t->ref);       /* T J th */
    lua_pushboolean(L, 1);                           /* T J th true */
    lua_rawset(L, -3);                               /* T J */
    lua_pop(L, 2);
}

/* Makes a task bound to job cj's limit on a thread with nothing on its
 * stack: a kept one whose function returned (a Lua thread can run
 * another function then), else a new one. NULL when out of memory. */
jr_task *
jr_task_new(cojob *cj)
{
    lua_State *L = cj->w->L;
    jr_co *co = cj->w->co;
    jr_task *t;

    if (co->npool > 0) {
        t = co->pool[--co->npool];
        memset(&t->on_end, 0, sizeof *t - offsetof(jr_task, on_end));
    } else {
        lua_State *th = lua_newthread(L);            /* th (may raise) */
        if ((t = calloc(1, sizeof *t)) == NULL) {
            lua_pop(L, 1);
            return NULL;
        }
        t->L = th;
        t->ref = luaL_ref(L, LUA_REGISTRYINDEX);     /* (nothing) */
        task_register(L, t);
    }
    t->job = cj;
    jr_luabridge_bind(t->L, &cj->lim);
    t->next = cj->tasks;
    cj->tasks = t;
    return t;
}

/* Ends t's wait (cancel), and keeps its thread for another task if its
 * function returned, else forgets it. */
void
jr_task_free(lua_State *L, jr_task *t)
{
    jr_co *co = the_worker->co;

    if (t->cancel != NULL)
        t->cancel(t->op);
    t->cancel = NULL;
    t->job = NULL;
    jr_luabridge_bind(t->L, NULL); /* a thread the handler kept stays none's */
    if (co->npool < jr_co_kept(the_worker) && lua_status(t->L) == LUA_OK &&
        lua_gettop(t->L) == 0) {
        co->pool[co->npool++] = t;
        return;
    }
    lua_getfield(L, LUA_REGISTRYINDEX, THREADS_KEY); /* T */
    lua_rawgeti(L, LUA_REGISTRYINDEX, t->ref);       /* T th */
    lua_pushnil(L);
    lua_rawset(L, -3);                               /* T */
    lua_pop(L, 1);
    luaL_unref(L, LUA_REGISTRYINDEX, t->ref);
    free(t);
}

jr_task *
jr_task_lookup(lua_State *L)
{
    jr_task *t;

    lua_getfield(L, LUA_REGISTRYINDEX, THREADS_KEY); /* T */
    lua_pushthread(L);                               /* T th */
    lua_rawget(L, -2);                               /* T t */
    t = lua_touserdata(L, -1);
    lua_pop(L, 2);
    return t;
}

jr_task *
jr_task_of(lua_State *L, const char *fn)
{
    worker *w = the_worker;
    jr_task *t = jr_task_lookup(L);

    if (t != NULL && t->job != NULL && !t->job->over)
        return t;
    t = w->co->task;            /* a coroutine the handler made resumed */
    if (t != NULL && t->job != NULL && !t->job->over)
        return t;
    if (w->ctx.job != NULL) {   /* the plain job, on any of its threads */
        w->co->plain.L = L;
        return &w->co->plain;
    }
    luaL_error(L, "jobrunner.%s: called outside a running job", fn);
    return NULL;
}

struct event_base *
jr_task_base(const jr_task *t)
{
    (void)t;
    return the_worker->base;
}

lua_State *
jr_task_thread(const jr_task *t)
{
    return t->L;
}

static int
wait_k(lua_State *L, int status, lua_KContext ctx)
{
    (void)status;
    if (lua_gettop(L) - (int)ctx == 1 && jr_coown_is_mark(L, -1))
        return luaL_error(L, "%s", CANNOT_WAIT);
    return lua_gettop(L) - (int)ctx;    /* what the wake pushed */
}

int
jr_task_wait(lua_State *L, jr_task *t, jr_task_cancel_fn cancel, void *op)
{
    int top = lua_gettop(L);

    if (t->job != NULL && t->cancel != NULL)
        t->cancel(t->op);       /* one no resume passed on (a resume not
                                   the worker's): it would wake this one */
    t->cancel = cancel;
    t->op = op;
    t->woken = 0;
    if (t->job == NULL)
        return jr_wait_plain(the_worker, L, t, "wait");
    if (!lua_isyieldable(L) || !lua_isyieldable(t->L)) {
        t->cancel = NULL;
        if (cancel != NULL)
            cancel(op);
        return luaL_error(L, "%s", CANNOT_WAIT);
    }
    t->waiting = 1;
    if (L == t->L)
        return lua_yieldk(L, 0, top, wait_k);
    jr_coown_push_mark(L);      /* a coroutine the handler made: its
                                   resumers pass the mark on to t's */
    return lua_yieldk(L, 1, top, wait_k);
}

jr_task *
jr_task_branch(jr_task *t, jr_task_end_fn on_end, void *arg, int slot)
{
    jr_task *b = jr_task_new(t->job);

    if (b != NULL) {
        b->on_end = on_end;
        b->end_arg = arg;
        b->slot = slot;
    }
    return b;
}

void
jr_task_open(worker *w)
{
    the_worker = w;
    lua_newtable(w->L);
    lua_setfield(w->L, LUA_REGISTRYINDEX, THREADS_KEY);
}
