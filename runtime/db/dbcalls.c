/* dbcalls.c - the backend calls of dbcalls.h: one op each, so that no
 * file of master/ or services/ names backend.h. Uses dbcalls.h,
 * backend.h. */
#include "db/dbcalls.h"
#include "backend.h"

int
jr_dbcall_complete_claim(jr_db *db, const char *token, const jr_result *r,
                         int nr, int *applied, double lease,
                         const char *const *names, int nnames, int max,
                         const struct jr_limit *limits, int nlimits,
                         jr_job **out, jr_err *err)
{
    jr_claim_spec spec = {.names = names, .nnames = nnames, .max = max,
                          .others = max, .limits = limits,
                          .nlimits = nlimits};

    return db->ops->complete_claim(db->b, token, r, nr, applied, lease,
                                   &spec, out, err);
}

/* What jr_dbcall_queued walks with: the caller's function and argument. */
typedef struct queued_walk {
    jr_dbcall_queued_cb cb;
    void               *arg;
} queued_walk;

static int
queued_row(const jr_stat_row *row, void *arg)
{
    queued_walk *w = arg;

    return w->cb(row->name, row->n[JR_STATE_QUEUED], w->arg);
}

int
jr_dbcall_queued(jr_db *db, jr_dbcall_queued_cb cb, void *arg, jr_err *err)
{
    queued_walk w = {cb, arg};

    return db->ops->stats(db->b, queued_row, &w, err);
}

int
jr_dbcall_vacuum(jr_db *db, jr_err *err)
{
    return db->ops->vacuum(db->b, err);
}

int
jr_dbcall_can_vacuum(const jr_db *db)
{
    return db->ops->vacuum != NULL;
}

int
jr_dbcall_vacuum_due(jr_db *db, long dead, jr_err *err)
{
    return db->ops->vacuum_due != NULL ? db->ops->vacuum_due(db->b, dead, err)
                                       : 0;
}

int
jr_dbcall_cancelled(jr_db *db, const char *token, int64_t *ids, int max,
                    jr_err *err)
{
    return db->ops->cancelled(db->b, token, ids, max, err);
}

int
jr_dbcall_wake(jr_db *db, int max, jr_err *err)
{
    return db->ops->wake(db->b, max, err);
}

int
jr_dbcall_wait_counts(jr_db *db, long *on_signal, long *on_date,
                      jr_err *err)
{
    return db->ops->wait_counts(db->b, on_signal, on_date, err);
}

int
jr_dbcall_prune(jr_db *db, double keep_completed, double keep_cancelled,
                double keep_dead, int limit, jr_err *err)
{
    return db->ops->prune(db->b, keep_completed, keep_cancelled, keep_dead,
                          limit, err);
}

int
jr_dbcall_queue_prune(jr_db *db, double idle, const char *const *keep,
                      int nkeep, int limit, jr_err *err)
{
    return db->ops->queue_prune(db->b, idle, keep, nkeep, limit, err);
}

int
jr_dbcall_paused(jr_db *db, jr_dbcall_name_cb cb, void *arg, jr_err *err)
{
    return db->ops->paused(db->b, cb, arg, err);
}

int
jr_dbcall_ready_by_queue(jr_db *db, const char *const *names, int nnames,
                         long limit, jr_dbcall_count_cb cb, void *arg,
                         jr_err *err)
{
    return db->ops->ready_by_queue(db->b, names, nnames, limit, cb, arg,
                                   err);
}

int
jr_dbcall_limit_use(jr_db *db, const struct jr_limit *l, long *waiting,
                    long *running, jr_err *err)
{
    jr_limit_use u = {.top = 0};       /* the counts alone */

    if (db->ops->limit_use(db->b, l, &u, err) < 0)
        return -1;
    *waiting = u.waiting;
    *running = u.running;
    return 0;
}

int
jr_dbcall_sched_states(jr_db *db, jr_dbcall_ctl_cb cb, void *arg,
                       jr_err *err)
{
    return db->ops->sched_states(db->b, cb, arg, err);
}

int
jr_dbcall_last_fires(jr_db *db, jr_dbcall_fire_cb cb, void *arg, jr_err *err)
{
    return db->ops->last_fires(db->b, cb, arg, err);
}

int
jr_dbcall_fire(jr_db *db, jr_fire *f, int keep, jr_err *err)
{
    return db->ops->fire(db->b, f, 1, keep, err);
}

int
jr_dbcall_sched_defs(jr_db *db, int64_t *rev, jr_dbcall_def_cb cb,
                     void *arg, jr_err *err)
{
    return db->ops->sched_defs(db->b, rev, cb, arg, err);
}

int
jr_dbcall_sequence_paths(jr_db *db, const jr_handler *h, int n, jr_err *err)
{
    return db->ops->sequence_paths(db->b, h, n, err);
}

int
jr_dbcall_fair_names(jr_db *db, const jr_handler *h, int n, jr_err *err)
{
    return db->ops->fair_names(db->b, h, n, err);
}

int
jr_dbcall_fair_name_queues(jr_db *db, jr_dbcall_queue_cb cb, void *arg,
                           jr_err *err)
{
    return db->ops->fair_name_list(db->b, 0, cb, arg, err);
}

int
jr_dbcall_fair_name_set(jr_db *db, const char *name, const char *key,
                        double weight, jr_err *err)
{
    return db->ops->fair_name_set(db->b, name, key, weight, err);
}
