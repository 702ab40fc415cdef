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
#include "jobrunner.h"
#include "json.h"
#include "luaopts.h"

#define JR_CLIENT_MT "jobrunner.client"

LUAMOD_API int luaopen_jobrunner_client(lua_State *L);
LUAMOD_API int luaopen_jobrunner(lua_State *L);

/* --- options ------------------------------------------------------------- */

/* Reads the push options table at idx for job name (len bytes, borrowed)
 * through the one reader (luaopts.c) into o. Misuse raises; a value that
 * is not valid (a NUL byte in a name, which C would cut; run_in past 100
 * years...) returns -1 with bad set.  [-0, +0, v] */
static int
read_push_opts(lua_State *L, int idx, const char *fn, const char *name,
               size_t len, jr_client_opts *o, jr_err *bad)
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
    return 0;
}

/* --- the client ------------------------------------------------------------ */

typedef struct client_box {
    jr_client *c;               /* NULL once closed */
} client_box;

/* The open client at argument 1, or raises.  [-0, +0, v] */
static jr_client *
check_client(lua_State *L)
{
    client_box *box = luaL_checkudata(L, 1, JR_CLIENT_MT);

    if (box->c == NULL)
        luaL_error(L, "client is closed");
    return box->c;
}

/* Returns nil, msg.  [-0, +2, m] */
static int
fail(lua_State *L, const char *msg)
{
    lua_pushnil(L);                                  /* nil */
    lua_pushstring(L, msg);                          /* nil msg */
    return 2;
}

/* q:push(name, payload?, opts?) -> id | nil, msg */
static int
client_push(lua_State *L)                            /* q name payload opts */
{
    jr_client *c = check_client(L);
    size_t len;
    const char *name = luaL_checklstring(L, 2, &len);
    jr_client_opts o;
    char msg[400];
    int64_t id;
    jr_buf *b;
    jr_err bad;

    if (read_push_opts(L, 4, "push", name, len, &o, &bad) < 0)
        return fail(L, bad.msg);
    lua_settop(L, 4);                                /* q name payload opts */
    b = jr_json_buf_new(L);                          /* .. b */
    if (jr_json_encode(L, 3, b, msg, sizeof msg) < 0)
        return fail(L, lua_pushfstring(L, "job '%s': %s", name, msg));
    if (jr_client_push(c, name, b->p, &o, &id) != JR_CLIENT_OK)
        return fail(L, jr_client_errmsg(c));
    lua_pushinteger(L, (lua_Integer)id);             /* .. b id */
    return 1;
}

/* Reads list[i] = {name, payload?, opts?} into j; its payload goes into b
 * at *off (a NUL-terminated string). Misuse raises; a payload that cannot
 * be encoded returns -1 with msg set.  [-0, +0, v] */
