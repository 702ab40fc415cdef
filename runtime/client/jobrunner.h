/* jobrunner.h - the producer library (libjobrunner): push jobs into a
 * jobrunner queue from C, and read its counts. Installed as <jobrunner.h>;
 * link with `pkg-config --cflags --libs jobrunner`.
 *
 *     jr_client *c;
 *     int64_t id;
 *     if (jr_client_open(&c, "sqlite:jobs.db", NULL) != JR_CLIENT_OK ||
 *         jr_client_push(c, "send_email", "{\"to\":\"a@b\"}", NULL, &id)
 *             != JR_CLIENT_OK)
 *         fprintf(stderr, "%s\n", jr_client_errmsg(c));
 *     jr_client_close(c);
 *
 * Every call returns a status, JR_CLIENT_OK (0) or one of JR_CLIENT_E*, and
 * leaves one sentence saying what failed and why in the handle
 * (jr_client_errmsg). No call aborts, exits or prints.
 *
 * Threads: a handle is not thread-safe; use one handle per thread (handles
 * share nothing, so any number may be open at once in one process). A handle
 * must not be used across fork(): open a new one in the child. */
#ifndef JOBRUNNER_H
#define JOBRUNNER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define JR_CLIENT_VERSION "0.1.0"

typedef struct jr_client jr_client;    /* opaque; one database connection */

/* Statuses. The numbers are stable. */
enum {
    JR_CLIENT_OK = 0,
    JR_CLIENT_EUSAGE = 1,       /* bad argument: NULL handle, bad URL */
    JR_CLIENT_ECONFIG = 2,      /* the config file could not be used */
    JR_CLIENT_EINPUT = 3,       /* bad job: name, queue, payload, option */
    JR_CLIENT_EDB = 4,          /* the database failed or is unreachable */
    JR_CLIENT_ENOMEM = 7,       /* out of memory */
    JR_CLIENT_ENODB = 8,        /* must_exist and there is no database */
    JR_CLIENT_ENOTFOUND = 9,    /* no job with that id (jr_client_show,
                                   jr_client_wait; no such run-time
                                   schedule) */
    JR_CLIENT_ETIMEOUT = 10,    /* jr_client_wait: the timeout passed */
    JR_CLIENT_ELOST = 11        /* jr_client_wait: the database could not
                                   be read again after a lost connection
                                   (60 s, or until the timeout) */
};

/* Connection settings; NULL or a zeroed struct means the defaults. With a
 * config file, a non-zero field here overrides the file. */
typedef struct jr_client_config {
    const char *schema;         /* PostgreSQL schema; NULL: "jobrunner" */
    double      busy_timeout;   /* SQLite: seconds to wait for the write
                                   lock; 0: 5 */
    size_t      max_payload;    /* bytes a payload may have; 0: 1 MiB */
    int         sync_normal;    /* SQLite: 1 for synchronous = NORMAL (a
                                   push may be lost on power loss); 0 for
                                   FULL, the default */
    int         must_exist;     /* 1 for a reader (stats, dead list): open
                                   an existing database only, creating no
                                   file or schema; JR_CLIENT_ENODB if there
                                   is none */
    const char *key_file;       /* a key file (docs/operations.md,
                                   "Encryption"): payloads and signal
                                   payloads are encrypted with its first
                                   key before the insert (a payload that
                                   is an envelope already is kept when it
                                   opens, else refused with
                                   JR_CLIENT_EINPUT), show and wait
                                   decrypt with any of its keys; refused
                                   at open (JR_CLIENT_ECONFIG) when missing,
                                   open to group or others, or malformed.
                                   NULL: the config file's
                                   encryption.key_file, else none */
} jr_client_config;

/* Per-job options. Start from JR_CLIENT_OPTS_INIT (not from zero: a zero
 * max_retries means "never retry"); NULL means all defaults. The same
 * rules as every producer's (docs/cli.md, "Push rules"): run_at 0 or epoch
 * seconds up to 253402300799 (9999-12-31), run_in finite and at most 100
 * years either way, not both; NaN and infinities are refused with
 * JR_CLIENT_EINPUT. */
