/* pending.c - what a result waiting to be recorded owns (master_int.h's
 * pending), and the end of a success with jobrunner.sql statements, told
 * only once it is recorded: as the success it was, or as the failed
 * attempt it became when one of its statements failed (the backend's
 * sql_error, sqlres.h), so that on_job_success, the runner's counts and
 * /metrics never count a success that did not commit. Uses
 * master_int.h. */
#include <stdlib.h>

#include "master/master_int.h"

int
jr_pending_job(master *m, const jr_result *r, void *mem, jr_job *j,
               double secs)
{
    int n = m->nres;

    jr_claimq_result(m, r, mem);
    if (m->nres == n)
        return 0;
    m->res[n].job = j;
    m->res[n].secs = secs;
    return 1;
}

void
jr_pending_free(pending *p)
{
    free(p->mem);
    free(p->job);
    p->mem = NULL;
    p->job = NULL;
}

void
jr_pending_recorded(master *m, pending *p)
{
    jr_result seen = p->r;

    if (p->r.sql_error != NULL && p->r.sql_error[0] != '\0') {
        m->sql_failed++;
        seen.kind = p->r.sql_kind == JR_DEAD ? JR_DEAD : JR_RETRY;
        seen.delay = seen.kind == JR_RETRY && p->r.sql_delay > 0
                     ? p->r.sql_delay : 0;
        seen.error = p->r.sql_error;
        seen.npushes = 0;
        seen.result = NULL;
    }
    jr_pool_outcome(m, p->job, &seen, p->secs);
}