static int
read_job(lua_State *L, lua_Integer i, jr_buf *b, size_t *off,
         jr_client_job *j, char *msg)
{
    char why[400];
    int item;
    size_t len;
    jr_err bad;

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
                       &j->opts, &bad) < 0) {
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

/* q:push_many{ {name, payload?, opts?}, ... } -> {id, ...} | nil, msg.
 * All in one transaction: all or none. */
static int
client_push_many(lua_State *L)                       /* q list */
{
    jr_client *c = check_client(L);
    lua_Integer i, n;
    jr_client_job *jobs;
    size_t *offs;
    int64_t *ids;
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
    b = jr_json_buf_new(L);                      /* q list jobs offs ids b */
    for (i = 1; i <= n; i++)
        if (read_job(L, i, b, &offs[i - 1], &jobs[i - 1], msg) < 0)
            return fail(L, msg);
    for (i = 0; i < n; i++)                          /* b no longer moves */
        jobs[i].payload = b->p + offs[i];
    if (jr_client_push_many(c, jobs, (size_t)n, ids) != JR_CLIENT_OK)
        return fail(L, jr_client_errmsg(c));
    lua_createtable(L, (int)n, 0);                   /* .. b out */
    for (i = 0; i < n; i++) {
        lua_pushinteger(L, (lua_Integer)ids[i]);     /* .. b out id */
        lua_rawseti(L, -2, i + 1);                   /* .. b out */
    }
    return 1;
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
    lua_pushinteger(L, n->queued);                   /* t v */
    lua_setfield(L, -2, "queued");                   /* t */
    lua_pushinteger(L, n->ready);                    /* t v */
    lua_setfield(L, -2, "ready");                    /* t */
    lua_pushinteger(L, n->scheduled);                /* t v */
    lua_setfield(L, -2, "scheduled");                /* t */
    lua_pushinteger(L, n->running);                  /* t v */
    lua_setfield(L, -2, "running");                  /* t */
    lua_pushinteger(L, n->dead);                     /* t v */
    lua_setfield(L, -2, "dead");                     /* t */
}

/* q:stats() -> {queued, ready, scheduled, running, dead,
 *               names = {[name] = {queued, ready, ...}}} | nil, msg */
static int
client_stats(lua_State *L)                           /* q */
{
    jr_client *c = check_client(L);
    jr_client_counts total;
    size_t at = 0;
    jr_buf *b = jr_json_buf_new(L);                  /* q b */

    if (jr_client_stats(c, &total, stats_collect, b) != JR_CLIENT_OK)
        return fail(L, jr_client_errmsg(c));
    if (b->oom)
        return fail(L, "stats: out of memory");
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

/* --- control: cancel, show, list ------------------------------------------ */

/* q:cancel(id, ...) -> {outcome, ...} | nil, msg. One outcome per id, in
 * order: "cancelled" (it will never run), "requested" (running: its
 * runner stops it), "finished" (already completed, dead or cancelled:
 * nothing changed) or "notfound". */
static int
client_cancel(lua_State *L)                          /* q id... */
{
    static const char *const names[] = {"?", "cancelled", "requested",
                                         "finished", "notfound"};
    jr_client *c = check_client(L);
    int n = lua_gettop(L) - 1, i;
    int64_t *ids;
    int *out;

    luaL_argcheck(L, n >= 1, 2, "give one or more job ids");
    ids = lua_newuserdatauv(L, (size_t)n * (sizeof *ids + sizeof *out), 0);
    out = (int *)(ids + n);                          /* q id... mem */
    for (i = 0; i < n; i++)
        ids[i] = (int64_t)luaL_checkinteger(L, i + 2);
    if (jr_client_cancel(c, ids, (size_t)n, out) != JR_CLIENT_OK)
        return fail(L, jr_client_errmsg(c));
    lua_createtable(L, n, 0);                        /* q id... mem t */
    for (i = 0; i < n; i++) {
        lua_pushstring(L, names[out[i] >= 1 && out[i] <= 4 ? out[i] : 0]);
        lua_rawseti(L, -2, i + 1);                   /* q id... mem t */
    }
    return 1;
}

/* One job as the database call copies it (it must not raise): the info
 * (its strings unused), then each string's length (JOB_NULL for NULL)
 * and bytes. */
enum { S_NAME, S_QUEUE, S_STATE, S_PAYLOAD, S_ERROR, S_GEN, S_LOCKED,
       S_NOTE, NSTR };
#define JOB_NULL ((size_t)-1)

static int
job_collect(const jr_client_job_info *j, void *arg)
{
    const char *str[NSTR] = {j->name, j->queue, j->state, j->payload,
        j->last_error, j->generation, j->locked_by, j->progress_note};
    jr_buf *b = arg;
    size_t len;
    int i;

    if (jr_buf_put(b, j, sizeof *j) < 0)
        return 1;
    for (i = 0; i < NSTR; i++) {
        len = str[i] ? strlen(str[i]) : JOB_NULL;
        if (jr_buf_put(b, &len, sizeof len) < 0 ||
            (str[i] && jr_buf_put(b, str[i], len) < 0))
            return 1;           /* b->oom tells the caller */
    }
    return 0;
}

/* Sets t[key] = v for the table on top; nothing when v is 0 (not set).
 * [-0, +0, m] */
static void
set_num(lua_State *L, const char *key, double v)
{
    if (v == 0 || v != v)
        return;
    lua_pushnumber(L, v);                            /* t v */
    lua_setfield(L, -2, key);                        /* t */
}

static void
set_int(lua_State *L, const char *key, lua_Integer v)
{
    lua_pushinteger(L, v);                           /* t v */
    lua_setfield(L, -2, key);                        /* t */
}

/* The progress fields of j as t.progress = {done, total, note} (total
 * absent when unknown); nothing when never reported.  [-0, +0, m] */
static void
set_progress(lua_State *L, const jr_client_job_info *j, const char *note,
             size_t len)
{
    if (j->progress_done != j->progress_done && note == NULL)
        return;
    lua_createtable(L, 0, 3);                        /* t p */
    set_num(L, "done", j->progress_done);
    if (j->progress_done == 0)
        set_int(L, "done", 0);
    set_num(L, "total", j->progress_total);
    if (note != NULL) {
        lua_pushlstring(L, note, len);               /* t p note */
        lua_setfield(L, -2, "note");                 /* t p */
    }
    lua_setfield(L, -2, "progress");                 /* t */
}

/* Pushes the job copied at b->p + *at as a table and moves *at past it.
 * [-0, +1, m] */
static void
push_job(lua_State *L, const jr_buf *b, size_t *at)
{
    static const char *const keys[NSTR] = {"name", "queue", "state",
        "payload", "last_error", "generation", "locked_by", NULL};
    jr_client_job_info j;
    const char *note = NULL;
    size_t len, nlen = 0;
    int i;

    memcpy(&j, b->p + *at, sizeof j);
    *at += sizeof j;
    lua_createtable(L, 0, 20);                       /* t */
    set_int(L, "id", (lua_Integer)j.id);
    for (i = 0; i < NSTR; i++) {
        memcpy(&len, b->p + *at, sizeof len);
        *at += sizeof len;
        if (len == JOB_NULL)
            continue;
        if (keys[i] == NULL) {
            note = b->p + *at;
            nlen = len;
        } else {
            lua_pushlstring(L, b->p + *at, len);     /* t s */
            lua_setfield(L, -2, keys[i]);            /* t */
        }
        *at += len;
    }
    set_int(L, "attempt", j.attempts);
    if (j.max_retries != JR_CLIENT_UNSET)
        set_int(L, "max_retries", j.max_retries);
    set_int(L, "priority", j.priority);
    set_num(L, "run_at", j.run_at);
    set_num(L, "created_at", j.created_at);
    set_num(L, "started_at", j.started_at);
    set_num(L, "finished_at", j.finished_at);
    lua_pushboolean(L, j.cancel_requested);          /* t b */
    lua_setfield(L, -2, "cancel_requested");         /* t */
    set_progress(L, &j, note, nlen);
}

/* q:show(id) -> {id, name, queue, state, payload (JSON text), attempt,
 * max_retries, priority, run_at, created_at, started_at, finished_at,
 * last_error, generation, locked_by, cancel_requested, progress} |
 * nil, msg (also for an unknown id). Times are epoch seconds; fields not
 * set are absent. */
static int
client_show(lua_State *L)                            /* q id */
{
    jr_client *c = check_client(L);
    int64_t id = (int64_t)luaL_checkinteger(L, 2);
    jr_buf *b = jr_json_buf_new(L);                  /* q id b */
    size_t at = 0;

    if (jr_client_show(c, id, job_collect, b) != JR_CLIENT_OK)
        return fail(L, jr_client_errmsg(c));
    if (b->oom)
        return fail(L, "show: out of memory");
    push_job(L, b, &at);                             /* q id b t */
    return 1;
}

/* q:list{state=, name=, queue=, limit=} -> {job, ...} newest first, as
 * show gives them without payload | nil, msg (a bad filter says why). */
static int
client_list(lua_State *L)                            /* q f? */
{
    jr_client *c = check_client(L);
    jr_client_filter f = {0};
    lua_Integer limit;
    size_t at = 0;
    jr_buf *b;
    int n = 0;

    if (!lua_isnoneornil(L, 2)) {
        luaL_checktype(L, 2, LUA_TTABLE);
        lua_getfield(L, 2, "state");                 /* q f v */
        f.state = luaL_optstring(L, -1, NULL);       /* anchored in f */
        lua_getfield(L, 2, "name");                  /* q f v v */
        f.name = luaL_optstring(L, -1, NULL);
        lua_getfield(L, 2, "queue");                 /* q f v v v */
        f.queue = luaL_optstring(L, -1, NULL);
        lua_getfield(L, 2, "limit");                 /* q f v v v v */
        limit = luaL_optinteger(L, -1, 0);
        luaL_argcheck(L, limit >= 0 && limit <= 1000000000, 2,
                      "limit must be 0 (all) to 1000000000");
        f.limit = (int)limit;
    }
    b = jr_json_buf_new(L);                          /* .. b */
    if (jr_client_list(c, &f, job_collect, b) != JR_CLIENT_OK)
        return fail(L, jr_client_errmsg(c));
    if (b->oom)
        return fail(L, "list: out of memory");
    lua_newtable(L);                                 /* .. b t */
    while (at < b->len) {
        push_job(L, b, &at);                         /* .. b t job */
        lua_rawseti(L, -2, ++n);                     /* .. b t */
    }
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
    {"stats", client_stats},
    {"cancel", client_cancel},
    {"show", client_show},
    {"list", client_list},
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
        } else {
            luaL_error(L, "open: unknown option '%s' (valid: schema, "
                       "busy_timeout, max_payload)", k);
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
        return fail(L, msg);
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