typedef struct jr_client_opts {
    double      run_at;         /* epoch seconds it becomes due; 0: not set */
    double      run_in;         /* seconds from now it becomes due; 0: now */
    int         priority;       /* lower runs first; default 0 */
    const char *queue;          /* [A-Za-z0-9_.:-]{1,128}; NULL: "default" */
    int         max_retries;    /* retries after the first failure;
                                   JR_CLIENT_UNSET: the handler's, else the
                                   runner's default */
    const char *key;            /* limit key, 1 to 256 bytes
                                   (docs/limits.md); NULL: none, or the
                                   value at the payload path the runner
                                   declared (a string, or a number by its
                                   value: 1e3 and 1000 are "1000") */
    double      result_ttl;     /* > 0: seconds the job stays completed
                                   after success, with its result or none
                                   (docs/producers.md); 0: the runner's
                                   result_ttl, and only if it returns a
                                   result */
    /* expiry and deadline (docs/queues.md, "Expiry and deadlines"); 0:
     * none. NaN, infinities and negative values are JR_CLIENT_EINPUT. */
    double      expires_at;     /* epoch seconds: a job not started by then
                                   ends in the state "expired" instead */
    double      expires_in;     /* the same, seconds from now (fractions
                                   allowed, at most 100 years); not with
                                   expires_at */
    double      deadline;       /* seconds from its first start: no retry
                                   is scheduled at or past it, the job ends
                                   dead with "deadline passed" */
    const char *traceparent;    /* W3C trace context the job carries
                                   (docs/tracing.md): its run's span is a
                                   child of this one. "00-" 32 hex "-"
                                   16 hex "-" 2 hex, lowercase, ids not
                                   all zero, else JR_CLIENT_EINPUT; NULL:
                                   none */
    const char *tracestate;     /* W3C tracestate, printable ASCII of at
                                   most 512 bytes, only with a
                                   traceparent; NULL: none */
    long        cost;           /* limits by cost (docs/limits.md): the
                                   tokens of a rate and slots of a
                                   concurrency cap it takes, 1 to 1e9; 0:
                                   1 */
} jr_client_opts;

#define JR_CLIENT_UNSET (-1)
#define JR_CLIENT_OPTS_INIT { 0, 0, 0, NULL, JR_CLIENT_UNSET, NULL, 0, 0, 0, 0, \
                              NULL, NULL, 0 }

/* One job of a jr_client_push_many batch. Strings are borrowed. */
typedef struct jr_client_job {
    const char    *name;        /* handler name: [A-Za-z0-9_.:-]{1,128} */
    const char    *payload;     /* JSON text; NULL: {} */
    jr_client_opts opts;
} jr_client_job;

/* Counts of jobs, all names together or for one name. */
typedef struct jr_client_counts {
    long queued;                /* ready + scheduled */
    long ready;                 /* queued and due now */
    long scheduled;             /* queued, due later (run_at, retry backoff) */
    long running;
    long dead;
    long waiting;               /* parents unfinished (docs/workflows.md) */
    long expired;               /* not started by their expiry
                                   (docs/queues.md) */
} jr_client_counts;

/* Called once per job name with its counts, in name order. name is valid
 * during the call only. Return 0 to go on, non-zero to stop. */
typedef int (*jr_client_stats_fn)(const char *name,
                                  const jr_client_counts *counts, void *arg);

/* Opens a handle on target and creates or upgrades the schema if needed.
 * target is a backend URL, "sqlite:PATH" or "postgresql://..." (also
 * "postgres://...", a libpq "host=... dbname=..." string, or a path ending
 * in .db), or a jobrunner config file whose name ends in ".lua" (its
 * backend, schema, busy_timeout and max_payload are used), or NULL for what
 * the jobrunner command uses without options: ./jobrunner.lua if it exists,
 * else sqlite:jobrunner.db. cfg may be NULL.
 * *cp always receives a handle, even on failure (as sqlite3_open does), to
 * read the message from and to close; it is NULL only when out of memory.
 * Returns JR_CLIENT_OK or an error status. */
int jr_client_open(jr_client **cp, const char *target,
                   const jr_client_config *cfg);

/* Queues one job. payload is JSON text (NULL: {}): one JSON value in
 * UTF-8, with no \u0000 and no lone surrogate escape in its strings,
 * numbers PostgreSQL's numeric holds, nested at most 1000 deep, checked before the database on either engine
 * (JR_CLIENT_EINPUT, the message naming the job and the byte). opts may be
 * NULL. id (may be NULL) receives the job's id. The job is committed when
 * this returns OK. */
int jr_client_push(jr_client *c, const char *name, const char *payload,
                   const jr_client_opts *opts, int64_t *id);

