/* service.h - what runs beside the claim, behind one interface: each
 * service (services/: metrics, hook events, vacuum, queue state, limits,
 * schedules, cancel, retention, unhandled names) is a table of callbacks
 * the core calls at fixed points of its loop, in the spirit of Oban's
 * plugins and River's maintenance services. The core (claimq.c, pool.c,
 * master.c's loop) names no feature: it calls jr_service_*, which walk
 * master.c's list (jr_master_services) in its order (service.c). A
 * service keeps its state in its own struct, at m->svc[its slot]. Every callback may be NULL (not wanted); all run in
 * the master's loop thread. Uses master_int.h, dbthread.h's jr_cycle. */
#ifndef JR_SERVICE_H
#define JR_SERVICE_H

#include "base/job.h"
#include "config/config.h"
#include "db/dbthread.h"

struct master;
struct wk;

/* Where each service keeps its state: m->svc[slot]. The order of the
 * calls is master.c's list (jr_master_services), not this. */
enum {
    JR_SVC_METRICS, JR_SVC_EVENTS, JR_SVC_VACUUM, JR_SVC_QSTATE,
    JR_SVC_LIMITS, JR_SVC_SCHED, JR_SVC_CANCEL, JR_SVC_PRUNE,
    JR_SVC_UNHANDLED, JR_SVC_WAITS, JR_NSERVICES
};

typedef struct jr_service {
    const char *name;           /* for messages: "schedules" */
    int         slot;           /* JR_SVC_*: its state is m->svc[slot] */
    /* At start, once the loop, the database thread and the hooks exist:
     * sets *st to its state (or leaves it NULL). -1 when out of memory
     * (the runner does not start; free still runs). */
    int  (*init)(struct master *m, void **st);
    /* Each pass of work with no cycle out: 1 if the next database cycle
     * has work for it (a cycle starts even with nothing to claim). Every
     * service is asked, each pass. */
    int  (*due)(struct master *m, void *st);
    /* A cycle is about to be submitted: puts its inputs into c (the core
     * has set want, names, results). c is then the database thread's
     * until read. */
    void (*fill)(struct master *m, void *st, jr_cycle *c);
    /* Cycle c came back, its results recorded: takes its outputs before
     * the jobs it claimed join the local queue (the local queue is as
     * the cycle found it). */
    void (*read)(struct master *m, void *st, jr_cycle *c);
    /* The same cycle, after its claimed jobs joined the local queue:
     * takes the outputs that act on them. */
    void (*taken)(struct master *m, void *st, jr_cycle *c);
    /* The runner stops and cycle c finished unread: frees what fill put
     * into it, acts on nothing. */
    void (*drop)(struct master *m, void *st, jr_cycle *c);
    /* Job j (borrowed) starts in worker number worker. Per job: cheap. */
    void (*job_start)(struct master *m, void *st, const jr_job *j,
                      int worker);
    /* Job j ended with outcome r (every outcome the runner records:
     * results, deaths, expiries, cancels); secs it ran, or 0. Borrows
     * both. Per job: cheap. */
    void (*job_end)(struct master *m, void *st, const jr_job *j,
                    const jr_result *r, double secs);
    /* Job j's worker answered with a result of kind: it left its slot.
     * Per job: cheap. */
    void (*job_left)(struct master *m, void *st, const jr_job *j,
                     int kind);
    /* Job j, held here, is about to be handed out or its worker died
     * (why): returns 1 if the service ended it instead (its result
     * queued; j stays the caller's to free). Per job: cheap. */
    int  (*refuse)(struct master *m, void *st, const jr_job *j,
                   const char *why);
    /* 1 if it shapes the claim now (queue caps, limits): the claim then
     * goes on the first connection alone (lane.c). */
    int  (*shapes)(struct master *m, void *st);
    /* The on_tick hook's event is being built (events.c), from cycle c
     * (it counted the backlog): adds its own figures to it. */
    void (*figures)(struct master *m, void *st, const jr_cycle *c);
    /* Each tick of the loop (a few a second); now is mono time. */
    void (*tick)(struct master *m, void *st, double now);
    /* A reload read the config file again (cfg, borrowed). */
    void (*reload)(struct master *m, void *st, const jr_config *cfg);
    /* A reload ended: ok, or failed with error (the generation before
     * goes on). */
    void (*reloaded)(struct master *m, void *st, int ok, const char *error);
    /* The first generation's handlers loaded: names[0..n). */
    void (*loaded)(struct master *m, void *st, const char *const *names,
                   int n);
    /* The workers' target moved from one count to another, for reason. */
    void (*scaled)(struct master *m, void *st, int from, int to,
                   const char *reason);
    /* The loop ended: stops what it runs on threads of its own, before
     * the database thread stops. */
    void (*stop)(struct master *m, void *st);
    /* Frees its state, after the database thread is gone. st may be
     * NULL. */
    void (*free)(struct master *m, void *st);
} jr_service;

extern const jr_service jr_metrics_service;
extern const jr_service jr_events_service;
extern const jr_service jr_vacuum_service;
extern const jr_service jr_qstate_service;
extern const jr_service jr_limits_service;
extern const jr_service jr_sched_service;
extern const jr_service jr_cancel_service;
extern const jr_service jr_prune_service;
extern const jr_service jr_unhandled_service;
extern const jr_service jr_waits_service;

/* The core's calls: each runs the callback of every service that has
 * one, in the list's order. */
int  jr_service_init(struct master *m);         /* -1: out of memory */
int  jr_service_due(struct master *m);          /* 1 if any is due */
void jr_service_fill(struct master *m, jr_cycle *c);
void jr_service_read(struct master *m, jr_cycle *c);
void jr_service_taken(struct master *m, jr_cycle *c);
void jr_service_drop(struct master *m, jr_cycle *c);
void jr_service_job_start(struct master *m, const jr_job *j, int worker);
void jr_service_job_end(struct master *m, const jr_job *j,
                        const jr_result *r, double secs);
void jr_service_job_left(struct master *m, const jr_job *j, int kind);
int  jr_service_refuse(struct master *m, const jr_job *j, const char *why);
int  jr_service_shapes(struct master *m);      /* 1 if any shapes */
void jr_service_figures(struct master *m, const jr_cycle *c);
void jr_service_tick(struct master *m, double now);
void jr_service_reload(struct master *m, const jr_config *cfg);
void jr_service_reloaded(struct master *m, int ok, const char *error);
void jr_service_loaded(struct master *m, const char *const *names, int n);
void jr_service_scaled(struct master *m, int from, int to,
                       const char *reason);
void jr_service_stop(struct master *m);
void jr_service_free(struct master *m);

#endif
