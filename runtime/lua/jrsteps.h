/* jrsteps.h - jobrunner.step and jobrunner.checkpoint (docs/handlers.md,
 * "Steps and cursors"): a job's steps replayed from their records, run
 * and recorded, a step's cursor. Owns a job's list of step records (its
 * JSON text, which the worker sends). Uses jrlib.h for the job's
 * context, json.h and jsondec.h for values, jsondom.h for the records. */
#ifndef JR_JRSTEPS_H
#define JR_JRSTEPS_H

#include <stddef.h>

#include "lua/jrlib.h"

typedef struct jr_steps jr_steps;

/* The most a job's list of step records may hold, bytes: every record is
 * rewritten with the list, so an unbounded list would make each step of
 * a long job cost more than the last, and the runner's memory with it. */
#define JR_STEPS_MAX (16u << 20)

/* Sets step and checkpoint in the module table on top.  [-0, +0, m] */
void jr_steps_open(lua_State *L);

/* The job's list of step records as JSON text (a NUL after it), with
 * its length in *len; valid until the next step call of the job. NULL
 * when the job recorded no step in this attempt (or out of memory). */
const char *jr_steps_text(jr_jobctx *ctx, size_t *len);

/* The records the job's steps made in this attempt (steps that returned,
 * checkpoints), 0 before its first step. */
int  jr_steps_made(const jr_jobctx *ctx);

void jr_steps_free(jr_steps *st);     /* NULL is a no-op */

#endif
