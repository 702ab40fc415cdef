/* luaclient.c - the producer module "jobrunner.client": the producer
 * library (jobrunner.h) as a Lua 5.4 C module, built as build/jobrunner.so
 * without liblua (the interpreter provides it). Owns a jobrunner.client
 * box per handle; payload tables become JSON through json.c (its header
 * says how), push options are read by luaopts.c as handler pushes are.
 *
 *   local jr = require "jobrunner.client"
 *   local q = assert(jr.open("sqlite:jobs.db"))
 *   local id = assert(q:push("send_email", { to = "a@b" }, { run_in = 60 }))
 *
 * Two module names, one module: "jobrunner.client" is its name, and the
 * same file answers require "jobrunner" (luaopen_jobrunner) with the same
 * table, as it did before the rename. Inside handlers "jobrunner" is the
 * runner's handler module (jrlib.c), with the same encoder, null and
 * array(); a handler that wants this one requires "jobrunner.client".
 *
 * A payload that cannot be encoded is an expected failure: nil,
 * "job 'name': payload.path: what is wrong". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "backend.h"
#include "client/jobrunner.h"
#include "lua/json.h"
#include "client/luaclient.h"
#include "lua/luaopts.h"

LUAMOD_API int luaopen_jobrunner_client(lua_State *L);
LUAMOD_API int luaopen_jobrunner(lua_State *L);

/* --- options ------------------------------------------------------------- */

/* Reads the push options table at idx for job name (len bytes, borrowed)
 * through the one reader (luaopts.c) into o. Misuse raises; a value that
 * is not valid (a NUL byte in a name, which C would cut; run_in past 100
 * years...) returns -1 with bad set.  [-0, +0, v] */
static int
read_push_opts(lua_State *L, int idx, const char *fn, const char *name,
               size_t len, jr_client_opts *o, jr_client_unique *u,
               jr_client_after *a, jr_client_seq *sq, jr_err *bad)
{
    jr_push p = {.name = name};

    if (jr_luaopts_push(L, idx, fn, &p, bad) < 0 ||
        jr_name_check_len(name, len, "job name", bad) < 0)
        return -1;
    o->run_in = p.run_in;
    o->run_at = p.run_at;
    o->priority = p.priority;
    o->queue = p.queue;                      /* anchored by the table */
    o->max_retries = p.max_retries < 0 ? JR_CLIENT_UNSET : p.max_retries;
    o->key = p.key;                          /* anchored by the table */
    o->result_ttl = p.result_ttl;
    o->expires_at = p.expires_at;
    o->expires_in = p.expires_in;
    o->deadline = p.deadline;
    o->traceparent = p.traceparent;          /* anchored by the table */
    o->tracestate = p.tracestate;            /* anchored by the table */
    o->cost = p.cost;
    u->key = p.unique_key;                   /* anchored by the table */
    u->unique_for = p.unique_for;
    u->on_conflict = p.on_conflict;  /* JR_CONFLICT_* is JR_CLIENT_* */
    a->after = p.after;                      /* luaopts': until its next */
    a->nafter = (size_t)p.nafter;
    a->on_parent_failure = p.on_parent_failure;
    a->batch = p.batch;
    sq->key = p.sequence;                    /* anchored by the table */
    sq->on_failure = p.seq_fail;             /* JR_SEQ_* is JR_CLIENT_SEQ_* */
    sq->on_conflict = p.on_conflict;
    sq->outcome = NULL;
    return 0;
}

/* --- the client ------------------------------------------------------------ */

/* The open client at argument 1, or raises.  [-0, +0, v] */
jr_client *
jr_luaclient_check(lua_State *L)
{
    client_box *box = luaL_checkudata(L, 1, JR_CLIENT_MT);

    if (box->c == NULL)
        luaL_error(L, "client is closed");
    return box->c;
}

/* Returns nil, msg.  [-0, +2, m] */
int
jr_luaclient_fail(lua_State *L, const char *msg)
{
    lua_pushnil(L);                                  /* nil */
    lua_pushstring(L, msg);                          /* nil msg */
    return 2;
}

const char *
jr_luaclient_schedule_name(lua_State *L, int idx, jr_err *err)
{
    size_t len;
    const char *name = luaL_checklstring(L, idx, &len);

    return jr_name_check_len(name, len, "schedule name", err) < 0 ? NULL :
           name;
}

