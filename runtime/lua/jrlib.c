/* jrlib.c - the handler module: require "jobrunner" inside handlers (the
 * producer module is "jobrunner.client", luaclient.c). push() keeps
 * follow-up jobs in the job's context; the worker sends them with the
 * result and the master inserts them in the same transaction that deletes
 * the finished job, so they exist only if it succeeded; their options are
 * read by luaopts.c and their payloads encoded by json.c, as the producer
 * module's are, and the module carries json.c's null and array() markers
 * and its json.encode/decode too. snooze() and discard() unwind the handler by raising a
 * jobrunner.signal userdata that the traceback handler lets through
 * untouched. */
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "base/jsontext.h"
#include "base/trace.h"
#include "lua/jrlib.h"
#include "lua/jrwait.h"
#include "lua/json.h"
#include "lua/luaopts.h"
#include "lua/luabridge.h"
#include "lua/jrsteps.h"
#include "base/util.h"

/* registry[&ctx_key]: lightuserdata ctx (an address as the key: no
 * string hashed on each jobrunner.* call) */
static const char ctx_key;

/* ctx, or the context of the job whose coroutine L is. */
static jr_jobctx *
of_thread(lua_State *L, jr_jobctx *ctx)
{
    if (ctx != NULL && ctx->of_thread != NULL) {
        int main = lua_pushthread(L);                /* th */
        lua_pop(L, 1);                               /* (nothing) */
        jr_jobctx *c = main ? NULL : ctx->of_thread(ctx->hook_arg, L);
        if (c != NULL)
            return c;
    }
    return ctx;
}

static jr_jobctx *
get_ctx(lua_State *L)
{
    jr_jobctx *ctx;

    lua_rawgetp(L, LUA_REGISTRYINDEX, &ctx_key);     /* ctx */
    ctx = lua_touserdata(L, -1);
    lua_pop(L, 1);                                   /* (nothing) */
    return of_thread(L, ctx);
}

jr_jobctx *
jr_jrlib_ctx_of(lua_State *L, jr_jobctx *ctx)
{
    ctx = of_thread(L, ctx);
    return ctx != NULL && ctx->job != NULL ? ctx : NULL;
}

void
jr_jrlib_push_ctx(lua_State *L)
{
    lua_rawgetp(L, LUA_REGISTRYINDEX, &ctx_key);     /* ctx */
}

jr_jobctx *
jr_jrlib_ctx(lua_State *L)
{
    jr_jobctx *ctx = get_ctx(L);

    return ctx != NULL && ctx->job != NULL ? ctx : NULL;
}

/* The job running now, or raises naming the function misused. */
jr_jobctx *
jr_jrlib_job(lua_State *L, const char *fn)
{
    jr_jobctx *ctx = get_ctx(L);

    if (ctx == NULL || ctx->job == NULL)
        luaL_error(L, "jobrunner.%s: called outside a running job", fn);
    return ctx;
}

void
jr_jobctx_clear(jr_jobctx *ctx)
{
    int i;

    for (i = 0; i < ctx->npushes; i++)
        free(ctx->mem[i]);
    ctx->npushes = 0;
    jr_buf_reset(&ctx->sql);
    ctx->nsql = 0;
    ctx->decided = 0;
    ctx->cancelled = 0;
    ctx->nsleeps = 0;
    ctx->progress_dirty = 0;
    jr_steps_free(ctx->steps);
    ctx->steps = NULL;
    ctx->steps_dirty = 0;
    ctx->steps_task = NULL;
    ctx->steps_told = 0;
    jr_joblog_clear(&ctx->log);
}

void
jr_jobctx_free(jr_jobctx *ctx)
{
    jr_jobctx_clear(ctx);
    free(ctx->pushes);
    free(ctx->mem);
    jr_buf_free(&ctx->sql);
    jr_joblog_free(&ctx->log);
    jr_jobtrace_free(ctx->trace);
    ctx->trace = NULL;
    ctx->pushes = NULL;
    ctx->mem = NULL;
    ctx->cap = 0;
}

/* Keeps push p of name with its JSON payload until the job's result,
 * copying its strings into one allocation that ctx->mem owns.
 * [-0, +0, m] */
