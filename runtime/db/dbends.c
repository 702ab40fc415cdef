/* dbends.c - the watch on the ends of jobs (dbends.h): the backend's
 * finished descriptor in the loop, its wake-ups consumed and handed on.
 * SQLite's WAL is written a little before its commit shows: a wake-up
 * that shows nothing is looked at again after SETTLE, doubling up to
 * SETTLE_MAX, as the client's wait does; with no long poll waiting, its
 * wake-ups (one per commit) are left unread. A lost watch is opened
 * again on the reads' thread. Uses dbends.h, dbopts.h,
 * backend.h, log.h; libevent. */
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "backend.h"
#include "db/dbends.h"
#include "db/dbopts.h"
#include "base/log.h"

#define NOTES      256          /* ended ids read from one wake-up */
#define SETTLE     0.02         /* seconds before a wake-up is looked at
                                   again when it showed no change */
#define SETTLE_MAX 0.7          /* doubling up to this */

struct jr_dbends {
    jr_db          db;          /* the connection of its own */
    struct event  *ev;          /* finished_fd readable; NULL once lost */
    int            held;        /* a long poll waits */
    int            armed;       /* ev is added */
    struct event  *again;       /* the settle timer */
    double         settle;      /* its next span, 0: none running */
    jr_dbends_cb   cb;
    void          *arg;
    struct event_base *base;
    jr_dbthread   *t;           /* reopens a lost watch, or NULL */
    struct event  *retry;       /* the next reopen */
    int            fd_new;      /* a reopen's descriptor, or -1 */
};

static void on_readable(evutil_socket_t fd, short what, void *arg);

/* Watches fd in the loop; 0, or -1 when out of memory. */
static int
arm(jr_dbends *e, int fd)
{
    if ((e->ev = event_new(e->base, fd, EV_READ | EV_PERSIST, on_readable,
                           e)) == NULL || event_add(e->ev, NULL) < 0)
        return -1;
    e->armed = 1;
    return 0;
}

static void
retry_later(jr_dbends *e)
{
    struct timeval tv = {(time_t)JR_DBENDS_RETRY, 0};

    if (e->t != NULL && e->retry != NULL)
        evtimer_add(e->retry, &tv);
}

/* On the thread: the descriptor again (a new connection), and what it
 * held so far consumed. */
static void
reopen_run(jr_db *unused, void *arg)
{
    jr_dbends *e = arg;
    jr_err err = {0};

    (void)unused;
    e->fd_new = e->db.ops->finished_fd(e->db.b);
    if (e->fd_new >= 0 && e->db.ops->finished(e->db.b, NULL, 0, &err) == -1)
        e->fd_new = -1;
}

static void
reopen_done(void *arg, int ran)
{
    jr_dbends *e = arg;

    if (!ran)
        return;                 /* the thread stopped: the server stops */
    if (e->fd_new < 0 || arm(e, e->fd_new) < 0) {
        if (e->ev != NULL)
            event_free(e->ev);
        e->ev = NULL;
        retry_later(e);
        return;
    }
    jr_log(JR_LOG_INFO, "http: the watch on the ends of jobs is back");
    e->cb(e->arg, NULL, -1);    /* ends while it was lost: a look */
}

static void
on_retry(evutil_socket_t fd, short what, void *arg)
{
    jr_dbends *e = arg;

    (void)fd;
    (void)what;
    if (jr_dbthread_request(e->t, reopen_run, reopen_done, e) < 0)
        retry_later(e);
}

static void
lost(jr_dbends *e, const char *why)
{
    jr_log(JR_LOG_WARN, "http: the watch on the ends of jobs is lost (%s): "
           "long polls look once a second%s", why,
           e->t != NULL ? " until it is back" : "");
    event_free(e->ev);
    e->ev = NULL;
    evtimer_del(e->again);
    retry_later(e);
    e->cb(e->arg, NULL, -1);
}

/* Reads what woke fd: the ids that ended, or that something changed. */
static void
consume(jr_dbends *e)
{
    int64_t ids[NOTES];
    struct timeval tv;
    jr_err err = {0};
    int n;

    if (e->ev == NULL)
        return;
    if (!e->held && e->db.ops->caps.wakes_every_commit) {
        event_del(e->ev);       /* a WAL write each commit: none read */
        e->armed = 0;
        evtimer_del(e->again);
        return;
    }
    if ((n = e->db.ops->finished(e->db.b, ids, NOTES, &err)) == -1) {
        lost(e, err.msg);
        return;
    }
    if (n != 0) {
        e->settle = 0;
        e->cb(e->arg, ids, n > 0 ? n : -1);
        return;
    }
    /* nothing shown yet: a commit whose WAL write came first */
    e->settle = e->settle == 0 ? SETTLE : e->settle * 2;
    if (e->settle > SETTLE_MAX) {
        e->settle = 0;
        return;
    }
    tv.tv_sec = 0;
    tv.tv_usec = (long)(e->settle * 1e6);
    evtimer_add(e->again, &tv);
}

static void
on_readable(evutil_socket_t fd, short what, void *arg)
{
    jr_dbends *e = arg;

    (void)fd;
    (void)what;
    e->settle = 0;
    consume(e);
}

static void
on_again(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    consume(arg);
}

jr_dbends *
jr_dbends_new(const jr_config *cfg, struct event_base *base,
              jr_dbthread *t, jr_dbends_cb cb, void *arg, jr_err *err)
{
    jr_dbends *e = calloc(1, sizeof *e);
    jr_backend_opts o;
    int fd;

    if (e == NULL) {
        jr_fail(err, JR_ENOMEM, "out of memory");
        return NULL;
    }
    e->cb = cb;
    e->arg = arg;
    e->base = base;
    e->t = t;
    jr_dbopts_fill(&o, cfg, JR_DBOPTS_RUNNER);
    o.must_exist = 1;           /* never the create path (dbopen.c) */
    if (jr_db_open(&e->db, cfg->backend, &o, err) < 0) {
        free(e);
        return NULL;
    }
    /* the descriptor, then what it held so far: start from now */
    fd = e->db.ops->finished_fd ? e->db.ops->finished_fd(e->db.b) : -1;
    if (fd < 0) {
        jr_fail(err, JR_EDB, "the database gives no descriptor for it");
    } else if (e->db.ops->finished(e->db.b, NULL, 0, err) != -1 &&
               (e->again = evtimer_new(base, on_again, e)) != NULL &&
               (e->retry = evtimer_new(base, on_retry, e)) != NULL &&
               arm(e, fd) == 0) {
        return e;
    } else if (err->code == 0) {
        jr_fail(err, JR_ENOMEM, "out of memory");
    }
    jr_dbends_free(e);
    return NULL;
}

void
jr_dbends_hold(jr_dbends *e, int held)
{
    if (e == NULL || e->ev == NULL)
        return;
    e->held = held;
    if (held && !e->armed && event_add(e->ev, NULL) == 0)
        e->armed = 1;           /* readable still if anything changed */
}

int
jr_dbends_live(const jr_dbends *e)
{
    return e != NULL && e->ev != NULL;
}

void
jr_dbends_free(jr_dbends *e)
{
    if (e == NULL)
        return;
    if (e->ev != NULL)
        event_free(e->ev);
    if (e->again != NULL)
        event_free(e->again);
    if (e->retry != NULL)
        event_free(e->retry);
    jr_db_close(&e->db);
    free(e);
}
