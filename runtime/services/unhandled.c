/* unhandled.c - the queued jobs whose name no handler of this runner
 * takes. A runner claims only the names it has handlers for: a job pushed
 * under a misspelt name, or before its handler is deployed, waits without
 * a word. A few seconds after each new generation, at once after each
 * reload (even one that kept the handlers: the operator's way to ask for
 * a count now), then again and again, the runner counts the queued jobs
 * (ready or scheduled) per name: the backend's stats, on the master's
 * database thread between two cycles. The next count waits 100 times as
 * long as the last one took, at least a minute and at most ten, so
 * counting takes at most a hundredth of that thread. Each name no handler takes is logged once (again only after it
 * was gone), with its count; the last count is in /metrics and
 * /api/runner through the HTTP host's callbacks (host). A service
 * (service.h). Uses service.h, svc.h, host.h, dbcalls.h, dbthread.h,
 * api.h, log.h. */
#include <stdlib.h>
#include <string.h>

#include "http/api.h"
#include "db/dbcalls.h"
#include "db/dbthread.h"
#include "base/log.h"
#include "base/util.h"
#include "master/service.h"
#include "master/svc.h"
#include "http/host.h"

extern const jr_service jr_unhandled_service;   /* below */

#define FIRST_AFTER 2.0         /* s from a new generation to its count */
#define EVERY_MIN   60.0        /* s between counts, at least */
#define EVERY_MAX   600.0       /* and at most */
#define COST_X      100.0       /* times the last count's time */

typedef struct named {
    char *name;                 /* owned */
    long  queued;
} named;

typedef struct list {
    named *v;
    int    n, cap;
} list;

typedef struct jr_unhandled jr_unhandled;

struct jr_unhandled {
    master *m;
    int     busy;               /* a count is on its way */
    int     again;              /* a reload asked for one after it */
    int     gen_id;             /* the generation last seen (0: none) */
    double  next;               /* mono: the next count */
    double  asked;              /* mono: when the one on its way went */
    list    fresh;              /* the thread's: names with queued jobs */
    list    shown;              /* the last count's names with no handler */
    int     rc;                 /* the thread's result */
    jr_err  err;
};

static void
list_clear(list *l)
{
    for (int i = 0; i < l->n; i++)
        free(l->v[i].name);
    free(l->v);
    memset(l, 0, sizeof *l);
}

/* Takes name (owned) into l; -1 when out of memory (name freed). */
static int
list_add(list *l, char *name, long queued)
{
    if (name == NULL)
        return -1;
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 8;
        named *v = realloc(l->v, (size_t)cap * sizeof *v);
        if (v == NULL) {
            free(name);
            return -1;
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n].name = name;
    l->v[l->n++].queued = queued;
    return 0;
}

static const named *
list_find(const list *l, const char *name)
{
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->v[i].name, name) == 0)
            return &l->v[i];
    return NULL;
}

/* On the thread: one name's counts. */
static int
collect(const char *name, long queued, void *arg)
{
    jr_unhandled *u = arg;

    if (queued == 0)
        return 0;
    return list_add(&u->fresh, strdup(name), queued) < 0;
}

static void
run(jr_db *db, void *arg)
{
    jr_unhandled *u = arg;

    list_clear(&u->fresh);
    u->rc = jr_dbcall_queued(db, collect, u, &u->err);
}

/* In the loop: the names of the count that the current generation has no
 * handler for replace the shown ones; each new one is logged. */
static void
compare(jr_unhandled *u)
{
    master *m = u->m;
    list now = {0};

    for (int i = 0; i < u->fresh.n; i++) {
        const named *f = &u->fresh.v[i];
        if (jr_svc_handles(m, f->name))
            continue;
        if (list_find(&u->shown, f->name) == NULL)
            jr_log(JR_LOG_WARN, "%ld queued job%s named '%s': no handler "
                   "for it in %s; %s until one is loaded (a misspelt name, "
                   "or a handler not deployed yet?)", f->queued,
                   f->queued == 1 ? "" : "s", f->name,
                   jr_svc_config(m)->scripts,
                   f->queued == 1 ? "it waits" : "they wait");
        if (list_add(&now, strdup(f->name), f->queued) < 0)
            break;
    }
    list_clear(&u->shown);
    u->shown = now;
}

