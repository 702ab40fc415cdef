/* pool.c - the worker processes: spawning them (the fork and exec are
 * spawn.c's) and sending their settings, reading their frames and
 * results (each job's end told to the services) and recycling. Their
 * number fitted to the target is poolsize.c's, their deaths and the
 * kills at a deadline death.c's, their output output.c's, the code their
 * hello loaded gen.c's. Uses master_int.h, service.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "base/log.h"
#include "master/master_int.h"
#include "base/retry.h"
#include "base/sqlstmt.h"
#include "worker/worker.h"

#define SPAWN_RETRY_MAX 5.0     /* seconds between spawns while they fail */
#define SNOOZES_MAX     65536   /* jobs remembered; the oldest go first */

/* The config's backoff for the retry policy: arg is the master. */
static double
config_backoff(void *arg, const jr_job *j, int max, const char *error)
{
    const master *m = arg;

    return jr_config_backoff(m->cfg, j, max, error);
}

void
jr_pool_retry_in(master *m, const gen *g, const jr_job *j, const char *error,
                 jr_retry_in *in)
{
    const jr_handler *h = jr_gen_handler(g, j->name);

    memset(in, 0, sizeof *in);
    in->job = j;
    in->error = error;
    in->handler_max = h ? h->max_retries : -1;
    in->config_max = m->cfg->max_retries;
    in->handler_backoff = h ? h->backoff : -1;  /* a function: -1 here */
    in->config_fn = config_backoff;
    in->config_arg = m;
}

/* A failure the master itself decides (worker died, killed): retry or
 * dead by the retry policy, without the handler's backoff function (it
 * lives in the workers). */
void
jr_pool_fail(master *m, const wk *w, const jr_job *j, const char *reason)
{
    const gen *g = w->gen;
    jr_retry_in in;
    jr_result r = {.id = j->id, .secs = jr_mono() - w->started,
                   .worker = w->id};
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
    jr_pool_retry_in(m, g, j, reason, &in);
    if (jr_retry_decide(&in, &r) == JR_DEAD) {
        jr_log(JR_LOG_WARN, "job %lld (%s) dead after %d attempts: %s",
               (long long)j->id, j->name, j->attempt, reason);
        m->dead++;
    } else {
        jr_log(JR_LOG_WARN, "job %lld (%s) failed (attempt %d of %d), "
               "retry in %.0fs: %s", (long long)j->id, j->name, j->attempt,
               jr_retry_max(j, in.handler_max, in.config_max) + 1, r.delay,
               reason);
        m->failed++;
    }
    jr_service_job_end(m, j, &r, 0);
    jr_claimq_result(m, &r, mem);
}

/* Kills a worker and everything it started: it leads its own process
 * group (the worker itself too, if the group is already gone). */
void
jr_pool_kill(wk *w, int sig)
{
    int i;

    if (kill(-w->pid, sig) < 0)
        kill(w->pid, sig);
    /* jobrunner.exec's children, in groups of their own (worker.h) */
    for (i = 0; sig == SIGKILL && w->share != NULL && i < JR_SHARE_KIDS; i++)
        if (w->share->kids[i] > 0)
            kill(-w->share->kids[i], SIGKILL);
}

int
jr_pool_send(wk *w, const char *p, size_t len, int now)
{
    struct evbuffer *out = bufferevent_get_output(w->bev);
    ssize_t n;

    if (now && evbuffer_get_length(out) == 0) {
        n = send(bufferevent_getfd(w->bev), p, len,
                 MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
        }
    }
    return len > 0 ? bufferevent_write(w->bev, p, len) : 0;
}

void
jr_pool_stop(master *m, wk *w)
{
    if (w->stopping)
        return;
    w->stopping = 1;
    if (w->bev == NULL)
        return;
    jr_buf_reset(&m->out);
    if (w->njobs > 0)           /* its checkpoints hand their jobs back */
        jr_frame_end(&m->out, jr_frame_begin(&m->out, JR_F_HANDBACK));
    jr_frame_end(&m->out, jr_frame_begin(&m->out, JR_F_STOP));
    bufferevent_write(w->bev, m->out.p, m->out.len);
}

void
jr_pool_handback(master *m, wk *w)
{
    if (w->bev == NULL || w->njobs == 0)
        return;
    jr_buf_reset(&m->out);
    jr_frame_end(&m->out, jr_frame_begin(&m->out, JR_F_HANDBACK));
    bufferevent_write(w->bev, m->out.p, m->out.len);
}

