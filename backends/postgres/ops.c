/* ops.c - jr_postgres_ops, the one symbol this folder exports, and the
 * durable wrappers of the ops someone is told succeeded (they commit with
 * synchronous_commit on). Uses every file of the folder through pg_int.h. */

#include <stdint.h>

#include "postgres/pg_int.h"

/* On a connection with async_commit (the runner's), the ops below commit
 * with synchronous_commit = on: a cancel, pause, resume, dead retry or
 * delete answered over HTTP, and a schedule's fire (it is recorded once,
 * never again), must survive a crash of the server as the same from the
 * command line do. Claims and results stay asynchronous. set_durable
 * switches the session's setting around the op (a reconnect in between
 * comes back with session_setup's); each op commits on its own. */
static void
set_durable(jr_backend *b, int on)
{
    if (b->async_commit && PQstatus(b->conn) == CONNECTION_OK)
        PQclear(PQexec(b->conn, on ? "SET synchronous_commit = on" :
                       "SET synchronous_commit = off"));
}

static int
durable_cancel(jr_backend *b, const int64_t *ids, int n, int *outcome,
               jr_err *err)
{
    int rc;

    if (n > 0 && jr_pg_ready(b, err) < 0)
        return -1;
    set_durable(b, 1);
    rc = jr_pg_cancel(b, ids, n, outcome, err);
    set_durable(b, 0);
    return rc;
}

static int
durable_rerun(jr_backend *b, int64_t id, const char *from_step,
              const char *payload, jr_err *err)
{
    int rc;

    if (jr_pg_ready(b, err) < 0)
        return -1;
    set_durable(b, 1);
    rc = jr_pg_rerun(b, id, from_step, payload, err);
    set_durable(b, 0);
    return rc;
}

/* Runs op (pause, resume, the dead ones' retry, delete and purge, fire)
 * durably; which picks it, the arguments follow. */
enum { D_PAUSE, D_RESUME, D_RETRY, D_DELETE, D_PURGE, D_FIRE };

static int
durable(jr_backend *b, int which, const char *queue, const int64_t *ids,
        int n, double age, jr_fire *f, int keep, jr_err *err)
{
    int rc = -1;

    if (jr_pg_ready(b, err) < 0)
        return -1;
    set_durable(b, 1);
    switch (which) {
    case D_PAUSE:  rc = jr_pg_pause(b, queue, err); break;
    case D_RESUME: rc = jr_pg_resume(b, queue, err); break;
    case D_RETRY:  rc = jr_pg_dead_retry(b, ids, n, err); break;
    case D_DELETE: rc = jr_pg_dead_delete(b, ids, n, err); break;
    case D_PURGE:  rc = jr_pg_dead_purge(b, age, err); break;
    case D_FIRE:   rc = jr_pg_fire(b, f, n, keep, err); break;
    }
    set_durable(b, 0);
    return rc;
}

static int
durable_pause(jr_backend *b, const char *queue, jr_err *err)
{
    return durable(b, D_PAUSE, queue, NULL, 0, 0, NULL, 0, err);
}

static int
durable_resume(jr_backend *b, const char *queue, jr_err *err)
{
    return durable(b, D_RESUME, queue, NULL, 0, 0, NULL, 0, err);
}

static int
durable_dead_retry(jr_backend *b, const int64_t *ids, int n, jr_err *err)
{
    return durable(b, D_RETRY, NULL, ids, n, 0, NULL, 0, err);
}

static int
durable_dead_delete(jr_backend *b, const int64_t *ids, int n, jr_err *err)
{
    return durable(b, D_DELETE, NULL, ids, n, 0, NULL, 0, err);
}

static int
durable_dead_purge(jr_backend *b, double older_than, jr_err *err)
{
    return durable(b, D_PURGE, NULL, NULL, 0, older_than, NULL, 0, err);
}

static int
durable_fire(jr_backend *b, jr_fire *f, int n, int keep, jr_err *err)
{
    return durable(b, D_FIRE, NULL, NULL, n, 0, f, keep, err);
}

/* A push on the runner's connection (POST /api/jobs, /api/flows) commits
 * with synchronous_commit = on before it is acknowledged; producers'
 * connections are not async_commit: nothing changes for them. */
static int
durable_push(jr_backend *b, const jr_push *p, int n, int64_t *ids,
             jr_err *err)
{
    int rc;

    if (!b->async_commit)
        return jr_pg_push(b, p, n, ids, err);
    if (n > 0 && jr_pg_ready(b, err) < 0)
        return -1;
    set_durable(b, 1);
    rc = jr_pg_push(b, p, n, ids, err);
    set_durable(b, 0);
    return rc;
}

/* A schedule control answered over HTTP: as durable as the others. */
static int
durable_sched_ctl(jr_backend *b, const char *name, int what, double *at,
                  jr_err *err)
{
    int rc;

    if (jr_pg_ready(b, err) < 0)
        return -1;
    set_durable(b, 1);
    rc = jr_pg_sched_ctl(b, name, what, at, err);
    set_durable(b, 0);
    return rc;
}

