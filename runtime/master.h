/* master.h - the runner: one libevent loop that owns the only backend
 * connection, claims jobs in batches, hands them to worker processes over
 * socketpairs and records their results in batched, fenced transactions.
 * Uses config.h, backend.h, frame.h. */
#ifndef JR_MASTER_H
#define JR_MASTER_H

#include "config.h"

/* Runs until SIGTERM/SIGINT; returns the process exit status. self is the
 * path of this binary (to exec workers). */
int jr_master_run(jr_config *cfg, const char *self);

#endif