void
jr_pool_outcome(master *m, const jr_job *j, const jr_result *r, double secs)
{
    char first[300];
    const char *nl;

    /* written only when there is an error: an initializer zeroed the
     * 300 bytes for every job */
    strcpy(first, "(no error message)");
    if (r->error != NULL) {
        nl = strchr(r->error, '\n');
        snprintf(first, sizeof first, "%.*s", nl ? (int)(nl - r->error) :
                 (int)strlen(r->error), r->error);
    }
    switch (r->kind) {
    case JR_DONE:
        m->done++;
        if (r->error != NULL)   /* its return value has no JSON */
            jr_log(JR_LOG_WARN, "job %lld (%s) done in %.1fms, its %s",
                   (long long)j->id, j->name, secs * 1000, first);
        else
            jr_log(JR_LOG_DEBUG, "job %lld (%s) done in %.1fms",
                   (long long)j->id, j->name, secs * 1000);
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
    case JR_WAIT:
        if (r->wait_on != NULL)
            jr_log(JR_LOG_INFO, "job %lld (%s) waits for signal '%s'",
                   (long long)j->id, j->name, r->wait_on);
        else
            jr_log(JR_LOG_INFO, "job %lld (%s) sleeps for %.1fs",
                   (long long)j->id, j->name, r->wake_at - jr_now());
        break;
    case JR_CANCELLED:
        m->cancelled++;
        jr_log(JR_LOG_INFO, "job %lld (%s) cancelled: %s", (long long)j->id,
               j->name, first);
        break;
    }
    jr_service_job_end(m, j, r, secs);
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
    jr_pool_fail(m, w, j, reason);
    return 1;
}

/* A worker's retry whose handler set no backoff (JR_RETRY_UNRESOLVED, or
 * any delay that is not one): the config's, else the default schedule. */
static void
resolve_delay(master *m, const wk *w, const jr_job *j, jr_result *res)
{
    jr_retry_in in;

    if (res->kind != JR_RETRY || res->delay >= 0)
        return;
    jr_pool_retry_in(m, w->gen, j, res->error, &in);
    in.handler_backoff = -1;        /* the worker found none */
    res->delay = jr_retry_delay(&in);
}

/* A success with jobrunner.sql statements: what its attempt becomes if
 * one of them fails when it is recorded (the retry rule, as a failure
 * the master decides), and the handler's name for the message. */
static void
sql_fallback(master *m, const wk *w, const jr_job *j, jr_result *res)
{
    jr_result f = {0};
    jr_retry_in in;
    size_t len;

    if (res->kind != JR_DONE || res->nsql <= 0)
        return;
    jr_pool_retry_in(m, w->gen, j, "a statement failed", &in);
    jr_retry_decide(&in, &f);
    res->sql_kind = f.kind;
    res->sql_delay = f.delay;
    /* its first 128 bytes, copied (snprintf cost the loop 580
     * instructions a job) */
    len = strnlen(j->name, 128);
    memcpy(res->sql_handler, j->name, len);
    res->sql_handler[len] = '\0';
}

int
jr_pool_inflight(const wk *w, const jr_job *j)
{
    gen *g = w->gen;
    const jr_handler *h;
    int i;

    if (g == NULL)
        return 1;
    if (g->co_any < 0) {        /* once per generation */
        g->co_any = w->inflight > 1;
        for (i = 0; i < g->n; i++)
            g->co_any |= g->h[i].inflight > 1;
    }
    if (!g->co_any || j == NULL)
        return 1;               /* the plain path pays one test */
    if ((h = jr_gen_handler(g, j->name)) == NULL)
        return 1;
    return h->inflight > 0 ? h->inflight : w->inflight;
}

int
jr_pool_index(const wk *w, int64_t id)
{
    int i;

    if (!w->co)                 /* one at a time: the oldest runs */
        return w->njobs > 0 && w->jobs[0]->id == id ? 0 : -1;
    for (i = 0; i < w->njobs; i++)
        if (w->jobs[i]->id == id)
            return i;
    return -1;
}

void
jr_pool_free(wk *w)
{
    free(w->jobs);
    free(w->since);
    free(w);
}

/* Takes job i out of w's jobs; returns it and the seconds it ran. */
static jr_job *
take_job(wk *w, int i, double now, double *secs)
{
    jr_job *j = w->jobs[i];

    *secs = now - (w->co ? w->since[i] : w->started);
    w->njobs--;
    memmove(w->jobs + i, w->jobs + i + 1, (size_t)(w->njobs - i) *
            sizeof *w->jobs);
    if (w->co)
        memmove(w->since + i, w->since + i + 1, (size_t)(w->njobs - i) *
                sizeof *w->since);
    return j;
}

/* A job's steps as its worker last sent them, kept with the job it
 * holds: a job handed to another worker after its worker died (death.c)
 * starts from them, not from the claim's (the list may wait for its
 * commit in the results: it goes in before anything else of the job). */
