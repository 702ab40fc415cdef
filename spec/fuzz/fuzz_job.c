/* fuzz_job.c - the job decoding path of a worker: a JR_F_JOB frame body
 * through jr_frame_get_job, then its payload through lua-cjson's decode
 * and the whole-numbers-to-integers walk, as runtime/worker/run.c does in
 * set_payload() and integers() (static there, so mirrored here; keep the
 * two in step). Input byte 0 picks the mode:
 *   even: the rest is a job frame body;
 *   odd:  the rest is a payload, put in a well-formed job frame first (so
 *         the JSON decoder is fuzzed directly). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "fuzz.h"
#include "worker/frame.h"

static lua_State *L;
static int decode_ref;

/* As worker.c's integers(): whole floats of the table on top become
 * integers, nested tables up to depth 100. [-0, +0, -] */
static void
integers(lua_State *S, int depth)
{
    if (!lua_istable(S, -1) || depth > 100 || !lua_checkstack(S, 4))
        return;
    lua_pushnil(S);
    while (lua_next(S, -2)) {
        if (lua_type(S, -1) == LUA_TNUMBER && !lua_isinteger(S, -1)) {
            lua_Integer i;
            if (lua_numbertointeger(lua_tonumber(S, -1), &i) &&
                (double)i == lua_tonumber(S, -1)) {
                lua_pushvalue(S, -2);
                lua_pushinteger(S, i);
                lua_rawset(S, -5);
            }
        } else if (lua_istable(S, -1)) {
            integers(S, depth + 1);
        }
        lua_pop(S, 1);
    }
}

static void
setup(void)
{
    L = luaL_newstate();
    if (L == NULL)
        abort();
    luaL_openlibs(L);
    lua_getglobal(L, "require");
    lua_pushliteral(L, "cjson");
    if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
        fprintf(stderr, "fuzz_job: require 'cjson': %s (apt install "
                "lua-cjson)\n", lua_tostring(L, -1));
        exit(1);
    }
    lua_getfield(L, -1, "decode");
    decode_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_pop(L, 1);
}

/* As worker.c's set_payload(), into a job table. */
static void
decode_payload(const jr_job *j)
{
    lua_newtable(L);                                 /* job */
    lua_pushinteger(L, j->id);
    lua_setfield(L, -2, "id");
    lua_pushstring(L, j->name);
    lua_setfield(L, -2, "name");
    lua_rawgeti(L, LUA_REGISTRYINDEX, decode_ref);   /* job dec */
    lua_pushlstring(L, j->payload, j->payload_len);  /* job dec s */
    if (lua_pcall(L, 1, 1, 0) != LUA_OK) {           /* job msg */
        if (lua_tostring(L, -1) == NULL)
            abort();                                 /* a message, always */
        lua_pop(L, 2);
        return;
    }                                                /* job payload */
    integers(L, 0);
    lua_setfield(L, -2, "payload");                  /* job */
    lua_pop(L, 1);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static unsigned runs;
    jr_reader r;
    jr_err err;
    jr_job *j;
    jr_buf b = {0};

    if (size == 0)
        return 0;
    if (L == NULL)
        setup();
    if (data[0] & 1) {
        jr_job *src = jr_job_new(7, "fuzz", "default",
                                 (const char *)data + 1, size - 1);
        if (src == NULL)
            abort();
        jr_frame_put_job(&b, src);
        free(src);
        if (b.oom)
            abort();
        jr_frame_open(&r, b.p);
    } else {
        r.p = (const char *)data + 1;
        r.n = size - 1;
        r.bad = 0;
    }
    if ((j = jr_frame_get_job(&r, &err)) != NULL) {
        decode_payload(j);
        free(j);
    } else if (data[0] & 1) {
        abort();                                     /* it was well formed */
    }
    jr_buf_free(&b);
    if (lua_gettop(L) != 0)
        abort();
    if (++runs % 1000 == 0)
        lua_gc(L, LUA_GCCOLLECT);
    return 0;
}
