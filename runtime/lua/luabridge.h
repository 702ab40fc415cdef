/* luabridge.h - every entry from C into Lua: states, protected calls with
 * a traceback, instruction budgets (a count hook) and timeouts (a timer
 * signal, SIGUSR2, that has the hook look), the job
 * table handlers see. Owns the limit of the call that runs (the
 * innermost's, per C thread) and a bound coroutine's, in its extra
 * space. Uses err.h, job.h. Its functions are jr_luabridge_*; script.h
 * includes this header. */
#ifndef JR_LUABRIDGE_H
#define JR_LUABRIDGE_H

#include <stddef.h>

#include "base/err.h"
#include "base/job.h"

typedef struct lua_State lua_State;

#define JR_SIGNAL_MT "jobrunner.signal" /* snooze/discard unwind as these */

/* Returns a new state with the standard libraries, package.path pointing at
 * scripts_dir (may be NULL) first, or NULL with err set. Close with
 * lua_close(). */
lua_State *jr_luabridge_state(const char *scripts_dir, jr_err *err);

/* The allocation limit of states made by jr_luabridge_state_limited. */
typedef struct jr_memlimit {
    size_t used;                /* bytes held by the state */
    size_t limit;               /* refuse beyond this while enforced */
    int    enforce;             /* only while a handler runs */
    int    hit;                 /* an allocation failed for good */
    int    refused;             /* the last request was refused, */
    void  *rptr;                /* this one, and Lua's retry after its */
    size_t rosize, rnsize;      /* emergency collection may still pass */
} jr_memlimit;

/* 1 if an allocation of ml's state was refused for good since the last
 * jr_memlimit_clear: refused again after Lua's emergency collection (or
 * with none), so that Lua raised its memory error, caught or not. A
 * refusal whose retry passed is none. */
int  jr_memlimit_failed(const jr_memlimit *ml);
void jr_memlimit_clear(jr_memlimit *ml);

/* Lifts the limit of L's state (if it has one) for the runtime's own
 * allocations on an error path; returns what to give jr_memlimit_restore. */
int  jr_memlimit_lift(lua_State *L);
void jr_memlimit_restore(lua_State *L, int enforce);

/* Like jr_luabridge_state, with allocations counted in ml (borrowed, must
 * outlive the state) and refused past ml->limit while ml->enforce is set. */
lua_State *jr_luabridge_state_limited(const char *scripts_dir, jr_memlimit *ml,
                                   jr_err *err);

/* Calls the function below the top nargs values. Success leaves nres
 * results; failure fills err with message and traceback.
 * [-(nargs+1), +(nres|0), -] */
int jr_luabridge_pcall(lua_State *L, int nargs, int nres, jr_err *err);

/* Like jr_luabridge_pcall but returns lua_pcall's status and leaves the error
 * value on top (a string with traceback, or a jobrunner signal).
 * [-(nargs+1), +(nres|1), -] */
int jr_luabridge_xpcall(lua_State *L, int nargs, int nres);

/* Instructions one call into config or loading Lua may run: a config file,
 * a handler file's top level, a hook, a backoff function. Past it the call
 * fails with "file:line: interrupted: ran more than N instructions". */
#define JR_LUA_BUDGET 50000000L

/* jr_luabridge_xrun's status for a call that returned after its timeout. */
#define JR_SCRIPT_LATE (-100)

/* The one bridge into Lua: calls the function below the top nargs values
 * with a traceback, under a budget of instructions (0: none). Once the
 * budget is spent every later check raises again, so a pcall inside cannot
 * swallow it. Success leaves nres results; failure fills err with
 * "file:line: message" and the traceback. [-(nargs+1), +(nres|0), -] */
int jr_luabridge_run(lua_State *L, int nargs, int nres, long budget,
                  jr_err *err);

/* Like jr_luabridge_run with a wall-clock timeout in seconds as well (0:
 * none), returning lua_pcall's status (JR_SCRIPT_LATE when it returned
 * past the timeout) and leaving the error value on top (a string with
 * traceback, or a jobrunner signal). [-(nargs+1), +(nres|1), -] */
int jr_luabridge_xrun(lua_State *L, int nargs, int nres, long budget,
                   double timeout);

/* The limit of a call or of a coroutine: instructions left, deadline.
 * Visible so that a coroutine's owner can keep one for it across yields
 * (jr_luabridge_bind). */
typedef struct jr_luabridge_limit {
    long    left;               /* instructions; <= 0 once exceeded */
    long    budget;             /* as given, for the message; 0: none */
    double  deadline;           /* jr_mono() seconds; 0: none */
    double  secs;               /* the timeout, for the message */
    void   *owner;              /* passed to the check; NULL for a run */
} jr_luabridge_limit;

/* Binds coroutine co to lim (borrowed, must outlive co's runs; NULL
 * unbinds): lim is enforced in co whenever it runs (its budget by the
 * count hook, its deadline by the timer), and in
 * the coroutines bound to none that co resumes (jr_luabridge_resume), and
 * the check (jr_luabridge_set_check) gets lim->owner. A coroutine bound to
 * none runs under the limit of what resumed it. */
void jr_luabridge_bind(lua_State *co, jr_luabridge_limit *lim);

/* lua_resume for a coroutine: an error value other than a jobrunner signal
 * becomes a string with co's traceback. Returns lua_resume's status.
 * [-(nargs), +(nres|1), -] on co */
int  jr_luabridge_resume(lua_State *co, lua_State *from, int nargs, int *nres);

/* A check the count hook makes at each of its checks (a worker's cancel):
 * NULL to go on, or a message to raise at the Lua line that runs, and
 * again at every later check, so that a pcall cannot swallow it. One per
 * process (a worker's one state); fn NULL: none. A run with no budget has
 * no count hook until a signal handler interrupts it
 * (jr_luabridge_interrupt) or its deadline passes. owner is the running
 * limit's (NULL in a jr_luabridge_xrun), L the running thread. */
typedef const char *(*jr_luabridge_check_fn)(void *arg, void *owner,
                                          lua_State *L);
void jr_luabridge_set_check(jr_luabridge_check_fn fn, void *arg);

/* Makes the count hook check at the next instruction of L (may be NULL)
 * and of the thread that runs Lua now (a run's, or the coroutine resumed
 * from it, innermost), and every BUDGET_STEP instructions in them and in
 * the threads that wait for it (their resumes) for the rest of their run.
 * Async-signal-safe (lua_sethook is, as lua.c's Ctrl-C handler relies
 * on): for a signal handler. */
void jr_luabridge_interrupt(lua_State *L);

/* Pushes the plain table a handler sees for job j: id, name, queue,
 * attempt, max_retries (the one in force), priority, run_at, created_at;
 * not the payload. [-0, +1, m] */
void jr_luabridge_push_job(lua_State *L, const jr_job *j, int max_retries);

/* Turns the error value at the top into a readable string in place
 * (tables, nil, userdata get a description). [-1, +1, m] */
const char *jr_luabridge_errstr(lua_State *L);

#endif
