/* script.h - loading a scripts directory into handlers: the walk, each
 * file in its own _ENV, the handler options, the generation hash, and the
 * load watchdog. Owns the handler table of one state. Uses err.h, job.h,
 * and luabridge.h (included: states and protected calls) to run files. */
#ifndef JR_SCRIPT_H
#define JR_SCRIPT_H

#include "base/err.h"
#include "base/job.h"
#include "lua/luabridge.h"

/* What loading a scripts directory gave. */
typedef struct jr_scripts {
    jr_handler *h;              /* sorted by name */
    int         n;
    char      **errors;         /* "file:line: message" per failed file */
    int         nerrors;
    char        generation[17]; /* hex content hash of every .lua file */
    int         ref;            /* registry: name -> handler table */
} jr_scripts;

/* Loads every handler under dir into L. A file that fails is recorded in
 * s->errors and skipped; -1 only when dir cannot be read. Free with
 * jr_scripts_free(). */
int  jr_scripts_load(lua_State *L, const char *dir, jr_scripts *s,
                     jr_err *err);
void jr_scripts_free(jr_scripts *s);

/* Arms (secs > 0) or disarms (0) a wall-clock limit on loading handlers in
 * this process, for a file whose top level blocks outside Lua: when it
 * fires, "jobrunner: FILE: did not finish loading within Ns" goes to
 * stderr and the process exits with status. Uses SIGALRM and
 * ITIMER_REAL. */
void jr_scripts_watchdog(double secs, int status);

/* Lists the handler names under dir without running any of their code:
 * a name is listed when its file compiles (syntax errors go to s->errors).
 * Options are unset (-1, 0, -1) and s->ref is LUA_NOREF. -1 only when dir
 * cannot be read. Free with jr_scripts_free(). */
int  jr_scripts_names(const char *dir, jr_scripts *s, jr_err *err);

/* Pushes the handler table of name, or nil. [-0, +1, -] */
void jr_scripts_push(lua_State *L, const jr_scripts *s, const char *name);

#endif
