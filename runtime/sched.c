/* sched.c - recurring jobs in the master: each schedule's next fire, the
 * fires due each second handed to the database cycle (which inserts each
 * with its job, once across runners: backend.h's fire), catch-up after
 * downtime from the last fires the database holds, and the config's
 * schedules followed on reload. Uses cron.h, schedules.h (the config's),
 * the cycle of dbthread.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cron.h"
#include "log.h"
#include "master_int.h"
#include "schedules.h"

#define FIRES_MAX 1000          /* fires waiting at most (all schedules) */

typedef struct ent {            /* one schedule and where it stands */
    jr_schedule s;              /* a copy of the config's */
    int         loaded;         /* its last fire was read: next is known */
    double      next;           /* its next fire instant */
    int         warned_gen;     /* generation its missing handler was
                                   reported for */
} ent;

typedef struct fire_req {       /* a fire waiting or in flight */
    jr_fire f;                  /* strings point into mem */
    char   *mem;
} fire_req;

struct jr_sched {
    jr_schedules cfg;           /* owns the entries' strings */
    ent         *e;
    int          n;
    int          need_last;     /* read the last fires before firing */
    fire_req    *pending;
    int          npending;
    fire_req    *inflight;      /* the running cycle's */
    int          ninflight;
};

/* ---- fires ---- */

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

