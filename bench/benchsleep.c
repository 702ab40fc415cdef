/* benchsleep.c - a Lua module for bench handlers: benchsleep.sleep(secs)
 * blocks in nanosleep, an os-level wait like a handler's I/O, without the
 * fork that os.execute("sleep 0.001") costs. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <time.h>

#include <lauxlib.h>
#include <lua.h>

int luaopen_benchsleep(lua_State *L);

static int
b_sleep(lua_State *L)
{
    double s = luaL_checknumber(L, 1);
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};

    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
    return 0;
}

int
luaopen_benchsleep(lua_State *L)
{
    static const luaL_Reg f[] = {{"sleep", b_sleep}, {NULL, NULL}};

    luaL_newlib(L, f);
    return 1;
}
