/* master.c - the runner's master process. One libevent loop owns the only
 * backend connection. Claimed jobs wait in a small local queue and go to
 * idle workers; results are collected and written in one fenced transaction
 * per loop pass, followed by a claim sized to the free capacity. Timers
 * renew leases, rescue expired ones, poll as a fallback and kill workers
 * that overrun their timeout. Workers that die are replaced and their job
 * fails with the reason. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "backend.h"
#include "commands.h"
#include "dbthread.h"
#include "hooks.h"
#include "reload.h"
#include "frame.h"
#include "log.h"
#include "master.h"
#include "job.h"
#include "util.h"
#include "worker.h"

#define SLOTS_MAX     32        /* jobs outstanding per worker at most */
#define LOCAL_QUEUE   512       /* claimed ahead while jobs are short */
#define SHORT_JOB     0.005     /* seconds: below this, claim ahead */
#define PREFETCH_TIME 0.002     /* seconds of work a worker may have queued */
#define RECHECKS      40        /* re-looks after a wake-up, RECHECK_US apart */
#define RECHECK_US    500
#define CLAIM_MAX     512       /* jobs per claim statement */
#define KILL_GRACE    5.0       /* seconds past a timeout before SIGKILL */
#define HELLO_GRACE   2.0       /* seconds past load_timeout before SIGKILL */
#define DB_RETRY_MAX  5.0       /* seconds between retries when it fails */
#define OUT_LINE      1024      /* bytes of one line of handler output logged */
#define OUT_JOB       65536     /* bytes of handler output logged per job */
#define OUT_JOB_LINES 1000      /* and lines */
#define OUT_READS     16        /* reads of 8 KiB per output event at most */

typedef struct master master;

enum { OUT_LOG, OUT_INHERIT, OUT_FILE };       /* handler_output */

typedef struct gen {            /* one generation of handler code */
    int          id;            /* 1, 2, ... */
    char         hash[17];      /* content hash of the scripts */
    jr_handler  *h;
    int          n;
    const char **names;         /* h[i].name, for claims */
    int          refs;          /* the master, workers, a running cycle */
} gen;

typedef struct wk {             /* one worker process */
    master             *m;
    pid_t               pid;
    int                 id;             /* 1, 2, ... for log lines */
    struct bufferevent *bev;            /* NULL once the socket closed */
    int                 ready;          /* its hello arrived */
    gen                *gen;            /* code it loaded, once ready */
    int                 probe;          /* started to try a reload */
    int                 retiring;       /* exits after its current job */
    int                 stopping;       /* told to exit */
    double              idle_since;     /* mono time it last went idle */
    long                jobs_run;       /* results received */
    jr_job             *jobs[SLOTS_MAX];/* outstanding, oldest first */
    int                 njobs;
    double              started;        /* mono time jobs[0] started */
    double              avg;            /* moving average job seconds */
    char                kill_reason[64];/* why we killed it, or "" */
    double              spawned;        /* mono time of spawn */
    int                 out_fd;         /* its stdout+stderr pipe, or -1 */
    struct event       *ev_out;         /* readable out_fd */
    char                oline[OUT_LINE];/* the output line being read */
    size_t              olen;
    int                 ocut;           /* that line is longer: cut */
    int64_t             ojob;           /* job the output counts for */
    size_t              obytes;         /* bytes logged for that job */
    int                 olines;         /* lines logged for that job */
    struct wk          *next;
} wk;

typedef struct pending {        /* a result waiting for the next flush */
    jr_result  r;
    void      *mem;             /* what r's strings live in */
} pending;

typedef struct snoozed {        /* a job that snoozed under this runner */
    int64_t     id;
    int         n;              /* snoozes in a row */
} snoozed;

#define SNOOZES_MAX 65536       /* jobs remembered; the oldest go first */

struct master {
    jr_config          *cfg;
    const char         *self;
    jr_db               db;
    struct event_base  *base;
    char                token[96];
    char                url[512];       /* masked, for messages */
    wk                 *workers;
    int                 nworkers;
    int                 next_id;
    gen                *gen;            /* current code; NULL before hello */
    gen                *cycle_gen;      /* whose names a cycle borrows */
    int                 ngens;
    wk                 *probe;          /* loading a new generation */
    int                 reload_again;   /* a reload asked for meanwhile */
    int                 target;         /* workers wanted, min..max */
    jr_hooks           *hooks;
    jr_watch           *watch;
    char                pidfile[4096];
    int                 out_mode;       /* OUT_LOG, OUT_INHERIT, OUT_FILE */
    int                 out_file;       /* handler_output file, or -1 */
    long                tick_done, tick_failed; /* counters at last tick */
    double              tick_at;
    double              lat[256];       /* start latencies since last tick */
    int                 nlat;
    int                 count_due;      /* a tick wants the ready count */
    jr_job            **queue;          /* claimed, not yet handed out */
    size_t              qhead, qlen, qcap;
    pending            *res;            /* waiting for the next cycle */
    int                 nres, capres;
    pending            *inflight;       /* being recorded by the cycle */
    int                 ninflight, capinflight;
    jr_dbthread        *dbt;
    jr_cycle            cycle;
    jr_job             *claimed[CLAIM_MAX];
    int                 wake_fd;
    int                 renew_due, rescue_due, wake_due;
    jr_buf              out;
    struct event       *ev_work, *ev_poll, *ev_renew, *ev_rescue, *ev_tick;
    struct event       *ev_wake, *ev_spawn;
    struct event       *ev_sig[6];
    struct event       *ev_hooktick;
    int                 want_claim;     /* jobs may be waiting */
    int                 full_batch;     /* the last claim got all it asked */
    int                 stopping;       /* 1 graceful, 2 at once */
    double              stop_deadline;
    double              db_retry_at;    /* mono; 0 when the database is fine */
    double              db_backoff;
    double              spawn_delay;    /* grows while workers die at once */
    long                done, failed, dead;
    double              avg;            /* moving average job seconds */
    int                 rechecks;       /* wake-ups that saw nothing yet */
    struct event       *ev_recheck;
    snoozed            *snoozes;        /* jobs snoozed here, unordered */
    size_t              nsnoozes, capsnoozes;
};

static struct wk *spawn_worker(master *m);
static void on_hello_gen(master *m, wk *w, gen *g, int nerr,
                         const char *first);
static void kick(master *m);
static int  active_workers(master *m);
static void set_target(master *m, int target, const char *reason);
static void scale_up(master *m);

/* --- the local queue ------------------------------------------------- */

static int
queue_push(master *m, jr_job *j, int front)
{
    if (m->qlen == m->qcap) {
        size_t cap = m->qcap ? m->qcap * 2 : 64, i;
        jr_job **q = malloc(cap * sizeof *q);
        if (q == NULL)
            return -1;
        for (i = 0; i < m->qlen; i++)
            q[i] = m->queue[(m->qhead + i) % m->qcap];
        free(m->queue);
        m->queue = q;
        m->qcap = cap;
        m->qhead = 0;
    }
    if (front) {
        m->qhead = (m->qhead + m->qcap - 1) % m->qcap;
        m->queue[m->qhead] = j;
    } else {
        m->queue[(m->qhead + m->qlen) % m->qcap] = j;
    }
    m->qlen++;
    return 0;
}

static jr_job *
queue_pop(master *m)
{
    jr_job *j;

    if (m->qlen == 0)
        return NULL;
    j = m->queue[m->qhead];
    m->qhead = (m->qhead + 1) % m->qcap;
    m->qlen--;
    return j;
}

/* --- results --------------------------------------------------------- */

/* Queues a result for the next flush; takes mem. */
static void
add_result(master *m, const jr_result *r, void *mem)
{
    if (m->nres == m->capres) {
        int cap = m->capres ? m->capres * 2 : 64;
        pending *p = realloc(m->res, (size_t)cap * sizeof *p);
        if (p == NULL) {
            /* the lease will bring the job back */
            jr_log(JR_LOG_ERROR, "job %lld: out of memory keeping its "
                   "result; its lease will requeue it", (long long)r->id);
            free(mem);
            return;
        }
        m->res = p;
        m->capres = cap;
    }
    m->res[m->nres].r = *r;
    m->res[m->nres].mem = mem;
    m->nres++;
}

static const jr_handler *
handler_info(const gen *g, const char *name)
{
    int i;

    for (i = 0; g != NULL && i < g->n; i++)
        if (strcmp(g->h[i].name, name) == 0)
            return &g->h[i];
    return NULL;
}

static gen *
gen_ref(gen *g)
{
    if (g != NULL)
        g->refs++;
    return g;
}

static void
gen_unref(gen *g)
{
    int i;

    if (g == NULL || --g->refs > 0)
        return;
    for (i = 0; i < g->n; i++)
        free(g->h[i].name);
    free(g->h);
    free(g->names);
    free(g);
}