static void
keep_push(lua_State *L, jr_jobctx *ctx, const jr_push *p, const char *name,
          const char *payload)
{
    size_t nlen = strlen(name) + 1, plen = strlen(payload) + 1;
    size_t qlen = p->queue ? strlen(p->queue) + 1 : 0;
    size_t klen = p->unique_key ? strlen(p->unique_key) + 1 : 0;
    size_t llen = p->key ? strlen(p->key) + 1 : 0;
    size_t slen = p->sequence ? strlen(p->sequence) + 1 : 0;
    char tpbuf[JR_TRACEPARENT_LEN + 1];
    const char *tp = p->traceparent, *ts = p->tracestate;
    size_t tlen, tslen;
    jr_push *slot;
    char *mem;

    /* the running attempt's context, unless the push gives its own */
    if (tp == NULL && ts == NULL &&
        jr_jobtrace_parent(ctx->trace, ctx->job->trace, tpbuf, &ts))
        tp = tpbuf;
    tlen = tp ? strlen(tp) + 1 : 0;
    tslen = ts ? strlen(ts) + 1 : 0;

    if (ctx->npushes == ctx->cap) {
        int cap = ctx->cap ? ctx->cap * 2 : 4;
        jr_push *v = realloc(ctx->pushes, (size_t)cap * sizeof *v);
        char **m;
        if (v == NULL)
            luaL_error(L, "jobrunner.push: out of memory");
        ctx->pushes = v;
        if ((m = realloc(ctx->mem, (size_t)cap * sizeof *m)) == NULL)
            luaL_error(L, "jobrunner.push: out of memory");
        ctx->mem = m;
        ctx->cap = cap;
    }
    size_t alen = (size_t)p->nafter * sizeof *p->after;
    if ((mem = malloc(alen + nlen + plen + qlen + klen + llen + slen + tlen +
                      tslen)) == NULL)
        luaL_error(L, "jobrunner.push: out of memory");
    if (alen > 0)               /* first: aligned; luaopts' is reused */
        memcpy(mem, p->after, alen);
    mem += alen;
    memcpy(mem, name, nlen);
    memcpy(mem + nlen, payload, plen);
    if (p->queue)
        memcpy(mem + nlen + plen, p->queue, qlen);
    slot = &ctx->pushes[ctx->npushes];
    *slot = *p;
    slot->name = mem;
    slot->payload = mem + nlen;
    slot->queue = p->queue ? mem + nlen + plen : NULL;
    slot->unique_key = NULL;
    if (p->unique_key)      /* a duplicate is no failure of this job */
        slot->unique_key = memcpy(mem + nlen + plen + qlen, p->unique_key,
                                  klen);
    slot->outcome = NULL;
    slot->key = p->key ? memcpy(mem + nlen + plen + qlen + klen, p->key,
                                llen) : NULL;
    slot->sequence = p->sequence ? memcpy(mem + nlen + plen + qlen + klen +
                                          llen, p->sequence, slen) : NULL;
    slot->after = alen > 0 ? (const int64_t *)(void *)(mem - alen) : NULL;
    mem += nlen + plen + qlen + klen + llen + slen;
    slot->traceparent = tp ? memcpy(mem, tp, tlen) : NULL;
    slot->tracestate = ts ? memcpy(mem + tlen, ts, tslen) : NULL;
    mem -= nlen + plen + qlen + klen + llen + slen;
    ctx->mem[ctx->npushes++] = mem - alen;
}

/* jobrunner.push(name, payload?, opts?): queued with this job's success.
 * The payload is encoded now, by json.c, so that a value JSON cannot hold
 * fails this job and names the key.  [-0, +0, v] */
