/* limit.h - the limits model every layer shares: a cap and rate
 * (jr_limit_set), one limit per job name or queue (jr_limit) and a
 * config's list of them (jr_limits), with the functions over the list.
 * The config reads them (limitcfg.h), the backends' claim enforces them
 * (limitpick.h), the master keeps them. Uses err.h. */
#ifndef JR_LIMIT_H
#define JR_LIMIT_H

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
} jr_limit;

typedef struct jr_limits {
    jr_limit *l;                /* by scope, as declared */
    int       n;
} jr_limits;

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
