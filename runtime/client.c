/* client.c - libjobrunner, the producer library of jobrunner.h, over one
 * backend connection (backend.h). Owns the connection and the message of
 * the last call. Uses config.c to read a config file. Never prints. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "config.h"
#include "err.h"
#include "jobrunner.h"

#define DEFAULT_BACKEND "sqlite:jobrunner.db"
#define DEFAULT_MAX_PAYLOAD (1u << 20)
#define DEFAULT_BUSY_TIMEOUT 5.0

struct jr_client {
    jr_db   db;                 /* ops NULL when open failed */
    jr_err  err;                /* the last call's status and message */
    size_t  max_payload;        /* bytes; checked before the database */
};

/* The public status for an internal error code. */
static int
status_of(int code)
{
    switch (code) {
    case JR_OK:      return JR_CLIENT_OK;
    case JR_EUSAGE:  return JR_CLIENT_EUSAGE;
    case JR_ECONFIG:
    case JR_ELUA:    return JR_CLIENT_ECONFIG;
    case JR_EINPUT:  return JR_CLIENT_EINPUT;
    case JR_ENOMEM:  return JR_CLIENT_ENOMEM;
    case JR_ENOTFOUND: return JR_CLIENT_ENODB;
    default:         return JR_CLIENT_EDB;
    }
}

/* Ends a call: rc < 0 keeps c->err (a failure without a code counts as a
 * database one), else clears it. Returns the public status. */
static int
finish(jr_client *c, int rc)
{
    if (rc >= 0) {
        jr_err_clear(&c->err);
        return JR_CLIENT_OK;
    }
    if (c->err.code == JR_OK)
        c->err.code = JR_EDB;
    return status_of(c->err.code);
}

/* Starts a call on c: checks the handle is usable. */
static int
begin(jr_client *c)
{
    if (c->db.ops == NULL)
        return jr_fail(&c->err, JR_EUSAGE, "client is not connected "
                       "(jr_client_open failed or it was closed)");
    jr_err_clear(&c->err);
    return 0;
}

static int
ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Opens the database named by url with o, then migrates. */
static int
connect_db(jr_client *c, const char *url, const jr_backend_opts *o)
{
    if (jr_db_open(&c->db, url, o, &c->err) < 0)
        return -1;
    if (c->db.ops->migrate(c->db.b, &c->err) < 0) {
        jr_db_close(&c->db);
        return -1;
    }
    return 0;
}

/* Reads file (NULL: ./jobrunner.lua if present) for the backend settings,
 * lets cfg override them, and connects. */
static int
open_config(jr_client *c, const char *file, const jr_client_config *cfg)
{
    jr_backend_opts o = {0};
    jr_config conf;
    int rc;

    jr_config_defaults(&conf);
    if (jr_config_load(&conf, file, NULL, &c->err) < 0) {
        jr_config_free(&conf);
        return -1;
    }
    o.sync_normal = conf.sync_normal || cfg->sync_normal;
    o.busy_timeout = cfg->busy_timeout > 0 ? cfg->busy_timeout :
                     conf.busy_timeout;
    o.schema = cfg->schema ? cfg->schema : conf.schema;
    c->max_payload = cfg->max_payload ? cfg->max_payload : conf.max_payload;
    o.max_payload = c->max_payload;
    o.must_exist = cfg->must_exist;
    rc = connect_db(c, conf.backend ? conf.backend : DEFAULT_BACKEND, &o);
    jr_config_free(&conf);
    return rc;
}

