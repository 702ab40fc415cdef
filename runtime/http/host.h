/* host.h - what the HTTP layer needs from the runner that serves it: the
 * loop and the config, the database thread its writes go to (and what
 * its reads' own connection is opened with), the runner's counters, and
 * the runner's state (workers, running jobs, queues, unhandled names)
 * read through callbacks when a page is made. Nothing under http/ sees
 * the master's fields; master/httphost.c fills this in. Values are read
 * at start and must outlive the server; the callbacks run in the loop.
 * Uses config.h, dbthread.h, util.h. */
#ifndef JR_HOST_H
#define JR_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "db/dbthread.h"
#include "base/util.h"

struct event_base;
struct jr_metrics;

typedef struct jr_httpgauges {  /* the runner now */
    int         busy;           /* workers running a job */
    int         active;         /* workers counting to the target */
    int         target;         /* workers wanted now */
    int         min, max;       /* concurrency.min and .max */
    size_t      local;          /* jobs claimed, not yet in a worker */
    const char *generation;     /* hash of the code new jobs go to, or
                                   NULL before the first */
    int         generation_id;  /* 1, 2, ... */
    long        done, failed, dead, cancelled;  /* jobs since the start */
    int         stopping;       /* the runner is stopping */
    long        passes;         /* passes of the master's loop's work */
    long        sql_failed;     /* successes whose jobrunner.sql statement
                                   failed when recorded */
    const char *nostart;        /* why workers cannot start (its first
                                   line), or NULL while they do */
} jr_httpgauges;

typedef struct jr_httprun {     /* a job running in a worker */
    int64_t     id;
    const char *name, *queue;
    int         attempt;
    int         worker, pid;    /* the worker's number and process */
    const char *generation;     /* the worker's code, or NULL */
    double      seconds;        /* since the job started */
} jr_httprun;

typedef struct jr_httpqueue {   /* a queue this runner caps or names */
    const char *name;
    int         running;        /* its jobs in workers */
    int         local;          /* its jobs claimed, not yet in a worker */
    int         capped;         /* listed in `queues`: target applies */
    int         target;         /* its cap on running jobs now */
} jr_httpqueue;

typedef struct jr_httphost {
    void               *runner;         /* passed back to each callback */
    struct event_base  *base;           /* the loop the server runs on */
    const jr_config    *cfg;            /* http.*, and the database */
    const char         *token;          /* the runner's, for the reads'
                                           own connection */
    jr_dbthread        *dbt;            /* the runner's database thread:
                                           writes, and reads without a
                                           connection of their own */
    struct jr_metrics  *metrics;        /* the runner's counters */
    /* Fills g with the runner's state now. */
    void (*gauges)(void *runner, jr_httpgauges *g);
    /* Calls each(arg, r) for every job running in a worker, in the
     * workers' order; r is valid during the call only. */
    void (*running)(void *runner,
                    void (*each)(void *arg, const jr_httprun *r), void *arg);
    /* Calls each(arg, q) for every queue the runner caps or names. */
    void (*queues)(void *runner,
                   void (*each)(void *arg, const jr_httpqueue *q), void *arg);
    /* Appends the unhandled names of the last count: the gauge
     * jobrunner_unhandled_jobs (Prometheus text), or /api/runner's
     * ,"unhandled":[...] member. */
    void (*unhandled_metrics)(void *runner, jr_buf *b);
    void (*unhandled_json)(void *runner, jr_buf *b);
    /* Appends /metrics' whole text (the runner's counters, and the
     * gauges it reads through this host h), or the dashboard's
     * throughput minutes as JSON. */
    void (*metrics_text)(const struct jr_httphost *h, jr_buf *b);
    void (*throughput)(const struct jr_httphost *h, jr_buf *b);
    /* The schedules the runner follows now: its config's, as last
     * reloaded. Valid until the loop runs again. */
    const struct jr_schedules *(*schedules)(void *runner);
    /* Appends the span export's counters (Prometheus text:
     * jobrunner_spans_exported_total, jobrunner_spans_dropped_total,
     * jobrunner_span_exports_failed_total; docs/tracing.md). */
    void (*trace_metrics)(void *runner, jr_buf *b);
} jr_httphost;

#endif
