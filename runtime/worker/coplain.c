/* coplain.c - the waits of a plain job (inflight 1): jobrunner.sleep,
 * http, exec and all wait by running the worker's loop until their wait
 * ends, the job's deadline passes or its cancel comes; a wait past the
 * deadline marks the job late, which makes its end a timeout however the
 * handler took the wait's error. Owns the wake-up timer of the deadline
 * (w->co->wake). Uses worker_int.h. */
#include <stdio.h>

#include <event2/event.h>
#include <lauxlib.h>
#include <lua.h>

#include "worker/worker_int.h"

static void
on_wake(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;                  /* the loop returns: the wait looks again */
}

int
jr_wait_plain(worker *w, lua_State *L, jr_task *t, const char *fn)
{
    double left;
    struct timeval tv;
    char secs[32];

    if (w->co->wake == NULL &&
        (w->co->wake = evtimer_new(w->base, on_wake, NULL)) == NULL) {
        t->cancel(t->op);
        t->cancel = NULL;
        return luaL_error(L, "jobrunner.%s: out of memory", fn);
    }
    while (!t->woken) {
        left = w->sync_deadline - jr_mono();
        if (w->ctx.cancelled || jr_run_cancel_listed(w, w->ctx.job->id) ||
            left <= 0) {
            w->ctx.cancelled |= left > 0;
            w->sync_late |= left <= 0;  /* a timeout, whatever catches it */
            t->cancel(t->op);
            t->cancel = NULL;
            if (left > 0)
                return luaL_error(L, "job %I cancelled",
                                  (lua_Integer)w->ctx.job->id);
            snprintf(secs, sizeof secs, "%g", w->sync_timeout);
            return luaL_error(L, "jobrunner.%s: timed out after %ss (the "
                              "job's timeout)", fn, secs);
        }
        tv.tv_sec = (long)left;
        tv.tv_usec = (long)((left - (double)tv.tv_sec) * 1e6);
        evtimer_add(w->co->wake, &tv);
        /* the master's frames (a cancel, prefetched jobs) are read into
         * w->in as they come, for the cancel check and the frame loop */
        if (jr_co_loop(w))
            jr_run_read(w);
    }
    evtimer_del(w->co->wake);
    t->cancel = NULL;
    return t->nres;
}
