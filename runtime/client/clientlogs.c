/* clientlogs.c - a job's logs through libjobrunner (jobrunner.h): its runs
 * as the backend keeps them, those of one attempt picked by joblog.c.
 * Uses client_int.h, backend.h, joblog.h. */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "base/err.h"
#include "base/joblog.h"
#include "client/client_int.h"
#include "client/jobrunner.h"

int
jr_client_logs(jr_client *c, int64_t id, int attempt, char **json)
{
    jr_buf out = {0};
    char *logs = NULL;
    int rc;

    if (c == NULL || json == NULL)
        return JR_CLIENT_EUSAGE;
    *json = NULL;
    if (jr_clientint_begin(c) < 0)
        return jr_clientint_finish(c, -1);
    if ((rc = c->db.ops->job_logs(c->db.b, id, &logs, &c->err)) <= 0) {
        if (rc == 0)
            jr_fail(&c->err, E_NOJOB, "no job with id %lld", (long long)id);
        return jr_clientint_finish(c, -1);
    }
    rc = jr_joblog_select(logs, attempt, &out, &c->err);
    free(logs);
    if (rc < 0) {
        jr_buf_free(&out);
        return jr_clientint_finish(c, -1);
    }
    *json = out.p;
    return jr_clientint_finish(c, 0);
}
