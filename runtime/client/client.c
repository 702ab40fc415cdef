/* client.c - libjobrunner, the producer library of jobrunner.h, over one
 * backend connection (backend.h): the handle and the calls that write
 * (push, retry, purge, cancel, pause, fire, workflows); the reads are
 * clientread.c's. Owns the connection and the message of the last call.
 * Uses config.c to read a config file, dbopts.h for the backend's
 * options, keyring.h to seal payloads. Never prints. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "config/config.h"
#include "base/err.h"
#include "base/flow.h"
#include "base/jsontext.h"
#include "base/keyring.h"
#include "client/jobrunner.h"
#include "client/client_int.h"
#include "db/dbopts.h"

#define DEFAULT_BACKEND "sqlite:jobrunner.db"

_Static_assert(JR_CLIENT_ATTEMPTS_KEPT == JR_ATTEMPTS_KEPT,
               "jobrunner.h says how many attempts a job keeps");

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
    case E_NOJOB:    return JR_CLIENT_ENOTFOUND;
    case E_TIMEOUT:  return JR_CLIENT_ETIMEOUT;
    case E_LOST:     return JR_CLIENT_ELOST;
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

int
jr_clientint_begin(jr_client *c)
{
    return begin(c);
}

int
jr_clientint_finish(jr_client *c, int rc)
{
    return finish(c, rc);
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

/* Connects c to url with conf's producer options (dbopts.h), each that
 * cfg sets taking its place. */
static int
connect_as(jr_client *c, const char *url, const jr_config *conf,
           const jr_client_config *cfg)
{
    jr_backend_opts o;

    jr_dbopts_fill(&o, conf, JR_DBOPTS_PRODUCER);
    o.sync_normal = o.sync_normal || cfg->sync_normal;
    if (cfg->busy_timeout > 0)
        o.busy_timeout = cfg->busy_timeout;
    if (cfg->schema != NULL)
        o.schema = cfg->schema;
    if (cfg->max_payload != 0)
        o.max_payload = cfg->max_payload;
    c->max_payload = o.max_payload;
    c->result_ttl = conf->result_ttl > 0 ? conf->result_ttl : 3600;
    o.must_exist = cfg->must_exist;
    return connect_db(c, url, &o);
}

int
jr_client_open(jr_client **cp, const char *target,
               const jr_client_config *cfg)
{
    static const jr_client_config none;
    jr_config conf;
    jr_client *c;
    int rc = 0, file = target == NULL || ends_with(target, ".lua");

    if (cp == NULL)
        return JR_CLIENT_EUSAGE;
    if ((*cp = c = calloc(1, sizeof *c)) == NULL)
        return JR_CLIENT_ENOMEM;
    if (cfg == NULL)
        cfg = &none;
    /* a config file (NULL: ./jobrunner.lua if present) gives the backend
     * and its settings; a URL, the defaults */
    jr_config_defaults(&conf);
    if (file)
        rc = jr_config_load(&conf, target, NULL, &c->err);
    if (rc == 0 && (cfg->key_file != NULL || conf.key_file != NULL) &&
        (c->keys = jr_keyring_load(cfg->key_file ? cfg->key_file :
                                   conf.key_file, &c->err)) == NULL)
        rc = -1;
    if (rc == 0)
        rc = connect_as(c, !file ? target : conf.backend ? conf.backend :
                        DEFAULT_BACKEND, &conf, cfg);
    jr_config_free(&conf);
    return finish(c, rc);
}

/* The backend's push of p[0..n), the payloads sealed first when c has
 * a key file. */
static int
db_push(jr_client *c, jr_push *p, int n, int64_t *ids)
{
    if (c->keys != NULL &&
        jr_keyring_seal_pushes(c->keys, p, n, &c->sealed, &c->err) < 0)
        return -1;
    return c->db.ops->push(c->db.b, p, n, ids, &c->err);
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
    p->key = o->key;
    p->cost = o->cost;
    p->result_ttl = o->result_ttl;
    p->expires_at = o->expires_at;
    p->expires_in = o->expires_in;
    p->deadline = o->deadline;
    p->traceparent = o->traceparent;
    p->tracestate = o->tracestate;
    return jr_push_check(p, c->max_payload, &c->err);
}

/* Sets p's unique options from u (may be NULL) and outcome. */
static void
make_unique(jr_push *p, const jr_client_unique *u, int *outcome)
{
    if (outcome != NULL)
        *outcome = JR_CLIENT_PUSHED;
    p->outcome = outcome;
    if (u == NULL)
        return;
    p->unique_key = u->key;
    p->unique_for = u->unique_for;
    p->on_conflict = u->on_conflict;    /* JR_CLIENT_* is JR_CONFLICT_* */
}

