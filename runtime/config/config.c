/* config.c - jobrunner.lua: a Lua chunk returning a table, run under the
 * Lua budget, then read key by key (the key table is keys.c's). The state
 * stays open: it holds functions the config defines. Also the defaults
 * and the freeing. Uses keys.h, script.h, util.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "config/config.h"
#include "config/keys.h"
#include "base/keyring.h"
#include "base/log.h"
#include "lua/script.h"
#include "base/util.h"

#define DEFAULT_FILE "jobrunner.lua"

void
jr_config_defaults(jr_config *c)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);

    memset(c, 0, sizeof *c);
    c->conc_min = c->conc_max = n > 0 ? (int)n : 2;
    jr_keys_defaults(c);        /* the plain keys', from their rows */
    c->log_level = JR_LOG_INFO;
    c->wait_for_db = -1;
    c->trace_sample = 1;
    c->ref = LUA_NOREF;
}

int
jr_config_set(char **slot, const char *value, jr_err *err)
{
    char *v = strdup(value);

    if (v == NULL)
        return jr_fail(err, JR_ENOMEM, "out of memory");
    free(*slot);
    *slot = v;
    return 0;
}

/* os.exit would end the process reading the config: `check` without a
 * word, and the runner itself at a reload (SIGHUP), leaving its jobs
 * leased and its pid file behind. The config and its hooks get this
 * instead, as handlers get theirs (worker.c). */
static int
config_exit(lua_State *L)
{
    return luaL_error(L, "os.exit(%s) called by the config: it cannot stop "
                      "the runner", lua_isnone(L, 1) ? "" :
                      luaL_tolstring(L, 1, NULL));
}

static void
no_exit(lua_State *L)                                /* [-0, +0, m] */
{
    if (lua_getglobal(L, "os") == LUA_TTABLE) {      /* os */
        lua_pushcfunction(L, config_exit);           /* os f */
        lua_setfield(L, -2, "exit");                 /* os */
    }
    lua_pop(L, 1);                                   /* (nothing) */
}

/* Runs the file under the Lua budget (a config that loops forever would
 * hang every command); leaves its table on the stack. */
static int
run_file(jr_config *c, lua_State *L, jr_err *err)
{
    int rc;

    /* text only: Lua does not verify bytecode */
    if (luaL_loadfilex(L, c->file, "t") != LUA_OK) { /* msg */
        jr_fail(err, JR_ECONFIG, "%s", lua_tostring(L, -1));
        lua_pop(L, 1);
        return -1;
    }                                                /* chunk */
    rc = jr_luabridge_run(L, 0, 1, JR_LUA_BUDGET, err); /* t | (nothing) */
    if (rc < 0) {
        err->code = JR_ECONFIG;
        return -1;
    }                                                /* t */
    if (!lua_istable(L, -1)) {
        jr_fail(err, JR_ECONFIG, "%s: must return a table, returned %s",
                c->file, luaL_typename(L, -1));
        lua_pop(L, 1);
        return -1;
    }
    return 0;
}

int
jr_config_load(jr_config *c, const char *file, lua_State *L, jr_err *err)
{
    char *text;
    int rc;

    if (file == NULL && access(DEFAULT_FILE, F_OK) == 0)
        file = DEFAULT_FILE;
    if (file == NULL)
        return 0;
    if (jr_config_set(&c->file, file, err) < 0)
        return -1;
    if ((text = jr_read_file(file)) == NULL)
        return jr_fail_errno(err, JR_ECONFIG, errno, "cannot read config "
                             "'%s'", file);
    if (L == NULL) {
        if ((L = jr_luabridge_state(NULL, err)) == NULL) {
            free(text);
            return -1;
        }
        c->owns_L = 1;
        no_exit(L);
    }
    c->L = L;
    if (run_file(c, L, err) < 0) {
        free(text);
        return -1;
    }                                                /* t */
    rc = jr_keys_read(c, L, file, text, err);        /* t */
    if (rc == 0)
        rc = jr_schedules_finish(&c->schedules, c->max_payload, file,
                                 text, err);
    free(text);
    c->ref = luaL_ref(L, LUA_REGISTRYINDEX);         /* (nothing) */
    return rc;
}

void
jr_config_free(jr_config *c)
{
    if (c->L != NULL && c->owns_L)
        lua_close(c->L);
    free(c->file);
    free(c->backend);
    free(c->scripts);
    free(c->schema);
    free(c->handler_role);
    free(c->attach);
    free(c->pid_file);
    free(c->key_file);
    jr_keyring_free(c->keys);
    free(c->handler_output);
    free(c->http_listen);
    free(c->http_token);
    jr_tokens_free(c->http_tokens, c->http_ntokens);
    jr_queues_free(&c->queues);
    jr_schedules_free(&c->schedules);
    jr_limits_free(&c->limits);
    free(c->trace_endpoint);
    for (int i = 0; i < c->trace_nheaders; i++)
        free(c->trace_headers[i]);
    free(c->trace_headers);
    memset(c, 0, sizeof *c);
}
