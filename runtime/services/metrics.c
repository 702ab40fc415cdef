/* metrics.c - the runner's own counters and histograms, kept as jobs pass
 * (its service's callbacks count them), written in the Prometheus text
 * format (version 0.0.4) for /metrics. Series are few (one per job name,
 * queue and outcome), kept in small arrays searched in order; the
 * runner's gauges (workers, queues) come from the HTTP host when written.
 * A service (service.h) whose state is its jr_metrics, made only when
 * the HTTP server runs. Uses metrics.h, host.h, api.h, job.h, service.h,
 * svc.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "http/api.h"
#include "http/host.h"
#include "base/job.h"
#include "master/service.h"
#include "master/svc.h"
#include "services/metrics.h"

#define MINUTES 60              /* throughput kept, by minute */

static const double job_buckets[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
    0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800};
#define NJOB (sizeof job_buckets / sizeof job_buckets[0])
static const double cycle_buckets[] = {0.0005, 0.001, 0.0025, 0.005, 0.01,
    0.025, 0.05, 0.1, 0.25, 0.5, 1, 5};
#define NCYCLE (sizeof cycle_buckets / sizeof cycle_buckets[0])

typedef struct histo {
    long    n[NJOB + 1];        /* per bucket (not cumulative); +Inf last */
    double  sum;
    long    count;
} histo;

typedef struct finished {       /* jobs_finished_total{name,queue,outcome} */
    char   *name, *queue;
    int     outcome;            /* index into outcomes[] */
    long    n;
} finished;

typedef struct per_name {
    char   *name;
    histo   dur, lat;
} per_name;

/* outcomes[] index -> the result kind whose word (jr_result_word) it is */
static const int outcomes[] = {JR_DONE, JR_RETRY, JR_DEAD, JR_CANCELLED,
                               JR_SNOOZE};

struct jr_metrics {
    finished   *fin;
    int         nfin, capfin;
    per_name   *names;
    int         nnames, capnames;
    long        cycle_n[NCYCLE + 1];
    double      cycle_sum, cycle_at;
    long        cycles;
    long        reloads_ok, reloads_failed, rescued;
    long        steps;          /* step records reported (ran_on) */
    long        sql;            /* jobrunner.sql statements of successes */
    double      started;        /* epoch */
    long        min_done[MINUTES], min_failed[MINUTES];
    long        minute;         /* epoch minute of slot minute % MINUTES */
};

jr_metrics *
jr_metrics_new(void)
{
    jr_metrics *x = calloc(1, sizeof *x);

    if (x != NULL) {
        x->started = jr_now();
        x->minute = (long)(x->started / 60);
    }
    return x;
}

void
jr_metrics_free(jr_metrics *x)
{
    int i;

    if (x == NULL)
        return;
    for (i = 0; i < x->nfin; i++) {
        free(x->fin[i].name);
        free(x->fin[i].queue);
    }
    for (i = 0; i < x->nnames; i++)
        free(x->names[i].name);
    free(x->fin);
    free(x->names);
    free(x);
}

/* Grows *v (n used of *cap, size each) for one more. -1 out of memory. */
static int
grow(void **v, int n, int *cap, size_t size)
{
    void *more;
    int c = *cap ? *cap * 2 : 16;

    if (n < *cap)
        return 0;
    if ((more = realloc(*v, (size_t)c * size)) == NULL)
        return -1;
    *v = more;
    *cap = c;
    return 0;
}

static per_name *
name_of(jr_metrics *x, const char *name)
{
    per_name *p;

    for (int i = 0; i < x->nnames; i++)
        if (strcmp(x->names[i].name, name) == 0)
            return &x->names[i];
    if (grow((void **)&x->names, x->nnames, &x->capnames, sizeof *p) < 0)
        return NULL;
    p = &x->names[x->nnames];
    memset(p, 0, sizeof *p);
    if ((p->name = strdup(name)) == NULL)
        return NULL;
    x->nnames++;
    return p;
}

static void
observe(histo *h, double v)
{
    size_t i;

    for (i = 0; i < NJOB && v > job_buckets[i]; i++)
        ;
    h->n[i]++;
    h->sum += v;
    h->count++;
}

/* Moves the minute ring to now, clearing the minutes that passed. */
static int
minute_slot(jr_metrics *x)
{
    long now = (long)(jr_now() / 60);

    if (now - x->minute >= MINUTES) {   /* an hour or more idle */
        memset(x->min_done, 0, sizeof x->min_done);
        memset(x->min_failed, 0, sizeof x->min_failed);
        x->minute = now;
    }
    for (; x->minute < now; x->minute++) {
        x->min_done[(x->minute + 1) % MINUTES] = 0;
        x->min_failed[(x->minute + 1) % MINUTES] = 0;
    }
    return (int)(now % MINUTES);
}