/* Pushes the outcome of a push: duplicate (a boolean: no new job) and
 * what happened ("new", "duplicate", "replaced", "superseded": a new job
 * in place of a running one cancelled).  [-0, +2, m] */
static void
push_outcome(lua_State *L, int outcome)
{
    lua_pushboolean(L, outcome != JR_CLIENT_PUSHED &&
                    outcome != JR_CLIENT_SUPERSEDED);    /* dup */
    lua_pushstring(L, jr_outcome_name(outcome));         /* dup what */
}

/* q:push(name, payload?, opts?) -> id, duplicate, outcome | nil, msg */
static int
client_push(lua_State *L)                            /* q name payload opts */
{
    jr_client *c = jr_luaclient_check(L);
    size_t len;
    const char *name = luaL_checklstring(L, 2, &len);
    jr_client_opts o;
    jr_client_unique u;
    jr_client_after a;
    jr_client_seq sq;
    char msg[400];
    int64_t id;
    int outcome, rc;
    jr_buf *b;
    jr_err bad;

    if (read_push_opts(L, 4, "push", name, len, &o, &u, &a, &sq, &bad) < 0)
        return jr_luaclient_fail(L, bad.msg);
    lua_settop(L, 4);                                /* q name payload opts */
    b = jr_json_buf_new(L);                          /* .. b */
    if (jr_json_encode(L, 3, b, msg, sizeof msg) < 0)
        return jr_luaclient_fail(L, lua_pushfstring(L, "job '%s': %s", name, msg));
    outcome = JR_CLIENT_PUSHED;
    if (sq.key != NULL || sq.on_failure != JR_CLIENT_SEQ_BLOCK)
        rc = sq.key == NULL ? jr_luaclient_fail(L, "push: option "
                                                "'on_failure' goes with "
                                                "'sequence'") :
             u.key != NULL || a.nafter > 0 || a.batch != 0 ?
             jr_luaclient_fail(L, "push: option 'sequence' cannot go with "
                               "unique_key, after or batch") :
             (sq.outcome = &outcome,
              jr_client_push_seq(c, name, b->p, &o, &sq, &id) !=
              JR_CLIENT_OK);
    else if (a.nafter > 0 || a.batch != 0 || a.on_parent_failure != 0)
        rc = jr_client_push_after(c, name, b->p, &o, &a, &id) !=
             JR_CLIENT_OK;
    else
        rc = jr_client_push_unique(c, name, b->p, &o, &u, &id, &outcome) !=
             JR_CLIENT_OK;
    if (rc > 1)
        return rc;                  /* nil, message already pushed */
    if (rc == 1)
        return jr_luaclient_fail(L, jr_client_errmsg(c));
    lua_pushinteger(L, (lua_Integer)id);             /* .. b id */
    push_outcome(L, outcome);                        /* .. b id dup what */
    return 3;
}

/* Reads list[i] = {name, payload?, opts?} into j; its payload goes into b
 * at *off (a NUL-terminated string). Misuse raises; a payload that cannot
 * be encoded returns -1 with msg set.  [-0, +0, v] */
static int
read_job(lua_State *L, lua_Integer i, jr_buf *b, size_t *off,
         jr_client_job *j, jr_client_unique *u, char *msg)
{
    char why[400];
    int item;
    size_t len;
    jr_err bad;
    jr_client_after a;
    jr_client_seq sq;

    if (lua_rawgeti(L, 2, i) != LUA_TTABLE)          /* .. item */
        luaL_error(L, "push_many: item %d must be a table {name, payload, "
                   "opts}, got %s", (int)i, luaL_typename(L, -1));
    item = lua_gettop(L);
    lua_rawgeti(L, item, 1);                         /* .. item name */
    if (lua_type(L, -1) != LUA_TSTRING)
        luaL_error(L, "push_many: item %d: name (item[1]) must be a string, "
                   "got %s", (int)i, luaL_typename(L, -1));
    j->name = lua_tolstring(L, -1, &len);            /* anchored by item */
    lua_rawgeti(L, item, 3);                         /* .. item name opts */
    if (read_push_opts(L, lua_gettop(L), "push_many", j->name, len,
                       &j->opts, u, &a, &sq, &bad) < 0 ||
        ((a.nafter > 0 || a.batch != 0 || a.on_parent_failure != 0) &&
         jr_fail(&bad, JR_EINPUT, "after, on_parent_failure and batch go "
                 "by q:push or q:flow, not push_many") < 0) ||
        ((sq.key != NULL || sq.on_failure != JR_CLIENT_SEQ_BLOCK) &&
         jr_fail(&bad, JR_EINPUT, "sequence and on_failure go by q:push, "
                 "not push_many") < 0)) {
        snprintf(msg, 400, "job %d of %d: %.370s", (int)i,
                 (int)lua_rawlen(L, 2), bad.msg);
        lua_pop(L, 3);                               /* .. */
        return -1;
    }
    lua_rawgeti(L, item, 2);                         /* .. item name opts p */
    *off = b->len;
    if (jr_json_encode(L, lua_gettop(L), b, why, sizeof why) < 0) {
        snprintf(msg, 400, "job %d (%.100s): %.270s", (int)i, j->name,
                 why);
        lua_pop(L, 4);                               /* .. */
        return -1;
    }
    lua_pop(L, 4);                                   /* .. */
    return 0;
}