static void
done(void *arg, int ran)
{
    jr_unhandled *u = arg;
    double now = jr_mono(), wait = COST_X * (now - u->asked);

    u->busy = 0;
    u->next = now + (wait < EVERY_MIN ? EVERY_MIN :
                     wait > EVERY_MAX ? EVERY_MAX : wait);
    if (u->again)               /* it may have counted before the reload */
        u->next = now, u->again = 0;
    if (ran && u->rc < 0)
        jr_log(JR_LOG_DEBUG, "cannot count the jobs per name: %s",
               u->err.msg);
    else if (ran && jr_svc_gen(u->m, NULL) != 0)
        compare(u);
    list_clear(&u->fresh);
}

/* Each tick: when it is time (soon after the start and after a new
 * generation, then every minute or more), asks the database thread for
 * the queued jobs per name, between cycles. */
static void
tick(master *m, void *st, double now)
{
    jr_unhandled *u = st;
    int gen = jr_svc_gen(m, NULL);

    if (gen == 0 || jr_svc_dbthread(m) == NULL || jr_svc_stopping(m))
        return;
    if (u == NULL)
        return;
    u->m = m;
    if (u->gen_id != gen) {             /* new handlers: count soon */
        u->gen_id = gen;
        if (u->next > now + FIRST_AFTER || u->next == 0)
            u->next = now + FIRST_AFTER;
    }
    if (u->busy || now < u->next)
        return;
    u->asked = now;
    if (jr_dbthread_request(jr_svc_dbthread(m), run, done, u) == 0)
        u->busy = 1;
    else
        u->next = now + EVERY_MIN;
}

/* A reload, done (ok) or refused: its handlers, changed or not, are
 * counted against at the next tick, or as soon as a count on its way is
 * back. */
static void
reloaded(master *m, void *st, int ok, const char *error)
{
    jr_unhandled *u = st;

    (void)m;
    (void)error;
    if (u == NULL || !ok)
        return;
    if (u->busy)
        u->again = 1;
    else
        u->next = jr_mono();
}

/* /metrics: the gauge jobrunner_unhandled_jobs{name} of the last count. */
static void
host_metrics(void *runner, jr_buf *b)
{
    const jr_unhandled *u = jr_service_state(runner, &jr_unhandled_service);

    jr_api_printf(b, "# HELP jobrunner_unhandled_jobs Queued jobs (ready or "
                  "scheduled) whose name no handler of this runner takes, "
                  "at its last count of them.\n"
                  "# TYPE jobrunner_unhandled_jobs gauge\n");
    for (int i = 0; u != NULL && i < u->shown.n; i++)
        jr_api_printf(b, "jobrunner_unhandled_jobs{name=\"%s\"} %ld\n",
                      u->shown.v[i].name, u->shown.v[i].queued);
}

/* /api/runner: ,"unhandled":[{"name":...,"queued":N}...] of the last
 * count. */
static void
host_json(void *runner, jr_buf *b)
{
    const jr_unhandled *u = jr_service_state(runner, &jr_unhandled_service);

    jr_buf_put(b, ",\"unhandled\":[", 14);
    for (int i = 0; u != NULL && i < u->shown.n; i++) {
        jr_buf_put(b, i ? ",{\"name\":" : "{\"name\":", i ? 9 : 8);
        jr_api_str(b, u->shown.v[i].name);
        jr_api_printf(b, ",\"queued\":%ld}", u->shown.v[i].queued);
    }
    jr_buf_put(b, "]", 1);
}

static int
host(master *m, jr_httphost *h)
{
    (void)m;
    h->unhandled_metrics = host_metrics;
    h->unhandled_json = host_json;
    return 0;
}

static int
init(master *m, void **st)
{
    (void)m;
    return (*st = calloc(1, sizeof(jr_unhandled))) == NULL ? -1 : 0;
}

/* After the database thread is gone (a count on its way heard ran 0). */
static void
free_unhandled(master *m, void *st)
{
    jr_unhandled *u = st;

    (void)m;
    if (u == NULL)
        return;
    list_clear(&u->fresh);
    list_clear(&u->shown);
    free(u);
}

const jr_service jr_unhandled_service = {
    .name = "unhandled", .host = host, .init = init, .tick = tick,
    .reloaded = reloaded, .free = free_unhandled,
};
