/* keys.c - the config's key table: one row per top-level key of
 * jobrunner.lua and the reader of each (types, ranges, the line of a
 * wrong key); the sections' own readers are queues.c, schedules.c,
 * limitcfg.c, cfghttp.c and cfgbackoff.c. Uses config.h, hooks.h,
 * log.h, util.h. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "config/config.h"
#include "config/keys.h"
#include "lua/hooks.h"
#include "lua/json.h"
#include "base/log.h"
#include "base/util.h"

typedef struct cfg_ctx {
    jr_config  *c;
    const char *file;
    const char *text;           /* file contents, to find a key's line */
    jr_err     *err;
} cfg_ctx;

typedef int (*key_fn)(cfg_ctx *x, lua_State *L, const char *key);

typedef struct key_row {
    const char *key;
    key_fn      fn;
} key_row;

/* The line where key is first assigned in the file, or 0. */
static int
key_line(const cfg_ctx *x, const char *key)
{
    const char *p = x->text;
    size_t n = strlen(key);

    while (p && (p = strstr(p, key)) != NULL) {
        const char *q = p + n;
        int word_start = p == x->text || !(p[-1] == '_' ||
                         (p[-1] >= 'a' && p[-1] <= 'z') ||
                         (p[-1] >= 'A' && p[-1] <= 'Z'));
        while (*q == ' ' || *q == '\t')
            q++;
        if (word_start && *q == '=' && q[1] != '=') {
            int line = 1;
            const char *s;
            for (s = x->text; s < p; s++)
                line += *s == '\n';
            return line;
        }
        p += n;
    }
    return 0;
}

/* The line of a dotted key: its last part's, else its first part's (a
 * list item, "http.?" or "schedules[2]", has no line of its own), or 0. */
static int
path_line(const cfg_ctx *x, const char *key)
{
    char first[64];
    const char *dot = strrchr(key, '.');
    int line = key_line(x, dot ? dot + 1 : key);

    if (line > 0)
        return line;
    snprintf(first, sizeof first, "%.*s", (int)strcspn(key, ".["), key);
    return key_line(x, first);
}