/* Queues n jobs in one transaction: all or none. ids (may be NULL) receives
 * n ids in order. n == 0 is a no-op. On PostgreSQL a push the server ends
 * as a deadlock's victim (or a serialization failure) is run again, up to
 * 3 times, unless it ran inside the caller's own transaction. */
int jr_client_push_many(jr_client *c, const jr_client_job *jobs, size_t n,
                        int64_t *ids);

/* ---- unique jobs ---- */

/* A push's unique options (docs/schedules.md, "Unique jobs"). While a
 * job of the same name and key is queued (scheduled included) or running,
 * a push of it inserts nothing and gives back that job's id. */
typedef struct jr_client_unique {
    const char *key;            /* 1 to 255 bytes; NULL: a plain push */
    double      unique_for;     /* seconds the key also stays held after
                                   the push, whatever becomes of the job
                                   (finished, deleted); 0: not held */
    int         on_conflict;    /* JR_CLIENT_KEEP, _REPLACE or
                                   _CANCEL_RUNNING */
} jr_client_unique;

/* jr_client_unique.on_conflict. The numbers are stable. */
enum {
    JR_CLIENT_KEEP = 0,         /* a duplicate is dropped */
    JR_CLIENT_REPLACE = 1,      /* debounce: a queued holder takes the
                                   duplicate's payload and run_at, and the
                                   limit and fair keys they give (a key of
                                   neither: unkeyed); a running one is
                                   never replaced (the push is then a
                                   plain duplicate) */
    JR_CLIENT_CANCEL_RUNNING = 2 /* supersede: as REPLACE, and a running
                                   holder is cancelled (as jr_client_cancel)
                                   and gives up its key: the push is a new
                                   job (docs/queues.md, "Newer replaces
                                   older") */
};

/* What became of a push. The numbers are stable. */
enum {
    JR_CLIENT_PUSHED = 0,       /* a new job */
    JR_CLIENT_DUPLICATE = 1,    /* the key is held: id is the holder's */
    JR_CLIENT_REPLACED = 2,     /* the queued holder took this payload and
                                   run_at: id is the holder's */
    JR_CLIENT_SUPERSEDED = 3    /* a new job, and the running holder was
                                   cancelled (JR_CLIENT_CANCEL_RUNNING) */
};

/* jr_client_push with unique options u (NULL: a plain push). outcome (may
 * be NULL) receives JR_CLIENT_PUSHED, _DUPLICATE or _REPLACED; a
 * duplicate is JR_CLIENT_OK. A key that is empty, over 255 bytes, or a
 * unique_for negative or not finite is JR_CLIENT_EINPUT naming the
 * option. */
int jr_client_push_unique(jr_client *c, const char *name, const char *payload,
                          const jr_client_opts *opts,
                          const jr_client_unique *u, int64_t *id,
                          int *outcome);

/* jr_client_push_many with uniques[0..n) (NULL: all plain) and outcomes
 * (may be NULL) receiving n outcomes. Later jobs of the batch see the
 * earlier ones: two with one key make one job. */
int jr_client_push_many_unique(jr_client *c, const jr_client_job *jobs,
                               const jr_client_unique *uniques, size_t n,
                               int64_t *ids, int *outcomes);

/* ---- workflows (docs/workflows.md) ---- */

/* What a parent ending dead or cancelled does to a job waiting for it.
 * The numbers are stable. */
enum {
    JR_CLIENT_OPF_DEFAULT = 0,  /* cancel */
    JR_CLIENT_OPF_CANCEL = 1,   /* the job is cancelled */
    JR_CLIENT_OPF_RUN = 2,      /* the job runs once every parent ended, and
                                   sees their states in job.parents */
    JR_CLIENT_OPF_DEAD = 3      /* the job is dead */
};

/* A push's workflow options. */
typedef struct jr_client_after {
    const int64_t *after;       /* the job waits for these jobs (at most
                                   1000); it is "waiting", never claimed,
                                   until they all ended; an id that is not a
                                   job's is JR_CLIENT_EINPUT naming it */
    size_t         nafter;
    int            on_parent_failure;   /* JR_CLIENT_OPF_* */
    int64_t        batch;       /* joins this batch (not finished); 0: none */
} jr_client_after;

