/* clientsignal.c - the C library's jr_client_signal (jobrunner.h): a
 * signal sent to a job's wait_signal (docs/handlers.md, "Signals and
 * durable sleep"). Uses client_int.h, backend.h. */
#include <stdio.h>

#include "client/client_int.h"

int
jr_client_signal(jr_client *c, int64_t id, const char *name,
                 const char *payload, int *woken)
{
    char state[16];
    int rc;

    if (c == NULL)
        return JR_CLIENT_EUSAGE;
    if (jr_clientint_begin(c) < 0)
        return jr_clientint_finish(c, -1);
    if (name == NULL)
        return jr_clientint_finish(c, jr_fail(&c->err, JR_EUSAGE, "signal: "
                                              "name is NULL"));
    if (jr_signal_check(name, payload, c->max_payload, &c->err) < 0)
        return jr_clientint_finish(c, -1);
    rc = c->db.ops->signal(c->db.b, id, name, payload, state, sizeof state,
                           &c->err);
    if (rc < 0 && c->err.code == JR_ENOTFOUND)
        c->err.code = E_NOJOB;
    if (rc >= 0 && woken != NULL)
        *woken = rc;
    return jr_clientint_finish(c, rc);
}
