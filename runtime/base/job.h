/* job.h - the job model every layer shares: a claimed job (jr_job), a job
 * to insert (jr_push), a schedule's fire of one (jr_fire), what became of
 * a claimed job (jr_result and its kinds), a loaded handler's options
 * (jr_handler), the checks every push passes and the order jobs are
 * claimed in (the retry rule is retry.h's).
 * Storage (backend.h), frames, workers and the master all speak these.
 * Uses err.h. */
#ifndef JR_JOB_H
#define JR_JOB_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

/* A job as a runner receives it. Visible: the master queues these and the
 * frame codec reads them. Header and strings share one allocation
 * (jr_job_new), freed with free(). */
typedef struct jr_job {
    int64_t     id;
    int         attempt;        /* attempts so far, this one included */
    int         max_retries;    /* -1: not set on the job */
    int         priority;       /* lower runs first */
    double      run_at;         /* epoch seconds it became due */
    double      created_at;     /* epoch seconds */
    const char *name;
    const char *queue;
    const char *payload;        /* JSON text, NUL-terminated */
    size_t      payload_len;
    const char *parents;        /* JSON text: parent id -> { state, result }
                                   (job.parents), or NULL: no parents */
    int64_t     batch;          /* its batch, 0: none */
    const char *steps;          /* JSON text: the records of its steps
                                   (docs/handlers.md, "Steps and cursors"),
                                   or NULL: none */
    int         flow;           /* the master's: it has children or a
                                   batch (its end may make jobs ready) */
    const char *waits;          /* JSON text: its signals and sleeps
                                   (jobs.waits), or NULL: none */
    const char *trace;          /* its producer's trace context
                                   (jobs.trace, trace.h's stored form), or
                                   NULL: none */
    const char *key;            /* its limit key (jobs.limit_key), or NULL:
                                   none (its span's attribute) */
    double      fair_weight;    /* of a fair queue: its key's weight when
                                   it was claimed (the master deals its
                                   local queue by it); 0: not fair */
    uint64_t    fair_hash;      /* the master's: its fair key hashed, 0 not
                                   yet (master/fairq.c; SQLite's claim
                                   gives it from the stored key) */
    int         deletable;      /* the master's word at dispatch: its
                                   success is deleted at its end unless a
                                   wait marks it meanwhile (no retention,
                                   no flow bit): a plain handler's lines
                                   may wait in the worker (jrloglazy.c) */
} jr_job;

/* What a parent ending dead or cancelled does to a job waiting for it
 * (jr_push.on_parent_failure; docs/workflows.md). */
enum {
    JR_OPF_DEFAULT = 0,         /* the config's on_parent_failure, else
                                   cancel */
    JR_OPF_CANCEL,              /* the job is cancelled */
    JR_OPF_RUN,                 /* the job runs once all parents ended, and
                                   sees their states in job.parents */
    JR_OPF_DEAD                 /* the job is dead */
};

#define JR_AFTER_MAX 1000       /* parents of one job */

/* What a job of a sequence ending dead does to the jobs behind it in its
 * sequence (jr_push.seq_fail; docs/queues.md, "Sequences"). */
enum {
    JR_SEQ_BLOCK = 0,           /* the sequence waits for an operator's
                                   skip or unblock (the default) */
    JR_SEQ_SKIP,                /* the next job runs */
    JR_SEQ_DEAD                 /* the rest of the sequence ends dead */
};

#define JR_SEQ_KEY_MAX 256      /* bytes of a sequence key */

/* A batch a push call makes (jr_push.batch_new): the jobs of the call
 * that point to it are its members. Strings borrowed. */
typedef struct jr_batch_spec {
    const char *on_complete;    /* job name pushed once every member ended,
                                   or NULL */
    const char *on_success;     /* job name pushed once every member
                                   completed, or NULL; never when one ended
                                   dead or cancelled */
    const char *payload;        /* JSON text given to the callbacks, under
                                   "payload"; NULL: {} */
    const char *queue;          /* the callbacks' queue; NULL: default */
    int         results;        /* the callbacks get the members' results */
    int64_t     id;             /* out: the batch's id */
} jr_batch_spec;

