/* service.h - what runs beside the claim, behind one interface: each
 * service (services/: metrics, hook events, vacuum, queue state, limits,
 * schedules, cancel, retention, unhandled names) is a table of callbacks
 * the core calls at fixed points of its loop, in the spirit of Oban's
 * plugins and River's maintenance services. The core (claimq.c, pool.c,
 * master.c's loop, lane.c, httphost.c) names no feature: it calls
 * jr_service_*, which walk the list the runner was started with
 * (services/list.c's jr_services, handed over by the command) in its
 * order (service.c). A service keeps its state in its own struct, which
 * the core holds for it by its place in that list (jr_service_state).
 * Every callback may be NULL (not wanted); all run in the master's loop
 * thread. The master is opaque to a service: what it may do to it is
 * svc.h. Uses dbthread.h's jr_cycle. */
#ifndef JR_SERVICE_H
#define JR_SERVICE_H

#include "base/job.h"
#include "config/config.h"
#include "db/dbthread.h"

struct master;
struct wk;
struct jr_httphost;

typedef struct jr_service {
    const char *name;           /* for messages: "schedules" */
    /* The HTTP server is about to start (after init): fills in its part
     * of the server's host h (the callbacks for what it shows). -1 when
     * out of memory (the runner does not start). */
    int  (*host)(struct master *m, struct jr_httphost *h);
    /* At start, once the loop, the database thread and the hooks exist:
     * sets *st to its state (or leaves it NULL). -1 when out of memory
     * (the runner does not start; free still runs). */
    int  (*init)(struct master *m, void **st);
    /* The runner started: its workers are about to be spawned. */
    void (*started)(struct master *m, void *st);
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
    /* n more jobs were recorded finished by a round that is not a cycle
     * (the second connection's, lane.c). */
    void (*recorded)(struct master *m, void *st, long n);
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
    /* A job still running reported r (progress, its steps: the kinds of
     * JR_RESULT_RUNS_ON). Borrows r. Per report: cheap. */
    void (*ran_on)(struct master *m, void *st, const jr_result *r);
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
    /* The runner stopped: its workers are gone, its results recorded. */
    void (*stopped)(struct master *m, void *st);
    /* Frees its state, after the database thread is gone. st may be
     * NULL. */
    void (*free)(struct master *m, void *st);
} jr_service;

/* The core's calls: each runs the callback of every service that has
 * one, in the list's order. */
int  jr_service_host(struct master *m, struct jr_httphost *h); /* -1: ENOMEM */
int  jr_service_init(struct master *m);         /* -1: out of memory */
void jr_service_started(struct master *m);
int  jr_service_due(struct master *m);          /* 1 if any is due */
void jr_service_fill(struct master *m, jr_cycle *c);
void jr_service_read(struct master *m, jr_cycle *c);
void jr_service_taken(struct master *m, jr_cycle *c);
void jr_service_ran_on(struct master *m, const jr_result *r);
void jr_service_recorded(struct master *m, long n);
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
void jr_service_stopped(struct master *m);
void jr_service_free(struct master *m);
/* The state service s keeps (its init's), for its own files' calls from
 * outside its callbacks; NULL before init, after free, or if it has
 * none. */
void *jr_service_state(const struct master *m, const jr_service *s);

#endif