/* q:push_many{ {name, payload?, opts?}, ... } -> {id, ...}, {duplicate,
 * ...} | nil, msg. All in one transaction: all or none. */
static int
client_push_many(lua_State *L)                       /* q list */
{
    jr_client *c = jr_luaclient_check(L);
    lua_Integer i, n;
    jr_client_job *jobs;
    size_t *offs;
    jr_client_unique *u;
    int64_t *ids;
    int *outs;
    char msg[400];
    jr_buf *b;

    luaL_checktype(L, 2, LUA_TTABLE);
    lua_settop(L, 2);                                /* q list */
    n = (lua_Integer)lua_rawlen(L, 2);
    if ((size_t)n > (size_t)1 << 24)
        return luaL_error(L, "push_many: %d jobs is too many in one "
                          "transaction", (int)n);
    jobs = lua_newuserdatauv(L, (size_t)n * sizeof *jobs + 1, 0);
    offs = lua_newuserdatauv(L, (size_t)n * sizeof *offs + 1, 0);
    ids = lua_newuserdatauv(L, (size_t)n * sizeof *ids + 1, 0);
    u = lua_newuserdatauv(L, (size_t)n * sizeof *u + 1, 0);
    outs = lua_newuserdatauv(L, (size_t)n * sizeof *outs + 1, 0);
    b = jr_json_buf_new(L);             /* q list jobs offs ids u outs b */
    for (i = 1; i <= n; i++)
        if (read_job(L, i, b, &offs[i - 1], &jobs[i - 1], &u[i - 1],
                     msg) < 0)
            return jr_luaclient_fail(L, msg);
    for (i = 0; i < n; i++)                          /* b no longer moves */
        jobs[i].payload = b->p + offs[i];
    if (jr_client_push_many_unique(c, jobs, u, (size_t)n, ids, outs)
        != JR_CLIENT_OK)
        return jr_luaclient_fail(L, jr_client_errmsg(c));
    lua_createtable(L, (int)n, 0);                   /* .. b out */
    lua_createtable(L, (int)n, 0);                   /* .. b out dups */
    for (i = 0; i < n; i++) {
        lua_pushinteger(L, (lua_Integer)ids[i]);     /* .. b out dups id */
        lua_rawseti(L, -3, i + 1);                   /* .. b out dups */
        lua_pushboolean(L, outs[i] != JR_CLIENT_PUSHED); /* .. dups dup */
        lua_rawseti(L, -2, i + 1);                   /* .. b out dups */
    }
    return 2;
}

/* One stats row as client_stats collects it in a buffer: the counts, the
 * name's length, then the name's bytes. */
typedef struct stat_rec {
    jr_client_counts n;
    size_t           len;
} stat_rec;

/* Runs inside the database call, so it must not raise: it only copies. */
static int
stats_collect(const char *name, const jr_client_counts *n, void *arg)
{
    jr_buf *b = arg;
    stat_rec r;

    r.n = *n;
    r.len = strlen(name);
    if (jr_buf_put(b, &r, sizeof r) < 0 || jr_buf_put(b, name, r.len) < 0)
        return 1;               /* b->oom tells client_stats */
    return 0;
}

