/* keys.c - the config's keys as rows: one per key of jobrunner.lua (its
 * type, field, range, default, words and one-line doc), the plain keys'
 * defaults from them, and the readers of the keys of their own shape;
 * the plain keys' reader and the walk by rows are keyread.c, the
 * sections' own readers queues.c, schedules.c, limitcfg.c, cfghttp.c and
 * cfgbackoff.c. Uses config.h, keys.h, hooks.h, json.h, luaopts.h, log.h,
 * util.h. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "config/config.h"
#include "config/keys.h"
#include "lua/hooks.h"
#include "lua/json.h"
#include "lua/luaopts.h"
#include "base/log.h"
#include "base/util.h"

#define NONE NAN
#define AT(field) offsetof(jr_config, field)

static int
k_synchronous(cfg_ctx *x, lua_State *L, const char *key)
{
    static const char *const list[] = {"full", "normal", NULL};
    int i = jr_key_word(x, L, key, list);

    if (i < 0)
        return -1;
    x->c->sync_normal = i == 1;
    return 0;
}

/* What a parent ending dead or cancelled does to a job waiting for it,
 * when its push says nothing (docs/workflows.md). */
static int
k_on_parent_failure(cfg_ctx *x, lua_State *L, const char *key)
{
    const char *v = lua_tostring(L, -1);

    if (lua_type(L, -1) != LUA_TSTRING || jr_opf_parse(v) < 0)
        return jr_key_fail(x, key, "must be %s", x->row->words);
    x->c->on_parent_failure = jr_opf_parse(v);
    return 0;
}

static int
k_concurrency(cfg_ctx *x, lua_State *L, const char *key)
{
    char sub[64];
    int lo, hi, top = (int)x->row->hi;

    if (lua_type(L, -1) == LUA_TNUMBER) {
        if (jr_key_int(x, L, key, 1, top, &lo) < 0)
            return -1;
        x->c->conc_min = x->c->conc_max = lo;
        return 0;
    }
    if (lua_type(L, -1) != LUA_TTABLE)
        return jr_key_fail(x, key, "must be a number or { min = A, max = B }, "
                           "got %s", luaL_typename(L, -1));
    lua_pushnil(L);                                  /* t nil */
    while (lua_next(L, -2)) {                        /* t k v */
        lua_pop(L, 1);                               /* t k */
        if (lua_type(L, -1) != LUA_TSTRING ||
            (strcmp(lua_tostring(L, -1), "min") != 0 &&
             strcmp(lua_tostring(L, -1), "max") != 0)) {
            if (lua_type(L, -1) != LUA_TSTRING)  /* { 1, 4 }: a list */
                return lua_pop(L, 1), jr_key_fail(x, key, "must be a number "
                                                  "or { min = A, max = B }, "
                                                  "got a list");
            snprintf(sub, sizeof sub, "%.40s", lua_tostring(L, -1));
            lua_pop(L, 1);                           /* t */
            return jr_key_fail(x, key, "has an unknown key '%s' (valid: min, "
                               "max)", sub);
        }
    }                                                /* t */
    lua_getfield(L, -1, "min");                      /* t min */
    snprintf(sub, sizeof sub, "%s.min", key);
    lo = 1;
    if (!lua_isnil(L, -1) && jr_key_int(x, L, sub, 1, top, &lo) < 0)
        return lua_pop(L, 1), -1;
    lua_getfield(L, -2, "max");                      /* t min max */
    snprintf(sub, sizeof sub, "%s.max", key);
    hi = lo > x->c->conc_max ? lo : x->c->conc_max;
    if (!lua_isnil(L, -1) && jr_key_int(x, L, sub, 1, top, &hi) < 0)
        return lua_pop(L, 2), -1;
    lua_pop(L, 2);                                   /* t */
    if (hi < lo)
        return jr_key_fail(x, key, "has max below min%s", "");
    x->c->conc_min = lo;
    x->c->conc_max = hi;
    return 0;
}

static int
k_backoff(cfg_ctx *x, lua_State *L, const char *key)
{
    double v;

    if (lua_type(L, -1) == LUA_TFUNCTION)
        return 0;               /* the master calls it (retry.c) */
    return jr_key_number(x, L, key, x->row->lo, x->row->hi, &v);
}

