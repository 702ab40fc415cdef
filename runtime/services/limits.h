/* limits.h - the limits service's state (jr_limits_service, service.h),
 * private to its two files: limitsrun.c (the master's side: cycles,
 * figures, timer) and limitslua.c (the hooks' get and set). The core holds
 * it for the service (jr_service_state). Uses limitcfg.h, service.h. */
#ifndef JR_LIMITS_H
#define JR_LIMITS_H

#include "config/limitcfg.h"
#include "master/service.h"

extern const jr_service jr_limits_service;        /* limitsrun.c */

struct event;
struct master;

typedef struct jr_limitsrun {
    jr_limits     live;         /* the config's, as hooks changed them */
    jr_limits     cycle;        /* the copy a cycle borrows */
    int           changed;      /* live differs from cycle */
    struct event *ev;           /* a rate's next token: claim */
    void         *stats;        /* per-limit figures for on_tick */
} jr_limitsrun;

/* Puts "jobrunner.limits" (get, set) in the config's state. */
void jr_limitslua_open(struct master *m);

#endif