static int
jrlib_push(lua_State *L)                             /* name payload opts */
{
    jr_jobctx *ctx;
    jr_push p = {.max_retries = -1};
    size_t len;
    const char *name = luaL_checklstring(L, 1, &len);
    jr_buf *b;
    char why[400];
    jr_err err;
    int rc;

    if (!lua_isnoneornil(L, 2))
        luaL_checktype(L, 2, LUA_TTABLE);
    p.name = name;
    rc = jr_luaopts_push(L, 3, "jobrunner.push", &p, &err);
    ctx = jr_jrlib_job(L, "push");
    if (rc < 0 || jr_name_check_len(name, len, "job name", &err) < 0)
        return luaL_error(L, "jobrunner.push: %s", err.msg);
    lua_settop(L, 3);                                /* name payload opts */
    b = jr_json_buf_new(L);                          /* .. b */
    if (jr_json_encode(L, 2, b, why, sizeof why) < 0)
        return luaL_error(L, "jobrunner.push: payload of '%s': %s", name,
                          why);
    if (ctx->max_payload && b->len - 1 > ctx->max_payload)
        return luaL_error(L, "jobrunner.push: payload of '%s' is %d bytes, "
                          "over max_payload (%d)", name, (int)(b->len - 1),
                          (int)ctx->max_payload);
    keep_push(L, ctx, &p, name, b->p);               /* b is on the stack */
    return 0;
}

int
jr_jrlib_raise(lua_State *L, jr_jobctx *ctx, const jr_signal *sig)
{
    jr_signal *s = lua_newuserdatauv(L, sizeof *s, 0);   /* .. s */

    *s = *sig;
    luaL_setmetatable(L, JR_SIGNAL_MT);
    if (!ctx->decided) {
        ctx->decision = *s;
        ctx->decided = 1;
    }
    return lua_error(L);
}

/* Records the decision in the job's context (the first one stands), then
 * unwinds the handler with a jobrunner.signal. */
int
jr_jrlib_raise_kind(lua_State *L, jr_jobctx *ctx, int kind, double delay,
                    const char *reason)
{
    jr_signal s;

    memset(&s, 0, sizeof s);
    s.kind = kind;
    s.delay = delay;
    snprintf(s.reason, sizeof s.reason, "%s", reason ? reason : "");
    return jr_jrlib_raise(L, ctx, &s);
}

/* jobrunner.snooze(seconds): run again later, after JR_SNOOZE_MIN seconds
 * at least; the attempt is not counted. */
static int
jrlib_snooze(lua_State *L)
{
    double s = luaL_optnumber(L, 1, 0);
    jr_jobctx *ctx;

    luaL_argcheck(L, s >= 0, 1, "seconds must be >= 0");
    ctx = jr_jrlib_job(L, "snooze");
    return jr_jrlib_raise_kind(L, ctx, JR_SNOOZE, s < JR_SNOOZE_MIN ?
                               JR_SNOOZE_MIN : s, NULL);
}

/* jobrunner.discard(reason): straight to the dead queue. */
static int
jrlib_discard(lua_State *L)
{
    const char *reason = luaL_optstring(L, 1, "discarded by handler");
    jr_jobctx *ctx = jr_jrlib_job(L, "discard");

    return jr_jrlib_raise_kind(L, ctx, JR_DEAD, 0, reason);
}

/* tostring(signal): "jobrunner.snooze(5)", "jobrunner.discard(reason)",
 * "jobrunner.checkpoint: handed back at a checkpoint". */
static int
signal_tostring(lua_State *L)
{
    const jr_signal *s = luaL_checkudata(L, 1, JR_SIGNAL_MT);

    if (s->kind == JR_SNOOZE)
        lua_pushfstring(L, "jobrunner.snooze(%f)", s->delay);
    else if (s->kind == JR_WAIT && s->wait_on[0] != '\0')
        lua_pushfstring(L, "jobrunner.wait_signal(%s)", s->wait_on);
    else if (s->kind == JR_WAIT)
        lua_pushfstring(L, "jobrunner.sleep_until(%f)", s->wake_at);
    else if (s->kind == JR_RELEASE)
        lua_pushfstring(L, "jobrunner.checkpoint: %s", s->reason);
    else
        lua_pushfstring(L, "jobrunner.discard(%s)", s->reason);
    return 1;
}

/* jobrunner.cancelled(): true once this job's cancel arrived. The error
 * the cancel raises comes at the handler's next Lua instruction and again
 * every few thousand: a handler that catches it (pcall) can check this to
 * tell a cancel from a failure and clean up briefly; the job ends
 * cancelled however the handler ends. */
static int
jrlib_cancelled(lua_State *L)
{
    jr_jobctx *ctx = jr_jrlib_job(L, "cancelled");

    if (!ctx->cancelled && ctx->on_cancelled != NULL)
        ctx->on_cancelled(ctx->hook_arg);
    lua_pushboolean(L, ctx->cancelled);
    return 1;
}

