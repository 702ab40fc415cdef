/* sched.c - recurring jobs in the master: each schedule's next fire, the
 * fires due each second handed to the database cycle (whose step,
 * schedstep.c, inserts each with its job, once across runners), catch-up
 * after downtime from the last fires the database holds (read again after a
 * reconnect), catch-up whenever the runner finds itself behind (a stall,
 * a clock step), fires retried until recorded, the operator's controls
 * read each second (pause, fire now: schedq.c follows them), the
 * config's schedules followed on reload, and the schedules managed at run
 * time (docs/schedules.md) followed when their count of changes, read
 * each second, moved: the same reload of the whole set. A service (service.h) owning
 * its schedules, fires and timer; the fire queue is schedq.c's (sched.h).
 * The HTTP API reads the list it follows through its host callback.
 * Uses service.h, svc.h, cron.h, schedules.h, dbthread.h, host.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/cron.h"
#include "base/log.h"
#include "base/util.h"
#include "master/service.h"
#include "master/svc.h"
#include "config/scheddef.h"
#include "config/schedules.h"
#include "services/sched.h"
#include "http/host.h"

extern const jr_service jr_sched_service;   /* below */

typedef struct svc {            /* the service's state */
    jr_sched   *sc;             /* replaced whole by a reload */
    jr_schedules conf;          /* the config's schedules (a copy) */
    jr_schedules dyn;           /* the run-time ones followed */
    int64_t     rev;            /* their count of changes read (-1: none) */
    int         want_defs;      /* read them again if it moved */
    double      defs_at;        /* mono time of the last read of them */
    int         fire_due;       /* look for fires due */
    jr_flag_timer tick;         /* sets fire_due each second */
    double      looked;         /* wall time of the last look (0: none) */
    jr_sched_io io;             /* the cycle's while it runs */
} svc;

/* After a reconnect, e had reached its next fire: the database's last
 * fire may be older (a crash undid fires, another server answers): the
 * instants between follow catch_up; e goes on from where it was. */
static void
reload_one(jr_sched *sc, ent *e, double last, double now)
{
    double upto = e->next > 0 && e->next - 0.5 < now ? e->next - 0.5 : now;

    if (last > 0 && last < upto)
        jr_schedq_catch_up(sc, e, last, upto, "since the last one the database "
                 "holds (read again after a reconnect)");
    if (e->next > 0 && e->next <= last)
        e->next = jr_schedq_next(e, last);
}

/* The last fires came back: each schedule not loaded catches up and
 * learns its next fire. A schedule never fired starts from now. */
