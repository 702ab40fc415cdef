/* fuzz_config.c - the config loader (config.c): arbitrary bytes written to
 * a temp file ending in .lua and loaded with jr_config_load, then freed.
 * The file is Lua and runs. The runner loads it in a state with every
 * library; here it runs in a state with the safe ones (base without
 * dofile/loadfile/print, string, table, math, utf8, coroutine), so that a
 * fuzzed config cannot touch files or exit, with a memory cap and an
 * instruction budget: jr_config_load has no instruction limit of its own,
 * and a fuzzed `while true do end` would otherwise hang the fuzzer (set
 * FUZZ_CONFIG_NO_BUDGET=1 to run without it, and -timeout= to see that). */
#define _DEFAULT_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "fuzz.h"
#include "config/config.h"

#define MEM_CAP     (64u << 20)  /* bytes a fuzzed config may allocate */
#define BUDGET      2000000      /* instructions, in steps of STEP */
#define STEP        1000

static char path[64];
static size_t used;
static long steps;

static void *
capped_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    (void)ud;
    if (ptr == NULL)
        osize = 0;
    if (nsize == 0) {
        used -= osize;
        free(ptr);
        return NULL;
    }
    if (nsize > osize && used + (nsize - osize) > MEM_CAP)
        return NULL;
    ptr = realloc(ptr, nsize);
    if (ptr != NULL)
        used += nsize - osize;
    return ptr;
}

static void
budget(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    if (++steps > BUDGET / STEP)
        luaL_error(L, "fuzz_config: instruction budget exhausted");
}

static lua_State *
sandbox(void)
{
    static const luaL_Reg libs[] = {
        {LUA_GNAME, luaopen_base}, {LUA_STRLIBNAME, luaopen_string},
        {LUA_TABLIBNAME, luaopen_table}, {LUA_MATHLIBNAME, luaopen_math},
        {LUA_UTF8LIBNAME, luaopen_utf8}, {LUA_COLIBNAME, luaopen_coroutine},
        {NULL, NULL}};
    const luaL_Reg *l;
    lua_State *L = lua_newstate(capped_alloc, NULL);

    if (L == NULL)
        abort();
    for (l = libs; l->name; l++) {
        luaL_requiref(L, l->name, l->func, 1);
        lua_pop(L, 1);
    }
    lua_pushnil(L);
    lua_setglobal(L, "dofile");
    lua_pushnil(L);
    lua_setglobal(L, "loadfile");
    lua_pushnil(L);
    lua_setglobal(L, "print");
    steps = 0;
    if (getenv("FUZZ_CONFIG_NO_BUDGET") == NULL)
        lua_sethook(L, budget, LUA_MASKCOUNT, STEP);
    return L;
}

/* luaL_loadfile (config.c) also loads precompiled chunks, and Lua does
 * not verify bytecode: a corrupt one may crash the interpreter, which is
 * Lua's documented limit, not the loader's bug. Such inputs are skipped:
 * after an optional UTF-8 BOM and '#' line, a chunk starting with ESC. */
static int
is_binary_chunk(const uint8_t *p, size_t n)
{
    if (n >= 3 && p[0] == 0xEF && p[1] == 0xBB && p[2] == 0xBF) {
        p += 3;
        n -= 3;
    }
    if (n > 0 && p[0] == '#') {
        while (n > 0 && p[0] != '\n') {
            p++;
            n--;
        }
        if (n > 0) {
            p++;
            n--;
        }
    }
    return n > 0 && p[0] == 0x1b;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    jr_config c;
    jr_err err;
    lua_State *L;
    int fd;

    if (is_binary_chunk(data, size))
        return 0;
    snprintf(path, sizeof path, "/tmp/fuzz_config.XXXXXX.lua");
    if ((fd = mkstemps(path, 4)) < 0 ||
        (size > 0 && write(fd, data, size) != (ssize_t)size) ||
        close(fd) != 0) {
        perror(path);
        exit(1);
    }
    L = sandbox();
    memset(&err, 0, sizeof err);
    jr_config_defaults(&c);
    if (jr_config_load(&c, path, L, &err) < 0) {
        if (err.code == 0 || err.msg[0] == '\0') {
            fprintf(stderr, "fuzz_config: failure without a message\n");
            abort();
        }
    } else {
        if (c.conc_max < c.conc_min) {
            fprintf(stderr, "fuzz_config: accepted concurrency %d..%d\n",
                    c.conc_min, c.conc_max);
            abort();
        }
    }
    unlink(path);
    jr_config_free(&c);
    lua_close(L);
    if (used != 0) {
        fprintf(stderr, "fuzz_config: %zu bytes still held\n", used);
        abort();
    }
    return 0;
}
