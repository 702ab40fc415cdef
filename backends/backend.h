/* backend.h - the storage interface: one table of functions per engine, as
 * redis's engine table. backends/sqlite/ and backends/postgres/ each
 * export only their jr_backend_ops (jr_sqlite_ops, jr_postgres_ops, in
 * each folder's ops.c); backend.c picks one from a URL (jr_url_parse, the
 * one parser) and masks passwords in URLs (jr_url_mask, in url.h for the
 * code that does not include this header, as jr_url_caps in caps.h). Each
 * table carries what its engine can do (caps.h): the runtime asks those,
 * never which engine it talks to. Also
 * the rows that stats and the dead queue list. All calls are blocking;
 * the master never calls them from its event loop directly: only db/
 * (the database threads, dbcalls.h for master/ and services/), client/,
 * cli/ and http/apidb.c include this header (spec/layers_spec.lua). The
 * jobs, pushes and results they store are job.h's. Uses err.h, job.h,
 * caps.h, url.h. */
#ifndef JR_BACKEND_H
#define JR_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/job.h"
#include "caps.h"
#include "url.h"

typedef struct jr_backend jr_backend;   /* opaque; each engine defines it */

/* One row of stats: counts for one job name, n[s] of state s (job.h's
 * jr_state: ready and scheduled split queued by run_at, queued is their
 * sum; every state is counted, JR_ST_NAME says which ones are shown). */
typedef struct jr_stat_row {
    const char *name;
    long        n[JR_NSTATES];
} jr_stat_row;

/* One dead job. Strings valid during the callback only. */
typedef struct jr_dead_row {
    int64_t     id;
    const char *name;
    const char *queue;
    int         attempts;
    const char *last_error;
    const char *generation;     /* may be NULL */
    double      died_at;
    double      created_at;
} jr_dead_row;

/* What one claim may take: the handler names it runs and, per queue, how
 * many jobs at most. Borrowed by the claim. */
typedef struct jr_queue_want {
    const char *queue;
    int         max;            /* at most this many from this queue */
} jr_queue_want;

typedef struct jr_claim_spec {
    const char *const   *names;     /* handler names */
    int                  nnames;
    const jr_queue_want *queues;    /* at most max jobs from each listed
                                       (listed twice: the smaller max) */
    int                  nqueues;
    int                  others;    /* at most this many from each queue not
                                       listed; 0: none (only the listed
                                       queues are served) */
    int                  max;       /* in all */
    /* limits per key (limitcfg.h): with none the claim is the plain one;
     * with some, jobs of a name or queue at its cap or out of tokens are
     * skipped, and *limit_next (may be NULL) gets the epoch time the
     * first refusing bucket has a token again, or 0 */
    const struct jr_limit *limits;  /* borrowed */
    int                  nlimits;
    double              *limit_next;
} jr_claim_spec;

/* One failed attempt of a job (the attempt history, schema.sql's
 * migration 12), as show gives them, oldest first. */
typedef struct jr_attempt_row {
    int         attempt;        /* the job's attempt number then */
    char       *error;          /* may be NULL */
    double      at;             /* epoch seconds it ended (a lost lease:
                                   when its loss was found) */
    double      duration;       /* seconds it ran; NAN: not known */
    char       *runner;         /* the runner's lease token; may be NULL */
    int         worker;         /* that runner's worker id; 0: not known */
    char       *generation;     /* handler code that ran it; may be NULL */
} jr_attempt_row;

/* Frees the strings of a[0..n) (as the engines' show made them). */
void jr_attempt_rows_clear(jr_attempt_row *a, int n);

/* One job as show and list give it. Strings valid during the callback
 * only; times are epoch seconds, 0 when not set. */
typedef struct jr_job_row {
    int64_t     id;
    const char *name;
    const char *queue;
    const char *state;          /* queued, running, dead, cancelled,
                                   completed */
    const char *payload;        /* JSON text; NULL from list */
    int         attempts;
    int         max_retries;    /* -1: not set on the job */
    int         priority;
    double      run_at;
    double      created_at;
    double      updated_at;
    double      started_at;     /* the last claim */
    double      finished_at;    /* completed, cancelled or dead */
    const char *last_error;     /* may be NULL */
    const char *generation;     /* may be NULL */
    const char *locked_by;      /* runner token while running, or NULL */
    double      locked_until;   /* lease end while running */
    double      progress_done;  /* NAN until reported */
    double      progress_total; /* NAN until reported or if unknown */
    const char *progress_note;  /* may be NULL */
    int         cancel_requested;
    const char *unique_key;     /* may be NULL; NULL from list */
    const char *limit_key;      /* NULL: unkeyed */
    const char *result;         /* JSON text; NULL: none, or from list */
    double      keep_until;     /* a job kept for its result is pruned
                                   then; 0: not set, or from list */
    int         sql_statements; /* the jobrunner.sql statements its
                                   success committed; 0: none, or from
                                   list */
    const jr_attempt_row *history; /* show: its failed attempts, oldest
                                   first, at most JR_ATTEMPTS_KEPT; list:
                                   NULL */
    int         nhistory;
    const char *steps;          /* show: its steps' records, a JSON array
                                   (jrsteps.c), or NULL; list: NULL */
    const char *wait_on;        /* show: the signal a waiting job waits
                                   for, or NULL; NULL from list */
    double      wake_at;        /* show: the date a waiting job waits for
                                   (a sleep, or the signal's deadline);
                                   0: none, or from list */
    const char *waits;          /* show: its signals' and sleeps' records
                                   (JSON text), or NULL */
    double      expires_at;     /* show: not started by then, it expires
                                   (docs/queues.md); 0: none, or list */
    double      deadline;       /* show: seconds from its first start
                                   that bound its retries; 0: none */
    double      deadline_at;    /* show: that deadline, set by its first
                                   claim; 0: none yet */
    long        cost;           /* show: its cost (limits by cost); 0: none
                                   (1), and from list */
} jr_job_row;