static void
count_finished(jr_metrics *x, const jr_job *j, int outcome)
{
    finished *f;
    int i;

    for (i = 0; i < x->nfin; i++) {
        f = &x->fin[i];
        if (f->outcome == outcome && strcmp(f->name, j->name) == 0 &&
            strcmp(f->queue, j->queue) == 0) {
            f->n++;
            return;
        }
    }
    if (grow((void **)&x->fin, x->nfin, &x->capfin, sizeof *f) < 0)
        return;
    f = &x->fin[x->nfin];
    f->name = strdup(j->name);
    f->queue = strdup(j->queue);
    if (f->name == NULL || f->queue == NULL) {
        free(f->name);
        free(f->queue);
        return;
    }
    f->outcome = outcome;
    f->n = 1;
    x->nfin++;
}

void
jr_metrics_job(jr_metrics *x, const jr_job *j, const jr_result *r,
               double secs)
{
    static const int which[] = {[JR_DONE] = 0, [JR_RETRY] = 1,
        [JR_DEAD] = 2, [JR_EXPIRED] = 2, [JR_CANCELLED] = 3,
        [JR_SNOOZE] = 4, [JR_RELEASE] = -1, [JR_PROGRESS] = -1,
        [JR_STEP] = -1, [JR_WAIT] = -1};
    per_name *p;
    int o, slot;

    if (x == NULL || r->kind < JR_DONE || r->kind > JR_WAIT ||
        (o = which[r->kind]) < 0)
        return;
    count_finished(x, j, o);
    x->sql += r->nsql;          /* a success's, also one they failed */
    if (secs > 0 && (p = name_of(x, j->name)) != NULL)
        observe(&p->dur, secs);
    slot = minute_slot(x);
    if (o == 0)
        x->min_done[slot]++;
    else if (o == 1 || o == 2)
        x->min_failed[slot]++;
}

void
jr_metrics_start(jr_metrics *x, const jr_job *j, double waited)
{
    per_name *p;

    if (x != NULL && (p = name_of(x, j->name)) != NULL)
        observe(&p->lat, waited > 0 ? waited : 0);
}

void
jr_metrics_cycle_begin(jr_metrics *x)
{
    if (x != NULL)
        x->cycle_at = jr_mono();
}

void
jr_metrics_cycle_end(jr_metrics *x, int rescued)
{
    double v;
    size_t i;

    if (x == NULL || x->cycle_at == 0)
        return;
    v = jr_mono() - x->cycle_at;
    for (i = 0; i < NCYCLE && v > cycle_buckets[i]; i++)
        ;
    x->cycle_n[i]++;
    x->cycle_sum += v;
    x->cycles++;
    x->cycle_at = 0;
    if (rescued > 0)
        x->rescued += rescued;
}

void
jr_metrics_reload(jr_metrics *x, int ok)
{
    if (x != NULL)
        (*(ok ? &x->reloads_ok : &x->reloads_failed))++;
}

