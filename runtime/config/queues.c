/* queues.c - the queue settings of a runner: `queues` (each queue's
 * concurrency), `serve_queues` and `run --queues`. Reading only: the
 * master's per-queue counts are qstate.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "base/job.h"
#include "config/queues.h"
#include "lua/json.h"
#include "lua/luaopts.h"

const jr_queue_conf *
jr_queues_find(const jr_queues *qs, const char *name)
{
    int i;

    for (i = 0; i < qs->n; i++)
        if (strcmp(qs->q[i].name, name) == 0)
            return &qs->q[i];
    return NULL;
}

int
jr_queues_served(const jr_queues *qs, const char *name)
{
    int i;

    for (i = 0; i < qs->nserve; i++)
        if (strcmp(qs->serve[i], name) == 0)
            return 1;
    return qs->nserve == 0;
}

static void
free_serve(jr_queues *qs)
{
    int i;

    for (i = 0; i < qs->nserve; i++)
        free(qs->serve[i]);
    free(qs->serve);
    qs->serve = NULL;
    qs->nserve = 0;
}

void
jr_queues_free(jr_queues *qs)
{
    int i;

    for (i = 0; i < qs->n; i++)
        free(qs->q[i].name);
    free(qs->q);
    free_serve(qs);
    memset(qs, 0, sizeof *qs);
}

/* The whole number at the top of L in 0..JR_QUEUE_CAP_MAX, or -1 with
 * what said. */
static int
cap_value(lua_State *L, int *out, char *what, size_t whatsz)
{
    long long v;

    switch (jr_luaopts_whole(L, 0, JR_QUEUE_CAP_MAX, 0, &v)) {
    case JR_WHOLE_OK:
        *out = (int)v;
        return 0;
    case JR_WHOLE_RANGE:
        snprintf(what, whatsz, "is out of range (0 to %d)", JR_QUEUE_CAP_MAX);
        return -1;
    case JR_WHOLE_FRACTION:
        snprintf(what, whatsz, "must be a whole number, got a fraction");
        return -1;
    default:
        snprintf(what, whatsz, "must be a whole number, got %s",
                 luaL_typename(L, -1));
        return -1;
    }
}

/* { min = A, max = B } at the top of L. [-0, +0, m] */
static int
min_max(lua_State *L, jr_queue_conf *q, char *key, size_t keysz, char *what,
        size_t whatsz)
{
    size_t base = strlen(key);

    lua_pushnil(L);                                  /* t nil */
    while (lua_next(L, -2)) {                        /* t k v */
        const char *k = lua_type(L, -2) == LUA_TSTRING ?
                        lua_tostring(L, -2) : "?";
        int *slot = strcmp(k, "min") == 0 ? &q->min :
                    strcmp(k, "max") == 0 ? &q->max : NULL;
        if (slot == NULL) {
            snprintf(what, whatsz, "has an unknown key '%s' (valid: min, "
                     "max)", k);
            lua_pop(L, 2);
            return -1;
        }
        snprintf(key + base, keysz - base, ".%s", k);
        if (cap_value(L, slot, what, whatsz) < 0) {
            lua_pop(L, 2);
            return -1;
        }
        key[base] = '\0';
        lua_pop(L, 1);                               /* t k */
    }                                                /* t */
    if (q->max < q->min) {
        snprintf(what, whatsz, "has max below min");
        return -1;
    }
    return 0;
}

/* One queue = value at the top of L into q (name set). */
static int
one_queue(lua_State *L, jr_queue_conf *q, char *key, size_t keysz,
          char *what, size_t whatsz)
{
    if (lua_type(L, -1) == LUA_TNUMBER) {
        if (cap_value(L, &q->max, what, whatsz) < 0)
            return -1;
        q->min = q->max;
        return 0;
    }
    if (lua_type(L, -1) != LUA_TTABLE) {
        snprintf(what, whatsz, "must be a number or { min = A, max = B }, "
                 "got %s", luaL_typename(L, -1));
        return -1;
    }
    q->min = 0;
    q->max = JR_QUEUE_CAP_MAX;
    return min_max(L, q, key, keysz, what, whatsz);
}

static int
by_name(const void *a, const void *b)
{
    return strcmp(((const jr_queue_conf *)a)->name,
                  ((const jr_queue_conf *)b)->name);
}