/* Queues a fire of e at instant at; its strings copied. */
static void
add_fire(jr_sched *sc, const ent *e, double at)
{
    const jr_schedule *s = &e->s;
    size_t size = strlen(s->name) + strlen(s->job) + strlen(s->payload) +
                  (s->queue ? strlen(s->queue) : 0) + 4;
    fire_req *r, *more;
    char *p;

    if (sc->npending >= FIRES_MAX) {
        jr_log(JR_LOG_ERROR, "schedule '%s': %d fires already wait for the "
               "database; the fire at %.0f is skipped", s->name, FIRES_MAX,
               at);
        return;
    }
    more = realloc(sc->pending, (size_t)(sc->npending + 1) * sizeof *more);
    if (more == NULL || (p = malloc(size)) == NULL) {
        if (more != NULL)
            sc->pending = more;
        jr_log(JR_LOG_ERROR, "schedule '%s': out of memory; the fire at "
               "%.0f is skipped", s->name, at);
        return;
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
}

static void
free_fires(fire_req *r, int n)
{
    int i;

    for (i = 0; i < n; i++)
        free(r[i].mem);
}

/* The fire after t, or 0 (logged once) when it never fires again. */
static double
next_after(const ent *e, double t)
{
    double next;

    if (jr_cron_next(&e->s.cron, e->s.tz, t, &next) < 0)
        return 0;
    return next;
}

/* Catch-up of e after downtime: the fires missed since last (its last
 * fire in the database) up to now, as catch_up says: none, the most
 * recent one, or the JR_CATCHUP_MAX most recent. Looks back a day, then
 * twice as far, until it has enough or reaches last. */
static void
catch_up(jr_sched *sc, ent *e, double last, double now)
{
    int want = e->s.catch_up == JR_CATCHUP_NONE ? 0 :
               e->s.catch_up == JR_CATCHUP_LAST ? 1 : JR_CATCHUP_MAX;
    double ring[JR_CATCHUP_MAX], span = 86400, from, t;
    long seen = 0;
    int i, n;

    from = last;
    while (want > 0) {
        from = now - span > last ? now - span : last;
        for (seen = 0, t = next_after(e, from); t > 0 && t <= now;
             t = next_after(e, t))
            ring[seen++ % want] = t;
        if (seen >= want || from <= last)
            break;
        span *= 2;
    }
    n = seen < want ? (int)seen : want;
    for (i = 0; i < n; i++)
        add_fire(sc, e, ring[(seen - n + i) % want]);
    if (n > 0 || seen > 0)
        jr_log(JR_LOG_INFO, "schedule '%s': %ld%s fire%s missed since "
               "the last one, %d to run (catch_up = \"%s\")", e->s.name,
               seen, from > last ? " or more" : "", seen == 1 ? "" : "s", n,
               jr_catchup_name(e->s.catch_up));
}

/* The last fires came back: each schedule not loaded catches up and
 * learns its next fire. A schedule never fired starts from now. */
static void
load(jr_sched *sc, const jr_cycle *c)
{
    double now = jr_now(), last;
    int i, j;

    for (i = 0; i < sc->n; i++) {
        ent *e = &sc->e[i];
        if (e->loaded)
            continue;
        for (last = 0, j = 0; j < c->nlast_fires; j++)
            if (strcmp(c->last_fires[j].schedule, e->s.name) == 0)
                last = c->last_fires[j].at;
        if (last > 0)
            catch_up(sc, e, last, now);
        e->next = next_after(e, last > now ? last : now);
        e->loaded = 1;
        if (e->next == 0)
            jr_log(JR_LOG_WARN, "schedule '%s': '%s' never fires again",
                   e->s.name, e->s.spec);
    }
    sc->need_last = 0;
}

/* ---- the set of schedules ---- */

static int
build(jr_sched *sc, const jr_schedules *cfg)
{
    int i;

    if (jr_schedules_copy(&sc->cfg, cfg) < 0)
        return -1;
    if (sc->cfg.n > 0 &&
        (sc->e = calloc((size_t)sc->cfg.n, sizeof *sc->e)) == NULL) {
        jr_schedules_free(&sc->cfg);
        return -1;
    }
    for (i = 0; i < sc->cfg.n; i++)
        sc->e[i].s = sc->cfg.s[i];
    sc->n = sc->cfg.n;
    sc->need_last = sc->n > 0;
    return 0;
}

int
jr_sched_init(master *m)
{
    if ((m->sched = calloc(1, sizeof *m->sched)) == NULL ||
        build(m->sched, &m->cfg->schedules) < 0)
        return -1;
    if (m->sched->n > 0)
        jr_log(JR_LOG_INFO, "%d schedule%s", m->sched->n,
               m->sched->n == 1 ? "" : "s");
    return 0;
}

static void
free_sched(jr_sched *sc)
{
    if (sc == NULL)
        return;
    free_fires(sc->pending, sc->npending);
    free_fires(sc->inflight, sc->ninflight);
    free(sc->pending);
    free(sc->inflight);
    free(sc->e);
    jr_schedules_free(&sc->cfg);
    free(sc);
}

void
jr_sched_free(master *m)
{
    free_sched(m->sched);
    m->sched = NULL;
}

static const ent *
find(const jr_sched *sc, const char *name)
{
    int i;

    for (i = 0; i < sc->n; i++)
        if (strcmp(sc->e[i].s.name, name) == 0)
            return &sc->e[i];
    return NULL;
}

void
jr_sched_reload(master *m, const jr_schedules *cfg)
{
    jr_sched *old = m->sched, *sc = calloc(1, sizeof *sc);
    int i, added = 0, changed = 0, kept = 0, removed = 0;
    const ent *o;

    if (sc == NULL || build(sc, cfg) < 0) {
        free(sc);
        jr_log(JR_LOG_ERROR, "reload: schedules unchanged: out of memory");
        return;
    }
    for (i = 0; i < sc->n; i++) {
        ent *e = &sc->e[i];
        if ((o = find(old, e->s.name)) == NULL) {
            added++;
        } else if (!jr_schedule_same(&o->s, &e->s) || !o->loaded) {
            changed += o->loaded;
            added += !o->loaded;
        } else {
            kept++;
            e->loaded = 1;
            e->next = o->next;
            e->warned_gen = o->warned_gen;
        }
    }
    for (i = 0; i < old->n; i++)
        removed += find(sc, old->e[i].s.name) == NULL;
    sc->need_last = added + changed > 0;
    /* fires waiting for schedules still the same stay; in flight ones
     * finish with the old set's memory (theirs) */
    sc->inflight = old->inflight;
    sc->ninflight = old->ninflight;
    old->inflight = NULL;
    old->ninflight = 0;
    for (i = 0; i < old->npending; i++) {
        const ent *e = find(sc, old->pending[i].f.schedule);
        if (e != NULL && e->loaded)
            add_fire(sc, e, old->pending[i].f.at);
    }
    m->sched = sc;
    free_sched(old);
    jr_log(JR_LOG_INFO, "reload: schedules: %d added, %d changed, %d "
           "removed, %d unchanged", added, changed, removed, kept);
}

/* ---- each second ---- */

/* Reports once per generation the schedules whose job has no handler:
 * their jobs wait like any job without one. */
static void
warn_handlers(master *m, jr_sched *sc)
{
    int i;

    for (i = 0; m->gen != NULL && i < sc->n; i++) {
        ent *e = &sc->e[i];
        if (e->warned_gen == m->gen->id)
            continue;
        e->warned_gen = m->gen->id;
        if (jr_gen_handler(m->gen, e->s.job) == NULL)
            jr_log(JR_LOG_WARN, "schedule '%s': no handler for job '%s' in "
                   "%s; its jobs wait until one is loaded", e->s.name,
                   e->s.job, m->cfg->scripts);
    }
}

int
jr_sched_due(master *m)
{
    jr_sched *sc = m->sched;
    double now;
    int i;

    if (!m->fire_due || sc == NULL || m->stopping)
        return 0;
    m->fire_due = 0;
    warn_handlers(m, sc);
    if (sc->need_last)
        return 1;
    now = jr_now();
    for (i = 0; i < sc->n; i++) {
        ent *e = &sc->e[i];
        while (e->loaded && e->next > 0 && e->next <= now &&
               sc->npending < FIRES_MAX) {
            add_fire(sc, e, e->next);
            e->next = next_after(e, e->next);
        }
    }
    return sc->npending > 0;
}

void
jr_sched_spec(master *m, jr_cycle *c)
{
    jr_sched *sc = m->sched;
    int i;

    c->nlast_fires = -1;
    if (sc == NULL || sc->ninflight > 0)
        return;
    c->read_fires = sc->need_last;
    c->fires_keep = JR_FIRES_KEEP;
    if (sc->need_last || sc->npending == 0 ||
        (c->fires = malloc((size_t)sc->npending * sizeof *c->fires)) == NULL)
        return;
    for (i = 0; i < sc->npending; i++)
        c->fires[i] = sc->pending[i].f;
    c->nfires = sc->npending;
    free(sc->inflight);
    sc->inflight = sc->pending;
    sc->ninflight = sc->npending;
    sc->pending = NULL;
    sc->npending = 0;
}

/* The database is in trouble: forget what waits and catch up from the
 * fires it holds once it is back (an outage is downtime too). */
static void
trouble(jr_sched *sc, const jr_cycle *c)
{
    int i;

    if (!sc->need_last)
        jr_log(JR_LOG_WARN, "schedules: %s; they catch up once the "
               "database is back", c->err.msg);
    free_fires(sc->pending, sc->npending);
    sc->npending = 0;
    for (i = 0; i < sc->n; i++)
        sc->e[i].loaded = 0;
    sc->need_last = sc->n > 0;
}

static void
fired(master *m, const jr_fire *f)
{
    char at[40];

    jr_time_iso(f->at, at, sizeof at);
    if (f->inserted > 0) {
        jr_log(JR_LOG_INFO, "schedule '%s': fired job %lld (%s) for %s",
               f->schedule, (long long)f->id, f->job.name, at);
        m->want_claim = 1;
    } else if (f->inserted == 0) {
        jr_log(JR_LOG_DEBUG, "schedule '%s': %s fired by another runner",
               f->schedule, at);
    }
}

void
jr_sched_cycle(master *m, jr_cycle *c)
{
    jr_sched *sc = m->sched;
    int i, bad = c->err.code != 0, had = c->read_fires || c->nfires > 0;

    if (sc == NULL)
        return;
    for (i = 0; i < c->nfires && i < sc->ninflight; i++)
        if (!bad || c->fires[i].inserted != 0)
            fired(m, &c->fires[i]);
    free(c->fires);
    c->fires = NULL;
    c->nfires = 0;
    free_fires(sc->inflight, sc->ninflight);
    sc->ninflight = 0;
    if (bad && had)
        trouble(sc, c);
    else if (c->read_fires && c->nlast_fires >= 0)
        load(sc, c);
    if (sc->npending > 0)
        m->fire_due = 1;        /* catch-up fires: in the next cycle */
    jr_cycle_free_fires(c);
}
