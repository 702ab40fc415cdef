/* client_int.h - what the C library's files share, private to them: the
 * handle (jobrunner.h's opaque jr_client) and the start and end of a
 * call. client.c owns the handle and writes; clientread.c reads;
 * clientwait.c waits on outcomes. Uses backend.h, err.h, util.h. */
#ifndef JR_CLIENT_INT_H
#define JR_CLIENT_INT_H

#include <stddef.h>

#include "backend.h"
#include "base/err.h"
#include "base/util.h"
#include "client/jobrunner.h"

#define E_NOJOB 1000            /* err code: no such job (show, wait) */
#define E_TIMEOUT 1001          /* err code: wait's timeout passed */
#define E_LOST 1002             /* err code: wait's database not back */

struct jr_client {
    jr_db       db;             /* ops NULL when open failed */
    jr_err      err;            /* the last call's status and message */
    size_t      max_payload;    /* bytes; checked before the database */
    double      result_ttl;     /* seconds a waited-on job is kept */
    jr_outcome *outs;           /* the last jr_client_wait's, or NULL */
    int         nouts;
    struct jr_waitidx *byid;    /* outs' ids sorted, with their index */
    struct jr_keyring *keys;    /* the key file's; NULL: no encryption */
    jr_buf      sealed;         /* the last call's sealed payloads */
};

/* client.c: checks c is usable (0, or -1 with c->err set) and ends a call
 * (rc < 0 keeps c->err), returning the public status. */
int  jr_clientint_begin(jr_client *c);
int  jr_clientint_finish(jr_client *c, int rc);
/* clientwait.c: frees the outcomes c holds. */
void jr_clientint_wait_free(jr_client *c);

#endif
