/* httpwait.c - the HTTP server's long polls (GET /api/jobs/ID?wait=S):
 * a read of a job not ended is parked until the job ends or its wait is
 * over, then asked again and answered as it stands. Which parked jobs
 * ended is one read of them all (outcomes), made when the watch on the
 * ends of jobs (dbends.h) or this runner tells of one, and every
 * WAIT_SWEEP without a watch. Uses http_int.h, dbends.h, log.h;
 * libevent's timers. */
#include <stdlib.h>
#include <time.h>

#include <event2/event.h>

#include "http/http_int.h"
#include "db/dbends.h"
#include "base/log.h"

#define WAIT_SWEEP 1.0          /* seconds between two looks at the jobs
                                   long polls wait on without a watch on
                                   the ends of jobs (dbends.h; this
                                   runner's own ends look at once) */
#define WAIT_SAFETY 30.0        /* with one: seconds between two looks
                                   nothing asked for */
#define LOOK_GAP   0.05         /* seconds between two looks the watch
                                   asks for (SQLite's wakes at each
                                   commit) */

/* Asks p's job again, answering whatever it is now. */
static void
reask(jr_http *h, awaited *p)
{
    p->kind = ASK;
    p->q->wait = 0;
    jr_buf_reset(&p->q->body);
    p->next = h->waiting;
    h->waiting = p;
    if (jr_dbthread_request(jr_http_thread(h, &jr_apiop_job), jr_http_run,
                            jr_http_answered, p) < 0) {
        jr_http_unawait(h, p);
        jr_http_error(p->req, 503, "out of memory");
        jr_http_awaited_free(p);
    }
}

/* Takes p off the parked list and asks its job again. */
static void
unpark(jr_http *h, awaited *p)
{
    awaited **pp;

    for (pp = &h->parked; *pp && *pp != p; pp = &(*pp)->next)
        ;
    if (*pp)
        *pp = p->next;
    reask(h, p);
}

/* Asks which parked jobs ended: one read per JR_API_IDS_MAX of them, so
 * every long poll is looked at, however many are parked. */
static void
look(jr_http *h)
{
    jr_apireq *q;
    awaited *p = h->parked, *s;
    int n = 0;

    if (h->sweeping) {
        h->again = h->parked != NULL;
        return;
    }
    h->again = 0;
    h->looked_at = jr_mono();
    for (s = p; s; s = s->next)
        n++;
    if (n > 0)
        jr_log(JR_LOG_DEBUG, "http: a look at the jobs of %d long poll%s",
               n, n == 1 ? "" : "s");
    while (p != NULL) {
        if ((q = calloc(1, sizeof *q)) == NULL)
            return;
        q->op = &jr_apiop_outcomes;
        for (; p && q->nids < JR_API_IDS_MAX; p = p->next)
            q->ids[q->nids++] = p->q->ids[0];
        if ((s = jr_http_await(h, SWEEP, NULL, q)) == NULL) {
            free(q);
            return;
        }
        if (jr_dbthread_request(jr_http_thread(h, &jr_apiop_outcomes),
                                jr_http_run, jr_http_answered, s) < 0) {
            jr_http_unawait(h, s);
            jr_http_awaited_free(s);
            return;
        }
        h->sweeping++;
    }
}

/* A look now, or LOOK_GAP after the last one (the watch may ask at every
 * commit). */
static void
look_soon(jr_http *h)
{
    double gap = jr_mono() - h->looked_at;
    struct timeval tv;

    if (h->parked == NULL)
        return;
    if (gap >= LOOK_GAP || h->soon == NULL) {
        look(h);
        return;
    }
    if (evtimer_pending(h->soon, NULL))
        return;
    tv.tv_sec = 0;
    tv.tv_usec = (long)((LOOK_GAP - gap) * 1e6);
    evtimer_add(h->soon, &tv);
}

static void
soon_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    look_soon(arg);
}

/* The watch (dbends.h) told of jobs that ended: ids[0..n), or n < 0 some
 * not known. A look when one is a parked poll's job, or may be. */
