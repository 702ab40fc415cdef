/* metrics.h - what the master counts as jobs pass, for /metrics and the
 * dashboard: jobs finished by name, queue and outcome, job duration and
 * push-to-start latency by name (histograms), database cycle times,
 * reloads, lease rescues, and per-minute throughput over the last hour.
 * Nothing here queries the database: the database's gauges come from
 * apidb.c. Owns its series; reads the runner's workers and queues
 * through the HTTP host (host.h) when it writes them out. */
#ifndef JR_METRICS_H
#define JR_METRICS_H

#include "base/util.h"

struct jr_httphost;
struct jr_job;
struct jr_result;
typedef struct jr_metrics jr_metrics;

jr_metrics *jr_metrics_new(void);       /* NULL when out of memory */
void jr_metrics_free(jr_metrics *x);    /* NULL is a no-op */
/* Counts job j's outcome r (secs: how long it ran; 0 when it did not). */
void jr_metrics_job(jr_metrics *x, const struct jr_job *j,
                    const struct jr_result *r, double secs);
/* Job j starts waited seconds after it became due. */
void jr_metrics_start(jr_metrics *x, const struct jr_job *j, double waited);
void jr_metrics_cycle_begin(jr_metrics *x);     /* a cycle was submitted */
void jr_metrics_cycle_end(jr_metrics *x, int rescued);  /* and came back */
void jr_metrics_reload(jr_metrics *x, int ok);
/* Appends the runner's own series (Prometheus text) to b. */
void jr_metrics_write(const struct jr_httphost *host, jr_buf *b);
/* Appends {"minutes":[{"t":epoch,"done":n,"failed":n}...]}: the last hour
 * by minute, oldest first. */
void jr_metrics_throughput(jr_metrics *x, jr_buf *b);
/* x may be NULL in every call but _write (host->metrics): the HTTP
 * server is off. */

#endif
