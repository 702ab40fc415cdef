/* limit.h - the limits model every layer shares: a cap and rate
 * (jr_limit_set), one limit per job name or queue (jr_limit) and a
 * config's list of them (jr_limits), with the functions over the list.
 * The config reads them (limitcfg.h), the backends' claim enforces them
 * (limitpick.h), the master keeps them. Uses err.h. */
#ifndef JR_LIMIT_H
#define JR_LIMIT_H

#include <math.h>
#include <stddef.h>

#include "base/err.h"

#define JR_LIMIT_CAP_MAX  100000        /* a concurrency cap at most */
#define JR_LIMIT_MAX      256           /* limits in one config */
#define JR_LIMIT_QPREFIX  "queue:"      /* a scope naming a queue */

/* One cap and rate; 0 where not set. */
typedef struct jr_limit_set {
    int     concurrency;        /* running jobs at most; 0: no cap */
    double  rate;               /* tokens per second; 0: no rate */
    double  burst;              /* bucket size: the rate's count unless
                                   `burst` says */
    char    rate_text[40];      /* as written ("100/1m"), for show */
} jr_limit_set;

typedef struct jr_limit {
    char        *scope;         /* job name, or "queue:NAME"; owned */
    char        *key_path;      /* payload path after "payload.", or NULL */
    jr_limit_set all;           /* the scope's own */
    jr_limit_set per_key;       /* each limit key's */
    /* fair share inside a queue (docs/queues.md, "Fair share"): the
     * payload path of the fair key after "payload.", NULL when the queue
     * is not fair; the weight of a key with none set; the config's
     * weights as a JSON object {"key": weight} (NULL: none), written to
     * the database at start */
    char        *fair_path;
    double       fair_default;
    char        *fair_weights;
    /* priority aging of a queue (docs/queues.md, "Priority aging"): a
     * ready job's priority rises one level per this many seconds waited
     * since its run_at; 0 when the queue does not age */
    double       aging;
} jr_limit;

typedef struct jr_limits {
    jr_limit *l;                /* by scope, as declared */
    int       n;
} jr_limits;

/* A ready job's effective priority in a queue that ages every aging
 * seconds (0: none): its priority less one level per period waited since
 * its run_at, by now. Lower runs first, as priority does. */
static inline long long
jr_aged_priority(int priority, double run_at, double now, double aging)
{
    double waited = now - run_at;

    if (!(aging > 0) || !(waited >= aging))
        return priority;
    waited = floor(waited / aging);
    return (long long)priority - (waited > 1e15 ? (long long)1e15 :
                                  (long long)waited);
}

/* The most one job under l may cost (docs/limits.md, "Limits by cost"):
 * its smallest concurrency cap or bucket (burst), its own or per key; 0
 * when it has none. what gets which it is ("rate \"100/1m\" (a bucket
 * of 100)", "per_key concurrency 2"). */
long jr_limit_size(const jr_limit *l, char *what, size_t whatsz);

/* Checks a scope: a job name, or "queue:" and a queue name. */
int  jr_limit_scope_check(const char *scope, jr_err *err);
/* The limit of scope in ls, or NULL. */
jr_limit *jr_limits_find(const jr_limits *ls, const char *scope);
/* Appends a copy of scope with no caps; NULL when out of memory. */
jr_limit *jr_limits_add(jr_limits *ls, const char *scope);
/* Copies src into dst (zeroed or freed first): -1 when out of memory. */
int  jr_limits_copy(jr_limits *dst, const jr_limits *src);
void jr_limits_free(jr_limits *ls);     /* frees members; zeroes ls */

#endif
