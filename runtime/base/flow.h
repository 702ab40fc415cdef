/* flow.h - a flow: a graph of jobs pushed in one transaction
 * (docs/workflows.md), read from its JSON text into pushes in an order
 * where every job comes after the jobs it waits for. One reader for
 * every door (push-flow, the C library, the Lua module, POST /api/flows):
 * cycles, unknown local names, duplicate names and graphs over
 * JR_FLOW_MAX jobs are refused naming the job and the reason. Owns the
 * pushes and their strings; uses job.h and jsondom.h. */
#ifndef JR_FLOW_H
#define JR_FLOW_H

#include <stddef.h>

#include "base/err.h"
#include "base/job.h"

#define JR_FLOW_MAX 20000       /* jobs in one flow */

typedef struct jr_flow {
    int            n;           /* jobs */
    jr_push       *jobs;        /* parents before children; after_local
                                   indexes this array */
    const char   **refs;        /* each job's local name, jobs' order */
    jr_batch_spec  batch;       /* when has_batch: every job's batch_new */
    int            has_batch;
    char         **owned;       /* what the pushes point to */
    int            nowned, capowned;
} jr_flow;

/* Reads the flow document text (len bytes): {"jobs": [{"ref": "a",
 * "name": "handler.name", "payload": {...}, "after": ["b", 42], ...}],
 * "batch": {"on_complete": ..., "on_success": ..., "payload": ...,
 * "queue": ..., "results": true}}; a bare array is the jobs. A job's ref
 * defaults to its name; after names refs of the flow, or ids (numbers) of
 * jobs already pushed. The other keys of a job are the push options
 * queue, priority, max_retries, run_in, run_at, key, on_parent_failure,
 * expires_in, expires_at, deadline, traceparent and tracestate. Fills f (free with jr_flow_free). Returns 0, or -1
 * with err set (JR_EINPUT) naming what and where ("flow: job 'd': after:
 * unknown job 'x'", "flow: cycle: a -> b -> a"). */
int  jr_flow_parse(jr_flow *f, const char *text, size_t len, jr_err *err);
void jr_flow_free(jr_flow *f);  /* and zeroes it; zeroed f is a no-op */

#endif