static void
ends_cb(void *arg, const int64_t *ids, int n)
{
    jr_http *h = arg;
    awaited *p;
    int i;

    h->woke_at = jr_mono();
    jr_dbends_hold(h->ends, h->parked != NULL);
    for (p = h->parked; p && n > 0; p = p->next)
        for (i = 0; i < n; i++)
            if (ids[i] == p->q->ids[0]) {
                look_soon(h);
                return;
            }
    if (n < 0)
        look_soon(h);
}

static int
id_cmp(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return (x > y) - (x < y);
}

/* The answer to a look. http_int.h. */
void
jr_httpwait_looked(jr_http *h, const jr_apireq *q, int ran)
{
    int64_t ended[JR_API_IDS_MAX];
    awaited *p, *next;
    size_t n = 0;
    int i;

    h->sweeping--;
    for (i = 0; ran && q->status == 200 && i < q->nids; i++)
        if (q->ended[i])
            ended[n++] = q->ids[i];
    if (n > 0) {
        qsort(ended, n, sizeof *ended, id_cmp);
        for (p = h->parked; p; p = next) {
            next = p->next;
            if (bsearch(&p->q->ids[0], ended, n, sizeof *ended, id_cmp))
                unpark(h, p);
        }
    }
    /* the watch told of ends while this look was out */
    if (h->sweeping == 0 && h->again)
        look_soon(h);
}

static void
sweep_cb(evutil_socket_t fd, short what, void *arg)
{
    jr_http *h = arg;
    struct timeval tv = {(time_t)WAIT_SWEEP, 0};
    double now = jr_mono();
    awaited *p, *next;

    (void)fd;
    (void)what;
    for (p = h->parked; p; p = next) {
        next = p->next;
        if (now >= p->deadline)
            unpark(h, p);       /* answered as it stands */
    }
    if (!jr_dbends_live(h->ends) || now - h->looked_at >= WAIT_SAFETY)
        look(h);
    if (h->parked != NULL)
        evtimer_add(h->sweep, &tv);
}

/* Holds p's request: http_int.h. */
void
jr_httpwait_park(jr_http *h, awaited *p)
{
    struct timeval tv = {(time_t)WAIT_SWEEP, 0};

    p->kind = PARK;
    p->deadline = jr_mono() + p->q->wait;
    p->next = h->parked;
    h->parked = p;
    jr_dbends_hold(h->ends, 1);
    if (!evtimer_pending(h->sweep, NULL))
        evtimer_add(h->sweep, &tv);
    /* its job may have ended between its read and now, told then */
    if (h->woke_at >= p->asked)
        look_soon(h);
}

void
jr_http_jobs_ended(jr_http *h)
{
    if (h != NULL)
        look(h);
}

/* The watch on the ends of jobs, for long polls: without it they look
 * once a second. */
static void
open_ends(jr_http *h)
{
    jr_err e = {0};

    if ((h->ends = jr_dbends_new(h->host.cfg, h->host.base, h->rdt, ends_cb,
                                 h, &e)) == NULL)
        jr_log(JR_LOG_WARN, "http: no watch on the ends of jobs (%s): long "
               "polls look once a second", e.msg);
}

void
jr_httpwait_start(jr_http *h)
{
    /* no timer: long polls are answered at once, as plain reads */
    h->sweep = evtimer_new(h->host.base, sweep_cb, h);
    h->soon = evtimer_new(h->host.base, soon_cb, h);
    open_ends(h);
}

/* Answers the long polls held with their jobs as they stand (their last
 * read's answer). */
static void
answer(jr_http *h)
{
    awaited *p, *next;

    for (p = h->parked; p; p = next) {
        next = p->next;
        jr_http_reply(p->req, p->q->status, "application/json",
                      p->q->body.p, p->q->body.len);
        jr_http_awaited_free(p);
    }
    h->parked = NULL;
    jr_dbends_hold(h->ends, 0);
}

void
jr_http_stopping(jr_http *h)
{
    if (h == NULL)
        return;
    h->stopping = 1;
    answer(h);
}

void
jr_httpwait_stop(jr_http *h)
{
    answer(h);
    if (h->sweep != NULL)
        event_free(h->sweep);
    if (h->soon != NULL)
        event_free(h->soon);
}
