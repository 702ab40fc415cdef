/* schedq.c - the schedules' fires waiting for the database (sched.h):
 * a fire queued once per schedule and instant, the catch-up of missed
 * fires, the expiry of fires not recorded in time, and the controls an
 * operator set (docs/schedules.md, "Pause, resume, fire now"): a fire
 * asked for by hand joins the queue as any fire and goes through the
 * same fire op, once. Uses sched.h, cron.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/cron.h"
#include "base/log.h"
#include "base/util.h"
#include "services/sched.h"

static char *
put(char **p, const char *s)
{
    char *start = *p;

    if (s == NULL)
        return NULL;
    memcpy(*p, s, strlen(s) + 1);
    *p += strlen(s) + 1;
    return start;
}

/* How many fires of schedule name wait with an instant after at, and
 * (*same) whether one waits at at. */
static int
newer(const jr_sched *sc, const char *name, double at, int *same)
{
    int i, n = 0;

    *same = 0;
    for (i = 0; i < sc->npending; i++)
        if (strcmp(sc->pending[i].f.schedule, name) == 0) {
            n += sc->pending[i].f.at > at;
            *same |= sc->pending[i].f.at == at;
        }
    return n;
}

/* Queues a fire of e at instant at (once); its strings copied. */
fire_req *
jr_schedq_add(jr_sched *sc, const ent *e, double at)
{
    const jr_schedule *s = &e->s;
    size_t size = strlen(s->name) + strlen(s->job) + strlen(s->payload) +
                  (s->queue ? strlen(s->queue) : 0) + 4;
    fire_req *r, *more;
    char *p;
    int same;

    newer(sc, s->name, at, &same);
    if (same)
        return NULL;
    if (sc->npending >= FIRES_MAX) {
        jr_log(JR_LOG_ERROR, "schedule '%s': %d fires already wait for the "
               "database; the fire at %.0f is skipped", s->name, FIRES_MAX,
               at);
        return NULL;
    }
    more = realloc(sc->pending, (size_t)(sc->npending + 1) * sizeof *more);
    if (more == NULL || (p = malloc(size)) == NULL) {
        if (more != NULL)
            sc->pending = more;
        jr_log(JR_LOG_ERROR, "schedule '%s': out of memory; the fire at "
               "%.0f is skipped", s->name, at);
        return NULL;
    }
    sc->pending = more;
    r = &more[sc->npending++];
    memset(r, 0, sizeof *r);
    r->mem = p;
    r->f.schedule = put(&p, s->name);
    r->f.at = at;
    r->f.job.name = put(&p, s->job);
    r->f.job.payload = put(&p, s->payload);
    r->f.job.queue = put(&p, s->queue);
    r->f.job.priority = s->priority;
    r->f.job.max_retries = s->max_retries;
    r->f.job.run_at = at;
    r->f.overlap = s->overlap;
    r->f.delay = jr_schedule_jitter(s, at);
    return r;
}

void
jr_schedq_free(fire_req *r, int n)
{
    int i;

    for (i = 0; i < n; i++)
        free(r[i].mem);
}

/* The fire after t, or 0 (logged once) when it never fires again. */
double
jr_schedq_next(const ent *e, double t)
{
    double next;

    if (e->s.start_at > 0 && t < e->s.start_at)
        t = e->s.start_at - 0.001;      /* start_at itself may fire */
    if (jr_cron_next(&e->s.cron, e->s.tz, t, &next) < 0)
        return 0;
    return e->s.end_at > 0 && next > e->s.end_at ? 0 : next;
}

/* Catch-up of e: the fires missed after last up to now (after downtime:
 * last is its last fire in the database; when the runner was behind: the
 * instant before its oldest missed one), as catch_up says: none, the most
 * recent one, or the JR_CATCHUP_MAX most recent; why ends the log line.
 * Looks back a day, then twice as far, until it has enough or reaches
 * last. */
void
jr_schedq_catch_up(jr_sched *sc, ent *e, double last, double now, const char *why)
{
    int want = e->s.catch_up == JR_CATCHUP_NONE ? 0 :
               e->s.catch_up == JR_CATCHUP_LAST ? 1 : JR_CATCHUP_MAX;
    int cap = want > 0 ? want : 1;      /* none: counts them only */
    double ring[JR_CATCHUP_MAX], span = 86400, from, t;
    long seen = 0;
    int i, n;

    for (;;) {
        from = now - span > last ? now - span : last;
        for (seen = 0, t = jr_schedq_next(e, from); t > 0 && t <= now;
             t = jr_schedq_next(e, t))
            ring[seen++ % cap] = t;
        if (seen >= cap || from <= last)
            break;
        span *= 2;
    }
    n = seen < want ? (int)seen : want;
    for (i = 0; i < n; i++)
        jr_schedq_add(sc, e, ring[(seen - n + i) % cap]);
    if (n > 0 || seen > 0)
        jr_log(JR_LOG_INFO, "schedule '%s': %ld%s fire%s missed %s, %d "
               "to run (catch_up = \"%s\")", e->s.name, seen,
               from > last ? " or more" : "", seen == 1 ? "" : "s", why, n,
               jr_catchup_name(e->s.catch_up));
}

