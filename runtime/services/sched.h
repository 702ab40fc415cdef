/* sched.h - the schedules service's state (jr_sched_service, service.h),
 * private to its three files: sched.c (the service: the set of schedules,
 * each second's look, the cycle's fires and last fires, reload),
 * schedq.c (the fires waiting for the database: adding, catch-up,
 * expiry, and the controls an operator set: pause and fire now) and
 * schedstep.c (the cycle's step that records the fires and reads the
 * last fires and the controls). Lives where the core holds the service's
 * state (jr_service_state). Uses schedules.h, job.h, dbthread.h. */
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

/* A schedule's last fire, as the step reads them. */
typedef struct jr_last_fire {
    char    *schedule;          /* owned by the io's array */
    double   at;
    int64_t  id;                /* its job, or 0 */
} jr_last_fire;

/* A schedule's controls, as the step reads them. */
typedef struct jr_sched_ctl {
    char    *schedule;          /* owned by the io's array */
    int      paused;
    double   fire_at;           /* the last fire asked for by hand, or 0 */
} jr_sched_ctl;

/* The step's in/out (schedstep.c): inputs, then outputs. */
typedef struct jr_sched_io {
    jr_fire      *fires;        /* record these fires (each inserted: 1
                                   yes, 0 another runner's, -1 refused,
                                   -2 the schedule is paused) */
    int           nfires;
    int           read_fires;   /* read each schedule's last fire */
    int           read_ctl;     /* read the schedule controls */
    int           nfires_done;  /* fires[0..this) have their outcome; the
                                   others were not recorded (trouble):
                                   retry */
    jr_last_fire *last_fires;   /* read_fires: freed by jr_sched_io_free */
    int           nlast_fires;  /* or -1: not read */
    jr_sched_ctl *ctl;          /* read_ctl: freed by jr_sched_io_free */
    int           nctl;         /* or -1: not read */
    int           read_defs;    /* read the run-time schedules if their
                                   count of changes is not rev */
    int64_t       rev;          /* in: the count last read; out: now's */
    struct jr_sched_def *defs;  /* read: freed by jr_sched_io_free */
    int           ndefs;        /* or -1: not read (unchanged) */
    int           defs_oom;     /* the read ran out of memory: not read */
} jr_sched_io;

/* A schedule managed at run time, as the step reads them. */
typedef struct jr_sched_def {
    char *name;                 /* owned by the io's array */
    char *def;                  /* its JSON definition, owned */
} jr_sched_def;

/* Empties io: nothing asked, nothing read. */
void jr_sched_io_reset(jr_sched_io *io);
/* Frees what the step read into io (last_fires, ctl), not fires. */
void jr_sched_io_free(jr_sched_io *io);
/* After the claim: reads the controls, then the last fires, if asked,
 * then records the fires one by one (a fire the database refuses for
 * its input is marked -1 and the others go on; trouble stops there). */
extern const jr_cycle_step jr_sched_step;

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
/* Follows the controls a cycle read (io->ctl): each schedule's pause,
 * and the fires asked for by hand since the last read, queued as any
 * fire (those older than RETRY_FOR are dropped, logged). */
void jr_schedq_controls(jr_sched *sc, const jr_sched_io *io, double now);

#endif
