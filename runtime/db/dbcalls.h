/* dbcalls.h - the backend calls the master's own parts make on a database
 * thread (a jr_dbthread request's run function, or a cycle's step): the
 * lane's second claim, the count of names no handler takes, the vacuum,
 * and the services' steps (cancels, retention, the schedules' fires and
 * controls, the paused queues, on_tick's counts). master/ and services/
 * reach storage through db/ only; this is their door to it, and shows
 * them none of backend.h: only the jobs and results of job.h. Each is
 * the backend op of the same name on db's connection. Uses err.h, job.h,
 * dbthread.h. */
#ifndef JR_DBCALLS_H
#define JR_DBCALLS_H
#include "base/err.h"
#include "base/job.h"
#include "db/dbthread.h"

struct jr_limit;

/* Records r[0..nr) and claims in one transaction (complete_claim): a
 * claim of at most max jobs named one of names[0..nnames), at most max
 * from any queue, under limits[0..nlimits) (none: a plain claim). */
int jr_dbcall_complete_claim(jr_db *db, const char *token, const jr_result *r,
                             int nr, int *applied, double lease,
                             const char *const *names, int nnames, int max,
                             const struct jr_limit *limits, int nlimits,
                             jr_job **out, jr_err *err);
/* Calls cb for each job name with its queued jobs (ready and scheduled),
 * ordered by name (stats); a non-zero return from cb stops the walk. */
typedef int (*jr_dbcall_queued_cb)(const char *name, long queued,
                                   void *arg);
int jr_dbcall_queued(jr_db *db, jr_dbcall_queued_cb cb, void *arg,
                     jr_err *err);
int jr_dbcall_vacuum(jr_db *db, jr_err *err);
int jr_dbcall_can_vacuum(const jr_db *db);   /* the backend has vacuum */
/* The backend's vacuum_due op: 1 if it vacuumed, 0 if not (or the
 * backend has none), -1 with err set. */
int jr_dbcall_vacuum_due(jr_db *db, long dead, jr_err *err);

/* Fills ids[0..max) with running jobs held by token whose cancel was
 * requested; returns how many. */
int jr_dbcall_cancelled(jr_db *db, const char *token, int64_t *ids, int max,
                        jr_err *err);
/* The backend's wake op (backend.h): up to max waiting jobs whose date
 * came made ready. Returns how many, or -1 with err set. */
int jr_dbcall_wake(jr_db *db, int max, jr_err *err);
/* The backend's wait_counts op: jobs waiting for a signal, for a date. */
int jr_dbcall_wait_counts(jr_db *db, long *on_signal, long *on_date,
                          jr_err *err);
/* Deletes up to limit finished jobs older than their state's keep
 * (seconds; < 0 keeps that state); returns how many. */
int jr_dbcall_prune(jr_db *db, double keep_completed, double keep_cancelled,
                    double keep_dead, int limit, jr_err *err);
/* Deletes up to limit rows of queues not paused, with no queued, running
 * or dead job, idle for idle seconds, and not among keep[0..nkeep);
 * returns how many. */
int jr_dbcall_queue_prune(jr_db *db, double idle, const char *const *keep,
                          int nkeep, int limit, jr_err *err);
/* The walks below call cb per row; a non-zero return stops (a success). */
typedef int (*jr_dbcall_name_cb)(const char *name, void *arg);
typedef int (*jr_dbcall_count_cb)(const char *name, long n, void *arg);
/* Each paused queue's name. */
int jr_dbcall_paused(jr_db *db, jr_dbcall_name_cb cb, void *arg,
                     jr_err *err);
/* Each queue not paused with ready jobs named one of names[0..nnames),
 * with how many, up to limit in all. */
int jr_dbcall_ready_by_queue(jr_db *db, const char *const *names, int nnames,
                             long limit, jr_dbcall_count_cb cb, void *arg,
                             jr_err *err);
/* Limit l's jobs ready (*waiting) and running (across runners). */
int jr_dbcall_limit_use(jr_db *db, const struct jr_limit *l, long *waiting,
                        long *running, jr_err *err);
/* Each schedule's controls: paused (since paused_at), and the last fire
 * asked for by hand (fire_at, 0: none). */
typedef int (*jr_dbcall_ctl_cb)(const char *schedule, int paused,
                                double paused_at, double fire_at, void *arg);
int jr_dbcall_sched_states(jr_db *db, jr_dbcall_ctl_cb cb, void *arg,
                           jr_err *err);
/* Each schedule's last fire: its instant and its job (or 0). */
typedef int (*jr_dbcall_fire_cb)(const char *schedule, double at,
                                 int64_t id, void *arg);
int jr_dbcall_last_fires(jr_db *db, jr_dbcall_fire_cb cb, void *arg,
                         jr_err *err);
/* Records fire f with its job, keeping keep fire rows per schedule (its
 * inserted and id set); JR_EINPUT: the database refuses this fire. */
int jr_dbcall_fire(jr_db *db, jr_fire *f, int keep, jr_err *err);
/* The schedules managed at run time, when their count of changes is not
 * *rev (then set): cb(name, def JSON) for each, by name. 1 read, 0 not
 * changed. */
typedef int (*jr_dbcall_def_cb)(const char *name, const char *def,
                                double created_at, double updated_at,
                                void *arg);
int jr_dbcall_sched_defs(jr_db *db, int64_t *rev, jr_dbcall_def_cb cb,
                         void *arg, jr_err *err);
/* Records the sequence option of handlers h[0..n) for every producer's
 * pushes (docs/queues.md, "Sequences"). */
int jr_dbcall_sequence_paths(jr_db *db, const jr_handler *h, int n,
                             jr_err *err);
/* Records the fair option of handlers h[0..n) (docs/queues.md, "Fair
 * share"). */
int jr_dbcall_fair_names(jr_db *db, const jr_handler *h, int n,
                         jr_err *err);
/* Calls cb for each queue a name with weights of its own made fair
 * (docs/queues.md, "A name's own weights"). */
typedef int (*jr_dbcall_queue_cb)(const char *queue, void *arg);
/* Sets a key's weight in job name's fair scope (fair set --name). */
int jr_dbcall_fair_name_set(jr_db *db, const char *name, const char *key,
                            double weight, jr_err *err);
int jr_dbcall_fair_name_queues(jr_db *db, jr_dbcall_queue_cb cb, void *arg,
                               jr_err *err);
#endif
