/* jrsteps.c - a job's steps. jobrunner.step(name, fn [, opts]) runs fn
 * once per job: its value is recorded, and a later attempt of the job
 * gets the record back without running fn. The records are one JSON
 * array per job, in the order the steps ran (the claim brings it to the
 * worker as job->steps); each is
 *   {"name":N,"value":V,"at":T,"secs":S,"attempt":A}  a step that returned
 *   {"name":N,"cursor":C,"at":T,"secs":S,"attempt":A} one that checkpointed
 * A later attempt must call its steps in the recorded order (the records
 * are matched by place, as River and Rails do), and a name once per
 * attempt; either mistake fails the attempt naming the step call's
 * file:line. The list is kept here as text, whole: the worker sends it
 * (ctx->on_step), the master writes the last one it has of a job in its
 * next transaction. step itself is a few lines of Lua over three C
 * primitives, so that fn may yield (a coroutine job's waits) and a
 * durable step's wait for its commit may too. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>

#include "base/jsondom.h"
#include "base/util.h"
#include "lua/jrsteps.h"
#include "lua/json.h"
#include "lua/jsondec.h"

struct jr_steps {
    jr_jdoc  rec;               /* the job's records at the claim */
    int      next;              /* node of the next record to match, -1 */
    int      n;                 /* steps called in this attempt */
    char   **names;             /* their names, owned */
    int      cap;
    jr_buf   out;               /* the list as it stands: "[...]" */
    jr_buf   val;               /* a value being encoded, kept for the
                                   next */
    size_t   done;              /* bytes of out through the last step that
                                   returned, before the closing "]" */
    int      running;           /* a step's fn runs (names[n - 1]) */
    double   started;           /* its start, epoch seconds */
    int      seq;               /* records handed to on_step */
};

void
jr_steps_free(jr_steps *st)
{
    int i;

    if (st == NULL)
        return;
    jr_jdoc_free(&st->rec);
    for (i = 0; i < st->n; i++)
        free(st->names[i]);
    free(st->names);
    free(st->out.p);
    free(st->val.p);
    free(st);
}

int
jr_steps_made(const jr_jobctx *ctx)
{
    return ctx->steps != NULL ? ctx->steps->seq : 0;
}

const char *
jr_steps_text(jr_jobctx *ctx, size_t *len)
{
    jr_buf *b = ctx->steps != NULL ? &ctx->steps->out : NULL;

    if (b == NULL || b->len == 0 || jr_buf_put(b, "", 1) < 0)
        return NULL;
    *len = --b->len;            /* the NUL stays after it */
    return b->p;
}

/* Raises the message prefixed by the file:line of the handler's call:
 * level 1 for checkpoint (a C function called by the handler), 2 for
 * step (begin and finish are called by step's Lua). */
static int
raise_at(lua_State *L, int level, const char *fmt, ...)
{
    va_list ap;

    luaL_where(L, level);
    va_start(ap, fmt);
    lua_pushvfstring(L, fmt, ap);
    va_end(ap);
    lua_concat(L, 2);
    return lua_error(L);
}

static void
put_s(jr_buf *b, const char *s)
{
    jr_buf_put(b, s, strlen(s));
}

/* Appends u as a whole number, or (micro) as millionths: "S.UUUUUU"
 * (the records' numbers, without printf). */
static void
put_num(jr_buf *b, unsigned long long u, int micro)
{
    char d[32], *p = d + sizeof d;
    int i;

    for (i = 0; micro && i < 6; i++, u /= 10)
        *--p = (char)('0' + u % 10);
    if (micro)
        *--p = '.';
    do
        *--p = (char)('0' + u % 10);
    while ((u /= 10) > 0);
    jr_buf_put(b, p, (size_t)(d + sizeof d - p));
}

/* The job's steps, made at its first step call: its records parsed (a
 * list that does not parse is ignored, with a warning: the steps run
 * again). */
static jr_steps *
steps_of(lua_State *L, jr_jobctx *ctx)
{
    jr_steps *st = ctx->steps;
    const char *text = ctx->job->steps;
    jr_err err;

    if (st != NULL)
        return st;
    if ((st = calloc(1, sizeof *st)) == NULL)
        luaL_error(L, "jobrunner.step: out of memory");
    st->next = -1;
    if (text != NULL) {
        if (jr_jdoc_parse(&st->rec, text, strlen(text), "steps", &err) < 0
            || st->rec.n[0].type != JR_JSON_ARRAY)
            jr_jdoc_free(&st->rec);
        else
            st->next = st->rec.n[0].first;
    }
    put_s(&st->out, "[]");
    st->done = 1;
    ctx->steps = st;
    ctx->steps_sent = jr_mono();    /* the first record waits for company */
    if (st->out.oom)
        luaL_error(L, "jobrunner.step: out of memory");
    return st;
}