static const key_row defaults_rows[] = {
    {"max_retries", K_INT, AT(max_retries), 0, JR_RANGE_RETRIES_MAX, 20,
     NULL, NULL, "retries of a failing job before it is dead"},
    {"timeout", K_SECS, AT(timeout), JR_RANGE_TIMEOUT_MIN,
     JR_RANGE_TIMEOUT_MAX, 900, NULL, NULL, "seconds a job may run"},
    {"backoff", K_FN, 0, 0, JR_RANGE_BACKOFF_MAX, NONE, NULL, k_backoff,
     "seconds before a retry, or a function(attempt, err)"},
    {"inflight", K_INT, AT(inflight), 1, JR_RANGE_INFLIGHT_MAX, 1, NULL,
     NULL, "jobs a worker runs at once"},
    {"durable_steps", K_BOOL, AT(durable_steps), 0, 0, 0, NULL, NULL,
     "a handler's steps wait for their commit"},
    {NULL, K_FN, 0, 0, 0, NONE, NULL, NULL, NULL}
};

static int
k_defaults(cfg_ctx *x, lua_State *L, const char *key)
{
    (void)key;
    if (lua_type(L, -1) != LUA_TTABLE)
        return jr_key_fail(x, "defaults", "must be a table, got %s",
                           luaL_typename(L, -1));
    return jr_key_walk(x, L, defaults_rows, "defaults.");
}

static int
k_level(cfg_ctx *x, lua_State *L, const char *key)
{
    const char *v = lua_tostring(L, -1);
    int level = lua_type(L, -1) == LUA_TSTRING ? jr_log_level(v) : -1;

    if (level < 0)
        return jr_key_fail(x, key, "must be %s", x->row->words);
    x->c->log_level = level;
    return 0;
}

static int
k_format(cfg_ctx *x, lua_State *L, const char *key)
{
    static const char *const list[] = {"text", "json", NULL};
    int i = jr_key_word(x, L, key, list);

    if (i < 0)
        return -1;
    x->c->log_json = i == 1;
    return 0;
}

static const key_row log_rows[] = {
    {"level", K_FN, 0, 0, 0, NONE,
     "\"debug\", \"info\", \"warn\" or \"error\"", k_level,
     "the least level logged"},
    {"format", K_FN, 0, 0, 0, NONE, "\"text\" or \"json\"", k_format,
     "lines of text, or one JSON object per line"},
    {"attempt_max", K_SIZE, AT(log_attempt_max), 0, 1048576, 65536, NULL,
     NULL, "bytes of a handler's log lines and output kept per attempt"},
    {"echo", K_BOOL, AT(log_echo), 0, 0, 1, NULL, NULL,
     "a handler's kept lines go to the runner's log too"},
    {NULL, K_FN, 0, 0, 0, NONE, NULL, NULL, NULL}
};

static int
k_log(cfg_ctx *x, lua_State *L, const char *key)
{
    (void)key;
    if (lua_type(L, -1) != LUA_TTABLE)
        return jr_key_fail(x, "log", "must be a table, got %s",
                           luaL_typename(L, -1));
    return jr_key_walk(x, L, log_rows, "log.");
}

static int
k_hooks(cfg_ctx *x, lua_State *L, const char *key)
{
    char odd[120], where[4096 + 16];

    if (lua_type(L, -1) != LUA_TTABLE)
        return jr_key_fail(x, key, "must be a table of functions, got %s",
                           luaL_typename(L, -1));
    if (jr_json_map(L, -1, odd, sizeof odd) < 0)
        return jr_key_fail(x, key, "must be a table of NAME = function, found "
                           "the key %s", odd);
    snprintf(where, sizeof where, "%s:%d", x->file, jr_key_line(x, key));
    return jr_hooks_check(L, where, x->err);
}

static int
k_top_backoff(cfg_ctx *x, lua_State *L, const char *key)
{
    if (lua_type(L, -1) != LUA_TFUNCTION)
        return jr_key_fail(x, key, "must be a function(job, attempt, err), "
                           "got %s", luaL_typename(L, -1));
    return 0;
}

static int
k_wait_for_db(cfg_ctx *x, lua_State *L, const char *key)
{
    if (lua_type(L, -1) == LUA_TBOOLEAN) {
        x->c->wait_for_db = lua_toboolean(L, -1) ? -1 : 0;
        return 0;
    }
    if (lua_type(L, -1) != LUA_TNUMBER)
        return jr_key_fail(x, key, "must be true, false or seconds, got %s",
                           luaL_typename(L, -1));
    return jr_key_number(x, L, key, x->row->lo, x->row->hi,
                         &x->c->wait_for_db);
}

