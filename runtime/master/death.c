/* death.c - what becomes of a worker's jobs when it dies, and the kills
 * that make it die: reaping (SIGCHLD), reading what it wrote before it
 * died (socket, then its shared page), blaming the job that was in its
 * handler (retry policy) and handing back the others unblamed, the
 * respawn with backoff, and the deadlines the master enforces (hello
 * past load_timeout, a job past its timeout). Uses master_int.h, pool.c
 * (frames, results, failures), worker.h's shared page. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "base/log.h"
#include "master/master_int.h"
#include "worker/worker.h"

#define KILL_GRACE      5.0     /* seconds past a timeout before SIGKILL */
#define HELLO_GRACE     2.0     /* seconds past load_timeout before SIGKILL */
#define SPAWN_DELAY_MAX 10.0    /* seconds between spawns while they die */
#define SUSPECTS_MAX    4096    /* suspect jobs remembered; oldest go first */

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
    jr_pool_read(w->bev, w);
}

/* After drain_worker: the results the worker had not written yet, from
 * the page it shares with the master (worker.h), each taken as if it had
 * come on the socket. The ones that came are no longer held and are
 * skipped. Then jobs[0] is the job that was in the handler at the death, if
 * share->running names it. */
static void
shared_results(wk *w)
{
    const jr_share *sh = w->share;
    size_t at = 0, len;
    jr_reader r, peek;
    jr_result res;
    jr_err err;
    void *mem;
    long n;

    if (sh == NULL)
        return;
    len = sh->len < sizeof sh->buf ? sh->len : sizeof sh->buf;
    while (w->njobs > 0 &&
           (n = jr_frame_complete(sh->buf + at, len - at, &err)) > 0) {
        if (jr_frame_open(&r, sh->buf + at) == JR_F_RESULT) {
            peek = r;
            if (jr_frame_get_result(&peek, &res, &mem, &err) == 0) {
                int ours = !JR_RESULT_RUNS_ON(res.kind) &&
                           jr_pool_index(w, res.id) >= 0;
                free(mem);
                if (ours)
                    jr_pool_result(w->m, w, &r);
            }
        }
        at += (size_t)n;
    }
}

/* Whether the death of a worker is jobs[0]'s: it was in the handler (the
 * shared page names it, or there is no page) and, if the master killed
 * the worker, the kill was for it. A worker that died between jobs, or
 * was killed for a job that ended meanwhile (its result in the page),
 * hands back what it held unblamed. */
static int
was_running(const wk *w)
{
    int64_t id = w->jobs[0]->id;

    if (w->share != NULL && w->share->running != id)
        return 0;
    return w->kill_job == 0 || w->kill_job == id;
}

/* Says in reason why worker w went away, from its exit status. */
static void
gone_reason(master *m, const wk *w, int status, char *reason, size_t size)
{
    if (w->kill_reason[0])
        snprintf(reason, size, "%s", w->kill_reason);
    else if (!w->ready && WIFEXITED(status) &&
             WEXITSTATUS(status) == JR_WORKER_LOAD_STUCK)
        snprintf(reason, size, "did not finish loading handlers within %gs "
                 "(see the line above)", m->cfg->load_timeout);
    else if (WIFEXITED(status) && WEXITSTATUS(status) == JR_WORKER_RECYCLE)
        snprintf(reason, size, "recycled: a handler hit the memory limit");
    else if (WIFSIGNALED(status))
        snprintf(reason, size, "worker died (signal %d)", WTERMSIG(status));
    else
        snprintf(reason, size, "worker died (exit %d)", WEXITSTATUS(status));
}

/* Logs the going at the level it deserves; a probe's going fails its
 * reload. */
static void
gone_log(master *m, wk *w, int status, const char *reason)
{
    if (w->nostart)             /* said once by jr_spawn_cannot */
        jr_log(JR_LOG_DEBUG, "worker %d (pid %d) could not start: %s",
               w->id, (int)w->pid, reason);
    else if (WIFEXITED(status) && WEXITSTATUS(status) == JR_WORKER_RECYCLE &&
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
        jr_service_reloaded(m, 0, reason);
    }
}

int
jr_death_suspect(const master *m, int64_t id)
{
    for (int i = m->nsuspects - 1; i >= 0; i--)
        if (m->suspects[i] == id)
            return 1;
    return 0;
}

