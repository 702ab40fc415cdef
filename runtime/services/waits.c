/* waits.c - the long polls of the HTTP API (GET /api/jobs/ID?wait=S):
 * when jobs of this runner end, the cycles that record their ends are
 * followed by one look at the jobs the polls wait on (http.c's
 * jr_http_jobs_ended; nothing when none waits), so that a poll is answered
 * once its job's end is recorded, without waiting for the HTTP server's
 * own look each second. A service (service.h): per job, one flag set.
 * Uses service.h, svc.h, http.h. */
#include <stdlib.h>

#include "http/http.h"
#include "master/service.h"
#include "master/svc.h"

typedef struct waits {
    int         cycles;         /* cycles left to look after (an end is
                                   recorded by the next cycle but one at
                                   most) */
} waits;

static int
init(master *m, void **st)
{
    (void)m;
    return (*st = calloc(1, sizeof(waits))) == NULL ? -1 : 0;
}

static void
job_end(master *m, void *st, const jr_job *j, const jr_result *r,
        double secs)
{
    (void)j;
    (void)r;
    (void)secs;
    if (jr_svc_http(m) != NULL)
        ((waits *)st)->cycles = 2;
}

static void
taken(master *m, void *st, jr_cycle *c)
{
    waits *w = st;

    (void)c;
    if (w->cycles > 0) {
        w->cycles--;
        jr_http_jobs_ended(jr_svc_http(m));
    }
}

static void
free_waits(master *m, void *st)
{
    (void)m;
    free(st);
}

const jr_service jr_waits_service = {
    .name = "waits", .init = init,
    .job_end = job_end, .taken = taken, .free = free_waits,
};