/* A failure the master itself decides (worker died, killed): retry with
 * the default backoff, or dead when no retries are left. */
static void job_event(master *m, const jr_job *j, const jr_result *r,
                      double secs);

static void
fail_job(master *m, const gen *g, const jr_job *j, const char *reason)
{
    const jr_handler *h = handler_info(g, j->name);
    int max = jr_max_retries(j, h ? h->max_retries : -1, m->cfg->max_retries);
    jr_result r = {.id = j->id};
    size_t len = strlen(reason) + 1;
    char *mem = malloc(len + 17);   /* the error, then the generation */

    if (mem != NULL) {
        memcpy(mem, reason, len);
        snprintf(mem + len, 17, "%s", g ? g->hash : "");
        r.error = mem;
        r.generation = g ? mem + len : NULL;
    } else {
        r.error = "worker failed";
    }
    if (j->attempt > max) {
        r.kind = JR_DEAD;
        jr_log(JR_LOG_WARN, "job %lld (%s) dead after %d attempts: %s",
               (long long)j->id, j->name, j->attempt, reason);
        m->dead++;
    } else {
        r.kind = JR_RETRY;
        r.delay = h && h->backoff >= 0 ? h->backoff :
                  jr_config_backoff(m->cfg, j, max, reason);
        if (r.delay < 0)
            r.delay = jr_backoff_default(j->attempt);
        jr_log(JR_LOG_WARN, "job %lld (%s) failed (attempt %d of %d), "
               "retry in %.0fs: %s", (long long)j->id, j->name, j->attempt,
               max + 1, r.delay, reason);
        m->failed++;
    }
    job_event(m, j, &r, 0);
    add_result(m, &r, mem);
}

/* A claimed job whose retries are used up before it starts: its last
 * attempt was lost with its runner's lease (the rescue requeues it with
 * that attempt counted) or the handler now allows fewer. The runner that
 * claims it knows the handler, so it decides here, with the same rule as
 * a failure (jr_max_retries): dead, not run, this claim not counted.
 * Returns 1 and takes j if so. */
static int
expire_job(master *m, jr_job *j)
{
    const jr_handler *h = handler_info(m->gen, j->name);
    int max = jr_max_retries(j, h ? h->max_retries : -1, m->cfg->max_retries);
    jr_result r = {.id = j->id, .kind = JR_EXPIRED}, seen;
    jr_job last;                /* as the hooks see it: the lost attempt */

    if (j->attempt <= max + 1)
        return 0;
    jr_log(JR_LOG_WARN, "job %lld (%s) dead: no retries left after %d "
           "attempt%s (max_retries %d); the last one was lost (its "
           "runner's lease expired)", (long long)j->id, j->name,
           j->attempt - 1, j->attempt == 2 ? "" : "s", max);
    m->dead++;
    seen = r;                   /* the row keeps its last_error */
    seen.error = "no retries left (lease expired: runner lost)";
    last = *j;                  /* strings stay in j until it is freed */
    last.attempt--;
    job_event(m, &last, &seen, 0);
    add_result(m, &r, NULL);
    free(j);
    return 1;
}

static void
release_job(master *m, jr_job *j)
{
    jr_result r = {.id = j->id, .kind = JR_RELEASE};

    add_result(m, &r, NULL);
    free(j);
}

/* After results were recorded: look again for jobs if some may have
 * become ready (our own commits wake no one), free them. */
static void
results_recorded(master *m, pending *p, int n, int applied)
{
    int i;

    if (applied < n)
        jr_log(JR_LOG_WARN, "%d of %d results not recorded: the job was no "
               "longer held by this runner (its lease expired and it was "
               "requeued)", n - applied, n);
    for (i = 0; i < n; i++) {
        if (p[i].r.npushes > 0 || p[i].r.kind == JR_RELEASE ||
            (p[i].r.kind != JR_DONE && p[i].r.kind != JR_DEAD &&
             p[i].r.kind != JR_EXPIRED &&
             p[i].r.delay < m->cfg->poll_interval))
            m->want_claim = 1;
        free(p[i].mem);
    }
}

/* Puts the in-flight results back in front of the pending ones, for the
 * next try. */
static void
results_back(master *m)
{
    pending *all;
    int n = m->ninflight + m->nres;

    if (m->ninflight == 0)
        return;
    all = malloc((size_t)n * sizeof *all);
    if (all == NULL)
        return;                 /* kept in flight; tried again as they are */
    memcpy(all, m->inflight, (size_t)m->ninflight * sizeof *all);
    memcpy(all + m->ninflight, m->res, (size_t)m->nres * sizeof *all);
    free(m->res);
    m->res = all;
    m->nres = m->capres = n;
    m->ninflight = 0;
}

/* Records pending results synchronously (shutdown, with the thread gone). */
static int
flush_results(master *m)
{
    jr_result *batch;
    jr_err err;
    int i, n = m->nres, applied;

    if (n == 0)
        return 0;
    if ((batch = malloc((size_t)n * sizeof *batch)) == NULL)
        return -1;
    for (i = 0; i < n; i++)
        batch[i] = m->res[i].r;
    applied = jr_dbthread_complete(&m->db, m->token, batch, n, &err);
    free(batch);
    if (applied < 0) {
        jr_log(JR_LOG_ERROR, "recording %d results failed: %s", n, err.msg);
        return -1;
    }
    results_recorded(m, m->res, n, applied);
    m->nres = 0;
    return 0;
}

/* --- workers ---------------------------------------------------------- */

static int
slots(const wk *w)
{
    int n;

    if (!w->ready || w->bev == NULL || w->kill_reason[0] ||
        w->retiring || w->stopping || w->gen != w->m->gen)
        return 0;
    /* about PREFETCH_TIME of work queued in a worker: many no-op jobs,
     * one or two 1 ms jobs, one long one */
    n = w->avg > 0 ? (int)(PREFETCH_TIME / w->avg) : 1;
    n = n < 1 ? 1 : n > SLOTS_MAX ? SLOTS_MAX : n;
    return n - w->njobs;
}

/* How many jobs to claim: the free slots of the workers, and while jobs
 * are short a local queue of them too (graphile-worker's local queue), so
 * each database round feeds many jobs. Long jobs are not claimed ahead:
 * they would wait behind others while another runner could run them. */
static int
capacity(master *m)
{
    int free_slots = 0;
    wk *w;

    for (w = m->workers; w; w = w->next)
        free_slots += slots(w) > 0 ? slots(w) : 0;
    if (m->avg > 0 && m->avg < SHORT_JOB && free_slots > 0)
        free_slots += LOCAL_QUEUE;
    return free_slots - (int)m->qlen;
}