/* A job to insert. Strings are borrowed. */
typedef struct jr_push {
    const char *name;
    const char *payload;        /* JSON text; NULL means "{}" */
    const char *queue;          /* NULL means "default" */
    int         priority;       /* 0 by default; lower runs first */
    int         max_retries;    /* -1: take the handler's or the default */
    double      run_at;         /* epoch seconds; 0: use run_in */
    double      run_in;         /* seconds from the database's now */
    /* unique jobs (docs/schedules.md, "Unique jobs"): zero means a
     * plain push */
    const char *unique_key;     /* NULL: not unique; else while a job of
                                   this name and key is queued or running,
                                   a push of it is a duplicate */
    double      unique_for;     /* seconds the key also stays held after
                                   the push, whatever the job's state */
    int         on_conflict;    /* JR_CONFLICT_KEEP or _REPLACE */
    int        *outcome;        /* may be NULL; receives JR_PUSH_NEW,
                                   _DUPLICATE or _REPLACED */
    const char *key;            /* limit key (limitcfg.h); NULL: none */
    double      result_ttl;     /* > 0: seconds the job stays completed
                                   after success, result or not; 0: the
                                   runner's result_ttl, and only when it
                                   returns a result */
    /* workflows (docs/workflows.md): zero means none */
    const int64_t *after;       /* the job waits for these jobs (parents) */
    int            nafter;
    const int     *after_local; /* parents among the same push call: the
                                   indexes of earlier jobs of its array */
    int            nafter_local;
    int            on_parent_failure;   /* JR_OPF_* */
    int64_t        batch;       /* joins this existing, unfinished batch */
    jr_batch_spec *batch_new;   /* joins the batch this call makes (the
                                   first job pointing to it makes it) */
    /* sequences (docs/queues.md): NULL means none */
    const char    *sequence;    /* runs after the sequence's jobs pushed
                                   before it ended, one at a time */
    int            seq_fail;    /* JR_SEQ_*: what its death does to the
                                   jobs behind it */
    /* expiry and deadline (docs/queues.md, "Expiry and deadlines"):
     * zero means none */
    double         expires_at;  /* epoch seconds: not started by then, the
                                   job ends expired instead */
    double         expires_in;  /* the same, seconds from the database's
                                   now; not with expires_at */
    double         deadline;    /* seconds from its first start: no retry
                                   due later; it ends dead, 'deadline
                                   passed' */
    /* trace context (docs/tracing.md): NULL means none */
    const char    *traceparent; /* W3C traceparent, checked (trace.h) */
    const char    *tracestate;  /* W3C tracestate, only with a traceparent */
    /* limits by cost (docs/limits.md): 0 or 1 means 1, and nothing is
     * stored */
    long           cost;        /* tokens of a rate and slots of a
                                   concurrency cap the job takes, 1 to
                                   JR_COST_MAX */
} jr_push;

/* Whether push p has an expiry or a deadline (a plain push has none). */
#define JR_PUSH_EXPIRY(p) \
    ((p)->expires_at > 0 || (p)->expires_in > 0 || (p)->deadline > 0)

#define JR_COST_MAX 1000000000L /* a job's cost at most */

/* One fire of a recurring job (a schedule): the job it inserts and the
 * instant it stands for. The fire takes the job's run_at. */
typedef struct jr_fire {
    const char *schedule;       /* the schedule's name */
    double      at;             /* the fire instant, epoch seconds */
    jr_push     job;            /* strings borrowed */
    int64_t     id;             /* out: the job's id, when inserted */
    int         inserted;       /* out: 1 inserted here, 0 not (another
                                   runner fired it, or a later fire) */
    int         manual;         /* asked for by hand: once per instant,
                                   even when a later fire is recorded */
    int         overlap;        /* JR_OVERLAP_* (schedules.h): while the
                                   job of the schedule's fire before at has
                                   not ended, allow (0), skip (1: recorded
                                   without a job, inserted -3) or cancel it
                                   (2) and push this one */
    double      delay;          /* the job runs at at + delay (jitter) */
    int         backfill;       /* pushed by a backfill: as manual, and the
                                   fire row is kept when fires are pruned */
} jr_fire;
/* What a duplicate push does (jr_push.on_conflict). */
enum {
    JR_CONFLICT_KEEP = 0,       /* the push is dropped: the id of the job
                                   holding the key comes back */
    JR_CONFLICT_REPLACE,        /* debounce: a queued holder takes the
                                   push's payload and run_at */
    JR_CONFLICT_CANCEL_RUNNING  /* supersede: as replace, and a running
                                   holder is cancelled and gives up its
                                   key (docs/schedules.md) */
};

/* What became of one push (*jr_push.outcome). */
enum {
    JR_PUSH_NEW = 0,            /* inserted */
    JR_PUSH_DUPLICATE,          /* not inserted: the key is held */
    JR_PUSH_REPLACED,           /* not inserted: the queued holder took the
                                   push's payload and run_at */
    JR_PUSH_SUPERSEDED          /* inserted: a running holder was cancelled
                                   (on_conflict cancel_running) */
};

