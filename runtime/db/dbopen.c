/* dbopen.c - opening the runner's database connections: the claim's
 * (migrated, waiting for the database as wait_for_db says) and side ones
 * for work off the claim path, each with a thread that runs requests
 * only (dbthread.c). Also what runs on the claim's connection before its
 * thread starts: the wake-up descriptor, the first rescue. Uses
 * dbthread.h, backend.h, log.h. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "db/dbthread.h"
#include "base/log.h"

static void
backend_opts(jr_backend_opts *o, const jr_config *cfg)
{
    memset(o, 0, sizeof *o);

    /* The runner's own writes (claims, results, rescues) need no fsync of
     * their own: power loss can only undo some of them, and an undone
     * claim or result makes its job run again, which at-least-once
     * allows; never a lost job. Pushes by producers keep `synchronous`
     * (FULL). The same on PostgreSQL: synchronous_commit = off on the
     * runner's connection; producers' connections keep the server's. */
    o->sync_normal = 1;
    o->async_commit = 1;
    /* statement_timeout and the like set on the role or database are for
     * the application's sessions: the runner's set their own */
    o->own_timeouts = 1;
    o->busy_timeout = cfg->busy_timeout;
    o->schema = cfg->schema;
    o->max_payload = cfg->max_payload;
    o->keep_completed = cfg->keep_completed;
    o->keep_cancelled = cfg->keep_cancelled;
}

static int
open_migrate(jr_db *db, const jr_config *cfg, jr_err *err)
{
    jr_backend_opts o;

    backend_opts(&o, cfg);
    o.claims = 1;
    if (jr_db_open(db, cfg->backend, &o, err) == 0 &&
        db->ops->migrate(db->b, err) == 0 &&
        db->ops->limit_paths(db->b, cfg->limits.l, cfg->limits.n, err) == 0)
        return 0;
    jr_db_close(db);
    return -1;
}

jr_db *
jr_dbthread_open(const jr_config *cfg, jr_err *err)
{
    double waited = 0, delay = 0.2, limit = cfg->wait_for_db;
    jr_db *db = calloc(1, sizeof *db);

    if (db == NULL) {
        jr_fail(err, JR_ENOMEM, "out of memory");
        return NULL;
    }
    while (open_migrate(db, cfg, err) < 0) {
        if (err->code != JR_EDB || (limit >= 0 && waited >= limit)) {
            free(db);
            return NULL;
        }
        if (waited == 0)
            jr_log(JR_LOG_ERROR, "%s; retrying %s (wait_for_db)", err->msg,
                   limit < 0 ? "until it answers" : "for a while");
        usleep((useconds_t)(delay * 1e6));
        waited += delay;
        delay = delay * 2 > JR_DB_RETRY_MAX ? JR_DB_RETRY_MAX : delay * 2;
    }
    if (waited > 0)
        jr_log(JR_LOG_INFO, "database: reached after %.1fs", waited);
    return db;
}

jr_dbthread *
jr_dbthread_side(const jr_config *cfg, const char *token,
                 struct event_base *base, int claims, jr_db **dbp,
                 jr_err *err)
{
    jr_db *db = calloc(1, sizeof *db);
    jr_dbthread *t;
    jr_backend_opts o;

    if (db == NULL) {
        jr_fail(err, JR_ENOMEM, "out of memory");
        return NULL;
    }
    backend_opts(&o, cfg);
    o.claims = claims;
    /* the database exists: never the create path, whose open and close of
     * the file would drop this process's SQLite locks on it */
    o.must_exist = 1;
    if (jr_db_open(db, cfg->backend, &o, err) < 0) {
        free(db);
        return NULL;
    }
    if ((t = jr_dbthread_new(db, token, cfg->lease, base, NULL, NULL,
                             err)) == NULL) {
        jr_dbthread_close(db);
        return NULL;
    }
    *dbp = db;
    return t;
}

void
jr_dbthread_close(jr_db *db)
{
    if (db == NULL)
        return;
    jr_db_close(db);
    free(db);
}

int
jr_dbthread_wake_fd(jr_db *db)
{
    jr_err err;
    int fd = db->ops->wake_fd(db->b);

    if (fd >= 0)
        db->ops->changed(db->b, &err);  /* start from now */
    return fd;
}

int
jr_dbthread_rescue(jr_db *db, jr_err *err)
{
    return db->ops->rescue(db->b, err);
}