/* jobs[0] of w starts now. */
static void
job_started(master *m, wk *w)
{
    const jr_job *j = w->jobs[0];

    w->started = jr_mono();
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

static void
send_job(master *m, wk *w, jr_job *j)
{
    jr_buf_reset(&m->out);
    jr_frame_put_job(&m->out, j);
    w->jobs[w->njobs++] = j;
    if (w->njobs == 1)
        job_started(m, w);
    if (m->out.oom || bufferevent_write(w->bev, m->out.p, m->out.len) < 0)
        jr_log(JR_LOG_ERROR, "worker %d: cannot send job %lld", w->id,
               (long long)j->id);
    jr_log(JR_LOG_DEBUG, "job %lld (%s) to worker %d, attempt %d",
           (long long)j->id, j->name, w->id, j->attempt);
}

/* Hands queued jobs out: idle workers first, then spare slots of workers
 * that run short jobs. */
static void
dispatch(master *m)
{
    int pass;
    wk *w;

    for (pass = 0; pass < 2 && m->qlen > 0; pass++)
        for (w = m->workers; w && m->qlen > 0; w = w->next)
            while (m->qlen > 0 && slots(w) > 0 && (pass || w->njobs == 0))
                send_job(m, w, queue_pop(m));
}

static void
db_trouble(master *m, const char *what)
{
    struct timeval tv;

    if (m->db_backoff == 0)     /* once per outage, not per retry */
        jr_log(JR_LOG_ERROR, "database: %s; results are kept and the "
               "database is retried with backoff", what);
    m->db_backoff = m->db_backoff ? m->db_backoff * 2 : 0.1;
    if (m->db_backoff > DB_RETRY_MAX)
        m->db_backoff = DB_RETRY_MAX;
    m->db_retry_at = jr_mono() + m->db_backoff;
    tv.tv_sec = (long)m->db_backoff;
    tv.tv_usec = (long)((m->db_backoff - (double)tv.tv_sec) * 1e6);
    event_add(m->ev_work, &tv);
}

static void on_wake(evutil_socket_t fd, short what, void *arg);

/* Watches the backend's wake descriptor, which may change when it
 * reconnects. */
static void
watch_wake(master *m, int fd)
{
    if (fd != m->wake_fd && m->ev_wake != NULL) {
        event_free(m->ev_wake);
        m->ev_wake = NULL;
    }
    m->wake_fd = fd;
    if (fd < 0)
        return;
    if (m->ev_wake == NULL)
        m->ev_wake = event_new(m->base, fd, EV_READ, on_wake, m);
    if (m->ev_wake != NULL && !event_pending(m->ev_wake, EV_READ, NULL))
        event_add(m->ev_wake, NULL);
}

static int
by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int busy_workers(master *m);

/* The on_tick hook, with the figures of the interval since the last one;
 * a number it returns becomes the target concurrency. */
static void
tick_event(master *m, long ready)
{
    double now = jr_mono(), secs = now - m->tick_at, target;
    long done = m->done - m->tick_done, failed = m->failed + m->dead -
                m->tick_failed;
    int busy = busy_workers(m), total = active_workers(m);

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
    m->tick_at = now;
    m->tick_done = m->done;
    m->tick_failed = m->failed + m->dead;
    m->nlat = 0;
    if (jr_hook_fire(m->hooks, &target) == 1 && target == target)
        set_target(m, (int)(target + 0.5), "tick");
}

/* The job hooks for one result. */
static void
job_event(master *m, const jr_job *j, const jr_result *r, double secs)
{
    static const int which[] = {[JR_DONE] = JR_HOOK_JOB_SUCCESS,
        [JR_RETRY] = JR_HOOK_JOB_RETRY, [JR_DEAD] = JR_HOOK_JOB_DEAD,
        [JR_SNOOZE] = -1, [JR_RELEASE] = -1,
        [JR_EXPIRED] = JR_HOOK_JOB_DEAD};
    jr_hooks *h = m->hooks;

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

static void
on_cycle_done(jr_cycle *c, void *arg)
{
    master *m = arg;
    int i;

    free((void *)c->results);
    c->results = NULL;
    gen_unref(m->cycle_gen);
    m->cycle_gen = NULL;
    if (c->count_ready)
        tick_event(m, c->ready);
    if (c->applied < 0) {
        results_back(m);
    } else {
        results_recorded(m, m->inflight, m->ninflight, c->applied);
        m->ninflight = 0;
    }
    for (i = 0; i < c->nclaimed; i++)
        if (m->stopping || (!expire_job(m, c->claimed[i]) &&
                            queue_push(m, c->claimed[i], 0) < 0))
            release_job(m, c->claimed[i]);
    if (c->want > 0 && c->nclaimed >= 0)
        m->want_claim = m->full_batch = c->nclaimed == c->want;
    if (c->nclaimed > 0)
        jr_log(JR_LOG_DEBUG, "claimed %d jobs", c->nclaimed);
    if (c->rescued > 0) {
        jr_log(JR_LOG_WARN, "requeued %d job%s whose runner's lease expired",
               c->rescued, c->rescued == 1 ? "" : "s");
        m->want_claim = 1;
    }
    watch_wake(m, c->wake_fd);
    if (c->unchanged && m->rechecks < RECHECKS) {
        /* a producer's WAL write wakes us an fsync before its commit is
         * visible: look again shortly instead of at the next poll */
        struct timeval tv = {0, RECHECK_US};
        m->rechecks++;
        event_add(m->ev_recheck, &tv);
    } else if (!c->unchanged) {
        m->rechecks = 0;
    }
    if (c->err.code != 0) {
        m->want_claim = 1;      /* look again once it is back */
        db_trouble(m, c->err.msg);
    } else if (m->db_backoff > 0) {
        jr_log(JR_LOG_INFO, "database: back after an outage");
        m->db_backoff = 0;
        m->db_retry_at = 0;
    }
    dispatch(m);
    kick(m);
}

/* The loop's one pass of work: hand out what is queued, and start a
 * database cycle if one is needed and none is running. */
static void
on_work(evutil_socket_t fd, short what, void *arg)
{
    master *m = arg;
    jr_cycle *c = &m->cycle;
    pending *swap;
    int want, cap;

    (void)fd;
    (void)what;
    dispatch(m);
    scale_up(m);
    if (m->dbt == NULL || jr_dbthread_busy(m->dbt) || m->stopping == 2)
        return;                 /* on_cycle_done kicks again */
    if (m->db_retry_at > 0 && jr_mono() < m->db_retry_at)
        return;                 /* a retry timer is armed */
    want = capacity(m);
    if (want > CLAIM_MAX)
        want = CLAIM_MAX;
    if (m->stopping || m->gen == NULL || m->gen->n == 0 ||
        !(m->want_claim || m->wake_due))
        want = 0;
    if (m->nres == 0 && want <= 0 && !m->renew_due && !m->rescue_due &&
        !m->wake_due && !m->count_due)
        return;
    memset(c, 0, sizeof *c);
    swap = m->inflight;             /* pending results go in flight */
    cap = m->capinflight;
    m->inflight = m->res;
    m->capinflight = m->capres;
    m->ninflight = m->nres;
    m->res = swap;
    m->capres = cap;
    m->nres = 0;
    c->results = NULL;
    if (m->ninflight > 0) {
        jr_result *r = malloc((size_t)m->ninflight * sizeof *r);
        int i;
        if (r == NULL) {
            results_back(m);
            return;
        }
        for (i = 0; i < m->ninflight; i++)
            r[i] = m->inflight[i].r;
        c->results = r;
        c->nresults = m->ninflight;
    }
    c->want = want > 0 ? want : 0;
    c->consume_wake = m->wake_due;
    c->claim_always = m->want_claim;
    if (m->gen != NULL) {
        m->cycle_gen = gen_ref(m->gen);
        c->names = m->gen->names;
        c->nnames = m->gen->n;
    }
    c->count_ready = m->count_due;
    c->renew = m->renew_due;
    c->rescue = m->rescue_due;
    c->claimed = m->claimed;
    m->wake_due = m->renew_due = m->rescue_due = m->count_due = 0;
    if (jr_dbthread_submit(m->dbt, c) < 0)
        jr_log(JR_LOG_ERROR, "internal: database thread busy");
}

static void
kick(master *m)
{
    event_active(m->ev_work, EV_WRITE, 0);
}

/* Returns a new generation made of hello's handlers (taken: hello keeps
 * none), logging its load errors when asked; NULL when out of memory. */
static gen *
gen_new(master *m, jr_hello *hello, int log_errors)
{
    gen *g = calloc(1, sizeof *g);
    int i;

    if (g == NULL ||
        (g->names = calloc((size_t)hello->n + 1, sizeof *g->names)) == NULL) {
        free(g);
        return NULL;
    }
    memcpy(g->hash, hello->generation, sizeof g->hash);
    g->h = hello->h;
    g->n = hello->n;
    hello->h = NULL;
    hello->n = 0;
    for (i = 0; i < g->n; i++)
        g->names[i] = g->h[i].name;
    for (i = 0; log_errors && i < hello->nerrors; i++)
        jr_log(JR_LOG_ERROR, "%s (handler not loaded)", hello->errors[i]);
    g->id = ++m->ngens;
    return g;
}

static void
stop_worker(master *m, wk *w)
{
    if (w->stopping)
        return;
    w->stopping = 1;
    if (w->bev == NULL)
        return;
    jr_buf_reset(&m->out);
    jr_frame_end(&m->out, jr_frame_begin(&m->out, JR_F_STOP));
    bufferevent_write(w->bev, m->out.p, m->out.len);
}

/* Workers that count toward the target: not leaving, not a probe. */
static int
active_workers(master *m)
{
    int n = 0;
    wk *w;

    for (w = m->workers; w; w = w->next)
        n += !w->stopping && !w->retiring && !w->probe;
    return n;
}

static void
scale_event(master *m, int from, int to, const char *reason)
{
    jr_log(JR_LOG_INFO, "concurrency %d -> %d (%s)", from, to, reason);
    if (jr_hook_begin(m->hooks, JR_HOOK_SCALE)) {
        jr_hook_int(m->hooks, "from", from);
        jr_hook_int(m->hooks, "to", to);
        jr_hook_str(m->hooks, "reason", reason);
        jr_hook_fire(m->hooks, NULL);
    }
}

/* Starts or stops workers until the active ones match the target: idle
 * ones stop now, busy ones after their job. */
static void
fit_target(master *m)
{
    wk *w;
    int n = active_workers(m);

    if (m->stopping)
        return;
    for (; n < m->target; n++)
        spawn_worker(m);
    for (w = m->workers; w && n > m->target; w = w->next)
        if (!w->stopping && !w->retiring && !w->probe && w->njobs == 0) {
            stop_worker(m, w);
            n--;
        }
    for (w = m->workers; w && n > m->target; w = w->next)
        if (!w->stopping && !w->retiring && !w->probe) {
            w->retiring = 1;
            n--;
        }
}

/* Sets the target, clamped to min..max, and acts on it. */
static void
set_target(master *m, int target, const char *reason)
{
    int from = m->target;

    if (target < m->cfg->conc_min)
        target = m->cfg->conc_min;
    if (target > m->cfg->conc_max)
        target = m->cfg->conc_max;
    if (target == from)
        return;
    m->target = target;
    scale_event(m, from, target, reason);
    fit_target(m);
}

static void
reload_event(master *m, int ok, const char *error)
{
    if (jr_hook_begin(m->hooks, JR_HOOK_RELOAD)) {
        jr_hook_bool(m->hooks, "ok", ok);
        jr_hook_str(m->hooks, "generation", m->gen ? m->gen->hash : NULL);
        jr_hook_str(m->hooks, "error", error);
        jr_hook_fire(m->hooks, NULL);
    }
}

/* Makes g the current generation: claims use its names, its workers get
 * the jobs; workers of the old one finish what they hold and exit. */
static void
switch_gen(master *m, gen *g)
{
    gen *old = m->gen;
    size_t i, n = m->qlen;
    wk *w;

    m->gen = gen_ref(g);
    for (w = m->workers; w; w = w->next)
        if (w->gen == old && !w->probe) {
            w->retiring = 1;
            if (w->njobs == 0)
                stop_worker(m, w);
        }
    for (i = 0; i < n; i++) {       /* names it no longer has go back */
        jr_job *j = queue_pop(m);
        if (handler_info(g, j->name) != NULL)
            queue_push(m, j, 0);
        else
            release_job(m, j);
    }
    gen_unref(old);
    m->want_claim = 1;
}

static void
reload(master *m)
{
    if (m->stopping || m->gen == NULL)
        return;
    if (m->probe != NULL) {
        m->reload_again = 1;
        return;
    }
    jr_log(JR_LOG_INFO, "reloading handlers from %s", m->cfg->scripts);
    if ((m->probe = spawn_worker(m)) != NULL)
        m->probe->probe = 1;
}

static void
on_watch(void *arg)
{
    reload(arg);
}

/* A probe's hello: the new code loaded cleanly, or the old code stays. */
static void
probe_hello(master *m, wk *w, gen *g, int nerr, const char *first)
{
    m->probe = NULL;
    w->probe = 0;
    if (nerr > 0) {
        jr_log(JR_LOG_ERROR, "reload failed, generation %s keeps running: %s",
               m->gen->hash, first);
        reload_event(m, 0, first);
        gen_unref(gen_ref(g));
        stop_worker(m, w);
    } else if (strcmp(g->hash, m->gen->hash) == 0) {
        jr_log(JR_LOG_INFO, "reload: handlers unchanged (generation %s)",
               g->hash);
        gen_unref(gen_ref(g));
        w->gen = gen_ref(m->gen);
        reload_event(m, 1, NULL);
    } else {
        jr_log(JR_LOG_INFO, "reloaded: generation %s with %d handler%s "
               "(was %s)", g->hash, g->n, g->n == 1 ? "" : "s",
               m->gen->hash);
        w->gen = gen_ref(g);
        switch_gen(m, g);
        reload_event(m, 1, NULL);
    }
    w->ready = 1;
    w->idle_since = jr_mono();
    fit_target(m);
    if (m->reload_again) {
        m->reload_again = 0;
        reload(m);
    }
}

/* A worker whose set-up failed (config, libraries) before it could load
 * any handler: its empty hello is no generation. A probe's reload fails
 * and the current generation keeps running; any other worker exits and is
 * replaced, with the spawn backoff. */
static void
setup_failed(master *m, wk *w, const char *why)
{
    if (!w->probe) {
        jr_log(JR_LOG_ERROR, "worker %d could not start, %s: %s", w->id,
               m->gen ? "the running generation goes on" :
               "no handlers until one starts", why);
        return;
    }
    m->probe = NULL;
    w->probe = 0;
    jr_log(JR_LOG_ERROR, "reload failed, generation %s keeps running: %s",
           m->gen->hash, why);
    reload_event(m, 0, why);
    stop_worker(m, w);
    if (m->reload_again) {
        m->reload_again = 0;
        reload(m);
    }
}

static void
on_hello(master *m, wk *w, jr_reader *r)
{
    const char *first;
    jr_hello hello;
    jr_err err;
    int nerr;
    gen *g;

    if (jr_frame_get_hello(r, &hello, &err) < 0) {
        jr_log(JR_LOG_ERROR, "worker %d: %s", w->id, err.msg);
        jr_hello_free(&hello);
        kill(w->pid, SIGKILL);
        return;
    }
    if (hello.setup_error != NULL) {
        setup_failed(m, w, hello.setup_error);
        jr_hello_free(&hello);
        return;
    }
    if ((g = gen_new(m, &hello, m->gen == NULL)) == NULL) {
        jr_log(JR_LOG_ERROR, "worker %d: hello: out of memory", w->id);
        jr_hello_free(&hello);
        kill(w->pid, SIGKILL);
        return;
    }
    nerr = hello.nerrors;
    first = nerr > 0 ? hello.errors[0] : "";
    on_hello_gen(m, w, g, nerr, first);
    jr_hello_free(&hello);
}

/* A hello that carried handlers: a probe's new generation, the first one,
 * or one more worker of the current one. */
static void
on_hello_gen(master *m, wk *w, gen *g, int nerr, const char *first)
{
    if (w->probe) {
        probe_hello(m, w, g, nerr, first);
        return;
    }
    if (m->gen == NULL) {           /* the first worker: start-up code */
        m->gen = gen_ref(g);
        jr_log(JR_LOG_INFO, "loaded %d handler%s from %s (generation %s)",
               g->n, g->n == 1 ? "" : "s", m->cfg->scripts, g->hash);
        if (g->n == 0)
            jr_log(JR_LOG_WARN, "no handlers loaded: no job will be claimed;"
                   " add scripts/NAME.lua returning a function");
        m->want_claim = 1;
    } else if (strcmp(g->hash, m->gen->hash) != 0) {
        /* the scripts changed since the current generation loaded */
        jr_log(JR_LOG_INFO, "worker %d loaded other handler code than "
               "generation %s: reloading", w->id, m->gen->hash);
        gen_unref(gen_ref(g));
        stop_worker(m, w);
        reload(m);
        return;
    } else {
        gen_unref(gen_ref(g));
    }
    w->gen = gen_ref(m->gen);
    w->ready = 1;
    w->idle_since = jr_mono();
}

/* --- handler output (handler_output = "log") ------------------------ */

/* Kills a worker and everything it started: it leads its own process
 * group (the worker itself too, if the group is already gone). */
static void
kill_worker(wk *w, int sig)
{
    if (kill(-w->pid, sig) < 0)
        kill(w->pid, sig);
}

/* handler_output: "log" (default), "inherit" or a file opened here once,
 * appended to by every worker. */
static int
output_open(master *m, jr_err *err)
{
    const char *v = m->cfg->handler_output;

    if (v == NULL || strcmp(v, "log") == 0) {
        m->out_mode = OUT_LOG;
        return 0;
    }
    if (strcmp(v, "inherit") == 0) {
        m->out_mode = OUT_INHERIT;
        return 0;
    }
    m->out_mode = OUT_FILE;
    m->out_file = open(v, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (m->out_file < 0)
        return jr_fail_errno(err, JR_ECONFIG, errno, "handler_output: "
                             "cannot open '%s'", v);
    return 0;
}

/* Logs one line of a worker's output with the job it is running; past
 * OUT_JOB bytes for a job, says once that the rest is dropped. */
static void
output_line(wk *w, const char *s, size_t n, int cut)
{
    const jr_job *j = w->njobs > 0 ? w->jobs[0] : NULL;
    int64_t id = j ? j->id : 0;
    char line[OUT_LINE + 1];
    size_t i;

    if (id != w->ojob) {
        w->ojob = id;
        w->obytes = 0;
        w->olines = 0;
    }
    if (w->obytes > OUT_JOB || w->olines > OUT_JOB_LINES)
        return;
    if ((w->obytes += n + 1) > OUT_JOB || ++w->olines > OUT_JOB_LINES) {
        w->obytes = OUT_JOB + 1;
        if (j)
            jr_log(JR_LOG_WARN, "job %lld (%s): output over %d bytes or %d "
                   "lines; the rest of it is dropped", (long long)id,
                   j->name, OUT_JOB, OUT_JOB_LINES);
        else
            jr_log(JR_LOG_WARN, "worker %d: output over %d bytes or %d lines "
                   "between jobs; the rest of it is dropped", w->id, OUT_JOB,
                   OUT_JOB_LINES);
        return;
    }
    for (i = 0; i < n; i++)     /* no terminal escapes in the log */
        line[i] = (unsigned char)s[i] < 0x20 && s[i] != '\t' ? '?' : s[i];
    if (j)
        jr_log(JR_LOG_INFO, "job %lld (%s) output: %.*s%s", (long long)id,
               j->name, (int)n, line, cut ? " [line cut]" : "");
    else
        jr_log(JR_LOG_INFO, "worker %d output: %.*s%s", w->id, (int)n, line,
               cut ? " [line cut]" : "");
}

static void
output_feed(wk *w, const char *p, size_t n)
{
    for (; n > 0; p++, n--) {
        if (*p == '\n') {
            output_line(w, w->oline, w->olen, w->ocut);
            w->olen = 0;
            w->ocut = 0;
        } else if (w->olen < sizeof w->oline) {
            w->oline[w->olen++] = *p;
        } else {
            w->ocut = 1;
        }
    }
}

/* Reads what is in the pipe, at most reads times 8 KiB. */
static void
output_read(wk *w, int reads)
{
    char buf[8192];
    ssize_t n = 0;

    while (w->out_fd >= 0 && reads-- > 0 &&
           (n = read(w->out_fd, buf, sizeof buf)) > 0)
        output_feed(w, buf, (size_t)n);
    if (n == 0 && w->ev_out != NULL)
        event_del(w->ev_out);   /* every writer closed it */
}

static void
on_output(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    output_read(arg, OUT_READS);
}

/* A job ended (or its worker): what it printed before is in the pipe
 * already; log it, and its last line even without a newline. */
static void
output_done(wk *w)
{
    output_read(w, 64);
    if (w->olen > 0 || w->ocut)
        output_line(w, w->oline, w->olen, w->ocut);
    w->olen = 0;
    w->ocut = 0;
}

static void
output_close(wk *w)
{
    if (w->ev_out != NULL)
        event_free(w->ev_out);
    w->ev_out = NULL;
    if (w->out_fd >= 0)
        close(w->out_fd);
    w->out_fd = -1;
}

static void
log_result(master *m, const jr_job *j, const jr_result *r, double secs)
{
    char first[300] = "(no error message)";
    const char *nl;

    if (r->error != NULL) {
        nl = strchr(r->error, '\n');
        snprintf(first, sizeof first, "%.*s", nl ? (int)(nl - r->error) :
                 (int)strlen(r->error), r->error);
    }
    switch (r->kind) {
    case JR_DONE:
        m->done++;
        jr_log(JR_LOG_DEBUG, "job %lld (%s) done in %.1fms", (long long)j->id,
               j->name, secs * 1000);
        break;
    case JR_RETRY:
        m->failed++;
        jr_log(JR_LOG_WARN, "job %lld (%s) failed (attempt %d), retry in "
               "%.0fs: %s", (long long)j->id, j->name, j->attempt, r->delay,
               first);
        break;
    case JR_DEAD:
        m->dead++;
        jr_log(JR_LOG_WARN, "job %lld (%s) dead after %d attempt%s: %s",
               (long long)j->id, j->name, j->attempt,
               j->attempt == 1 ? "" : "s", first);
        break;
    case JR_SNOOZE:
        jr_log(JR_LOG_INFO, "job %lld (%s) snoozed for %.1fs",
               (long long)j->id, j->name, r->delay);
        break;
    }
}

/* Counts a snooze of job id and returns how many in a row, or forgets the
 * job (forget set: it ended some other way). The count lives in this
 * runner only: a restart, or another runner, starts it again. */
static int
snooze_count(master *m, int64_t id, int forget)
{
    size_t i;

    for (i = 0; i < m->nsnoozes && m->snoozes[i].id != id; i++)
        ;
    if (forget) {
        if (i < m->nsnoozes)
            m->snoozes[i] = m->snoozes[--m->nsnoozes];
        return 0;
    }
    if (i < m->nsnoozes)
        return ++m->snoozes[i].n;
    if (m->nsnoozes == SNOOZES_MAX) {
        memmove(m->snoozes, m->snoozes + 1, --m->nsnoozes *
                sizeof *m->snoozes);
        i = m->nsnoozes;
    }
    if (m->nsnoozes == m->capsnoozes) {
        size_t cap = m->capsnoozes ? m->capsnoozes * 2 : 64;
        snoozed *p = realloc(m->snoozes, cap * sizeof *p);
        if (p == NULL)
            return 1;           /* uncounted: the limit is best effort */
        m->snoozes = p;
        m->capsnoozes = cap;
    }
    m->snoozes[m->nsnoozes].id = id;
    m->snoozes[m->nsnoozes].n = 1;
    m->nsnoozes++;
    return 1;
}

/* A snooze past max_snoozes: the job fails instead, as a failure counts.
 * Returns 1 when it did (res and mem are done with). */
static int
snooze_limit(master *m, wk *w, const jr_job *j, const jr_result *res,
             void *mem)
{
    char reason[128];
    int n;

    if (res->kind != JR_SNOOZE || m->cfg->max_snoozes <= 0) {
        snooze_count(m, j->id, 1);
        return 0;
    }
    if ((n = snooze_count(m, j->id, 0)) <= m->cfg->max_snoozes)
        return 0;
    snooze_count(m, j->id, 1);
    snprintf(reason, sizeof reason, "snoozed more than %d times in a row "
             "(max_snoozes)", m->cfg->max_snoozes);
    free(mem);
    fail_job(m, w->gen, j, reason);
    return 1;
}

static void
on_result(master *m, wk *w, jr_reader *r)
{
    jr_result res;
    jr_err err;
    void *mem;
    jr_job *j;
    double now = jr_mono(), secs;

    output_done(w);             /* what the job printed is logged as its */
    if (jr_frame_get_result(r, &res, &mem, &err) < 0 || w->njobs == 0 ||
        w->jobs[0]->id != res.id) {
        jr_log(JR_LOG_ERROR, "worker %d: %s", w->id, w->njobs == 0 ?
               "result for a job it does not hold" : "malformed result");
        free(mem);
        kill(w->pid, SIGKILL);
        return;
    }
    j = w->jobs[0];
    memmove(w->jobs, w->jobs + 1, (size_t)--w->njobs * sizeof *w->jobs);
    secs = now - w->started;
    w->avg = w->avg > 0 ? 0.8 * w->avg + 0.2 * secs : secs;
    m->avg = m->avg > 0 ? 0.95 * m->avg + 0.05 * secs : secs;
    if (!snooze_limit(m, w, j, &res, mem)) {
        log_result(m, j, &res, secs);
        job_event(m, j, &res, secs);
        add_result(m, &res, mem);
    }
    free(j);
    if (m->cfg->max_jobs_per_worker > 0 &&
        ++w->jobs_run >= m->cfg->max_jobs_per_worker && !w->retiring) {
        w->retiring = 1;            /* recycled: bounds slow leaks */
        fit_target(m);
    }
    if (w->njobs > 0)
        job_started(m, w);
    else {
        w->idle_since = now;
        if (w->retiring)
            stop_worker(m, w);
    }
    kick(m);
}

static void
on_read(struct bufferevent *bev, void *arg)
{
    wk *w = arg;
    master *m = w->m;
    struct evbuffer *in = bufferevent_get_input(bev);
    jr_reader r;
    jr_err err;
    long len;

    for (;;) {
        size_t have = evbuffer_get_length(in);
        const char *head = (const char *)evbuffer_pullup(in, have < 4 ?
                                                         (ssize_t)have : 4);
        if (head == NULL || (len = jr_frame_complete(head, have, &err)) == 0)
            return;
        if (len < 0) {
            jr_log(JR_LOG_ERROR, "worker %d: %s", w->id, err.msg);
            kill(w->pid, SIGKILL);
            return;
        }
        head = (const char *)evbuffer_pullup(in, len);
        switch (jr_frame_open(&r, head)) {
        case JR_F_HELLO:
            on_hello(m, w, &r);
            kick(m);
            break;
        case JR_F_RESULT:
            on_result(m, w, &r);
            break;
        default:
            jr_log(JR_LOG_ERROR, "worker %d: unexpected frame", w->id);
            kill(w->pid, SIGKILL);
        }
        evbuffer_drain(in, (size_t)len);
    }
}

static void
on_event(struct bufferevent *bev, short what, void *arg)
{
    wk *w = arg;

    (void)bev;
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
        /* the process is going; SIGCHLD tells how. Make sure it goes. */
        bufferevent_free(w->bev);
        w->bev = NULL;
        kill_worker(w, SIGKILL);
    }
}

/* Puts descriptor from at number to in a child before exec. dup2 onto
 * itself would keep close-on-exec set, so that case clears it instead. */
static int
move_fd(int from, int to)
{
    if (from == to)
        return fcntl(to, F_SETFD, 0);
    return dup2(from, to) < 0 ? -1 : 0;
}

/* The worker's output descriptor per handler_output: the write end of a
 * new pipe the master reads (its read end in *rd), the output file, or -1
 * to inherit the runner's. */
static int
output_fd(master *m, int *rd)
{
    int p[2];

    *rd = -1;
    if (m->out_mode == OUT_FILE)
        return m->out_file;
    if (m->out_mode != OUT_LOG)
        return -1;
    if (pipe2(p, O_CLOEXEC) < 0) {
        jr_log(JR_LOG_ERROR, "cannot start a worker: pipe: %s",
               strerror(errno));
        return -2;
    }
    *rd = p[0];
    return p[1];
}

static wk *
spawn_worker(master *m)
{
    char fdarg[16];
    const char *argv[10];
    int sv[2], argc = 0, c3 = -1, c4 = -1, out, rd;
    wk *w;
    pid_t pid;

    if ((out = output_fd(m, &rd)) == -2)
        return NULL;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
        jr_log(JR_LOG_ERROR, "cannot start a worker: socketpair: %s",
               strerror(errno));
        goto fail;
    }
    /* above 4, so that moving one to 3 cannot overwrite the other */
    c3 = fcntl(sv[1], F_DUPFD_CLOEXEC, 5);
    close(sv[1]);
    c4 = out >= 0 ? fcntl(out, F_DUPFD_CLOEXEC, 5) : -1;
    if (c3 < 0 || (out >= 0 && c4 < 0)) {
        jr_log(JR_LOG_ERROR, "cannot start a worker: fcntl: %s",
               strerror(errno));
        close(sv[0]);
        goto fail;
    }
    snprintf(fdarg, sizeof fdarg, out >= 0 ? "3:4" : "3");
    argv[argc++] = "jobrunner";
    argv[argc++] = "__worker";
    argv[argc++] = fdarg;
    argv[argc++] = m->cfg->scripts;
    argv[argc++] = m->cfg->file ? m->cfg->file : "";
    argv[argc] = NULL;
    pid = fork();
    if (pid < 0) {
        jr_log(JR_LOG_ERROR, "cannot start a worker: fork: %s",
               strerror(errno));
        close(sv[0]);
        goto fail;
    }
    if (pid == 0) {
        /* only async-signal-safe calls until exec. The worker leads its
         * own process group, so killing the group kills all it started */
        setpgid(0, 0);
        if (move_fd(c3, 3) < 0 || (c4 >= 0 && move_fd(c4, 4) < 0))
            _exit(127);
        execv(m->self, (char *const *)argv);
        _exit(127);
    }
    setpgid(pid, pid);          /* also here: whichever runs first */
    close(c3);
    if (c4 >= 0)
        close(c4);
    if (rd >= 0)
        close(out);
    w = calloc(1, sizeof *w);
    if (w == NULL) {
        close(sv[0]);
        if (rd >= 0)
            close(rd);
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
        return NULL;
    }
    evutil_make_socket_nonblocking(sv[0]);
    w->m = m;
    w->pid = pid;
    w->id = ++m->next_id;
    w->spawned = jr_mono();
    w->out_fd = rd;
    if (rd >= 0) {
        evutil_make_socket_nonblocking(rd);
        w->ev_out = event_new(m->base, rd, EV_READ | EV_PERSIST, on_output,
                              w);
        event_add(w->ev_out, NULL);
    }
    w->bev = bufferevent_socket_new(m->base, sv[0], BEV_OPT_CLOSE_ON_FREE);
    bufferevent_setcb(w->bev, on_read, NULL, on_event, w);
    bufferevent_enable(w->bev, EV_READ | EV_WRITE);
    w->next = m->workers;
    m->workers = w;
    m->nworkers++;
    jr_log(JR_LOG_DEBUG, "worker %d started (pid %d)", w->id, (int)pid);
    return w;
fail:
    if (c3 >= 0)
        close(c3);
    if (c4 >= 0)
        close(c4);
    if (rd >= 0) {
        close(rd);
        close(out);
    }
    return NULL;
}

static void
on_spawn(evutil_socket_t fd, short what, void *arg)
{
    master *m = arg;

    (void)fd;
    (void)what;
    fit_target(m);
}

/* Reads what a dead worker wrote before it died: its last results count,
 * not the way it died. */
static void
drain_worker(wk *w)
{
    struct evbuffer *in;
    int fd;

    if (w->bev == NULL)
        return;
    in = bufferevent_get_input(w->bev);
    fd = bufferevent_getfd(w->bev);
    while (evbuffer_read(in, fd, 65536) > 0)
        ;
    on_read(w->bev, w);
}

/* Fails or requeues what a worker held when it went away. */
static void
worker_gone(master *m, wk *w, int status)
{
    char reason[128];
    int i;

    drain_worker(w);
    kill(-w->pid, SIGKILL);     /* what its handlers started dies with it */
    output_done(w);
    if (w->kill_reason[0])
        snprintf(reason, sizeof reason, "%s", w->kill_reason);
    else if (!w->ready && WIFEXITED(status) &&
             WEXITSTATUS(status) == JR_WORKER_LOAD_STUCK)
        snprintf(reason, sizeof reason, "did not finish loading handlers "
                 "within %gs (see the line above)", m->cfg->load_timeout);
    else if (WIFEXITED(status) && WEXITSTATUS(status) == JR_WORKER_RECYCLE)
        snprintf(reason, sizeof reason, "recycled: a handler hit the "
                 "memory limit");
    else if (WIFSIGNALED(status))
        snprintf(reason, sizeof reason, "worker died (signal %d)",
                 WTERMSIG(status));
    else
        snprintf(reason, sizeof reason, "worker died (exit %d)",
                 WEXITSTATUS(status));
    if (WIFEXITED(status) && WEXITSTATUS(status) == JR_WORKER_RECYCLE &&
        w->njobs == 0)
        jr_log(JR_LOG_INFO, "worker %d (pid %d) %s", w->id, (int)w->pid,
               reason);
    else if (w->stopping && w->njobs == 0 && WIFEXITED(status) &&
        WEXITSTATUS(status) == 0)
        jr_log(JR_LOG_DEBUG, "worker %d (pid %d) stopped", w->id,
               (int)w->pid);
    else if (w->njobs > 0 || !m->stopping)
        jr_log(JR_LOG_WARN, "worker %d (pid %d): %s%s", w->id, (int)w->pid,
               reason, w->njobs > 0 ? "" : " while idle");
    if (w == m->probe) {
        m->probe = NULL;
        jr_log(JR_LOG_ERROR, "reload failed, generation %s keeps running: "
               "the new worker exited before loading (%s)", m->gen->hash,
               reason);
        reload_event(m, 0, reason);
    }
    if (w->njobs > 0) {
        if (m->stopping && !w->kill_reason[0])
            release_job(m, w->jobs[0]);
        else {
            fail_job(m, w->gen, w->jobs[0], reason);
            free(w->jobs[0]);
        }
    }
    for (i = w->njobs - 1; i >= 1; i--)      /* never started: back in line */
        if (m->stopping || queue_push(m, w->jobs[i], 1) < 0)
            release_job(m, w->jobs[i]);
    w->njobs = 0;
    if (w->bev != NULL)
        bufferevent_free(w->bev);
    output_close(w);
    gen_unref(w->gen);
    if (!m->stopping && !w->stopping) {
        struct timeval tv = {0, 0};
        /* workers that die right away (a crashing module) back off */
        m->spawn_delay = jr_mono() - w->spawned < 1 ?
            (m->spawn_delay ? m->spawn_delay * 2 : 0.1) : 0;
        if (m->spawn_delay > 10)
            m->spawn_delay = 10;
        tv.tv_sec = (long)m->spawn_delay;
        tv.tv_usec = (long)((m->spawn_delay - (double)tv.tv_sec) * 1e6);
        event_add(m->ev_spawn, &tv);
    }
    free(w);
}

static void
reap(master *m)
{
    int status;
    pid_t pid;
    wk **pw, *w;

    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        for (pw = &m->workers; (w = *pw) != NULL; pw = &w->next)
            if (w->pid == pid)
                break;
        if (w == NULL)
            continue;
        *pw = w->next;
        m->nworkers--;
        worker_gone(m, w, status);
    }
    kick(m);
}

