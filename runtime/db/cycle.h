/* cycle.h - private to db/: what dbthread.c asks of cycle.c, on the
 * database thread, over the runner's connection. Uses dbthread.h. */
#ifndef JR_CYCLE_H
#define JR_CYCLE_H

#include "db/dbthread.h"

/* Keeps e in c as the cycle's error unless it has one already. */
void jr_cycle_err(jr_cycle *c, const jr_err *e);
/* Runs c's steps of when (JR_STEP_*) in the order they were attached,
 * while c has no error; each one's error becomes c's. */
void jr_cycle_steps(jr_db *db, const char *token, jr_cycle *c, int when);

#endif
