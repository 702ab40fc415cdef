/* counts.h - on_tick's counts, a step of the database cycle (counts.c):
 * the ready jobs per queue and per limit, across runners. The events
 * service attaches it when a tick is due; the queues and limits services
 * read it for their figures (jr_cycle_io). Uses dbthread.h. */
#ifndef JR_COUNTS_H
#define JR_COUNTS_H

#include "db/dbthread.h"

/* Ready jobs of one queue. */
typedef struct jr_queue_count {
    char *queue;                /* owned by the counts' array */
    long  n;
} jr_queue_count;

typedef struct jr_counts {      /* the step's in/out: outputs only */
    long            ready;      /* ready jobs (up to 1e6), or -1 */
    jr_queue_count *q;          /* per queue (not paused) */
    int             nq;
    long           *lim_waiting;    /* per limit of the cycle (its
                                       limits[i]): ready, or NULL */
    long           *lim_running;    /* the same: running, all runners
                                       (same allocation) */
} jr_counts;

/* Sets c's outputs to "not counted" (ready -1, nothing else). */
void jr_counts_reset(jr_counts *c);

/* The step: last in the cycle, after the claim. Its clear frees q and
 * lim_waiting. */
extern const jr_cycle_step jr_counts_step;

#endif