/* --- timers and signals --------------------------------------------- */

static void
on_poll(evutil_socket_t fd, short what, void *arg)
{
    master *m = arg;

    (void)fd;
    (void)what;
    m->want_claim = 1;
    kick(m);
}

/* The wake descriptor is readable: let the next cycle consume it (on the
 * database thread) and claim. Re-armed when that cycle is done. */
static void
on_wake(evutil_socket_t fd, short what, void *arg)
{
    master *m = arg;

    (void)what;
    if (fd >= 0)
        m->rechecks = 0;        /* a fresh write, not our re-check timer */
    m->wake_due = 1;
    kick(m);
}

static void
on_renew(evutil_socket_t fd, short what, void *arg)
{
    master *m = arg;

    (void)fd;
    (void)what;
    m->renew_due = 1;
    kick(m);
}

static void
on_rescue(evutil_socket_t fd, short what, void *arg)
{
    master *m = arg;

    (void)fd;
    (void)what;
    m->rescue_due = 1;
    kick(m);
}

static int
busy_workers(master *m)
{
    int n = 0;
    wk *w;

    for (w = m->workers; w; w = w->next)
        n += w->njobs > 0;
    return n;
}

/* Kills a worker that has not said hello load_timeout seconds after it
 * started: its loading is stuck where no instruction budget reaches (a
 * handler file blocked in C). A probe's reload then fails (worker_gone). */