/* Sets the last record of the list (after st->done): the running step's
 * checkpoint, or its end (then it stays). The value at idx is encoded
 * under key ("value" or "cursor"). Raises on a value with no JSON or
 * past max_result. */
static void
put_record(lua_State *L, jr_jobctx *ctx, jr_steps *st, const char *key,
           int idx, int done)
{
    jr_buf *b = &st->out, *v = &st->val;
    char msg[300];
    double now = jr_now();
    long long at = now > 0 ? (long long)(now * 1e6) : 0;
    long long us = (long long)((now - st->started) * 1e6);
    int rc;

    if (us < 0)
        us = 0;                 /* the wall clock stepped back */

    jr_buf_reset(v);
    rc = jr_json_encode_value(L, idx, v, msg, sizeof msg);
    if (rc == 0 && ctx->max_result > 0 && v->len - 1 > ctx->max_result)
        snprintf(msg, sizeof msg, "%zu bytes, over max_result (%zu)",
                 v->len - 1, ctx->max_result), rc = -1;
    if (rc == 0 && st->done + v->len + 256 > JR_STEPS_MAX)
        snprintf(msg, sizeof msg, "%zu bytes, which would take the job's "
                 "step records past %u bytes (JR_STEPS_MAX)", v->len - 1,
                 JR_STEPS_MAX), rc = -1;
    if (rc < 0 || v->oom) {
        v->oom = 0;
        raise_at(L, done ? 2 : 1, "jobrunner.%s: step '%s': its %s: %s",
                 done ? "step" : "checkpoint", st->names[st->n - 1], key,
                 rc < 0 ? msg : "out of memory");
    }
    /* no printf: it took a sixth of a no-op step */
    b->len = st->done;
    put_s(b, st->done > 1 ? ",{\"name\":\"" : "{\"name\":\"");
    put_s(b, st->names[st->n - 1]);
    put_s(b, done ? "\",\"value\":" : "\",\"cursor\":");
    jr_buf_put(b, v->p, v->len - 1);
    put_s(b, ",\"at\":");
    put_num(b, (unsigned long long)at, 1);
    put_s(b, ",\"secs\":");
    put_num(b, (unsigned long long)us, 1);
    put_s(b, ",\"attempt\":");
    put_num(b, (unsigned long long)ctx->job->attempt, 0);
    put_s(b, "}]");
    if (b->oom)
        luaL_error(L, "jobrunner.step: out of memory");
    if (done)
        st->done = b->len - 1;
}

/* The record node r's key, decoded onto the stack; 0, or -1 when r has
 * no such key.  [-0, +(1|0), e] */
static int
push_field(lua_State *L, jr_steps *st, int r, const char *key)
{
    int v = jr_jdoc_get(&st->rec, r, key);
    char msg[200];

    if (v < 0)
        return -1;
    if (jr_json_decode_safe(L, st->rec.n[v].at, st->rec.n[v].len, msg,
                            sizeof msg) < 0)
        return luaL_error(L, "jobrunner.step: step's record: %s", msg);
    return 0;
}

/* The where of the step call: the handler's line, two levels up (the Lua
 * step function is one).  [-0, +1, m] */
static const char *
where(lua_State *L)
{
    luaL_where(L, 2);
    return lua_tostring(L, -1);
}

/* Checks name against the attempt's and the record's; raises naming the
 * step call's file:line. Returns the record node to replay, or -1. */
static int
match(lua_State *L, jr_steps *st, const char *name)
{
    int i, r = st->next, nm;
    char *rec;

    for (i = 0; i < st->n; i++)
        if (strcmp(st->names[i], name) == 0)
            return raise_at(L, 2, "jobrunner.step: step '%s' is called "
                            "twice in one attempt (step names are unique "
                            "in a job)", name);
    if (r < 0)
        return -1;
    nm = jr_jdoc_get(&st->rec, r, "name");
    if (nm < 0 || !jr_jdoc_is(&st->rec, nm, name)) {
        rec = nm < 0 ? NULL : jr_jdoc_str(&st->rec, nm);
        lua_pushfstring(L, "%sjobrunner.step: step '%s' is step %d, where "
                        "the job's records have '%s' (steps must run in the "
                        "order they were recorded)", where(L), name,
                        st->n + 1, rec ? rec : "?");
        free(rec);
        return lua_error(L);
    }
    return r;
}

