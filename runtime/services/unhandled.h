/* unhandled.h - the queued jobs whose name no handler of this runner takes
 * (unhandled.c): a runner claims only the names it has handlers for, so a
 * misspelt name would wait for ever without a word. Counted from the
 * database now and then, logged once per name, shown in /metrics and
 * /api/runner (the dashboard). A service (jr_unhandled_service,
 * service.h). Uses master_int.h, util.h. */
#ifndef JR_UNHANDLED_H
#define JR_UNHANDLED_H

#include "base/util.h"

struct master;
typedef struct jr_unhandled jr_unhandled;

/* /metrics: the gauge jobrunner_unhandled_jobs{name} of the last count. */
void jr_unhandled_metrics(const struct master *m, jr_buf *b);
/* /api/runner: ,"unhandled":[{"name":...,"queued":N}...] of the last
 * count. */
void jr_unhandled_json(const struct master *m, jr_buf *b);

#endif