#define JR_UNIQUE_KEY_MAX 255   /* bytes in a unique key */
#define JR_KEY_MAX 256          /* bytes of a limit key */

enum {
    JR_DONE = 1,                /* success: delete, insert pushes */
    JR_RETRY,                   /* failure with retries left: queued later */
    JR_DEAD,                    /* no retries left, or discarded */
    JR_SNOOZE,                  /* queued later, attempt not counted */
    JR_RELEASE,                 /* never started: queued, attempt not counted */
    JR_EXPIRED,                 /* never started because its retries were
                                   used up (the last attempt was lost with
                                   its runner's lease): dead, this claim not
                                   counted, last_error kept unless given */
    JR_CANCELLED,               /* stopped because its cancel was requested:
                                   cancelled, never retried */
    JR_PROGRESS,                /* still running: records done, total, note */
    JR_STEP,                    /* still running: records its steps (the
                                   whole list, JSON text in result) */
    JR_WAIT                     /* waits for a signal or a date: waiting,
                                   attempt not counted */
};

/* What became of one claimed job. Strings and pushes are borrowed. */
typedef struct jr_result {
    int64_t        id;
    int            kind;        /* JR_DONE ... JR_PROGRESS */
    double         delay;       /* RETRY, SNOOZE: seconds from now */
    const char    *error;       /* RETRY, DEAD, CANCELLED: the reason */
    const char    *generation;  /* handler generation that ran it, or NULL */
    const jr_push *pushes;      /* DONE: follow-up jobs, inserted atomically */
    int            npushes;
    double         done;        /* PROGRESS: work done so far; STEP: the
                                   records new since its last list */
    double         total;       /* PROGRESS: of this much; NAN: unknown */
    const char    *note;        /* PROGRESS: a short text, or NULL */
    const char    *result;      /* DONE: the handler's return value as JSON
                                   text, or NULL when it returned nothing */
    double         secs;        /* RETRY, DEAD: how long the attempt ran,
                                   seconds (the master's measure; 0: not
                                   known) */
    int            worker;      /* RETRY, DEAD: the master's id of the
                                   worker that ran it (0: not known) */
    int            durable;     /* STEP: > 0, the record's number, whose
                                   commit the worker waits for */
    const char    *wait_on;     /* WAIT: the signal's name, NULL: a sleep */
    double         wake_at;     /* WAIT: epoch seconds of its deadline or
                                   wake; INFINITY: a signal, no timeout */
    int            sleep_n;     /* WAIT: a sleep's number in the attempt */
    /* DONE: the handler's jobrunner.sql statements (sqlstmt.h's
     * encoding), run in the transaction that records the success, in a
     * savepoint of the job's own; nsql 0: none, and no savepoint */
    const char    *sql;
    size_t         sql_len;
    int            nsql;
    int            sql_kind;    /* what the attempt becomes when one of
                                   them fails: JR_RETRY or JR_DEAD (the
                                   master's retry rule) */
    double         sql_delay;   /* JR_RETRY's seconds from now */
    char          *sql_error;   /* JR_SQL_ERR_MAX bytes the backend fills
                                   with the failed statement's message
                                   ("": none failed); NULL when nsql is 0 */
    char          *sql_handler; /* the handler's name, for that message
                                   (the master's, 129 bytes) */
    const char    *logs;        /* a run's end (not PROGRESS, STEP): what
                                   its handler logged, its entry
                                   (joblog.h), appended to jobs.logs as
                                   jr_joblog_json writes it; NULL:
                                   nothing */
    size_t         logs_len;    /* its bytes (an entry holds NULs); 0:
                                   logs is JSON text (jr_joblog_json) */
    int            held;        /* DONE: 1, its lines wait in the worker
                                   (a deletable success, jrloglazy.c); 2,
                                   they come now, asked for by the master
                                   (JR_F_LINES) after its row stayed; 0:
                                   they are in logs */
    unsigned char *lines_wanted;/* held 1: a byte the backend sets to 1
                                   when the success's row stayed (a wait's
                                   mark) and is left running for the
                                   lines; NULL otherwise */
} jr_result;

/* 1 if a result of kind k ends no run: the job runs on (PROGRESS, STEP). */
#define JR_RESULT_RUNS_ON(k) ((k) == JR_PROGRESS || (k) == JR_STEP)

/* How many failed attempts a job keeps (the attempt history: backend.h's
 * jr_attempt_row, docs/operations.md "Attempt history"): the newest. */
