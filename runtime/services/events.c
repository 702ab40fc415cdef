/* events.c - the hook events of the master, each built from its state:
 * on_start and on_stop, a job's start and end (success, retry, dead),
 * on_tick with the figures of its interval, on_scale and on_reload.
 * hooks.c runs them in the config's Lua state. Uses master_int.h. */
#include <stdlib.h>
#include <unistd.h>

#include "base/log.h"
#include "master/master_int.h"
#include "services/metrics.h"

/* jobs[0] of w starts now. */
void
jr_event_job_start(master *m, wk *w)
{
    const jr_job *j = w->jobs[0];

    w->started = jr_mono();
    jr_metrics_start(m->metrics, j, jr_now() - j->run_at);
    if (m->nlat < (int)(sizeof m->lat / sizeof m->lat[0]) &&
        jr_hooks_has(m->hooks, JR_HOOK_TICK))
        m->lat[m->nlat++] = jr_now() - j->run_at;
    if (jr_hook_begin(m->hooks, JR_HOOK_JOB_START)) {
        jr_hook_int(m->hooks, "id", j->id);
        jr_hook_str(m->hooks, "name", j->name);
        jr_hook_int(m->hooks, "attempt", j->attempt);
        jr_hook_str(m->hooks, "queue", j->queue);
        jr_hook_int(m->hooks, "priority", j->priority);
        jr_hook_int(m->hooks, "worker", w->id);
        jr_hook_num(m->hooks, "waited", jr_now() - j->run_at);
        jr_hook_fire(m->hooks, NULL);
    }
}

/* The job hooks for one result. */
void
jr_event_job(master *m, const jr_job *j, const jr_result *r, double secs)
{
    static const int which[] = {[JR_DONE] = JR_HOOK_JOB_SUCCESS,
        [JR_RETRY] = JR_HOOK_JOB_RETRY, [JR_DEAD] = JR_HOOK_JOB_DEAD,
        [JR_SNOOZE] = -1, [JR_RELEASE] = -1,
        [JR_EXPIRED] = JR_HOOK_JOB_DEAD, [JR_CANCELLED] = -1,
        [JR_PROGRESS] = -1};
    jr_hooks *h = m->hooks;

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
void
jr_event_tick(master *m, const jr_cycle *c)
{
    long ready = c->ready;
    double now = jr_mono(), secs = now - m->tick_at, target;
    long done = m->done - m->tick_done, failed = m->failed + m->dead -
                m->tick_failed;
    int busy = jr_pool_busy(m), total = jr_pool_active(m);

    if (!jr_hook_begin(m->hooks, JR_HOOK_TICK))
        return;
    qsort(m->lat, (size_t)m->nlat, sizeof m->lat[0], by_value);
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
    if (m->nlat > 0) {
        jr_hook_num(m->hooks, "p50", m->lat[m->nlat / 2]);
        jr_hook_num(m->hooks, "p99", m->lat[m->nlat * 99 / 100]);
        jr_hook_num(m->hooks, "max", m->lat[m->nlat - 1]);
    }
    jr_hook_close(m->hooks);
    jr_hook_int(m->hooks, "done", m->done);
    jr_hook_int(m->hooks, "failed", m->failed);
    jr_hook_int(m->hooks, "dead", m->dead);
    jr_hook_num(m->hooks, "interval", secs);
    jr_qstate_tick(m, c);
    jr_limitsrun_tick(m, c);
    m->tick_at = now;
    m->tick_done = m->done;
    m->tick_failed = m->failed + m->dead;
    m->nlat = 0;
    if (jr_hook_fire_targets(m->hooks, &target, queue_target, m) == 1 &&
        target == target)
        jr_pool_set_target(m, (int)(target + 0.5), "tick");
}

void
jr_event_scale(master *m, int from, int to, const char *reason)
{
    jr_log(JR_LOG_INFO, "concurrency %d -> %d (%s)", from, to, reason);
    if (jr_hook_begin(m->hooks, JR_HOOK_SCALE)) {
        jr_hook_int(m->hooks, "from", from);
        jr_hook_int(m->hooks, "to", to);
        jr_hook_str(m->hooks, "reason", reason);
        jr_hook_fire(m->hooks, NULL);
    }
}

void
jr_event_reload(master *m, int ok, const char *error)
{
    jr_metrics_reload(m->metrics, ok);
    if (jr_hook_begin(m->hooks, JR_HOOK_RELOAD)) {
        jr_hook_bool(m->hooks, "ok", ok);
        jr_hook_str(m->hooks, "generation", m->gen ? m->gen->hash : NULL);
        jr_hook_str(m->hooks, "error", error);
        jr_hook_fire(m->hooks, NULL);
    }
}

/* The on_start hook. */
void
jr_event_start(master *m)
{
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
void
jr_event_stop(master *m)
{
    if (jr_hook_begin(m->hooks, JR_HOOK_STOP)) {
        jr_hook_int(m->hooks, "done", m->done);
        jr_hook_int(m->hooks, "failed", m->failed);
        jr_hook_int(m->hooks, "dead", m->dead);
        jr_hook_fire(m->hooks, NULL);
    }
}
