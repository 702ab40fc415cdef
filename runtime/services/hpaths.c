/* hpaths.c - a handler's payload-path options made known to every
 * producer: `sequence` (docs/queues.md, "Sequences") and `fair`
 * (docs/queues.md, "Fair share"). After each new generation of handler
 * code, the runner writes each handler's path (or its absence) to the
 * database (the backend's sequence_paths and fair_names, the tables of
 * those names), on the master's database thread between cycles; pushes
 * read them there, so every producer's pushes (in the database on both
 * engines) key a job of the name by them. A failed write is logged and
 * tried again RETRY_SECS later; one not written when the runner stops
 * is written then. Two services (service.h), one per
 * option, sharing this code. Uses service.h, svc.h, dbcalls.h,
 * dbthread.h, log.h. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "db/dbcalls.h"
#include "db/dbthread.h"
#include "base/log.h"
#include "master/service.h"
#include "master/svc.h"
#include "base/util.h"

#define RETRY_SECS 10.0         /* after a failed write */

/* One option: where its path is in jr_handler, how it is written. */
typedef struct kind {
    size_t      off;            /* offsetof(jr_handler, the path) */
    int       (*write)(jr_db *, const jr_handler *, int, jr_err *);
    const char *what;           /* "sequences", for the log */
} kind;

static const kind seq_kind = {offsetof(jr_handler, sequence),
                              jr_dbcall_sequence_paths, "sequences"};
static const kind fair_kind = {offsetof(jr_handler, fair),
                               jr_dbcall_fair_names, "fair keys"};

typedef struct jr_hpaths {
    const kind *k;
    int         gen_id;         /* the generation last written (0: none) */
    int         asked;          /* the generation on its way (0: none) */
    int         busy;           /* a write is on its way */
    jr_handler *h;              /* the thread's copy: names and paths */
    int         n;
    int         rc;             /* the thread's result */
    jr_err      err;
    double      next;           /* mono: no write before (after a failure) */
} jr_hpaths;

static char **
path_of(const kind *k, jr_handler *h)
{
    return (char **)((char *)h + k->off);
}

static void
copy_free(jr_hpaths *s)
{
    for (int i = 0; i < s->n; i++) {
        free(s->h[i].name);
        free(*path_of(s->k, &s->h[i]));
        free(s->h[i].fair_weights);
    }
    free(s->h);
    s->h = NULL;
    s->n = 0;
}

/* The current generation's names and paths into s (only the option's
 * path of each handler is set); -1 when out of memory. */
static int
copy_gen(master *m, jr_hpaths *s)
{
    int n, i;
    const jr_handler *h = jr_svc_handlers(m, &n);

    if ((s->h = calloc((size_t)n + 1, sizeof *s->h)) == NULL)
        return -1;
    for (i = 0; i < n; i++, s->n++) {
        const char *p = *(char *const *)((const char *)&h[i] + s->k->off);
        char **to = path_of(s->k, &s->h[i]);

        s->h[i].name = strdup(h[i].name);
        *to = p ? strdup(p) : NULL;
        if (s->k == &fair_kind && h[i].fair_weights != NULL) {
            /* the table form: its weights and default too */
            s->h[i].fair_weights = strdup(h[i].fair_weights);
            s->h[i].fair_default = h[i].fair_default;
        }
        if (s->h[i].name == NULL || (p != NULL && *to == NULL) ||
            (h[i].fair_weights != NULL && s->k == &fair_kind &&
             s->h[i].fair_weights == NULL)) {
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
    jr_hpaths *s = arg;

    s->rc = s->k->write(db, s->h, s->n, &s->err);
}

static void
done(void *arg, int ran)
{
    jr_hpaths *s = arg;

    s->busy = 0;
    copy_free(s);
    if (ran && s->rc == 0)
        s->gen_id = s->asked;
    else if (ran) {
        jr_log(JR_LOG_WARN, "cannot record the handlers' %s: %s",
               s->k->what, s->err.msg);
        s->next = jr_mono() + RETRY_SECS;
    }
}

/* Each tick: a generation not written yet goes to the database thread. */
static void
tick(master *m, void *st, double now)
{
    jr_hpaths *s = st;
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

/* The runner stopped before a tick wrote the generation it loaded (a
 * stop within a tick of the start): written now, on the master's own
 * connection, which the database thread has handed back, so that a push
 * after the stop keys the name's jobs by the option its handler set. */
static void
stopped(master *m, void *st)
{
    jr_hpaths *s = st;
    jr_db *db = jr_svc_db(m);
    int gen = jr_svc_gen(m, NULL);

    if (s == NULL || s->busy || gen == 0 || gen == s->gen_id || db == NULL ||
        copy_gen(m, s) < 0)
        return;
    if (s->k->write(db, s->h, s->n, &s->err) < 0)
        jr_log(JR_LOG_WARN, "cannot record the handlers' %s: %s",
               s->k->what, s->err.msg);
    else
        s->gen_id = gen;
    copy_free(s);
}

static int
init_kind(void **st, const kind *k)
{
    jr_hpaths *s = calloc(1, sizeof *s);

    if (s == NULL)
        return -1;
    s->k = k;
    *st = s;
    return 0;
}

static int
init_seq(master *m, void **st)
{
    (void)m;
    return init_kind(st, &seq_kind);
}

static int
init_fair(master *m, void **st)
{
    (void)m;
    return init_kind(st, &fair_kind);
}

/* After the database thread is gone (a write on its way heard ran 0). */
static void
free_hpaths(master *m, void *st)
{
    jr_hpaths *s = st;

    (void)m;
    if (s == NULL)
        return;
    copy_free(s);
    free(s);
}

const jr_service jr_seqpaths_service = {
    .name = "seqpaths", .init = init_seq, .tick = tick, .stopped = stopped,
    .free = free_hpaths,
};

const jr_service jr_fairnames_service = {
    .name = "fairnames", .init = init_fair, .tick = tick, .stopped = stopped,
    .free = free_hpaths,
};
