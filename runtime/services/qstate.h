/* qstate.h - the queues service's one call for another service
 * (qstate.c): the on_tick hook's queue targets (events.c). */
#ifndef JR_QSTATE_H
#define JR_QSTATE_H

struct master;

/* Sets queue's target (on_tick), clamped to its min..max. */
void jr_qstate_target(struct master *m, const char *queue, double target);

#endif