/* Sets the five counts of n as fields of the table on top.  [-0, +0, m] */
static void
set_counts(lua_State *L, const jr_client_counts *n)
{
    const long v[] = {n->queued, n->ready, n->scheduled, n->running,
                      n->dead};         /* states JR_STATE_QUEUED on */
    int i;

    for (i = 0; i < 5; i++) {
        lua_pushinteger(L, v[i]);                    /* t v */
        lua_setfield(L, -2, jr_state_name(JR_STATE_QUEUED + i));
    }                                                /* t */
}

/* q:stats() -> {queued, ready, scheduled, running, dead,
 *               names = {[name] = {queued, ready, ...}}} | nil, msg */
static int
client_stats(lua_State *L)                           /* q */
{
    jr_client *c = jr_luaclient_check(L);
    jr_client_counts total;
    size_t at = 0;
    jr_buf *b = jr_json_buf_new(L);                  /* q b */

    if (jr_client_stats(c, &total, stats_collect, b) != JR_CLIENT_OK)
        return jr_luaclient_fail(L, jr_client_errmsg(c));
    if (b->oom)
        return jr_luaclient_fail(L, "stats: out of memory");
    lua_createtable(L, 0, 6);                        /* q b s */
    set_counts(L, &total);
    lua_newtable(L);                                 /* q b s names */
    while (at < b->len) {
        stat_rec r;
        memcpy(&r, b->p + at, sizeof r);
        at += sizeof r;
        lua_pushlstring(L, b->p + at, r.len);        /* q b s names name */
        at += r.len;
        lua_createtable(L, 0, 5);                    /* q b s names name t */
        set_counts(L, &r.n);
        lua_rawset(L, -3);                           /* q b s names */
    }
    lua_setfield(L, -2, "names");                    /* q b s */
    return 1;
}

/* q:close() -> true. Closing twice is harmless. */
static int
client_close(lua_State *L)                           /* q */
{
    client_box *box = luaL_checkudata(L, 1, JR_CLIENT_MT);

    jr_client_close(box->c);
    box->c = NULL;
    lua_pushboolean(L, 1);                           /* q true */
    return 1;
}

/* __gc and __close: closes unless already closed; never raises. */
static int
client_gc(lua_State *L)                              /* q */
{
    client_box *box = luaL_checkudata(L, 1, JR_CLIENT_MT);

    jr_client_close(box->c);
    box->c = NULL;
    return 0;
}

static int
client_tostring(lua_State *L)                        /* q */
{
    client_box *box = luaL_checkudata(L, 1, JR_CLIENT_MT);

    if (box->c == NULL)
        lua_pushliteral(L, "jobrunner.client (closed)");
    else
        lua_pushfstring(L, "jobrunner.client (%p)", (void *)box->c);
    return 1;                                        /* q s */
}

static const luaL_Reg client_methods[] = {
    {"push", client_push},
    {"push_many", client_push_many},
    {"flow", jr_luaclient_flow},
    {"batch", jr_luaclient_batch},
    {"stats", client_stats},
    {"pause", jr_luaclient_pause},
    {"resume", jr_luaclient_resume},
    {"queues", jr_luaclient_queues},
    {"schedule_pause", jr_luaclient_schedule_pause},
    {"schedule_resume", jr_luaclient_schedule_resume},
    {"schedule_fire", jr_luaclient_schedule_fire},
    {"schedule_add", jr_luaclient_schedule_add},
    {"schedule_set", jr_luaclient_schedule_set},
    {"schedule_remove", jr_luaclient_schedule_remove},
    {"schedule_backfill", jr_luaclient_schedule_backfill},
    {"cancel", jr_luaclient_cancel},
    {"show", jr_luaclient_show},
    {"list", jr_luaclient_list},
    {"wait", jr_luaclient_wait},
    {"signal", jr_luaclient_signal},
    {"close", client_close},
    {NULL, NULL}
};

static const luaL_Reg client_meta[] = {
    {"__gc", client_gc},
    {"__close", client_gc},
    {"__tostring", client_tostring},
    {NULL, NULL}
};

/* Creates the client's metatable; json.c makes the array marker's and the
 * buffer's.  [-0, +0, m] */
static void
client_register(lua_State *L)
{
    luaL_newmetatable(L, JR_CLIENT_MT);              /* mt */
    luaL_setfuncs(L, client_meta, 0);                /* mt */
    luaL_newlib(L, client_methods);                  /* mt methods */
    lua_setfield(L, -2, "__index");                  /* mt */
    lua_pop(L, 1);                                   /* (nothing) */
}

