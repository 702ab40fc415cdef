/* fairnames.c - a handler's fair option (docs/queues.md, "Fair share")
 * made known to every producer: after each new generation of handler
 * code, the runner writes each handler's `fair` path (or its absence) to
 * the database (the backend's fair_names, the table fair_names), on the
 * master's database thread between cycles; a push into a fair queue
 * keys a job of the name by it (on both engines in the database, so
 * every producer's pushes). A failed write is logged and tried again
 * RETRY_SECS later. A service (service.h). Uses service.h, svc.h,
 * dbcalls.h, dbthread.h, log.h. */
#include <stdlib.h>
#include <string.h>

#include "db/dbcalls.h"
#include "db/dbthread.h"
#include "base/log.h"
#include "master/service.h"
#include "master/svc.h"
#include "base/util.h"

#define RETRY_SECS 10.0         /* after a failed write */

typedef struct jr_fairnames {
    int         gen_id;         /* the generation last written (0: none) */
    int         asked;          /* the generation on its way (0: none) */
    int         busy;           /* a write is on its way */
    jr_handler *h;              /* the thread's copy: names and paths */
    int         n;
    int         rc;             /* the thread's result */
    jr_err      err;
    double      next;           /* mono: no write before (after a failure) */
} jr_fairnames;

static void
copy_free(jr_fairnames *s)
{
    for (int i = 0; i < s->n; i++) {
        free(s->h[i].name);
        free(s->h[i].fair);
    }
    free(s->h);
    s->h = NULL;
    s->n = 0;
}

/* The current generation's names and paths into s; -1 when out of
 * memory. */
static int
copy_gen(master *m, jr_fairnames *s)
{
    int n, i;
    const jr_handler *h = jr_svc_handlers(m, &n);

    if ((s->h = calloc((size_t)n + 1, sizeof *s->h)) == NULL)
        return -1;
    for (i = 0; i < n; i++, s->n++) {
        s->h[i].name = strdup(h[i].name);
        s->h[i].fair = h[i].fair ? strdup(h[i].fair) : NULL;
        if (s->h[i].name == NULL ||
            (h[i].fair != NULL && s->h[i].fair == NULL)) {
            s->n++;
            copy_free(s);
            return -1;
        }
    }
    return 0;
}

static void
run(jr_db *db, void *arg)
{
    jr_fairnames *s = arg;

    s->rc = jr_dbcall_fair_names(db, s->h, s->n, &s->err);
}

static void
done(void *arg, int ran)
{
    jr_fairnames *s = arg;

    s->busy = 0;
    copy_free(s);
    if (ran && s->rc == 0)
        s->gen_id = s->asked;
    else if (ran) {
        jr_log(JR_LOG_WARN, "cannot record the handlers' fair keys: %s",
               s->err.msg);
        s->next = jr_mono() + RETRY_SECS;
    }
}

/* Each tick: a generation not written yet goes to the database thread. */
static void
tick(master *m, void *st, double now)
{
    jr_fairnames *s = st;
    int gen = jr_svc_gen(m, NULL);

    if (s == NULL || s->busy || gen == 0 || gen == s->gen_id ||
        now < s->next || jr_svc_dbthread(m) == NULL || jr_svc_stopping(m))
        return;
    if (copy_gen(m, s) < 0)
        return;
    s->asked = gen;
    if (jr_dbthread_request(jr_svc_dbthread(m), run, done, s) == 0)
        s->busy = 1;
    else
        copy_free(s);
}

static int
init(master *m, void **st)
{
    (void)m;
    return (*st = calloc(1, sizeof(jr_fairnames))) == NULL ? -1 : 0;
}

/* After the database thread is gone (a write on its way heard ran 0). */
static void
free_fairnames(master *m, void *st)
{
    jr_fairnames *s = st;

    (void)m;
    if (s == NULL)
        return;
    copy_free(s);
    free(s);
}

const jr_service jr_fairnames_service = {
    .name = "fairnames", .init = init, .tick = tick, .free = free_fairnames,
};
