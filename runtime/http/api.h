/* api.h - the HTTP server's JSON API (api.c and its topics' routes, in
 * the loop) and its database half (apidb.c, on the database thread): a
 * request, an operation's row with its inputs, goes to the thread, which
 * answers with an HTTP status and a JSON body; apiquery.c's readers of a
 * request's path and query. Also the small writers that metrics.c and
 * the API share. Uses dbthread.h, util.h. */
#ifndef JR_API_H
#define JR_API_H

#include <stdatomic.h>
#include <stdint.h>

#include "db/dbthread.h"
#include "base/job.h"
#include "base/util.h"

#define JR_API_LIST_MAX 1000    /* jobs one list returns at most */
#define JR_API_IDS_MAX  1000    /* ids one request names at most, and
                                   jobs one POST /api/jobs pushes */
#define JR_API_WAIT_MAX 300     /* seconds a long poll may hold */

struct jr_apireq;

/* Who may ask an operation: what the token of the coming scoped tokens
 * must grant. Today's single token grants all three. */
enum { JR_SCOPE_READ, JR_SCOPE_WRITE, JR_SCOPE_PUSH };

/* One thing a request asks the database: a row in the file of its topic
 * (apidbjobs.c, apidbaction.c, apidbflow.c, apidbsched.c), beside its
 * run function and the routes that ask it; only those below are named
 * outside their file. A new operation is its run function and its row. */
typedef struct jr_apiop {
    const char *name;           /* "stats", "jobs"...: the logs' word */
    int         reader;         /* 1: reads only and may run on the reads'
                                   own connection; a stop answers it 503
                                   (0: the runner's database thread, and
                                   a stop leaves it unanswered) */
    int         scope;          /* JR_SCOPE_*: what it needs granted */
    /* Runs q on the database thread: q->body gets the JSON (or the
     * Prometheus text). 0, or -1 with e set (e's code picks the HTTP
     * status: JR_ENOTFOUND 404, JR_EINPUT 400 or the row's einput,
     * else 503). */
    int       (*run)(jr_db *db, struct jr_apireq *q, jr_err *e);
    int         einput;         /* the status of JR_EINPUT; 0: 400 */
} jr_apiop;

extern const jr_apiop
    jr_apiop_job,               /* show ids[0] (http.c's long polls) */
    jr_apiop_gauges,            /* /metrics' database gauges (text) */
    jr_apiop_outcomes;          /* where ids stand (the long polls') */

#define JR_API_WHERE_MAX 400    /* bytes of a payload filter at most */

/* jr_apireq.what of SCHED_CTL: backend.h's JR_SCHED_* (apidbsched.c checks) */
enum { JR_API_SCHED_PAUSE = 1, JR_API_SCHED_RESUME, JR_API_SCHED_FIRE };

struct jr_schedules;

#define JR_API_TRACE_MAX 520    /* bytes of a trace header kept, NUL too */

typedef struct jr_apireq {
    const jr_apiop *op;         /* what it asks */
    int64_t     ids[JR_API_IDS_MAX];    /* JOB: ids[0]; RETRY, CANCEL */
    int         nids;
    char        state[16];      /* filters; "" matches any */
    char        name[129];
    char        queue[129];     /* also PAUSE, RESUME */
    int         limit;
    char        where[JR_API_WHERE_MAX + 1];    /* payload filter (where.h) */
    int64_t     before_id;      /* a keyset page: ids below, or */
    int64_t     after_id;       /* above (0: not given) */
    const struct jr_limit *limits;  /* LIMITS: the config's, borrowed */
    int         nlimits;
    double      older_than;     /* PURGE: seconds */
    double      wait;           /* JOB: seconds to hold the answer until
                                   the job ends (?wait=); 0: at once */
    double      keep;           /* JOB with wait: result_ttl to mark it */
    void       *mem;            /* PUSH: one block, freed with q */
    jr_push    *pushes;         /* PUSH: in mem; ids go to ids[] */
    int        *outcomes;       /* PUSH: JR_PUSH_* per push, in mem */
    int         npushes;
    int         many;           /* PUSH: the body was an array */
    struct jr_flow *flow;       /* FLOW: read in the loop; freed with q */
    int         ended[JR_API_IDS_MAX]; /* OUTCOMES, JOB: 1 if ids[i] has
                                   ended (completed, dead, cancelled or
                                   gone) */
    int         what;           /* SCHED_CTL: JR_API_SCHED_* */
    double      at;             /* SCHED_CTL fire: the instant, 0: now */
    struct jr_schedules *schedules; /* SCHEDULES: a copy of those the
                                   runner follows now; freed with q */
    atomic_int  stop;           /* set by the loop when the server stops:
                                   a bulk action ends after its page */
    int         status;         /* out: HTTP status */
    jr_buf      body;           /* out: JSON, or Prometheus text */
    size_t      max_payload;    /* SCHEDULE DEFS: the config's (mem: the
                                   definition; schedules: those the
                                   runner follows) */
    double      from, to;       /* SCHEDULE BACKFILL: the window */
    const struct jr_keyring *keys;  /* JOB: the runner's, or NULL */
    int         decrypt;        /* JOB: its values shown decrypted */
    const struct jr_token *dtok;    /* JOB: a push token granted decrypt:
                                   decrypted only in its queues; NULL:
                                   any queue */
    jr_buf      sealed;         /* PUSH: the payloads sealed */
    char        trace[2 * JR_API_TRACE_MAX];    /* PUSH: the request's
                                   traceparent, then its tracestate, each
                                   NUL-terminated; "": none */
} jr_apireq;

