/* list.c - the services a runner runs (list.h), each one a table of
 * callbacks (service.h), jr_<name>_service, defined in its own file of
 * this folder. Uses list.h, service.h. */
#include "services/list.h"

/* The services, in the order the core calls each of their callbacks
 * (service.h). The order matters where two touch one thing:
 *   metrics first: a cycle's time is read before anything else runs;
 *   events before qstate: on_tick's count (fill) decides whether the
 *     cycle reads the paused queues, and on_tick (read) sees the local
 *     queue before the cycle's claims join it;
 *   vacuum reads how many jobs a cycle recorded;
 *   qstate, limits, schedules, cancel act on the claimed jobs (taken);
 *     cancel last, so that the jobs it ends were seen by the others;
 *   prune after the claim's readers: its batch runs after the claim;
 *   wakes after prune: its step too (the jobs whose wait's date came);
 *   the steps they attach to a cycle (fill) run in this order within
 *     their place (db/dbthread.h's JR_STEP_*): after the claim the
 *     schedules' fires, the cancels, the prune; last on_tick's counts,
 *     then the paused queues;
 *   unhandled counts on the database thread between cycles (tick);
 *   waits looks at the long polls' jobs after the cycle (taken);
 *   seqpaths writes the handlers' sequences between cycles (tick);
 *   fairnames writes the handlers' fair paths between cycles (tick);
 *   fairnameq reads the queues made fair by a name after it (tick).
 * A new service is its file and its line here. */
#define SERVICES(X) \
    X(metrics) \
    X(events) \
    X(vacuum) \
    X(qstate) \
    X(limits) \
    X(sched) \
    X(cancel) \
    X(prune) \
    X(wakes) \
    X(unhandled) \
    X(waits) \
    X(seqpaths) \
    X(fairnames) \
    X(fairnameq)

/* Each one's table, defined in its own file (jr_<name>_service). */
#define DECLARE(name) extern const jr_service jr_##name##_service;
SERVICES(DECLARE)

#define ENTRY(name) &jr_##name##_service,
const jr_service *const jr_services[] = { SERVICES(ENTRY) NULL };