static void
keep_steps(wk *w, int at, const char *steps)
{
    jr_job *j = jr_job_with_steps(w->jobs[at], steps);

    if (j == NULL)
        return;                 /* out of memory: the claim's stay */
    free(w->jobs[at]);
    w->jobs[at] = j;
}

void
jr_pool_result(master *m, wk *w, jr_reader *r)
{
    jr_result res;
    jr_err err;
    void *mem;
    jr_job *j;
    double now = jr_mono(), secs;
    int bad = jr_frame_get_result(r, &res, &mem, &err) < 0, kept = 0;
    int at = bad ? -1 : jr_pool_index(w, res.id);

    if (!bad && res.held == 2) {    /* lines asked for (heldlines.c) */
        jr_held_reply(m, w, &res, mem);
        return;
    }
    if (!bad && JR_RESULT_RUNS_ON(res.kind) && at >= 0) {
        if (res.kind == JR_PROGRESS)
            jr_log(JR_LOG_DEBUG, "job %lld progress %g/%g",
                   (long long)res.id, res.done, res.total);
        jr_service_ran_on(m, &res);
        if (res.kind == JR_STEP)
            keep_steps(w, at, res.result);
        jr_claimq_result(m, &res, mem);  /* the job runs on */
        if (res.kind == JR_STEP && res.durable > 0)
            jr_master_kick(m);  /* its step waits for this commit */
        return;
    }
    jr_output_done(w);             /* what the job printed is logged as its */
    if (bad || JR_RESULT_RUNS_ON(res.kind) || at < 0) {
        jr_log(JR_LOG_ERROR, "worker %d: %s", w->id, w->njobs == 0 ?
               "result for a job it does not hold" : "malformed result");
        free(mem);
        kill(w->pid, SIGKILL);
        return;
    }
    j = take_job(w, at, now, &secs);
    w->avg = w->avg > 0 ? 0.8 * w->avg + 0.2 * secs : secs;
    m->avg = m->avg > 0 ? 0.95 * m->avg + 0.05 * secs : secs;
    resolve_delay(m, w, j, &res);
    sql_fallback(m, w, j, &res);
    m->flow_ended = j->flow != 0;   /* jr_claimq_result takes it */
    res.secs = secs;                /* the attempt history's */
    res.worker = w->id;
    if (!snooze_limit(m, w, j, &res, mem)) {
        if (res.kind == JR_DONE && (res.nsql > 0 || res.held == 1)) {
            /* its statements may still fail it, its row stay for its
             * lines (heldlines.c): told once recorded */
            kept = jr_pending_job(m, &res, mem, j, secs);
        } else {
            jr_pool_outcome(m, j, &res, secs);
            jr_claimq_result(m, &res, mem);
        }
    }
    jr_service_job_left(m, j, res.kind);
    if (m->nsuspects > 0)
        jr_death_cleared(m, j->id);     /* it ended: no killer */
    if (!kept)
        free(j);
    if (m->cfg->max_jobs_per_worker > 0 &&
        ++w->jobs_run >= m->cfg->max_jobs_per_worker && !w->retiring &&
        m->nostart[0] == '\0') {
        /* not while workers cannot start: its replacement would not */
        w->retiring = 1;            /* recycled: bounds slow leaks */
        jr_pool_fit(m);
    }
    if (w->njobs > 0 && !w->co) {
        w->started = now;
        jr_service_job_start(m, w->jobs[0], w->id);
    } else if (w->njobs == 0) {
        w->co = 0;
        w->alone = 0;
        w->idle_since = now;
        if (w->retiring)
            jr_pool_stop(m, w);
    }
    jr_master_kick(m);
}

void
jr_pool_read(struct bufferevent *bev, void *arg)
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
            jr_gen_hello(m, w, &r);
            jr_master_kick(m);
            break;
        case JR_F_RESULT:
            jr_pool_result(m, w, &r);
            break;
        case JR_F_SPANS: {
            const char *text;
            size_t n;
            int k = jr_frame_get_spans(&r, &text, &n, &err);
            if (k < 0) {
                jr_log(JR_LOG_ERROR, "worker %d: %s", w->id, err.msg);
                kill(w->pid, SIGKILL);
                return;
            }
            jr_otlp_add(m->otlp, text, n, k);
            break;
        }
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
        jr_pool_kill(w, SIGKILL);
    }
}

/* Queues the worker's first frame: the settings it runs with, from the
 * master's effective config (file and command line); kills the worker
 * when it cannot. */
