/* events.c - the hook events of the master, each built from its state:
 * on_start and on_stop, a job's start and end (success, retry, dead),
 * on_tick with the figures of its interval, on_scale and on_reload.
 * hooks.c runs them in the config's Lua state. A service (service.h):
 * owns the figures of on_tick's interval, its timer and the cycle's
 * counts for it (counts.h). Uses service.h, svc.h, counts.h. */
#include <stdlib.h>
#include <unistd.h>

#include "base/log.h"
#include "base/util.h"
#include "master/service.h"
#include "master/svc.h"
#include "services/qstate.h"
#include "services/counts.h"

typedef struct events {         /* the service's state */
    long        tick_done, tick_failed; /* counters at last tick */
    double      tick_at;
    double      lat[256];       /* start latencies since last tick */
    int         nlat;
    int         count_due;      /* a tick wants the ready count */
    jr_flag_timer tick;         /* sets count_due: the cycle counts the
                                   backlog, then on_tick fires */
    jr_counts   counts;         /* the cycle's while it runs */
} events;

/* Job j starts now in worker number worker. */
static void
job_start(master *m, void *st, const jr_job *j, int worker)
{
    events *ev = st;
    jr_hooks *h = jr_svc_hooks(m);

    if (ev->nlat < (int)(sizeof ev->lat / sizeof ev->lat[0]) &&
        jr_hooks_has(h, JR_HOOK_TICK))
        ev->lat[ev->nlat++] = jr_now() - j->run_at;
    if (jr_hook_begin(h, JR_HOOK_JOB_START)) {
        jr_hook_int(h, "id", j->id);
        jr_hook_str(h, "name", j->name);
        jr_hook_int(h, "attempt", j->attempt);
        jr_hook_str(h, "queue", j->queue);
        jr_hook_int(h, "priority", j->priority);
        jr_hook_int(h, "worker", worker);
        jr_hook_num(h, "waited", jr_now() - j->run_at);
        jr_hook_fire(h, NULL);
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
        [JR_PROGRESS] = -1, [JR_STEP] = -1, [JR_WAIT] = -1};
    jr_hooks *h = jr_svc_hooks(m);

    (void)st;
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
    long ready = ev->counts.ready, done, failed;
    double now = jr_mono(), secs = now - ev->tick_at, target;
    jr_hooks *h = jr_svc_hooks(m);
    jr_svc_counts n;
    int busy, total;

    jr_svc_count(m, &n);
    done = n.done - ev->tick_done;
    failed = n.failed + n.dead - ev->tick_failed;
    busy = n.busy;
    total = n.active;

    if (!jr_hook_begin(h, JR_HOOK_TICK))
        return;
    qsort(ev->lat, (size_t)ev->nlat, sizeof ev->lat[0], by_value);
    jr_hook_open(h, "workers");
    jr_hook_int(h, "busy", busy);
    jr_hook_int(h, "idle", total - busy > 0 ? total - busy : 0);
    jr_hook_int(h, "total", total);
    jr_hook_int(h, "target", n.target);
    jr_hook_int(h, "min", jr_svc_config(m)->conc_min);
    jr_hook_int(h, "max", jr_svc_config(m)->conc_max);
    jr_hook_close(h);
    jr_hook_int(h, "backlog", ready + (long)jr_svc_queued(m));
    jr_hook_num(h, "jobs_per_s", secs > 0 ? (double)done / secs : 0);
    jr_hook_num(h, "failure_rate", done + failed > 0 ?
                (double)failed / (double)(done + failed) : 0);
    jr_hook_open(h, "latency");
    if (ev->nlat > 0) {
        jr_hook_num(h, "p50", ev->lat[ev->nlat / 2]);
        jr_hook_num(h, "p99", ev->lat[ev->nlat * 99 / 100]);
        jr_hook_num(h, "max", ev->lat[ev->nlat - 1]);
    }
    jr_hook_close(h);
    jr_hook_int(h, "done", n.done);
    jr_hook_int(h, "failed", n.failed);
    jr_hook_int(h, "dead", n.dead);
    jr_hook_num(h, "interval", secs);
    jr_service_figures(m, c);  /* queues, limits */
    ev->tick_at = now;
    ev->tick_done = n.done;
    ev->tick_failed = n.failed + n.dead;
    ev->nlat = 0;
    if (jr_hook_fire_targets(h, &target, queue_target, m) == 1 &&
        target == target)
        jr_svc_set_target(m, (int)(target + 0.5), "tick");
}

static int
init(master *m, void **st)
{
    events *ev = calloc(1, sizeof *ev);

    if ((*st = ev) == NULL)
        return -1;
    if (jr_hooks_has(jr_svc_hooks(m), JR_HOOK_TICK))
        jr_svc_flag(m, &ev->tick, jr_svc_config(m)->tick_interval,
                    &ev->count_due);
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
    if (ev != NULL)
        jr_svc_unflag(&ev->tick);
    free(ev);
}

/* The on_scale hook, and the log line. */
static void
scaled(master *m, void *st, int from, int to, const char *reason)
{
    jr_hooks *h = jr_svc_hooks(m);

    (void)st;
    jr_log(JR_LOG_INFO, "concurrency %d -> %d (%s)", from, to, reason);
    if (jr_hook_begin(h, JR_HOOK_SCALE)) {
        jr_hook_int(h, "from", from);
        jr_hook_int(h, "to", to);
        jr_hook_str(h, "reason", reason);
        jr_hook_fire(h, NULL);
    }
}

/* The on_reload hook. */
static void
reloaded(master *m, void *st, int ok, const char *error)
{
    jr_hooks *h = jr_svc_hooks(m);
    const char *hash;

    (void)st;
    jr_svc_gen(m, &hash);
    if (jr_hook_begin(h, JR_HOOK_RELOAD)) {
        jr_hook_bool(h, "ok", ok);
        jr_hook_str(h, "generation", hash);
        jr_hook_str(h, "error", error);
        jr_hook_fire(h, NULL);
    }
}

/* The on_start hook. */
static void
started(master *m, void *st)
{
    const jr_config *cfg = jr_svc_config(m);
    jr_hooks *h = jr_svc_hooks(m);

    (void)st;
    if (jr_hook_begin(h, JR_HOOK_START)) {
        jr_hook_int(h, "pid", getpid());
        jr_hook_str(h, "backend", jr_svc_url(m));
        jr_hook_str(h, "scripts", cfg->scripts);
        jr_hook_int(h, "min", cfg->conc_min);
        jr_hook_int(h, "max", cfg->conc_max);
        jr_hook_fire(h, NULL);
    }
}

/* The on_stop hook. */
static void
stopped(master *m, void *st)
{
    jr_hooks *h = jr_svc_hooks(m);
    jr_svc_counts n;

    (void)st;
    jr_svc_count(m, &n);
    if (jr_hook_begin(h, JR_HOOK_STOP)) {
        jr_hook_int(h, "done", n.done);
        jr_hook_int(h, "failed", n.failed);
        jr_hook_int(h, "dead", n.dead);
        jr_hook_fire(h, NULL);
    }
}

const jr_service jr_events_service = {
    .name = "events", .init = init, .due = due,
    .fill = fill, .read = read_cycle, .job_start = job_start,
    .job_end = job_end, .reloaded = reloaded, .scaled = scaled,
    .free = free_events, .started = started, .stopped = stopped,
};
