/* scheddef.c - a schedule managed at run time: its JSON definition read
 * through the config's schedule reader (a Lua state of its own for the
 * call), and a change merged into one. Uses scheddef.h, json.h,
 * jsondec.h. */
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "base/job.h"
#include "config/scheddef.h"
#include "lua/json.h"
#include "lua/jsondec.h"

/* Pushes the JSON object text as a table; -1 with err set. */
static int
decode_obj(lua_State *L, const char *name, const char *what,
           const char *text, jr_err *err)
{
    char msg[200];

    if (strlen(text) > JR_SCHEDDEF_MAX)
        return jr_fail(err, JR_EINPUT, "schedule '%s': the %s is over %d "
                       "bytes", name, what, JR_SCHEDDEF_MAX);
    if (jr_json_decode(L, text, strlen(text), msg, sizeof msg) < 0)
        return jr_fail(err, JR_EINPUT, "schedule '%s': the %s is not JSON: "
                       "%s", name, what, msg);
    if (lua_type(L, -1) != LUA_TTABLE ||
        jr_json_map(L, -1, msg, sizeof msg) < 0) {
        lua_pop(L, 1);
        return jr_fail(err, JR_EINPUT, "schedule '%s': the %s must be a "
                       "JSON object of its fields", name, what);
    }
    return 0;
}

/* The reader's "FILE:LINE: " prefix means nothing here: dropped. */
static void
unplace(jr_err *err)
{
    char *p = strstr(err->msg, ":0: ");

    if (p == err->msg)
        memmove(err->msg, p + 4, strlen(p + 4) + 1);
}

typedef struct args {           /* a protected call's */
    const char   *name, *def, *tz, *patch;
    size_t        max;
    jr_schedules *out;
    char        **text;
    jr_err       *err;
} args;

static int
pread(lua_State *L)
{
    args *a = lua_touserdata(L, 1);
    const char *name = a->name, *def = a->def, *tz = a->tz;
    size_t max = a->max;
    jr_schedules *out = a->out;
    jr_err *err = a->err;
    int rc;

    lua_settop(L, 0);
    if (decode_obj(L, name, "definition", def, err) < 0)
        return lua_pushinteger(L, -1), 1;
    lua_pushnil(L);                     /* a field null is a field unset */
    while (lua_next(L, 1)) {                         /* def k v */
        if (lua_type(L, -1) == LUA_TLIGHTUSERDATA &&
            lua_touserdata(L, -1) == NULL) {
            lua_pushvalue(L, -2);
            lua_pushnil(L);
            lua_settable(L, 1);         /* clearing a field: next goes on */
        }
        lua_pop(L, 1);
    }
    lua_getfield(L, 1, "name");
    rc = !lua_isnil(L, -1) && (lua_type(L, -1) != LUA_TSTRING ||
                               strcmp(lua_tostring(L, -1), name) != 0);
    lua_pop(L, 1);
    if (rc) {
        jr_fail(err, JR_EINPUT, "schedule '%s': its 'name' field differs "
                "from the name given", name);
        return lua_pushinteger(L, -1), 1;
    }
    lua_pushstring(L, name);
    lua_setfield(L, 1, "name");
    lua_createtable(L, 1, 0);
    lua_pushvalue(L, 1);
    lua_rawseti(L, -2, 1);
    rc = jr_schedules_read(L, out, "", NULL, err);
    if (rc == 0 && tz != NULL && (out->timezone = strdup(tz)) == NULL)
        rc = jr_fail(err, JR_ENOMEM, "out of memory");
    if (rc == 0)
        rc = jr_schedules_finish(out, max, "", NULL, err);
    if (rc < 0 && err->code == JR_ECONFIG)
        err->code = JR_EINPUT;
    if (rc == 0)
        out->s[0].runtime = 1;
    lua_pushinteger(L, rc);
    return 1;
}

int
jr_scheddef_read(const char *name, const char *def, const char *timezone,
                 size_t max_payload, jr_schedules *out, jr_err *err)
{
    args a = {name, def, timezone, NULL, max_payload, out, NULL, err};
    lua_State *L;
    int rc;

    memset(out, 0, sizeof *out);
    if (jr_name_check(name, "schedule name", err) < 0) {
        err->code = JR_EINPUT;
        return -1;
    }
    if ((L = luaL_newstate()) == NULL)
        return jr_fail(err, JR_ENOMEM, "out of memory");
    lua_pushcfunction(L, pread);
    lua_pushlightuserdata(L, &a);
    if (lua_pcall(L, 1, 1, 0) != LUA_OK)
        rc = jr_fail(err, JR_ENOMEM, "schedule '%s': %s", name,
                     lua_tostring(L, -1));
    else
        rc = (int)lua_tointeger(L, -1);
    lua_close(L);
    if (rc < 0) {
        unplace(err);
        jr_schedules_free(out);
    }
    return rc < 0 ? -1 : 0;
}

