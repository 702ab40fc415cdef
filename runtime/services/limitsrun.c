/* limitsrun.c - limits per key in the master: the live limits (the
 * config's, as hooks change them with jobrunner.limits.set), the copy a
 * database cycle borrows, the wait for a rate's next token, claims again
 * when a limited job ends, and the per-limit figures of on_tick (with
 * the cycle's counts, counts.h). The claim that enforces them is the
 * backends' (limitpick.c). Uses svc.h, limits.h, counts.h. */
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "base/log.h"
#include "master/svc.h"
#include "services/limits.h"
#include "services/counts.h"
#include "base/util.h"

#define QPLEN (sizeof JR_LIMIT_QPREFIX - 1)

/* One limit's figures since the last tick, by index into the live limits. */
typedef struct lstat {
    long done;                  /* succeeded */
    long failed;                /* retried, dead or expired */
} lstat;

typedef struct lstats {
    lstat *s;
    int    n;
} lstats;

static void
on_limit(evutil_socket_t fd, short what, void *arg)
{
    master *m = arg;

    (void)fd;
    (void)what;
    jr_svc_want_claim(m);
    jr_svc_kick(m);
}

static int
init(master *m, void **st)
{
    jr_limitsrun *lr = calloc(1, sizeof *lr);

    if ((*st = lr) == NULL || jr_limits_copy(&lr->live,
                                                 &jr_svc_config(m)->limits) < 0
        || (lr->stats = calloc(1, sizeof(lstats))) == NULL)
        return -1;
    lr->changed = 1;
    jr_limitslua_open(m);
    lr->ev = event_new(jr_svc_base(m), -1, 0, on_limit, m);
    return lr->ev ? 0 : -1;
}

static void
free_limits(master *m, void *arg)
{
    jr_limitsrun *lr = arg;
    lstats *st;

    (void)m;
    if (lr == NULL)
        return;
    if (lr->ev)
        event_free(lr->ev);
    jr_limits_free(&lr->live);
    jr_limits_free(&lr->cycle);
    if ((st = lr->stats) != NULL)
        free(st->s);
    free(st);
    free(lr);
}

/* Hands the limits to cycle c (a copy it borrows while it runs). */
static void
fill(master *m, void *st, jr_cycle *c)
{
    jr_limitsrun *lr = st;
    jr_limits fresh;

    (void)m;
    /* no cycle runs now: the copy it borrows may be replaced */
    if (lr->changed && jr_limits_copy(&fresh, &lr->live) == 0) {
        jr_limits_free(&lr->cycle);
        lr->cycle = fresh;
        lr->changed = 0;
    }
    c->limits = lr->cycle.l;
    c->nlimits = lr->cycle.n;
}

/* After cycle c: waits for the next token a rate refused, if any. */
static void
taken(master *m, void *st, jr_cycle *c)
{
    jr_limitsrun *lr = st;
    double wait;
    struct timeval tv;

    if (c->limit_next <= 0 || lr->ev == NULL)
        return;
    wait = c->limit_next - jr_now();
    if (wait < 0.001)
        wait = 0.001;
    if (wait > jr_svc_config(m)->poll_interval)
        return;                 /* the poll comes first */
    tv.tv_sec = (time_t)wait;
    tv.tv_usec = (suseconds_t)((wait - (double)tv.tv_sec) * 1e6);
    event_add(lr->ev, &tv);
}

/* Whether limit l applies to a job of name in queue. */
static int
applies(const jr_limit *l, const char *name, const char *queue)
{
    if (strncmp(l->scope, JR_LIMIT_QPREFIX, QPLEN) == 0)
        return strcmp(l->scope + QPLEN, queue) == 0;
    return strcmp(l->scope, name) == 0;
}

/* A job ended with result kind (figures for on_tick); frees room: claim
 * again. */
static void
job_left(master *m, void *arg, const jr_job *j, int kind)
{
    const char *name = j->name, *queue = j->queue;
    jr_limitsrun *lr = arg;
    lstats *st = lr->stats;
    const jr_limits *lim = &lr->live;
    lstat *bigger;
    int i, hit = 0;

    if (lim->n == 0 || st == NULL)
        return;
    if (st->n < lim->n) {
        if ((bigger = realloc(st->s, (size_t)lim->n * sizeof *bigger))
            == NULL)
            return;
        memset(bigger + st->n, 0, (size_t)(lim->n - st->n) *
               sizeof *bigger);
        st->s = bigger;
        st->n = lim->n;
    }
    for (i = 0; i < lim->n; i++) {
        if (!applies(&lim->l[i], name, queue))
            continue;
        hit = 1;
        if (kind == JR_DONE)
            st->s[i].done++;
        else if (kind == JR_RETRY || kind == JR_DEAD || kind == JR_EXPIRED)
            st->s[i].failed++;
    }
    if (hit)
        jr_svc_want_claim(m);   /* room freed: claim with the result */
}