/* --- the module -------------------------------------------------------------- */

/* Reads jr.open's options table at idx into cfg.  [-0, +0, v] */
static void
read_open_opts(lua_State *L, int idx, jr_client_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    if (lua_isnoneornil(L, idx))
        return;
    luaL_checktype(L, idx, LUA_TTABLE);
    lua_pushnil(L);                                  /* nil */
    while (lua_next(L, idx)) {                       /* k v */
        const char *k = lua_type(L, -2) == LUA_TSTRING ?
                        lua_tostring(L, -2) : "(not a string)";
        if (strcmp(k, "schema") == 0) {
            if (lua_type(L, -1) != LUA_TSTRING)
                luaL_error(L, "open: option 'schema' must be a string, "
                           "got %s", luaL_typename(L, -1));
            cfg->schema = lua_tostring(L, -1);       /* anchored by opts */
        } else if (strcmp(k, "busy_timeout") == 0) {
            cfg->busy_timeout = jr_luaopts_number(L, "open", k);
        } else if (strcmp(k, "max_payload") == 0) {
            cfg->max_payload = (size_t)jr_luaopts_int(L, "open", k, 1,
                                                      LUA_MAXINTEGER);
        } else if (strcmp(k, "key_file") == 0) {
            if (lua_type(L, -1) != LUA_TSTRING)
                luaL_error(L, "open: option 'key_file' must be a string, "
                           "got %s", luaL_typename(L, -1));
            cfg->key_file = lua_tostring(L, -1);     /* anchored by opts */
        } else {
            luaL_error(L, "open: unknown option '%s' (valid: schema, "
                       "busy_timeout, max_payload, key_file)", k);
        }
        lua_pop(L, 1);                               /* k */
    }                                                /* (nothing) */
}

/* jr.open(target?, opts?) -> client | nil, msg. target is a backend URL
 * or a config file ending in .lua; none: ./jobrunner.lua or
 * sqlite:jobrunner.db, as the jobrunner command. */
static int
jobrunner_open(lua_State *L)                         /* target opts */
{
    const char *target = luaL_optstring(L, 1, NULL);
    jr_client_config cfg;
    client_box *box;
    jr_client *c;

    read_open_opts(L, 2, &cfg);
    box = lua_newuserdatauv(L, sizeof *box, 0);      /* .. box */
    box->c = NULL;
    luaL_setmetatable(L, JR_CLIENT_MT);
    if (jr_client_open(&c, target, &cfg) != JR_CLIENT_OK) {
        lua_pushnil(L);                              /* .. box nil */
        lua_pushstring(L, jr_client_errmsg(c));      /* .. box nil msg */
        jr_client_close(c);
        return 2;
    }
    box->c = c;                                      /* the GC closes it */
    return 1;                                        /* .. box */
}

/* jr.encode(value) -> json | nil, msg: the payload encoder by itself, to
 * see what a push would store. */
static int
jobrunner_encode(lua_State *L)                       /* v */
{
    char msg[400];
    jr_buf *b;

    lua_settop(L, 1);
    b = jr_json_buf_new(L);                          /* v b */
    if (jr_json_encode(L, 1, b, msg, sizeof msg) < 0)
        return jr_luaclient_fail(L, msg);
    lua_pushlstring(L, b->p, b->len - 1);            /* v b json */
    return 1;
}

static const luaL_Reg jobrunner_funcs[] = {
    {"open", jobrunner_open},
    {"encode", jobrunner_encode},
    {NULL, NULL}
};

/* require "jobrunner.client".  [-0, +1, m] */
LUAMOD_API int
luaopen_jobrunner_client(lua_State *L)
{
    luaL_checkversion(L);
    client_register(L);
    luaL_newlib(L, jobrunner_funcs);                 /* M */
    jr_json_set_markers(L);                          /* M */
    lua_pushliteral(L, JR_CLIENT_VERSION);           /* M v */
    lua_setfield(L, -2, "_VERSION");                 /* M */
    return 1;
}

/* require "jobrunner" outside the runner: the name of this module before
 * it was "jobrunner.client", kept so producers written for it go on
 * working. Both names give the same table.  [-0, +1, m] */
LUAMOD_API int
luaopen_jobrunner(lua_State *L)
{
    luaL_requiref(L, "jobrunner.client", luaopen_jobrunner_client, 0);
    return 1;                                        /* M */
}