/* Runs the request arg (a jr_apireq) over db: for jr_dbthread_request,
 * on the database thread only. */
void jr_apidb_run(jr_db *db, void *arg);
/* Frees q with its body and block (NULL is a no-op). */
void jr_apireq_free(jr_apireq *q);

/* apipush.c: reads POST /api/jobs' body (one job object, or an array of
 * them) into q's pushes, each checked as every push is (max_payload: the
 * config's). Returns 0, or -1 with the reason in why, naming the job's
 * index and field. */
int  jr_apipush_parse(const char *body, size_t len, size_t max_payload,
                      jr_apireq *q, char *why, size_t size);

/* apicrypt.c: encrypted values over HTTP (docs/operations.md,
 * "Encryption"). Whether the request may see a job's values decrypted:
 * with a write scope (today: the runner has a token, which the request
 * gave); a read-only one sees "<encrypted>". */
struct jr_apicall;
int  jr_api_may_decrypt(const struct jr_apicall *c);
/* Seals the payloads of p[0..n), q's pushes or flow, with the runner's
 * key file (none: nothing to do), into q->sealed: 0, or -1 with the
 * reason in why (-2: the caller's payload, an envelope that does not
 * open). */
int  jr_api_seal_pushes(const struct jr_apicall *c, jr_apireq *q,
                        jr_push *p, int n, char *why, size_t size);
/* apidbjobs.c: the request's traceparent and tracestate headers
 * (docs/tracing.md) given to each of p[0..n) (q's pushes or flow) that
 * has no context of its own; a malformed one is warned of (what names
 * the route) and not given. */
void jr_api_push_trace(const struct jr_apicall *c, jr_apireq *q,
                       jr_push *p, int n, const char *what);
/* Replaces the malloc'd JSON text *mem (NULL: none) by its envelope,
 * malloc'd, when the runner has a key file: 0, or -1 with why. */
int  jr_api_seal_text(const struct jr_apicall *c, void **mem, char *why,
                      size_t size);
/* A value of a job's row as the API shows it: s when it holds no
 * envelope, its text opened into *own (free it) when q may decrypt, else
 * NULL (the caller writes "<encrypted>"). */
const char *jr_api_opened(const jr_apireq *q, const char *queue,
                          const char *s, char **own);

/* apidbflow.c, on a database thread: adds a job's parents, children and
 * batch to the job object of q->body (JOB). */
int  jr_apiflow_links(jr_db *db, jr_apireq *q, jr_err *e);

/* apiquery.c, in the loop: a request's path and query. Each replies 400
 * on req with the reason and returns -1 on a bad one. The job id of the
 * path's arg (>= 1) into *id; the list filters of query (state, name,
 * queue, where, limit, before_id, after_id) into q; ?wait=S of GET
 * /api/jobs/ID (0 when not given). Unescape decodes a path segment's
 * %XX in place, once: -1 on a bad escape or a NUL byte (no reply). */
struct evhttp_request;
int    jr_api_job_id(struct evhttp_request *req, const char *arg,
                     int64_t *id);
int    jr_api_filters(struct evhttp_request *req, const char *query,
                      jr_apireq *q);
double jr_api_wait(struct evhttp_request *req, const char *query);
int    jr_api_unescape(char *s);

/* Appends printf-style text to b. */
void jr_api_printf(jr_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Appends s as a JSON string literal (NULL as null); <, > and & are
 * written as \u escapes so that the text is safe inside HTML too. */
void jr_api_str(jr_buf *b, const char *s);
/* Appends t (epoch seconds) as a number, or null when 0. */
void jr_api_time(jr_buf *b, double t);

#endif
