/* unhandled.h - the queued jobs whose name no handler of this runner takes
 * (unhandled.c): a runner claims only the names it has handlers for, so a
 * misspelt name would wait for ever without a word. Counted from the
 * database now and then, logged once per name, shown in /metrics and
 * /api/runner (the dashboard). Uses master_int.h, util.h. */
#ifndef JR_UNHANDLED_H
#define JR_UNHANDLED_H

#include "base/util.h"

struct master;
typedef struct jr_unhandled jr_unhandled;

/* Each tick: when it is time (soon after the start and after a new
 * generation, then every minute or more), asks the database thread for
 * the queued jobs per name, between cycles. */
void jr_unhandled_tick(struct master *m, double now);
/* /metrics: the gauge jobrunner_unhandled_jobs{name} of the last count. */
void jr_unhandled_metrics(const struct master *m, jr_buf *b);
/* /api/runner: ,"unhandled":[{"name":...,"queued":N}...] of the last
 * count. */
void jr_unhandled_json(const struct master *m, jr_buf *b);
/* After the database thread is gone (a count on its way heard ran 0).
 * NULL is a no-op. */
void jr_unhandled_free(struct master *m);

#endif
