/* cycle.h - private to db/: the parts of a cycle that cycle.c runs for
 * dbthread.c, on the database thread, over the runner's connection.
 * Uses dbthread.h, backend.h. */
#ifndef JR_CYCLE_H
#define JR_CYCLE_H

#include "db/dbthread.h"

/* Keeps e in c as the cycle's error unless it has one already. */
void jr_cycle_err(jr_cycle *c, const jr_err *e);
/* Reads the paused queues (asked, or jobs claimed ahead and woken by a
 * change), and for on_tick the ready counts per queue and per limit. */
void jr_cycle_reads(jr_db *db, jr_cycle *c, int changed);
/* Reads each schedule's last fire if asked, then records the fires one by
 * one: one the database refuses for its input is marked -1 (the others
 * go on); trouble stops there (nfires_done says how far it went). */
void jr_cycle_fires(jr_db *db, jr_cycle *c);

#endif