int
jr_schedq_by_instant(const void *a, const void *b)
{
    double x = ((const fire_req *)a)->f.at, y = ((const fire_req *)b)->f.at;

    return (x > y) - (x < y);
}

const ent *
jr_schedq_find(const jr_sched *sc, const char *name)
{
    int i;

    for (i = 0; i < sc->n; i++)
        if (strcmp(sc->e[i].s.name, name) == 0)
            return &sc->e[i];
    return NULL;
}

/* Whether the waiting fire r, not recorded for RETRY_FOR, is past its
 * schedule's catch_up (as a missed fire): none drops it, last keeps the
 * most recent, all the JR_CATCHUP_MAX most recent. */
static int
expired(const jr_sched *sc, const fire_req *r, double now)
{
    const ent *e = jr_schedq_find(sc, r->f.schedule);
    int n, same;

    if (r->f.at >= now - RETRY_FOR)
        return 0;
    n = newer(sc, r->f.schedule, r->f.at, &same);
    return e == NULL || e->s.catch_up == JR_CATCHUP_NONE ||
           (e->s.catch_up == JR_CATCHUP_LAST && n > 0) || n >= JR_CATCHUP_MAX;
}

/* Drops the waiting fires past their catch_up, logging each. */
void
jr_schedq_expire(jr_sched *sc, double now)
{
    char at[40];
    int i, j;

    for (i = 0; i < sc->npending; i++)
        sc->pending[i].drop = expired(sc, &sc->pending[i], now);
    for (i = j = 0; i < sc->npending; i++) {
        fire_req *r = &sc->pending[i];
        if (!r->drop) {
            sc->pending[j++] = *r;
            continue;
        }
        jr_time_iso(r->f.at, at, sizeof at);
        jr_log(sc->dropping ? JR_LOG_DEBUG : JR_LOG_WARN, "schedule '%s': "
               "the fire at %s is not recorded after %.0fs of trying: "
               "dropped as missed (catch_up)%s", r->f.schedule, at,
               RETRY_FOR, sc->dropping ? "" : "; more such drops until the "
               "database records fires again are logged at debug level");
        sc->dropping = 1;
        free(r->mem);
    }
    sc->npending = j;
}


/* ---- the controls an operator set ---- */

/* A fire of e asked for by hand at instant at: queued as any fire (the
 * fire op makes it once across runners), unless too old. */
static void
asked(jr_sched *sc, ent *e, double at, double now)
{
    char when[40];
    int i;

    e->asked = at;
    jr_time_iso(at, when, sizeof when);
    if (at < now - RETRY_FOR) {
        jr_log(JR_LOG_DEBUG, "schedule '%s': the fire asked for %s is "
               "older than %.0fs: not fired", e->s.name, when, RETRY_FOR);
        return;
    }
    jr_log(JR_LOG_INFO, "schedule '%s': fire asked for %s", e->s.name, when);
    jr_schedq_add(sc, e, at);
    for (i = 0; i < sc->npending; i++)      /* once: not a catch-up */
        if (sc->pending[i].f.at == at &&
            strcmp(sc->pending[i].f.schedule, e->s.name) == 0)
            sc->pending[i].f.manual = 1;
}

void
jr_schedq_controls(jr_sched *sc, const jr_sched_io *io, double now)
{
    int i, k, added = 0;

    for (i = 0; i < sc->n; i++) {
        ent *e = &sc->e[i];
        const jr_sched_ctl *x = NULL;
        for (k = 0; k < io->nctl && x == NULL; k++)
            if (strcmp(io->ctl[k].schedule, e->s.name) == 0)
                x = &io->ctl[k];
        if (x == NULL)
            continue;
        if (x->paused != e->paused)
            jr_log(JR_LOG_INFO, "schedule '%s' %s", e->s.name, x->paused ?
                   "paused: its fires are skipped until it is resumed" :
                   "resumed");
        e->paused = x->paused;
        if (x->fire_at > e->asked && e->loaded) {
            asked(sc, e, x->fire_at, now);
            added++;
        }
    }
    if (added > 0 && sc->npending > 1)      /* each schedule's in order */
        qsort(sc->pending, (size_t)sc->npending, sizeof *sc->pending,
              jr_schedq_by_instant);
}