/* jr_client_push with workflow options a (NULL: a plain push). */
int jr_client_push_after(jr_client *c, const char *name, const char *payload,
                         const jr_client_opts *opts, const jr_client_after *a,
                         int64_t *id);

/* ---- sequences (docs/queues.md, "Sequences") ---- */

/* What a job of a sequence ending dead does to the jobs behind it. The
 * numbers are stable. */
enum {
    JR_CLIENT_SEQ_BLOCK = 0,    /* they wait for an operator's skip or
                                   unblock (the default) */
    JR_CLIENT_SEQ_SKIP = 1,     /* the next runs */
    JR_CLIENT_SEQ_DEAD = 2      /* they end dead too */
};

/* A push's sequence. */
typedef struct jr_client_seq {
    const char *key;            /* the sequence, 1 to 256 bytes: its jobs
                                   run one at a time, in push order */
    int         on_failure;     /* JR_CLIENT_SEQ_* */
    int         on_conflict;    /* JR_CLIENT_KEEP (0: appended), _REPLACE
                                   (the sequence's last job, if it has not
                                   started, takes this payload and run_at,
                                   and id is its) or _CANCEL_RUNNING (the
                                   same, and its running job is cancelled) */
    int        *outcome;        /* may be NULL: receives JR_CLIENT_PUSHED,
                                   _REPLACED or _SUPERSEDED */
} jr_client_seq;

/* jr_client_push into sequence s (NULL or a NULL key: a plain push): the
 * job is "waiting" while the job pushed into the sequence before it has
 * not ended. A key of 0 or over 256 bytes is JR_CLIENT_EINPUT. */
int jr_client_push_seq(jr_client *c, const char *name, const char *payload,
                       const jr_client_opts *opts, const jr_client_seq *s,
                       int64_t *id);

/* jr_client_push_many with seqs[0..n) (NULL, or a NULL key: a plain
 * job), in one transaction: the jobs of one key go into its sequence in
 * the array's order. */
int jr_client_push_many_seq(jr_client *c, const jr_client_job *jobs,
                            const jr_client_seq *seqs, size_t n,
                            int64_t *ids);

/* Calls fn for each sequence with jobs not ended or blocked (only the
 * blocked ones when blocked is 1), by key, at most limit (0: all): key,
 * its head (the first job not ended, or the dead one blocking it), the
 * head's state, its jobs queued, running or waiting, and whether it is
 * blocked. Strings valid during the callback only. Return 0 to go on. */
typedef int (*jr_client_seq_fn)(const char *key, int64_t head,
                                const char *state, long jobs, int blocked,
                                void *arg);
int jr_client_sequences(jr_client *c, int blocked, int limit,
                        jr_client_seq_fn fn, void *arg);

/* Skips the blocked job of sequence key (the next runs), or queues it
 * again in its place with its attempts reset (unblock 1). count (may be
 * NULL) receives how many jobs: 0 when the sequence was not blocked. */
int jr_client_sequence_act(jr_client *c, const char *key, int unblock,
                           long *count);

/* Called once per job of a pushed flow with its ref (local name) and id.
 * Return 0 to go on, non-zero to stop (the flow stays pushed). */
typedef int (*jr_client_flow_fn)(const char *ref, int64_t id, void *arg);

/* Pushes a flow, json (len bytes: docs/workflows.md, "Flows"), in one
 * transaction: all its jobs or none. A cycle, an unknown ref, two jobs
 * with one ref, a flow over 20,000 jobs or a bad job is JR_CLIENT_EINPUT
 * naming the job and the reason, and nothing is pushed. fn (may be NULL)
 * gets each job's id; batch (may be NULL) the flow's batch id, or 0. */
int jr_client_push_flow(jr_client *c, const char *json, size_t len,
                        jr_client_flow_fn fn, void *arg, int64_t *batch);

/* Called for each link of a job (jr_client_links): kind 'p' a parent,
 * 'c' a child, 'b' its batch (state NULL), or for each member 'm' of a
 * batch (jr_client_batch_show); state is the job's ("gone" once its row
 * was deleted). Return 0 to go on, non-zero to stop. */
typedef int (*jr_client_link_fn)(int kind, int64_t id, const char *state,
                                 void *arg);

/* Calls fn for each parent, child and the batch of job id (none: no
 * error). */
int jr_client_links(jr_client *c, int64_t id, jr_client_link_fn fn,
                    void *arg);

/* A batch as jr_client_batch_show gives it. Strings valid during the
 * callback only. */