static void
hello_deadline(master *m, wk *w, double now)
{
    /* the worker's own watchdog fires first and names the file */
    if (w->ready || w->stopping || w->kill_reason[0] ||
        now - w->spawned <= m->cfg->load_timeout + HELLO_GRACE)
        return;
    snprintf(w->kill_reason, sizeof w->kill_reason, "did not finish "
             "loading handlers within %gs", m->cfg->load_timeout);
    jr_log(JR_LOG_WARN, "worker %d (pid %d) %s (a handler file stuck "
           "outside Lua?): killing it", w->id, (int)w->pid, w->kill_reason);
    kill(w->pid, SIGKILL);
}

/* Kills workers whose job overran its timeout, and ends a shutdown. */
static void
on_tick(evutil_socket_t fd, short what, void *arg)
{
    master *m = arg;
    double now = jr_mono();
    wk *w;

    (void)fd;
    (void)what;
    for (w = m->workers; w; w = w->next)
        hello_deadline(m, w, now);
    for (w = m->workers; w; w = w->next) {
        const jr_handler *h;
        double limit;
        if (w->njobs == 0 || w->kill_reason[0])
            continue;
        h = handler_info(w->gen, w->jobs[0]->name);
        limit = h && h->timeout > 0 ? h->timeout : m->cfg->timeout;
        if (now - w->started > limit + KILL_GRACE) {
            snprintf(w->kill_reason, sizeof w->kill_reason, "timed out "
                     "after %gs (worker killed)", limit);
            jr_log(JR_LOG_WARN, "job %lld (%s): still running %gs past its "
                   "%gs timeout; killing worker %d", (long long)w->jobs[0]->id,
                   w->jobs[0]->name, KILL_GRACE, limit, w->id);
            kill_worker(w, SIGKILL);
        }
    }
    if (m->stopping && (busy_workers(m) == 0 || now > m->stop_deadline))
        event_base_loopbreak(m->base);
    if (!m->stopping && m->target > m->cfg->conc_min)
        for (w = m->workers; w; w = w->next)
            if (w->ready && !w->stopping && !w->retiring && !w->probe &&
                w->njobs == 0 && now - w->idle_since > m->cfg->idle_timeout) {
                set_target(m, m->target - 1, "idle");
                break;
            }
}