static void
send_settings(master *m, wk *w)
{
    const jr_config *c = m->cfg;
    jr_settings s = {
        .scripts = c->scripts, .max_retries = c->max_retries,
        .timeout = c->timeout, .load_timeout = c->load_timeout,
        .memory_limit = c->memory_limit, .max_payload = c->max_payload,
        .max_result = c->max_result,
        .log_level = c->log_level, .log_json = c->log_json,
        .inflight = c->inflight, .durable_steps = c->durable_steps,
        .db_url = c->backend, .attach = c->attach,
        .handler_role = c->handler_role, .key_file = c->key_file,
        .log_attempt_max = c->log_attempt_max, .log_echo = c->log_echo,
        .tracing = m->otlp != NULL, .trace_sample = c->trace_sample,
    };

    w->inflight = c->inflight;

    jr_buf_reset(&m->out);
    jr_frame_put_settings(&m->out, &s);
    if (m->out.oom || bufferevent_write(w->bev, m->out.p, m->out.len) < 0) {
        /* it would wait for them until its hello deadline: replace it */
        jr_log(JR_LOG_ERROR, "worker %d: cannot send its settings (out of "
               "memory)", w->id);
        jr_pool_kill(w, SIGKILL);
    }
}

/* Makes the master's record of a started worker, with its socket and
 * output events. Returns it, or NULL with err set (the process is
 * killed). */
static wk *
track(master *m, const jr_spawned *f, jr_err *err)
{
    wk *w = calloc(1, sizeof *w);

    if (w == NULL) {
        jr_fail(err, JR_ENOMEM, "cannot start a worker: out of memory");
        if (f->share != NULL)
            munmap(f->share, sizeof *f->share);
        close(f->mine);
        if (f->rd >= 0)
            close(f->rd);
        kill(-f->pid, SIGKILL);
        kill(f->pid, SIGKILL);
        return NULL;
    }
    evutil_make_socket_nonblocking(f->mine);
    w->m = m;
    w->pid = f->pid;
    w->id = ++m->next_id;
    w->spawned = jr_mono();
    w->share = f->share;
    w->out_fd = f->rd;
    if (f->rd >= 0) {
        evutil_make_socket_nonblocking(f->rd);
        w->ev_out = event_new(m->base, f->rd, EV_READ | EV_PERSIST,
                              jr_output_readable, w);
        event_add(w->ev_out, NULL);
    }
    w->bev = bufferevent_socket_new(m->base, f->mine, BEV_OPT_CLOSE_ON_FREE);
    bufferevent_setcb(w->bev, jr_pool_read, NULL, on_event, w);
    bufferevent_enable(w->bev, EV_READ | EV_WRITE);
    return w;
}

/* A spawn failed with err: logged once per cause (not at each retry),
 * and jr_pool_fit tried again with backoff, since nothing else would
 * start the worker (a pool of min = max stayed short for good). */
static void
spawn_failed(master *m, const jr_err *err)
{
    struct timeval tv;

    m->spawn_fails++;
    if (strcmp(err->msg, m->spawn_cause) != 0) {
        jr_log(JR_LOG_ERROR, "%s; retrying with backoff (%d of %d workers "
               "running)", err->msg, jr_pool_alive(m), m->target);
        snprintf(m->spawn_cause, sizeof m->spawn_cause, "%s", err->msg);
    }
    m->spawn_backoff = m->spawn_backoff > 0 ? m->spawn_backoff * 2 : 0.1;
    if (m->spawn_backoff > SPAWN_RETRY_MAX)
        m->spawn_backoff = SPAWN_RETRY_MAX;
    tv.tv_sec = (long)m->spawn_backoff;
    tv.tv_usec = (long)((m->spawn_backoff - (double)tv.tv_sec) * 1e6);
    event_add(m->ev_spawn, &tv);
}

/* A spawn worked: the end of the failures, if there were some. */
static void
spawn_worked(master *m, const wk *w)
{
    if (m->spawn_fails > 0)
        jr_log(JR_LOG_INFO, "worker %d started after %d failed attempt%s",
               w->id, m->spawn_fails, m->spawn_fails == 1 ? "" : "s");
    m->spawn_fails = 0;
    m->spawn_backoff = 0;
    m->spawn_cause[0] = '\0';
}

wk *
jr_pool_spawn(master *m)
{
    jr_spawned f;
    jr_err err;
    wk *w;

    if (jr_spawn_worker(m, &f, &err) < 0 ||
        (w = track(m, &f, &err)) == NULL) {
        spawn_failed(m, &err);
        return NULL;
    }
    spawn_worked(m, w);
    w->next = m->workers;
    m->workers = w;
    m->nworkers++;
    jr_log(JR_LOG_DEBUG, "worker %d started (pid %d)", w->id, (int)f.pid);
    send_settings(m, w);        /* listed first: its death is reaped */
    return w;
}