typedef struct jr_client_batch {
    int64_t     id;
    const char *on_complete;    /* callbacks' names, NULL: none */
    const char *on_success;
    const char *payload;        /* JSON text the callbacks get */
    const char *queue;          /* the callbacks' queue */
    int         results;        /* the callbacks get the results */
    long        total, pending, completed, dead, cancelled;
    double      created_at;
    double      finished_at;    /* 0: members still to end */
    int64_t     complete_job;   /* the callbacks pushed, 0: none */
    int64_t     success_job;
} jr_client_batch;

typedef int (*jr_client_batch_fn)(const jr_client_batch *b, void *arg);

/* Calls bfn with batch id, then mfn for each member ('m'), by id.
 * JR_CLIENT_ENOTFOUND when there is no such batch. */
int jr_client_batch_show(jr_client *c, int64_t id, jr_client_batch_fn bfn,
                         jr_client_link_fn mfn, void *arg);

/* Fills total (may be NULL) with the counts over all names, and calls fn
 * (may be NULL) for each job name that has jobs. */
int jr_client_stats(jr_client *c, jr_client_counts *total,
                     jr_client_stats_fn fn, void *arg);

/* A dead job, as jr_client_dead_list gives it. Strings are valid during
 * the callback only; generation and last_error may be NULL. */
typedef struct jr_client_dead {
    int64_t     id;
    const char *name;
    const char *queue;
    int         attempts;
    const char *last_error;     /* why it died */
    const char *generation;     /* hash of the handler code that ran it */
    double      died_at;        /* epoch seconds */
    double      created_at;     /* epoch seconds */
} jr_client_dead;

/* Called once per dead job. Return 0 to go on, non-zero to stop. */
typedef int (*jr_client_dead_fn)(const jr_client_dead *job, void *arg);

/* Calls fn for up to limit dead jobs (0: all of them), newest death
 * first. */
int jr_client_dead_list(jr_client *c, int limit, jr_client_dead_fn fn,
                        void *arg);

/* Queues dead jobs ids[0..n) again with their attempts reset; ids NULL
 * means every dead job. A job of a sequence that the sequence went on
 * past goes to its end, behind the job holding it, as a push does
 * (docs/queues.md, "Sequences"). count (may be NULL) receives how many
 * were requeued: fewer than n when some ids are not dead jobs. */
int jr_client_dead_retry(jr_client *c, const int64_t *ids, size_t n,
                         long *count);

/* Deletes dead jobs that died more than older_than seconds ago (0: all).
 * count (may be NULL) receives how many. */
int jr_client_dead_purge(jr_client *c, double older_than, long *count);

/* ---- control: cancel, pause, inspect ---- */

/* What jr_client_cancel did to each job. The numbers are stable. */
enum {
    JR_CLIENT_CANCELLED = 1,        /* was queued or scheduled: it will
                                       never run */
    JR_CLIENT_CANCEL_REQUESTED = 2, /* is running: the runner holding it
                                       stops it and records it cancelled
                                       (unless it finished first) */
    JR_CLIENT_CANCEL_FINISHED = 3,  /* already completed, dead or cancelled:
                                       nothing changed */
    JR_CLIENT_CANCEL_NOTFOUND = 4   /* no job with that id */
};

/* Cancels jobs ids[0..n) in one transaction. outcomes (may be NULL) gets
 * one JR_CLIENT_CANCEL* per id. An id that is not a job is not an error:
 * its outcome says so. A cancelled job stays, in state "cancelled", until
 * the runner's retention prunes it. */
int jr_client_cancel(jr_client *c, const int64_t *ids, size_t n,
                     int *outcomes);

/* Runs job id again (docs/handlers.md, "Steps and cursors"): a job
 * completed, dead, cancelled, expired or queued is queued, due now, its attempts
 * counted from 0 again and its attempt history kept; its steps' records
 * from the step named from_step on are cleared (from_step NULL: all of
 * them), so those steps run again and the ones before replay; payload
 * (JSON text; NULL: keep it) replaces its payload. JR_CLIENT_ENOTFOUND
 * when there is no such job; JR_CLIENT_EINPUT for a running or waiting
 * job, a step never recorded, or a bad payload. */
int jr_client_rerun(jr_client *c, int64_t id, const char *from_step,
                    const char *payload);