#define JR_ATTEMPTS_KEPT 20

/* How many runs' logs a job keeps (jobs.logs, docs/handlers.md "Each
 * attempt's logs"): the newest. */
#define JR_LOGS_KEPT 20

/* The states a job is in, as filters, gauges, the control module and the
 * usage text name them: the one list, in the order every count of them
 * is printed (stats --json, /api/stats, /metrics). Each row is
 * X(ENUM, "name", flags): JR_ST_NAME counts the state per job name too
 * (stats' names, the jobrunner_jobs gauge), not only per queue;
 * JR_ST_SUM is no stored state but the sum of others (no gauge of its
 * own). queued is split in two: ready (due) and scheduled (not yet
 * due); the others are stored as they are named, and the SQL schemas
 * keep their own CHECK lists. Counts per state are arrays indexed by
 * jr_state (jr_stat_row.n, jr_queue_row.n). */
#define JR_ST_NAME 1
#define JR_ST_SUM  2
#define JR_STATES(X)                                                        \
    X(QUEUED, "queued", JR_ST_NAME | JR_ST_SUM)                             \
    X(READY, "ready", JR_ST_NAME)           /* queued and due */            \
    X(SCHEDULED, "scheduled", JR_ST_NAME)   /* queued, due later */         \
    X(RUNNING, "running", JR_ST_NAME)                                       \
    X(DEAD, "dead", JR_ST_NAME)                                             \
    X(CANCELLED, "cancelled", 0)                                            \
    X(COMPLETED, "completed", 0)                                            \
    X(WAITING, "waiting", JR_ST_NAME)       /* parents unfinished */     \
    X(EXPIRED, "expired", JR_ST_NAME)       /* not started by expires_at */

typedef enum jr_state {
#define JR_STATE_ENUM(e, name, flags) JR_STATE_##e,
    JR_STATES(JR_STATE_ENUM)
#undef JR_STATE_ENUM
    JR_NSTATES
} jr_state;

/* State s's JR_ST_* flags, 0 when s is not a state. */
int  jr_state_flags(int s);

/* Sets the sums of counts n[JR_NSTATES] (queued: ready + scheduled)
 * from the stored states' counts. */
void jr_state_sum(long *n);

/* The name of state s ("queued", ...), or "" when s is not a state. */
const char *jr_state_name(int s);

/* The state named name, or -1 when no state has that name. */
int  jr_state_parse(const char *name);

/* Writes every state's name, in order, joined by sep, into buf (size
 * bytes, truncated). Returns buf. */
char *jr_state_list(char *buf, size_t size, const char *sep);

/* The word counters use for a result kind: "succeeded", "failed" (will
 * retry), "dead" (EXPIRED too), "cancelled", "snoozed"; NULL for the kinds
 * that end no run (RELEASE, PROGRESS) and for unknown kinds. */
const char *jr_result_word(int kind);

/* One loaded handler. Visible: the worker reports these to the master. */
typedef struct jr_handler {
    char   *name;               /* job name, "a.b" for scripts/a/b.lua */
    int     max_retries;        /* -1: not set */
    double  timeout;            /* seconds; 0: not set */
    double  backoff;            /* seconds; -1: not set or a function */
    int     inflight;           /* jobs a worker runs at once, each in a
                                   coroutine; 0: not set (the config's) */
    double  avg;                /* a worker's: its mean run time there, s
                                   (0: not run yet) */
    int     durable_steps;      /* a worker's: its steps wait for their
                                   commit unless told otherwise; -1: not
                                   set (the config's) */
    int     keep_output;        /* a worker's: output = "keep", its jobs'
                                   descriptors 1 and 2 kept with their
                                   attempts (wcapture.c) */
    char   *sequence;           /* the payload path ("a.b" of
                                   "payload.a.b") whose value puts a job
                                   of this name pushed without one in a
                                   sequence; NULL: none */
    char   *fair;               /* the payload path ("a.b") of this
                                   name's fair key in a fair queue, over
                                   the queue's (docs/queues.md, "Fair
                                   share"); NULL: the queue's */
    char   *fair_weights;       /* fair's table form: its weights as a
                                   JSON object ("{\"acme\":4}"), its keys
                                   the name's own; NULL: the string form
                                   or none */
    double  fair_default;       /* the table form's default weight (1 to
                                   1000); 0 without the table form */
} jr_handler;

/* Checks a job or queue name: [A-Za-z0-9_.:-]{1,128}. what names the field
 * in the message ("job name", "queue name"). */
int  jr_name_check(const char *name, const char *what, jr_err *err);

