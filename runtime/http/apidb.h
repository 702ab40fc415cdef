/* apidb.h - what the files of the HTTP API's database reader share,
 * private to them: the topics' run functions (apidbjobs.c,
 * apidbaction.c, apidbsched.c) write their rows with apidbrows.c and read
 * a request's list filter with apidb.c's. All run on the database
 * thread. Uses api.h, backend.h. */
#ifndef JR_APIDB_H
#define JR_APIDB_H

#include "http/api.h"
#include "backend.h"

typedef struct jr_apiwalk {     /* a JSON array being written */
    jr_apireq  *q;
    int         n;              /* elements so far */
    size_t     *at;             /* NULL, or where each element starts */
} jr_apiwalk;

typedef struct jr_apitotals {   /* a stats walk */
    jr_apiwalk  w;
    long        n[JR_NSTATES];  /* the names' counts summed */
} jr_apitotals;

/* apidbrows.c: the walks' callbacks (arg: a jr_apiwalk, of q->body). A
 * job (as show writes it, with its payload and "attempts", when the walk
 * is of one job and no list), a dead job, a queue; a name's counts (arg:
 * a jr_apitotals, summing them). 0 always. */
int jr_apidb_job_row(const jr_job_row *r, void *arg);
int jr_apidb_dead_row(const jr_dead_row *r, void *arg);
int jr_apidb_queue_row(const jr_queue_row *r, void *arg);
int jr_apidb_stat_row(const jr_stat_row *r, void *arg);
/* "state":n[s],... of the states whose flags hold all of flags. */
void jr_apidb_counts(jr_buf *b, const long *n, int flags);
/* The Prometheus gauges of a name (arg: the jr_apireq) and of a queue
 * (arg: three buffers: the state gauges, the paused gauge, the age of
 * the oldest ready job). 0 always. */
int jr_apidb_gauge_name(const jr_stat_row *r, void *arg);
int jr_apidb_gauge_queue(const jr_queue_row *r, void *arg);

/* apidbfair.c: the fair queues of limits l[0..n) (docs/queues.md, "Fair
 * share"): "fair":{queue:{keys, top:[{key, waiting, running, weight,
 * share}]}} for /api/stats, and their gauges for /metrics. */
struct jr_limit;
int jr_apidb_fair_json(jr_db *db, jr_buf *b, const struct jr_limit *l, int n,
                       jr_err *e);
int jr_apidb_fair_gauges(jr_db *db, jr_buf *b, const struct jr_limit *l,
                         int n, jr_err *e);
/* apidbaging.c: the aging queues of limits l[0..n) (docs/queues.md,
 * "Priority aging"): "aging":{queue:{every, levels:[{effective_priority,
 * jobs, lowest_priority}]}} for /api/stats. */
int jr_apidb_aging_json(jr_db *db, jr_buf *b, const struct jr_limit *l,
                        int n, jr_err *e);

/* apidb.c: q's list filter (its state, name, queue, where, limit and
 * cursors; "" matches any). */
jr_list_filter jr_apidb_filter(const jr_apireq *q);

#endif
