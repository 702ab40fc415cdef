/* hooks.h - the config's lifecycle hooks, run in the master's config Lua
 * state: one event table per call, a traceback when a hook raises, an
 * instruction budget so a looping hook is interrupted. An absent hook costs
 * one array lookup. Takes the config's state and the registry ref of its
 * table from the caller (config.c makes them); calls through luabridge.h,
 * logs failures with log.h. Uses err.h. */
#ifndef JR_HOOKS_H
#define JR_HOOKS_H

#include "base/err.h"

typedef struct lua_State lua_State;

enum {
    JR_HOOK_START, JR_HOOK_STOP, JR_HOOK_RELOAD, JR_HOOK_JOB_START,
    JR_HOOK_JOB_SUCCESS, JR_HOOK_JOB_RETRY, JR_HOOK_JOB_DEAD, JR_HOOK_SCALE,
    JR_HOOK_TICK, JR_HOOK_COUNT
};

typedef struct jr_hooks jr_hooks;

/* Checks the table at the top of L (the config's "hooks"): every key must
 * be a known hook name holding a function. Returns 0 or -1 with err naming
 * the key. [-0, +0, -] */
int  jr_hooks_check(lua_State *L, const char *file, jr_err *err);

/* Returns the hooks of the config table (registry ref cfg_ref) in L
 * (borrowed), or NULL when there are none. */
jr_hooks *jr_hooks_new(lua_State *L, int cfg_ref);
void      jr_hooks_free(jr_hooks *h);     /* NULL is a no-op */

/* Whether hook which is defined; h may be NULL. */
int  jr_hooks_has(const jr_hooks *h, int which);

/* Building and firing one event: begin returns 0 (and nothing else need be
 * called) when the hook is absent. Fields go into the event table. */
int  jr_hook_begin(jr_hooks *h, int which);
void jr_hook_int(jr_hooks *h, const char *key, long long v);
void jr_hook_num(jr_hooks *h, const char *key, double v);
void jr_hook_str(jr_hooks *h, const char *key, const char *v);
void jr_hook_bool(jr_hooks *h, const char *key, int v);
/* Opens a nested table under key; jr_hook_close ends it. */
void jr_hook_open(jr_hooks *h, const char *key);
void jr_hook_close(jr_hooks *h);
/* Calls the hook with the event. If it returns a number and result is not
 * NULL, stores it there and returns 1; returns 0 otherwise, -1 when the
 * hook failed (logged). */
int  jr_hook_fire(jr_hooks *h, double *result);
/* As jr_hook_fire; a table it returns may hold `workers` (a number: into
 * *result, returns 1) and `queues` ({ name = number }: fn for each). */
typedef void (*jr_hook_target_fn)(const char *name, double v, void *arg);
int  jr_hook_fire_targets(jr_hooks *h, double *result, jr_hook_target_fn fn,
                          void *arg);

#endif