static void
load(jr_sched *sc, const jr_sched_io *io)
{
    double now = jr_now(), last;
    int i, j;

    for (i = 0; i < sc->n; i++) {
        ent *e = &sc->e[i];
        if (e->loaded)
            continue;
        for (last = 0, j = 0; j < io->nlast_fires; j++)
            if (strcmp(io->last_fires[j].schedule, e->s.name) == 0)
                last = io->last_fires[j].at;
        e->loaded = 1;
        if (e->reread) {
            e->reread = 0;
            reload_one(sc, e, last, now);
            continue;
        }
        if (last > 0)
            jr_schedq_catch_up(sc, e, last, now, "since the last one");
        e->next = jr_schedq_next(e, last > now ? last : now);
        if (e->next == 0)
            jr_log(JR_LOG_WARN, "schedule '%s': '%s' never fires again",
                   e->s.name, e->s.spec);
    }
    sc->need_last = 0;
    if (sc->npending > 1)       /* each schedule's fires in order */
        qsort(sc->pending, (size_t)sc->npending, sizeof *sc->pending,
              jr_schedq_by_instant);
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

static int
init(master *m, void **st)
{
    svc *v = calloc(1, sizeof *v);

    if ((*st = v) == NULL || (v->sc = calloc(1, sizeof *v->sc)) == NULL ||
        jr_schedules_copy(&v->conf, &jr_svc_config(m)->schedules) < 0 ||
        build(v->sc, &v->conf) < 0)
        return -1;
    v->rev = -1;
    if (v->sc->n > 0)
        jr_log(JR_LOG_INFO, "%d schedule%s", v->sc->n,
               v->sc->n == 1 ? "" : "s");
    jr_svc_flag(m, &v->tick, 1.0, &v->fire_due);
    return 0;
}

static void
free_sched(jr_sched *sc)
{
    if (sc == NULL)
        return;
    jr_schedq_free(sc->pending, sc->npending);
    jr_schedq_free(sc->inflight, sc->ninflight);
    free(sc->pending);
    free(sc->inflight);
    free(sc->e);
    jr_schedules_free(&sc->cfg);
    free(sc);
}

static void
free_svc(master *m, void *st)
{
    svc *v = st;

    (void)m;
    if (v != NULL) {
        jr_svc_unflag(&v->tick);
        free_sched(v->sc);
        jr_schedules_free(&v->conf);
        jr_schedules_free(&v->dyn);
    }
    free(v);
}

/* Follows a new set of schedules (the config's and the run-time ones,
 * borrowed): added ones start (catching up from their last fire in the
 * database, if any), removed ones stop, changed ones start again, the
 * others go on. why begins the log line. */
static void
apply(svc *v, const jr_schedules *cfg, const char *why)
{
    jr_sched *old = v->sc, *sc = calloc(1, sizeof *sc);
    int i, added = 0, changed = 0, kept = 0, removed = 0;
    const ent *o;

    if (sc == NULL || build(sc, cfg) < 0) {
        free(sc);
        jr_log(JR_LOG_ERROR, "%s: schedules unchanged: out of memory", why);
        return;
    }
    for (i = 0; i < sc->n; i++) {
        ent *e = &sc->e[i];
        if ((o = jr_schedq_find(old, e->s.name)) == NULL) {
            added++;
        } else if (!jr_schedule_same(&o->s, &e->s) || !o->loaded) {
            changed += o->loaded;
            added += !o->loaded;
        } else {
            kept++;
            e->loaded = 1;
            e->next = o->next;
            e->warned_gen = o->warned_gen;
            e->asked = o->asked;
            e->paused = o->paused;
        }
    }
    for (i = 0; i < old->n; i++)
        removed += jr_schedq_find(sc, old->e[i].s.name) == NULL;
    sc->need_last = added + changed > 0;
    /* fires waiting for schedules still the same stay; in flight ones
     * finish with the old set's memory (theirs) */
    sc->inflight = old->inflight;
    sc->ninflight = old->ninflight;
    old->inflight = NULL;
    old->ninflight = 0;
    for (i = 0; i < old->npending; i++) {
        const ent *e = jr_schedq_find(sc, old->pending[i].f.schedule);
        fire_req *r = e != NULL && e->loaded ?
                      jr_schedq_add(sc, e, old->pending[i].f.at) : NULL;
        if (r != NULL)          /* one asked for by hand stays so */
            r->f.manual = old->pending[i].f.manual;
    }
    v->sc = sc;
    free_sched(old);
    /* a run-time read that changed nothing (the first, with none added
     * at run time) is no news */
    jr_log(added + changed + removed == 0 && strcmp(why, "reload") != 0 ?
           JR_LOG_DEBUG : JR_LOG_INFO, "%s: schedules: %d added, %d "
           "changed, %d removed, %d unchanged", why, added, changed,
           removed, kept);
}

/* The config's schedules and the run-time ones whose names it does not
 * hold, into all (strings borrowed: free all.s only). -1 out of memory. */
static int
merged(const svc *v, jr_schedules *all)
{
    int i, j;

    memset(all, 0, sizeof *all);
    all->timezone = v->conf.timezone;
    if (v->conf.n + v->dyn.n == 0)
        return 0;
    if ((all->s = calloc((size_t)(v->conf.n + v->dyn.n), sizeof *all->s)) ==
        NULL)
        return -1;
    for (i = 0; i < v->conf.n; i++)
        all->s[all->n++] = v->conf.s[i];
    for (i = 0; i < v->dyn.n; i++) {
        for (j = 0; j < v->conf.n; j++)
            if (strcmp(v->conf.s[j].name, v->dyn.s[i].name) == 0)
                break;
        if (j == v->conf.n)
            all->s[all->n++] = v->dyn.s[i];
    }
    return 0;
}

static void
apply_all(svc *v, const char *why)
{
    jr_schedules all;

    if (merged(v, &all) < 0) {
        jr_log(JR_LOG_ERROR, "%s: schedules unchanged: out of memory", why);
        return;
    }
    apply(v, &all, why);
    free(all.s);
}

/* Follows the schedules of a config just reloaded (borrowed); a name it
 * shares with a run-time schedule is the config's (logged). */
static void
reload(master *m, void *st, const jr_config *conf)
{
    svc *v = st;
    jr_schedules copy;
    int i, j;

    (void)m;
    if (jr_schedules_copy(&copy, &conf->schedules) < 0) {
        jr_log(JR_LOG_ERROR, "reload: schedules unchanged: out of memory");
        return;
    }
    jr_schedules_free(&v->conf);
    v->conf = copy;
    for (i = 0; i < v->dyn.n; i++)
        for (j = 0; j < v->conf.n; j++)
            if (strcmp(v->conf.s[j].name, v->dyn.s[i].name) == 0)
                jr_log(JR_LOG_ERROR, "reload: schedule '%s' is in the config "
                       "and was added at run time: the config's is "
                       "followed; remove one (jobrunner schedule remove %s, "
                       "or rename it in the config)", v->dyn.s[i].name,
                       v->dyn.s[i].name);
    apply_all(v, "reload");
}

/* The run-time schedules a cycle read (their count moved): each read by
 * the config's reader; one it refuses, or whose name the config holds,
 * is not followed (logged). */
static void
follow_defs(master *m, svc *v, const jr_sched_io *io)
{
    const jr_config *cfg = jr_svc_config(m);
    jr_schedules dyn = {0}, one;
    jr_schedule *more;
    jr_err err;
    int i, j;

    for (i = 0; i < io->ndefs; i++) {
        const jr_sched_def *d = &io->defs[i];
        for (j = 0; j < v->conf.n; j++)
            if (strcmp(v->conf.s[j].name, d->name) == 0)
                break;
        if (j < v->conf.n) {
            jr_log(JR_LOG_ERROR, "schedule '%s': in the config and added "
                   "at run time: the config's is followed; remove one "
                   "(jobrunner schedule remove %s)", d->name, d->name);
            continue;
        }
        if (jr_scheddef_read(d->name, d->def, cfg->schedules.timezone,
                             cfg->max_payload, &one, &err) < 0) {
            jr_log(JR_LOG_ERROR, "run-time %s: not followed", err.msg);
            continue;
        }
        if ((more = realloc(dyn.s, (size_t)(dyn.n + 1) * sizeof *more)) ==
            NULL) {
            jr_schedules_free(&one);
            jr_schedules_free(&dyn);
            jr_log(JR_LOG_ERROR, "schedules: run-time change not followed: "
                   "out of memory");
            v->rev = -1;        /* read again */
            return;
        }
        dyn.s = more;
        dyn.s[dyn.n++] = one.s[0];      /* its strings move */
        free(one.s);
        free(one.timezone);
    }
    jr_schedules_free(&v->dyn);
    v->dyn = dyn;
    v->rev = io->rev;
    apply_all(v, "run-time change");
}

/* ---- each second ---- */

/* Reports once per generation the schedules whose job has no handler:
 * their jobs wait like any job without one. */
static void
warn_handlers(master *m, jr_sched *sc)
{
    int i, gen = jr_svc_gen(m, NULL);

    for (i = 0; gen != 0 && i < sc->n; i++) {
        ent *e = &sc->e[i];
        if (e->warned_gen == gen)
            continue;
        e->warned_gen = gen;
        if (!jr_svc_handles(m, e->s.job))
            jr_log(JR_LOG_WARN, "schedule '%s': no handler for job '%s' in "
                   "%s; its jobs wait until one is loaded", e->s.name,
                   e->s.job, jr_svc_config(m)->scripts);
    }
}

/* Each second (fire_due): whether the next cycle has schedule work. */
static int
due(master *m, void *st)
{
    svc *v = st;
    jr_sched *sc = v->sc;
    double now;
    int i, behind;

    if (sc == NULL || jr_svc_stopping(m))
        return 0;
    if (!v->fire_due)           /* waiting or retried fires */
        return sc->need_last || sc->npending > 0 || v->want_defs;
    v->fire_due = 0;
    warn_handlers(m, sc);
    sc->want_ctl = sc->n > 0;   /* each second: pauses, fires asked for */
    /* and the run-time schedules' changes: each second where the runner
     * cycles each second anyway (it has schedules, or polls each
     * second); else in the cycles it has (fill), one a second at most,
     * a change waking it (its write: the NOTIFY, the WAL) */
    v->want_defs = sc->n > 0 || jr_svc_config(m)->poll_interval <= 1.0;
    if (sc->need_last)
        return 1;
    now = jr_now();
    behind = v->looked > 0 && now - v->looked > BEHIND;
    v->looked = now;
    for (i = 0; i < sc->n; i++) {
        ent *e = &sc->e[i];
        if (behind && e->loaded && e->next > 0 && e->next < now - BEHIND) {
            jr_schedq_catch_up(sc, e, e->next - 0.5, now, "while the runner was "
                     "behind");
            e->next = jr_schedq_next(e, now);
        }
        while (e->loaded && e->next > 0 && e->next <= now &&
               sc->npending < FIRES_MAX) {
            jr_schedq_add(sc, e, e->next);
            e->next = jr_schedq_next(e, e->next);
        }
    }
    jr_schedq_expire(sc, now);
    return sc->npending > 0 || sc->want_ctl || v->want_defs;
}

/* Attaches to cycle c the step with the fires due (or the read of the
 * last fires) and the read of the controls. */
static void
fill(master *m, void *st, jr_cycle *c)
{
    svc *v = st;
    jr_sched *sc = v->sc;
    jr_sched_io *io = &v->io;
    int i;

    double now = jr_mono();

    (void)m;
    jr_sched_io_reset(io);
    if (now - v->defs_at >= 1.0)        /* a cycle it has: one a second */
        v->want_defs = 1;
    if (sc == NULL || sc->ninflight > 0)
        return;
    io->read_ctl = sc->want_ctl;
    sc->want_ctl = 0;
    if (v->want_defs)
        v->defs_at = now;
    io->read_defs = v->want_defs;
    io->rev = v->rev;
    v->want_defs = 0;
    io->read_fires = sc->need_last;
    if (io->read_ctl || io->read_fires || io->read_defs ||
        (sc->npending > 0 && !sc->need_last))
        jr_cycle_attach(c, &jr_sched_step, io);
    if (sc->need_last || sc->npending == 0 ||
        (io->fires = malloc((size_t)sc->npending * sizeof *io->fires)) ==
        NULL)
        return;
    for (i = 0; i < sc->npending; i++)
        io->fires[i] = sc->pending[i].f;
    io->nfires = sc->npending;
    free(sc->inflight);
    sc->inflight = sc->pending;
    sc->ninflight = sc->npending;
    sc->pending = NULL;
    sc->npending = 0;
}

/* After a reconnect: every schedule reads its last fire again before it
 * fires (what it had reached and what waits are kept). */
static void
reread(jr_sched *sc)
{
    int i;

    if (sc->n == 0)
        return;
    jr_log(JR_LOG_INFO, "schedules: the database connection was opened "
           "again: reading each schedule's last fire");
    for (i = 0; i < sc->n; i++) {
        sc->e[i].reread = sc->e[i].loaded;
        sc->e[i].loaded = 0;
    }
    sc->need_last = 1;
}

/* The in-flight fires from done on were not recorded: they wait again,
 * before the newer ones, and are retried. */
static int
again(jr_sched *sc, int done)
{
    int n = sc->ninflight - done, i;
    fire_req *all;

    if (n <= 0)
        return 0;
    if ((all = malloc((size_t)(n + sc->npending) * sizeof *all)) == NULL) {
        for (i = done; i < sc->ninflight; i++)
            jr_log(JR_LOG_ERROR, "schedule '%s': out of memory; the fire at "
                   "%.0f is skipped", sc->inflight[i].f.schedule,
                   sc->inflight[i].f.at);
        jr_schedq_free(sc->inflight + done, n);
        return 0;
    }
    memcpy(all, sc->inflight + done, (size_t)n * sizeof *all);
    if (sc->npending > 0)
        memcpy(all + n, sc->pending, (size_t)sc->npending * sizeof *all);
    free(sc->pending);
    sc->pending = all;
    sc->npending += n;
    return n;
}

/* The cycle's error, said once until fires are recorded again. */
static void
failed(jr_sched *sc, const jr_cycle *c, int n)
{
    if (!sc->failing)
        jr_log(JR_LOG_WARN, "schedules: %s; %s", c->err.msg, n > 0 ?
               "the fires not recorded are retried" :
               "the last fires are read again");
    sc->failing = 1;
}

static void
fired(master *m, const jr_fire *f)
{
    char at[40];

    jr_time_iso(f->at, at, sizeof at);
    if (f->inserted > 0) {
        jr_log(JR_LOG_INFO, "schedule '%s': fired job %lld (%s) for %s",
               f->schedule, (long long)f->id, f->job.name, at);
        jr_svc_want_claim(m);
    } else if (f->inserted == 0) {
        jr_log(JR_LOG_DEBUG, "schedule '%s': %s fired by another runner",
               f->schedule, at);
    } else if (f->inserted == -3) {
        jr_log(JR_LOG_INFO, "schedule '%s': the fire at %s is skipped: job "
               "%lld of the fire before has not ended (overlap = \"skip\")",
               f->schedule, at, (long long)f->id);
    } else if (f->inserted == -2) {
        jr_log(JR_LOG_DEBUG, "schedule '%s': paused: the fire at %s is "
               "skipped", f->schedule, at);
    }
}

/* After cycle c: logs the fires, catches up from the last fires read. */
static void
taken(master *m, void *st, jr_cycle *c)
{
    svc *v = st;
    jr_sched *sc = v->sc;
    jr_sched_io *io = &v->io;
    int i, n, done;

    if (sc == NULL)
        return;
    done = io->nfires_done < sc->ninflight ? io->nfires_done :
           sc->ninflight;
    for (i = 0; i < done && i < io->nfires; i++)
        fired(m, &io->fires[i]);
    free(io->fires);
    io->fires = NULL;
    io->nfires = 0;
    n = again(sc, done);
    jr_schedq_free(sc->inflight, done);
    sc->ninflight = 0;
    if (n > 0 || (io->read_fires && io->nlast_fires < 0 && c->err.code != 0))
        failed(sc, c, n);
    else if (done > 0 || io->nlast_fires >= 0)
        sc->failing = sc->dropping = 0;
    if (c->reconnected)
        reread(sc);
    else if (io->read_fires && io->nlast_fires >= 0)
        load(sc, io);
    if (io->nctl >= 0 && !c->reconnected)
        jr_schedq_controls(sc, io, jr_now());
    if (io->ndefs >= 0) {       /* after: the set is replaced */
        follow_defs(m, v, io);
        sc = v->sc;
    }
    if (sc->npending > 0)
        v->fire_due = 1;        /* catch-up and retried fires: next cycle */
    jr_sched_io_free(io);
}

/* The schedules the runner follows now, for the HTTP API's list and
 * controls; valid until the next reload (borrowed). */
static const jr_schedules *
host_list(void *runner)
{
    static const jr_schedules none;
    const svc *v = jr_service_state(runner, &jr_sched_service);

    return v != NULL && v->sc != NULL ? &v->sc->cfg : &none;
}

static int
host(master *m, jr_httphost *h)
{
    (void)m;
    h->schedules = host_list;
    return 0;
}

const jr_service jr_sched_service = {
    .name = "schedules", .host = host, .init = init, .due = due,
    .fill = fill, .taken = taken, .drop = taken, .reload = reload, .free = free_svc};