/* Sends signal name with its JSON payload (NULL: {}) to job id, for the
 * job's jobrunner.wait_signal(name) (docs/handlers.md, "Signals and
 * durable sleep"): a job waiting for it is made ready at once (*woken,
 * which may be NULL, gets 1), else the signal is kept and its wait
 * returns it at once (*woken 0). A signal is delivered once: refused,
 * nothing changed, with JR_CLIENT_EINPUT when the job is finished
 * (completed, dead, cancelled), had this signal already or timed out
 * waiting for it, or name or payload is bad; JR_CLIENT_ENOTFOUND when
 * there is no such job. */
int jr_client_signal(jr_client *c, int64_t id, const char *name,
                     const char *payload, int *woken);

/* Pauses queue: every runner stops claiming its jobs (within about a
 * second); running ones finish. Persistent in the database; pausing a
 * queue no job has used yet creates it paused. queue must be a valid
 * queue name ([A-Za-z0-9_.:-]{1,128}), else JR_CLIENT_EINPUT. */
int jr_client_queue_pause(jr_client *c, const char *queue);

/* Resumes a paused queue (a queue that is not paused: a no-op). */
int jr_client_queue_resume(jr_client *c, const char *queue);

/* Schedule controls (docs/schedules.md, "Pause, resume, fire now"), for
 * schedule name of the runners' config (any valid name is taken: the
 * library reads no config). A paused schedule does not fire; a resume
 * skips the paused time (its instants never fire, catch_up or not).
 * Pausing a paused schedule, or resuming one not paused, is a no-op. */
int jr_client_schedule_pause(jr_client *c, const char *name);
int jr_client_schedule_resume(jr_client *c, const char *name);

/* Asks the runners to fire schedule name now, through the same path as
 * its timed fires: a runner inserts the fire (schedule, instant) and its
 * job once, within a second or so. The instant is *at (epoch seconds),
 * or with at NULL or *at 0 the database's current second, which *at
 * receives: asks for one instant make one job. JR_CLIENT_EINPUT when the
 * schedule is paused. */
int jr_client_schedule_fire(jr_client *c, const char *name, double *at);

/* Schedules managed at run time (docs/schedules.md, "Schedules managed
 * at run time"), stored in the database beside the config's and followed
 * by every runner within a second or so. def is a JSON object of the
 * config's schedule fields, name aside: cron or every, job (default: the
 * name), payload, queue, priority, max_retries, catch_up, tz, overlap
 * ("skip", "allow", "cancel_previous"), jitter, start_at, end_at; it is
 * checked as the config's are (JR_CLIENT_EINPUT naming the field). The
 * library reads no config: a runner refuses to follow a run-time
 * schedule whose name its config holds (the CLI and the HTTP API refuse
 * it up front). add: JR_CLIENT_EINPUT when name exists. set: the fields
 * of change (a JSON object; null removes a field, cron and every replace
 * each other) change it. set and remove: JR_CLIENT_ENOTFOUND when there
 * is no such run-time schedule. */
int jr_client_schedule_add(jr_client *c, const char *name, const char *def);
int jr_client_schedule_set(jr_client *c, const char *name,
                           const char *change);
int jr_client_schedule_remove(jr_client *c, const char *name);
/* Pushes the fires of run-time schedule name at the instants of [from,
 * to] (epoch seconds, to not in the future) that have no fire record:
 * each once, across runners and calls (a second call pushes nothing).
 * *pushed (may be NULL) receives how many. At most 1000 instants a
 * call. */
int jr_client_schedule_backfill(jr_client *c, const char *name, double from,
                                double to, long *pushed);

/* One failed attempt of a job (its attempt history), oldest first. */
#define JR_CLIENT_ATTEMPTS_KEPT 20      /* failed attempts kept per job */
typedef struct jr_client_attempt {
    int         attempt;        /* the job's attempt number then */
    const char *error;          /* its error, cut as last_error; may be
                                   NULL */
    double      at;             /* when it ended, epoch seconds (a lease
                                   lost with its runner: when the loss
                                   was found) */
    double      duration;       /* seconds it ran; NAN: not known */
    const char *runner;         /* the runner (its lease token,
                                   host:pid:random); may be NULL */
    int         worker;         /* that runner's worker id; 0: not known */
    const char *generation;     /* handler code that ran it; may be NULL */
} jr_client_attempt;

/* One job as jr_client_show and jr_client_list give it. Strings are valid
 * during the callback only and may be NULL where said; times are epoch
 * seconds, 0 when not set. */