/* Which jobs list walks: NULL fields match any. */
typedef struct jr_list_filter {
    const char *state;          /* a state, or "scheduled" (queued, due
                                   later) or "ready" (queued, due) */
    const char *name;
    const char *queue;
    int         limit;          /* 0: all */
    const char *where;          /* payload filter (where.h), NULL: any */
    int64_t     before_id;      /* > 0: ids below it, newest first */
    int64_t     after_id;       /* > 0: ids above it, oldest first (a
                                   page back: the caller reverses it) */
    int         oldest;         /* 1: oldest first from the start too
                                   (after_id 0) */
} jr_list_filter;

/* One queue as queue_list gives it. */
typedef struct jr_queue_row {
    const char *name;
    int         paused;
    double      paused_at;      /* 0 when not paused */
    long        n[JR_NSTATES];  /* jobs of state s, as jr_stat_row's */
    double      oldest_ready;   /* run_at of its oldest ready job, epoch
                                   seconds; 0: none ready */
} jr_queue_row;

/* Outcomes of cancel, per id. */
enum {
    JR_CANCEL_DONE = 1,         /* was queued or scheduled: now cancelled */
    JR_CANCEL_REQUESTED,        /* running: its runner will stop it */
    JR_CANCEL_FINISHED,         /* completed, dead or cancelled: unchanged */
    JR_CANCEL_NOTFOUND          /* no such job */
};

/* Where one job stands, for a waiter (outcomes). */
typedef struct jr_outcome {
    int64_t     id;
    int         state;          /* jr_state (job.h); -1: no such row */
    char       *result;         /* JSON text or NULL; malloc'd (caller
                                   frees) */
    char       *error;          /* last_error or NULL; malloc'd */
} jr_outcome;

/* Jobs a bulk action (a retry or purge of every dead job, an HTTP bulk
 * action's page) changes in one transaction at most: between two, the
 * other writers get in (SQLite has one write lock) and a runner can stop. */
#define JR_BULK_ROWS 500

/* finished's answer when it cannot tell which jobs ended (SQLite: the
 * database changed). */
#define JR_FINISHED_SOME (-2)

typedef int (*jr_stat_cb)(const jr_stat_row *row, void *arg);
typedef int (*jr_dead_cb)(const jr_dead_row *row, void *arg);
typedef int (*jr_job_cb)(const jr_job_row *row, void *arg);
typedef int (*jr_queue_cb)(const jr_queue_row *row, void *arg);
typedef int (*jr_name_cb)(const char *queue, void *arg);
typedef int (*jr_count_cb)(const char *queue, long n, void *arg);

/* A job's link (workflows): kind 'p' a parent, 'c' a child, 'b' its
 * batch (state NULL), 'm' a batch's member; state as the link knows it
 * ("gone": the row was deleted). */
typedef int (*jr_link_cb)(int kind, int64_t id, const char *state,
                          void *arg);

/* A sequence as sequences gives it (docs/queues.md, "Sequences").
 * Strings valid during the callback. */
typedef struct jr_seq_row {
    const char *key;
    int64_t     head;           /* its first job not ended, or the dead
                                   job that blocks it */
    const char *state;          /* the head's state */
    long        jobs;           /* its jobs queued, running or waiting */
    int         blocked;        /* its head ended dead with on_failure
                                   block: it waits for skip or unblock */
} jr_seq_row;
typedef int (*jr_seq_cb)(const jr_seq_row *row, void *arg);

/* Encrypted values (docs/operations.md, "Encryption"): the columns of a
 * job that may hold them, as crypt_scan reads them and crypt_put writes. */
enum { JR_CRYPT_PAYLOAD, JR_CRYPT_RESULT, JR_CRYPT_STEPS, JR_CRYPT_WAITS,
       JR_CRYPT_COLS };
/* One job's values, JSON text or NULL (valid during the call only). */
typedef int (*jr_crypt_cb)(int64_t id, const char *const *vals, void *arg);
/* One value to replace: col of job id, if it still holds old, by new. */
typedef struct jr_crypt_put {
    int64_t     id;
    int         col;            /* JR_CRYPT_* */
    const char *old;
    const char *new_text;
} jr_crypt_put;
/* One key of a fair queue as fair_use gives it (docs/queues.md, "Fair
 * share"): its jobs ready and running, and the weight its next claim
 * takes (stored by fair set, else the config's, else its default). The
 * key is valid during the callback. */
typedef int (*jr_fair_use_cb)(const char *key, long waiting, long running,
                              double weight, void *arg);
/* A queue or a name as fair_name_list gives it; valid during the
 * callback. */
typedef int (*jr_fair_queue_cb)(const char *queue, void *arg);
/* One effective priority of an aging queue's ready jobs as aging_use
 * gives it (docs/queues.md, "Priority aging"): how many jobs have it and
 * the lowest stored priority among them. */
typedef int (*jr_aging_use_cb)(long long effective, long jobs,
                               int lowest, void *arg);

/* A limit that queued or waiting jobs cost more than, as cost_over gives
 * it (docs/limits.md, "Limits by cost"): its scope, its size and what
 * holds it (limit_sizes), how many jobs, the first of them and the
 * highest cost. Strings valid during the callback. */
