/* luaopts.h - options tables read from Lua, one way for both Lua modules:
 * the push options of q:push/q:push_many (the producer module,
 * luaclient.c) and of jobrunner.push (handlers, jrlib.c), and the typed
 * option checks the producer module's open() uses too. Types are checked
 * here; values by jr_push_check (job.h), so both modules say the same
 * thing for the same mistake. Also the one reader of a whole number
 * from lo to hi, the config's too. Uses job.h. */
#ifndef JR_LUAOPTS_H
#define JR_LUAOPTS_H

#include <lua.h>

#include "base/job.h"

/* What a whole number read from Lua can be: one, or why not. */
typedef enum {
    JR_WHOLE_OK,                /* *out set */
    JR_WHOLE_TYPE,              /* not a number */
    JR_WHOLE_FLOAT,             /* strict: a float, even 3.0 */
    JR_WHOLE_RANGE,             /* outside lo..hi (NaN too) */
    JR_WHOLE_FRACTION           /* not strict: 2.5 */
} jr_whole;

/* The one reader of "a whole number from lo to hi" (config keys, push
 * options): the value on top of the stack into *out, or why not; the
 * callers word the error. strict asks for Lua's integer subtype and
 * compares as integers (*out holds the value even when out of range);
 * otherwise any number of whole value, the range checked first as a
 * double (casting an out-of-range double is undefined). Inline: the
 * config's readers link into libjobrunner, which has no luaopts.c.
 * [-0, +0, -] */
static inline jr_whole
jr_luaopts_whole(lua_State *L, long long lo, long long hi, int strict,
                 long long *out)
{
    double d;

    if (strict) {
        if (!lua_isinteger(L, -1))
            return lua_type(L, -1) == LUA_TNUMBER ? JR_WHOLE_FLOAT :
                   JR_WHOLE_TYPE;
        *out = (long long)lua_tointeger(L, -1);
        return *out < lo || *out > hi ? JR_WHOLE_RANGE : JR_WHOLE_OK;
    }
    if (lua_type(L, -1) != LUA_TNUMBER)
        return JR_WHOLE_TYPE;
    d = lua_tonumber(L, -1);
    if (!(d >= (double)lo && d <= (double)hi))       /* NaN too */
        return JR_WHOLE_RANGE;
    if (d != (double)(long long)d)
        return JR_WHOLE_FRACTION;
    *out = (long long)d;
    return JR_WHOLE_OK;
}

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