typedef struct jr_client_job_info {
    int64_t     id;
    const char *name;
    const char *queue;
    const char *state;          /* "queued", "running", "dead", "cancelled"
                                   or "completed" */
    const char *payload;        /* JSON text as stored (SQLite: a plain
                                   SQL insert may have put bytes that are
                                   not UTF-8 in it); NULL from
                                   jr_client_list */
    int         attempts;       /* attempts so far, counted at claim */
    int         max_retries;    /* JR_CLIENT_UNSET: not set on the job */
    int         priority;
    double      run_at;         /* when it is (or was) due */
    double      created_at;
    double      started_at;     /* its last claim; 0: never ran */
    double      finished_at;    /* completed, cancelled or dead; else 0 */
    const char *last_error;     /* may be NULL */
    const char *generation;     /* handler code that last ran it; may be
                                   NULL */
    const char *locked_by;      /* the runner holding it; NULL unless
                                   running */
    double      progress_done;  /* NAN until the handler reports progress */
    double      progress_total; /* NAN until reported, or if unknown */
    const char *progress_note;  /* may be NULL */
    int         cancel_requested; /* running, and asked to stop */
    const char *unique_key;     /* its unique key (jr_client_push_unique);
                                   NULL: none, or from jr_client_list */
    const char *limit_key;      /* its limit key; NULL: unkeyed */
    const char *result;         /* what its handler returned, as JSON text
                                   (a completed job kept for it); NULL:
                                   none, or from jr_client_list */
    double      keep_until;     /* a completed job kept for its result is
                                   pruned after this; 0: not set */
    const jr_client_attempt *history; /* jr_client_show: its failed
                                   attempts, oldest first, the newest
                                   JR_CLIENT_ATTEMPTS_KEPT; NULL when
                                   none, and from jr_client_list */
    int         nhistory;
    const char *steps;          /* jr_client_show: its steps' records, a
                                   JSON array of {"name", "value" (a step
                                   that returned) or "cursor" (its last
                                   checkpoint), "at", "secs", "attempt"};
                                   NULL: none, and from jr_client_list */
    const char *wait_on;        /* jr_client_show: the signal a waiting
                                   job waits for (its wait_signal), or
                                   NULL */
    double      wake_at;        /* jr_client_show: the date a waiting job
                                   waits for (a sleep, or its signal's
                                   deadline); 0: none */
    const char *waits;          /* jr_client_show: the records of its
                                   signals and sleeps, JSON text, or NULL
                                   (docs/handlers.md, "Signals and
                                   durable sleep") */
    int         sql_statements; /* the jobrunner.sql statements its
                                   success committed (a completed job
                                   kept); 0: none, and from
                                   jr_client_list */
    double      expires_at;     /* jr_client_show: not started by then, it
                                   ends "expired"; 0: none */
    double      deadline;       /* jr_client_show: seconds from its first
                                   start that bound its retries; 0: none */
    double      deadline_at;    /* jr_client_show: that deadline, set by
                                   its first start; 0: none yet */
    long        cost;           /* jr_client_show: its cost (docs/limits.md,
                                   "Limits by cost"); 0: none (1), and from
                                   jr_client_list */
} jr_client_job_info;

/* Called once per job. Return 0 to go on, non-zero to stop. */
typedef int (*jr_client_job_fn)(const jr_client_job_info *job, void *arg);

/* Calls fn once with every field of job id, payload included.
 * JR_CLIENT_ENOTFOUND, with a message naming the id, if there is none. */
int jr_client_show(jr_client *c, int64_t id, jr_client_job_fn fn,
                   void *arg);

/* Which jobs jr_client_list gives; NULL fields match any. */
typedef struct jr_client_filter {
    const char *state;          /* a state as in jr_client_job_info, or
                                   "ready" (queued, due) or "scheduled"
                                   (queued, due later) */
    const char *name;           /* a job name */
    const char *queue;          /* a queue name */
    int         limit;          /* at most this many; 0: all */
} jr_client_filter;

/* Calls fn for the jobs filter matches (NULL: every job), newest (highest
 * id) first, without their payload. JR_CLIENT_EINPUT for an unknown state
 * or an invalid name. */
int jr_client_list(jr_client *c, const jr_client_filter *filter,
                   jr_client_job_fn fn, void *arg);