typedef int (*jr_cost_over_cb)(const char *scope, long size,
                               const char *what, long jobs, int64_t job,
                               long cost, void *arg);

/* seq_act's what. */
enum {
    JR_SEQ_ACT_SKIP = 1,        /* the blocked job stops holding it: the
                                   next runs */
    JR_SEQ_ACT_UNBLOCK          /* the blocked job is queued again in its
                                   place, its attempts reset */
};

/* A batch as batch_show gives it. Strings valid during the callback. */
typedef struct jr_batch_row {
    int64_t     id;
    const char *on_complete;    /* may be NULL */
    const char *on_success;     /* may be NULL */
    const char *payload;        /* JSON text */
    const char *queue;          /* the callbacks' */
    int         results;
    long        total, pending, completed, dead, cancelled;
    double      created_at;
    double      finished_at;    /* 0: not finished */
    int64_t     complete_job;   /* the callbacks pushed, 0: none */
    int64_t     success_job;
} jr_batch_row;

typedef int (*jr_batch_cb)(const jr_batch_row *row, void *arg);

typedef int (*jr_fire_cb)(const char *schedule, double at, int64_t job_id,
                          void *arg);
/* One row of the schedule controls: paused (paused_at epoch seconds, 0
 * when not paused) and the last fire asked for by hand (0: none). */
typedef int (*jr_sched_cb)(const char *schedule, int paused,
                           double paused_at, double fire_at, void *arg);

/* One schedule managed at run time (migration 22): its name and its
 * definition (JSON text). */
typedef int (*jr_scheddef_cb)(const char *name, const char *def,
                              double created_at, double updated_at,
                              void *arg);

/* What sched_ctl does to one schedule. */
enum {
    JR_SCHED_PAUSE = 1,         /* its fires are refused until resumed */
    JR_SCHED_RESUME,            /* fires again, from the resume on */
    JR_SCHED_FIRE               /* asks the runners for a fire now */
};

typedef struct jr_backend_opts {
    int         sync_normal;    /* SQLite: synchronous=NORMAL instead of FULL */
    int         durable_push;   /* SQLite: with sync_normal, pushes commit
                                   with synchronous=FULL all the same (the
                                   runner's connection: HTTP pushes are
                                   acknowledged). PostgreSQL's runner
                                   connection does so with
                                   synchronous_commit = on, always */
    int         async_commit;   /* PostgreSQL: commits do not wait for the
                                   WAL flush (synchronous_commit = off) */
    int         claims;         /* PostgreSQL: the connection claims: no
                                   sequential or bitmap scans
                                   (postgres/conn.c's session_setup) */
    int         own_timeouts;   /* PostgreSQL: the runner's connection sets
                                   its own session timeouts
                                   (postgres/conn.c's session_setup),
                                   whatever the role's */
    double      busy_timeout;   /* SQLite: seconds to wait for a lock */
    const char *schema;         /* PostgreSQL: schema name, NULL "jobrunner" */
    size_t      max_payload;    /* bytes; 0: no limit */
    int         on_parent_failure; /* JR_OPF_*: what a push that gives
                                   none gets (config on_parent_failure) */
    int         must_exist;     /* readers: open an existing database only;
                                   SQLite creates no file, migrate creates
                                   no schema (JR_ENOTFOUND instead) */
    double      keep_completed; /* seconds a succeeded job stays as state
                                   completed; 0: deleted at success */
    double      keep_cancelled; /* seconds a cancelled job stays, for the
                                   runner's pruner; cancelled rows are
                                   always recorded (only prune deletes
                                   them) */
    double      result_ttl;     /* seconds a succeeded job with a result,
                                   or pushed or waited on with result_ttl,
                                   stays completed when its own is not set;
                                   0: 3600 */
    const char *handler_role;   /* PostgreSQL: jobrunner.sql statements run
                                   under SET LOCAL ROLE to it; NULL: the
                                   runner's own role */
    const char *attach;         /* SQLite: a file ATTACHed as "app" on the
                                   runner's connection, for jobrunner.sql
                                   statements; NULL: none */
} jr_backend_opts;

#define JR_LIMIT_TOP 5          /* keys limit_use lists */
#define JR_SCHEDDEFS_MAX 1000   /* schedules managed at run time at most
                                   (each change, every runner reads them
                                   all), as a config's */

/* One limit's use, as `jobrunner limits` shows it. */
typedef struct jr_limit_use {
    int         top;            /* in: the busiest keys wanted, 0 to
                                   JR_LIMIT_TOP (0: the counts alone, no
                                   scan grouped by key) */
    long        running;        /* across every runner */
    long        waiting;        /* ready (queued, due) */
    double      tokens;         /* in its own bucket; -1: no rate */
    int         ntop;
    const char *top_key[JR_LIMIT_TOP];  /* keys by ready jobs, most first */
    long        top_waiting[JR_LIMIT_TOP];
    long        top_running[JR_LIMIT_TOP];
    double      top_tokens[JR_LIMIT_TOP];   /* in each key's bucket; -1:
                                               no per-key rate */
} jr_limit_use;

/* The ops, one row each: X(return type, name, (parameters)), with its
 * contract above it. The one list makes jr_backend_ops's fields and each
 * engine's declarations of its own (jr_sqlite_<name>, jr_pg_<name>, in
 * sqlite_int.h and pg_int.h), so a function of an op's name whose
 * parameters differ from its row does not compile. Every op returns -1
 * with err set on failure unless said otherwise. Times are judged by the
 * database's clock. */
