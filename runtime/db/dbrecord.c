/* dbrecord.c - results recorded outside the database thread's cycles:
 * one by one when the database refuses a batch for one row's input (only
 * the refused ones fail), and at a stop with a bound (on a thread of its
 * own, the handler's statement interrupted after a while); the stop's
 * bounded wait, which dbthread.c's settle shares. Uses backend.h,
 * dbthread.h, log.h, util.h. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>

#include "backend.h"
#include "db/dbthread.h"
#include "base/log.h"
#include "base/util.h"

/* Records result r alone. A result the database refuses for its input (a
 * follow-up push it will not take, an error text too big) would be refused
 * forever: it becomes a death that says why, and if even that is refused,
 * a death with a short reason. Returns 1 or 0 as complete does, or -1 with
 * err set when the failure is not about this row (the database is in
 * trouble). */
static int
complete_one(jr_db *db, const char *token, const jr_result *res,
             jr_err *err)
{
    const jr_backend_ops *ops = db->ops;
    jr_result r = *res;
    char msg[sizeof err->msg + 48];
    int rc;

    if ((rc = ops->complete(db->b, token, &r, 1, err)) >= 0 ||
        err->code != JR_EINPUT)
        return rc;
    if (JR_RESULT_RUNS_ON(r.kind)) {    /* the job runs on: drop it */
        jr_log(JR_LOG_WARN, "job %lld: %s refused by the database: %s",
               (long long)r.id, r.kind == JR_STEP ? "steps" : "progress",
               err->msg);
        return 1;
    }
    snprintf(msg, sizeof msg, "%s refused by the database: %s",
             r.kind == JR_DONE ? "follow-up push" : "result", err->msg);
    jr_log(JR_LOG_ERROR, "job %lld: %s; the job is dead", (long long)r.id,
           msg);
    r.kind = JR_DEAD;
    r.error = msg;
    r.pushes = NULL;
    r.npushes = 0;
    if ((rc = ops->complete(db->b, token, &r, 1, err)) >= 0 ||
        err->code != JR_EINPUT)
        return rc;
    r.error = "its result was refused by the database (see the log)";
    r.generation = NULL;
    if ((rc = ops->complete(db->b, token, &r, 1, err)) >= 0 ||
        err->code != JR_EINPUT)
        return rc;
    jr_log(JR_LOG_ERROR, "job %lld: cannot record its death either (%s); "
           "its lease will requeue it", (long long)r.id, err->msg);
    return 0;
}

int
jr_dbthread_complete(jr_db *db, const char *token, const jr_result *r, int n,
                     jr_err *err)
{
    int applied, i, rc;

    if ((applied = db->ops->complete(db->b, token, r, n, err)) >= 0 ||
        err->code != JR_EINPUT)
        return applied;
    /* refused for the input of some result: one by one, so that only the
     * refused ones fail */
    for (applied = i = 0; i < n; i++) {
        if ((rc = complete_one(db, token, &r[i], err)) < 0)
            return -1;
        applied += rc;
    }
    return applied;
}

/* With mu held: waits on cv while out(arg), for secs, then interrupts
 * db's handler's statement every 0.2 s until out(arg) is 0. Returns 1
 * when it interrupted. */
int
jr_db_wait_or_cut(pthread_mutex_t *mu, pthread_cond_t *cv, int (*out)(void *),
                  void *arg, jr_db *db, double secs)
{
    double until = jr_mono() + secs;
    struct timespec ts;
    int told = 0;

    while (out(arg)) {
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 200000000L;       /* looks again every 0.2 s */
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(cv, mu, &ts);
        if (!out(arg) || jr_mono() < until || db->ops->interrupt == NULL)
            continue;
        if (!told)
            jr_log(JR_LOG_WARN, "stopping: the database round is still "
                   "out after %gs (a handler's statement that does not "
                   "end?): its statement is interrupted", secs);
        told = 1;
        db->ops->interrupt(db->b);
    }
    return told;
}

/* jr_dbthread_complete_within's recording, on a thread of its own */
typedef struct {
    pthread_mutex_t  mu;
    pthread_cond_t   cv;
    int              running;
    jr_db           *db;
    const char      *token;
    const jr_result *r;
    int              n, applied;
    jr_err          *err;
} last_rec;

static int
rec_out(void *arg)
{
    return ((const last_rec *)arg)->running;
}

static void *
rec_main(void *arg)
{
    last_rec *l = arg;
    int applied = jr_dbthread_complete(l->db, l->token, l->r, l->n, l->err);

    pthread_mutex_lock(&l->mu);
    l->applied = applied;
    l->running = 0;
    pthread_cond_signal(&l->cv);
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

int
jr_dbthread_complete_within(jr_db *db, const char *token, const jr_result *r,
                            int n, double secs, jr_err *err)
{
    last_rec l = {.running = 1, .db = db, .token = token, .r = r, .n = n,
                  .err = err};
    pthread_t th;
    sigset_t all, old;
    int rc;

    pthread_mutex_init(&l.mu, NULL);
    pthread_cond_init(&l.cv, NULL);
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    rc = pthread_create(&th, NULL, rec_main, &l);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {      /* no thread: as before, with no bound */
        l.applied = jr_dbthread_complete(db, token, r, n, err);
    } else {
        pthread_mutex_lock(&l.mu);
        jr_db_wait_or_cut(&l.mu, &l.cv, rec_out, &l, db, secs);
        pthread_mutex_unlock(&l.mu);
        pthread_join(th, NULL);
    }
    pthread_mutex_destroy(&l.mu);
    pthread_cond_destroy(&l.cv);
    return l.applied;
}

void
jr_dbthread_cut(jr_db *db)
{
    if (db != NULL && db->ops->interrupt != NULL)
        db->ops->interrupt(db->b);
}