#define FIELDS "cron, every, tz, payload, queue, priority, max_retries, " \
               "catch_up, job, overlap, jitter, start_at, end_at"

/* Whether k is a field a change may remove (one of FIELDS). */
static int
removable(const char *k)
{
    static const char *const fields[] = {"cron", "every", "tz", "payload",
        "queue", "priority", "max_retries", "catch_up", "job", "overlap",
        "jitter", "start_at", "end_at", NULL};
    int i;

    for (i = 0; fields[i] != NULL; i++)
        if (strcmp(fields[i], k) == 0)
            return 1;
    return 0;
}

/* Whether the change (index 2) gives field k a value (not null). */
static int
set_in(lua_State *L, const char *k)
{
    int set;

    lua_getfield(L, 2, k);
    set = !lua_isnil(L, -1) && !(lua_type(L, -1) == LUA_TLIGHTUSERDATA &&
                                 lua_touserdata(L, -1) == NULL);
    lua_pop(L, 1);
    return set;
}

static int
pmerge(lua_State *L)
{
    args *a = lua_touserdata(L, 1);
    const char *def = a->def, *patch = a->patch;
    char **out = a->text;
    jr_err *err = a->err;
    char msg[300];
    jr_buf *b;

    lua_settop(L, 0);
    if (decode_obj(L, a->name, "definition", def, err) < 0 ||
        decode_obj(L, a->name, "change", patch, err) < 0)
        return lua_pushinteger(L, -1), 1;
    if (set_in(L, "cron") && set_in(L, "every")) {  /* which would stay? */
        jr_fail(err, JR_EINPUT, "schedule '%s': 'cron' and 'every' are "
                "both set: choose one", a->name);
        return lua_pushinteger(L, -1), 1;
    }
    lua_pushnil(L);                                  /* def patch nil */
    while (lua_next(L, 2)) {                         /* def patch k v */
        const char *k = lua_tostring(L, -2);
        if (strcmp(k, "cron") == 0 || strcmp(k, "every") == 0) {
            lua_pushnil(L);
            lua_setfield(L, 1, strcmp(k, "cron") == 0 ? "every" : "cron");
        }
        if (lua_touserdata(L, -1) == NULL && lua_type(L, -1) ==
            LUA_TLIGHTUSERDATA && !removable(k)) {   /* a typo undoes nothing */
            jr_fail(err, JR_EINPUT, "schedule '%s': '%.60s' is not a field "
                    "to remove (valid: " FIELDS ")", a->name, k);
            return lua_pushinteger(L, -1), 1;
        }
        lua_pushvalue(L, -2);
        if (lua_touserdata(L, -2) == NULL && lua_type(L, -2) ==
            LUA_TLIGHTUSERDATA)
            lua_pushnil(L);                          /* null: removed */
        else
            lua_pushvalue(L, -2);
        lua_settable(L, 1);
        lua_pop(L, 1);
    }
    b = jr_json_buf_new(L);
    if (jr_json_encode(L, 1, b, msg, sizeof msg) < 0 || b->oom) {
        jr_fail(err, b->oom ? JR_ENOMEM : JR_EINPUT, "the merged schedule "
                "cannot be JSON: %s", b->oom ? "out of memory" : msg);
        return lua_pushinteger(L, -1), 1;
    }
    if ((*out = strdup(b->p)) == NULL)
        jr_fail(err, JR_ENOMEM, "out of memory");
    lua_pushinteger(L, *out ? 0 : -1);
    return 1;
}

int
jr_scheddef_merge(const char *name, const char *def, const char *patch,
                  char **out, jr_err *err)
{
    args a = {name, def, NULL, patch, 0, NULL, out, err};
    lua_State *L;
    int rc;

    *out = NULL;
    if ((L = luaL_newstate()) == NULL)
        return jr_fail(err, JR_ENOMEM, "out of memory");
    lua_pushcfunction(L, pmerge);
    lua_pushlightuserdata(L, &a);
    if (lua_pcall(L, 1, 1, 0) != LUA_OK)
        rc = jr_fail(err, JR_ENOMEM, "%s", lua_tostring(L, -1));
    else
        rc = (int)lua_tointeger(L, -1);
    lua_close(L);
    if (rc < 0) {
        free(*out);
        *out = NULL;
    }
    return rc < 0 ? -1 : 0;
}
