/* fairlua.c - a job name's fair weights from a hook (docs/queues.md, "A
 * name's own weights"): jobrunner.fair.set_name(name, key, weight), what
 * `jobrunner fair set --name` does, stored in the database for every
 * runner's next claims. The write goes to the database thread between
 * cycles; a failed one is logged. Uses svc.h, dbcalls.h, dbthread.h,
 * log.h, jsontext.h. */
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "db/dbcalls.h"
#include "db/dbthread.h"
#include "base/jsontext.h"
#include "base/log.h"
#include "master/svc.h"
#include "services/fairlua.h"
#include "base/util.h"

/* One write on its way; name and key share its allocation. */
typedef struct setreq {
    double  weight;
    int     rc;
    jr_err  err;
    char   *key;                /* after name, in the same block */
    char    name[];
} setreq;

static void
run(jr_db *db, void *arg)
{
    setreq *r = arg;

    r->rc = jr_dbcall_fair_name_set(db, r->name, r->key, r->weight,
                                    &r->err);
}

static void
done(void *arg, int ran)
{
    setreq *r = arg;

    if (ran && r->rc < 0)
        jr_log(JR_LOG_WARN, "jobrunner.fair.set_name: '%s': %s", r->name,
               r->err.msg);
    free(r);
}

/* 1 if s (n bytes) is a fair key: 1 to 256 bytes of UTF-8, no NUL. */
static int
key_ok(const char *s, size_t n)
{
    size_t u = 1, left = n;
    const char *p = s;

    for (; left && u && *p; p += u, left -= u)
        u = jr_jsontext_utf8_len((const unsigned char *)p, left);
    return n >= 1 && n <= 256 && left == 0;
}

/* fair.set_name(name, key, weight): true once the write is on its way,
 * or nil and a message; arguments of the wrong type raise.
 * [-0, +1|2, m] */
static int
fair_set_name(lua_State *L)
{
    master *m = lua_touserdata(L, lua_upvalueindex(1));
    size_t nn, kn;
    const char *name = luaL_checklstring(L, 1, &nn);
    const char *key = luaL_checklstring(L, 2, &kn);
    lua_Number w = luaL_checknumber(L, 3);
    const char *bad = NULL;
    jr_err err;
    setreq *r;

    if (strlen(name) != nn || jr_name_check(name, "job name", &err) < 0)
        bad = "not a job name";
    else if (!key_ok(key, kn))
        bad = "the key must be UTF-8 text of 1 to 256 bytes";
    else if (!(w >= 1 && w <= 1000))
        bad = "the weight must be a number from 1 to 1000";
    else if (jr_svc_dbthread(m) == NULL)
        bad = "no database thread (the runner stops)";
    if (bad != NULL) {
        lua_pushnil(L);                              /* .. nil */
        lua_pushfstring(L, "jobrunner.fair.set_name: %s", bad);
        return 2;                                    /* .. nil msg */
    }
    if ((r = calloc(1, sizeof *r + nn + kn + 2)) == NULL)
        return luaL_error(L, "jobrunner.fair.set_name: out of memory");
    memcpy(r->name, name, nn + 1);
    r->key = r->name + nn + 1;
    memcpy(r->key, key, kn + 1);
    r->weight = w;
    if (jr_dbthread_request(jr_svc_dbthread(m), run, done, r) < 0) {
        free(r);
        return luaL_error(L, "jobrunner.fair.set_name: out of memory");
    }
    lua_pushboolean(L, 1);                           /* .. true */
    return 1;
}

static const luaL_Reg fair_fns[] = {
    {"set_name", fair_set_name}, {NULL, NULL}};

void
jr_fairlua_open(master *m)
{
    lua_State *L = jr_svc_config(m)->L;

    if (L == NULL)
        return;
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE); /* loaded */
    lua_createtable(L, 0, 1);                        /* loaded lib */
    lua_pushlightuserdata(L, m);                     /* loaded lib m */
    luaL_setfuncs(L, fair_fns, 1);                   /* loaded lib */
    lua_pushvalue(L, -1);                            /* loaded lib lib */
    lua_setfield(L, -3, "jobrunner.fair");           /* loaded lib */
    if (lua_getfield(L, -2, "jobrunner") == LUA_TTABLE) { /* loaded lib jr */
        lua_pushvalue(L, -2);                        /* loaded lib jr lib */
        lua_setfield(L, -2, "fair");                 /* loaded lib jr */
    }
    lua_pop(L, 3);                                   /* (nothing) */
}
