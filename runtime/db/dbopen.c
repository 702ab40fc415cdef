/* dbopen.c - opening the runner's database connections: the claim's
 * (migrated, waiting for the database as wait_for_db says) and side ones
 * for work off the claim path, each with a thread that runs requests
 * only (dbthread.c). Also what runs on the claim's connection before its
 * thread starts: the wake-up descriptor, the first rescue. Uses
 * dbthread.h, dbopts.h, backend.h, log.h. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "db/dbopts.h"
#include "db/dbthread.h"
#include "base/log.h"

/* A run-time schedule (schedule add) named as one of the config's: the
 * runner does not start, naming it. */
typedef struct clash_arg {
    const jr_config *cfg;
    char             name[200];
} clash_arg;

static int
clash(const char *name, const char *def, double created, double updated,
      void *arg)
{
    clash_arg *a = arg;
    int i;

    (void)def;
    (void)created;
    (void)updated;
    for (i = 0; i < a->cfg->schedules.n; i++)
        if (strcmp(a->cfg->schedules.s[i].name, name) == 0) {
            snprintf(a->name, sizeof a->name, "%s", name);
            return 1;
        }
    return 0;
}

static int
no_clash(jr_db *db, const jr_config *cfg, jr_err *err)
{
    clash_arg a = {cfg, ""};
    int64_t rev = -1;

    if (cfg->schedules.n == 0)
        return 0;
    if (db->ops->sched_defs(db->b, &rev, clash, &a, err) < 0)
        return -1;
    if (a.name[0] == '\0')
        return 0;
    return jr_fail(err, JR_ECONFIG, "%s: schedule '%s' is in the config "
                   "and was added at run time (schedule add): a name in "
                   "both is refused; remove one (jobrunner schedule remove "
                   "%s, or rename it in the config)", cfg->file ? cfg->file :
                   "config", a.name, a.name);
}

static int
cost_warn(const char *scope, long size, const char *what, long jobs,
          int64_t job, long cost, void *arg)
{
    (void)arg;
    jr_log(JR_LOG_WARN, "limit '%s': %ld job%s not started cost%s more than "
           "its %s holds (%ld at most; job %lld costs %ld): %s could never "
           "start; raise the limit or cancel %s", scope, jobs,
           jobs == 1 ? "" : "s", jobs == 1 ? "s" : "", what, size,
           (long long)job, cost, jobs == 1 ? "it" : "they",
           jobs == 1 ? "it" : "them");
    return 0;
}

void
jr_db_cost_warn(const jr_db *db)
{
    jr_err err;

    if (db->ops->cost_over(db->b, cost_warn, NULL, &err) < 0)
        jr_log(JR_LOG_WARN, "%s", err.msg);
}

static int
open_migrate(jr_db *db, const jr_config *cfg, jr_err *err)
{
    jr_backend_opts o;

    jr_dbopts_fill(&o, cfg, JR_DBOPTS_RUNNER);
    o.claims = 1;
    if (jr_db_open(db, cfg->backend, &o, err) == 0 &&
        db->ops->migrate(db->b, err) == 0 &&
        db->ops->limit_paths(db->b, cfg->limits.l, cfg->limits.n, err) == 0 &&
        no_clash(db, cfg, err) == 0) {
        jr_db_cost_warn(db);
        return 0;
    }
    jr_db_close(db);
    return -1;
}

/* A stop asked for while the start waits for the database (the loop's
 * own signal handling is not set up yet: SIGTERM killed the runner, exit
 * status 143). */
static volatile sig_atomic_t stop_sig;

static void
on_stop(int sig)
{
    stop_sig = sig;
}

#define STILL_EVERY 60.0        /* s between the wait's reminders */

jr_db *
jr_dbthread_open(const jr_config *cfg, jr_err *err)
{
    double waited = 0, delay = 0.2, limit = cfg->wait_for_db, said = 0;
    jr_db *db = calloc(1, sizeof *db);
    struct sigaction sa, old_term, old_int;
    int ok;

    if (db == NULL) {
        jr_fail(err, JR_ENOMEM, "out of memory");
        return NULL;
    }
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;    /* no SA_RESTART: the sleep ends */
    sigemptyset(&sa.sa_mask);
    stop_sig = 0;
    sigaction(SIGTERM, &sa, &old_term);
    sigaction(SIGINT, &sa, &old_int);
    while (!(ok = open_migrate(db, cfg, err) == 0)) {
        if (err->code != JR_EDB || (limit >= 0 && waited >= limit))
            break;
        if (waited == 0)
            jr_log(JR_LOG_ERROR, "%s; retrying %s (wait_for_db)", err->msg,
                   limit < 0 ? "until it answers" : "for a while");
        else if (waited - said >= STILL_EVERY) {
            jr_log(JR_LOG_ERROR, "still no database after %.0fs: %s",
                   waited, err->msg);
            said = waited;
        }
        if (stop_sig == 0)
            usleep((useconds_t)(delay * 1e6));
        if (stop_sig != 0) {
            /* code 0: a stop, not a failure (the runner exits 0) */
            err->code = 0;
            snprintf(err->msg, sizeof err->msg, "stopped (%s) before the "
                     "database answered", stop_sig == SIGINT ? "SIGINT" :
                     "SIGTERM");
            break;
        }
        waited += delay;
        delay = delay * 2 > JR_DB_RETRY_MAX ? JR_DB_RETRY_MAX : delay * 2;
    }
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGINT, &old_int, NULL);
    if (ok && stop_sig != 0) {  /* it came as the database answered */
        jr_db_close(db);
        ok = 0;
        err->code = 0;
        snprintf(err->msg, sizeof err->msg, "stopped (%s) at the start",
                 stop_sig == SIGINT ? "SIGINT" : "SIGTERM");
    }
    if (!ok) {
        free(db);               /* open_migrate closed it */
        return NULL;
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
    jr_dbopts_fill(&o, cfg, JR_DBOPTS_RUNNER);
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
