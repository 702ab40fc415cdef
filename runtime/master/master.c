/* master.c - the runner's master process: one libevent loop, its signals
 * and timers, start-up and shutdown. The only backend connection is the
 * database thread's (dbthread.c), which works for the loop. Timers and events
 * only set a flag and kick; one pass of work (claimcyc.c) then hands out
 * jobs and starts a database cycle. Its other concerns sit beside it and
 * share master_int.h: claimq.c (local queue), claimres.c (results),
 * claimcyc.c (database cycle), pool.c, death.c and output.c (workers),
 * gen.c (reload). The services
 * beside the claim (services/) come as a list from the command that runs
 * the master, and are called only through service.h. */
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

#include "base/version.h"
#include "db/dbthread.h"
#include "lua/hooks.h"
#include "master/reload.h"
#include "worker/frame.h"
#include "base/log.h"
#include "master/master.h"
#include "base/job.h"
#include "base/util.h"
#include "worker/worker.h"
#include "master/master_int.h"
#include "master/notify.h"
#include "caps.h"
#include "url.h"
#include "master/httphost.h"
#include "master/lane.h"
#include "master/service.h"

#define TICK_SECS      0.25     /* on_tick: deadlines, shutdown, idle */
#define IDLE_TICK_SECS 1.0      /* on_tick when nothing it watches runs */
#define WATCH_DEBOUNCE 0.2      /* seconds of quiet in scripts/ to reload */
#define STOP_WAIT      2.0      /* seconds finish waits for workers to exit */
#define SOLO_SECS      2.0      /* start-up: the first worker's claim
                                   awaited before the others start */
#define TIMER_SLACK    0.001    /* a periodic timer this close to its
                                   instant has reached it */

/* What the master handles (NSIGNALS of them): stop, stop now on a second
 * one, reap, reload, one worker more, one less. */
static const int signals[NSIGNALS] = {SIGTERM, SIGINT, SIGCHLD, SIGHUP,
                                      SIGTTIN, SIGTTOU};


static void
on_watch(void *arg)
{
    jr_gen_reload(arg);
}

/* Arms the one-shot ev for the next instant of a grid of secs seconds
 * counted from m->timer_epoch. The periodic timers (the poll, the lease's
 * renewal and rescue, the services' flags, the tick) each counted their
 * period from when they were made, microseconds to a quarter second
 * apart, and woke the loop once each: at rest two to four wake-ups a
 * second, and a second database cycle whenever a service's flag came
 * just after the poll's cycle had left. On one grid, the timers due at
 * an instant fire in one pass and their flags ride one cycle. */
static void
arm_aligned(master *m, struct event *ev, double secs)
{
    double now, next;
    struct timeval tv;

    /* event_add counts tv from the loop's clock, which a pass keeps at
     * its start: brought to now, as next is counted */
    event_base_update_cache_time(m->base);
    now = jr_mono();
    if (m->timer_epoch == 0)
        m->timer_epoch = now;
    next = m->timer_epoch + ((double)(long long)((now - m->timer_epoch) /
                                                 secs) + 1) * secs;
    if (next - now < TIMER_SLACK)   /* fired on its instant, or just before */
        next += secs;
    tv.tv_sec = (long)(next - now);
    tv.tv_usec = (long)((next - now - (double)tv.tv_sec) * 1e6);
    event_add(ev, &tv);
}

static void
on_spawn(evutil_socket_t fd, short what, void *arg)
{
    master *m = arg;

    (void)fd;
    (void)what;
    m->solo = 0;                /* the first worker is slow: all start */
    jr_pool_fit(m);
}

/* A jr_flag_timer fired: set its flag, kick. */
static void
on_flag(evutil_socket_t fd, short what, void *arg)
{
    jr_flag_timer *t = arg;

    (void)fd;
    (void)what;
    arm_aligned(t->m, t->ev, t->secs);
    *t->flag = 1;
    jr_master_kick(t->m);
}

/* 1 when on_tick has nothing to watch closely: every worker up and
 * between jobs, none queued, no stop, no failed spawn, a pool at its
 * floor. Its services' ticks wait a second or more anyway. */
