/* fairnameq.c - queues made fair by a job name (docs/queues.md, "A
 * name's own weights"): a push of a name whose handler has weights of
 * its own into a queue the config does not make fair makes it fair in
 * the database (fair_paths, path ''). While this runner's handlers have
 * such a name, it reads those queues every POLL_SECS on the database
 * thread between cycles, and gives each one a fair limit (default 1, no
 * weights: the other names' jobs are its one key '') in the live limits
 * (limits.h), so its claims take their turns by key. A runner without
 * such a handler reads nothing. Opens jobrunner.fair for the hooks
 * (fairlua.h). Uses service.h, svc.h, limits.h, fairlua.h, dbcalls.h,
 * dbthread.h, log.h. */
#include <stdlib.h>
#include <string.h>

#include "db/dbcalls.h"
#include "db/dbthread.h"
#include "base/log.h"
#include "master/service.h"
#include "master/svc.h"
#include "services/fairlua.h"
#include "services/limits.h"
#include "base/util.h"

#define POLL_SECS 1.0

typedef struct fnq {
    master *m;
    int     busy;               /* a read is on its way */
    double  next;               /* mono: no read before */
    char  **q;                  /* the thread's read: queue names */
    int     n, cap;
    int     rc;
    jr_err  err;
} fnq;

static void
names_free(fnq *s)
{
    for (int i = 0; i < s->n; i++)
        free(s->q[i]);
    free(s->q);
    s->q = NULL;
    s->n = s->cap = 0;
}

static int
add_queue(const char *queue, void *arg)
{
    fnq *s = arg;
    char **bigger;

    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 8;
        if ((bigger = realloc(s->q, (size_t)s->cap * sizeof *bigger)) == NULL)
            return -1;
        s->q = bigger;
    }
    if ((s->q[s->n] = strdup(queue)) == NULL)
        return -1;
    s->n++;
    return 0;
}

static void
run(jr_db *db, void *arg)
{
    fnq *s = arg;

    s->rc = jr_dbcall_fair_name_queues(db, add_queue, s, &s->err);
}

/* Each queue read gets a fair limit in the live limits, unless it has
 * one (the config's). */
static void
apply(master *m, fnq *s)
{
    jr_limitsrun *lr = jr_service_state(m, &jr_limits_service);
    char scope[sizeof JR_LIMIT_QPREFIX + 130];
    jr_limit *l;

    for (int i = 0; lr != NULL && i < s->n; i++) {
        snprintf(scope, sizeof scope, "%s%s", JR_LIMIT_QPREFIX, s->q[i]);
        if ((l = jr_limits_find(&lr->live, scope)) != NULL &&
            l->fair_path != NULL)
            continue;
        if ((l == NULL && lr->live.n >= JR_LIMIT_MAX) ||
            (l == NULL && (l = jr_limits_add(&lr->live, scope)) == NULL) ||
            (l->fair_path = strdup("")) == NULL)
            continue;
        l->fair_default = 1;
        lr->changed = 1;
        jr_log(JR_LOG_INFO, "queue '%s' is fair: a job name with fair "
               "weights of its own was pushed into it", s->q[i]);
        jr_svc_want_claim(m);
    }
}

static void
done(void *arg, int ran)
{
    fnq *s = arg;

    s->busy = 0;
    if (ran && s->rc < 0)
        jr_log(JR_LOG_WARN, "cannot read the queues made fair by a name: "
               "%s", s->err.msg);
    else if (ran)
        apply(s->m, s);
    names_free(s);
}

/* 1 if a handler of the current generation has fair weights. */
static int
named(master *m)
{
    int n, i;
    const jr_handler *h = jr_svc_handlers(m, &n);

    for (i = 0; h != NULL && i < n; i++)
        if (h[i].fair_weights != NULL)
            return 1;
    return 0;
}

static void
tick(master *m, void *st, double now)
{
    fnq *s = st;

    if (s == NULL || s->busy || now < s->next ||
        jr_svc_dbthread(m) == NULL || jr_svc_stopping(m) || !named(m))
        return;
    s->next = now + POLL_SECS;
    s->m = m;
    if (jr_dbthread_request(jr_svc_dbthread(m), run, done, s) == 0)
        s->busy = 1;
}

static int
init(master *m, void **st)
{
    jr_fairlua_open(m);         /* jobrunner.fair for the hooks */
    return (*st = calloc(1, sizeof(fnq))) ? 0 : -1;
}

static void
free_fnq(master *m, void *st)
{
    (void)m;
    if (st != NULL)
        names_free(st);
    free(st);
}

const jr_service jr_fairnameq_service = {
    .name = "fairnameq", .init = init, .tick = tick, .free = free_fnq,
};
