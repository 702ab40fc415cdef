/* apibody.h - the JSON body of the HTTP API's POST actions (cancel, dead
 * retry and purge, a job's actions, a schedule's fire): one object with
 * the keys ids, all, older_than and at, parsed strictly in the loop.
 * Uses api.h, libevent's evhttp. */
#ifndef JR_APIBODY_H
#define JR_APIBODY_H

#include <event2/http.h>

#include "http/api.h"

typedef struct jr_apibody {
    const char *s, *p, *end;
    char        why[200];       /* what was wrong, at which byte */
    int         has_ids, all;
    double      older_than;     /* < 0: not given */
    double      at;             /* fire's instant; 0: not given */
} jr_apibody;

/* Parses req's body (empty is {}) into b, and its ids into q->ids.
 * 0, or -1 with b->why set. */
int jr_apibody_parse(struct evhttp_request *req, jr_apibody *b,
                     jr_apireq *q);

#endif