#define JR_BACKEND_OPS(X) \
    /* Opens a connection. url is what followed the scheme check in
     * backend.c (whole URL for postgres, the path for sqlite). Does not
     * create tables: call migrate. NULL with err set on failure. */ \
    X(jr_backend *, open, (const char *url, const jr_backend_opts *o, \
                           jr_err *err)) \
    /* Creates or upgrades the schema; safe to run from many processes at
     * once. Returns 0. */ \
    X(int, migrate, (jr_backend *b, jr_err *err)) \
    /* Inserts n jobs in one transaction; all or none. ids (may be NULL)
     * receives their ids. Returns 0. */ \
    X(int, push, (jr_backend *b, const jr_push *p, int n, int64_t *ids, \
                  jr_err *err)) \
    /* Claims up to spec->max ready jobs (state queued, run_at <= now) whose
     * name is one of spec->names, from queues that are not paused, at most
     * the spec's cap from each queue: marks them running under token until
     * now + lease seconds, sets started_at and counts the attempt. Fair
     * between queues: round robin in one batch (the first ready job of
     * each queue, then the second of each...), and across batches, as
     * the queue that comes first in a round rotates from one claim to the
     * next (so one-job claims alternate too); within a queue priority,
     * run_at, id. Fills out[] (spec->max slots) with new jobs in that
     * order (caller frees each). Returns how many, or -1 and then nothing
     * was claimed. */ \
    X(int, claim, (jr_backend *b, const char *token, double lease, \
                   const jr_claim_spec *spec, jr_job **out, jr_err *err)) \
    /* Records n results in one transaction, each fenced: a row changes only
     * if it is still running under token. Returns how many were applied.
     * JR_DONE deletes the row, or with keep_completed makes it completed
     * with finished_at; JR_CANCELLED makes it cancelled; JR_PROGRESS sets
     * its progress and leaves it running; a JR_RETRY, JR_SNOOZE or
     * JR_RELEASE of a job whose cancel was requested makes it cancelled
     * (never queued again). A JR_DONE with statements (jr_result.sql)
     * runs them first, if the job is still held by token, in a savepoint
     * of its own; when one fails, its statements are rolled back and the
     * result is recorded as the failed attempt sql_kind says, with
     * sql_error filled (sqlres.h); the others of the batch go on. */ \
    X(int, complete, (jr_backend *b, const char *token, \
                      const jr_result *r, int n, jr_err *err)) \
    /* Optional (NULL: complete, then claim): both in one transaction.
     * Returns what claim returns and sets *applied as complete would; on
     * -1 nothing was recorded nor claimed. */ \
    X(int, complete_claim, (jr_backend *b, const char *token, \
                            const jr_result *r, int nr, int *applied, \
                            double lease, const jr_claim_spec *spec, \
                            jr_job **out, jr_err *err)) \
    /* Extends to now + lease the leases of jobs ids[0..n) that token
     * holds (running, locked by it). Only the jobs the runner knows it
     * holds: a row that bears its token without being one of them (its
     * completion or claim undone by a crash of the database while the
     * runner stayed up) is left to expire and be rescued. Returns count. */ \
    X(int, renew, (jr_backend *b, const char *token, double lease, \
                   const int64_t *ids, int n, jr_err *err)) \
    /* Requeues running jobs whose lease expired (any runner's), with
     * last_error 'lease expired: runner lost' and the lost attempt counted
     * (it was counted at claim). It never decides death: the runner that
     * claims the job next knows its handler's max_retries and records a
     * job out of retries as JR_EXPIRED without running it. A job whose
     * cancel was requested becomes cancelled instead. Returns how many
     * rows it changed. */ \
    X(int, rescue, (jr_backend *b, jr_err *err)) \
    /* Calls cb for each job name with any job, ordered by name. A non-zero
     * return from cb stops the walk (still a success). */ \
    X(int, stats, (jr_backend *b, jr_stat_cb cb, void *arg, jr_err *err)) \
    /* Calls cb for up to limit dead jobs (limit 0: all of them), newest
     * death first; a non-zero return from cb stops the walk. */ \
    X(int, dead_list, (jr_backend *b, int limit, jr_dead_cb cb, void *arg, \
                       jr_err *err)) \
    /* Requeues dead jobs ids[0..n) (n < 0: all dead jobs) with attempts 0
     * and no cancel request, JR_BULK_ROWS jobs a transaction. A job of a
     * sequence that the sequence went on past (not the dead one blocking
     * it, which keeps its place) goes to the sequence's end as a push
     * does, in the same transaction; with n < 0 each sequence's in their
     * order. Returns how many; on -1 the transactions before stay
     * done. */ \
    X(int, dead_retry, (jr_backend *b, const int64_t *ids, int n, \
                        jr_err *err)) \
    /* Deletes dead jobs that died more than older_than seconds ago
     * (0: all), JR_BULK_ROWS jobs a transaction. Returns how many; on -1
     * the transactions before stay done. */ \
    X(int, dead_purge, (jr_backend *b, double older_than, jr_err *err)) \
    /* Runs job id again (rerun), in one transaction: a job completed,
     * dead, cancelled or queued becomes queued, due now, with attempts 0,
     * no result, no cancel request; its steps' records from the one
     * named from_step on are removed (from_step NULL: all of them); its
     * payload replaced when payload (JSON text, checked by the caller) is
     * not NULL; its attempt history kept. A job of a sequence that the
     * sequence went on past (ended, not the dead one blocking it) goes
     * to the sequence's end as a push does, waiting when a job there
     * holds it. Returns 0 (queued), 1 (waiting), or -1 with err set and
     * nothing changed: JR_ENOTFOUND no such job, JR_EINPUT a job
     * running or waiting, or no step from_step recorded. */ \
    X(int, rerun, (jr_backend *b, int64_t id, const char *from_step, \
                   const char *payload, jr_err *err)) \
    /* Deletes at most limit finished jobs in one short transaction:
     * completed ones finished more than older_completed seconds ago,
     * cancelled ones more than older_cancelled, dead ones (by died_at)
     * more than older_dead; a threshold < 0 keeps that state. Call again
     * while it returns limit. On PostgreSQL one runner at a time prunes:
     * another's call returns 0. Returns how many. */ \
    X(int, prune, (jr_backend *b, double older_completed, \
                   double older_cancelled, double older_dead, int limit, \
                   jr_err *err)) \
    /* Cancels jobs ids[0..n), each in the same transaction; outcome[i]
     * receives JR_CANCEL_* for ids[i]. Returns 0. */ \
    X(int, cancel, (jr_backend *b, const int64_t *ids, int n, \
                    int *outcome, jr_err *err)) \
    /* Fills ids[0..max) with running jobs held by token whose cancel was
     * requested (an index makes this cheap enough to poll each second).
     * Returns how many. */ \
    X(int, cancelled, (jr_backend *b, const char *token, int64_t *ids, \
                       int max, jr_err *err)) \
    /* Pauses or resumes queue (a valid queue name, JR_EINPUT otherwise),
     * creating its row if no job used it yet. Returns 0. */ \
    X(int, pause, (jr_backend *b, const char *queue, jr_err *err)) \
    X(int, resume, (jr_backend *b, const char *queue, jr_err *err)) \
    /* Calls cb for each queue (in the queues table or with any job), by
     * name; a non-zero return from cb stops the walk. Returns 0. */ \
    X(int, queue_list, (jr_backend *b, jr_queue_cb cb, void *arg, \
                        jr_err *err)) \
    /* Deletes at most limit rows of the queues table that are not
     * paused, have no queued, running or dead job, were made or last
     * paused or resumed more than idle seconds ago, and are not among
     * keep[0..nkeep) (the config's queues), so that the table holds the
     * queues in use, not every name ever pushed to. A push makes its
     * queue known again. Pushes that
     * race with it are safe (SQLite: one writer; PostgreSQL: it takes a
     * SHARE lock on jobs for the delete, only when it found some). On
     * PostgreSQL one runner at a time prunes. Returns how many. */ \
    X(int, queue_prune, (jr_backend *b, double idle, \
                         const char *const *keep, int nkeep, int limit, \
                         jr_err *err)) \
    /* Calls cb with the name of each paused queue. Reads the queues
     * table only: cheap enough for a runner to poll every second. A
     * non-zero return from cb stops the walk. Returns 0. */ \
    X(int, paused, (jr_backend *b, jr_name_cb cb, void *arg, jr_err *err)) \
    /* Calls cb(queue, n) for each queue not paused with ready jobs whose
     * name is in names[0..nnames), counting limit jobs at most in all.
     * Returns 0. */ \
    X(int, ready_by_queue, (jr_backend *b, const char *const *names, \
                            int nnames, long limit, jr_count_cb cb, \
                            void *arg, jr_err *err)) \
    /* Calls cb once with every field of job id, payload included; -1 with
     * JR_ENOTFOUND naming the id if there is none. */ \
    X(int, show, (jr_backend *b, int64_t id, jr_job_cb cb, void *arg, \
                  jr_err *err)) \
    /* Calls cb for the jobs f matches (f NULL: all), newest (highest id)
     * first, without payload; a non-zero return from cb stops the walk.
     * JR_EINPUT for a bad filter. Returns 0. */ \
    X(int, list, (jr_backend *b, const jr_list_filter *f, jr_job_cb cb, \
                  void *arg, jr_err *err)) \
    /* A descriptor that becomes readable when another process may have
     * added work (PostgreSQL's LISTEN socket, SQLite's inotify on the WAL),
     * or -1 if there is none. Valid until the next call on b. */ \
    X(int, wake_fd, (jr_backend *b)) \
    /* Consumes pending wake-ups; returns 1 if the database changed since
     * the last call, 0 if not, 2 if not yet but another's commit may be
     * on its way (SQLite: a writer holds the lock; the caller looks again
     * soon), -1 on error (e.g. connection lost). */ \
    X(int, changed, (jr_backend *b, jr_err *err)) \
    /* Closes the connection; NULL is a no-op. */ \
    X(void, close, (jr_backend *b)) \
    /* Schedules (migration 5). Inserts each fire of f[0..n), in a
     * transaction of its own: a row of the fires table (schedule, at) and
     * its job (run_at = at), or nothing when the schedule already has a
     * fire at or after at (another runner got there first; a primary key
     * on (schedule, at) settles a race): then f[i].inserted is 0, not an
     * error. Keeps the newest keep fire rows of the schedule (a
     * backfill's aside). f[i].overlap, .delay and .backfill as job.h says
     * (migration 22). Returns how many were inserted; on -1 the fires
     * before the failed one stand. */ \
    X(int, fire, (jr_backend *b, jr_fire *f, int n, int keep, jr_err *err)) \
    /* Calls cb(schedule, at, job id or 0) with the last fire of each
     * schedule that has one, by name. Returns 0. */ \
    X(int, last_fires, (jr_backend *b, jr_fire_cb cb, void *arg, \
                        jr_err *err)) \
    /* Deletes the dead jobs among ids[0..n) (the others are left alone),
     * in one transaction. Returns how many. */ \
    X(int, dead_delete, (jr_backend *b, const int64_t *ids, int n, \
                         jr_err *err)) \
    /* ---- limits per key (limitcfg.h) ---- */ \
    /* Records, for each limit of l[0..n) on a job name with a key path,
     * the path pushes of that name take their limit key from (other
     * names' paths stay). Returns 0. */ \
    X(int, limit_paths, (jr_backend *b, const struct jr_limit *l, int n, \
                         jr_err *err)) \
    /* Fills u with limit l's use now: running jobs, ready ones, tokens
     * and, when u->top asks for them (a scan grouped by key of every
     * job of its scope), its u->top keys with most jobs ready. Strings
     * valid until the next call on b. Returns 0. */ \
    X(int, limit_use, (jr_backend *b, const struct jr_limit *l, \
                       jr_limit_use *u, jr_err *err)) \
    /* Vacuums the jobs table (its dead rows and index entries), skipping
     * it when another vacuum holds it; NULL where the engine needs none
     * (SQLite removes a row's index entries with the row). Slow: never on
     * the claim's connection. Returns 0. */ \
    X(int, vacuum, (jr_backend *b, jr_err *err)) \
    /* How many times the connection was opened again after a loss since
     * open: what was committed asynchronously before may be gone, or
     * another server may answer. NULL where it never reconnects. */ \
    X(unsigned, reconnects, (jr_backend *b)) \
    /* ---- waiting for outcomes (migration 10) ---- */ \
    /* With keep > 0, first sets result_ttl = keep on the jobs of
     * ids[0..n) that have not ended and have none, so that a success
     * keeps them completed (committed before the read). Then fills
     * out[i] with where ids[i] stands (completed, with its result, when
     * its row is gone but a batch's member or a child's parent recorded
     * its success; state -1 when nothing says), and *last with the
     * highest id ever given: a job not found at or below it ended and was
     * deleted (a plain success, pruned or purged) or, on PostgreSQL, its
     * push rolled back; above it was never pushed. Returns 0; on -1 out
     * holds nothing to free. */ \
    X(int, outcomes, (jr_backend *b, const int64_t *ids, int n, \
                      double keep, jr_outcome *out, int64_t *last, \
                      jr_err *err)) \
    /* A descriptor that becomes readable when a job may have ended (kept
     * completed, dead or cancelled): PostgreSQL LISTENs on
     * "<schema>_finished", SQLite watches the WAL as wake_fd does; -1 if
     * there is none. Ask for it before the first outcomes, so that no end
     * is missed. Valid until the next call on b. */ \
    X(int, finished_fd, (jr_backend *b)) \
    /* Consumes finished_fd's wake-ups: fills ids[0..max) with jobs that
     * ended and returns how many (0: none), or JR_FINISHED_SOME when it
     * cannot tell which (or more than max). -1 on error. */ \
    X(int, finished, (jr_backend *b, int64_t *ids, int max, jr_err *err)) \
    /* ---- workflows (migration 11) ---- */ \
    /* Calls cb for each parent ('p'), child ('c') and the batch ('b') of
     * job id, parents first, by id. Returns 0 (none is no error). */ \
    X(int, links, (jr_backend *b, int64_t id, jr_link_cb cb, void *arg, \
                   jr_err *err)) \
    /* Calls bcb with batch id, then mcb for each member ('m'), by id.
     * JR_ENOTFOUND when there is no such batch. Returns 0. */ \
    X(int, batch_show, (jr_backend *b, int64_t id, jr_batch_cb bcb, \
                        jr_link_cb mcb, void *arg, jr_err *err)) \
    /* ---- schedule controls (migration 12, docs/schedules.md) ---- */ \
    /* In one transaction, on schedule name (jr_name_check, JR_EINPUT
     * otherwise; any valid name, the engines know no config), creating
     * its row. JR_SCHED_PAUSE: from its commit on, fire refuses every
     * fire of it (f->inserted -2). JR_SCHED_RESUME: if it was paused,
     * resumes it and records the resume instant as its last fire with no
     * job, so the instants of the paused time never fire (catch-up after
     * a restart included); else nothing. JR_SCHED_FIRE: asks the runners
     * for a fire at *at (0: the database's current second, which *at
     * receives), kept unless a later one was asked for; a runner fires
     * it as any fire, through fire, once; JR_EINPUT when the schedule is
     * paused. Returns 1 if the row changed, else 0. */ \
    X(int, sched_ctl, (jr_backend *b, const char *name, int what, \
                       double *at, jr_err *err)) \
    /* Calls cb for each row of the schedule controls, by name; a
     * non-zero return from cb stops the walk. Returns 0. */ \
    X(int, sched_states, (jr_backend *b, jr_sched_cb cb, void *arg, \
                          jr_err *err)) \
    /* Sends signal name with its JSON payload (NULL: {}) to job id, in
     * one transaction (docs/handlers.md, "Signals and durable sleep"):
     * kept in the job's waits for its wait_signal(name), and a job
     * waiting for it now is made ready (queued, due now). Refused,
     * nothing changed, with -1 and err: JR_ENOTFOUND for no such job,
     * JR_EINPUT for a bad name or payload, a finished job (completed,
     * dead, cancelled), a signal of that name sent already, or one whose
     * wait timed out (jr_signal_refused's words). A signal and the
     * timeout of its wait (wake) decide on the row under its lock:
     * whichever commits first. Returns 1 if the job was made ready, 0 if
     * kept (state receives the job's state, size bytes). */ \
    X(int, signal, (jr_backend *b, int64_t id, const char *name, \
                    const char *payload, char *state, size_t size, \
                    jr_err *err)) \
    /* Wakes, in one transaction, up to max waiting jobs whose wait's
     * date came: a sleep ends (queued, due now), a signal's wait times
     * out (queued, its timeout recorded in the job's waits so that its
     * wait_signal returns nil, "timeout"). First, up to max queued jobs
     * never started whose expires_at passed end expired (docs/queues.md,
     * "Expiry and deadlines"). Returns how many jobs it changed. */ \
    X(int, wake, (jr_backend *b, int max, jr_err *err)) \
    /* Counts the jobs waiting for a signal and those waiting for a date
     * (a sleep) into *on_signal and *on_date. Returns 0. */ \
    X(int, wait_counts, (jr_backend *b, long *on_signal, long *on_date, \
                         jr_err *err)) \
    /* Calls cb for each sequence with jobs not ended or a job blocking
     * it (only the blocked ones when blocked is 1), by key, at most
     * limit of them (0: all); a non-zero return from cb stops the walk.
     * Returns 0. */ \
    X(int, sequences, (jr_backend *b, int blocked, int limit, jr_seq_cb cb, \
                       void *arg, jr_err *err)) \
    /* JR_SEQ_ACT_SKIP or _UNBLOCK on sequence key, in one transaction.
     * Returns how many blocked jobs it skipped or queued again (0: the
     * sequence was not blocked). */ \
    X(int, seq_act, (jr_backend *b, const char *key, int what, jr_err *err)) \
    /* Sets the weight (1 to 1000) of fair key key of queue for every
     * runner's claim (docs/queues.md, "Fair share"), over the config's.
     * Returns 0. */ \
    X(int, fair_set, (jr_backend *b, const char *queue, const char *key, \
                      double weight, jr_err *err)) \
    /* From another thread than the one in a call on b, at a stop: makes \
     * the handler's statement it runs now, if any, fail soon (one that \
     * does not end), and every handler's statement after it on b fail \
     * unrun (sqlres.h's JR_SQLRES_CUT: a failed attempt), so that no \
     * round after, the last recording of results included, waits on \
     * one. A cancel that lands just after a handler's statement ended \
     * fails the runner's statement of that round instead: its results \
     * are recorded again, their statements unrun. NULL: the engine \
     * cannot. */ \
    X(void, interrupt, (jr_backend *b)) \
    /* ---- schedules managed at run time (migration 22) ---- */ \
    /* Writes run-time schedule name (jr_name_check) in one transaction
     * that adds one to the count of changes: def (a JSON object the
     * caller checked, jr_scheddef_read) with old NULL adds it (JR_EINPUT
     * when it exists); with old, replaces it if its definition is still
     * old (0 when another change came between: read it again); def NULL
     * removes it. JR_ENOTFOUND when a set or a remove finds none; an add
     * beyond JR_SCHEDDEFS_MAX schedules is JR_EINPUT. Returns 1 when
     * written. */ \
    X(int, sched_def_put, (jr_backend *b, const char *name, \
                           const char *def, const char *old, jr_err *err)) \
    /* Reads the count of changes; when it is not *rev, calls cb for each
     * run-time schedule by name (as of the same read) and sets *rev.
     * Returns 1 when it read them, 0 when nothing changed. */ \
    X(int, sched_defs, (jr_backend *b, int64_t *rev, jr_scheddef_cb cb, \
                        void *arg, jr_err *err)) \
    /* The job's logs (jobs.logs, migration 20: its runs' entries, oldest
     * first, as joblog.h makes them): *out gets their JSON array text (a
     * new string, free with free()), or NULL when none was kept. Returns
     * 1, or 0 (*out NULL) when no job has id. */ \
    X(int, job_logs, (jr_backend *b, int64_t id, char **out, jr_err *err)) \
    /* Calls cb for up to limit jobs of id above after, by id, with their \
     * JR_CRYPT_COLS values (a read of committed rows, no lock held; a \
     * non-zero return from cb stops). Returns how many it read. */ \
    X(int, crypt_scan, (jr_backend *b, int64_t after, int limit, \
                        jr_crypt_cb cb, void *arg, jr_err *err)) \
    /* In one transaction, replaces each value of rows[0..n) whose column \
     * still holds its old text (a value changed since it was read is \
     * left as it is). Returns how many it replaced. */ \
    X(int, crypt_put, (jr_backend *b, const jr_crypt_put *rows, int n, \
                       jr_err *err)) \
    /* Calls cb for each key of fair limit f's queue (f->fair_path) with
     * jobs queued or running, by most ready first: a read of the queue's
     * queued and running jobs. Returns 0. */ \
    X(int, fair_use, (jr_backend *b, const struct jr_limit *f, \
                      jr_fair_use_cb cb, void *arg, jr_err *err)) \
    /* Calls cb for each limit of limit_sizes that queued or waiting jobs \
     * cost more than (pushed before a config made it smaller: they could \
     * never start), by scope: a read of the jobs with a cost. Returns 0. */ \
    X(int, cost_over, (jr_backend *b, jr_cost_over_cb cb, void *arg, \
                       jr_err *err)) \
    /* Calls cb for each effective priority of queue's ready jobs (queued \
     * and due) in a queue that ages a level every aging seconds, lowest \
     * (next to run) first, at most max of them: a read of the queue's \
     * queued jobs. Returns 0. */ \
    X(int, aging_use, (jr_backend *b, const char *queue, double aging, \
                       int max, jr_aging_use_cb cb, void *arg, jr_err *err)) \
    /* In a transaction of its own, records the sequence option of each \
     * handler h[0..n) (docs/queues.md, "Sequences": h->sequence, a \
     * payload path) for every producer's pushes; a name whose handler \
     * has none loses its row. Returns 0. */ \
    X(int, sequence_paths, (jr_backend *b, const jr_handler *h, int n, \
                            jr_err *err)) \
    /* In a transaction of its own, records the fair option of each \
     * handler h[0..n) (docs/queues.md, "Fair share": h->fair, a payload \
     * path), which keys its name's jobs in a fair queue over the queue's \
     * path, at every push; a new or changed path keys the name's jobs \
     * not ended there again, and a name whose handler has none loses \
     * its row (its jobs keyed by the queue's path again). Returns 0. */ \
    X(int, fair_names, (jr_backend *b, const jr_handler *h, int n, \
                        jr_err *err)) \
    /* Sets the weight (1 to 1000) of key key in the fair scope of job \
     * name (docs/queues.md, "A name's own weights") for every runner's \
     * claim, over its handler's weights. Returns 0. */ \
    X(int, fair_name_set, (jr_backend *b, const char *name, \
                           const char *key, double weight, jr_err *err)) \
    /* Calls cb for each queue made fair by a name with weights of its \
     * own (names 0: fair in no config, fair_paths' path ''), or for each \
     * job name with weights of its own (names 1), by name. Returns 0. */ \
    X(int, fair_name_list, (jr_backend *b, int names, jr_fair_queue_cb cb, \
                            void *arg, jr_err *err)) \
    /* Calls cb for each key in job name's fair scope with jobs queued \
     * or running (the key without the name), by most ready first, with \
     * its weight (fair set --name's, else the handler's weights', else \
     * its default): a read of the name's fair-keyed jobs. Returns 0. */ \
    X(int, fair_name_use, (jr_backend *b, const char *name, \
                           jr_fair_use_cb cb, void *arg, jr_err *err)) \
    /* vacuum's, when the server counts at least dead dead rows in the \
     * jobs table (every session's since its last vacuum or analyze: \
     * other runners', a bulk delete's) and a vacuum could remove some \
     * (the oldest transaction that holds back removal is not the one of \
     * the last vacuum); NULL where vacuum is. Slow when it vacuums: never \
     * on the claim's connection. Returns 1 if it vacuumed, 0 if not. */ \
    X(int, vacuum_due, (jr_backend *b, long dead, jr_err *err))