/* Adds a worker when every worker is busy and jobs are waiting. */
static void
scale_up(master *m)
{
    wk *w;

    if (m->stopping || m->target >= m->cfg->conc_max || m->gen == NULL ||
        !(m->qlen > 0 || m->full_batch))
        return;
    for (w = m->workers; w; w = w->next)
        if (!w->stopping && !w->retiring && !w->probe &&
            (!w->ready || w->njobs == 0))
            return;         /* one is idle or still starting */
    set_target(m, m->target + 1, "backlog");
}

static void
on_hooktick(evutil_socket_t fd, short what, void *arg)
{
    master *m = arg;

    (void)fd;
    (void)what;
    m->count_due = 1;       /* the cycle counts the backlog, then fires */
    kick(m);
}

static void
begin_stop(master *m)
{
    jr_job *j;
    wk *w;

    m->stopping = 1;
    m->stop_deadline = jr_mono() + m->cfg->shutdown_timeout;
    while ((j = queue_pop(m)) != NULL)
        release_job(m, j);
    jr_log(JR_LOG_INFO, "shutting down: waiting up to %gs for %d running "
           "job%s", m->cfg->shutdown_timeout, busy_workers(m),
           busy_workers(m) == 1 ? "" : "s");
    for (w = m->workers; w; w = w->next)
        if (w->njobs == 0 && w->bev != NULL) {
            jr_buf_reset(&m->out);
            jr_frame_end(&m->out, jr_frame_begin(&m->out, JR_F_STOP));
            bufferevent_write(w->bev, m->out.p, m->out.len);
        }
    kick(m);
    on_tick(-1, 0, m);
}