static int
k_handler_output(cfg_ctx *x, lua_State *L, const char *key)
{
    if (lua_type(L, -1) != LUA_TSTRING || *lua_tostring(L, -1) == '\0')
        return jr_key_fail(x, key, "must be %s", x->row->words);
    return jr_key_string(x, L, key, &x->c->handler_output);
}

static int
k_queues(cfg_ctx *x, lua_State *L, const char *key)
{
    char sub[200], what[300];

    (void)key;
    if (jr_queues_read(L, &x->c->queues, sub, sizeof sub, what,
                       sizeof what) < 0)
        return jr_key_fail(x, sub, "%s", what);
    return 0;
}

static int
k_serve_queues(cfg_ctx *x, lua_State *L, const char *key)
{
    char what[300];

    if (jr_queues_read_serve(L, &x->c->queues, what, sizeof what) < 0)
        return jr_key_fail(x, key, "%s", what);
    return 0;
}

static const key_row retention_rows[] = {
    {"completed", K_PERIOD, AT(keep_completed), 0, JR_RANGE_RETENTION_MAX,
     0, NULL, NULL, "how long completed jobs stay; 0: none"},
    {"cancelled", K_PERIOD, AT(keep_cancelled), 0, JR_RANGE_RETENTION_MAX,
     7 * JR_RANGE_DAY, NULL, NULL, "how long cancelled jobs stay"},
    {"dead", K_PERIOD, AT(keep_dead), 0, JR_RANGE_RETENTION_MAX, -1, NULL,
     NULL, "how long dead jobs stay; by default until purged"},
    {"queues", K_PERIOD, AT(keep_queues), 0, JR_RANGE_RETENTION_MAX, 3600,
     NULL, NULL, "how long an idle queue keeps its row"},
    {NULL, K_FN, 0, 0, 0, NONE, NULL, NULL, NULL}
};

static int
k_retention(cfg_ctx *x, lua_State *L, const char *key)
{
    (void)key;
    if (lua_type(L, -1) != LUA_TTABLE)
        return jr_key_fail(x, "retention", "must be a table, got %s",
                           luaL_typename(L, -1));
    return jr_key_walk(x, L, retention_rows, "retention.");
}

static int
k_schedules(cfg_ctx *x, lua_State *L, const char *key)
{
    (void)key;
    return jr_schedules_read(L, &x->c->schedules, x->file, x->text, x->err);
}

static int
k_http(cfg_ctx *x, lua_State *L, const char *key)
{
    char sub[64], what[256];

    snprintf(sub, sizeof sub, "%s", key);
    if (jr_config_http(L, x->c, sub, sizeof sub, what, sizeof what) < 0)
        return jr_key_fail(x, sub, "%s", what);
    return 0;
}

static int
k_tracing(cfg_ctx *x, lua_State *L, const char *key)
{
    char sub[200], what[300];

    snprintf(sub, sizeof sub, "%s", key);
    if (jr_config_tracing(L, x->c, sub, sizeof sub, what, sizeof what) < 0)
        return jr_key_fail(x, sub, "%s", what);
    return 0;
}

static int
k_limits(cfg_ctx *x, lua_State *L, const char *key)
{
    char sub[200], what[300];

    (void)key;
    if (jr_limits_read(L, &x->c->limits, sub, sizeof sub, what,
                       sizeof what) < 0)
        return jr_key_fail(x, sub, "%s", what);
    return 0;
}

/* encryption = { key_file = PATH }: the file is read (and its mode
 * checked) by whoever uses it, the runner at its start. */