#define JR_BACKEND_OP_FIELD(ret, name, params) ret (*name) params;

/* Each engine's table: what it can do, and its ops. */
typedef struct jr_backend_ops {
    const char *name;           /* "sqlite" or "postgres", for messages:
                                   the runtime asks caps, not the name */
    jr_backend_caps caps;       /* what the engine can do (caps.h) */
    /* The database's file on this machine for what open takes (arg of
     * jr_url_parse), or NULL (a server, a database in memory); NULL: a
     * server's engine (jr_url_file). */
    const char *(*file)(const char *arg);
    JR_BACKEND_OPS(JR_BACKEND_OP_FIELD)
} jr_backend_ops;


/* A backend connection as the rest of the runtime holds it. */
typedef struct jr_db {
    const jr_backend_ops *ops;
    jr_backend           *b;
} jr_db;

/* Opens the backend named by url: "sqlite:PATH", a path ending in .db, or
 * "postgres://..." / "postgresql://..." / a libpq conninfo "host=...".
 * Returns 0 and fills db, or -1 with err set. */
int  jr_db_open(jr_db *db, const char *url, const jr_backend_opts *o,
                jr_err *err);
void jr_db_close(jr_db *db);    /* zeroed or closed db is a no-op */

/* The claim order of two jobs of one queue: priority, run_at, id (<0, 0,
 * >0), for the backends that sort what they claimed. */
