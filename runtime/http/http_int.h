/* http_int.h - what the HTTP server's two files share, private to them:
 * http.c serves and routes and gets the database thread's answers;
 * httpwait.c holds the long polls (GET /api/jobs/ID?wait=S) until their
 * jobs end. Uses http.h, httpconn.h, auth.h, dbends.h. */
#ifndef JR_HTTP_INT_H
#define JR_HTTP_INT_H

#include "http/auth.h"
#include "http/http.h"
#include "http/httpconn.h"
#include "db/dbends.h"

struct event;
struct evhttp;

enum { ASK, GAUGES, SCRAPE, PARK, SWEEP };  /* what an awaited is for */

typedef struct awaited {
    int                     kind;
    struct evhttp_request  *req;        /* NULL for GAUGES */
    jr_apireq              *q;          /* ASK, GAUGES */
    jr_http                *h;          /* NULL once the server stopped */
    double                  deadline;   /* PARK: mono time to answer by */
    double                  asked;      /* mono time its read was asked */
    struct awaited         *next;
} awaited;

struct jr_http {
    jr_httphost         host;           /* the runner it serves */
    struct evhttp      *http;
    jr_httpconn        *conns;          /* its connections */
    jr_auth             auth;           /* token, host and port */
    awaited            *waiting;        /* answers still to come */
    jr_buf              gauges;         /* the last database gauges */
    double              gauges_at;      /* mono time read; 0: never */
    double              gauges_keep;    /* seconds to keep them */
    double              asked_at;       /* mono time the read was asked */
    int                 gauges_asked;   /* a read is on its way */
    jr_db              *rdb;            /* the reads' connection, or NULL */
    jr_dbthread        *rdt;            /* and its thread */
    awaited            *parked;         /* long polls: jobs not ended yet */
    struct event       *sweep;          /* answers them at their deadline;
                                           looks each WAIT_SWEEP without
                                           a watch */
    int                 sweeping;       /* looks on their way */
    int                 again;          /* look again once they are back */
    double              looked_at;      /* mono time of the last look */
    jr_dbends          *ends;           /* the watch on the ends of jobs,
                                           or NULL */
    double              woke_at;        /* mono time it last told of one */
    struct event       *soon;           /* a look it asked for, LOOK_GAP
                                           after the last */
    int                 stopping;       /* the runner is: hold no poll */
};

/* http.c: p for request req (NULL for GAUGES and SWEEP) and its read q,
 * on the list of answers to come; NULL when out of memory. */
awaited *jr_http_await(jr_http *h, int kind, struct evhttp_request *req,
                       jr_apireq *q);
/* Takes p off that list; frees p and its read. */
void jr_http_unawait(jr_http *h, awaited *p);
void jr_http_awaited_free(awaited *p);
/* jr_dbthread_request's pair for an awaited: runs its read on the
 * database thread, then answers it in the loop (ran 0: the thread
 * stopped first). */
void jr_http_run(jr_db *db, void *arg);
void jr_http_answered(void *arg, int ran);
/* The thread that runs op: the reads' own when op only reads and there
 * is one, else the runner's. */
jr_dbthread *jr_http_thread(jr_http *h, const jr_apiop *op);

/* httpwait.c: the long polls' timers and watch, once h->rdt is open;
 * their end, answering those held as their jobs stand. */
void jr_httpwait_start(jr_http *h);
void jr_httpwait_stop(jr_http *h);
/* Holds p (an ASK of a job not ended, with a wait) until its job ends
 * or its wait is over. */
void jr_httpwait_park(jr_http *h, awaited *p);
/* The answer q to a look (a SWEEP) came back: the parked whose job
 * ended are asked again. */
void jr_httpwait_looked(jr_http *h, const jr_apireq *q, int ran);

#endif