static int
tick_idle(const master *m)
{
    const wk *w;

    if (m->stopping || m->spawn_fails > 0 || m->qlen > 0 ||
        m->target > m->cfg->conc_min)
        return 0;
    for (w = m->workers; w; w = w->next)
        if (!w->ready || w->stopping || w->retiring || w->njobs > 0 ||
            w->kill_reason[0])
            return 0;
    return 1;
}

/* on_tick every IDLE_TICK_SECS (slow) or TICK_SECS: at rest its four
 * wake-ups a second were most of an idle runner's. On the periodic
 * timers' grid (arm_aligned): at rest it wakes with the poll. */
static void
tick_pace(master *m, int slow)
{
    if (slow == m->tick_slow || m->ev_tick == NULL)
        return;
    m->tick_slow = slow;
    arm_aligned(m, m->ev_tick, slow ? IDLE_TICK_SECS : TICK_SECS);
}

void
jr_master_tick_busy(master *m)
{
    if (m->tick_slow)
        tick_pace(m, 0);
}

/* Every TICK_SECS (IDLE_TICK_SECS at rest): kills workers past a
 * deadline, ends a shutdown, and retires an idle worker. */
static void
on_tick(evutil_socket_t fd, short what, void *arg)
{
    master *m = arg;
    double now = jr_mono();

    (void)fd;
    (void)what;
    if ((what & EV_TIMEOUT) && m->ev_tick != NULL)     /* its timer's */
        arm_aligned(m, m->ev_tick, m->tick_slow ? IDLE_TICK_SECS : TICK_SECS);
    jr_death_deadlines(m, now);
    jr_pool_starved(m, now);
    if (m->stopping && ((jr_pool_busy(m) == 0 && jr_held_asked(m) == 0) ||
                        now > m->stop_deadline))
        event_base_loopbreak(m->base);
    jr_pool_idle(m, now);
    jr_service_tick(m, now);
    tick_pace(m, tick_idle(m));
}

static void
begin_stop(master *m)
{
    jr_job *j;
    wk *w;

    m->stopping = 1;
    jr_notify_send(m->notify, "STOPPING=1");
    jr_httphost_stopping(m);
    m->stop_deadline = jr_mono() + m->cfg->shutdown_timeout;
    while ((j = jr_claimq_pop(m)) != NULL)
        jr_claimq_release(m, j);
    jr_log(JR_LOG_INFO, "shutting down: waiting up to %gs for %d running "
           "job%s", m->cfg->shutdown_timeout, jr_pool_busy(m),
           jr_pool_busy(m) == 1 ? "" : "s");
    for (w = m->workers; w; w = w->next)
        if (w->bev != NULL) {
            /* a busy one's checkpoints hand their jobs back */
            jr_buf_reset(&m->out);
            jr_frame_end(&m->out, jr_frame_begin(&m->out, w->njobs == 0 ?
                                                 JR_F_STOP : JR_F_HANDBACK));
            bufferevent_write(w->bev, m->out.p, m->out.len);
        }
    jr_master_kick(m);
    on_tick(-1, 0, m);
}

