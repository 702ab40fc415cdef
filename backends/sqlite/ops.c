/* ops.c - the SQLite engine's table of ops, the one symbol the folder
 * exports (jr_sqlite_ops, backend.h's contracts), and the durable
 * wrappers of the actions someone is told succeeded. The ops themselves
 * live in the file of their concern: conn.c (open, close, wake-ups),
 * migrate.c, push.c, claim.c, complete.c and round.c, lease.c, admin.c,
 * inspect.c, fire.c, limits.c. Uses sqlite_int.h. */
#include <string.h>

#include "sqlite/sqlite_int.h"

/* ---- actions that someone is told succeeded: durable ---- */

/* With sync_normal (the runner's connection) a commit survives the
 * runner's crash but not the machine's; the ops below (HTTP actions, a
 * schedule's fire) commit with synchronous = FULL, as the command line's
 * do. Claims and results stay NORMAL. */
static int
set_full(jr_backend *b, int on, jr_err *err)
{
    if (on && jr_sqlite_file_check(b, err) < 0)
        return -1;
    if (b->sync_normal && b->db != NULL)
        sqlite3_exec(b->db, on ? "PRAGMA synchronous = FULL" :
                     "PRAGMA synchronous = NORMAL", NULL, NULL, NULL);
    return 0;
}

enum { D_PAUSE, D_RESUME, D_RETRY, D_DELETE, D_PURGE, D_FIRE, D_CANCEL,
       D_RERUN };

typedef struct dargs {
    const char    *queue;
    const int64_t *ids;
    int            n, keep;
    double         age;
    jr_fire       *f;
    int           *outcome;
    int64_t        id;          /* rerun's */
    const char    *from_step, *payload;
} dargs;

static int
durable(jr_backend *b, int which, const dargs *a, jr_err *err)
{
    int rc = -1;

    if (set_full(b, 1, err) < 0)
        return -1;
    switch (which) {
    case D_PAUSE:  rc = jr_sqlite_pause(b, a->queue, err); break;
    case D_RESUME: rc = jr_sqlite_resume(b, a->queue, err); break;
    case D_RETRY:  rc = jr_sqlite_dead_retry(b, a->ids, a->n, err); break;
    case D_DELETE: rc = jr_sqlite_dead_delete(b, a->ids, a->n, err); break;
    case D_PURGE:  rc = jr_sqlite_dead_purge(b, a->age, err); break;
    case D_FIRE:   rc = jr_sqlite_fire(b, a->f, a->n, a->keep, err); break;
    case D_CANCEL:
        rc = jr_sqlite_cancel(b, a->ids, a->n, a->outcome, err);
        break;
    case D_RERUN:
        rc = jr_sqlite_rerun(b, a->id, a->from_step, a->payload, err);
        break;
    }
    set_full(b, 0, err);
    return rc;
}

static int
durable_rerun(jr_backend *b, int64_t id, const char *from_step,
              const char *payload, jr_err *err)
{
    return durable(b, D_RERUN, &(dargs){.id = id, .from_step = from_step,
                                        .payload = payload}, err);
}

static int
durable_pause(jr_backend *b, const char *queue, jr_err *err)
{
    return durable(b, D_PAUSE, &(dargs){.queue = queue}, err);
}

static int
durable_resume(jr_backend *b, const char *queue, jr_err *err)
{
    return durable(b, D_RESUME, &(dargs){.queue = queue}, err);
}

static int
durable_dead_retry(jr_backend *b, const int64_t *ids, int n, jr_err *err)
{
    return durable(b, D_RETRY, &(dargs){.ids = ids, .n = n}, err);
}

static int
durable_dead_delete(jr_backend *b, const int64_t *ids, int n, jr_err *err)
{
    return durable(b, D_DELETE, &(dargs){.ids = ids, .n = n}, err);
}

static int
durable_dead_purge(jr_backend *b, double older_than, jr_err *err)
{
    return durable(b, D_PURGE, &(dargs){.age = older_than}, err);
}

static int
durable_fire(jr_backend *b, jr_fire *f, int n, int keep, jr_err *err)
{
    return durable(b, D_FIRE, &(dargs){.f = f, .n = n, .keep = keep}, err);
}

static int
durable_cancel(jr_backend *b, const int64_t *ids, int n, int *outcome,
               jr_err *err)
{
    return durable(b, D_CANCEL, &(dargs){.ids = ids, .n = n,
                                         .outcome = outcome}, err);
}

/* A push on the runner's connection (POST /api/jobs, /api/flows): FULL,
 * as the command line's, before it is acknowledged; a producer's own
 * connection keeps its config's synchronous. */
static int
durable_push(jr_backend *b, const jr_push *p, int n, int64_t *ids,
             jr_err *err)
{
    int rc;

    if (!b->durable_push)
        return jr_sqlite_push(b, p, n, ids, err);
    if (set_full(b, 1, err) < 0)
        return -1;
    rc = jr_sqlite_push(b, p, n, ids, err);
    set_full(b, 0, err);
    return rc;
}

/* A schedule control answered over HTTP: as durable as the others. */
static int
durable_sched_ctl(jr_backend *b, const char *name, int what, double *at,
                  jr_err *err)
{
    int rc;

    if (set_full(b, 1, err) < 0)
        return -1;
    rc = jr_sqlite_sched_ctl(b, name, what, at, err);
    set_full(b, 0, err);
    return rc;
}

/* A run-time schedule's change: as durable as a control's. */
static int
durable_sched_def_put(jr_backend *b, const char *name, const char *def,
                      const char *old, jr_err *err)
{
    int rc;

    if (set_full(b, 1, err) < 0)
        return -1;
    rc = jr_sqlite_sched_def_put(b, name, def, old, err);
    set_full(b, 0, err);
    return rc;
}