void
jr_death_cleared(master *m, int64_t id)
{
    for (int i = 0; i < m->nsuspects; i++)
        if (m->suspects[i] == id) {
            memmove(m->suspects + i, m->suspects + i + 1,
                    (size_t)(m->nsuspects - i - 1) * sizeof *m->suspects);
            m->nsuspects--;
            return;
        }
}

static void
add_suspect(master *m, int64_t id)
{
    if (jr_death_suspect(m, id))
        return;
    if (m->nsuspects == SUSPECTS_MAX)
        jr_death_cleared(m, m->suspects[0]);
    if (m->nsuspects == m->capsuspects) {
        int cap = m->capsuspects ? m->capsuspects * 2 : 16;
        int64_t *p = realloc(m->suspects, (size_t)cap * sizeof *p);
        if (p == NULL)
            return;             /* it may die with others again: unblamed */
        m->suspects = p;
        m->capsuspects = cap;
    }
    m->suspects[m->nsuspects++] = id;
}

/* A coroutine worker died between resumes (no job in its handler) with
 * jobs in flight. Alone, the job is blamed: nothing else ran there. With
 * several, which one killed it (a response buffered past the memory, a
 * child that killed it) is not known; blaming all would kill innocent
 * ones with the guilty one, blaming none let it kill them again and
 * again. They go back unblamed, each to run alone (jr_death_suspect):
 * the next death is one job's. Returns 1 when jobs[0] is blamed. */
static int
co_blame(master *m, wk *w, int crashed)
{
    int i;

    if (!w->co || w->njobs == 0 || !crashed || w->kill_reason[0] ||
        (w->share != NULL && w->share->running != 0))
        return 0;
    if (w->njobs == 1)
        return 1;
    if (m->stopping)
        return 0;
    for (i = 0; i < w->njobs; i++)
        add_suspect(m, w->jobs[i]->id);
    jr_log(JR_LOG_WARN, "worker %d died between resumes with %d jobs in "
           "flight (job %lld and %d more): none is blamed; each runs alone "
           "until it ends, so that a death names its job", w->id, w->njobs,
           (long long)w->jobs[0]->id, w->njobs - 1);
    return 0;
}

/* The jobs w held: the running one fails (retry policy), or is released
 * when the runner stops; the ones it never started go back in line.
 * crashed: it did not exit on its own (recycled, stopped). */
static void
gone_jobs(master *m, wk *w, const char *reason, int crashed)
{
    /* jobs[0] was in the handler: the death is its; the rest go back */
    int i, ran;

    if (w->co && w->share != NULL &&
        (i = jr_pool_index(w, w->share->running)) > 0) {
        jr_job *j = w->jobs[0];     /* of the jobs running at once, the one
                                       in the handler is blamed */
        w->jobs[0] = w->jobs[i];
        w->jobs[i] = j;
    }
    ran = w->njobs > 0 && (was_running(w) || co_blame(m, w, crashed));

    if (ran) {
        if (jr_service_refuse(m, w->jobs[0], reason)) {
            free(w->jobs[0]);
        } else if (m->stopping && !w->kill_reason[0])
            jr_claimq_release(m, w->jobs[0]);
        else {
            jr_pool_fail(m, w, w->jobs[0], reason);
            free(w->jobs[0]);
        }
    }
    for (i = w->njobs - 1; i >= ran; i--)
        if (m->stopping || jr_claimq_push(m, w->jobs[i], 1) < 0)
            jr_claimq_release(m, w->jobs[i]);
    w->njobs = 0;
}

/* Schedules a replacement; workers that die right away (a crashing
 * module) or could not start (however long that took) back off. */
static void
respawn_later(master *m, const wk *w)
{
    struct timeval tv = {0, 0};

    m->spawn_delay = jr_mono() - w->spawned < 1 || w->nostart ||
        w->held_back ?
        (m->spawn_delay ? m->spawn_delay * 2 : 0.1) : 0;
    if (m->spawn_delay > SPAWN_DELAY_MAX)
        m->spawn_delay = SPAWN_DELAY_MAX;
    tv.tv_sec = (long)m->spawn_delay;
    tv.tv_usec = (long)((m->spawn_delay - (double)tv.tv_sec) * 1e6);
    event_add(m->ev_spawn, &tv);
}