/* Jobs of limit l this runner holds (running or claimed ahead). */
static long
held(master *m, const jr_limit *l)
{
    jr_svc_iter it = {0};
    const jr_job *jb;
    long n = 0;
    size_t k;

    while ((jb = jr_svc_held(m, &it)) != NULL)
        n += applies(l, jb->name, jb->queue);
    for (k = 0; k < jr_svc_queued(m); k++) {
        jb = jr_svc_queue_at(m, k);
        n += applies(l, jb->name, jb->queue);
    }
    return n;
}

static void
tick_set(jr_hooks *h, const char *key, const jr_limit_set *s)
{
    jr_hook_open(h, key);
    jr_hook_int(h, "concurrency", s->concurrency);
    jr_hook_num(h, "rate", s->rate);
    jr_hook_num(h, "burst", s->burst);
    if (s->rate_text[0])
        jr_hook_str(h, "rate_text", s->rate_text);
    jr_hook_close(h);
}

/* Cycle c's count for the limit of scope (from arr, on_tick's counts of
 * c's limits), or -1. */
static long
cycle_count(const jr_cycle *c, const long *arr, const char *scope)
{
    int i;

    for (i = 0; arr != NULL && i < c->nlimits; i++)
        if (strcmp(c->limits[i].scope, scope) == 0)
            return arr[i];
    return -1;
}

/* Adds `limits` (per limit: running, done, failed, failure_rate, its
 * settings; waiting and running_all from cycle c) to the on_tick event
 * being built. */
static void
figures(master *m, void *arg, const jr_cycle *c)
{
    jr_limitsrun *lr = arg;
    const jr_limits *lim = &lr->live;
    const jr_counts *k = jr_cycle_io(c, &jr_counts_step);
    lstats *st = lr->stats;
    jr_hooks *h = jr_svc_hooks(m);
    long n;
    int i;

    if (lim->n == 0)
        return;
    jr_hook_open(h, "limits");
    for (i = 0; i < lim->n; i++) {
        const jr_limit *l = &lim->l[i];
        lstat s = st && i < st->n ? st->s[i] : (lstat){0, 0};
        jr_hook_open(h, l->scope);
        jr_hook_int(h, "running", held(m, l));
        if ((n = cycle_count(c, k ? k->lim_waiting : NULL, l->scope)) >= 0)
            jr_hook_int(h, "waiting", n);
        if ((n = cycle_count(c, k ? k->lim_running : NULL, l->scope)) >= 0)
            jr_hook_int(h, "running_all", n);
        jr_hook_int(h, "done", s.done);
        jr_hook_int(h, "failed", s.failed);
        jr_hook_num(h, "failure_rate", s.done + s.failed > 0 ?
                    (double)s.failed / (double)(s.done + s.failed) : 0);
        tick_set(h, "limit", &l->all);
        tick_set(h, "per_key", &l->per_key);
        jr_hook_close(h);
        if (st && i < st->n)
            st->s[i] = (lstat){0, 0};
    }
    jr_hook_close(h);
}

/* The first generation loaded: a limit naming no handler is warned of. */
static void
loaded(master *m, void *st, const char *const *names, int n)
{
    const jr_limits *lim = &((jr_limitsrun *)st)->live;
    int i, k;

    for (i = 0; i < lim->n; i++) {
        const char *s = lim->l[i].scope;
        if (strncmp(s, JR_LIMIT_QPREFIX, QPLEN) == 0)
            continue;
        for (k = 0; k < n && strcmp(names[k], s) != 0; k++)
            ;
        if (k == n)
            jr_log(JR_LOG_WARN, "%s: limit '%s': no handler of that name "
                   "(yet): it applies once one loads",
                   jr_svc_config(m)->file ? jr_svc_config(m)->file :
                   "config", s);
    }
}

/* Limits (live, or in the copy a cycle still borrows) shape claims. */
static int
shapes(master *m, void *st)
{
    jr_limitsrun *lr = st;

    (void)m;
    return lr->live.n > 0 || lr->cycle.n > 0;
}

const jr_service jr_limits_service = {
    .name = "limits", .init = init, .fill = fill,
    .taken = taken, .job_left = job_left, .shapes = shapes,
    .figures = figures, .loaded = loaded, .free = free_limits,
};
