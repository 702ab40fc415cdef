/* jrloglazy.h - a plain job's jobrunner.log lines kept as the call's
 * arguments, made into its lines where they are needed, held after a
 * success the master deletes until it says whether the row stayed
 * (jrloglazy.c; docs/handlers.md, "Each attempt's logs"). The worker's
 * run.c and wlines.c, and jrlog.c, use it. Uses jrlib.h, joblog.h. */
#ifndef JR_JRLOGLAZY_H
#define JR_JRLOGLAZY_H

#include <stddef.h>
#include <stdint.h>

#include <lua.h>

#include "base/joblog.h"
#include "lua/jrlib.h"

/* Makes the thread L's lines wait on (jr_jrlog_register calls it).
 * [-0, +0, m] */
void jr_jrlog_lazy_open(lua_State *L);
/* ctx's lines, while its handler runs on L's state, wait as their
 * arguments; until jr_jrlog_lazy_end. Not for a job whose descriptors
 * are kept (wcapture.c keeps their output without a state). [-0, +0,
 * -] */
void jr_jrlog_lazy_begin(jr_jobctx *ctx, lua_State *L);
/* jobrunner.log's call on L (level, msg, fields at 1..top) kept as its
 * arguments when ctx's lines wait so and the call has the plain form
 * (a string message, a table of fields or none); 1 if kept, else 0 (the
 * caller makes the line). Makes the waiting lines first when LAZY_MAX
 * wait: raises a bad field's error then. [-(0|2), +0, v] */
int  jr_jrlog_lazy_add(lua_State *L, jr_jobctx *ctx, int level, int top);
/* Makes ctx's waiting lines (NULL, or none waiting: nothing), before a
 * line kept at once; raises the first bad field's error after. [-0, +0,
 * v] */
void jr_jrlog_lazy_flush(lua_State *L, jr_jobctx *ctx);
/* At the handler's end, before its outcome: 0, or -1 with why set when
 * a waiting line's fields are not a flat table (the attempt fails with
 * it). */
int  jr_jrlog_lazy_check(char *why, size_t size);
/* At the attempt's end, after its outcome: hold 1 keeps ctx's waiting
 * lines for the master's word (job id, its attempt) when none of its
 * lines was made yet, and returns 1; else they are made into ctx's log
 * and it returns 0. */
int  jr_jrlog_lazy_end(jr_jobctx *ctx, int64_t id, int attempt, int hold);
/* The master's word on held job id: the entry of its lines made (*len
 * bytes; NULL: none held), valid until the next call. */
const char *jr_jrlog_lazy_lines(int64_t id, size_t *len);
/* The master's word on held job id: its lines dropped. */
void jr_jrlog_lazy_drop(int64_t id);
/* After a frame of words: the lines still held moved together. */
void jr_jrlog_lazy_settle(void);
/* How many jobs' lines are held. */
int  jr_jrlog_lazy_held(void);

/* jrlog.c's, for the lines made here: reads the fields of the table at
 * idx into f (num: the integers' texts); their number, or -1 with why
 * set. [-0, +(floats), m] */
int  jr_jrlog_read_fields(lua_State *L, int idx, jr_joblog_field *f,
                          char (*num)[24], char *why, size_t size);
/* Keeps in log the line of level (0 debug .. 3 error) made of msg[0..n)
 * and the fields f[0..nf) (sorted there). */
void jr_jrlog_keep_line(jr_joblog *log, int level, const char *msg,
                        size_t n, jr_joblog_field *f, int nf);
/* log.attempt_max. */
size_t jr_jrlog_max(void);

#endif
