/* luaflow.c - the producer module's workflow methods (docs/workflows.md):
 * q:flow{...} pushes a flow (the table is encoded to the JSON of a flow
 * and read by base/flow.c, one reader for every door) and
 * q:batch(fn, opts) pushes what fn pushes on its collector as one batch.
 * Uses jobrunner.h (jr_client_push_flow), json.h, luaclient.h. */
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "client/jobrunner.h"
#include "client/luaclient.h"
#include "lua/json.h"

/* One job pushed: t[ref] = id.  */
static int
flow_id(const char *ref, int64_t id, void *arg)
{
    lua_State *L = arg;                              /* .. t */

    lua_pushinteger(L, (lua_Integer)id);             /* .. t id */
    lua_setfield(L, -2, ref);                        /* .. t */
    return 0;
}

/* q:flow(t): returns { ref = id, ... } and the batch id (or nil), or
 * nil, msg. */
int
jr_luaclient_flow(lua_State *L)                      /* q t */
{
    jr_client *c = jr_luaclient_check(L);
    char msg[400];
    int64_t batch = 0;
    jr_buf *b;

    luaL_checktype(L, 2, LUA_TTABLE);
    lua_settop(L, 2);
    b = jr_json_buf_new(L);                          /* q t b */
    if (jr_json_encode(L, 2, b, msg, sizeof msg) < 0)
        return jr_luaclient_fail(L, lua_pushfstring(L, "flow: %s", msg));
    lua_newtable(L);                                 /* q t b ids */
    if (jr_client_push_flow(c, b->p, b->len - 1, flow_id, L, &batch)
        != JR_CLIENT_OK)
        return jr_luaclient_fail(L, jr_client_errmsg(c));
    if (batch == 0)
        lua_pushnil(L);                              /* .. ids nil */
    else
        lua_pushinteger(L, (lua_Integer)batch);      /* .. ids batch */
    return 2;
}

/* q:batch(fn, opts): fn(b) calls b:push(name, payload, opts) for each
 * member; then the members and opts (on_complete, on_success, payload,
 * queue, results) go as one flow. Returns the batch id and the members'
 * ids in push order, or nil, msg. */
static const char batch_lua[] =
    "local q, fn, opts = ...\n"
    "if type(fn) ~= 'function' then\n"
    "  error('batch: argument 1 must be a function, got ' .. type(fn), 2)\n"
    "end\n"
    "local jobs = {}\n"
    "local b = {}\n"
    "function b:push(name, payload, o)\n"
    "  if type(name) ~= 'string' then\n"
    "    error('batch: push: name must be a string', 2)\n"
    "  end\n"
    "  local j = { ref = tostring(#jobs + 1), name = name,\n"
    "              payload = payload or {} }\n"
    "  for k, v in pairs(o or {}) do\n"
    "    if k == 'ref' or k == 'name' or k == 'payload' then\n"
    "      error('batch: push: unknown option ' .. k, 2)\n"
    "    end\n"
    "    j[k] = v\n"
    "  end\n"
    "  jobs[#jobs + 1] = j\n"
    "  return #jobs\n"
    "end\n"
    "fn(b)\n"
    "if #jobs == 0 then return nil, 'batch: fn pushed no job' end\n"
    "local ids, batch = q:flow({ jobs = jobs, batch = opts or {} })\n"
    "if not ids then return nil, batch end\n"
    "local list = {}\n"
    "for i = 1, #jobs do list[i] = ids[tostring(i)] end\n"
    "return batch, list\n";

int
jr_luaclient_batch(lua_State *L)                     /* q fn opts */
{
    jr_luaclient_check(L);
    lua_settop(L, 3);
    if (luaL_loadbuffer(L, batch_lua, sizeof batch_lua - 1, "=batch")
        != LUA_OK)
        return lua_error(L);
    lua_insert(L, 1);                                /* chunk q fn opts */
    lua_call(L, 3, 2);                               /* batch ids */
    return 2;
}
