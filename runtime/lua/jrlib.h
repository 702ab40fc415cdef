/* jrlib.h - the handler module, "jobrunner" as handlers see it (the
 * producer module is "jobrunner.client"): push (kept until the job
 * succeeds), snooze, discard, log, null, array, progress, cancelled, and
 * jrsql.c's sql and query. Owns the pushes and statements of the job
 * that runs. Uses job.h for jr_push, luabridge.h for the signal
 * metatable, json.h to encode payloads, luaopts.h to read push options. */
#ifndef JR_JRLIB_H
#define JR_JRLIB_H

#include "base/job.h"
#include "base/joblog.h"
#include "base/util.h"

typedef struct lua_State lua_State;

/* snooze() waits at least this many seconds: snooze() or snooze(0) on a
 * job that snoozes every time must not requeue it in a tight loop. */
#define JR_SNOOZE_MIN 1.0

/* Bytes of a progress note kept (cut at a character boundary). */
#define JR_NOTE_MAX 256

/* What a handler's jobrunner.snooze/discard (or a wait, jrwait.h)
 * raised. */
typedef struct jr_signal {
    int    kind;                /* JR_SNOOZE, JR_DEAD or JR_WAIT */
    double delay;               /* snooze seconds */
    char   reason[512];         /* discard reason */
    char   wait_on[129];        /* WAIT: the signal's name, "": a sleep */
    double wake_at;             /* WAIT: deadline or wake, epoch seconds;
                                   INFINITY: no timeout */
    int    sleep_n;             /* WAIT: the sleep's number */
} jr_signal;

/* The job a worker runs now. Visible: worker/run.c fills and drains it. */
typedef struct jr_jobctx jr_jobctx;
struct jr_jobctx {
    const jr_job *job;          /* NULL between jobs */
    jr_push      *pushes;       /* their strings live in mem[i] */
    char        **mem;          /* mem[i]: pushes[i]'s strings, one
                                   allocation each, owned; freed by
                                   jr_jobctx_clear */
    int           npushes;
    int           cap;          /* slots in pushes and in mem */
    size_t        max_payload;  /* bytes, 0: no limit */
    int           decided;      /* snooze or discard was called */
    jr_signal     decision;     /* the first of them: a pcall can't undo it */
    int           cancelled;    /* its cancel arrived (run.c sets it) */
    int           nsleeps;      /* sleep_until/sleep_for calls so far */
    /* Called by cancelled() before it answers, and by progress() after it
     * stored a value (run.c's: read the master's frames, send the
     * progress if a second passed). arg is hook_arg. */
    void        (*on_cancelled)(void *arg);
    void        (*on_progress)(void *arg);
    void         *hook_arg;
    /* The context of the job whose coroutine L is, or NULL for this one
     * (the worker's, for jobs that run many at once). */
    struct jr_jobctx *(*of_thread)(void *arg, lua_State *L);
    jr_buf        sql;          /* jobrunner.sql's statements, encoded
                                   (sqlstmt.h); reset by jr_jobctx_clear */
    int           nsql;         /* statements in sql */
    int           progress_dirty;   /* a value not sent yet */
    double        progress_done;
    double        progress_total;   /* NAN: unknown */
    int           progress_has_note;
    char          progress_note[JR_NOTE_MAX + 1];
    /* steps (jrsteps.c, docs/handlers.md "Steps and cursors") */
    struct jr_steps *steps;     /* this attempt's, or NULL: no step yet */
    size_t        max_result;   /* bytes of a step's value or cursor */
    int           durable_steps;/* a step waits for its commit unless its
                                   options say durable = false */
    /* Called after a step or a checkpoint changed the job's list
     * (jr_steps_text); seq > 0: a durable step's record, number seq,
     * whose commit the call waits for. Returns what the C function on L
     * returns (a wait may yield). */
    int         (*on_step)(void *arg, lua_State *L, int seq);
    /* 1 when the runner asks its jobs back (a stop, a reload): the next
     * checkpoint hands the job back. NULL: never. */
    int         (*handback)(void *arg);
    int           steps_dirty;  /* the list changed since it was sent */
    double        steps_sent;   /* mono time it was last sent */
    void         *steps_task;   /* a durable step's wait (jr_task), NULL */
    int           steps_wait;   /* and the record it waits for */
    int           steps_told;   /* records counted in the lists sent */
    jr_joblog     log;          /* this run's logs (jrlog.c); cleared by
                                   jr_jobctx_clear */
    /* tracing (docs/tracing.md): the worker's, made at the first job it
     * runs with tracing on and kept; NULL while tracing is off */
    struct jr_jobtrace *trace;
};