int
jr_client_open(jr_client **cp, const char *target,
               const jr_client_config *cfg)
{
    static const jr_client_config none;
    jr_backend_opts o = {0};
    jr_client *c;
    int rc;

    if (cp == NULL)
        return JR_CLIENT_EUSAGE;
    if ((*cp = c = calloc(1, sizeof *c)) == NULL)
        return JR_CLIENT_ENOMEM;
    if (cfg == NULL)
        cfg = &none;
    if (target == NULL || ends_with(target, ".lua"))
        return finish(c, open_config(c, target, cfg));
    c->max_payload = cfg->max_payload ? cfg->max_payload :
                     DEFAULT_MAX_PAYLOAD;
    o.busy_timeout = cfg->busy_timeout > 0 ? cfg->busy_timeout :
                     DEFAULT_BUSY_TIMEOUT;
    o.schema = cfg->schema;
    o.max_payload = c->max_payload;
    o.sync_normal = cfg->sync_normal;
    o.must_exist = cfg->must_exist;
    rc = connect_db(c, target, &o);
    return finish(c, rc);
}

/* Fills p from one job's arguments and checks it, so that a bad job is
 * refused before any is inserted. */
static int
make_push(jr_client *c, const char *name, const char *payload,
          const jr_client_opts *o, jr_push *p)
{
    static const jr_client_opts defaults = JR_CLIENT_OPTS_INIT;

    if (o == NULL)
        o = &defaults;
    memset(p, 0, sizeof *p);
    p->name = name;
    p->payload = payload;
    p->queue = o->queue;
    p->priority = o->priority;
    p->max_retries = o->max_retries;
    p->run_at = o->run_at;
    p->run_in = o->run_in;
    return jr_push_check(p, c->max_payload, &c->err);
}

int
jr_client_push(jr_client *c, const char *name, const char *payload,
               const jr_client_opts *opts, int64_t *id)
{
    jr_push p;
    int64_t got;

    if (c == NULL)
        return JR_CLIENT_EUSAGE;
    if (begin(c) < 0 || make_push(c, name, payload, opts, &p) < 0 ||
        c->db.ops->push(c->db.b, &p, 1, &got, &c->err) < 0)
        return finish(c, -1);
    if (id != NULL)
        *id = got;
    return finish(c, 0);
}

/* Prefixes the message in err with "job i of n: ". */
static void
name_position(jr_err *err, size_t i, size_t n)
{
    char msg[sizeof err->msg];

    snprintf(msg, sizeof msg, "%s", err->msg);
    snprintf(err->msg, sizeof err->msg, "job %zu of %zu: %.460s", i + 1, n,
             msg);
}

int
jr_client_push_many(jr_client *c, const jr_client_job *jobs, size_t n,
                    int64_t *ids)
{
    jr_push *p;
    size_t i;
    int rc;

    if (c == NULL)
        return JR_CLIENT_EUSAGE;
    if (begin(c) < 0)
        return finish(c, -1);
    if (n == 0)
        return finish(c, 0);
    if (jobs == NULL || n > INT_MAX)
        return finish(c, jr_fail(&c->err, JR_EUSAGE, "push_many: %s",
                                 jobs ? "too many jobs" : "jobs is NULL"));
    if ((p = calloc(n, sizeof *p)) == NULL)
        return finish(c, jr_fail(&c->err, JR_ENOMEM, "push_many: out of "
                                 "memory for %zu jobs", n));
    for (i = 0; i < n; i++)
        if (make_push(c, jobs[i].name, jobs[i].payload, &jobs[i].opts,
                      &p[i]) < 0) {
            name_position(&c->err, i, n);
            free(p);
            return finish(c, -1);
        }
    rc = c->db.ops->push(c->db.b, p, (int)n, ids, &c->err);
    free(p);
    return finish(c, rc);
}

typedef struct stats_acc {
    jr_client_counts  *total;
    jr_client_stats_fn fn;
    void              *arg;
    int                stopped;     /* fn asked to stop */
} stats_acc;

static int
stats_row(const jr_stat_row *row, void *arg)
{
    stats_acc *a = arg;
    jr_client_counts n;

    n.ready = row->ready;
    n.scheduled = row->scheduled;
    n.queued = row->ready + row->scheduled;
    n.running = row->running;
    n.dead = row->dead;
    a->total->ready += n.ready;
    a->total->scheduled += n.scheduled;
    a->total->queued += n.queued;
    a->total->running += n.running;
    a->total->dead += n.dead;
    if (a->fn && !a->stopped && a->fn(row->name, &n, a->arg) != 0)
        a->stopped = 1;
    return 0;               /* the totals need every row */
}