/* The same check for a name of len bytes that may hold NUL bytes (a Lua
 * string): a NUL is an invalid character like any other. */
int  jr_name_check_len(const char *name, size_t len, const char *what,
                       jr_err *err);

#define JR_TIME_MAX  253402300799.0     /* 9999-12-31T23:59:59Z */
#define JR_DELAY_MAX 3155760000.0       /* 100 years of seconds */

/* Checks a push before it reaches the database: the one set of rules of
 * every producer (CLI, C library, Lua module, handler pushes) and of the
 * backends themselves. Names and queue as jr_name_check; payload at most
 * max_payload bytes (0: no limit); max_retries -1 (not set) or >= 0;
 * run_at 0 (not set) or epoch seconds up to JR_TIME_MAX; run_in finite,
 * at most JR_DELAY_MAX either way; not both run_at and run_in; a unique
 * key of 1 to JR_UNIQUE_KEY_MAX bytes (jr_unique_key_check), unique_for
 * finite, from 0 to JR_DELAY_MAX, and unique_for or on_conflict only with
 * a key. Returns 0,
 * or -1 with err set (JR_EINPUT) naming the job and the option. */
int  jr_push_check(const jr_push *p, size_t max_payload, jr_err *err);

/* The on_conflict named name ("keep", "replace", "cancel_running"), or
 * -1; the name of JR_CONFLICT_* v; the name of JR_PUSH_* outcome v
 * ("new", "duplicate", "replaced", "superseded"). */
int  jr_conflict_parse(const char *name);
const char *jr_conflict_name(int v);
const char *jr_outcome_name(int v);

/* The refusal of an on_conflict given without a unique key (keep is the
 * value a push holds when none is given: a producer that reads the option
 * itself tells "given" apart and says it this way). Returns -1. */
int  jr_conflict_alone(const char *name, jr_err *err);

/* Checks a unique key of len bytes (a Lua string may hold NUL bytes):
 * not empty, at most JR_UNIQUE_KEY_MAX bytes, no NUL byte. name is the
 * job's, for the message. */
int  jr_unique_key_check(const char *name, const char *key, size_t len,
                         jr_err *err);

/* Returns a new job whose strings are copied into the same allocation, or
 * NULL when out of memory. Free with free(). */
jr_job *jr_job_new(int64_t id, const char *name, const char *queue,
                   const char *payload, size_t payload_len);

/* The same with job.parents' JSON text (may be NULL) in the allocation. */
jr_job *jr_job_new_parents(int64_t id, const char *name, const char *queue,
                           const char *payload, size_t payload_len,
                           const char *parents);
/* The same with the steps' records and the waits' records too (JSON
 * texts, each may be NULL), the trace context and the limit key (may be
 * NULL). */
jr_job *jr_job_new_full(int64_t id, const char *name, const char *queue,
                        const char *payload, size_t payload_len,
                        const char *parents, const char *steps,
                        const char *waits, const char *trace,
                        const char *key);

/* A copy of job o with its steps' records replaced by steps (JSON text,
 * may be NULL), every other field as o's; NULL when out of memory. Free
 * with free(). */
jr_job *jr_job_with_steps(const jr_job *o, const char *steps);

/* Checks a signal before it reaches the database: its name as
 * jr_name_check ("signal name"), its payload (NULL: {}) one JSON value as
 * jr_jsontext_check says, at most max_payload bytes (0: no limit).
 * Returns 0, or -1 with err set (JR_EINPUT). */
int  jr_signal_check(const char *name, const char *payload,
                     size_t max_payload, jr_err *err);

/* The refusal of signal name to job id in state (timed_out: its wait for
 * it timed out; else a job not finished has had it already), the same
 * words on both engines. Returns -1 with err set (JR_EINPUT). */
int  jr_signal_refused(jr_err *err, int64_t id, const char *name,
                       const char *state, int timed_out);

/* The on_parent_failure named name ("cancel", "run", "dead"), or -1. */
int  jr_opf_parse(const char *name);

/* The name of JR_OPF_* v, NULL for JR_OPF_DEFAULT. */
const char *jr_opf_name(int v);

/* The on_failure of a sequence named name ("block", "skip", "dead"), or
 * -1; and the name of JR_SEQ_* v. */
int  jr_seq_fail_parse(const char *name);
const char *jr_seq_fail_name(int v);

/* The order jobs are claimed and run in: priority (lower first), then
 * run_at, then id. A qsort comparator over an array of jr_job pointers. */
int  jr_job_order(const void *a, const void *b);

#endif
