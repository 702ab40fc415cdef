/* coown.c - the coroutines a handler makes itself (coroutine.create,
 * coroutine.wrap) in a job that runs in a coroutine (inflight > 1): a
 * waiting function called in one (jobrunner.sleep, http, exec, all)
 * yields it with a mark, and the worker's coroutine.resume and
 * coroutine.wrap, which replace Lua's, pass the mark on: the thread that
 * resumed it yields in turn, up to the job's own thread, which waits on
 * the loop as for a wait of its own; what the wait returns goes back
 * down the same way. To the handler the resume just waits, as in a plain
 * job, under the job's timeout and cancel. A job's own thread, and a
 * coroutine that waits for a resume in progress, cannot be resumed or
 * closed by the handler's code (another job's, a branch's): it would run
 * that job's code, or end its wait early. An argument that is no thread
 * is blamed on the handler's line, as Lua's. Uses worker_int.h. */
#include <lauxlib.h>
#include <lua.h>

#include "worker/worker_int.h"

static char wait_mark;          /* its address: the mark, a light userdata */

/* resume close yield isyieldable unwait isjob WAIT -> the worker's
 * coroutine.resume and coroutine.close; a thread that cannot yield the
 * mark on (inside a C function's callback) drops the wait and gives the
 * mark back: the wait raises. busy: the coroutines whose wait a resume
 * passes on, for good if that job ends first. */
static const char through[] =
    "local resume, close, yield, isyieldable, unwait, isjob, WAIT = ...\n"
    "local select, error, type = select, error, type\n"
    "local busy = setmetatable({}, { __mode = 'k' })\n"
    "local through\n"
    "local function back(co, ...)\n"
    "  busy[co] = nil\n"
    "  return through(co, resume(co, ...))\n"
    "end\n"
    "function through(co, ok, ...)\n"
    "  if ok and select('#', ...) == 1 and ... == WAIT then\n"
    "    if isyieldable() then\n"
    "      busy[co] = true\n"
    "      return back(co, yield(WAIT))\n"
    "    end\n"
    "    unwait()\n"
    "    return through(co, resume(co, WAIT))\n"
    "  end\n"
    "  return ok, ...\n"
    "end\n"
    "local function refused(co, verb)\n"
    "  if type(co) ~= 'thread' then\n"
    "    error(\"bad argument #1 to '\" .. verb .. \"' (coroutine \"\n"
    "          .. 'expected)', 3)\n"
    "  elseif busy[co] then\n"
    "    return 'cannot ' .. verb .. ' a coroutine while it waits '\n"
    "           .. '(jobrunner.sleep, http, exec or all)'\n"
    "  elseif isjob(co) then\n"
    "    return 'cannot ' .. verb .. \" a job's own coroutine\"\n"
    "  end\n"
    "end\n"
    "return function(co, ...)\n"
    "  local no = refused(co, 'resume')\n"
    "  if no then return false, no end\n"
    "  return through(co, resume(co, ...))\n"
    "end, function(co)\n"
    "  local no = refused(co, 'close')\n"
    "  if no then error(no, 2) end\n"
    "  return close(co)\n"
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

/* isjob(v): whether v is a thread the worker made for a job (its own,
 * a branch's), live or kept. */
static int
co_isjob(lua_State *L)
{
    lua_getfield(L, LUA_REGISTRYINDEX, JR_JOB_THREADS_KEY); /* v T */
    lua_pushvalue(L, 1);                             /* v T v */
    lua_pushboolean(L, lua_type(L, 1) == LUA_TTHREAD &&
                    lua_rawget(L, -2) != LUA_TNIL);  /* v T x b */
    return 1;
}

int
jr_coown_open(lua_State *L, jr_err *err)
{
    lua_newtable(L);                                 /* T */
    lua_createtable(L, 0, 1);                        /* T mt */
    lua_pushliteral(L, "k");                         /* T mt k */
    lua_setfield(L, -2, "__mode");                   /* T mt */
    lua_setmetatable(L, -2);                         /* T */
    lua_setfield(L, LUA_REGISTRYINDEX, JR_JOB_THREADS_KEY);
    if (luaL_loadbuffer(L, through, sizeof through - 1,
                        "=(jobrunner coroutines)") != LUA_OK) {
        jr_fail(err, JR_ELUA, "worker: %s", lua_tostring(L, -1));
        lua_pop(L, 1);
        return -1;
    }                                                /* f */
    lua_getglobal(L, "coroutine");                   /* f co */
    lua_getfield(L, -1, "resume");                   /* f co r */
    lua_getfield(L, -2, "close");                    /* f co r c */
    lua_getfield(L, -3, "yield");                    /* f co r c y */
    lua_getfield(L, -4, "isyieldable");              /* f co r c y i */
    lua_pushcfunction(L, co_unwait);                 /* f co r c y i u */
    lua_pushcfunction(L, co_isjob);                  /* f co r c y i u j */
    jr_coown_push_mark(L);                           /* f co r c y i u j W */
    lua_remove(L, -8);                               /* f r c y i u j W */
    if (jr_luabridge_pcall(L, 7, 2, err) < 0)           /* resume close */
        return -1;
    lua_getglobal(L, "coroutine");                   /* resume close co */
    lua_insert(L, -3);                               /* co resume close */
    lua_setfield(L, -3, "close");                    /* co resume */
    lua_pushvalue(L, -1);                            /* co resume resume */
    lua_setfield(L, -3, "resume");                   /* co resume */
    lua_pushcclosure(L, co_wrap, 1);                 /* co wrap */
    lua_setfield(L, -2, "wrap");                     /* co */
    lua_pop(L, 1);
    return 0;
}