static inline int
jr_claim_cmp(int pa, double ra, int64_t ia, int pb, double rb, int64_t ib)
{
    if (pa != pb)
        return pa < pb ? -1 : 1;
    if (ra != rb)
        return ra < rb ? -1 : 1;
    return (ia > ib) - (ia < ib);
}

/* The same for qsort of an array of jr_job pointers. */
static inline int
jr_claimed_cmp(const void *a, const void *b)
{
    const jr_job *x = *(jr_job *const *)a, *y = *(jr_job *const *)b;

    return jr_claim_cmp(x->priority, x->run_at, x->id, y->priority,
                        y->run_at, y->id);
}
/* Counts ready jobs (queued, due, in a queue not paused) whose name is in
 * names[0..nnames), stopping at limit: the sum of ready_by_queue. Returns
 * the count, or -1 with err set. */
long jr_db_count_ready(const jr_db *db, const char *const *names, int nnames,
                       long limit, jr_err *err);

/* The one URL parser: which engine url names ("sqlite:PATH",
 * "sqlite://PATH", a path ending in .db, .sqlite or .sqlite3, or a
 * PostgreSQL URL or conninfo) and in *arg what its open takes (the file
 * path for SQLite, the whole URL for PostgreSQL). NULL with err set (err
 * may be NULL) when it names none. */
const jr_backend_ops *jr_url_parse(const char *url, const char **arg,
                                   jr_err *err);
/* jr_url_caps, jr_url_file (caps.h) and jr_url_mask (url.h) are for
 * callers without backend.h. */

/* Checks a list filter: state one of the states, "scheduled" or "ready";
 * name and queue as jr_name_check; limit >= 0. JR_EINPUT naming the
 * field. */
int  jr_list_filter_check(const jr_list_filter *f, jr_err *err);

extern const jr_backend_ops jr_sqlite_ops;
extern const jr_backend_ops jr_postgres_ops;

#endif