static int
k_encryption(cfg_ctx *x, lua_State *L, const char *key)
{
    int rc = 0;

    if (lua_type(L, -1) != LUA_TTABLE)
        return jr_key_fail(x, key, "must be a table { key_file = PATH }, "
                           "got %s", luaL_typename(L, -1));
    lua_pushnil(L);                                  /* t k */
    while (rc == 0 && lua_next(L, -2) != 0) {        /* t k v */
        if (lua_type(L, -2) != LUA_TSTRING ||
            strcmp(lua_tostring(L, -2), "key_file") != 0)
            rc = jr_key_fail(x, key, "has one key, key_file");
        else if (lua_type(L, -1) != LUA_TSTRING ||
                 *lua_tostring(L, -1) == '\0')
            rc = jr_key_fail(x, "encryption.key_file", "must be a file "
                             "path");
        else
            rc = jr_key_string(x, L, "encryption.key_file",
                               &x->c->key_file);
        lua_pop(L, rc == 0 ? 1 : 2);                 /* t k | t */
    }
    if (rc == 0 && x->c->key_file == NULL)
        rc = jr_key_fail(x, key, "needs key_file");
    return rc;
}

/* The top-level keys, in the order an unknown key's error lists them. */
static const key_row top_rows[] = {
    {"backend", K_STR, AT(backend), 0, 0, NONE, NULL, NULL,
     "the database URL"},
    {"scripts", K_STR, AT(scripts), 0, 0, NONE, NULL, NULL,
     "the directory of the handler files"},
    {"concurrency", K_FN, 0, 1, 4096, NONE, NULL, k_concurrency,
     "workers: a number, or { min = A, max = B }"},
    {"defaults", K_FN, 0, 0, 0, NONE, NULL, k_defaults,
     "the job settings a handler file does not set"},
    {"lease", K_SECS, AT(lease), JR_RANGE_LEASE_MIN, JR_RANGE_LEASE_MAX, 30,
     NULL, NULL, "seconds a claim holds without renewal"},
    {"poll_interval", K_SECS, AT(poll_interval), JR_RANGE_POLL_MIN,
     JR_RANGE_POLL_MAX, 1, NULL, NULL, "seconds between fallback polls"},
    {"shutdown_timeout", K_SECS, AT(shutdown_timeout), 0, JR_RANGE_DAY, 25,
     NULL, NULL, "seconds running jobs get on SIGTERM"},
    {"log", K_FN, 0, 0, 0, NONE, NULL, k_log, "the log's level and format"},
    {"synchronous", K_FN, 0, 0, 0, NONE, "\"full\" or \"normal\"",
     k_synchronous, "SQLite: how a commit reaches the disk"},
    {"on_parent_failure", K_FN, 0, 0, 0, NONE,
     "\"cancel\", \"run\" or \"dead\"", k_on_parent_failure,
     "what a failed parent does to a job waiting for it"},
    {"busy_timeout", K_SECS, AT(busy_timeout), 0, JR_RANGE_BUSY_MAX, 5,
     NULL, NULL, "SQLite: seconds to wait for a lock"},
    {"schema", K_STR, AT(schema), 0, 0, NONE, NULL, NULL,
     "PostgreSQL: the schema of the tables"},
    {"handler_role", K_STR, AT(handler_role), 0, 0, NONE, NULL, NULL,
     "PostgreSQL: the role jobrunner.sql statements run as"},
    {"attach", K_STR, AT(attach), 0, 0, NONE, NULL, NULL,
     "SQLite: a file attached as app for jobrunner.sql"},
    {"max_payload", K_SIZE, AT(max_payload), 1, 1 << 30, 1 << 20, NULL,
     NULL, "bytes of a job's payload"},
    {"max_result", K_SIZE, AT(max_result), 1, 1 << 30, 64 << 10, NULL, NULL,
     "bytes of a handler's result"},
    {"result_ttl", K_PERIOD, AT(result_ttl), 0, JR_RANGE_RETENTION_MAX, 3600,
     NULL, NULL, "how long a job with a result stays completed"},
    {"hooks", K_FN, 0, 0, 0, NONE, NULL, k_hooks,
     "functions the master calls at its moments"},
    {"backoff", K_FN, 0, 0, 0, NONE, NULL, k_top_backoff,
     "a function(job, attempt, err) of the retry delay"},
    {"tick_interval", K_SECS, AT(tick_interval), JR_RANGE_TICK_MIN,
     JR_RANGE_DAY, 5, NULL, NULL, "seconds between on_tick hooks"},
    {"idle_timeout", K_SECS, AT(idle_timeout), JR_RANGE_TICK_MIN,
     JR_RANGE_DAY, 30, NULL, NULL, "seconds before an idle worker retires"},
    {"load_timeout", K_SECS, AT(load_timeout), JR_RANGE_LOAD_MIN,
     JR_RANGE_LOAD_MAX, 60, NULL, NULL,
     "seconds a new worker has to load its handlers"},
    {"max_snoozes", K_INT, AT(max_snoozes), 0, 1 << 30, 100, NULL, NULL,
     "snoozes of one job before it fails; 0: no limit"},
    {"pid_file", K_STR, AT(pid_file), 0, 0, NONE, NULL, NULL,
     "the pid file `jobrunner reload` reads"},
    {"watch", K_BOOL, AT(watch), 0, 0, 1, NULL, NULL,
     "reload when the handler files change"},
    {"memory_limit", K_MIB, AT(memory_limit), 0, 1 << 20, 256, NULL, NULL,
     "MiB a worker's Lua may hold; 0: no limit"},
    {"max_jobs_per_worker", K_LONG, AT(max_jobs_per_worker), 0, 1 << 30, 0,
     NULL, NULL, "jobs before a worker is replaced; 0: never"},
    {"vacuum_every", K_LONG, AT(vacuum_every), 0, 1 << 30, JR_VACUUM_EVERY,
     NULL, NULL, "PostgreSQL: finished jobs between vacuums; 0: never"},
    {"wait_for_db", K_FN, 0, 0, JR_RANGE_DAY, NONE, NULL, k_wait_for_db,
     "seconds to retry the database at start, or true / false"},
    {"handler_output", K_FN, 0, 0, 0, NONE,
     "\"log\", \"inherit\" or a file path", k_handler_output,
     "where handlers' print and stdout go"},
    {"queues", K_FN, 0, 0, 0, NONE, NULL, k_queues,
     "the named queues and their workers"},
    {"serve_queues", K_FN, 0, 0, 0, NONE, NULL, k_serve_queues,
     "the queues this runner claims from"},
    {"retention", K_FN, 0, 0, 0, NONE, NULL, k_retention,
     "how long finished jobs stay"},
    {"schedules", K_FN, 0, 0, 0, NONE, NULL, k_schedules,
     "recurring jobs"},
    {"timezone", K_STR, AT(schedules.timezone), 0, 0, NONE, NULL, NULL,
     "the schedules' time zone"},
    {"http", K_FN, 0, 0, 0, NONE, NULL, k_http, "the HTTP server"},
    {"limits", K_FN, 0, 0, 0, NONE, NULL, k_limits,
     "caps and rates per name or queue"},
    {"encryption", K_FN, 0, 0, 0, NONE, NULL, k_encryption,
     "the key file that encrypts payloads and results"},
    {"tracing", K_FN, 0, 0, 0, NONE, NULL, k_tracing,
     "OpenTelemetry spans to an OTLP/HTTP collector"},
    {NULL, K_FN, 0, 0, 0, NONE, NULL, NULL, NULL}
};