static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
    master *m = arg;

    (void)what;
    switch (sig) {
    case SIGCHLD:
        reap(m);
        if (m->stopping)
            on_tick(-1, 0, m);
        return;
    case SIGHUP:
        reload(m);
        return;
    case SIGTTIN:
        set_target(m, m->target + 1, "signal");
        return;
    case SIGTTOU:
        set_target(m, m->target - 1, "signal");
        return;
    }
    if (m->stopping) {
        jr_log(JR_LOG_WARN, "second signal: stopping now; running jobs come "
               "back when their lease expires");
        m->stopping = 2;
        event_base_loopbreak(m->base);
        return;
    }
    begin_stop(m);
}

/* --- start and stop ------------------------------------------------- */

static struct event *
add_timer(master *m, double secs, event_callback_fn fn)
{
    struct event *ev = event_new(m->base, -1, EV_PERSIST, fn, m);
    struct timeval tv;

    tv.tv_sec = (long)secs;
    tv.tv_usec = (long)((secs - (double)tv.tv_sec) * 1e6);
    if (ev != NULL)
        event_add(ev, &tv);
    return ev;
}

static void
make_token(master *m)
{
    char host[64] = "host";
    unsigned char rnd[6] = {0};
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);

    if (fd >= 0) {
        if (read(fd, rnd, sizeof rnd) < 0)
            memset(rnd, 0, sizeof rnd);
        close(fd);
    }
    gethostname(host, sizeof host - 1);
    snprintf(m->token, sizeof m->token, "%s:%d:%02x%02x%02x%02x%02x%02x",
             host, (int)getpid(), rnd[0], rnd[1], rnd[2], rnd[3], rnd[4],
             rnd[5]);
}

/* Opens and migrates the database, retrying a database that cannot be
 * reached (not a bad URL) for wait_for_db seconds (< 0: forever). */
static int
open_db(master *m, const jr_backend_opts *o, jr_err *err)
{
    double waited = 0, delay = 0.2, limit = m->cfg->wait_for_db;

    for (;;) {
        if (jr_db_open(&m->db, m->cfg->backend, o, err) == 0 &&
            m->db.ops->migrate(m->db.b, err) == 0)
            break;
        jr_db_close(&m->db);
        if (err->code != JR_EDB || (limit >= 0 && waited >= limit))
            return -1;
        if (waited == 0)
            jr_log(JR_LOG_ERROR, "%s; retrying %s (wait_for_db)", err->msg,
                   limit < 0 ? "until it answers" : "for a while");
        usleep((useconds_t)(delay * 1e6));
        waited += delay;
        delay = delay * 2 > DB_RETRY_MAX ? DB_RETRY_MAX : delay * 2;
    }
    if (waited > 0)
        jr_log(JR_LOG_INFO, "database: reached after %.1fs", waited);
    return 0;
}

