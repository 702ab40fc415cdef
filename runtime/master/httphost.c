/* httphost.c - the master as the HTTP server's host (host.h): what
 * /metrics and /api/runner show of the runner (workers, running jobs)
 * read from the master's fields when a page is made, and the loop,
 * config and database thread the server works with; the services fill
 * in what they show (jr_service_host: metrics, queues, unhandled names,
 * schedules). The only file of master/ that knows the server. Uses
 * httphost.h, master_int.h, service.h, http.h, host.h. */
#include "master/httphost.h"
#include "master/master_int.h"
#include "http/http.h"
#include "http/host.h"
#include "master/service.h"

static void
gauges(void *runner, jr_httpgauges *g)
{
    master *m = runner;

    g->busy = jr_pool_busy(m);
    g->active = jr_pool_active(m);
    g->target = m->target;
    g->min = m->cfg->conc_min;
    g->max = m->cfg->conc_max;
    g->local = m->qlen;
    g->generation = m->gen ? m->gen->hash : NULL;
    g->generation_id = m->gen ? m->gen->id : 0;
    g->done = m->done;
    g->failed = m->failed;
    g->dead = m->dead;
    g->cancelled = m->cancelled;
    g->stopping = m->stopping != 0;
    g->passes = m->passes;
    g->sql_failed = m->sql_failed;
    g->nostart = m->nostart[0] ? m->nostart : NULL;
}

static void
running(void *runner, void (*each)(void *arg, const jr_httprun *r),
        void *arg)
{
    master *m = runner;
    double now = jr_mono();
    jr_httprun r;

    for (wk *w = m->workers; w; w = w->next) {
        if (w->njobs == 0 || w->started == 0)
            continue;
        /* one job, or every job of a worker that runs them at once */
        for (int i = 0; i < (w->co ? w->njobs : 1); i++) {
            r.id = w->jobs[i]->id;
            r.name = w->jobs[i]->name;
            r.queue = w->jobs[i]->queue;
            r.attempt = w->jobs[i]->attempt;
            r.worker = w->id;
            r.pid = (int)w->pid;
            r.generation = w->gen ? w->gen->hash : NULL;
            r.seconds = now - (w->co ? w->since[i] : w->started);
            each(arg, &r);
        }
    }
}

static void
trace_metrics(void *runner, jr_buf *b)
{
    master *m = runner;

    jr_otlp_metrics(m->otlp, b);
}

int
jr_httphost_start(master *m, jr_err *err)
{
    jr_httphost host = {
        .runner = m, .base = m->base, .cfg = m->cfg, .token = m->token,
        .dbt = m->dbt, .gauges = gauges, .running = running,
        .trace_metrics = trace_metrics,
    };

    if (m->cfg->http_listen == NULL)
        return 0;
    if (jr_service_host(m, &host) < 0)
        return jr_fail(err, JR_ENOMEM, "http: cannot start the server");
    return jr_http_start(&host, &m->http, err);
}

void
jr_httphost_stopping(master *m)
{
    jr_http_stopping(m->http);
}

void
jr_httphost_stop(master *m)
{
    jr_http_stop(m->http);
    m->http = NULL;
}