int
jr_client_push(jr_client *c, const char *name, const char *payload,
               const jr_client_opts *opts, int64_t *id)
{
    return jr_client_push_unique(c, name, payload, opts, NULL, id, NULL);
}

int
jr_client_push_unique(jr_client *c, const char *name, const char *payload,
                      const jr_client_opts *opts, const jr_client_unique *u,
                      int64_t *id, int *outcome)
{
    jr_push p;
    int64_t got;
    int out;

    if (c == NULL)
        return JR_CLIENT_EUSAGE;
    if (begin(c) < 0 || make_push(c, name, payload, opts, &p) < 0)
        return finish(c, -1);
    make_unique(&p, u, &out);
    if (jr_push_check(&p, c->max_payload, &c->err) < 0 ||
        db_push(c, &p, 1, &got) < 0)
        return finish(c, -1);
    if (id != NULL)
        *id = got;
    if (outcome != NULL)
        *outcome = out;
    return finish(c, 0);
}

/* Prefixes the message in err with "job i of n: ". */
static void
name_position(jr_err *err, size_t i, size_t n)
{
    jr_err_prefix(err, "job %zu of %zu", i + 1, n);
}

int
jr_client_push_many(jr_client *c, const jr_client_job *jobs, size_t n,
                    int64_t *ids)
{
    return jr_client_push_many_unique(c, jobs, NULL, n, ids, NULL);
}

/* Pushes jobs[0..n) in one transaction, each with its unique options
 * (uniques, outcomes) or its sequence (seqs) when given. */
static int
push_many(jr_client *c, const jr_client_job *jobs,
          const jr_client_unique *uniques, int *outcomes,
          const jr_client_seq *seqs, size_t n, int64_t *ids)
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
    for (i = 0; i < n; i++) {
        rc = make_push(c, jobs[i].name, jobs[i].payload, &jobs[i].opts,
                       &p[i]);
        if (rc == 0 && seqs != NULL && seqs[i].key != NULL) {
            p[i].sequence = seqs[i].key;
            p[i].seq_fail = seqs[i].on_failure;
            p[i].on_conflict = seqs[i].on_conflict;
            p[i].outcome = seqs[i].outcome;
            if (p[i].outcome != NULL)
                *p[i].outcome = JR_CLIENT_PUSHED;
        }
        if (rc == 0 && seqs == NULL)
            make_unique(&p[i], uniques ? &uniques[i] : NULL,
                        outcomes ? &outcomes[i] : NULL);
        if (rc == 0)
            rc = jr_push_check(&p[i], c->max_payload, &c->err);
        if (rc < 0) {
            name_position(&c->err, i, n);
            free(p);
            return finish(c, -1);
        }
    }
    rc = db_push(c, p, (int)n, ids);
    free(p);
    return finish(c, rc);
}

