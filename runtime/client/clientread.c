/* clientread.c - the reading calls of libjobrunner (jobrunner.h): counts
 * per queue and state, the dead jobs, a job and a list of jobs, the
 * queues, a job's links and a batch, each row handed to the caller's
 * function as jobrunner.h's struct. Owns nothing: the handle is client.c's.
 * Uses client_int.h, backend.h, keyring.h. */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "base/err.h"
#include "base/keyring.h"
#include "client/client_int.h"
#include "client/jobrunner.h"

typedef struct stats_acc {
    jr_client_counts  *total;
    jr_client_stats_fn fn;
    void              *arg;
    int                stopped;     /* fn asked to stop */
} stats_acc;

static int
stats_row(const jr_stat_row *row, void *arg)
{
    stats_acc *a = arg;
    jr_client_counts n;

    n.queued = row->n[JR_STATE_QUEUED];
    n.ready = row->n[JR_STATE_READY];
    n.scheduled = row->n[JR_STATE_SCHEDULED];
    n.running = row->n[JR_STATE_RUNNING];
    n.dead = row->n[JR_STATE_DEAD];
    n.waiting = row->n[JR_STATE_WAITING];
    a->total->waiting += n.waiting;
    n.expired = row->n[JR_STATE_EXPIRED];
    a->total->expired += n.expired;
    a->total->ready += n.ready;
    a->total->scheduled += n.scheduled;
    a->total->queued += n.queued;
    a->total->running += n.running;
    a->total->dead += n.dead;
    if (a->fn && !a->stopped && a->fn(row->name, &n, a->arg) != 0)
        a->stopped = 1;
    return 0;               /* the totals need every row */
}

int
jr_client_stats(jr_client *c, jr_client_counts *total,
                jr_client_stats_fn fn, void *arg)
{
    jr_client_counts sum;
    stats_acc a;

    if (c == NULL)
        return JR_CLIENT_EUSAGE;
    if (jr_clientint_begin(c) < 0)
        return jr_clientint_finish(c, -1);
    memset(&sum, 0, sizeof sum);
    a.total = &sum;
    a.fn = fn;
    a.arg = arg;
    a.stopped = 0;
    if (c->db.ops->stats(c->db.b, stats_row, &a, &c->err) < 0)
        return jr_clientint_finish(c, -1);
    if (total != NULL)
        *total = sum;
    return jr_clientint_finish(c, 0);
}

typedef struct dead_acc {
    jr_client_dead_fn fn;
    void             *arg;
} dead_acc;

static int
dead_row(const jr_dead_row *row, void *arg)
{
    dead_acc *a = arg;
    jr_client_dead d;

    d.id = row->id;
    d.name = row->name;
    d.queue = row->queue;
    d.attempts = row->attempts;
    d.last_error = row->last_error;
    d.generation = row->generation;
    d.died_at = row->died_at;
    d.created_at = row->created_at;
    return a->fn(&d, a->arg);
}

int
jr_client_dead_list(jr_client *c, int limit, jr_client_dead_fn fn,
                    void *arg)
{
    dead_acc a;

    if (c == NULL)
        return JR_CLIENT_EUSAGE;
    if (jr_clientint_begin(c) < 0)
        return jr_clientint_finish(c, -1);
    if (fn == NULL || limit < 0)
        return jr_clientint_finish(c, jr_fail(&c->err, JR_EUSAGE,
                                              "dead_list: %s", fn ?
                                              "negative limit" :
                                              "fn is NULL"));
    a.fn = fn;
    a.arg = arg;
    return jr_clientint_finish(c, c->db.ops->dead_list(c->db.b, limit,
                                                       dead_row, &a,
                                                       &c->err));
}

typedef struct job_acc {
    jr_client_job_fn fn;
    void            *arg;
    jr_client       *c;
} job_acc;

/* The text s opened with c's keys into *own, or s itself (a value that
 * does not open stays as stored: its envelope). */
static const char *
opened(const jr_client *c, const char *s, char **own)
{
    size_t n;
    jr_err err;

    *own = NULL;
    if (s == NULL || !jr_seal_any(s, strlen(s)) ||
        jr_keyring_open(c->keys, s, strlen(s), own, &n, &err) <= 0)
        return s;
    return *own;
}

static int
job_row(const jr_job_row *row, void *arg)
{
    job_acc *a = arg;
    jr_client_job_info j;
    jr_client_attempt h[JR_ATTEMPTS_KEPT];
    int i;

    for (i = 0; i < row->nhistory && i < JR_ATTEMPTS_KEPT; i++)
        h[i] = (jr_client_attempt){row->history[i].attempt,
            row->history[i].error, row->history[i].at,
            row->history[i].duration, row->history[i].runner,
            row->history[i].worker, row->history[i].generation};
    j.history = i > 0 ? h : NULL;
    j.nhistory = i;

    j.id = row->id;
    j.name = row->name;
    j.queue = row->queue;
    j.state = row->state;
    j.payload = row->payload;
    j.attempts = row->attempts;
    j.max_retries = row->max_retries < 0 ? JR_CLIENT_UNSET :
                    row->max_retries;
    j.priority = row->priority;
    j.run_at = row->run_at;
    j.created_at = row->created_at;
    j.started_at = row->started_at;
    j.finished_at = row->finished_at;
    j.last_error = row->last_error;
    j.generation = row->generation;
    j.locked_by = row->locked_by;
    j.progress_done = row->progress_done;
    j.progress_total = row->progress_total;
    j.progress_note = row->progress_note;
    j.cancel_requested = row->cancel_requested;
    j.unique_key = row->unique_key;
    j.limit_key = row->limit_key;
    j.result = row->result;
    j.keep_until = row->keep_until;
    j.steps = row->steps;
    j.wait_on = row->wait_on;
    j.wake_at = row->wake_at;
    j.waits = row->waits;
    j.sql_statements = row->sql_statements;
    j.expires_at = row->expires_at;
    j.deadline = row->deadline;
    j.deadline_at = row->deadline_at;
    j.cost = row->cost;
    if (a->c != NULL && a->c->keys != NULL) {
        char *own[4];
        int rc;

        j.payload = opened(a->c, j.payload, &own[0]);
        j.result = opened(a->c, j.result, &own[1]);
        j.steps = opened(a->c, j.steps, &own[2]);
        j.waits = opened(a->c, j.waits, &own[3]);
        rc = a->fn(&j, a->arg);
        for (i = 0; i < 4; i++)
            free(own[i]);
        return rc;
    }
    return a->fn(&j, a->arg);
}