int
jr_client_stats(jr_client *c, jr_client_counts *total,
                jr_client_stats_fn fn, void *arg)
{
    jr_client_counts sum;
    stats_acc a;

    if (c == NULL)
        return JR_CLIENT_EUSAGE;
    if (begin(c) < 0)
        return finish(c, -1);
    memset(&sum, 0, sizeof sum);
    a.total = &sum;
    a.fn = fn;
    a.arg = arg;
    a.stopped = 0;
    if (c->db.ops->stats(c->db.b, stats_row, &a, &c->err) < 0)
        return finish(c, -1);
    if (total != NULL)
        *total = sum;
    return finish(c, 0);
}

typedef struct dead_acc {
    jr_client_dead_fn fn;
    void             *arg;
} dead_acc;

static int
dead_row(const jr_dead_row *row, void *arg)
{
    dead_acc *a = arg;
    jr_client_dead d;

    d.id = row->id;
    d.name = row->name;
    d.queue = row->queue;
    d.attempts = row->attempts;
    d.last_error = row->last_error;
    d.generation = row->generation;
    d.died_at = row->died_at;
    d.created_at = row->created_at;
    return a->fn(&d, a->arg);
}

int
jr_client_dead_list(jr_client *c, int limit, jr_client_dead_fn fn,
                    void *arg)
{
    dead_acc a;

    if (c == NULL)
        return JR_CLIENT_EUSAGE;
    if (begin(c) < 0)
        return finish(c, -1);
    if (fn == NULL || limit < 0)
        return finish(c, jr_fail(&c->err, JR_EUSAGE, "dead_list: %s",
                                 fn ? "negative limit" : "fn is NULL"));
    a.fn = fn;
    a.arg = arg;
    return finish(c, c->db.ops->dead_list(c->db.b, limit, dead_row, &a,
                                          &c->err));
}

int
jr_client_dead_retry(jr_client *c, const int64_t *ids, size_t n,
                     long *count)
{
    int rc;

    if (c == NULL)
        return JR_CLIENT_EUSAGE;
    if (begin(c) < 0)
        return finish(c, -1);
    if (ids != NULL && n > INT_MAX)
        return finish(c, jr_fail(&c->err, JR_EUSAGE, "dead_retry: too "
                                 "many ids"));
    if (ids != NULL && n == 0)
        rc = 0;
    else
        rc = c->db.ops->dead_retry(c->db.b, ids, ids ? (int)n : -1,
                                   &c->err);
    if (rc >= 0 && count != NULL)
        *count = rc;
    return finish(c, rc);
}

int
jr_client_dead_purge(jr_client *c, double older_than, long *count)
{
    int rc;

    if (c == NULL)
        return JR_CLIENT_EUSAGE;
    if (begin(c) < 0)
        return finish(c, -1);
    if (!isfinite(older_than) || older_than < 0)
        return finish(c, jr_fail(&c->err, JR_EUSAGE, "dead_purge: "
                                 "older_than %g is not a duration",
                                 older_than));
    rc = c->db.ops->dead_purge(c->db.b, older_than, &c->err);
    if (rc >= 0 && count != NULL)
        *count = rc;
    return finish(c, rc);
}

int
jr_client_errcode(const jr_client *c)
{
    return c == NULL ? JR_CLIENT_ENOMEM : status_of(c->err.code);
}

const char *
jr_client_errmsg(const jr_client *c)
{
    return c == NULL ? "out of memory" : c->err.msg;
}

void
jr_client_close(jr_client *c)
{
    if (c == NULL)
        return;
    jr_db_close(&c->db);
    free(c);
}
