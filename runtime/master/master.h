/* master.h - the runner: one libevent loop that claims jobs in batches
 * through its database thread (the only backend connection), hands them
 * to worker processes over socketpairs and records their results in
 * batched, fenced transactions. The one entry point of master.c and the
 * files beside it (master_int.h lists them). Uses config.h. */
#ifndef JR_MASTER_H
#define JR_MASTER_H

#include "config/config.h"

struct jr_service;

/* Runs until SIGTERM/SIGINT; returns the process exit status. self is the
 * path of this binary (to exec workers); services the services beside the
 * claim, in the order the core calls them, NULL-ended (service.h;
 * services/list.h's jr_services). */
int jr_master_run(jr_config *cfg, const char *self,
                  const struct jr_service *const *services);

#endif