int
jr_client_push_many_unique(jr_client *c, const jr_client_job *jobs,
                           const jr_client_unique *uniques, size_t n,
                           int64_t *ids, int *outcomes)
{
    return push_many(c, jobs, uniques, outcomes, NULL, n, ids);
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

/* jr_client_cancel hands the backend's outcomes through as they are. */
_Static_assert((int)JR_CLIENT_CANCELLED == (int)JR_CANCEL_DONE &&
               (int)JR_CLIENT_CANCEL_REQUESTED == (int)JR_CANCEL_REQUESTED &&
               (int)JR_CLIENT_CANCEL_FINISHED == (int)JR_CANCEL_FINISHED &&
               (int)JR_CLIENT_CANCEL_NOTFOUND == (int)JR_CANCEL_NOTFOUND,
               "cancel outcomes of jobrunner.h and backend.h differ");

int
jr_client_cancel(jr_client *c, const int64_t *ids, size_t n, int *outcomes)
{
    int *out;
    int rc;

    if (c == NULL)
        return JR_CLIENT_EUSAGE;
    if (begin(c) < 0)
        return finish(c, -1);
    if (n == 0)
        return finish(c, 0);
    if (ids == NULL || n > INT_MAX)
        return finish(c, jr_fail(&c->err, JR_EUSAGE, "cancel: %s",
                                 ids ? "too many ids" : "ids is NULL"));
    if ((out = outcomes) == NULL && (out = calloc(n, sizeof *out)) == NULL)
        return finish(c, jr_fail(&c->err, JR_ENOMEM, "cancel: out of "
                                 "memory for %zu ids", n));
    rc = c->db.ops->cancel(c->db.b, ids, (int)n, out, &c->err);
    if (out != outcomes)
        free(out);
    return finish(c, rc);
}

/* jobrunner.h: a signal to a job's wait_signal. */
int
jr_client_signal(jr_client *c, int64_t id, const char *name,
                 const char *payload, int *woken)
{
    char state[16];
    int rc;

    if (c == NULL)
        return JR_CLIENT_EUSAGE;
    if (begin(c) < 0)
        return finish(c, -1);
    if (name == NULL)
        return finish(c, jr_fail(&c->err, JR_EUSAGE, "signal: name is "
                                 "NULL"));
    if (jr_signal_check(name, payload, c->max_payload, &c->err) < 0)
        return finish(c, -1);
    if (c->keys != NULL && payload != NULL) {
        jr_buf_reset(&c->sealed);
        if (jr_keyring_seal(c->keys, payload, strlen(payload), &c->sealed,
                            &c->err) < 0 || jr_buf_put(&c->sealed, "", 1) < 0)
            return finish(c, -1);
        payload = c->sealed.p;
    }
    rc = c->db.ops->signal(c->db.b, id, name, payload, state, sizeof state,
                           &c->err);
    if (rc < 0 && c->err.code == JR_ENOTFOUND)
        c->err.code = E_NOJOB;
    if (rc >= 0 && woken != NULL)
        *woken = rc;
    return finish(c, rc);
}

/* Pauses (pause 1) or resumes queue. */
static int
set_paused(jr_client *c, const char *queue, int pause)
{
    const char *what = pause ? "queue_pause" : "queue_resume";

    if (c == NULL)
        return JR_CLIENT_EUSAGE;
    if (begin(c) < 0)
        return finish(c, -1);
    if (queue == NULL)
        return finish(c, jr_fail(&c->err, JR_EUSAGE, "%s: queue is NULL",
                                 what));
    if (jr_name_check(queue, "queue name", &c->err) < 0)
        return finish(c, -1);
    return finish(c, pause ? c->db.ops->pause(c->db.b, queue, &c->err)
                  : c->db.ops->resume(c->db.b, queue, &c->err));
}

int
jr_client_queue_pause(jr_client *c, const char *queue)
{
    return set_paused(c, queue, 1);
}

int
jr_client_queue_resume(jr_client *c, const char *queue)
{
    return set_paused(c, queue, 0);
}

/* Pauses, resumes or fires (what, backend.h's JR_SCHED_*) schedule name. */
static int
schedule_ctl(jr_client *c, const char *name, int what, double *at)
{
    double now = 0;

    if (c == NULL)
        return JR_CLIENT_EUSAGE;
    if (begin(c) < 0)
        return finish(c, -1);
    if (name == NULL)
        return finish(c, jr_fail(&c->err, JR_EUSAGE, "schedule: name is "
                                 "NULL"));
    if (at == NULL)
        at = &now;
    if (!isfinite(*at) || *at < 0 || *at > JR_TIME_MAX)
        return finish(c, jr_fail(&c->err, JR_EINPUT, "schedule '%s': fire "
                                 "instant %g is not epoch seconds", name,
                                 *at));
    return finish(c, c->db.ops->sched_ctl(c->db.b, name, what, at,
                                          &c->err));
}

int
jr_client_schedule_pause(jr_client *c, const char *name)
{
    return schedule_ctl(c, name, JR_SCHED_PAUSE, NULL);
}

int
jr_client_schedule_resume(jr_client *c, const char *name)
{
    return schedule_ctl(c, name, JR_SCHED_RESUME, NULL);
}

int
jr_client_schedule_fire(jr_client *c, const char *name, double *at)
{
    return schedule_ctl(c, name, JR_SCHED_FIRE, at);
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
    jr_clientint_wait_free(c);
    jr_db_close(&c->db);
    jr_keyring_free(c->keys);
    jr_buf_free(&c->sealed);
    free(c);
}

/* ---- workflows (docs/workflows.md) ---- */

int
jr_client_push_after(jr_client *c, const char *name, const char *payload,
                     const jr_client_opts *opts, const jr_client_after *a,
                     int64_t *id)
{
    jr_push p;
    int64_t got;

    if (c == NULL)
        return JR_CLIENT_EUSAGE;
    if (begin(c) < 0 || make_push(c, name, payload, opts, &p) < 0)
        return finish(c, -1);
    if (a != NULL) {
        if (a->nafter > JR_AFTER_MAX)
            return finish(c, jr_fail(&c->err, JR_EINPUT, "job '%s': %zu "
                                     "parents (after: at most %d)", name,
                                     a->nafter, JR_AFTER_MAX));
        p.after = a->after;
        p.nafter = (int)a->nafter;
        p.on_parent_failure = a->on_parent_failure;
        p.batch = a->batch;
    }
    if (jr_push_check(&p, c->max_payload, &c->err) < 0 ||
        db_push(c, &p, 1, &got) < 0)
        return finish(c, -1);
    if (id != NULL)
        *id = got;
    return finish(c, 0);
}

/* ---- sequences (docs/queues.md) ---- */

int
jr_client_push_seq(jr_client *c, const char *name, const char *payload,
                   const jr_client_opts *opts, const jr_client_seq *s,
                   int64_t *id)
{
    jr_push p;
    int64_t got;

    if (c == NULL)
        return JR_CLIENT_EUSAGE;
    if (begin(c) < 0 || make_push(c, name, payload, opts, &p) < 0)
        return finish(c, -1);
    if (s != NULL && s->key != NULL) {
        p.sequence = s->key;
        p.seq_fail = s->on_failure;     /* JR_CLIENT_SEQ_* is JR_SEQ_* */
        p.on_conflict = s->on_conflict; /* JR_CLIENT_* is JR_CONFLICT_* */
        p.outcome = s->outcome;         /* JR_CLIENT_* is JR_PUSH_* */
        if (p.outcome != NULL)
            *p.outcome = JR_CLIENT_PUSHED;
    }
    if (jr_push_check(&p, c->max_payload, &c->err) < 0 ||
        db_push(c, &p, 1, &got) < 0)
        return finish(c, -1);
    if (id != NULL)
        *id = got;
    return finish(c, 0);
}

int
jr_client_push_many_seq(jr_client *c, const jr_client_job *jobs,
                        const jr_client_seq *seqs, size_t n, int64_t *ids)
{
    return push_many(c, jobs, NULL, NULL, seqs, n, ids);
}

int
jr_client_push_flow(jr_client *c, const char *json, size_t len,
                    jr_client_flow_fn fn, void *arg, int64_t *batch)
{
    return jr_client_push_flow_trace(c, json, len, NULL, NULL, fn, arg,
                                     batch);
}

int
jr_client_push_flow_trace(jr_client *c, const char *json, size_t len,
                          const char *traceparent, const char *tracestate,
                          jr_client_flow_fn fn, void *arg, int64_t *batch)
{
    jr_flow f;
    int64_t *ids;
    int i, rc;

    if (c == NULL || json == NULL)
        return JR_CLIENT_EUSAGE;
    if (begin(c) < 0 || jr_flow_parse(&f, json, len, &c->err) < 0)
        return finish(c, -1);
    for (i = 0; traceparent != NULL && i < f.n; i++)
        if (f.jobs[i].traceparent == NULL) {
            f.jobs[i].traceparent = traceparent;
            f.jobs[i].tracestate = tracestate;
        }
    for (i = 0; i < f.n; i++)
        if (jr_push_check(&f.jobs[i], c->max_payload, &c->err) < 0) {
            jr_err_prefix(&c->err, "flow: job '%s'", f.refs[i]);
            jr_flow_free(&f);
            return finish(c, -1);
        }
    if ((ids = calloc((size_t)f.n, sizeof *ids)) == NULL) {
        jr_flow_free(&f);
        return finish(c, jr_fail(&c->err, JR_ENOMEM, "out of memory"));
    }
    rc = db_push(c, f.jobs, f.n, ids);
    for (i = 0; rc == 0 && fn != NULL && i < f.n; i++)
        if (fn(f.refs[i], ids[i], arg) != 0)
            break;
    if (rc == 0 && batch != NULL)
        *batch = f.has_batch ? f.batch.id : 0;
    free(ids);
    jr_flow_free(&f);
    return finish(c, rc);
}

int
jr_client_rerun(jr_client *c, int64_t id, const char *from_step,
                const char *payload)
{
    char why[200];

    if (c == NULL)
        return JR_CLIENT_EUSAGE;
    if (begin(c) < 0)
        return finish(c, -1);
    if (payload != NULL &&
        jr_jsontext_check(payload, strlen(payload), why, sizeof why) < 0)
        return finish(c, jr_fail(&c->err, JR_EINPUT, "job %lld: invalid "
                                 "JSON payload: %s", (long long)id, why));
    if (payload != NULL && c->max_payload > 0 &&
        strlen(payload) > c->max_payload)
        return finish(c, jr_fail(&c->err, JR_EINPUT, "job %lld: payload of "
                                 "%zu bytes is over max_payload (%zu)",
                                 (long long)id, strlen(payload),
                                 c->max_payload));
    if (payload != NULL && c->keys != NULL) {
        jr_buf_reset(&c->sealed);
        if (jr_keyring_seal(c->keys, payload, strlen(payload), &c->sealed,
                            &c->err) < 0 || jr_buf_put(&c->sealed, "", 1) < 0)
            return finish(c, -1);
        payload = c->sealed.p;
    }
    if (c->db.ops->rerun(c->db.b, id, from_step, payload, &c->err) < 0 &&
        c->err.code == JR_ENOTFOUND)
        c->err.code = E_NOJOB;
    return finish(c, c->err.code != JR_OK ? -1 : 0);
}
