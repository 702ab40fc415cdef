/* events.c - the hook events of the master, each built from its state:
 * on_start and on_stop, a job's start and end (success, retry, dead),
 * on_tick with the figures of its interval, on_scale and on_reload.
 * hooks.c runs them in the config's Lua state. A service (service.h):
 * owns the figures of on_tick's interval, its timer and the cycle's
 * counts for it (counts.h). Uses master_int.h, counts.h. */
#include <stdlib.h>
#include <unistd.h>

#include "base/log.h"
#include "master/master_int.h"
#include "services/metrics.h"
#include "services/qstate.h"
#include "services/counts.h"

typedef struct events {         /* the service's state */
    long        tick_done, tick_failed; /* counters at last tick */
    double      tick_at;
    double      lat[256];       /* start latencies since last tick */
    int         nlat;
    int         count_due;      /* a tick wants the ready count */
    flag_timer  tick;           /* sets count_due: the cycle counts the
                                   backlog, then on_tick fires */
    jr_counts   counts;         /* the cycle's while it runs */
} events;

/* Job j starts now in worker number worker. */
static void
job_start(master *m, void *st, const jr_job *j, int worker)
{
    events *ev = st;

    jr_metrics_start(m->metrics, j, jr_now() - j->run_at);
    if (ev->nlat < (int)(sizeof ev->lat / sizeof ev->lat[0]) &&
        jr_hooks_has(m->hooks, JR_HOOK_TICK))
        ev->lat[ev->nlat++] = jr_now() - j->run_at;
    if (jr_hook_begin(m->hooks, JR_HOOK_JOB_START)) {
        jr_hook_int(m->hooks, "id", j->id);
        jr_hook_str(m->hooks, "name", j->name);
        jr_hook_int(m->hooks, "attempt", j->attempt);
        jr_hook_str(m->hooks, "queue", j->queue);
        jr_hook_int(m->hooks, "priority", j->priority);
        jr_hook_int(m->hooks, "worker", worker);
        jr_hook_num(m->hooks, "waited", jr_now() - j->run_at);
        jr_hook_fire(m->hooks, NULL);
    }
}

/* The job hooks for one result. */
static void
job_end(master *m, void *st, const jr_job *j, const jr_result *r,
        double secs)
{
    static const int which[] = {[JR_DONE] = JR_HOOK_JOB_SUCCESS,
        [JR_RETRY] = JR_HOOK_JOB_RETRY, [JR_DEAD] = JR_HOOK_JOB_DEAD,
        [JR_SNOOZE] = -1, [JR_RELEASE] = -1,
        [JR_EXPIRED] = JR_HOOK_JOB_DEAD, [JR_CANCELLED] = -1,
        [JR_PROGRESS] = -1};
    jr_hooks *h = m->hooks;

    (void)st;
    jr_metrics_job(m->metrics, j, r, secs);
    if (h == NULL || which[r->kind] < 0 || !jr_hook_begin(h, which[r->kind]))
        return;
    jr_hook_int(h, "id", j->id);
    jr_hook_str(h, "name", j->name);
    jr_hook_int(h, "attempt", j->attempt);
    jr_hook_str(h, "queue", j->queue);
    if (r->kind == JR_DONE)
        jr_hook_num(h, "duration", secs);
    if (r->kind == JR_RETRY) {
        jr_hook_num(h, "run_at", jr_now() + r->delay);
        jr_hook_num(h, "delay", r->delay);
    }
    jr_hook_str(h, "error", r->error);
    jr_hook_fire(h, NULL);
}

static int
by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void
queue_target(const char *queue, double v, void *arg)
{
    jr_qstate_target(arg, queue, v);
}

/* The on_tick hook, with the figures of the interval since the last one
 * (those of each queue from cycle c); a number it returns becomes the
 * target concurrency, as does a table's `workers`, and its `queues`
 * ({name = n}) the queues' targets. */
