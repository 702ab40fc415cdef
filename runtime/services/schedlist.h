/* schedlist.h - the schedules the runner follows now, as the schedules
 * service (sched.c) holds them: its config's at start, replaced whole by
 * each reload. For the HTTP API's list and controls. Uses schedules.h. */
#ifndef JR_SCHEDLIST_H
#define JR_SCHEDLIST_H

#include "config/schedules.h"

struct master;

/* The schedules of m now; valid until the next reload (borrowed). */
const jr_schedules *jr_sched_list(const struct master *m);

#endif