int
jr_client_show(jr_client *c, int64_t id, jr_client_job_fn fn, void *arg)
{
    job_acc a = {fn, arg, c};

    if (c == NULL)
        return JR_CLIENT_EUSAGE;
    if (jr_clientint_begin(c) < 0)
        return jr_clientint_finish(c, -1);
    if (fn == NULL)
        return jr_clientint_finish(c, jr_fail(&c->err, JR_EUSAGE,
                                              "show: fn is NULL"));
    if (c->db.ops->show(c->db.b, id, job_row, &a, &c->err) < 0) {
        if (c->err.code == JR_ENOTFOUND)
            c->err.code = E_NOJOB;
        return jr_clientint_finish(c, -1);
    }
    return jr_clientint_finish(c, 0);
}

int
jr_client_list(jr_client *c, const jr_client_filter *filter,
               jr_client_job_fn fn, void *arg)
{
    jr_list_filter f = {0};
    job_acc a = {fn, arg, c};

    if (c == NULL)
        return JR_CLIENT_EUSAGE;
    if (jr_clientint_begin(c) < 0)
        return jr_clientint_finish(c, -1);
    if (fn == NULL)
        return jr_clientint_finish(c, jr_fail(&c->err, JR_EUSAGE,
                                              "list: fn is NULL"));
    if (filter != NULL) {
        f.state = filter->state;
        f.name = filter->name;
        f.queue = filter->queue;
        f.limit = filter->limit;
    }
    return jr_clientint_finish(c, c->db.ops->list(c->db.b, &f, job_row, &a,
                                                  &c->err));
}

typedef struct queue_acc {
    jr_client_queue_fn fn;
    void              *arg;
} queue_acc;

static int
queue_row(const jr_queue_row *row, void *arg)
{
    queue_acc *a = arg;
    jr_client_queue q;

    q.name = row->name;
    q.paused = row->paused;
    q.paused_at = row->paused_at;
    q.ready = row->n[JR_STATE_READY];
    q.scheduled = row->n[JR_STATE_SCHEDULED];
    q.running = row->n[JR_STATE_RUNNING];
    q.dead = row->n[JR_STATE_DEAD];
    q.cancelled = row->n[JR_STATE_CANCELLED];
    q.completed = row->n[JR_STATE_COMPLETED];
    return a->fn(&q, a->arg);
}

int
jr_client_queue_list(jr_client *c, jr_client_queue_fn fn, void *arg)
{
    queue_acc a = {fn, arg};

    if (c == NULL)
        return JR_CLIENT_EUSAGE;
    if (jr_clientint_begin(c) < 0)
        return jr_clientint_finish(c, -1);
    if (fn == NULL)
        return jr_clientint_finish(c, jr_fail(&c->err, JR_EUSAGE,
                                              "queue_list: fn is NULL"));
    return jr_clientint_finish(c, c->db.ops->queue_list(c->db.b, queue_row,
                                                        &a, &c->err));
}

/* The backend's links callback to the public one: the same arguments. */
int
jr_client_links(jr_client *c, int64_t id, jr_client_link_fn fn, void *arg)
{
    if (c == NULL || fn == NULL)
        return JR_CLIENT_EUSAGE;
    if (jr_clientint_begin(c) < 0)
        return jr_clientint_finish(c, -1);
    return jr_clientint_finish(c, c->db.ops->links(c->db.b, id, fn, arg,
                                                   &c->err));
}

typedef struct batch_call {
    jr_client_batch_fn bfn;
    jr_client_link_fn  mfn;
    void *arg;
} batch_call;

static int
member_out(int kind, int64_t id, const char *state, void *arg)
{
    batch_call *bc = arg;

    return bc->mfn(kind, id, state, bc->arg);
}

static int
batch_row_out(const jr_batch_row *r, void *arg)
{
    batch_call *bc = arg;
    jr_client_batch o = {r->id, r->on_complete, r->on_success, r->payload,
                         r->queue, r->results, r->total, r->pending,
                         r->completed, r->dead, r->cancelled, r->created_at,
                         r->finished_at, r->complete_job, r->success_job};

    return bc->bfn(&o, bc->arg);
}

int
jr_client_batch_show(jr_client *c, int64_t id, jr_client_batch_fn bfn,
                     jr_client_link_fn mfn, void *arg)
{
    batch_call bc = {bfn, mfn, arg};
    int rc;

    if (c == NULL || bfn == NULL || mfn == NULL)
        return JR_CLIENT_EUSAGE;
    if (jr_clientint_begin(c) < 0)
        return jr_clientint_finish(c, -1);
    rc = c->db.ops->batch_show(c->db.b, id, batch_row_out, member_out, &bc,
                               &c->err);
    if (rc < 0 && c->err.code == JR_ENOTFOUND)
        c->err.code = E_NOJOB;
    return jr_clientint_finish(c, rc);
}