static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
    master *m = arg;

    (void)what;
    switch (sig) {
    case SIGCHLD:
        jr_death_reap(m);
        if (m->stopping)
            on_tick(-1, 0, m);
        return;
    case SIGHUP:
        jr_gen_reload(m);
        return;
    case SIGTTIN:
        jr_pool_set_target(m, m->target + 1, "signal");
        return;
    case SIGTTOU:
        jr_pool_set_target(m, m->target - 1, "signal");
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

/* A timer calling fn every secs seconds on the grid of arm_aligned: fn
 * arms the next one. */
static struct event *
add_timer(master *m, double secs, event_callback_fn fn, void *arg)
{
    struct event *ev = event_new(m->base, -1, 0, fn, arg);

    if (ev != NULL)
        arm_aligned(m, ev, secs);
    return ev;
}

/* Arms t to set *flag and kick every secs seconds. */
void
jr_master_flag(master *m, jr_flag_timer *t, double secs, int *flag)
{
    t->m = m;
    t->flag = flag;
    t->secs = secs;
    t->ev = add_timer(m, secs, on_flag, t);
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

/* Writes the pid file first: a second runner on the same pid file stops
 * here, except on PostgreSQL's shared default, as many runners may share
 * its queue. Returns -1 only for a pid file the config names wrongly. */
static int
write_pidfile(master *m, jr_err *err)
{
    int rc;

    jr_pidfile_path(m->cfg, m->pidfile, sizeof m->pidfile);
    if ((rc = jr_pidfile_write(m->pidfile, err)) >= 0) {
        jr_pidfile_state(m->pidfile, NULL); /* a killed runner's, stale */
        return 0;
    }
    m->pidfile[0] = '\0';
    if (rc == -2 && m->cfg->pid_file == NULL &&
        jr_url_caps(m->cfg->backend)->remote)
        jr_log(JR_LOG_WARN, "%s; going on without a pid file (set "
               "pid_file per runner to reach each with 'jobrunner "
               "reload')", err->msg);
    else if (err->code == JR_ECONFIG)
        return -1;
    else
        jr_log(JR_LOG_WARN, "%s; 'jobrunner reload' will not find this "
               "runner", err->msg);
    return 0;
}

/* The event loop, its signals, the events kicked by hand and the
 * timers. */
static int
make_loop(master *m, jr_err *err)
{
    struct event_config *ecfg;
    int i;

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
    for (i = 0; i < NSIGNALS; i++) {
        m->ev_sig[i] = evsignal_new(m->base, signals[i], on_signal, m);
        event_add(m->ev_sig[i], NULL);
    }
    m->ev_work = event_new(m->base, -1, 0, jr_claimq_work, m);
    m->ev_spawn = event_new(m->base, -1, 0, on_spawn, m);
    m->ev_recheck = event_new(m->base, -1, 0, jr_claimq_wake, m);
    jr_master_flag(m, &m->poll, m->cfg->poll_interval, &m->want_claim);
    jr_master_flag(m, &m->renew, m->cfg->lease / 3, &m->renew_due);
    jr_master_flag(m, &m->rescue, m->cfg->lease / 2, &m->rescue_due);
    m->ev_tick = add_timer(m, TICK_SECS, on_tick, m);
    return 0;
}

/* Once the database is open and the loop made: watch the database's
 * wake-ups, rescue what lost runners held, start its thread. */
static int
start_db(master *m, jr_err *err)
{
    int n;

    m->wake_fd = -1;
    jr_claimq_watch_wake(m, jr_dbthread_wake_fd(m->db));
    if ((n = jr_dbthread_rescue(m->db, err)) > 0)
        jr_log(JR_LOG_WARN, "requeued %d job%s whose runner's lease expired",
               n, n == 1 ? "" : "s");
    m->dbt = jr_dbthread_new(m->db, m->token, m->cfg->lease, m->base,
                             jr_claimq_cycle_done, m, err);
    return m->dbt == NULL ? -1 : 0;
}

static int
start(master *m, jr_err *err)
{
    if (write_pidfile(m, err) < 0 || jr_output_open(m, err) < 0)
        return -1;
    jr_url_mask(m->cfg->backend, m->url, sizeof m->url);
    if ((m->db = jr_dbthread_open(m->cfg, err)) == NULL)
        return -1;
    make_token(m);
    if (make_loop(m, err) < 0 || start_db(m, err) < 0)
        return -1;
    if (m->cfg->trace_endpoint != NULL &&
        (m->otlp = jr_otlp_new(m->cfg, err)) == NULL)
        return -1;
    m->notify = jr_notify_open(m->base);    /* READY=1: gen.c, on hello */
    m->hooks = jr_hooks_new(m->cfg->L, m->cfg->ref);
    if (jr_service_init(m) < 0)
        return jr_fail(err, JR_ENOMEM, "out of memory");
    if (jr_httphost_start(m, err) < 0)      /* shows the services' state */
        return -1;
    if (m->cfg->watch &&
        (m->watch = jr_watch_new(m->base, m->cfg->scripts, WATCH_DEBOUNCE,
                                 on_watch, m, err)) == NULL)
        jr_log(JR_LOG_WARN, "%s; reload with SIGHUP or 'jobrunner reload'",
               err->msg);
    jr_log(JR_LOG_INFO, "jobrunner %s started: backend %s, scripts %s, "
           "%d worker%s (max %d), pid %d", JR_VERSION, m->url,
           m->cfg->scripts, m->cfg->conc_min, m->cfg->conc_min == 1 ? "" : "s",
           m->cfg->conc_max, (int)getpid());
    jr_service_started(m);
    m->target = m->cfg->conc_min;
    m->solo = m->target > 1;
    jr_pool_fit(m);
    if (m->solo && !event_pending(m->ev_spawn, EV_TIMEOUT, NULL)) {
        struct timeval tv = {(long)SOLO_SECS, (long)((SOLO_SECS -
                             (double)(long)SOLO_SECS) * 1e6)};
        event_add(m->ev_spawn, &tv);
    }
    return 0;
}

/* Waits for the database thread's cycle, takes in what it did, and stops
 * the thread. cut: the lane's round was interrupted. */
static void
stop_db_thread(master *m, int cut)
{
    jr_cycle *c;

    /* results that round gave back are recorded at the end: with no
     * handler's statement run, which would hold the stop for good */
    if (jr_dbthread_settle(m->dbt, STOP_WAIT) == 0 && cut)
        jr_dbthread_cut(m->db);
    if ((c = jr_dbthread_wait(m->dbt)) != NULL) {
        free(c->results);
        c->results = NULL;
        free(c->held);
        c->held = NULL;
        if (c->applied < 0)
            jr_claimq_back(m);
        else
            jr_claimq_recorded(m, m->inflight, m->ninflight, c->applied);
        m->ninflight = 0;
        for (int i = 0; i < c->nclaimed; i++)
            jr_claimq_release(m, c->claimed[i]);
        jr_cycle_free_out(c);
        jr_service_drop(m, c);
    }
    jr_dbthread_free(m->dbt);
    m->dbt = NULL;
}

/* Gives back the jobs still running after a graceful stop's timeout, and
 * signals every worker: SIGTERM to an idle one after a graceful stop,
 * else SIGKILL. */
static void
stop_workers(master *m)
{
    wk *w;
    int i;

    for (w = m->workers; w; w = w->next) {
        if (m->stopping == 1 && w->njobs > 0) {
            jr_log(JR_LOG_WARN, "job %lld (%s) still running at the end of "
                   "the shutdown timeout; returned to the queue",
                   (long long)w->jobs[0]->id, w->jobs[0]->name);
            for (i = 0; i < w->njobs; i++)
                jr_claimq_release(m, w->jobs[i]);
            w->njobs = 0;
        }
        jr_pool_kill(w, m->stopping == 1 && w->njobs == 0 ? SIGTERM :
                    SIGKILL);
    }
}

/* Waits for the workers to exit until mono time until, then kills the
 * ones left and waits for them: never longer, whatever a worker does (one
 * that missed its SIGTERM kept the master in waitpid for good). Frees
 * each. */
static void
reap_workers(master *m, double until)
{
    wk *w, **pw;
    int status, killed = 0;
    pid_t pid;

    while (m->workers != NULL) {
        if ((pid = waitpid(-1, &status, killed ? 0 : WNOHANG)) < 0)
            break;
        if (pid == 0 && jr_mono() < until) {
            usleep(2000);
            continue;
        }
        if (pid == 0) {         /* the ones that exited are reaped: */
            for (w = m->workers; w; w = w->next) {
                jr_log(JR_LOG_WARN, "worker %d still there %gs after the "
                       "stop; killed", (int)w->pid, STOP_WAIT);
                jr_pool_kill(w, SIGKILL);
            }
            killed = 1;
            continue;
        }
        for (pw = &m->workers; *pw; pw = &(*pw)->next)
            if ((*pw)->pid == pid) {
                w = *pw;
                *pw = w->next;
                kill(-pid, SIGKILL);
                jr_output_done(w);
                jr_output_close(w);
                for (int i = 0; i < w->njobs; i++)
                    free(w->jobs[i]);
                if (w->bev)
                    bufferevent_free(w->bev);
                jr_gen_unref(w->gen);
                jr_spawn_unshare(w);
                jr_pool_free(w);
                break;
            }
    }
}

/* After the loop: stop workers, record what is known, close. */
static void
finish(master *m)
{
    jr_job *j;
    double until;
    int cut;

    jr_httphost_stop(m);
    jr_otlp_free(m->otlp);
    m->otlp = NULL;
    cut = jr_lane_stop(m);
    jr_service_stop(m);
    stop_db_thread(m, cut);
    until = jr_mono() + STOP_WAIT;
    stop_workers(m);
    while ((j = jr_claimq_pop(m)) != NULL)
        jr_claimq_release(m, j);
    jr_held_abandon(m);
    if (m->nres > 0 && jr_claimq_flush(m) < 0)
        jr_log(JR_LOG_ERROR, "%d results could not be recorded; their "
               "leases will requeue the jobs", m->nres);
    reap_workers(m, until);
    if (m->pidfile[0]) {
        jr_pidfile_state(m->pidfile, NULL);
        jr_pidfile_remove(m->pidfile);
    }
    jr_service_stopped(m);
    jr_log(JR_LOG_INFO, "stopped: %ld done, %ld failed, %ld dead", m->done,
           m->failed, m->dead);
}

static void
cleanup(master *m)
{
    struct event *evs[] = {m->ev_work, m->poll.ev, m->renew.ev, m->rescue.ev,
                           m->ev_tick, m->ev_wake, m->ev_spawn,
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
        jr_output_close(w);
        jr_gen_unref(w->gen);
        jr_spawn_unshare(w);
        jr_pool_free(w);
    }
    if (m->out_file >= 0)
        close(m->out_file);
    jr_watch_free(m->watch);
    jr_notify_close(m->notify);
    for (i = 0; i < sizeof evs / sizeof evs[0]; i++)
        if (evs[i] != NULL)
            event_free(evs[i]);
    for (k = 0; k < NSIGNALS; k++)
        if (m->ev_sig[k] != NULL)
            event_free(m->ev_sig[k]);
    jr_httphost_stop(m);
    jr_lane_stop(m);
    jr_dbthread_free(m->dbt);
    jr_service_free(m);                 /* after the thread */
    for (k = 0; k < m->nres; k++)
        jr_pending_free(&m->res[k]);
    free(m->res);
    for (k = 0; k < m->ninflight; k++)
        jr_pending_free(&m->inflight[k]);
    free(m->inflight);
    free(m->snoozes);
    free(m->suspects);
    jr_held_free(m);
    jr_gen_unref(m->cycle_gen);
    jr_gen_unref(m->gen);
    jr_hooks_free(m->hooks);
    free(m->queue);
    jr_buf_free(&m->out);
    if (m->base)
        event_base_free(m->base);
    jr_dbthread_close(m->db);
}

int
jr_master_run(jr_config *cfg, const char *self,
              const jr_service *const *services)
{
    master m;
    jr_err err;
    int rc = 0;

    memset(&m, 0, sizeof m);
    m.out_file = -1;
    m.cfg = cfg;
    m.self = self;
    m.services = services;
    err.code = -1;              /* 0 only when a stop cut the start short */
    err.msg[0] = '\0';
    if (start(&m, &err) < 0) {
        /* code 0: stopped while the start waited for the database */
        jr_log(err.code == 0 ? JR_LOG_INFO : JR_LOG_ERROR, "%s", err.msg);
        if (m.pidfile[0])
            jr_pidfile_remove(m.pidfile);
        cleanup(&m);
        return err.code == 0 ? 0 : 1;
    }
    event_base_dispatch(m.base);
    finish(&m);
    cleanup(&m);
    return rc;
}
