/* svc.h - what the master offers its services (services/, service.h):
 * the loop's kick, flags and timers; the local queue (read, take out,
 * give back); the jobs the workers hold; a job a service ends; the
 * pool's figures and target; and a read-only view of the runner's
 * environment. A service includes this and service.h of master/, never
 * master_int.h: the master stays opaque to it (spec/layers_spec.lua
 * checks). svc.c implements it. Uses config.h, dbthread.h, hooks.h,
 * job.h. */
#ifndef JR_SVC_H
#define JR_SVC_H

#include <stddef.h>
#include <stdint.h>

#include "base/job.h"
#include "config/config.h"
#include "db/dbthread.h"
#include "lua/hooks.h"

/* The runner, opaque here: services reach it through the calls below. */
typedef struct master master;

struct event;
struct event_base;
struct jr_http;
struct wk;

/* A timer that sets a flag and kicks the loop (jr_svc_flag). Visible so
 * that a service can hold one in its state; its fields are the
 * master's. */
typedef struct jr_flag_timer {
    master       *m;
    int          *flag;         /* the holder's */
    struct event *ev;           /* NULL when not armed */
    double        secs;         /* its period */
} jr_flag_timer;

/* ---- the loop ---- */

/* Asks the loop for one pass of work soon. */
void jr_svc_kick(master *m);
/* Jobs may be waiting: the next pass of work claims. Does not kick. */
void jr_svc_want_claim(master *m);
/* Arms t to set *flag and kick every secs seconds (t->ev NULL when out of
 * memory). */
void jr_svc_flag(master *m, jr_flag_timer *t, double secs, int *flag);
/* Disarms t and frees its event; an unarmed t is a no-op. */
void jr_svc_unflag(jr_flag_timer *t);

/* ---- the local queue: jobs claimed, not yet handed to a worker ---- */

size_t        jr_svc_queued(const master *m);     /* how many */
/* The queued job at place i (0 is the next out, i < jr_svc_queued);
 * borrowed: valid until the queue changes. */
const jr_job *jr_svc_queue_at(const master *m, size_t i);
/* Takes the job at place i out of the queue; the caller owns it. */
jr_job       *jr_svc_queue_take(master *m, size_t i);
/* Gives job j back to the queue in the database; takes j. */
void          jr_svc_release(master *m, jr_job *j);

/* ---- the workers' jobs ---- */

typedef struct jr_svc_iter {    /* a walk over the workers; start it
                                   zeroed */
    struct wk *w;               /* the worker of the last job returned */
    int        k;               /* that job's place in it */
    int        started;         /* 0 before the walk's first call */
} jr_svc_iter;

/* The next job a worker holds (handed to it and not ended: in its
 * handler or waiting for it), or NULL at the end. Borrowed: valid until
 * the loop runs again. */
const jr_job *jr_svc_held(master *m, jr_svc_iter *it);
/* The next worker's job in its handler (its start in *since, mono time),
 * skipping workers between jobs and those killed already; NULL at the
 * end. Borrowed: valid until the loop runs again. */
const jr_job *jr_svc_running(master *m, jr_svc_iter *it, double *since);
/* The number of the worker of the job either walk returned last (1, 2,
 * ...: for messages). */
int           jr_svc_worker(const jr_svc_iter *it);
/* Kills the worker of the job jr_svc_running returned last (j): its
 * death is j's alone, with why as its reason. */
void          jr_svc_kill_for(const jr_svc_iter *it, const jr_job *j,
                              const char *why);
/* Tells the worker holding job id to stop it (a CANCEL frame and
 * SIGUSR1, logged). 1 if a worker holds it, else 0. */
int           jr_svc_cancel(master *m, int64_t id);
/* Job j (borrowed), held here, ends with r without its handler's word
 * (a service decided): counted in the runner's figures, the services'
 * job_end told (it ran 0 s), r queued for the next cycle; takes mem
 * (what r's strings live in, or NULL). */
void          jr_svc_end(master *m, const jr_job *j, const jr_result *r,
                         void *mem);

/* ---- the pool ---- */

typedef struct jr_svc_counts {  /* the runner now */
    long done, failed, dead;    /* jobs since the start */
    int  busy;                  /* workers running a job */
    int  active;                /* workers counting to the target */
    int  target;                /* workers wanted */
} jr_svc_counts;

void jr_svc_count(master *m, jr_svc_counts *out);
/* Sets the workers' target (clamped to the config's min..max) and acts
 * on it; reason is for the log and the on_scale hook. */
void jr_svc_set_target(master *m, int target, const char *reason);

/* ---- the environment, read-only ---- */

const jr_config   *jr_svc_config(const master *m);
const char        *jr_svc_token(const master *m);   /* the runner's */
const char        *jr_svc_url(const master *m);     /* masked, to show */
struct event_base *jr_svc_base(const master *m);    /* the loop */
jr_hooks          *jr_svc_hooks(const master *m);   /* the config's hooks */
/* The runner's database connection, which its database thread uses: to
 * ask what the backend can do (dbcalls.h), never to run a call. */
jr_db             *jr_svc_db(const master *m);
/* The runner's database thread (requests between cycles); NULL before
 * it starts and once it stopped. */
jr_dbthread       *jr_svc_dbthread(const master *m);
struct jr_http    *jr_svc_http(const master *m);    /* NULL when off */
int                jr_svc_stopping(const master *m);   /* 1 if it stops */
double             jr_svc_cycle_at(const master *m);   /* mono time the
                                                          last cycle went */
/* The current generation of handler code: its id (0 before the first),
 * and its hash in *hash (NULL before the first) when hash is not NULL. */
int                jr_svc_gen(const master *m, const char **hash);
/* 1 if the current generation has a handler called name. */
int                jr_svc_handles(const master *m, const char *name);
/* The current generation's handlers (borrowed: valid until the loop
 * runs again), *n of them; NULL and 0 before the first. */
const jr_handler  *jr_svc_handlers(const master *m, int *n);

#endif
