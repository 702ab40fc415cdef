/* coown.c - the coroutines a handler makes itself (coroutine.create,
 * coroutine.wrap) in a job that runs in a coroutine (inflight > 1): a
 * waiting function called in one (jobrunner.sleep, http, exec, all)
 * yields it with a mark, and the worker's coroutine.resume and
 * coroutine.wrap, which replace Lua's, pass the mark on: the thread that
 * resumed it yields in turn, up to the job's own thread, which waits on
 * the loop as for a wait of its own; what the wait returns goes back
 * down the same way. To the handler the resume just waits, as in a plain
 * job, under the job's timeout and cancel. Uses worker_int.h. */
#include <lauxlib.h>
#include <lua.h>

#include "worker/worker_int.h"

static char wait_mark;          /* its address: the mark, a light userdata */

/* resume yield isyieldable unwait WAIT -> the worker's coroutine.resume;
 * a thread that cannot yield the mark on (inside a C function's callback)
 * drops the wait and gives the mark back: the wait raises */
static const char through[] =
    "local resume, yield, isyieldable, unwait, WAIT = ...\n"
    "local select = select\n"
    "local function through(co, ok, ...)\n"
    "  if ok and select('#', ...) == 1 and ... == WAIT then\n"
    "    if isyieldable() then\n"
    "      return through(co, resume(co, yield(WAIT)))\n"
    "    end\n"
    "    unwait()\n"
    "    return through(co, resume(co, WAIT))\n"
    "  end\n"
    "  return ok, ...\n"
    "end\n"
    "return function(co, ...)\n"
    "  return through(co, resume(co, ...))\n"
    "end\n";

/* After the worker's resume of the coroutine at upvalue 1: its values,
 * or its error raised as Lua's coroutine.wrap raises it. */
static int
wrap_k(lua_State *L, int status, lua_KContext ctx)
{
    lua_State *co = lua_tothread(L, lua_upvalueindex(1));
    int stat;

    (void)status;
    (void)ctx;
    if (lua_toboolean(L, 1))
        return lua_gettop(L) - 1;
    stat = lua_status(co);
    if (stat != LUA_OK && stat != LUA_YIELD) {
        stat = lua_resetthread(co);     /* its to-be-closed variables */
        lua_xmove(co, L, 1);
    }
    if (stat != LUA_ERRMEM && lua_type(L, -1) == LUA_TSTRING) {
        luaL_where(L, 1);
        lua_insert(L, -2);
        lua_concat(L, 2);
    }
    return lua_error(L);
}

/* The function coroutine.wrap returns: upvalues the coroutine and the
 * worker's resume. */
static int
wrap_call(lua_State *L)
{
    int n = lua_gettop(L);

    lua_pushvalue(L, lua_upvalueindex(2));           /* a.. resume */
    lua_pushvalue(L, lua_upvalueindex(1));           /* a.. resume co */
    lua_rotate(L, 1, 2);                             /* resume co a.. */
    lua_callk(L, n + 1, LUA_MULTRET, 0, wrap_k);     /* ok v.. */
    return wrap_k(L, LUA_OK, 0);
}

/* coroutine.wrap(f), upvalue the worker's resume. */
static int
co_wrap(lua_State *L)
{
    lua_State *co;

    luaL_checktype(L, 1, LUA_TFUNCTION);
    co = lua_newthread(L);                           /* f co */
    lua_pushvalue(L, 1);
    lua_xmove(L, co, 1);
    lua_pushvalue(L, lua_upvalueindex(1));           /* f co resume */
    lua_pushcclosure(L, wrap_call, 2);
    return 1;
}

/* Drops the wait of the task being resumed, which a coroutine it
 * resumed began and cannot wait for. */
static int
co_unwait(lua_State *L)
{
    jr_task *t = jr_task_of(L, "wait");

    if (t->cancel != NULL)
        t->cancel(t->op);
    t->cancel = NULL;
    t->op = NULL;
    t->waiting = 0;
    return 0;
}

int
jr_coown_is_mark(lua_State *L, int idx)
{
    return lua_touserdata(L, idx) == &wait_mark;
}

void
jr_coown_push_mark(lua_State *L)
{
    lua_pushlightuserdata(L, &wait_mark);
}

int
jr_coown_open(lua_State *L, jr_err *err)
{
    if (luaL_loadbuffer(L, through, sizeof through - 1,
                        "=(jobrunner coroutines)") != LUA_OK) {
        jr_fail(err, JR_ELUA, "worker: %s", lua_tostring(L, -1));
        lua_pop(L, 1);
        return -1;
    }                                                /* f */
    lua_getglobal(L, "coroutine");                   /* f co */
    lua_getfield(L, -1, "resume");                   /* f co r */
    lua_getfield(L, -2, "yield");                    /* f co r y */
    lua_getfield(L, -3, "isyieldable");              /* f co r y i */
    lua_pushcfunction(L, co_unwait);                 /* f co r y i u */
    jr_coown_push_mark(L);                           /* f co r y i u W */
    lua_remove(L, -6);                               /* f r y i u W */
    if (jr_script_pcall(L, 5, 1, err) < 0)           /* resume */
        return -1;
    lua_getglobal(L, "coroutine");                   /* resume co */
    lua_pushvalue(L, -2);                            /* resume co resume */
    lua_setfield(L, -2, "resume");                   /* resume co */
    lua_insert(L, -2);                               /* co resume */
    lua_pushcclosure(L, co_wrap, 1);                 /* co wrap */
    lua_setfield(L, -2, "wrap");                     /* co */
    lua_pop(L, 1);
    return 0;
}