int
jr_queues_read(lua_State *L, jr_queues *qs, char *key, size_t keysz,
               char *what, size_t whatsz)
{
    jr_queue_conf *q, *more;
    char odd[120];
    jr_err err;

    snprintf(key, keysz, "queues");
    if (lua_type(L, -1) != LUA_TTABLE) {
        snprintf(what, whatsz, "must be a table of queue = concurrency, "
                 "got %s", luaL_typename(L, -1));
        return -1;
    }
    if (jr_json_map(L, -1, odd, sizeof odd) < 0) {
        snprintf(what, whatsz, "must be a table of queue = concurrency, "
                 "found the key %s", odd);
        return -1;
    }
    lua_pushnil(L);                                  /* t nil */
    while (lua_next(L, -2)) {                        /* t k v */
        const char *name = lua_type(L, -2) == LUA_TSTRING ?
                           lua_tostring(L, -2) : NULL;
        if (name == NULL || jr_name_check(name, "queue name", &err) < 0) {
            snprintf(what, whatsz, "has an %s", name ? err.msg :
                     "invalid queue name (not a string)");
            return lua_pop(L, 2), -1;
        }
        if ((more = realloc(qs->q, (size_t)(qs->n + 1) * sizeof *more)) ==
            NULL || (more[qs->n].name = strdup(name)) == NULL) {
            qs->q = more ? more : qs->q;
            snprintf(what, whatsz, "cannot be read: out of memory");
            return lua_pop(L, 2), -1;
        }
        qs->q = more;
        q = &qs->q[qs->n++];
        snprintf(key, keysz, "queues.%s", name);
        if (one_queue(L, q, key, keysz, what, whatsz) < 0)
            return lua_pop(L, 2), -1;
        lua_pop(L, 1);                               /* t k */
    }                                                /* t */
    if (qs->n > 1)                  /* qs->q is NULL for queues = {} */
        qsort(qs->q, (size_t)qs->n, sizeof *qs->q, by_name);
    return 0;
}

/* Adds name to the served queues (no duplicates). */
static int
add_serve(jr_queues *qs, const char *name, size_t len)
{
    char **more;
    int i;

    for (i = 0; i < qs->nserve; i++)
        if (strlen(qs->serve[i]) == len &&
            memcmp(qs->serve[i], name, len) == 0)
            return 0;
    if ((more = realloc(qs->serve, (size_t)(qs->nserve + 1) *
                        sizeof *more)) == NULL)
        return -1;
    qs->serve = more;
    if ((more[qs->nserve] = strndup(name, len)) == NULL)
        return -1;
    qs->nserve++;
    return 0;
}

int
jr_queues_read_serve(lua_State *L, jr_queues *qs, char *what, size_t whatsz)
{
    char odd[120];
    jr_err err;
    lua_Integer i, n;

    free_serve(qs);
    if (lua_type(L, -1) == LUA_TTABLE &&
        jr_json_list(L, -1, odd, sizeof odd) < 0) {
        snprintf(what, whatsz, "must be a list of queue names, found the "
                 "key %s", odd);
        return -1;
    }
    if (lua_type(L, -1) != LUA_TTABLE || (n = luaL_len(L, -1)) < 1) {
        snprintf(what, whatsz, "must be a list of queue names, got %s",
                 lua_type(L, -1) == LUA_TTABLE ? "an empty table" :
                 luaL_typename(L, -1));
        return -1;
    }
    for (i = 1; i <= n; i++) {
        int t = lua_rawgeti(L, -1, i);               /* t v */
        const char *s = t == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
        if (s == NULL) {
            snprintf(what, whatsz, "must be a list of queue names, got %s",
                     lua_typename(L, t));
            return lua_pop(L, 1), -1;
        }
        if (jr_name_check(s, "queue name", &err) < 0 ||
            add_serve(qs, s, strlen(s)) < 0) {
            snprintf(what, whatsz, "has an %s", err.code ? err.msg :
                     "entry it cannot keep (out of memory)");
            return lua_pop(L, 1), -1;
        }
        lua_pop(L, 1);                               /* t */
    }
    return 0;
}

/* The configured queue names, "a, b", into buf. */
static void
known_names(const jr_queues *qs, char *buf, size_t size)
{
    size_t n = 0;
    int i;

    buf[0] = '\0';
    for (i = 0; i < qs->n && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n, "%s%s", i ? ", " : "",
                              qs->q[i].name);
}

int
jr_queues_check_serve(const jr_queues *qs, char *what, size_t whatsz)
{
    char known[256];
    int i;

    if (qs->n == 0)
        return 0;               /* no `queues` table: any name */
    for (i = 0; i < qs->nserve; i++)
        if (jr_queues_find(qs, qs->serve[i]) == NULL) {
            known_names(qs, known, sizeof known);
            snprintf(what, whatsz, "unknown queue '%s' (not in the config's "
                     "'queues': %s)", qs->serve[i], known);
            return -1;
        }
    return 0;
}

int
jr_queues_parse_serve(jr_queues *qs, const char *list, jr_err *err)
{
    const char *p = list, *end;
    char what[sizeof err->msg], name[200];
    size_t len;

    free_serve(qs);
    for (;; p = end + 1) {
        end = strchr(p, ',');
        len = end ? (size_t)(end - p) : strlen(p);
        snprintf(name, sizeof name, "%.*s", (int)(len < 150 ? len : 150), p);
        if (len == 0)
            return jr_fail(err, JR_EUSAGE, "--queues: empty queue name in "
                           "'%s'", list);
        if (jr_name_check(name, "queue name", err) < 0) {
            snprintf(what, sizeof what, "%s", err->msg);
            return jr_fail(err, JR_EUSAGE, "--queues: %.400s", what);
        }
        if (add_serve(qs, name, strlen(name)) < 0)
            return jr_fail(err, JR_ENOMEM, "out of memory");
        if (end == NULL)
            break;
    }
    if (jr_queues_check_serve(qs, what, sizeof what) < 0)
        return jr_fail(err, JR_EUSAGE, "--queues: %.400s", what);
    return 0;
}