/* A signal answered over HTTP: as durable as the others. */
static int
durable_signal(jr_backend *b, int64_t id, const char *name,
               const char *payload, char *state, size_t size, jr_err *err)
{
    int rc;

    if (set_full(b, 1, err) < 0)
        return -1;
    rc = jr_sqlite_signal(b, id, name, payload, state, size, err);
    set_full(b, 0, err);
    return rc;
}

/* A sequence's skip or unblock answered over HTTP: as durable as the
 * others. */
static int
durable_seq_act(jr_backend *b, const char *key, int what, jr_err *err)
{
    int rc;

    if (set_full(b, 1, err) < 0)
        return -1;
    rc = jr_sqlite_seq_act(b, key, what, err);
    set_full(b, 0, err);
    return rc;
}

/* The database file: the path, unless empty or ":memory:". */
static const char *
db_file(const char *arg)
{
    return *arg != '\0' && strcmp(arg, ":memory:") != 0 ? arg : NULL;
}

/* Each op with the file that holds it; FULL: through durable(). A file of
 * this machine with one writer: one claim round at a time; every commit
 * writes the WAL, which the ends' fd watches. */
const jr_backend_ops jr_sqlite_ops = {
    .name = "sqlite",
    .caps = {.remote = 0, .rounds = 1, .held = 240,
             .wakes_every_commit = 1},
    .file = db_file,
    .open = jr_sqlite_open,                   /* conn.c */
    .migrate = jr_sqlite_migrate,             /* migrate.c */
    .push = durable_push,                     /* push.c, FULL: runner's */
    .claim = jr_sqlite_claim,                 /* claim.c */
    .complete = jr_sqlite_complete,           /* round.c */
    .complete_claim = jr_sqlite_complete_claim, /* round.c */
    .renew = jr_sqlite_renew,                 /* lease.c */
    .rescue = jr_sqlite_rescue,               /* lease.c */
    .stats = jr_sqlite_stats,                 /* inspect.c */
    .dead_list = jr_sqlite_dead_list,         /* inspect.c */
    .dead_retry = durable_dead_retry,         /* admin.c, FULL */
    .dead_purge = durable_dead_purge,         /* admin.c, FULL */
    .prune = jr_sqlite_prune,                 /* admin.c */
    .queue_prune = jr_sqlite_queue_prune,     /* admin.c */
    .cancel = durable_cancel,                 /* admin.c, FULL */
    .rerun = durable_rerun,                   /* rerun.c, FULL */
    .cancelled = jr_sqlite_cancelled,         /* admin.c */
    .pause = durable_pause,                   /* admin.c, FULL */
    .resume = durable_resume,                 /* admin.c, FULL */
    .queue_list = jr_sqlite_queue_list,       /* inspect.c */
    .paused = jr_sqlite_paused,               /* inspect.c */
    .ready_by_queue = jr_sqlite_ready_by_queue, /* inspect.c */
    .show = jr_sqlite_show,                   /* inspect.c */
    .list = jr_sqlite_list,                   /* inspect.c */
    .wake_fd = jr_sqlite_wake_fd,             /* conn.c */
    .changed = jr_sqlite_changed,             /* conn.c */
    .outcomes = jr_sqlite_outcomes,           /* wait.c */
    .finished_fd = jr_sqlite_finished_fd,     /* wait.c */
    .finished = jr_sqlite_finished,           /* wait.c */
    .close = jr_sqlite_close,                 /* conn.c */
    .fire = durable_fire,                     /* fire.c, FULL */
    .last_fires = jr_sqlite_last_fires,       /* fire.c */
    .dead_delete = durable_dead_delete,       /* admin.c, FULL */
    .limit_paths = jr_sqlite_limit_paths,     /* limits.c */
    .limit_use = jr_sqlite_limit_use,         /* limits.c */
    .reconnects = jr_sqlite_reconnects,       /* conn.c */
    .links = jr_sqlite_links,                 /* flow.c */
    .batch_show = jr_sqlite_batch_show,       /* flow.c */
    .sched_ctl = durable_sched_ctl,           /* fire.c, FULL */
    .sched_states = jr_sqlite_sched_states,   /* fire.c */
    .signal = durable_signal,                 /* signal.c, FULL */
    .wake = jr_sqlite_wake,                   /* signal.c */
    .wait_counts = jr_sqlite_wait_counts,     /* signal.c */
    .sequences = jr_sqlite_sequences,         /* sequence.c */
    .seq_act = durable_seq_act,               /* sequence.c, FULL */
    .fair_set = jr_sqlite_fair_set,           /* fair.c */
    .interrupt = jr_sqlite_interrupt,         /* sqlrun.c */
    .sched_def_put = durable_sched_def_put,   /* scheddef.c, FULL */
    .sched_defs = jr_sqlite_sched_defs,       /* scheddef.c */
    .job_logs = jr_sqlite_job_logs,           /* logs.c */
    .crypt_scan = jr_sqlite_crypt_scan,       /* crypt.c */
    .crypt_put = jr_sqlite_crypt_put,         /* crypt.c */
    .fair_use = jr_sqlite_fair_use,           /* fair.c */
    .cost_over = jr_sqlite_cost_over,         /* limits.c */
    .aging_use = jr_sqlite_aging_use,         /* agestats.c */
    .sequence_paths = jr_sqlite_sequence_paths, /* seqpath.c */
    .fair_names = jr_sqlite_fair_names,       /* fairname.c */
    .fair_name_set = jr_sqlite_fair_name_set, /* fairname.c */
    .fair_name_list = jr_sqlite_fair_name_list, /* fairname.c */
    .fair_name_use = jr_sqlite_fair_name_use, /* fairname.c */
};
