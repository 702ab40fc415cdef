/* jrspan.c - jobrunner.span(name, fn, ...) in handlers (docs/tracing.md):
 * calls fn(...) and returns what it returns, in a span of its own, a
 * child of the span running now (the attempt's, or an enclosing
 * jobrunner.span's); pushes and jobrunner.http requests made inside are
 * its children. An error in fn marks the span failed and goes on up as
 * it was. fn may wait (jobrunner.http, sleep in a coroutine job): the
 * call continues after a yield. Unsampled or with tracing off, fn is
 * called as it is, and nothing is recorded. Uses jrlib.h for the job's
 * context, trace.h for the span. */
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "base/trace.h"
#include "base/util.h"
#include "lua/jrlib.h"

#define SPANS_MAX 1000          /* spans of jobrunner.span an attempt keeps */

typedef jr_openspan open_span; /* a span open around fn, below its stack */

/* o no longer open in t (its end came): out of t's list */
static void
unlist(jr_jobtrace *t, const open_span *o)
{
    int i;

    for (i = t->nopen - 1; i >= 0; i--)
        if (memcmp(t->open[i].id, o->id, 8) == 0) {
            memmove(t->open + i, t->open + i + 1,
                    (size_t)(t->nopen - i - 1) * sizeof *t->open);
            t->nopen--;
            return;
        }
}

/* The call's end: its results (or error) above the open span at 1. */
static int
span_end(lua_State *L, int status, lua_KContext k)
{
    open_span *o = lua_touserdata(L, 1);
    jr_jobctx *ctx = jr_jrlib_job(L, "span");
    jr_jobtrace *t = ctx->trace;
    jr_span s = {0};
    const char *msg = NULL;

    (void)k;
    if (t != NULL && t->active) {
        unlist(t, o);
        memcpy(t->cur, o->parent, 8);
        memcpy(s.trace, t->trace, 16);
        memcpy(s.id, o->id, 8);
        memcpy(s.parent, o->parent, 8);
        s.has_parent = 1;
        s.kind = JR_SPAN_INTERNAL;
        s.start = o->start;
        s.end = jr_now();
        if (status != LUA_OK && status != LUA_YIELD &&
            jr_jrlib_signal(L, -1) == NULL) {   /* a snooze is no failure */
            s.error = 1;
            msg = luaL_tolstring(L, -1, NULL);       /* .. err msg */
        }
        if (jr_span_encode(&s, o->name, msg, &t->done) == 0)
            t->ndone++;
        if (msg != NULL)
            lua_pop(L, 1);                           /* .. err */
        jr_span_free(&s);
    }
    if (status != LUA_OK && status != LUA_YIELD)
        return lua_error(L);
    return lua_gettop(L) - 1;
}

static int
plain_end(lua_State *L, int status, lua_KContext k)
{
    (void)status;
    (void)k;
    return lua_gettop(L);
}

/* jobrunner.span(name, fn, ...)  [-0, +n, e] */
static int
jrspan_span(lua_State *L)
{
    size_t len;
    const char *name = luaL_checklstring(L, 1, &len);
    jr_jobctx *ctx;
    jr_jobtrace *t;
    open_span *o;
    int nargs;

    luaL_checktype(L, 2, LUA_TFUNCTION);
    if (len == 0 || len > 128 || strlen(name) != len)
        return luaL_error(L, "jobrunner.span: the name must have 1 to 128 "
                          "bytes and no NUL");
    ctx = jr_jrlib_job(L, "span");
    t = ctx->trace;
    nargs = lua_gettop(L) - 2;
    if (t == NULL || !t->active || !t->sampled || t->ndone >= SPANS_MAX) {
        lua_remove(L, 1);                            /* fn args */
        lua_callk(L, nargs, LUA_MULTRET, 0, plain_end);
        return plain_end(L, LUA_OK, 0);
    }
    o = lua_newuserdatauv(L, sizeof *o, 0);          /* name fn args o */
    memcpy(o->name, name, len + 1);
    memcpy(o->parent, t->cur, 8);
    jr_trace_random(o->id, 8);
    o->start = jr_now();
    lua_replace(L, 1);                               /* o fn args */
    memcpy(t->cur, o->id, 8);
    if (t->nopen < JR_OPEN_SPANS)   /* deeper: closed by its own end only */
        t->open[t->nopen++] = *o;
    return span_end(L, lua_pcallk(L, nargs, LUA_MULTRET, 0, 0, span_end), 0);
}

void
jr_jrspan_register(lua_State *L)
{
    lua_pushcfunction(L, jrspan_span);
    lua_setfield(L, -2, "span");
}