/* Fails or requeues what a worker held when it went away. */
static void
worker_gone(master *m, wk *w, int status)
{
    char reason[128];

    drain_worker(w);
    shared_results(w);
    jr_pool_kill(w, SIGKILL);   /* what its handlers started dies with it */
    jr_output_done(w);
    gone_reason(m, w, status, reason, sizeof reason);
    if (!w->ready && !w->probe && !w->stopping && !w->nostart &&
        !m->stopping)           /* gone before its hello */
        jr_spawn_cannot(m, w, reason);
    gone_log(m, w, status, reason);
    gone_jobs(m, w, reason, !WIFEXITED(status) ||
              (WEXITSTATUS(status) != 0 &&
               WEXITSTATUS(status) != JR_WORKER_RECYCLE));
    if (w->bev != NULL)
        bufferevent_free(w->bev);
    jr_output_close(w);
    jr_gen_unref(w->gen);
    /* one stopped because it could not join the running generation
     * (jr_gen_hello) is replaced with backoff too: else the replacement
     * came at once (room_freed), and failed alike, in a loop */
    if (!m->stopping && (!w->stopping || w->nostart || w->held_back))
        respawn_later(m, w);
    jr_spawn_unshare(w);
    jr_pool_free(w);
}

/* Workers have exited: a reload that waited for room starts, and when
 * one of them had been told to stop (leaving: freed), the replacement
 * held back for it (a crashed one's keeps its backoff: respawn_later). */
static void
room_freed(master *m, int freed)
{
    if (m->stopping)
        return;
    if (freed && !event_pending(m->ev_spawn, EV_TIMEOUT, NULL))
        jr_pool_fit(m);
    if (m->reload_again && m->probe == NULL) {
        m->reload_again = 0;
        jr_gen_reload(m);
    }
}

void
jr_death_reap(master *m)
{
    int status, freed = 0, reaped = 0;
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
        freed |= w->stopping || w->retiring;
        reaped = 1;
        worker_gone(m, w, status);
    }
    if (reaped)
        room_freed(m, freed);
    jr_master_kick(m);
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

/* The job in w's handler now, or NULL between jobs; *since is when it
 * started. The shared page names it: with results written in batches,
 * jobs[0] may be done and a later one running (or a prefetched one behind
 * the one running, whose timeout is not the running one's). Without the
 * page, jobs[0] since it was handed out. */
const jr_job *
jr_death_running(const wk *w, double *since)
{
    int64_t id;
    int i;

    if (w->njobs == 0)
        return NULL;
    if (w->share == NULL) {
        *since = w->started;
        return w->jobs[0];
    }
    id = __atomic_load_n(&w->share->running, __ATOMIC_ACQUIRE);
    for (i = 0; i < w->njobs && w->jobs[i]->id != id; i++)
        ;
    if (i == w->njobs)
        return NULL;
    *since = w->share->started;
    return w->jobs[i];
}

/* Kills w for job j (held, in its handler): why goes in kill_reason, and
 * the death is blamed on j alone (gone_jobs). */
void
jr_death_kill_for(wk *w, const jr_job *j, const char *why)
{
    snprintf(w->kill_reason, sizeof w->kill_reason, "%s", why);
    w->kill_job = j->id;
    jr_pool_kill(w, SIGKILL);
}

/* Kills w if the job in its handler is past its timeout (stuck where the
 * worker's own limit cannot reach: in C). */
static void
job_deadline(master *m, wk *w, double now)
{
    const jr_handler *h;
    const jr_job *j;
    double since, limit;
    char why[64];

    if (w->kill_reason[0] || (j = jr_death_running(w, &since)) == NULL)
        return;
    h = jr_gen_handler(w->gen, j->name);
    limit = h && h->timeout > 0 ? h->timeout : m->cfg->timeout;
    if (now - since <= limit + KILL_GRACE)
        return;
    jr_log(JR_LOG_WARN, "job %lld (%s): still running %gs past its %gs "
           "timeout; killing worker %d", (long long)j->id, j->name,
           KILL_GRACE, limit, w->id);
    snprintf(why, sizeof why, "timed out after %gs (worker killed)", limit);
    jr_death_kill_for(w, j, why);
}

/* Kills workers past a deadline: a hello load_timeout seconds after the
 * start, the job in the handler past its timeout. */
void
jr_death_deadlines(master *m, double now)
{
    wk *w;

    for (w = m->workers; w; w = w->next)
        hello_deadline(m, w, now);
    for (w = m->workers; w; w = w->next)
        job_deadline(m, w, now);
}
