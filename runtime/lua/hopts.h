/* hopts.h - a handler table's options checked (hopts.c), for the loader
 * (script.c). Each reads the handler table on top of L, leaves it there,
 * and returns NULL or what is wrong (a message naming the option, static
 * or a literal). */
#ifndef JR_HOPTS_H
#define JR_HOPTS_H

#include <lua.h>

/* Its keys known, handle a function, the options in range (read into
 * *max_retries, *timeout, *backoff).  [-0, +0, -] */
const char *jr_hopts_table(lua_State *L, int *max_retries, double *timeout,
                           double *backoff);
/* inflight: a whole number of jobs a worker runs at once (into
 * *inflight).  [-0, +0, -] */
const char *jr_hopts_inflight(lua_State *L, int *inflight);
/* output: "keep" (1 in *keep) or "log" (0), "keep" only for a handler
 * that runs one job at a time.  [-0, +0, -] */
const char *jr_hopts_output(lua_State *L, int inflight, int *keep);
/* field (sequence, or fair's string form): a payload path
 * "payload.a.b", "a.b" into *seq (borrowed from the table), or NULL when
 * not set.  [-0, +0, -] */
const char *jr_hopts_path(lua_State *L, const char *field, const char **seq);
/* fair: the string form (a path into *fair) or the table form (hfair.c:
 * its key into *fair, its weights, a new JSON object, into *w, its
 * default into *def).  [-0, +0, m] */
const char *jr_hopts_fair(lua_State *L, const char **fair, char **w,
                          double *def);

#endif