/* Installs package.loaded.jobrunner for handlers, bound to ctx (borrowed,
 * must outlive L). Returns 0 or -1 with the Lua error in err. */
int  jr_jrlib_open(lua_State *L, jr_jobctx *ctx, jr_err *err);
/* Frees the pushes of the last job and forgets its decision. */
void jr_jobctx_clear(jr_jobctx *ctx);
/* Clears ctx and frees its arrays (the worker's exit). */
void jr_jobctx_free(jr_jobctx *ctx);
/* Records a decision (JR_SNOOZE, JR_DEAD, JR_RELEASE) in ctx, the first
 * one standing, and unwinds the handler with a jobrunner.signal.
 * [-0, +1, v] */
int  jr_jrlib_raise_kind(lua_State *L, jr_jobctx *ctx, int kind,
                         double delay, const char *reason);
/* Sets sql and query in the module table on top (jrsql.c).
 * [-0, +0, m] */
void jr_jrsql_register(lua_State *L);
/* Sets the database jobrunner.query reads (url: the runner's backend URL;
 * attach, role as the config's, NULL when not set); connects nothing yet.
 * 0, or -1 when out of memory. */
int  jr_jrsql_setup(const char *url, const char *attach, const char *role);
/* Closes jobrunner.query's connection (the worker's exit). */
void jr_jrsql_close(void);
/* Sets span in the module table on top (jrspan.c).  [-0, +0, m] */
void jr_jrspan_register(lua_State *L);
/* Returns the signal at idx, or NULL if the value is not one. */
const jr_signal *jr_jrlib_signal(lua_State *L, int idx);
/* The context of the job running now, or raises "jobrunner.<fn>: called
 * outside a running job". [-0, +0, v] */
jr_jobctx *jr_jrlib_job(lua_State *L, const char *fn);
/* The context of the job running now on L (its coroutine's, for jobs
 * that run many at once), or NULL between jobs. [-0, +0, -] */
jr_jobctx *jr_jrlib_ctx(lua_State *L);
/* The same from ctx, the state's context as jr_jrlib_push_ctx pushed it
 * (kept by a function called often: no registry lookup a call). [-0,
 * +0, -] */
jr_jobctx *jr_jrlib_ctx_of(lua_State *L, jr_jobctx *ctx);
/* Pushes the state's context, a light userdata (nil before
 * jr_jrlib_open). [-0, +1, -] */
void       jr_jrlib_push_ctx(lua_State *L);
/* Sets log in the module table on top and, in L's globals, print,
 * io.write and the write method of io.stdout and io.stderr that keep
 * what a running job writes in its context (jrlog.c). [-0, +0, m] */
void jr_jrlog_register(lua_State *L);
/* The worker's log.attempt_max (bytes kept a run; 0: none kept, the
 * output goes where handler_output says) and log.echo (1: what is kept
 * goes to the runner's log too). Until called: 0 and 1. */
void jr_jrlog_setup(size_t max, int echo);
/* The entry of the run ctx just ended (attempt: the job's), *len bytes,
 * or NULL when it logged nothing: what the worker sends with its result
 * (jr_result's logs), valid until ctx is cleared. */
const char *jr_jrlog_entry(jr_jobctx *ctx, int attempt, size_t *len);
/* Where what is kept is echoed to: out and err while a job's descriptors
 * 1 and 2 are kept (wcapture.c), NULL and NULL for stdout and stderr. */
void jr_jrlog_echo_to(FILE *out, FILE *err);
/* Keeps n bytes written to descriptor 1 (stream JR_JOBLOG_STDOUT) or 2
 * in ctx's run, when log.attempt_max keeps anything; 1 if log.echo says
 * they go to the runner's log as well, else 0. */
int  jr_jrlog_keep(jr_jobctx *ctx, int stream, const char *s, size_t n);
/* Records s (copied) as ctx's decision unless one was taken, and unwinds
 * the handler with it. Does not return. [-0, +1, v] */
int  jr_jrlib_raise(lua_State *L, jr_jobctx *ctx, const jr_signal *s);

#endif
