/* clientsched.c - the producer library's schedules managed at run time
 * (jobrunner.h): add, set, remove and backfill through schedput.h, the
 * path the CLI and the HTTP API take. Uses client_int.h, schedput.h. */
#include <math.h>
#include <stdlib.h>

#include "client/client_int.h"
#include "client/jobrunner.h"
#include "db/schedput.h"

/* Ends a call: no such schedule is JR_CLIENT_ENOTFOUND (the library's
 * JR_ENOTFOUND says no database). */
static int
done(jr_client *c, int rc)
{
    if (rc < 0 && c->err.code == JR_ENOTFOUND)
        c->err.code = E_NOJOB;
    return jr_clientint_finish(c, rc);
}

static int
put(jr_client *c, int what, const char *name, const char *def)
{
    jr_schedput_cfg cfg = {NULL, NULL, 0};

    if (c == NULL)
        return JR_CLIENT_EUSAGE;
    if (jr_clientint_begin(c) < 0)
        return jr_clientint_finish(c, -1);
    if (name == NULL || (what != JR_SCHEDPUT_REMOVE && def == NULL))
        return jr_clientint_finish(c, jr_fail(&c->err, JR_EUSAGE,
                                   "schedule: name or definition is NULL"));
    cfg.max_payload = c->max_payload;
    return done(c, jr_schedput(c->db.ops, c->db.b, &cfg, what, name, def,
                               NULL, &c->err));
}

int
jr_client_schedule_add(jr_client *c, const char *name, const char *def)
{
    return put(c, JR_SCHEDPUT_ADD, name, def);
}

int
jr_client_schedule_set(jr_client *c, const char *name, const char *change)
{
    return put(c, JR_SCHEDPUT_SET, name, change);
}

int
jr_client_schedule_remove(jr_client *c, const char *name)
{
    return put(c, JR_SCHEDPUT_REMOVE, name, NULL);
}

int
jr_client_schedule_backfill(jr_client *c, const char *name, double from,
                            double to, long *pushed)
{
    const jr_schedule *s;
    jr_schedules own;
    long n = -1;

    if (pushed != NULL)
        *pushed = 0;
    if (c == NULL)
        return JR_CLIENT_EUSAGE;
    if (jr_clientint_begin(c) < 0)
        return jr_clientint_finish(c, -1);
    if (name == NULL)
        return jr_clientint_finish(c, jr_fail(&c->err, JR_EUSAGE,
                                   "schedule: name is NULL"));
    if (!isfinite(from) || !isfinite(to) || from < 0 || to < 0)
        return jr_clientint_finish(c, jr_fail(&c->err, JR_EINPUT,
                                   "schedule '%s': backfill: FROM and TO "
                                   "must be epoch seconds", name));
    if (jr_schedput_find(c->db.ops, c->db.b, NULL, name, &own, &s,
                         &c->err) == 0) {
        n = jr_schedput_backfill(c->db.ops, c->db.b, s, from, to, &c->err);
        jr_schedules_free(&own);
    }
    if (n >= 0 && pushed != NULL)
        *pushed = n;
    return done(c, n < 0 ? -1 : 0);
}