/* One queue as jr_client_queue_list gives it. name is valid during the
 * callback only. */
typedef struct jr_client_queue {
    const char *name;
    int         paused;
    double      paused_at;      /* epoch seconds; 0 when not paused */
    long        ready;          /* queued and due now */
    long        scheduled;      /* queued, due later */
    long        running;
    long        dead;
    long        cancelled;
    long        completed;      /* kept by the runner's retention */
} jr_client_queue;

/* Called once per queue. Return 0 to go on, non-zero to stop. */
typedef int (*jr_client_queue_fn)(const jr_client_queue *queue, void *arg);

/* Calls fn for every queue that was ever paused, resumed or given a job,
 * in name order. */
int jr_client_queue_list(jr_client *c, jr_client_queue_fn fn, void *arg);

/* Where a job stands, as jr_client_wait gives it. Strings are valid until
 * the next call on c. */
typedef struct jr_client_outcome {
    int64_t     id;
    const char *state;          /* ended: "completed", "dead", "cancelled",
                                   or "gone": no row has the id, though it
                                   was given out, so the outcome is not
                                   known (a plain success deleted before
                                   the wait began, a job pruned by
                                   retention or purged, on PostgreSQL a
                                   push rolled back; one whose success a
                                   child or its batch recorded is
                                   "completed"); not ended: "queued",
                                   "running" (or another state);
                                   "unknown": never read (a failure
                                   before the first read) */
    const char *result;         /* what its handler returned, as JSON text;
                                   NULL: nothing */
    const char *error;          /* dead or cancelled: why; else NULL (a
                                   job that failed before it completed
                                   too) */
} jr_client_outcome;

/* Waits until every job of ids[0..n) (n at most 100,000) has ended
 * (completed, dead, cancelled or gone), at most timeout seconds (<= 0: no
 * limit), and fills out[0..n) (n slots) with each one's outcome. The wait
 * marks the jobs that have not ended so that a success keeps them, with
 * their result, for the config's result_ttl: a job seen before it ended
 * is never gone unless it was purged or pruned. It never polls the
 * database in a loop: PostgreSQL LISTENs on "<schema>_finished", SQLite
 * watches its WAL file (docs/producers.md, "Results and waiting"). A
 * connection lost meanwhile (a server restart, idle_session_timeout,
 * pg_terminate_backend) is opened again, at once and then each second,
 * and the jobs read again for the ends it missed. Returns JR_CLIENT_OK
 * when all ended, JR_CLIENT_ETIMEOUT when some had not (out says where
 * each stands), JR_CLIENT_ENOTFOUND naming an id never given (above every
 * id given out), JR_CLIENT_ELOST when the database could not be read
 * again for 60 s after a loss, or until the timeout (out says where each
 * stood before). */
int jr_client_wait(jr_client *c, const int64_t *ids, size_t n,
                   double timeout, jr_client_outcome *out);

/* A job's logs (docs/handlers.md, "Each attempt's logs"): *json gets a
 * JSON array of its runs, oldest first, each {"attempt", "at", "lines":
 * [{"at", "level", "msg"}, ...], "dropped_lines", "dropped_bytes"}, only
 * those of attempt when it is above 0 ("[]" for none): a new string,
 * free with free(). Returns JR_CLIENT_OK, or JR_CLIENT_ENOTFOUND when no
 * job has id (finished jobs go as retention says, their logs with them). */
int jr_client_logs(jr_client *c, int64_t id, int attempt, char **json);

/* The status of the last call on c (JR_CLIENT_OK after a success). */
int jr_client_errcode(const jr_client *c);

/* The message of the last failed call on c ("" after a success; "out of
 * memory" when c is NULL). Valid until the next call on c. */
const char *jr_client_errmsg(const jr_client *c);

/* Closes the connection and frees c. NULL is a no-op. */
void jr_client_close(jr_client *c);

/* jr_client_push_flow with a W3C trace context (docs/tracing.md):
 * traceparent (NULL: none) and tracestate (may be NULL) given to each
 * job of the flow that has no "traceparent" of its own. A malformed one
 * is JR_CLIENT_EINPUT and nothing is pushed. */
int jr_client_push_flow_trace(jr_client *c, const char *json, size_t len,
                              const char *traceparent,
                              const char *tracestate,
                              jr_client_flow_fn fn, void *arg,
                              int64_t *batch);

#ifdef __cplusplus
}
#endif

#endif