static int
start(master *m, jr_err *err)
{
    struct event_config *ecfg;
    static const int sigs[6] = {SIGTERM, SIGINT, SIGCHLD, SIGHUP, SIGTTIN,
                                SIGTTOU};
    jr_backend_opts o = {0};
    const char *arg;
    int i, fd, rc;

    /* first: a second runner on the same pid file stops here, except on
     * PostgreSQL's shared default, as many runners may share its queue */
    jr_pidfile_path(m->cfg, m->pidfile, sizeof m->pidfile);
    if ((rc = jr_pidfile_write(m->pidfile, err)) < 0) {
        m->pidfile[0] = '\0';
        if (rc == -2 && m->cfg->pid_file == NULL &&
            jr_url_parse(m->cfg->backend, &arg, NULL) == &jr_postgres_ops)
            jr_log(JR_LOG_WARN, "%s; going on without a pid file (set "
                   "pid_file per runner to reach each with 'jobrunner "
                   "reload')", err->msg);
        else if (err->code == JR_ECONFIG)
            return -1;
        else
            jr_log(JR_LOG_WARN, "%s; 'jobrunner reload' will not find this "
                   "runner", err->msg);
    }
    /* The runner's own writes (claims, results, rescues) need no fsync of
     * their own: power loss can only undo some of them, and an undone
     * claim or result makes its job run again, which at-least-once allows;
     * never a lost job. Pushes by producers keep `synchronous` (FULL). */
    if (output_open(m, err) < 0)
        return -1;
    o.sync_normal = 1;
    o.busy_timeout = m->cfg->busy_timeout;
    o.schema = m->cfg->schema;
    o.max_payload = m->cfg->max_payload;
    jr_url_mask(m->cfg->backend, m->url, sizeof m->url);
    if (open_db(m, &o, err) < 0)
        return -1;
    make_token(m);
    /* precise timers: the default coarse clock ticks in 4 ms steps, too
     * slow for wake-up re-checks and sub-millisecond dispatch */
    if ((ecfg = event_config_new()) == NULL ||
        event_config_set_flag(ecfg, EVENT_BASE_FLAG_PRECISE_TIMER) < 0 ||
        (m->base = event_base_new_with_config(ecfg)) == NULL) {
        event_config_free(ecfg);
        return jr_fail(err, JR_ESYS, "cannot create the event loop");
    }
    event_config_free(ecfg);
    signal(SIGPIPE, SIG_IGN);
    for (i = 0; i < 6; i++) {
        m->ev_sig[i] = evsignal_new(m->base, sigs[i], on_signal, m);
        event_add(m->ev_sig[i], NULL);
    }
    m->ev_work = event_new(m->base, -1, 0, on_work, m);
    m->ev_spawn = event_new(m->base, -1, 0, on_spawn, m);
    m->ev_recheck = event_new(m->base, -1, 0, on_wake, m);
    m->ev_poll = add_timer(m, m->cfg->poll_interval, on_poll);
    m->ev_renew = add_timer(m, m->cfg->lease / 3, on_renew);
    m->ev_rescue = add_timer(m, m->cfg->lease / 2, on_rescue);
    m->ev_tick = add_timer(m, 0.25, on_tick);
    m->wake_fd = -1;
    if ((fd = m->db.ops->wake_fd(m->db.b)) >= 0)
        m->db.ops->changed(m->db.b, err);   /* start from now */
    watch_wake(m, fd);
    if ((i = m->db.ops->rescue(m->db.b, err)) > 0)
        jr_log(JR_LOG_WARN, "requeued %d job%s whose runner's lease expired",
               i, i == 1 ? "" : "s");
    m->dbt = jr_dbthread_new(&m->db, m->token, m->cfg->lease, m->base,
                             on_cycle_done, m, err);
    if (m->dbt == NULL)
        return -1;
    m->hooks = jr_hooks_new(m->cfg->L, m->cfg->ref);
    if (jr_hooks_has(m->hooks, JR_HOOK_TICK))
        m->ev_hooktick = add_timer(m, m->cfg->tick_interval, on_hooktick);
    m->tick_at = jr_mono();
    if (m->cfg->watch &&
        (m->watch = jr_watch_new(m->base, m->cfg->scripts, 0.2, on_watch, m,
                                 err)) == NULL)
        jr_log(JR_LOG_WARN, "%s; reload with SIGHUP or 'jobrunner reload'",
               err->msg);
    jr_log(JR_LOG_INFO, "jobrunner %s started: backend %s, scripts %s, "
           "%d worker%s (max %d), pid %d", JR_VERSION, m->url,
           m->cfg->scripts, m->cfg->conc_min, m->cfg->conc_min == 1 ? "" : "s",
           m->cfg->conc_max, (int)getpid());
    if (jr_hook_begin(m->hooks, JR_HOOK_START)) {
        jr_hook_int(m->hooks, "pid", getpid());
        jr_hook_str(m->hooks, "backend", m->url);
        jr_hook_str(m->hooks, "scripts", m->cfg->scripts);
        jr_hook_int(m->hooks, "min", m->cfg->conc_min);
        jr_hook_int(m->hooks, "max", m->cfg->conc_max);
        jr_hook_fire(m->hooks, NULL);
    }
    m->target = m->cfg->conc_min;
    fit_target(m);
    return 0;
}

/* After the loop: stop workers, record what is known, close. */
static void
finish(master *m)
{
    wk *w;
    jr_job *j;
    jr_cycle *c;
    double until = jr_mono() + 2;

    if ((c = jr_dbthread_wait(m->dbt)) != NULL) {
        free((void *)c->results);
        c->results = NULL;
        if (c->applied < 0)
            results_back(m);
        else
            results_recorded(m, m->inflight, m->ninflight, c->applied);
        m->ninflight = 0;
        for (int i = 0; i < c->nclaimed; i++)
            release_job(m, c->claimed[i]);
    }
    jr_dbthread_free(m->dbt);
    m->dbt = NULL;

    for (w = m->workers; w; w = w->next) {
        int i;
        if (m->stopping == 1 && w->njobs > 0) {
            jr_log(JR_LOG_WARN, "job %lld (%s) still running at the end of "
                   "the shutdown timeout; returned to the queue",
                   (long long)w->jobs[0]->id, w->jobs[0]->name);
            for (i = 0; i < w->njobs; i++)
                release_job(m, w->jobs[i]);
            w->njobs = 0;
        }
        kill_worker(w, m->stopping == 1 && w->njobs == 0 ? SIGTERM :
                    SIGKILL);
    }
    while ((j = queue_pop(m)) != NULL)
        release_job(m, j);
    if (m->nres > 0 && flush_results(m) < 0)
        jr_log(JR_LOG_ERROR, "%d results could not be recorded; their "
               "leases will requeue the jobs", m->nres);
    while (m->workers != NULL && jr_mono() < until) {
        int status;
        pid_t pid = waitpid(-1, &status, 0);
        wk **pw;
        if (pid < 0)
            break;
        for (pw = &m->workers; *pw; pw = &(*pw)->next)
            if ((*pw)->pid == pid) {
                w = *pw;
                *pw = w->next;
                kill(-pid, SIGKILL);
                output_done(w);
                output_close(w);
                for (int i = 0; i < w->njobs; i++)
                    free(w->jobs[i]);
                if (w->bev)
                    bufferevent_free(w->bev);
                gen_unref(w->gen);
                free(w);
                break;
            }
    }
    if (m->pidfile[0])
        jr_pidfile_remove(m->pidfile);
    if (jr_hook_begin(m->hooks, JR_HOOK_STOP)) {
        jr_hook_int(m->hooks, "done", m->done);
        jr_hook_int(m->hooks, "failed", m->failed);
        jr_hook_int(m->hooks, "dead", m->dead);
        jr_hook_fire(m->hooks, NULL);
    }
    jr_log(JR_LOG_INFO, "stopped: %ld done, %ld failed, %ld dead", m->done,
           m->failed, m->dead);
}

static void
cleanup(master *m)
{
    struct event *evs[] = {m->ev_work, m->ev_poll, m->ev_renew, m->ev_rescue,
                           m->ev_tick, m->ev_wake, m->ev_spawn, m->ev_sig[0],
                           m->ev_sig[1], m->ev_sig[2], m->ev_sig[3],
                           m->ev_sig[4], m->ev_sig[5], m->ev_hooktick,
                           m->ev_recheck};
    size_t i;
    int k;
    wk *w;

    while ((w = m->workers) != NULL) {
        m->workers = w->next;
        for (k = 0; k < w->njobs; k++)
            free(w->jobs[k]);
        if (w->bev)
            bufferevent_free(w->bev);
        output_close(w);
        gen_unref(w->gen);
        free(w);
    }
    if (m->out_file >= 0)
        close(m->out_file);
    jr_watch_free(m->watch);
    for (i = 0; i < sizeof evs / sizeof evs[0]; i++)
        if (evs[i] != NULL)
            event_free(evs[i]);
    jr_dbthread_free(m->dbt);
    for (k = 0; k < m->nres; k++)
        free(m->res[k].mem);
    free(m->res);
    for (k = 0; k < m->ninflight; k++)
        free(m->inflight[k].mem);
    free(m->inflight);
    free(m->snoozes);
    gen_unref(m->cycle_gen);
    gen_unref(m->gen);
    jr_hooks_free(m->hooks);
    free(m->queue);
    jr_buf_free(&m->out);
    if (m->base)
        event_base_free(m->base);
    jr_db_close(&m->db);
}

int
jr_master_run(jr_config *cfg, const char *self)
{
    master m;
    jr_err err;
    int rc = 0;

    memset(&m, 0, sizeof m);
    m.out_file = -1;
    m.cfg = cfg;
    m.self = self;
    if (start(&m, &err) < 0) {
        jr_log(JR_LOG_ERROR, "%s", err.msg);
        if (m.pidfile[0])
            jr_pidfile_remove(m.pidfile);
        cleanup(&m);
        return 1;
    }
    event_base_dispatch(m.base);
    finish(&m);
    cleanup(&m);
    return rc;
}
