/* dbopts.c - the backend's options from the config, per kind of
 * connection (dbopts.h). */
#include <string.h>

#include "db/dbopts.h"

void
jr_dbopts_fill(jr_backend_opts *o, const jr_config *cfg, int use)
{
    memset(o, 0, sizeof *o);
    o->busy_timeout = cfg->busy_timeout;
    o->schema = cfg->schema;
    if (use == JR_DBOPTS_READER) {
        o->must_exist = 1;
        return;
    }
    o->max_payload = cfg->max_payload;
    o->on_parent_failure = cfg->on_parent_failure;
    if (use == JR_DBOPTS_PRODUCER) {
        o->sync_normal = cfg->sync_normal;
        return;
    }
    /* The runner's own writes (claims, results, rescues) need no fsync of
     * their own: power loss can only undo some of them, and an undone
     * claim or result makes its job run again, which at-least-once
     * allows; never a lost job. Pushes by producers keep `synchronous`
     * (FULL). The same on PostgreSQL: synchronous_commit = off on the
     * runner's connection; producers' connections keep the server's. */
    o->sync_normal = 1;
    o->async_commit = 1;
    /* but the pushes it makes for HTTP are acknowledged: durable first */
    o->durable_push = 1;
    /* statement_timeout and the like set on the role or database are for
     * the application's sessions: the runner's set their own */
    o->own_timeouts = 1;
    o->keep_completed = cfg->keep_completed;
    o->keep_cancelled = cfg->keep_cancelled;
    o->result_ttl = cfg->result_ttl;
    /* jobrunner.sql statements run on the runner's connections only */
    o->handler_role = cfg->handler_role;
    o->attach = cfg->attach;
}