/* 1 if s[0..n) is text the database takes: UTF-8 as the one JSON
 * escaper judges it (json.c), without NUL bytes. */
static int
text_ok(const char *s, size_t n)
{
    size_t used;
    char out[6];

    for (; n > 0; s += used, n -= used)
        if (*s == '\0' || jr_jsontext_escape_char(s, n, out, &used) == 0)
            return 0;
    return 1;
}

/* jobrunner.progress(done [, total [, note]]): how far the job is. Kept in
 * the job's context; the worker sends it at most once a second, and the
 * last value with the job's result. A note longer than JR_NOTE_MAX bytes
 * is cut. */
static int
jrlib_progress(lua_State *L)
{
    double done = luaL_checknumber(L, 1);
    double total = lua_isnoneornil(L, 2) ? NAN : luaL_checknumber(L, 2);
    size_t len = 0;
    const char *note = luaL_optlstring(L, 3, NULL, &len);
    jr_jobctx *ctx;

    luaL_argcheck(L, isfinite(done) && done >= 0, 1,
                  "must be a finite number >= 0");
    luaL_argcheck(L, isnan(total) || (isfinite(total) && total >= 0), 2,
                  "must be nil or a finite number >= 0");
    luaL_argcheck(L, note == NULL || text_ok(note, len), 3,
                  "must be UTF-8 text without NUL bytes");
    ctx = jr_jrlib_job(L, "progress");
    if (len > JR_NOTE_MAX)
        for (len = JR_NOTE_MAX; (note[len] & 0xC0) == 0x80; len--)
            ;
    ctx->progress_done = done;
    ctx->progress_total = total;
    ctx->progress_has_note = note != NULL;
    memcpy(ctx->progress_note, note ? note : "", len);
    ctx->progress_note[len] = '\0';
    ctx->progress_dirty = 1;
    if (ctx->on_progress != NULL)
        ctx->on_progress(ctx->hook_arg);
    return 0;
}

/* jobrunner.now(): epoch seconds with sub-millisecond precision. */
static int
jrlib_now(lua_State *L)
{
    lua_pushnumber(L, jr_now());
    return 1;
}

static const luaL_Reg jrlib_funcs[] = {
    {"now", jrlib_now},
    {"push", jrlib_push},
    {"snooze", jrlib_snooze},
    {"discard", jrlib_discard},
    {"cancelled", jrlib_cancelled},
    {"progress", jrlib_progress},
    {NULL, NULL}
};

static int
open_module(lua_State *L)                            /* ctx */
{
    lua_rawsetp(L, LUA_REGISTRYINDEX, &ctx_key);     /* (nothing) */
    lua_getglobal(L, "package");                     /* package */
    lua_getfield(L, -1, "loaded");                   /* package loaded */
    luaL_newlib(L, jrlib_funcs);                     /* package loaded M */
    jr_jrwait_register(L);                           /* package loaded M */
    jr_json_set_markers(L);                          /* package loaded M */
    jr_steps_open(L);                                /* package loaded M */
    jr_jrsql_register(L);                            /* package loaded M */
    jr_jrlog_register(L);                            /* package loaded M */
    jr_jrspan_register(L);                           /* package loaded M */
    lua_setfield(L, -2, "jobrunner");                /* package loaded */
    lua_pop(L, 2);                                   /* (nothing) */
    luaL_newmetatable(L, JR_SIGNAL_MT);              /* mt */
    lua_pushcfunction(L, signal_tostring);           /* mt f */
    lua_setfield(L, -2, "__tostring");               /* mt */
    lua_pop(L, 1);                                   /* (nothing) */
    return 0;
}

int
jr_jrlib_open(lua_State *L, jr_jobctx *ctx, jr_err *err)
{
    lua_pushcfunction(L, open_module);               /* f */
    lua_pushlightuserdata(L, ctx);                   /* f ctx */
    return jr_luabridge_pcall(L, 1, 0, err);
}

const jr_signal *
jr_jrlib_signal(lua_State *L, int idx)
{
    return luaL_testudata(L, idx, JR_SIGNAL_MT);
}
