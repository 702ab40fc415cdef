/* sched.h - the schedules service's state (jr_sched_service, service.h),
 * private to its two files: sched.c (the service: the set of schedules,
 * each second's look, the cycle's fires and last fires, reload) and
 * schedq.c (the fires waiting for the database: adding, catch-up,
 * expiry, and the controls an operator set: pause and fire now). Lives
 * where the core holds the service's state (jr_service_state). Uses schedules.h, job.h, dbthread.h. */
#ifndef JR_SCHED_H
#define JR_SCHED_H

#include "base/job.h"
#include "config/schedules.h"
#include "db/dbthread.h"

#define FIRES_MAX 1000          /* fires waiting at most (all schedules) */
#define BEHIND    2.0           /* the schedules looked at again this many
                                   seconds after the last look (they look
                                   each second, whatever the database
                                   does): the runner was behind (stalled,
                                   the clock stepped); catch_up applies */
#define RETRY_FOR 60.0          /* a fire not recorded is retried; once
                                   this late, catch_up applies to it */

typedef struct ent {            /* one schedule and where it stands */
    jr_schedule s;              /* a copy of the config's */
    int         loaded;         /* its last fire was read: next is known */
    double      next;           /* its next fire instant */
    int         warned_gen;     /* generation its missing handler was
                                   reported for */
    int         reread;         /* unloaded by a reconnect: next is what
                                   this runner had reached */
    double      asked;          /* the last fire asked for by hand that
                                   this runner saw (its instant) */
    int         paused;         /* paused, as last read */
} ent;

typedef struct fire_req {       /* a fire waiting or in flight */
    jr_fire f;                  /* strings point into mem */
    char   *mem;
    int     drop;               /* expire's mark */
} fire_req;

typedef struct jr_sched {
    jr_schedules cfg;           /* owns the entries' strings */
    ent         *e;
    int          n;
    int          need_last;     /* read the last fires before firing */
    fire_req    *pending;
    int          npending;
    fire_req    *inflight;      /* the running cycle's */
    int          ninflight;
    int          failing;       /* fires failed since the last recorded */
    int          dropping;      /* fires expired since then (logged) */
    int          want_ctl;      /* read the controls in the next cycle */
} jr_sched;

/* Queues a fire of e at instant at (once); its strings copied. Returns
 * it, or NULL when it was not queued (one waits for that instant, or no
 * room: logged). */
fire_req *jr_schedq_add(jr_sched *sc, const ent *e, double at);
void jr_schedq_free(fire_req *r, int n);    /* the fires' memory */
/* The fire of e after t, or 0 when it never fires again. */
double jr_schedq_next(const ent *e, double t);
/* Queues e's fires missed after last up to now, as its catch_up says;
 * why ends the log line. */
void jr_schedq_catch_up(jr_sched *sc, ent *e, double last, double now,
                        const char *why);
int  jr_schedq_by_instant(const void *a, const void *b);  /* qsort */
/* Drops the waiting fires past their catch_up, logging each. */
void jr_schedq_expire(jr_sched *sc, double now);
const ent *jr_schedq_find(const jr_sched *sc, const char *name);
/* Follows the controls a cycle read (c->sched_ctl): each schedule's
 * pause, and the fires asked for by hand since the last read, queued as
 * any fire (those older than RETRY_FOR are dropped, logged). */
void jr_schedq_controls(jr_sched *sc, const jr_cycle *c, double now);

#endif