/* The default of each plain key of rows, into c. */
static void
row_defaults(jr_config *c, const key_row *rows)
{
    const key_row *r;

    for (r = rows; r->key; r++) {
        char *at = (char *)c + r->off;
        if (r->type == K_FN || isnan(r->def))
            continue;
        if (r->type == K_SECS || r->type == K_PERIOD)
            *(double *)at = r->def;
        else if (r->type == K_INT || r->type == K_BOOL)
            *(int *)at = (int)r->def;
        else if (r->type == K_SIZE)
            *(size_t *)at = (size_t)r->def;
        else if (r->type == K_MIB)
            *(size_t *)at = (size_t)r->def << 20;
        else if (r->type == K_LONG)
            *(long *)at = (long)r->def;
    }
}

void
jr_keys_defaults(jr_config *c)
{
    row_defaults(c, top_rows);
    row_defaults(c, defaults_rows);
    row_defaults(c, retention_rows);
    row_defaults(c, log_rows);
}


int
jr_keys_read(jr_config *c, lua_State *L, const char *file, const char *text,
             jr_err *err)
{
    cfg_ctx x = {c, file, text, err, NULL};
    char what[300];

    if (jr_key_plain(&x, L, "", 0) < 0 ||
        jr_key_walk(&x, L, top_rows, "") < 0)        /* t */
        return -1;
    if (jr_queues_check_serve(&c->queues, what, sizeof what) < 0)
        return jr_key_fail(&x, "serve_queues", "names %s", what);
    return 0;
}