/* A run-time schedule's change: as durable as a control's. */
static int
durable_sched_def_put(jr_backend *b, const char *name, const char *def,
                      const char *old, jr_err *err)
{
    int rc;

    if (jr_pg_ready(b, err) < 0)
        return -1;
    set_durable(b, 1);
    rc = jr_pg_sched_def_put(b, name, def, old, err);
    set_durable(b, 0);
    return rc;
}

/* A signal answered over HTTP: as durable as the others. */
static int
durable_signal(jr_backend *b, int64_t id, const char *name,
               const char *payload, char *state, size_t size, jr_err *err)
{
    int rc;

    if (jr_pg_ready(b, err) < 0)
        return -1;
    set_durable(b, 1);
    rc = jr_pg_signal(b, id, name, payload, state, size, err);
    set_durable(b, 0);
    return rc;
}

/* A sequence's skip or unblock answered over HTTP: as durable as the
 * others. */
static int
durable_seq_act(jr_backend *b, const char *key, int what, jr_err *err)
{
    int rc;

    if (jr_pg_ready(b, err) < 0)
        return -1;
    set_durable(b, 1);
    rc = jr_pg_seq_act(b, key, what, err);
    set_durable(b, 0);
    return rc;
}

/* A server many runners share; two claim rounds in flight (the lane);
 * its cycles are longer, so a runner holds more; the ends' fd wakes on
 * the jobs' ends only (LISTEN). */
const jr_backend_ops jr_postgres_ops = {
    .name = "postgres",
    .caps = {.remote = 1, .rounds = 2, .held = 480,
             .wakes_every_commit = 0},
    .open = jr_pg_open,
    .migrate = jr_pg_migrate,
    .push = durable_push,
    .claim = jr_pg_claim,
    .complete = jr_pg_complete,
    .complete_claim = jr_pg_complete_claim,
    .renew = jr_pg_renew,
    .rescue = jr_pg_rescue,
    .stats = jr_pg_stats,
    .dead_list = jr_pg_dead_list,
    .dead_retry = durable_dead_retry,
    .dead_purge = durable_dead_purge,
    .prune = jr_pg_prune,
    .queue_prune = jr_pg_queue_prune,
    .cancel = durable_cancel,
    .rerun = durable_rerun,
    .cancelled = jr_pg_cancelled,
    .pause = durable_pause,
    .resume = durable_resume,
    .queue_list = jr_pg_queue_list,
    .paused = jr_pg_paused,
    .ready_by_queue = jr_pg_ready_by_queue,
    .show = jr_pg_show,
    .list = jr_pg_list,
    .wake_fd = jr_pg_wake_fd,
    .changed = jr_pg_changed,
    .outcomes = jr_pg_outcomes,
    .finished_fd = jr_pg_finished_fd,
    .finished = jr_pg_finished,
    .close = jr_pg_close,
    .fire = durable_fire,
    .last_fires = jr_pg_last_fires,
    .dead_delete = durable_dead_delete,
    .limit_paths = jr_pg_limit_paths,
    .limit_use = jr_pg_limit_use,
    .vacuum = jr_pg_vacuum,
    .reconnects = jr_pg_reconnects,
    .links = jr_pg_links,
    .batch_show = jr_pg_batch_show,
    .sched_ctl = durable_sched_ctl,
    .sched_states = jr_pg_sched_states,
    .signal = durable_signal,
    .wake = jr_pg_wake,
    .wait_counts = jr_pg_wait_counts,
    .sequences = jr_pg_sequences,             /* sequence.c */
    .seq_act = durable_seq_act,               /* sequence.c */
    .fair_set = jr_pg_fair_set,               /* fairset.c */
    .interrupt = jr_pg_interrupt,
    .sched_def_put = durable_sched_def_put,   /* scheddef.c */
    .sched_defs = jr_pg_sched_defs,           /* scheddef.c */
    .job_logs = jr_pg_job_logs,
    .crypt_scan = jr_pg_crypt_scan,           /* crypt.c */
    .crypt_put = jr_pg_crypt_put,             /* crypt.c */
    .fair_use = jr_pg_fair_use,               /* fairset.c */
    .cost_over = jr_pg_cost_over,             /* limituse.c */
    .aging_use = jr_pg_aging_use,             /* agestats.c */
    .sequence_paths = jr_pg_sequence_paths,   /* seqpath.c */
    .fair_names = jr_pg_fair_names,           /* fairname.c */
    .fair_name_set = jr_pg_fair_name_set,     /* fairname.c */
    .fair_name_list = jr_pg_fair_name_list,   /* fairname.c */
    .fair_name_use = jr_pg_fair_name_use,     /* fairname.c */
    .vacuum_due = jr_pg_vacuum_due,           /* prune.c */
};