static void
head(jr_buf *b, const char *name, const char *type, const char *help)
{
    jr_api_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void
write_histo(jr_buf *b, const char *metric, const char *name,
            const long *n, const double *bounds, size_t nb, double sum,
            long count)
{
    char lbl[200] = "";
    long acc = 0;
    size_t i;

    if (name != NULL)
        snprintf(lbl, sizeof lbl, "name=\"%s\",", name);
    for (i = 0; i < nb; i++) {
        acc += n[i];
        jr_api_printf(b, "%s_bucket{%sle=\"%g\"} %ld\n", metric, lbl,
                      bounds[i], acc);
    }
    jr_api_printf(b, "%s_bucket{%sle=\"+Inf\"} %ld\n", metric, lbl, count);
    if (name != NULL)
        snprintf(lbl, sizeof lbl, "{name=\"%s\"}", name);
    jr_api_printf(b, "%s_sum%s %.9g\n%s_count%s %ld\n", metric, lbl, sum,
                  metric, lbl, count);
}

static void
write_jobs(jr_metrics *x, jr_buf *b)
{
    int i;

    head(b, "jobrunner_jobs_finished_total", "counter", "Jobs this runner "
         "finished, by job name, queue and outcome (failed: will retry).");
    for (i = 0; i < x->nfin; i++)
        jr_api_printf(b, "jobrunner_jobs_finished_total{name=\"%s\",queue="
                      "\"%s\",outcome=\"%s\"} %ld\n", x->fin[i].name,
                      x->fin[i].queue,
                      jr_result_word(outcomes[x->fin[i].outcome]),
                      x->fin[i].n);
    head(b, "jobrunner_job_duration_seconds", "histogram", "How long jobs "
         "ran in this runner's workers, by job name.");
    for (i = 0; i < x->nnames; i++)
        write_histo(b, "jobrunner_job_duration_seconds", x->names[i].name,
                    x->names[i].dur.n, job_buckets, NJOB,
                    x->names[i].dur.sum, x->names[i].dur.count);
    head(b, "jobrunner_job_latency_seconds", "histogram", "From due (push, "
         "or run_at) to start in a worker, by job name.");
    for (i = 0; i < x->nnames; i++)
        write_histo(b, "jobrunner_job_latency_seconds", x->names[i].name,
                    x->names[i].lat.n, job_buckets, NJOB,
                    x->names[i].lat.sum, x->names[i].lat.count);
}

static void
queue_jobs(void *arg, const jr_httpqueue *q)
{
    jr_api_printf(arg, "jobrunner_runner_queue_jobs{queue=\"%s\",state="
                  "\"running\"} %d\n", q->name, q->running);
    jr_api_printf(arg, "jobrunner_runner_queue_jobs{queue=\"%s\",state="
                  "\"local\"} %d\n", q->name, q->local);
}

static void
queue_target(void *arg, const jr_httpqueue *q)
{
    if (q->capped)
        jr_api_printf(arg, "jobrunner_runner_queue_target{queue=\"%s\"} "
                      "%d\n", q->name, q->target);
}

static void
write_queues(const jr_httphost *host, jr_buf *b)
{
    head(b, "jobrunner_runner_queue_jobs", "gauge", "Jobs of a queue this "
         "runner holds, claimed (local) or running in a worker.");
    host->queues(host->runner, queue_jobs, b);
    head(b, "jobrunner_runner_queue_target", "gauge", "The cap on running "
         "jobs of a queue in this runner (queues in the config).");
    host->queues(host->runner, queue_target, b);
}

void
jr_metrics_write(const jr_httphost *host, jr_buf *b)
{
    jr_metrics *x = host->metrics;
    jr_httpgauges g;

    host->gauges(host->runner, &g);

    write_jobs(x, b);
    head(b, "jobrunner_workers", "gauge", "Worker processes of this runner "
         "by state.");
    jr_api_printf(b, "jobrunner_workers{state=\"busy\"} %d\n"
                  "jobrunner_workers{state=\"idle\"} %d\n", g.busy,
                  g.active > g.busy ? g.active - g.busy : 0);
    head(b, "jobrunner_workers_target", "gauge", "Workers wanted now.");
    jr_api_printf(b, "jobrunner_workers_target %d\n", g.target);
    head(b, "jobrunner_workers_min", "gauge", "concurrency.min");
    jr_api_printf(b, "jobrunner_workers_min %d\n", g.min);
    head(b, "jobrunner_workers_max", "gauge", "concurrency.max");
    jr_api_printf(b, "jobrunner_workers_max %d\n", g.max);
    head(b, "jobrunner_local_queue_jobs", "gauge", "Jobs claimed by this "
         "runner, not yet handed to a worker.");
    jr_api_printf(b, "jobrunner_local_queue_jobs %zu\n", g.local);
    head(b, "jobrunner_db_cycle_seconds", "histogram", "Database cycles "
         "(record results, claim, renew, rescue) of this runner.");
    write_histo(b, "jobrunner_db_cycle_seconds", NULL, x->cycle_n,
                cycle_buckets, NCYCLE, x->cycle_sum, x->cycles);
    head(b, "jobrunner_loop_passes_total", "counter", "Passes of work of "
         "the master's event loop (events: results, wake-ups, timers).");
    jr_api_printf(b, "jobrunner_loop_passes_total %ld\n", g.passes);
    head(b, "jobrunner_reloads_total", "counter", "Handler reloads by "
         "result.");
    jr_api_printf(b, "jobrunner_reloads_total{result=\"ok\"} %ld\n"
                  "jobrunner_reloads_total{result=\"failed\"} %ld\n",
                  x->reloads_ok, x->reloads_failed);
    head(b, "jobrunner_generation_info", "gauge", "The generation of "
         "handler code new jobs go to (1).");
    if (g.generation != NULL)
        jr_api_printf(b, "jobrunner_generation_info{generation=\"%s\","
                      "id=\"%d\"} 1\n", g.generation, g.generation_id);
    head(b, "jobrunner_sql_statements_total", "counter", "jobrunner.sql "
         "statements handlers' successes carried to their commit.");
    jr_api_printf(b, "jobrunner_sql_statements_total %ld\n", x->sql);
    head(b, "jobrunner_sql_failures_total", "counter", "Successes whose "
         "jobrunner.sql statement failed: the attempt failed instead.");
    jr_api_printf(b, "jobrunner_sql_failures_total %ld\n", g.sql_failed);
    head(b, "jobrunner_lease_rescues_total", "counter", "Jobs whose lease "
         "had expired that this runner put back in the queue.");
    jr_api_printf(b, "jobrunner_lease_rescues_total %ld\n", x->rescued);
    head(b, "jobrunner_steps_recorded_total", "counter", "Step records "
         "(steps that returned, checkpoints) this runner's workers sent "
         "to be recorded.");
    jr_api_printf(b, "jobrunner_steps_recorded_total %ld\n", x->steps);
    write_queues(host, b);
    host->unhandled_metrics(host->runner, b);
    if (host->trace_metrics != NULL)
        host->trace_metrics(host->runner, b);
    head(b, "jobrunner_start_time_seconds", "gauge", "When this runner "
         "started (epoch seconds).");
    jr_api_printf(b, "jobrunner_start_time_seconds %.3f\n", x->started);
}

void
jr_metrics_throughput(jr_metrics *x, jr_buf *b)
{
    int slot = minute_slot(x), i, k;

    jr_buf_put(b, "{\"minutes\":[", 12);
    for (i = 0; i < MINUTES; i++) {
        k = (slot + 1 + i) % MINUTES;
        jr_api_printf(b, "%s{\"t\":%ld,\"done\":%ld,\"failed\":%ld}",
                      i ? "," : "", (x->minute - MINUTES + 1 + i) * 60,
                      x->min_done[k], x->min_failed[k]);
    }
    jr_buf_put(b, "]}", 2);
}

/* ---- the service (service.h): jobs, cycle times, reloads ---- */

extern const jr_service jr_metrics_service;   /* below */

/* The series begin with the runner when the HTTP server will show them;
 * without it the state stays NULL and nothing is counted. */
static int
init(master *m, void **st)
{
    if (jr_svc_config(m)->http_listen == NULL)
        return 0;
    return (*st = jr_metrics_new()) == NULL ? -1 : 0;
}

static void
job_start(master *m, void *st, const jr_job *j, int worker)
{
    (void)m;
    (void)worker;
    jr_metrics_start(st, j, jr_now() - j->run_at);
}

static void
job_end(master *m, void *st, const jr_job *j, const jr_result *r,
        double secs)
{
    (void)m;
    jr_metrics_job(st, j, r, secs);
}

/* A running job's steps: their new records counted (jr_result.done). */
static void
ran_on(master *m, void *st, const jr_result *r)
{
    jr_metrics *x = st;

    (void)m;
    if (x != NULL && r->kind == JR_STEP && r->done > 0)  /* NULL: no http */
        x->steps += (long)r->done;
}

/* The reloads counted for /metrics. */
static void
reloaded(master *m, void *st, int ok, const char *error)
{
    (void)m;
    (void)error;
    jr_metrics_reload(st, ok);
}

static void
fill(master *m, void *st, jr_cycle *c)
{
    (void)m;
    (void)c;
    jr_metrics_cycle_begin(st);
}

static void
read_cycle(master *m, void *st, jr_cycle *c)
{
    (void)m;
    jr_metrics_cycle_end(st, c->rescued);
}

static void
host_text(const jr_httphost *h, jr_buf *b)
{
    jr_metrics_write(h, b);
}

static void
host_throughput(const jr_httphost *h, jr_buf *b)
{
    jr_metrics_throughput(h->metrics, b);
}

/* The HTTP server starts: it shows the series init made. */
static int
host(master *m, jr_httphost *h)
{
    h->metrics = jr_service_state(m, &jr_metrics_service);
    h->metrics_text = host_text;
    h->throughput = host_throughput;
    return 0;
}

/* The series live as long as the master. */
static void
free_metrics(master *m, void *st)
{
    (void)m;
    jr_metrics_free(st);
}

const jr_service jr_metrics_service = {
    .name = "metrics", .host = host, .init = init, .job_start = job_start,
    .job_end = job_end, .ran_on = ran_on, .reloaded = reloaded, .fill = fill,
    .read = read_cycle, .free = free_metrics,
};
