/* luaopts.h - options tables read from Lua, one way for both Lua modules:
 * the push options of q:push/q:push_many (the producer module,
 * luaclient.c) and of jobrunner.push (handlers, jrlib.c), and the typed
 * option checks the producer module's open() uses too. Types are checked
 * here; values by jr_push_check (job.h), so both modules say the same
 * thing for the same mistake. Uses job.h. */
#ifndef JR_LUAOPTS_H
#define JR_LUAOPTS_H

#include "base/job.h"

typedef struct lua_State lua_State;

/* The number on top of the stack, or raises "FN: option 'KEY' must be a
 * number, got TYPE".  [-0, +0, v] */
double    jr_luaopts_number(lua_State *L, const char *fn, const char *key);

/* The integer on top of the stack, in [lo, hi], or raises naming fn, key,
 * the value given and the range.  [-0, +0, v] */
long long jr_luaopts_int(lua_State *L, const char *fn, const char *key,
                         long long lo, long long hi);

/* Reads the push options table at idx (none or nil: no options) into p's
 * option fields (run_in, run_at, priority, queue, max_retries; the others
 * are left alone). Misuse raises, naming fn ("push", "jobrunner.push"):
 * not a table, an unknown key, a value of the wrong type, an integer out
 * of range. Then checks p with jr_push_check (p->name set by the caller,
 * borrowed): returns 0, or -1 with err set for a value that is not valid
 * (a queue name with a NUL byte, run_in past 100 years...). p->queue is
 * anchored by the table; p->after (the option after: job ids) is valid
 * until this thread's next call.  [-0, +0, v] */
int jr_luaopts_push(lua_State *L, int idx, const char *fn, jr_push *p,
                    jr_err *err);

#endif