/* A durable record's number, which the master's answer names: from a
 * counter that starts at a random place in each worker, so that an answer
 * for another worker's or another attempt's record of the same job (a job
 * handed on after its worker died) never ends this one's wait. */
static lua_Integer
token(void)
{
    static unsigned next;

    if (next == 0)
        next = (unsigned)getpid() * 2654435761u ^ (unsigned)(jr_now() * 1e6);
    next = (next + 1) & 0x7fffffff;
    if (next == 0)
        next = 1;
    return (lua_Integer)next;
}

/* begin(name, fn, opts): true, value for a step replayed; else false,
 * cursor (nil the first time), and fn is to run. */
static int
steps_begin(lua_State *L)
{
    size_t len;
    const char *name;
    jr_jobctx *ctx;
    jr_steps *st;
    jr_err err;
    int r;

    if (!lua_isstring(L, 1))    /* a number is its text, as in Lua */
        return raise_at(L, 2, "jobrunner.step: its name (argument 1) is %s, "
                        "not a string", luaL_typename(L, 1));
    name = lua_tolstring(L, 1, &len);
    if (jr_name_check_len(name, len, "step name", &err) < 0)
        return raise_at(L, 2, "jobrunner.step: %s", err.msg);
    if (lua_type(L, 2) != LUA_TFUNCTION)
        return raise_at(L, 2, "jobrunner.step: step '%s': its function "
                        "(argument 2) is %s", name, luaL_typename(L, 2));
    if (!lua_isnoneornil(L, 3) && lua_type(L, 3) != LUA_TTABLE)
        return raise_at(L, 2, "jobrunner.step: step '%s': its options "
                        "(argument 3) are %s, not a table", name,
                        luaL_typename(L, 3));
    ctx = jr_jrlib_job(L, "step");
    st = steps_of(L, ctx);
    if (st->running)
        return raise_at(L, 2, "jobrunner.step: step '%s' inside step '%s' "
                        "(steps do not nest)", name, st->names[st->n - 1]);
    r = match(L, st, name);
    if (st->n == st->cap) {
        int cap = st->cap ? 2 * st->cap : 16;
        char **p = realloc(st->names, (size_t)cap * sizeof *p);
        if (p == NULL)
            return luaL_error(L, "jobrunner.step: out of memory");
        st->names = p;
        st->cap = cap;
    }
    if ((st->names[st->n] = strdup(name)) == NULL)
        return luaL_error(L, "jobrunner.step: out of memory");
    st->n++;
    if (r >= 0)
        st->next = st->rec.n[r].next;
    if (r >= 0 && jr_jdoc_get(&st->rec, r, "value") >= 0) {
        /* recorded: its record again in this attempt's list */
        jr_buf *b = &st->out;
        b->len = st->done;
        put_s(b, st->done > 1 ? "," : "");
        jr_buf_put(b, st->rec.n[r].at, st->rec.n[r].len);
        put_s(b, "]");
        if (b->oom)
            return luaL_error(L, "jobrunner.step: out of memory");
        st->done = b->len - 1;
        lua_pushboolean(L, 1);                       /* true */
        push_field(L, st, r, "value");               /* true v */
        return 2;
    }
    if (r >= 0) {
        /* its cursor stays the list's last record until a checkpoint
           replaces it: a failure (abort) keeps it for the next attempt */
        jr_buf *b = &st->out;
        b->len = st->done;
        put_s(b, st->done > 1 ? "," : "");
        jr_buf_put(b, st->rec.n[r].at, st->rec.n[r].len);
        put_s(b, "]");
        if (b->oom)
            return luaL_error(L, "jobrunner.step: out of memory");
    }
    st->running = 1;
    st->started = jr_now();
    lua_pushboolean(L, 0);                           /* false */
    if (r < 0 || push_field(L, st, r, "cursor") < 0)
        lua_pushnil(L);                              /* false cursor */
    return 2;
}

/* finish(value, opts): records the running step's value; returns the
 * number of the record to wait for (a durable step), or 0. */