__attribute__((format(printf, 3, 4))) static int
key_fail(cfg_ctx *x, const char *key, const char *fmt, ...)
{
    char what[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return jr_fail(x->err, JR_ECONFIG, "%s:%d: '%s' %s", x->file,
                   path_line(x, key), key, what);
}

/* Value at the top of L as a number of seconds in [lo, hi]. */
static int
get_number(cfg_ctx *x, lua_State *L, const char *key, double lo, double hi,
           double *out)
{
    double v;

    if (lua_type(L, -1) != LUA_TNUMBER)
        return key_fail(x, key, "must be a number, got %s",
                        luaL_typename(L, -1));
    v = lua_tonumber(L, -1);
    if (!(v >= lo && v <= hi))          /* NaN too */
        return key_fail(x, key, "is out of range (%g to %g seconds), got %g",
                        lo, hi, v);
    *out = v;
    return 0;
}

static int
get_int(cfg_ctx *x, lua_State *L, const char *key, int lo, int hi, int *out)
{
    lua_Integer v;
    double d;

    if (lua_type(L, -1) != LUA_TNUMBER)
        return key_fail(x, key, "must be a whole number, got %s",
                        luaL_typename(L, -1));
    d = lua_tonumber(L, -1);
    /* range first: casting an out-of-range double is undefined */
    if (!(d >= lo && d <= hi))
        return key_fail(x, key, "is out of range (%d to %d)", lo, hi);
    if (!lua_isinteger(L, -1) && !lua_numbertointeger(d, &v))
        return key_fail(x, key, "must be a whole number, got %s", "NaN");
    if (!lua_isinteger(L, -1) && (double)(v = (lua_Integer)d) != d)
        return key_fail(x, key, "must be a whole number, got %s",
                        "a fraction");
    *out = (int)d;
    return 0;
}

static int
get_string(cfg_ctx *x, lua_State *L, const char *key, char **out)
{
    if (lua_type(L, -1) != LUA_TSTRING)
        return key_fail(x, key, "must be a string, got %s",
                        luaL_typename(L, -1));
    return jr_config_set(out, lua_tostring(L, -1), x->err);
}

/* Walks the table at the top of L, calling the row for each key; unknown
 * keys are errors listing the valid ones. prefix is "" or "defaults.". */
static int
walk(cfg_ctx *x, lua_State *L, const key_row *rows, const char *prefix)
{
    char key[128], valid[512], odd[120];
    const key_row *r;
    size_t n;

    if (jr_json_map(L, -1, odd, sizeof odd) < 0) {
        if (*prefix == '\0')
            return jr_fail(x->err, JR_ECONFIG, "%s: config keys must be "
                           "strings, found the key %s", x->file, odd);
        snprintf(key, sizeof key, "%.*s", (int)strlen(prefix) - 1, prefix);
        return key_fail(x, key, "must be a table of named keys, found the "
                        "key %s", odd);
    }
    lua_pushnil(L);                                  /* t nil */
    while (lua_next(L, -2)) {                        /* t k v */
        snprintf(key, sizeof key, "%s%s", prefix, lua_tostring(L, -2));
        for (r = rows; r->key; r++)
            if (strcmp(r->key, lua_tostring(L, -2)) == 0)
                break;
        if (r->key == NULL) {
            for (n = 0, valid[0] = '\0', r = rows; r->key; r++)
                n += (size_t)snprintf(valid + n, sizeof valid - n, "%s%s",
                                      n ? ", " : "", r->key);
            lua_pop(L, 2);
            return jr_fail(x->err, JR_ECONFIG, "%s:%d: unknown key '%s' in "
                           "config (valid keys: %s)", x->file,
                           path_line(x, key), key, valid);
        }
        if (r->fn(x, L, key) < 0) {                  /* t k v */
            lua_pop(L, 2);
            return -1;
        }
        lua_pop(L, 1);                               /* t k */
    }                                                /* t */
    return 0;
}

static int
k_backend(cfg_ctx *x, lua_State *L, const char *key)
{
    return get_string(x, L, key, &x->c->backend);
}

static int
k_scripts(cfg_ctx *x, lua_State *L, const char *key)
{
    return get_string(x, L, key, &x->c->scripts);
}

static int
k_schema(cfg_ctx *x, lua_State *L, const char *key)
{
    return get_string(x, L, key, &x->c->schema);
}

static int
k_lease(cfg_ctx *x, lua_State *L, const char *key)
{
    return get_number(x, L, key, JR_RANGE_LEASE_MIN,
                      JR_RANGE_LEASE_MAX, &x->c->lease);
}

static int
k_poll(cfg_ctx *x, lua_State *L, const char *key)
{
    return get_number(x, L, key, JR_RANGE_POLL_MIN, JR_RANGE_POLL_MAX,
                      &x->c->poll_interval);
}

static int
k_shutdown(cfg_ctx *x, lua_State *L, const char *key)
{
    return get_number(x, L, key, 0, JR_RANGE_DAY, &x->c->shutdown_timeout);
}

static int
k_busy(cfg_ctx *x, lua_State *L, const char *key)
{
    return get_number(x, L, key, 0, JR_RANGE_BUSY_MAX,
                      &x->c->busy_timeout);
}

static int
k_max_payload(cfg_ctx *x, lua_State *L, const char *key)
{
    int v;

    if (get_int(x, L, key, 1, 1 << 30, &v) < 0)
        return -1;
    x->c->max_payload = (size_t)v;
    return 0;
}

static int
k_max_result(cfg_ctx *x, lua_State *L, const char *key)
{
    int v;

    if (get_int(x, L, key, 1, 1 << 30, &v) < 0)
        return -1;
    x->c->max_result = (size_t)v;
    return 0;
}

static int
k_synchronous(cfg_ctx *x, lua_State *L, const char *key)
{
    const char *v = lua_tostring(L, -1);

    if (lua_type(L, -1) != LUA_TSTRING ||
        (strcmp(v, "full") != 0 && strcmp(v, "normal") != 0))
        return key_fail(x, key, "must be %s", "\"full\" or \"normal\"");
    x->c->sync_normal = strcmp(v, "normal") == 0;
    return 0;
}

/* What a parent ending dead or cancelled does to a job waiting for it,
 * when its push says nothing (docs/workflows.md). */
static int
k_on_parent_failure(cfg_ctx *x, lua_State *L, const char *key)
{
    const char *v = lua_tostring(L, -1);

    if (lua_type(L, -1) != LUA_TSTRING || jr_opf_parse(v) < 0)
        return key_fail(x, key, "must be %s",
                        "\"cancel\", \"run\" or \"dead\"");
    x->c->on_parent_failure = jr_opf_parse(v);
    return 0;
}

static int
k_concurrency(cfg_ctx *x, lua_State *L, const char *key)
{
    char sub[64];
    int lo, hi;

    if (lua_type(L, -1) == LUA_TNUMBER) {
        if (get_int(x, L, key, 1, 4096, &lo) < 0)
            return -1;
        x->c->conc_min = x->c->conc_max = lo;
        return 0;
    }
    if (lua_type(L, -1) != LUA_TTABLE)
        return key_fail(x, key, "must be a number or { min = A, max = B }, "
                        "got %s", luaL_typename(L, -1));
    lua_pushnil(L);                                  /* t nil */
    while (lua_next(L, -2)) {                        /* t k v */
        lua_pop(L, 1);                               /* t k */
        if (lua_type(L, -1) != LUA_TSTRING ||
            (strcmp(lua_tostring(L, -1), "min") != 0 &&
             strcmp(lua_tostring(L, -1), "max") != 0)) {
            if (lua_type(L, -1) != LUA_TSTRING)  /* { 1, 4 }: a list */
                return lua_pop(L, 1), key_fail(x, key, "must be a number "
                                               "or { min = A, max = B }, "
                                               "got a list");
            snprintf(sub, sizeof sub, "%.40s", lua_tostring(L, -1));
            lua_pop(L, 1);                           /* t */
            return key_fail(x, key, "has an unknown key '%s' (valid: min, "
                            "max)", sub);
        }
    }                                                /* t */
    lua_getfield(L, -1, "min");                      /* t min */
    snprintf(sub, sizeof sub, "%s.min", key);
    lo = 1;
    if (!lua_isnil(L, -1) && get_int(x, L, sub, 1, 4096, &lo) < 0)
        return lua_pop(L, 1), -1;
    lua_getfield(L, -2, "max");                      /* t min max */
    snprintf(sub, sizeof sub, "%s.max", key);
    hi = lo > x->c->conc_max ? lo : x->c->conc_max;
    if (!lua_isnil(L, -1) && get_int(x, L, sub, 1, 4096, &hi) < 0)
        return lua_pop(L, 2), -1;
    lua_pop(L, 2);                                   /* t */
    if (hi < lo)
        return key_fail(x, key, "has max below min%s", "");
    x->c->conc_min = lo;
    x->c->conc_max = hi;
    return 0;
}

static int
k_max_retries(cfg_ctx *x, lua_State *L, const char *key)
{
    return get_int(x, L, key, 0, JR_RANGE_RETRIES_MAX, &x->c->max_retries);
}

static int
k_timeout(cfg_ctx *x, lua_State *L, const char *key)
{
    return get_number(x, L, key, JR_RANGE_TIMEOUT_MIN,
                      JR_RANGE_TIMEOUT_MAX, &x->c->timeout);
}

static int
k_inflight(cfg_ctx *x, lua_State *L, const char *key)
{
    return get_int(x, L, key, 1, JR_RANGE_INFLIGHT_MAX, &x->c->inflight);
}

static int
k_backoff(cfg_ctx *x, lua_State *L, const char *key)
{
    double v;

    if (lua_type(L, -1) == LUA_TFUNCTION)
        return 0;               /* the master calls it (retry.c) */
    return get_number(x, L, key, 0, JR_RANGE_BACKOFF_MAX, &v);
}

static int
k_defaults(cfg_ctx *x, lua_State *L, const char *key)
{
    static const key_row rows[] = {
        {"max_retries", k_max_retries}, {"timeout", k_timeout},
        {"backoff", k_backoff}, {"inflight", k_inflight}, {NULL, NULL}};
    (void)key;
    if (lua_type(L, -1) != LUA_TTABLE)
        return key_fail(x, "defaults", "must be a table, got %s",
                        luaL_typename(L, -1));
    return walk(x, L, rows, "defaults.");
}

static int
k_level(cfg_ctx *x, lua_State *L, const char *key)
{
    const char *v = lua_tostring(L, -1);
    int level = lua_type(L, -1) == LUA_TSTRING ? jr_log_level(v) : -1;

    if (level < 0)
        return key_fail(x, key, "must be %s",
                        "\"debug\", \"info\", \"warn\" or \"error\"");
    x->c->log_level = level;
    return 0;
}

static int
k_format(cfg_ctx *x, lua_State *L, const char *key)
{
    const char *v = lua_tostring(L, -1);

    if (lua_type(L, -1) != LUA_TSTRING ||
        (strcmp(v, "text") != 0 && strcmp(v, "json") != 0))
        return key_fail(x, key, "must be %s", "\"text\" or \"json\"");
    x->c->log_json = strcmp(v, "json") == 0;
    return 0;
}

static int
k_log(cfg_ctx *x, lua_State *L, const char *key)
{
    static const key_row rows[] = {
        {"level", k_level}, {"format", k_format}, {NULL, NULL}};
    (void)key;
    if (lua_type(L, -1) != LUA_TTABLE)
        return key_fail(x, "log", "must be a table, got %s",
                        luaL_typename(L, -1));
    return walk(x, L, rows, "log.");
}

static int
k_tick(cfg_ctx *x, lua_State *L, const char *key)
{
    return get_number(x, L, key, JR_RANGE_TICK_MIN, JR_RANGE_DAY,
                      &x->c->tick_interval);
}

static int
k_idle(cfg_ctx *x, lua_State *L, const char *key)
{
    return get_number(x, L, key, JR_RANGE_TICK_MIN, JR_RANGE_DAY,
                      &x->c->idle_timeout);
}

static int
k_load_timeout(cfg_ctx *x, lua_State *L, const char *key)
{
    return get_number(x, L, key, JR_RANGE_LOAD_MIN, JR_RANGE_LOAD_MAX,
                      &x->c->load_timeout);
}

static int
k_max_snoozes(cfg_ctx *x, lua_State *L, const char *key)
{
    return get_int(x, L, key, 0, 1 << 30, &x->c->max_snoozes);
}

static int
k_pid_file(cfg_ctx *x, lua_State *L, const char *key)
{
    return get_string(x, L, key, &x->c->pid_file);
}

static int
k_watch(cfg_ctx *x, lua_State *L, const char *key)
{
    if (lua_type(L, -1) != LUA_TBOOLEAN)
        return key_fail(x, key, "must be true or false, got %s",
                        luaL_typename(L, -1));
    x->c->watch = lua_toboolean(L, -1);
    return 0;
}

static int
k_hooks(cfg_ctx *x, lua_State *L, const char *key)
{
    char odd[120], where[4096 + 16];

    if (lua_type(L, -1) != LUA_TTABLE)
        return key_fail(x, key, "must be a table of functions, got %s",
                        luaL_typename(L, -1));
    if (jr_json_map(L, -1, odd, sizeof odd) < 0)
        return key_fail(x, key, "must be a table of NAME = function, found "
                        "the key %s", odd);
    snprintf(where, sizeof where, "%s:%d", x->file, key_line(x, key));
    return jr_hooks_check(L, where, x->err);
}

static int
k_top_backoff(cfg_ctx *x, lua_State *L, const char *key)
{
    if (lua_type(L, -1) != LUA_TFUNCTION)
        return key_fail(x, key, "must be a function(job, attempt, err), "
                        "got %s", luaL_typename(L, -1));
    return 0;
}

static int
k_memory(cfg_ctx *x, lua_State *L, const char *key)
{
    int mib;

    if (get_int(x, L, key, 0, 1 << 20, &mib) < 0)
        return -1;
    x->c->memory_limit = (size_t)mib << 20;
    return 0;
}

static int
k_count(cfg_ctx *x, lua_State *L, const char *key)
{
    int n;

    if (get_int(x, L, key, 0, 1 << 30, &n) < 0)
        return -1;
    *(key[0] == 'm' ? &x->c->max_jobs_per_worker : &x->c->vacuum_every) = n;
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
        return key_fail(x, key, "must be true, false or seconds, got %s",
                        luaL_typename(L, -1));
    return get_number(x, L, key, 0, JR_RANGE_DAY, &x->c->wait_for_db);
}

static int
k_handler_output(cfg_ctx *x, lua_State *L, const char *key)
{
    if (lua_type(L, -1) != LUA_TSTRING || *lua_tostring(L, -1) == '\0')
        return key_fail(x, key, "must be %s", "\"log\", \"inherit\" or "
                        "a file path");
    return get_string(x, L, key, &x->c->handler_output);
}

static int
k_queues(cfg_ctx *x, lua_State *L, const char *key)
{
    char sub[200], what[300];

    (void)key;
    if (jr_queues_read(L, &x->c->queues, sub, sizeof sub, what,
                       sizeof what) < 0)
        return key_fail(x, sub, "%s", what);
    return 0;
}

static int
k_serve_queues(cfg_ctx *x, lua_State *L, const char *key)
{
    char what[300];

    if (jr_queues_read_serve(L, &x->c->queues, what, sizeof what) < 0)
        return key_fail(x, key, "%s", what);
    return 0;
}

/* A period: seconds, or a duration string ("30s", "7d"), into *out. */
static int
get_period(cfg_ctx *x, lua_State *L, const char *key, double *out)
{
    jr_err e;

    if (lua_type(L, -1) != LUA_TSTRING)
        return get_number(x, L, key, 0, JR_RANGE_RETENTION_MAX, out);
    if (jr_parse_duration(lua_tostring(L, -1), key, out, &e) < 0)
        return key_fail(x, key, "must be seconds or a duration such as "
                        "\"30s\", \"15m\", \"7d\", got \"%.64s\"",
                        lua_tostring(L, -1));
    if (*out > JR_RANGE_RETENTION_MAX)
        return key_fail(x, key, "is out of range (0 to %g seconds), got "
                        "%g", JR_RANGE_RETENTION_MAX, *out);
    return 0;
}

/* A retention period. */
static int
k_keep(cfg_ctx *x, lua_State *L, const char *key)
{
    const char *k = strchr(key, '.') + 1;
    double *out = k[0] == 'c' && k[1] == 'o' ? &x->c->keep_completed :
                  k[0] == 'c' ? &x->c->keep_cancelled :
                  k[0] == 'q' ? &x->c->keep_queues : &x->c->keep_dead;

    return get_period(x, L, key, out);
}

/* How long a succeeded job with a result (or waited on) stays. */
static int
k_result_ttl(cfg_ctx *x, lua_State *L, const char *key)
{
    return get_period(x, L, key, &x->c->result_ttl);
}

static int
k_retention(cfg_ctx *x, lua_State *L, const char *key)
{
    static const key_row rows[] = {{"completed", k_keep},
        {"cancelled", k_keep}, {"dead", k_keep}, {"queues", k_keep},
        {NULL, NULL}};
    (void)key;
    if (lua_type(L, -1) != LUA_TTABLE)
        return key_fail(x, "retention", "must be a table, got %s",
                        luaL_typename(L, -1));
    return walk(x, L, rows, "retention.");
}

static int
k_schedules(cfg_ctx *x, lua_State *L, const char *key)
{
    (void)key;
    return jr_schedules_read(L, &x->c->schedules, x->file, x->text, x->err);
}

static int
k_timezone(cfg_ctx *x, lua_State *L, const char *key)
{
    return get_string(x, L, key, &x->c->schedules.timezone);
}

static int
k_http(cfg_ctx *x, lua_State *L, const char *key)
{
    char sub[64], what[256];

    snprintf(sub, sizeof sub, "%s", key);
    if (jr_config_http(L, x->c, sub, sizeof sub, what, sizeof what) < 0)
        return key_fail(x, sub, "%s", what);
    return 0;
}

static int
k_limits(cfg_ctx *x, lua_State *L, const char *key)
{
    char sub[200], what[300];

    (void)key;
    if (jr_limits_read(L, &x->c->limits, sub, sizeof sub, what,
                       sizeof what) < 0)
        return key_fail(x, sub, "%s", what);
    return 0;
}

static const key_row top_rows[] = {
    {"backend", k_backend},
    {"scripts", k_scripts},
    {"concurrency", k_concurrency},
    {"defaults", k_defaults},
    {"lease", k_lease},
    {"poll_interval", k_poll},
    {"shutdown_timeout", k_shutdown},
    {"log", k_log},
    {"synchronous", k_synchronous},
    {"on_parent_failure", k_on_parent_failure},
    {"busy_timeout", k_busy},
    {"schema", k_schema},
    {"max_payload", k_max_payload},
    {"max_result", k_max_result},
    {"result_ttl", k_result_ttl},
    {"hooks", k_hooks},
    {"backoff", k_top_backoff},
    {"tick_interval", k_tick},
    {"idle_timeout", k_idle},
    {"load_timeout", k_load_timeout},
    {"max_snoozes", k_max_snoozes},
    {"pid_file", k_pid_file},
    {"watch", k_watch},
    {"memory_limit", k_memory},
    {"max_jobs_per_worker", k_count},
    {"vacuum_every", k_count},
    {"wait_for_db", k_wait_for_db},
    {"handler_output", k_handler_output},
    {"queues", k_queues},
    {"serve_queues", k_serve_queues},
    {"retention", k_retention},
    {"schedules", k_schedules},
    {"timezone", k_timezone},
    {"http", k_http},
    {"limits", k_limits},
    {NULL, NULL}
};

/* How deep plain() looks: limits.NAME.per_key.rate is the deepest key. */
#define PLAIN_DEPTH 4

/* The table at the top of L and the tables in it, PLAIN_DEPTH deep: no
 * metatable (its __index, __len or __tostring would run inside the
 * readers, outside any protected call and budget: a raise aborted the
 * runner, a loop hung it) and no string, value or key, holding a NUL
 * byte (C would read it cut short: "scripts\0x" was "scripts"). path
 * names the table ("" at the top).  [-0, +0, m] */
static int
plain(cfg_ctx *x, lua_State *L, const char *path, int depth)
{
    char sub[128];
    size_t n, nul;

    if (lua_getmetatable(L, -1)) {                   /* t mt */
        lua_pop(L, 1);                               /* t */
        return *path ? key_fail(x, path, "has a metatable: the config's "
                                "tables must be plain tables%s", "") :
               jr_fail(x->err, JR_ECONFIG, "%s: the table it returns has a "
                       "metatable: the config's tables must be plain "
                       "tables", x->file);
    }
    lua_pushnil(L);                                  /* t nil */
    while (lua_next(L, -2)) {                        /* t k v */
        if (lua_type(L, -2) == LUA_TSTRING) {
            const char *k = lua_tolstring(L, -2, &n);
            snprintf(sub, sizeof sub, "%s%s%s", path, *path ? "." : "", k);
            if (strlen(k) != n)
                return lua_pop(L, 2), key_fail(x, path, "has a key holding "
                                               "a NUL byte ('%s' then NUL)",
                                               k);
        } else if (lua_isinteger(L, -2)) {
            snprintf(sub, sizeof sub, "%s[%lld]", path,
                     (long long)lua_tointeger(L, -2));
        } else {
            snprintf(sub, sizeof sub, "%s", path);   /* walk names it */
        }
        if (lua_type(L, -1) == LUA_TSTRING &&
            (nul = strlen(lua_tolstring(L, -1, &n))) != n)
            return lua_pop(L, 2), key_fail(x, sub, "holds a NUL byte (byte "
                                           "%zu)", nul + 1);
        if (lua_type(L, -1) == LUA_TTABLE && depth < PLAIN_DEPTH &&
            plain(x, L, sub, depth + 1) < 0)
            return lua_pop(L, 2), -1;
        lua_pop(L, 1);                               /* t k */
    }                                                /* t */
    return 0;
}

int
jr_keys_read(jr_config *c, lua_State *L, const char *file, const char *text,
             jr_err *err)
{
    cfg_ctx x = {c, file, text, err};
    char what[300];

    if (plain(&x, L, "", 0) < 0 ||
        walk(&x, L, top_rows, "") < 0)               /* t */
        return -1;
    if (jr_queues_check_serve(&c->queues, what, sizeof what) < 0)
        return key_fail(&x, "serve_queues", "names %s", what);
    return 0;
}