static void
on_tick(master *m, events *ev, const jr_cycle *c)
{
    long ready = ev->counts.ready;
    double now = jr_mono(), secs = now - ev->tick_at, target;
    long done = m->done - ev->tick_done, failed = m->failed + m->dead -
                ev->tick_failed;
    int busy = jr_pool_busy(m), total = jr_pool_active(m);

    if (!jr_hook_begin(m->hooks, JR_HOOK_TICK))
        return;
    qsort(ev->lat, (size_t)ev->nlat, sizeof ev->lat[0], by_value);
    jr_hook_open(m->hooks, "workers");
    jr_hook_int(m->hooks, "busy", busy);
    jr_hook_int(m->hooks, "idle", total - busy > 0 ? total - busy : 0);
    jr_hook_int(m->hooks, "total", total);
    jr_hook_int(m->hooks, "target", m->target);
    jr_hook_int(m->hooks, "min", m->cfg->conc_min);
    jr_hook_int(m->hooks, "max", m->cfg->conc_max);
    jr_hook_close(m->hooks);
    jr_hook_int(m->hooks, "backlog", ready + (long)m->qlen);
    jr_hook_num(m->hooks, "jobs_per_s", secs > 0 ? (double)done / secs : 0);
    jr_hook_num(m->hooks, "failure_rate", done + failed > 0 ?
                (double)failed / (double)(done + failed) : 0);
    jr_hook_open(m->hooks, "latency");
    if (ev->nlat > 0) {
        jr_hook_num(m->hooks, "p50", ev->lat[ev->nlat / 2]);
        jr_hook_num(m->hooks, "p99", ev->lat[ev->nlat * 99 / 100]);
        jr_hook_num(m->hooks, "max", ev->lat[ev->nlat - 1]);
    }
    jr_hook_close(m->hooks);
    jr_hook_int(m->hooks, "done", m->done);
    jr_hook_int(m->hooks, "failed", m->failed);
    jr_hook_int(m->hooks, "dead", m->dead);
    jr_hook_num(m->hooks, "interval", secs);
    jr_service_figures(m, c);  /* queues, limits */
    ev->tick_at = now;
    ev->tick_done = m->done;
    ev->tick_failed = m->failed + m->dead;
    ev->nlat = 0;
    if (jr_hook_fire_targets(m->hooks, &target, queue_target, m) == 1 &&
        target == target)
        jr_pool_set_target(m, (int)(target + 0.5), "tick");
}

static int
init(master *m, void **st)
{
    events *ev = calloc(1, sizeof *ev);

    if ((*st = ev) == NULL)
        return -1;
    if (jr_hooks_has(m->hooks, JR_HOOK_TICK))
        jr_master_flag(m, &ev->tick, m->cfg->tick_interval, &ev->count_due);
    ev->tick_at = jr_mono();
    return 0;
}

static int
due(master *m, void *st)
{
    (void)m;
    return ((events *)st)->count_due;
}

/* A tick is due: the cycle counts the backlog (per queue, per limit). */
static void
fill(master *m, void *st, jr_cycle *c)
{
    events *ev = st;

    (void)m;
    jr_counts_reset(&ev->counts);
    if (ev->count_due)
        jr_cycle_attach(c, &jr_counts_step, &ev->counts);
    ev->count_due = 0;
}

static void
read_cycle(master *m, void *st, jr_cycle *c)
{
    if (jr_cycle_io(c, &jr_counts_step) != NULL)
        on_tick(m, st, c);
}

static void
free_events(master *m, void *st)
{
    events *ev = st;

    (void)m;
    if (ev != NULL && ev->tick.ev != NULL)
        event_free(ev->tick.ev);
    free(ev);
}

/* The on_scale hook, and the log line. */
static void
scaled(master *m, void *st, int from, int to, const char *reason)
{
    (void)st;
    jr_log(JR_LOG_INFO, "concurrency %d -> %d (%s)", from, to, reason);
    if (jr_hook_begin(m->hooks, JR_HOOK_SCALE)) {
        jr_hook_int(m->hooks, "from", from);
        jr_hook_int(m->hooks, "to", to);
        jr_hook_str(m->hooks, "reason", reason);
        jr_hook_fire(m->hooks, NULL);
    }
}

/* The on_reload hook, and the reloads counted for /metrics. */
static void
reloaded(master *m, void *st, int ok, const char *error)
{
    (void)st;
    jr_metrics_reload(m->metrics, ok);
    if (jr_hook_begin(m->hooks, JR_HOOK_RELOAD)) {
        jr_hook_bool(m->hooks, "ok", ok);
        jr_hook_str(m->hooks, "generation", m->gen ? m->gen->hash : NULL);
        jr_hook_str(m->hooks, "error", error);
        jr_hook_fire(m->hooks, NULL);
    }
}

/* The on_start hook. */
static void
started(master *m, void *st)
{
    (void)st;
    if (jr_hook_begin(m->hooks, JR_HOOK_START)) {
        jr_hook_int(m->hooks, "pid", getpid());
        jr_hook_str(m->hooks, "backend", m->url);
        jr_hook_str(m->hooks, "scripts", m->cfg->scripts);
        jr_hook_int(m->hooks, "min", m->cfg->conc_min);
        jr_hook_int(m->hooks, "max", m->cfg->conc_max);
        jr_hook_fire(m->hooks, NULL);
    }
}

/* The on_stop hook. */
static void
stopped(master *m, void *st)
{
    (void)st;
    if (jr_hook_begin(m->hooks, JR_HOOK_STOP)) {
        jr_hook_int(m->hooks, "done", m->done);
        jr_hook_int(m->hooks, "failed", m->failed);
        jr_hook_int(m->hooks, "dead", m->dead);
        jr_hook_fire(m->hooks, NULL);
    }
}

const jr_service jr_events_service = {
    .name = "events", .init = init, .due = due,
    .fill = fill, .read = read_cycle, .job_start = job_start,
    .job_end = job_end, .reloaded = reloaded, .scaled = scaled,
    .free = free_events, .started = started, .stopped = stopped,
};