static int
steps_finish(lua_State *L)
{
    jr_jobctx *ctx = jr_jrlib_job(L, "step");
    jr_steps *st = ctx->steps;
    int durable = ctx->durable_steps;

    if (st == NULL || !st->running)
        return luaL_error(L, "jobrunner.step: no step is running");
    if (lua_istable(L, 2)) {
        lua_getfield(L, 2, "durable");               /* v opts d */
        if (!lua_isnil(L, -1))
            durable = lua_toboolean(L, -1);
        lua_pop(L, 1);                               /* v opts */
    }
    put_record(L, ctx, st, "value", 1, 1);
    st->running = 0;            /* after: a value refused ends it in abort */
    st->seq++;
    lua_pushinteger(L, durable ? token() : 0);
    if (ctx->on_step != NULL && !durable)
        ctx->on_step(ctx->hook_arg, L, 0);
    return 1;
}

/* abort(): the step's frame is left by an error (a pcall may catch it
 * and go on): the step ends unrecorded but keeps its place in the list,
 * with its last cursor or none, so that the steps after it are matched
 * and the next attempt runs it again. */
static int
steps_abort(lua_State *L)
{
    jr_jobctx *ctx = jr_jrlib_job(L, "step");
    jr_steps *st = ctx->steps;
    jr_buf *b;

    if (st == NULL || !st->running)
        return 0;
    st->running = 0;
    b = &st->out;
    if (b->len - 1 == st->done) {           /* no checkpoint: its name */
        b->len = st->done;
        put_s(b, st->done > 1 ? ",{\"name\":\"" : "{\"name\":\"");
        put_s(b, st->names[st->n - 1]);
        put_s(b, "\",\"attempt\":");
        put_num(b, (unsigned long long)ctx->job->attempt, 0);
        put_s(b, "}]");
        if (b->oom)
            return luaL_error(L, "jobrunner.step: out of memory");
    }
    st->done = b->len - 1;
    st->seq++;
    if (ctx->on_step != NULL)
        ctx->on_step(ctx->hook_arg, L, 0);
    return 0;
}

/* wait(seq): a durable step's wait for the commit of its record. */
static int
steps_wait(lua_State *L)
{
    int seq = (int)luaL_checkinteger(L, 1);
    jr_jobctx *ctx = jr_jrlib_job(L, "step");

    if (ctx->on_step == NULL)
        return 0;
    return ctx->on_step(ctx->hook_arg, L, seq);
}

/* jobrunner.checkpoint(cursor): how far the running step got; its next
 * run (a later attempt) gets cursor. When the runner asks its jobs back,
 * the job goes back here, its attempt not counted. */
static int
jrlib_checkpoint(lua_State *L)
{
    jr_jobctx *ctx = jr_jrlib_job(L, "checkpoint");
    jr_steps *st = ctx->steps;

    if (st == NULL || !st->running)
        return luaL_error(L, "jobrunner.checkpoint: called outside a step");
    if (lua_isnone(L, 1))
        lua_pushnil(L);
    put_record(L, ctx, st, "cursor", 1, 0);
    st->seq++;
    if (ctx->on_step != NULL)
        ctx->on_step(ctx->hook_arg, L, 0);
    if (ctx->handback != NULL && ctx->handback(ctx->hook_arg))
        return jr_jrlib_raise_kind(L, ctx, JR_RELEASE, 0,
                              "handed back at a checkpoint");
    return 0;
}

/* step as handlers call it: the primitives are its upvalues; an error
 * out of fn or finish closes `ended`, which aborts the step. */
static const char step_lua[] =
    "local begin, finish, wait, abort = ...\n"
    "local ended = setmetatable({}, { __close = function() abort() end })\n"
    "return function(name, fn, opts)\n"
    "  local replayed, v = begin(name, fn, opts)\n"
    "  if replayed then return v end\n"
    "  local _ <close> = ended\n"
    "  v = fn(v)\n"
    "  local seq = finish(v, opts)\n"
    "  if seq > 0 then wait(seq) end\n"
    "  return v\n"
    "end\n";

void
jr_steps_open(lua_State *L)
{
    if (luaL_loadbuffer(L, step_lua, sizeof step_lua - 1, "=jobrunner.step")
        != LUA_OK)                                   /* M chunk | M msg */
        lua_error(L);
    lua_pushcfunction(L, steps_begin);               /* M chunk b */
    lua_pushcfunction(L, steps_finish);              /* M chunk b f */
    lua_pushcfunction(L, steps_wait);                /* M chunk b f w */
    lua_pushcfunction(L, steps_abort);               /* M chunk b f w a */
    lua_call(L, 4, 1);                               /* M step */
    lua_setfield(L, -2, "step");                     /* M */
    lua_pushcfunction(L, jrlib_checkpoint);          /* M cp */
    lua_setfield(L, -2, "checkpoint");               /* M */
}
