/* luaschedrt.c - the producer module's schedules managed at run time
 * (docs/schedules.md, "Schedules managed at run time"):
 * q:schedule_add(name, def), q:schedule_set(name, change),
 * q:schedule_remove(name), q:schedule_backfill(name, from, to). def and
 * change are tables of the config's schedule fields (jobrunner.null
 * removes one in a change) or their JSON text. Each returns true (the
 * backfill: how many it pushed), or nil and the message. Uses
 * luaclient.h, jobrunner.h, json.h. */
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "client/jobrunner.h"
#include "client/luaclient.h"
#include "lua/json.h"

/* The definition at idx as JSON text (anchored on the stack). NULL with
 * the message pushed when it cannot be one. */
static const char *
def_text(lua_State *L, int idx, const char *name)
{
    char msg[300];
    size_t len;
    const char *text;
    jr_buf *b;

    if (lua_type(L, idx) == LUA_TSTRING) {
        text = lua_tolstring(L, idx, &len);
        if (strlen(text) == len)
            return text;
        lua_pushfstring(L, "schedule '%s': the definition holds a NUL byte "
                        "(byte %d)", name, (int)strlen(text) + 1);
        return NULL;
    }
    luaL_argexpected(L, lua_type(L, idx) == LUA_TTABLE, idx,
                     "table or JSON text");
    b = jr_json_buf_new(L);
    if (jr_json_encode(L, idx, b, msg, sizeof msg) < 0 || b->oom) {
        lua_pushfstring(L, "schedule '%s': the definition cannot be JSON: "
                        "%s", name, b->oom ? "out of memory" : msg);
        return NULL;
    }
    return b->p;
}

static int
put(lua_State *L, int what)
{
    jr_client *c = jr_luaclient_check(L);
    const char *name, *def = NULL;
    jr_err err;
    int rc;

    if ((name = jr_luaclient_schedule_name(L, 2, &err)) == NULL)
        return jr_luaclient_fail(L, err.msg);
    if (what != 2 && (def = def_text(L, 3, name)) == NULL)
        return jr_luaclient_fail(L, lua_tostring(L, -1));
    rc = what == 0 ? jr_client_schedule_add(c, name, def) :
         what == 1 ? jr_client_schedule_set(c, name, def) :
         jr_client_schedule_remove(c, name);
    if (rc != JR_CLIENT_OK)
        return jr_luaclient_fail(L, jr_client_errmsg(c));
    lua_pushboolean(L, 1);
    return 1;
}

int
jr_luaclient_schedule_add(lua_State *L)
{
    return put(L, 0);
}

int
jr_luaclient_schedule_set(lua_State *L)
{
    return put(L, 1);
}

int
jr_luaclient_schedule_remove(lua_State *L)
{
    return put(L, 2);
}

/* q:schedule_backfill(name, from, to) -> pushed | nil, msg (epoch
 * seconds) */
int
jr_luaclient_schedule_backfill(lua_State *L)
{
    jr_client *c = jr_luaclient_check(L);
    jr_err err;
    const char *name = jr_luaclient_schedule_name(L, 2, &err);
    double from = luaL_checknumber(L, 3), to = luaL_checknumber(L, 4);
    long n = 0;

    if (name == NULL)
        return jr_luaclient_fail(L, err.msg);
    if (jr_client_schedule_backfill(c, name, from, to, &n) != JR_CLIENT_OK)
        return jr_luaclient_fail(L, jr_client_errmsg(c));
    lua_pushinteger(L, n);
    return 1;
}
